//! The node's live table of clients (behaviour §11), rebuilt on every config load: the digest
//! lookup, each client's usage state (kept across reloads for ids that still exist), its
//! Prometheus series, and admission tickets. The decisions themselves are `limits`'; this only
//! holds the state behind a lock per client and reads the clock it is handed.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use metrics::{counter, gauge, Counter, Gauge};
use quotaroute_actors::router::CLIENT_RESET_ACTION;
use quotaroute_actors::ClientTag;
use quotaroute_journal::{ClientLimited, ClientUsage, Envelope, Event};
use serde::Serialize;

use super::identity::Directory;
use super::limits::{BudgetPeriod, ClientConfig, ClientState, LimitKind, Refusal};
use super::prices::{to_usd, ModelPrice, PriceTable};
use super::shared::{ClusterUsageView, SharedCounts};
pub use super::usage_view::UsageView;
use quotaroute_actors::policy::implicit_combo::ImplicitCombo;

/// One client's Prometheus series, registered once per load (ids come from the config, so the
/// label set is bounded).
#[derive(Clone)]
struct ClientMetrics {
    requests: Counter,
    tokens: Counter,
    spend_usd: Gauge,
    limited: Vec<Counter>,
}

impl ClientMetrics {
    fn register(client: &str) -> Self {
        ClientMetrics {
            requests: counter!("quotaroute_client_requests_total", "client" => client.to_owned()),
            tokens: counter!("quotaroute_client_tokens_total", "client" => client.to_owned()),
            spend_usd: gauge!("quotaroute_client_spend_usd", "client" => client.to_owned()),
            limited: LimitKind::ALL
                .iter()
                .map(|limit| {
                    counter!(
                        "quotaroute_client_limited_total",
                        "client" => client.to_owned(),
                        "limit" => limit.as_str()
                    )
                })
                .collect(),
        }
    }

    fn limited(&self, limit: LimitKind) {
        if let Some(index) = LimitKind::ALL.iter().position(|kind| *kind == limit) {
            if let Some(counter) = self.limited.get(index) {
                counter.increment(1);
            }
        }
    }
}

struct LedgerClient {
    config: ClientConfig,
    tag: ClientTag,
    state: Arc<Mutex<ClientState>>,
    metrics: ClientMetrics,
}

/// Every configured client, by index.
pub struct ClientLedger {
    clients: Vec<LedgerClient>,
    directory: Directory,
    prices: Arc<PriceTable>,
    changes: Arc<ChangeCount>,
}

/// Counts what may change a client's view (an admission or refusal, recorded usage, a request
/// ending, a reload), so a reader can skip rebuilding the views when it has not moved. Kept
/// across reloads; wraps on overflow (only equality is compared).
#[derive(Debug, Default)]
struct ChangeCount(AtomicU64);

impl ChangeCount {
    fn bump(&self) {
        self.0.fetch_add(1, Ordering::Release);
    }

    fn read(&self) -> u64 {
        self.0.load(Ordering::Acquire)
    }
}

impl std::fmt::Debug for ClientLedger {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("ClientLedger")
            .field("clients", &self.clients.len())
            .finish_non_exhaustive()
    }
}

/// One client as `/admin/clients` shows it (contract "Admin API").
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ClientView {
    pub id: String,
    pub weight: u32,
    pub in_flight: u32,
    /// Requests waiting for a permit in a full pool (the fair queue's; 0 without it).
    pub queued: u64,
    pub usage: Vec<UsageView>,
    pub spend_usd: f64,
    pub budget_usd: Option<f64>,
    /// When the budget period (`budget_period`, UTC) ends and spend starts again from 0.
    pub budget_resets_at_ms: u64,
    /// The combos it may use (`models`); `None` = all.
    pub models: Option<Vec<String>>,
    /// The limit that would refuse its next request now, if any.
    pub limited: Option<LimitedView>,
    /// With `[cluster]`: every node's usage of this client, summed (absent on a single node).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster: Option<ClusterUsageView>,
}

/// `/admin/clients`' `limited`: which limit holds the client and when it frees.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct LimitedView {
    /// The limit's config key (`client_limited.limit`).
    pub limit: &'static str,
    /// When it frees, in ms from now (the `Retry-After` its next request would get).
    pub retry_after_ms: Option<u64>,
}

impl ClientLedger {
    /// The table of a config load; a client whose id was in `previous` keeps its usage (and
    /// its in-flight requests stay counted against it).
    pub fn build(
        clients: &[ClientConfig],
        prices: &PriceTable,
        previous: Option<&ClientLedger>,
    ) -> Self {
        let kept: HashMap<&str, &Arc<Mutex<ClientState>>> = previous
            .map(|previous| {
                previous
                    .clients
                    .iter()
                    .map(|client| (client.config.id.as_str(), &client.state))
                    .collect()
            })
            .unwrap_or_default();
        let directory = Directory::build(clients.iter().enumerate().flat_map(|(index, client)| {
            client.key_digests.iter().map(move |digest| (index, digest))
        }));
        let clients = clients
            .iter()
            .map(|config| LedgerClient {
                tag: ClientTag {
                    id: Arc::from(config.id.as_str()),
                    weight: config.weight.max(1),
                    class: config.class,
                },
                state: kept
                    .get(config.id.as_str())
                    .map_or_else(Arc::default, |state| Arc::clone(state)),
                metrics: ClientMetrics::register(&config.id),
                config: config.clone(),
            })
            .collect();
        let changes = previous.map_or_else(Arc::default, |previous| Arc::clone(&previous.changes));
        changes.bump();
        ClientLedger {
            clients,
            directory,
            prices: Arc::new(prices.clone()),
            changes,
        }
    }

    /// A count that moves whenever a client's view may have changed (windows also free with
    /// time alone, which it does not count).
    pub fn changes(&self) -> u64 {
        self.changes.read()
    }

    /// The client whose key this is (a digest lookup, confirmed in constant time).
    pub fn identify(&self, key: &str) -> Option<usize> {
        self.directory.lookup(key)
    }

    /// Whether client `index` may ask for `model` (its `models`, exactly as `admit` reads
    /// them; no `models` = any). `GET /v1/models` lists only these (behaviour §11).
    pub fn may_use(&self, index: usize, model: &str) -> bool {
        self.clients.get(index).is_some_and(|client| {
            client
                .config
                .limits
                .models
                .as_ref()
                .is_none_or(|models| models.iter().any(|m| m == model))
        })
    }

    /// The client's id and weight, as routing sees it.
    pub fn tag(&self, index: usize) -> Option<&ClientTag> {
        self.clients.get(index).map(|client| &client.tag)
    }

    /// Admits a request of client `index` for `combo` at `now_ms`, or refuses it (nothing is
    /// counted then). A refusal that is the transition into limited comes with the
    /// `client_limited` event to journal. With `shared` (a cluster node), the cluster's
    /// counters must admit it too, and an admitted request is spent from them.
    pub fn admit(
        &self,
        index: usize,
        combo: &str,
        request_id: &str,
        now_ms: u64,
        shared: Option<&Arc<dyn SharedCounts>>,
    ) -> Result<ClientTicket, (Refusal, Option<Box<Event>>)> {
        let Some(client) = self.clients.get(index) else {
            return Err((
                Refusal {
                    limit: LimitKind::Models,
                    retry_after_ms: None,
                    newly_limited: false,
                },
                None,
            ));
        };
        self.changes.bump();
        let limits = &client.config.limits;
        let verdict = shared.map_or(Ok(()), |shared| {
            shared.check(&client.config.id, limits, now_ms)
        });
        let admitted = match client.state.lock() {
            Ok(mut state) => state.admit_shared(limits, combo, now_ms, verdict),
            // A poisoned lock (a panic elsewhere) admits: limits fail open, routing goes on.
            Err(_) => Ok(()),
        };
        match admitted {
            Ok(()) => {
                client.metrics.requests.increment(1);
                if let Some(shared) = shared {
                    shared.spend_request(&client.config.id, now_ms);
                }
                Ok(ClientTicket {
                    shared: shared.cloned(),
                    state: Arc::clone(&client.state),
                    tag: client.tag.clone(),
                    allow_spare_header: client.config.allow_spare_header,
                    period: client.config.limits.budget_period,
                    budget_pusd: client.config.limits.budget_pusd,
                    running_pusd: AtomicU64::new(0),
                    charged_pusd: AtomicU64::new(0),
                    running_price: OnceLock::new(),
                    prices: Arc::clone(&self.prices),
                    metrics: client.metrics.clone(),
                    changes: Arc::clone(&self.changes),
                })
            }
            Err(refusal) => {
                client.metrics.limited(refusal.limit);
                let event = refusal.newly_limited.then(|| {
                    Box::new(Event::ClientLimited(ClientLimited {
                        request_id: request_id.to_owned(),
                        client: client.config.id.clone(),
                        limit: refusal.limit.as_str().to_owned(),
                        retry_after_ms: refusal.retry_after_ms,
                    }))
                });
                Err((refusal, event))
            }
        }
    }

    /// The period's spend and the budget of client `index` at `now_ms` (pico-USD), when it
    /// has a budget.
    pub fn spend_and_budget(&self, index: usize, now_ms: u64) -> Option<(u64, u64, BudgetPeriod)> {
        let client = self.clients.get(index)?;
        let limits = &client.config.limits;
        let budget = limits.budget_pusd?;
        let spend = client
            .state
            .lock()
            .map(|state| state.spend_at(limits.budget_period, now_ms))
            .unwrap_or(0);
        Some((spend, budget, limits.budget_period))
    }

    /// For a client with a budget: the first of `targets` (`(provider, model)`) that has no
    /// price, which it may not use (behaviour §11: it would cost nothing). `None` otherwise.
    pub fn unpriced<'a>(
        &self,
        index: usize,
        targets: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Option<String> {
        let client = self.clients.get(index)?;
        client.config.limits.budget_pusd?;
        targets
            .into_iter()
            .find(|(provider, model)| self.prices.get(provider, model).is_none())
            .map(|(provider, model)| ImplicitCombo::new(provider, model).name())
    }

    /// The index of client `id`.
    pub fn index_of(&self, id: &str) -> Option<usize> {
        self.clients
            .iter()
            .position(|client| client.config.id == id)
    }

    /// Clears client `index`'s spend and windows of the current period at `now_ms` (the admin
    /// API's reset); false when there is no such client. The caller journals it.
    pub fn reset(&self, index: usize, now_ms: u64) -> bool {
        let Some(client) = self.clients.get(index) else {
            return false;
        };
        if let Ok(mut state) = client.state.lock() {
            state.reset(client.config.limits.budget_period, now_ms);
        }
        client.metrics.spend_usd.set(0.0);
        self.changes.bump();
        true
    }

    /// Whether `event` is one [`fold`](Self::fold) reads.
    pub fn folds(event: &Event) -> bool {
        match event {
            Event::ClientUsage(_) => true,
            Event::RequestSucceeded(success) => success.period_spend_pusd.is_some(),
            Event::AdminAction(action) => action.action == CLIENT_RESET_ACTION,
            _ => false,
        }
    }

    /// Folds journaled events back in (restart): each charge of a client that is still
    /// configured (a `client_usage`, or a `request_succeeded` that carries its charge), and
    /// each admin reset of one (which clears what was folded before it).
    pub fn fold<'a>(&self, envelopes: impl IntoIterator<Item = &'a Envelope>) {
        let by_id: HashMap<&str, &LedgerClient> = self
            .clients
            .iter()
            .map(|client| (client.config.id.as_str(), client))
            .collect();
        for envelope in envelopes {
            if let Event::AdminAction(action) = &envelope.event {
                if action.action == CLIENT_RESET_ACTION {
                    if let Some(client) = by_id.get(action.target.as_str()) {
                        if let Ok(mut state) = client.state.lock() {
                            state.reset(client.config.limits.budget_period, envelope.at_ms);
                        }
                    }
                }
                continue;
            }
            let (client, tokens, period_start_ms, period_spend_pusd) = match &envelope.event {
                Event::ClientUsage(usage) => (
                    usage.client.as_str(),
                    usage.tokens_in.saturating_add(usage.tokens_out),
                    usage.period_start_ms,
                    usage.period_spend_pusd,
                ),
                Event::RequestSucceeded(success) => {
                    let (Some(client), Some(spend), Some(start)) = (
                        success.client.as_deref(),
                        success.period_spend_pusd,
                        success.period_start_ms,
                    ) else {
                        continue;
                    };
                    (
                        client,
                        success.tokens_in.saturating_add(success.tokens_out),
                        start,
                        spend,
                    )
                }
                _ => continue,
            };
            let Some(client) = by_id.get(client) else {
                continue;
            };
            if let Ok(mut state) = client.state.lock() {
                state.fold(
                    client.config.limits.budget_period,
                    envelope.at_ms,
                    tokens,
                    period_start_ms,
                    period_spend_pusd,
                );
            }
        }
    }

    /// Every client as `/admin/clients` shows it at `now_ms`; `queued` says how many of a
    /// client's requests wait in a full pool (the fair queue's count); `shared` adds the
    /// cluster-wide usage.
    pub fn views(
        &self,
        now_ms: u64,
        queued: impl Fn(&str) -> u64,
        shared: Option<&dyn SharedCounts>,
    ) -> Vec<ClientView> {
        self.clients
            .iter()
            .map(|client| {
                let limits = &client.config.limits;
                let state = client
                    .state
                    .lock()
                    .map(|state| state.clone())
                    .unwrap_or_default();
                let (_, resets_at) = limits.budget_period.bounds(now_ms);
                let limited = state
                    .holding_limit(limits, now_ms)
                    .map(|(limit, retry_after_ms)| LimitedView {
                        limit: limit.as_str(),
                        retry_after_ms,
                    });
                ClientView {
                    id: client.config.id.clone(),
                    weight: client.tag.weight,
                    in_flight: state.in_flight,
                    queued: queued(&client.config.id),
                    usage: limits
                        .each_window()
                        .iter()
                        .map(|window| UsageView {
                            window: window.kind.as_str(),
                            used: state.window(window.kind).map_or(0, |w| w.used(now_ms)),
                            limit: window.limit,
                        })
                        .collect(),
                    spend_usd: to_usd(state.spend_at(limits.budget_period, now_ms)),
                    budget_usd: limits.budget_pusd.map(to_usd),
                    budget_resets_at_ms: resets_at,
                    models: limits.models.clone(),
                    limited,
                    cluster: shared.and_then(|shared| shared.view(&client.config.id)),
                }
            })
            .collect()
    }
}

/// What a request used, as the node hands it over when an upstream answered.
#[derive(Debug, Clone, Copy)]
pub struct UsedTokens<'a> {
    pub provider: &'a str,
    pub connection: &'a str,
    pub model: &'a str,
    pub tokens_in: u64,
    pub tokens_out: u64,
    pub tokens_cached: u64,
    pub tokens_cache_write: u64,
    /// The router estimated these counts (no usage came from the upstream).
    pub estimated: bool,
}

/// An admitted request of one client: counted in flight until dropped (a stream's ticket lives
/// until the stream ends).
pub struct ClientTicket {
    state: Arc<Mutex<ClientState>>,
    /// The cluster's counters this request's usage is spent from too (`[cluster]` only).
    shared: Option<Arc<dyn SharedCounts>>,
    tag: ClientTag,
    /// Behaviour §13: the client may mark single requests spare (`x-quotaroute-class`).
    allow_spare_header: bool,
    period: BudgetPeriod,
    /// The client's `budget_usd`: its streams then count their running cost against it.
    budget_pusd: Option<u64>,
    /// What this request counts in its client's `running_pusd` now (used, not charged yet).
    running_pusd: AtomicU64,
    /// What this request was charged so far (a left stream: the estimate when it left).
    charged_pusd: AtomicU64,
    /// The price [`running`](Self::running) counts at, looked up once: a committed stream has
    /// one target, and it is asked after each content event.
    running_price: OnceLock<Option<ModelPrice>>,
    prices: Arc<PriceTable>,
    metrics: ClientMetrics,
    changes: Arc<ChangeCount>,
}

impl std::fmt::Debug for ClientTicket {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("ClientTicket")
            .field("client", &self.tag.id)
            .finish_non_exhaustive()
    }
}

impl ClientTicket {
    pub fn tag(&self) -> &ClientTag {
        &self.tag
    }

    /// Whether the client may mark single requests spare with `x-quotaroute-class: spare`.
    pub fn allows_spare_header(&self) -> bool {
        self.allow_spare_header
    }

    /// Whether `model` on `provider` has a price (an answer that used no tokens then cost 0).
    pub fn has_price(&self, provider: &str, model: &str) -> bool {
        self.prices.get(provider, model).is_some()
    }

    /// What `used` costs at its model's price, in pico-USD (0 without a price).
    fn cost_pusd(&self, used: &UsedTokens<'_>) -> u64 {
        self.prices
            .get(used.provider, used.model)
            .map_or(0, |price| {
                price.cost_pusd(
                    used.tokens_in,
                    used.tokens_out,
                    used.tokens_cached,
                    used.tokens_cache_write,
                )
            })
    }

    /// Whether the client has a budget (its streams then say what they used as they run).
    pub fn has_budget(&self) -> bool {
        self.budget_pusd.is_some()
    }

    /// A stream of a client with a budget has used `used` so far (an estimate while its usage
    /// has not come): what of it is not charged yet counts against the client's budget until
    /// it is. Returns whether this stream is to stop (behaviour §11, "money holds"): it has
    /// used something not charged yet, and the client's budget is reached at `now_ms`,
    /// counting its spend and every stream's running cost. A stream whose use is all charged
    /// (one the client left, read on for its closing usage) goes on until it uses more.
    pub fn running(&self, used: &UsedTokens<'_>, now_ms: u64) -> bool {
        let Some(budget) = self.budget_pusd else {
            return false;
        };
        let price = self
            .running_price
            .get_or_init(|| self.prices.get(used.provider, used.model).copied());
        let cost_pusd = price.map_or(0, |price| {
            price.cost_pusd(
                used.tokens_in,
                used.tokens_out,
                used.tokens_cached,
                used.tokens_cache_write,
            )
        });
        let uncharged = cost_pusd.saturating_sub(self.charged_pusd.load(Ordering::Acquire));
        let Ok(mut state) = self.state.lock() else {
            return false;
        };
        let before = self.running_pusd.swap(uncharged, Ordering::AcqRel);
        state.run(before, uncharged);
        uncharged > 0 && state.over_budget(budget, self.period, now_ms)
    }

    /// Counts what the request used at `now_ms`, priced, into the client's windows and spend
    /// (and the cluster's), and returns what it cost and the period's spend after it. What it
    /// counted as running is charged now, so it leaves the running cost.
    pub fn charge(&self, used: &UsedTokens<'_>, now_ms: u64) -> Charge {
        let price = self.prices.get(used.provider, used.model);
        let cost_pusd = self.cost_pusd(used);
        let tokens = used.tokens_in.saturating_add(used.tokens_out);
        let (period_spend_pusd, period_start_ms) = match self.state.lock() {
            Ok(mut state) => {
                state.run(self.running_pusd.swap(0, Ordering::AcqRel), 0);
                self.charged_pusd.fetch_add(cost_pusd, Ordering::AcqRel);
                state.record(self.period, now_ms, tokens, cost_pusd)
            }
            Err(_) => (0, self.period.bounds(now_ms).0),
        };
        self.changes.bump();
        if let Some(shared) = &self.shared {
            shared.spend_usage(&self.tag.id, tokens, cost_pusd, now_ms);
        }
        self.metrics.tokens.increment(tokens);
        self.metrics.spend_usd.set(to_usd(period_spend_pusd));
        Charge {
            cost_usd: price.map(|_| to_usd(cost_pusd)),
            period_spend_pusd,
            period_start_ms,
        }
    }

    /// [`charge`](Self::charge)s what the request used and returns the `client_usage` that
    /// records it on its own.
    pub fn record(
        &self,
        request_id: &str,
        combo: &str,
        used: UsedTokens<'_>,
        now_ms: u64,
    ) -> ClientUsage {
        let charge = self.charge(&used, now_ms);
        ClientUsage {
            request_id: request_id.to_owned(),
            client: String::from(&*self.tag.id),
            combo: combo.to_owned(),
            provider: used.provider.to_owned(),
            connection: used.connection.to_owned(),
            model: used.model.to_owned(),
            tokens_in: used.tokens_in,
            tokens_out: used.tokens_out,
            tokens_cached: used.tokens_cached,
            tokens_cache_write: used.tokens_cache_write,
            cost_usd: charge.cost_usd,
            period_spend_pusd: charge.period_spend_pusd,
            period_start_ms: charge.period_start_ms,
            estimated: used.estimated,
        }
    }
}

/// What one request cost its client and the client's budget period after it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Charge {
    /// USD; `None` when the model has no price.
    pub cost_usd: Option<f64>,
    /// The period's spend after this request, in pico-USD, and when the period began.
    pub period_spend_pusd: u64,
    pub period_start_ms: u64,
}

impl Drop for ClientTicket {
    fn drop(&mut self) {
        if let Ok(mut state) = self.state.lock() {
            state.run(self.running_pusd.swap(0, Ordering::AcqRel), 0);
            state.finish();
        }
        self.changes.bump();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clients::identity::digest_of;
    use crate::clients::limits::ClientLimits;

    const NOW: u64 = 1_796_166_000_000; // 2026-12-01T23:00:00Z

    fn ledger(previous: Option<&ClientLedger>) -> ClientLedger {
        let client = ClientConfig {
            id: "team-a".into(),
            weight: 2,
            key_digests: vec![digest_of("sk-qr-ledger-test")],
            limits: ClientLimits {
                requests_per_min: Some(1),
                models: Some(vec!["team".into()]),
                ..ClientLimits::default()
            },
            class: Default::default(),
            allow_spare_header: false,
        };
        ClientLedger::build(&[client], &PriceTable::default(), previous)
    }

    fn used() -> UsedTokens<'static> {
        UsedTokens {
            provider: "openai",
            connection: "oa-1",
            model: "gpt-4o-mini",
            tokens_in: 7,
            tokens_out: 3,
            tokens_cached: 0,
            tokens_cache_write: 0,
            estimated: false,
        }
    }

    #[test]
    fn the_change_count_moves_with_admission_usage_the_end_and_a_reload() {
        let first = ledger(None);
        let mut seen = first.changes();
        let ticket = first.admit(0, "team", "r1", NOW, None).unwrap();
        assert_ne!(first.changes(), seen, "admitted");
        seen = first.changes();
        ticket.record("r1", "team", used(), NOW);
        assert_ne!(first.changes(), seen, "usage recorded");
        seen = first.changes();
        drop(ticket);
        assert_ne!(first.changes(), seen, "the request ended");
        seen = first.changes();
        assert!(first.admit(0, "team", "r2", NOW, None).is_err());
        assert_ne!(first.changes(), seen, "refused");
        seen = first.changes();
        assert_eq!(first.changes(), seen, "nothing happened");
        let reloaded = ledger(Some(&first));
        assert_ne!(reloaded.changes(), seen, "reloaded");
    }

    /// Issue 49 item 10: streams in flight count what they used against the budget before
    /// they are charged: a stream past the budget is told to stop, a new request is refused,
    /// and a charge or the request's end takes its running cost out again.
    #[test]
    fn streams_running_cost_counts_against_the_budget_until_charged() {
        let client = ClientConfig {
            id: "team-a".into(),
            weight: 1,
            key_digests: vec![digest_of("sk-qr-ledger-budget")],
            limits: ClientLimits {
                budget_pusd: Some(1_000),
                ..ClientLimits::default()
            },
            class: Default::default(),
            allow_spare_header: false,
        };
        let mut prices = PriceTable::default();
        prices.insert(
            "gpt-4o-mini".into(),
            ModelPrice {
                input: 1,
                output: 10,
                ..ModelPrice::default()
            },
        );
        let ledger = ClientLedger::build(&[client], &prices, None);
        let tokens = |tokens_out| UsedTokens {
            tokens_in: 0,
            tokens_out,
            ..used()
        };
        let first = ledger.admit(0, "team", "r1", NOW, None).unwrap();
        let second = ledger.admit(0, "team", "r2", NOW, None).unwrap();
        // 600 + 300 of 1,000: both go on, and a third request is still admitted.
        assert!(!first.running(&tokens(60), NOW));
        assert!(!second.running(&tokens(30), NOW));
        drop(ledger.admit(0, "team", "r3", NOW, None).unwrap());
        // 600 + 500: the budget is reached; the stream that used more stops, and so does the
        // other at its next content; a new request is refused.
        assert!(second.running(&tokens(50), NOW));
        assert!(first.running(&tokens(61), NOW));
        let refused = ledger.admit(0, "team", "r4", NOW, None).unwrap_err().0;
        assert_eq!(refused.limit, LimitKind::Budget);
        // The first is charged what it used (610): its running cost becomes spend; a use
        // already charged does not stop it.
        first.charge(&tokens(61), NOW);
        assert!(!first.running(&tokens(61), NOW));
        // The second ends without a charge: its running cost leaves with it.
        drop(second);
        assert!(ledger.admit(0, "team", "r5", NOW, None).is_ok());
        let (spend, _, _) = ledger.spend_and_budget(0, NOW).unwrap();
        assert_eq!(spend, 610);
    }

    #[test]
    fn a_view_shows_the_models_and_the_limit_holding_the_client() {
        let ledger = ledger(None);
        let view = &ledger.views(NOW, |_| 0, None)[0];
        assert_eq!(view.models, Some(vec!["team".to_string()]));
        assert_eq!(view.limited, None);
        drop(ledger.admit(0, "team", "r1", NOW, None).unwrap());
        let view = &ledger.views(NOW + 1_000, |_| 0, None)[0];
        let limited = view.limited.clone().unwrap();
        assert_eq!(limited.limit, "requests_per_min");
        assert!(limited
            .retry_after_ms
            .is_some_and(|ms| ms > 0 && ms <= 60_000));
        assert_eq!(view.in_flight, 0);
        assert_eq!(view.usage[0].used, 1);
        let text = serde_json::to_string(view).unwrap();
        assert!(!text.contains("sk-qr-ledger-test"), "{text}");
    }
}
