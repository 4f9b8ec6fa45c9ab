//! Where the request path meets the clients (behaviour §11): which client a key belongs to,
//! whether its limits admit the request (before anything goes upstream; a refusal changes no
//! connection state), and recording what an answered request used. The decisions are
//! `crate::clients`'; this turns them into answers and journal events.

use std::sync::Arc;

use http::HeaderMap;
use quotaroute_actors::policy::outcome::{AttemptResult, ClientSpend};
use quotaroute_actors::{RoutedTarget, Router};

use crate::api_error::{ApiError, ApiErrorKind};
use crate::clients::ledger::UsedTokens;
use crate::clients::prices::to_usd;
use crate::clients::{BudgetPeriod, ClientTicket, LimitKind, Refusal, SharedCounts};
use crate::node::known_key::KnownKey;
use crate::node::live::LiveConfig;
use crate::node::retry_advice;
use quotaroute_actors::policy::implicit_combo::ImplicitCombo;

/// The client whose key the request carries (`x-api-key` too on Anthropic endpoints).
pub fn authenticated_client(
    live: &LiveConfig,
    headers: &HeaderMap,
    allow_x_api_key: bool,
) -> Option<usize> {
    live.clients
        .identify(presented_key(headers, allow_x_api_key)?)
}

/// [`authenticated_client`], through the key the request's connection presented last
/// (`known`): the same key under the same config is not hashed again.
pub fn authenticated_client_known(
    live: &Arc<LiveConfig>,
    headers: &HeaderMap,
    allow_x_api_key: bool,
    known: &KnownKey,
) -> Option<usize> {
    let key = presented_key(headers, allow_x_api_key)?;
    known.client(live, key, |key| live.clients.identify(key))
}

/// The key the request presents: its bearer token, else (`allow_x_api_key`) its `x-api-key`.
fn presented_key(headers: &HeaderMap, allow_x_api_key: bool) -> Option<&str> {
    let bearer = headers
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    let x_api_key = allow_x_api_key
        .then(|| headers.get("x-api-key").and_then(|v| v.to_str().ok()))
        .flatten();
    Some(bearer.or(x_api_key)?.trim())
}

/// Admits a request of client `index` for `combo`, or the answer refusing it (its
/// `client_limited` event journaled when it is the transition into limited). `shared`: a
/// cluster node's client leases, which must admit it too.
pub fn admit(
    live: &LiveConfig,
    router: &Router,
    index: usize,
    combo: &str,
    request_id: &str,
    shared: Option<&Arc<dyn SharedCounts>>,
) -> Result<Arc<ClientTicket>, ApiError> {
    let now_ms = router.clock().now_ms();
    if let Some(model) = unpriced_target(live, router, index, combo) {
        let client = live
            .clients
            .tag(index)
            .map_or_else(|| "?".into(), |tag| tag.id.clone());
        return Err(ApiError::new(
            ApiErrorKind::ModelNotPriced,
            format!(
                "client `{client}` has a budget_usd and model `{combo}` has a target without a price (`{model}`): add it to [[prices]] or prices_file"
            ),
        ));
    }
    match live.clients.admit(index, combo, request_id, now_ms, shared) {
        Ok(ticket) => Ok(Arc::new(ticket)),
        Err((refusal, event)) => {
            let client = live
                .clients
                .tag(index)
                .map_or_else(|| "?".into(), |tag| tag.id.clone());
            if let Some(event) = event {
                tracing::info!(
                    client = &*client,
                    limit = refusal.limit.as_str(),
                    retry_after_ms = refusal.retry_after_ms,
                    request_id,
                    "client limited"
                );
                router.record_client(now_ms, *event);
            }
            let spend = live.clients.spend_and_budget(index, now_ms);
            let mut error = refusal_error(&client, combo, refusal, spend, now_ms);
            retry_advice::advise(&mut error, now_ms, live.client_retry_max_ms);
            Err(error)
        }
    }
}

/// For a client with a budget: a target of `combo` (a configured combo's, or the
/// `provider/model` it names) without a price, as `provider/model`. A dated model name takes no
/// price from its undated alias (`gpt-4o-2024-05-13` costs more than `gpt-4o`): it needs its
/// own (LiteLLM's price list has them).
fn unpriced_target(
    live: &LiveConfig,
    router: &Router,
    index: usize,
    combo: &str,
) -> Option<String> {
    live.clients.spend_and_budget(index, 0)?;
    router
        .with_topology(|topology| match topology.combo(combo) {
            Some(spec) => live.clients.unpriced(
                index,
                spec.targets.iter().filter_map(|target| {
                    let connection = topology.connection(&target.connection)?;
                    Some((connection.provider.as_str(), target.model.as_str()))
                }),
            ),
            None => ImplicitCombo::parse(combo)
                .filter(|implicit| topology.provider(implicit.provider).is_some())
                .and_then(|implicit| {
                    live.clients
                        .unpriced(index, [(implicit.provider, implicit.model)])
                }),
        })
        .flatten()
}

/// Pico-USD as dollars: cents, or four decimals below a dime ("$12.30", "$0.0012").
fn dollars(pusd: u64) -> String {
    let usd = to_usd(pusd);
    if usd >= 0.1 {
        format!("${usd:.2}")
    } else {
        format!("${usd:.4}")
    }
}

fn refusal_error(
    client: &str,
    combo: &str,
    refusal: Refusal,
    spend: Option<(u64, u64, BudgetPeriod)>,
    now_ms: u64,
) -> ApiError {
    let (kind, message) = match refusal.limit {
        LimitKind::Models => (
            ApiErrorKind::ModelNotAllowed,
            format!("client `{client}` may not use model `{combo}` (see its `models`)"),
        ),
        LimitKind::Budget => (
            ApiErrorKind::BudgetExceeded,
            match spend {
                Some((spend, budget, period)) => format!(
                    "client `{client}` has spent {} of its budget_usd {} for this {}; it resets at {}",
                    dollars(spend),
                    dollars(budget),
                    period.as_str(),
                    retry_advice::at_in_words(now_ms, refusal.retry_after_ms.unwrap_or(0)),
                ),
                None => format!("client `{client}` has spent its budget_usd for this period"),
            },
        ),
        limit => (
            ApiErrorKind::ClientRateLimited,
            format!("client `{client}` is over its {}", limit.as_str()),
        ),
    };
    ApiError {
        retry_after_ms: refusal.retry_after_ms,
        ..ApiError::new(kind, message)
    }
}

/// How an answered attempt's charge to its client is journaled (behaviour §11: with the
/// request events).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChargeRecord {
    /// In the attempt's own `request_succeeded` (`period_spend_pusd`): the usual success,
    /// whose one report is its whole charge. Under `journal.request_events = "failures"`,
    /// which keeps routine successes out of the journal, it is a `client_usage` instead.
    InRequestEvent,
    /// As a `client_usage` of its own: a stream's estimate charged when its client left, the
    /// part beyond it, a charged failure.
    Separate,
}

/// Counts what an answered attempt used against its client, journals the charge as `record`
/// says, and sets the result's price (`request_succeeded.cost_usd`; `None` when the model has
/// none) and, in the request event, its period spend.
pub fn record_usage(
    router: &Router,
    ticket: &ClientTicket,
    request_id: &str,
    combo: &str,
    target: &RoutedTarget,
    result: &mut AttemptResult,
    record: ChargeRecord,
) {
    if result.tokens_in == 0 && result.tokens_out == 0 {
        result.cost_usd = ticket
            .has_price(&target.provider, &target.model)
            .then_some(0.0);
        return;
    }
    let now_ms = router.clock().now_ms();
    let used = UsedTokens {
        provider: &target.provider,
        connection: &target.connection,
        model: &target.model,
        tokens_in: result.tokens_in,
        tokens_out: result.tokens_out,
        tokens_cached: result.tokens_cached,
        tokens_cache_write: result.tokens_cache_write,
        estimated: result.usage_estimated,
    };
    let in_request_event =
        record == ChargeRecord::InRequestEvent && router.journals_every_request_event();
    let cost_usd = if in_request_event {
        let charge = ticket.charge(&used, now_ms);
        result.client_spend = Some(ClientSpend {
            period_spend_pusd: charge.period_spend_pusd,
            period_start_ms: charge.period_start_ms,
        });
        charge.cost_usd
    } else {
        let usage = ticket.record(request_id, combo, used, now_ms);
        let cost_usd = usage.cost_usd;
        router.record_client(now_ms, quotaroute_journal::Event::ClientUsage(usage));
        cost_usd
    };
    tracing::debug!(
        request_id,
        client = &*ticket.tag().id,
        model = &*target.model,
        tokens_in = result.tokens_in,
        tokens_out = result.tokens_out,
        cost_usd,
        "client usage"
    );
    result.cost_usd = cost_usd;
}

/// What a relayed stream needs to count its usage when it ends (it outlives the handler).
pub struct StreamUsageSink {
    pub ticket: Arc<ClientTicket>,
    pub router: Router,
    pub request_id: String,
    pub combo: String,
    pub target: RoutedTarget,
}

impl StreamUsageSink {
    /// Whether its client has a budget: then the stream says what it used as it runs.
    pub fn watches_budget(&self) -> bool {
        self.ticket.has_budget()
    }

    /// The stream has used `so_far` (checked or estimated, not charged yet): it counts against
    /// its client's budget as running cost. Whether that budget is now reached (the stream is
    /// to stop).
    pub fn budget_reached(&self, so_far: &crate::wire::usage::TokenCounts) -> bool {
        let used = UsedTokens {
            provider: &self.target.provider,
            connection: &self.target.connection,
            model: &self.target.model,
            tokens_in: so_far.tokens_in,
            tokens_out: so_far.tokens_out,
            tokens_cached: so_far.tokens_cached,
            tokens_cache_write: so_far.tokens_cache_write,
            estimated: true,
        };
        self.ticket.running(&used, self.router.clock().now_ms())
    }

    /// Counts the stream's usage in `result` (see [`record_usage`]).
    pub fn record(&self, result: &mut AttemptResult, record: ChargeRecord) {
        record_usage(
            &self.router,
            &self.ticket,
            &self.request_id,
            &self.combo,
            &self.target,
            result,
            record,
        );
    }
}
