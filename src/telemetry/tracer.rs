//! [`Tracer`]: what a node with `[telemetry]` holds — the sampler and the export queue — and
//! hands to every [`RequestSpan`](crate::telemetry::RequestSpan) it starts.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::config::TelemetryConfig;
use crate::telemetry::export::SpanQueue;
use crate::telemetry::finished::FinishedSpan;
use crate::telemetry::sampler::Sampler;

pub struct Tracer {
    pub(crate) sampler: Sampler,
    queue: SpanQueue,
}

impl Tracer {
    /// The tracer of `config`, its export task started on the current runtime.
    pub fn start(config: &TelemetryConfig) -> Self {
        Tracer {
            sampler: Sampler::new(config.sample_ratio),
            queue: SpanQueue::start(config.traces_url.clone(), config.service_name.clone()),
        }
    }

    /// Queues a finished span for export (dropped and counted when the queue is full).
    pub(crate) fn submit(&self, span: FinishedSpan) {
        self.queue.push(span);
    }

    /// Exports what is queued, waiting at most `within` (at stop).
    pub async fn flush(&self, within: Duration) {
        self.queue.flush(within).await;
    }
}

impl std::fmt::Debug for Tracer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tracer").finish_non_exhaustive()
    }
}

/// Now, in Unix nanoseconds.
pub(crate) fn now_unix_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| {
            since
                .as_secs()
                .saturating_mul(1_000_000_000)
                .saturating_add(u64::from(since.subsec_nanos()))
        })
}
