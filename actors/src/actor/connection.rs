//! ConnectionActor: owns one connection's learned state (cooldown, disabled, lockouts, buckets).
//!
//! Receives attempt outcomes by `cast`, runs the pure `ConnectionState` policy, hands the events
//! to the recorder, and pushes its changed view to the combos that route to it. Admin operations
//! are `call`s so the operator learns whether something changed.

use std::sync::Arc;

use quotaroute_journal::Event;
use ractor::{Actor, ActorProcessingErr, ActorRef};

use crate::actor::messages::{ComboMsg, ConnectionMsg};
use crate::clock::SharedClock;
use crate::policy::connection_state::ConnectionState;
use crate::policy::rate_limit_headers::UsageReading;
use crate::policy::reading_end::reading_ends_at_ms;
use crate::policy::topology::ConnectionSpec;
use crate::recorder::Recorder;
use crate::view::ConnectionView;

pub struct ConnectionActor;

pub struct ConnectionArgs {
    pub spec: ConnectionSpec,
    pub state: ConnectionState,
    pub subscribers: Vec<ActorRef<ComboMsg>>,
    pub recorder: Recorder,
    pub clock: SharedClock,
}

pub struct ConnectionActorState {
    spec: ConnectionSpec,
    state: ConnectionState,
    subscribers: Vec<ActorRef<ComboMsg>>,
    recorder: Recorder,
    clock: SharedClock,
    last_view: Arc<ConnectionView>,
    /// The upstream's newest header reading of each window, journaled or not: the journal
    /// keeps a reading only when it matters to routing (`ConnectionState::usage_changes`), the
    /// admin view shows the newest (`Router::state_live`). Lost on restart, never replayed.
    latest: Vec<UsageReading>,
}

/// Windows whose newest reading is kept, at most (per-model windows of a busy account).
const MAX_LATEST_READINGS: usize = 64;

impl ConnectionActorState {
    /// Keeps the outcome's readings as the newest, without allocating for a known window.
    /// Each reading's end is bounded as the fold bounds it (`reading_end`): a header's absurd
    /// or missing reset shows no longer than its window's own length here either.
    fn note_readings(&mut self, readings: &[UsageReading], now_ms: u64) {
        for reading in readings {
            let full = self.latest.len() >= MAX_LATEST_READINGS;
            let ends_at_ms = reading_ends_at_ms(&reading.window, now_ms, reading.resets_at_ms);
            match self
                .latest
                .iter_mut()
                .find(|known| known.window == reading.window)
            {
                Some(known) => {
                    known.used = reading.used;
                    known.limit = reading.limit;
                    known.resets_at_ms = Some(ends_at_ms);
                }
                None if !full => self.latest.push(UsageReading {
                    resets_at_ms: Some(ends_at_ms),
                    ..reading.clone()
                }),
                None => {}
            }
        }
    }
}

impl ConnectionActorState {
    /// Applies and records `events`, then pushes the view if it changed.
    fn commit(&mut self, now_ms: u64, events: Vec<Event>) {
        if events.is_empty() {
            return;
        }
        for event in &events {
            self.state.apply(now_ms, event);
        }
        self.recorder.record_all(now_ms, events);
        self.push_view(now_ms, false);
    }

    fn push_view(&mut self, now_ms: u64, always: bool) {
        if !always && self.last_view.matches(&self.state, &self.spec, now_ms) {
            return;
        }
        self.last_view = Arc::new(ConnectionView::of(&self.state, &self.spec, now_ms));
        for combo in &self.subscribers {
            let _ = combo.cast(ComboMsg::ConnectionChanged(
                self.spec.id.clone(),
                self.last_view.clone(),
            ));
        }
    }
}

impl Actor for ConnectionActor {
    type Msg = ConnectionMsg;
    type State = ConnectionActorState;
    type Arguments = ConnectionArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        args: ConnectionArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        let now_ms = args.clock.now_ms();
        let last_view = Arc::new(ConnectionView::of(&args.state, &args.spec, now_ms));
        Ok(ConnectionActorState {
            spec: args.spec,
            state: args.state,
            subscribers: args.subscribers,
            recorder: args.recorder,
            clock: args.clock,
            last_view,
            latest: Vec::new(),
        })
    }

    async fn handle(
        &self,
        _myself: ActorRef<Self::Msg>,
        message: ConnectionMsg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        let now_ms = state.clock.now_ms();
        match message {
            ConnectionMsg::Outcome(outcome, applied) => {
                state.note_readings(&outcome.result.usage, now_ms);
                let events = state.state.on_outcome_owned(*outcome, now_ms, &state.spec);
                for event in &events {
                    log_state_change(event);
                }
                state.commit(now_ms, events);
                if let Some(applied) = applied {
                    let _ = applied.send(());
                }
            }
            ConnectionMsg::Clear(by, reply) => {
                let events = state
                    .state
                    .health
                    .clear(&state.spec.provider, &state.spec.id, by);
                let cleared = !events.is_empty();
                state.commit(now_ms, events);
                if let Some(reply) = reply {
                    let _ = reply.send(cleared);
                }
            }
            ConnectionMsg::ClearLockout(model, reply) => {
                let event =
                    state
                        .state
                        .lockouts
                        .clear(&state.spec.provider, &state.spec.id, &model);
                let cleared = event.is_some();
                state.commit(now_ms, event.into_iter().collect());
                let _ = reply.send(cleared);
            }
            ConnectionMsg::ClearReadings(reply) => {
                let events = state.state.buckets.forget_header_readings(
                    &state.spec.provider,
                    &state.spec.id,
                    now_ms,
                );
                let forgotten = events.len();
                state.latest.clear();
                state.commit(now_ms, events);
                let _ = reply.send(forgotten);
            }
            ConnectionMsg::PushUsage(reading, reply) => {
                // A pushed reading is newer than any the upstream gave before it.
                state.latest.retain(|known| known.window != reading.window);
                state.commit(now_ms, vec![Event::UsageObserved(reading)]);
                let _ = reply.send(());
            }
            ConnectionMsg::Peer(applied) => {
                if let Event::UsageObserved(reading) = &*applied.event {
                    state.latest.retain(|known| known.window != reading.window);
                }
                if state.state.apply_peer(&applied) {
                    tracing::info!(
                        origin = %applied.origin_node,
                        kind = applied.event.kind(),
                        connection = %state.spec.id,
                        "learned from a peer"
                    );
                }
                state
                    .recorder
                    .record_one(now_ms, Event::PeerApplied(*applied));
                state.push_view(now_ms, false);
            }
            ConnectionMsg::SetSubscribers(subscribers) => {
                state.subscribers = subscribers;
                state.push_view(now_ms, true);
            }
            ConnectionMsg::Subscribe(combo) => {
                let _ = combo.cast(ComboMsg::ConnectionChanged(
                    state.spec.id.clone(),
                    state.last_view.clone(),
                ));
                state.subscribers.push(combo);
            }
            ConnectionMsg::Reconfigure(spec) => {
                state.spec = *spec;
                state.push_view(now_ms, false);
            }
            ConnectionMsg::State(reply) => {
                let _ = reply.send(state.state.clone());
            }
            ConnectionMsg::LatestReadings(reply) => {
                let _ = reply.send(state.latest.clone());
            }
            ConnectionMsg::Ping(reply) => {
                let _ = reply.send(());
            }
            ConnectionMsg::Crash => {
                return Err(ActorProcessingErr::from("crash requested by a test"));
            }
        }
        Ok(())
    }
}

/// State changes are `info`; everything per request is `debug` (style.md).
fn log_state_change(event: &Event) {
    match event {
        Event::ModelLocked(e) => tracing::info!(
            connection = %e.connection, model = %e.model, reason = ?e.reason,
            until_ms = e.until_ms, failure_count = e.failure_count, "model locked"
        ),
        Event::ConnectionCooldown(e) => tracing::info!(
            connection = %e.connection, level = e.level, until_ms = e.until_ms,
            "connection cooling down"
        ),
        Event::ConnectionDisabled(e) => tracing::info!(
            connection = %e.connection, reason = ?e.reason, "connection disabled"
        ),
        _ => tracing::debug!(kind = event.kind(), "connection event"),
    }
}
