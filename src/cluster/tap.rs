//! The recorder's tap in cluster mode: a shared event journaled here goes to the publisher on
//! a bounded queue (`try_send`; when it is full the publisher is told to re-read the journal,
//! so nothing journaled is lost), and a success spends from its connection's leases. Never
//! waits: it runs inside the recorder.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use quotaroute_actors::policy::peer_merge::is_shared;
use quotaroute_actors::EventTap;
use quotaroute_journal::Event;
use tokio::sync::mpsc;

use crate::cluster::leases::Leases;

/// Events queued for the publisher at most; past that they are re-read from the journal.
pub const QUEUE_EVENTS: usize = 4_096;

/// A journaled event to publish.
#[derive(Debug)]
pub struct Outgoing {
    pub seq: u64,
    pub at_ms: u64,
    pub event: Event,
}

pub struct ClusterTap {
    pub queue: mpsc::Sender<Outgoing>,
    /// The highest seq that could not be queued (the publisher reads up to it from the journal).
    pub dropped_upto: Arc<AtomicU64>,
    pub leases: Arc<Leases>,
}

impl EventTap for ClusterTap {
    fn wants(&self, _at_ms: u64, event: &Event) -> bool {
        match event {
            Event::RequestSucceeded(success) => {
                self.leases.spend(success);
                false
            }
            other => is_shared(other),
        }
    }

    fn journaled(&self, seq: u64, at_ms: u64, event: Event) {
        if self.queue.try_send(Outgoing { seq, at_ms, event }).is_err() {
            self.dropped_upto.fetch_max(seq, Ordering::Relaxed);
        }
    }
}
