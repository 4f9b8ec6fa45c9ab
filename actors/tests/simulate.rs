//! The deterministic simulator, short run: 20 seeds × 300 steps of requests, upstream
//! outcomes, held decisions, clock jumps, admin actions and restarts, every invariant of
//! `sim/engine.rs` checked after every step. Longer runs: `examples/simulate.rs`.

#![expect(
    clippy::panic,
    reason = "test code: a failed step fails the test loudly"
)]

use quotaroute_sim::{clients, engine, groups, knob_sweep, week};

const SEEDS: u64 = 20;
const STEPS: usize = 300;

#[tokio::test]
async fn simulated_runs_keep_every_invariant() {
    let mut total = engine::Stats::default();
    for seed in 0..SEEDS {
        match engine::run(seed, STEPS).await {
            Ok(stats) => total.add(&stats),
            Err(failure) => {
                let steps = engine::shrink(&failure).await;
                panic!(
                    "{failure}\nshortest failing steps of seed {}: {steps:?}",
                    failure.seed
                );
            }
        }
    }
    assert_eq!(total.steps, SEEDS * STEPS as u64);
    // The schedule reaches what it is meant to exercise.
    assert!(total.routed > 0 && total.failovers > 0 && total.restarts > 0);
    assert!(total.no_target_429 + total.no_target_503 > 0);
    println!("{total:?}");
}

#[tokio::test]
async fn a_run_is_a_pure_function_of_its_seed() {
    let a = engine::run(7, 120).await.unwrap();
    let b = engine::run(7, 120).await.unwrap();
    assert_eq!(format!("{a:?}"), format!("{b:?}"));
}

/// Behaviour §11: clients of different weights flooding, disconnecting and waiting on a full
/// pool with `queue_ms` (invariants q1–q4 of `sim/clients.rs`).
#[tokio::test]
async fn simulated_clients_share_a_full_pool_fairly() {
    let mut total = clients::ClientStats::default();
    for seed in 0..SEEDS {
        match clients::run_clients(seed, STEPS).await {
            Ok(stats) => total.add(&stats),
            Err(failure) => panic!("{failure}"),
        }
    }
    assert!(total.granted > 0 && total.pool_busy > 0 && total.disconnects > 0);
    assert!(total.fair_windows > 0 && total.fair_grants > 0);
    println!("{total:?}");
}

/// Conversation groups (behaviour §10): 10 seeds × 250 turns of conversations with hints,
/// requests without, and 429/503 upstreams on bound targets; every invariant of
/// `sim/groups.rs` checked on every turn.
#[tokio::test]
async fn simulated_conversations_keep_every_affinity_invariant() {
    let mut total = groups::GroupStats::default();
    for seed in 0..10 {
        match groups::run(seed, 250).await {
            Ok(stats) => total.add(&stats),
            Err(failure) => panic!("{failure}"),
        }
    }
    println!("{total:?}");
    // The schedule reaches what it is meant to exercise.
    assert!(
        total.new > 0 && total.held > total.new && total.no_group > 0,
        "{total:?}"
    );
    assert!(total.moved_blocked > 0 && total.blocks > 0, "{total:?}");
    assert!(total.followed > 0, "failovers move groups: {total:?}");
}

/// Seeds of CI's subscription week (the long run takes 20: `examples/simulate.rs --week`).
const WEEK_SEEDS: u64 = 3;

/// Both arms of CI's subscription week over [`WEEK_SEEDS`] seeds: (paced, unpaced).
async fn short_weeks() -> (week::WeekStats, week::WeekStats) {
    let mut paced = week::WeekStats::default();
    let mut unpaced = week::WeekStats::default();
    for seed in 0..WEEK_SEEDS {
        for (on, total) in [(true, &mut paced), (false, &mut unpaced)] {
            match week::run_week(seed, on, &week::WeekShape::SHORT).await {
                Ok(stats) => total.add(&stats),
                Err(failure) => panic!("pacing {on}: {failure}"),
            }
        }
    }
    (paced, unpaced)
}

/// Behaviour §13, the subscription week, short: invariants m (no request to a spent or
/// reserved window) and n (shares follow the paces) on every request of both arms; with
/// pacing, no request reaches a spent window.
#[tokio::test]
async fn the_subscription_week_keeps_the_pacing_invariants() {
    let (paced, unpaced) = short_weeks().await;
    println!("paced {paced:?}\nunpaced {unpaced:?}");
    assert_eq!(paced.sent_to_spent, 0, "{paced:?}");
    // The schedule reaches what it is meant to exercise: spent and reserved windows, weekly
    // resets, stretches of stable readings.
    assert!(paced.decided_beside_blocked_window > 0, "{paced:?}");
    assert!(paced.unused_7d.resets >= WEEK_SEEDS, "{paced:?}");
    assert!(unpaced.stretches > 0, "{unpaced:?}");
}

/// The setting the 20-seed sweep chose (docs/measurements.md, "the knobs of pacing's rule":
/// the largest share of the gap at its worst load, refusing no more than unpaced): exponent 1,
/// wall clock, the longest window — the default knobs of `[defaults.pacing]`.
const MEASURED_RULE: quotaroute_journal::PacingKnobs = quotaroute_journal::PacingKnobs {
    exponent_pm: 1_000,
    clock: quotaroute_journal::PacingClock::Wall,
    pace_windows: quotaroute_journal::PaceWindows::Longest,
};

/// Behaviour §13 "What it is for", on CI's short week ([`WEEK_SEEDS`] seeds) at 70, 80 and
/// 90 % load: unpaced, the default knobs, the rule before the knobs and the bound over the same
/// arrivals. The default is the measured setting, and refuses no more than unpaced (± 0.05 %
/// of requests) at every load. The bar — at least half the gap between unpaced's unused quota
/// and the bound's closed — is a finding, pinned as measured: no load meets it. The default
/// closes 32 % and 22 % of the gap at 70 and 80 % (the rule before the knobs 16 % and 14 %);
/// at 90 % both leave more than unpaced on these 3 seeds (the gap there is under 3 points and
/// the bound refuses requests to close it; over 20 seeds the default closes 12 %, the rule
/// before the knobs 5 %: docs/measurements.md).
#[tokio::test]
async fn the_short_week_measures_the_default_knobs_at_three_loads() {
    let default = quotaroute_actors::policy::pace::PacingSettings::default().knobs();
    assert_eq!(
        default, MEASURED_RULE,
        "the default is the measured setting"
    );
    assert_eq!(week::WeekShape::SHORT.rule, default, "CI's week runs it");
    let before = week::RULE_BEFORE_KNOBS;
    // (load, share of the gap closed by the default, by the rule before the knobs), as
    // measured.
    let measured = [(70, 0.32, 0.16), (80, 0.22, 0.14), (90, -0.14, -0.10)];
    for (load, default_closed, before_closed) in measured {
        let row = knob_sweep::sweep_load(
            &week::WeekShape::SHORT,
            load,
            0..WEEK_SEEDS,
            &[default, before],
        )
        .await
        .unwrap_or_else(|failure| panic!("load {load}: {failure}"));
        let table = knob_sweep::markdown(&row);
        println!("{table}");
        for ((knobs, arm), expected) in row.settings.iter().zip([default_closed, before_closed]) {
            let closed = row.gap_closed(arm);
            assert!(
                (closed - expected).abs() < 0.02,
                "load {load}, {}: closed {closed:.3}, measured {expected}\n{table}",
                arm.name
            );
            assert!(
                row.refuses_no_more(arm),
                "load {load}, {:?}: refuses more than unpaced\n{table}",
                knobs
            );
            // The bar, as found: not met.
            assert!(closed < 0.5, "load {load}: the bar is met now\n{table}");
        }
    }
}

/// `--warmup-days` (the week's steady state): a window's resets before the measured days are
/// not tallied, those after are.
#[test]
fn a_reset_in_the_warm_up_is_not_tallied() {
    use week::accounts::{ResetTally, Window, HOUR_MS};
    let mut window = Window::new(HOUR_MS, 100);
    window.anchored = true;
    window.started_at_ms = Some(0);
    window.tally_from_ms = 2 * HOUR_MS;
    window.used = 40;
    window.roll(HOUR_MS);
    assert_eq!(window.tally, ResetTally::default());
    window.used = 30;
    window.roll(2 * HOUR_MS);
    let measured = ResetTally {
        resets: 1,
        capacity: 100,
        unused: 70,
    };
    assert_eq!(window.tally, measured);
}

/// A week after a week of warm-up counts one week's requests and at most one weekly reset per
/// account (a weekly window resets at most once in seven days).
#[test]
fn a_warmed_week_counts_only_the_measured_week() {
    let shape = week::WeekShape::SHORT;
    let cold = week::oracle_week(0, &shape);
    let warmed = week::oracle_week(
        0,
        &week::WeekShape {
            warmup_days: 7,
            ..shape
        },
    );
    assert!(
        warmed.requests > cold.requests / 2 && warmed.requests < cold.requests * 3 / 2,
        "{cold:?}\n{warmed:?}"
    );
    assert!(warmed.unused_7d.resets >= 1, "{warmed:?}");
    assert!(warmed.unused_7d.resets <= 6, "{warmed:?}");
}
