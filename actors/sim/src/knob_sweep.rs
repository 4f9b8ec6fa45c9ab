//! Defaults by measurement (behaviour §13 "Knobs of the rule"): the subscription week of
//! `week.rs` at several loads and seeds, served unpaced, paced under every knob setting asked
//! for, and by the earliest-reset oracle (the bound), over the same arrivals. Owns the sweep
//! and its table: per load, quota unused at resets and requests refused for each arm, and the
//! share of the gap between unpaced and the bound each setting closes.

use quotaroute_journal::{PaceWindows, PacingClock, PacingKnobs};

use crate::week::{self, WeekShape, WeekStats};

/// One arm of the sweep at one load, over every seed.
#[derive(Debug, Clone, Default)]
pub struct Arm {
    pub name: String,
    pub stats: WeekStats,
}

impl Arm {
    /// Quota left unused at the weekly resets (README's measure: the 5-hour windows together
    /// hold several times the weekly quota, so most of theirs can never be spent).
    pub fn unused_pct(&self) -> f64 {
        self.stats.unused_7d.unused_pct()
    }

    pub fn refused_pct(&self) -> f64 {
        100.0 * self.stats.refused as f64 / self.stats.requests.max(1) as f64
    }
}

/// A load's arms: unpaced, each setting (in the order given), the bound.
#[derive(Debug, Clone, Default)]
pub struct LoadRow {
    pub load_pct: u64,
    pub unpaced: Arm,
    pub settings: Vec<(PacingKnobs, Arm)>,
    pub bound: Arm,
}

impl LoadRow {
    /// The share of the gap between unpaced's unused quota and the bound's that `arm` closes
    /// (1 = as good as the bound, 0 = as unpaced, negative = worse than unpaced).
    pub fn gap_closed(&self, arm: &Arm) -> f64 {
        let gap = self.unpaced.unused_pct() - self.bound.unused_pct();
        if gap.abs() < 1e-9 {
            return 0.0;
        }
        (self.unpaced.unused_pct() - arm.unused_pct()) / gap
    }

    /// Whether `arm` refuses no more than unpaced, within 0.05 % of the requests.
    pub fn refuses_no_more(&self, arm: &Arm) -> bool {
        arm.refused_pct() <= self.unpaced.refused_pct() + 0.05
    }
}

/// Every knob combination of the sweep: exponents 1–4 × wall/demand × all/longest.
pub fn every_setting() -> Vec<PacingKnobs> {
    let mut out = Vec::new();
    for exponent in 1..=4u32 {
        for clock in [PacingClock::Wall, PacingClock::Demand] {
            for pace_windows in [PaceWindows::All, PaceWindows::Longest] {
                out.push(PacingKnobs {
                    exponent_pm: exponent * 1_000,
                    clock,
                    pace_windows,
                });
            }
        }
    }
    out
}

/// `e2 demand longest`.
pub fn setting_name(knobs: &PacingKnobs) -> String {
    let clock = match knobs.clock {
        PacingClock::Wall => "wall",
        PacingClock::Demand => "demand",
    };
    let windows = match knobs.pace_windows {
        PaceWindows::All => "all",
        PaceWindows::Longest => "longest",
    };
    format!("e{} {clock} {windows}", knobs.exponent_pm / 1_000)
}

/// The sweep at `load_pct` over seeds `seeds`, on `base`'s week.
pub async fn sweep_load(
    base: &WeekShape,
    load_pct: u64,
    seeds: std::ops::Range<u64>,
    settings: &[PacingKnobs],
) -> Result<LoadRow, crate::engine::Failure> {
    let shape = WeekShape { load_pct, ..*base };
    let mut row = LoadRow {
        load_pct,
        unpaced: Arm {
            name: "unpaced".into(),
            ..Arm::default()
        },
        settings: settings
            .iter()
            .map(|knobs| {
                (
                    *knobs,
                    Arm {
                        name: setting_name(knobs),
                        ..Arm::default()
                    },
                )
            })
            .collect(),
        bound: Arm {
            name: "bound".into(),
            ..Arm::default()
        },
    };
    for seed in seeds {
        row.bound.stats.add(&week::oracle_week(seed, &shape));
        row.unpaced
            .stats
            .add(&week::run_week(seed, false, &shape).await?);
        for (knobs, arm) in &mut row.settings {
            let paced = WeekShape {
                rule: *knobs,
                ..shape
            };
            arm.stats.add(&week::run_week(seed, true, &paced).await?);
        }
    }
    Ok(row)
}

/// The row as a Markdown table: each arm's unused and refused, and each setting's share of
/// the gap closed and whether it refuses no more than unpaced.
pub fn markdown(row: &LoadRow) -> String {
    let mut out = format!(
        "| load {} % | unused at weekly resets | refused | gap closed | refuses ≤ unpaced (± 0.05 %) |\n|---|---:|---:|---:|:---:|\n",
        row.load_pct
    );
    let line = |arm: &Arm, closed: Option<f64>, holds: Option<bool>| {
        format!(
            "| {} | {:.2} % | {:.2} % | {} | {} |\n",
            arm.name,
            arm.unused_pct(),
            arm.refused_pct(),
            closed.map_or("".into(), |c| format!("{:.0} %", 100.0 * c)),
            holds.map_or("", |h| if h { "yes" } else { "no" })
        )
    };
    out += &line(&row.unpaced, None, None);
    for (_, arm) in &row.settings {
        out += &line(
            arm,
            Some(row.gap_closed(arm)),
            Some(row.refuses_no_more(arm)),
        );
    }
    out += &line(&row.bound, None, None);
    out
}
