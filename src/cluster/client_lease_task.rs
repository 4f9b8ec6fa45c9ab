//! Refills and syncs this node's client leases (`client_leases`) from the shared counters:
//! off the request path, one Lua script per lease per round. Each round, per lease: what it
//! spent beyond its grants is charged as debt, what it spent since the last sync is added to
//! the shared "spent" counter (what `/admin/clients`' `cluster` shows), and a new lease is
//! asked for when it runs low or was refused. A lease is synced at least every
//! [`REFRESH_MS`], so every node sees the others' spend within about that.
//!
//! With Redis down nothing is granted or refused: `client_leases` lets the node's own counts
//! decide, and the debt is charged when Redis answers again. A Redis that restarted empty has
//! forgotten the counters; they count again from what the nodes spend next.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use quotaroute_actors::SharedClock;
use redis::Script;

use crate::cluster::client_leases::{ClientLease, ClientLeases};
use crate::cluster::keys;
use crate::cluster::lease_rounds::{run_rounds, LeaseRounds};
use crate::cluster::leases::credit_saturating;
use crate::cluster::link::{self, Link};
use crate::cluster::lua_numbers;
use crate::cluster::status::ClusterStatus;
use crate::cluster::target::Target;

/// Every lease is synced at least this often (spend of other nodes shows within it).
pub const REFRESH_MS: u64 = 1_000;
/// While refused, ask again this often (the window slides, other nodes' grants age out).
const RETRY_REFUSED_MS: u64 = 1_000;

/// `KEYS`: the granted bins (oldest first, current last), then the spent bins the same way
/// (one client's keys: one hash slot, see `keys`); `ARGV`: bins, TTL seconds, limit, debt
/// (units spent beyond grants: always charged), want, spent since the last sync, as integer
/// strings (`lua_numbers`). Returns `{grant, granted in the window, spent in the window}`.
/// Counters saturate (`lua_numbers::PRELUDE`): no value fails the script.
const CLIENT_LEASE_LUA: &str = r"
local n = tonumber(ARGV[1])
local ttl = tonumber(ARGV[2])
local limit = tonumber(ARGV[3])
local debt = tonumber(ARGV[4])
local want = tonumber(ARGV[5])
local spent = tonumber(ARGV[6])
local granted_now = KEYS[n]
local spent_now = KEYS[2 * n]
add(granted_now, debt, ttl)
add(spent_now, spent, ttl)
local granted, total = 0, 0
local values = redis.call('MGET', unpack(KEYS))
for i = 1, 2 * n do
  if i <= n then
    granted = math.min(CAP, granted + read(values[i]))
  else
    total = math.min(CAP, total + read(values[i]))
  end
end
local grant = 0
if want > 0 and granted < limit then
  grant = math.min(want, limit - granted)
  add(granted_now, grant, ttl)
end
return {grant, granted, total}
";

/// The client lease task.
pub struct ClientLeaseTask {
    leases: Arc<ClientLeases>,
    status: Arc<ClusterStatus>,
    clock: SharedClock,
    link: Link,
    script: Script,
}

impl ClientLeaseTask {
    pub fn new(
        leases: Arc<ClientLeases>,
        status: Arc<ClusterStatus>,
        clock: SharedClock,
        client: Target,
    ) -> Self {
        ClientLeaseTask {
            leases,
            status,
            clock,
            link: Link::new(client, Duration::from_millis(500)),
            script: Script::new(&format!("{}{CLIENT_LEASE_LUA}", lua_numbers::PRELUDE)),
        }
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
        let now = self.clock.now_ms();
        for lease in self.leases.all() {
            forget_stale_grant(&lease, now);
            let refused = lease.refused();
            let low = lease.available() <= lease.low_water();
            let failing = lease.failing.load(Ordering::Relaxed);
            let due = if refused || failing {
                now >= lease.next_try_ms.load(Ordering::Relaxed)
            } else {
                low || lease.unsynced.load(Ordering::Relaxed) > 0
                    || now >= lease.synced_at_ms.load(Ordering::Relaxed) + REFRESH_MS
            };
            if !due {
                continue;
            }
            let want = if refused || low { lease.lease_units } else { 0 };
            match self.sync(&lease, now, want).await {
                Ok(()) => {
                    if lease.failing.swap(false, Ordering::Relaxed) {
                        tracing::info!(client = %lease.client, limit = lease.kind.as_str(), "cluster: client lease synced again");
                    }
                }
                Err(error) if link::answered_with_error(&error) => {
                    // Redis answered: it is up, and only this lease's call failed.
                    self.status.set_redis_up(true, "");
                    ClusterStatus::count(&self.status.lease_errors);
                    lease
                        .next_try_ms
                        .store(now + RETRY_REFUSED_MS, Ordering::Relaxed);
                    if !lease.failing.swap(true, Ordering::Relaxed) {
                        tracing::warn!(client = %lease.client, limit = lease.kind.as_str(), %error, "cluster: Redis failed this client lease's sync; the other leases go on, this one is retried every second");
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

    /// One script call for `lease`: debt and spend charged, `want` units asked for.
    async fn sync(&mut self, lease: &ClientLease, now: u64, want: u64) -> redis::RedisResult<()> {
        let debt = lease.available().min(0).unsigned_abs();
        let spent = lease.unsynced.load(Ordering::Relaxed);
        let bins = lease.shape.bins_at(now);
        let prefix = keys::client_prefix(&lease.client, lease.kind.as_str());
        let mut invocation = self.script.prepare_invoke();
        for bin in &bins {
            invocation.key(format!("{prefix}g:{bin}"));
        }
        for bin in &bins {
            invocation.key(format!("{prefix}s:{bin}"));
        }
        invocation
            .arg(lua_numbers::arg(bins.len() as u64))
            .arg(lua_numbers::arg(lease.shape.ttl_s(now)))
            .arg(lua_numbers::arg(lease.limit))
            .arg(lua_numbers::arg(debt))
            .arg(lua_numbers::arg(want))
            .arg(lua_numbers::arg(spent));
        let connection = self.link.connection().await?;
        let (grant, granted, total): (u64, u64, u64) = invocation.invoke_async(connection).await?;
        self.status.set_redis_up(true, "");
        lease.unsynced.fetch_sub(spent, Ordering::Relaxed);
        credit_saturating(&lease.available, debt.saturating_add(grant));
        lease.cluster_used.store(total, Ordering::Relaxed);
        lease
            .cluster_granted
            .store(granted.saturating_add(grant), Ordering::Relaxed);
        lease.synced_at_ms.store(now, Ordering::Relaxed);
        if want == 0 {
            return Ok(());
        }
        if grant > 0 {
            ClusterStatus::count(&self.status.leases_granted);
            lease
                .grant_bin
                .store(lease.shape.current_bin(now), Ordering::Relaxed);
            lease.refused.store(false, Ordering::Relaxed);
            return Ok(());
        }
        ClusterStatus::count(&self.status.leases_refused);
        lease
            .next_try_ms
            .store(now + RETRY_REFUSED_MS, Ordering::Relaxed);
        if !lease.refused.swap(true, Ordering::Relaxed) {
            tracing::info!(client = %lease.client, limit = lease.kind.as_str(), granted, "cluster: client's shared limit spent; refusing it on this node");
        }
        Ok(())
    }
}

/// What is left of a grant whose bin no longer counts is dropped (it would spend in a later
/// window); a budget's debt of a past period is dropped too (the new period starts at zero).
/// A lease never granted yet (bin 0) keeps what it spent: that is charged with its first
/// lease.
fn forget_stale_grant(lease: &ClientLease, now: u64) {
    let bin = lease.grant_bin.load(Ordering::Relaxed);
    let current = lease.shape.current_bin(now);
    if bin == 0 {
        lease.grant_bin.store(current, Ordering::Relaxed);
        return;
    }
    if lease.shape.counts(bin, now) {
        return;
    }
    if matches!(
        lease.shape,
        crate::cluster::client_leases::CounterShape::Period(_)
    ) {
        lease.available.store(0, Ordering::Relaxed);
        lease.unsynced.store(0, Ordering::Relaxed);
        lease.refused.store(false, Ordering::Relaxed);
    } else {
        let _ = lease
            .available
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| {
                Some(left.min(0))
            });
    }
    lease.grant_bin.store(current, Ordering::Relaxed);
}

impl LeaseRounds for ClientLeaseTask {
    fn wake(&self) -> &tokio::sync::Notify {
        &self.leases.wake
    }

    fn one_round(&mut self) -> impl std::future::Future<Output = bool> + Send {
        self.round()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clients::{BudgetPeriod, LimitKind};
    use crate::cluster::client_leases::CounterShape;

    const NOW: u64 = 1_796_166_000_000; // 2026-12-01T23:00:00Z

    #[test]
    fn old_grants_stop_spending_and_a_new_period_starts_at_zero() {
        let minute =
            CounterShape::Window(quotaroute_actors::policy::window::WindowShape::PER_MINUTE);
        let lease = ClientLease::new("team-a", LimitKind::RequestsPerMin, 20, 2, minute);
        // Never granted: what it spent (Redis down) is kept, to be charged with a lease.
        lease.available.store(-3, Ordering::Relaxed);
        forget_stale_grant(&lease, NOW);
        assert_eq!(lease.available(), -3);
        // Granted at NOW with 2 left: still counted 55 s later, dropped once the bin left.
        lease.available.store(2, Ordering::Relaxed);
        forget_stale_grant(&lease, NOW + 55_000);
        assert_eq!(lease.available(), 2);
        forget_stale_grant(&lease, NOW + 60_000);
        assert_eq!(lease.available(), 0);
        // Debt is not dropped by the window: it was spent, and is charged.
        lease.available.store(-1, Ordering::Relaxed);
        forget_stale_grant(&lease, NOW + 200_000);
        assert_eq!(lease.available(), -1);

        let day = CounterShape::Period(BudgetPeriod::Day);
        let budget = ClientLease::new("team-a", LimitKind::Budget, 40_000_000, 10_000_000, day);
        forget_stale_grant(&budget, NOW);
        budget.available.store(-5, Ordering::Relaxed);
        budget.unsynced.store(5, Ordering::Relaxed);
        budget.refused.store(true, Ordering::Relaxed);
        forget_stale_grant(&budget, NOW + 1_000);
        assert!(
            (budget.available(), budget.refused()) == (-5, true),
            "same day"
        );
        // Midnight UTC: the new day's counter starts at zero, nothing carried over.
        forget_stale_grant(&budget, NOW + 3_600_000);
        assert_eq!((budget.available(), budget.refused()), (0, false));
        assert_eq!(budget.unsynced.load(Ordering::Relaxed), 0);
    }
}
