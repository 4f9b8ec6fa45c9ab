//! RecorderActor: the single appender to the journal. Folds every event it is given into the
//! `RouterState` (the same `apply` the owning actors ran), appends it, and snapshots that fold
//! every `snapshot_every_events`, so a snapshot is exactly the state at its seq.
//!
//! Under `request_events = "failures"` it still folds every event but appends only those the
//! policy keeps, and snapshots at a graceful stop so the unjournaled counts survive it.
//!
//! Other actors only `cast` to it; the supervisor and admin `call` it for the folded state. It
//! never calls anyone.

use std::sync::Arc;

use quotaroute_journal::{Event, JournalHandle, JournalRecovered};
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};

use crate::tap::EventTap;

use crate::policy::request_events::RequestEvents;
use crate::policy::router_state::RouterState;
use crate::snapshot;

/// Messages to the recorder.
// ractor boxes every message, so a large variant costs no more than the box it already takes.
#[allow(clippy::large_enum_variant)]
pub enum RecorderMsg {
    /// Events one actor produced in one step, in order, each with its `now`.
    Record(Vec<(u64, Event)>),
    /// One event (a combo's decision): no list to allocate.
    RecordOne(u64, Event),
    /// Events one actor produced in one step at the same `now`, in order.
    RecordAll(u64, Vec<Event>),
    /// The folded state (for admin, restarts, and tests).
    State(RpcReplyPort<RouterState>),
    /// Wait until everything recorded so far is durable; replies with the durable seq.
    Flush(RpcReplyPort<Result<u64, String>>),
}

pub struct RecorderActor;

pub struct RecorderArgs {
    pub journal: JournalHandle,
    pub state: RouterState,
    pub snapshot_every_events: u64,
    pub request_events: RequestEvents,
    /// Sees every event (a cluster node's publisher and leases); `None` for one node.
    pub tap: Option<Arc<dyn EventTap>>,
}

pub struct RecorderState {
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

impl Actor for RecorderActor {
    type Msg = RecorderMsg;
    type State = RecorderState;
    type Arguments = RecorderArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        args: RecorderArgs,
    ) -> Result<RecorderState, ActorProcessingErr> {
        Ok(RecorderState {
            journal: args.journal,
            state: args.state,
            snapshot_every_events: args.snapshot_every_events,
            request_events: args.request_events,
            since_snapshot: 0,
            outage: None,
            tap: args.tap,
        })
    }

    async fn handle(
        &self,
        _myself: ActorRef<Self::Msg>,
        message: RecorderMsg,
        state: &mut RecorderState,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            RecorderMsg::Record(events) => {
                for (at_ms, event) in events {
                    state.record(at_ms, event);
                }
            }
            RecorderMsg::RecordOne(at_ms, event) => state.record(at_ms, event),
            RecorderMsg::RecordAll(at_ms, events) => {
                for event in events {
                    state.record(at_ms, event);
                }
            }
            RecorderMsg::State(reply) => {
                let _ = reply.send(state.state.clone());
            }
            RecorderMsg::Flush(reply) => {
                let result = state.journal.flush().await.map_err(|e| e.to_string());
                let _ = reply.send(result);
            }
        }
        Ok(())
    }
}
