//! A Gemini upstream's stream through the relay, relayed as it is (a Gemini client) and
//! translated (a Chat client): its text chunks are read once, through their template, for the
//! client and for their usage. A stream that breaks after some chunks is charged the last
//! counts seen, and ends its answer only where the relay's search for a `finishReason` says;
//! the usage a budget is checked against after each chunk is what a whole read counts.

use bytes::Bytes;

use super::StreamStart;
use crate::upstream::body::{BodyError, UpstreamBody};
use crate::wire::sse::{SseEvent, SseParser};
use crate::wire::stream_watch::{StreamFormat, StreamUsage};
use crate::wire::translate::Direction;

/// Chunk `index` (from 1) of a Gemini stream: one word, the counts so far, and `extra`
/// members (after the candidates).
fn chunk(index: u64, extra: &str) -> String {
    format!(
        "data: {{\"candidates\":[{{\"content\":{{\"parts\":[{{\"text\":\"w{index} \"}}],\"role\":\"model\"}},\"index\":0}}],{extra}\"modelVersion\":\"gemini-2.5-flash\",\"responseId\":\"r-1\",\"usageMetadata\":{{\"promptTokenCount\":32,\"cachedContentTokenCount\":4,\"candidatesTokenCount\":{index},\"totalTokenCount\":{}}}}}\r\n\r\n",
        32 + index
    )
}

/// The usage `observe` counts of `chunks`, each read whole, as the relay read them before
/// its one read of a text chunk.
fn observed(chunks: &[String]) -> StreamUsage {
    let mut parser = SseParser::new();
    let mut events: Vec<SseEvent> = Vec::new();
    for chunk in chunks {
        parser.feed(chunk.as_bytes(), &mut events).unwrap();
    }
    let mut usage = StreamUsage::default();
    for event in &events {
        usage.observe(StreamFormat::Gemini, event);
        usage.count_content(StreamFormat::Gemini, event);
    }
    usage
}

/// `chunks` relayed (translated for a Chat client when `translated`), the upstream breaking
/// after the last: the usage the relay counted.
async fn relayed_then_broken(chunks: &[String], translated: bool) -> StreamUsage {
    let reads: Vec<Result<Bytes, BodyError>> = chunks
        .iter()
        .map(|chunk| Ok(Bytes::from(chunk.clone())))
        .chain([Err(BodyError::Transport("connection reset".into()))])
        .collect();
    let body = UpstreamBody::Decoded(Box::pin(futures_util::stream::iter(reads)));
    let translator = translated.then(|| super::tests::translator(Direction::CHAT_TO_GEMINI, true));
    let (start, far) =
        super::tests::opened_translated(body, StreamFormat::Gemini, translator).await;
    let StreamStart::Committed(stream) = start else {
        panic!("the stream did not commit");
    };
    let (client, usage) = super::tests::relayed_with_usage(stream, far).await;
    assert!(client.contains("connection reset"), "{client}");
    usage
}

/// A stream broken after `n` text chunks is charged the counts of the `n`th, the last seen
/// (its output count grows with each chunk): relayed as it is and translated, and as each
/// chunk read whole counts them.
#[tokio::test]
async fn a_gemini_stream_broken_after_n_chunks_charges_the_last_counts_seen() {
    for n in [1, 2, 3, 9, 40] {
        let chunks: Vec<String> = (1..=n).map(|index| chunk(index, "")).collect();
        for translated in [false, true] {
            let usage = relayed_then_broken(&chunks, translated).await;
            let counts = (usage.tokens_in, usage.tokens_out, usage.tokens_cached);
            assert_eq!(counts, (32, n, 4), "{n} chunks, translated: {translated}");
            // No chunk closed the answer: a left stream would be drained for its usage.
            assert!(!usage.final_seen, "{n} chunks, translated: {translated}");
            assert_eq!(
                usage,
                observed(&chunks),
                "{n} chunks, translated: {translated}"
            );
        }
    }
}

/// Text chunks that name a string `finishReason` outside their candidate (a member the
/// readers pass over) close the answer as the relay's search says: read through their
/// template too, not only the first, walked. One whose candidate's is `null` does not.
#[tokio::test]
async fn a_gemini_text_chunk_closes_the_answer_as_the_search_for_its_finish_says() {
    let named = r#""echo":{"finishReason":"STOP"},"#;
    let null = r#""echo":{"finishReason":null},"#;
    for (extra, closes) in [(named, true), (null, false)] {
        for n in [2, 3, 9] {
            // The first chunk is plain: the ones after it are read through the template.
            let chunks: Vec<String> = (1..=n)
                .map(|index| chunk(index, if index == 1 { "" } else { extra }))
                .collect();
            for translated in [false, true] {
                let usage = relayed_then_broken(&chunks, translated).await;
                let case = format!("{extra} × {n}, translated: {translated}");
                assert_eq!(usage.final_seen, closes, "{case}");
                assert_eq!(usage, observed(&chunks), "{case}");
                assert_eq!(usage.tokens_out, n, "{case}");
            }
        }
    }
}
