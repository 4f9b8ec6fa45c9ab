//! Which events reach the journal under `journal.request_events`: `all` keeps every event;
//! `failures` keeps failures and every state change, and lets routine successes only update
//! the in-memory fold (counters and buckets), which snapshots then carry.

use quotaroute_journal::Event;
use serde::{Deserialize, Serialize};

use crate::router_state::RouterState;

/// The contract's `journal.request_events`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RequestEvents {
    /// Every request event is journaled.
    #[default]
    All,
    /// Successes only update counters and buckets; failures and state changes are journaled.
    Failures,
}

impl RequestEvents {
    /// Whether `event`, about to be folded into `state` at `at_ms`, is appended to the journal.
    ///
    /// Under `failures`, a success is still journaled when it changes learned state beyond
    /// the bucket counts (it resets a backoff, lifts a billing disable, relaxes a lockout), and
    /// a routing decision is journaled when it passed over a target or found none, so that
    /// every "why" of a failure stays in the journal; a success that carries its client's
    /// charge (behaviour §11) is always journaled.
    pub fn journals(self, state: &RouterState, at_ms: u64, event: &Event) -> bool {
        if self == RequestEvents::All {
            return true;
        }
        match event {
            // A success that carries its client's charge is that charge's only record.
            Event::RequestSucceeded(success) if success.period_spend_pusd.is_some() => true,
            Event::RequestSucceeded(success) => state
                .connections
                .get(&*success.connection)
                .is_some_and(|connection| connection.success_changes_state(&success.model, at_ms)),
            Event::RouteDecided(decided) => !decided.skipped.is_empty() || decided.chosen.is_none(),
            _ => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use quotaroute_journal::testkit::{failed, succeeded};
    use quotaroute_journal::{
        BlockReason, ConnectionCooldown, LockReason, ModelLocked, OutcomeClass, ResetSource,
        RouteDecided, Skipped,
    };

    use super::*;

    const T0: u64 = 1_764_000_000_000;

    fn decided(skipped: Vec<Skipped>, chosen: Option<u16>) -> Event {
        Event::RouteDecided(RouteDecided {
            request_id: "r1".into(),
            generation: 1,
            combo: "team".into(),
            model: "team".into(),
            room: vec![0, 1],
            chosen,
            order: vec![0, 1],
            skipped,
            affinity: Default::default(),
            client: Some("default".into()),
            group: None,
            paces: Vec::new(),
        })
    }

    #[test]
    fn all_journals_every_event() {
        let state = RouterState::default();
        let success = succeeded("openai", "k1", "gpt-4o-mini", 10, 20);
        assert!(RequestEvents::All.journals(&state, T0, &success));
        assert!(RequestEvents::All.journals(&state, T0, &decided(vec![], Some(0))));
    }

    #[test]
    fn failures_drops_routine_successes_and_plain_decisions() {
        let state = RouterState::default();
        let success = succeeded("openai", "k1", "gpt-4o-mini", 10, 20);
        assert!(!RequestEvents::Failures.journals(&state, T0, &success));
        assert!(!RequestEvents::Failures.journals(&state, T0, &decided(vec![], Some(0))));
    }

    #[test]
    fn failures_keeps_a_routine_success_that_carries_its_clients_charge() {
        let state = RouterState::default();
        let mut success = succeeded("openai", "k1", "gpt-4o-mini", 10, 20);
        if let Event::RequestSucceeded(e) = &mut success {
            e.period_spend_pusd = Some(1_000);
            e.period_start_ms = Some(T0);
        }
        assert!(RequestEvents::Failures.journals(&state, T0, &success));
    }

    #[test]
    fn failures_keeps_failures_and_decisions_that_explain_them() {
        let state = RouterState::default();
        let failure = failed(
            "openai",
            "k1",
            "gpt-4o-mini",
            Some(429),
            OutcomeClass::RateLimited,
        );
        assert!(RequestEvents::Failures.journals(&state, T0, &failure));
        let skipped = vec![Skipped {
            connection: "k2".into(),
            model: "gpt-4o-mini".into(),
            reason: BlockReason::Cooldown,
            remaining_ms: Some(1_000),
        }];
        assert!(RequestEvents::Failures.journals(&state, T0, &decided(skipped, Some(0))));
        assert!(RequestEvents::Failures.journals(&state, T0, &decided(vec![], None)));
    }

    #[test]
    fn failures_keeps_a_success_that_relaxes_a_lockout() {
        let mut state = RouterState::default();
        state.apply(
            T0,
            &Event::ModelLocked(ModelLocked {
                provider: "openai".into(),
                connection: "k1".into(),
                model: "gpt-4o-mini".into(),
                reason: LockReason::RateLimited,
                status: Some(429),
                error_code: None,
                until_ms: T0 + 60_000,
                failure_count: 1,
                source: ResetSource::Backoff,
            }),
        );
        let success = succeeded("openai", "k1", "gpt-4o-mini", 10, 20);
        assert!(RequestEvents::Failures.journals(&state, T0 + 1, &success));
        // Another model of the same connection has nothing to relax.
        let other = succeeded("openai", "k1", "gpt-4o", 10, 20);
        assert!(!RequestEvents::Failures.journals(&state, T0 + 1, &other));
    }

    #[test]
    fn failures_keeps_a_success_that_resets_a_backoff() {
        let mut state = RouterState::default();
        state.apply(
            T0,
            &Event::ConnectionCooldown(ConnectionCooldown {
                provider: "openai".into(),
                connection: "k1".into(),
                level: 0,
                until_ms: T0 + 1_000,
                status: Some(500),
                class: OutcomeClass::ServerError,
                from_retry_after: false,
            }),
        );
        let success = succeeded("openai", "k1", "gpt-4o-mini", 10, 20);
        assert!(RequestEvents::Failures.journals(&state, T0 + 2_000, &success));
        // Once the success is folded, the backoff is gone and the next success is routine.
        state.apply(T0 + 2_000, &success);
        assert!(!RequestEvents::Failures.journals(&state, T0 + 2_001, &success));
    }
}
