//! What a combo knows about the connections and breakers it routes to: copies pushed by their
//! owning actors whenever they change, holding absolute times so they stay right as time passes.
//!
//! The rules that read them (behaviour §2 step 0) are `policy::admission`'s; the connection's
//! copy is `policy::connection_view`'s. Never mutates learned state; only the probe gate is shared and taken here.

use std::sync::Arc;

use crate::permit::SharedProbeGate;
use crate::policy::admission::breaker_admission;
pub use crate::policy::admission::BreakerAdmission;
use crate::policy::breaker::{BreakerSettings, BreakerState};
pub use crate::policy::connection_view::{ConnectionView, SaturatedWindow};

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
