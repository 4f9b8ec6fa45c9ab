//! Pacing (behaviour §13): how fast a target may be spent, from what is left of each of its
//! windows and when each comes back. Pure: window readings + now → pace; it never reads the
//! clock, never parses headers (that is `rate_limit_headers`), never blocks a target (that is
//! admission: `window_block`) and never orders targets (that is selection, which turns a pace
//! into a DRR quantum with [`quantum`]).

use quotaroute_journal::{PaceWindows, PacingClock, PacingKnobs};
use serde::{Deserialize, Serialize};

use crate::demand_profile::DemandProfile;
use crate::window_id::WindowId;

/// A pace of exactly 1 (on pace), in the per-mille unit paces are computed and journaled in.
pub const ON_PACE: u32 = 1_000;
/// What one unit of weight adds to a deficit per turn at pace 1 (§13: `weight × pace × 1024`).
pub const QUANTUM_PER_WEIGHT: u64 = 1_024;

const MINUTE_MS: u64 = 60_000;
const HOUR_MS: u64 = 60 * MINUTE_MS;

/// Contract: `[defaults.pacing]` (and `pacing = false` on a combo).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PacingSettings {
    /// Off: every pace is 1 and quota-share spends by weight alone.
    pub enabled: bool,
    /// The smallest share of a window's length counted as still to run, so a window about to
    /// reset has a bounded pace: a tenth by default, so that however near a reset is (a reading
    /// saying "resets in 1 s", honest or not), it earns at most 10 × what is left, below `max`.
    /// Quota a tenth of a window from its reset is spent by a target taking most of the
    /// combo's turns already; a larger multiple only takes every turn from the other targets.
    pub min_time_left: f64,
    /// Bounds of a target's pace.
    pub min: f64,
    pub max: f64,
    /// The period a window's burn rate is measured over (the forecast).
    pub burn_window_ms: u64,
    /// The rule's steepness: a target adds `weight × pace^exponent` (≥ 1; 1 = proportional).
    pub exponent: f64,
    /// What `time_left` counts: wall-clock time, or the window's expected demand still to come.
    pub clock: PacingClock,
    /// Which windows pace: all with a reading, or only the longest while it has one.
    pub pace_windows: PaceWindows,
    /// Spare quota only (`crate::spare`): a spare request goes only where every quota window's
    /// pace after it stays above `1 + spare_margin`. 0.75 by default, chosen by measurement on
    /// the simulator's week (docs/measurements.md, "The spare load"): the smallest margin tried
    /// whose spare load fits, seed by seed, in what unpaced routing lost and leaves the working
    /// day's refusals as they were, at 80 and 90 % load (0.2 refused 0.08–0.11 % more).
    pub spare_margin: f64,
}

/// The knobs `[defaults.pacing]` has where the config names none, chosen by measurement
/// (contract: `[defaults.pacing]`; docs/measurements.md, "the knobs of pacing's rule"): of
/// every setting tried on the simulator's subscription week at 70, 80 and 90 % load, the one
/// whose smallest share of the gap to the bound closed over the three loads is largest
/// (24 / 22 / 12 % over 20 seeds), refusing no more than unpaced. Not what a journal without
/// a `pacing_rule` ran: that is [`PacingKnobs::UNJOURNALED`].
pub const DEFAULT_KNOBS: PacingKnobs = PacingKnobs {
    exponent_pm: 1_000,
    clock: PacingClock::Wall,
    pace_windows: PaceWindows::Longest,
};

impl Default for PacingSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            min_time_left: 0.1,
            min: 0.0625,
            max: 16.0,
            burn_window_ms: 30 * MINUTE_MS,
            exponent: f64::from(DEFAULT_KNOBS.exponent_pm) / 1_000.0,
            clock: DEFAULT_KNOBS.clock,
            pace_windows: DEFAULT_KNOBS.pace_windows,
            spare_margin: 0.75,
        }
    }
}

impl PacingSettings {
    /// The knobs of the rule as the journal records them (`pacing_rule`).
    pub fn knobs(&self) -> PacingKnobs {
        PacingKnobs {
            exponent_pm: u32::try_from(Self::per_mille(self.exponent)).unwrap_or(u32::MAX),
            clock: self.clock,
            pace_windows: self.pace_windows,
        }
    }

    /// These settings with the journaled `knobs` in force.
    pub fn with_knobs(&self, knobs: &PacingKnobs) -> Self {
        PacingSettings {
            exponent: f64::from(knobs.exponent_pm) / 1_000.0,
            clock: knobs.clock,
            pace_windows: knobs.pace_windows,
            ..self.clone()
        }
    }

    /// `value` as per mille, rounded, within [1, 10⁹] (NaN and negatives become 1).
    pub(crate) fn per_mille(value: f64) -> u64 {
        (value * 1_000.0).round().clamp(1.0, 1e9) as u64
    }

    fn bounds_pm(&self) -> (u64, u64) {
        let min = Self::per_mille(self.min);
        (min, Self::per_mille(self.max).max(min))
    }
}

/// One window of a connection as pacing reads it: how much of its limit is used, and when it
/// resets (`None`: it rolls, or the source did not say).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowLeft<'a> {
    /// Its name: `5h`, `7d`, `7d:<model>`, `<n>m` / `<n>h` / `<n>d` (Codex), a per-minute
    /// count window `requests:<model>` / `tokens:<model>` / …, or a counted limit's config name
    /// (`requests_5h`, `tokens_7d:<model>`).
    pub window: &'a str,
    pub used: u64,
    /// Never 0 (such readings are ignored before they get here).
    pub limit: u64,
    pub resets_at_ms: Option<u64>,
    /// How long the window is, as its name says ([`WindowId::length_ms`]): read when the name
    /// is, so a pace computed per request does not parse it again.
    length_ms: Option<u64>,
}

impl<'a> WindowLeft<'a> {
    /// The window `window` with `used` of `limit` used, resetting at `resets_at_ms`.
    pub fn of(window: &'a str, used: u64, limit: u64, resets_at_ms: Option<u64>) -> Self {
        WindowLeft {
            window,
            used,
            limit,
            resets_at_ms,
            length_ms: WindowId::parse(window).length_ms(),
        }
    }

    /// How long the window is, from its name (`None`: its name does not say).
    pub fn length_ms(&self) -> Option<u64> {
        self.length_ms
    }
}

/// One window as a combo keeps it for pacing (behaviour §13): what is left in per mille of its
/// limit (rounded up, so only a window used to its limit reads 0), and its reset. Coarse on
/// purpose: a connection re-pushes its view to the combos only when this changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PaceWindow {
    /// Its name (see [`WindowLeft::window`]); read once, into `facts`, when the window is made.
    window: String,
    pub left_pm: u16,
    pub resets_at_ms: Option<u64>,
    /// Reported by an upstream or a push (so used to its limit it is spent, §13); `false`
    /// for a configured limit counted by the router.
    pub reported: bool,
    /// What `window` says, parsed once: a combo reads each window several times per request
    /// (admission, pace, spare), and parsing the name each time cost more than the rule.
    facts: NameFacts,
}

/// What a window's name says that pacing and admission read per request (see [`WindowId`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct NameFacts {
    /// Where the model begins in the name (after the first `:`); `None`: every model.
    model_at: Option<usize>,
    /// [`WindowId::length_ms`].
    length_ms: Option<u64>,
}

impl NameFacts {
    fn of(name: &str) -> Self {
        let id = WindowId::parse(name);
        NameFacts {
            model_at: id.model().map(|model| name.len() - model.len()),
            length_ms: id.length_ms(),
        }
    }
}

impl PaceWindow {
    /// The window `window` with `used` of `limit` (never 0) used.
    pub fn of(
        window: &str,
        used: u64,
        limit: u64,
        resets_at_ms: Option<u64>,
        reported: bool,
    ) -> Self {
        Self::with_left_pm(
            window,
            Self::left_pm_of(used, limit),
            resets_at_ms,
            reported,
        )
    }

    /// What is left of `limit` (0 is read as 1) with `used` used, per mille, rounded up.
    pub fn left_pm_of(used: u64, limit: u64) -> u16 {
        let limit = u128::from(limit.max(1));
        let left = limit.saturating_sub(u128::from(used));
        let left_pm = (left * 1_000).div_ceil(limit).min(1_000);
        u16::try_from(left_pm).unwrap_or(1_000)
    }

    /// The window `window` with `left_pm` per mille of its limit left.
    pub fn with_left_pm(
        window: &str,
        left_pm: u16,
        resets_at_ms: Option<u64>,
        reported: bool,
    ) -> Self {
        PaceWindow {
            window: window.to_owned(),
            left_pm,
            resets_at_ms,
            reported,
            facts: NameFacts::of(window),
        }
    }

    /// Its name as stored: `5h`, `7d:<model>`, `requests:<model>`, `requests_5h`, …
    pub fn window(&self) -> &str {
        &self.window
    }

    /// Whether it concerns `model` (see [`WindowId::applies_to`]).
    pub fn applies_to(&self, model: &str) -> bool {
        self.facts
            .model_at
            .is_none_or(|at| self.window.get(at..) == Some(model))
    }

    /// As [`target_pace`] and `window_block` read it.
    pub fn left(&self) -> WindowLeft<'_> {
        self.left_after(u32::from(self.left_pm), self.resets_at_ms)
    }

    /// This window with `left_pm` per mille left and resetting at `resets_at_ms`, as pacing
    /// reads it (what a request would leave of it, for `spare`).
    pub fn left_after(&self, left_pm: u32, resets_at_ms: Option<u64>) -> WindowLeft<'_> {
        WindowLeft {
            window: &self.window,
            used: u64::from(1_000 - left_pm.min(1_000)),
            limit: 1_000,
            resets_at_ms,
            length_ms: self.facts.length_ms,
        }
    }
}

/// The shortest window pacing reads as quota (an hour: subscription and daily windows); the
/// per-minute count windows below it only saturate.
pub const QUOTA_WINDOW_MIN_MS: u64 = HOUR_MS;

/// Whether `window` is a quota window (at least [`QUOTA_WINDOW_MIN_MS`] long, or of a length
/// its name does not say, as an operator's pushed window): each percent of it is journaled
/// and `replay --summary` counts what its resets left unused.
pub fn is_quota_window(window: &str) -> bool {
    is_quota_length(WindowId::parse(window).length_ms())
}

/// [`is_quota_window`] of a window whose name says it is `length_ms` long.
pub fn is_quota_length(length_ms: Option<u64>) -> bool {
    length_ms.is_none_or(|length| length >= QUOTA_WINDOW_MIN_MS)
}

/// A window's pace in per mille: `left / max(time_left, min_time_left)` (§13), unbounded.
/// A window whose reset has passed is fresh (pace 1); one with no reset, or of unknown length,
/// paces by what is left alone (it rolls: nothing of it is lost at a reset).
pub fn window_pace_pm(window: &WindowLeft<'_>, now_ms: u64, settings: &PacingSettings) -> u64 {
    window_pace_pm_by(window, now_ms, settings, None)
}

/// [`window_pace_pm`] with `clock = "demand"`'s profile: `time_left` is the share of the
/// window's expected demand still to come before its reset (wall-clock time while the profile
/// holds less than a week, or with `clock = "wall"`).
pub fn window_pace_pm_by(
    window: &WindowLeft<'_>,
    now_ms: u64,
    settings: &PacingSettings,
    demand: Option<&DemandProfile>,
) -> u64 {
    if window.resets_at_ms.is_some_and(|reset| now_ms >= reset) {
        return u64::from(ON_PACE);
    }
    let limit = u128::from(window.limit.max(1));
    let left_pm = u128::from(window.limit.saturating_sub(window.used)) * 1_000 / limit;
    let min_time_left_pm = u128::from(PacingSettings::per_mille(settings.min_time_left));
    let profile = demand
        .filter(|profile| settings.clock == PacingClock::Demand && profile.has_a_week(now_ms));
    let time_left_pm = match (window.resets_at_ms, window.length_ms) {
        (Some(reset), Some(length)) => {
            let wall = |to_run: u128| to_run * 1_000 / u128::from(length);
            let to_run = u128::from(reset - now_ms).min(u128::from(length));
            let share = match profile {
                Some(profile) => profile
                    .share_to_come_pm(now_ms, reset, length)
                    .map_or_else(|| wall(to_run), u128::from),
                None => wall(to_run),
            };
            share.max(min_time_left_pm)
        }
        _ => 1_000,
    };
    let pace = left_pm * 1_000 / time_left_pm.max(1);
    u64::try_from(pace).unwrap_or(u64::MAX)
}

/// A target's pace: the smallest among the windows that apply to it, bounded, and the window
/// that set it (`None` when no window has a reading: pace 1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pace {
    pub per_mille: u32,
    pub binding_window: Option<String>,
}

impl Pace {
    /// No reading at all, or pacing off.
    pub fn on_pace() -> Self {
        Self {
            per_mille: ON_PACE,
            binding_window: None,
        }
    }
}

/// The pace of a target whose windows (already narrowed to the requested model) are
/// `windows`. Ties between windows go to the first in the order given.
pub fn target_pace<'a, W>(windows: W, now_ms: u64, settings: &PacingSettings) -> Pace
where
    W: IntoIterator<Item = WindowLeft<'a>>,
    W::IntoIter: Clone,
{
    target_pace_by(windows, now_ms, settings, None)
}

/// Windows of a day or shorter: with `pace_windows = "longest"` they do not pace while a longer
/// window has a reading (they still gate by saturation and spent-blocks).
pub const SHORT_WINDOW_MAX_MS: u64 = 86_400_000;

/// [`target_pace`] with every knob of the rule: `pace_windows` picks the windows that pace,
/// `clock = "demand"` reads `demand` (the combo's requests by hour of the week).
pub fn target_pace_by<'a, W>(
    windows: W,
    now_ms: u64,
    settings: &PacingSettings,
    demand: Option<&DemandProfile>,
) -> Pace
where
    W: IntoIterator<Item = WindowLeft<'a>>,
    W::IntoIter: Clone,
{
    if !settings.enabled {
        return Pace::on_pace();
    }
    let windows = windows.into_iter();
    let is_long = |window: &WindowLeft<'_>| {
        window
            .length_ms
            .is_none_or(|length| length > SHORT_WINDOW_MAX_MS)
    };
    // A second pass over the (borrowed) windows only with `longest`: nothing is collected.
    let longest_only =
        settings.pace_windows == PaceWindows::Longest && windows.clone().any(|w| is_long(&w));
    let binding = windows
        .filter(|window| !longest_only || is_long(window))
        .map(|window| {
            (
                window_pace_pm_by(&window, now_ms, settings, demand),
                window.window,
            )
        })
        .fold(None::<(u64, &str)>, |slowest, (pace, name)| match slowest {
            Some((best, _)) if best <= pace => slowest,
            _ => Some((pace, name)),
        });
    let Some((pace, window)) = binding else {
        return Pace::on_pace();
    };
    let (min, max) = settings.bounds_pm();
    Pace {
        per_mille: u32::try_from(pace.clamp(min, max)).unwrap_or(u32::MAX),
        binding_window: Some(window.to_owned()),
    }
}

/// The spending rule `f(pace) = pace^exponent` in per mille, within [1, u32::MAX]: what one
/// unit of weight earns per turn. Exponent 1 is the pace itself, exactly.
pub fn spend_pm(pace_per_mille: u32, exponent: f64) -> u32 {
    if exponent == 1.0 || !exponent.is_finite() {
        return pace_per_mille;
    }
    let pace = f64::from(pace_per_mille) / 1_000.0;
    let spend = (pace.powf(exponent) * 1_000.0).round();
    if spend >= f64::from(u32::MAX) {
        u32::MAX
    } else {
        (spend as u32).max(1)
    }
}

/// What a target adds to its DRR deficit per turn: `max(1, round(weight × pace × 1024))`.
pub fn quantum(weight: u32, pace_per_mille: u32) -> u64 {
    // In 64 bits whenever the product fits (every weight and pace a config and the pacing
    // rule give): a 128-bit division is a library call, and each decision folds a few.
    let narrow = u64::from(weight)
        .checked_mul(u64::from(pace_per_mille))
        .and_then(|product| product.checked_mul(QUANTUM_PER_WEIGHT))
        .and_then(|scaled| scaled.checked_add(500));
    if let Some(scaled) = narrow {
        return (scaled / 1_000).max(1);
    }
    let scaled = u128::from(weight) * u128::from(pace_per_mille) * u128::from(QUANTUM_PER_WEIGHT);
    let rounded = (scaled + 500) / 1_000;
    u64::try_from(rounded).unwrap_or(u64::MAX).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const NOW: u64 = 1_735_689_600_000;
    const DAY_MS: u64 = 24 * HOUR_MS;

    fn window(name: &str, used: u64, limit: u64, resets_in_ms: Option<u64>) -> WindowLeft<'_> {
        WindowLeft::of(name, used, limit, resets_in_ms.map(|ms| NOW + ms))
    }

    #[test]
    fn the_issue_s_two_half_used_windows_split_80_20() {
        // Both 5-hour windows half used; one resets in 1 h, the other in 4 h.
        let settings = PacingSettings::default();
        let soon = target_pace([window("5h", 50, 100, Some(HOUR_MS))], NOW, &settings);
        let late = target_pace([window("5h", 50, 100, Some(4 * HOUR_MS))], NOW, &settings);
        assert_eq!((soon.per_mille, late.per_mille), (2_500, 625));
        let (a, b) = (quantum(1, soon.per_mille), quantum(1, late.per_mille));
        assert_eq!(a * 20, b * 80);
    }

    #[test]
    fn pace_table() {
        let settings = PacingSettings::default();
        // (window, now relative, expected per mille before bounds)
        let cases = [
            // On pace: half used, half the time left.
            (window("5h", 50, 100, Some(150 * MINUTE_MS)), 1_000),
            // Spending faster than time: 10 % left for 5 of 7 days.
            (window("7d", 90, 100, Some(5 * DAY_MS)), 140),
            // About to reset with most left: time left floors at a tenth of the window.
            (window("5h", 30, 100, Some(MINUTE_MS)), 7_000),
            // Past its reset: fresh.
            (WindowLeft::of("5h", 100, 100, Some(NOW - 1)), 1_000),
            // No reset known: what is left alone.
            (window("7d", 25, 100, None), 750),
            // A reset further than the window's length counts as the whole window.
            (window("5h", 0, 100, Some(50 * HOUR_MS)), 1_000),
            // Used beyond the limit: nothing left.
            (window("5h", 150, 100, Some(HOUR_MS)), 0),
        ];
        for (window, expected) in cases {
            assert_eq!(
                window_pace_pm(&window, NOW, &settings),
                expected,
                "{window:?}"
            );
        }
    }

    #[test]
    fn a_target_paces_by_its_slowest_window_within_bounds() {
        let settings = PacingSettings::default();
        let pace = target_pace(
            [
                window("5h", 10, 100, Some(HOUR_MS)),
                window("7d", 95, 100, Some(6 * DAY_MS)),
            ],
            NOW,
            &settings,
        );
        // 7d: 5 % left for 6/7 of the week = 0.058…, raised to the 1/16 floor.
        assert_eq!(pace.per_mille, 63);
        assert_eq!(pace.binding_window.as_deref(), Some("7d"));
        let fast = target_pace([window("5h", 30, 100, Some(1))], NOW, &settings);
        assert_eq!(fast.per_mille, 7_000);
        let bounded = PacingSettings {
            max: 4.0,
            ..PacingSettings::default()
        };
        let capped = target_pace([window("5h", 0, 100, Some(1))], NOW, &bounded);
        assert_eq!(capped.per_mille, 4_000);
        assert_eq!(target_pace([], NOW, &settings), Pace::on_pace());
        let off = PacingSettings {
            enabled: false,
            ..PacingSettings::default()
        };
        assert_eq!(
            target_pace([window("7d", 95, 100, Some(DAY_MS))], NOW, &off),
            Pace::on_pace()
        );
    }

    /// Issue 49: an account reporting "0 % used, resets in 1 s" took 188 of 200 requests at the
    /// maximum pace (the time left floored at 2 % of the window: 1 / 0.02 = 50, bounded to
    /// 16). Time left is now floored at a tenth of the window, so a reset however near earns at
    /// most 10 × what is left: below the maximum, and the same for a claim of 1 s as of 30 min.
    #[test]
    fn a_window_about_to_reset_does_not_earn_the_maximum_pace() {
        let settings = PacingSettings::default();
        let max = u32::try_from(settings.bounds_pm().1).unwrap();
        for (name, length) in [("5h", 5 * HOUR_MS), ("7d", 7 * DAY_MS)] {
            let in_a_second = target_pace([window(name, 0, 100, Some(1_000))], NOW, &settings);
            assert_eq!(in_a_second.per_mille, 10_000, "{name}");
            assert!(in_a_second.per_mille < max, "{name}");
            // A tenth of the window away or nearer: the same pace; further, less.
            let at_the_floor =
                target_pace([window(name, 0, 100, Some(length / 10))], NOW, &settings);
            assert_eq!(at_the_floor.per_mille, 10_000, "{name}");
            let further = target_pace([window(name, 0, 100, Some(length / 5))], NOW, &settings);
            assert_eq!(further.per_mille, 5_000, "{name}");
        }
        // Against an on-pace account of the same weight: at most 10 of every 11 turns
        // (182 of 200), not 16 of 17 (188).
        let near = quantum(1, 10_000);
        let on_pace = quantum(1, ON_PACE);
        assert_eq!(200 * near / (near + on_pace), 181);
    }

    /// `pace_windows = "longest"`: a 5-hour window that just started does not hold back an
    /// account whose week is about to be lost; with no longer window it still paces.
    #[test]
    fn longest_paces_by_the_week_while_it_has_a_reading() {
        let longest = PacingSettings {
            pace_windows: PaceWindows::Longest,
            ..PacingSettings::default()
        };
        let windows = [
            window("5h", 90, 100, Some(4 * HOUR_MS)),
            window("7d", 20, 100, Some(DAY_MS)),
        ];
        let every = PacingSettings {
            pace_windows: PaceWindows::All,
            ..PacingSettings::default()
        };
        let all = target_pace(windows, NOW, &every);
        assert_eq!(all.binding_window.as_deref(), Some("5h"));
        let week = target_pace(windows, NOW, &longest);
        assert_eq!(week.binding_window.as_deref(), Some("7d"));
        // The default paces by the longest window.
        assert_eq!(target_pace(windows, NOW, &PacingSettings::default()), week);
        // 80 % left with a seventh of the week (142 ‰) to run: 5.633.
        assert_eq!(week.per_mille, 5_633);
        let alone = target_pace([window("5h", 90, 100, Some(4 * HOUR_MS))], NOW, &longest);
        assert_eq!(alone.binding_window.as_deref(), Some("5h"));
    }

    /// `clock = "demand"`: a weekly window resetting Monday morning with 40 % left on Friday
    /// evening has no working hours to come, so it paces at the floor's maximum; the wall
    /// clock sees 2.5 days of 7 still to run. Without a week of history: the wall clock.
    #[test]
    fn the_demand_clock_spends_a_monday_reset_before_the_weekend() {
        use crate::demand_profile::DemandProfile;
        // Monday 2026-11-30 00:00 UTC; working hours 9–17 on weekdays for a week.
        let monday = 1_795_996_800_000;
        let mut profile = DemandProfile::default();
        for day in 0..5 {
            for minute in 0..8 * 60 {
                profile.count(monday + day * DAY_MS + 9 * HOUR_MS + minute * MINUTE_MS);
            }
        }
        let friday_evening = monday + 7 * DAY_MS + 4 * DAY_MS + 18 * HOUR_MS;
        let reset = monday + 14 * DAY_MS + 6 * HOUR_MS;
        let week = WindowLeft::of("7d", 60, 100, Some(reset));
        let demand = PacingSettings {
            clock: PacingClock::Demand,
            ..PacingSettings::default()
        };
        let wall = window_pace_pm_by(&week, friday_evening, &PacingSettings::default(), None);
        let by_demand = window_pace_pm_by(&week, friday_evening, &demand, Some(&profile));
        // Wall: 400 / (60 h / 168 h = 357 ‰) = 1120; demand: 400 / the 100 ‰ floor = 4000.
        assert_eq!((wall, by_demand), (1_120, 4_000));
        // The same profile, a day short of a week: the wall clock.
        let early = monday + 6 * DAY_MS;
        let week_early = WindowLeft {
            resets_at_ms: Some(early + 3 * DAY_MS),
            ..week
        };
        assert_eq!(
            window_pace_pm_by(&week_early, early, &demand, Some(&profile)),
            window_pace_pm_by(&week_early, early, &PacingSettings::default(), None)
        );
    }

    #[test]
    fn quanta_keep_weights_exact_at_pace_one() {
        assert_eq!(quantum(2, ON_PACE), 2_048);
        assert_eq!(quantum(1, ON_PACE), 1_024);
        assert_eq!(quantum(1, 63), 65);
        assert_eq!(quantum(1, 0), 1);
        assert_eq!(quantum(0, ON_PACE), 1);
        assert_eq!(quantum(u32::MAX, u32::MAX), u64::MAX);
    }

    proptest! {
        /// The 64-bit path gives the 128-bit formula's quantum, on both sides of where the
        /// product stops fitting.
        #[test]
        fn a_quantum_is_the_wide_formula_s(
            (weight, pace) in prop_oneof![
                (any::<u32>(), any::<u32>()),
                (0u32..10_000, 0u32..1_000_000),
            ]
        ) {
            let wide = (u128::from(weight) * u128::from(pace) * u128::from(QUANTUM_PER_WEIGHT)
                + 500)
                / 1_000;
            prop_assert_eq!(quantum(weight, pace), u64::try_from(wide).unwrap_or(u64::MAX).max(1));
        }
        /// A window reads its name once, as [`WindowId`] reads it: the model it applies to
        /// and its length, for names of every shape (a model with a `:` in it, a cluster
        /// share, a Codex length, garbage, a kind ending in a character of two bytes).
        #[test]
        fn a_window_reads_its_name_as_window_id_does(
            name in "(5h|7d|300m|0h|requests|tokens|input-tokens|requests_5h|tokens_7d\
                     |requests_5h@cluster|5é|é|)(:(opus|gpt-4o|a:b|é|))?",
            model in "(opus|gpt-4o|a:b|a|b|é|)",
        ) {
            let id = WindowId::parse(&name);
            let kept = PaceWindow::of(&name, 3, 10, None, true);
            prop_assert_eq!(kept.window(), name.as_str());
            prop_assert_eq!(kept.applies_to(&model), id.applies_to(&model));
            prop_assert_eq!(kept.left().length_ms(), id.length_ms());
            prop_assert_eq!(kept.left_after(500, None).length_ms(), id.length_ms());
            prop_assert_eq!(WindowLeft::of(&name, 3, 10, None).length_ms(), id.length_ms());
        }

        /// Pace never leaves its bounds, and a window with more left (same reset) never paces
        /// slower.
        #[test]
        fn pace_is_bounded_and_monotone_in_what_is_left(
            used in 0u64..200, limit in 1u64..200, resets_in in 0u64..(8 * DAY_MS),
        ) {
            let settings = PacingSettings::default();
            let (min, max) = settings.bounds_pm();
            let pace = target_pace([window("7d", used, limit, Some(resets_in))], NOW, &settings);
            prop_assert!(u64::from(pace.per_mille) >= min && u64::from(pace.per_mille) <= max);
            let less_used = target_pace(
                [window("7d", used.saturating_sub(1), limit, Some(resets_in))], NOW, &settings);
            prop_assert!(less_used.per_mille >= pace.per_mille);
        }

        /// A sooner reset (same use, still to come) never paces slower (behaviour §13:
        /// monotone).
        #[test]
        fn pace_is_monotone_in_time_left(
            used in 0u64..=100, resets_in in 1u64..(8 * DAY_MS), sooner_by in 0u64..DAY_MS,
        ) {
            let settings = PacingSettings::default();
            for name in ["5h", "7d"] {
                let later = target_pace([window(name, used, 100, Some(resets_in))], NOW, &settings);
                let sooner = target_pace(
                    [window(name, used, 100, Some(resets_in.saturating_sub(sooner_by).max(1)))],
                    NOW,
                    &settings,
                );
                prop_assert!(sooner.per_mille >= later.per_mille);
            }
        }
    }
}
