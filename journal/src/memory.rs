//! [`MemoryJournal`]: the [`Journal`] in a `BTreeMap`, for tests and embedding.
//!
//! It stores the same encoded bytes as the sled backend (so damage handling is the same) and
//! models durability: writes stay "unflushed" until [`Journal::flush`], and
//! [`MemoryJournal::after_crash`] shows what a crash at this instant would leave.
//! Clones share storage, so a test can keep one while the writer thread owns another.

use crate::codec::{self};
use crate::error::{Damage, JournalError};
use crate::event::Envelope;
use crate::store::{envelopes_from, plan_prune, Journal, PruneReport, Snapshot, SNAPSHOTS_KEPT};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};

#[derive(Debug, Default, Clone)]
struct Stored {
    records: BTreeMap<u64, Vec<u8>>,
    snapshots: BTreeMap<u64, Vec<u8>>,
    unflushed_records: BTreeSet<u64>,
    unflushed_snapshots: BTreeSet<u64>,
}

/// An in-memory journal; clones share the same storage.
#[derive(Debug, Default, Clone)]
pub struct MemoryJournal {
    stored: Arc<Mutex<Stored>>,
}

impl MemoryJournal {
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, Stored> {
        // A panic elsewhere while holding the lock leaves the maps intact: keep using them.
        self.stored
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// An independent journal holding only what was flushed: what a crash now would leave.
    pub fn after_crash(&self) -> MemoryJournal {
        let mut copy = self.lock().clone();
        for key in std::mem::take(&mut copy.unflushed_records) {
            copy.records.remove(&key);
        }
        for key in std::mem::take(&mut copy.unflushed_snapshots) {
            copy.snapshots.remove(&key);
        }
        MemoryJournal {
            stored: Arc::new(Mutex::new(copy)),
        }
    }

    /// Replaces a stored record's bytes (tests of damage handling).
    pub fn overwrite_record(&self, key: u64, bytes: Vec<u8>) {
        self.lock().records.insert(key, bytes);
    }

    /// Replaces a stored snapshot's bytes (tests of damage handling).
    pub fn overwrite_snapshot(&self, seq: u64, bytes: Vec<u8>) {
        self.lock().snapshots.insert(seq, bytes);
    }

    /// Keys of the stored records, in order.
    pub fn record_keys(&self) -> Vec<u64> {
        self.lock().records.keys().copied().collect()
    }
}

fn decode_record(key: u64, value: &[u8]) -> Result<Vec<Envelope>, Damage> {
    codec::decode_batch(value, Some(key)).map_err(|reason| Damage { seq: key, reason })
}

impl Journal for MemoryJournal {
    fn write_record(&mut self, first_seq: u64, record: &[u8]) -> Result<(), JournalError> {
        let mut stored = self.lock();
        stored.records.insert(first_seq, record.to_vec());
        stored.unflushed_records.insert(first_seq);
        Ok(())
    }

    fn flush(&mut self) -> Result<(), JournalError> {
        let mut stored = self.lock();
        stored.unflushed_records.clear();
        stored.unflushed_snapshots.clear();
        Ok(())
    }

    fn last_seq(&self) -> Result<Option<u64>, JournalError> {
        let stored = self.lock();
        Ok(stored.records.last_key_value().map(|(key, value)| {
            decode_record(*key, value)
                .ok()
                .and_then(|batch| batch.last().map(|e| e.seq))
                .unwrap_or(*key)
        }))
    }

    fn read_from(&self, from: u64) -> Box<dyn Iterator<Item = Result<Envelope, Damage>> + '_> {
        let stored = self.lock();
        // Start at the record that may hold `from` (the last key at or before it).
        let start = stored
            .records
            .range(..=from)
            .next_back()
            .map_or(from, |(key, _)| *key);
        let records: Vec<Result<Vec<Envelope>, Damage>> = stored
            .records
            .range(start..)
            .map(|(key, value)| decode_record(*key, value))
            .collect();
        Box::new(envelopes_from(from, records.into_iter()))
    }

    fn put_snapshot(
        &mut self,
        seq: u64,
        at_ms: u64,
        state_version: u16,
        state: &[u8],
    ) -> Result<(), JournalError> {
        let mut stored = self.lock();
        stored
            .snapshots
            .insert(seq, codec::encode_snapshot(at_ms, state_version, state));
        stored.unflushed_snapshots.insert(seq);
        while stored.snapshots.len() > SNAPSHOTS_KEPT {
            stored.snapshots.pop_first();
        }
        Ok(())
    }

    fn snapshots(&self) -> Vec<Result<Snapshot, Damage>> {
        self.lock()
            .snapshots
            .iter()
            .rev()
            .map(|(seq, value)| {
                codec::decode_snapshot(value)
                    .map(|value| Snapshot::from_value(*seq, value))
                    .map_err(|reason| Damage { seq: *seq, reason })
            })
            .collect()
    }

    fn prune(&mut self, older_than_ms: u64) -> Result<PruneReport, JournalError> {
        let mut report = PruneReport::default();
        let Some(snapshot_seq) = self.snapshots().into_iter().flatten().map(|s| s.seq).next()
        else {
            return Ok(report);
        };
        report.covered_by = Some(snapshot_seq);
        let mut stored = self.lock();
        let remove = plan_prune(
            snapshot_seq,
            older_than_ms,
            stored
                .records
                .iter()
                .map(|(key, value)| (*key, decode_record(*key, value))),
            &mut report,
        );
        for key in remove {
            stored.records.remove(&key);
        }
        Ok(report)
    }
}
