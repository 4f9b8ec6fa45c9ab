//! Pace and forecast of every bucket and combo at `now` (behaviour §13 "Forecast" and
//! "Seen"), composed from the journal's fold and the topology for `GET /admin/state`, `/metrics`
//! and `replay --state-at` alike. The arithmetic is `policy::forecast`'s; this file only picks
//! the numbers it needs. It must not route: selection reads its own paces (`connection_view`).

use crate::policy::buckets::{each_limit, BucketView};
use crate::policy::connection_state::ConnectionState;
use crate::policy::connection_view::ConnectionView;
use crate::policy::forecast::{self, Burn, TargetSupply};
use crate::policy::pace::{self, PaceWindow, PacingSettings, WindowLeft, ON_PACE};
use crate::policy::router_state::RouterState;
use crate::policy::topology::{ComboSpec, ConnectionSpec, Topology};
use crate::policy::window_block::Reserve;
use crate::policy::window_id::WindowId;

/// Windows shorter than this (per-minute counts) reset too often to say when a pool runs out.
const FORECAST_WINDOW_MIN_MS: u64 = 3_600_000;

/// One bucket's pace and forecast.
#[derive(Debug, Clone, PartialEq)]
pub struct BucketOutlook {
    /// The window's own pace (§13, not bounded), as a float: 1.0 is on pace.
    pub pace: f64,
    pub runs_out_at_ms: Option<u64>,
    /// What is left is within the connection's reserve.
    pub reserved: bool,
}

/// One combo's forecast and each target's pace (in its order).
#[derive(Debug, Clone, PartialEq)]
pub struct ComboOutlook {
    pub runs_out_at_ms: Option<u64>,
    pub next_reset_at_ms: Option<u64>,
    /// Bounded, as its DRR turn uses it (1.0 when the combo is not paced).
    pub target_paces: Vec<f64>,
}

/// Whether a bucket is a configured limit the router counts (else a reading).
pub(crate) fn is_counted(window: &str, spec: &ConnectionSpec) -> bool {
    each_limit(&spec.limits).any(|limit| limit.name == window)
}

/// How much of `window` was used over the burn period before `now_ms`.
pub(crate) fn burn_of(
    state: &RouterState,
    learned: &ConnectionState,
    spec: &ConnectionSpec,
    window: &str,
    now_ms: u64,
    settings: &PacingSettings,
) -> Option<Burn> {
    if is_counted(window, spec) {
        learned
            .buckets
            .counted_burn(window, now_ms, settings.burn_window_ms, &spec.limits)
    } else {
        state
            .burn
            .window_burn(&spec.id, window, now_ms, settings.burn_window_ms)
    }
}

fn left_pm(used: u64, limit: u64) -> f64 {
    limit.saturating_sub(used) as f64 * 1_000.0 / limit.max(1) as f64
}

/// The pace, forecast and reserve of one bucket of `spec` as `views()` lists it.
pub fn bucket_outlook(
    state: &RouterState,
    learned: &ConnectionState,
    spec: &ConnectionSpec,
    bucket: &BucketView,
    settings: &PacingSettings,
    now_ms: u64,
) -> BucketOutlook {
    let counted = is_counted(&bucket.window, spec);
    // A counted limit rolls (no reset), as pacing reads it.
    let resets_at_ms = if counted { None } else { bucket.resets_at_ms };
    let left = WindowLeft::of(
        &bucket.window,
        bucket.used,
        bucket.limit.max(1),
        resets_at_ms,
    );
    let pace_pm = pace::window_pace_pm(&left, now_ms, settings);
    let burn = burn_of(state, learned, spec, &bucket.window, now_ms, settings);
    let window = PaceWindow::of(
        &bucket.window,
        bucket.used,
        bucket.limit,
        resets_at_ms,
        !counted,
    );
    BucketOutlook {
        pace: per_mille_as_pace(pace_pm),
        runs_out_at_ms: forecast::window_runs_out_at(
            left_pm(bucket.used, bucket.limit),
            burn,
            resets_at_ms,
            WindowId::parse(&bucket.window).length_ms(),
            now_ms,
        ),
        reserved: spec.reserve.holds(&window),
    }
}

/// A per-mille pace as a float (three decimals, like the journal's per mille).
pub fn per_mille_as_pace(per_mille: u64) -> f64 {
    per_mille as f64 / f64::from(ON_PACE)
}

/// Whether a window counts for a pool's forecast: long enough, and not past its reset.
fn forecast_window(window: &PaceWindow, now_ms: u64) -> bool {
    window.resets_at_ms.is_none_or(|reset| now_ms < reset)
        && WindowId::parse(window.window())
            .length_ms()
            .is_none_or(|length| length >= FORECAST_WINDOW_MIN_MS)
}

/// How many more requests `model` on a connection takes before a window is spent or within
/// its reserve (0 when blocked now; `None` when no window says).
fn target_requests_left(
    state: &RouterState,
    learned: &ConnectionState,
    spec: &ConnectionSpec,
    view: &ConnectionView,
    model: &str,
    settings: &PacingSettings,
    now_ms: u64,
) -> Option<f64> {
    if view.block_for(model, now_ms).is_some() {
        return Some(0.0);
    }
    view.windows
        .iter()
        .filter(|w| w.applies_to(model) && forecast_window(w, now_ms))
        .filter_map(|w| {
            let burn = burn_of(state, learned, spec, w.window(), now_ms, settings)?;
            let (requests, _) = learned.buckets.requests_since(now_ms, burn.span_ms);
            let reserve_pm = reserve_pm(&spec.reserve, w.window());
            forecast::requests_left(f64::from(w.left_pm), reserve_pm, Some(burn), requests)
        })
        .reduce(f64::min)
}

fn reserve_pm(reserve: &Reserve, window: &str) -> f64 {
    reserve
        .pct_for(window)
        .map_or(0.0, |pct| f64::from(pct) * 10.0)
}

/// `combo`'s forecast and its targets' paces at `now_ms`.
pub fn combo_outlook(
    state: &RouterState,
    topology: &Topology,
    combo: &ComboSpec,
    now_ms: u64,
) -> ComboOutlook {
    let settings = &combo.pacing;
    let mut supplies = Vec::with_capacity(combo.targets.len());
    let mut target_paces = Vec::with_capacity(combo.targets.len());
    let mut next_reset_at_ms: Option<u64> = None;
    for target in &combo.targets {
        let Some(spec) = topology
            .connections
            .iter()
            .find(|c| c.id == target.connection)
        else {
            target_paces.push(1.0);
            continue;
        };
        let learned = state.connection(&spec.provider, &spec.id);
        let view = ConnectionView::of(&learned, spec, now_ms);
        let pace_pm = combo.paced().map_or(ON_PACE, |paced| {
            view.pace_for(&target.model, now_ms, paced).per_mille
        });
        target_paces.push(per_mille_as_pace(u64::from(pace_pm)));
        for window in view
            .windows
            .iter()
            .filter(|w| w.applies_to(&target.model) && forecast_window(w, now_ms))
        {
            if let Some(reset) = window.resets_at_ms {
                next_reset_at_ms = Some(next_reset_at_ms.map_or(reset, |next| next.min(reset)));
            }
        }
        supplies.push(TargetSupply {
            share: f64::from(target.weight) * f64::from(pace_pm) / f64::from(ON_PACE),
            requests_left: target_requests_left(
                state,
                &learned,
                spec,
                &view,
                &target.model,
                settings,
                now_ms,
            ),
        });
    }
    let rate = state
        .burn
        .combo_rate(&combo.name, now_ms, settings.burn_window_ms);
    ComboOutlook {
        runs_out_at_ms: forecast::combo_runs_out_at(&supplies, rate, next_reset_at_ms, now_ms),
        next_reset_at_ms,
        target_paces,
    }
}
