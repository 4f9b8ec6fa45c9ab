//! [`JournalHandle`]: group commit. One dedicated thread owns the [`Journal`]; callers hand it
//! events without ever waiting for the disk, and it writes them in batches, flushing every
//! `flush_every_ms` or sooner when asked. It never decides *what* is journaled.
//!
//! Seqs are assigned at [`JournalHandle::append`] (an atomic counter), so a caller learns its
//! event's seq at once — e.g. to snapshot "state after seq N". Two threads may send their
//! events in the opposite order of their seqs; the writer puts them back in order before
//! writing (a short reorder buffer), so records always hold consecutive seqs.

use crate::codec;
use crate::error::JournalError;
use crate::event::{Envelope, Event, SCHEMA_VERSION};
use crate::store::Journal;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, TryRecvError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// The writer's knobs (contract: `[journal]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriterConfig {
    /// Bound on what a crash can lose: the writer flushes at least this often.
    pub flush_every_ms: u64,
    /// Wake the writer and write the waiting events' whole records as soon as this many
    /// wait (flush still follows the timer). Small, so events spend little time queued as
    /// envelopes (~300 bytes and their strings each) before they are encoded records (~50).
    pub flush_every_events: usize,
    /// Queue length at which request events are dropped (state events are always kept).
    pub max_queue_events: u64,
    /// Events older than this and covered by a snapshot are pruned; 0 keeps everything.
    /// "Older" is measured against the newest event's `at_ms`, not a clock, and pruning runs
    /// at most once per minute of event time.
    pub retention_hours: u64,
}

impl Default for WriterConfig {
    fn default() -> Self {
        WriterConfig {
            flush_every_ms: 50,
            flush_every_events: WRITE_EVERY_EVENTS,
            max_queue_events: 100_000,
            retention_hours: 168,
        }
    }
}

/// Counters read without a message hop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JournalStats {
    /// Events accepted by `append` (not dropped).
    pub appended: u64,
    /// Events handed to the journal; durable once `durable_seq` passes them.
    pub written: u64,
    pub dropped: u64,
    pub durable_seq: u64,
    pub queue_len: u64,
    pub write_errors: u64,
    pub healthy: bool,
}

/// Events per stored record: keeps sled values well under its 128 KiB blob threshold.
const RECORD_MAX_EVENTS: usize = 24;
/// The default `flush_every_events`: ten whole records. At 34k events/s (the bench's 17k
/// requests/s) the writer wakes ~140 times a second instead of holding up to a 50 ms tick's
/// ~1,700 envelopes (docs/measurements.md, "peak RSS").
const WRITE_EVERY_EVENTS: usize = 10 * RECORD_MAX_EVENTS;
/// The first wait after a failed write before the store is reopened, doubling up to the max.
const REOPEN_BACKOFF_MIN: Duration = Duration::from_millis(250);
const REOPEN_BACKOFF_MAX: Duration = Duration::from_secs(5);
/// Prune at most once per this much event time.
const PRUNE_EVERY_MS: u64 = 60_000;

type Reply = oneshot::Sender<Result<u64, JournalError>>;

// `Append`'s envelope is boxed: the channel's list zero-fills a block of 31 commands at a
// time, so a command the size of an envelope cost more in that fill (every 31 events) and in
// its moves through the channel than the box's allocation does per event.
enum Command {
    Append(Box<Envelope>),
    Flush { target: u64, reply: Reply },
    Snapshot(PendingSnapshot),
    Close { reply: Reply },
}

/// A snapshot waiting for its events to be durable.
#[derive(Debug)]
struct PendingSnapshot {
    seq: u64,
    at_ms: u64,
    state_version: u16,
    state: Vec<u8>,
}

#[derive(Debug)]
struct Shared {
    next_seq: AtomicU64,
    appended: AtomicU64,
    written: AtomicU64,
    dropped: AtomicU64,
    durable_seq: AtomicU64,
    queue_len: AtomicU64,
    write_errors: AtomicU64,
    healthy: AtomicBool,
}

/// A cheap, cloneable handle to the journal writer thread.
#[derive(Debug, Clone)]
pub struct JournalHandle {
    sender: mpsc::Sender<Command>,
    shared: Arc<Shared>,
    max_queue_events: u64,
    /// Appends do not wake the writer (it drains on its timer); this many queued events, a
    /// flush, a snapshot or a close do. Saves a futex wake per event on the hot path.
    wake_every_events: u64,
    waker: std::thread::Thread,
    thread: Arc<Mutex<Option<JoinHandle<()>>>>,
}

impl JournalHandle {
    /// Starts the writer thread; new seqs continue after the journal's last one.
    pub fn spawn(journal: Box<dyn Journal>, config: WriterConfig) -> Result<Self, JournalError> {
        let last_seq = journal.last_seq()?.unwrap_or(0);
        let shared = Arc::new(Shared {
            next_seq: AtomicU64::new(last_seq + 1),
            appended: AtomicU64::new(0),
            written: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            durable_seq: AtomicU64::new(last_seq),
            queue_len: AtomicU64::new(0),
            write_errors: AtomicU64::new(0),
            healthy: AtomicBool::new(true),
        });
        let (sender, receiver) = mpsc::channel();
        let writer = Writer {
            journal,
            receiver,
            shared: shared.clone(),
            flush_every: Duration::from_millis(config.flush_every_ms.max(1)),
            flush_every_events: config.flush_every_events.max(1),
            retention_ms: config.retention_hours.saturating_mul(3_600_000),
            ready: Vec::new(),
            out_of_order: BTreeMap::new(),
            next_expected: last_seq + 1,
            written_unflushed: None,
            unflushed: Vec::new(),
            unflushed_records: Vec::new(),
            record: Vec::new(),
            scratch: codec::EncodeScratch::default(),
            next_reopen_at: Instant::now(),
            reopen_backoff: REOPEN_BACKOFF_MIN,
            waiters: Vec::new(),
            snapshots: Vec::new(),
            newest_at_ms: 0,
            last_prune_at_ms: None,
            failing: false,
        };
        let thread = std::thread::Builder::new()
            .name("journal-writer".into())
            .spawn(move || writer.run())
            .map_err(|error| JournalError::Storage(format!("cannot start writer: {error}")))?;
        Ok(JournalHandle {
            sender,
            shared,
            max_queue_events: config.max_queue_events,
            wake_every_events: config.flush_every_events.max(1) as u64,
            waker: thread.thread().clone(),
            thread: Arc::new(Mutex::new(Some(thread))),
        })
    }

    /// Queues an event; never blocks. Returns its seq, or `None` when it was dropped (a
    /// request event while the queue is full, or any event after close).
    pub fn append(&self, at_ms: u64, event: Event) -> Option<u64> {
        let shared = &self.shared;
        if event.is_request_event()
            && shared.queue_len.load(Ordering::Relaxed) >= self.max_queue_events
        {
            shared.dropped.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        let queued = shared.queue_len.fetch_add(1, Ordering::Relaxed) + 1;
        let seq = shared.next_seq.fetch_add(1, Ordering::SeqCst);
        let envelope = Box::new(Envelope {
            schema_version: SCHEMA_VERSION,
            seq,
            at_ms,
            event,
        });
        if self.sender.send(Command::Append(envelope)).is_err() {
            shared.queue_len.fetch_sub(1, Ordering::Relaxed);
            shared.dropped.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        shared.appended.fetch_add(1, Ordering::Relaxed);
        if queued.is_multiple_of(self.wake_every_events) {
            self.waker.unpark();
        }
        Some(seq)
    }

    /// Waits until everything appended before this call is durable; returns the durable seq.
    pub async fn flush(&self) -> Result<u64, JournalError> {
        let target = self
            .shared
            .next_seq
            .load(Ordering::SeqCst)
            .saturating_sub(1);
        let (reply, answer) = oneshot::channel();
        self.sender
            .send(Command::Flush { target, reply })
            .map_err(|_| JournalError::Closed)?;
        self.waker.unpark();
        answer.await.map_err(|_| JournalError::Closed)?
    }

    /// Queues a snapshot of the state after `seq` (in the owner's layout `state_version`);
    /// written once events up to `seq` are durable.
    pub fn snapshot(&self, seq: u64, at_ms: u64, state_version: u16, state: Vec<u8>) {
        let pending = PendingSnapshot {
            seq,
            at_ms,
            state_version,
            state,
        };
        if self.sender.send(Command::Snapshot(pending)).is_err() {
            tracing::warn!(seq, "journal closed: snapshot not written");
        }
        self.waker.unpark();
    }

    /// Writes and flushes everything queued before this call, then stops the writer thread.
    /// Other clones' later appends are dropped. Returns the final durable seq.
    pub async fn close(self) -> Result<u64, JournalError> {
        let (reply, answer) = oneshot::channel();
        self.sender
            .send(Command::Close { reply })
            .map_err(|_| JournalError::Closed)?;
        self.waker.unpark();
        let result = answer.await.map_err(|_| JournalError::Closed)?;
        // The writer replied as its last act, so this join is immediate.
        let thread = self.thread.lock().ok().and_then(|mut slot| slot.take());
        if let Some(thread) = thread {
            if thread.join().is_err() {
                tracing::error!("journal writer thread panicked");
            }
        }
        result
    }

    /// The writer's counters, read directly.
    pub fn stats(&self) -> JournalStats {
        let s = &self.shared;
        JournalStats {
            appended: s.appended.load(Ordering::Relaxed),
            written: s.written.load(Ordering::Relaxed),
            dropped: s.dropped.load(Ordering::Relaxed),
            durable_seq: s.durable_seq.load(Ordering::SeqCst),
            queue_len: s.queue_len.load(Ordering::Relaxed),
            write_errors: s.write_errors.load(Ordering::Relaxed),
            healthy: s.healthy.load(Ordering::Relaxed),
        }
    }
}

impl Drop for JournalHandle {
    /// Lets the writer notice the last handle going away now rather than at its next tick: drop
    /// this handle's sender first (swapping in an unconnected one), then wake the writer.
    fn drop(&mut self) {
        let (unconnected, _) = mpsc::channel();
        drop(std::mem::replace(&mut self.sender, unconnected));
        self.waker.unpark();
    }
}

/// Which ready envelopes [`Writer::write_ready`] writes.
#[derive(Debug, Clone, Copy)]
enum Records {
    /// Every one (before a flush).
    All,
    /// As many as fill whole records.
    Whole,
}

/// The writer thread's state.
struct Writer {
    journal: Box<dyn Journal>,
    receiver: mpsc::Receiver<Command>,
    shared: Arc<Shared>,
    flush_every: Duration,
    flush_every_events: usize,
    retention_ms: u64,
    /// Consecutive envelopes not yet written.
    ready: Vec<Envelope>,
    /// Envelopes that arrived before a smaller seq (see the module docs).
    out_of_order: BTreeMap<u64, Envelope>,
    next_expected: u64,
    /// Last seq written but not yet flushed.
    written_unflushed: Option<u64>,
    /// The records written since the last flush, as encoded, back to back, and each one's key
    /// (first seq) and length: after a reopen they are written again as the same records, since
    /// the store may have lost them. Encoded and compressed a record takes ~50 bytes an event,
    /// where an envelope took ~300 and its strings. All keep their capacity from one flush to
    /// the next, so a busy writer does not allocate (and fault in) a new buffer per record.
    unflushed: Vec<u8>,
    unflushed_records: Vec<(u64, usize)>,
    /// Where each record is encoded, and what encoding it works in.
    record: Vec<u8>,
    scratch: codec::EncodeScratch,
    /// While failing: when to reopen the store next, and the wait after that one.
    next_reopen_at: Instant,
    reopen_backoff: Duration,
    waiters: Vec<(u64, Reply)>,
    snapshots: Vec<PendingSnapshot>,
    newest_at_ms: u64,
    last_prune_at_ms: Option<u64>,
    /// The last write failed: retry on the timer only, not on every event.
    failing: bool,
}

impl Writer {
    fn run(mut self) {
        let mut next_tick = Instant::now() + self.flush_every;
        loop {
            // Sleep until the tick unless a handle wakes us (flush, snapshot, close, or a full
            // batch); then drain everything queued without blocking.
            let timeout = next_tick.saturating_duration_since(Instant::now());
            if !timeout.is_zero() {
                std::thread::park_timeout(timeout);
            }
            loop {
                match self.receiver.try_recv() {
                    Ok(Command::Close { reply }) => {
                        let _ = reply.send(self.commit());
                        return;
                    }
                    Ok(Command::Flush { target, reply }) => {
                        self.waiters.push((target, reply));
                        let _ = self.commit();
                    }
                    Ok(Command::Append(envelope)) => self.accept(*envelope),
                    Ok(Command::Snapshot(pending)) => self.snapshots.push(pending),
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => {
                        // Every handle is gone without close: still write what we have.
                        let _ = self.commit();
                        return;
                    }
                }
                if !self.failing && self.ready.len() >= self.flush_every_events {
                    let _ = self.write_ready(Records::Whole);
                }
            }
            if !self.failing && self.ready.len() >= self.flush_every_events {
                let _ = self.write_ready(Records::Whole);
            }
            if Instant::now() >= next_tick {
                self.reopen_when_due();
                let _ = self.commit();
                next_tick = Instant::now() + self.flush_every;
            }
        }
    }

    /// Puts an envelope in seq order.
    fn accept(&mut self, envelope: Envelope) {
        self.newest_at_ms = self.newest_at_ms.max(envelope.at_ms);
        if envelope.seq != self.next_expected {
            self.out_of_order.insert(envelope.seq, envelope);
            return;
        }
        self.ready.push(envelope);
        self.next_expected += 1;
        while let Some(next) = self.out_of_order.remove(&self.next_expected) {
            self.ready.push(next);
            self.next_expected += 1;
        }
    }

    /// Writes ready envelopes as records (no flush): all of them, or between flushes only
    /// whole records, so a threshold write leaves no short record behind (the rest waits for
    /// the next write, at the latest the flush's). The written ones leave `ready` in one drain
    /// at the end: draining each record's worth from the front would shift the rest of a long
    /// queue once per record.
    fn write_ready(&mut self, records: Records) -> Result<(), JournalError> {
        let end = match records {
            Records::All => self.ready.len(),
            Records::Whole => {
                // A threshold below a record's size writes records of the threshold's size.
                let unit = self.flush_every_events.min(RECORD_MAX_EVENTS);
                self.ready.len() - self.ready.len() % unit
            }
        };
        let mut written = 0;
        let mut outcome = Ok(());
        while written < end {
            let take = (end - written).min(RECORD_MAX_EVENTS);
            let batch = &self.ready[written..written + take];
            let (first, last) = (batch[0].seq, batch[take - 1].seq);
            let stored = codec::encode_batch_into(batch, &mut self.scratch, &mut self.record)
                .map_err(JournalError::from)
                .and_then(|()| self.journal.write_record(first, &self.record));
            if let Err(error) = stored {
                outcome = Err(self.failed(error));
                break;
            }
            self.unflushed.extend_from_slice(&self.record);
            self.unflushed_records.push((first, self.record.len()));
            written += take;
            self.written_unflushed = Some(last);
            self.shared
                .written
                .fetch_add(take as u64, Ordering::Relaxed);
            self.shared
                .queue_len
                .fetch_sub(take as u64, Ordering::Relaxed);
        }
        self.ready.drain(..written);
        outcome
    }

    /// While failing, once the backoff has passed: reopen the store and write again what it
    /// may have lost (the records not yet flushed). A store that stays failed after a write
    /// error (sled after a full or read-only disk) comes back this way when the disk does.
    fn reopen_when_due(&mut self) {
        if !self.failing || Instant::now() < self.next_reopen_at {
            return;
        }
        self.next_reopen_at = Instant::now() + self.reopen_backoff;
        self.reopen_backoff = (self.reopen_backoff * 2).min(REOPEN_BACKOFF_MAX);
        if let Err(error) = self.journal.reopen() {
            tracing::warn!(%error, "journal reopen failed; retrying");
            return;
        }
        let mut from = 0;
        for &(first_seq, len) in &self.unflushed_records {
            let record = &self.unflushed[from..from + len];
            from += len;
            if let Err(error) = self.journal.write_record(first_seq, record) {
                tracing::warn!(%error, "journal still failing after reopen; retrying");
                return;
            }
        }
        tracing::info!(
            rewritten_records = self.unflushed_records.len(),
            queued = self.ready.len(),
            "journal reopened"
        );
    }

    /// Writes, flushes, stores due snapshots, answers waiters, prunes when due.
    fn commit(&mut self) -> Result<u64, JournalError> {
        let result = self.try_commit();
        let durable = self.shared.durable_seq.load(Ordering::SeqCst);
        let waiters = std::mem::take(&mut self.waiters);
        for (target, reply) in waiters {
            match &result {
                Err(error) => {
                    let _ = reply.send(Err(error.clone()));
                }
                Ok(_) if target <= durable => {
                    let _ = reply.send(Ok(durable));
                }
                // Waits for a seq still in flight from another thread.
                Ok(_) => self.waiters.push((target, reply)),
            }
        }
        result
    }

    fn try_commit(&mut self) -> Result<u64, JournalError> {
        self.write_ready(Records::All)?;
        if let Some(last) = self.written_unflushed {
            if let Err(error) = self.journal.flush() {
                return Err(self.failed(error));
            }
            self.written_unflushed = None;
            self.unflushed.clear();
            self.unflushed_records.clear();
            self.shared.durable_seq.store(last, Ordering::SeqCst);
        }
        let durable = self.shared.durable_seq.load(Ordering::SeqCst);
        self.write_snapshots(durable)?;
        if self.failing {
            self.failing = false;
            self.reopen_backoff = REOPEN_BACKOFF_MIN;
            self.shared.healthy.store(true, Ordering::Relaxed);
            tracing::info!(
                durable,
                dropped_request_events = self.shared.dropped.load(Ordering::Relaxed),
                "journal writes recovered"
            );
        }
        self.prune_when_due();
        Ok(durable)
    }

    /// Stores queued snapshots whose events are all durable.
    fn write_snapshots(&mut self, durable: u64) -> Result<(), JournalError> {
        if !self.snapshots.iter().any(|pending| pending.seq <= durable) {
            return Ok(());
        }
        let (due, later): (Vec<_>, Vec<_>) = std::mem::take(&mut self.snapshots)
            .into_iter()
            .partition(|pending| pending.seq <= durable);
        self.snapshots = later;
        for (index, pending) in due.iter().enumerate() {
            let stored = self.journal.put_snapshot(
                pending.seq,
                pending.at_ms,
                pending.state_version,
                &pending.state,
            );
            if let Err(error) = stored {
                // Keep this one and the rest for the next tick.
                self.snapshots.extend(due.into_iter().skip(index));
                return Err(self.failed(error));
            }
        }
        self.journal.flush().map_err(|error| self.failed(error))
    }

    fn prune_when_due(&mut self) {
        if self.retention_ms == 0
            || self
                .last_prune_at_ms
                .is_some_and(|last| self.newest_at_ms < last.saturating_add(PRUNE_EVERY_MS))
        {
            return;
        }
        self.last_prune_at_ms = Some(self.newest_at_ms);
        let cutoff = self.newest_at_ms.saturating_sub(self.retention_ms);
        match self.journal.prune(cutoff) {
            Ok(report) if report.records_removed > 0 => {
                tracing::info!(?report, cutoff, "journal pruned")
            }
            Ok(_) => {}
            Err(error) => tracing::warn!(%error, "journal prune failed"),
        }
    }

    fn failed(&mut self, error: JournalError) -> JournalError {
        self.shared.write_errors.fetch_add(1, Ordering::Relaxed);
        self.shared.healthy.store(false, Ordering::Relaxed);
        if !self.failing {
            tracing::error!(%error, "journal write failed; keeping events, reopening the store");
            self.next_reopen_at = Instant::now() + self.reopen_backoff;
        }
        self.failing = true;
        error
    }
}

#[cfg(test)]
mod tests;
