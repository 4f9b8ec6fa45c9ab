//! `[defaults.pacing]` (behaviour §13) → [`PacingSettings`]: whether quota-share spends by pace,
//! the smallest share of a window counted as still to run (a tenth by default), the bounds of a
//! pace and the burn rate's period. Checks values only; pacing itself is `quotaroute_actors::policy::pace`'s.

use quotaroute_actors::policy::pace::PacingSettings;

use super::error::ErrorSink;
use super::raw::RawPacing;

/// The validated section (defaults where a key is absent; the default where a value is wrong,
/// with the reason in `sink`).
pub(crate) fn build(raw: Option<RawPacing>, sink: &mut ErrorSink) -> PacingSettings {
    let defaults = PacingSettings::default();
    let Some(raw) = raw else {
        return defaults;
    };
    let mut fraction =
        |value: Option<f64>, fallback: f64, key: &str, ok: fn(f64) -> bool, rule| match value {
            Some(value) if value.is_finite() && ok(value) => value,
            Some(_) => {
                sink.push(format!("defaults.pacing.{key}"), rule);
                fallback
            }
            None => fallback,
        };
    let min_time_left = fraction(
        raw.min_time_left,
        defaults.min_time_left,
        "min_time_left",
        |v| v > 0.0 && v <= 1.0,
        "must be above 0 and at most 1 (a share of the window's length)",
    );
    let min = fraction(
        raw.min,
        defaults.min,
        "min",
        |v| v > 0.0 && v <= 1.0,
        "must be above 0 and at most 1",
    );
    let max = fraction(
        raw.max,
        defaults.max,
        "max",
        |v| (1.0..=1_000.0).contains(&v),
        "must be from 1 to 1000",
    );
    let burn_window_ms = match raw.burn_window_ms {
        Some(0) => {
            sink.push("defaults.pacing.burn_window_ms", "must be at least 1");
            defaults.burn_window_ms
        }
        Some(ms) => ms,
        None => defaults.burn_window_ms,
    };
    PacingSettings {
        enabled: raw.enabled.unwrap_or(defaults.enabled),
        min_time_left,
        min,
        max,
        burn_window_ms,
    }
}
