//! `journal.request_events = "failures"` through the actors: routine successes update the
//! fold but not the journal; failures, the decisions that explain them and successes that
//! change learned state are journaled; a graceful stop snapshots the fold, so a restart after
//! it has every count.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

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
