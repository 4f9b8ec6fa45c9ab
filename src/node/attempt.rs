//! One upstream try against one target (behaviour §3, §4): build the request with the
//! connection's credential, send it, read the answer (decoded when compressed) or open the
//! stream until its first content, and classify what came back. Knows nothing of failover:
//! `proxy` decides what follows a try.

use std::time::{Duration, Instant as StdInstant};

use bytes::Bytes;
use http::header::{HeaderMap, CONTENT_TYPE};
use http::{Method, StatusCode};
use http_body_util::BodyExt;
use quotaroute_actors::policy::classify::{classify, TransportFailure, UpstreamReply};
use quotaroute_actors::policy::rate_limit_headers::readings_from_headers;
use quotaroute_actors::policy::request::LastAttempt;
use quotaroute_actors::{AttemptResult, RoutedTarget};
use quotaroute_journal::{ApiFormat as JournalFormat, OutcomeClass};
use tokio::time::Instant;

use crate::config::Secret;
use crate::node::app::AppState;
use crate::node::endpoint::Endpoint;
use crate::node::live::LiveConfig;
use crate::node::metrics;
use crate::node::stream_relay::{self, CommittedStream, StreamStart, StreamTiming};
use crate::node::upstream_body::UpstreamBody;
use crate::node::upstream_request;
use crate::proxy::body_rewrite::{rewrite, RequestInfo};
use crate::proxy::content_coding::{content_codings, decode_body};
use crate::proxy::usage::response_usage;
use crate::telemetry::RequestSpan;

/// Largest upstream body the router reads whole (errors and non-streaming answers).
const MAX_UPSTREAM_BODY_BYTES: usize = 64 * 1024 * 1024;

/// The last real upstream failure, which decides the answer when the tries run out (§7).
pub(crate) enum LastFailure {
    Upstream {
        status: StatusCode,
        headers: HeaderMap,
        body: Bytes,
    },
    /// A failure without an upstream answer to pass on, and what the client may be told of
    /// it: never an upstream address or a key command (those are in the attempt's journaled
    /// message).
    Class(OutcomeClass, String),
    /// A non-streaming body over [`MAX_UPSTREAM_BODY_BYTES`]: a `server_error`, answered 502
    /// `upstream_too_large` when it is the last.
    TooLarge(String),
}

impl LastFailure {
    /// What the answer rule (`policy::request::final_answer`) needs of it.
    pub(crate) fn as_last_attempt(&self) -> LastAttempt {
        match self {
            LastFailure::Upstream { status, .. } => LastAttempt::Status(status.as_u16()),
            LastFailure::Class(class, _) => LastAttempt::Class(*class),
            LastFailure::TooLarge(_) => LastAttempt::Class(OutcomeClass::ServerError),
        }
    }
}

/// What one try needs from its request.
pub(crate) struct TryContext<'a> {
    pub app: &'a AppState,
    pub live: &'a LiveConfig,
    pub endpoint: Endpoint,
    pub method: Method,
    /// The model name the client asked for (combo or `provider/model`), for logs.
    pub combo: &'a str,
    /// The parsed body of a routed POST, whose `model` is rewritten per target; `None`: the
    /// body goes as it came (the stored-response endpoints).
    pub info: Option<&'a RequestInfo>,
    pub client_body: &'a Bytes,
    pub client_headers: &'a HeaderMap,
    pub path_and_query: &'a str,
    pub request_id: &'a str,
    pub force_include_usage: bool,
    /// Whether a success's token usage counts (not for `count_tokens` or stored responses).
    pub count_usage: bool,
    pub deadline: Instant,
    /// telemetry: the request's server span (off when not traced).
    pub trace: &'a RequestSpan,
}

impl TryContext<'_> {
    pub(crate) fn anthropic(&self) -> bool {
        self.endpoint.format() == JournalFormat::Anthropic
    }

    fn streaming(&self) -> bool {
        self.info.is_some_and(|info| info.stream)
    }
}

/// How one try against one target ended.
pub(crate) enum Tried {
    /// A stream past its first content: relay it (the attempt is reported when it ends).
    Streaming {
        stream: Box<CommittedStream>,
        result: AttemptResult,
        headers: HeaderMap,
    },
    /// A whole answer for the client (a success, or a client error returned as is).
    Answered {
        result: AttemptResult,
        status: StatusCode,
        headers: HeaderMap,
        body: Bytes,
    },
    /// A failure: report `result`, remember `last`, maybe fail over.
    Failed {
        result: AttemptResult,
        last: LastFailure,
    },
}

pub(crate) fn failed(class: OutcomeClass, status: Option<u16>, message: &str) -> Tried {
    failed_privately(class, status, message, message)
}

/// A failure whose journaled `detail` may name hosts or key commands; the client gets `public`.
pub(crate) fn failed_privately(
    class: OutcomeClass,
    status: Option<u16>,
    detail: &str,
    public: &str,
) -> Tried {
    let mut result = AttemptResult::failure(class, status);
    result.message = Some(detail.to_string());
    Tried::Failed {
        result,
        last: LastFailure::Class(class, public.to_string()),
    }
}

/// One upstream request to `target` with `credential`, classified (behaviour §3, §4).
pub(crate) async fn try_target(
    ctx: &TryContext<'_>,
    target: &RoutedTarget,
    attempt: u32,
    credential: &Secret,
    upstream_time: &mut Duration,
) -> Tried {
    let (Some(provider), Some(auth)) = (
        ctx.live.providers.get(&*target.provider),
        ctx.live.connection_auth.get(&*target.connection),
    ) else {
        // The config changed under this request: a network failure of the target.
        return failed(OutcomeClass::Network, None, "target left the config");
    };
    let upstream_body = match ctx.info {
        Some(info) => rewrite(
            ctx.client_body,
            info,
            &target.model,
            ctx.force_include_usage,
        ),
        None => ctx.client_body.clone(),
    };
    let Ok(mut upstream_request) = upstream_request::build(
        ctx.method.clone(),
        provider,
        (credential, *auth),
        ctx.path_and_query,
        ctx.client_headers,
        ctx.request_id,
        upstream_body,
    ) else {
        return failed(OutcomeClass::Network, None, "bad upstream URL");
    };
    // telemetry: this upstream request's client span; the upstream gets its traceparent.
    let trace = ctx.trace.attempt(target, &provider.base_url);
    trace.inject(upstream_request.headers_mut());
    let done = |class: OutcomeClass, latency: Duration| {
        trace.class(class); // telemetry
        attempt_done(
            ctx.live,
            ctx.request_id,
            ctx.combo,
            target,
            attempt,
            class,
            latency,
        );
    };
    let sent_at = StdInstant::now();
    // A streaming try must show content within `first_token_timeout_ms` of being sent,
    // headers included (§3): a stall before the headers fails over like one after them.
    let first_token_deadline = ctx
        .deadline
        .min(Instant::now() + ctx.live.first_token_timeout);
    let timeout = stream_relay::remaining(if ctx.streaming() {
        first_token_deadline
    } else {
        ctx.deadline
    });
    // The router's clock: the same `now` its policy reads (reset hints, usage windows).
    let now_ms = ctx.app.router().map_or(0, |router| router.clock().now_ms());
    let response = match provider.client.send(upstream_request, timeout).await {
        Ok(response) => response,
        Err(failed_send) => {
            *upstream_time += sent_at.elapsed();
            let class = transport_class(failed_send.failure, ctx.endpoint.format(), now_ms);
            done(class, sent_at.elapsed());
            tracing::debug!(
                request_id = ctx.request_id,
                connection = &*target.connection,
                reason = %failed_send.message,
                "upstream request got no answer"
            );
            return failed_privately(
                class,
                None,
                &failed_send.message,
                "the upstream could not be reached or did not answer",
            );
        }
    };
    let status = response.status();
    trace.status(status.as_u16()); // telemetry
    let headers = response.headers().clone();
    let usage = readings_from_headers(&headers, &target.model, now_ms);
    let codings = match content_codings(&headers) {
        Ok(codings) => codings,
        Err(error) => {
            *upstream_time += sent_at.elapsed();
            done(OutcomeClass::ServerError, sent_at.elapsed());
            return failed(
                OutcomeClass::ServerError,
                Some(status.as_u16()),
                &format!("upstream answered {status}: {error}"),
            );
        }
    };

    if status.is_success() && ctx.streaming() {
        let is_event_stream = headers
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        let start = if is_event_stream {
            let timing = StreamTiming {
                first_event_by: first_token_deadline,
                idle: ctx.live.stream_idle_timeout,
                deadline: ctx.deadline,
            };
            stream_relay::open(
                UpstreamBody::new(response.into_body(), &codings),
                ctx.endpoint.stream_format(),
                ctx.force_include_usage,
                timing,
                crate::node::proxy::target_echoes(ctx.live, target),
            )
            .await
        } else {
            StreamStart::Failed {
                class: OutcomeClass::ServerError,
                message: "asked for a stream, got no event stream".to_string(),
            }
        };
        *upstream_time += sent_at.elapsed();
        return match start {
            StreamStart::Committed(mut stream) => {
                done(OutcomeClass::Success, sent_at.elapsed());
                stream.trace = trace.clone(); // telemetry: the span ends with the stream
                let mut result = AttemptResult::success(status.as_u16(), 0, 0);
                result.stream = true;
                result.usage = usage;
                Tried::Streaming {
                    stream,
                    result,
                    headers,
                }
            }
            StreamStart::Failed { class, message } => {
                done(class, sent_at.elapsed());
                let mut result = AttemptResult::failure(class, Some(status.as_u16()));
                result.stream = true;
                result.message = Some(message.clone());
                result.usage = usage;
                Tried::Failed {
                    result,
                    last: LastFailure::Class(class, message),
                }
            }
        };
    }

    // Not a stream (or an error before one): read the whole body, within this answer's bound
    // and the bound on what all answers hold at once.
    let read = tokio::time::timeout_at(
        ctx.deadline,
        read_upstream_body(response.into_body(), &ctx.app.inner.upstream_buffer),
    )
    .await;
    *upstream_time += sent_at.elapsed();
    let (body, _held) = match read {
        Ok(Ok(read)) => read,
        Ok(Err(BodyRead::TooLarge)) => {
            done(OutcomeClass::ServerError, sent_at.elapsed());
            let message = format!(
                "upstream answered {status} with a body over {} MiB",
                MAX_UPSTREAM_BODY_BYTES >> 20
            );
            let mut result =
                AttemptResult::failure(OutcomeClass::ServerError, Some(status.as_u16()));
            result.message = Some(message.clone());
            return Tried::Failed {
                result,
                last: LastFailure::TooLarge(message),
            };
        }
        Ok(Err(BodyRead::BufferFull)) => {
            done(OutcomeClass::ServerError, sent_at.elapsed());
            return failed(
                OutcomeClass::ServerError,
                Some(status.as_u16()),
                "the router holds too many upstream bodies at once (server.max_upstream_buffer_bytes)",
            );
        }
        Ok(Err(BodyRead::Broke)) | Err(_) => {
            let transport = if read.is_err() {
                TransportFailure::Timeout
            } else {
                TransportFailure::Reset
            };
            let class = transport_class(transport, ctx.endpoint.format(), now_ms);
            done(class, sent_at.elapsed());
            return failed(class, Some(status.as_u16()), "upstream body did not arrive");
        }
    };
    let body = match decode_body(body, &codings, MAX_UPSTREAM_BODY_BYTES).await {
        Ok(body) => body,
        Err(error) => {
            // A body that does not decode is the upstream's fault, whatever its status.
            done(OutcomeClass::ServerError, sent_at.elapsed());
            return failed(
                OutcomeClass::ServerError,
                Some(status.as_u16()),
                &format!("upstream answered {status} with a body that does not decode: {error}"),
            );
        }
    };
    if status.is_success() {
        return match response_usage(ctx.endpoint.format(), &body) {
            Ok(counts) => {
                done(OutcomeClass::Success, sent_at.elapsed());
                trace.answer(&body); // telemetry
                let (tokens_in, tokens_out) = counts
                    .filter(|_| ctx.count_usage)
                    .map_or((0, 0), |c| (c.tokens_in, c.tokens_out));
                let mut result = AttemptResult::success(status.as_u16(), tokens_in, tokens_out);
                result.usage = usage;
                Tried::Answered {
                    result,
                    status,
                    headers,
                    body,
                }
            }
            Err(_) => {
                // A 2xx whose body cannot be parsed is a server error (behaviour §3).
                done(OutcomeClass::ServerError, sent_at.elapsed());
                failed(
                    OutcomeClass::ServerError,
                    Some(status.as_u16()),
                    "upstream answered 2xx with a body that is not JSON",
                )
            }
        };
    }

    let classification = classify(
        &UpstreamReply {
            status: Some(status.as_u16()),
            headers: &headers,
            body: &body,
            transport: None,
            format: ctx.endpoint.format(),
        },
        now_ms,
    );
    let mut class = classification.class;
    if ctx.info.is_none() && class == OutcomeClass::ModelUnavailable {
        // On a stored response a 404 says the response is gone, not the model: the answer.
        class = OutcomeClass::ClientError;
    }
    done(class, sent_at.elapsed());
    let mut result = AttemptResult::failure(class, Some(status.as_u16()));
    result.error_code = classification.error_code;
    result.message = classification.message;
    result.reset_hint_ms = classification.reset_hint_ms;
    result.usage = usage;
    if class == OutcomeClass::ClientError {
        return Tried::Answered {
            result,
            status,
            headers,
            body,
        };
    }
    Tried::Failed {
        result,
        last: LastFailure::Upstream {
            status,
            headers,
            body,
        },
    }
}

/// Why a whole upstream body could not be read.
enum BodyRead {
    TooLarge,
    BufferFull,
    Broke,
}

/// The upstream's whole body, at most [`MAX_UPSTREAM_BODY_BYTES`], with its bytes held in
/// `buffer` (KiB permits) until the returned permit is dropped.
async fn read_upstream_body(
    mut body: hyper::body::Incoming,
    buffer: &tokio::sync::Semaphore,
) -> Result<(Bytes, Option<tokio::sync::SemaphorePermit<'_>>), BodyRead> {
    let mut pieces: Vec<Bytes> = Vec::new();
    let mut total = 0usize;
    let mut held: Option<tokio::sync::SemaphorePermit<'_>> = None;
    let mut held_kib = 0usize;
    while let Some(frame) = body.frame().await {
        let Ok(data) = frame.map_err(|_| BodyRead::Broke)?.into_data() else {
            continue;
        };
        total += data.len();
        if total > MAX_UPSTREAM_BODY_BYTES {
            return Err(BodyRead::TooLarge);
        }
        let need_kib = total.div_ceil(1024);
        if need_kib > held_kib {
            let more = u32::try_from(need_kib - held_kib).map_err(|_| BodyRead::TooLarge)?;
            let permit = buffer
                .try_acquire_many(more)
                .map_err(|_| BodyRead::BufferFull)?;
            match held.as_mut() {
                Some(held) => held.merge(permit),
                None => held = Some(permit),
            }
            held_kib = need_kib;
        }
        pieces.push(data);
    }
    let body = match pieces.len() {
        0 => Bytes::new(),
        1 => pieces.swap_remove(0),
        _ => {
            let mut whole = bytes::BytesMut::with_capacity(total);
            for piece in pieces {
                whole.extend_from_slice(&piece);
            }
            whole.freeze()
        }
    };
    Ok((body, held))
}

/// Metrics and the per-attempt log line (`debug`: per-request logging never costs throughput
/// at `info`). Ids and classes only — never a key or a body.
fn attempt_done(
    live: &LiveConfig,
    request_id: &str,
    combo: &str,
    target: &RoutedTarget,
    attempt: u32,
    class: OutcomeClass,
    latency: Duration,
) {
    if let Some(attempt_metrics) = live.attempt_metrics.get(&*target.connection) {
        metrics::attempt(attempt_metrics, class, latency);
    }
    tracing::debug!(
        request_id,
        combo,
        connection = &*target.connection,
        model = &*target.model,
        attempt,
        class = class.as_str(),
        latency_ms = latency.as_millis() as u64,
        "upstream attempt"
    );
}

/// A transport failure's class, by the one classifier (behaviour §4).
fn transport_class(
    transport: TransportFailure,
    format: JournalFormat,
    now_ms: u64,
) -> OutcomeClass {
    let reply = UpstreamReply {
        status: None,
        headers: &HeaderMap::new(),
        body: &[],
        transport: Some(transport),
        format,
    };
    classify(&reply, now_ms).class
}
