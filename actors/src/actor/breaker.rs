//! BreakerActor: owns one provider's circuit breaker (behaviour §5).
//!
//! Receives failure/success signals by `cast`, runs the pure `BreakerState` policy, hands the
//! events to the recorder and pushes the new state to the combos that route to the provider.
//! Probe tokens live in a shared `ProbeGate` (taken by combos, given back by permits).

use std::sync::Arc;

use quotaroute_journal::Event;
use ractor::{Actor, ActorProcessingErr, ActorRef};

use crate::actor::messages::{BreakerMsg, ComboMsg};
use crate::breaker_hint::BreakerHint;
use crate::clock::SharedClock;
use crate::policy::breaker::{BreakerSettings, BreakerState};
use crate::recorder::Recorder;

pub struct BreakerActor;

pub struct BreakerArgs {
    pub provider: String,
    pub settings: BreakerSettings,
    pub state: BreakerState,
    pub subscribers: Vec<ActorRef<ComboMsg>>,
    pub recorder: Recorder,
    pub clock: SharedClock,
    /// Published after every message so reporters can skip no-op successes.
    pub hint: Arc<BreakerHint>,
}

pub struct BreakerActorState {
    provider: String,
    settings: BreakerSettings,
    state: Arc<BreakerState>,
    subscribers: Vec<ActorRef<ComboMsg>>,
    recorder: Recorder,
    clock: SharedClock,
    hint: Arc<BreakerHint>,
}

impl BreakerActorState {
    /// Tells reporters whether a success on the current state would change anything.
    fn publish_hint(&self) {
        self.hint
            .publish(self.state.success_is_noop(&self.settings));
    }

    fn commit(&mut self, now_ms: u64, events: Vec<Event>) {
        if events.is_empty() {
            return;
        }
        let mut next = BreakerState::clone(&self.state);
        for event in &events {
            // Only a change of phase is a transition to log: an operator's reset of a
            // CLOSED breaker (journaled: it clears the counts) is no CLOSED → CLOSED line.
            match event {
                Event::BreakerTransition(t) if t.from != t.to => tracing::info!(
                    provider = %t.provider, from = t.from.as_str(), to = t.to.as_str(),
                    failures = t.failures, cycles = t.cycles, "breaker transition"
                ),
                Event::BreakerTransition(t) => tracing::debug!(
                    provider = %t.provider, phase = t.to.as_str(), "breaker counts cleared"
                ),
                _ => {}
            }
            next.apply(now_ms, event);
        }
        self.state = Arc::new(next);
        self.recorder.record_all(now_ms, events);
        self.push();
    }

    fn push(&self) {
        for combo in &self.subscribers {
            let _ = combo.cast(ComboMsg::BreakerChanged(
                self.provider.clone(),
                self.state.clone(),
            ));
        }
    }
}

impl Actor for BreakerActor {
    type Msg = BreakerMsg;
    type State = BreakerActorState;
    type Arguments = BreakerArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        args: BreakerArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        let state = BreakerActorState {
            provider: args.provider,
            settings: args.settings,
            state: Arc::new(args.state),
            subscribers: args.subscribers,
            recorder: args.recorder,
            clock: args.clock,
            hint: args.hint,
        };
        state.publish_hint();
        Ok(state)
    }

    async fn handle(
        &self,
        _myself: ActorRef<Self::Msg>,
        message: BreakerMsg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        let now_ms = state.clock.now_ms();
        match message {
            BreakerMsg::Signal(signal, applied) => {
                let events = signal.events(&state.state, &state.provider, now_ms, &state.settings);
                state.commit(now_ms, events);
                // Publish the state this signal produced before counting it done (the order
                // `breaker_hint` relies on).
                state.publish_hint();
                if signal.failure {
                    state.hint.failure_done();
                }
                if let Some(applied) = applied {
                    let _ = applied.send(());
                }
            }
            BreakerMsg::ProbeAdmitted => {
                let events = state.state.on_probe_admitted(&state.provider, now_ms);
                state.commit(now_ms, events);
            }
            BreakerMsg::Reset(reply) => {
                let events = state.state.reset(&state.provider, now_ms);
                let changed = !events.is_empty();
                state.commit(now_ms, events);
                let _ = reply.send(changed);
            }
            BreakerMsg::SetSubscribers(subscribers) => {
                state.subscribers = subscribers;
                state.push();
            }
            BreakerMsg::Subscribe(combo) => {
                let _ = combo.cast(ComboMsg::BreakerChanged(
                    state.provider.clone(),
                    state.state.clone(),
                ));
                state.subscribers.push(combo);
            }
            BreakerMsg::Reconfigure(settings) => state.settings = settings,
            BreakerMsg::State(reply) => {
                let _ = reply.send(BreakerState::clone(&state.state));
            }
            BreakerMsg::Ping(reply) => {
                let _ = reply.send(());
            }
            BreakerMsg::Crash => return Err(ActorProcessingErr::from("crash requested by a test")),
        }
        state.publish_hint();
        Ok(())
    }
}
