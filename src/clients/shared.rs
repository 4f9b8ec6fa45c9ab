//! Client limits counted across nodes (behaviour §11 with `[cluster]`), as the clients see
//! them: the one interface the ledger calls. The cluster's client leases implement it; without
//! `[cluster]` there is none and each node counts alone. Defined here so `clients` never
//! imports `cluster`.

use serde::Serialize;

use super::limits::ClientLimits;
pub use super::limits::SharedVerdict;
use super::usage_view::UsageView;

/// The cluster-wide side of a client's limits. Every method is atomics and a wake-up: no
/// request waits on Redis.
pub trait SharedCounts: Send + Sync + std::fmt::Debug {
    /// May `client` start a request at `now_ms` as far as the cluster's counters go?
    fn check(&self, client: &str, limits: &ClientLimits, now_ms: u64) -> SharedVerdict;
    /// An admitted request of `client` (its `requests_per_min` unit).
    fn spend_request(&self, client: &str, now_ms: u64);
    /// What an answered request used: tokens, and cost in pico-USD.
    fn spend_usage(&self, client: &str, tokens: u64, cost_pusd: u64, now_ms: u64);
    /// The cluster-wide usage of `client` as of the last sync, for `/admin/clients`.
    fn view(&self, client: &str) -> Option<ClusterUsageView>;
}

/// `/admin/clients`' `cluster` object of one client (docs/clients.md): every node's usage
/// summed in Redis as of `synced_at_ms`; `redis` says whether this node still reaches it
/// (`down`: the node decides on its own counts, the numbers are the last ones seen).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ClusterUsageView {
    pub redis: &'static str,
    pub usage: Vec<UsageView>,
    /// `null` without `budget_usd`.
    pub spend_usd: Option<f64>,
    pub synced_at_ms: u64,
}
