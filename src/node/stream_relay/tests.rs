//! The relay end to end on in-memory bodies: commits, and the try's keys masked wherever reads split.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use proptest::prelude::*;
use tokio::time::Instant;

use super::open::CommittedStream;
use super::relay::Relay;
use super::{open, StreamCharge, StreamStart, StreamTiming};
use crate::config::Secret;
use crate::credentials::Echoes;
use crate::upstream::body::UpstreamBody;
use crate::wire::stream_watch::StreamFormat;

const KEY: &str = "upstream-key-Zq81xKp0";

fn echoes() -> Echoes {
    Echoes {
        current: None,
        previous: Some(Arc::new(Secret::new(KEY))),
    }
}

/// What the client reads when the upstream sends `chunks` (already-begun stream).
async fn relayed(chunks: Vec<Bytes>, format: StreamFormat) -> String {
    let body = UpstreamBody::Decoded(Box::pin(futures_util::stream::iter(
        chunks.into_iter().map(Ok),
    )));
    let far = Instant::now() + Duration::from_secs(60);
    let timing = StreamTiming {
        first_event_by: far,
        idle: Duration::from_secs(60),
        deadline: far,
    };
    let StreamStart::Committed(stream) = open(body, format, false, timing, echoes(), None).await
    else {
        panic!("the stream did not commit");
    };
    relayed_to_end(stream, far).await
}

/// What the client reads of a committed stream, relayed to its end by `deadline`.
pub(super) async fn relayed_to_end(stream: Box<CommittedStream>, deadline: Instant) -> String {
    let mut relay = Relay {
        input_tokens: None,
        client_usage: None,
        ended: stream.finished,
        stream: *stream,
        decision: None,
        deadline,
        failure: None,
        pending: None,
        charge: StreamCharge::none(),
        precharged: None,
        draining: false,
    };
    let mut out = Vec::new();
    while let Some(chunk) = relay.next_chunk().await {
        out.extend_from_slice(&chunk);
    }
    String::from_utf8(out).unwrap()
}

/// A Responses stream with no delta at all (Codex's inline compaction) that ends with
/// `response.completed`: a complete answer, committed when the body ends, whatever the reads.
#[tokio::test]
async fn s3_a_responses_stream_without_deltas_that_completes_commits() {
    let events = [
        "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"resp_1\"}}\n\n",
        "event: response.output_item.done\ndata: {\"type\":\"response.output_item.done\",\"item\":{\"type\":\"compaction\",\"encrypted_content\":\"gAAAAAx\"}}\n\n",
        "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"resp_1\",\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\n",
    ];
    let whole = events.concat();
    for chunks in [
        vec![whole.clone()],
        events.iter().map(|e| e.to_string()).collect(),
    ] {
        let out = relayed(
            chunks.into_iter().map(Bytes::from).collect(),
            StreamFormat::OpenAiResponses,
        )
        .await;
        assert_eq!(out, whole);
    }
    // Without its `response.completed` it is no answer: it fails over.
    let body = UpstreamBody::Decoded(Box::pin(futures_util::stream::iter([Ok(Bytes::from(
        events[..2].concat(),
    ))])));
    let far = Instant::now() + Duration::from_secs(60);
    let timing = StreamTiming {
        first_event_by: far,
        idle: Duration::from_secs(60),
        deadline: far,
    };
    let start = open(
        body,
        StreamFormat::OpenAiResponses,
        false,
        timing,
        echoes(),
        None,
    )
    .await;
    assert!(matches!(start, StreamStart::Failed { .. }));
}

/// The content that commits the stream (its first read), then the rest.
fn openai_stream() -> (String, String) {
    (
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\n".to_string(),
        format!("data: {{\"error\":{{\"message\":\"Incorrect API key provided: {KEY} and sk-proj-Abc123Def456Ghi789Jkl012\",\"type\":\"invalid_request_error\"}}}}\n\n"),
    )
}

fn anthropic_stream() -> (String, String) {
    (
        "event: message_start\ndata: {{\"type\":\"message_start\",\"message\":{{\"id\":\"msg_1\",\"usage\":{{\"input_tokens\":3,\"output_tokens\":1}}}}}}\n\n\
         event: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{{\"type\":\"text_delta\",\"text\":\"hi\"}}}}\n\n".replace("{{", "{").replace("}}", "}"),
        format!("event: error\ndata: {{\"type\":\"error\",\"error\":{{\"type\":\"overloaded_error\",\"message\":\"key {KEY} is overloaded; sk-ant-api03-Abc123Def456Ghi789Jkl012\"}}}}\n\n"),
    )
}

fn assert_masked(out: &str, whole: &str) {
    assert!(!out.contains(KEY), "the key reached the client: {out}");
    assert!(
        !out.contains("Abc123Def456"),
        "a key-like word reached the client: {out}"
    );
    assert!(out.contains("hi"), "content was lost: {out}");
    // The error event is still one JSON document the client can read.
    let error_line = out
        .lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .next_back()
        .unwrap();
    let parsed: serde_json::Value = serde_json::from_str(error_line).unwrap();
    assert!(parsed["error"]["message"].as_str().unwrap().contains("***"));
    assert!(out.len() < whole.len(), "nothing was masked");
}

/// A key in an error event after the stream began is masked wherever the upstream's reads
/// split it: every byte boundary, both protocols.
#[tokio::test]
async fn s2_a_key_echoed_after_commit_is_masked_at_every_split() {
    for (format, (first, rest)) in [
        (StreamFormat::OpenAiChat, openai_stream()),
        (StreamFormat::Anthropic, anthropic_stream()),
    ] {
        let bytes = Bytes::from(rest.clone());
        for split in 1..bytes.len() {
            let chunks = vec![
                Bytes::from(first.clone()),
                bytes.slice(..split),
                bytes.slice(split..),
            ];
            let out = relayed(chunks, format).await;
            assert_masked(&out, &(first.clone() + &rest));
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    /// The same with the stream cut into many reads at random places.
    #[test]
    fn s2_a_key_is_masked_however_the_reads_fall(cuts in proptest::collection::btree_set(1usize..400, 0..12)) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        for (format, (first, rest)) in [
            (StreamFormat::OpenAiChat, openai_stream()),
            (StreamFormat::Anthropic, anthropic_stream()),
        ] {
            let whole = first.clone() + &rest;
            let bytes = Bytes::from(rest);
            let mut chunks = vec![Bytes::from(first)];
            let mut from = 0;
            for &cut in cuts.iter().filter(|&&cut| cut < bytes.len()) {
                chunks.push(bytes.slice(from..cut));
                from = cut;
            }
            chunks.push(bytes.slice(from..));
            let out = runtime.block_on(relayed(chunks, format));
            assert_masked(&out, &whole);
        }
    }
}
