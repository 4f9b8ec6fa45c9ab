//! Behaviour §8 through the actors: everything learned survives a restart, and the state rebuilt
//! from the journal equals the live actors' own state at the same `now`.

// Integration tests (and the proptest bodies clippy does not see as tests) may unwrap.
#![expect(
    clippy::unwrap_used,
    clippy::panic,
    reason = "test code: a failed step fails the test loudly"
)]

mod support;

use std::sync::Arc;
use std::time::Duration;

use proptest::prelude::*;
use quotaroute_actors::policy::router_state::RouterState;
use quotaroute_actors::{
    recover_state, AttemptResult, ManualClock, RouteError, Router, TokioClock,
};
use quotaroute_journal::{MemoryJournal, OutcomeClass};
use support::*;

/// One scripted step: how long passes, then which class the routed attempt reports.
#[derive(Debug, Clone)]
struct Step {
    advance_ms: u64,
    class: OutcomeClass,
    reset_hint_ms: Option<u64>,
}

fn class_strategy() -> impl Strategy<Value = OutcomeClass> {
    prop_oneof![
        6 => Just(OutcomeClass::Success),
        2 => Just(OutcomeClass::RateLimited),
        2 => Just(OutcomeClass::ServerError),
        1 => Just(OutcomeClass::Timeout),
        1 => Just(OutcomeClass::Network),
        1 => Just(OutcomeClass::ModelUnavailable),
        1 => Just(OutcomeClass::QuotaExhausted),
        1 => Just(OutcomeClass::AuthFailed),
        1 => Just(OutcomeClass::Billing),
        1 => Just(OutcomeClass::ClientError),
    ]
}

fn step_strategy() -> impl Strategy<Value = Step> {
    (
        prop_oneof![Just(0u64), 1u64..2_000, 2_000u64..40_000],
        class_strategy(),
        proptest::option::of(1u64..60_000),
    )
        .prop_map(|(advance_ms, class, reset_hint_ms)| Step {
            advance_ms,
            class,
            reset_hint_ms,
        })
}

/// Drives `steps` through `router`; returns which connection served each routed request
/// (or the status when nothing could).
async fn drive(router: &Router, clock: &ManualClock, steps: &[Step]) -> Vec<String> {
    let mut served = Vec::new();
    for step in steps {
        clock.advance(step.advance_ms);
        match router.route(request("team")).await {
            Ok(mut decision) => {
                served.push(decision.current().unwrap().connection.to_string());
                let result = if step.class == OutcomeClass::Success {
                    AttemptResult::success(200, 7, 3)
                } else {
                    AttemptResult::failure(step.class, Some(500))
                        .with_reset_hint_ms(step.reset_hint_ms)
                };
                decision.report(result);
            }
            Err(RouteError::NoTarget(unroutable)) => served.push(unroutable.status.to_string()),
            Err(other) => panic!("unexpected {other}"),
        }
        router.settle().await.unwrap();
    }
    served
}

/// The actors' own state, gathered by asking each one.
async fn live_state(router: &Router) -> (Vec<String>, Vec<String>, String) {
    let mut connections = Vec::new();
    for id in ["k1", "k2", "k3"] {
        connections.push(format!(
            "{:?}",
            router.live_connection_state(id).await.unwrap()
        ));
    }
    let breakers = vec![format!(
        "{:?}",
        router.live_breaker_state("p").await.unwrap()
    )];
    let deficits = format!("{:?}", router.combo_deficits("team").await.unwrap());
    (connections, breakers, deficits)
}

fn folded(state: &RouterState) -> (Vec<String>, Vec<String>, String) {
    let connections = ["k1", "k2", "k3"]
        .iter()
        .map(|id| format!("{:?}", state.connection("p", id)))
        .collect();
    let breakers = vec![format!("{:?}", state.breaker("p"))];
    let deficits = format!(
        "{:?}",
        state.deficits.get("team").cloned().unwrap_or_default()
    );
    (connections, breakers, deficits)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, .. ProptestConfig::default() })]

    /// Random outcome sequences through a live system; restart from its journal; the restarted
    /// actors hold the same state as the live ones, and both route the next requests the same.
    #[test]
    fn s8_restart_from_journal_equals_live(
        steps in proptest::collection::vec(step_strategy(), 1..40),
        after in proptest::collection::vec(step_strategy(), 1..12),
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            let journal = MemoryJournal::new();
            let clock = ManualClock::new(T0);
            let live = start(pool_211(), journal.clone(), clock.clone()).await;
            drive(&live, &clock, &steps).await;
            live.flush().await.unwrap();

            // What a crash right now would leave, started as a second node at the same `now`.
            let restarted_clock = ManualClock::new(T0);
            restarted_clock.set(clock.now_ms_for_test());
            let restarted =
                start(pool_211(), journal.after_crash(), restarted_clock.clone()).await;

            let (replayed, report) = recover_state(&journal.after_crash());
            prop_assert!(report.damaged.is_empty());
            let live_actors = live_state(&live).await;
            prop_assert_eq!(&live_actors, &live_state(&restarted).await);
            prop_assert_eq!(&live_actors, &folded(&replayed));

            // And from here on both decide identically.
            let live_next = drive(&live, &clock, &after).await;
            let restarted_next = drive(&restarted, &restarted_clock, &after).await;
            prop_assert_eq!(live_next, restarted_next);
            Ok(())
        })?;
    }
}

trait NowForTest {
    fn now_ms_for_test(&self) -> u64;
}

impl NowForTest for Arc<ManualClock> {
    fn now_ms_for_test(&self) -> u64 {
        use quotaroute_actors::Clock;
        self.now_ms()
    }
}

#[tokio::test]
async fn s8_lockouts_cooldowns_and_breaker_survive_a_restart_and_expire_while_down() {
    let journal = MemoryJournal::new();
    let clock = ManualClock::new(T0);
    let router = start(pool_211(), journal.clone(), clock.clone()).await;
    let locked = serve(&router, rate_limited()).await;
    router.settle().await.unwrap();
    router.flush().await.unwrap();
    let before = router.state().await.unwrap();

    let restarted = start(pool_211(), journal.after_crash(), clock.clone()).await;
    let after = restarted.state().await.unwrap();
    assert_eq!(before.lockouts(), after.lockouts());
    assert_eq!(after.lockouts()[0].connection, locked);
    assert_eq!(after.lockouts()[0].remaining_ms, 60_000);

    // Down for two minutes: the lock expired meanwhile and is not resurrected.
    clock.advance(120_000);
    let later = start(pool_211(), journal.after_crash(), clock.clone()).await;
    assert!(later.state().await.unwrap().lockouts().is_empty());
}

#[tokio::test]
async fn supervisor_restarts_a_failed_connection_actor_with_its_learned_state() {
    let clock = ManualClock::new(T0);
    let router = start(pool_211(), MemoryJournal::new(), clock.clone()).await;
    let locked = serve(&router, rate_limited()).await;
    router.settle().await.unwrap();
    let before = router.live_connection_state(&locked).await.unwrap();
    router.crash_connection(&locked).unwrap();
    // The replacement comes up from the journal's fold.
    let mut after = None;
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(5)).await;
        if let Ok(state) = router.live_connection_state(&locked).await {
            after = Some(state);
            break;
        }
    }
    assert_eq!(after, Some(before));
    // And it keeps serving: reports still reach it.
    let mut decision = router.route(request("team")).await.unwrap();
    decision.report(AttemptResult::success(200, 1, 1));
    router.settle().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn s7_hold_ms_waits_for_the_earliest_unblock_instead_of_failing() {
    let clock = Arc::new(TokioClock::starting_at(T0));
    let mut topology = pool_211();
    topology.combos[0].hold_ms = 5_000;
    let router = Router::start(
        topology,
        Box::new(MemoryJournal::new()),
        quotaroute_actors::RouterOptions {
            writer: quotaroute_journal::WriterConfig::default(),
            snapshot_every_events: 0,
            request_events: Default::default(),
            clock: clock.clone(),
        },
    )
    .await
    .unwrap();
    for reset_ms in [3_000, 60_000, 60_000] {
        let mut decision = router.route(request("team")).await.unwrap();
        decision.report(
            AttemptResult::failure(OutcomeClass::RateLimited, Some(429))
                .with_reset_hint_ms(Some(reset_ms)),
        );
        router.settle().await.unwrap();
    }
    let started = tokio::time::Instant::now();
    let decision = router.route(request("team")).await.unwrap();
    assert!(started.elapsed() >= Duration::from_millis(3_000));
    assert!(started.elapsed() < Duration::from_millis(5_000));
    drop(decision);
}

#[tokio::test]
async fn reload_keeps_learned_state_and_reenables_auth_disabled_connections() {
    let clock = ManualClock::new(T0);
    let router = start(pool_211(), MemoryJournal::new(), clock.clone()).await;
    // Lock one key's model and disable another by 401.
    let locked = serve(&router, rate_limited()).await;
    router.settle().await.unwrap();
    let mut decision = router.route(request("team")).await.unwrap();
    let disabled = decision.current().unwrap().connection.to_string();
    decision.report(AttemptResult::failure(OutcomeClass::AuthFailed, Some(401)));
    router.settle().await.unwrap();

    // Reload with a fourth key.
    let mut next = pool_211();
    next.connections.push(connection("k4", "p", 1));
    next.combos[0].targets.push(quotaroute_actors::TargetSpec {
        connection: "k4".to_string(),
        model: "m".to_string(),
        weight: 1,
    });
    router.reload(next).await.unwrap();
    router.settle().await.unwrap();
    let state = router.state().await.unwrap();
    assert_eq!(state.connections.len(), 4);
    assert_eq!(state.lockouts().len(), 1);
    assert_eq!(state.lockouts()[0].connection, locked);
    let disabled_now = state.connections.iter().find(|c| c.id == disabled).unwrap();
    assert!(
        disabled_now.disabled.is_none(),
        "reload re-enables 401-disabled keys"
    );
    let mut seen_k4 = false;
    for _ in 0..8 {
        let mut decision = router.route(request("team")).await.unwrap();
        seen_k4 |= &*decision.current().unwrap().connection == "k4";
        decision.report(AttemptResult::success(200, 1, 1));
    }
    assert!(seen_k4);
}
