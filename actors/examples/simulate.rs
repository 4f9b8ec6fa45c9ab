//! The deterministic simulator, long run:
//! `cargo run --release -p quotaroute-actors --example simulate -- --seed N --steps M [--seeds K]`
//! runs seeds N..N+K, M steps each, checks every invariant of `sim/engine.rs` after every step,
//! and prints steps per second. On a failure it prints the seed, the step, the invariant and the
//! smallest set of steps found that still fails, and exits 1. Then the conversation groups of
//! `sim/groups.rs` (behaviour §10) on the same seeds, `M` turns each.
//!
//! `-- --week [--seed N] [--seeds K] [--load PCT] [--short]`: instead, the subscription week of
//! `sim/week.rs` (behaviour §13) on seeds N..N+K (20 by default), pacing on and off over the same
//! arrivals, beside an earliest-reset oracle; prints the "Subscription week" table of
//! docs/measurements.md. Knobs for measuring what pacing depends on: `--turns PCT` (requests
//! that are conversation turns, 70 by default), `--five-hour reported|unreported|absent`
//! (the accounts' 5-hour windows: in the headers as the providers send them, enforced but
//! unreported, or none) and
//! `--affinity-ttl-min M` (how long a conversation stays bound: 5 by default).
//!
//! `-- --week --sweep [--loads 70,80,90] [--settings all|e1,e2,…]`: defaults by measurement
//! (`sim/knob_sweep.rs`): at each load, unpaced, every knob setting (exponent 1–4 × wall/demand
//! clock × all/longest windows) and the bound over the same arrivals; prints a Markdown table
//! per load.
//!
//! `-- --week --prime [--prime-hour 7] [--load 90] [--units-5h N]`: priming (behaviour §13): the week paced
//! without priming and with each account's 5-hour window primed at the hour on weekdays, over
//! the same arrivals; prints requests refused by each. `--units-5h` sizes the 5-hour windows
//! (40 plan units by default, a sixth of the weekly window's 240).

#![expect(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "a measuring tool: a bad argument or a failed step stops it loudly"
)]

use quotaroute_sim::{clients, engine, groups, knob_sweep, week};

use std::time::Instant;

fn arg(args: &[String], name: &str, default: u64) -> u64 {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(|v| {
            v.parse()
                .unwrap_or_else(|_| panic!("{name} takes a number, got {v}"))
        })
        .unwrap_or(default)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let seed = arg(&args, "--seed", 0);
    let steps = arg(&args, "--steps", 2_000) as usize;
    let seeds = arg(&args, "--seeds", 1);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    if args.iter().any(|a| a == "--week") {
        let seeds = arg(&args, "--seeds", 20);
        // `--short`: CI's week (a fifth of the quota and of the requests).
        let base = if args.iter().any(|a| a == "--short") {
            week::WeekShape::SHORT
        } else {
            week::WeekShape::FULL
        };
        // Measuring knobs: `--turns PCT` (the share of requests that are conversation turns),
        // `--five-hour reported|unreported|absent` (the accounts' 5-hour windows),
        // `--affinity-ttl-min M` (how long a conversation stays bound), `--warmup-days D`
        // (days run under the same policy before the measured week: its steady state).
        let five_hour = match args
            .iter()
            .position(|a| a == "--five-hour")
            .and_then(|i| args.get(i + 1))
            .map(String::as_str)
        {
            None | Some("reported") => week::FiveHour::Reported,
            Some("unreported") => week::FiveHour::Unreported,
            Some("absent") => week::FiveHour::Absent,
            Some(other) => panic!("--five-hour takes reported, unreported or absent, got {other}"),
        };
        let shape = week::WeekShape {
            load_pct: arg(&args, "--load", base.load_pct),
            turns_pct: arg(&args, "--turns", base.turns_pct),
            affinity_ttl_ms: arg(&args, "--affinity-ttl-min", base.affinity_ttl_ms / 60_000)
                * 60_000,
            warmup_days: arg(&args, "--warmup-days", base.warmup_days),
            units_5h: arg(&args, "--units-5h", base.units_5h),
            five_hour,
            ..base
        };
        if args.iter().any(|a| a == "--prime") {
            let hour = arg(&args, "--prime-hour", week::priming::PRIME_HOUR);
            runtime.block_on(priming(seed, seeds, shape, hour));
            return;
        }
        if args.iter().any(|a| a == "--sweep") {
            runtime.block_on(sweep(seed, seeds, shape, &args));
            return;
        }
        if args.iter().any(|a| a == "--spare") {
            let spare_pct = arg(&args, "--spare-pct", week::spare::SPARE_PCT);
            // `--spare-margin-pct M`: `pacing.spare_margin` = M / 100 (0.2 by default).
            let margin = args
                .iter()
                .any(|a| a == "--spare-margin-pct")
                .then(|| arg(&args, "--spare-margin-pct", 20) as f64 / 100.0);
            runtime.block_on(spare(seed, seeds, shape, (spare_pct, margin)));
            return;
        }
        runtime.block_on(subscription_week(seed, seeds, shape));
        return;
    }
    runtime.block_on(async {
        let started = Instant::now();
        let mut total = engine::Stats::default();
        for s in seed..seed + seeds {
            match engine::run(s, steps).await {
                Ok(stats) => total.add(&stats),
                Err(failure) => {
                    println!("FAILED {failure}");
                    let shrunk = engine::shrink(&failure).await;
                    println!(
                        "smallest failing steps of seed {s} ({} steps): {shrunk:?}",
                        shrunk.len()
                    );
                    std::process::exit(1);
                }
            }
        }
        let mut clients_total = clients::ClientStats::default();
        for s in seed..seed + seeds {
            match clients::run_clients(s, steps).await {
                Ok(stats) => clients_total.add(&stats),
                Err(failure) => {
                    println!("FAILED {failure}");
                    std::process::exit(1);
                }
            }
        }
        println!("clients sharing a full pool: {clients_total:?}");
        let secs = started.elapsed().as_secs_f64();
        println!(
            "{seeds} seeds x {steps} steps: {} steps in {secs:.2} s = {:.0} steps/s",
            total.steps,
            total.steps as f64 / secs
        );
        println!("{total:#?}");

        // Conversation groups (behaviour §10): the same seeds, `steps` turns each.
        let started = Instant::now();
        let mut groups_total = groups::GroupStats::default();
        for s in seed..seed + seeds {
            match groups::run(s, steps).await {
                Ok(stats) => groups_total.add(&stats),
                Err(failure) => {
                    println!("FAILED {failure}");
                    std::process::exit(1);
                }
            }
        }
        println!(
            "groups: {seeds} seeds x {steps} turns in {:.2} s",
            started.elapsed().as_secs_f64()
        );
        println!("{groups_total:#?}");
    });
}

/// `--week --spare [--spare-pct P] [--spare-margin-pct M]`: the spare load (behaviour §13 "Spare quota only", 30 % of
/// the pool's weekly quota by default) on top of the working day, under the measured setting
/// (exponent 1, wall clock, the longest window), beside the same week paced and unpaced
/// without it; prints the table docs/measurements.md reports.
async fn spare(seed: u64, seeds: u64, shape: week::WeekShape, load: (u64, Option<f64>)) {
    let started = Instant::now();
    let shape = week::WeekShape {
        rule: week::spare::MEASURED_RULE,
        ..shape
    };
    match week::spare::spare_weeks(seed..seed + seeds, &shape, load).await {
        Ok(measured) => {
            println!(
                "spare week: {seeds} seeds (from {seed}), {} days, load {} %, spare margin {:?}, {:.1} s",
                shape.days,
                shape.load_pct,
                load.1,
                started.elapsed().as_secs_f64()
            );
            println!("{}", measured.markdown(load.0));
        }
        Err(failure) => {
            println!("FAILED {failure}");
            std::process::exit(1);
        }
    }
}

/// `--week`: the subscription week (behaviour §13) on seeds N..N+K, pacing on and off over the
/// same arrivals; prints the table docs/measurements.md's "Subscription week" reports.
async fn subscription_week(seed: u64, seeds: u64, shape: week::WeekShape) {
    let started = Instant::now();
    let mut paced = week::WeekStats::default();
    let mut unpaced = week::WeekStats::default();
    let mut oracle = week::WeekStats::default();
    for s in seed..seed + seeds {
        oracle.add(&week::oracle_week(s, &shape));
        for (on, total) in [(true, &mut paced), (false, &mut unpaced)] {
            match week::run_week(s, on, &shape).await {
                Ok(stats) => total.add(&stats),
                Err(failure) => {
                    println!("FAILED (pacing {on}) {failure}");
                    std::process::exit(1);
                }
            }
        }
    }
    println!(
        "subscription week: {seeds} seeds (from {seed}), {} days, load {} % of the weekly quota, \
         {} % turns, 5-hour windows {:?}, after {} days of warm-up, {:.1} s",
        shape.days,
        shape.load_pct,
        shape.turns_pct,
        shape.five_hour,
        shape.warmup_days,
        started.elapsed().as_secs_f64()
    );
    println!(
        "{:<8} {:>9} {:>9} {:>9} {:>9} {:>8} {:>8} {:>9} {:>12}",
        "pacing",
        "unused%",
        "7d un%",
        "5h un%",
        "requests",
        "refused",
        "spent",
        "failover",
        "max dev pp"
    );
    for (name, s) in [("on", &paced), ("off", &unpaced), ("oracle", &oracle)] {
        println!(
            "{:<8} {:>9.1} {:>9.1} {:>9.1} {:>9} {:>8} {:>8} {:>9} {:>12.1}",
            name,
            s.unused_all().unused_pct(),
            s.unused_7d.unused_pct(),
            s.unused_5h.unused_pct(),
            s.requests,
            s.refused,
            s.sent_to_spent,
            s.failovers,
            s.max_share_deviation_pp
        );
    }
    println!("paced: {paced:#?}\nunpaced: {unpaced:#?}");
}

/// `--sweep`: every knob setting at each load (behaviour §13, defaults by measurement).
async fn sweep(seed: u64, seeds: u64, shape: week::WeekShape, args: &[String]) {
    let loads: Vec<u64> = args
        .iter()
        .position(|a| a == "--loads")
        .and_then(|i| args.get(i + 1))
        .map_or_else(
            || vec![70, 80, 90],
            |list| {
                list.split(',')
                    .map(|l| l.parse().expect("--loads 70,80,90"))
                    .collect()
            },
        );
    let settings: Vec<_> = match args
        .iter()
        .position(|a| a == "--settings")
        .and_then(|i| args.get(i + 1))
    {
        None => knob_sweep::every_setting(),
        Some(names) => knob_sweep::every_setting()
            .into_iter()
            .filter(|k| {
                names
                    .split(',')
                    .any(|n| knob_sweep::setting_name(k).replace(' ', "-") == n)
            })
            .collect(),
    };
    for load in loads {
        let started = Instant::now();
        match knob_sweep::sweep_load(&shape, load, seed..seed + seeds, &settings).await {
            Ok(row) => {
                println!(
                    "\n{seeds} seeds (from {seed}), {} days after {} days of warm-up, {} requests, {:.1} s",
                    shape.days,
                    shape.warmup_days,
                    row.unpaced.stats.requests,
                    started.elapsed().as_secs_f64()
                );
                println!("{}", knob_sweep::markdown(&row));
            }
            Err(failure) => {
                println!("FAILED {failure}");
                std::process::exit(1);
            }
        }
    }
}

/// Refused requests with and without priming at `hour`, paced, over the same arrivals.
async fn priming(seed: u64, seeds: u64, shape: week::WeekShape, hour: u64) {
    let started = Instant::now();
    let (mut without, mut with) = (week::WeekStats::default(), week::WeekStats::default());
    for s in seed..seed + seeds {
        without.add(&week::run_week_primed(s, true, &shape, None).await.unwrap());
        with.add(
            &week::run_week_primed(s, true, &shape, Some(hour))
                .await
                .unwrap(),
        );
    }
    let refused =
        |stats: &week::WeekStats| 100.0 * stats.refused as f64 / stats.requests.max(1) as f64;
    println!(
        "priming at {hour:02}:00 on weekdays, load {} %, {seeds} seeds ({:.1} s):",
        shape.load_pct,
        started.elapsed().as_secs_f64()
    );
    println!("| run | requests | refused | refused % | unused at 5h resets | unused at weekly resets | primes |");
    println!("|---|---|---|---|---|---|---|");
    for (name, stats) in [("without priming", &without), ("primed", &with)] {
        println!(
            "| {name} | {} | {} | {:.3} % | {:.1} % | {:.1} % | {} |",
            stats.requests,
            stats.refused,
            refused(stats),
            stats.unused_5h.unused_pct(),
            stats.unused_7d.unused_pct(),
            stats.primes
        );
    }
}
