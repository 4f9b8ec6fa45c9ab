//! quotaroute-journal: the event schema and its durable, replayable storage.
//!
//! Knows nothing of actors or policy: it stores envelopes and snapshots and hands them back.

pub mod event;

pub use event::*;
