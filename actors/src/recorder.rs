//! Recorder: the single appender to the journal. Folds every event it is given into the
//! `RouterState` (the same `apply` the owning actors ran), appends it, and snapshots that fold
//! every `snapshot_every_events`, so a snapshot is exactly the state at its seq.
//!
//! Under `request_events = "failures"` it still folds every event but appends only those the
//! policy keeps, and snapshots at a graceful stop so the unjournaled counts survive it.
//!
//! Not an actor: the actors record their events by a call under a short lock, in the step
//! that produced them, so a request's decision and outcome cost no task wake-ups of their own
//! and the journal's order is the order the steps took the lock. It never calls an actor and
//! never waits (the journal writer and a cluster tap only queue), so no actor can wait on
//! another through it.
//!
//! Readers (the admin view, `/metrics`, the dashboard, the supervisor's spawns) take the same
//! lock, so a read copies out only what its caller needs ([`Recorder::read`]); how long reads
//! held the lock is counted ([`Recorder::reads`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use quotaroute_journal::{Event, JournalError, JournalHandle, JournalRecovered};

use crate::tap::EventTap;

use crate::policy::request_events::RequestEvents;
use crate::policy::router_state::RouterState;
use crate::snapshot;

/// What the recorder starts from.
pub struct RecorderArgs {
    pub journal: JournalHandle,
    pub state: RouterState,
    pub snapshot_every_events: u64,
    pub request_events: RequestEvents,
    /// Sees every event (a cluster node's publisher and leases); `None` for one node.
    pub tap: Option<Arc<dyn EventTap>>,
}

/// The shared recorder. Cheap to clone; every clone records into the same fold and journal.
#[derive(Clone)]
pub struct Recorder {
    state: Arc<Mutex<RecorderState>>,
    journal: JournalHandle,
    reads: Arc<ReadHolds>,
}

/// How long reads held the recorder's lock (every request's step waits behind them), since
/// start: counted by [`Recorder::read`], in nanoseconds.
#[derive(Debug, Default)]
struct ReadHolds {
    count: AtomicU64,
    total_ns: AtomicU64,
    longest_ns: AtomicU64,
}

/// A reading of [`ReadHolds`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RecorderReads {
    pub count: u64,
    pub total: Duration,
    pub longest: Duration,
}

impl RecorderReads {
    /// The mean hold of a read (zero without reads).
    pub fn mean(&self) -> Duration {
        u32::try_from(self.count)
            .ok()
            .filter(|count| *count > 0)
            .map_or(Duration::ZERO, |count| self.total / count)
    }
}

impl Recorder {
    pub fn new(args: RecorderArgs) -> Recorder {
        Recorder {
            journal: args.journal.clone(),
            state: Arc::new(Mutex::new(RecorderState {
                journal: args.journal,
                state: args.state,
                snapshot_every_events: args.snapshot_every_events,
                request_events: args.request_events,
                since_snapshot: 0,
                outage: None,
                tap: args.tap,
            })),
            reads: Arc::default(),
        }
    }

    /// A panic while recording leaves the fold as far as it got; later events still record.
    fn locked(&self) -> MutexGuard<'_, RecorderState> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// One event (a combo's decision).
    pub fn record_one(&self, at_ms: u64, event: Event) {
        self.locked().record(at_ms, event);
    }

    /// Events one step produced at the same `now`, in order.
    pub fn record_all(&self, at_ms: u64, events: impl IntoIterator<Item = Event>) {
        let mut state = self.locked();
        for event in events {
            state.record(at_ms, event);
        }
    }

    /// Events one step produced, in order, each with its `now`.
    pub fn record(&self, events: impl IntoIterator<Item = (u64, Event)>) {
        let mut state = self.locked();
        for (at_ms, event) in events {
            state.record(at_ms, event);
        }
    }

    /// Runs `read` on the fold under the lock and counts how long it held it. `read` must
    /// copy out only what its caller needs: every actor step waits for the lock meanwhile.
    pub fn read<T>(&self, read: impl FnOnce(&RouterState) -> T) -> T {
        let locked = self.locked();
        let started = Instant::now();
        let out = read(&locked.state);
        drop(locked);
        let held_ns = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.reads.count.fetch_add(1, Ordering::Relaxed);
        self.reads.total_ns.fetch_add(held_ns, Ordering::Relaxed);
        self.reads.longest_ns.fetch_max(held_ns, Ordering::Relaxed);
        out
    }

    /// How long reads held the lock since start.
    pub fn reads(&self) -> RecorderReads {
        RecorderReads {
            count: self.reads.count.load(Ordering::Relaxed),
            total: Duration::from_nanos(self.reads.total_ns.load(Ordering::Relaxed)),
            longest: Duration::from_nanos(self.reads.longest_ns.load(Ordering::Relaxed)),
        }
    }

    /// The whole folded state, copied: as long as the fold is big (every conversation group),
    /// so for restarts' comparisons and tests, never a path a client can drive.
    pub fn state(&self) -> RouterState {
        self.read(RouterState::clone)
    }

    /// Waits until everything recorded so far is durable; returns the durable seq.
    pub async fn flush(&self) -> Result<u64, JournalError> {
        self.journal.flush().await
    }
}

struct RecorderState {
    journal: JournalHandle,
    state: RouterState,
    snapshot_every_events: u64,
    request_events: RequestEvents,
    since_snapshot: u64,
    /// While the journal fails: since when, and its dropped and error counts then.
    outage: Option<JournalOutage>,
    tap: Option<Arc<dyn EventTap>>,
}

#[derive(Debug, Clone, Copy)]
struct JournalOutage {
    since_ms: u64,
    dropped: u64,
    write_errors: u64,
}

impl RecorderState {
    /// Notices the journal failing and, with the first event after it writes again, journals
    /// `journal_recovered` with what the outage cost.
    fn watch_journal(&mut self, at_ms: u64) {
        let stats = self.journal.stats();
        match (stats.healthy, self.outage) {
            (false, None) => {
                self.outage = Some(JournalOutage {
                    since_ms: at_ms,
                    dropped: stats.dropped,
                    write_errors: stats.write_errors.saturating_sub(1),
                })
            }
            (true, Some(outage)) => {
                self.outage = None;
                let recovered = JournalRecovered {
                    failed_for_ms: at_ms.saturating_sub(outage.since_ms),
                    write_errors: stats.write_errors.saturating_sub(outage.write_errors),
                    dropped_request_events: stats.dropped.saturating_sub(outage.dropped),
                };
                tracing::info!(?recovered, "journal recovered");
                if let Some(seq) = self
                    .journal
                    .append(at_ms, Event::JournalRecovered(recovered))
                {
                    self.state.last_seq = seq;
                }
            }
            _ => {}
        }
    }

    fn record(&mut self, at_ms: u64, event: Event) {
        self.watch_journal(at_ms);
        let journaled = self.request_events.journals(&self.state, at_ms, &event);
        let stopping = matches!(event, Event::NodeStopped(_));
        self.state.apply(at_ms, &event);
        if journaled {
            let tapped = match &self.tap {
                Some(tap) if tap.wants(at_ms, &event) => Some((tap.clone(), event.clone())),
                Some(_) | None => None,
            };
            if let Some(seq) = self.journal.append(at_ms, event) {
                self.state.last_seq = seq;
                if let Some((tap, copy)) = tapped {
                    tap.journaled(seq, at_ms, copy);
                }
            }
        } else if let Some(tap) = &self.tap {
            tap.wants(at_ms, &event);
        }
        self.since_snapshot += 1;
        let due =
            self.snapshot_every_events > 0 && self.since_snapshot >= self.snapshot_every_events;
        // Folded-only counts exist only in memory: a graceful stop keeps them in a snapshot.
        let stop_with_unjournaled = stopping && self.request_events == RequestEvents::Failures;
        if due || stop_with_unjournaled {
            self.since_snapshot = 0;
            match snapshot::encode(&self.state) {
                Ok(bytes) => self.journal.snapshot(
                    self.state.last_seq,
                    self.state.last_at_ms,
                    snapshot::STATE_LAYOUT,
                    bytes,
                ),
                Err(error) => tracing::warn!(%error, "snapshot not written"),
            }
        }
    }
}
