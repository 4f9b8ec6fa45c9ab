//! Configured quota limits across nodes (behaviour §9): a node spends a connection's usage
//! from leases of `lease_size` units taken from shared counters, one per (connection, limit,
//! time bin), with one atomic Lua script. The shared counter counts units *granted*, so all
//! nodes together never hold more than the limit; what a node spends beyond its lease (a
//! request already in flight, a response's tokens) is charged to the counter as debt with its
//! next lease. All nodes together overshoot a limit by at most nodes × `lease_size` requests
//! (more for tokens: one response's tokens may pass a lease; see docs/operations.md).
//!
//! Off the request path: the recorder's tap only decrements an atomic per success; this task
//! prefetches when a lease runs low, and turns a refusal into a `usage_observed` reading with
//! source `lease` so the existing bucket policy moves the connection to the tail (§2 step 1).
//! With Redis down nothing is leased or refused: the local counts (each node's own limit)
//! decide, and a refusal reading runs out after [`REFUSAL_HOLD_MS`].

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use quotaroute_actors::{Router, Topology};
use quotaroute_journal::{RequestSucceeded, UsageObserved, UsageSource};
use redis::{Client, Script};
use tokio::sync::Notify;

use crate::cluster::keys;
use crate::cluster::link::{run_id, Link};
use crate::cluster::status::ClusterStatus;

/// A refusal saturates the connection's window this long, renewed while Redis still refuses.
pub const REFUSAL_HOLD_MS: u64 = 60_000;
/// While refused, ask again this often (the window slides, other nodes' grants age out).
const RETRY_REFUSED_MS: u64 = 1_000;
/// Leases are checked at least this often even when no success woke the task.
const TICK: Duration = Duration::from_millis(250);

/// `KEYS` none; `ARGV`: counter prefix, current bin, bins in the window, TTL seconds, limit,
/// debt (units already spent beyond grants: always charged), want. Returns `{grant, used}`.
const LEASE_LUA: &str = r"
local prefix = ARGV[1]
local bin = tonumber(ARGV[2])
local bins = tonumber(ARGV[3])
local ttl = tonumber(ARGV[4])
local limit = tonumber(ARGV[5])
local debt = tonumber(ARGV[6])
local want = tonumber(ARGV[7])
local current = prefix .. bin
if debt > 0 then
  redis.call('INCRBY', current, debt)
  redis.call('EXPIRE', current, ttl)
end
local used = 0
for b = bin - bins + 1, bin do
  local v = redis.call('GET', prefix .. b)
  if v then used = used + tonumber(v) end
end
local grant = 0
if used < limit then
  grant = math.min(want, limit - used)
  redis.call('INCRBY', current, grant)
  redis.call('EXPIRE', current, ttl)
end
return {grant, used}
";

/// The bin layout of a window, as `policy::buckets` counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Shape {
    bin_ms: u64,
    bins: u64,
}

const FIVE_HOURS: Shape = Shape {
    bin_ms: 5 * 60_000,
    bins: 60,
};
const SEVEN_DAYS: Shape = Shape {
    bin_ms: 3_600_000,
    bins: 168,
};

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
    shape: Shape,
    pub limit: u64,
    /// Units granted minus units spent (negative: spent beyond the lease).
    available: AtomicI64,
}

impl Lease {
    /// The reading's window: the limit's name marked `@cluster`, before any `:<model>`, so
    /// `policy::buckets` applies it to the same models as the limit.
    pub fn window(&self) -> String {
        match self.limit_name.split_once(':') {
            Some((kind, model)) => format!("{kind}@cluster:{model}"),
            None => format!("{}@cluster", self.limit_name),
        }
    }

    pub fn available(&self) -> i64 {
        self.available.load(Ordering::Relaxed)
    }
}

/// One generation of the leases (the config at start, then each reload), by connection.
#[derive(Debug, Default)]
pub struct LeaseTable {
    by_connection: HashMap<String, Vec<Arc<Lease>>>,
    all: Vec<Arc<Lease>>,
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
            let wide = [
                ("requests_5h", limits.requests_5h, false, FIVE_HOURS),
                ("tokens_5h", limits.tokens_5h, true, FIVE_HOURS),
                ("requests_7d", limits.requests_7d, false, SEVEN_DAYS),
                ("tokens_7d", limits.tokens_7d, true, SEVEN_DAYS),
            ];
            for (name, limit, tokens, shape) in wide {
                if let Some(limit) = limit {
                    add(name.to_owned(), None, tokens, shape, limit);
                }
            }
            for (model, limit) in &limits.model_requests_7d {
                add(
                    format!("requests_7d:{model}"),
                    Some(model.clone()),
                    false,
                    SEVEN_DAYS,
                    *limit,
                );
            }
            for (model, limit) in &limits.model_tokens_7d {
                add(
                    format!("tokens_7d:{model}"),
                    Some(model.clone()),
                    true,
                    SEVEN_DAYS,
                    *limit,
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
    lease_size: u64,
    wake: Notify,
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
    fn low_water(&self) -> i64 {
        i64::try_from(self.lease_size / 2).unwrap_or(i64::MAX)
    }

    /// A success spends from its connection's leases (called by the recorder's tap: atomics
    /// and a wake-up only, never a wait).
    pub fn spend(&self, success: &RequestSucceeded) {
        let table = self.table.load();
        let Some(leases) = table.by_connection.get(&success.connection) else {
            return;
        };
        let mut low = false;
        for lease in leases {
            if lease.model.as_deref().is_some_and(|m| m != success.model) {
                continue;
            }
            let units = if lease.tokens {
                success.tokens_in.saturating_add(success.tokens_out)
            } else {
                1
            };
            let units = i64::try_from(units).unwrap_or(i64::MAX);
            let left = lease.available.fetch_sub(units, Ordering::Relaxed) - units;
            low |= left <= self.low_water();
        }
        if low {
            self.wake.notify_one();
        }
    }
}

/// What the task remembers of one lease.
#[derive(Debug, Default, Clone)]
struct Held {
    refused: bool,
    /// When a refused lease is asked for again.
    next_try_ms: u64,
    /// When the refusal reading runs out (renewed before).
    reading_until_ms: u64,
    /// Units granted per bin (to restore the shared counters when Redis forgot them).
    granted: BTreeMap<u64, u64>,
}

/// The lease task: prefetches, charges debt, journals refusals and grants after refusals.
pub struct LeaseTask {
    pub leases: Arc<Leases>,
    pub router: Router,
    pub status: Arc<ClusterStatus>,
    link: Link,
    script: Script,
    /// The table `held` is about, index for index.
    table: Arc<LeaseTable>,
    held: Vec<Held>,
    epoch: Option<String>,
}

impl LeaseTask {
    pub fn new(
        leases: Arc<Leases>,
        router: Router,
        status: Arc<ClusterStatus>,
        client: Client,
    ) -> Self {
        let table = leases.table();
        let held = vec![Held::default(); table.all.len()];
        LeaseTask {
            table,
            leases,
            router,
            status,
            link: Link::new(client, Duration::from_millis(500)),
            script: Script::new(LEASE_LUA),
            held,
            epoch: None,
        }
    }

    /// After a reload: what the task remembers follows each kept lease to its new index.
    fn follow_reload(&mut self) {
        let current = self.leases.table();
        if Arc::ptr_eq(&current, &self.table) {
            return;
        }
        let held = current
            .all
            .iter()
            .map(|lease| {
                self.table
                    .all
                    .iter()
                    .position(|old| Arc::ptr_eq(old, lease))
                    .and_then(|index| self.held.get(index).cloned())
                    .unwrap_or_default()
            })
            .collect();
        self.held = held;
        self.table = current;
    }

    /// Takes the first leases (before the node reports ready); `false` when Redis failed.
    pub async fn prime(&mut self) -> bool {
        self.round().await
    }

    pub async fn run(mut self) {
        loop {
            tokio::select! {
                () = self.leases.wake.notified() => {}
                () = tokio::time::sleep(TICK) => {}
            }
            if !self.round().await {
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    }

    /// One pass over every lease that is due; `false` on a Redis error.
    async fn round(&mut self) -> bool {
        let now = now_ms();
        self.follow_reload();
        if self.link.take_reconnected() || self.epoch.is_none() {
            if let Err(error) = self.check_epoch().await {
                self.link.reset();
                self.status.set_redis_up(false, &error.to_string());
                return false;
            }
        }
        let low_water = self.leases.low_water();
        for index in 0..self.table.all.len() {
            let Some(lease) = self.table.all.get(index).cloned() else {
                continue;
            };
            let held = self.held.get(index).cloned().unwrap_or_default();
            let due = if held.refused {
                now >= held.next_try_ms
            } else {
                lease.available() <= low_water
            };
            if !due {
                continue;
            }
            match self.take(index, &lease, now).await {
                Ok((grant, used)) => self.settle(index, &lease, now, grant, used).await,
                Err(error) => {
                    self.link.reset();
                    self.status.set_redis_up(false, &error.to_string());
                    return false;
                }
            }
        }
        true
    }

    /// Asks the shared counter for a lease, charging what was spent beyond the last one.
    async fn take(
        &mut self,
        index: usize,
        lease: &Lease,
        now: u64,
    ) -> redis::RedisResult<(u64, u64)> {
        let debt = u64::try_from(-lease.available().min(0)).unwrap_or(0);
        let bin = now / lease.shape.bin_ms;
        let ttl_s = lease.shape.bins * lease.shape.bin_ms / 1000 + lease.shape.bin_ms / 1000;
        let connection = self.link.connection().await?;
        let (grant, used): (u64, u64) = self
            .script
            .arg(keys::usage_prefix(&lease.connection, &lease.limit_name))
            .arg(bin)
            .arg(lease.shape.bins)
            .arg(ttl_s)
            .arg(lease.limit)
            .arg(debt)
            .arg(self.leases.lease_size)
            .invoke_async(connection)
            .await?;
        self.status.set_redis_up(true, "");
        let credited = i64::try_from(debt.saturating_add(grant)).unwrap_or(i64::MAX);
        lease.available.fetch_add(credited, Ordering::Relaxed);
        if let Some(held) = self.held.get_mut(index) {
            *held.granted.entry(bin).or_default() += debt.saturating_add(grant);
            let first_live = (bin + 1).saturating_sub(lease.shape.bins);
            held.granted.retain(|b, _| *b >= first_live);
        }
        Ok((grant, used))
    }

    /// Journals a refusal (saturating the window) or the grant that ends one.
    async fn settle(&mut self, index: usize, lease: &Lease, now: u64, grant: u64, used: u64) {
        let Some(held) = self.held.get_mut(index) else {
            return;
        };
        let reading = if grant == 0 {
            ClusterStatus::count(&self.status.leases_refused);
            held.next_try_ms = now + RETRY_REFUSED_MS;
            let renew = !held.refused || held.reading_until_ms <= now + REFUSAL_HOLD_MS / 4;
            if !held.refused {
                tracing::info!(connection = %lease.connection, limit = %lease.limit_name, used, "cluster: shared quota spent; connection saturated for this limit");
            }
            held.refused = true;
            if !renew {
                return;
            }
            held.reading_until_ms = now + REFUSAL_HOLD_MS;
            (lease.limit, Some(held.reading_until_ms))
        } else {
            ClusterStatus::count(&self.status.leases_granted);
            if !held.refused {
                return;
            }
            held.refused = false;
            (used.min(lease.limit.saturating_sub(1)), None)
        };
        let _ = self
            .router
            .observe_usage(UsageObserved {
                provider: lease.provider.clone(),
                connection: lease.connection.clone(),
                window: lease.window(),
                used: reading.0,
                limit: lease.limit,
                resets_at_ms: reading.1,
                source: UsageSource::Lease,
            })
            .await;
    }

    /// After a reconnect: a Redis that restarted empty has forgotten the shared counters, so
    /// this node charges its own grants of the live bins again.
    async fn check_epoch(&mut self) -> redis::RedisResult<()> {
        let connection = self.link.connection().await?;
        let id = run_id(connection).await?;
        let forgot = self.epoch.as_ref().is_some_and(|epoch| *epoch != id);
        self.epoch = Some(id);
        if !forgot {
            return Ok(());
        }
        for (held, lease) in self.held.iter().zip(&self.table.all) {
            let prefix = keys::usage_prefix(&lease.connection, &lease.limit_name);
            let ttl_s =
                i64::try_from(lease.shape.bins * lease.shape.bin_ms / 1000).unwrap_or(i64::MAX);
            for (bin, units) in &held.granted {
                let key = format!("{prefix}{bin}");
                redis::pipe()
                    .incr(&key, *units)
                    .ignore()
                    .expire(&key, ttl_s)
                    .ignore()
                    .query_async::<()>(connection)
                    .await?;
            }
        }
        tracing::info!(
            "cluster: Redis restarted; shared quota counters restored from this node's grants"
        );
        Ok(())
    }
}

pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
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
