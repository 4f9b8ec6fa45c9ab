//! Per-(connection, model) lockouts (behaviour §5 "Model lockout", the lockout column of §4):
//! how long a model stays locked on one connection after a 429, 404 or quota failure. Pure,
//! event-sourced: `on_failure`/`clear` return events and [`ModelLockouts::apply`] is the only
//! mutator. Must not touch the connection's cooldown or the provider breaker; never reads a clock.
//!
//! Decisions made precise here:
//! - `n` (the failure count) is the stored count + 1 while `now` is before the previous lock's
//!   end + `reset_window_ms`, else 1. Upstream-reset and quota locks count too.
//! - A failure whose lock would not end later than the active one produces **no event**: the lock
//!   is never shortened and the failure (typically from a request already in flight) is not
//!   counted, so herds cannot escalate it.
//! - Quota without a reset: `quota_ms`; a quota failure after that lock expired (the probe)
//!   doubles the previous quota lock, up to `quota_max_ms`; quota failures while a quota lock is
//!   active produce nothing; a success ends the doubling.
//! - Memory: `apply` gets no settings, so it cannot tell when a reset window passed. The map is
//!   bounded by `max_per_connection` instead: expired entries always expire soonest, so they are
//!   evicted first. A success also drops an expired entry once its count halves to 0.

use std::collections::BTreeMap;

use quotaroute_journal::{
    ActionBy, BlockReason, Event, LockReason, ModelLocked, ModelUnlocked, ResetSource,
};
use serde::{Deserialize, Serialize};

/// Lockout durations and bounds (`[defaults.lockout]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LockoutSettings {
    /// First backoff of a `rate_limited` lock without an upstream reset.
    pub rate_limited_base_ms: u64,
    /// First backoff of a `not_found` lock.
    pub not_found_base_ms: u64,
    /// Longest backoff lock.
    pub max_ms: u64,
    /// Longest lock an upstream reset may ask for.
    pub max_upstream_ms: u64,
    /// First `quota_exhausted` lock without an upstream reset.
    pub quota_ms: u64,
    /// Longest quota lock after doubling.
    pub quota_max_ms: u64,
    /// Failures keep counting while the previous lock plus this has not passed.
    pub reset_window_ms: u64,
    /// How long a billing failure disables the whole connection (used by `cooldown`).
    pub billing_ms: u64,
    /// Most lockouts one connection keeps.
    pub max_per_connection: u32,
}

impl Default for LockoutSettings {
    fn default() -> Self {
        LockoutSettings {
            rate_limited_base_ms: 1_000,
            not_found_base_ms: 120_000,
            max_ms: 1_800_000,
            max_upstream_ms: 7 * 24 * 3_600_000,
            quota_ms: 3_600_000,
            quota_max_ms: 24 * 3_600_000,
            reset_window_ms: 1_800_000,
            billing_ms: 3_600_000,
            max_per_connection: 1_000,
        }
    }
}

impl LockoutSettings {
    /// `base · 2^(n−1)` for `reason`'s base, capped at `max_ms` (quota has no backoff: `quota_ms`).
    pub fn backoff_ms(&self, reason: LockReason, failure_count: u32) -> u64 {
        let base = match reason {
            LockReason::RateLimited => self.rate_limited_base_ms,
            LockReason::NotFound => self.not_found_base_ms,
            LockReason::QuotaExhausted => return self.quota_ms.min(self.quota_max_ms),
        };
        let doubling = 1_u64
            .checked_shl(failure_count.saturating_sub(1))
            .unwrap_or(u64::MAX);
        base.saturating_mul(doubling).min(self.max_ms)
    }
}

/// What is known about one (connection, model): the current (or last) lock and its history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelLock {
    pub reason: LockReason,
    /// End of the lock; in the past once it expired (the entry stays for its failure count).
    pub until_ms: u64,
    /// `n` of the latest counted failure; halved by each success.
    pub failure_count: u32,
    /// The HTTP status that triggered the lock (429, 404, 403…).
    pub status: Option<u16>,
    /// The upstream's own code string (`rate_limit_exceeded`, …).
    pub error_code: Option<String>,
    pub source: ResetSource,
    /// Length of the latest quota lock without a reset, which a failed probe doubles (0: none).
    pub quota_backoff_ms: u64,
}

/// An active lock, as `GET /admin/lockouts` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActiveLock {
    pub model: String,
    pub reason: LockReason,
    pub status: Option<u16>,
    pub error_code: Option<String>,
    pub remaining_ms: u64,
    pub failure_count: u32,
}

/// Every model lockout of one connection; rebuilt by [`ModelLockouts::apply`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelLockouts {
    provider: String,
    connection: String,
    locks: BTreeMap<String, ModelLock>,
}

impl ModelLockouts {
    /// No lockouts yet for `connection` of `provider`.
    pub fn new(provider: impl Into<String>, connection: impl Into<String>) -> Self {
        ModelLockouts {
            provider: provider.into(),
            connection: connection.into(),
            locks: BTreeMap::new(),
        }
    }

    /// The lockouts of `connection` as stored: for a snapshot migration (`crate::snapshot`).
    pub fn from_locks(
        provider: impl Into<String>,
        connection: impl Into<String>,
        locks: BTreeMap<String, ModelLock>,
    ) -> Self {
        ModelLockouts {
            provider: provider.into(),
            connection: connection.into(),
            locks,
        }
    }

    pub fn provider(&self) -> &str {
        &self.provider
    }

    pub fn connection(&self) -> &str {
        &self.connection
    }

    /// The stored entry for `model`, active or not.
    pub fn lock(&self, model: &str) -> Option<&ModelLock> {
        self.locks.get(model)
    }

    /// Entries held (active or expired), bounded by `max_per_connection`.
    pub fn len(&self) -> usize {
        self.locks.len()
    }

    pub fn is_empty(&self) -> bool {
        self.locks.is_empty()
    }

    /// Whether `model` is locked at `now`, why, and for how much longer.
    pub fn block_at(&self, model: &str, now_ms: u64) -> Option<(BlockReason, u64)> {
        self.locks
            .get(model)
            .filter(|lock| now_ms < lock.until_ms)
            .map(|lock| (block_reason(lock.reason), lock.until_ms - now_ms))
    }

    /// The locks active at `now`, by model name.
    pub fn list_at(&self, now_ms: u64) -> Vec<ActiveLock> {
        self.locks
            .iter()
            .filter(|(_, lock)| now_ms < lock.until_ms)
            .map(|(model, lock)| ActiveLock {
                model: model.clone(),
                reason: lock.reason,
                status: lock.status,
                error_code: lock.error_code.clone(),
                remaining_ms: lock.until_ms - now_ms,
                failure_count: lock.failure_count,
            })
            .collect()
    }

    /// Decide the lock for one failure of `model` on this connection (§5). `reset_hint_ms` is
    /// the upstream's own reset as a duration from `now`, if it gave one. Returns evictions (if
    /// the cap is reached) followed by the `ModelLocked`, or nothing when the lock would not end
    /// later than the active one.
    #[expect(
        clippy::too_many_arguments,
        reason = "each argument is one input the rule reads; a struct of them would only rename them"
    )]
    pub fn on_failure(
        &self,
        provider: &str,
        connection: &str,
        model: &str,
        reason: LockReason,
        status: Option<u16>,
        error_code: Option<String>,
        reset_hint_ms: Option<u64>,
        now_ms: u64,
        s: &LockoutSettings,
    ) -> Vec<Event> {
        if provider != self.provider || connection != self.connection {
            // `apply` would ignore events for another connection; producing them would be a lie.
            return Vec::new();
        }
        // Within the reset window of the previous lock its history still counts.
        let previous = self
            .locks
            .get(model)
            .filter(|lock| now_ms < lock.until_ms.saturating_add(s.reset_window_ms));
        let active = previous.filter(|lock| now_ms < lock.until_ms);
        let failure_count = previous.map_or(1, |lock| lock.failure_count.saturating_add(1));

        let (duration_ms, source) = match (reset_hint_ms, reason) {
            (Some(hint), _) => (hint.min(s.max_upstream_ms), ResetSource::Upstream),
            (None, LockReason::QuotaExhausted) => {
                if active.is_some_and(|lock| lock.reason == LockReason::QuotaExhausted) {
                    // The quota lock already covers it; only the probe after it may double it.
                    return Vec::new();
                }
                let failed_probe =
                    previous.filter(|lock| lock.quota_backoff_ms > 0 && active.is_none());
                let duration = match failed_probe {
                    Some(lock) => lock.quota_backoff_ms.saturating_mul(2),
                    None => s.quota_ms,
                };
                (duration.min(s.quota_max_ms), ResetSource::Quota)
            }
            (None, _) => (s.backoff_ms(reason, failure_count), ResetSource::Backoff),
        };
        let until_ms = now_ms.saturating_add(duration_ms);
        if !replaces_block(
            active.map(|lock| Some(lock.until_ms)),
            Some(until_ms),
            now_ms,
        ) {
            // [LiteLLM #40130] a new lock never shortens a longer one.
            return Vec::new();
        }

        let mut events = Vec::new();
        let (evicted, keep_new) = self.evictions(model, until_ms, s);
        for victim in evicted {
            events.push(self.unlocked(victim, ActionBy::Eviction));
        }
        if keep_new {
            events.push(Event::ModelLocked(ModelLocked {
                provider: self.provider.clone(),
                connection: self.connection.clone(),
                model: model.to_owned(),
                reason,
                status,
                error_code,
                until_ms,
                failure_count,
                source,
            }));
        }
        events
    }

    /// An operator clears the lock (and history) of `model`; `None` if there is none.
    pub fn clear(&self, provider: &str, connection: &str, model: &str) -> Option<Event> {
        if provider != self.provider || connection != self.connection {
            return None;
        }
        self.locks
            .contains_key(model)
            .then(|| self.unlocked(model, ActionBy::Admin))
    }

    /// Whether a success on `model` may change this state (it has a lock or history to relax),
    /// per the `RequestSucceeded` arm of `apply`.
    pub fn success_changes_state(&self, model: &str) -> bool {
        self.locks.contains_key(model)
    }

    /// Fold one journaled event into the state. Reacts to `ModelLocked`, `ModelUnlocked` and
    /// `RequestSucceeded` for this connection; ignores everything else.
    pub fn apply(&mut self, at_ms: u64, event: &Event) {
        match event {
            Event::ModelLocked(locked) if self.owns(&locked.provider, &locked.connection) => {
                let quota_backoff_ms = if locked.source == ResetSource::Quota {
                    locked.until_ms.saturating_sub(at_ms)
                } else {
                    self.locks
                        .get(&locked.model)
                        .map_or(0, |lock| lock.quota_backoff_ms)
                };
                self.locks.insert(
                    locked.model.clone(),
                    ModelLock {
                        reason: locked.reason,
                        until_ms: locked.until_ms,
                        failure_count: locked.failure_count,
                        status: locked.status,
                        error_code: locked.error_code.clone(),
                        source: locked.source,
                        quota_backoff_ms,
                    },
                );
            }
            Event::ModelUnlocked(unlocked)
                if self.owns(&unlocked.provider, &unlocked.connection) =>
            {
                self.locks.remove(&unlocked.model);
            }
            Event::RequestSucceeded(success)
                if self.owns(&success.provider, &success.connection) =>
            {
                if let Some(lock) = self.locks.get_mut(&*success.model) {
                    // §4: a success halves the failure count; the quota is back, so its doubling ends.
                    lock.failure_count /= 2;
                    lock.quota_backoff_ms = 0;
                    if lock.failure_count == 0 && lock.until_ms <= at_ms {
                        self.locks.remove(&*success.model);
                    }
                }
            }
            _ => {}
        }
    }

    /// Which entries to drop so that at most `max_per_connection` remain once `model` is locked
    /// until `until_ms`: the ones expiring soonest (ties: existing before new, then by name).
    /// Returns the existing victims and whether the new lock itself survives.
    fn evictions<'a>(
        &'a self,
        model: &'a str,
        until_ms: u64,
        s: &LockoutSettings,
    ) -> (Vec<&'a str>, bool) {
        let cap = usize::try_from(s.max_per_connection).unwrap_or(usize::MAX);
        let is_new = !self.locks.contains_key(model);
        let held = self.locks.len() + usize::from(is_new);
        if held <= cap {
            return (Vec::new(), true);
        }
        let mut candidates: Vec<(u64, bool, &str)> = self
            .locks
            .iter()
            .filter(|(name, _)| name.as_str() != model)
            .map(|(name, lock)| (lock.until_ms, false, name.as_str()))
            .collect();
        candidates.push((until_ms, true, model));
        candidates.sort_unstable();
        let mut victims = Vec::new();
        let mut keep_new = true;
        for (_, is_candidate_new, name) in candidates.into_iter().take(held - cap) {
            if is_candidate_new {
                keep_new = false;
            } else {
                victims.push(name);
            }
        }
        // An existing entry for `model` that loses its new lock keeps what it had.
        (victims, keep_new)
    }

    fn unlocked(&self, model: &str, by: ActionBy) -> Event {
        Event::ModelUnlocked(ModelUnlocked {
            provider: self.provider.clone(),
            connection: self.connection.clone(),
            model: model.to_owned(),
            by,
        })
    }

    fn owns(&self, provider: &str, connection: &str) -> bool {
        provider == self.provider && connection == self.connection
    }
}

fn block_reason(reason: LockReason) -> BlockReason {
    match reason {
        LockReason::RateLimited => BlockReason::RateLimited,
        LockReason::NotFound => BlockReason::NotFound,
        LockReason::QuotaExhausted => BlockReason::QuotaExhausted,
    }
}

/// Behaviour §5, "a new block never shortens a longer one", for every block that has an end:
/// whether a block ending at `new_until_ms` (`None`: until cleared) takes the place of the one
/// in force, `current` (`None`: there is none; `Some(None)`: until cleared), at `now`. An
/// expired block is always replaced; an equal one never (it is the same block, so the first
/// stays). Model lockouts, cooldowns, disables and a peer's copies of them (`peer_merge`) all
/// ask this.
pub fn replaces_block(
    current: Option<Option<u64>>,
    new_until_ms: Option<u64>,
    now_ms: u64,
) -> bool {
    match (current, new_until_ms) {
        (None, _) => true,
        (Some(Some(until)), _) if until <= now_ms => true,
        (Some(None), _) => false,
        (Some(Some(_)), None) => true,
        (Some(Some(until)), Some(new)) => until < new,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const P: &str = "openai";
    const C: &str = "key-1";
    const SEC: u64 = 1_000;
    const MIN: u64 = 60 * SEC;
    const HOUR: u64 = 60 * MIN;

    type Live = crate::journaled::Live<ModelLockouts, LockoutSettings>;

    impl crate::journaled::Reducer for ModelLockouts {
        fn apply_event(&mut self, at_ms: u64, event: &Event) {
            self.apply(at_ms, event);
        }
    }

    impl Live {
        fn new(s: LockoutSettings) -> Self {
            Live::with(ModelLockouts::new(P, C), s)
        }

        fn fail(
            &mut self,
            model: &str,
            reason: LockReason,
            hint: Option<u64>,
            now: u64,
        ) -> Vec<Event> {
            let events = self.state.on_failure(
                P,
                C,
                model,
                reason,
                Some(429),
                Some("rate_limit_exceeded".into()),
                hint,
                now,
                &self.s,
            );
            self.commit(now, events)
        }

        fn succeed(&mut self, model: &str, now: u64) {
            self.commit(now, vec![success(model)]);
        }
    }

    fn success(model: &str) -> Event {
        quotaroute_journal::testkit::succeeded(P, C, model, 1, 1)
    }

    fn locked(events: &[Event]) -> ModelLocked {
        match events.last() {
            Some(Event::ModelLocked(l)) => l.clone(),
            other => panic!("expected a lock, got {other:?}"),
        }
    }

    #[test]
    fn s5_lockout_defaults() {
        let s = LockoutSettings::default();
        assert_eq!(
            (s.rate_limited_base_ms, s.not_found_base_ms),
            (SEC, 120 * SEC)
        );
        assert_eq!((s.max_ms, s.max_upstream_ms), (30 * MIN, 7 * 24 * HOUR));
        assert_eq!((s.quota_ms, s.quota_max_ms), (HOUR, 24 * HOUR));
        assert_eq!(
            (s.reset_window_ms, s.billing_ms, s.max_per_connection),
            (30 * MIN, HOUR, 1_000)
        );
    }

    #[test]
    fn s5_lock_backoff_base_times_2_pow_n_minus_1_capped_at_30_min() {
        // Each failure right after the previous lock expired (inside the reset window).
        let table: [(LockReason, &[u64]); 2] = [
            (
                LockReason::RateLimited,
                &[1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1_024, 1_800, 1_800],
            ),
            (LockReason::NotFound, &[120, 240, 480, 960, 1_800, 1_800]),
        ];
        for (reason, seconds) in table {
            let mut live = Live::new(LockoutSettings::default());
            let mut now = 0;
            for (i, want) in seconds.iter().enumerate() {
                let lock = locked(&live.fail("m", reason, None, now));
                assert_eq!(lock.until_ms - now, want * SEC, "{reason:?} n={}", i + 1);
                assert_eq!(
                    (lock.failure_count, lock.source),
                    (i as u32 + 1, ResetSource::Backoff)
                );
                now = lock.until_ms;
            }
            live.assert_replay_equals_live();
        }
    }

    #[test]
    fn s5_lock_count_restarts_after_reset_window() {
        // (gap after the 1 s lock ends, n of the next failure)
        let table = [(0, 2), (30 * MIN - 1, 2), (30 * MIN, 1), (5 * HOUR, 1)];
        for (gap, n) in table {
            let mut live = Live::new(LockoutSettings::default());
            live.fail("m", LockReason::RateLimited, None, 0);
            let lock = locked(&live.fail("m", LockReason::RateLimited, None, SEC + gap));
            assert_eq!(lock.failure_count, n, "gap {gap}");
        }
    }

    #[test]
    fn s5_lock_upstream_reset_used_exactly_up_to_7_days() {
        let table = [
            (Some(1_500), 1_500),
            (Some(6 * MIN), 6 * MIN),
            (Some(8 * 24 * HOUR), 7 * 24 * HOUR),
        ];
        for (hint, want) in table {
            for reason in [
                LockReason::RateLimited,
                LockReason::QuotaExhausted,
                LockReason::NotFound,
            ] {
                let mut live = Live::new(LockoutSettings::default());
                let lock = locked(&live.fail("m", reason, hint, 10));
                assert_eq!(
                    (lock.until_ms, lock.source),
                    (10 + want, ResetSource::Upstream),
                    "{reason:?}"
                );
            }
        }
    }

    #[test]
    fn s5_lock_upstream_resets_count_failures_too() {
        let mut live = Live::new(LockoutSettings::default());
        live.fail("m", LockReason::RateLimited, Some(5 * SEC), 0);
        let lock = locked(&live.fail("m", LockReason::RateLimited, None, 5 * SEC));
        assert_eq!((lock.failure_count, lock.until_ms), (2, 7 * SEC));
    }

    #[test]
    fn s5_lock_quota_without_reset_1h_then_each_failed_probe_doubles_to_24h() {
        let mut live = Live::new(LockoutSettings::default());
        let mut now = 0;
        for want in [1, 2, 4, 8, 16, 24, 24] {
            let lock = locked(&live.fail("m", LockReason::QuotaExhausted, None, now));
            assert_eq!(
                (lock.until_ms - now, lock.source),
                (want * HOUR, ResetSource::Quota)
            );
            now = lock.until_ms + 10; // the probe goes out just after the lock ends, and fails
        }
        live.assert_replay_equals_live();
    }

    #[test]
    fn s5_lock_quota_failure_while_quota_locked_does_not_double() {
        let mut live = Live::new(LockoutSettings::default());
        live.fail("m", LockReason::QuotaExhausted, None, 0);
        assert!(live
            .fail("m", LockReason::QuotaExhausted, None, 10 * MIN)
            .is_empty());
        let probe = locked(&live.fail("m", LockReason::QuotaExhausted, None, HOUR));
        assert_eq!(probe.until_ms, 3 * HOUR, "the probe doubles once: 2 h");
    }

    #[test]
    fn s5_lock_quota_success_ends_doubling() {
        let mut live = Live::new(LockoutSettings::default());
        live.fail("m", LockReason::QuotaExhausted, None, 0);
        live.fail("m", LockReason::QuotaExhausted, None, HOUR); // probe failed: 2 h
        live.succeed("m", 3 * HOUR); // probe succeeded: quota is back
        let lock = locked(&live.fail("m", LockReason::QuotaExhausted, None, 3 * HOUR + MIN));
        assert_eq!(lock.until_ms - (3 * HOUR + MIN), HOUR);
    }

    #[test]
    fn s5_replaces_block_defines_ties_and_expiry_once() {
        assert!(replaces_block(None, Some(5), 0), "nothing in force");
        assert!(
            replaces_block(Some(Some(10)), Some(5), 10),
            "expired: replaced"
        );
        assert!(!replaces_block(Some(Some(10)), Some(5), 0), "shorter: kept");
        assert!(
            !replaces_block(Some(Some(10)), Some(10), 0),
            "equal: the first stays"
        );
        assert!(
            replaces_block(Some(Some(10)), Some(11), 0),
            "longer: replaced"
        );
        assert!(
            replaces_block(Some(Some(10)), None, 0),
            "until cleared is longer"
        );
        assert!(
            !replaces_block(Some(None), Some(u64::MAX), 0),
            "nothing outlasts until cleared"
        );
        assert!(!replaces_block(Some(None), None, 0), "the same block");
    }

    #[test]
    fn s5_lock_never_shortened() {
        let mut live = Live::new(LockoutSettings::default());
        let long = locked(&live.fail("m", LockReason::QuotaExhausted, Some(HOUR), 0));
        // (what comes in, at) — none of these would end later than the 1 h lock.
        let table = [
            (LockReason::RateLimited, None, SEC),
            (LockReason::RateLimited, Some(10 * MIN), 2 * SEC),
            (LockReason::NotFound, None, 3 * SEC),
            (LockReason::QuotaExhausted, Some(HOUR - 4 * SEC), 4 * SEC),
        ];
        for (reason, hint, at) in table {
            assert!(
                live.fail("m", reason, hint, at).is_empty(),
                "{reason:?} {hint:?}"
            );
            assert_eq!(
                live.state.lock("m").map(|l| l.until_ms),
                Some(long.until_ms)
            );
        }
        // One that ends later does extend it.
        let later = locked(&live.fail("m", LockReason::RateLimited, Some(2 * HOUR), 5 * SEC));
        assert_eq!(later.until_ms, 2 * HOUR + 5 * SEC);
        live.assert_replay_equals_live();
    }

    #[test]
    fn s4_lock_429_locks_only_that_model() {
        let mut live = Live::new(LockoutSettings::default());
        live.fail("gpt-4o", LockReason::RateLimited, Some(30 * SEC), 0);
        assert_eq!(
            live.state.block_at("gpt-4o", 0),
            Some((BlockReason::RateLimited, 30 * SEC))
        );
        assert_eq!(live.state.block_at("gpt-4o-mini", 0), None);
    }

    #[test]
    fn s5_lock_block_reason_by_lock_reason() {
        let table = [
            (LockReason::RateLimited, BlockReason::RateLimited),
            (LockReason::NotFound, BlockReason::NotFound),
            (LockReason::QuotaExhausted, BlockReason::QuotaExhausted),
        ];
        for (reason, block) in table {
            let mut live = Live::new(LockoutSettings::default());
            let lock = locked(&live.fail("m", reason, None, 0));
            assert_eq!(
                live.state.block_at("m", 1),
                Some((block, lock.until_ms - 1))
            );
            assert_eq!(
                live.state.block_at("m", lock.until_ms),
                None,
                "expired locks are inactive"
            );
        }
    }

    #[test]
    fn s4_lock_success_halves_failure_count() {
        let mut live = Live::new(LockoutSettings::default());
        let mut now = 0;
        for _ in 0..5 {
            now = locked(&live.fail("m", LockReason::RateLimited, None, now)).until_ms;
        }
        live.succeed("m", now);
        assert_eq!(live.state.lock("m").map(|l| l.failure_count), Some(2));
        let lock = locked(&live.fail("m", LockReason::RateLimited, None, now));
        assert_eq!((lock.failure_count, lock.until_ms - now), (3, 4 * SEC));
        live.assert_replay_equals_live();
    }

    #[test]
    fn s5_lock_success_forgets_expired_entry_with_no_failures_left() {
        let mut live = Live::new(LockoutSettings::default());
        live.fail("m", LockReason::RateLimited, None, 0);
        live.succeed("m", 500); // in flight before the lock: lock stays, count 1 → 0
        assert!(live.state.block_at("m", 500).is_some());
        live.fail("m", LockReason::RateLimited, None, SEC); // n = 1 again: 1 s
        live.succeed("m", 3 * SEC);
        assert!(live.state.is_empty());
    }

    #[test]
    fn s5_lock_cap_evicts_soonest_expiring() {
        let s = LockoutSettings {
            max_per_connection: 3,
            ..LockoutSettings::default()
        };
        let mut live = Live::new(s);
        live.fail("a", LockReason::RateLimited, Some(30 * SEC), 0);
        live.fail("b", LockReason::RateLimited, Some(10 * SEC), 0);
        live.fail("c", LockReason::RateLimited, Some(20 * SEC), 0);
        let events = live.fail("d", LockReason::NotFound, None, 0);
        assert_eq!(
            events[0],
            Event::ModelUnlocked(ModelUnlocked {
                provider: P.into(),
                connection: C.into(),
                model: "b".into(),
                by: ActionBy::Eviction,
            })
        );
        assert_eq!(locked(&events).model, "d");
        assert_eq!(live.state.len(), 3);
        // A new lock that would itself expire soonest is the one dropped: nothing changes.
        assert!(live
            .fail("e", LockReason::RateLimited, Some(SEC), 0)
            .is_empty());
        // Expired entries expire soonest of all, so they go first.
        let events = live.fail("e", LockReason::RateLimited, None, 25 * SEC);
        assert!(matches!(&events[0], Event::ModelUnlocked(u) if u.model == "c"));
        live.assert_replay_equals_live();
    }

    #[test]
    fn s5_lock_admin_clear() {
        let mut live = Live::new(LockoutSettings::default());
        assert_eq!(live.state.clear(P, C, "m"), None);
        live.fail("m", LockReason::NotFound, None, 0);
        assert_eq!(live.state.clear(P, "key-2", "m"), None);
        let event = live.state.clear(P, C, "m").expect("a lock to clear");
        assert!(matches!(&event, Event::ModelUnlocked(u) if u.by == ActionBy::Admin));
        live.commit(1, vec![event]);
        assert_eq!(live.state.block_at("m", 1), None);
        assert!(live.state.is_empty(), "history goes too");
    }

    #[test]
    fn s5_lock_list_at_shows_active_locks_only() {
        let mut live = Live::new(LockoutSettings::default());
        live.fail("a", LockReason::RateLimited, None, 0);
        live.fail("b", LockReason::NotFound, None, 0);
        assert_eq!(
            live.state.list_at(2 * SEC),
            vec![ActiveLock {
                model: "b".into(),
                reason: LockReason::NotFound,
                status: Some(429),
                error_code: Some("rate_limit_exceeded".into()),
                remaining_ms: 118 * SEC,
                failure_count: 1,
            }]
        );
    }

    #[test]
    fn s5_lock_ignores_other_connections() {
        let s = LockoutSettings::default();
        let mut mine = ModelLockouts::new(P, C);
        assert!(mine
            .on_failure(
                P,
                "key-2",
                "m",
                LockReason::NotFound,
                None,
                None,
                None,
                0,
                &s
            )
            .is_empty());
        let other = ModelLockouts::new(P, "key-2");
        let foreign = other.on_failure(
            P,
            "key-2",
            "m",
            LockReason::NotFound,
            None,
            None,
            None,
            0,
            &s,
        );
        assert_eq!(foreign.len(), 1);
        mine.apply(0, &foreign[0]);
        assert!(mine.is_empty());
    }

    #[test]
    fn s8_model_lockouts_roundtrip_through_serde() {
        let mut live = Live::new(LockoutSettings::default());
        live.fail("a", LockReason::QuotaExhausted, None, 0);
        live.fail("b", LockReason::RateLimited, Some(5), 0);
        let text = serde_json::to_string(&live.state).expect("serialize");
        let back: ModelLockouts = serde_json::from_str(&text).expect("deserialize");
        assert_eq!(back, live.state);
    }

    /// A 429 storm on one model of one key, narrated.
    #[test]
    fn s5_lock_timeline_rate_limit_storm() {
        let mut live = Live::new(LockoutSettings::default());

        // t=0: gpt-4o 429s with `retry-after-ms: 20000` → locked exactly 20 s (n = 1).
        let first = locked(&live.fail("gpt-4o", LockReason::RateLimited, Some(20 * SEC), 0));
        assert_eq!((first.until_ms, first.failure_count), (20 * SEC, 1));

        // t=0.2 s: eight requests that were already in flight 429 with a slightly shorter reset.
        // None ends later than the lock: nothing is journaled, the count stays 1.
        for i in 1..=8 {
            assert!(live
                .fail("gpt-4o", LockReason::RateLimited, Some(19 * SEC), i * 25)
                .is_empty());
        }

        // gpt-4o-mini on the same key keeps serving all along.
        assert_eq!(live.state.block_at("gpt-4o-mini", 10 * SEC), None);

        // t=20 s: the lock ends; the next request 429s again, this time with no hint → backoff
        // with n = 2 (inside the reset window): 2 s.
        let second = locked(&live.fail("gpt-4o", LockReason::RateLimited, None, 20 * SEC));
        assert_eq!((second.until_ms, second.failure_count), (22 * SEC, 2));

        // t=22 s: the body now says the monthly quota is gone → quota lock 1 h.
        let quota = locked(&live.fail("gpt-4o", LockReason::QuotaExhausted, None, 22 * SEC));
        assert_eq!(quota.until_ms, 22 * SEC + HOUR);
        assert_eq!(
            live.state.block_at("gpt-4o", HOUR),
            Some((BlockReason::QuotaExhausted, 22 * SEC))
        );

        // An operator clears it; the next failure starts from scratch.
        let clear = live.state.clear(P, C, "gpt-4o").into_iter().collect();
        live.commit(HOUR, clear);
        let fresh = locked(&live.fail("gpt-4o", LockReason::RateLimited, None, HOUR + 1));
        assert_eq!(fresh.failure_count, 1);

        live.assert_replay_equals_live();
    }

    #[derive(Debug, Clone)]
    enum Op {
        Fail {
            model: u8,
            reason: LockReason,
            hint: Option<u64>,
        },
        Succeed {
            model: u8,
        },
        Clear {
            model: u8,
        },
    }

    fn op() -> impl Strategy<Value = (u64, Op)> {
        let reason = prop::sample::select(vec![
            LockReason::RateLimited,
            LockReason::NotFound,
            LockReason::QuotaExhausted,
        ]);
        let op = prop_oneof![
            8 => (0_u8..6, reason, proptest::option::weighted(0.4, 0_u64..4 * HOUR))
                .prop_map(|(model, reason, hint)| Op::Fail { model, reason, hint }),
            3 => (0_u8..6).prop_map(|model| Op::Succeed { model }),
            1 => (0_u8..6).prop_map(|model| Op::Clear { model }),
        ];
        let dt = prop_oneof![0_u64..5 * SEC, 0_u64..2 * HOUR];
        (dt, op)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// A lock is never shortened (only an eviction or an admin clear ends it early), the cap
        /// holds, and replay equals live for random failure sequences.
        #[test]
        fn prop_s5_lock_never_shortened_cap_holds_and_replays(
            cap in 1_u32..5,
            ops in proptest::collection::vec(op(), 1..120),
        ) {
            let s = LockoutSettings { max_per_connection: cap, ..LockoutSettings::default() };
            let mut live = Live::new(s);
            let mut now = 0_u64;
            for (dt, op) in ops {
                now += dt;
                let before = live.state.clone();
                let events = match op {
                    Op::Fail { model, reason, hint } => live.fail(&format!("m{model}"), reason, hint, now),
                    Op::Succeed { model } => {
                        live.succeed(&format!("m{model}"), now);
                        Vec::new()
                    }
                    Op::Clear { model } => {
                        let events = live.state.clear(P, C, &format!("m{model}")).into_iter().collect();
                        live.commit(now, events)
                    }
                };
                let removed: Vec<&str> = events
                    .iter()
                    .filter_map(|e| match e {
                        Event::ModelUnlocked(u) => Some(u.model.as_str()),
                        _ => None,
                    })
                    .collect();
                for active in before.list_at(now) {
                    if removed.contains(&active.model.as_str()) {
                        continue;
                    }
                    let after = live.state.block_at(&active.model, now).map(|(_, left)| left);
                    prop_assert!(after >= Some(active.remaining_ms), "{} shortened", active.model);
                }
                prop_assert!(live.state.len() <= cap as usize);
                for lock in live.state.list_at(now) {
                    prop_assert!(lock.remaining_ms <= live.s.max_upstream_ms.max(live.s.quota_max_ms));
                }
            }
            live.assert_replay_equals_live();
        }
    }
}
