//! Per-connection attempt counters for the dashboard's rate chart (`/admin/events`): two
//! relaxed atomics per connection, bumped beside the attempt metrics and read only by the
//! dashboard's subscribers. Owns counting; rates are the subscriber's arithmetic.

use std::sync::atomic::{AtomicU64, Ordering};

/// Attempts and failed attempts (any class but success) sent to one connection since its
/// config was loaded.
#[derive(Debug, Default)]
pub struct ConnectionTraffic {
    attempts: AtomicU64,
    failures: AtomicU64,
}

impl ConnectionTraffic {
    pub fn record(&self, succeeded: bool) {
        self.attempts.fetch_add(1, Ordering::Relaxed);
        if !succeeded {
            self.failures.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// `(attempts, failures)` so far.
    pub fn read(&self) -> (u64, u64) {
        (
            self.attempts.load(Ordering::Relaxed),
            self.failures.load(Ordering::Relaxed),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_are_attempts_too() {
        let traffic = ConnectionTraffic::default();
        traffic.record(true);
        traffic.record(false);
        traffic.record(false);
        assert_eq!(traffic.read(), (3, 2));
    }
}
