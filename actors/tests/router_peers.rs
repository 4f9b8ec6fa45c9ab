//! Behaviour §9 through the actors: a peer's events are applied by their connections' actors
//! through the same reducers as local ones, journaled as `peer_applied`, and the journal's fold
//! (and a restart from it) equals the live actors — even though the journal interleaves the
//! connections' events in another order than the stream had them.

#[expect(
    dead_code,
    reason = "the shared support: this file calls only part of it"
)]
mod support;

use quotaroute_actors::policy::peer_progress::Arrival;
use quotaroute_actors::recover_state;
use quotaroute_journal::{
    Event, Journal, LockReason, MemoryJournal, ModelLocked, PeerApplied, ResetSource,
    UsageObserved, UsageSource,
};
use support::*;

fn locked(connection: &str, model: &str, until_ms: u64) -> Event {
    Event::ModelLocked(ModelLocked {
        provider: "p".into(),
        connection: connection.into(),
        model: model.into(),
        reason: LockReason::RateLimited,
        status: Some(429),
        error_code: None,
        until_ms,
        failure_count: 1,
        source: ResetSource::Upstream,
    })
}

fn reading(connection: &str, window: &str) -> Event {
    Event::UsageObserved(UsageObserved {
        provider: "p".into(),
        connection: connection.into(),
        window: window.into(),
        used: 99,
        limit: 100,
        resets_at_ms: Some(T0 + 60_000),
        source: UsageSource::Header,
    })
}

fn peer(origin: &str, seq: u64, event: Event) -> PeerApplied {
    PeerApplied {
        origin_node: origin.into(),
        origin_seq: seq,
        origin_at_ms: T0,
        stream_id: format!("{T0}-{seq}"),
        event: Box::new(event),
    }
}

#[tokio::test]
async fn s9_peers_events_replay_equal_live_across_interleaved_connections() {
    let journal = MemoryJournal::new();
    let clock = quotaroute_actors::ManualClock::new(T0);
    let router = start(pool_211(), journal.clone(), clock.clone()).await;
    // Stream order: node-b about k1, k2, k1, k3, k2 — each connection's actor gets its own.
    router
        .apply_peer(peer("node-b", 10, locked("k1", "m", T0 + 60_000)))
        .unwrap();
    router
        .apply_peer(peer("node-b", 11, reading("k2", "requests:m")))
        .unwrap();
    router
        .apply_peer(peer("node-b", 12, locked("k1", "other", T0 + 30_000)))
        .unwrap();
    router
        .apply_peer(peer("node-b", 13, locked("k3", "m", T0 + 5_000)))
        .unwrap();
    router
        .apply_peer(peer("node-b", 14, locked("k2", "m", T0 + 90_000)))
        .unwrap();
    // A shorter lock from a peer never shortens the longer one k1 has.
    router
        .apply_peer(peer("node-c", 3, locked("k1", "m", T0 + 1_000)))
        .unwrap();
    // A connection this node does not have is refused.
    assert!(router
        .apply_peer(peer("node-b", 15, locked("k9", "m", T0)))
        .is_err());
    router.settle().await.unwrap();

    let folded = router.folded_state().await.unwrap();
    for id in ["k1", "k2", "k3"] {
        let live = router.live_connection_state(id).await.unwrap();
        assert_eq!(
            folded.connections.get(id),
            Some(&live),
            "{id}: fold == live"
        );
    }
    let state = router.state().await.unwrap();
    let locks: Vec<(String, String, u64)> = state
        .lockouts()
        .iter()
        .map(|l| (l.connection.clone(), l.model.clone(), l.remaining_ms))
        .collect();
    assert_eq!(
        locks,
        [
            ("k1".to_owned(), "m".to_owned(), 60_000),
            ("k1".to_owned(), "other".to_owned(), 30_000),
            ("k2".to_owned(), "m".to_owned(), 90_000),
            ("k3".to_owned(), "m".to_owned(), 5_000),
        ]
    );

    // A restart rebuilds the same, and knows where each (origin, connection) stopped.
    router.flush().await.unwrap();
    let (recovered, _) = recover_state(&journal.after_crash());
    assert_eq!(recovered.connections, folded.connections);
    let arrival = |lane, seq, stream_id| Arrival {
        origin: "node-b",
        lane,
        origin_seq: seq,
        stream_id,
        fresh: true,
    };
    let (at_12, at_13, at_14) = (format!("{T0}-12"), format!("{T0}-13"), format!("{T0}-14"));
    assert!(!recovered.peers.is_new(&arrival("k1", 12, &at_12)));
    assert!(recovered.peers.is_new(&arrival("k1", 13, &at_13)));
    assert!(!recovered.peers.is_new(&arrival("k2", 14, &at_14)));
    assert_eq!(
        recovered.peers.resume_from().as_deref(),
        Some(format!("{T0}-3").as_str())
    );
    let stored = journal.after_crash();
    let kinds: Vec<&str> = Journal::read_from(&stored, 0)
        .flatten()
        .map(|e| e.event.kind())
        .filter(|k| *k == "peer_applied")
        .collect();
    assert_eq!(
        kinds.len(),
        6,
        "every applied peer event is journaled with its origin"
    );
}
