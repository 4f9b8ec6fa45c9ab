//! Configured quota limits across nodes (behaviour §9), this node's side: one lease per
//! configured limit of every connection, and what is left of it. A success spends from its
//! connection's leases (the recorder's tap: an atomic decrement and a wake-up, never a wait);
//! `lease_task` refills them from the shared counters. The table is swapped whole when the
//! config reloads, keeping what is left of unchanged limits.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwap;
use quotaroute_actors::policy::buckets::each_limit;
use quotaroute_actors::policy::window::WindowShape;
use quotaroute_actors::policy::window_id::{Metric, WindowId};
use quotaroute_actors::Topology;
use quotaroute_journal::RequestSucceeded;
use tokio::sync::Notify;

/// One configured limit of one connection, and what this node may still spend of it.
#[derive(Debug)]
pub struct Lease {
    pub provider: String,
    pub connection: String,
    /// The config's name: `requests_5h`, `tokens_7d:<model>`, …
    pub limit_name: String,
    /// `Some`: only successes on this model spend it.
    pub model: Option<String>,
    tokens: bool,
    pub(crate) shape: WindowShape,
    pub limit: u64,
    /// Units granted minus units spent (negative: spent beyond the lease).
    pub(crate) available: AtomicI64,
}

impl Lease {
    /// The reading's window: the limit's name marked `@cluster`, before any `:<model>`, so
    /// `policy::buckets` applies it to the same models as the limit.
    pub fn window(&self) -> String {
        WindowId::parse(&self.limit_name).cluster_share()
    }

    pub fn available(&self) -> i64 {
        self.available.load(Ordering::Relaxed)
    }
}

/// One generation of the leases (the config at start, then each reload), by connection.
#[derive(Debug, Default)]
pub struct LeaseTable {
    by_connection: HashMap<String, Vec<Arc<Lease>>>,
    pub(crate) all: Vec<Arc<Lease>>,
}

impl LeaseTable {
    /// One lease per configured limit of every connection in `topology`; a lease the previous
    /// table had (same connection, limit name and value) is kept with what is left of it.
    fn build(topology: &Topology, previous: Option<&LeaseTable>) -> Self {
        let mut table = LeaseTable::default();
        for spec in &topology.connections {
            let limits = &spec.limits;
            let mut add = |name: String, model: Option<String>, tokens: bool, shape, limit| {
                let kept = previous
                    .and_then(|p| p.by_connection.get(&spec.id))
                    .and_then(|leases| {
                        leases
                            .iter()
                            .find(|l| l.limit_name == name && l.limit == limit)
                    })
                    .cloned();
                let lease = kept.unwrap_or_else(|| {
                    Arc::new(Lease {
                        provider: spec.provider.clone(),
                        connection: spec.id.clone(),
                        limit_name: name,
                        model,
                        tokens,
                        shape,
                        limit,
                        available: AtomicI64::new(0),
                    })
                });
                table
                    .by_connection
                    .entry(spec.id.clone())
                    .or_default()
                    .push(lease.clone());
                table.all.push(lease);
            };
            for limit in each_limit(limits) {
                add(
                    limit.name,
                    limit.model.map(str::to_owned),
                    limit.metric == Metric::Tokens,
                    limit.shape,
                    limit.limit,
                );
            }
        }
        table
    }
}

/// Every lease of this node; swapped whole when the config reloads.
#[derive(Debug, Default)]
pub struct Leases {
    table: ArcSwap<LeaseTable>,
    pub(crate) lease_size: u64,
    pub(crate) wake: Notify,
}

impl Leases {
    pub fn from_topology(topology: &Topology, lease_size: u64) -> Self {
        Leases {
            table: ArcSwap::from_pointee(LeaseTable::build(topology, None)),
            lease_size,
            wake: Notify::new(),
        }
    }

    /// A reload: the new config's limits, keeping what is left of unchanged ones.
    pub fn reload(&self, topology: &Topology) {
        let previous = self.table.load_full();
        self.table
            .store(Arc::new(LeaseTable::build(topology, Some(&previous))));
        self.wake.notify_one();
    }

    /// The current table.
    pub fn table(&self) -> Arc<LeaseTable> {
        self.table.load_full()
    }

    pub fn all(&self) -> Vec<Arc<Lease>> {
        self.table.load().all.clone()
    }

    /// Prefetch when a lease has this little left.
    pub(crate) fn low_water(&self) -> i64 {
        i64::try_from(self.lease_size / 2).unwrap_or(i64::MAX)
    }

    /// A success spends from its connection's leases (called by the recorder's tap: atomics
    /// and a wake-up only, never a wait).
    pub fn spend(&self, success: &RequestSucceeded) {
        let table = self.table.load();
        let Some(leases) = table.by_connection.get(&*success.connection) else {
            return;
        };
        let mut low = false;
        for lease in leases {
            if lease.model.as_deref().is_some_and(|m| m != &*success.model) {
                continue;
            }
            let units = if lease.tokens {
                success.tokens_in.saturating_add(success.tokens_out)
            } else {
                1
            };
            let left = spend_saturating(&lease.available, units);
            low |= left <= self.low_water();
        }
        if low {
            self.wake.notify_one();
        }
    }
}

/// Takes `units` from `available`, stopping at `i64::MIN` (an absurd usage must not wrap a
/// lease round to a huge positive balance); returns what is left.
pub(crate) fn spend_saturating(available: &AtomicI64, units: u64) -> i64 {
    let units = i64::try_from(units).unwrap_or(i64::MAX);
    let step = |left: i64| left.saturating_sub(units);
    match available.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| {
        Some(step(left))
    }) {
        Ok(before) | Err(before) => step(before),
    }
}

/// Adds `units` granted (or charged) to `available`, stopping at `i64::MAX`.
pub(crate) fn credit_saturating(available: &AtomicI64, units: u64) {
    let units = i64::try_from(units).unwrap_or(i64::MAX);
    let _ = available.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| {
        Some(left.saturating_add(units))
    });
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use quotaroute_actors::policy::buckets::BucketLimits;

    use super::*;

    fn topology(limits: BucketLimits) -> Topology {
        let mut spec = quotaroute_actors::ConnectionSpec::new(
            "k1",
            "openai",
            quotaroute_journal::AuthKind::ApiKey,
            1,
        );
        spec.limits = limits;
        Topology::new(Vec::new(), vec![spec], Vec::new(), "", "")
    }

    #[test]
    fn s9_one_lease_per_limit_and_spending_counts_units() {
        let mut model_requests_7d = BTreeMap::new();
        model_requests_7d.insert("gpt-4o".to_owned(), 50);
        let leases = Leases::from_topology(
            &topology(BucketLimits {
                requests_5h: Some(100),
                tokens_7d: Some(1_000),
                model_requests_7d,
                ..BucketLimits::default()
            }),
            10,
        );
        let all = leases.all();
        let names: Vec<&str> = all.iter().map(|l| l.limit_name.as_str()).collect();
        assert_eq!(names, ["requests_5h", "tokens_7d", "requests_7d:gpt-4o"]);
        let windows: Vec<String> = leases.all().iter().map(|l| l.window()).collect();
        assert_eq!(
            windows,
            [
                "requests_5h@cluster",
                "tokens_7d@cluster",
                "requests_7d@cluster:gpt-4o"
            ]
        );
        let Event::RequestSucceeded(success) =
            quotaroute_journal::testkit::succeeded("openai", "k1", "gpt-4o-mini", 30, 12)
        else {
            panic!("a success");
        };
        leases.spend(&success);
        let left: Vec<i64> = leases.all().iter().map(|l| l.available()).collect();
        assert_eq!(
            left,
            [-1, -42, 0],
            "the model limit is not spent by another model"
        );
    }

    use quotaroute_journal::Event;
}
