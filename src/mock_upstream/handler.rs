//! One upstream request, start to finish: read the key and body, ask `state` for a fault, and
//! answer the way the real provider would (success, error, broken stream, reset).
//!
//! Owns the mapping from [`Fault`] to a response; never decides which fault fires.

use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use serde_json::Value;

use super::error_bodies::{self, ErrorReply};
use super::exchange::{Endpoint, StreamEnding, Turn};
use super::fault::{Fault, ResetForm};
use super::rate_headers::{self, budget_headers, insert, Dialect};
use super::state::{MockUpstream, RateSnapshot};
use super::{anthropic, openai};

/// How long a stream that fails after content waits before it is cut.
const STREAM_CUT_PAUSE_MS: u64 = 5;

/// Marks a response the connection must answer with a TCP reset instead (see `server`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct ResetConnection;

/// The key as clients send it: `Authorization: Bearer …` or `x-api-key`.
fn read_key(headers: &HeaderMap) -> String {
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "));
    let api_key = headers
        .get("x-api-key")
        .and_then(|value| value.to_str().ok());
    bearer.or(api_key).unwrap_or_default().trim().to_owned()
}

pub(crate) async fn upstream(
    State(mock): State<MockUpstream>,
    method: Method,
    uri: Uri,
    request_headers: HeaderMap,
    body: Bytes,
) -> Response {
    let mut headers = HeaderMap::new();
    if let Some(request_id) = request_headers.get("x-request-id") {
        headers.insert("x-request-id", request_id.clone());
    }
    let Some(endpoint) = Endpoint::from_path(uri.path()) else {
        let reply = error_bodies::for_status(Dialect::OpenAi, 404, "", "unknown");
        return error_response(reply, headers);
    };
    let dialect = endpoint.dialect();
    if method != Method::POST {
        let reply = error_bodies::bad_request(dialect, "Only POST is supported here.");
        return error_response(
            ErrorReply {
                status: 405,
                ..reply
            },
            headers,
        );
    }
    let key = read_key(&request_headers);
    if let Ok(value) = HeaderValue::from_str(&key) {
        headers.insert("x-mock-key", value);
    }
    let Ok(parsed) = serde_json::from_slice::<Value>(&body) else {
        let reply =
            error_bodies::bad_request(dialect, "We could not parse the JSON body of your request.");
        return error_response(reply, headers);
    };
    let Some(mut turn) = Turn::from_request(endpoint, &parsed, body.len()) else {
        let reply = error_bodies::bad_request(dialect, "you must provide a model parameter");
        return error_response(reply, headers);
    };
    let admission = mock.admit(&key, &turn.model, turn.streaming, turn.total_tokens());
    turn.sequence = admission.sequence;
    if key.is_empty() {
        budget_headers(&mut headers, dialect, &admission.rate, true);
        return error_response(
            error_bodies::for_status(dialect, 401, "", &turn.model),
            headers,
        );
    }
    match admission.fault {
        None if admission.budget_exhausted => {
            exhausted_budget(dialect, &turn, &admission.rate, headers)
        }
        None => success(
            &turn,
            &admission.rate,
            headers,
            StreamEnding::Complete,
            false,
        ),
        Some(Fault::Latency { ms } | Fault::Stall { ms }) => {
            tokio::time::sleep(Duration::from_millis(ms)).await;
            success(
                &turn,
                &admission.rate,
                headers,
                StreamEnding::Complete,
                false,
            )
        }
        Some(Fault::Status429 { reset }) => {
            budget_headers(&mut headers, dialect, &admission.rate, false);
            rate_headers::reset_headers(&mut headers, &reset);
            error_response(
                error_bodies::rate_limited(dialect, &turn.model, &reset),
                headers,
            )
        }
        Some(Fault::InsufficientQuota429) => {
            budget_headers(&mut headers, dialect, &admission.rate, true);
            error_response(error_bodies::insufficient_quota(dialect), headers)
        }
        Some(Fault::Status(status)) => {
            budget_headers(&mut headers, dialect, &admission.rate, true);
            error_response(
                error_bodies::for_status(dialect, status, &key, &turn.model),
                headers,
            )
        }
        Some(Fault::Custom { status, body }) => {
            budget_headers(&mut headers, dialect, &admission.rate, true);
            let reply = ErrorReply {
                status,
                content_type: "application/json",
                body,
            };
            error_response(reply, headers)
        }
        Some(Fault::ConnectionReset) => {
            let mut response = StatusCode::INTERNAL_SERVER_ERROR.into_response();
            response.extensions_mut().insert(ResetConnection);
            response
        }
        Some(Fault::StreamFailBeforeContent) => success(
            &turn,
            &admission.rate,
            headers,
            StreamEnding::FailBeforeContent,
            false,
        ),
        Some(Fault::StreamFailAfterContent) => success(
            &turn,
            &admission.rate,
            headers,
            StreamEnding::FailAfterContent,
            true,
        ),
        Some(Fault::BadJson200) => {
            budget_headers(&mut headers, dialect, &admission.rate, true);
            let reply = ErrorReply {
                status: 200,
                content_type: "application/json",
                body: "{\"id\":\"chatcmpl-mock\",\"object\":\"chat.completion\",\"choices\":[{\"index\":0,"
                    .to_owned(),
            };
            error_response(reply, headers)
        }
        Some(Fault::GarbageSse) => {
            budget_headers(&mut headers, dialect, &admission.rate, true);
            let reply = ErrorReply {
                status: 200,
                content_type: "text/event-stream",
                body: "data: {\"id\": garbage<<<\n\nthis is not server-sent events\n\n".to_owned(),
            };
            error_response(reply, headers)
        }
    }
}

/// The key's own budget is spent: a real rate-limit 429 with every reset header.
fn exhausted_budget(
    dialect: Dialect,
    turn: &Turn,
    rate: &RateSnapshot,
    mut headers: HeaderMap,
) -> Response {
    budget_headers(&mut headers, dialect, rate, true);
    let seconds = rate.budget.reset_ms.div_ceil(1000);
    rate_headers::reset_headers(&mut headers, &ResetForm::RetryAfterSeconds(seconds));
    error_response(
        error_bodies::rate_limited(dialect, &turn.model, &ResetForm::None),
        headers,
    )
}

fn error_response(reply: ErrorReply, mut headers: HeaderMap) -> Response {
    insert(
        &mut headers,
        header::CONTENT_TYPE.as_str(),
        reply.content_type,
    );
    let status = StatusCode::from_u16(reply.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (status, headers, reply.body).into_response()
}

/// A 200: JSON, or SSE ending as `ending` says; `abort` cuts the connection after the last
/// event instead of ending the body cleanly.
fn success(
    turn: &Turn,
    rate: &RateSnapshot,
    mut headers: HeaderMap,
    ending: StreamEnding,
    abort: bool,
) -> Response {
    let dialect = turn.endpoint.dialect();
    budget_headers(&mut headers, dialect, rate, true);
    if !turn.streaming {
        let body = match dialect {
            Dialect::OpenAi => openai::json_body(turn),
            Dialect::Anthropic => anthropic::json_body(turn),
        };
        insert(
            &mut headers,
            header::CONTENT_TYPE.as_str(),
            "application/json",
        );
        return (StatusCode::OK, headers, body.to_string()).into_response();
    }
    let frames = match dialect {
        Dialect::OpenAi => openai::stream_frames(turn, ending),
        Dialect::Anthropic => anthropic::stream_frames(turn, ending),
    };
    insert(
        &mut headers,
        header::CONTENT_TYPE.as_str(),
        "text/event-stream",
    );
    insert(&mut headers, header::CACHE_CONTROL.as_str(), "no-cache");
    let events = futures_util::stream::iter(
        frames
            .into_iter()
            .map(|frame| Ok::<_, std::io::Error>(Bytes::from(frame))),
    );
    if !abort {
        return (StatusCode::OK, headers, Body::from_stream(events)).into_response();
    }
    // The pause lets hyper flush what was sent before the error aborts the connection;
    // otherwise the client would see a reset before the headers, not a broken stream.
    let cut = futures_util::stream::once(async {
        tokio::time::sleep(Duration::from_millis(STREAM_CUT_PAUSE_MS)).await;
        Err(std::io::Error::new(
            std::io::ErrorKind::ConnectionAborted,
            "mock upstream: stream cut after content",
        ))
    });
    let body = Body::from_stream(events.chain(cut));
    (StatusCode::OK, headers, body).into_response()
}
