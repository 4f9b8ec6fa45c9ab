//! What one settled attempt does to the state the next decision routes on: its provider's
//! breaker hears the attempt's signal (behaviour §4's breaker column, [`BreakerSignal`]), its
//! connection folds the whole outcome (`ConnectionState::on_outcome`).
//!
//! The node reports an attempt as two messages (`Decision` builds the signal with
//! [`BreakerSignal::of`]; the breaker actor turns it into events with
//! [`BreakerSignal::events`]; the connection actor runs `on_outcome`); `--what-if` folds both
//! halves at once with [`fold_settled`]. Each half is stated here or in its state's own file,
//! once. Pure: `now` is an input, `apply` the only mutator.

use quotaroute_journal::Event;

use crate::breaker::{BreakerSettings, BreakerState};
use crate::connection_state::ConnectionState;
use crate::outcome::Outcome;
use crate::request::breaker_signal;
use crate::topology::ConnectionSpec;

/// One outcome as the breaker sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BreakerSignal {
    pub connection: String,
    /// True for timeout/server/network failures; false for successes.
    pub failure: bool,
    pub started_at_ms: u64,
    pub was_probe: bool,
}

impl BreakerSignal {
    /// What `outcome` tells its provider's breaker; `None` for a class the breaker does not
    /// count (`policy::request::breaker_signal`).
    pub fn of(outcome: &Outcome) -> Option<BreakerSignal> {
        breaker_signal(outcome.result.class).map(|failure| BreakerSignal {
            connection: outcome.connection.to_string(),
            failure,
            started_at_ms: outcome.started_at_ms,
            was_probe: outcome.was_probe,
        })
    }

    /// The events this signal causes on `provider`'s breaker at `now` (not applied).
    pub fn events(
        &self,
        breaker: &BreakerState,
        provider: &str,
        now_ms: u64,
        settings: &BreakerSettings,
    ) -> Vec<Event> {
        breaker.on_outcome(
            provider,
            &self.connection,
            self.failure,
            self.started_at_ms,
            self.was_probe,
            now_ms,
            settings,
        )
    }
}

/// One settled attempt folded into its provider's breaker and its connection, as their
/// actors fold it: the breaker's events (none when the class does not signal), then the
/// connection's (the request event first), each applied as it is returned. Returns them in
/// that order.
pub fn fold_settled(
    outcome: &Outcome,
    now_ms: u64,
    (breaker, breaker_settings): (&mut BreakerState, &BreakerSettings),
    (connection, spec): (&mut ConnectionState, &ConnectionSpec),
) -> Vec<Event> {
    let mut events = BreakerSignal::of(outcome).map_or_else(Vec::new, |signal| {
        signal.events(breaker, &outcome.provider, now_ms, breaker_settings)
    });
    for event in &events {
        breaker.apply(now_ms, event);
    }
    let connection_events = connection.on_outcome(outcome, now_ms, spec);
    for event in &connection_events {
        connection.apply(now_ms, event);
    }
    events.extend(connection_events);
    events
}

#[cfg(test)]
mod tests {
    use quotaroute_journal::{AuthKind, BreakerPhase, OutcomeClass};

    use super::*;
    use crate::outcome::AttemptResult;

    fn outcome(result: AttemptResult, was_probe: bool) -> Outcome {
        Outcome {
            request_id: "r".into(),
            combo: "team".into(),
            client: None,
            provider: "p".into(),
            connection: "c".into(),
            model: "m".into(),
            attempt: 1,
            started_at_ms: 1_000,
            latency_ms: 5,
            was_probe,
            skipped: Vec::new(),
            result,
        }
    }

    #[test]
    fn the_signal_follows_the_class_table_and_carries_the_attempts_start_and_probe() {
        let failed = outcome(
            AttemptResult::failure(OutcomeClass::ServerError, Some(500)),
            true,
        );
        assert_eq!(
            BreakerSignal::of(&failed),
            Some(BreakerSignal {
                connection: "c".into(),
                failure: true,
                started_at_ms: 1_000,
                was_probe: true,
            })
        );
        let limited = outcome(
            AttemptResult::failure(OutcomeClass::RateLimited, Some(429)),
            false,
        );
        assert_eq!(BreakerSignal::of(&limited), None);
        let served = outcome(AttemptResult::success(200, 1, 1), false);
        assert_eq!(BreakerSignal::of(&served).map(|s| s.failure), Some(false));
    }

    /// Enough server errors open the breaker and cool the connection, both applied by the
    /// fold; a 429 tells the breaker nothing but still reaches the connection.
    #[test]
    fn the_fold_applies_the_breakers_events_then_the_connections() {
        let settings = BreakerSettings {
            degrade_at: 1,
            open_at: 2,
            dedup_ms: 0,
            ..BreakerSettings::default()
        };
        let spec = ConnectionSpec::new("c", "p", AuthKind::ApiKey, 1);
        let mut breaker = BreakerState::new("p");
        let mut connection = ConnectionState::new("p", "c");
        let limited = outcome(
            AttemptResult::failure(OutcomeClass::RateLimited, Some(429)),
            false,
        );
        let events = fold_settled(
            &limited,
            1_005,
            (&mut breaker, &settings),
            (&mut connection, &spec),
        );
        assert!(matches!(events.first(), Some(Event::RequestFailed(_))));
        assert!(events
            .iter()
            .all(|e| !matches!(e, Event::BreakerCounted(_))));
        for n in 0..2 {
            let failed = outcome(
                AttemptResult::failure(OutcomeClass::ServerError, Some(500)),
                false,
            );
            let events = fold_settled(
                &failed,
                1_010 + n,
                (&mut breaker, &settings),
                (&mut connection, &spec),
            );
            assert!(matches!(events.first(), Some(Event::BreakerCounted(_))));
        }
        assert_eq!(breaker.phase_at(1_020, &settings), BreakerPhase::Open);
        assert!(connection.health.cooldown_until_ms().is_some());
    }
}
