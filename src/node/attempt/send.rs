//! One upstream request of a try (behaviour §3, §4): the request made for the target
//! (`outgoing`), sent with the credential it is given, and what came back handed to the
//! stream's start (`stream_start`) or the whole answer's handling (`answer`) — every class by
//! the one classifier. Every way a request ends passes [`Sent::end`]: metrics, the log line,
//! the span. Knows nothing of retries or failover: `try_target` and the decision's plan say
//! what follows.

use std::time::{Duration, Instant as StdInstant};

use quotaroute_actors::policy::classify::{AttemptFailure, BodyFailure};
use quotaroute_actors::policy::rate_limit_headers::readings_from_headers;
use quotaroute_actors::RoutedTarget;
use quotaroute_journal::OutcomeClass;
use tokio::time::Instant;

use crate::config::Secret;
use crate::node::endpoint::Endpoint;
use crate::node::metrics;
use crate::telemetry::AttemptSpan;
use crate::wire::content_coding::content_codings;

use super::answer::answered;
use super::local_answer::{counted_locally, LocalCount};
use super::outgoing::{prepare, Outgoing};
use super::shape::{unanswered, unanswered_openly, Attempted, TryContext, UpstreamAnswer};
use super::stream_start;
use crate::wire::translate::{count_tokens_body, gemini_count_tokens_body, Api};

/// One upstream request to `target` with `credential`, classified (behaviour §3, §4).
pub(super) async fn send(
    ctx: &TryContext<'_>,
    target: &RoutedTarget,
    attempt: u32,
    credential: &Secret,
    upstream_time: &mut Duration,
) -> Attempted {
    // `count_tokens` has no counterpart but on Messages, Google's `countTokens` none but on
    // Gemini: counted here, nothing sent (behaviour §14, §15).
    let serves = |api: Api| {
        ctx.live
            .providers
            .get(&*target.provider)
            .is_some_and(|provider| provider.apis.contains(&api))
    };
    let count_here: Option<LocalCount> = match ctx.endpoint {
        Endpoint::CountTokens if !serves(Api::Messages) => Some(count_tokens_body),
        Endpoint::GeminiCountTokens if !serves(Api::Gemini) => Some(gemini_count_tokens_body),
        _ => None,
    };
    if let Some(count) = count_here {
        return counted_locally(ctx.client_body, ctx.deadline, count).await;
    }
    let (mut request, outgoing) = match prepare(ctx, target, credential) {
        Ok(prepared) => prepared,
        Err(mut answered_here) => {
            answered_here.sent = false;
            return answered_here;
        }
    };
    // telemetry: this upstream request's client span; the upstream gets its traceparent.
    let trace = ctx
        .trace
        .attempt(target, &outgoing.provider.span_attributes);
    trace.inject(request.headers_mut());
    let sent = Sent {
        ctx,
        target,
        attempt,
        at: StdInstant::now(),
        trace,
    };
    // A streaming try must show content within `first_token_timeout_ms` of being sent,
    // headers included (§3): a stall before the headers fails over like one after them.
    let first_token_deadline = ctx
        .deadline
        .min(Instant::now() + ctx.live.first_token_timeout);
    let head_by = if ctx.streaming() {
        first_token_deadline
    } else {
        ctx.deadline
    };
    // The router's clock: the same `now` its policy reads (reset hints, usage windows).
    let now_ms = ctx.app.router().map_or(0, |router| router.clock().now_ms());
    let response = match outgoing.provider.client.send(request, head_by).await {
        Ok(response) => response,
        Err(failed_send) => {
            tracing::debug!(
                request_id = ctx.request_id,
                client = ctx.client_id(),
                connection = &*target.connection,
                reason = %failed_send.message,
                "upstream request got no answer"
            );
            let failed = unanswered(
                AttemptFailure::Transport(failed_send.failure),
                None,
                &failed_send.message,
                "the upstream could not be reached or did not answer",
            );
            return sent.end(failed, &outgoing, upstream_time);
        }
    };
    let status = response.status();
    sent.trace.status(status.as_u16()); // telemetry
                                        // The headers are kept (relayed, classified); the body is read on its own.
    let (http::response::Parts { headers, .. }, body) = response.into_parts();
    let usage = readings_from_headers(&headers, &target.model, now_ms);
    let codings = match content_codings(&headers) {
        Ok(codings) => codings,
        Err(error) => {
            let failed = unanswered_openly(
                AttemptFailure::Body(BodyFailure::Undecodable),
                Some(status.as_u16()),
                &format!("upstream answered {status}: {error}"),
            );
            return sent.end(failed, &outgoing, upstream_time);
        }
    };
    let answer = UpstreamAnswer {
        status,
        headers,
        body,
        codings,
        usage,
        now_ms,
    };
    let attempted = if status.is_success() && ctx.streaming() {
        stream_start::start(
            ctx,
            target,
            (outgoing.direction, outgoing.echo.as_ref()),
            outgoing.include_usage,
            &sent.trace,
            answer,
            first_token_deadline,
        )
        .await
    } else {
        let crossing = (outgoing.direction, outgoing.echo.as_ref());
        answered(ctx, target, crossing, &sent.trace, answer).await
    };
    sent.end(attempted, &outgoing, upstream_time)
}

/// A try on its way: what its end reports.
struct Sent<'c, 'a> {
    ctx: &'c TryContext<'a>,
    target: &'c RoutedTarget,
    attempt: u32,
    at: StdInstant,
    trace: AttemptSpan,
}

impl Sent<'_, '_> {
    /// Every way a sent try ends goes through here: its translation and left-out items named
    /// in the result, the span's class, the upstream time, metrics and the log line.
    fn end(
        &self,
        mut attempted: Attempted,
        outgoing: &Outgoing<'_>,
        upstream_time: &mut Duration,
    ) -> Attempted {
        if let Some(translation) = &outgoing.translation {
            attempted.result.translated = Some(translation.direction.label().to_string());
            attempted.translation = Some(translation.clone());
        }
        attempted.result.items_left_out = outgoing.items_left_out;
        self.trace.class(attempted.result.class); // telemetry
        let took = self.at.elapsed();
        *upstream_time += took;
        attempt_done(
            self.ctx,
            self.target,
            self.attempt,
            attempted.result.class,
            took,
        );
        attempted
    }
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
