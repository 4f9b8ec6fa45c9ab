//! Several nodes (behaviour §9): which of a node's own events its peers learn from, and whether
//! a peer's event changes what this node knows about a connection.
//!
//! Pure: both halves are decided from the event and the local state alone, so the live actor
//! and the journal's fold (replay) reach the same answer. It must not read Redis or the clock;
//! breakers, in-flight counts and DRR deficits are never shared (each node's own traffic).

use quotaroute_journal::{ActionBy, Event, UsageSource};

use crate::policy::cooldown::ConnectionHealth;
use crate::policy::lockout::{replaces_block, ModelLockouts};

/// Whether a node's own journaled `event` is published to its peers: every state change about
/// a connection — cooldown, disable, a lock, an upstream or pushed usage reading, and what an
/// operator cleared. Not shared: request events (usage is shared through leases), clears and
/// unlocks by a reload or an eviction (each node's own config and memory bound), the node's
/// own lease readings, and anything already learned from a peer (no echo).
pub fn is_shared(event: &Event) -> bool {
    match event {
        Event::ConnectionCooldown(_) | Event::ConnectionDisabled(_) | Event::ModelLocked(_) => true,
        Event::ConnectionCleared(cleared) => cleared.by == ActionBy::Admin,
        Event::ModelUnlocked(unlocked) => unlocked.by == ActionBy::Admin,
        Event::UsageObserved(observed) => observed.source != UsageSource::Lease,
        _ => false,
    }
}

/// Whether a peer's `event`, seen by it at `at_ms`, is applied to a connection of this
/// `health` and these `lockouts`: a shared kind, and
/// never one that would shorten a longer block this node already knows (behaviour §5, by the
/// one rule `lockout::replaces_block`). Readings need no check here: newest wins per window.
pub fn admits(
    health: &ConnectionHealth,
    lockouts: &ModelLockouts,
    event: &Event,
    at_ms: u64,
) -> bool {
    if !is_shared(event) {
        return false;
    }
    match event {
        Event::ModelLocked(locked) => replaces_block(
            lockouts.lock(&locked.model).map(|lock| Some(lock.until_ms)),
            Some(locked.until_ms),
            at_ms,
        ),
        Event::ConnectionCooldown(cooldown) => replaces_block(
            health.cooldown_until_ms().map(Some),
            Some(cooldown.until_ms),
            at_ms,
        ),
        Event::ConnectionDisabled(disabled) => replaces_block(
            health.disabled().map(|current| current.until_ms),
            disabled.until_ms,
            at_ms,
        ),
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use quotaroute_journal::{
        ConnectionCleared, ConnectionCooldown, LockReason, ModelLocked, OutcomeClass, ResetSource,
        UsageObserved,
    };

    use super::*;
    use crate::policy::connection_state::ConnectionState;

    const T0: u64 = 1_764_000_000_000;

    fn locked(until_ms: u64) -> Event {
        Event::ModelLocked(ModelLocked {
            provider: "openai".into(),
            connection: "k1".into(),
            model: "m".into(),
            reason: LockReason::RateLimited,
            status: Some(429),
            error_code: None,
            until_ms,
            failure_count: 1,
            source: ResetSource::Upstream,
        })
    }

    fn cooldown(until_ms: u64) -> Event {
        Event::ConnectionCooldown(ConnectionCooldown {
            provider: "openai".into(),
            connection: "k1".into(),
            class: OutcomeClass::ServerError,
            status: Some(503),
            level: 0,
            until_ms,
            from_retry_after: false,
        })
    }

    fn reading(source: UsageSource) -> Event {
        Event::UsageObserved(UsageObserved {
            provider: "openai".into(),
            connection: "k1".into(),
            window: "5h".into(),
            used: 1,
            limit: 10,
            resets_at_ms: None,
            source,
        })
    }

    fn cleared(by: ActionBy) -> Event {
        Event::ConnectionCleared(ConnectionCleared {
            provider: "openai".into(),
            connection: "k1".into(),
            by,
        })
    }

    #[test]
    fn s9_what_is_shared() {
        assert!(is_shared(&locked(T0)));
        assert!(is_shared(&cooldown(T0)));
        assert!(is_shared(&reading(UsageSource::Header)));
        assert!(is_shared(&reading(UsageSource::Push)));
        assert!(!is_shared(&reading(UsageSource::Lease)));
        assert!(is_shared(&cleared(ActionBy::Admin)));
        assert!(!is_shared(&cleared(ActionBy::Reload)));
        let success = quotaroute_journal::testkit::succeeded("openai", "k1", "m", 1, 1);
        assert!(!is_shared(&success));
    }

    #[test]
    fn s9_a_peer_never_shortens_a_longer_local_lock() {
        let mut state = ConnectionState::new("openai", "k1");
        assert!(admits(
            &state.health,
            &state.lockouts,
            &locked(T0 + 60_000),
            T0
        ));
        state.apply(T0, &locked(T0 + 60_000));
        assert!(
            !admits(&state.health, &state.lockouts, &locked(T0 + 1_000), T0),
            "shorter: refused"
        );
        assert!(
            admits(&state.health, &state.lockouts, &locked(T0 + 120_000), T0),
            "longer: taken"
        );
    }

    #[test]
    fn s9_a_peer_never_shortens_a_longer_local_cooldown() {
        let mut state = ConnectionState::new("openai", "k1");
        state.apply(T0, &cooldown(T0 + 30_000));
        assert!(!admits(
            &state.health,
            &state.lockouts,
            &cooldown(T0 + 3_000),
            T0
        ));
        assert!(admits(
            &state.health,
            &state.lockouts,
            &cooldown(T0 + 60_000),
            T0
        ));
        assert!(admits(
            &state.health,
            &state.lockouts,
            &cleared(ActionBy::Admin),
            T0
        ));
        assert!(!admits(
            &state.health,
            &state.lockouts,
            &reading(UsageSource::Lease),
            T0
        ));
    }
}
