//! What a successful answer costs (behaviour §11, "money holds"): its usage measured (the
//! upstream's report checked, or an estimate when it sent none) into the attempt's result, and
//! the client billed for it — only where the plan says Deliver, so a try that fails after a 2xx
//! (an answer that does not translate) or is never delivered costs the client nothing.

use quotaroute_actors::{AttemptResult, RoutedTarget};
use quotaroute_journal::OutcomeClass;

use crate::node::client_gate::{self, ChargeRecord};
use crate::node::usage_charge;
use crate::wire::content_bytes::content_text_bytes;
use crate::wire::usage::ResponseSummary;

use super::shape::TryContext;

/// The result of a 2xx answer whose `body` says `summary`: its tokens as charged (none when
/// the try's usage does not count), recorded in the connection's input-token metrics.
pub(super) fn measured(
    ctx: &TryContext<'_>,
    target: &RoutedTarget,
    status: u16,
    summary: &ResponseSummary<'_>,
    body: &[u8],
) -> AttemptResult {
    // What the answer is charged: its usage checked (clamped, logged), or an estimate when it
    // reported none (behaviour §11).
    let charged = ctx.count_usage.then(|| {
        let reported = summary.counts.unwrap_or_default();
        // The answer's text is measured only when its usage is no report (the usual answer
        // has one: nothing is scanned).
        let estimate_needed = summary.counts.is_none() || reported.flaws.any_unreadable();
        let content_bytes = if estimate_needed {
            content_text_bytes(ctx.endpoint.stream_format(), body)
        } else {
            0
        };
        usage_charge::charged(
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
    let mut result = AttemptResult::success(status, tokens_in, tokens_out);
    if let Some(charged) = charged {
        result.tokens_cached = charged.counts.tokens_cached;
        result.tokens_cache_write = charged.counts.tokens_cache_write;
        result.usage_estimated = charged.estimated;
    }
    if let Some(m) = ctx.live.attempt_metrics.get(&*target.connection) {
        m.input_tokens
            .record(tokens_in, result.tokens_cached, result.tokens_cache_write);
    }
    ctx.app
        .inner
        .affinity
        .served(ctx.combo, tokens_in, result.tokens_cached);
    result
}

/// Bills the admitted client for a delivered answer's measured usage, before the attempt is
/// reported: its price and, for a success, the whole charge go into the journaled request
/// event (`request_succeeded.cost_usd`, `period_spend_pusd`).
pub(crate) fn bill(ctx: &TryContext<'_>, target: &RoutedTarget, result: &mut AttemptResult) {
    if let (Some(ticket), Some(router)) = (ctx.client, ctx.app.router()) {
        let record = if result.class == OutcomeClass::Success {
            ChargeRecord::InRequestEvent
        } else {
            ChargeRecord::Separate
        };
        client_gate::record_usage(
            router,
            ticket,
            ctx.request_id,
            ctx.combo,
            target,
            result,
            record,
        );
    }
}
