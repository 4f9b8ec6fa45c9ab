//! Streams: hold the client's response until the upstream produced its first content event
//! (failing over cleanly before that), then relay event by event, byte for byte, counting
//! usage; after commit an upstream break becomes one final SSE error event in the client's
//! protocol (behaviour §3).

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures_util::FutureExt;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use quotaroute_actors::{AttemptResult, Decision};
use quotaroute_journal::OutcomeClass;
use tokio::time::Instant;

use crate::proxy::sse::{SseEvent, SseParser};
use crate::proxy::stream_error::{anthropic_stream_error, openai_stream_error};
use crate::proxy::stream_watch::{matters_after_commit, EventMeaning, StreamFormat, StreamUsage};

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

/// Most upstream bytes gathered into one client write.
const COALESCE_BYTES: usize = 64 * 1024;

/// How many times the relay lets other tasks run while waiting for a frame hyper has already
/// read (see `ready_frame`).
const READY_FRAME_YIELDS: usize = 2;

/// A committed stream being relayed: polled by the client's response body itself (no task, no
/// channel), one chunk per upstream frame. Reports the attempt when the stream ends — or, if the
/// client goes away first, when it is dropped.
struct Relay {
    stream: CommittedStream,
    decision: Option<Decision>,
    result: AttemptResult,
    deadline: Instant,
    failure: Option<(OutcomeClass, String)>,
    ended: bool,
    /// The end or an error, seen while gathering a burst; handled on the next call.
    pending: Option<Option<Result<http_body::Frame<Bytes>, hyper::Error>>>,
}

impl Relay {
    /// The next bytes for the client; `None` once the stream is over (and reported).
    async fn next_chunk(&mut self) -> Option<Bytes> {
        if !self.stream.buffered.is_empty() {
            let mut first = BytesMut::new();
            for chunk in std::mem::take(&mut self.stream.buffered) {
                first.extend_from_slice(&chunk);
            }
            return Some(first.freeze());
        }
        let mut events: Vec<SseEvent> = Vec::new();
        loop {
            if self.ended {
                self.report();
                return None;
            }
            let frame = match self.pending.take() {
                Some(frame) => Ok(frame),
                None => tokio::time::timeout_at(self.deadline, self.stream.body.frame()).await,
            };
            let mut out = BytesMut::new();
            match frame {
                Err(_) => return self.fail(OutcomeClass::Timeout, "request_timeout_ms passed"),
                Ok(Some(Err(error))) => {
                    return self.fail(
                        OutcomeClass::Network,
                        &format!("upstream stream broke: {error}"),
                    )
                }
                Ok(None) => {
                    if let Ok(Some(last)) = self.stream.parser.finish() {
                        events.push(last);
                    }
                    self.ended = true;
                }
                Ok(Some(Ok(frame))) => {
                    let mut fed = 0;
                    let mut next = Some(frame);
                    // Take whatever else has already arrived: one client write per burst
                    // rather than one per upstream frame.
                    while let Some(frame) = next.take() {
                        if let Ok(data) = frame.into_data() {
                            fed += data.len();
                            if self.stream.parser.feed(&data, &mut events).is_err() {
                                return self
                                    .fail(OutcomeClass::ServerError, "unreadable event stream");
                            }
                        }
                        if fed >= COALESCE_BYTES {
                            break;
                        }
                        match ready_frame(&mut self.stream.body).await {
                            None => break,
                            Some(Some(Ok(frame))) => next = Some(frame),
                            Some(other) => self.pending = Some(other),
                        }
                    }
                }
            }
            for event in events.drain(..) {
                if !matters_after_commit(self.stream.format, &event) {
                    out.extend_from_slice(&event.raw);
                    continue;
                }
                match self.stream.usage.observe(self.stream.format, &event) {
                    EventMeaning::UsageOnly { .. } if self.stream.withhold_usage_only => {}
                    EventMeaning::Error { class, message } => {
                        // The upstream's own error event reaches the client as is.
                        out.extend_from_slice(&event.raw);
                        self.failure = Some((class, message));
                        self.ended = true;
                    }
                    _ => out.extend_from_slice(&event.raw),
                }
            }
            if !out.is_empty() {
                return Some(out.freeze());
            }
        }
    }

    /// A break after commit: one final error event in the client's protocol.
    fn fail(&mut self, class: OutcomeClass, message: &str) -> Option<Bytes> {
        self.failure = Some((class, message.to_string()));
        self.ended = true;
        Some(match self.stream.format {
            StreamFormat::Anthropic => anthropic_stream_error(message, "api_error"),
            _ => openai_stream_error(message, "upstream_error"),
        })
    }

    fn report(&mut self) {
        let Some(mut decision) = self.decision.take() else {
            return;
        };
        let mut result = self.result.clone();
        result.tokens_in = self.stream.usage.tokens_in;
        result.tokens_out = self.stream.usage.tokens_out;
        match self.failure.take() {
            Some((class, message)) => {
                result.class = class;
                result.message = Some(message);
                result.after_first_content = true;
            }
            None => result.class = OutcomeClass::Success,
        }
        decision.report(result);
    }
}

impl Drop for Relay {
    /// The client went away mid-stream: the upstream served, so the attempt counts as served.
    fn drop(&mut self) {
        self.report();
    }
}

/// The client's body for a committed stream.
pub fn relay_body(
    stream: CommittedStream,
    decision: Decision,
    result: AttemptResult,
    deadline: Instant,
) -> axum::body::Body {
    let relay = Relay {
        ended: stream.finished,
        stream,
        decision: Some(decision),
        result,
        deadline,
        failure: None,
        pending: None,
    };
    axum::body::Body::from_stream(futures_util::stream::unfold(
        relay,
        |mut relay| async move {
            relay
                .next_chunk()
                .await
                .map(|chunk| (Ok::<Bytes, std::io::Error>(chunk), relay))
        },
    ))
}

/// The upstream's next frame if it is already there, or arrives once the tasks that are ready
/// have run; `None` otherwise. hyper's client hands a body over one frame at a time from its
/// connection task, so a frame already read from the socket is a few task switches away
/// (measured: two yields). Waiting that long lets a burst of events leave in one client write
/// instead of one write per event; it costs two task polls when nothing more has arrived.
async fn ready_frame(
    body: &mut Incoming,
) -> Option<Option<Result<http_body::Frame<Bytes>, hyper::Error>>> {
    for _ in 0..READY_FRAME_YIELDS {
        if let Some(frame) = body.frame().now_or_never() {
            return Some(frame);
        }
        YieldOnce(false).await;
    }
    body.frame().now_or_never()
}

/// Lets the other ready tasks run once: wakes itself and returns `Pending` a single time.
/// Not `tokio::task::yield_now`, which parks the waker on the worker's defer list: under the
/// 1,000-stream soak that grew RSS with every stream (150 MB after 300k streams, against
/// 100 MB with this).
struct YieldOnce(bool);

impl std::future::Future for YieldOnce {
    type Output = ();

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<()> {
        if self.0 {
            return std::task::Poll::Ready(());
        }
        self.0 = true;
        cx.waker().wake_by_ref();
        std::task::Poll::Pending
    }
}

/// How long until `deadline`, for timeouts expressed as durations.
pub fn remaining(deadline: Instant) -> Duration {
    deadline.saturating_duration_since(Instant::now())
}
