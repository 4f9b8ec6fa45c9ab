//! The admin view of everything learned (contract `GET /admin/state` and `/admin/lockouts`),
//! computed from the journal's fold at a given `now` (paces and forecasts by `pool_forecast`).
//! Holds ids and numbers, never a secret.

use std::collections::HashMap;
use std::sync::Arc;

use quotaroute_journal::{AuthKind, Skipped};
use serde::Serialize;

use crate::permit::InFlight;
use crate::policy::admission::Block;
use crate::policy::buckets::BucketSettings;
use crate::policy::connection_state::reading_saturates;
use crate::policy::rate_limit_headers::UsageReading;
use crate::policy::request::unroutable;
use crate::policy::router_state::RouterState;
use crate::policy::target_block::target_block;
use crate::policy::topology::{ComboSpec, Topology};
use crate::pool_forecast;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AdminState {
    pub providers: Vec<ProviderState>,
    pub connections: Vec<ConnectionAdminState>,
    pub combos: Vec<ComboState>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProviderState {
    pub name: String,
    pub profile: &'static str,
    pub breaker: &'static str,
    pub failures: u32,
    pub cycles: u32,
    pub retry_after_ms: Option<u64>,
    /// The generation APIs its hosts were found not to serve (behaviour §14), left out of
    /// its `apis` for now.
    pub apis_unserved: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DisabledState {
    pub reason: &'static str,
    pub remaining_ms: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BucketState {
    pub window: String,
    pub used: u64,
    pub limit: u64,
    pub saturated: bool,
    pub resets_at_ms: Option<u64>,
    /// The window's own pace (behaviour §13: what is left over the share of its time still
    /// to run, not bounded) as a float, 1.0 on pace; the journal counts paces in per mille.
    pub pace: f64,
    /// When it is spent at the rate it was used over the last `pacing.burn_window_ms`; `None`
    /// (null) when it lasts to its reset.
    pub runs_out_at_ms: Option<u64>,
    /// What is left is within the connection's reserve (§13: its target is blocked).
    pub reserved: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LockoutState {
    pub provider: String,
    pub connection: String,
    pub model: String,
    pub reason: &'static str,
    /// The HTTP status that triggered the lock (contract: `error_code`).
    pub error_code: Option<u16>,
    /// The upstream's own code string.
    pub upstream_code: Option<String>,
    /// The window of the quota that ran out, when the upstream named it (Google's `quotaId`,
    /// behaviour §15): `day`, `hour` or `minute`.
    pub quota_window: Option<&'static str>,
    pub remaining_ms: u64,
    /// When it ends (Unix ms): for a day's Google quota, midnight in Los Angeles.
    pub resets_at_ms: u64,
    pub failure_count: u32,
}

/// The window a quota id names (`GenerateRequestsPerDayPerProjectPerModel-FreeTier` → `day`).
pub fn quota_window(code: &str) -> Option<&'static str> {
    [
        ("PerDay", "day"),
        ("PerHour", "hour"),
        ("PerMinute", "minute"),
    ]
    .into_iter()
    .find(|(marker, _)| code.contains(marker))
    .map(|(_, window)| window)
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ConnectionAdminState {
    pub id: String,
    pub provider: String,
    pub auth: &'static str,
    pub cooldown_remaining_ms: u64,
    pub cooldown_level: u32,
    pub disabled: Option<DisabledState>,
    pub in_flight: u32,
    pub buckets: Vec<BucketState>,
    pub lockouts: Vec<LockoutState>,
    /// Input tokens the upstream reported on this connection's successes (behaviour §10).
    pub input_tokens: u64,
    /// Of those, read from the upstream's prompt cache.
    pub cached_input_tokens: u64,
    /// `cached_input_tokens / input_tokens`; `None` before any input was counted.
    pub cached_share: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ComboState {
    pub name: String,
    pub strategy: &'static str,
    pub targets: Vec<ComboTargetState>,
    /// When, at the combo's request rate over the last `pacing.burn_window_ms` split by its
    /// targets' paces, every target is spent, reserved or blocked; `None` (null) when the next
    /// reset comes first or no window says.
    pub runs_out_at_ms: Option<u64>,
    /// The earliest reset of a window (an hour or longer) of its targets.
    pub next_reset_at_ms: Option<u64>,
    /// Behaviour §13: what its windows are forecast to lose at their next resets, per window
    /// name (what spare requests could use).
    pub spare_now: Vec<crate::spare_now::SpareNow>,
    /// How many of its targets a request would be sent to now (no hard block).
    pub usable: usize,
    /// What a request gets now when no target can serve (behaviour §7); `None` (null) when
    /// one can.
    pub refusal: Option<ComboRefusal>,
}

/// The router's answer to a request on a combo none of whose targets can serve now.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ComboRefusal {
    /// 429 (every block a lockout, cooldown, spent or reserved window) or 503.
    pub status: u16,
    /// Its `Retry-After`, until the earliest block that ends by itself.
    pub retry_after_ms: Option<u64>,
}

/// Why a target would not be tried now (behaviour §2 step 0), as §7's `blocked` list says it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TargetBlockState {
    pub reason: &'static str,
    /// `None` (null) when it does not end by itself.
    pub remaining_ms: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ComboTargetState {
    pub connection: String,
    pub model: String,
    pub weight: u32,
    pub deficit: i64,
    /// Its pace as its DRR turn uses it (bounded; 1.0 when the combo is not paced), a float.
    pub pace: f64,
    /// Why a request would not be sent to it now; `None` (null): it would be
    /// (`policy::target_block`, the functions routing uses).
    pub block: Option<TargetBlockState>,
}

fn auth_name(auth: AuthKind) -> &'static str {
    match auth {
        AuthKind::ApiKey => "api_key",
        AuthKind::Oauth => "oauth",
    }
}

/// Each provider's breaker as the admin API shows it at `now_ms`.
fn provider_states(topology: &Topology, state: &RouterState, now_ms: u64) -> Vec<ProviderState> {
    topology
        .providers
        .iter()
        .map(|p| {
            let breaker = state.breaker(&p.name);
            let phase = breaker.phase_at(now_ms, &p.breaker);
            ProviderState {
                name: p.name.clone(),
                profile: auth_name(p.profile),
                breaker: phase.as_str(),
                failures: breaker.failures_at(now_ms, &p.breaker),
                cycles: breaker.cycles(),
                retry_after_ms: breaker
                    .open_until_ms()
                    .filter(|&until| until > now_ms)
                    .map(|until| until - now_ms),
                apis_unserved: state
                    .unserved_apis
                    .unserved(&p.name, now_ms)
                    .map(str::to_owned)
                    .collect(),
            }
        })
        .collect()
}

impl AdminState {
    pub fn build<S: std::hash::BuildHasher>(
        topology: &Topology,
        state: &RouterState,
        in_flight: &HashMap<String, Arc<InFlight>, S>,
        now_ms: u64,
    ) -> Self {
        let providers = provider_states(topology, state, now_ms);
        let connections = topology
            .connections
            .iter()
            .map(|c| {
                let learned = state.connection(&c.provider, &c.id);
                let health = &learned.health;
                let cached = state.cached_input.of(&c.id);
                ConnectionAdminState {
                    id: c.id.clone(),
                    provider: c.provider.clone(),
                    auth: auth_name(c.auth),
                    cooldown_remaining_ms: health.cooldown_remaining_at(now_ms).unwrap_or(0),
                    cooldown_level: health.level(),
                    disabled: health
                        .disabled()
                        .filter(|d| d.until_ms.is_none_or(|until| until > now_ms))
                        .map(|d| DisabledState {
                            reason: d.reason.as_str(),
                            remaining_ms: d.until_ms.map(|until| until - now_ms),
                        }),
                    in_flight: in_flight.get(&c.id).map_or(0, |f| f.get()),
                    buckets: learned
                        .buckets
                        .views(now_ms, &c.limits, &c.buckets)
                        .into_iter()
                        .map(|v| {
                            let outlook = pool_forecast::bucket_outlook(
                                state,
                                &learned,
                                c,
                                &v,
                                &topology.pacing,
                                now_ms,
                            );
                            BucketState {
                                window: v.window,
                                used: v.used,
                                limit: v.limit,
                                saturated: v.saturated,
                                resets_at_ms: v.resets_at_ms,
                                pace: outlook.pace,
                                runs_out_at_ms: outlook.runs_out_at_ms,
                                reserved: outlook.reserved,
                            }
                        })
                        .collect(),
                    lockouts: lockouts_of(&c.provider, &c.id, &learned.lockouts, now_ms),
                    input_tokens: cached.input_tokens,
                    cached_input_tokens: cached.cached_input_tokens,
                    cached_share: cached.share(),
                }
            })
            .collect();
        let combos = topology
            .combos
            .iter()
            .map(|combo| {
                let deficits = state.deficits.get(&combo.name).cloned().unwrap_or_default();
                // As routing reads them: clamped to [-Σw, +Σw] (a reload may have lowered Σw
                // below a stored deficit; behaviour §2 step 3).
                let total: i64 = combo.targets.iter().map(|t| i64::from(t.weight)).sum();
                const QUANTUM: i64 = crate::policy::pace::QUANTUM_PER_WEIGHT as i64;
                let outlook = pool_forecast::combo_outlook(state, topology, combo, now_ms);
                let blocks: Vec<_> = combo
                    .targets
                    .iter()
                    .map(|t| target_block(state, topology, &t.connection, &t.model, now_ms))
                    .collect();
                ComboState {
                    name: combo.name.clone(),
                    strategy: combo.strategy.as_str(),
                    runs_out_at_ms: outlook.runs_out_at_ms,
                    next_reset_at_ms: outlook.next_reset_at_ms,
                    spare_now: crate::spare_now::combo_spare_now(state, topology, combo, now_ms),
                    usable: blocks.iter().filter(|b| b.is_none()).count(),
                    refusal: combo_refusal(combo, &blocks),
                    targets: combo
                        .targets
                        .iter()
                        .zip(&outlook.target_paces)
                        .zip(&blocks)
                        .map(|((t, pace), block)| ComboTargetState {
                            block: block.map(|(reason, remaining_ms)| TargetBlockState {
                                reason: reason.as_str(),
                                remaining_ms,
                            }),
                            pace: *pace,
                            connection: t.connection.clone(),
                            model: t.model.clone(),
                            weight: t.weight,
                            // Shown in weights (stored in quanta, 1/1024 of one: §13).
                            deficit: deficits
                                .deficit(&t.exec_key())
                                .saturating_add(QUANTUM / 2)
                                .div_euclid(QUANTUM)
                                .clamp(-total, total),
                        })
                        .collect(),
                }
            })
            .collect();
        AdminState {
            providers,
            connections,
            combos,
        }
    }

    /// Every active lockout (contract `GET /admin/lockouts`).
    pub fn lockouts(&self) -> Vec<LockoutState> {
        self.connections
            .iter()
            .flat_map(|c| c.lockouts.iter().cloned())
            .collect()
    }
}

/// Puts each window's newest upstream reading (`latest`, from the connection's actor) in
/// place of the journaled one, where the window is still in its period.
pub fn overlay_readings(
    connection: &mut ConnectionAdminState,
    latest: &[UsageReading],
    settings: &BucketSettings,
    now_ms: u64,
) {
    for bucket in &mut connection.buckets {
        let Some(reading) = latest.iter().find(|r| r.window == bucket.window) else {
            continue;
        };
        if reading.resets_at_ms.is_some_and(|reset| reset <= now_ms) {
            continue;
        }
        bucket.used = reading.used;
        bucket.limit = reading.limit;
        bucket.resets_at_ms = reading.resets_at_ms;
        bucket.saturated = reading_saturates(reading.used, reading.limit, settings);
    }
}

/// §7's answer for a combo whose every target is blocked (`None` when one is not).
fn combo_refusal(combo: &ComboSpec, blocks: &[Option<Block>]) -> Option<ComboRefusal> {
    let blocked = combo
        .targets
        .iter()
        .zip(blocks)
        .map(|(t, block)| {
            block.map(|(reason, remaining_ms)| Skipped {
                connection: t.connection.clone(),
                model: t.model.clone(),
                reason,
                remaining_ms,
            })
        })
        .collect::<Option<Vec<_>>>()?;
    let answer = unroutable(blocked, combo.hold_ms);
    Some(ComboRefusal {
        status: answer.status,
        retry_after_ms: answer.retry_after_ms,
    })
}

fn lockouts_of(
    provider: &str,
    connection: &str,
    lockouts: &crate::policy::lockout::ModelLockouts,
    now_ms: u64,
) -> Vec<LockoutState> {
    lockouts
        .list_at(now_ms)
        .into_iter()
        .map(|lock| LockoutState {
            provider: provider.to_string(),
            connection: connection.to_string(),
            model: lock.model,
            reason: lock.reason.as_str(),
            error_code: lock.status,
            quota_window: lock.error_code.as_deref().and_then(quota_window),
            upstream_code: lock.error_code,
            remaining_ms: lock.remaining_ms,
            resets_at_ms: now_ms.saturating_add(lock.remaining_ms),
            failure_count: lock.failure_count,
        })
        .collect()
}
