//! Several nodes (behaviour §9): which of a node's own events its peers learn from, and whether
//! a peer's event changes what this node knows about a connection.
//!
//! Pure: both halves are decided from the event and the local state alone, so the live actor
//! and the journal's fold (replay) reach the same answer. It must not read Redis or the clock;
//! breakers, in-flight counts and DRR deficits are never shared (each node's own traffic).
//! Conversation bindings (behaviour §10 "Memory") are shared too, merged by
//! [`merge_peer_binding`]: the later binding wins, so nodes that bound one group at once
//! converge on the same target.

use std::sync::Arc;

use quotaroute_journal::{ActionBy, AffinityBound, Event, UsageSource};

use crate::affinity_bindings::AffinityBindings;
use crate::cooldown::ConnectionHealth;
use crate::exec_key::exec_key;
use crate::lockout::{replaces_block, ModelLockouts};

/// Whether a node's own journaled `event` is published to its peers: every state change about
/// a connection — cooldown, disable, a lock, an upstream or pushed usage reading, and what an
/// operator cleared. Not shared: request events (usage is shared through leases), clears and
/// unlocks by a reload or an eviction (each node's own config and memory bound), the node's
/// own lease readings, and anything already learned from a peer (no echo). A conversation's
/// binding (`affinity_bound`, new or moved) is shared so its next turn on a peer goes there.
pub fn is_shared(event: &Event) -> bool {
    match event {
        Event::ConnectionCooldown(_)
        | Event::ConnectionDisabled(_)
        | Event::ModelLocked(_)
        | Event::AffinityBound(_) => true,
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

/// Whether a peer's binding of a group, made at `peer_at_ms` to `peer_key`, replaces the
/// binding this node holds (`local`: its `bound_at_ms` and target key). The later binding wins;
/// at the same millisecond the greater target key does. Every node compares the same pairs,
/// so two nodes that bound one group in the window before either heard of the other (each
/// by its own DRR) both end on one target. Later rather than earlier: the later turn sent the
/// longer history, so its target holds the longer cached prefix.
pub fn peer_binding_wins(local: Option<(u64, &str)>, peer_at_ms: u64, peer_key: &str) -> bool {
    match local {
        None => true,
        Some(local) => (peer_at_ms, peer_key) > local,
    }
}

/// Applies a peer's `bound`, seen by it at `origin_at_ms`, to this node's `bindings` of the
/// same combo at `now_ms`; returns whether it did (only then is it journaled, as
/// `peer_applied`, and replay folds it like a local binding). Ignored: a binding to a target
/// this node does not have (`has_target`), one idle past `ttl_ms` already, or one older than
/// the local binding ([`peer_binding_wins`]). `limits` (`max_groups`, `ttl_ms`) bound it like
/// a local binding.
pub fn merge_peer_binding(
    bindings: &mut AffinityBindings,
    now_ms: u64,
    origin_at_ms: u64,
    bound: &AffinityBound,
    has_target: bool,
    limits: (usize, u64),
) -> bool {
    let (_, ttl_ms) = limits;
    if !has_target || now_ms.saturating_sub(origin_at_ms) > ttl_ms {
        return false;
    }
    let peer_key = exec_key(&bound.connection, &bound.model);
    let local = bindings
        .get(bound.group, now_ms, ttl_ms)
        .map(|b| (b.bound_at_ms, &*b.exec_key));
    if !peer_binding_wins(local, origin_at_ms, &peer_key) {
        return false;
    }
    bindings.bind(
        bound.group,
        Arc::from(bound.client.as_str()),
        Arc::from(peer_key),
        origin_at_ms,
        limits,
    );
    true
}

#[cfg(test)]
mod tests {
    use quotaroute_journal::{
        ConnectionCleared, ConnectionCooldown, LockReason, ModelLocked, OutcomeClass, ResetSource,
        UsageObserved,
    };

    use super::*;
    use crate::connection_state::ConnectionState;

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
        assert!(is_shared(&Event::AffinityBound(bound(1, "k1", None))));
    }

    fn bound(group: u64, connection: &str, moved_from: Option<&str>) -> AffinityBound {
        AffinityBound {
            request_id: "r".into(),
            combo: "pool".into(),
            group,
            client: "default".into(),
            provider: "openai".into(),
            connection: connection.into(),
            model: "m".into(),
            moved_from: moved_from.map(str::to_owned),
            reason: moved_from.map(|_| "rate_limited".to_owned()),
        }
    }

    const LIMITS: (usize, u64) = (1_000, 300_000);

    fn target(bindings: &AffinityBindings, group: u64, now_ms: u64) -> Option<String> {
        bindings
            .get(group, now_ms, LIMITS.1)
            .map(|b| b.exec_key.to_string())
    }

    #[test]
    fn s10_a_peer_binding_is_learned_and_a_later_move_replaces_it() {
        let mut b = AffinityBindings::default();
        assert!(merge_peer_binding(
            &mut b,
            T0 + 2,
            T0,
            &bound(1, "k1", None),
            true,
            LIMITS
        ));
        assert_eq!(target(&b, 1, T0 + 2).as_deref(), Some("k1/m"));
        assert_eq!(b.get(1, T0 + 2, LIMITS.1).unwrap().bound_at_ms, T0);
        let moved = bound(1, "k2", Some("k1/m"));
        assert!(merge_peer_binding(
            &mut b,
            T0 + 60,
            T0 + 50,
            &moved,
            true,
            LIMITS
        ));
        assert_eq!(target(&b, 1, T0 + 60).as_deref(), Some("k2/m"));
        // The same entry read twice, or an older one arriving late, changes nothing.
        assert!(!merge_peer_binding(
            &mut b,
            T0 + 70,
            T0 + 50,
            &moved,
            true,
            LIMITS
        ));
        assert!(!merge_peer_binding(
            &mut b,
            T0 + 70,
            T0,
            &bound(1, "k1", None),
            true,
            LIMITS
        ));
        assert_eq!(target(&b, 1, T0 + 70).as_deref(), Some("k2/m"));
    }

    #[test]
    fn s10_a_peer_binding_to_an_unknown_target_or_already_expired_is_ignored() {
        let mut b = AffinityBindings::default();
        assert!(!merge_peer_binding(
            &mut b,
            T0,
            T0,
            &bound(1, "k9", None),
            false,
            LIMITS
        ));
        let late = T0 + LIMITS.1 + 1;
        assert!(!merge_peer_binding(
            &mut b,
            late,
            T0,
            &bound(1, "k1", None),
            true,
            LIMITS
        ));
        assert!(b.is_empty());
    }

    #[test]
    fn s10_peer_bindings_respect_max_groups() {
        let mut b = AffinityBindings::default();
        for group in 0..5 {
            let at = T0 + group;
            assert!(merge_peer_binding(
                &mut b,
                at,
                at,
                &bound(group, "k1", None),
                true,
                (3, 300_000)
            ));
        }
        assert_eq!(b.len(), 3);
        assert!(
            b.get(0, T0 + 5, 300_000).is_none(),
            "least recently used dropped"
        );
    }

    /// Both nodes bound group 1 in the window (A to k1 at T0, B to k2 at T0 + 3), each then
    /// learns the other's: both end on B's, the later one. At the same millisecond the greater
    /// target key wins, on both.
    #[test]
    fn s10_two_nodes_that_bound_one_group_at_once_converge() {
        for (a_at, b_at, expect) in [(T0, T0 + 3, "k2/m"), (T0 + 3, T0, "k1/m"), (T0, T0, "k2/m")] {
            let mut a = AffinityBindings::default();
            let mut b = AffinityBindings::default();
            a.bind(1, "default".into(), "k1/m".into(), a_at, LIMITS);
            b.bind(1, "default".into(), "k2/m".into(), b_at, LIMITS);
            let now = T0 + 10;
            merge_peer_binding(&mut a, now, b_at, &bound(1, "k2", None), true, LIMITS);
            merge_peer_binding(&mut b, now, a_at, &bound(1, "k1", None), true, LIMITS);
            assert_eq!(target(&a, 1, now).as_deref(), Some(expect));
            assert_eq!(target(&b, 1, now).as_deref(), Some(expect));
        }
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
