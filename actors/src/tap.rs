//! `EventTap`: an optional observer of every event the recorder journals, for a node that
//! shares what it learns (the cluster publisher and its usage leases live in the node crate).
//!
//! The recorder calls it synchronously, so an implementation must only look, count or queue
//! (a bounded `try_send`), never wait. Without a tap (one node) the recorder does no extra work
//! beyond one branch per event.

use quotaroute_journal::Event;

/// Sees the recorder's events in journal order.
pub trait EventTap: Send + Sync + 'static {
    /// Every event the recorder folds, before it is journaled; `true` asks for a copy of it
    /// with its seq once it is journaled ([`EventTap::journaled`]).
    fn wants(&self, at_ms: u64, event: &Event) -> bool;
    /// A wanted event, with the seq the journal gave it.
    fn journaled(&self, seq: u64, at_ms: u64, event: Event);
}
