//! ConnectionActor: owns one connection's learned state (cooldown, disabled, lockouts, buckets).
//!
//! Receives attempt outcomes by `cast`, runs the pure `ConnectionState` policy, hands the events
//! to the recorder, and pushes its changed view to the combos that route to it. Admin operations
//! are `call`s so the operator learns whether something changed.

use std::sync::Arc;

use quotaroute_journal::{ActionBy, Event, PeerApplied, UsageObserved};
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};

use crate::actor::combo::ComboMsg;
use crate::actor::recorder::RecorderMsg;
use crate::clock::SharedClock;
use crate::outcome::Outcome;
use crate::policy::connection_state::ConnectionState;
use crate::topology::ConnectionSpec;
use crate::view::ConnectionView;

/// Messages to a connection actor.
pub enum ConnectionMsg {
    /// One attempt's result (fire-and-forget).
    /// An attempt's outcome; the reply port (if any) is answered once its effect has been
    /// journaled and pushed to the combos (read-your-writes, behaviour §3).
    Outcome(Box<Outcome>, Option<RpcReplyPort<()>>),
    /// Admin: clear cooldown and disabled state; replies whether anything was cleared.
    Clear(ActionBy, Option<RpcReplyPort<bool>>),
    /// Admin: clear one model's lockout; replies whether there was one.
    ClearLockout(String, RpcReplyPort<bool>),
    /// Admin: a pushed usage reading.
    PushUsage(UsageObserved, RpcReplyPort<()>),
    /// A peer node's event about this connection (fire-and-forget, behaviour §9).
    Peer(Box<PeerApplied>),
    /// The combos that route to this connection (replaces the list).
    SetSubscribers(Vec<ActorRef<ComboMsg>>),
    /// Add one combo to the subscribers and send it the current view.
    Subscribe(ActorRef<ComboMsg>),
    /// New settings after a reload (learned state is kept).
    Reconfigure(Box<ConnectionSpec>),
    /// The actor's own live state (for admin views and the replay-equals-live tests).
    State(RpcReplyPort<ConnectionState>),
    /// Replies once everything queued before it has been handled (see `Router::settle`).
    Ping(RpcReplyPort<()>),
    /// Test hook: make the actor fail, to exercise supervision.
    Crash,
}

pub struct ConnectionActor;

pub struct ConnectionArgs {
    pub spec: ConnectionSpec,
    pub state: ConnectionState,
    pub subscribers: Vec<ActorRef<ComboMsg>>,
    pub recorder: ActorRef<RecorderMsg>,
    pub clock: SharedClock,
}

pub struct ConnectionActorState {
    spec: ConnectionSpec,
    state: ConnectionState,
    subscribers: Vec<ActorRef<ComboMsg>>,
    recorder: ActorRef<RecorderMsg>,
    clock: SharedClock,
    last_view: Arc<ConnectionView>,
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
        let _ = self.recorder.cast(RecorderMsg::RecordAll(now_ms, events));
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
            ConnectionMsg::PushUsage(reading, reply) => {
                state.commit(now_ms, vec![Event::UsageObserved(reading)]);
                let _ = reply.send(());
            }
            ConnectionMsg::Peer(applied) => {
                if state.state.apply_peer(&applied) {
                    tracing::info!(
                        origin = %applied.origin_node,
                        kind = applied.event.kind(),
                        connection = %state.spec.id,
                        "learned from a peer"
                    );
                }
                let _ = state
                    .recorder
                    .cast(RecorderMsg::RecordOne(now_ms, Event::PeerApplied(*applied)));
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
