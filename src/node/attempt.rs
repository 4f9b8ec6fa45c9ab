//! One upstream try against one target (behaviour §3, §4): build the request with the
//! connection's credential, send it, read the answer (decoded when compressed) or open the
//! stream until its first content, and classify what came back — every class by the one
//! classifier (`classify` for an answer, `failure_class` for a typed failure without one).
//! Returns one shape, [`Attempted`]: the classified result and what the client may get of it.
//! Knows nothing of failover: the decision's plan says what follows.

use std::time::{Duration, Instant as StdInstant};

use bytes::Bytes;
use http::header::{HeaderMap, CONTENT_TYPE};
use http::{Method, StatusCode};
use http_body_util::BodyExt;
use quotaroute_actors::policy::classify::TransportFailure;
use quotaroute_actors::policy::classify::{
    classify, failure_class, AttemptFailure, BodyFailure, UpstreamReply,
};
use quotaroute_actors::policy::rate_limit_headers::readings_from_headers;
use quotaroute_actors::policy::request::LastAttempt;
use quotaroute_actors::{AttemptResult, RoutedTarget};
use quotaroute_journal::{ApiFormat as JournalFormat, OutcomeClass};
use tokio::time::Instant;

use crate::api_error::{ApiError, ApiErrorKind};
use crate::config::Secret;
use crate::node::app::AppState;
use crate::node::encrypted_turn::EncryptedTurn;
use crate::node::endpoint::Endpoint;
use crate::node::live::LiveConfig;
use crate::node::metrics;
use crate::node::stream_relay::{self, CommittedStream, StreamStart, StreamTiming};
use crate::node::upstream_request;
use crate::telemetry::RequestSpan;
use crate::upstream::body::UpstreamBody;
use crate::wire::body_rewrite::{rewrite, RequestInfo};
use crate::wire::content_coding::{content_codings, decode_body};
use crate::wire::item_seal::{ItemSealer, Items};
use crate::wire::stream_watch::StreamFormat;
use crate::wire::translate::{
    count_tokens_body, error_body, translate_answer, translate_request, Direction, ReasoningKey,
    RequestSettings, StreamTranslator, TranslateError,
};
use crate::wire::usage::response_summary;

/// Largest upstream body the router reads whole (errors and non-streaming answers).
const MAX_UPSTREAM_BODY_BYTES: usize = 64 * 1024 * 1024;

/// The last real upstream failure, which decides the answer when the tries ran out (§7).
pub(crate) enum LastFailure {
    Upstream {
        status: StatusCode,
        headers: HeaderMap,
        body: Bytes,
    },
    /// A failure without an upstream answer to pass on, and what the client may be told of
    /// it: never an upstream address or a key command (those are in the attempt's journaled
    /// message).
    Failed {
        class: OutcomeClass,
        failure: Option<AttemptFailure>,
        public: String,
    },
}

impl LastFailure {
    /// What the answer rule (`policy::request::final_answer`) needs of it.
    pub(crate) fn as_last_attempt(&self) -> LastAttempt {
        match self {
            LastFailure::Upstream { status, .. } => LastAttempt::Status(status.as_u16()),
            LastFailure::Failed {
                failure: Some(AttemptFailure::Body(BodyFailure::TooLarge)),
                ..
            } => LastAttempt::TooLarge,
            LastFailure::Failed { class, .. } => LastAttempt::Class(*class),
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
    /// The admitted client's ticket, whose usage a success counts when `count_usage`.
    pub client: Option<&'a std::sync::Arc<crate::clients::ClientTicket>>,
    /// The request's encrypted items (behaviour §10), when it has any: each target gets only
    /// those it can read.
    pub encrypted: Option<&'a crate::node::encrypted_turn::EncryptedTurn>,
}

impl TryContext<'_> {
    /// The admitted client's id for log lines (`-`: none).
    pub(crate) fn client_id(&self) -> &str {
        self.client.map_or("-", |ticket| &ticket.tag().id)
    }

    pub(crate) fn anthropic(&self) -> bool {
        self.endpoint.format() == JournalFormat::Anthropic
    }

    fn streaming(&self) -> bool {
        self.info.is_some_and(|info| info.stream)
    }
}

/// How one try against one target ended: its classified result (for the plan and the report)
/// and what the client may get of it.
pub(crate) struct Attempted {
    pub result: AttemptResult,
    pub payload: Payload,
    /// The translation the try went through and what it dropped (behaviour §14).
    pub translation: Option<Translation>,
}

/// A try served by a target of the other format.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Translation {
    pub direction: Direction,
    /// Tuning parameters left out, in the client's names (`x-quotaroute-dropped`).
    pub dropped: Vec<String>,
    /// Thinking blocks the try carried back to their connection (a Responses client's
    /// reasoning items): a 400 refusing their signatures is retried without them.
    pub thinking_restored: u32,
}

/// What a try leaves for the client.
pub(crate) enum Payload {
    /// A stream past its first content, to relay.
    Stream {
        stream: Box<CommittedStream>,
        headers: HeaderMap,
    },
    /// A whole upstream answer: a success or a client error to deliver, or a failure to pass
    /// through if it is the last.
    Answer {
        status: StatusCode,
        headers: HeaderMap,
        body: Bytes,
    },
    /// No answer to pass on.
    Nothing {
        failure: Option<AttemptFailure>,
        public: String,
    },
}

impl Payload {
    pub(crate) fn is_stream(&self) -> bool {
        matches!(self, Payload::Stream { .. })
    }

    /// What the answer remembers of this try when it failed.
    pub(crate) fn into_last_failure(self, class: OutcomeClass) -> LastFailure {
        match self {
            Payload::Answer {
                status,
                headers,
                body,
            } => LastFailure::Upstream {
                status,
                headers,
                body,
            },
            Payload::Nothing { failure, public } => LastFailure::Failed {
                class,
                failure,
                public,
            },
            Payload::Stream { .. } => LastFailure::Failed {
                class,
                failure: None,
                public: "the stream failed".to_string(),
            },
        }
    }
}

/// A try that failed without an answer: its class from `failure` (never picked by hand), the
/// journaled `detail` (it may name hosts or key commands) and what the client is told.
pub(crate) fn unanswered(
    failure: AttemptFailure,
    status: Option<u16>,
    detail: &str,
    public: &str,
) -> Attempted {
    let class = failure_class(failure);
    let mut result = AttemptResult::failure(class, status);
    result.message = Some(detail.to_string());
    Attempted {
        result,
        payload: Payload::Nothing {
            failure: Some(failure),
            public: public.to_string(),
        },
        translation: None,
    }
}

/// [`unanswered`] with nothing to hide from the client.
pub(crate) fn unanswered_openly(
    failure: AttemptFailure,
    status: Option<u16>,
    message: &str,
) -> Attempted {
    unanswered(failure, status, message, message)
}

/// One upstream request to `target` with `credential`, classified (behaviour §3, §4).
pub(crate) async fn try_target(
    ctx: &TryContext<'_>,
    target: &RoutedTarget,
    attempt: u32,
    credential: &Secret,
    upstream_time: &mut Duration,
) -> Attempted {
    let (Some(provider), Some(auth)) = (
        ctx.live.providers.get(&*target.provider),
        ctx.live.connection_auth.get(&*target.connection),
    ) else {
        // The config changed under this request: the target cannot be tried.
        return unanswered_openly(AttemptFailure::NotSent, None, "target left the config");
    };
    // `count_tokens` has no OpenAI counterpart: counted here, nothing sent (behaviour §14).
    if ctx.endpoint == Endpoint::CountTokens && target.format != ctx.endpoint.format() {
        return counted_locally(ctx.client_body);
    }
    // A target of the other format: the request in its format, to its own path (behaviour
    // §14); otherwise the byte-preserving splice.
    let direction = ctx
        .info
        .and_then(|_| ctx.endpoint.translation_to(target.format));
    let mut translation = None;
    let mut include_usage = false;
    let mut translated_left_out = 0;
    let (upstream_body, path_and_query) = match (ctx.info, direction) {
        (Some(info), None) => (
            rewrite(
                ctx.client_body,
                info,
                &target.model,
                ctx.force_include_usage,
            ),
            ctx.path_and_query,
        ),
        (Some(_), Some(direction)) => {
            // Thinking goes back only to the connection that made it, and not at all after
            // a refused signature (`encrypted_retry`).
            let reasoning =
                (!ctx.encrypted.is_some_and(EncryptedTurn::leaves_all_out)).then(|| ReasoningKey {
                    key: &ctx.live.seal_key,
                    connection: &target.connection,
                });
            let settings = RequestSettings {
                model: &target.model,
                default_max_tokens: ctx.live.translation.default_max_tokens,
                reasoning,
            };
            match translate_request(direction, ctx.client_body, settings) {
                Ok(translated) => {
                    include_usage = translated.include_usage;
                    translated_left_out = translated.reasoning.left_out;
                    translation = Some(Translation {
                        direction,
                        dropped: translated.dropped,
                        thinking_restored: translated.reasoning.restored,
                    });
                    (translated.body, direction.upstream_path())
                }
                Err(error) => return refused(direction, &error),
            }
        }
        (None, _) => (ctx.client_body.clone(), ctx.path_and_query),
    };
    // Only the encrypted items this target can read (behaviour §10); a translated body's
    // were opened (or left out) by the translation.
    let (upstream_body, items_left_out) = match ctx.encrypted {
        Some(encrypted) if direction.is_none() => {
            encrypted.body_for(upstream_body, &target.connection)
        }
        _ => (upstream_body, translated_left_out),
    };
    let Ok(mut upstream_request) = upstream_request::build(
        ctx.method.clone(),
        provider,
        (credential, *auth),
        path_and_query,
        ctx.client_headers,
        ctx.request_id,
        upstream_body,
    ) else {
        return unanswered_openly(AttemptFailure::NotSent, None, "bad upstream URL");
    };
    if let Some(direction) = direction {
        translated_headers(direction, upstream_request.headers_mut());
    }
    // telemetry: this upstream request's client span; the upstream gets its traceparent.
    let trace = ctx.trace.attempt(target, &provider.span_attributes);
    trace.inject(upstream_request.headers_mut());
    let sent_at = StdInstant::now();
    // Every way this try ends goes through here: metrics and the log line, then the shape.
    let end = |mut attempted: Attempted, upstream_time: &mut Duration| {
        if let Some(translation) = &translation {
            attempted.result.translated = Some(translation.direction.label().to_string());
            attempted.translation = Some(translation.clone());
        }
        attempted.result.items_left_out = items_left_out;
        trace.class(attempted.result.class); // telemetry
        *upstream_time += sent_at.elapsed();
        attempt_done(
            ctx,
            target,
            attempt,
            attempted.result.class,
            sent_at.elapsed(),
        );
        attempted
    };
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
            tracing::debug!(
                request_id = ctx.request_id,
                client = ctx.client_id(),
                connection = &*target.connection,
                reason = %failed_send.message,
                "upstream request got no answer"
            );
            return end(
                unanswered(
                    AttemptFailure::Transport(failed_send.failure),
                    None,
                    &failed_send.message,
                    "the upstream could not be reached or did not answer",
                ),
                upstream_time,
            );
        }
    };
    let status = response.status();
    trace.status(status.as_u16()); // telemetry
                                   // The headers are kept (relayed, classified); the body is read on its own.
    let (http::response::Parts { headers, .. }, response_body) = response.into_parts();
    let usage = readings_from_headers(&headers, &target.model, now_ms);
    let codings = match content_codings(&headers) {
        Ok(codings) => codings,
        Err(error) => {
            return end(
                unanswered_openly(
                    AttemptFailure::Body(BodyFailure::Undecodable),
                    Some(status.as_u16()),
                    &format!("upstream answered {status}: {error}"),
                ),
                upstream_time,
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
            let translator = direction
                .map(|direction| StreamTranslator::new(direction, include_usage, now_ms / 1000));
            stream_relay::open(
                UpstreamBody::new(response_body, &codings),
                upstream_stream_format(ctx.endpoint, direction),
                ctx.force_include_usage && direction.is_none(),
                timing,
                ctx.live.echoes_of(&target.connection),
                translator,
            )
            .await
        } else {
            StreamStart::Failed {
                class: failure_class(AttemptFailure::Body(BodyFailure::NotAnEventStream)),
                failure: Some(AttemptFailure::Body(BodyFailure::NotAnEventStream)),
                message: "asked for a stream, got no event stream".to_string(),
            }
        };
        let mut attempted = match start {
            StreamStart::Committed(mut stream) => {
                stream.trace = trace.clone(); // telemetry: the span ends with the stream
                if ctx.endpoint.is_responses() {
                    stream.sealer = Some(ItemSealer::new(
                        ctx.live.seal_key.clone(),
                        target.connection.clone(),
                        match direction {
                            Some(_) => Items::Translated,
                            None => Items::Upstream,
                        },
                    ));
                }
                let mut result = AttemptResult::success(status.as_u16(), 0, 0);
                result.usage = usage;
                Attempted {
                    result,
                    payload: Payload::Stream { stream, headers },
                    translation: None,
                }
            }
            StreamStart::Failed {
                class,
                failure,
                message,
            } => {
                let mut result = AttemptResult::failure(class, Some(status.as_u16()));
                result.message = Some(message.clone());
                result.usage = usage;
                Attempted {
                    result,
                    payload: Payload::Nothing {
                        failure,
                        public: message,
                    },
                    translation: None,
                }
            }
        };
        attempted.result.stream = true;
        return end(attempted, upstream_time);
    }

    // Not a stream (or an error before one): read the whole body, within this answer's bound
    // and the bound on what all answers hold at once.
    let read = tokio::time::timeout_at(
        ctx.deadline,
        read_upstream_body(response_body, &ctx.app.inner.upstream_buffer),
    )
    .await;
    let (body, _held) = match read {
        Ok(Ok(read)) => read,
        failed => {
            let (failure, message) = match failed {
                Ok(Err(BodyRead::TooLarge)) => (
                    AttemptFailure::Body(BodyFailure::TooLarge),
                    format!(
                        "upstream answered {status} with a body over {} MiB",
                        MAX_UPSTREAM_BODY_BYTES >> 20
                    ),
                ),
                Ok(Err(BodyRead::BufferFull)) => (
                    AttemptFailure::Body(BodyFailure::BufferFull),
                    "the router holds too many upstream bodies at once (server.max_upstream_buffer_bytes)".to_string(),
                ),
                Ok(Err(BodyRead::Broke)) | Ok(Ok(_)) => (
                    AttemptFailure::Transport(TransportFailure::Reset),
                    "upstream body did not arrive".to_string(),
                ),
                Err(_) => (
                    AttemptFailure::Transport(TransportFailure::Timeout),
                    "upstream body did not arrive in time".to_string(),
                ),
            };
            return end(
                unanswered_openly(failure, Some(status.as_u16()), &message),
                upstream_time,
            );
        }
    };
    let body = match decode_body(body, &codings, MAX_UPSTREAM_BODY_BYTES).await {
        Ok(body) => body,
        Err(error) => {
            // A body that does not decode is the upstream's fault, whatever its status.
            return end(
                unanswered_openly(
                    AttemptFailure::Body(BodyFailure::Undecodable),
                    Some(status.as_u16()),
                    &format!(
                        "upstream answered {status} with a body that does not decode: {error}"
                    ),
                ),
                upstream_time,
            );
        }
    };
    if status.is_success() {
        let Ok(summary) = response_summary(&body) else {
            // A 2xx whose body cannot be parsed is a server error (behaviour §3).
            return end(
                unanswered_openly(
                    AttemptFailure::Body(BodyFailure::NotJson),
                    Some(status.as_u16()),
                    "upstream answered 2xx with a body that is not JSON",
                ),
                upstream_time,
            );
        };
        trace.answer(summary.model, summary.counts.as_ref()); // telemetry
                                                              // What the answer is charged: its usage checked (clamped, logged), or an estimate
                                                              // when it reported none (behaviour §11).
        let charged = ctx.count_usage.then(|| {
            let reported = summary.counts.unwrap_or_default();
            // The answer's text is measured only when its usage is no report (the usual answer
            // has one: nothing is scanned).
            let estimate_needed = summary.counts.is_none() || reported.flaws.any_unreadable();
            let content_bytes = if estimate_needed {
                crate::wire::content_bytes::content_text_bytes(ctx.endpoint.stream_format(), &body)
            } else {
                0
            };
            crate::node::usage_charge::charged(
                reported,
                summary.counts.is_some(),
                ctx.client_body.len() as u64,
                content_bytes as u64,
                ctx.live.usage_max_tokens,
                &target.connection,
            )
        });
        let counts = charged.map(|charged| charged.counts);
        let (tokens_in, tokens_out) = counts.map_or((0, 0), |c| (c.tokens_in, c.tokens_out));
        let mut result = AttemptResult::success(status.as_u16(), tokens_in, tokens_out);
        if let Some(charged) = charged {
            result.tokens_cached = charged.counts.tokens_cached;
            result.tokens_cache_write = charged.counts.tokens_cache_write;
            result.usage_estimated = charged.estimated;
        }
        if let Some(m) = ctx.live.attempt_metrics.get(&*target.connection) {
            m.input_tokens
                .record(tokens_in, result.tokens_cached, result.tokens_cache_write);
        }
        if let (Some(ticket), Some(router)) = (ctx.client, ctx.app.router()) {
            result.cost_usd = crate::node::client_gate::record_usage(
                router,
                ticket,
                ctx.request_id,
                ctx.combo,
                target,
                &result,
            );
        }
        result.usage = usage;
        // Usage above was the upstream's own; the client reads its own format.
        let body = match direction {
            None => body,
            Some(direction) => match translate_answer(direction, &body, now_ms / 1000) {
                Ok(translated) => translated,
                Err(error) => {
                    return end(
                        unanswered_openly(
                            AttemptFailure::Body(BodyFailure::NotJson),
                            Some(status.as_u16()),
                            &format!(
                            "upstream answered 2xx with a body that does not translate: {error}"
                        ),
                        ),
                        upstream_time,
                    )
                }
            },
        };
        return end(
            Attempted {
                result,
                payload: Payload::Answer {
                    status,
                    headers,
                    body,
                },
                translation: None,
            },
            upstream_time,
        );
    }

    let classification = classify(
        &UpstreamReply {
            status: Some(status.as_u16()),
            headers: &headers,
            body: &body,
            transport: None,
            // The upstream's own shape, before any translation (behaviour §14).
            format: target.format,
        },
        now_ms,
    );
    let mut class = classification.class;
    if ctx.info.is_none() && class == OutcomeClass::ModelUnavailable {
        // On a stored response a 404 says the response is gone, not the model: the answer.
        class = OutcomeClass::ClientError;
    }
    let mut result = AttemptResult::failure(class, Some(status.as_u16()));
    result.error_code = classification.error_code;
    result.message = classification.message;
    result.reset_hint_ms = classification.reset_hint_ms;
    result.usage = usage;
    // The error in the client's shape, with the upstream's status and message.
    let body = match direction {
        Some(direction) => error_body(direction, status.as_u16(), &body),
        None => body,
    };
    end(
        Attempted {
            result,
            payload: Payload::Answer {
                status,
                headers,
                body,
            },
            translation: None,
        },
        upstream_time,
    )
}

/// A request that cannot be carried to `direction`'s target format: 400 in the client's
/// shape, before anything is sent (behaviour §14). A client error: no failover, no state.
fn refused(direction: Direction, error: &TranslateError) -> Attempted {
    let kind = match error {
        TranslateError::Unsupported { .. } => ApiErrorKind::UnsupportedParameter,
        TranslateError::Invalid(_) => ApiErrorKind::InvalidRequest,
    };
    let error = ApiError::new(kind, error.to_string());
    let mut headers = HeaderMap::new();
    headers.insert(
        CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    let mut result = AttemptResult::failure(OutcomeClass::ClientError, Some(400));
    result.error_code = Some(kind.code().to_string());
    result.message = Some(format!("not sent: {}", error.message));
    result.translated = Some(direction.label().to_string());
    Attempted {
        result,
        payload: Payload::Answer {
            status: StatusCode::BAD_REQUEST,
            headers,
            body: Bytes::from(error.body(direction.client_is_anthropic())),
        },
        translation: Some(Translation {
            direction,
            dropped: Vec::new(),
            thinking_restored: 0,
        }),
    }
}

/// A `count_tokens` answered by the router's own tokenizer estimate (no upstream request).
fn counted_locally(body: &Bytes) -> Attempted {
    let mut headers = HeaderMap::new();
    headers.insert(
        CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    match count_tokens_body(body) {
        Ok(counted) => Attempted {
            result: AttemptResult::success(200, 0, 0),
            payload: Payload::Answer {
                status: StatusCode::OK,
                headers,
                body: Bytes::from(counted.to_string()),
            },
            translation: None,
        },
        Err(error) => {
            let error = ApiError::new(ApiErrorKind::InvalidRequest, error.to_string());
            let mut result = AttemptResult::failure(OutcomeClass::ClientError, Some(400));
            result.message = Some(format!("not sent: {}", error.message));
            Attempted {
                result,
                payload: Payload::Answer {
                    status: StatusCode::BAD_REQUEST,
                    headers,
                    body: Bytes::from(error.body(true)),
                },
                translation: None,
            }
        }
    }
}

/// The stream format the upstream speaks: the endpoint's, or the target's when translated.
fn upstream_stream_format(endpoint: Endpoint, direction: Option<Direction>) -> StreamFormat {
    match direction {
        None => endpoint.stream_format(),
        Some(Direction::ChatToMessages | Direction::ResponsesToMessages) => StreamFormat::Anthropic,
        Some(Direction::MessagesToChat) => StreamFormat::OpenAiChat,
    }
}

/// The headers a translated request needs: Anthropic's required `anthropic-version` on the
/// way to Messages; none of Anthropic's own on the way to Chat Completions.
fn translated_headers(direction: Direction, headers: &mut HeaderMap) {
    const VERSION: http::HeaderName = http::HeaderName::from_static("anthropic-version");
    if direction.client_is_anthropic() {
        headers.remove(VERSION);
        headers.remove("anthropic-beta");
    } else if !headers.contains_key(VERSION) {
        headers.insert(VERSION, http::HeaderValue::from_static("2023-06-01"));
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
    ctx: &TryContext<'_>,
    target: &RoutedTarget,
    attempt: u32,
    class: OutcomeClass,
    latency: Duration,
) {
    if let Some(attempt_metrics) = ctx.live.attempt_metrics.get(&*target.connection) {
        metrics::attempt(attempt_metrics, class, latency);
    }
    tracing::debug!(
        request_id = ctx.request_id,
        combo = ctx.combo,
        client = ctx.client_id(),
        connection = &*target.connection,
        model = &*target.model,
        attempt,
        class = class.as_str(),
        latency_ms = latency.as_millis() as u64,
        "upstream attempt"
    );
}
