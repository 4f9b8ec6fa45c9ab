//! The try loop (behaviour §3, §7): the decision's targets tried in order until one serves
//! or the tries run out. After each try the decision's plan alone says what follows
//! (`Decision::after_attempt`, which also reports the try); this only does what the step says.

use std::time::{Duration, Instant as StdInstant};

use axum::response::Response;
use http::header::HeaderValue;
use http::StatusCode;
use quotaroute_actors::policy::request::Step;
use quotaroute_actors::Decision;
use quotaroute_journal::OutcomeClass;
use tokio::time::Instant;

use crate::node::attempt::{self, charge, Attempted, LastFailure, Payload, TryContext};
use crate::node::metrics;
use crate::node::reply::{self, RouteHeaders};

use super::delivery::{deliver, overhead_us, stream_response};
use super::error_answers::{final_failure, PoolNow};

/// Tries the decision's targets in order until one serves or the tries run out (behaviour §3,
/// §7). After each try the decision's plan alone says what follows (`Decision::after_attempt`,
/// which also reports the try); this only does what the step says.
pub(crate) async fn serve_tries(
    ctx: &TryContext<'_>,
    mut decision: Decision,
    route: &mut RouteHeaders,
    started: StdInstant,
) -> Response {
    let mut upstream_time = Duration::ZERO;
    let mut last_failure: Option<LastFailure> = None;
    let mut last_provider: Option<std::sync::Arc<str>> = None;
    // Tries answered here without sending: `x-quotaroute-attempts` counts upstream requests.
    let mut unsent = 0;
    while let Some(target) = decision.current().cloned() {
        route.connection = Some(target.connection.clone());
        route.model = Some(target.model.clone());
        route.attempts = decision.attempt().saturating_sub(unsent);
        let Attempted {
            result,
            payload,
            translation,
            bills_client,
            sent,
        } = attempt::try_target(ctx, &mut decision, &target, &mut upstream_time).await;
        if !sent {
            unsent += 1;
            route.attempts = route.attempts.saturating_sub(1);
        }
        // The answering try's translation names itself (`x-quotaroute-translated`/`-dropped`).
        route.translated = translation.as_ref().map(|t| t.direction.label());
        route.dropped = translation
            .as_ref()
            .filter(|t| !t.dropped.is_empty())
            .map(|t| t.dropped.join(","));
        let class = result.class;
        let time_left = Instant::now() < ctx.deadline;
        let step = decision
            .after_attempt(result, payload.is_stream(), time_left, |result| {
                // The client pays for what it is given, once the plan gives it (behaviour §11).
                if bills_client {
                    charge::bill(ctx, &target, result);
                }
            })
            .await;
        match (step, payload) {
            (Step::Stream, Payload::Stream { stream, headers }) => {
                if let Some(translation) = &translation {
                    metrics::translated(translation.direction);
                }
                return stream_response(
                    ctx,
                    decision,
                    &target,
                    *stream,
                    headers,
                    route,
                    started,
                    upstream_time,
                );
            }
            (
                Step::Deliver,
                Payload::Answer {
                    status,
                    headers,
                    body,
                },
            ) => {
                route.overhead_us = overhead_us(started, upstream_time);
                metrics::request_finished(ctx.endpoint, status.as_u16());
                if let Some(translation) = &translation {
                    metrics::translated(translation.direction);
                }
                if class != OutcomeClass::Success {
                    if !sent {
                        // Refused before sending: no connection or upstream model saw it.
                        route.connection = None;
                        route.model = None;
                    }
                    // A client error is returned as the upstream sent it.
                    return reply::passthrough(status, &headers, &body, ctx.live, route);
                }
                return deliver(ctx, &target, status, headers, body, route);
            }
            (step, payload) => {
                last_failure = Some(payload.into_last_failure(class));
                last_provider = Some(target.provider.clone());
                if step != Step::Failover || !matches!(decision.failover().await, Ok(Some(_))) {
                    break;
                }
            }
        }
    }

    route.attempts = decision.attempt().saturating_sub(unsent);
    route.overhead_us = overhead_us(started, upstream_time);
    let pool = pool_after_429(ctx, &decision, last_failure.as_ref());
    let mut response = final_failure(
        last_failure,
        last_provider.as_deref(),
        ctx.anthropic(),
        ctx.live,
        route,
        &decision,
        pool,
    );
    if response.status() == StatusCode::TOO_MANY_REQUESTS {
        advise_passed_through_429(ctx, route, &mut response).await;
    }
    metrics::request_finished(ctx.endpoint, response.status().as_u16());
    response
}

/// When the tries ended on an upstream's 429: every target the request could use, if all are
/// blocked now (the tries' lockouts are applied before the answer: read-your-writes), so the
/// answer can say how long the pool is out (behaviour §7). A rare answer: reading the
/// router's state for it costs nothing on the paths that serve.
fn pool_after_429(
    ctx: &TryContext<'_>,
    decision: &Decision,
    last_failure: Option<&LastFailure>,
) -> Option<PoolNow> {
    let Some(LastFailure::Upstream { status, .. }) = last_failure else {
        return None;
    };
    if *status != StatusCode::TOO_MANY_REQUESTS {
        return None;
    }
    let router = ctx.app.router()?;
    let mut targets: Vec<(&str, &str)> = decision
        .targets()
        .iter()
        .map(|target| (&*target.connection, &*target.model))
        .chain(
            decision
                .skipped()
                .iter()
                .map(|skip| (skip.connection.as_str(), skip.model.as_str())),
        )
        .collect();
    targets.sort_unstable();
    targets.dedup();
    let blocked = router.all_blocked(&targets)?;
    Some(PoolNow {
        blocked,
        now_ms: router.clock().now_ms(),
    })
}

/// A 429 passed through from an upstream that sent no `Retry-After` gets the router's own,
/// from the lock it just learned on that (connection, model) (behaviour §7); beyond
/// `client_retry_max_ms` it also says `x-should-retry: false`.
async fn advise_passed_through_429(
    ctx: &TryContext<'_>,
    route: &RouteHeaders,
    response: &mut Response,
) {
    let headers = response.headers();
    if headers.contains_key(http::header::RETRY_AFTER) || headers.contains_key("retry-after-ms") {
        return;
    }
    let (Some(router), Some(connection), Some(model)) =
        (ctx.app.router(), &route.connection, &route.model)
    else {
        return;
    };
    // The one lock it is about, not the whole state: a read of the recorder's fold holds the
    // request path meanwhile.
    let Some(remaining_ms) = router.lock_remaining_ms(connection, model) else {
        return;
    };
    let headers = response.headers_mut();
    if let Ok(value) = HeaderValue::from_str(&remaining_ms.div_ceil(1000).to_string()) {
        headers.insert(http::header::RETRY_AFTER, value);
    }
    if remaining_ms > ctx.live.client_retry_max_ms {
        headers.insert("x-should-retry", HeaderValue::from_static("false"));
    }
}
