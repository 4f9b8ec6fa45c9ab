//! The demo's script: which faults the simulated upstream accounts show at which moment of the
//! run. Pure (elapsed time in, mock rules out); applying them to the mock is `upstreams`' job.
//!
//! The story, scaled to the run's length:
//! - from the start the Anthropic keys answer after a short latency (so in-flight is visible);
//!   the OpenAI keys answer at once, so their in-flight counts rarely differ and the
//!   power-of-two-choices step (behaviour §2.4) leaves the 2:1:1 deficit order alone;
//! - at `lock_at` the key `oa-1` starts answering 429 with `Retry-After` for `gpt-4o` only, for
//!   the rest of the run: the router locks that one model on that one key (and re-locks it each
//!   time the lock runs out), while `oa-1` keeps serving `gpt-4o-mini`;
//! - during each flap window every Anthropic key answers 503: connections cool down, the
//!   provider's breaker opens, and once the window is over a probe closes it again;
//! - at `lock_at` the free-tier Gemini key `gm-1` has spent its day: Google's 429 with a
//!   per-day `QuotaFailure` and a `retryDelay` of seconds; the router locks it until midnight
//!   in Los Angeles (behaviour §15), never asks it again this run, and `gm-2` serves;
//! - the Anthropic keys are subscription accounts (their 5-hour and weekly windows in
//!   Anthropic's headers, behaviour §13): `an-1`'s week resets in two days with 80 % unused
//!   (and its 5-hour window in 20 minutes), `an-2`'s week has 70 % left for three days (its
//!   5-hour window half used with 4 hours to run), `an-3` has 10 % of its week left for five
//!   days. Pacing (by the weekly windows, the default `pace_windows = "longest"`) spends `an-1`
//!   first, before its week's quota is lost at the reset, and `an-3` last.

use std::time::Duration;

use quotaroute_mock::{
    Fault, PlanWindow, ResetForm, Rule, SubscriptionPlan, FIVE_HOURS_MS, WEEK_MS,
};

use super::embedded_config::{upstream_key, MODEL_4O, MODEL_CLAUDE};

/// The free-tier Gemini key whose day's quota runs out.
pub const SPENT_GEMINI_CONNECTION: &str = "gm-1";
/// The `retryDelay` Google still puts on a day's quota (the router does not believe it).
pub const GEMINI_RETRY_DELAY_SECONDS: u64 = 22;

/// The key that 429s, and the one model it 429s on.
pub const LOCKED_CONNECTION: &str = "oa-1";
pub const LOCKED_MODEL: &str = MODEL_4O;
/// The `Retry-After` of those 429s.
pub const RETRY_AFTER_SECONDS: u64 = 8;
/// Every successful Anthropic answer takes this long (so requests are visibly in flight).
pub const ANTHROPIC_LATENCY_MS: u64 = 120;

/// Runs at least this long get the long script (flaps every 12 s).
const LONG_RUN_SECONDS: u64 = 12;

/// When each fault is active, relative to the start of traffic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scenario {
    /// From when `oa-1` answers 429 on `gpt-4o`.
    pub lock_at: Duration,
    /// Windows `[start, end)` in which every Anthropic key answers 503.
    pub flaps: Vec<(Duration, Duration)>,
}

impl Scenario {
    /// The script for a run of `seconds`: long runs lock at 3 s and flap for 3 s every 12 s
    /// from 6 s on; short runs (tests) squeeze one lock and one flap into the run.
    pub fn for_run(seconds: u64) -> Self {
        let run = Duration::from_secs(seconds);
        if seconds >= LONG_RUN_SECONDS {
            let flaps = (0..)
                .map(|n| Duration::from_secs(6 + 12 * n))
                .take_while(|start| *start + Duration::from_secs(1) < run)
                .map(|start| (start, start + Duration::from_secs(3)))
                .collect();
            Scenario {
                lock_at: Duration::from_secs(3),
                flaps,
            }
        } else {
            Scenario {
                lock_at: run.mul_f64(0.25).max(Duration::from_millis(500)),
                flaps: vec![(run.mul_f64(0.3), run.mul_f64(0.6))],
            }
        }
    }

    /// Whether the Anthropic keys are failing at `elapsed`.
    pub fn flapping_at(&self, elapsed: Duration) -> bool {
        self.flaps
            .iter()
            .any(|(start, end)| *start <= elapsed && elapsed < *end)
    }

    /// Whether `oa-1` is 429ing on `gpt-4o` at `elapsed`.
    pub fn locking_at(&self, elapsed: Duration) -> bool {
        elapsed >= self.lock_at
    }

    /// The mock's rules at `elapsed`, first match wins: faults first, latency last.
    pub fn rules_at(&self, elapsed: Duration) -> Vec<Rule> {
        let mut rules = Vec::new();
        if self.locking_at(elapsed) {
            rules.push(
                Rule::always(Fault::Status429 {
                    reset: ResetForm::RetryAfterSeconds(RETRY_AFTER_SECONDS),
                })
                .for_key(upstream_key(LOCKED_CONNECTION))
                .for_model(LOCKED_MODEL),
            );
            rules.push(
                Rule::always(Fault::GeminiQuota {
                    per_day: true,
                    retry_delay_s: GEMINI_RETRY_DELAY_SECONDS,
                })
                .for_key(upstream_key(SPENT_GEMINI_CONNECTION)),
            );
        }
        if self.flapping_at(elapsed) {
            rules.push(Rule::always(Fault::Status(503)).for_model(MODEL_CLAUDE));
        }
        rules.push(
            Rule::always(Fault::Latency {
                ms: ANTHROPIC_LATENCY_MS,
            })
            .for_model(MODEL_CLAUDE),
        );
        rules
    }

    /// One line saying what the upstreams are doing at `elapsed`.
    pub fn describe_at(&self, elapsed: Duration) -> String {
        let mut parts = Vec::new();
        if self.locking_at(elapsed) {
            parts.push(format!(
                "{LOCKED_CONNECTION} answers 429 (Retry-After {RETRY_AFTER_SECONDS}s) for {LOCKED_MODEL}"
            ));
            parts.push(format!(
                "{SPENT_GEMINI_CONNECTION} spent its free tier's day (retryDelay {GEMINI_RETRY_DELAY_SECONDS}s; back at midnight Pacific)"
            ));
        }
        if self.flapping_at(elapsed) {
            parts.push("every anthropic key answers 503".to_string());
        }
        if parts.is_empty() {
            "all upstreams healthy".to_string()
        } else {
            parts.join("; ")
        }
    }
}

/// Requests a demo plan allows every five hours (a week allows eight times that).
const PLAN_FIVE_HOURS: u64 = 2_000;
const MINUTE_MS: u64 = 60_000;
const HOUR_MS: u64 = 60 * MINUTE_MS;

/// The Anthropic keys' plans at `now_ms` (see the module's story), in connection order.
pub fn anthropic_plans(now_ms: u64) -> [(&'static str, SubscriptionPlan); 3] {
    let week = PLAN_FIVE_HOURS * 8;
    let plan = |five_hour: PlanWindow, weekly: PlanWindow| SubscriptionPlan { five_hour, weekly };
    let five_hours = |used_pct: u64, resets_in_ms: u64| {
        PlanWindow::in_use(
            FIVE_HOURS_MS,
            PLAN_FIVE_HOURS,
            PLAN_FIVE_HOURS * used_pct / 100,
            now_ms,
            resets_in_ms,
        )
    };
    let weekly = |used_pct: u64, resets_in_ms: u64| {
        PlanWindow::in_use(WEEK_MS, week, week * used_pct / 100, now_ms, resets_in_ms)
    };
    [
        (
            "an-1",
            plan(five_hours(30, 20 * MINUTE_MS), weekly(20, 2 * 24 * HOUR_MS)),
        ),
        (
            "an-2",
            plan(five_hours(50, 4 * HOUR_MS), weekly(30, 3 * 24 * HOUR_MS)),
        ),
        (
            "an-3",
            plan(
                PlanWindow::fresh(FIVE_HOURS_MS, PLAN_FIVE_HOURS),
                weekly(90, 5 * 24 * HOUR_MS),
            ),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: f64) -> Duration {
        Duration::from_secs_f64(s)
    }

    #[test]
    fn long_run_locks_at_3s_and_flaps_every_12s_inside_the_run() {
        let scenario = Scenario::for_run(30);
        assert_eq!(scenario.lock_at, secs(3.0));
        assert_eq!(
            scenario.flaps,
            vec![(secs(6.0), secs(9.0)), (secs(18.0), secs(21.0))]
        );
    }

    #[test]
    fn short_run_fits_one_lock_and_one_flap() {
        let scenario = Scenario::for_run(4);
        assert_eq!(scenario.lock_at, secs(1.0));
        assert_eq!(scenario.flaps, vec![(secs(1.2), secs(2.4))]);
    }

    #[test]
    fn rules_put_faults_before_latency_and_429_only_one_model_on_one_key() {
        let scenario = Scenario::for_run(30);
        // (elapsed, expected number of rules, 429 rules present, 503 rule present); from the
        // lock on, gm-1's per-day Gemini quota too.
        let table = [
            (0.0, 1, false, false),
            (3.0, 3, true, false),
            (7.0, 4, true, true),
            (9.0, 3, true, false),
        ];
        for (elapsed, count, has_429, has_503) in table {
            let rules = scenario.rules_at(secs(elapsed));
            assert_eq!(rules.len(), count, "at {elapsed}s");
            assert!(matches!(
                rules.last().map(|r| &r.fault),
                Some(Fault::Latency { .. })
            ));
            let rule_429 = rules
                .iter()
                .find(|r| matches!(r.fault, Fault::Status429 { .. }));
            assert_eq!(rule_429.is_some(), has_429, "at {elapsed}s");
            if let Some(rule) = rule_429 {
                assert_eq!(rule.key, Some(upstream_key(LOCKED_CONNECTION)));
                assert_eq!(rule.model.as_deref(), Some(LOCKED_MODEL));
            }
            let has = rules.iter().any(|r| r.fault == Fault::Status(503));
            assert_eq!(has, has_503, "at {elapsed}s");
            let spent = rules
                .iter()
                .find(|r| matches!(r.fault, Fault::GeminiQuota { per_day: true, .. }));
            assert_eq!(spent.is_some(), has_429, "at {elapsed}s");
            if let Some(rule) = spent {
                assert_eq!(rule.key, Some(upstream_key(SPENT_GEMINI_CONNECTION)));
            }
        }
    }
}
