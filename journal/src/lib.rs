//! quotaroute-journal: the event schema and its durable, replayable storage.
//!
//! Knows nothing of actors or policy: it stores envelopes and snapshots and hands them back.
//!
//! # Layout
//! - [`event`] — the schema: every event kind and the [`Envelope`] around it (frozen shape).
//! - [`codec`] — record and snapshot bytes; the only module that touches bincode.
//! - [`formats`] — which format versions wrote a journal directory (read before sled opens it).
//! - [`ndjson`] — one flat JSON object per envelope, for `GET /admin/journal` and `replay`.
//! - [`store`] — the [`Journal`] trait (sync storage backend) and its shared types.
//! - [`sled_journal`] / [`memory`] / [`failing`] — a sled backend, an in-memory one, and a
//!   wrapper whose writes can be made to fail.
//! - [`writer`] — [`JournalHandle`]: one thread that owns the journal and group-commits.
//! - [`recovery`] — newest readable snapshot + the events after it.
//! - [`testkit`] — deterministic sample events of every kind; [`test_disk`] — a tmpfs that
//!   fills and grows, for the disk-trouble tests.

pub mod codec;
pub mod error;
pub mod event;
pub mod failing;
pub mod formats;
pub mod memory;
pub mod ndjson;
pub mod recovery;
pub mod sled_journal;
pub mod store;
pub mod test_disk;
pub mod testkit;
pub mod writer;

pub use codec::DamageReason;
pub use error::{Damage, JournalError};
pub use event::*;
pub use failing::{FailSwitch, FailingJournal};
pub use formats::{Formats, FormatsError, NewerVersion, FORMATS_FILE};
pub use memory::MemoryJournal;
pub use ndjson::{envelope_from_json, envelope_to_json, NdjsonError};
pub use recovery::{recover, recover_versioned, Recovery};
pub use sled_journal::{SledJournal, SledOptions};
pub use store::{Journal, PruneReport, Snapshot};
pub use writer::{JournalHandle, JournalStats, WriterConfig};
