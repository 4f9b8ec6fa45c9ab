//! "Spare now" (behaviour §13 "Spare quota only"): per combo, how much quota its targets'
//! windows are forecast to lose at their next resets — what is left less what the window's
//! burn over `pacing.burn_window_ms` spends before the reset — summed per window name over the
//! combo's connections (each connection once), in the window's own units (a reading's units:
//! percent for subscription headers, tokens or requests for counted ones). What spare requests
//! could soak up; shown by `/admin/state`, `/metrics` and the dashboard, never routed by.

use serde::Serialize;

use crate::policy::buckets::BucketView;
use crate::policy::pace::is_quota_window;
use crate::policy::router_state::RouterState;
use crate::policy::topology::{ComboSpec, Topology};
use crate::policy::window_id::WindowId;
use crate::pool_forecast::{burn_of, is_counted};

/// One window name of a combo: its forecast loss at the next resets.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SpareNow {
    pub window: String,
    /// Forecast unused at the next reset, summed over the connections that have the window.
    pub unused_at_reset: u64,
    /// The sum of those windows' limits (the same units).
    pub limit: u64,
    /// The earliest of their resets.
    pub next_reset_at_ms: u64,
}

/// What one window is forecast to hold unused at its reset: what is left less what its burn
/// spends until then; `None` for a window that rolls (nothing is lost at a reset), a
/// per-minute one, or one whose reset passed.
pub fn forecast_unused(bucket: &BucketView, burn_per_ms: f64, now_ms: u64) -> Option<u64> {
    let reset = bucket.resets_at_ms.filter(|reset| *reset > now_ms)?;
    if !is_quota_window(&bucket.window) {
        return None;
    }
    let left = bucket.limit.saturating_sub(bucket.used) as f64;
    let spent_until_reset = burn_per_ms.max(0.0) * (reset - now_ms) as f64;
    Some((left - spent_until_reset).max(0.0).floor() as u64)
}

/// `combo`'s spare now, by window name (in the order first met).
pub fn combo_spare_now(
    state: &RouterState,
    topology: &Topology,
    combo: &ComboSpec,
    now_ms: u64,
) -> Vec<SpareNow> {
    let settings = &combo.pacing;
    let mut out: Vec<SpareNow> = Vec::new();
    let mut seen: Vec<(&str, String)> = Vec::new();
    for target in &combo.targets {
        let Some(spec) = topology
            .connections
            .iter()
            .find(|c| c.id == target.connection)
        else {
            continue;
        };
        let learned = state.connection(&spec.provider, &spec.id);
        for bucket in learned.buckets.views(now_ms, &spec.limits, &spec.buckets) {
            if is_counted(&bucket.window, spec)
                || !WindowId::parse(&bucket.window).applies_to(&target.model)
                || seen
                    .iter()
                    .any(|(id, window)| *id == spec.id && *window == bucket.window)
            {
                continue;
            }
            let burn_per_ms = burn_of(state, &learned, spec, &bucket.window, now_ms, settings)
                .and_then(|burn| burn.pm_per_ms())
                .map_or(0.0, |pm| pm / 1_000.0 * bucket.limit as f64);
            let Some(unused) = forecast_unused(&bucket, burn_per_ms, now_ms) else {
                continue;
            };
            let reset = bucket.resets_at_ms.unwrap_or(now_ms);
            seen.push((&spec.id, bucket.window.clone()));
            match out.iter_mut().find(|s| s.window == bucket.window) {
                Some(sum) => {
                    sum.unused_at_reset += unused;
                    sum.limit += bucket.limit;
                    sum.next_reset_at_ms = sum.next_reset_at_ms.min(reset);
                }
                None => out.push(SpareNow {
                    window: bucket.window.clone(),
                    unused_at_reset: unused,
                    limit: bucket.limit,
                    next_reset_at_ms: reset,
                }),
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bucket(window: &str, used: u64, limit: u64, resets_at_ms: Option<u64>) -> BucketView {
        BucketView {
            window: window.to_owned(),
            used,
            limit,
            saturated: false,
            resets_at_ms,
        }
    }

    #[test]
    fn what_is_left_less_what_the_burn_spends_before_the_reset() {
        let now = 1_000_000;
        let hour = 3_600_000;
        // 60 of 100 left, an hour to run, burning 20 an hour: 40 lost.
        let burning = bucket("5h", 40, 100, Some(now + hour));
        assert_eq!(forecast_unused(&burning, 20.0 / hour as f64, now), Some(40));
        // Burning faster than it lasts: nothing lost.
        assert_eq!(forecast_unused(&burning, 1.0 / 1_000.0, now), Some(0));
        // No burn: everything left is lost.
        assert_eq!(forecast_unused(&burning, 0.0, now), Some(60));
        // Rolling, past its reset, or per minute: not a loss at a reset.
        assert_eq!(forecast_unused(&bucket("7d", 0, 100, None), 0.0, now), None);
        assert_eq!(
            forecast_unused(&bucket("7d", 0, 100, Some(now)), 0.0, now),
            None
        );
        assert_eq!(
            forecast_unused(&bucket("tokens:m", 0, 100, Some(now + 1)), 0.0, now),
            None
        );
    }
}
