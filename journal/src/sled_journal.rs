//! [`SledJournal`]: the [`Journal`] on a sled database (trees `events` and `snapshots`, keys
//! the big-endian first seq). It stores and reads bytes made by `codec`; it decides nothing
//! about batching or timing.

use crate::codec;
use crate::error::{Damage, JournalError};
use crate::event::Envelope;
use crate::store::{envelopes_from, plan_prune, Journal, PruneReport, Snapshot, SNAPSHOTS_KEPT};
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

/// How to open sled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SledOptions {
    /// sled's page cache; small, because the journal is written far more than it is read.
    pub cache_bytes: u64,
}

impl Default for SledOptions {
    fn default() -> Self {
        SledOptions {
            cache_bytes: 16 * 1024 * 1024,
        }
    }
}

/// A journal in a sled directory. Holds sled's exclusive lock on it while open.
///
/// The open database sits in a slot shared with every [`reader`](SledJournal::reader), so
/// [`Journal::reopen`] can swap in a fresh one: once a write fails (a full or read-only disk)
/// sled stays failed for good, and only a new open — after every handle on the old one is gone
/// — writes again.
pub struct SledJournal {
    path: PathBuf,
    options: SledOptions,
    open: Arc<RwLock<Option<Arc<Trees>>>>,
}

/// One open database and its two trees.
struct Trees {
    db: sled::Db,
    events: sled::Tree,
    snapshots: sled::Tree,
}

impl std::fmt::Debug for SledJournal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SledJournal")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

/// How long `open` waits for a lock a just-dropped handle is still releasing.
const LOCK_WAIT: Duration = Duration::from_secs(1);
const LOCK_RETRY_EVERY: Duration = Duration::from_millis(10);

impl SledJournal {
    /// Opens (creating if absent) the journal at `path`. sled flushes only when the writer
    /// asks (no background flusher), so durability follows `flush_every_ms`.
    ///
    /// A journal locked by another handle is retried for up to `LOCK_WAIT`: sled lets go of
    /// its lock from its IO threads shortly after the last handle drops, so a journal closed a
    /// moment ago in this process opens; one held by a running node still fails, as `Locked`.
    pub fn open(path: impl AsRef<Path>, options: SledOptions) -> Result<Self, JournalError> {
        let path = path.as_ref().to_path_buf();
        let trees = open_trees(&path, &options)?;
        Ok(SledJournal {
            path,
            options,
            open: Arc::new(RwLock::new(Some(Arc::new(trees)))),
        })
    }

    /// The open trees, or `Closed` while a reopen is in progress or has failed.
    fn trees(&self) -> Result<Arc<Trees>, JournalError> {
        self.open
            .read()
            .ok()
            .and_then(|slot| slot.clone())
            .ok_or(JournalError::Closed)
    }
}

fn open_trees(path: &Path, options: &SledOptions) -> Result<Trees, JournalError> {
    let path = path.to_path_buf();
    let started = Instant::now();
    let db = loop {
        let opened = sled::Config::new()
            .path(&path)
            .cache_capacity(options.cache_bytes)
            .flush_every_ms(None)
            .open()
            .map_err(|error| open_error(&path, error));
        match opened {
            Err(JournalError::Locked { .. }) if started.elapsed() < LOCK_WAIT => {
                std::thread::sleep(LOCK_RETRY_EVERY);
            }
            other => break other?,
        }
    };
    let events = db
        .open_tree("events")
        .map_err(|error| open_error(&path, error))?;
    let snapshots = db
        .open_tree("snapshots")
        .map_err(|error| open_error(&path, error))?;
    Ok(Trees {
        db,
        events,
        snapshots,
    })
}

impl SledJournal {
    /// A second handle on the same open database, for reading while the writer thread owns
    /// the first (sled is safe to share between threads; the lock stays with this process).
    /// It follows the writer's reopens.
    pub fn reader(&self) -> SledJournal {
        SledJournal {
            path: self.path.clone(),
            options: self.options.clone(),
            open: self.open.clone(),
        }
    }

    /// The directory this journal lives in.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes sled reports on disk.
    pub fn size_on_disk(&self) -> Result<u64, JournalError> {
        Ok(self.trees()?.db.size_on_disk()?)
    }

    /// The raw `(tree, key, value)` entries, for exporting a journal byte for byte.
    pub fn raw_entries(&self) -> Vec<(&'static str, Vec<u8>, Vec<u8>)> {
        let Ok(open) = self.trees() else {
            return Vec::new();
        };
        let trees = [("events", &open.events), ("snapshots", &open.snapshots)];
        trees
            .into_iter()
            .flat_map(|(name, tree)| {
                tree.iter()
                    .flatten()
                    .map(move |(key, value)| (name, key.to_vec(), value.to_vec()))
            })
            .collect()
    }

    /// Stores a raw entry made by [`SledJournal::raw_entries`] (importing an exported journal,
    /// or damaging one in a test). `tree` is `events` or `snapshots`.
    pub fn put_raw(&mut self, tree: &str, key: &[u8], value: &[u8]) -> Result<(), JournalError> {
        let open = self.trees()?;
        let tree = match tree {
            "events" => &open.events,
            "snapshots" => &open.snapshots,
            other => return Err(JournalError::Storage(format!("no tree named {other}"))),
        };
        tree.insert(key, value)?;
        Ok(())
    }
}

/// sled reports a held lock only as an I/O error with this text (fs2's `try_lock_exclusive`).
fn open_error(path: &Path, error: sled::Error) -> JournalError {
    let reason = error.to_string();
    if reason.contains("could not acquire lock") {
        JournalError::Locked {
            path: path.to_path_buf(),
        }
    } else {
        JournalError::Open {
            path: path.to_path_buf(),
            reason,
        }
    }
}

fn decode_entry(entry: sled::Result<(sled::IVec, sled::IVec)>, next_seq: u64) -> Record {
    let (key, value) = entry.map_err(|error| Damage {
        seq: next_seq,
        reason: codec::DamageReason::Storage(error.to_string()),
    })?;
    let seq = codec::key_seq(&key).map_err(|reason| Damage {
        seq: next_seq,
        reason,
    })?;
    let batch = codec::decode_batch(&value, Some(seq)).map_err(|reason| Damage { seq, reason })?;
    Ok((seq, batch))
}

type Record = Result<(u64, Vec<Envelope>), Damage>;

impl Journal for SledJournal {
    fn write_record(&mut self, first_seq: u64, record: &[u8]) -> Result<(), JournalError> {
        self.trees()?
            .events
            .insert(codec::seq_key(first_seq), record)?;
        Ok(())
    }

    fn flush(&mut self) -> Result<(), JournalError> {
        self.trees()?.db.flush()?;
        Ok(())
    }

    /// Drops this process's handle on the database and opens it again (waiting up to
    /// `LOCK_WAIT` for readers to let go). `Locked` when a reader still holds the old one.
    fn reopen(&mut self) -> Result<(), JournalError> {
        let mut slot = self.open.write().map_err(|_| JournalError::Closed)?;
        if let Some(old) = slot.take() {
            // Whatever the old database still buffers is lost with it; the writer rewrites
            // what it had not seen flushed.
            drop(old);
        }
        let trees = open_trees(&self.path, &self.options)?;
        *slot = Some(Arc::new(trees));
        Ok(())
    }

    fn last_seq(&self) -> Result<Option<u64>, JournalError> {
        let open = self.trees()?;
        let Some((key, value)) = open.events.last()? else {
            return Ok(None);
        };
        let first = codec::key_seq(&key).map_err(|reason| {
            JournalError::Storage(format!("last record has a bad key: {reason}"))
        })?;
        let last = codec::decode_batch(&value, Some(first))
            .ok()
            .and_then(|batch| batch.last().map(|e| e.seq));
        Ok(Some(last.unwrap_or(first)))
    }

    fn read_from(&self, from: u64) -> Box<dyn Iterator<Item = Result<Envelope, Damage>> + '_> {
        let Ok(open) = self.trees() else {
            return Box::new(std::iter::once(Err(Damage {
                seq: from,
                reason: codec::DamageReason::Storage("the journal is being reopened".into()),
            })));
        };
        let events = open.events.clone();
        // Start at the record that may hold `from` (the last key at or before it).
        let start = match events.range(..=codec::seq_key(from)).next_back() {
            Some(Ok((key, _))) => codec::key_seq(&key).unwrap_or(from),
            _ => from,
        };
        let mut next_seq = start;
        let mut failed = false;
        let records = events
            .range(codec::seq_key(start)..)
            .map_while(move |entry| {
                // A storage error ends the scan (after reporting it): sled would repeat it.
                if failed {
                    return None;
                }
                let record = decode_entry(entry, next_seq);
                match &record {
                    Ok((_, batch)) => {
                        next_seq = batch.last().map_or(next_seq, |e| e.seq.saturating_add(1))
                    }
                    Err(damage) => {
                        failed = matches!(damage.reason, codec::DamageReason::Storage(_));
                        next_seq = damage.seq.saturating_add(1);
                    }
                }
                Some(record.map(|(_, batch)| batch))
            });
        Box::new(envelopes_from(from, records))
    }

    fn put_snapshot(
        &mut self,
        seq: u64,
        at_ms: u64,
        state_version: u16,
        state: &[u8],
    ) -> Result<(), JournalError> {
        let open = self.trees()?;
        open.snapshots.insert(
            codec::seq_key(seq),
            codec::encode_snapshot(at_ms, state_version, state),
        )?;
        let old_keys: Vec<sled::IVec> = open
            .snapshots
            .iter()
            .keys()
            .rev()
            .skip(SNAPSHOTS_KEPT)
            .collect::<Result<_, _>>()?;
        for key in old_keys {
            open.snapshots.remove(key)?;
        }
        Ok(())
    }

    fn snapshots(&self) -> Vec<Result<Snapshot, Damage>> {
        let Ok(open) = self.trees() else {
            return Vec::new();
        };
        open.snapshots
            .iter()
            .rev()
            .map(|entry| {
                let (key, value) = entry.map_err(|error| Damage {
                    seq: 0,
                    reason: codec::DamageReason::Storage(error.to_string()),
                })?;
                let seq = codec::key_seq(&key).map_err(|reason| Damage { seq: 0, reason })?;
                let value =
                    codec::decode_snapshot(&value).map_err(|reason| Damage { seq, reason })?;
                Ok(Snapshot::from_value(seq, value))
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
        let open = self.trees()?;
        let records = open.events.iter().map_while(|entry| {
            let (key, value) = entry.ok()?;
            let seq = codec::key_seq(&key).ok()?;
            let batch =
                codec::decode_batch(&value, Some(seq)).map_err(|reason| Damage { seq, reason });
            Some((seq, batch))
        });
        let remove = plan_prune(snapshot_seq, older_than_ms, records, &mut report);
        let mut batch = sled::Batch::default();
        for seq in remove {
            batch.remove(codec::seq_key(seq).to_vec());
        }
        open.events.apply_batch(batch)?;
        Ok(report)
    }
}

#[cfg(test)]
mod tests;
