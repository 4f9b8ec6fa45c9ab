//! Configured quota limits across nodes (behaviour §9): a node spends a connection's usage
//! from leases of `lease_size` units taken from shared counters, one per (connection, limit,
//! time bin), with one atomic Lua script. The shared counter counts units *granted*, so all
//! nodes together never hold more than the limit; what a node spends beyond its lease (a
//! request already in flight, a response's tokens) is charged to the counter as debt with its
//! next lease. All nodes together overshoot a limit by at most nodes × `lease_size` requests
//! (more for tokens: one response's tokens may pass a lease; see docs/operations.md).
//!
//! This file is the task: off the request path (the recorder's tap only decrements an atomic
//! per success, see `leases`), it prefetches when a lease runs low, and turns a refusal into a `usage_observed` reading with
//! source `lease` so the existing bucket policy moves the connection to the tail (§2 step 1).
//! With Redis down nothing is leased or refused: the local counts (each node's own limit)
//! decide, and a refusal reading runs out after [`REFUSAL_HOLD_MS`].

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use quotaroute_actors::Router;
use quotaroute_journal::{UsageObserved, UsageSource};
use redis::Script;

use crate::cluster::keys;
use crate::cluster::lease_rounds::{run_rounds, LeaseRounds};
use crate::cluster::leases::{credit_saturating, Lease, LeaseTable, Leases};
use crate::cluster::link::{self, run_id, Link};
use crate::cluster::lua_numbers;
use crate::cluster::status::ClusterStatus;
use crate::cluster::target::Target;

/// A refusal saturates the connection's window this long, renewed while Redis still refuses.
pub const REFUSAL_HOLD_MS: u64 = 60_000;
/// While refused, ask again this often (the window slides, other nodes' grants age out).
const RETRY_REFUSED_MS: u64 = 1_000;

/// `KEYS`: the window's counters, oldest bin first, the current one last (one connection's
/// keys: one hash slot, see `keys`); `ARGV`: TTL seconds, limit, debt (units already spent
/// beyond grants: always charged), want, as integer strings (`lua_numbers`). Returns
/// `{grant, used}`. Counters saturate (`lua_numbers::PRELUDE`): no value fails the script.
const LEASE_LUA: &str = r"
local ttl = tonumber(ARGV[1])
local limit = tonumber(ARGV[2])
local debt = tonumber(ARGV[3])
local want = tonumber(ARGV[4])
local current = KEYS[#KEYS]
add(current, debt, ttl)
local used = 0
for _, v in ipairs(redis.call('MGET', unpack(KEYS))) do
  used = math.min(CAP, used + read(v))
end
local grant = 0
if used < limit then
  grant = math.min(want, limit - used)
  add(current, grant, ttl)
end
return {grant, used}
";

/// What the task remembers of one lease.
#[derive(Debug, Default, Clone)]
struct Held {
    refused: bool,
    /// Redis answered this lease's last call with an error (retried at `next_try_ms`; the
    /// other leases go on).
    failing: bool,
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
    /// The `run_id` of the server holding each connection's counters (on a Redis Cluster,
    /// connections live on different shards); `None` until first checked.
    epochs: Option<BTreeMap<String, String>>,
}

impl LeaseTask {
    pub fn new(
        leases: Arc<Leases>,
        router: Router,
        status: Arc<ClusterStatus>,
        client: Target,
    ) -> Self {
        let table = leases.table();
        let held = vec![Held::default(); table.all.len()];
        LeaseTask {
            table,
            leases,
            router,
            status,
            link: Link::new(client, Duration::from_millis(500)),
            script: Script::new(&format!("{}{LEASE_LUA}", lua_numbers::PRELUDE)),
            held,
            epochs: None,
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

    pub async fn run(self) {
        run_rounds(self).await;
    }

    /// One pass over every lease that is due; `false` on a Redis error.
    async fn round(&mut self) -> bool {
        let now = self.router.clock().now_ms();
        self.follow_reload();
        if self.link.take_reconnected() || self.epochs.is_none() {
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
            let due = if held.refused || held.failing {
                now >= held.next_try_ms
            } else {
                lease.available() <= low_water
            };
            if !due {
                continue;
            }
            match self.take(index, &lease, now).await {
                Ok((grant, used)) => {
                    if let Some(held) = self.held.get_mut(index) {
                        if std::mem::take(&mut held.failing) {
                            tracing::info!(connection = %lease.connection, limit = %lease.limit_name, "cluster: quota lease taken again");
                        }
                    }
                    self.settle(index, &lease, now, grant, used).await;
                }
                Err(error) if link::answered_with_error(&error) => {
                    // Redis answered: it is up, and only this lease's call failed.
                    self.status.set_redis_up(true, "");
                    ClusterStatus::count(&self.status.lease_errors);
                    if let Some(held) = self.held.get_mut(index) {
                        held.next_try_ms = now + RETRY_REFUSED_MS;
                        if !std::mem::replace(&mut held.failing, true) {
                            tracing::warn!(connection = %lease.connection, limit = %lease.limit_name, %error, "cluster: Redis failed this quota lease's call; the other leases go on, this one is retried every second");
                        }
                    }
                }
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
        let debt = lease.available().min(0).unsigned_abs();
        let bin = lease.shape.bin_of(now);
        let ttl_s = lease.shape.counter_ttl_s();
        let prefix = keys::usage_prefix(&lease.connection, &lease.limit_name);
        let mut invocation = self.script.prepare_invoke();
        for window_bin in lease.shape.live_bins(now) {
            invocation.key(format!("{prefix}{window_bin}"));
        }
        invocation
            .arg(lua_numbers::arg(ttl_s))
            .arg(lua_numbers::arg(lease.limit))
            .arg(lua_numbers::arg(debt))
            .arg(lua_numbers::arg(self.leases.lease_size));
        let connection = self.link.connection().await?;
        let (grant, used): (u64, u64) = invocation.invoke_async(connection).await?;
        self.status.set_redis_up(true, "");
        credit_saturating(&lease.available, debt.saturating_add(grant));
        if let Some(held) = self.held.get_mut(index) {
            let granted = held.granted.entry(bin).or_default();
            *granted = granted.saturating_add(debt).saturating_add(grant);
            let first_live = lease.shape.first_live_bin(now);
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

    /// After a reconnect: a Redis (or, on a cluster, the shard holding a connection's counters)
    /// that restarted empty has forgotten the shared counters, so this node charges its own
    /// grants of the live bins again.
    async fn check_epoch(&mut self) -> redis::RedisResult<()> {
        let connection = self.link.connection().await?;
        let known = self.epochs.clone().unwrap_or_default();
        let mut epochs = BTreeMap::new();
        for lease in &self.table.all {
            if epochs.contains_key(&lease.connection) {
                continue;
            }
            let id = run_id(connection, &keys::usage_prefix(&lease.connection, "")).await?;
            epochs.insert(lease.connection.clone(), id);
        }
        let forgot = |connection: &str| {
            known
                .get(connection)
                .is_some_and(|old| epochs.get(connection) != Some(old))
        };
        let mut restored = false;
        for (held, lease) in self.held.iter().zip(&self.table.all) {
            if !forgot(&lease.connection) {
                continue;
            }
            restored = true;
            let prefix = keys::usage_prefix(&lease.connection, &lease.limit_name);
            let ttl_s = i64::try_from(lease.shape.counter_ttl_s()).unwrap_or(i64::MAX);
            for (bin, units) in &held.granted {
                let key = format!("{prefix}{bin}");
                let restored = redis::pipe()
                    .incr(&key, (*units).min(lua_numbers::LUA_INT_MAX))
                    .ignore()
                    .expire(&key, ttl_s)
                    .ignore()
                    .query_async::<()>(connection)
                    .await;
                match restored {
                    Ok(()) => {}
                    // A counter Redis will not add to (not a number): the lease script reads
                    // it as spent; the other counters are restored, Redis stays up.
                    Err(error) if link::answered_with_error(&error) => {
                        ClusterStatus::count(&self.status.lease_errors);
                        tracing::warn!(connection = %lease.connection, limit = %lease.limit_name, %error, "cluster: a shared quota counter could not be restored");
                    }
                    Err(error) => return Err(error),
                }
            }
        }
        self.epochs = Some(epochs);
        if !restored {
            return Ok(());
        }
        tracing::info!(
            "cluster: Redis restarted; shared quota counters restored from this node's grants"
        );
        Ok(())
    }
}

impl LeaseRounds for LeaseTask {
    fn wake(&self) -> &tokio::sync::Notify {
        &self.leases.wake
    }

    fn one_round(&mut self) -> impl std::future::Future<Output = bool> + Send {
        self.round()
    }
}
