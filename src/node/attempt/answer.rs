//! A whole upstream answer (not a stream, or an error before one), classified (behaviour §3,
//! §4, §14): a 2xx must be JSON (and translate, when the target speaks the other format) and
//! is measured for its usage; anything else is classified by the one classifier and passed on
//! in the client's shape.

use quotaroute_actors::policy::classify::{classify, AttemptFailure, BodyFailure, UpstreamReply};
use quotaroute_actors::{AttemptResult, RoutedTarget};
use quotaroute_journal::OutcomeClass;

use crate::telemetry::AttemptSpan;
use std::sync::Arc;

use crate::wire::missing_route::{says_route_missing, ROUTE_NOT_FOUND};
use crate::wire::translate::{
    answer_summary, error_body, typed_translation, value_translation, Direction, Echo,
};

use super::charge;
use super::shape::{unanswered_openly, Attempted, Payload, TryContext, UpstreamAnswer};
use super::whole_body::read_whole;

/// What a whole answer leaves for the plan and the client (`direction`: the try was
/// translated to the target's format).
pub(super) async fn answered(
    ctx: &TryContext<'_>,
    target: &RoutedTarget,
    (direction, echo): (Option<Direction>, Option<&Arc<Echo>>),
    trace: &AttemptSpan,
    answer: UpstreamAnswer,
) -> Attempted {
    let UpstreamAnswer {
        status,
        headers,
        body,
        codings,
        usage,
        now_ms,
    } = answer;
    // The body's bytes stay held in the upstream buffer until the try ends.
    let (body, _held) = match read_whole(ctx, status, body, &codings).await {
        Ok(read) => read,
        Err(failed) => return failed,
    };
    if status.is_success() {
        let created = now_ms / 1000;
        let no_echo = Echo::default();
        let echo = echo.map_or(&no_echo, |echo| echo);
        // A translated answer its typed shape takes is read once: the client's bytes and the
        // summary below (the same model and counts `response_summary` reads).
        let typed =
            direction.and_then(|direction| typed_translation(direction, &body, created, echo));
        let (summary, translated) = match typed {
            Some((translated, summary)) => (summary, Some(translated)),
            None => match answer_summary(&body) {
                Ok(summary) => (summary, None),
                // A 2xx whose body cannot be parsed is a server error (behaviour §3).
                Err(_) => {
                    return unanswered_openly(
                        AttemptFailure::Body(BodyFailure::NotJson),
                        Some(status.as_u16()),
                        "upstream answered 2xx with a body that is not JSON",
                    )
                }
            },
        };
        trace.answer(summary.model, summary.counts.as_ref()); // telemetry
        let mut result = charge::measured(ctx, target, status.as_u16(), &summary, &body);
        result.usage = usage;
        // Usage above was the upstream's own; the client reads its own format.
        let body = match (translated, direction) {
            (Some(translated), _) => translated,
            (None, None) => body,
            (None, Some(direction)) => match value_translation(direction, &body, created, echo) {
                Ok(translated) => translated,
                Err(error) => {
                    return unanswered_openly(
                        AttemptFailure::Body(BodyFailure::NotJson),
                        Some(status.as_u16()),
                        &format!(
                            "upstream answered 2xx with a body that does not translate: {error}"
                        ),
                    )
                }
            },
        };
        return Attempted {
            result,
            payload: Payload::Answer {
                status,
                headers,
                body,
            },
            translation: None,
            bills_client: true,
            sent: true,
        };
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
    // A 404 that says the route does not exist: the host lacks that API, the model is there
    // (behaviour §14). No lockout; policy's `RouteNotServed` rule learns it and tries another API.
    let route_missing = status == http::StatusCode::NOT_FOUND && says_route_missing(&body);
    if route_missing {
        class = OutcomeClass::ClientError;
    }
    let mut result = AttemptResult::failure(class, Some(status.as_u16()));
    result.error_code = match route_missing {
        true => Some(ROUTE_NOT_FOUND.to_owned()),
        false => classification.error_code,
    };
    result.message = classification.message;
    result.reset_hint_ms = classification.reset_hint_ms;
    result.usage = usage;
    // The error in the client's shape, with the upstream's status and message.
    let body = match direction {
        Some(direction) => error_body(direction, status.as_u16(), &body),
        None => body,
    };
    Attempted {
        result,
        payload: Payload::Answer {
            status,
            headers,
            body,
        },
        translation: None,
        bills_client: false,
        sent: true,
    }
}
