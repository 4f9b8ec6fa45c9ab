//! Which traces are kept: a client's `traceparent` decides for its trace (its sampled flag, so
//! one trace is never half exported); a new trace is kept with probability `sample_ratio`,
//! decided by its id as OpenTelemetry's `TraceIdRatioBased` does, so every node agrees.

use crate::telemetry::trace_context::{RemoteParent, TraceId};

#[derive(Debug, Clone, Copy)]
pub struct Sampler {
    /// Traces kept are those whose id's low 63 bits fall below this.
    bound: u64,
    all: bool,
}

impl Sampler {
    pub fn new(ratio: f64) -> Self {
        let ratio = ratio.clamp(0.0, 1.0);
        Sampler {
            bound: (ratio * (1u64 << 63) as f64) as u64,
            all: ratio >= 1.0,
        }
    }

    pub fn sampled(&self, parent: Option<&RemoteParent>, trace_id: TraceId) -> bool {
        if let Some(parent) = parent {
            return parent.sampled;
        }
        if self.all {
            return true;
        }
        let mut low = [0u8; 8];
        low.copy_from_slice(&trace_id.0[8..]);
        (u64::from_be_bytes(low) >> 1) < self.bound
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::trace_context::SpanId;

    #[test]
    fn the_ratio_keeps_about_its_share_and_a_parent_decides_for_its_trace() {
        for (ratio, low, high) in [(0.0, 0, 0), (0.25, 2_200, 2_800), (1.0, 10_000, 10_000)] {
            let sampler = Sampler::new(ratio);
            let kept = (0..10_000)
                .filter(|_| sampler.sampled(None, TraceId::random()))
                .count();
            assert!((low..=high).contains(&kept), "{ratio}: {kept}");
        }
        let parent = |sampled| RemoteParent {
            trace_id: TraceId::random(),
            span_id: SpanId::random(),
            sampled,
        };
        assert!(Sampler::new(0.0).sampled(Some(&parent(true)), TraceId::random()));
        assert!(!Sampler::new(1.0).sampled(Some(&parent(false)), TraceId::random()));
    }
}
