//! One connection's own health (behaviour §5 "Connection cooldown" and the connection column of
//! §4): backoff cooldowns after timeout/server/network failures, and disabling after auth or
//! billing failures. Pure, event-sourced: `on_failure`/`clear` return events and
//! [`ConnectionHealth::apply`] is the only mutator. Must not touch the provider breaker or
//! per-model lockouts, and never reads a clock.
//!
//! `level` is the backoff level the *next* escalating cooldown uses: 0 after a success, +1 per
//! cooldown applied (capped at `max_level` when used), so the first cooldown is `base`.

use quotaroute_journal::{
    ActionBy, AuthKind, BlockReason, ConnectionCleared, ConnectionCooldown, ConnectionDisabled,
    DisableReason, Event, OutcomeClass,
};
use serde::{Deserialize, Serialize};

use crate::classify::rules;

/// Cooldown backoff of one connection (`[defaults.cooldown]`; base and levels by auth kind).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CooldownSettings {
    /// The first cooldown; each further one doubles.
    pub base_ms: u64,
    /// Highest backoff level (`base · 2^max_level` is the longest backoff).
    pub max_level: u32,
    /// No cooldown is longer, whether from backoff or `Retry-After`.
    pub max_ms: u64,
}

impl CooldownSettings {
    /// The spec's defaults for a connection authenticating with `auth` (§5).
    pub fn for_auth(auth: AuthKind) -> Self {
        let (base_ms, max_level) = match auth {
            AuthKind::ApiKey => (3_000, 5),
            AuthKind::Oauth => (5_000, 8),
        };
        CooldownSettings {
            base_ms,
            max_level,
            max_ms: 300_000,
        }
    }

    /// `base · 2^level`, with `level` capped at `max_level`, never over `max_ms`.
    pub fn backoff_ms(&self, level: u32) -> u64 {
        let level = level.min(self.max_level);
        let doubling = 1_u64.checked_shl(level).unwrap_or(u64::MAX);
        self.base_ms.saturating_mul(doubling).min(self.max_ms)
    }
}

impl Default for CooldownSettings {
    fn default() -> Self {
        CooldownSettings::for_auth(AuthKind::ApiKey)
    }
}

/// Why and until when a whole connection is out of rotation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Disabled {
    pub reason: DisableReason,
    /// `None`: until an operator clears it or the config reloads.
    pub until_ms: Option<u64>,
    pub since_ms: u64,
}

/// What one connection has learned about its own health; rebuilt by [`ConnectionHealth::apply`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConnectionHealth {
    provider: String,
    connection: String,
    /// End of the latest cooldown (it may lie in the past).
    cooldown_until_ms: Option<u64>,
    /// Level the next escalating cooldown uses (see the module docs).
    level: u32,
    /// When the latest cooldown was set: failures of requests sent before it do not escalate.
    set_at_ms: Option<u64>,
    disabled: Option<Disabled>,
}

impl ConnectionHealth {
    /// A healthy connection `connection` of `provider`.
    pub fn new(provider: impl Into<String>, connection: impl Into<String>) -> Self {
        ConnectionHealth {
            provider: provider.into(),
            connection: connection.into(),
            cooldown_until_ms: None,
            level: 0,
            set_at_ms: None,
            disabled: None,
        }
    }

    pub fn provider(&self) -> &str {
        &self.provider
    }

    pub fn connection(&self) -> &str {
        &self.connection
    }

    /// Backoff level of the next escalating cooldown (0 = base).
    pub fn level(&self) -> u32 {
        self.level
    }

    pub fn disabled(&self) -> Option<&Disabled> {
        self.disabled.as_ref()
    }

    /// End of the latest cooldown, if one was ever set (it may lie in the past).
    pub fn cooldown_until_ms(&self) -> Option<u64> {
        self.cooldown_until_ms
    }

    /// Time left in the current cooldown (`None` when not cooling).
    pub fn cooldown_remaining_at(&self, now_ms: u64) -> Option<u64> {
        self.cooldown_until_ms
            .filter(|&until| now_ms < until)
            .map(|until| until - now_ms)
    }

    /// The hard block on this connection at `now` (§2 step 0, §7) and how long until it lifts
    /// (`None` = not by itself). Disabled outranks cooling; a disable with an end (billing, or
    /// one a peer reported, bounded by the cluster: issue #49) reports the time until the
    /// connection is routable again, so a cooldown outlasting it is included. An expired one no
    /// longer blocks: the next request is its probe.
    pub fn block_at(&self, now_ms: u64) -> Option<(BlockReason, Option<u64>)> {
        let cooling = self.cooldown_remaining_at(now_ms);
        let reason_of = |reason: DisableReason| match reason {
            DisableReason::Auth => BlockReason::DisabledAuth,
            DisableReason::Billing => BlockReason::DisabledBilling,
        };
        match &self.disabled {
            Some(Disabled {
                reason,
                until_ms: None,
                ..
            }) => Some((reason_of(*reason), None)),
            Some(Disabled {
                reason,
                until_ms: Some(until),
                ..
            }) if now_ms < *until => Some((
                reason_of(*reason),
                Some((until - now_ms).max(cooling.unwrap_or(0))),
            )),
            _ => cooling.map(|left| (BlockReason::Cooldown, Some(left))),
        }
    }

    /// Decide what one failed upstream request means to this connection (§4, §5). Classes the
    /// connection column does not name produce nothing. `retry_after_ms` is the upstream's
    /// `Retry-After` as a duration; `started_at_ms` is when the request was sent.
    #[expect(
        clippy::too_many_arguments,
        reason = "each argument is one input the rule reads; a struct of them would only rename them"
    )]
    pub fn on_failure(
        &self,
        provider: &str,
        connection: &str,
        class: OutcomeClass,
        status: Option<u16>,
        retry_after_ms: Option<u64>,
        started_at_ms: u64,
        now_ms: u64,
        s: &CooldownSettings,
        billing_ms: u64,
    ) -> Vec<Event> {
        if provider != self.provider || connection != self.connection {
            // `apply` would ignore events for another connection; producing them would be a lie.
            return Vec::new();
        }
        // Which column of §4's table applies is `classify::rules`' to say.
        let class_rules = rules(class);
        if class_rules.cools_connection {
            return self.cooldown(class, status, retry_after_ms, started_at_ms, now_ms, s);
        }
        match class_rules.disables_connection {
            Some(DisableReason::Auth) => {
                if self.is_disabled_for_auth(now_ms) {
                    return Vec::new();
                }
                vec![self.disable(DisableReason::Auth, status, None)]
            }
            Some(DisableReason::Billing) => {
                let billing_active = matches!(
                    &self.disabled,
                    Some(Disabled { reason: DisableReason::Billing, until_ms, .. })
                        if until_ms.is_none_or(|until| now_ms < until)
                );
                if self.is_disabled_for_auth(now_ms) || billing_active {
                    return Vec::new();
                }
                let until = now_ms.saturating_add(billing_ms);
                vec![self.disable(DisableReason::Billing, status, Some(until))]
            }
            None => Vec::new(),
        }
    }

    /// An operator (or a config reload) clears cooldown, level and disabled state.
    pub fn clear(&self, provider: &str, connection: &str, by: ActionBy) -> Vec<Event> {
        if provider != self.provider || connection != self.connection {
            return Vec::new();
        }
        vec![Event::ConnectionCleared(ConnectionCleared {
            provider: self.provider.clone(),
            connection: self.connection.clone(),
            by,
        })]
    }

    /// Whether a success at `at_ms` changes this state (a backoff level to reset, an expired
    /// disable to lift), per the `RequestSucceeded` arm of `apply`.
    pub fn success_changes_state(&self, at_ms: u64) -> bool {
        self.level > 0 || self.disable_expired(at_ms)
    }

    /// A disable with an end (billing, or a peer's) that has passed: a success is its probe.
    fn disable_expired(&self, at_ms: u64) -> bool {
        matches!(
            &self.disabled,
            Some(Disabled { until_ms: Some(until), .. }) if *until <= at_ms
        )
    }

    /// Fold one journaled event into the state. Reacts to `ConnectionCooldown`,
    /// `ConnectionDisabled`, `ConnectionCleared` and `RequestSucceeded` for this connection;
    /// ignores everything else.
    pub fn apply(&mut self, at_ms: u64, event: &Event) {
        match event {
            Event::ConnectionCooldown(cooldown)
                if self.owns(&cooldown.provider, &cooldown.connection) =>
            {
                self.cooldown_until_ms = Some(cooldown.until_ms);
                self.level = cooldown.level.saturating_add(1);
                self.set_at_ms = Some(at_ms);
            }
            Event::ConnectionDisabled(disabled)
                if self.owns(&disabled.provider, &disabled.connection) =>
            {
                self.disabled = Some(Disabled {
                    reason: disabled.reason,
                    until_ms: disabled.until_ms,
                    since_ms: at_ms,
                });
            }
            Event::ConnectionCleared(cleared)
                if self.owns(&cleared.provider, &cleared.connection) =>
            {
                *self = ConnectionHealth::new(self.provider.clone(), self.connection.clone());
            }
            Event::RequestSucceeded(success)
                if self.owns(&success.provider, &success.connection) =>
            {
                // §4: a success clears the backoff; the current cooldown (if any) runs out as set.
                self.level = 0;
                // The probe after a disable with an end succeeded: the account has credit
                // again, or the key a peer found refused works here.
                if self.disable_expired(at_ms) {
                    self.disabled = None;
                }
            }
            _ => {}
        }
    }

    fn cooldown(
        &self,
        class: OutcomeClass,
        status: Option<u16>,
        retry_after_ms: Option<u64>,
        started_at_ms: u64,
        now_ms: u64,
        s: &CooldownSettings,
    ) -> Vec<Event> {
        // Thundering herd: requests in flight when the connection went bad fail together; only
        // the first one may escalate. Already cooling, or sent before the cooldown: nothing new.
        let cooling = self.cooldown_remaining_at(now_ms).is_some();
        let sent_before_cooldown = self.set_at_ms.is_some_and(|set| started_at_ms < set);
        if cooling || sent_before_cooldown {
            return Vec::new();
        }
        let level = self.level.min(s.max_level);
        let duration = match retry_after_ms {
            Some(retry_after) => retry_after.min(s.max_ms),
            None => s.backoff_ms(level),
        };
        vec![Event::ConnectionCooldown(ConnectionCooldown {
            provider: self.provider.clone(),
            connection: self.connection.clone(),
            class,
            status,
            level,
            until_ms: now_ms.saturating_add(duration),
            from_retry_after: retry_after_ms.is_some(),
        })]
    }

    fn disable(&self, reason: DisableReason, status: Option<u16>, until_ms: Option<u64>) -> Event {
        Event::ConnectionDisabled(ConnectionDisabled {
            provider: self.provider.clone(),
            connection: self.connection.clone(),
            reason,
            status,
            error_code: None,
            until_ms,
        })
    }

    /// Disabled for auth at `now_ms`: for good, or until an end not passed yet.
    fn is_disabled_for_auth(&self, now_ms: u64) -> bool {
        matches!(
            &self.disabled,
            Some(Disabled {
                reason: DisableReason::Auth,
                until_ms,
                ..
            }) if until_ms.is_none_or(|until| now_ms < until)
        )
    }

    fn owns(&self, provider: &str, connection: &str) -> bool {
        provider == self.provider && connection == self.connection
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const P: &str = "openai";
    const C: &str = "key-1";
    const BILLING_MS: u64 = 3_600_000;

    type Live = crate::journaled::Live<ConnectionHealth, CooldownSettings>;

    impl crate::journaled::Reducer for ConnectionHealth {
        fn apply_event(&mut self, at_ms: u64, event: &Event) {
            self.apply(at_ms, event);
        }
    }

    impl Live {
        fn new(s: CooldownSettings) -> Self {
            Live::with(ConnectionHealth::new(P, C), s)
        }

        fn fail_sent(
            &mut self,
            class: OutcomeClass,
            retry_after: Option<u64>,
            sent: u64,
            now: u64,
        ) -> Vec<Event> {
            let events = self.state.on_failure(
                P,
                C,
                class,
                Some(503),
                retry_after,
                sent,
                now,
                &self.s,
                BILLING_MS,
            );
            self.commit(now, events)
        }

        fn fail(&mut self, class: OutcomeClass, now: u64) -> Vec<Event> {
            self.fail_sent(class, None, now, now)
        }

        fn succeed(&mut self, now: u64) {
            self.commit(now, vec![success(C)]);
        }
    }

    fn success(connection: &str) -> Event {
        quotaroute_journal::testkit::succeeded(P, connection, "m", 1, 1)
    }

    fn cooldown_of(events: &[Event]) -> ConnectionCooldown {
        match events {
            [Event::ConnectionCooldown(c)] => c.clone(),
            other => panic!("expected one cooldown, got {other:?}"),
        }
    }

    #[test]
    fn s5_cooldown_profile_defaults() {
        let table = [(AuthKind::ApiKey, 3_000, 5), (AuthKind::Oauth, 5_000, 8)];
        for (auth, base, max_level) in table {
            let s = CooldownSettings::for_auth(auth);
            assert_eq!(
                (s.base_ms, s.max_level, s.max_ms),
                (base, max_level, 300_000),
                "{auth:?}"
            );
        }
        assert_eq!(
            CooldownSettings::default(),
            CooldownSettings::for_auth(AuthKind::ApiKey)
        );
    }

    #[test]
    fn s5_cooldown_backs_off_base_times_2_pow_level_capped() {
        // Consecutive failures, each sent after the previous cooldown ran out.
        let table: [(AuthKind, &[u64]); 2] = [
            // level capped at 5: 3 s · 32 = 96 s
            (
                AuthKind::ApiKey,
                &[3_000, 6_000, 12_000, 24_000, 48_000, 96_000, 96_000],
            ),
            // level 6 would be 320 s: never over max_ms (300 s)
            (
                AuthKind::Oauth,
                &[
                    5_000, 10_000, 20_000, 40_000, 80_000, 160_000, 300_000, 300_000, 300_000,
                    300_000,
                ],
            ),
        ];
        for (auth, expected) in table {
            let mut live = Live::new(CooldownSettings::for_auth(auth));
            let mut now = 0;
            for (i, want) in expected.iter().enumerate() {
                let c = cooldown_of(&live.fail(OutcomeClass::ServerError, now));
                assert_eq!(c.until_ms - now, *want, "{auth:?} failure {}", i + 1);
                now = c.until_ms;
            }
            live.assert_replay_equals_live();
        }
    }

    #[test]
    fn s5_connection_column_by_class() {
        // (class, expected outcome)
        #[derive(Debug, PartialEq)]
        enum Want {
            Cooldown,
            DisabledAuth,
            DisabledBilling,
            Nothing,
        }
        let table = [
            (OutcomeClass::Timeout, Want::Cooldown),
            (OutcomeClass::ServerError, Want::Cooldown),
            (OutcomeClass::Network, Want::Cooldown),
            (OutcomeClass::AuthFailed, Want::DisabledAuth),
            (OutcomeClass::Forbidden, Want::DisabledAuth),
            (OutcomeClass::Billing, Want::DisabledBilling),
            (OutcomeClass::RateLimited, Want::Nothing),
            (OutcomeClass::QuotaExhausted, Want::Nothing),
            (OutcomeClass::ModelUnavailable, Want::Nothing),
            (OutcomeClass::ClientError, Want::Nothing),
            (OutcomeClass::Success, Want::Nothing),
        ];
        for (class, want) in table {
            let mut live = Live::new(CooldownSettings::default());
            let events = live.fail(class, 1_000);
            let got = match &events[..] {
                [Event::ConnectionCooldown(_)] => Want::Cooldown,
                [Event::ConnectionDisabled(d)]
                    if d.reason == DisableReason::Auth && d.until_ms.is_none() =>
                {
                    Want::DisabledAuth
                }
                [Event::ConnectionDisabled(d)]
                    if d.reason == DisableReason::Billing
                        && d.until_ms == Some(1_000 + BILLING_MS) =>
                {
                    Want::DisabledBilling
                }
                [] => Want::Nothing,
                other => panic!("{class:?}: unexpected {other:?}"),
            };
            assert_eq!(got, want, "{class:?}");
        }
    }

    #[test]
    fn s5_cooldown_already_cooling_is_not_escalated() {
        let mut live = Live::new(CooldownSettings::default());
        cooldown_of(&live.fail(OutcomeClass::Timeout, 0));
        assert!(live.fail(OutcomeClass::Timeout, 1_000).is_empty());
        assert!(live.fail(OutcomeClass::Network, 2_999).is_empty());
        assert_eq!(live.state.level(), 1);
        assert_eq!(
            live.state.block_at(2_999),
            Some((BlockReason::Cooldown, Some(1)))
        );
    }

    #[test]
    fn s5_cooldown_failure_sent_before_cooldown_is_not_escalated() {
        let mut live = Live::new(CooldownSettings::default());
        cooldown_of(&live.fail(OutcomeClass::Timeout, 10_000)); // set at 10 s, until 13 s
                                                                // A request sent at 9 s times out at 20 s, after the cooldown ran out: still the herd.
        assert!(live
            .fail_sent(OutcomeClass::Timeout, None, 9_000, 20_000)
            .is_empty());
        // One sent after the cooldown was set escalates: level 1 → 6 s.
        let c = cooldown_of(&live.fail_sent(OutcomeClass::Timeout, None, 13_000, 20_000));
        assert_eq!((c.level, c.until_ms), (1, 26_000));
    }

    #[test]
    fn s5_cooldown_retry_after_sets_exactly_capped_at_max() {
        let mut live = Live::new(CooldownSettings::default());
        let c = cooldown_of(&live.fail_sent(OutcomeClass::ServerError, Some(7_500), 0, 0));
        assert_eq!((c.until_ms, c.from_retry_after), (7_500, true));
        let c =
            cooldown_of(&live.fail_sent(OutcomeClass::ServerError, Some(10_000_000), 8_000, 8_000));
        assert_eq!(c.until_ms, 8_000 + 300_000);
        live.assert_replay_equals_live();
    }

    #[test]
    fn s5_cooldown_success_resets_level_keeps_until() {
        let mut live = Live::new(CooldownSettings::default());
        live.fail(OutcomeClass::Timeout, 0);
        live.fail(OutcomeClass::Timeout, 3_000); // level 1: until 9 s
        assert_eq!(live.state.level(), 2);
        live.succeed(5_000);
        assert_eq!(live.state.level(), 0);
        assert_eq!(
            live.state.block_at(5_000),
            Some((BlockReason::Cooldown, Some(4_000)))
        );
        let c = cooldown_of(&live.fail(OutcomeClass::Timeout, 9_000));
        assert_eq!(c.until_ms, 12_000, "back to base");
        live.assert_replay_equals_live();
    }

    #[test]
    fn s4_disabled_auth_blocks_until_cleared() {
        let mut live = Live::new(CooldownSettings::default());
        live.fail(OutcomeClass::AuthFailed, 0);
        assert_eq!(
            live.state.block_at(u64::MAX),
            Some((BlockReason::DisabledAuth, None))
        );
        assert!(
            live.fail(OutcomeClass::Forbidden, 1).is_empty(),
            "already disabled"
        );
        assert!(
            live.fail(OutcomeClass::Billing, 2).is_empty(),
            "auth outranks billing"
        );
        let cleared = live.state.clear(P, C, ActionBy::Admin);
        live.commit(3, cleared);
        assert_eq!(live.state.block_at(3), None);
        live.assert_replay_equals_live();
    }

    /// Issue #49: an auth disable that carries an end (a peer's, bounded to `billing_ms` by
    /// the cluster) ends by itself like a billing one: then the next request is its probe, a
    /// success lifts it and this node's own 401 disables the connection for good.
    #[test]
    fn an_auth_disable_with_an_end_ends_by_itself() {
        let mut live = Live::new(CooldownSettings::default());
        let peers = Event::ConnectionDisabled(ConnectionDisabled {
            provider: P.into(),
            connection: C.into(),
            reason: DisableReason::Auth,
            status: Some(401),
            error_code: None,
            until_ms: Some(BILLING_MS),
        });
        live.commit(0, vec![peers.clone()]);
        assert_eq!(
            live.state.block_at(1_000),
            Some((BlockReason::DisabledAuth, Some(BILLING_MS - 1_000)))
        );
        assert!(
            live.fail(OutcomeClass::AuthFailed, 1_000).is_empty(),
            "in flight"
        );
        assert_eq!(live.state.block_at(BILLING_MS), None, "the probe may go");
        live.succeed(BILLING_MS + 1);
        assert_eq!(live.state.disabled(), None, "the probe succeeded");

        live.commit(BILLING_MS + 2, vec![peers]);
        let own = live.fail(OutcomeClass::AuthFailed, BILLING_MS + 5);
        assert!(
            matches!(&own[..], [Event::ConnectionDisabled(d)] if d.until_ms.is_none()),
            "the probe's own 401: {own:?}"
        );
        assert_eq!(
            live.state.block_at(u64::MAX),
            Some((BlockReason::DisabledAuth, None))
        );
        live.assert_replay_equals_live();
    }

    #[test]
    fn s4_disabled_billing_for_billing_ms_then_probed() {
        let mut live = Live::new(CooldownSettings::default());
        live.fail(OutcomeClass::Billing, 0);
        assert_eq!(
            live.state.block_at(1_000),
            Some((BlockReason::DisabledBilling, Some(BILLING_MS - 1_000)))
        );
        assert!(
            live.fail(OutcomeClass::Billing, 1_000).is_empty(),
            "in flight: already disabled"
        );
        // After billing_ms the connection routes again: the next request is the probe.
        assert_eq!(live.state.block_at(BILLING_MS), None);
        // The probe fails on billing again: another billing_ms.
        let events = live.fail(OutcomeClass::Billing, BILLING_MS + 10);
        assert!(
            matches!(&events[..], [Event::ConnectionDisabled(d)] if d.until_ms == Some(2 * BILLING_MS + 10))
        );
        // An auth failure while billing-disabled upgrades it.
        let events = live.fail(OutcomeClass::AuthFailed, BILLING_MS + 20);
        assert!(
            matches!(&events[..], [Event::ConnectionDisabled(d)] if d.reason == DisableReason::Auth)
        );
        live.assert_replay_equals_live();
    }

    #[test]
    fn s4_billing_probe_success_clears_expired_disable() {
        let mut live = Live::new(CooldownSettings::default());
        live.fail(OutcomeClass::Billing, 0);
        live.succeed(10); // a request from before the disable: it stays
        assert!(live.state.disabled().is_some());
        live.succeed(BILLING_MS + 1);
        assert_eq!(live.state.disabled(), None);
    }

    #[test]
    fn s7_billing_block_reports_time_until_routable() {
        let mut live = Live::new(CooldownSettings::default());
        live.fail_sent(OutcomeClass::ServerError, Some(300_000), 0, 0);
        live.fail(OutcomeClass::Billing, 1_000);
        // billing ends at 3 601 s, the cooldown at 300 s: billing is longer.
        assert_eq!(
            live.state.block_at(2_000),
            Some((BlockReason::DisabledBilling, Some(BILLING_MS - 1_000)))
        );
        let s = CooldownSettings {
            max_ms: 10_000_000,
            ..CooldownSettings::default()
        };
        let mut live = Live::new(s);
        live.fail_sent(OutcomeClass::ServerError, Some(5_000_000), 0, 0);
        live.fail(OutcomeClass::Billing, 0);
        assert_eq!(
            live.state.block_at(0),
            Some((BlockReason::DisabledBilling, Some(5_000_000)))
        );
    }

    #[test]
    fn s5_clear_resets_everything() {
        let mut live = Live::new(CooldownSettings::default());
        live.fail(OutcomeClass::Timeout, 0);
        live.fail(OutcomeClass::Billing, 0);
        let events = live.state.clear(P, C, ActionBy::Reload);
        assert!(matches!(&events[..], [Event::ConnectionCleared(c)] if c.by == ActionBy::Reload));
        live.commit(1, events);
        assert_eq!(live.state, ConnectionHealth::new(P, C));
    }

    #[test]
    fn s5_connection_ignores_other_connections() {
        let mut live = Live::new(CooldownSettings::default());
        let s = live.s.clone();
        assert!(live
            .state
            .on_failure(P, "key-2", OutcomeClass::Timeout, None, None, 0, 0, &s, 1)
            .is_empty());
        assert!(live.state.clear("anthropic", C, ActionBy::Admin).is_empty());
        let other = ConnectionHealth::new(P, "key-2");
        let mut foreign =
            other.on_failure(P, "key-2", OutcomeClass::Timeout, None, None, 0, 0, &s, 1);
        foreign.extend(other.on_failure(
            P,
            "key-2",
            OutcomeClass::AuthFailed,
            None,
            None,
            0,
            0,
            &s,
            1,
        ));
        foreign.push(success("key-2"));
        live.state.level = 3;
        let before = live.state.clone();
        for event in &foreign {
            live.state.apply(0, event);
        }
        assert_eq!(live.state, before);
    }

    #[test]
    fn s8_connection_health_roundtrips_through_serde() {
        let mut live = Live::new(CooldownSettings::default());
        live.fail(OutcomeClass::Timeout, 0);
        live.fail(OutcomeClass::Billing, 0);
        let text = serde_json::to_string(&live.state).expect("serialize");
        let back: ConnectionHealth = serde_json::from_str(&text).expect("deserialize");
        assert_eq!(back, live.state);
    }

    /// A thundering herd, narrated: one key, 10 requests in flight when the upstream falls over.
    #[test]
    fn s5_cooldown_timeline_thundering_herd() {
        let mut live = Live::new(CooldownSettings::default());

        // t=0..0.9 s: ten requests go out on key-1.
        // t=1 s: the first comes back 503 → cooldown at level 0: base 3 s, until 4 s.
        let first = cooldown_of(&live.fail_sent(OutcomeClass::ServerError, None, 0, 1_000));
        assert_eq!((first.level, first.until_ms), (0, 4_000));

        // t=1.1..2 s: the other nine fail too. They were in flight: the cooldown stays 3 s.
        for i in 1..10 {
            assert!(live
                .fail_sent(OutcomeClass::ServerError, None, i * 100, 1_000 + i * 100)
                .is_empty());
        }

        // t=5 s: a straggler sent at 0.5 s finally times out after the cooldown ended. It was
        // sent before the cooldown was set, so it is still the same herd: no new cooldown.
        assert!(live
            .fail_sent(OutcomeClass::Timeout, None, 500, 5_000)
            .is_empty());
        assert_eq!(live.state.block_at(5_000), None);

        // t=5.1 s: a fresh request fails → escalated once: level 1, 6 s.
        let second = cooldown_of(&live.fail_sent(OutcomeClass::Network, None, 5_000, 5_100));
        assert_eq!((second.level, second.until_ms), (1, 11_100));

        // t=12 s: the upstream is back; a success resets the level: the next failure is base.
        live.succeed(12_000);
        let third = cooldown_of(&live.fail_sent(OutcomeClass::Timeout, None, 12_500, 13_000));
        assert_eq!((third.level, third.until_ms), (0, 16_000));

        live.assert_replay_equals_live();
    }

    #[derive(Debug, Clone)]
    enum Op {
        Fail {
            class: OutcomeClass,
            retry_after: Option<u64>,
            sent_ago: u64,
        },
        Succeed,
        Clear,
    }

    fn op() -> impl Strategy<Value = (u64, Op)> {
        let class = prop::sample::select(vec![
            OutcomeClass::Timeout,
            OutcomeClass::ServerError,
            OutcomeClass::Network,
            OutcomeClass::AuthFailed,
            OutcomeClass::Forbidden,
            OutcomeClass::Billing,
            OutcomeClass::RateLimited,
        ]);
        let op = prop_oneof![
            8 => (class, proptest::option::weighted(0.2, 0_u64..600_000), 0_u64..30_000)
                .prop_map(|(class, retry_after, sent_ago)| Op::Fail { class, retry_after, sent_ago }),
            3 => Just(Op::Succeed),
            1 => Just(Op::Clear),
        ];
        (0_u64..120_000, op)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Replay equals live for random outcome sequences, and every cooldown stays within
        /// `max_ms` and `max_level`.
        #[test]
        fn prop_s5_cooldown_replay_equals_live_and_bounds_hold(
            oauth in any::<bool>(),
            ops in proptest::collection::vec(op(), 1..100),
        ) {
            let auth = if oauth { AuthKind::Oauth } else { AuthKind::ApiKey };
            let mut live = Live::new(CooldownSettings::for_auth(auth));
            let mut now = 0_u64;
            for (dt, op) in ops {
                now += dt;
                let events = match op {
                    Op::Fail { class, retry_after, sent_ago } => {
                        let was_cooling = live.state.cooldown_remaining_at(now).is_some();
                        let events = live.fail_sent(class, retry_after, now.saturating_sub(sent_ago), now);
                        if was_cooling {
                            prop_assert!(!events.iter().any(|e| matches!(e, Event::ConnectionCooldown(_))));
                        }
                        events
                    }
                    Op::Succeed => {
                        live.succeed(now);
                        Vec::new()
                    }
                    Op::Clear => {
                        let events = live.state.clear(P, C, ActionBy::Admin);
                        live.commit(now, events)
                    }
                };
                for event in &events {
                    if let Event::ConnectionCooldown(c) = event {
                        prop_assert!(c.until_ms - now <= live.s.max_ms);
                        prop_assert!(c.level <= live.s.max_level);
                    }
                }
            }
            live.assert_replay_equals_live();
        }
    }
}
