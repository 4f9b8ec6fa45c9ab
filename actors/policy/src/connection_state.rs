//! Everything one connection has learned — cooldown/disabled health, model lockouts, usage
//! buckets — and the rule that turns one attempt's outcome into that connection's events.
//!
//! Pure: `on_outcome` returns events, `apply` is the only mutator. Breaker effects are not here
//! (the provider's breaker owns them).

use quotaroute_journal::{Event, PeerApplied, UsageObserved, UsageSource};
use serde::{Deserialize, Serialize};

use crate::buckets::UsageBuckets;
use crate::classify::rules;
use crate::cooldown::ConnectionHealth;
use crate::lockout::ModelLockouts;
use crate::outcome::Outcome;
use crate::peer_merge;
use crate::reading_end::{length_reading_ends_at_ms, reading_ends_at_ms};
use crate::topology::ConnectionSpec;

/// The learned state of one connection.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConnectionState {
    pub health: ConnectionHealth,
    pub lockouts: ModelLockouts,
    pub buckets: UsageBuckets,
}

impl ConnectionState {
    pub fn new(provider: &str, connection: &str) -> Self {
        ConnectionState {
            health: ConnectionHealth::new(provider, connection),
            lockouts: ModelLockouts::new(provider, connection),
            buckets: UsageBuckets::new(),
        }
    }

    /// The events one attempt's outcome causes on this connection, the request event first.
    pub fn on_outcome(&self, outcome: &Outcome, now_ms: u64, spec: &ConnectionSpec) -> Vec<Event> {
        self.on_outcome_owned(outcome.clone(), now_ms, spec)
    }

    /// [`ConnectionState::on_outcome`] taking the outcome, so its strings move into the request
    /// event instead of being copied (the connection actor's path).
    pub fn on_outcome_owned(
        &self,
        outcome: Outcome,
        now_ms: u64,
        spec: &ConnectionSpec,
    ) -> Vec<Event> {
        let derived = self.derived_events(&outcome, now_ms, spec);
        let mut events = Vec::with_capacity(1 + derived.len());
        events.push(outcome.into_request_event());
        events.extend(derived);
        events
    }

    /// The events after the request event: health, lockout and usage changes.
    fn derived_events(&self, outcome: &Outcome, now_ms: u64, spec: &ConnectionSpec) -> Vec<Event> {
        let mut events = Vec::new();
        let result = &outcome.result;
        let class_rules = rules(result.class);
        if class_rules.cools_connection || class_rules.disables_connection.is_some() {
            events.extend(self.health.on_failure(
                &outcome.provider,
                &outcome.connection,
                result.class,
                result.status,
                result.reset_hint_ms,
                outcome.started_at_ms,
                now_ms,
                &spec.cooldown,
                spec.lockout.billing_ms,
            ));
        }
        if let Some(reason) = class_rules.locks_model {
            events.extend(self.lockouts.on_failure(
                &outcome.provider,
                &outcome.connection,
                &outcome.model,
                reason,
                result.status,
                result.error_code.clone(),
                result.reset_hint_ms,
                now_ms,
                &spec.lockout,
            ));
        }
        events.extend(self.usage_changes(outcome, now_ms, spec));
        events
    }

    /// Header readings worth journaling: a window seen for the first time, or one that moved
    /// enough to matter to routing — its saturation or spent state flips, what is used moves
    /// to another whole percent of the limit (pacing reads it, §13), or its reset moves to a
    /// new window. Other readings are not journaled (every response carries them), which keeps
    /// the journal to about a hundred readings per window per reset.
    fn usage_changes(&self, outcome: &Outcome, now_ms: u64, spec: &ConnectionSpec) -> Vec<Event> {
        if outcome.result.usage.is_empty() {
            return Vec::new();
        }
        outcome
            .result
            .usage
            .iter()
            .filter(|reading| match self.buckets.reading(&reading.window) {
                Some(known) if known.resets_at_ms.is_none_or(|reset| now_ms < reset) => {
                    reading_moved(known, reading, now_ms, &spec.buckets)
                }
                _ => true,
            })
            .map(|reading| {
                Event::UsageObserved(UsageObserved {
                    provider: outcome.provider.to_string(),
                    connection: outcome.connection.to_string(),
                    window: reading.window.clone(),
                    used: reading.used,
                    limit: reading.limit,
                    resets_at_ms: Some(reading_ends_at_ms(
                        &reading.window,
                        now_ms,
                        reading.resets_at_ms,
                    )),
                    source: UsageSource::Header,
                })
            })
            .collect()
    }

    /// Applies one event about this connection.
    pub fn apply(&mut self, at_ms: u64, event: &Event) {
        self.health.apply(at_ms, event);
        self.lockouts.apply(at_ms, event);
        self.buckets.apply(at_ms, event);
    }

    /// Applies a peer's event at the time its origin saw it, if the merge policy admits it
    /// (`peer_merge::admits`); returns whether it did. The live actor and the fold both call
    /// this, so they agree.
    pub fn apply_peer(&mut self, applied: &PeerApplied) -> bool {
        if !peer_merge::admits(
            &self.health,
            &self.lockouts,
            &applied.event,
            applied.origin_at_ms,
        ) {
            return false;
        }
        self.apply(applied.origin_at_ms, &applied.event);
        true
    }

    /// Whether a success on `model` at `at_ms` changes more than the bucket counts: the
    /// backoff, a billing disable or a lockout's history.
    pub fn success_changes_state(&self, model: &str, at_ms: u64) -> bool {
        self.health.success_changes_state(at_ms) || self.lockouts.success_changes_state(model)
    }
}

/// Whether a reading of `used` of `limit` leaves no more than `saturate_below_pct` % room.
/// Whether `new` says something routing would act on that `known` did not (see
/// `usage_changes`).
fn reading_moved(
    known: &crate::buckets::Reading,
    new: &crate::rate_limit_headers::UsageReading,
    now_ms: u64,
    settings: &crate::buckets::BucketSettings,
) -> bool {
    let percent = |used: u64, limit: u64| u128::from(used) * 100 / u128::from(limit.max(1));
    let length = crate::window_id::WindowId::parse(&new.window).length_ms();
    // Both ends as kept (`reading_end`): a reading without a reset moves its end along with
    // the time it is read, so it is journaled again once that drifts past the jitter.
    let new_end = length_reading_ends_at_ms(length, now_ms, new.resets_at_ms);
    let reset_moved = known.resets_at_ms.is_none_or(|known_end| {
        known_end.abs_diff(new_end) > (length.unwrap_or(0) / 100).max(RESET_JITTER_MS)
    });
    // Per-minute windows pace nothing worth a record per percent; their flips still count.
    let paced = crate::pace::is_quota_length(length);
    known.limit != new.limit
        || reading_saturates(known.used, known.limit, settings)
            != reading_saturates(new.used, new.limit, settings)
        || (known.used >= known.limit) != (new.used >= new.limit)
        || (paced && percent(known.used, known.limit) != percent(new.used, new.limit))
        || reset_moved
}

/// How far a window's reset may wander between responses (relative reset headers are read
/// against each response's own clock) before it is taken for a new window.
const RESET_JITTER_MS: u64 = 60_000;

pub fn reading_saturates(used: u64, limit: u64, settings: &crate::buckets::BucketSettings) -> bool {
    if limit == 0 {
        return false;
    }
    let remaining = limit.saturating_sub(used) as f64;
    remaining <= limit as f64 * settings.saturate_below_pct / 100.0
}
