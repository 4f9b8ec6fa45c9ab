//! ComboActor: owns one combo's DRR deficits and its copies of the connection and breaker state
//! it routes over. One `call` per routing decision: it evaluates hard blocks, runs the pure
//! selector, takes the winner's in-flight slot (and probe token), journals the decision and
//! replies with the ordered targets and the permit.
//!
//! It never calls another actor: connection and breaker actors push their changes here.
//!
//! With `queue_ms` > 0 it also owns the combo's waiting room (behaviour §11, `combo_queue`): a
//! request that finds every target at cap waits there, and each wake-up (a released slot, a
//! pushed change, a deadline) grants waiters in the fair order through the same `route` as any
//! other request — there is no second routing path.

use std::collections::HashMap;
use std::sync::Arc;

use quotaroute_journal::{
    AffinityBound, ApiFormat, BlockReason, Event, PeerApplied, RouteDecided, Skipped,
};
use ractor::{Actor, ActorProcessingErr, ActorRef};

use crate::actor::combo_queue::WaitQueue;
use crate::actor::messages::{
    AcquireRequest, Acquired, AffinityKey, BreakerMsg, ComboMsg, ComboSetup, RouteReply,
    RouteRequest, Routed, RoutedTarget, TargetRuntime,
};
use crate::actor::recorder::RecorderMsg;
use crate::clock::SharedClock;
use crate::permit::{Permit, SharedProbeGate};
use crate::policy::admission::{evaluate_target, take_first_admitted, Admit, Block};
use crate::policy::affinity::{place, place_hard, AffinityLeads, Placement};
use crate::policy::affinity_bindings::AffinityBindings;
use crate::policy::breaker::BreakerState;
use crate::policy::drr::DrrDeficits;
use crate::policy::peer_merge::merge_peer_binding;
use crate::policy::quota_share::{apply_route_decided, select, TargetView};
use crate::policy::request::unroutable;
use crate::registry::Registry;
use crate::view::{BreakerAdmission, BreakerView, ConnectionView};

pub struct ComboActor;

pub struct ComboArgs {
    pub setup: ComboSetup,
    pub deficits: DrrDeficits,
    /// The combo's conversations, as the journal's fold left them.
    pub bindings: AffinityBindings,
    pub connections: HashMap<String, Arc<ConnectionView>>,
    pub breakers: HashMap<String, Arc<BreakerState>>,
    pub registry: Arc<Registry>,
    pub recorder: ActorRef<RecorderMsg>,
    pub clock: SharedClock,
}

pub struct ComboState {
    setup: ComboSetup,
    deficits: DrrDeficits,
    /// Conversation affinity (behaviour §10): groups and their targets, and how far each
    /// target ran ahead of its DRR share.
    bindings: AffinityBindings,
    leads: AffinityLeads,
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
    /// Requests waiting for a permit (behaviour §11); empty unless `queue_ms` > 0.
    queue: WaitQueue,
    /// A grant round is due within [`GRANT_ROUND_MS`] (no second one is armed meanwhile).
    grant_round_armed: bool,
    myself: ActorRef<ComboMsg>,
}

/// How long after a release (or any change that may make room) the combo grants permits to
/// waiters: every request whose answer ended in that window has had time to send its next, so
/// the freed permits are granted by the fair order among all of them. Granting at each release
/// instead hands the permits of answers that end together to the backlog before their own
/// clients can ask again, and a light client then waits a whole answer every other request.
/// Only a combo with waiters pays it.
pub const GRANT_ROUND_MS: u64 = 10;

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

    /// Behaviour §11: whether `request` waits rather than being routed now — the combo queues,
    /// someone already waits (a newcomer must not overtake them), or every target it could use
    /// is at its `max_concurrent`. Requests bound to one connection (a stored response, a
    /// continuation) wait like any other: "every path is governed" (§11), so their one
    /// connection's cap holds and they take their turn in the fair order.
    fn must_wait(&self, request: &RouteRequest, now_ms: u64) -> bool {
        self.setup.spec.queue_ms > 0 && (!self.queue.is_empty() || self.all_at_cap(request, now_ms))
    }

    /// §2 steps 0 and 2 as the queue reads them: among the targets of the request's format
    /// (on its `only_connection` when it names one) that are not hard-blocked, at least one,
    /// and every one with a cap that it has reached. A target without cap, a DEGRADED one below
    /// its cap, or none unblocked at all, is room (the last is §7's business, not the queue's).
    fn all_at_cap(&self, request: &RouteRequest, now_ms: u64) -> bool {
        self.all_at_cap_for(
            (request.format, request.translatable),
            request.only_connection.as_deref(),
            now_ms,
        )
    }

    /// Behaviour §14: whether a target of `format` may serve a request of the endpoint format
    /// `wanted` — the same format, or the other one through translation when the request can
    /// be translated and the combo does not say `translate = false`.
    fn serves_format(&self, format: ApiFormat, (wanted, translatable): (ApiFormat, bool)) -> bool {
        format == wanted || (translatable && self.setup.spec.translate)
    }

    fn serves(&self, format: ApiFormat, request: &RouteRequest) -> bool {
        self.serves_format(format, (request.format, request.translatable))
    }

    /// [`all_at_cap`](Self::all_at_cap) for a request of endpoint format and translatability
    /// `wanted`, bound to `only` connection when it names one.
    fn all_at_cap_for(&self, wanted: (ApiFormat, bool), only: Option<&str>, now_ms: u64) -> bool {
        let mut any = false;
        for (runtime, slot) in self.setup.targets.iter().zip(&self.slots) {
            let target = &runtime.target;
            if !self.serves_format(target.format, wanted)
                || only.is_some_and(|only| only != &*target.connection)
            {
                continue;
            }
            let blocked =
                crate::policy::admission::admission(slot.breaker.admission(now_ms), || {
                    slot.connection
                        .as_deref()
                        .and_then(|view| view.block_for(&target.model, now_ms))
                });
            if blocked.is_some() {
                continue;
            }
            match runtime.max_concurrent {
                Some(cap) if runtime.in_flight.get() >= cap => any = true,
                _ => return false,
            }
        }
        any
    }

    /// A request that must wait: queued (the reply says where its answer will come), or
    /// refused at once when the queue is full.
    fn enqueue(&mut self, request: RouteRequest, now_ms: u64) -> RouteReply {
        let queue_ms = self.setup.spec.queue_ms;
        match self.queue.enqueue(request, now_ms, queue_ms) {
            None => RouteReply::PoolBusy(crate::actor::messages::PoolBusy {
                waited_ms: 0,
                retry_after_ms: crate::actor::combo_queue::POOL_BUSY_RETRY_AFTER_MS,
            }),
            Some(queued) => {
                let myself = self.myself.clone();
                self.queue
                    .watch(self.setup.targets.iter().map(|t| &t.in_flight), &myself);
                RouteReply::Queued(queued)
            }
        }
    }

    /// Answers the waiters whose deadline passed, then grants permits in the fair order while
    /// the next waiter has room; stops watching releases once nobody waits.
    fn pump(&mut self) {
        if self.queue.is_empty() {
            return;
        }
        let now_ms = self.clock.now_ms();
        for waiter in self.queue.expire(now_ms) {
            waiter.busy(now_ms);
        }
        // Head of line: when the next waiter has no room nobody behind it is granted either,
        // so the fair order holds (the targets of one combo are shared by its waiters).
        while let Some((wanted, only)) = self.queue.next_waiting().map(|next| {
            (
                (next.format, next.translatable),
                next.only_connection.clone(),
            )
        }) {
            if self.all_at_cap_for(wanted, only.as_deref(), now_ms) {
                break;
            }
            let Some(waiter) = self.queue.grant() else {
                break;
            };
            let reply = self.route(waiter.request);
            // A caller gone since `next` checked: the reply (and its permit) is dropped.
            let _ = waiter.answer.send(reply);
        }
        if self.queue.is_empty() {
            self.queue.unwatch();
        } else if let Some(deadline_ms) = self.queue.timer_needed() {
            let clock = self.clock.clone();
            let myself = self.myself.clone();
            let wait_ms = deadline_ms.saturating_sub(now_ms);
            tokio::spawn(async move {
                clock.sleep_ms(wait_ms).await;
                let _ = myself.cast(ComboMsg::QueueTick);
            });
        }
    }

    /// Arms a grant round [`GRANT_ROUND_MS`] from now, unless one is armed or nobody waits.
    fn grant_soon(&mut self) {
        if self.grant_round_armed || self.queue.is_empty() {
            return;
        }
        self.grant_round_armed = true;
        let clock = self.clock.clone();
        let myself = self.myself.clone();
        tokio::spawn(async move {
            clock.sleep_ms(GRANT_ROUND_MS).await;
            let _ = myself.cast(ComboMsg::GrantRound);
        });
    }

    /// A new setup: with `queue_ms` now 0 every waiter is routed at once (fail-open, as the
    /// combo now says); a shorter `queue_ms` brings deadlines in; the watch follows the targets.
    fn reconfigured(&mut self) {
        self.queue.unwatch();
        if self.queue.is_empty() {
            return;
        }
        let now_ms = self.clock.now_ms();
        if self.setup.spec.queue_ms == 0 {
            for waiter in self.queue.drain() {
                let reply = self.route(waiter.request);
                let _ = waiter.answer.send(reply);
            }
            return;
        }
        self.queue
            .cap_deadlines(now_ms.saturating_add(self.setup.spec.queue_ms));
        let myself = self.myself.clone();
        self.queue
            .watch(self.setup.targets.iter().map(|t| &t.in_flight), &myself);
        self.pump();
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
            if !self.serves(target.format, &request) {
                continue;
            }
            if request
                .only_connection
                .as_deref()
                .is_some_and(|only| only != &*target.connection)
            {
                continue;
            }
            // Step 0 to 2 on the resolved copies.
            let breaker = slot.breaker.admission(now_ms);
            positions.push(position);
            views.push(evaluate_target(
                target.weight,
                runtime.exec_key.clone(),
                &target.model,
                breaker,
                slot.connection.as_deref(),
                runtime.in_flight.get(),
                runtime.max_concurrent,
                now_ms,
            ));
            admissions.push(breaker);
        }
        if positions.is_empty() {
            return match request.only_connection {
                Some(_) => RouteReply::NoTargetOnConnection,
                None => RouteReply::NoTargetForFormat,
            };
        }
        let runtime_at = |i: usize| &self.setup.targets[positions[i]];
        let mut selection = select(self.setup.spec.strategy, views, &self.deficits);
        // Conversation affinity: one pure placement on top of §2's selection.
        let settings = self.setup.affinity;
        let limits = (settings.max_groups, settings.ttl_ms);
        // Encrypted items are a hard affinity (behaviour §10): their maker, not the group.
        let maker = request.encrypted_maker.as_deref();
        let group = request
            .affinity
            .as_ref()
            .filter(|_| settings.enabled && maker.is_none());
        let bound_key = group
            .and_then(|key| self.bindings.get(key.group, now_ms, settings.ttl_ms))
            .map(|binding| binding.exec_key.clone());
        let placement = match (maker, group) {
            (Some(maker), _) => {
                let bound = (0..positions.len())
                    .find(|&i| &*self.setup.targets[positions[i]].target.connection == maker);
                place_hard(bound, views, &mut selection)
            }
            (None, None) => Placement::None,
            (None, Some(_)) => {
                let bound = bound_key
                    .as_ref()
                    .map(|key| views.iter().position(|v| v.exec_key == *key));
                let total: u32 = selection.room.iter().map(|&i| views[i].weight).sum();
                let lead_exceeded = bound_key
                    .as_ref()
                    .is_some_and(|key| self.leads.exceeded(key, settings.max_lead, total));
                place(bound, lead_exceeded, views, &mut selection)
            }
        };
        let mut skipped: Vec<Skipped> = selection
            .skipped
            .iter()
            .map(|&(i, reason, remaining_ms)| {
                skipped_entry(&runtime_at(i).target, reason, remaining_ms)
            })
            .collect();

        // The order holds no hard-blocked target: only a probe token can be lost now.
        let mut passed_over = Vec::new();
        let taken = take_first_admitted(
            &mut TakeFrom {
                combo: self,
                positions,
                admissions: Some(admissions),
                now_ms,
            },
            &selection.order,
            &mut passed_over,
        );
        skipped.extend(passed_over.into_iter().map(|(i, reason, remaining_ms)| {
            skipped_entry(&runtime_at(i).target, reason, remaining_ms)
        }));

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
            affinity: placement.outcome(),
            client: Some(String::from(&*request.client.id)),
            group: None,
            paces: Vec::new(),
        };
        // The same function replay uses, so live deficits equal the journal's fold.
        apply_route_decided(&mut self.deficits, &self.setup.keys, &decided);
        if group.is_some() {
            self.leads.apply_turn(
                selection
                    .room
                    .iter()
                    .map(|&i| (&views[i].exec_key, views[i].weight)),
                chosen.map(|i| &views[i].exec_key),
            );
        }
        let mut bound_event = None;
        if let (Some(key), Some((position, _))) = (group, taken.as_ref()) {
            let taken_at = selection.order[*position];
            let taken_key = &views[taken_at].exec_key;
            let held = bound_key.as_ref() == Some(taken_key);
            if held {
                let before = self.bindings.len();
                self.bindings.touch(key.group, now_ms, limits);
                if self.bindings.len() != before {
                    report_groups(&self.registry, &self.setup.spec.name, &mut self.bindings);
                }
            } else if bind_shared(
                &mut self.bindings,
                &self.registry,
                &self.setup,
                key,
                taken_key.clone(),
                now_ms,
            ) {
                // New, moved, or (rarely) a held turn whose probe token went elsewhere.
                let target = &runtime_at(taken_at).target;
                let reason = match placement {
                    Placement::Moved(reason) => Some(reason.as_str().to_owned()),
                    Placement::Held => Some(BlockReason::ProbeInFlight.as_str().to_owned()),
                    Placement::None | Placement::New => None,
                };
                bound_event = Some(AffinityBound {
                    request_id: decided.request_id.clone(),
                    combo: decided.combo.clone(),
                    group: key.group,
                    client: String::from(&*key.client),
                    provider: String::from(&*target.provider),
                    connection: String::from(&*target.connection),
                    model: String::from(&*target.model),
                    moved_from: bound_key.as_ref().map(|k| k.to_string()),
                    reason,
                });
            }
        }
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
                affinity: placement.outcome(),
            }),
            None => RouteReply::Unroutable(unroutable(skipped, self.setup.spec.hold_ms)),
        };
        let _ = self
            .recorder
            .cast(RecorderMsg::RecordOne(now_ms, Event::RouteDecided(decided)));
        if let Some(bound) = bound_event {
            let _ = self
                .recorder
                .cast(RecorderMsg::RecordOne(now_ms, Event::AffinityBound(bound)));
        }
        reply
    }

    /// A peer's conversation binding (behaviour §10 "Memory", §9): merged by the pure rule
    /// and, only when taken, journaled as `peer_applied` (never published again: no echo),
    /// so replay and a restart keep it.
    fn apply_peer_binding(&mut self, applied: PeerApplied) {
        let Event::AffinityBound(bound) = &*applied.event else {
            return;
        };
        let now_ms = self.clock.now_ms();
        let settings = self.setup.affinity;
        let has_target = self.setup.targets.iter().any(|runtime| {
            *runtime.target.connection == *bound.connection && *runtime.target.model == *bound.model
        });
        let limits = (settings.max_groups, settings.ttl_ms);
        if merge_peer_binding(
            &mut self.bindings,
            now_ms,
            applied.origin_at_ms,
            bound,
            has_target,
            limits,
        ) {
            report_groups(&self.registry, &self.setup.spec.name, &mut self.bindings);
            let _ = self
                .recorder
                .cast(RecorderMsg::RecordOne(now_ms, Event::PeerApplied(applied)));
        }
    }

    /// The first of a failover's candidates (positions in `setup.targets`, as the decision
    /// holds them) admitted now, re-checked on the latest copies.
    fn acquire(&mut self, request: AcquireRequest) -> Acquired {
        let now_ms = self.clock.now_ms();
        // A reload may have changed the targets since the decision: only positions that still
        // hold the same target are candidates.
        let candidates: Vec<usize> = request
            .candidates
            .iter()
            .filter_map(|target| {
                let position = usize::from(target.index);
                let runtime = self.setup.targets.get(position)?;
                (runtime.target.connection == target.connection
                    && runtime.target.model == target.model)
                    .then_some(position)
            })
            .collect();
        let mut passed_over = Vec::new();
        let taken = take_first_admitted(
            &mut TakeFrom {
                combo: self,
                positions: &[],
                admissions: None,
                now_ms,
            },
            &candidates,
            &mut passed_over,
        );
        let skipped = passed_over
            .into_iter()
            .map(|(position, reason, remaining_ms)| {
                skipped_entry(&self.setup.targets[position].target, reason, remaining_ms)
            })
            .collect();
        Acquired {
            taken: taken.and_then(|(offset, permit)| {
                let position = candidates[offset];
                // The offset in the decision's list of candidates.
                let offset = request
                    .candidates
                    .iter()
                    .position(|t| usize::from(t.index) == position)?;
                Some((offset, permit))
            }),
            skipped,
        }
    }
}

/// The combo's state as [`take_first_admitted`] reads it. With `admissions` (routing, right
/// after the selection), candidates are indices into `positions` and their breaker verdicts
/// are the ones the selection saw; without (a failover), candidates are positions in the
/// combo's targets, evaluated now.
struct TakeFrom<'a> {
    combo: &'a ComboState,
    positions: &'a [usize],
    admissions: Option<&'a [BreakerAdmission]>,
    now_ms: u64,
}

impl TakeFrom<'_> {
    fn position(&self, i: usize) -> usize {
        match self.admissions {
            Some(_) => self.positions[i],
            None => i,
        }
    }
}

impl Admit for TakeFrom<'_> {
    type Taken = Permit;

    fn breaker(&mut self, i: usize) -> BreakerAdmission {
        match self.admissions {
            Some(admissions) => admissions[i],
            None => self.combo.slots[i].breaker.admission(self.now_ms),
        }
    }

    fn connection_block(&mut self, i: usize) -> Option<Block> {
        if self.admissions.is_some() {
            // The selection left hard-blocked targets out of its order.
            return None;
        }
        let target = &self.combo.setup.targets[i].target;
        self.combo.slots[i]
            .connection
            .as_deref()
            .and_then(|view| view.block_for(&target.model, self.now_ms))
    }

    fn take(&mut self, i: usize, breaker: BreakerAdmission) -> Result<Permit, Block> {
        let position = self.position(i);
        let slot = &self.combo.slots[position];
        self.combo
            .take(
                &self.combo.setup.targets[position],
                &slot.breaker,
                breaker,
                self.now_ms,
            )
            .ok_or((
                BlockReason::ProbeInFlight,
                Some(slot.breaker.settings.probe_timeout_ms),
            ))
    }
}

/// Binds `key`'s group to `exec_key` within its client's node-wide share (behaviour §11);
/// false when the client is at its share with no group in this combo to give up (not kept,
/// not journaled: the turn went by §2 alone).
fn bind_shared(
    bindings: &mut AffinityBindings,
    registry: &Registry,
    setup: &ComboSetup,
    key: &AffinityKey,
    exec_key: Arc<str>,
    now_ms: u64,
) -> bool {
    let settings = setup.affinity;
    let quota = registry
        .groups
        .quota(&setup.spec.name, &key.client, settings.max_groups);
    let kept = bindings.bind_within(
        key.group,
        key.client.clone(),
        exec_key,
        now_ms,
        (settings.max_groups, settings.ttl_ms),
        Some(quota),
    );
    report_groups(registry, &setup.spec.name, bindings);
    kept
}

/// Tells the node's ledger how many groups each client holds in `combo` now.
fn report_groups(registry: &Registry, combo: &str, bindings: &mut AffinityBindings) {
    registry.groups.report(combo, bindings.held_by_client());
}

fn skipped_entry(target: &RoutedTarget, reason: BlockReason, remaining_ms: Option<u64>) -> Skipped {
    Skipped {
        connection: String::from(&*target.connection),
        model: String::from(&*target.model),
        reason,
        remaining_ms,
    }
}

impl Actor for ComboActor {
    type Msg = ComboMsg;
    type State = ComboState;
    type Arguments = ComboArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        args: ComboArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        let mut state = ComboState {
            setup: args.setup,
            deficits: args.deficits,
            bindings: args.bindings,
            leads: AffinityLeads::default(),
            connections: args.connections,
            breakers: args.breakers,
            gates: HashMap::new(),
            slots: Vec::new(),
            routed: Arc::new([]),
            scratch: Scratch::default(),
            registry: args.registry,
            recorder: args.recorder,
            clock: args.clock,
            queue: WaitQueue::default(),
            grant_round_armed: false,
            myself,
        };
        state.resolve_slots();
        report_groups(&state.registry, &state.setup.spec.name, &mut state.bindings);
        Ok(state)
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        state.registry.groups.forget(&state.setup.spec.name);
        Ok(())
    }

    async fn handle(
        &self,
        _myself: ActorRef<Self::Msg>,
        message: ComboMsg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            ComboMsg::Route(request, reply) => {
                // `queue_ms` = 0 (the default) costs this one test on the hot path.
                if state.setup.spec.queue_ms > 0 {
                    let now_ms = state.clock.now_ms();
                    if state.must_wait(&request, now_ms) {
                        let _ = reply.send(state.enqueue(request, now_ms));
                        // A slot may have been released before the watch was set.
                        state.grant_soon();
                        return Ok(());
                    }
                }
                let _ = reply.send(state.route(request));
            }
            ComboMsg::CancelQueued(ticket) => {
                state.queue.cancel(ticket);
                if state.queue.is_empty() {
                    state.queue.unwatch();
                }
            }
            ComboMsg::PermitReleased => {
                state.queue.woken();
                state.grant_soon();
            }
            ComboMsg::GrantRound => {
                state.grant_round_armed = false;
                state.pump();
            }
            ComboMsg::QueueTick => {
                state.queue.timer_fired();
                state.pump();
            }
            ComboMsg::Queued(reply) => {
                let _ = reply.send(state.queue.queued_by_client());
            }
            ComboMsg::Acquire(request, reply) => {
                let _ = reply.send(state.acquire(request));
            }
            ComboMsg::ConnectionChanged(id, view) => {
                state.connection_changed(id, view);
                state.grant_soon();
            }
            ComboMsg::BreakerChanged(provider, breaker) => {
                state.breaker_changed(provider, breaker);
                state.grant_soon();
            }
            ComboMsg::Reconfigure(setup) => {
                state.setup = *setup;
                state.resolve_slots();
                state.reconfigured();
            }
            ComboMsg::Deficits(reply) => {
                let _ = reply.send(state.deficits.clone());
            }
            ComboMsg::AffinityPage(query, reply) => {
                let (matching, groups) = state.bindings.page(query.after, query.limit, |b| {
                    query.now_ms.saturating_sub(b.last_used_ms) <= query.ttl_ms
                        && query.connection.as_deref().is_none_or(|id| {
                            b.exec_key
                                .strip_prefix(id)
                                .is_some_and(|rest| rest.starts_with('/'))
                        })
                });
                let _ = reply.send(crate::actor::messages::AffinityPage { matching, groups });
            }
            ComboMsg::Affinity(reply) => {
                let _ = reply.send(state.bindings.clone());
            }
            ComboMsg::PeerBinding(applied) => state.apply_peer_binding(*applied),
            ComboMsg::Crash => return Err(ActorProcessingErr::from("crash requested by a test")),
        }
        Ok(())
    }
}
