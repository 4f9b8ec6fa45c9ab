//! Streams: hold the client's response until the upstream produced its first content event
//! (failing over cleanly before that), then relay event by event, byte for byte, counting
//! usage; after commit an upstream break becomes one final SSE error event in the client's
//! protocol (behaviour §3).

use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use quotaroute_actors::{AttemptResult, Decision};
use quotaroute_journal::OutcomeClass;
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::proxy::sse::{SseEvent, SseParser};
use crate::proxy::stream_error::{anthropic_stream_error, openai_stream_error};
use crate::proxy::stream_watch::{EventMeaning, StreamFormat, StreamUsage};

/// How a stream began.
pub enum StreamStart {
    /// Content arrived (or the stream ended cleanly): forward `buffered`, then relay the rest.
    Committed(CommittedStream),
    /// No content before a failure: the try failed over cleanly.
    Failed {
        class: OutcomeClass,
        message: String,
    },
}

/// A stream past its first content.
pub struct CommittedStream {
    pub buffered: Vec<Bytes>,
    body: Incoming,
    parser: SseParser,
    pub usage: StreamUsage,
    /// The upstream already ended (a short stream that finished before we committed).
    finished: bool,
    format: StreamFormat,
    withhold_usage_only: bool,
}

/// Reads events until the first content, an error, or `first_token_deadline`.
pub async fn open(
    mut body: Incoming,
    format: StreamFormat,
    withhold_usage_only: bool,
    first_token_deadline: Instant,
) -> StreamStart {
    let mut parser = SseParser::new();
    let mut usage = StreamUsage::default();
    let mut buffered = Vec::new();
    let mut events = Vec::new();
    loop {
        let frame = match tokio::time::timeout_at(first_token_deadline, body.frame()).await {
            Err(_) => {
                return StreamStart::Failed {
                    class: OutcomeClass::Timeout,
                    message: "no content before first_token_timeout_ms".to_string(),
                }
            }
            Ok(None) => {
                // Ended before content: a clean end (`[DONE]` seen) commits what we have.
                if let Ok(Some(last)) = parser.finish() {
                    events.push(last);
                }
                let mut done = false;
                for event in events.drain(..) {
                    match usage.observe(format, &event) {
                        EventMeaning::Done | EventMeaning::Usage { .. } => done = true,
                        EventMeaning::Error { class, message } => {
                            return StreamStart::Failed { class, message }
                        }
                        _ => {}
                    }
                    buffered.push(event.raw);
                }
                if done {
                    return StreamStart::Committed(CommittedStream {
                        buffered,
                        body,
                        parser,
                        usage,
                        finished: true,
                        format,
                        withhold_usage_only,
                    });
                }
                return StreamStart::Failed {
                    class: OutcomeClass::ServerError,
                    message: "stream ended before any content".to_string(),
                };
            }
            Ok(Some(Err(error))) => {
                return StreamStart::Failed {
                    class: OutcomeClass::Network,
                    message: format!("stream broke before content: {error}"),
                }
            }
            Ok(Some(Ok(frame))) => frame,
        };
        let Ok(data) = frame.into_data() else {
            continue; // trailers
        };
        if parser.feed(&data, &mut events).is_err() {
            return StreamStart::Failed {
                class: OutcomeClass::ServerError,
                message: "unreadable event stream".to_string(),
            };
        }
        let mut committed = false;
        for event in events.drain(..) {
            match usage.observe(format, &event) {
                EventMeaning::Content => {
                    committed = true;
                    buffered.push(event.raw);
                }
                EventMeaning::Error { class, message } => {
                    return StreamStart::Failed { class, message }
                }
                EventMeaning::Garbage => {
                    return StreamStart::Failed {
                        class: OutcomeClass::ServerError,
                        message: "unreadable event in a 2xx stream".to_string(),
                    }
                }
                EventMeaning::UsageOnly { .. } if withhold_usage_only => {}
                _ => buffered.push(event.raw),
            }
        }
        if committed {
            return StreamStart::Committed(CommittedStream {
                buffered,
                body,
                parser,
                usage,
                finished: false,
                format,
                withhold_usage_only,
            });
        }
    }
}

/// The chunks sent to the client.
pub type ClientChunks = mpsc::Sender<Result<Bytes, std::io::Error>>;

/// Relays the rest of a committed stream to `client`, then reports the attempt.
pub async fn relay(
    mut stream: CommittedStream,
    client: ClientChunks,
    mut decision: Decision,
    mut result: AttemptResult,
    deadline: Instant,
) {
    for chunk in std::mem::take(&mut stream.buffered) {
        if client.send(Ok(chunk)).await.is_err() {
            finish(&mut decision, result, &stream.usage, None);
            return;
        }
    }
    let mut events: Vec<SseEvent> = Vec::new();
    let mut failure: Option<(OutcomeClass, String)> = None;
    // An upstream error event is forwarded as is; only a break gets our own error event.
    let mut error_forwarded = false;
    while !stream.finished {
        let frame = match tokio::time::timeout_at(deadline, stream.body.frame()).await {
            Err(_) => {
                failure = Some((
                    OutcomeClass::Timeout,
                    "request_timeout_ms passed".to_string(),
                ));
                break;
            }
            Ok(None) => {
                if let Ok(Some(last)) = stream.parser.finish() {
                    events.push(last);
                }
                stream.finished = true;
                None
            }
            Ok(Some(Err(error))) => {
                failure = Some((
                    OutcomeClass::Network,
                    format!("upstream stream broke: {error}"),
                ));
                break;
            }
            Ok(Some(Ok(frame))) => frame.into_data().ok(),
        };
        if let Some(data) = frame {
            if stream.parser.feed(&data, &mut events).is_err() {
                failure = Some((
                    OutcomeClass::ServerError,
                    "unreadable event stream".to_string(),
                ));
                break;
            }
        }
        for event in events.drain(..) {
            let meaning = stream.usage.observe(stream.format, &event);
            let forward = match &meaning {
                EventMeaning::UsageOnly { .. } => !stream.withhold_usage_only,
                EventMeaning::Error { class, message } => {
                    failure = Some((*class, message.clone()));
                    error_forwarded = true;
                    true
                }
                _ => true,
            };
            if forward && client.send(Ok(event.raw)).await.is_err() {
                finish(&mut decision, result, &stream.usage, None);
                return;
            }
        }
        if failure.is_some() {
            break;
        }
    }
    if let Some((class, message)) = &failure {
        if !error_forwarded {
            let event = match stream.format {
                StreamFormat::Anthropic => anthropic_stream_error(message, "api_error"),
                _ => openai_stream_error(message, "upstream_error"),
            };
            let _ = client.send(Ok(event)).await;
        }
        result.class = *class;
        result.message = Some(message.clone());
        result.after_first_content = true;
    }
    finish(
        &mut decision,
        result,
        &stream.usage,
        failure.map(|(class, _)| class),
    );
}

fn finish(
    decision: &mut Decision,
    mut result: AttemptResult,
    usage: &StreamUsage,
    failure: Option<OutcomeClass>,
) {
    result.tokens_in = usage.tokens_in;
    result.tokens_out = usage.tokens_out;
    if failure.is_none() {
        result.class = OutcomeClass::Success;
    }
    decision.report(result);
}

/// How long until `deadline`, for timeouts expressed as durations.
pub fn remaining(deadline: Instant) -> Duration {
    deadline.saturating_duration_since(Instant::now())
}
