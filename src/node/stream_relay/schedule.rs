//! When the relay reads: a burst that already arrived leaves in one client write (bounded by
//! `COALESCE_BYTES`), and a deadline as the duration left.

use std::time::Duration;

use tokio::time::Instant;

/// Most upstream bytes gathered into one client write.
pub(super) const COALESCE_BYTES: usize = 64 * 1024;

/// How long until `deadline`, for timeouts expressed as durations.
pub fn remaining(deadline: Instant) -> Duration {
    deadline.saturating_duration_since(Instant::now())
}
