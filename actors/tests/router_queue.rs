//! Behaviour §11 on the actors, on tokio's paused clock: with `queue_ms` > 0 a request that finds
//! every target at cap waits for a permit, permits go by the clients' weights, a waiter still
//! there at `queue_ms` gets `PoolBusy`, one whose caller went away leaves at once; with
//! `queue_ms` = 0 nothing changes (fail-open).

#![expect(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a failed step fails the test loudly"
)]

#[expect(
    dead_code,
    reason = "the shared support: this file calls only part of it"
)]
mod support;

use std::sync::Arc;
use std::time::Duration;

use quotaroute_actors::{
    ClientTag, Decision, RequestEvents, RouteError, RouteRequest, Router, RouterOptions,
    TokioClock, Topology,
};
use quotaroute_journal::{MemoryJournal, WriterConfig};
use support::*;

/// Two keys with `max_concurrent` = `cap` in combo `team`, queueing `queue_ms`.
fn pool(cap: u32, keys: &[&str], queue_ms: u64) -> Topology {
    let mut connections: Vec<_> = keys.iter().map(|k| connection(k, "p", 1)).collect();
    for c in &mut connections {
        c.max_concurrent = Some(cap);
    }
    let targets: Vec<(&str, &str, u32)> = keys.iter().map(|k| (*k, "m", 1)).collect();
    let mut team = combo("team", &targets);
    team.queue_ms = queue_ms;
    topology(vec![provider("p")], connections, vec![team])
}

async fn start_paused(topology: Topology) -> Router {
    Router::start(
        topology,
        Box::new(MemoryJournal::new()),
        RouterOptions {
            writer: WriterConfig::default(),
            snapshot_every_events: 0,
            request_events: RequestEvents::All,
            clock: Arc::new(TokioClock::starting_at(T0)),
        },
    )
    .await
    .expect("router starts")
}

fn from(client: &str, weight: u32, n: usize) -> RouteRequest {
    RouteRequest {
        request_id: format!("{client}-{n}").into(),
        client: ClientTag {
            id: Arc::from(client),
            weight,
            class: Default::default(),
        },
        ..request("team")
    }
}

async fn in_flight(router: &Router) -> u32 {
    let state = router.state().await.unwrap();
    state.connections.iter().map(|c| c.in_flight).sum()
}

/// Lets every runnable task (and the actors) run; time moves only by what the test sleeps.
async fn settle() {
    tokio::time::sleep(Duration::from_millis(1)).await;
}

#[tokio::test(start_paused = true)]
async fn s11_queue_ms_0_fails_open_as_before() {
    let router = start_paused(pool(1, &["k1", "k2"], 0)).await;
    let mut held = Vec::new();
    for n in 0..3 {
        held.push(
            router
                .route(from("a", 1, n))
                .await
                .expect("fail-open routes"),
        );
    }
    assert_eq!(
        in_flight(&router).await,
        3,
        "the third runs over the soft cap"
    );
    assert!(router.queued().await.is_empty());
}

#[tokio::test(start_paused = true)]
async fn s11_a_waiter_is_granted_the_released_permit() {
    let router = start_paused(pool(1, &["k1", "k2"], 10_000)).await;
    let first = router.route(from("a", 1, 0)).await.unwrap();
    let _second = router.route(from("a", 1, 1)).await.unwrap();
    let released_on = first.current().unwrap().connection.to_string();
    let waiting = tokio::spawn({
        let router = router.clone();
        async move { router.route(from("a", 1, 2)).await }
    });
    settle().await;
    assert!(!waiting.is_finished(), "every target at cap: it waits");
    assert_eq!(in_flight(&router).await, 2, "never over cap");
    let queued = router.queued().await;
    assert_eq!(queued.len(), 1);
    assert_eq!((queued[0].client.as_str(), queued[0].queued), ("a", 1));

    let started = tokio::time::Instant::now();
    drop(first);
    let granted = waiting.await.unwrap().expect("granted");
    assert!(
        started.elapsed() < Duration::from_millis(50),
        "granted on the release"
    );
    assert_eq!(
        granted.current().unwrap().connection.to_string(),
        released_on
    );
    assert!(granted.queue_wait_ms() > 0);
    assert_eq!(in_flight(&router).await, 2);
    assert!(router.queued().await.is_empty());
}

#[tokio::test(start_paused = true)]
async fn s11_a_waiter_still_there_at_queue_ms_gets_pool_busy() {
    let router = start_paused(pool(1, &["k1"], 2_000)).await;
    let _held = router.route(from("a", 1, 0)).await.unwrap();
    let started = tokio::time::Instant::now();
    let answer = router.route(from("a", 1, 1)).await;
    let waited = started.elapsed();
    match answer {
        Err(RouteError::PoolBusy {
            waited_ms,
            retry_after_ms,
        }) => {
            assert!(waited_ms >= 2_000, "{waited_ms}");
            assert!(retry_after_ms > 0);
        }
        other => panic!("expected PoolBusy, got {other:?}"),
    }
    assert!(waited >= Duration::from_millis(2_000));
    assert!(
        waited < Duration::from_millis(2_100),
        "answered by queue_ms: {waited:?}"
    );
    assert!(router.queued().await.is_empty());
    assert_eq!(in_flight(&router).await, 1);
}

#[tokio::test(start_paused = true)]
async fn s11_a_waiter_whose_caller_went_away_leaves_at_once_and_gets_no_permit() {
    let router = start_paused(pool(1, &["k1"], 60_000)).await;
    let held = router.route(from("a", 1, 0)).await.unwrap();
    let gone = tokio::spawn({
        let router = router.clone();
        async move { router.route(from("gone", 1, 1)).await }
    });
    settle().await;
    assert_eq!(router.queued().await.len(), 1);
    gone.abort();
    settle().await;
    assert!(router.queued().await.is_empty(), "left the queue at once");

    let later = tokio::spawn({
        let router = router.clone();
        async move { router.route(from("b", 1, 2)).await }
    });
    settle().await;
    drop(held);
    let granted = later
        .await
        .unwrap()
        .expect("the later request gets the slot");
    assert_eq!(
        in_flight(&router).await,
        1,
        "no permit went to the dead waiter"
    );
    drop(granted);
    settle().await;
    assert_eq!(in_flight(&router).await, 0);
}

#[tokio::test(start_paused = true)]
async fn s11_grants_follow_the_clients_weights_while_both_wait() {
    let router = start_paused(pool(1, &["k1"], 600_000)).await;
    let holder = router.route(from("init", 1, 0)).await.unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(String, Decision)>();
    for n in 0..12 {
        for (client, weight) in [("heavy", 2), ("light", 1)] {
            let (router, tx) = (router.clone(), tx.clone());
            tokio::spawn(async move {
                let decision = router.route(from(client, weight, n)).await.unwrap();
                let _ = tx.send((client.to_string(), decision));
            });
        }
        settle().await;
    }
    assert_eq!(in_flight(&router).await, 1);
    drop(holder);
    let mut order = String::new();
    let (mut heavy, mut light) = (0i64, 0i64);
    for _ in 0..24 {
        let (client, decision) = rx.recv().await.unwrap();
        assert_eq!(in_flight(&router).await, 1, "one permit at a time");
        if client == "heavy" {
            heavy += 1;
            order.push('H');
        } else {
            light += 1;
            order.push('L');
        }
        // While both wait (heavy has 12, light 12: until one runs out), within one of 2:1.
        if heavy < 12 && light < 12 {
            let n = heavy + light;
            assert!((heavy * 3 - n * 2).abs() < 3, "{order}");
        }
        drop(decision);
    }
    assert!(order.starts_with("HLHHLHHLH"), "{order}");
}

#[tokio::test(start_paused = true)]
async fn s11_a_light_client_is_not_kept_behind_a_heavy_backlog() {
    let router = start_paused(pool(1, &["k1"], 600_000)).await;
    let holder = router.route(from("init", 1, 0)).await.unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(String, Decision)>();
    for n in 0..40 {
        let (router, tx) = (router.clone(), tx.clone());
        tokio::spawn(async move {
            let decision = router.route(from("heavy", 1, n)).await.unwrap();
            let _ = tx.send(("heavy".to_string(), decision));
        });
    }
    settle().await;
    let (router2, tx2) = (router.clone(), tx.clone());
    tokio::spawn(async move {
        let decision = router2.route(from("light", 1, 0)).await.unwrap();
        let _ = tx2.send(("light".to_string(), decision));
    });
    settle().await;
    drop(holder);
    for grant in 1..=3 {
        let (client, decision) = rx.recv().await.unwrap();
        if client == "light" {
            assert!(grant <= 2, "light granted {grant}th behind a backlog of 40");
            return;
        }
        drop(decision);
    }
    panic!("the light client waited behind the heavy backlog");
}

/// #34: a continuation (`only_connection`, a `previous_response_id` or a stored-response call)
/// used to skip the queue and run over its connection's cap. It now waits its turn like any
/// request and is granted on its own connection when a slot there frees.
#[tokio::test(start_paused = true)]
async fn s11_a_continuation_waits_in_the_fair_queue_and_keeps_the_cap() {
    let router = start_paused(pool(1, &["k1", "k2"], 10_000)).await;
    let first = router.route(from("a", 1, 0)).await.unwrap();
    let second = router.route(from("a", 1, 1)).await.unwrap();
    let (on_k1, other) = if &*first.current().unwrap().connection == "k1" {
        (first, second)
    } else {
        (second, first)
    };
    let continuation = |n| RouteRequest {
        only_connection: Some("k1".into()),
        ..from("b", 1, n)
    };
    let waiting = tokio::spawn({
        let router = router.clone();
        async move { router.route(continuation(2)).await }
    });
    settle().await;
    assert!(!waiting.is_finished(), "k1 at cap: the continuation waits");
    assert_eq!(in_flight(&router).await, 2, "never over the cap");
    let queued = router.queued().await;
    assert_eq!((queued[0].client.as_str(), queued[0].queued), ("b", 1));
    // A slot on another connection is no room for it.
    drop(other);
    settle().await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!waiting.is_finished(), "its connection is still at cap");
    drop(on_k1);
    let granted = waiting.await.unwrap().expect("granted on k1");
    assert_eq!(&*granted.current().unwrap().connection, "k1");
    assert!(granted.queue_wait_ms() > 0);
}

#[tokio::test(start_paused = true)]
async fn s11_a_continuation_still_waiting_at_queue_ms_gets_pool_busy() {
    let router = start_paused(pool(1, &["k1", "k2"], 1_000)).await;
    let mut held = Vec::new();
    for n in 0..2 {
        held.push(router.route(from("a", 1, n)).await.unwrap());
    }
    let answer = router
        .route(RouteRequest {
            only_connection: Some("k2".into()),
            ..from("b", 1, 9)
        })
        .await;
    assert!(
        matches!(answer, Err(RouteError::PoolBusy { waited_ms, .. }) if waited_ms >= 1_000),
        "{answer:?}"
    );
    assert_eq!(in_flight(&router).await, 2);
}
