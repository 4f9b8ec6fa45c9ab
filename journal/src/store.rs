//! The [`Journal`] trait: the synchronous storage backend the writer thread owns, and the
//! types it hands back. Backends store encoded records (see `codec`); they never decide what
//! to write or when — that is the writer's job.

use crate::codec;
use crate::error::{Damage, JournalError};
use crate::event::Envelope;

/// A stored snapshot: opaque state bytes valid after applying every event up to `seq`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    pub seq: u64,
    pub at_ms: u64,
    /// The frame format it was stored with (`codec::SNAPSHOT_FORMAT` or older).
    pub format: u8,
    /// The layout version of `state`, as its owner gave it; `None` in format 1, which did not
    /// record it.
    pub state_version: Option<u16>,
    pub state: Vec<u8>,
}

impl Snapshot {
    /// From a decoded value stored under `seq`.
    pub fn from_value(seq: u64, value: crate::codec::SnapshotValue) -> Self {
        Snapshot {
            seq,
            at_ms: value.at_ms,
            format: value.format,
            state_version: value.state_version,
            state: value.state,
        }
    }
}

/// What one [`Journal::prune`] removed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PruneReport {
    pub records_removed: u64,
    pub events_removed: u64,
    /// The snapshot seq that bounded the prune (`None`: no readable snapshot, nothing removed).
    pub covered_by: Option<u64>,
    /// Damaged records in the covered range, kept because their age cannot be read.
    pub damaged_kept: u64,
}

/// How many snapshots a backend keeps (newest first).
pub const SNAPSHOTS_KEPT: usize = 3;

/// Durable, ordered storage of envelope batches and snapshots.
///
/// Sync on purpose: it is owned by one dedicated writer thread ([`crate::JournalHandle`]), so
/// disk latency never reaches an async task.
pub trait Journal: Send + 'static {
    /// Stores one batch of consecutive envelopes as one record keyed by its first seq.
    fn write_batch(&mut self, batch: &[Envelope]) -> Result<(), JournalError> {
        let Some(first) = batch.first() else {
            return Ok(());
        };
        self.write_record(first.seq, &codec::encode_batch(batch)?)
    }
    /// Stores one record as `codec::encode_batch_into` encoded it, keyed by the seq of its
    /// first envelope (the writer encodes once and keeps the bytes until they are flushed).
    fn write_record(&mut self, first_seq: u64, record: &[u8]) -> Result<(), JournalError>;
    /// Makes everything written so far durable.
    fn flush(&mut self) -> Result<(), JournalError>;
    /// Opens the storage afresh after a failed write (a backend that stays failed once it has
    /// failed, as sled does); what was written but not flushed may be gone. A no-op by default.
    fn reopen(&mut self) -> Result<(), JournalError> {
        Ok(())
    }
    /// The last seq stored. If the last record is damaged its key (first seq) is returned:
    /// a lower bound, so new seqs never collide with a readable record.
    fn last_seq(&self) -> Result<Option<u64>, JournalError>;
    /// Envelopes with `seq >= from`, in order. A damaged record yields one `Err(Damage)` with
    /// its key and reading continues with the next record.
    fn read_from(&self, from: u64) -> Box<dyn Iterator<Item = Result<Envelope, Damage>> + '_>;
    /// Stores a snapshot taken after `seq`, its state in layout `state_version` (the owner's
    /// numbering); keeps the newest [`SNAPSHOTS_KEPT`].
    fn put_snapshot(
        &mut self,
        seq: u64,
        at_ms: u64,
        state_version: u16,
        state: &[u8],
    ) -> Result<(), JournalError>;
    /// Stored snapshots, newest first; unreadable ones as `Err(Damage)`.
    fn snapshots(&self) -> Vec<Result<Snapshot, Damage>>;
    /// Removes records whose events are all older than `older_than_ms` AND all at or before
    /// the newest readable snapshot's seq. Never anything else.
    fn prune(&mut self, older_than_ms: u64) -> Result<PruneReport, JournalError>;
}

/// Envelopes of decoded records at or after `from`, flattened; shared by the backends.
pub(crate) fn envelopes_from(
    from: u64,
    records: impl Iterator<Item = Result<Vec<Envelope>, Damage>>,
) -> impl Iterator<Item = Result<Envelope, Damage>> {
    records.flat_map(
        move |record| -> Box<dyn Iterator<Item = Result<Envelope, Damage>>> {
            match record {
                Ok(batch) => Box::new(batch.into_iter().filter(move |e| e.seq >= from).map(Ok)),
                Err(damage) => Box::new(std::iter::once(Err(damage))),
            }
        },
    )
}

/// The prune decision over records in key order, shared by the backends: returns the keys to
/// remove. `decode` gives a record's envelopes or its damage.
pub(crate) fn plan_prune<'a>(
    snapshot_seq: u64,
    older_than_ms: u64,
    records: impl Iterator<Item = (u64, Result<Vec<Envelope>, Damage>)> + 'a,
    report: &mut PruneReport,
) -> Vec<u64> {
    let mut remove = Vec::new();
    for (key, record) in records {
        if key > snapshot_seq {
            break;
        }
        match record {
            Ok(batch) => {
                let covered = batch.iter().all(|e| e.seq <= snapshot_seq);
                let old = batch.iter().all(|e| e.at_ms < older_than_ms);
                if !(covered && old) {
                    // Later records are newer still (or not covered): stop here.
                    break;
                }
                report.records_removed += 1;
                report.events_removed += batch.len() as u64;
                remove.push(key);
            }
            Err(_) => report.damaged_kept += 1,
        }
    }
    remove
}
