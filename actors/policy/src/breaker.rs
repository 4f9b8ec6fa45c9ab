//! The provider circuit breaker of behaviour §5 (CLOSED, DEGRADED, OPEN, HALF_OPEN) as pure,
//! event-sourced policy: `on_*` methods read the state and return events, [`BreakerState::apply`]
//! is the only mutator. Must not read a clock, journal, route, or touch connection cooldowns.
//!
//! Definitions used throughout:
//! - a failure *counts* when it is not within `dedup_ms` of the last counted failure of the same
//!   connection; counted failures stay in the rolling window for `window_ms`;
//! - `cycles` is the number of openings in a row since the breaker was last CLOSED: the first
//!   opening makes it 1, each failed probe adds 1, a successful probe or an admin reset makes it 0.
//!   The opening that makes it `c` stays OPEN for [`BreakerSettings::reset_for_cycle`]`(c)`.
//! - Counted failures are forgotten when the breaker opens (OPEN and HALF_OPEN count nothing) and
//!   when it closes after being open, so a closed breaker starts from a clean window.

use std::collections::BTreeMap;

use quotaroute_journal::{
    ActionBy, AuthKind, BreakerCounted, BreakerPhase, BreakerTransition, Event,
};
use serde::{Deserialize, Serialize};

/// Thresholds and timings of one provider's breaker (`[defaults.breaker]`, per-provider overrides).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BreakerSettings {
    /// Rolling window in which counted failures add up.
    pub window_ms: u64,
    /// Failures of one connection within this long after its last counted failure count once.
    pub dedup_ms: u64,
    /// Counted failures at which CLOSED becomes DEGRADED (and below which DEGRADED closes).
    pub degrade_at: u32,
    /// Counted failures at which the breaker opens.
    pub open_at: u32,
    /// How long an opening lasts before a probe is allowed, before escalation.
    pub reset_ms: u64,
    /// Openings in a row that use the plain `reset_ms`; later ones double.
    pub escalate_after: u32,
    /// Cap of the escalation, as a multiple of `reset_ms`.
    pub max_multiplier: u32,
    /// Probes HALF_OPEN lets through at a time.
    pub half_open_probes: u32,
    /// A probe that has not settled after this long gives its token back.
    pub probe_timeout_ms: u64,
}

impl BreakerSettings {
    /// The spec's defaults for a provider whose profile is `profile` (§5).
    pub fn for_profile(profile: AuthKind) -> Self {
        let (degrade_at, open_at, reset_ms, escalate_after, max_multiplier) = match profile {
            AuthKind::ApiKey => (7, 12, 30_000, 3, 4),
            AuthKind::Oauth => (5, 8, 60_000, 2, 8),
        };
        BreakerSettings {
            window_ms: 60_000,
            dedup_ms: 5_000,
            degrade_at,
            open_at,
            reset_ms,
            escalate_after,
            max_multiplier,
            half_open_probes: 1,
            probe_timeout_ms: 30_000,
        }
    }

    /// How long the opening that makes `cycles` = `cycle` lasts:
    /// `reset · 2^(cycle − escalate_after)` when `cycle > escalate_after`, else `reset`, never over
    /// `reset · max_multiplier`. With api_key defaults the 4th opening in a row lasts 60 s.
    pub fn reset_for_cycle(&self, cycle: u32) -> u64 {
        let exponent = cycle.saturating_sub(self.escalate_after);
        let doubling = 1_u64.checked_shl(exponent).unwrap_or(u64::MAX);
        // A multiplier of 0 would make the breaker never stay open; treat it as "no escalation".
        let multiplier = doubling.min(u64::from(self.max_multiplier.max(1)));
        self.reset_ms.saturating_mul(multiplier)
    }
}

impl Default for BreakerSettings {
    fn default() -> Self {
        BreakerSettings::for_profile(AuthKind::ApiKey)
    }
}

/// One failure the breaker counted, kept while it is inside the window.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CountedFailure {
    pub at_ms: u64,
    pub connection: String,
}

/// What one provider's breaker has learned; rebuilt from the journal by [`BreakerState::apply`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BreakerState {
    provider: String,
    /// The phase last journaled; OPEN past its reset and an expired DEGRADED read differently
    /// (see [`BreakerState::phase_at`]) until an event records the change.
    phase: BreakerPhase,
    /// Counted failures, oldest first. Entries past the window are dropped by later events.
    failures: Vec<CountedFailure>,
    /// Connection → when its last counted failure happened (for `dedup_ms`).
    last_counted_ms: BTreeMap<String, u64>,
    cycles: u32,
    open_until_ms: Option<u64>,
    opened_at_ms: Option<u64>,
}

impl BreakerState {
    /// A CLOSED breaker with nothing counted, for `provider`.
    pub fn new(provider: impl Into<String>) -> Self {
        BreakerState {
            provider: provider.into(),
            phase: BreakerPhase::Closed,
            failures: Vec::new(),
            last_counted_ms: BTreeMap::new(),
            cycles: 0,
            open_until_ms: None,
            opened_at_ms: None,
        }
    }

    pub fn provider(&self) -> &str {
        &self.provider
    }

    /// Openings in a row since the breaker was last CLOSED.
    pub fn cycles(&self) -> u32 {
        self.cycles
    }

    /// When the current opening allows a probe (`None` unless OPEN or HALF_OPEN).
    pub fn open_until_ms(&self) -> Option<u64> {
        self.open_until_ms
    }

    /// When the breaker last opened (`None` unless OPEN or HALF_OPEN).
    pub fn opened_at_ms(&self) -> Option<u64> {
        self.opened_at_ms
    }

    /// The phase at `now`, read lazily so no timer is needed: an OPEN breaker whose reset has
    /// passed reads HALF_OPEN, and a DEGRADED one whose failures aged out of the window reads
    /// CLOSED. Takes the settings because the window and `degrade_at` are not part of the state.
    pub fn phase_at(&self, now_ms: u64, s: &BreakerSettings) -> BreakerPhase {
        match self.phase {
            BreakerPhase::Open if self.reset_passed(now_ms) => BreakerPhase::HalfOpen,
            BreakerPhase::Degraded if self.failures_at(now_ms, s) < s.degrade_at => {
                BreakerPhase::Closed
            }
            phase => phase,
        }
    }

    /// Whether a success signal, whenever it arrives and whatever it carries, produces no
    /// event: CLOSED with nothing counted (and thresholds above zero, so a count of 0 stays
    /// CLOSED). Lets reporters skip signals that cannot matter (see `breaker_hint`).
    pub fn success_is_noop(&self, s: &BreakerSettings) -> bool {
        self.phase == BreakerPhase::Closed
            && self.failures.is_empty()
            && s.degrade_at > 0
            && s.open_at > 0
    }

    /// Counted failures still inside the window at `now`.
    pub fn failures_at(&self, now_ms: u64, s: &BreakerSettings) -> u32 {
        let in_window = self
            .failures
            .iter()
            .filter(|f| now_ms < f.at_ms.saturating_add(s.window_ms))
            .count();
        u32::try_from(in_window).unwrap_or(u32::MAX)
    }

    /// Decide what one settled upstream request means to the breaker. Callers pass only outcomes
    /// the breaker column of §4 names: `failure` for timeout/server/network, `!failure` for 2xx.
    /// `started_at_ms` is when the request was sent; `was_probe` says it held a probe token.
    #[expect(
        clippy::too_many_arguments,
        reason = "each argument is one input the rule reads; a struct of them would only rename them"
    )]
    pub fn on_outcome(
        &self,
        provider: &str,
        connection: &str,
        failure: bool,
        started_at_ms: u64,
        was_probe: bool,
        now_ms: u64,
        s: &BreakerSettings,
    ) -> Vec<Event> {
        if provider != self.provider {
            // `apply` would ignore events for another provider; producing them would be a lie.
            return Vec::new();
        }
        match self.phase {
            BreakerPhase::Closed | BreakerPhase::Degraded => {
                self.on_outcome_while_closed(connection, failure, now_ms, s)
            }
            BreakerPhase::Open | BreakerPhase::HalfOpen => {
                self.on_outcome_while_open(failure, started_at_ms, was_probe, now_ms, s)
            }
        }
    }

    /// A probe was let through (its token taken from the [`ProbeGate`]): record OPEN → HALF_OPEN
    /// if that has not been recorded yet. Nothing while the reset has not passed.
    pub fn on_probe_admitted(&self, provider: &str, now_ms: u64) -> Vec<Event> {
        if provider != self.provider
            || self.phase != BreakerPhase::Open
            || !self.reset_passed(now_ms)
        {
            return Vec::new();
        }
        vec![self.transition(
            BreakerPhase::Open,
            BreakerPhase::HalfOpen,
            0,
            self.cycles,
            None,
            ActionBy::Router,
        )]
    }

    /// An operator closes the breaker: counts and cycles start from zero.
    pub fn reset(&self, provider: &str, now_ms: u64) -> Vec<Event> {
        if provider != self.provider {
            return Vec::new();
        }
        let from = match self.phase {
            BreakerPhase::Open if self.reset_passed(now_ms) => BreakerPhase::HalfOpen,
            phase => phase,
        };
        vec![self.transition(from, BreakerPhase::Closed, 0, 0, None, ActionBy::Admin)]
    }

    /// Fold one journaled event into the state. Ignores every event that is not a
    /// `BreakerCounted` or `BreakerTransition` for this provider.
    pub fn apply(&mut self, at_ms: u64, event: &Event) {
        match event {
            Event::BreakerCounted(counted) if counted.provider == self.provider => {
                if counted.failure {
                    self.failures.push(CountedFailure {
                        at_ms,
                        connection: counted.connection.clone(),
                    });
                    self.last_counted_ms
                        .insert(counted.connection.clone(), at_ms);
                }
                // The event says how many remain in the window: the rest are the oldest (expired,
                // or the one a success removed).
                self.keep_newest(counted.failures);
            }
            Event::BreakerTransition(transition) if transition.provider == self.provider => {
                self.phase = transition.to;
                self.cycles = transition.cycles;
                match transition.to {
                    BreakerPhase::Open => {
                        self.opened_at_ms = Some(at_ms);
                        self.open_until_ms = transition.until_ms;
                        self.keep_newest(0);
                    }
                    BreakerPhase::HalfOpen => self.keep_newest(0),
                    BreakerPhase::Closed => {
                        self.opened_at_ms = None;
                        self.open_until_ms = None;
                        self.keep_newest(transition.failures);
                    }
                    BreakerPhase::Degraded => {}
                }
            }
            _ => {}
        }
    }

    fn on_outcome_while_closed(
        &self,
        connection: &str,
        failure: bool,
        now_ms: u64,
        s: &BreakerSettings,
    ) -> Vec<Event> {
        let mut events = Vec::new();
        let in_window = self.failures_at(now_ms, s);
        let failures = if failure {
            if self.is_duplicate(connection, now_ms, s) {
                in_window
            } else {
                events.push(self.counted(connection, true, in_window.saturating_add(1)));
                in_window.saturating_add(1)
            }
        } else if in_window > 0 {
            events.push(self.counted(connection, false, in_window - 1));
            in_window - 1
        } else {
            0
        };
        // Between CLOSED and DEGRADED the phase is a function of the count (one threshold both
        // ways), so the same comparison also records a DEGRADED that expired lazily.
        let to = if failures >= s.open_at {
            BreakerPhase::Open
        } else if failures >= s.degrade_at {
            BreakerPhase::Degraded
        } else {
            BreakerPhase::Closed
        };
        if to != self.phase {
            let (cycles, until) = if to == BreakerPhase::Open {
                let cycles = self.cycles.saturating_add(1);
                let until = now_ms.saturating_add(s.reset_for_cycle(cycles));
                (cycles, Some(until))
            } else {
                (self.cycles, None)
            };
            events.push(self.transition(self.phase, to, failures, cycles, until, ActionBy::Router));
        }
        events
    }

    fn on_outcome_while_open(
        &self,
        failure: bool,
        started_at_ms: u64,
        was_probe: bool,
        now_ms: u64,
        s: &BreakerSettings,
    ) -> Vec<Event> {
        let half_open = self.phase == BreakerPhase::HalfOpen || self.reset_passed(now_ms);
        // A request sent before the latest opening (a late success, or the probe of an earlier
        // HALF_OPEN round) says nothing about the upstream since then.
        let sent_after_opening = self.opened_at_ms.is_none_or(|at| started_at_ms >= at);
        if !was_probe || !half_open || !sent_after_opening {
            return Vec::new();
        }
        let mut events = Vec::new();
        if self.phase == BreakerPhase::Open {
            events.push(self.transition(
                BreakerPhase::Open,
                BreakerPhase::HalfOpen,
                0,
                self.cycles,
                None,
                ActionBy::Router,
            ));
        }
        if failure {
            let cycles = self.cycles.saturating_add(1);
            let until = now_ms.saturating_add(s.reset_for_cycle(cycles));
            events.push(self.transition(
                BreakerPhase::HalfOpen,
                BreakerPhase::Open,
                0,
                cycles,
                Some(until),
                ActionBy::Router,
            ));
        } else {
            events.push(self.transition(
                BreakerPhase::HalfOpen,
                BreakerPhase::Closed,
                0,
                0,
                None,
                ActionBy::Router,
            ));
        }
        events
    }

    fn reset_passed(&self, now_ms: u64) -> bool {
        self.open_until_ms.is_none_or(|until| now_ms >= until)
    }

    fn is_duplicate(&self, connection: &str, now_ms: u64, s: &BreakerSettings) -> bool {
        self.last_counted_ms
            .get(connection)
            .is_some_and(|&last| now_ms < last.saturating_add(s.dedup_ms))
    }

    /// Keep the `count` newest counted failures; with none left, dedup history goes too (a fresh
    /// window starts fresh, and the map stays bounded by the connections failing right now).
    fn keep_newest(&mut self, count: u32) {
        let keep = usize::try_from(count).unwrap_or(usize::MAX);
        if self.failures.len() > keep {
            let drop = self.failures.len() - keep;
            self.failures.drain(..drop);
        }
        if self.failures.is_empty() {
            self.last_counted_ms.clear();
        }
    }

    fn counted(&self, connection: &str, failure: bool, failures: u32) -> Event {
        Event::BreakerCounted(BreakerCounted {
            provider: self.provider.clone(),
            connection: connection.to_owned(),
            failure,
            failures,
        })
    }

    fn transition(
        &self,
        from: BreakerPhase,
        to: BreakerPhase,
        failures: u32,
        cycles: u32,
        until_ms: Option<u64>,
        by: ActionBy,
    ) -> Event {
        Event::BreakerTransition(BreakerTransition {
            provider: self.provider.clone(),
            from,
            to,
            failures,
            cycles,
            until_ms,
            by,
        })
    }
}

/// HALF_OPEN's probe tokens. Transient and not journaled: probes do not survive a restart, so
/// after one the first request past the reset simply probes again. Mutated directly.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProbeGate {
    /// When each outstanding token was taken.
    pub taken_at_ms: Vec<u64>,
}

impl ProbeGate {
    /// Take a probe token if one is free. Tokens older than `probe_timeout_ms` are returned first,
    /// so a probe that never settles cannot hold HALF_OPEN shut [OmniRoute #13836].
    pub fn try_take(&mut self, now_ms: u64, s: &BreakerSettings) -> bool {
        self.taken_at_ms
            .retain(|&taken| now_ms < taken.saturating_add(s.probe_timeout_ms));
        if self.live_tokens(now_ms, s) < s.half_open_probes as usize {
            self.taken_at_ms.push(now_ms);
            true
        } else {
            false
        }
    }

    /// A probe settled: give back the token taken at `taken_at_ms` (no-op if it already timed out).
    pub fn release(&mut self, taken_at_ms: u64) {
        if let Some(index) = self.taken_at_ms.iter().position(|&t| t == taken_at_ms) {
            self.taken_at_ms.remove(index);
        }
    }

    /// Whether [`ProbeGate::try_take`] would succeed at `now`.
    pub fn available_at(&self, now_ms: u64, s: &BreakerSettings) -> bool {
        self.live_tokens(now_ms, s) < s.half_open_probes as usize
    }

    /// How long until the oldest live token times out (`None` when none is taken).
    pub fn next_free_in(&self, now_ms: u64, s: &BreakerSettings) -> Option<u64> {
        self.taken_at_ms
            .iter()
            .map(|&taken| taken.saturating_add(s.probe_timeout_ms))
            .filter(|&expires| now_ms < expires)
            .min()
            .map(|expires| expires - now_ms)
    }

    fn live_tokens(&self, now_ms: u64, s: &BreakerSettings) -> usize {
        self.taken_at_ms
            .iter()
            .filter(|&&taken| now_ms < taken.saturating_add(s.probe_timeout_ms))
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const P: &str = "openai";

    type Live = crate::journaled::Live<BreakerState, BreakerSettings>;

    impl crate::journaled::Reducer for BreakerState {
        fn apply_event(&mut self, at_ms: u64, event: &Event) {
            self.apply(at_ms, event);
        }
    }

    impl Live {
        fn new(s: BreakerSettings) -> Self {
            Live::with(BreakerState::new(P), s)
        }

        fn outcome(
            &mut self,
            conn: &str,
            failure: bool,
            started: u64,
            probe: bool,
            now: u64,
        ) -> Vec<Event> {
            let events = self
                .state
                .on_outcome(P, conn, failure, started, probe, now, &self.s);
            self.commit(now, events)
        }

        fn fail(&mut self, conn: &str, now: u64) -> Vec<Event> {
            self.outcome(conn, true, now, false, now)
        }

        fn succeed(&mut self, conn: &str, now: u64) -> Vec<Event> {
            self.outcome(conn, false, now, false, now)
        }

        /// A probe admitted at `sent` that settles at `now`.
        fn probe(&mut self, failure: bool, sent: u64, now: u64) -> Vec<Event> {
            let admitted = self.state.on_probe_admitted(P, sent);
            self.commit(sent, admitted);
            self.outcome("probe-conn", failure, sent, true, now)
        }

        fn phase(&self, now: u64) -> BreakerPhase {
            self.state.phase_at(now, &self.s)
        }
    }

    fn transitions(events: &[Event]) -> Vec<(BreakerPhase, BreakerPhase)> {
        events
            .iter()
            .filter_map(|e| match e {
                Event::BreakerTransition(t) => Some((t.from, t.to)),
                _ => None,
            })
            .collect()
    }

    fn only_transition(events: &[Event]) -> BreakerTransition {
        let found: Vec<_> = events
            .iter()
            .filter_map(|e| match e {
                Event::BreakerTransition(t) => Some(t.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(found.len(), 1, "expected one transition in {events:?}");
        found[0].clone()
    }

    /// Fail `n` distinct connections one ms apart starting at `start`; returns all events.
    fn fail_distinct(live: &mut Live, n: u32, start: u64) -> Vec<Event> {
        let mut all = Vec::new();
        for i in 0..n {
            all.extend(live.fail(&format!("c{i}"), start + u64::from(i)));
        }
        all
    }

    /// Open the breaker (api_key: 12 distinct connections) at ~`start`; returns its `until_ms`.
    fn open(live: &mut Live, start: u64) -> u64 {
        let open_at = live.s.open_at;
        let events = fail_distinct(live, open_at, start);
        let opened = events.iter().find_map(|e| match e {
            Event::BreakerTransition(t) if t.to == BreakerPhase::Open => t.until_ms,
            _ => None,
        });
        opened.expect("breaker should have opened")
    }

    #[test]
    fn s5_breaker_profile_defaults() {
        // (profile, degrade_at, open_at, reset_ms, escalate_after, max_multiplier)
        let table = [
            (AuthKind::ApiKey, 7, 12, 30_000, 3, 4),
            (AuthKind::Oauth, 5, 8, 60_000, 2, 8),
        ];
        for (profile, degrade, open, reset, escalate, max) in table {
            let s = BreakerSettings::for_profile(profile);
            assert_eq!(
                (
                    s.degrade_at,
                    s.open_at,
                    s.reset_ms,
                    s.escalate_after,
                    s.max_multiplier
                ),
                (degrade, open, reset, escalate, max),
                "{profile:?}"
            );
            assert_eq!((s.window_ms, s.dedup_ms), (60_000, 5_000));
            assert_eq!((s.half_open_probes, s.probe_timeout_ms), (1, 30_000));
        }
        assert_eq!(
            BreakerSettings::default(),
            BreakerSettings::for_profile(AuthKind::ApiKey)
        );
    }

    #[test]
    fn s5_breaker_reset_escalates_after_cycles_and_caps() {
        // cycle c = openings in a row; reset · 2^(c − escalate_after) when c > escalate_after.
        let table = [
            (AuthKind::ApiKey, 1, 30_000),
            (AuthKind::ApiKey, 3, 30_000),
            (AuthKind::ApiKey, 4, 60_000), // 4th opening with escalate_after 3 → ×2
            (AuthKind::ApiKey, 5, 120_000),
            (AuthKind::ApiKey, 6, 120_000), // ×8 capped at ×4
            (AuthKind::ApiKey, u32::MAX, 120_000),
            (AuthKind::Oauth, 2, 60_000),
            (AuthKind::Oauth, 3, 120_000),
            (AuthKind::Oauth, 4, 240_000),
            (AuthKind::Oauth, 5, 480_000),
            (AuthKind::Oauth, 6, 480_000), // ×16 capped at ×8
        ];
        for (profile, cycle, expected) in table {
            let s = BreakerSettings::for_profile(profile);
            assert_eq!(
                s.reset_for_cycle(cycle),
                expected,
                "{profile:?} cycle {cycle}"
            );
        }
    }

    #[test]
    fn s5_breaker_counts_failures_in_rolling_60s_window() {
        let mut live = Live::new(BreakerSettings::default());
        live.fail("a", 0);
        live.fail("b", 1_000);
        assert_eq!(live.state.failures_at(59_999, &live.s), 2);
        assert_eq!(live.state.failures_at(60_000, &live.s), 1);
        assert_eq!(live.state.failures_at(61_000, &live.s), 0);
        // The next count reports only what is still in the window.
        let events = live.fail("c", 60_500);
        assert!(matches!(&events[..], [Event::BreakerCounted(c)] if c.failures == 2));
        live.assert_replay_equals_live();
    }

    #[test]
    fn s5_breaker_dedups_one_connection_within_5s() {
        let mut live = Live::new(BreakerSettings::default());
        assert_eq!(live.fail("a", 0).len(), 1);
        assert!(
            live.fail("a", 4_999).is_empty(),
            "within 5 s of the last counted failure"
        );
        assert_eq!(live.fail("a", 5_000).len(), 1, "5 s later counts again");
        assert_eq!(live.state.failures_at(5_000, &live.s), 2);
    }

    #[test]
    fn s5_breaker_dedup_measures_from_last_counted_failure() {
        let mut live = Live::new(BreakerSettings::default());
        live.fail("a", 0);
        assert!(live.fail("a", 4_000).is_empty());
        // 4 s after the deduped one but 8 s after the counted one: counts.
        assert_eq!(live.fail("a", 8_000).len(), 1);
    }

    #[test]
    fn s5_breaker_dedup_is_per_connection() {
        let mut live = Live::new(BreakerSettings::default());
        live.fail("a", 0);
        assert_eq!(live.fail("b", 1).len(), 1);
        assert_eq!(live.state.failures_at(1, &live.s), 2);
    }

    #[test]
    fn s5_breaker_success_removes_one_counted_failure() {
        let mut live = Live::new(BreakerSettings::default());
        fail_distinct(&mut live, 3, 0);
        let events = live.succeed("a", 10);
        assert_eq!(
            events,
            vec![Event::BreakerCounted(BreakerCounted {
                provider: P.into(),
                connection: "a".into(),
                failure: false,
                failures: 2,
            })]
        );
        assert_eq!(live.state.failures_at(10, &live.s), 2);
        live.assert_replay_equals_live();
    }

    #[test]
    fn s5_breaker_success_with_nothing_counted_emits_nothing() {
        let mut live = Live::new(BreakerSettings::default());
        assert!(live.succeed("a", 0).is_empty());
        live.fail("a", 0);
        assert!(live.succeed("a", 60_000).is_empty(), "the failure aged out");
    }

    #[test]
    fn s5_breaker_degrades_at_7_and_opens_at_12_api_key() {
        let mut live = Live::new(BreakerSettings::default());
        assert!(transitions(&fail_distinct(&mut live, 6, 0)).is_empty());
        let seventh = live.fail("c6", 100);
        assert_eq!(
            transitions(&seventh),
            vec![(BreakerPhase::Closed, BreakerPhase::Degraded)]
        );
        assert_eq!(live.phase(100), BreakerPhase::Degraded);
        for i in 7..11 {
            assert!(transitions(&live.fail(&format!("c{i}"), 100 + i)).is_empty());
        }
        let twelfth = only_transition(&live.fail("c11", 200));
        assert_eq!(
            (twelfth.from, twelfth.to),
            (BreakerPhase::Degraded, BreakerPhase::Open)
        );
        assert_eq!((twelfth.failures, twelfth.cycles), (12, 1));
        assert_eq!(twelfth.until_ms, Some(200 + 30_000));
        assert_eq!(live.phase(200), BreakerPhase::Open);
        live.assert_replay_equals_live();
    }

    #[test]
    fn s5_breaker_oauth_degrades_at_5_and_opens_at_8() {
        let mut live = Live::new(BreakerSettings::for_profile(AuthKind::Oauth));
        let events = fail_distinct(&mut live, 8, 0);
        assert_eq!(
            transitions(&events),
            vec![
                (BreakerPhase::Closed, BreakerPhase::Degraded),
                (BreakerPhase::Degraded, BreakerPhase::Open)
            ]
        );
        assert_eq!(live.state.open_until_ms(), Some(7 + 60_000));
    }

    #[test]
    fn s5_breaker_opens_straight_from_closed() {
        let s = BreakerSettings {
            degrade_at: 10,
            open_at: 3,
            ..BreakerSettings::default()
        };
        let mut live = Live::new(s);
        let events = fail_distinct(&mut live, 3, 0);
        assert_eq!(
            transitions(&events),
            vec![(BreakerPhase::Closed, BreakerPhase::Open)]
        );
    }

    #[test]
    fn s5_breaker_one_connection_alone_is_deduped_to_one_count_per_5s() {
        // Hammering with one key: 100 failures in 10 s count 2 times.
        let mut live = Live::new(BreakerSettings::default());
        for i in 0..100 {
            live.fail("a", i * 100);
        }
        assert_eq!(live.state.failures_at(10_000, &live.s), 2);
        assert_eq!(live.phase(10_000), BreakerPhase::Closed);
    }

    #[test]
    fn s5_breaker_degraded_closes_when_success_drops_below_7() {
        let mut live = Live::new(BreakerSettings::default());
        fail_distinct(&mut live, 7, 0);
        assert_eq!(live.phase(10), BreakerPhase::Degraded);
        let events = live.succeed("c0", 10);
        assert_eq!(
            transitions(&events),
            vec![(BreakerPhase::Degraded, BreakerPhase::Closed)]
        );
        assert_eq!(only_transition(&events).failures, 6);
        assert_eq!(live.state.failures_at(10, &live.s), 6);
        live.assert_replay_equals_live();
    }

    #[test]
    fn s5_breaker_degraded_reads_closed_once_failures_age_out() {
        let mut live = Live::new(BreakerSettings::default());
        fail_distinct(&mut live, 7, 0);
        // Lazily: no event needed for the read to be right.
        assert_eq!(live.phase(59_999), BreakerPhase::Degraded);
        assert_eq!(live.phase(60_000), BreakerPhase::Closed);
        // The next outcome records it.
        let events = live.succeed("a", 70_000);
        assert_eq!(
            transitions(&events),
            vec![(BreakerPhase::Degraded, BreakerPhase::Closed)]
        );
        assert_eq!(live.state.phase, BreakerPhase::Closed);
        live.assert_replay_equals_live();
    }

    #[test]
    fn s5_breaker_open_reads_half_open_once_reset_passes() {
        let mut live = Live::new(BreakerSettings::default());
        let until = open(&mut live, 0);
        assert_eq!(live.phase(until - 1), BreakerPhase::Open);
        assert_eq!(live.phase(until), BreakerPhase::HalfOpen);
    }

    #[test]
    fn s5_breaker_probe_admitted_records_half_open_once() {
        let mut live = Live::new(BreakerSettings::default());
        let until = open(&mut live, 0);
        assert!(
            live.state.on_probe_admitted(P, until - 1).is_empty(),
            "reset not passed"
        );
        let events = live.state.on_probe_admitted(P, until);
        assert_eq!(
            transitions(&events),
            vec![(BreakerPhase::Open, BreakerPhase::HalfOpen)]
        );
        live.commit(until, events);
        assert!(
            live.state.on_probe_admitted(P, until + 1).is_empty(),
            "already HALF_OPEN"
        );
    }

    #[test]
    fn s5_breaker_probe_success_closes_and_resets_cycles() {
        let mut live = Live::new(BreakerSettings::default());
        let until = open(&mut live, 0);
        let events = live.probe(false, until, until + 500);
        let closed = only_transition(&events);
        assert_eq!(
            (closed.from, closed.to),
            (BreakerPhase::HalfOpen, BreakerPhase::Closed)
        );
        assert_eq!((closed.cycles, closed.failures), (0, 0));
        assert_eq!(live.state.cycles(), 0);
        assert_eq!(
            live.state.failures_at(until + 500, &live.s),
            0,
            "failures cleared"
        );
        live.assert_replay_equals_live();
    }

    #[test]
    fn s5_breaker_probe_failure_reopens_with_cycles_plus_one() {
        let mut live = Live::new(BreakerSettings::default());
        let until = open(&mut live, 0);
        let events = live.probe(true, until, until + 500);
        let reopened = only_transition(&events);
        assert_eq!(
            (reopened.from, reopened.to),
            (BreakerPhase::HalfOpen, BreakerPhase::Open)
        );
        assert_eq!(reopened.cycles, 2);
        assert_eq!(reopened.until_ms, Some(until + 500 + 30_000));
        assert_eq!(live.state.opened_at_ms(), Some(until + 500));
        live.assert_replay_equals_live();
    }

    #[test]
    fn s5_breaker_probe_settling_without_admission_still_records_half_open() {
        let mut live = Live::new(BreakerSettings::default());
        let until = open(&mut live, 0);
        let events = live.outcome("x", false, until, true, until + 1);
        assert_eq!(
            transitions(&events),
            vec![
                (BreakerPhase::Open, BreakerPhase::HalfOpen),
                (BreakerPhase::HalfOpen, BreakerPhase::Closed)
            ]
        );
    }

    #[test]
    fn s5_breaker_late_success_from_before_opening_does_not_close() {
        let mut live = Live::new(BreakerSettings::default());
        let until = open(&mut live, 1_000);
        // A plain request sent at 500 (before the opening) succeeds after the reset passed.
        assert!(live.outcome("a", false, 500, false, until + 10).is_empty());
        // Even flagged as a probe, something sent before the opening cannot close it.
        assert!(live.outcome("a", false, 500, true, until + 20).is_empty());
        assert_eq!(live.phase(until + 20), BreakerPhase::HalfOpen);
    }

    #[test]
    fn s5_breaker_outcomes_while_open_change_nothing() {
        let mut live = Live::new(BreakerSettings::default());
        let until = open(&mut live, 0);
        let before = live.state.clone();
        assert!(
            live.fail("a", 100).is_empty(),
            "non-probe failure while OPEN"
        );
        assert!(
            live.succeed("a", 100).is_empty(),
            "non-probe success while OPEN"
        );
        assert!(
            live.outcome("a", true, 100, true, 200).is_empty(),
            "probe before the reset"
        );
        assert!(
            live.fail("a", until + 5).is_empty(),
            "non-probe failure while HALF_OPEN"
        );
        assert_eq!(live.state, before);
    }

    #[test]
    fn s5_breaker_admin_reset_closes_and_forgets() {
        let mut live = Live::new(BreakerSettings::default());
        let until = open(&mut live, 0);
        live.probe(true, until, until + 1); // cycles 2
        let events = live.state.reset(P, until + 2);
        let closed = only_transition(&events);
        assert_eq!(
            (closed.to, closed.by, closed.cycles),
            (BreakerPhase::Closed, ActionBy::Admin, 0)
        );
        live.commit(until + 2, events);
        assert_eq!(live.phase(until + 2), BreakerPhase::Closed);
        assert_eq!(live.state, BreakerState::new(P));

        let mut degraded = Live::new(BreakerSettings::default());
        fail_distinct(&mut degraded, 8, 0);
        let events = degraded.state.reset(P, 10);
        degraded.commit(10, events);
        assert_eq!(degraded.state.failures_at(10, &degraded.s), 0);
        assert_eq!(
            degraded.state,
            BreakerState::new(P),
            "dedup history goes too"
        );
    }

    #[test]
    fn s5_breaker_ignores_other_providers() {
        let mut live = Live::new(BreakerSettings::default());
        let s = live.s.clone();
        assert!(live
            .state
            .on_outcome("anthropic", "a", true, 0, false, 0, &s)
            .is_empty());
        assert!(live.state.reset("anthropic", 0).is_empty());
        let mut other = Live::new(s);
        other.state = BreakerState::new("anthropic");
        let events = fail_distinct(&mut other, 12, 0);
        for event in &events {
            live.state.apply(20, event);
        }
        assert_eq!(live.state, BreakerState::new(P));
    }

    #[test]
    fn s5_breaker_block_reasons() {
        use crate::admission::{breaker_admission, BreakerAdmission};
        use quotaroute_journal::BlockReason;
        let mut live = Live::new(BreakerSettings::default());
        let mut gate = ProbeGate::default();
        fail_distinct(&mut live, 7, 0);
        assert_eq!(
            breaker_admission(&live.state, &live.s, Some(&gate), 10),
            BreakerAdmission::Degraded,
            "DEGRADED still routes"
        );
        let until = open(&mut live, 100);
        assert_eq!(
            breaker_admission(&live.state, &live.s, Some(&gate), until - 1_000),
            BreakerAdmission::Blocked(BlockReason::BreakerOpen, Some(1_000))
        );
        assert_eq!(
            breaker_admission(&live.state, &live.s, Some(&gate), until),
            BreakerAdmission::Probe,
            "a probe may go"
        );
        assert!(gate.try_take(until, &live.s));
        assert_eq!(
            breaker_admission(&live.state, &live.s, Some(&gate), until + 10_000),
            BreakerAdmission::Blocked(BlockReason::ProbeInFlight, Some(20_000))
        );
    }

    #[test]
    fn s5_probe_gate_admits_one_at_a_time_and_release_frees_it() {
        let s = BreakerSettings::default();
        let mut gate = ProbeGate::default();
        assert!(gate.try_take(0, &s));
        assert!(!gate.try_take(1, &s), "half_open_probes = 1");
        gate.release(0);
        assert!(gate.try_take(2, &s));
        gate.release(999); // unknown token: no-op
        assert!(!gate.available_at(3, &s));
    }

    #[test]
    fn s5_probe_gate_unsettled_probe_returns_token_after_30s() {
        let s = BreakerSettings::default();
        let mut gate = ProbeGate::default();
        assert!(gate.try_take(1_000, &s));
        assert!(!gate.try_take(30_999, &s));
        assert!(
            gate.try_take(31_000, &s),
            "the stuck probe gave its token back"
        );
        assert_eq!(gate.taken_at_ms, vec![31_000]);
    }

    #[test]
    fn s8_breaker_state_roundtrips_through_serde() {
        let mut live = Live::new(BreakerSettings::default());
        let until = open(&mut live, 0);
        live.probe(true, until, until + 1);
        let text = serde_json::to_string(&live.state).expect("serialize");
        let back: BreakerState = serde_json::from_str(&text).expect("deserialize");
        assert_eq!(back, live.state);
    }

    /// The whole life of a breaker, narrated. api_key profile: DEGRADED at 7, OPEN at 12, reset
    /// 30 s doubling after the 3rd opening in a row, up to ×4.
    #[test]
    fn s5_breaker_timeline_flapping_provider() {
        let mut live = Live::new(BreakerSettings::default());

        // t=0..: four keys start failing every second. Each key counts at most once per 5 s,
        // so after 5 s only 4 failures have counted: still CLOSED.
        for t in 0..5_u64 {
            for key in ["k1", "k2", "k3", "k4"] {
                live.fail(key, t * 1_000);
            }
        }
        assert_eq!(live.state.failures_at(4_999, &live.s), 4);
        assert_eq!(live.phase(4_999), BreakerPhase::Closed);

        // t=5 s: each key counts again → 8 counted: DEGRADED (targets sort last, still route).
        for key in ["k1", "k2", "k3", "k4"] {
            live.fail(key, 5_000);
        }
        assert_eq!(live.phase(5_000), BreakerPhase::Degraded);

        // t=6 s: a success on k5 takes one back (7 left): still DEGRADED.
        live.succeed("k5", 6_000);
        assert_eq!(live.state.failures_at(6_000, &live.s), 7);
        assert_eq!(live.phase(6_000), BreakerPhase::Degraded);

        // t=10 s: the four keys count a third time → 11; a fifth key's failure makes 12: OPEN for
        // 30 s (first opening, cycles = 1).
        for key in ["k1", "k2", "k3", "k4"] {
            live.fail(key, 10_000);
        }
        let opened = only_transition(&live.fail("k5", 10_001));
        assert_eq!(
            (opened.to, opened.cycles, opened.until_ms),
            (BreakerPhase::Open, 1, Some(40_001))
        );

        // While OPEN, failures of requests that were in flight change nothing.
        assert!(live.fail("k1", 15_000).is_empty());

        // t=40.001 s: the reset passed; it reads HALF_OPEN. One probe goes; it fails → OPEN again,
        // cycles 2, another 30 s. Then the third opening: still 30 s.
        let mut gate = ProbeGate::default();
        assert_eq!(live.phase(40_001), BreakerPhase::HalfOpen);
        assert!(gate.try_take(40_001, &live.s));
        assert!(!gate.try_take(40_002, &live.s), "only one probe at a time");
        let second = only_transition(&live.probe(true, 40_001, 41_000));
        gate.release(40_001);
        assert_eq!((second.cycles, second.until_ms), (2, Some(71_000)));
        let third = only_transition(&live.probe(true, 71_000, 72_000));
        assert_eq!((third.cycles, third.until_ms), (3, Some(102_000)));

        // The 4th opening in a row is past escalate_after = 3: it lasts 2 × 30 s.
        let fourth = only_transition(&live.probe(true, 102_000, 103_000));
        assert_eq!((fourth.cycles, fourth.until_ms), (4, Some(163_000)));

        // A success from a request sent before that opening arrives late: it does not close.
        assert!(live.outcome("k2", false, 102_500, true, 163_500).is_empty());

        // t=163 s: a fresh probe succeeds → CLOSED, cycles 0, nothing counted.
        let closed = live.probe(false, 163_600, 164_000);
        assert_eq!(only_transition(&closed).to, BreakerPhase::Closed);
        assert_eq!(
            (
                live.state.cycles(),
                live.state.failures_at(164_000, &live.s)
            ),
            (0, 0)
        );

        // And all of it replays to the same state.
        live.assert_replay_equals_live();
    }

    #[derive(Debug, Clone)]
    enum Op {
        Fail {
            conn: u8,
            dt: u64,
            sent_ago: u64,
        },
        Succeed {
            conn: u8,
            dt: u64,
            sent_ago: u64,
        },
        Probe {
            fails: bool,
            dt: u64,
            settles_after: u64,
        },
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            5 => (0_u8..6, 0_u64..4_000, 0_u64..20_000)
                .prop_map(|(conn, dt, sent_ago)| Op::Fail { conn, dt, sent_ago }),
            2 => (0_u8..6, 0_u64..4_000, 0_u64..20_000)
                .prop_map(|(conn, dt, sent_ago)| Op::Succeed { conn, dt, sent_ago }),
            1 => (any::<bool>(), 0_u64..40_000, 0_u64..40_000)
                .prop_map(|(fails, dt, settles_after)| Op::Probe { fails, dt, settles_after }),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Never OPEN without `open_at` counted failures in the window; every count the events
        /// report is what the state then reads; replay equals live.
        #[test]
        fn prop_s5_breaker_opens_only_on_open_at_counted_failures_and_replays(
            oauth in any::<bool>(),
            ops in proptest::collection::vec(op(), 1..120),
        ) {
            let profile = if oauth { AuthKind::Oauth } else { AuthKind::ApiKey };
            let mut live = Live::new(BreakerSettings::for_profile(profile));
            let mut gate = ProbeGate::default();
            let mut now = 0_u64;
            for op in ops {
                let events = match op {
                    Op::Fail { conn, dt, sent_ago } => {
                        now += dt;
                        live.outcome(&format!("c{conn}"), true, now.saturating_sub(sent_ago), false, now)
                    }
                    Op::Succeed { conn, dt, sent_ago } => {
                        now += dt;
                        live.outcome(&format!("c{conn}"), false, now.saturating_sub(sent_ago), false, now)
                    }
                    Op::Probe { fails, dt, settles_after } => {
                        now += dt;
                        if live.phase(now) == BreakerPhase::HalfOpen && gate.try_take(now, &live.s) {
                            let sent = now;
                            now += settles_after;
                            let events = live.probe(fails, sent, now);
                            gate.release(sent);
                            events
                        } else {
                            Vec::new()
                        }
                    }
                };
                for event in &events {
                    match event {
                        Event::BreakerTransition(t)
                            if t.to == BreakerPhase::Open
                                && matches!(t.from, BreakerPhase::Closed | BreakerPhase::Degraded) =>
                        {
                            let window_start = now.saturating_sub(live.s.window_ms - 1);
                            let counted_in_window = live
                                .journal
                                .iter()
                                .filter(|(at, e)| *at >= window_start
                                    && matches!(e, Event::BreakerCounted(c) if c.failure))
                                .count();
                            prop_assert!(t.failures >= live.s.open_at);
                            prop_assert!(counted_in_window >= live.s.open_at as usize);
                        }
                        Event::BreakerCounted(_) => {}
                        _ => {}
                    }
                }
                // What the last event says is counted is what the state now reads.
                let reported = match events.last() {
                    Some(Event::BreakerCounted(c)) => Some(c.failures),
                    Some(Event::BreakerTransition(t))
                        if matches!(t.to, BreakerPhase::Open | BreakerPhase::HalfOpen) => Some(0),
                    Some(Event::BreakerTransition(t)) => Some(t.failures),
                    _ => None,
                };
                if let Some(reported) = reported {
                    prop_assert_eq!(live.state.failures_at(now, &live.s), reported);
                }
                let phase = live.phase(now);
                if matches!(phase, BreakerPhase::Closed | BreakerPhase::Degraded) {
                    prop_assert!(live.state.failures_at(now, &live.s) < live.s.open_at);
                }
                // A success the hint lets reporters skip would indeed have changed nothing.
                if live.state.success_is_noop(&live.s) {
                    for (later, sent_ago, probe) in [(0, 0, false), (1, 1, true), (90_000, 5, true)] {
                        let at = now + later;
                        let events = live.state.on_outcome(
                            P, "c0", false, at.saturating_sub(sent_ago), probe, at, &live.s,
                        );
                        prop_assert!(events.is_empty());
                    }
                }
            }
            live.assert_replay_equals_live();
        }

        /// HALF_OPEN admits at most `half_open_probes` at a time, and a token nobody releases
        /// comes back after `probe_timeout_ms`.
        #[test]
        fn prop_s5_probe_gate_bounds_probes_and_times_out(
            probes in 1_u32..4,
            ops in proptest::collection::vec((0_u64..20_000, any::<bool>(), any::<u8>()), 1..80),
        ) {
            let s = BreakerSettings { half_open_probes: probes, ..BreakerSettings::default() };
            let mut gate = ProbeGate::default();
            // Independent model: tokens taken and not released.
            let mut held: Vec<u64> = Vec::new();
            let mut now = 0_u64;
            for (dt, take, pick) in ops {
                now += dt;
                let live_before = held.iter().filter(|&&t| now < t + s.probe_timeout_ms).count();
                if take {
                    let took = gate.try_take(now, &s);
                    prop_assert_eq!(took, live_before < probes as usize);
                    held.retain(|&t| now < t + s.probe_timeout_ms);
                    if took { held.push(now); }
                } else if !held.is_empty() {
                    let token = held.remove(usize::from(pick) % held.len());
                    gate.release(token);
                }
                let live_now = held.iter().filter(|&&t| now < t + s.probe_timeout_ms).count();
                prop_assert!(live_now <= probes as usize);
                prop_assert_eq!(gate.available_at(now, &s), live_now < probes as usize);
                // Whatever is held, all of it is free again one timeout later.
                let mut later = gate.clone();
                prop_assert!(later.try_take(now + s.probe_timeout_ms, &s));
            }
        }
    }
}
