//! A streaming try's start (behaviour §3): an event stream is opened until its first content
//! (within `first_token_timeout_ms` of being sent) and committed, translated on the way when
//! the target speaks the other format, its Responses items sealed; anything else a streaming
//! try gets from a 2xx is a failure of the upstream.

use quotaroute_actors::policy::classify::{failure_class, AttemptFailure, BodyFailure};
use quotaroute_actors::{AttemptResult, RoutedTarget};
use tokio::time::Instant;

use crate::node::endpoint::Endpoint;
use crate::node::stream_relay::{self, StreamStart, StreamTiming};
use crate::telemetry::AttemptSpan;
use crate::upstream::body::UpstreamBody;
use crate::wire::item_seal::{ItemSealer, Items};
use crate::wire::stream_watch::StreamFormat;
use std::sync::Arc;

use crate::wire::translate::{Api, Direction, Echo, StreamTranslator};

use super::shape::{Attempted, Payload, TryContext, UpstreamAnswer};

/// How a stream the client asked for began (`direction`: translated to the target's format,
/// `include_usage`: the translation asked the upstream for usage).
pub(super) async fn start(
    ctx: &TryContext<'_>,
    target: &RoutedTarget,
    (direction, echo): (Option<Direction>, Option<&Arc<Echo>>),
    include_usage: bool,
    trace: &AttemptSpan,
    answer: UpstreamAnswer,
    first_event_by: Instant,
) -> Attempted {
    let UpstreamAnswer {
        status,
        headers,
        body,
        codings,
        usage,
        now_ms,
    } = answer;
    let is_event_stream = headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    let start = if is_event_stream {
        let timing = StreamTiming {
            first_event_by,
            idle: ctx.live.stream_idle_timeout,
            deadline: ctx.deadline,
        };
        let translator = direction.map(|direction| {
            let echo = echo.cloned().unwrap_or_default();
            StreamTranslator::new(direction, include_usage, now_ms / 1000, echo)
        });
        stream_relay::open(
            UpstreamBody::new(body, &codings),
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
                                          // Encrypted items sealed (§10, §14), a Gemini stream's `thoughtSignature`s (§15).
            let items = match (ctx.endpoint.is_responses(), direction) {
                (true, Some(_)) => Some(Items::Translated),
                (true, None) => Some(Items::Upstream),
                (false, None) if ctx.endpoint.is_gemini() => Some(Items::GeminiSignatures),
                (false, Some(_)) if ctx.endpoint.is_gemini() => Some(Items::GeminiTranslated),
                (false, Some(_)) if ctx.endpoint == Endpoint::Messages => {
                    Some(Items::MessagesTranslated)
                }
                (false, _) => None,
            };
            if let Some(items) = items {
                stream.sealer = Some(ItemSealer::new(
                    ctx.live.seal_key.clone(),
                    ctx.seal_client(),
                    target.connection.clone(),
                    items,
                ));
            }
            let mut result = AttemptResult::success(status.as_u16(), 0, 0);
            result.usage = usage;
            Attempted {
                result,
                payload: Payload::Stream { stream, headers },
                translation: None,
                // A stream counts its usage when it ends (`stream_relay`).
                bills_client: false,
                sent: true,
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
                bills_client: false,
                sent: true,
            }
        }
    };
    attempted.result.stream = true;
    attempted
}

/// The stream format the upstream speaks: the endpoint's, or the target's when translated.
fn upstream_stream_format(endpoint: Endpoint, direction: Option<Direction>) -> StreamFormat {
    match direction {
        None => endpoint.stream_format(),
        Some(direction) => match direction.target {
            Api::Chat => StreamFormat::OpenAiChat,
            Api::Responses => StreamFormat::OpenAiResponses,
            Api::Messages => StreamFormat::Anthropic,
            Api::Gemini => StreamFormat::Gemini,
        },
    }
}
