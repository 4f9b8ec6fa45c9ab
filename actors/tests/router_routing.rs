//! The router end to end through its actors: selection, lockouts, breaker, §7, admin.
//! Time is a `ManualClock`; `settle()` waits for fire-and-forget reports to land.

// Integration tests (and the proptest bodies clippy does not see as tests) may unwrap.
#![expect(
    clippy::unwrap_used,
    reason = "test code: a failed step fails the test loudly"
)]

#[expect(
    dead_code,
    reason = "the shared support: this file calls only part of it"
)]
mod support;

use std::collections::BTreeMap;

use quotaroute_actors::{AttemptResult, Clock, ManualClock, RouteError};
use quotaroute_journal::{BlockReason, MemoryJournal, OutcomeClass};
use support::*;

#[tokio::test]
async fn s2_drr_spreads_decisions_2_1_1() {
    let clock = ManualClock::new(T0);
    let router = start(pool_211(), MemoryJournal::new(), clock.clone()).await;
    let mut served: BTreeMap<String, u32> = BTreeMap::new();
    for _ in 0..400 {
        let mut decision = router.route(request("team")).await.unwrap();
        let target = decision.current().unwrap().connection.to_string();
        *served.entry(target).or_default() += 1;
        decision.report(AttemptResult::success(200, 10, 5));
    }
    assert_eq!(served["k1"], 200);
    assert_eq!(served["k2"], 100);
    assert_eq!(served["k3"], 100);
}

#[tokio::test]
async fn s2_step5_in_flight_counts_live_requests_and_released_on_drop() {
    let clock = ManualClock::new(T0);
    let router = start(pool_211(), MemoryJournal::new(), clock.clone()).await;
    let held: Vec<_> = futures_collect(&router, 4).await;
    let state = router.state().await.unwrap();
    let total: u32 = state.connections.iter().map(|c| c.in_flight).sum();
    assert_eq!(total, 4);
    drop(held);
    let state = router.state().await.unwrap();
    assert!(state.connections.iter().all(|c| c.in_flight == 0));
}

async fn futures_collect(
    router: &quotaroute_actors::Router,
    n: usize,
) -> Vec<quotaroute_actors::Decision> {
    let mut held = Vec::new();
    for _ in 0..n {
        held.push(router.route(request("team")).await.unwrap());
    }
    held
}

#[tokio::test]
async fn s4_429_locks_only_that_model_on_that_connection() {
    let clock = ManualClock::new(T0);
    let topology = topology(
        vec![provider("p")],
        vec![connection("k1", "p", 1), connection("k2", "p", 1)],
        vec![
            combo("a", &[("k1", "m1", 1), ("k2", "m1", 1)]),
            combo("b", &[("k1", "m2", 1)]),
        ],
    );
    let router = start(topology, MemoryJournal::new(), clock.clone()).await;
    let mut decision = router.route(request("a")).await.unwrap();
    assert_eq!(&*decision.current().unwrap().connection, "k1");
    decision.report(
        AttemptResult::failure(OutcomeClass::RateLimited, Some(429))
            .with_reset_hint_ms(Some(30_000)),
    );
    router.settle().await.unwrap();

    for _ in 0..5 {
        let mut decision = router.route(request("a")).await.unwrap();
        assert_eq!(&*decision.current().unwrap().connection, "k2");
        assert!(decision
            .skipped()
            .iter()
            .any(|s| s.connection == "k1" && s.reason == BlockReason::RateLimited));
        decision.report(AttemptResult::success(200, 1, 1));
    }
    // The other model on the same key keeps serving.
    let decision = router.route(request("b")).await.unwrap();
    assert_eq!(&*decision.current().unwrap().connection, "k1");
    drop(decision);

    // The upstream's reset is used exactly: 30 s later k1 serves m1 again.
    clock.advance(30_000);
    let mut seen_k1 = false;
    for _ in 0..4 {
        let mut decision = router.route(request("a")).await.unwrap();
        seen_k1 |= &*decision.current().unwrap().connection == "k1";
        decision.report(AttemptResult::success(200, 1, 1));
    }
    assert!(seen_k1);
}

#[tokio::test]
async fn s7_all_targets_locked_is_429_with_retry_after_of_the_earliest_unblock() {
    let clock = ManualClock::new(T0);
    let router = start(pool_211(), MemoryJournal::new(), clock.clone()).await;
    for reset_ms in [20_000, 5_000, 9_000] {
        let mut decision = router.route(request("team")).await.unwrap();
        decision.report(
            AttemptResult::failure(OutcomeClass::RateLimited, Some(429))
                .with_reset_hint_ms(Some(reset_ms)),
        );
        router.settle().await.unwrap();
    }
    match router.route(request("team")).await {
        Err(RouteError::NoTarget(unroutable)) => {
            assert_eq!(unroutable.status, 429);
            assert_eq!(unroutable.retry_after_ms, Some(5_000));
            assert_eq!(unroutable.blocked.len(), 3);
            assert!(unroutable
                .blocked
                .iter()
                .all(|b| b.reason == BlockReason::RateLimited));
        }
        other => panic!("expected 429, got {other:?}"),
    }
}

#[tokio::test]
async fn s7_all_disabled_by_401_is_503_without_retry_after() {
    let clock = ManualClock::new(T0);
    let router = start(pool_211(), MemoryJournal::new(), clock.clone()).await;
    for _ in 0..3 {
        let mut decision = router.route(request("team")).await.unwrap();
        decision.report(AttemptResult::failure(OutcomeClass::AuthFailed, Some(401)));
        router.settle().await.unwrap();
    }
    match router.route(request("team")).await {
        Err(RouteError::NoTarget(unroutable)) => {
            assert_eq!(unroutable.status, 503);
            assert_eq!(unroutable.retry_after_ms, None);
            assert!(unroutable
                .blocked
                .iter()
                .all(|b| b.reason == BlockReason::DisabledAuth && b.remaining_ms.is_none()));
        }
        other => panic!("expected 503, got {other:?}"),
    }
    // An operator clears one: it serves again.
    assert!(router.clear_connection("k2").await.unwrap());
    router.settle().await.unwrap();
    let decision = router.route(request("team")).await.unwrap();
    assert_eq!(&*decision.current().unwrap().connection, "k2");
}

#[tokio::test]
async fn s5_breaker_opens_on_failures_from_three_connections_and_a_probe_closes_it() {
    let clock = ManualClock::new(T0);
    let mut topology = pool_211();
    for c in &mut topology.connections {
        c.cooldown.base_ms = 1; // keep cooldowns out of the way of this story
        c.cooldown.max_ms = 1;
    }
    let router = start(topology, MemoryJournal::new(), clock.clone()).await;
    // Four rounds, 5 s apart (past dedup_ms): each key fails once per round → 12 counted.
    for _ in 0..4 {
        clock.advance(5_001);
        for _ in 0..3 {
            let mut decision = router.route(request("team")).await.unwrap();
            decision.report(AttemptResult::failure(OutcomeClass::ServerError, Some(503)));
        }
        router.settle().await.unwrap();
    }
    let state = router.state().await.unwrap();
    assert_eq!(state.providers[0].breaker, "OPEN");
    match router.route(request("team")).await {
        Err(RouteError::NoTarget(unroutable)) => {
            assert_eq!(unroutable.status, 503);
            assert_eq!(unroutable.retry_after_ms, Some(30_000));
            assert!(unroutable
                .blocked
                .iter()
                .all(|b| b.reason == BlockReason::BreakerOpen));
        }
        other => panic!("expected 503 breaker_open, got {other:?}"),
    }
    // Reset time passes: HALF_OPEN admits one probe; a second request finds the token taken.
    clock.advance(30_000);
    let mut probe = router.route(request("team")).await.unwrap();
    assert!(probe.is_probe());
    match router.route(request("team")).await {
        Err(RouteError::NoTarget(unroutable)) => {
            assert!(unroutable
                .blocked
                .iter()
                .all(|b| b.reason == BlockReason::ProbeInFlight));
        }
        other => panic!("expected probe_in_flight, got {other:?}"),
    }
    probe.report(AttemptResult::success(200, 1, 1));
    router.settle().await.unwrap();
    assert_eq!(router.state().await.unwrap().providers[0].breaker, "CLOSED");
    assert!(router.route(request("team")).await.is_ok());
}

#[tokio::test]
async fn s3_failover_rechecks_blocks_and_takes_each_target_once() {
    let clock = ManualClock::new(T0);
    let router = start(pool_211(), MemoryJournal::new(), clock.clone()).await;
    let mut decision = router.route(request("team")).await.unwrap();
    let mut tried = vec![decision.current().unwrap().connection.to_string()];
    decision.report(AttemptResult::failure(OutcomeClass::ServerError, Some(500)));
    while let Some(next) = decision.failover().await.unwrap() {
        tried.push(next.connection.to_string());
        decision.report(AttemptResult::failure(OutcomeClass::ServerError, Some(500)));
    }
    tried.sort();
    assert_eq!(tried, vec!["k1", "k2", "k3"]);
    assert_eq!(decision.attempt(), 3);
}

#[tokio::test]
async fn implicit_provider_model_combo_and_unknown_models() {
    let clock = ManualClock::new(T0);
    let router = start(pool_211(), MemoryJournal::new(), clock.clone()).await;
    let decision = router.route(request("p/some-model")).await.unwrap();
    assert_eq!(&*decision.current().unwrap().model, "some-model");
    drop(decision);
    assert!(matches!(
        router.route(request("nope")).await,
        Err(RouteError::UnknownModel(_))
    ));
    assert!(matches!(
        router.route(request("other/model")).await,
        Err(RouteError::UnknownModel(_))
    ));
}

#[tokio::test]
async fn admin_clear_lockout_and_reset_breaker() {
    let clock = ManualClock::new(T0);
    let router = start(pool_211(), MemoryJournal::new(), clock.clone()).await;
    let mut decision = router.route(request("team")).await.unwrap();
    let locked = decision.current().unwrap().connection.to_string();
    decision.report(AttemptResult::failure(
        OutcomeClass::ModelUnavailable,
        Some(404),
    ));
    router.settle().await.unwrap();
    let lockouts = router.state().await.unwrap().lockouts();
    assert_eq!(lockouts.len(), 1);
    assert_eq!(lockouts[0].reason, "not_found");
    assert!(router.clear_lockout(&locked, "m").await.unwrap());
    assert!(!router.clear_lockout(&locked, "m").await.unwrap());
    assert!(router.state().await.unwrap().lockouts().is_empty());
    assert!(router.reset_breaker("p").await.is_ok());
    let folded = router.folded_state().await.unwrap();
    assert!(folded.last_seq > 0);
}

/// §5: a success counts against the breaker's failures even when it follows the same request's
/// failure at once (failover) — the breaker hint must not let it be skipped.
#[tokio::test]
async fn s5_failover_success_right_after_a_server_error_uncounts_it() {
    let clock = ManualClock::new(T0);
    let router = start(pool_211(), MemoryJournal::new(), clock.clone()).await;
    let settings = quotaroute_actors::policy::breaker::BreakerSettings::default();
    for round in 0..20 {
        let mut decision = router.route(request("team")).await.unwrap();
        decision.report(AttemptResult::failure(OutcomeClass::ServerError, Some(500)));
        assert!(decision.failover().await.unwrap().is_some());
        decision.report(AttemptResult::success(200, 1, 1));
        router.settle().await.unwrap();
        let breaker = router.live_breaker_state("p").await.unwrap();
        assert_eq!(
            breaker.failures_at(clock.now_ms(), &settings),
            0,
            "round {round}"
        );
        // Past the dedup window, so the next failure counts again.
        clock.advance(settings.dedup_ms);
    }
    // Successes on a quiet breaker still leave it CLOSED with nothing counted.
    for _ in 0..10 {
        let mut decision = router.route(request("team")).await.unwrap();
        decision.report(AttemptResult::success(200, 1, 1));
    }
    router.settle().await.unwrap();
    let folded = router.folded_state().await.unwrap();
    assert_eq!(
        folded.breaker("p"),
        router.live_breaker_state("p").await.unwrap()
    );
    assert_eq!(router.state().await.unwrap().providers[0].breaker, "CLOSED");
}

/// Behaviour §10 "Encrypted items": a request whose items one connection made goes there while
/// it can serve — every time, with no `max_lead` to move it and no group to bind — and when
/// that connection is locked, §2 picks among the rest (the node then leaves the items out).
#[tokio::test]
async fn s10_encrypted_items_go_to_their_maker_while_it_can_serve() {
    use quotaroute_journal::AffinityOutcome;
    let clock = ManualClock::new(T0);
    let router = start(pool_211(), MemoryJournal::new(), clock.clone()).await;
    let from_k3 = || quotaroute_actors::RouteRequest {
        encrypted_maker: Some("k3".to_string()),
        ..request("team")
    };
    for _ in 0..40 {
        let mut decision = router.route(from_k3()).await.unwrap();
        assert_eq!(&*decision.current().unwrap().connection, "k3");
        assert_eq!(decision.affinity(), AffinityOutcome::Held);
        decision.report(AttemptResult::success(200, 10, 5));
    }
    router.settle().await.unwrap();
    // Its DRR share was paid: plain requests now go to the others first.
    let mut decision = router.route(request("team")).await.unwrap();
    assert_ne!(&*decision.current().unwrap().connection, "k3");
    decision.report(AttemptResult::success(200, 10, 5));

    let mut decision = router.route(from_k3()).await.unwrap();
    decision.report(rate_limited());
    router.settle().await.unwrap();
    for _ in 0..4 {
        let mut decision = router.route(from_k3()).await.unwrap();
        assert_ne!(&*decision.current().unwrap().connection, "k3");
        assert_eq!(decision.affinity(), AffinityOutcome::Moved);
        assert!(decision.skipped().iter().any(|s| s.connection == "k3"));
        decision.report(AttemptResult::success(200, 10, 5));
    }
    // A maker that is no target of the combo: §2 alone, said as moved.
    let decision = router
        .route(quotaroute_actors::RouteRequest {
            encrypted_maker: Some("elsewhere".to_string()),
            ..request("team")
        })
        .await
        .unwrap();
    assert_eq!(decision.affinity(), AffinityOutcome::Moved);
}

/// The plan's Deliver step is where the node bills the client: `after_attempt`'s `delivered`
/// hook runs on a delivered answer, before its report (its price reaches the journal), and
/// never on an attempt that fails over.
#[tokio::test]
async fn s11_the_client_is_billed_only_where_the_plan_delivers() {
    use quotaroute_actors::policy::request::Step;
    let clock = ManualClock::new(T0);
    let router = start(pool_211(), MemoryJournal::new(), clock.clone()).await;

    let mut decision = router.route(request("team")).await.unwrap();
    let mut billed = false;
    let step = decision
        .after_attempt(
            AttemptResult::failure(OutcomeClass::ServerError, Some(500)),
            false,
            true,
            |_| billed = true,
        )
        .await;
    assert_eq!(step, Step::Failover);
    assert!(!billed, "a failed attempt costs the client nothing");

    let mut decision = router.route(request("team")).await.unwrap();
    let step = decision
        .after_attempt(AttemptResult::success(200, 10, 5), false, true, |result| {
            billed = true;
            result.cost_usd = Some(0.25);
        })
        .await;
    assert_eq!(step, Step::Deliver);
    assert!(billed, "a delivered answer is billed");
}
