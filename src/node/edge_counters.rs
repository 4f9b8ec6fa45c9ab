//! The node's edge counters: connections refused past `server.max_connections`, closed for
//! sending nothing within the header timeout, and open now (for `/metrics` and tests). Kept
//! apart from the accept loop, which serves the app state that holds them.

use std::sync::atomic::AtomicU64;

/// Connections refused because `max_connections` were open, and those closed because they sent
/// nothing within the header timeout (for `/metrics` and tests).
#[derive(Debug, Default)]
pub struct EdgeCounters {
    pub refused: AtomicU64,
    pub timed_out: AtomicU64,
    pub open: AtomicU64,
}
