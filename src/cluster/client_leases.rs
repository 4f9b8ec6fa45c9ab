//! Client limits across nodes (behaviour §11 with `[cluster]`, leased like §9's quota limits),
//! this node's side: one lease per windowed limit (`requests_per_min`, `tokens_per_min`,
//! `tokens_per_day`) and budget of every client, what is left of it, what was spent since the
//! last sync, and the cluster-wide usage last seen. Admission reads them and spends from them
//! (atomics and a wake-up, never a wait); `client_lease_task` refills and syncs them.
//!
//! The admission rule ([`lease_admits`]): with Redis up, a request is admitted while its
//! `requests_per_min` lease is not overdrawn by a whole lease (an empty lease whose refill is
//! pending still admits, as debt charged with the next lease); once the shared counter refused
//! this node, only while units of its grants are left. So each node spends at most its grants
//! plus one lease, and all nodes together overshoot `requests_per_min` by at most nodes × one
//! lease. Tokens and spend are known only when a response ends (one may pass a whole lease):
//! an overdrawn lease wakes the refill at once and does not refuse, so those overshoot by
//! nodes × one lease plus what the requests in flight when the limit was crossed use and
//! those admitted during the one Redis round trip before a node learns it. With Redis down,
//! the leases do not decide: each node's own counts do. `max_concurrent` is not leased:
//! in-flight counts stay per node (§9).
//!
//! A refill that does not come is never a reason to refuse a client that is below its limit
//! (issue #34: a 3 s Redis stall refused 92 of 200 requests of clients far below theirs, for
//! the half second before the node called Redis down). A request lease overdrawn by a whole
//! lease still admits while this node's own knowledge puts the client below its limit: the
//! units granted cluster-wide at the last sync, plus what this node spent beyond its grants
//! since, plus one lease for each node (what the others and this one may hold unspent) —
//! [`has_headroom`]. Near the limit that is false and the rule above holds; far from it, a
//! stalled or slow Redis only delays the reconciliation: what was admitted is charged as debt
//! when Redis answers, and the shared counter refuses from then on once the limit is reached.
//! While Redis stalls, each node admits up to the headroom it last saw (as with Redis down,
//! where each node admits up to the limit on its own counts).
//!
//! Units: requests and tokens as counted; spend in nano-USD (exact in Redis' Lua numbers up to
//! $9 M), a lease of `lease_size` cents.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwap;
use quotaroute_actors::policy::window::WindowShape;
use tokio::sync::Notify;

use crate::clients::ledger::UsageView;
use crate::clients::{
    BudgetPeriod, ClientConfig, ClientLimits, ClusterUsageView, LimitKind, SharedCounts,
    SharedVerdict,
};
use crate::cluster::leases::spend_saturating;
use crate::cluster::status::ClusterStatus;

/// Nano-USD in one pico-USD step of the ledger (spend is leased in nano-USD).
const PUSD_PER_NUSD: u64 = 1_000;
/// Nano-USD in a cent: a spend lease is `lease_size` of them.
const NUSD_PER_CENT: u64 = 10_000_000;
/// `Retry-After` while a lease is overdrawn and its refill is pending.
pub const REFILL_RETRY_MS: u64 = 1_000;

/// How a limit's shared counter is binned: a sliding window (the same shape as the node's own
/// `BinnedWindow`), or one counter per budget period named by the period's start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CounterShape {
    Window(WindowShape),
    Period(BudgetPeriod),
}

impl CounterShape {
    /// The bins counted at `now_ms`, oldest first, the current one last.
    pub fn bins_at(self, now_ms: u64) -> Vec<u64> {
        match self {
            CounterShape::Window(shape) => shape.live_bins(now_ms).collect(),
            CounterShape::Period(period) => vec![period.bounds(now_ms).0],
        }
    }

    /// The bin units spent at `now_ms` belong to.
    pub fn current_bin(self, now_ms: u64) -> u64 {
        match self {
            CounterShape::Window(shape) => shape.bin_of(now_ms),
            CounterShape::Period(period) => period.bounds(now_ms).0,
        }
    }

    /// Whether units granted in `bin` still count at `now_ms` (else what is left of them is
    /// dropped, so an old grant never spends in a later window).
    pub fn counts(self, bin: u64, now_ms: u64) -> bool {
        match self {
            CounterShape::Window(shape) => bin >= shape.first_live_bin(now_ms),
            CounterShape::Period(period) => bin >= period.bounds(now_ms).0,
        }
    }

    /// How long a counter bin lives in Redis: its whole window plus one bin (a period plus a
    /// day), so a bin still counted is never gone early.
    pub fn ttl_s(self, now_ms: u64) -> u64 {
        match self {
            CounterShape::Window(shape) => shape.counter_ttl_s(),
            CounterShape::Period(period) => {
                let (start, end) = period.bounds(now_ms);
                (end - start) / 1000 + 86_400
            }
        }
    }

    /// The earliest a refused shared counter may free: the next bin boundary (the oldest bin
    /// leaves), or the period's end.
    pub fn frees_in_ms(self, now_ms: u64) -> u64 {
        match self {
            CounterShape::Window(shape) => shape.bin_ends_in_ms(now_ms),
            CounterShape::Period(period) => period.bounds(now_ms).1.saturating_sub(now_ms),
        }
        .max(1)
    }
}

/// The admission rule on one lease (see the module's essay): Redis down → the node's own
/// counts decide; after the shared counter refused, only what is left of the grants is spent
/// (so the limit is used, not starved by leases held idle). Otherwise a request lease admits
/// until it is overdrawn by a whole lease (a refill pending); a token or spend lease
/// (`after_the_fact`: its usage is known only when a response ends, and one response may pass
/// a whole lease) admits while overdrawn too, the overdraft having woken the refill at once.
/// `headroom`: this node's own knowledge puts the client below the limit ([`has_headroom`]),
/// so a request lease overdrawn while its refill is pending (a slow or stalled Redis) admits.
pub fn lease_admits(
    redis_up: bool,
    refused: bool,
    available: i64,
    lease_units: u64,
    after_the_fact: bool,
    headroom: bool,
) -> bool {
    if !redis_up {
        return true;
    }
    if refused {
        return available > 0;
    }
    after_the_fact || headroom || available > -i64::try_from(lease_units).unwrap_or(i64::MAX)
}

/// Whether a limit is surely not reached by what this node knows: `granted` units
/// cluster-wide at the last sync, plus this node's `available` overdraft since, plus one lease
/// per node (`nodes`, this one included: units granted but not spent yet, or spent by a peer
/// since the sync within its lease), plus the one unit asked for, are within `limit`.
pub fn has_headroom(
    granted: u64,
    available: i64,
    lease_units: u64,
    nodes: u64,
    limit: u64,
) -> bool {
    let overdraft = available.min(0).unsigned_abs();
    granted
        .saturating_add(overdraft)
        .saturating_add(lease_units.saturating_mul(nodes))
        .saturating_add(1)
        <= limit
}

/// One leased limit of one client.
#[derive(Debug)]
pub struct ClientLease {
    pub client: String,
    pub kind: LimitKind,
    /// The limit in this lease's units (nano-USD for a budget).
    pub limit: u64,
    /// Units one lease holds.
    pub lease_units: u64,
    pub shape: CounterShape,
    /// Units granted minus units spent (negative: spent beyond the grants, charged as debt).
    pub(crate) available: AtomicI64,
    /// Units spent here since the last sync (added to the shared "spent" counter).
    pub(crate) unsynced: AtomicU64,
    /// The shared counter had nothing left to grant at the last ask.
    pub(crate) refused: AtomicBool,
    pub(crate) next_try_ms: AtomicU64,
    /// Redis answered this lease's last sync with an error (retried at `next_try_ms`; the
    /// other leases go on).
    pub(crate) failing: AtomicBool,
    /// The bin of the last grant.
    pub(crate) grant_bin: AtomicU64,
    /// Every node's spend in the window (or period), as of `synced_at_ms`.
    pub(crate) cluster_used: AtomicU64,
    /// Units granted to every node in the window (or period) after the last sync's grant.
    pub(crate) cluster_granted: AtomicU64,
    pub(crate) synced_at_ms: AtomicU64,
}

impl ClientLease {
    pub(crate) fn new(
        client: &str,
        kind: LimitKind,
        limit: u64,
        lease_units: u64,
        shape: CounterShape,
    ) -> Self {
        ClientLease {
            client: client.to_owned(),
            kind,
            limit,
            lease_units: lease_units.max(1),
            shape,
            available: AtomicI64::new(0),
            unsynced: AtomicU64::new(0),
            refused: AtomicBool::new(false),
            next_try_ms: AtomicU64::new(0),
            failing: AtomicBool::new(false),
            grant_bin: AtomicU64::new(0),
            cluster_used: AtomicU64::new(0),
            cluster_granted: AtomicU64::new(0),
            synced_at_ms: AtomicU64::new(0),
        }
    }

    pub fn available(&self) -> i64 {
        self.available.load(Ordering::Relaxed)
    }

    pub fn refused(&self) -> bool {
        self.refused.load(Ordering::Relaxed)
    }

    /// Prefetch when this little is left.
    pub(crate) fn low_water(&self) -> i64 {
        i64::try_from(self.lease_units / 2).unwrap_or(i64::MAX)
    }

    /// Spends `units`; `true` when the lease ran low (the task should refill).
    fn spend(&self, units: u64) -> bool {
        let _ = self
            .unsynced
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |spent| {
                Some(spent.saturating_add(units))
            });
        spend_saturating(&self.available, units) <= self.low_water()
    }
}

/// The leases of one config generation, by client id.
#[derive(Debug, Default)]
pub struct ClientLeaseTable {
    by_client: HashMap<String, Vec<Arc<ClientLease>>>,
    pub(crate) all: Vec<Arc<ClientLease>>,
}

impl ClientLeaseTable {
    /// One lease per windowed limit and budget of every client; a lease the previous table had
    /// (same client, limit and value) is kept with what is left of it.
    fn build(clients: &[ClientConfig], lease_size: u64, previous: Option<&Self>) -> Self {
        let mut table = ClientLeaseTable::default();
        for client in clients {
            let limits: &ClientLimits = &client.limits;
            let windows = limits.each_window().map(|window| {
                (
                    window.kind,
                    window.limit,
                    lease_size,
                    CounterShape::Window(window.shape),
                )
            });
            let budget = (
                LimitKind::Budget,
                limits.budget_pusd.map(|pusd| pusd / PUSD_PER_NUSD),
                lease_size.saturating_mul(NUSD_PER_CENT),
                CounterShape::Period(limits.budget_period),
            );
            let wanted = windows.into_iter().chain([budget]);
            for (kind, limit, units, shape) in wanted {
                let Some(limit) = limit else { continue };
                let kept = previous
                    .and_then(|p| p.by_client.get(&client.id))
                    .and_then(|leases| {
                        leases
                            .iter()
                            .find(|l| l.kind == kind && l.limit == limit && l.shape == shape)
                    })
                    .cloned();
                let lease = kept.unwrap_or_else(|| {
                    Arc::new(ClientLease::new(&client.id, kind, limit, units, shape))
                });
                table
                    .by_client
                    .entry(client.id.clone())
                    .or_default()
                    .push(lease.clone());
                table.all.push(lease);
            }
        }
        table
    }
}

/// Every client lease of this node; swapped whole when the config reloads.
#[derive(Debug)]
pub struct ClientLeases {
    table: ArcSwap<ClientLeaseTable>,
    lease_size: u64,
    status: Arc<ClusterStatus>,
    pub(crate) wake: Notify,
}

impl ClientLeases {
    pub fn new(clients: &[ClientConfig], lease_size: u64, status: Arc<ClusterStatus>) -> Self {
        ClientLeases {
            table: ArcSwap::from_pointee(ClientLeaseTable::build(clients, lease_size, None)),
            lease_size,
            status,
            wake: Notify::new(),
        }
    }

    /// A reload: the new config's client limits, keeping what is left of unchanged ones.
    pub fn reload(&self, clients: &[ClientConfig]) {
        let previous = self.table.load_full();
        self.table.store(Arc::new(ClientLeaseTable::build(
            clients,
            self.lease_size,
            Some(&previous),
        )));
        self.wake.notify_one();
    }

    pub fn all(&self) -> Vec<Arc<ClientLease>> {
        self.table.load().all.clone()
    }

    fn spend(&self, client: &str, amount: impl Fn(LimitKind) -> Option<u64>) {
        let table = self.table.load();
        let Some(leases) = table.by_client.get(client) else {
            return;
        };
        let mut low = false;
        for lease in leases {
            if let Some(units) = amount(lease.kind) {
                low |= lease.spend(units);
            }
        }
        if low {
            self.wake.notify_one();
        }
    }
}

impl SharedCounts for ClientLeases {
    fn check(&self, client: &str, _limits: &ClientLimits, now_ms: u64) -> SharedVerdict {
        let table = self.table.load();
        let Some(leases) = table.by_client.get(client) else {
            return Ok(());
        };
        let redis_up = self.status.redis_up();
        let nodes = self.status.peer_count().saturating_add(1);
        for lease in leases {
            let refused = lease.refused();
            let after_the_fact = lease.kind != LimitKind::RequestsPerMin;
            let available = lease.available();
            let headroom = has_headroom(
                lease.cluster_granted.load(Ordering::Relaxed),
                available,
                lease.lease_units,
                nodes,
                lease.limit,
            );
            if lease_admits(
                redis_up,
                refused,
                available,
                lease.lease_units,
                after_the_fact,
                headroom,
            ) {
                continue;
            }
            let retry_ms = if refused {
                lease.shape.frees_in_ms(now_ms)
            } else {
                REFILL_RETRY_MS
            };
            return Err((lease.kind, Some(retry_ms)));
        }
        Ok(())
    }

    fn spend_request(&self, client: &str, _now_ms: u64) {
        self.spend(client, |kind| {
            (kind == LimitKind::RequestsPerMin).then_some(1)
        });
    }

    fn spend_usage(&self, client: &str, tokens: u64, cost_pusd: u64, _now_ms: u64) {
        self.spend(client, |kind| match kind {
            LimitKind::TokensPerMin | LimitKind::TokensPerDay => Some(tokens),
            // Rounded up: the cluster never undercounts a client's spend.
            LimitKind::Budget => Some(cost_pusd.div_ceil(PUSD_PER_NUSD)),
            _ => None,
        });
    }

    fn view(&self, client: &str) -> Option<ClusterUsageView> {
        let table = self.table.load();
        let leases = table.by_client.get(client)?;
        let used = |lease: &ClientLease| lease.cluster_used.load(Ordering::Relaxed);
        let usage = leases
            .iter()
            .filter(|lease| lease.kind != LimitKind::Budget)
            .map(|lease| UsageView {
                window: lease.kind.as_str(),
                used: used(lease),
                limit: Some(lease.limit),
            })
            .collect();
        let spend_usd = leases
            .iter()
            .find(|lease| lease.kind == LimitKind::Budget)
            .map(|lease| used(lease) as f64 / 1e9);
        let synced_at_ms = leases
            .iter()
            .map(|lease| lease.synced_at_ms.load(Ordering::Relaxed))
            .min()
            .unwrap_or_default();
        Some(ClusterUsageView {
            redis: if self.status.redis_up() { "up" } else { "down" },
            usage,
            spend_usd,
            synced_at_ms,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 1_796_166_000_000; // 2026-12-01T23:00:00Z

    fn client(limits: ClientLimits) -> ClientConfig {
        ClientConfig {
            id: "team-a".into(),
            weight: 1,
            key_digests: Vec::new(),
            limits,
            class: Default::default(),
            allow_spare_header: false,
        }
    }

    #[test]
    fn the_rule_admits_one_lease_of_debt_and_stops_at_a_refusal() {
        // Redis down: the leases do not decide, whatever they hold.
        assert!(lease_admits(false, true, -1_000, 10, false, false));
        // A lease with units left, an empty one (refill pending), one nearly a lease overdrawn.
        assert!(lease_admits(true, false, 3, 10, false, false));
        assert!(lease_admits(true, false, 0, 10, false, false));
        assert!(lease_admits(true, false, -9, 10, false, false));
        // A whole lease of requests overdrawn near the limit: refused until the refill
        // charges the debt.
        assert!(!lease_admits(true, false, -10, 10, false, false));
        // Far below the limit: a refill that does not come refuses nobody.
        assert!(lease_admits(true, false, -500, 10, false, true));
        // Tokens: one response passed the lease; admitted while the refill asks Redis.
        assert!(lease_admits(true, false, -900, 10, true, false));
        // The shared counter refused: what is left of the grants, nothing beyond.
        for (after_the_fact, headroom) in [(false, false), (true, false), (false, true)] {
            assert!(lease_admits(true, true, 1, 10, after_the_fact, headroom));
            assert!(!lease_admits(true, true, 0, 10, after_the_fact, headroom));
            assert!(!lease_admits(true, true, -3, 10, after_the_fact, headroom));
        }
    }

    #[test]
    fn headroom_counts_the_last_sync_this_nodes_overdraft_and_a_lease_per_node() {
        // 100 granted, 30 spent here beyond grants, 2 nodes × 10: 151 ≤ 200.
        assert!(has_headroom(100, -30, 10, 2, 200));
        assert!(has_headroom(100, -79, 10, 2, 200));
        assert!(!has_headroom(100, -80, 10, 2, 200));
        // Units left of the grants are already in `granted`.
        assert!(has_headroom(179, 5, 10, 2, 200));
        assert!(!has_headroom(180, 5, 10, 2, 200));
        assert!(
            !has_headroom(0, i64::MIN, 10, 2, 1 << 62),
            "an absurd overdraft"
        );
    }

    #[test]
    fn windows_drop_old_grants_and_periods_start_at_zero() {
        let minute = CounterShape::Window(WindowShape::PER_MINUTE);
        let bins = minute.bins_at(NOW);
        assert_eq!(bins.len(), 12);
        assert_eq!(*bins.last().unwrap(), NOW / 5_000);
        assert!(minute.counts(NOW / 5_000, NOW + 55_000));
        assert!(!minute.counts(NOW / 5_000, NOW + 60_000));
        assert_eq!(minute.frees_in_ms(NOW + 1_200), 3_800);
        let day = CounterShape::Period(BudgetPeriod::Day);
        assert_eq!(day.bins_at(NOW), vec![1_796_083_200_000]);
        // Midnight: a new counter, the old grant no longer counts.
        assert_eq!(day.bins_at(NOW + 3_600_000), vec![1_796_169_600_000]);
        assert!(!day.counts(1_796_083_200_000, NOW + 3_600_000));
        assert_eq!(day.frees_in_ms(NOW), 3_600_000);
    }

    #[test]
    fn spending_counts_each_limit_in_its_units_and_refuses_when_overdrawn() {
        let status = Arc::new(ClusterStatus::new("node-a"));
        status.set_redis_up(true, "");
        let limits = ClientLimits {
            requests_per_min: Some(100),
            tokens_per_day: Some(10_000),
            budget_pusd: Some(5_000_000_000_000), // $5
            ..ClientLimits::default()
        };
        let leases = ClientLeases::new(&[client(limits.clone())], 2, status);
        let kinds: Vec<LimitKind> = leases.all().iter().map(|l| l.kind).collect();
        assert_eq!(
            kinds,
            [
                LimitKind::RequestsPerMin,
                LimitKind::TokensPerDay,
                LimitKind::Budget
            ]
        );
        assert_eq!(
            leases.all()[2].lease_units,
            20_000_000,
            "2 cents in nano-USD"
        );
        assert_eq!(leases.all()[2].limit, 5_000_000_000);
        // Nothing granted yet: the first request is admitted as debt, the second too (a
        // lease of 2 may be overdrawn by 1); the third too while the last sync left room
        // (a refill that does not come refuses no client below its limit), but it waits for
        // the refill when the cluster had granted nearly all of the limit.
        assert!(leases.check("team-a", &limits, NOW).is_ok());
        leases.spend_request("team-a", NOW);
        assert!(leases.check("team-a", &limits, NOW).is_ok());
        leases.spend_request("team-a", NOW);
        assert!(leases.check("team-a", &limits, NOW).is_ok(), "far below");
        leases.all()[0].cluster_granted.store(96, Ordering::Relaxed);
        assert_eq!(
            leases.check("team-a", &limits, NOW),
            Err((LimitKind::RequestsPerMin, Some(REFILL_RETRY_MS)))
        );
        leases.spend_usage("team-a", 700, 1_500, NOW);
        let all = leases.all();
        let left: Vec<i64> = all.iter().map(|l| l.available()).collect();
        assert_eq!(left, [-2, -700, -2], "1 500 pUSD is 2 nUSD, rounded up");
        let unsynced: Vec<u64> = all
            .iter()
            .map(|l| l.unsynced.load(Ordering::Relaxed))
            .collect();
        assert_eq!(unsynced, [2, 700, 2]);
        // Another client is not leased at all.
        assert!(leases.check("team-b", &limits, NOW).is_ok());
    }

    #[test]
    fn a_reload_keeps_what_is_left_of_unchanged_limits() {
        let status = Arc::new(ClusterStatus::new("node-a"));
        let first = ClientLimits {
            requests_per_min: Some(100),
            tokens_per_min: Some(1_000),
            ..ClientLimits::default()
        };
        let leases = ClientLeases::new(&[client(first.clone())], 10, status);
        leases.spend_request("team-a", NOW);
        leases.reload(&[client(ClientLimits {
            tokens_per_min: Some(2_000),
            ..first
        })]);
        let all = leases.all();
        assert_eq!(all[0].available(), -1, "requests_per_min kept");
        assert_eq!(
            (all[1].limit, all[1].available()),
            (2_000, 0),
            "a new lease"
        );
    }
}
