//! `[defaults.pacing]` and a combo's `[combos.pacing]` (behaviour §13) → [`PacingSettings`]:
//! whether quota-share spends by pace, the smallest share of a window counted as still to run
//! (a tenth by default), the bounds of a pace, the burn rate's period, and the knobs of the
//! spending rule (`exponent`, `clock`, `pace_windows`) and the spare class's `spare_margin`, parsed once into types here. Checks
//! values only; pacing itself is `quotaroute_actors::policy::pace`'s.

use quotaroute_actors::policy::pace::PacingSettings;
use quotaroute_journal::{PaceWindows, PacingClock};

use super::error::ErrorSink;
use super::raw::RawPacing;

/// The largest exponent accepted: at the largest pace (16) the rule's value still fits.
const MAX_EXPONENT: f64 = 8.0;

/// The validated `[defaults.pacing]` (defaults where a key is absent; the default where a value
/// is wrong, with the reason in `sink`).
pub(crate) fn build(raw: Option<RawPacing>, sink: &mut ErrorSink) -> PacingSettings {
    build_over(raw, &PacingSettings::default(), "defaults.pacing", sink)
}

/// `raw` over `base`: each key present replaces `base`'s value (a wrong one is reported under
/// `prefix` and `base`'s kept).
pub(crate) fn build_over(
    raw: Option<RawPacing>,
    base: &PacingSettings,
    prefix: &str,
    sink: &mut ErrorSink,
) -> PacingSettings {
    let Some(raw) = raw else {
        return base.clone();
    };
    let mut fraction =
        |value: Option<f64>, fallback: f64, key: &str, ok: fn(f64) -> bool, rule| match value {
            Some(value) if value.is_finite() && ok(value) => value,
            Some(_) => {
                sink.push(format!("{prefix}.{key}"), rule);
                fallback
            }
            None => fallback,
        };
    let min_time_left = fraction(
        raw.min_time_left,
        base.min_time_left,
        "min_time_left",
        |v| v > 0.0 && v <= 1.0,
        "must be above 0 and at most 1 (a share of the window's length)",
    );
    let min = fraction(
        raw.min,
        base.min,
        "min",
        |v| v > 0.0 && v <= 1.0,
        "must be above 0 and at most 1",
    );
    let max = fraction(
        raw.max,
        base.max,
        "max",
        |v| (1.0..=1_000.0).contains(&v),
        "must be from 1 to 1000",
    );
    let exponent = fraction(
        raw.exponent,
        base.exponent,
        "exponent",
        |v| (1.0..=MAX_EXPONENT).contains(&v),
        "must be from 1 to 8 (a target adds weight × pace^exponent; 1 = proportional)",
    );
    let spare_margin = fraction(
        raw.spare_margin,
        base.spare_margin,
        "spare_margin",
        |v| (0.0..=15.0).contains(&v),
        "must be from 0 to 15 (a spare request goes where the pace after it stays above 1 + this)",
    );
    let burn_window_ms = match raw.burn_window_ms {
        Some(0) => {
            sink.push(format!("{prefix}.burn_window_ms"), "must be at least 1");
            base.burn_window_ms
        }
        Some(ms) => ms,
        None => base.burn_window_ms,
    };
    let clock = match raw.clock.as_deref() {
        None => base.clock,
        Some("wall") => PacingClock::Wall,
        Some("demand") => PacingClock::Demand,
        Some(other) => {
            sink.push(
                format!("{prefix}.clock"),
                format!("`{other}` is not one of `wall`, `demand`"),
            );
            base.clock
        }
    };
    let pace_windows = match raw.pace_windows.as_deref() {
        None => base.pace_windows,
        Some("all") => PaceWindows::All,
        Some("longest") => PaceWindows::Longest,
        Some(other) => {
            sink.push(
                format!("{prefix}.pace_windows"),
                format!("`{other}` is not one of `all`, `longest`"),
            );
            base.pace_windows
        }
    };
    PacingSettings {
        enabled: raw.enabled.unwrap_or(base.enabled),
        min_time_left,
        min,
        max,
        burn_window_ms,
        exponent,
        clock,
        pace_windows,
        spare_margin,
    }
}
