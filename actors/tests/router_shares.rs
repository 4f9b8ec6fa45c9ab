//! Behaviour §11 "Bounded tables … give each client at most its share" on the live actors:
//! conversation groups are bounded per client and per node (`affinity.max_groups` across every
//! combo, not per combo), so one client's new groups never evict another's.

#![expect(
    clippy::unwrap_used,
    reason = "test code: a failed step fails the test loudly"
)]

#[expect(
    dead_code,
    reason = "the shared support: this file calls only part of it"
)]
mod support;

use std::sync::Arc;

use quotaroute_actors::{AffinityKey, ClientTag, ManualClock, RouteRequest, Router};
use quotaroute_journal::MemoryJournal;
use support::*;

fn two_combos(max_groups: usize, clients: usize) -> quotaroute_actors::Topology {
    let mut topology = topology(
        vec![provider("p")],
        vec![connection("k1", "p", 1), connection("k2", "p", 1)],
        vec![
            combo("team", &[("k1", "m", 1), ("k2", "m", 1)]),
            combo("other", &[("k1", "m", 1), ("k2", "m", 1)]),
        ],
    );
    topology.affinity.max_groups = max_groups;
    topology.clients = clients;
    topology
}

fn turn(combo: &str, client: &str, group: u64) -> RouteRequest {
    RouteRequest {
        request_id: format!("{client}-{combo}-{group}").into(),
        client: ClientTag {
            id: Arc::from(client),
            weight: 1,
            class: Default::default(),
        },
        affinity: Some(AffinityKey {
            group,
            client: Arc::from(client),
        }),
        ..request(combo)
    }
}

async fn groups_of(router: &Router, client: &str) -> Vec<(String, u64)> {
    let mut held = Vec::new();
    for (combo, bindings) in router.affinity_bindings().await.unwrap() {
        for (group, binding) in bindings.iter() {
            if &*binding.client == client {
                held.push((combo.clone(), group));
            }
        }
    }
    held.sort();
    held
}

#[tokio::test]
async fn s11_one_clients_new_groups_do_not_evict_anothers_and_max_groups_bounds_the_node() {
    let clock = ManualClock::new(T0);
    let journal = MemoryJournal::new();
    let router = start(two_combos(10, 2), journal.clone(), clock.clone()).await;
    for group in 1..=3 {
        drop(router.route(turn("team", "alice", group)).await.unwrap());
    }
    // Bob opens 100 conversations over both combos: more than the whole node keeps.
    for group in 100..200 {
        let combo = if group % 2 == 0 { "team" } else { "other" };
        clock.advance(1);
        drop(router.route(turn(combo, "bob", group)).await.unwrap());
    }
    let alice = groups_of(&router, "alice").await;
    assert_eq!(
        alice,
        vec![("team".into(), 1), ("team".into(), 2), ("team".into(), 3)],
        "alice's groups survive bob's flood"
    );
    let bob = groups_of(&router, "bob").await;
    assert_eq!(bob.len(), 5, "bob holds his share, 10 / 2 clients: {bob:?}");
    // His newest groups are the ones kept.
    assert!(bob.iter().all(|(_, group)| *group >= 190), "{bob:?}");
    let total: usize = router
        .affinity_bindings()
        .await
        .unwrap()
        .iter()
        .map(|(_, b)| b.len())
        .sum();
    assert!(total <= 10, "the node keeps at most max_groups: {total}");
    // Alice's held turn still goes where it was bound.
    let bound = router
        .affinity_bindings()
        .await
        .unwrap()
        .into_iter()
        .find(|(name, _)| name == "team")
        .unwrap()
        .1
        .get(1, T0 + 1_000, u64::MAX)
        .unwrap()
        .exec_key
        .clone();
    let decision = router.route(turn("team", "alice", 1)).await.unwrap();
    let target = decision.current().unwrap();
    assert_eq!(format!("{}/{}", target.connection, target.model), &*bound);

    // A restart replays every bind the journal holds (bob's 100) and keeps the same shares.
    router.settle().await.unwrap();
    router.flush().await.unwrap();
    let restarted = start(two_combos(10, 2), journal.after_crash(), clock.clone()).await;
    assert_eq!(groups_of(&restarted, "alice").await.len(), 3);
    let bob = groups_of(&restarted, "bob").await;
    assert_eq!(bob.len(), 5, "{bob:?}");
    assert!(bob.iter().all(|(_, group)| *group >= 190), "{bob:?}");
}
