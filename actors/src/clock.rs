//! Where "now" comes from: the one place actors read time, so policy never does.
//!
//! `SystemClock` for the node, `TokioClock` for tests on tokio's paused clock (time advances only
//! when the test says so), `ManualClock` for tests that set the time outright.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// A source of Unix milliseconds.
pub trait Clock: Send + Sync + 'static {
    fn now_ms(&self) -> u64;
}

/// Shared handle to a clock.
pub type SharedClock = Arc<dyn Clock>;

/// Wall-clock time.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0)
    }
}

/// A fixed Unix start plus tokio's monotonic clock: under `tokio::time::pause()` it only moves
/// when the test advances it.
#[derive(Debug, Clone)]
pub struct TokioClock {
    start_unix_ms: u64,
    start: tokio::time::Instant,
}

impl TokioClock {
    pub fn starting_at(start_unix_ms: u64) -> Self {
        TokioClock {
            start_unix_ms,
            start: tokio::time::Instant::now(),
        }
    }
}

impl Clock for TokioClock {
    fn now_ms(&self) -> u64 {
        self.start_unix_ms + self.start.elapsed().as_millis() as u64
    }
}

/// A clock a test sets by hand.
#[derive(Debug, Default)]
pub struct ManualClock {
    now_ms: AtomicU64,
}

impl ManualClock {
    pub fn new(now_ms: u64) -> Arc<Self> {
        Arc::new(ManualClock {
            now_ms: AtomicU64::new(now_ms),
        })
    }

    pub fn set(&self, now_ms: u64) {
        self.now_ms.store(now_ms, Ordering::SeqCst);
    }

    pub fn advance(&self, by_ms: u64) {
        self.now_ms.fetch_add(by_ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> u64 {
        self.now_ms.load(Ordering::SeqCst)
    }
}
