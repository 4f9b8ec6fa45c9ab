//! What a cluster node reports about its link to the others: whether Redis answers, who its
//! peers are, and counts of what was published, applied, skipped and leased. Written by the
//! cluster tasks, read by `/admin/state` and `/metrics`; atomics, so reading costs no lock on
//! any request path.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

use serde_json::{json, Value};

/// Shared counters and flags of one cluster node.
#[derive(Debug, Default)]
pub struct ClusterStatus {
    pub node_id: String,
    redis_up: AtomicBool,
    /// Set at the first report, so a Redis unreachable from the start is logged too.
    reported: AtomicBool,
    peers: Mutex<Vec<String>>,
    /// `peers`' length, read by admission without the lock.
    peer_count: AtomicU64,
    pub published: AtomicU64,
    pub applied: AtomicU64,
    pub skipped: AtomicU64,
    pub leases_granted: AtomicU64,
    pub leases_refused: AtomicU64,
    /// Lease calls Redis answered with an error (that lease retried; Redis stays `up`).
    pub lease_errors: AtomicU64,
    /// Stream entries refused by `peer_bounds` or `seq_guard` (never applied or journaled).
    pub refused: AtomicU64,
    /// Stream entries applied with a value clamped to this node's own bounds.
    pub clamped: AtomicU64,
    /// Events the publisher has not sent yet (journaled, waiting for Redis or the queue).
    pub publish_backlog: AtomicU64,
    /// Milliseconds from an origin's event to its application here, last seen.
    pub last_lag_ms: AtomicU64,
}

impl ClusterStatus {
    pub fn new(node_id: &str) -> Self {
        ClusterStatus {
            node_id: node_id.to_owned(),
            ..ClusterStatus::default()
        }
    }

    pub fn redis_up(&self) -> bool {
        self.redis_up.load(Ordering::Relaxed)
    }

    /// Records whether Redis answered the last command; logs the changes.
    pub fn set_redis_up(&self, up: bool, why: &str) {
        let was = self.redis_up.swap(up, Ordering::Relaxed);
        let first = !self.reported.swap(true, Ordering::Relaxed);
        if was != up || first {
            if up {
                tracing::info!(node = %self.node_id, "cluster: Redis reachable");
            } else {
                tracing::warn!(node = %self.node_id, reason = %why, "cluster: Redis unreachable; routing on local knowledge");
            }
        }
    }

    pub fn set_peers(&self, peers: Vec<String>) {
        self.peer_count.store(peers.len() as u64, Ordering::Relaxed);
        if let Ok(mut slot) = self.peers.lock() {
            *slot = peers;
        }
    }

    /// How many peers the last heartbeat listed.
    pub fn peer_count(&self) -> u64 {
        self.peer_count.load(Ordering::Relaxed)
    }

    pub fn peers(&self) -> Vec<String> {
        self.peers.lock().map(|p| p.clone()).unwrap_or_default()
    }

    pub fn count(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// The contract's `"cluster"` object of `GET /admin/state`, plus the counts.
    pub fn to_json(&self) -> Value {
        let get = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        json!({
            "node_id": self.node_id,
            "redis": if self.redis_up() { "up" } else { "down" },
            "peers": self.peers(),
            "events_published": get(&self.published),
            "events_applied": get(&self.applied),
            "events_skipped": get(&self.skipped),
            "leases_granted": get(&self.leases_granted),
            "leases_refused": get(&self.leases_refused),
            "lease_errors": get(&self.lease_errors),
            "events_refused": get(&self.refused),
            "events_clamped": get(&self.clamped),
            "publish_backlog": get(&self.publish_backlog),
        })
    }
}
