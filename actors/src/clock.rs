//! Where "now" comes from: the one place actors read time, so policy never does.
//!
//! `SystemClock` for the node, `TokioClock` for tests on tokio's paused clock (time advances only
//! when the test says so), `ManualClock` for tests that set the time outright.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::Notify;

/// A wait on a clock.
pub type Sleep<'c> = Pin<Box<dyn Future<Output = ()> + Send + 'c>>;

/// A source of Unix milliseconds, and waits measured on it.
pub trait Clock: Send + Sync + 'static {
    fn now_ms(&self) -> u64;

    /// Waits until `ms` of this clock's time have passed (tokio's timer by default, which a
    /// paused test runtime advances).
    fn sleep_ms(&self, ms: u64) -> Sleep<'_> {
        Box::pin(tokio::time::sleep(Duration::from_millis(ms)))
    }
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

/// A clock a test sets by hand; its sleeps end when the test moves it far enough.
#[derive(Debug, Default)]
pub struct ManualClock {
    now_ms: AtomicU64,
    moved: Notify,
}

impl ManualClock {
    pub fn new(now_ms: u64) -> Arc<Self> {
        Arc::new(ManualClock {
            now_ms: AtomicU64::new(now_ms),
            moved: Notify::new(),
        })
    }

    pub fn set(&self, now_ms: u64) {
        self.now_ms.store(now_ms, Ordering::SeqCst);
        self.moved.notify_waiters();
    }

    pub fn advance(&self, by_ms: u64) {
        self.now_ms.fetch_add(by_ms, Ordering::SeqCst);
        self.moved.notify_waiters();
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> u64 {
        self.now_ms.load(Ordering::SeqCst)
    }

    fn sleep_ms(&self, ms: u64) -> Sleep<'_> {
        let until_ms = self.now_ms().saturating_add(ms);
        Box::pin(async move {
            loop {
                let moved = self.moved.notified();
                tokio::pin!(moved);
                // Registered before the check, so a move between the check and the await wakes it.
                moved.as_mut().enable();
                if self.now_ms() >= until_ms {
                    return;
                }
                moved.await;
            }
        })
    }
}
