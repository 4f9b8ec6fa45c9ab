//! A combo's copy of one connection's routing-relevant state (health, lockouts, saturated
//! usage windows, and every window's share left for pacing), pushed by the connection's actor
//! whenever it changes and holding absolute times so it stays right as time passes, and the
//! connection's own block (§2 step 0 after the breaker: cooldown, disabled, lockout, then a
//! spent or reserved window, §13). Plain data read by `admission`; never mutated.

use quotaroute_journal::BlockReason;

use crate::connection_state::ConnectionState;
use crate::cooldown::ConnectionHealth;
use crate::demand_profile::DemandProfile;
use crate::lockout::ModelLockouts;
use crate::pace::{self, Pace, PaceWindow, PacingSettings};
use crate::topology::ConnectionSpec;
use crate::window_block::{self, Reserve, WindowBlockReason};
use crate::window_id::WindowId;

/// A hard block: why, and for how long if it ends by itself.
pub type Block = (BlockReason, Option<u64>);

/// A connection's own block on `model` at `now`: cooldown or disabled first, then the model's
/// lockout.
pub fn connection_block(
    health: &ConnectionHealth,
    lockouts: &ModelLockouts,
    model: &str,
    now_ms: u64,
) -> Option<Block> {
    if let Some(block) = health.block_at(now_ms) {
        return Some(block);
    }
    lockouts
        .block_at(model, now_ms)
        .map(|(reason, remaining)| (reason, Some(remaining)))
}

/// A saturated usage window and when it clears.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SaturatedWindow {
    /// `None`: every model (`5h`, `7d`); otherwise the model the window is about.
    pub model: Option<String>,
    pub until_ms: u64,
}

/// How long a counted-usage saturation is assumed to last when the window has no reset time:
/// the view is re-pushed on the next outcome anyway.
const SATURATION_RECHECK_MS: u64 = 60_000;

/// A combo's copy of one connection's routing-relevant state.
#[derive(Debug, Clone, PartialEq)]
pub struct ConnectionView {
    pub health: ConnectionHealth,
    pub lockouts: ModelLockouts,
    pub saturated: Vec<SaturatedWindow>,
    /// Every window with a reading or a configured limit, coarse (per mille left).
    pub windows: Vec<PaceWindow>,
    pub reserve: Reserve,
}

impl ConnectionView {
    /// The view of `state` as of `now_ms`.
    pub fn of(state: &ConnectionState, spec: &ConnectionSpec, now_ms: u64) -> Self {
        ConnectionView {
            health: state.health.clone(),
            lockouts: state.lockouts.clone(),
            saturated: saturated_windows(state, spec, now_ms),
            windows: state.buckets.pace_windows(now_ms, &spec.limits),
            reserve: spec.reserve.clone(),
        }
    }

    /// Whether [`ConnectionView::of`] would equal `self`, without copying the state.
    pub fn matches(&self, state: &ConnectionState, spec: &ConnectionSpec, now_ms: u64) -> bool {
        self.health == state.health
            && self.lockouts == state.lockouts
            && self.saturated_are(state, spec, now_ms)
            && state
                .buckets
                .pace_windows_are(&self.windows, now_ms, &spec.limits)
            && self.reserve == spec.reserve
    }

    /// Whether [`saturated_windows`] would equal `self.saturated`, without copying any name.
    fn saturated_are(&self, state: &ConnectionState, spec: &ConnectionSpec, now_ms: u64) -> bool {
        let mut known = self.saturated.iter();
        state
            .buckets
            .saturated_windows(now_ms, &spec.limits, &spec.buckets)
            .all(|(window, resets_at_ms)| {
                known.next().is_some_and(|known| {
                    known.model.as_deref() == WindowId::parse(&window).model()
                        && known.until_ms == saturated_until(resets_at_ms, now_ms)
                })
            })
            && known.next().is_none()
    }

    /// Connection block first, then the model's lockout, then a spent or reserved window
    /// (until its reset; one with no reset known is looked at again within a minute).
    pub fn block_for(&self, model: &str, now_ms: u64) -> Option<Block> {
        connection_block(&self.health, &self.lockouts, model, now_ms)
            .or_else(|| self.window_block(model, now_ms))
    }

    /// A window of `model` that is spent (`quota_exhausted`) or within its reserve
    /// (`reserved`), §13.
    pub fn window_block(&self, model: &str, now_ms: u64) -> Option<Block> {
        if self.windows.is_empty() {
            return None;
        }
        let applying = self.windows.iter().filter(|w| w.applies_to(model));
        let block = window_block::window_block(applying, &self.reserve, now_ms)?;
        let reason = match block.reason {
            WindowBlockReason::Spent => BlockReason::QuotaExhausted,
            WindowBlockReason::Reserved => BlockReason::Reserved,
        };
        let until_ms = block
            .until_ms
            .unwrap_or(now_ms.saturating_add(SATURATION_RECHECK_MS));
        Some((reason, Some(until_ms.saturating_sub(now_ms))))
    }

    /// The pace of `model` on this connection (§13): its slowest window's, bounded; 1 with
    /// no window or pacing off.
    pub fn pace_for(&self, model: &str, now_ms: u64, settings: &PacingSettings) -> Pace {
        self.pace_by(model, now_ms, settings, None)
    }

    /// [`Self::pace_for`] with the combo's demand profile for `clock = "demand"`.
    pub fn pace_by(
        &self,
        model: &str,
        now_ms: u64,
        settings: &PacingSettings,
        demand: Option<&DemandProfile>,
    ) -> Pace {
        if self.windows.is_empty() {
            return Pace::on_pace();
        }
        let applying = self
            .windows
            .iter()
            .filter(|w| w.applies_to(model))
            .map(PaceWindow::left);
        pace::target_pace_by(applying, now_ms, settings, demand)
    }

    pub fn is_saturated(&self, model: &str, now_ms: u64) -> bool {
        self.saturated
            .iter()
            .any(|w| now_ms < w.until_ms && w.model.as_deref().is_none_or(|m| m == model))
    }
}

fn saturated_windows(
    state: &ConnectionState,
    spec: &ConnectionSpec,
    now_ms: u64,
) -> Vec<SaturatedWindow> {
    state
        .buckets
        .saturated_windows(now_ms, &spec.limits, &spec.buckets)
        .map(|(window, resets_at_ms)| SaturatedWindow {
            model: WindowId::parse(&window).model().map(str::to_owned),
            until_ms: saturated_until(resets_at_ms, now_ms),
        })
        .collect()
}

/// When a saturated window with reset `resets_at_ms` clears, as the view holds it.
fn saturated_until(resets_at_ms: Option<u64>, now_ms: u64) -> u64 {
    resets_at_ms.unwrap_or(now_ms + SATURATION_RECHECK_MS)
}
