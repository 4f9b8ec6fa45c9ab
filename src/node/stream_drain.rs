//! A stream the client left before its usage arrived (behaviour §11, "money holds"): the
//! router keeps reading the upstream, bounded in time (`server.drain_after_client_left_ms`) and
//! bytes (`server.drain_max_bytes`), for the closing usage, relaying nothing. What it read is
//! tallied into the stream's usage; charging (or estimating) is the relay's report. It stops
//! early when the caller's `stop` says so (the client's budget is reached: reading on would
//! only make the upstream generate more). It must not write to the client or decide what is
//! charged.

use std::time::Duration;

use tokio::time::Instant;

use crate::node::lazy_deadline::read_by;
use crate::upstream::body::UpstreamBody;
use crate::wire::sse::{SseEvent, SseParser};
use crate::wire::stream_watch::{StreamFormat, StreamUsage};

/// How long and how far a left stream is read on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DrainBounds {
    /// `server.drain_after_client_left_ms` (0: not at all, the estimate is charged at once).
    pub after_left: Duration,
    /// `server.drain_max_bytes`.
    pub max_bytes: u64,
}

impl DrainBounds {
    /// No reading on (tests of the relay alone).
    pub const NONE: DrainBounds = DrainBounds {
        after_left: Duration::ZERO,
        max_bytes: 0,
    };

    pub fn reads(&self) -> bool {
        !self.after_left.is_zero() && self.max_bytes > 0
    }
}

/// How a drain ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DrainEnd {
    /// The closing usage arrived.
    Usage,
    /// The upstream ended, broke or sent what cannot be read, without it.
    Ended,
    /// `drain_after_client_left_ms` passed.
    TimedOut,
    /// `drain_max_bytes` were read.
    TooLong,
    /// `stop` said so (the client's budget is reached).
    Stopped,
}

/// Reads `body` on until `usage` has its closing usage, a bound is reached or `stop` (asked
/// after each event without the closing usage) says so, tallying every event's usage and
/// generated text into `usage`.
pub async fn drain_for_usage(
    body: &mut UpstreamBody,
    parser: &mut SseParser,
    format: StreamFormat,
    usage: &mut StreamUsage,
    bounds: DrainBounds,
    mut stop: impl FnMut(&StreamUsage) -> bool,
) -> DrainEnd {
    if usage.final_seen {
        return DrainEnd::Usage;
    }
    let deadline = Instant::now() + bounds.after_left;
    let mut read: u64 = 0;
    let mut events: Vec<SseEvent> = Vec::new();
    loop {
        let data = match read_by(|| deadline, body.next_data()).await {
            Err(_) => return DrainEnd::TimedOut,
            Ok(None) => {
                if let Ok(Some(last)) = parser.finish() {
                    events.push(last);
                }
                tally(format, usage, &mut events, &mut stop);
                return if usage.final_seen {
                    DrainEnd::Usage
                } else {
                    DrainEnd::Ended
                };
            }
            Ok(Some(Err(_))) => return DrainEnd::Ended,
            Ok(Some(Ok(data))) => data,
        };
        read = read.saturating_add(data.len() as u64);
        if parser.feed(&data, &mut events).is_err() {
            return DrainEnd::Ended;
        }
        let stopped = tally(format, usage, &mut events, &mut stop);
        if usage.final_seen {
            return DrainEnd::Usage;
        }
        if stopped {
            return DrainEnd::Stopped;
        }
        if read >= bounds.max_bytes {
            return DrainEnd::TooLong;
        }
    }
}

/// Tallies `events` into `usage`; true when `stop` said to stop (the rest are left unread).
fn tally(
    format: StreamFormat,
    usage: &mut StreamUsage,
    events: &mut Vec<SseEvent>,
    stop: &mut impl FnMut(&StreamUsage) -> bool,
) -> bool {
    for event in events.drain(..) {
        usage.count_content(format, &event);
        usage.observe(format, &event);
        if !usage.final_seen && stop(usage) {
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;

    fn body(chunks: Vec<&'static str>) -> UpstreamBody {
        UpstreamBody::Decoded(Box::pin(futures_util::stream::iter(
            chunks.into_iter().map(|chunk| Ok(Bytes::from(chunk))),
        )))
    }

    const BOUNDS: DrainBounds = DrainBounds {
        after_left: Duration::from_secs(5),
        max_bytes: 1 << 20,
    };

    #[tokio::test]
    async fn the_closing_usage_is_read_from_what_the_client_never_saw() {
        let mut usage = StreamUsage::default();
        let end = drain_for_usage(
            &mut body(vec![
                "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"more\"}}]}\n\n",
                "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":11,\"completion_tokens\":40}}\n\ndata: [DONE]\n\n",
            ]),
            &mut SseParser::new(),
            StreamFormat::OpenAiChat,
            &mut usage,
            BOUNDS,
            |_| false,
        )
        .await;
        assert_eq!(end, DrainEnd::Usage);
        assert_eq!((usage.tokens_in, usage.tokens_out), (11, 40));
        assert_eq!(usage.content_bytes, 4);
    }

    #[tokio::test]
    async fn anthropic_is_read_on_until_message_delta() {
        let mut usage = StreamUsage::default();
        usage.observe(
            StreamFormat::Anthropic,
            &SseEvent {
                event: Some("message_start".into()),
                data: r#"{"type":"message_start","message":{"usage":{"input_tokens":25,"output_tokens":1}}}"#.into(),
                raw: Bytes::new(),
            },
        );
        assert!(!usage.final_seen, "message_start is not the closing usage");
        let end = drain_for_usage(
            &mut body(vec![
                "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"abc\"}}\n\n",
                "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":90}}\n\n",
            ]),
            &mut SseParser::new(),
            StreamFormat::Anthropic,
            &mut usage,
            BOUNDS,
            |_| false,
        )
        .await;
        assert_eq!(end, DrainEnd::Usage);
        assert_eq!((usage.tokens_in, usage.tokens_out), (25, 90));
    }

    #[tokio::test]
    async fn a_stream_without_usage_ends_or_hits_a_bound() {
        let mut usage = StreamUsage::default();
        let end = drain_for_usage(
            &mut body(vec![
                "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"}}]}\n\n",
            ]),
            &mut SseParser::new(),
            StreamFormat::OpenAiChat,
            &mut usage,
            BOUNDS,
            |_| false,
        )
        .await;
        assert_eq!(end, DrainEnd::Ended);
        let end = drain_for_usage(
            &mut body(vec![
                "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"}}]}\n\n";
                100
            ]),
            &mut SseParser::new(),
            StreamFormat::OpenAiChat,
            &mut StreamUsage::default(),
            DrainBounds {
                max_bytes: 200,
                ..BOUNDS
            },
            |_| false,
        )
        .await;
        assert_eq!(end, DrainEnd::TooLong);
    }

    #[tokio::test(start_paused = true)]
    async fn a_silent_upstream_is_left_at_the_deadline() {
        let mut silent = UpstreamBody::Decoded(Box::pin(futures_util::stream::pending()));
        let end = drain_for_usage(
            &mut silent,
            &mut SseParser::new(),
            StreamFormat::OpenAiResponses,
            &mut StreamUsage::default(),
            BOUNDS,
            |_| false,
        )
        .await;
        assert_eq!(end, DrainEnd::TimedOut);
    }
}
