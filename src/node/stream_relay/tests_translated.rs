//! A translated stream relayed as Codex gets it from a Claude account: the mock's own Messages
//! answer (thinking, then text) through `open` and `Relay` with the Messages->Responses
//! translator and the sealer, the upstream's bytes split and gathered at many places.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures_util::Stream;
use serde_json::Value;

use super::StreamStart;
use crate::upstream::body::{BodyError, UpstreamBody};
use crate::wire::item_seal::{ItemSealer, Items, SealKey};
use crate::wire::sse::SseParser;
use crate::wire::stream_watch::StreamFormat;
use crate::wire::translate::Direction;

/// Upstream reads: each chunk, and whether it arrives late (not ready when the relay looks
/// for a burst: it then writes what it gathered before it).
struct Reads {
    chunks: VecDeque<(Bytes, bool)>,
    polls: usize,
}

/// How many polls a late chunk is not ready for: more than the relay's look for a burst.
const LATE_POLLS: usize = 4;

impl Stream for Reads {
    type Item = Result<Bytes, BodyError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let late = self.chunks.front().is_some_and(|(_, late)| *late);
        if late && self.polls < LATE_POLLS {
            self.polls += 1;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        self.polls = 0;
        Poll::Ready(self.chunks.pop_front().map(|(chunk, _)| Ok(chunk)))
    }
}

/// The mock's streamed answer to a Messages request with thinking on and `max_tokens`
/// (Codex's request as the router translates it), its bytes as the mock sends them.
async fn mock_answer(max_tokens: u64) -> Bytes {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let server = tokio::spawn(quotaroute_mock::serve(
        listener,
        quotaroute_mock::MockUpstream::new(),
    ));
    let body = serde_json::json!({
        "model": "claude-sonnet-4-5", "max_tokens": max_tokens, "stream": true,
        "thinking": {"type": "enabled", "budget_tokens": 1024},
        "messages": [{"role": "user", "content": "say pong"}],
    });
    let answer = reqwest::Client::new()
        .post(format!("http://{address}/v1/messages"))
        .header("x-api-key", "sk-ant-relay-test")
        .header("anthropic-version", "2023-06-01")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert!(answer.status().is_success(), "{}", answer.status());
    let bytes = answer.bytes().await.unwrap();
    server.abort();
    bytes
}

/// What Codex reads when the upstream's bytes come as `reads`.
async fn relayed(reads: Vec<(Bytes, bool)>) -> String {
    let body = UpstreamBody::Decoded(Box::pin(Reads {
        chunks: reads.into(),
        polls: 0,
    }));
    let translator = super::tests::translator(Direction::RESPONSES_TO_MESSAGES, false);
    let (start, far) =
        super::tests::opened_translated(body, StreamFormat::Anthropic, Some(translator)).await;
    let StreamStart::Committed(mut stream) = start else {
        panic!("the stream did not commit");
    };
    stream.sealer = Some(ItemSealer::new(
        SealKey::from_secret(b"relay test seal secret"),
        Arc::from("codex"),
        Arc::from("an-1"),
        Items::Translated,
    ));
    super::tests::relayed_to_end(stream, far).await
}

/// The client's events (type and data), each sealed item's ciphertext blanked (it differs
/// from seal to seal).
fn events(client: &str) -> Vec<(String, Value)> {
    let mut parser = SseParser::new();
    let mut events = Vec::new();
    parser.feed(client.as_bytes(), &mut events).unwrap();
    events
        .into_iter()
        .map(|event| {
            let mut data: Value = serde_json::from_str(&event.data)
                .unwrap_or_else(|e| panic!("{e}: an unreadable event: {}", event.data));
            blank_ciphertexts(&mut data);
            (event.event.unwrap_or_default().into_owned(), data)
        })
        .collect()
}

fn blank_ciphertexts(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for (key, member) in map.iter_mut() {
                if key == "encrypted_content" {
                    assert!(member.as_str().is_some_and(|s| !s.is_empty()), "{member}");
                    *member = Value::Null;
                } else {
                    blank_ciphertexts(member);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(blank_ciphertexts),
        _ => {}
    }
}

/// The client's bytes with each sealed item's ciphertext (random from seal to seal) blanked,
/// without parsing: for comparing many relays with one parsed by [`events`].
fn blanked(client: &str) -> String {
    const MEMBER: &str = "\"encrypted_content\":\"";
    let mut out = String::with_capacity(client.len());
    let mut rest = client;
    while let Some(at) = rest.find(MEMBER) {
        out.push_str(&rest[..at + MEMBER.len()]);
        rest = &rest[at + MEMBER.len()..];
        let end = rest.find('"').unwrap();
        assert!(end > 0, "an empty sealed item");
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// Codex's view: the message item is done, with the whole text, before the response completes.
fn assert_answer_whole(events: &[(String, Value)], text: &str) {
    let done = events.iter().position(|(kind, data)| {
        kind == "response.output_item.done"
            && data["item"]["type"] == "message"
            && data["item"]["content"][0]["text"] == text
    });
    let completed = events
        .iter()
        .position(|(kind, _)| kind == "response.completed");
    assert!(
        matches!((done, completed), (Some(d), Some(c)) if d < c),
        "message done at {done:?}, completed at {completed:?}"
    );
}

/// The answer's frames (events) as separate reads, every other one late.
fn frame_reads(answer: &Bytes) -> Vec<(Bytes, bool)> {
    let mut reads = Vec::new();
    let mut from = 0;
    for (i, at) in memchr::memmem::find_iter(answer, b"\n\n").enumerate() {
        reads.push((answer.slice(from..at + 2), i % 2 == 1));
        from = at + 2;
    }
    if from < answer.len() {
        reads.push((answer.slice(from..), false));
    }
    reads
}

/// Codex on a Claude account (its encrypted reasoning sealed): however the upstream's bytes
/// fall into reads — split at every byte from `message_start`'s end to the first text delta's
/// end (the commit, the thinking block's end and the text's start) and over the last events
/// (the text's end, the usage, the stop), every fifth byte elsewhere, the rest arriving at once
/// or late; or
/// one read per event — the client gets the same events, the message item done with its whole
/// text before `response.completed`.
#[tokio::test]
async fn a_translated_answer_is_the_same_at_every_split_of_the_upstream_reads() {
    let answer = mock_answer(12).await;
    let client = relayed(vec![(answer.clone(), false)]).await;
    assert_answer_whole(&events(&client), &quotaroute_mock::reply_text(12));
    let whole = blanked(&client);
    let first_text = memchr::memmem::find(&answer, b"text_delta").unwrap();
    let first_text_end = first_text + memchr::memmem::find(&answer[first_text..], b"\n\n").unwrap();
    let started = memchr::memmem::find(&answer, b"\n\n").unwrap();
    let closing = answer.len() - 300;
    let splits = (1..started)
        .step_by(5)
        .chain(started..first_text_end + 2)
        .chain((first_text_end + 2..closing).step_by(5))
        .chain(closing..answer.len());
    for split in splits {
        // Late on every other byte: each boundary is met both ways by its neighbours.
        let late = split % 2 == 0;
        let reads = vec![
            (answer.slice(..split), false),
            (answer.slice(split..), late),
        ];
        let got = blanked(&relayed(reads).await);
        assert_eq!(got, whole, "split at {split}, late {late}");
    }
    let got = blanked(&relayed(frame_reads(&answer)).await);
    assert_eq!(got, whole, "one read per event");
}

/// The same for the longest answer the mock gives (4096 text deltas, several coalesced
/// client writes): split near its end and one read per event.
#[tokio::test]
async fn a_long_translated_answer_ends_with_its_whole_message() {
    let answer = mock_answer(4096).await;
    let whole = events(&relayed(vec![(answer.clone(), false)]).await);
    assert_answer_whole(&whole, &quotaroute_mock::reply_text(4096));
    let last_delta = memchr::memmem::rfind(&answer, b"text_delta").unwrap();
    for split in [64 * 1024, last_delta, last_delta + 100, answer.len() - 40] {
        let reads = vec![
            (answer.slice(..split), false),
            (answer.slice(split..), true),
        ];
        let got = events(&relayed(reads).await);
        assert_eq!(got, whole, "split at {split}");
    }
    let got = events(&relayed(frame_reads(&answer)).await);
    assert_eq!(got, whole, "one read per event");
}

/// A translated Responses stream's `response.created`, read once by the translator, announces
/// the id `created_response_id` reads of it; whatever its one read declines is read by
/// `created_response_id` itself, as before.
#[test]
fn the_one_read_of_a_created_event_gives_the_id_created_response_id_reads() {
    use crate::wire::sse::SseEvent;
    use crate::wire::translate::StreamTranslator;
    let response = r#""object":"response","status":"in_progress","instructions":"echo \"é\"","tools":[],"output":[],"usage":null"#;
    let datas = [
        format!(
            r#"{{"type":"response.created","sequence_number":0,"response":{{"id":"resp_1",{response}}}}}"#
        ),
        format!(r#"{{"response":{{{response},"id":"resp_\u00e9"}},"type":"response.created"}}"#),
        format!(r#"{{"type":"response.created","response":{{{response}}}}}"#),
        format!(r#"{{"type":"response.created","response":{{"id":null,{response}}}}}"#),
        format!(r#"{{"type":"response.created","response":{{"id":7,{response}}}}}"#),
        format!(r#"{{"type":"response.created","response":{{"id":"a","id":"b",{response}}}}}"#),
        r#"{"type":"response.created","response":{"id":"a"},"response":{"id":"b"}}"#.to_owned(),
        r#"{"type":"response.created","type":"response.created","response":{"id":"r"}}"#.to_owned(),
        r#"{"type":"response.created","response":{"id":"r","x":1e400}}"#.to_owned(),
        r#"{"type":"response.created","response":null}"#.to_owned(),
        r#"{"type":"response.created"}"#.to_owned(),
        r#"{"type":"response.in_progress","response":{"id":"named created"}}"#.to_owned(),
        r#"{"type":"response.created","response":{"id":"cut""#.to_owned(),
    ];
    let mut read_once = 0;
    for data in &datas {
        for name in [Some("response.created"), Some("response.in_progress")] {
            let event = SseEvent {
                event: name.map(|name| name.to_owned().into()),
                data: data.clone(),
                raw: Bytes::new(),
            };
            // The events the opening asks it of.
            if !super::open::names_created(&event) {
                continue;
            }
            let mut translator =
                StreamTranslator::new(Direction::CHAT_TO_RESPONSES, true, 1, Default::default());
            let mut out = bytes::BytesMut::new();
            if let Some((_, id)) = translator.responses_created(&event, &mut out) {
                read_once += 1;
                assert_eq!(id, super::open::created_response_id(&event), "{data}");
            }
        }
    }
    assert!(read_once >= 10, "{read_once}");
}
