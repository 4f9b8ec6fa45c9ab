//! What a fault makes of one upstream request before any answer is written: a finished answer
//! (an error, a reset, garbage) or a success it shapes (`SuccessShape`), and the error answers
//! both the model endpoints (`handler`) and the stored-response endpoints (`stored_api`) give.
//!
//! Owns the mapping from [`Fault`] to a verdict; never decides which fault fires.

use std::time::Duration;

use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use super::delivery::ForcedEncoding;
use super::error_bodies::{self, ErrorReply};
use super::exchange::StreamEnding;
use super::fault::{Fault, ResetForm};
use super::rate_headers::{self, budget_headers, insert, Dialect};
use super::state::RateSnapshot;

/// Marks a response the connection must answer with a TCP reset instead (see `server`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct ResetConnection;

/// How a fault shapes an answer that still succeeds (a 200).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SuccessShape {
    pub(crate) ending: StreamEnding,
    /// Cut the connection after the last event instead of ending the body cleanly.
    pub(crate) abort: bool,
    /// A stream pauses this long after this many events.
    pub(crate) pause: Option<(usize, Duration)>,
    /// A stream pauses this long before its last this many events.
    pub(crate) pause_before_last: Option<(usize, Duration)>,
    /// A stream waits this long before each event.
    pub(crate) every: Option<Duration>,
    /// The `usage` every usage-bearing part of the answer carries instead of the real one.
    pub(crate) usage: Option<Value>,
    pub(crate) forced: Option<ForcedEncoding>,
}

impl SuccessShape {
    pub(crate) const PLAIN: Self = Self {
        ending: StreamEnding::Complete,
        abort: false,
        pause: None,
        pause_before_last: None,
        every: None,
        usage: None,
        forced: None,
    };
}

/// What a fault makes of a request: a finished answer, or a success shaped by it.
pub(crate) enum Verdict {
    Answer(Response),
    Succeed(SuccessShape),
}

pub(crate) fn method_not_allowed(dialect: Dialect, headers: HeaderMap) -> Response {
    let reply = error_bodies::bad_request(dialect, "Only POST is supported here.");
    error_response(
        ErrorReply {
            status: 405,
            ..reply
        },
        headers,
    )
}

/// The answer `fault` gives (`None`: a plain success). Sleeps for the faults that delay the
/// headers (`Latency`, `Stall`, and `SlowStart` on a JSON answer).
pub(crate) async fn fault_verdict(
    fault: Option<Fault>,
    dialect: Dialect,
    key: &str,
    model: &str,
    streaming: bool,
    rate: &RateSnapshot,
    headers: &mut HeaderMap,
) -> Verdict {
    let shape = |ending, abort| {
        Verdict::Succeed(SuccessShape {
            ending,
            abort,
            ..SuccessShape::PLAIN
        })
    };
    let Some(fault) = fault else {
        return Verdict::Succeed(SuccessShape::PLAIN);
    };
    match fault {
        Fault::Latency { ms } | Fault::Stall { ms } => {
            tokio::time::sleep(Duration::from_millis(ms)).await;
            Verdict::Succeed(SuccessShape::PLAIN)
        }
        Fault::SlowStart { events, pause_ms } => {
            let pause = Duration::from_millis(pause_ms);
            if !streaming {
                tokio::time::sleep(pause).await;
                Verdict::Succeed(SuccessShape::PLAIN)
            } else {
                Verdict::Succeed(SuccessShape {
                    pause: Some((usize::try_from(events).unwrap_or(usize::MAX), pause)),
                    ..SuccessShape::PLAIN
                })
            }
        }
        Fault::SlowEnd { events, pause_ms } => Verdict::Succeed(SuccessShape {
            pause_before_last: Some((
                usize::try_from(events).unwrap_or(usize::MAX),
                Duration::from_millis(pause_ms),
            )),
            ..SuccessShape::PLAIN
        }),
        Fault::Paced { every_ms } => Verdict::Succeed(SuccessShape {
            every: Some(Duration::from_millis(every_ms)),
            ..SuccessShape::PLAIN
        }),
        Fault::HostileUsage { usage } => Verdict::Succeed(SuccessShape {
            usage: Some(serde_json::from_str(&usage).unwrap_or(Value::String(usage))),
            ..SuccessShape::PLAIN
        }),
        Fault::CorruptCompressed => Verdict::Succeed(SuccessShape {
            forced: Some(ForcedEncoding::CorruptGzip),
            ..SuccessShape::PLAIN
        }),
        Fault::MislabelledCompression => Verdict::Succeed(SuccessShape {
            forced: Some(ForcedEncoding::MislabelledGzip),
            ..SuccessShape::PLAIN
        }),
        Fault::StreamFailBeforeContent => shape(StreamEnding::FailBeforeContent, false),
        Fault::StreamFailAfterContent => shape(StreamEnding::FailAfterContent, true),
        Fault::Status429 { reset } => {
            budget_headers(headers, dialect, rate, false);
            rate_headers::reset_headers(headers, &reset);
            let reply = error_bodies::rate_limited(dialect, model, &reset);
            Verdict::Answer(error_response(reply, std::mem::take(headers)))
        }
        Fault::InsufficientQuota429 => {
            budget_headers(headers, dialect, rate, true);
            let reply = error_bodies::insufficient_quota(dialect);
            Verdict::Answer(error_response(reply, std::mem::take(headers)))
        }
        Fault::Status(status) => {
            budget_headers(headers, dialect, rate, true);
            let reply = error_bodies::for_status(dialect, status, key, model);
            Verdict::Answer(error_response(reply, std::mem::take(headers)))
        }
        Fault::Custom { status, body } => {
            budget_headers(headers, dialect, rate, true);
            let reply = ErrorReply {
                status,
                content_type: "application/json",
                body,
            };
            Verdict::Answer(error_response(reply, std::mem::take(headers)))
        }
        Fault::ConnectionReset => {
            let mut response = StatusCode::INTERNAL_SERVER_ERROR.into_response();
            response.extensions_mut().insert(ResetConnection);
            Verdict::Answer(response)
        }
        Fault::BadJson200 => {
            budget_headers(headers, dialect, rate, true);
            let reply = ErrorReply {
                status: 200,
                content_type: "application/json",
                body: "{\"id\":\"chatcmpl-mock\",\"object\":\"chat.completion\",\"choices\":[{\"index\":0,"
                    .to_owned(),
            };
            Verdict::Answer(error_response(reply, std::mem::take(headers)))
        }
        Fault::GarbageSse => {
            budget_headers(headers, dialect, rate, true);
            let reply = ErrorReply {
                status: 200,
                content_type: "text/event-stream",
                body: "data: {\"id\": garbage<<<\n\nthis is not server-sent events\n\n".to_owned(),
            };
            Verdict::Answer(error_response(reply, std::mem::take(headers)))
        }
    }
}

/// The key's own budget is spent: a real rate-limit 429 with every reset header.
pub(crate) fn exhausted_budget(
    dialect: Dialect,
    model: &str,
    rate: &RateSnapshot,
    mut headers: HeaderMap,
) -> Response {
    budget_headers(&mut headers, dialect, rate, true);
    // A spent plan window: 429 until its reset, the Codex body naming it for ChatGPT plans.
    if let Some(until_ms) = rate.plan.and_then(|plan| plan.spent_until_ms) {
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_millis() as u64);
        let seconds = until_ms.saturating_sub(now_ms).div_ceil(1000);
        rate_headers::reset_headers(&mut headers, &ResetForm::RetryAfterSeconds(seconds));
        let reply = match dialect {
            Dialect::OpenAi => error_bodies::usage_limit_reached(until_ms.div_ceil(1000), seconds),
            Dialect::Anthropic => error_bodies::rate_limited(dialect, model, &ResetForm::None),
        };
        return error_response(reply, headers);
    }
    let seconds = rate.budget.reset_ms.div_ceil(1000);
    rate_headers::reset_headers(&mut headers, &ResetForm::RetryAfterSeconds(seconds));
    error_response(
        error_bodies::rate_limited(dialect, model, &ResetForm::None),
        headers,
    )
}

pub(crate) fn error_response(reply: ErrorReply, mut headers: HeaderMap) -> Response {
    insert(
        &mut headers,
        header::CONTENT_TYPE.as_str(),
        reply.content_type,
    );
    let status = StatusCode::from_u16(reply.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (status, headers, reply.body).into_response()
}

/// Marks `response` with the fault's encoding, if it has one (see `delivery`).
pub(crate) fn with_forced(mut response: Response, forced: Option<ForcedEncoding>) -> Response {
    if let Some(forced) = forced {
        response.extensions_mut().insert(forced);
    }
    response
}
