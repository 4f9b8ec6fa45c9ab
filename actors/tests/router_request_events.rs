//! `journal.request_events = "failures"` through the actors: routine successes update the
//! fold but not the journal; failures, the decisions that explain them and successes that
//! change learned state are journaled; a graceful stop snapshots the fold, so a restart after
//! it has every count.

#![expect(
    clippy::expect_used,
    reason = "test code: a failed step fails the test loudly"
)]

#[expect(
    dead_code,
    reason = "the shared support: this file calls only part of it"
)]
mod support;

use std::sync::Arc;

use quotaroute_actors::{AttemptResult, ManualClock, RequestEvents, Router};
use quotaroute_journal::{Event, Journal, MemoryJournal};
use support::*;

fn journaled(journal: &MemoryJournal) -> Vec<Event> {
    journal
        .read_from(0)
        .map(|envelope| envelope.expect("readable").event)
        .collect()
}

fn count(events: &[Event], kind: &str) -> usize {
    events.iter().filter(|e| e.kind() == kind).count()
}

/// A router on `journal` with `request_events = "failures"`.
async fn failures_router(journal: &MemoryJournal, clock: &Arc<ManualClock>) -> Router {
    start_journaling(
        pool_211(),
        journal.clone(),
        clock.clone(),
        RequestEvents::Failures,
    )
    .await
}

fn success() -> AttemptResult {
    AttemptResult::success(200, 10, 20)
}

#[tokio::test]
async fn failures_mode_journals_failures_and_state_changes_but_not_routine_successes() {
    let journal = MemoryJournal::new();
    let clock = ManualClock::new(T0);
    let router = failures_router(&journal, &clock).await;
    for _ in 0..12 {
        serve(&router, success()).await;
    }
    let locked = serve(&router, rate_limited()).await;
    router.settle().await.unwrap();
    // While `locked` is locked, every decision passes over it: those decisions explain why.
    for _ in 0..4 {
        serve(&router, success()).await;
    }
    router.settle().await.unwrap();
    router.flush().await.unwrap();
    let events = journaled(&journal);
    assert_eq!(count(&events, "request_succeeded"), 0, "{events:?}");
    assert_eq!(count(&events, "request_failed"), 1);
    assert_eq!(count(&events, "model_locked"), 1);
    assert_eq!(
        count(&events, "route_decided"),
        4,
        "only the decisions that skipped `locked`"
    );

    // The lock runs out; the first success on `locked` relaxes its history and is journaled.
    clock.advance(61_000);
    let mut served_by_locked = 0;
    for _ in 0..8 {
        if serve(&router, success()).await == locked {
            served_by_locked += 1;
        }
    }
    router.settle().await.unwrap();
    router.flush().await.unwrap();
    assert!(
        served_by_locked > 0,
        "the weights give `locked` a turn within 8"
    );
    let events = journaled(&journal);
    let successes: Vec<&Event> = events
        .iter()
        .filter(|e| e.kind() == "request_succeeded")
        .collect();
    assert_eq!(successes.len(), 1, "{successes:?}");
    assert_eq!(successes[0].connection(), Some(locked.as_str()));

    // The fold counted all 25 successes; a graceful stop keeps them in a snapshot.
    let live = router.folded_state().await.unwrap();
    router.shutdown("test").await.unwrap();
    let restarted = failures_router(&journal.after_crash(), &clock).await;
    let recovered = restarted.folded_state().await.unwrap();
    assert_eq!(recovered.connections, live.connections);
    assert_eq!(recovered.breakers, live.breakers);
}

#[tokio::test]
async fn failures_mode_keeps_every_lockout_across_a_crash() {
    let journal = MemoryJournal::new();
    let clock = ManualClock::new(T0);
    let router = failures_router(&journal, &clock).await;
    for _ in 0..5 {
        serve(&router, success()).await;
    }
    serve(&router, rate_limited()).await;
    router.settle().await.unwrap();
    router.flush().await.unwrap();
    let before = router.state().await.unwrap();

    // No graceful stop: the routine counts since the last snapshot are gone, the lock is not.
    let restarted = failures_router(&journal.after_crash(), &clock).await;
    let after = restarted.state().await.unwrap();
    assert_eq!(after.lockouts(), before.lockouts());
    assert_eq!(after.lockouts().len(), 1);
}

/// Journal schema 3 through the actors: every request event names the client of its
/// `RouteRequest`, and a success carries the price the node reported with it.
#[tokio::test]
async fn request_events_name_the_requests_client_and_carry_its_price() {
    use quotaroute_actors::ClientTag;
    let journal = MemoryJournal::new();
    let clock = ManualClock::new(T0);
    let router = start_journaling(
        pool_211(),
        journal.clone(),
        clock.clone(),
        RequestEvents::All,
    )
    .await;
    let tag = |id: &str| ClientTag {
        id: Arc::from(id),
        weight: 1,
        class: Default::default(),
    };
    for (request_id, client, result) in [
        (
            "r-x",
            "team-x",
            AttemptResult {
                cost_usd: Some(0.25),
                ..success()
            },
        ),
        ("r-y", "team-y", rate_limited()),
    ] {
        let mut decision = router
            .route(quotaroute_actors::RouteRequest {
                request_id: request_id.into(),
                client: tag(client),
                ..request("team")
            })
            .await
            .expect("routes");
        assert_eq!(decision.client(), client);
        decision.report(result);
    }
    router.settle().await.unwrap();
    router.flush().await.unwrap();
    let events = journaled(&journal);
    let named: Vec<(&str, Option<&str>)> = events
        .iter()
        .filter(|e| e.is_request_event())
        .map(|e| (e.kind(), e.client()))
        .collect();
    assert_eq!(
        named,
        [
            ("route_decided", Some("team-x")),
            ("request_succeeded", Some("team-x")),
            ("route_decided", Some("team-y")),
            ("request_failed", Some("team-y")),
        ]
    );
    let cost = events.iter().find_map(|e| match e {
        Event::RequestSucceeded(e) => Some(e.cost_usd),
        _ => None,
    });
    assert_eq!(cost, Some(Some(0.25)));
}
