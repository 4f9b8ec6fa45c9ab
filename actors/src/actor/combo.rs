//! ComboActor: owns one combo's selection state (DRR deficits, affinity leads, conversation
//! bindings) and its copies of the connection and breaker state it routes over. One `call` per
//! routing decision: it builds the targets' views, calls `policy::selection::decide` (which
//! takes the winner's in-flight slot and probe token through this actor's `Admit`), applies
//! the changes it returns, journals them and replies with the ordered targets and the permit.
//! It decides nothing itself.
//!
//! It never calls another actor: connection and breaker actors push their changes here.
//!
//! With `queue_ms` > 0 it also owns the combo's waiting room (behaviour §11, `combo_queue`): a
//! request that finds every target at cap waits there, and each wake-up (a released slot, a
//! pushed change, a deadline) grants waiters in the fair order through the same `route` as any
//! other request — there is no second routing path.

use std::collections::HashMap;
use std::sync::Arc;

use quotaroute_journal::{ApiFormat, BlockReason, Event, PeerApplied, Skipped};
use ractor::{Actor, ActorProcessingErr, ActorRef};

use crate::actor::combo_queue::WaitQueue;
use crate::actor::messages::{
    AcquireRequest, Acquired, BreakerMsg, ComboMsg, ComboSetup, RouteReply, RouteRequest, Routed,
    RoutedTarget, ServedTurn, TargetRuntime,
};
use crate::clock::SharedClock;
use crate::permit::{Permit, SharedProbeGate};
use crate::policy::admission::{evaluate_target, take_first_admitted, Admit, Block};
use crate::policy::affinity_bindings::AffinityBindings;
use crate::policy::breaker::BreakerState;
use crate::policy::clients::class::RequestClass;
use crate::policy::demand_profile::DemandProfile;
use crate::policy::drr::DrrDeficits;
use crate::policy::peer_merge::merge_peer_binding;
use crate::policy::quota_share::{SelectScratch, TargetView};
use crate::policy::request::unroutable;
use crate::policy::selection::{
    decide_with, Candidates, ComboRules, Decided, SelectionRequest, SelectionState,
};
use crate::policy::spare::{spare_verdict, SpareVerdict, LIVE_SPARE_COST_PM};
use crate::recorder::Recorder;
use crate::registry::Registry;
use crate::view::{BreakerAdmission, BreakerView, ConnectionView};

pub struct ComboActor;

pub struct ComboArgs {
    pub setup: ComboSetup,
    pub deficits: DrrDeficits,
    /// The combo's conversations, as the journal's fold left them.
    pub bindings: AffinityBindings,
    /// The combo's requests by hour of the week, as the journal's fold left them (§13).
    pub demand: DemandProfile,
    pub connections: HashMap<String, Arc<ConnectionView>>,
    pub breakers: HashMap<String, Arc<BreakerState>>,
    pub registry: Arc<Registry>,
    pub recorder: Recorder,
    pub clock: SharedClock,
}

pub struct ComboState {
    setup: ComboSetup,
    /// DRR deficits, affinity leads and conversation bindings (behaviour §2, §10): what
    /// `policy::selection` reads and its decisions change.
    selection: SelectionState,
    /// Its requests by hour of the week: `clock = "demand"`'s profile (behaviour §13),
    /// counted per decision as the journal's fold counts `route_decided`.
    demand: DemandProfile,
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
    recorder: Recorder,
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
    /// What selection sees of each, in the order of `positions`.
    views: Vec<TargetView>,
    /// Each target's breaker verdict as selection saw it, by position in `setup.targets`.
    admissions: Vec<BreakerAdmission>,
    /// Selection's own lists (order, room, the eligible and the blocked).
    selected: SelectScratch,
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
    /// someone already waits (a newcomer must not overtake them), or the pool is full for it.
    /// Requests bound to one connection (a stored response, a continuation, a turn whose
    /// encrypted items its maker alone reads) wait like any other: "every path is governed"
    /// (§11), so that connection's cap holds and they take their turn in the fair order.
    fn must_wait(&mut self, request: &RouteRequest, now_ms: u64) -> bool {
        self.setup.spec.queue_ms > 0
            && (!self.queue.is_empty()
                || self.pool_full(
                    (request.format, request.translatable),
                    waits_for(request),
                    now_ms,
                ))
    }

    /// Behaviour §14: whether a target of `format` may serve a request of the endpoint format
    /// `wanted` — the same format, or the other one through translation when the request can
    /// be translated and the combo does not say `translate = false`.
    fn serves_format(&self, format: ApiFormat, (wanted, translatable): (ApiFormat, bool)) -> bool {
        format == wanted || (translatable && self.setup.spec.translate)
    }

    /// Whether no target of `format` (on `only` when it names one) has room by selection's
    /// own rule while a released slot could give some (`Candidates::pool_full`). None
    /// unblocked at all is not full: that is §7's business, not the queue's.
    fn pool_full(&mut self, wanted: (ApiFormat, bool), only: Option<&str>, now_ms: u64) -> bool {
        let mut scratch = std::mem::take(&mut self.scratch);
        self.fill_candidates(wanted, &[], now_ms, &mut scratch);
        let full = Candidates {
            targets: &self.routed,
            positions: &scratch.positions,
            views: &scratch.views,
        }
        .pool_full(only);
        self.scratch = scratch;
        full
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
            self.waited_out(waiter, now_ms);
        }
        // Head of line: when the next waiter has no room nobody behind it is granted either,
        // so the fair order holds (the targets of one combo are shared by its waiters). A
        // waiter bound to one connection (a continuation, a turn whose encrypted items its
        // maker alone reads) has room only there: while that connection stays at cap the
        // waiters after it that can go elsewhere are granted, and it keeps its place (a slot on
        // another connection is of no use to it).
        let mut full = Vec::new();
        while let Some(ticket) = self.next_grantable(now_ms, &mut full) {
            let Some(waiter) = self.queue.grant(ticket) else {
                break;
            };
            let reply = self.route(waiter.request);
            // A caller gone since `heads` checked: the reply (and its permit) is dropped.
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

    /// The first waiter in the fair order that has room now, passing over waiters bound to a
    /// connection at cap; `None` when the first one that is not bound has no room either.
    /// `full` remembers, for one pump, what was found full (granting only fills slots).
    fn next_grantable(
        &mut self,
        now_ms: u64,
        full: &mut Vec<WaitsFor>,
    ) -> Option<crate::policy::fair_queue::Ticket> {
        for ticket in self.queue.in_order() {
            let Some(key) = self.queue.request(ticket).map(|next| {
                (
                    (next.format, next.translatable),
                    waits_for(next).map(str::to_owned),
                )
            }) else {
                continue;
            };
            let blocked = full.contains(&key) || {
                let now_full = self.pool_full(key.0, key.1.as_deref(), now_ms);
                if now_full {
                    full.push(key.clone());
                }
                now_full
            };
            if !blocked {
                return Some(ticket);
            }
            // Not bound and no room: nobody after it goes either (head of line).
            key.1.as_ref()?;
        }
        None
    }

    /// A waiter whose `queue_ms` passed. A turn that waited only for its encrypted items'
    /// maker goes to the rest of the pool when it has room (behaviour §10: served elsewhere,
    /// the items that target cannot read left out); any other gets `pool_busy`.
    fn waited_out(&mut self, waiter: crate::actor::combo_queue::Waiter, now_ms: u64) {
        let request = &waiter.request;
        let elsewhere = request.only_connection.is_none()
            && request.encrypted_maker.is_some()
            && !self.pool_full((request.format, request.translatable), None, now_ms);
        if !elsewhere {
            waiter.busy(now_ms);
            return;
        }
        let reply = self.route(waiter.request);
        // A caller gone meanwhile: the reply (and its permit) is dropped.
        let _ = waiter.answer.send(reply);
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

    /// Fills `scratch` with the candidates of a request of `format`: positions of the
    /// combo's targets, what selection sees of each (§2 steps 0–2 on the resolved copies), and
    /// each one's breaker verdict by position (what taking the winner re-reads).
    /// The targets that may serve a request of `wanted`, with their views. `cannot_carry`'s
    /// providers' targets are candidates hard-blocked as `cannot_carry` (behaviour §14: a
    /// target that cannot carry a request is not chosen for it, and `skipped` says why).
    fn fill_candidates(
        &self,
        wanted: (ApiFormat, bool),
        cannot_carry: &[Arc<str>],
        now_ms: u64,
        scratch: &mut Scratch,
    ) {
        let Scratch {
            positions,
            views,
            admissions,
            ..
        } = scratch;
        positions.clear();
        views.clear();
        admissions.clear();
        admissions.resize(self.setup.targets.len(), BreakerAdmission::Healthy);
        for (position, (runtime, slot)) in self.setup.targets.iter().zip(&self.slots).enumerate() {
            let target = &runtime.target;
            if !self.serves_format(target.format, wanted) {
                continue;
            }
            let breaker = slot.breaker.admission(now_ms);
            positions.push(position);
            let mut view = evaluate_target(
                target.weight,
                runtime.exec_key.clone(),
                &target.model,
                breaker,
                slot.connection.as_deref(),
                runtime.in_flight.get(),
                runtime.max_concurrent,
                self.setup.spec.paced(),
                Some(&self.demand),
                now_ms,
            );
            if cannot_carry.contains(&target.provider) {
                view.hard_block = Some((BlockReason::CannotCarry, None));
            }
            views.push(view);
            admissions[position] = breaker;
        }
    }

    /// Behaviour §13 "Spare quota only": every candidate not forecast to lose quota at its
    /// resets (`policy::spare`) is hard-blocked as `no_spare` for this request, until it is next
    /// forecast to (at the latest its next reset). A target blocked already keeps its block.
    fn block_unspare(&self, now_ms: u64, scratch: &mut Scratch) {
        let settings = &self.setup.spec.pacing;
        for (view, &position) in scratch.views.iter_mut().zip(&scratch.positions) {
            if view.hard_block.is_some() {
                continue;
            }
            let windows = self.slots[position]
                .connection
                .as_deref()
                .map_or(&[][..], |connection| &connection.windows[..]);
            let model = &self.setup.targets[position].target.model;
            if let SpareVerdict::NotSpare { retry_at_ms } = spare_verdict(
                windows,
                model,
                LIVE_SPARE_COST_PM,
                now_ms,
                settings,
                Some(&self.demand),
            ) {
                let remaining_ms = retry_at_ms.map(|at| at.saturating_sub(now_ms).max(1));
                view.hard_block = Some((BlockReason::NoSpare, remaining_ms));
            }
        }
    }

    /// One decision: the candidates, `policy::selection::decide`, its changes applied, its
    /// records journaled.
    fn route_with(
        &mut self,
        request: RouteRequest,
        now_ms: u64,
        scratch: &mut Scratch,
    ) -> RouteReply {
        self.fill_candidates(
            (request.format, request.translatable),
            &request.cannot_carry,
            now_ms,
            scratch,
        );
        if request.client.class == RequestClass::Spare {
            self.block_unspare(now_ms, scratch);
        }
        // No candidate (on its connection) can carry it: answered as when no target serves it
        // (the 400 naming what cannot be carried), never held for a target that never could.
        let only = request.only_connection.as_deref();
        let carried = scratch
            .positions
            .iter()
            .zip(&scratch.views)
            .any(|(&at, view)| {
                view.hard_block.map(|(reason, _)| reason) != Some(BlockReason::CannotCarry)
                    && only.is_none_or(|only| *self.routed[at].connection == *only)
            });
        if !carried {
            return match only {
                Some(_) => RouteReply::NoTargetOnConnection,
                None => RouteReply::NoTargetForFormat,
            };
        }
        let candidates = Candidates {
            targets: &self.routed,
            positions: &scratch.positions,
            views: &scratch.views,
        };
        let rules = ComboRules {
            name: &self.setup.name,
            generation: self.setup.generation,
            strategy: self.setup.spec.strategy,
            affinity: self.setup.affinity,
        };
        let selection_request = SelectionRequest {
            request_id: &request.request_id,
            model: &request.model,
            client: &request.client.id,
            only_connection: request.only_connection.as_deref(),
            encrypted_maker: request.encrypted_maker.as_deref(),
            group: request.affinity.as_ref(),
        };
        let decided = decide_with(
            &rules,
            &self.selection,
            candidates,
            &selection_request,
            &mut TakeFrom {
                combo: self,
                admissions: Some(&scratch.admissions),
                now_ms,
            },
            now_ms,
            &mut scratch.selected,
        );
        let Some(decided) = decided else {
            return match request.only_connection {
                Some(_) => RouteReply::NoTargetOnConnection,
                None => RouteReply::NoTargetForFormat,
            };
        };
        let Decided {
            order,
            taken,
            placement,
            route_decided,
            changes,
        } = decided;
        self.demand.count(now_ms);
        let settings = self.setup.affinity;
        let (registry, combo_name) = (&self.registry, &self.setup.spec.name);
        let applied = self.selection.apply(
            &self.setup.keys,
            &route_decided,
            changes,
            now_ms,
            (settings.max_groups, settings.ttl_ms),
            |client| {
                Some(
                    registry
                        .groups
                        .quota(combo_name, client, settings.max_groups),
                )
            },
        );
        if applied.groups_changed {
            report_groups(registry, combo_name, &mut self.selection.bindings);
        }
        let group = request
            .affinity
            .filter(|_| route_decided.group.is_some() && taken.is_some());
        let reply = match taken {
            Some((position, permit)) => RouteReply::Routed(Routed {
                targets: self.routed.clone(),
                order,
                position,
                permit,
                skipped: route_decided.skipped.clone(),
                max_attempts: self.setup.spec.max_attempts,
                max_upstream_requests: self.setup.spec.max_upstream_requests,
                affinity: placement.outcome(),
                group,
                decided_at_ms: now_ms,
            }),
            None => RouteReply::Unroutable(unroutable(
                route_decided.skipped.clone(),
                self.setup.spec.hold_ms,
            )),
        };
        self.recorder
            .record_one(now_ms, Event::RouteDecided(route_decided));
        if let Some(bound) = applied.bound {
            self.recorder
                .record_one(now_ms, Event::AffinityBound(bound));
        }
        reply
    }

    /// A group's turn was served after a failover (behaviour §10): its binding follows, by
    /// `SelectionState::served`, journaled as `affinity_bound` when it moved.
    fn served(&mut self, turn: ServedTurn) {
        // A reload may have changed the targets since the decision: only a target still ours.
        let ours = self.routed.iter().any(|target| {
            target.connection == turn.target.connection && target.model == turn.target.model
        });
        if !ours {
            return;
        }
        let now_ms = self.clock.now_ms();
        let settings = self.setup.affinity;
        let Some(bound) = self.selection.served(
            &turn.request_id,
            &self.setup.spec.name,
            &turn.key,
            &turn.target,
            now_ms,
            (settings.max_groups, settings.ttl_ms),
        ) else {
            return;
        };
        report_groups(
            &self.registry,
            &self.setup.spec.name,
            &mut self.selection.bindings,
        );
        self.recorder
            .record_one(now_ms, Event::AffinityBound(bound));
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
            &mut self.selection.bindings,
            now_ms,
            applied.origin_at_ms,
            bound,
            has_target,
            limits,
        ) {
            report_groups(
                &self.registry,
                &self.setup.spec.name,
                &mut self.selection.bindings,
            );
            self.recorder
                .record_one(now_ms, Event::PeerApplied(applied));
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

/// The combo's state as [`take_first_admitted`] reads it; candidates are positions in the
/// combo's targets. With `admissions` (routing, right after the selection) their breaker
/// verdicts are the ones the selection saw, by position, and hard-blocked targets were left out
/// of the order; without (a failover), each candidate is evaluated now.
/// What a waiter needs room on: its format (and whether it may be translated), and the one
/// connection it is bound to, if any.
type WaitsFor = ((ApiFormat, bool), Option<String>);

/// The one connection `request` waits for when the pool is full for it (behaviour §11): a
/// stored response's, else its encrypted items' maker (`None`: any target with room).
fn waits_for(request: &RouteRequest) -> Option<&str> {
    request
        .only_connection
        .as_deref()
        .or(request.encrypted_maker.as_deref())
}

struct TakeFrom<'a> {
    combo: &'a ComboState,
    admissions: Option<&'a [BreakerAdmission]>,
    now_ms: u64,
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

    fn take(&mut self, position: usize, breaker: BreakerAdmission) -> Result<Permit, Block> {
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
            selection: SelectionState {
                deficits: args.deficits,
                leads: Default::default(),
                bindings: args.bindings,
            },
            demand: args.demand,
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
        report_groups(
            &state.registry,
            &state.setup.spec.name,
            &mut state.selection.bindings,
        );
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
                let _ = reply.send(state.selection.deficits.clone());
            }
            ComboMsg::AffinityPage(query, reply) => {
                let (matching, groups) =
                    state
                        .selection
                        .bindings
                        .page(query.after, query.limit, |b| {
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
                let _ = reply.send(state.selection.bindings.clone());
            }
            ComboMsg::Served(turn) => state.served(*turn),
            ComboMsg::PeerBinding(applied) => state.apply_peer_binding(*applied),
            ComboMsg::Crash => return Err(ActorProcessingErr::from("crash requested by a test")),
        }
        Ok(())
    }
}
