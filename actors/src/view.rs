//! What a combo knows about the connections and breakers it routes to: copies pushed by their
//! owning actors whenever they change, holding absolute times so they stay right as time passes.
//!
//! The rules that read them (behaviour §2 step 0) are `policy::request`'s; this file only
//! holds the copies. Never mutates learned state; only the probe gate is shared and taken here.

use std::sync::Arc;

use crate::permit::SharedProbeGate;
use crate::policy::breaker::{BreakerSettings, BreakerState};
use crate::policy::buckets::BucketView;
use crate::policy::connection_state::ConnectionState;
use crate::policy::cooldown::ConnectionHealth;
use crate::policy::lockout::ModelLockouts;
pub use crate::policy::request::BreakerAdmission;
use crate::policy::request::{breaker_admission, connection_block, Block};
use crate::policy::topology::ConnectionSpec;

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
}

impl ConnectionView {
    /// The view of `state` as of `now_ms`.
    pub fn of(state: &ConnectionState, spec: &ConnectionSpec, now_ms: u64) -> Self {
        ConnectionView {
            health: state.health.clone(),
            lockouts: state.lockouts.clone(),
            saturated: saturated_windows(state, spec, now_ms),
        }
    }

    /// Whether [`ConnectionView::of`] would equal `self`, without copying the state.
    pub fn matches(&self, state: &ConnectionState, spec: &ConnectionSpec, now_ms: u64) -> bool {
        self.health == state.health
            && self.lockouts == state.lockouts
            && self.saturated == saturated_windows(state, spec, now_ms)
    }

    /// Connection block first, then the model's lockout.
    pub fn block_for(&self, model: &str, now_ms: u64) -> Option<Block> {
        connection_block(&self.health, &self.lockouts, model, now_ms)
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
        .views(now_ms, &spec.limits, &spec.buckets)
        .into_iter()
        .filter(|v| v.saturated)
        .map(|v| saturated_window(&v, now_ms))
        .collect()
}

fn saturated_window(view: &BucketView, now_ms: u64) -> SaturatedWindow {
    let model = view
        .window
        .split_once(':')
        .map(|(_, model)| model.to_string());
    SaturatedWindow {
        model,
        until_ms: view.resets_at_ms.unwrap_or(now_ms + SATURATION_RECHECK_MS),
    }
}

/// A combo's copy of one provider's breaker, plus the shared probe tokens.
#[derive(Debug, Clone)]
pub struct BreakerView {
    pub state: Arc<BreakerState>,
    pub settings: BreakerSettings,
    pub gate: SharedProbeGate,
}

impl BreakerView {
    /// The breaker's verdict at `now` ([`breaker_admission`] on this copy and the shared
    /// probe tokens).
    pub fn admission(&self, now_ms: u64) -> BreakerAdmission {
        let gate = self.gate.lock().ok();
        breaker_admission(&self.state, &self.settings, gate.as_deref(), now_ms)
    }

    /// Takes a probe token now; false when another request took the last one first.
    pub fn take_probe(&self, now_ms: u64) -> bool {
        self.gate
            .lock()
            .map(|mut gate| gate.try_take(now_ms, &self.settings))
            .unwrap_or(false)
    }
}
