//! Spare quota only (behaviour §13): whether a target may serve a spare-class request — only
//! quota its windows are forecast to lose at their resets — and, when it may not, from when it
//! is next forecast to. Pure: a target's windows (as the combo keeps them), the request's
//! expected cost, the pacing settings and `now` in; a verdict out. It never blocks or orders a
//! target itself (the combo turns a refusal into a `no_spare` block) and never reads a clock.
//!
//! The rule: every quota window (an hour or longer, §13 `is_quota_window`) that applies to the
//! model has a reset, and its pace with the request's expected cost taken off what is left is
//! above `1 + pacing.spare_margin` — so the window resets with quota unused even after this
//! request, at its current burn. A target with no such window (no reading, or a window that
//! rolls with no reset) has no quota forecast to be lost: it never serves spare requests.
//! Every window is read, whatever `pace_windows` says: a 5-hour window on pace is what the
//! working users need in the next hours, however much of the week is left.

use crate::demand_profile::DemandProfile;
use crate::pace::{is_quota_window, window_pace_pm_by, PaceWindow, PacingSettings};
use crate::window_id::WindowId;

/// The expected cost the live router charges a spare request against each window, per mille
/// of the window's limit: the resolution of the windows the combo keeps (`PaceWindow::left_pm`),
/// since the combo knows neither a window's limit in its units nor the request's size.
pub const LIVE_SPARE_COST_PM: u32 = 1;

/// The verdict for one target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpareVerdict {
    /// Quota forecast to be lost: the spare request may go here.
    Spare,
    /// Not now; `retry_at_ms` is when the target is next forecast to have spare quota, at the
    /// latest its next reset (`None`: no reset known, nothing of it is ever forecast lost).
    NotSpare { retry_at_ms: Option<u64> },
}

/// The pace a spare request must stay above, per mille (`(1 + margin) × 1000`).
pub fn spare_threshold_pm(settings: &PacingSettings) -> u64 {
    let margin = if settings.spare_margin.is_finite() {
        settings.spare_margin.max(0.0)
    } else {
        0.0
    };
    ((1.0 + margin) * 1_000.0).round().min(1e12) as u64
}

/// Whether the target whose windows are `windows` may serve a spare request for `model` that
/// is expected to cost `cost_pm` per mille of each window.
pub fn spare_verdict(
    windows: &[PaceWindow],
    model: &str,
    cost_pm: u32,
    now_ms: u64,
    settings: &PacingSettings,
    demand: Option<&DemandProfile>,
) -> SpareVerdict {
    let threshold = spare_threshold_pm(settings);
    let mut any = false;
    let mut spare = true;
    // Every window must be spare: the target is spare from the latest of their times.
    let mut spare_from: Option<u64> = Some(now_ms);
    let mut next_reset: Option<u64> = None;
    for window in windows
        .iter()
        .filter(|w| w.applies_to(model) && is_quota_window(w.window()))
    {
        any = true;
        let Some(reset) = window.resets_at_ms.filter(|reset| *reset > now_ms) else {
            // It rolls (or its reset passed: a fresh window, on pace): nothing is lost.
            spare = false;
            spare_from = None;
            continue;
        };
        next_reset = Some(next_reset.map_or(reset, |r: u64| r.min(reset)));
        let left_after = u32::from(window.left_pm.min(1_000)).saturating_sub(cost_pm);
        let after = window.left_after(left_after, Some(reset));
        if window_pace_pm_by(&after, now_ms, settings, demand) > threshold {
            continue;
        }
        spare = false;
        let from = spare_from_ms(window.window(), left_after, reset, threshold, settings);
        spare_from = match (spare_from, from) {
            (Some(a), Some(b)) => Some(a.max(b)),
            _ => None,
        };
    }
    if any && spare {
        return SpareVerdict::Spare;
    }
    let retry_at_ms = match (spare_from, next_reset) {
        (Some(from), Some(reset)) => Some(from.min(reset)),
        (None, reset) => reset,
        (Some(_), None) => None,
    };
    SpareVerdict::NotSpare { retry_at_ms }
}

/// When a window with `left_pm` left (after the request) and reset `reset` paces above
/// `threshold` on the wall clock if nothing more is used: the pace rises as its reset nears,
/// up to `left / min_time_left`. `None` when it never does before its reset. The same integer
/// arithmetic as [`window_pace_pm_by`], so the time given is the first millisecond it is spare.
fn spare_from_ms(
    window: &str,
    left_pm: u32,
    reset: u64,
    threshold: u64,
    settings: &PacingSettings,
) -> Option<u64> {
    let length = u128::from(WindowId::parse(window).length_ms()?);
    let min_time_left_pm = u128::from(PacingSettings::per_mille(settings.min_time_left));
    // pace = left × 1000 / time_left_pm > threshold ⟺ time_left_pm ≤ this.
    let most_time_left_pm = u128::from(left_pm) * 1_000 / (u128::from(threshold) + 1);
    if most_time_left_pm < min_time_left_pm.max(1) {
        return None;
    }
    // time_left_pm = ⌊to_run × 1000 / length⌋ ≤ most ⟺ to_run < (most + 1) × length / 1000.
    let most_to_run_ms = ((most_time_left_pm + 1) * length).div_ceil(1_000) - 1;
    let most_to_run_ms = u64::try_from(most_to_run_ms).unwrap_or(u64::MAX);
    Some(reset.saturating_sub(most_to_run_ms))
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 1_796_000_000_000;
    const HOUR_MS: u64 = 3_600_000;
    const DAY_MS: u64 = 24 * HOUR_MS;

    fn window(name: &str, left_pm: u16, resets_in_ms: Option<u64>) -> PaceWindow {
        PaceWindow::with_left_pm(name, left_pm, resets_in_ms.map(|ms| NOW + ms), true)
    }

    /// The contract's first margin, 0.2, which the tests' arithmetic reads (the default is
    /// larger, by measurement).
    fn margin_0_2() -> PacingSettings {
        PacingSettings {
            spare_margin: 0.2,
            ..PacingSettings::default()
        }
    }

    fn verdict(windows: &[PaceWindow], cost_pm: u32) -> SpareVerdict {
        spare_verdict(windows, "m", cost_pm, NOW, &margin_0_2(), None)
    }

    #[test]
    fn the_default_margin_is_the_measured_one() {
        assert_eq!(PacingSettings::default().spare_margin, 0.75);
        assert_eq!(spare_threshold_pm(&PacingSettings::default()), 1_750);
        // 50 % left with a day of seven to run (pace 3.5) is spare under it too.
        let week = [window("7d", 500, Some(DAY_MS))];
        assert_eq!(
            spare_verdict(&week, "m", 1, NOW, &PacingSettings::default(), None),
            SpareVerdict::Spare
        );
    }

    #[test]
    fn a_week_about_to_reset_half_unused_is_spare() {
        // 50 % left with a day of seven to run: pace 3.5.
        assert_eq!(
            verdict(&[window("7d", 500, Some(DAY_MS))], 1),
            SpareVerdict::Spare
        );
    }

    /// The verdict of one window with `left_pm` left resetting at `reset`, at `now`.
    fn at(left_pm: u16, reset: u64, now: u64) -> SpareVerdict {
        let window = PaceWindow::with_left_pm("7d", left_pm, Some(reset), true);
        spare_verdict(&[window], "m", 0, now, &margin_0_2(), None)
    }

    #[test]
    fn a_window_on_pace_is_refused_until_its_pace_would_pass_the_margin() {
        // Half left (after the request's 1 ‰), half the week to run: pace 1. With nothing more
        // used it passes 1.2 when less than 500/1200 of the week is left: 70 h before the reset
        // (within the ‰ resolution of the time left: 10 min of a week).
        let reset = NOW + 84 * HOUR_MS;
        let SpareVerdict::NotSpare {
            retry_at_ms: Some(from),
        } = verdict(&[window("7d", 501, Some(84 * HOUR_MS))], 1)
        else {
            panic!("a window on pace is not spare");
        };
        let seventy_h_before = reset - 70 * HOUR_MS;
        assert!(from.abs_diff(seventy_h_before) <= 10 * 60_000, "{from}");
        // The first millisecond it is spare.
        assert_eq!(at(500, reset, from), SpareVerdict::Spare);
        assert!(matches!(
            at(500, reset, from - 1),
            SpareVerdict::NotSpare { .. }
        ));
    }

    #[test]
    fn the_margin_is_strict_and_counts_after_the_request() {
        // 60 % left, half the week to run: pace 1.2 exactly is not above 1.2.
        let half_week = 84 * HOUR_MS;
        assert!(matches!(
            verdict(&[window("7d", 600, Some(half_week))], 0),
            SpareVerdict::NotSpare { .. }
        ));
        assert_eq!(
            verdict(&[window("7d", 602, Some(half_week))], 0),
            SpareVerdict::Spare
        );
        // The same window, and a request expected to cost 2 ‰: back to 1.2, refused.
        assert!(matches!(
            verdict(&[window("7d", 602, Some(half_week))], 2),
            SpareVerdict::NotSpare { .. }
        ));
        // A larger margin refuses what 0.2 serves.
        let strict = PacingSettings {
            spare_margin: 0.5,
            ..PacingSettings::default()
        };
        assert!(matches!(
            spare_verdict(
                &[window("7d", 700, Some(half_week))],
                "m",
                1,
                NOW,
                &strict,
                None
            ),
            SpareVerdict::NotSpare { .. }
        ));
    }

    #[test]
    fn every_quota_window_must_be_spare_whatever_pace_windows_says() {
        // The week is about to be lost but the 5-hour window is on pace: the working users
        // need it in the next hours.
        let windows = [
            window("7d", 500, Some(DAY_MS)),
            window("5h", 500, Some(150 * 60_000)),
        ];
        let SpareVerdict::NotSpare {
            retry_at_ms: Some(from),
        } = verdict(&windows, 1)
        else {
            panic!("an on-pace 5-hour window refuses");
        };
        // The 5-hour window passes 1.2 about 499/1200 of 5 h (125 min) before its reset.
        let five_h_reset = NOW + 150 * 60_000;
        assert!(
            from.abs_diff(five_h_reset - 124 * 60_000 - 45_000) <= 20_000,
            "{from}"
        );
        assert!(from > NOW && from < five_h_reset);
        // A per-minute window does not decide.
        let with_minute = [
            window("7d", 500, Some(DAY_MS)),
            window("tokens:m", 100, Some(30_000)),
        ];
        assert_eq!(verdict(&with_minute, 1), SpareVerdict::Spare);
    }

    #[test]
    fn no_reading_or_a_rolling_window_is_never_spare() {
        assert_eq!(
            verdict(&[], 1),
            SpareVerdict::NotSpare { retry_at_ms: None }
        );
        assert_eq!(
            verdict(&[window("7d", 900, None)], 1),
            SpareVerdict::NotSpare { retry_at_ms: None }
        );
        // A reading for another model does not count.
        let other = window("7d:other", 900, Some(DAY_MS));
        assert_eq!(
            verdict(&[other], 1),
            SpareVerdict::NotSpare { retry_at_ms: None }
        );
    }

    #[test]
    fn a_window_spent_faster_than_its_time_retries_at_its_reset() {
        // 5 % left with most of the week to run: even at the 1/10 floor its pace stays 0.5.
        let reset_in = 5 * DAY_MS;
        assert_eq!(
            verdict(&[window("7d", 50, Some(reset_in))], 1),
            SpareVerdict::NotSpare {
                retry_at_ms: Some(NOW + reset_in)
            }
        );
    }
}
