//! ComboActor: owns one combo's DRR deficits and its copies of the connection and breaker state
//! it routes over. One `call` per routing decision: it evaluates hard blocks, runs the pure
//! selector, takes the winner's in-flight slot (and probe token), journals the decision and
//! replies with the ordered targets and the permit.
//!
//! It never calls another actor: connection and breaker actors push their changes here.

use std::collections::HashMap;
use std::sync::Arc;

use quotaroute_journal::{ApiFormat, BlockReason, Event, RouteDecided, Skipped};
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};

use crate::actor::breaker::BreakerMsg;
use crate::actor::recorder::RecorderMsg;
use crate::clock::SharedClock;
use crate::permit::{InFlight, Permit, SharedProbeGate};
use crate::policy::breaker::{BreakerSettings, BreakerState};
use crate::policy::drr::DrrDeficits;
use crate::policy::quota_share::{apply_route_decided, select, DrrKeys, TargetView};
use crate::registry::Registry;
use crate::topology::ComboSpec;
use crate::view::{BreakerAdmission, BreakerView, ConnectionView};

/// One target as handed to a request: cheap to clone (shared strings).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoutedTarget {
    /// Index in the combo's target list.
    pub index: u16,
    pub connection: Arc<str>,
    pub provider: Arc<str>,
    /// The upstream model to ask for.
    pub model: Arc<str>,
    pub format: ApiFormat,
    pub weight: u32,
}

/// A target with the live handles a combo needs for it.
#[derive(Debug, Clone)]
pub struct TargetRuntime {
    pub target: Arc<RoutedTarget>,
    /// `connection/model`, shared with the setup's key table.
    pub exec_key: Arc<str>,
    pub max_concurrent: Option<u32>,
    pub in_flight: Arc<InFlight>,
}

/// Everything a combo is configured with; replaced whole on reload.
#[derive(Debug, Clone)]
pub struct ComboSetup {
    pub spec: ComboSpec,
    /// The spec's targets as the DRR turn keys them (config order), resolved once; replay
    /// resolves the same table from the journal's `config_loaded`.
    pub keys: DrrKeys,
    pub generation: u64,
    pub targets: Vec<TargetRuntime>,
    pub breaker_settings: HashMap<String, BreakerSettings>,
}

/// What a request asks of a combo.
#[derive(Debug, Clone)]
pub struct RouteRequest {
    pub request_id: String,
    /// The model name the client sent (the combo name or `provider/model`).
    pub model: String,
    /// The endpoint's format: targets of the other format are never used.
    pub format: ApiFormat,
    /// Only this connection's targets (response affinity: a stored response lives in the
    /// account that created it).
    pub only_connection: Option<String>,
}

/// A routing decision: ordered targets, the first one's permit already held.
#[derive(Debug)]
pub struct Routed {
    /// Every target of the combo (shared, one reference per decision rather than one per
    /// target: those counts would bounce between the combo's and the caller's cores).
    pub targets: Arc<[Arc<RoutedTarget>]>,
    /// The decided order, as positions in `targets`.
    pub order: Vec<usize>,
    /// Position in `order` of the target whose permit is held.
    pub position: usize,
    pub permit: Permit,
    pub skipped: Vec<Skipped>,
    pub max_attempts: u32,
    pub max_upstream_requests: u32,
}

/// Nothing could serve (behaviour §7).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unroutable {
    /// 429 when every block is a lockout or cooldown, else 503.
    pub status: u16,
    /// Until the earliest finite unblock, if any block ends by itself.
    pub retry_after_ms: Option<u64>,
    pub blocked: Vec<Skipped>,
    pub hold_ms: u64,
}

/// The combo's reply to a route request.
#[derive(Debug)]
pub enum RouteReply {
    Routed(Routed),
    Unroutable(Unroutable),
    /// The combo has no target of the endpoint's format.
    NoTargetForFormat,
    /// The combo has no target on `only_connection`.
    NoTargetOnConnection,
}

/// A failover: take the first target of `candidates` (positions in the order) that is still
/// unblocked.
#[derive(Debug, Clone)]
pub struct AcquireRequest {
    pub candidates: Vec<Arc<RoutedTarget>>,
}

#[derive(Debug)]
pub struct Acquired {
    /// Position in `candidates` of the target taken, with its permit.
    pub taken: Option<(usize, Permit)>,
    pub skipped: Vec<Skipped>,
}

/// Messages to a combo actor.
pub enum ComboMsg {
    Route(RouteRequest, RpcReplyPort<RouteReply>),
    Acquire(AcquireRequest, RpcReplyPort<Acquired>),
    ConnectionChanged(String, Arc<ConnectionView>),
    BreakerChanged(String, Arc<BreakerState>),
    Reconfigure(Box<ComboSetup>),
    /// The combo's deficits (for admin state and tests).
    Deficits(RpcReplyPort<DrrDeficits>),
    /// Test hook: make the actor fail, to exercise supervision.
    Crash,
}

pub struct ComboActor;

pub struct ComboArgs {
    pub setup: ComboSetup,
    pub deficits: DrrDeficits,
    pub connections: HashMap<String, Arc<ConnectionView>>,
    pub breakers: HashMap<String, Arc<BreakerState>>,
    pub registry: Arc<Registry>,
    pub recorder: ActorRef<RecorderMsg>,
    pub clock: SharedClock,
}

pub struct ComboState {
    setup: ComboSetup,
    deficits: DrrDeficits,
    connections: HashMap<String, Arc<ConnectionView>>,
    breakers: HashMap<String, Arc<BreakerState>>,
    gates: HashMap<String, SharedProbeGate>,
    /// Per target of `setup.targets` (same order): what `route` reads, resolved when the setup
    /// or a pushed copy changes rather than looked up by name per decision.
    slots: Vec<TargetSlot>,
    /// `setup.targets`' routed targets, handed whole to every decision.
    routed: Arc<[Arc<RoutedTarget>]>,
    /// Reused per decision so routing does not allocate its working lists.
    scratch: Scratch,
    registry: Arc<Registry>,
    recorder: ActorRef<RecorderMsg>,
    clock: SharedClock,
}

/// One target's resolved copies: its connection's view and its provider's breaker.
struct TargetSlot {
    connection: Option<Arc<ConnectionView>>,
    breaker: BreakerView,
}

/// Working lists of one decision.
#[derive(Default)]
struct Scratch {
    /// Positions in `setup.targets` of the targets of the request's format.
    positions: Vec<usize>,
    views: Vec<TargetView>,
    admissions: Vec<BreakerAdmission>,
}

/// How one target looks right now.
struct TargetNow {
    admission: BreakerAdmission,
    block: Option<(BlockReason, Option<u64>)>,
}

impl ComboState {
    fn breaker_view(&mut self, provider: &str) -> BreakerView {
        let state = self
            .breakers
            .get(provider)
            .cloned()
            .unwrap_or_else(|| Arc::new(BreakerState::new(provider)));
        let settings = self
            .setup
            .breaker_settings
            .get(provider)
            .cloned()
            .unwrap_or_default();
        let gate = match self.gates.get(provider) {
            Some(gate) => gate.clone(),
            None => {
                let gate = self.registry.gate(provider);
                self.gates.insert(provider.to_string(), gate.clone());
                gate
            }
        };
        BreakerView {
            state,
            settings,
            gate,
        }
    }

    /// Re-resolves every target's slot (after the setup changed).
    fn resolve_slots(&mut self) {
        let targets = std::mem::take(&mut self.setup.targets);
        self.slots = targets
            .iter()
            .map(|runtime| TargetSlot {
                connection: self.connections.get(&*runtime.target.connection).cloned(),
                breaker: self.breaker_view(&runtime.target.provider),
            })
            .collect();
        self.routed = targets.iter().map(|t| t.target.clone()).collect();
        self.setup.targets = targets;
    }

    fn connection_changed(&mut self, id: String, view: Arc<ConnectionView>) {
        for (slot, runtime) in self.slots.iter_mut().zip(&self.setup.targets) {
            if *runtime.target.connection == *id {
                slot.connection = Some(view.clone());
            }
        }
        self.connections.insert(id, view);
    }

    fn breaker_changed(&mut self, provider: String, breaker: Arc<BreakerState>) {
        for (slot, runtime) in self.slots.iter_mut().zip(&self.setup.targets) {
            if *runtime.target.provider == *provider {
                slot.breaker.state = breaker.clone();
            }
        }
        self.breakers.insert(provider, breaker);
    }

    /// Behaviour §2 step 0 for one target: breaker → connection → model lockout.
    fn evaluate(&mut self, target: &RoutedTarget, now_ms: u64) -> TargetNow {
        let admission = self.breaker_view(&target.provider).admission(now_ms);
        let block = match admission {
            BreakerAdmission::Blocked(reason, remaining) => Some((reason, remaining)),
            _ => self
                .connections
                .get(&*target.connection)
                .and_then(|view| view.block_for(&target.model, now_ms)),
        };
        TargetNow { admission, block }
    }

    /// Takes the in-flight slot (and the probe token when HALF_OPEN); `None` when the last probe
    /// token went to another combo first.
    fn take(
        &self,
        runtime: &TargetRuntime,
        breaker: &BreakerView,
        admission: BreakerAdmission,
        now_ms: u64,
    ) -> Option<Permit> {
        let permit = Permit::acquire(runtime.in_flight.clone());
        if admission != BreakerAdmission::Probe {
            return Some(permit);
        }
        if !breaker.take_probe(now_ms) {
            return None;
        }
        if let Some(breaker) = self.registry.load().breakers.get(&*runtime.target.provider) {
            let _ = breaker.cast(BreakerMsg::ProbeAdmitted);
        }
        Some(permit.with_probe(breaker.gate.clone(), now_ms))
    }

    fn route(&mut self, request: RouteRequest) -> RouteReply {
        let now_ms = self.clock.now_ms();
        let mut scratch = std::mem::take(&mut self.scratch);
        let reply = self.route_with(request, now_ms, &mut scratch);
        self.scratch = scratch;
        reply
    }

    fn route_with(
        &mut self,
        request: RouteRequest,
        now_ms: u64,
        scratch: &mut Scratch,
    ) -> RouteReply {
        let Scratch {
            positions,
            views,
            admissions,
        } = scratch;
        positions.clear();
        views.clear();
        admissions.clear();
        for (position, (runtime, slot)) in self.setup.targets.iter().zip(&self.slots).enumerate() {
            let target = &runtime.target;
            if target.format != request.format {
                continue;
            }
            if request
                .only_connection
                .as_deref()
                .is_some_and(|only| only != &*target.connection)
            {
                continue;
            }
            // Step 0, breaker → connection → model lockout, on the resolved copies.
            let admission = slot.breaker.admission(now_ms);
            let connection = slot.connection.as_deref();
            let hard_block = match admission {
                BreakerAdmission::Blocked(reason, remaining) => Some((reason, remaining)),
                _ => connection.and_then(|view| view.block_for(&target.model, now_ms)),
            };
            let saturated = connection.is_some_and(|view| view.is_saturated(&target.model, now_ms));
            positions.push(position);
            views.push(TargetView {
                weight: target.weight,
                exec_key: runtime.exec_key.clone(),
                hard_block,
                saturated,
                in_flight: runtime.in_flight.get(),
                max_concurrent: runtime.max_concurrent,
                degraded: admission == BreakerAdmission::Degraded,
            });
            admissions.push(admission);
        }
        if positions.is_empty() {
            return match request.only_connection {
                Some(_) => RouteReply::NoTargetOnConnection,
                None => RouteReply::NoTargetForFormat,
            };
        }
        let runtime_at = |i: usize| &self.setup.targets[positions[i]];
        let selection = select(self.setup.spec.strategy, views, &self.deficits);
        let mut skipped: Vec<Skipped> = selection
            .skipped
            .iter()
            .map(|&(i, reason, remaining_ms)| {
                skipped_entry(&runtime_at(i).target, reason, remaining_ms)
            })
            .collect();

        let mut taken = None;
        for (position, &i) in selection.order.iter().enumerate() {
            let breaker = &self.slots[positions[i]].breaker;
            match self.take(runtime_at(i), breaker, admissions[i], now_ms) {
                Some(permit) => {
                    taken = Some((position, permit));
                    break;
                }
                None => skipped.push(skipped_entry(
                    &runtime_at(i).target,
                    BlockReason::ProbeInFlight,
                    Some(breaker.settings.probe_timeout_ms),
                )),
            }
        }

        let index_of = |i: usize| runtime_at(i).target.index;
        let chosen = selection.chosen.filter(|_| taken.is_some());
        let decided = RouteDecided {
            request_id: request.request_id,
            generation: self.setup.generation,
            combo: self.setup.spec.name.clone(),
            model: request.model,
            room: selection.room.iter().map(|&i| index_of(i)).collect(),
            chosen: chosen.map(index_of),
            order: selection.order.iter().map(|&i| index_of(i)).collect(),
            skipped: skipped.clone(),
        };
        // The same function replay uses, so live deficits equal the journal's fold.
        apply_route_decided(&mut self.deficits, &self.setup.keys, &decided);
        let reply = match taken {
            Some((position, permit)) => RouteReply::Routed(Routed {
                targets: self.routed.clone(),
                order: {
                    // The selection's list, re-pointed at `targets` in place.
                    let mut order = selection.order;
                    for i in &mut order {
                        *i = positions[*i];
                    }
                    order
                },
                position,
                permit,
                skipped,
                max_attempts: self.setup.spec.max_attempts,
                max_upstream_requests: self.setup.spec.max_upstream_requests,
            }),
            None => RouteReply::Unroutable(unroutable(skipped, self.setup.spec.hold_ms)),
        };
        let _ = self
            .recorder
            .cast(RecorderMsg::RecordOne(now_ms, Event::RouteDecided(decided)));
        reply
    }

    fn acquire(&mut self, request: AcquireRequest) -> Acquired {
        let now_ms = self.clock.now_ms();
        let mut skipped = Vec::new();
        for (position, target) in request.candidates.iter().enumerate() {
            let now = self.evaluate(target, now_ms);
            if let Some((reason, remaining_ms)) = now.block {
                skipped.push(skipped_entry(target, reason, remaining_ms));
                continue;
            }
            let Some(runtime) = self
                .setup
                .targets
                .iter()
                .find(|t| {
                    t.target.index == target.index && t.target.connection == target.connection
                })
                .cloned()
            else {
                continue;
            };
            let breaker = self.breaker_view(&target.provider);
            match self.take(&runtime, &breaker, now.admission, now_ms) {
                Some(permit) => {
                    return Acquired {
                        taken: Some((position, permit)),
                        skipped,
                    }
                }
                None => skipped.push(skipped_entry(
                    target,
                    BlockReason::ProbeInFlight,
                    Some(breaker.settings.probe_timeout_ms),
                )),
            }
        }
        Acquired {
            taken: None,
            skipped,
        }
    }
}

fn skipped_entry(target: &RoutedTarget, reason: BlockReason, remaining_ms: Option<u64>) -> Skipped {
    Skipped {
        connection: target.connection.to_string(),
        model: target.model.to_string(),
        reason,
        remaining_ms,
    }
}

/// Behaviour §7: 429 iff every block is a lockout or cooldown, else 503; retry after the
/// earliest finite unblock.
pub fn unroutable(blocked: Vec<Skipped>, hold_ms: u64) -> Unroutable {
    let all_lockout_or_cooldown = blocked.iter().all(|s| {
        matches!(
            s.reason,
            BlockReason::Cooldown
                | BlockReason::RateLimited
                | BlockReason::NotFound
                | BlockReason::QuotaExhausted
        )
    });
    let retry_after_ms = blocked.iter().filter_map(|s| s.remaining_ms).min();
    Unroutable {
        status: if all_lockout_or_cooldown && !blocked.is_empty() {
            429
        } else {
            503
        },
        retry_after_ms,
        blocked,
        hold_ms,
    }
}

impl Actor for ComboActor {
    type Msg = ComboMsg;
    type State = ComboState;
    type Arguments = ComboArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        args: ComboArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        let mut state = ComboState {
            setup: args.setup,
            deficits: args.deficits,
            connections: args.connections,
            breakers: args.breakers,
            gates: HashMap::new(),
            slots: Vec::new(),
            routed: Arc::new([]),
            scratch: Scratch::default(),
            registry: args.registry,
            recorder: args.recorder,
            clock: args.clock,
        };
        state.resolve_slots();
        Ok(state)
    }

    async fn handle(
        &self,
        _myself: ActorRef<Self::Msg>,
        message: ComboMsg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            ComboMsg::Route(request, reply) => {
                let _ = reply.send(state.route(request));
            }
            ComboMsg::Acquire(request, reply) => {
                let _ = reply.send(state.acquire(request));
            }
            ComboMsg::ConnectionChanged(id, view) => state.connection_changed(id, view),
            ComboMsg::BreakerChanged(provider, breaker) => state.breaker_changed(provider, breaker),
            ComboMsg::Reconfigure(setup) => {
                state.setup = *setup;
                state.resolve_slots();
            }
            ComboMsg::Deficits(reply) => {
                let _ = reply.send(state.deficits.clone());
            }
            ComboMsg::Crash => return Err(ActorProcessingErr::from("crash requested by a test")),
        }
        Ok(())
    }
}
