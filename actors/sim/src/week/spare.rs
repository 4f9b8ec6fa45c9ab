//! The spare load on the subscription week (behaviour §13 "Spare quota only"): a batch client
//! of class `spare` sending, evenly over the week, requests worth `spare_pct` % of the pool's
//! weekly quota on top of the working-day load, through the same `Router`. Spare requests bind
//! no group and go only where `policy::spare` finds quota forecast to be lost; a refusal is
//! counted, not retried.
//!
//! What it measures, per seed, over the same working-day arrivals:
//! - **Served from lost quota**: the spare units (what spare requests used of the weekly
//!   windows that reset in the measured days, as their unused quota is tallied) against what the weekly windows left unused at their resets in the *unpaced* run
//!   without spare load — quota unpaced routing would have lost — over the pool, seed by seed;
//!   and account by account against the unpaced run and against the paced run without spare
//!   load (the same rule: which account loses quota depends on the rule, so an account can
//!   lend spare requests more than unpaced lost there while the pool loses less). By the weekly
//!   windows, which bind: the 5-hour ones lose far more overnight.
//! - **Working-day refusals held**: the working-day requests refused with the spare load
//!   against the same paced run without it.

use std::sync::Arc;

use quotaroute_actors::policy::clients::class::RequestClass;
use quotaroute_actors::policy::request::Step;
use quotaroute_actors::{ClientTag, RouteError, RouteRequest};
use quotaroute_journal::{ApiFormat, OutcomeClass};

use super::accounts::{Account, HOUR_MS, SECOND_MS};
use super::{
    accounts, arrivals, attempt_result, run_week_over, Arrival, Week, WeekShape, WeekStats, COMBO,
    MEAN_COST,
};
use crate::engine::{Failure, Rng, T0};

/// The spare client's id (it is not one of the working-day clients).
pub const SPARE_CLIENT: &str = "batch";

/// The spare load of the issue: 30 % of the pool's weekly quota.
pub const SPARE_PCT: u64 = 30;

/// The setting the knob sweep chose (docs/measurements.md): exponent 1, the wall clock, the
/// longest window. The spare load is measured under it.
pub const MEASURED_RULE: quotaroute_journal::PacingKnobs = quotaroute_journal::PacingKnobs {
    exponent_pm: 1_000,
    clock: quotaroute_journal::PacingClock::Wall,
    pace_windows: quotaroute_journal::PaceWindows::Longest,
};

/// The spare requests of the week of `seed`: `spare_pct` % of `weekly_quota` a week, spread
/// evenly over every hour (batch work runs day and night), costs 1–3 like the working day's.
fn spare_arrivals(seed: u64, shape: &WeekShape, weekly_quota: u64, spare_pct: u64) -> Vec<Arrival> {
    let per_hour = spare_pct as f64 / 100.0 * weekly_quota as f64 / (MEAN_COST * 168.0);
    let mut out = Vec::new();
    for hour in 0..(shape.warmup_days + shape.days) * 24 {
        let mut rng = Rng::for_step(seed ^ 0x5ba7_e10a, hour as usize);
        let whole = per_hour.floor();
        let count = whole as u64
            + u64::from(rng.next_u64() % 1_000 < ((per_hour - whole) * 1_000.0) as u64);
        let mut seconds: Vec<u64> = (0..count).map(|_| rng.range(0, 3_599)).collect();
        seconds.sort_unstable();
        for second in seconds {
            out.push(Arrival {
                at_ms: T0 + hour * HOUR_MS + second * SECOND_MS,
                cost: rng.range(1, 3),
                client: 0,
                conversation: None,
                spare: true,
            });
        }
    }
    out
}

/// The working day's arrivals and the spare ones, in time order (the working day's first at
/// the same millisecond).
fn merged(working: &[Arrival], spare: &[Arrival]) -> Vec<Arrival> {
    let mut all: Vec<Arrival> = working.iter().chain(spare).cloned().collect();
    all.sort_by_key(|arrival| (arrival.at_ms, arrival.spare));
    all
}

impl Week {
    /// One spare request: routed as the spare client's (no group), each attempt answered by
    /// its account, failed over while the plan says so; refused when nothing spare serves it.
    pub(super) async fn serve_spare(&mut self, arrival: &Arrival) -> Result<(), Failure> {
        self.clock.set(arrival.at_ms);
        let now = arrival.at_ms;
        self.stats.spare_requests += 1;
        let request = RouteRequest {
            request_id: format!("s{}-{}", self.seed, self.request).into(),
            model: COMBO.into(),
            format: ApiFormat::Openai,
            translatable: false,
            cannot_carry: Vec::new(),
            only_connection: None,
            encrypted_maker: None,
            affinity: None,
            client: ClientTag {
                id: Arc::from(SPARE_CLIENT),
                weight: 1,
                class: RequestClass::Spare,
            },
        };
        let mut decision = match self.router.route(request).await {
            Ok(decision) => decision,
            Err(RouteError::NoTarget(_)) => {
                self.stats.spare_refused += 1;
                return Ok(());
            }
            Err(other) => {
                return Err(self.fail("spare-route-succeeds-or-no-target", other.to_string()))
            }
        };
        loop {
            let Some(target) = decision.current() else {
                return Err(self.fail("a-routed-has-target", "no current target".into()));
            };
            let (connection, model) = (target.connection.to_string(), target.model.to_string());
            self.stats.upstream_requests += 1;
            let Some(account) = self.accounts.iter_mut().find(|a| a.id == connection) else {
                return Err(self.fail("a-routed-has-target", format!("no account {connection}")));
            };
            let result =
                attempt_result(account.answer(arrival.cost, now), &model, arrival.cost, now);
            let class = result.class;
            if class == OutcomeClass::Success {
                account.weekly.spare_used += arrival.cost;
            }
            if !decision.report_applied(result).await {
                return Err(self.fail("report-has-attempt", "no attempt in progress".into()));
            }
            if class == OutcomeClass::Success {
                self.stats.spare_served += 1;
                self.stats.spare_units += arrival.cost;
                return Ok(());
            }
            if decision.next_step(class, false, true) != Step::Failover {
                break;
            }
            match decision.failover().await {
                Ok(Some(_)) => {}
                Ok(None) => break,
                Err(e) => return Err(self.fail("router-responds", format!("failover: {e}"))),
            }
        }
        self.stats.spare_refused += 1;
        Ok(())
    }
}

/// One account of a seed: what spare requests used there, and what the unpaced run without
/// them left unused at its resets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpareAccount {
    pub id: String,
    pub spare_units: u64,
    pub unpaced_unused_7d: u64,
    pub unpaced_unused_5h: u64,
    /// What the paced run without spare load left unused on its weekly windows.
    pub paced_unused_7d: u64,
}

/// One seed: its pool's spare units and what unpaced routing lost on its weekly windows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpareSeed {
    pub seed: u64,
    pub spare_units: u64,
    pub unpaced_lost: u64,
}

/// The three runs of one seed and its accounts.
#[derive(Debug, Clone, Default)]
pub struct SpareWeek {
    pub seeds: u64,
    /// Unpaced, working day only: the quota it loses is the reference.
    pub unpaced: WeekStats,
    /// Paced (the shape's rule), working day only.
    pub paced: WeekStats,
    /// Paced with the spare load on top.
    pub with_spare: WeekStats,
    pub accounts: Vec<SpareAccount>,
    pub per_seed: Vec<SpareSeed>,
}

impl SpareWeek {
    pub fn add(&mut self, other: &SpareWeek) {
        self.seeds += other.seeds;
        self.unpaced.add(&other.unpaced);
        self.paced.add(&other.paced);
        self.with_spare.add(&other.with_spare);
        self.accounts.extend(other.accounts.iter().cloned());
        self.per_seed.extend(other.per_seed.iter().copied());
    }

    /// Spare units beyond what unpaced routing lost on the pool's weekly windows, seed by seed,
    /// summed (0: every seed's spare load fit in what unpaced lost).
    pub fn pool_excess_units(&self) -> u64 {
        self.per_seed
            .iter()
            .map(|seed| seed.spare_units.saturating_sub(seed.unpaced_lost))
            .sum()
    }

    /// Spare units beyond what an account's weekly windows lost without spare load (unpaced,
    /// or paced by the same rule), account by account, summed.
    pub fn account_excess_units(&self, paced: bool) -> u64 {
        self.accounts
            .iter()
            .map(|a| {
                let lost = if paced {
                    a.paced_unused_7d
                } else {
                    a.unpaced_unused_7d
                };
                a.spare_units.saturating_sub(lost)
            })
            .sum()
    }

    /// What unpaced routing lost on the weekly windows (the measured days).
    pub fn unpaced_lost_units(&self) -> u64 {
        self.accounts.iter().map(|a| a.unpaced_unused_7d).sum()
    }

    /// The working day's refusals with the spare load less without, in percent of its
    /// requests (positive: the spare load made it refuse more).
    pub fn extra_refused_pct(&self) -> f64 {
        let requests = self.paced.requests.max(1) as f64;
        100.0 * (self.with_spare.refused as f64 - self.paced.refused as f64) / requests
    }

    /// The measurement as a Markdown table.
    pub fn markdown(&self, spare_pct: u64) -> String {
        let spare = &self.with_spare;
        let pct = |part: u64, whole: u64| 100.0 * part as f64 / whole.max(1) as f64;
        let mut out = String::new();
        out.push_str(&format!(
            "| spare load {spare_pct} % ({} seeds) | value |\n|---|---|\n",
            self.seeds
        ));
        let rows = [
            (
                "spare requests served / sent".to_owned(),
                format!(
                    "{} / {} ({:.1} %)",
                    spare.spare_served,
                    spare.spare_requests,
                    pct(spare.spare_served, spare.spare_requests)
                ),
            ),
            (
                "spare units used (measured days)".to_owned(),
                spare.spare_units.to_string(),
            ),
            (
                "spare units in weekly windows that reset in them".to_owned(),
                self.per_seed
                    .iter()
                    .map(|seed| seed.spare_units)
                    .sum::<u64>()
                    .to_string(),
            ),
            (
                "weekly quota unpaced lost (same accounts)".to_owned(),
                self.unpaced_lost_units().to_string(),
            ),
            (
                "spare units beyond unpaced's loss: pool, seed by seed".to_owned(),
                format!(
                    "{} ({:.2} % of the spare units)",
                    self.pool_excess_units(),
                    pct(self.pool_excess_units(), spare.spare_units)
                ),
            ),
            (
                "spare units beyond the account's loss: unpaced / paced without spare".to_owned(),
                format!(
                    "{} ({:.2} %) / {} ({:.2} %)",
                    self.account_excess_units(false),
                    pct(self.account_excess_units(false), spare.spare_units),
                    self.account_excess_units(true),
                    pct(self.account_excess_units(true), spare.spare_units)
                ),
            ),
            (
                "working day refused: paced / paced + spare / unpaced".to_owned(),
                format!(
                    "{:.3} % / {:.3} % / {:.3} %",
                    pct(self.paced.refused, self.paced.requests),
                    pct(spare.refused, spare.requests),
                    pct(self.unpaced.refused, self.unpaced.requests)
                ),
            ),
            (
                "weekly quota unused at resets: unpaced / paced / paced + spare".to_owned(),
                format!(
                    "{:.2} % / {:.2} % / {:.2} %",
                    self.unpaced.unused_7d.unused_pct(),
                    self.paced.unused_7d.unused_pct(),
                    spare.unused_7d.unused_pct()
                ),
            ),
        ];
        for (name, value) in rows {
            out.push_str(&format!("| {name} | {value} |\n"));
        }
        out
    }
}

/// The week of `seed` three ways over the same working-day arrivals: unpaced, paced, and paced
/// with a spare load of `spare_pct` % of the pool's weekly quota (under `pacing.spare_margin`
/// = `margin`, the default 0.2 when `None`).
pub async fn spare_week(
    seed: u64,
    shape: &WeekShape,
    (spare_pct, margin): (u64, Option<f64>),
) -> Result<SpareWeek, Failure> {
    let pool = accounts(seed, shape);
    let weekly_quota: u64 = pool.iter().map(|a| a.weekly.capacity).sum();
    let working = arrivals(seed, shape, weekly_quota);
    let spare = spare_arrivals(seed, shape, weekly_quota, spare_pct);
    let (unpaced, unpaced_accounts) =
        run_week_over(seed, (false, None, None), shape, pool.clone(), &working).await?;
    let (paced, paced_accounts) =
        run_week_over(seed, (true, None, None), shape, pool.clone(), &working).await?;
    let (with_spare, spare_accounts) = run_week_over(
        seed,
        (true, margin, None),
        shape,
        pool,
        &merged(&working, &spare),
    )
    .await?;
    let accounts: Vec<SpareAccount> = spare_accounts
        .iter()
        .zip(&unpaced_accounts)
        .zip(&paced_accounts)
        .map(
            |((spare, unpaced), paced): ((&Account, &Account), &Account)| SpareAccount {
                id: spare.id.clone(),
                spare_units: spare.weekly.spare_tallied,
                unpaced_unused_7d: unpaced.weekly.tally.unused,
                unpaced_unused_5h: unpaced.five_hour.tally.unused,
                paced_unused_7d: paced.weekly.tally.unused,
            },
        )
        .collect();
    let per_seed = vec![SpareSeed {
        seed,
        spare_units: accounts.iter().map(|a| a.spare_units).sum(),
        unpaced_lost: accounts.iter().map(|a| a.unpaced_unused_7d).sum(),
    }];
    Ok(SpareWeek {
        seeds: 1,
        unpaced,
        paced,
        with_spare,
        accounts,
        per_seed,
    })
}

/// [`spare_week`] over `seeds`, summed.
pub async fn spare_weeks(
    seeds: std::ops::Range<u64>,
    shape: &WeekShape,
    load: (u64, Option<f64>),
) -> Result<SpareWeek, Failure> {
    let mut total = SpareWeek::default();
    for seed in seeds {
        total.add(&spare_week(seed, shape, load).await?);
    }
    Ok(total)
}
