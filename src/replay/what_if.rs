//! `--what-if CONFIG`: the recorded requests re-routed through the same pure policy with
//! CONFIG's resilience settings, then compared with what the journal says happened.
//!
//! Each recorded request (`route_decided`) is routed again at its instant by the live code
//! paths: `policy::admission` (breaker → connection → model lockout, probe tokens included;
//! saturation of CONFIG's limits and the providers' readings; caps; the pace of CONFIG's combo
//! spec, `ComboSpec::paced`) for each target's view, `policy::selection::decide` — the combo
//! actor's own composition: §2 on the what-if deficits and in-flight counts, conversation
//! affinity with CONFIG's `[affinity]` on the what-if bindings and leads (groups and makers
//! read back by `recorded_turn`), each client held to its share of `max_groups` counted over
//! every combo (`share_of`, as the node's group ledger counts it) — then, per failover,
//! `take_first_admitted` and the node's `FailoverCursor`, and `RequestPlan` for what follows
//! each attempt. A group's turn served after a failover moves its binding as on the node
//! (`SelectionState::served`). Each decision is compared with the recorded one; the report
//! counts those that differ. Connections are specified by CONFIG's topology
//! (`config::topology`), as the node would run them. Each attempt's outcome is folded when it
//! completes (its start plus its recorded latency) by `settled_attempt::fold_settled`: the
//! breaker's signal and the connection's outcome, as their actors fold them.
//!
//! What a replay cannot know is how a target the recording did not try would have answered.
//! An attempt on a target this request tried in the recording gets that recorded outcome;
//! on another target, the outcome recorded on that (connection, model) nearest in time
//! ("borrowed"); on a target never tried in the journal, a success ("assumed"). The report
//! counts both, so a reader knows how much of the what-if world is inferred.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};
use std::fmt::Write as _;
use std::sync::Arc;

use quotaroute_actors::policy::admission::{
    breaker_admission, connection_block, evaluate_target, take_first_admitted, Admit, Block,
    BreakerAdmission,
};
use quotaroute_actors::policy::affinity_bindings::share_of;
use quotaroute_actors::policy::affinity_bindings::ClientQuota;
use quotaroute_actors::policy::breaker::{BreakerSettings, BreakerState, ProbeGate};
use quotaroute_actors::policy::connection_state::ConnectionState;
use quotaroute_actors::policy::connection_view::ConnectionView;
use quotaroute_actors::policy::demand_profile::DemandProfile;
use quotaroute_actors::policy::exec_key::exec_key;
use quotaroute_actors::policy::failover_cursor::FailoverCursor;
use quotaroute_actors::policy::pace::PacingSettings;
use quotaroute_actors::policy::quota_share::{self, DrrKeys, TargetView};
use quotaroute_actors::policy::request::Step;
use quotaroute_actors::policy::selection::{
    decide, AffinityKey, Candidates, ComboRules, RoutedTarget, SelectionRequest, SelectionState,
};
use quotaroute_actors::policy::settled_attempt::fold_settled;
use quotaroute_actors::topology::recorded_targets;
use quotaroute_actors::{AttemptResult, ComboSpec, ConnectionSpec, Outcome, Topology};
use quotaroute_journal::{
    ActionBy, AffinityOutcome, AuthKind, BreakerPhase, ConfigLoaded, Envelope, Event, OutcomeClass,
    RouteDecided,
};
use serde::Serialize;

use crate::config::topology::{attempt_budget, breaker_settings, topology, with_provider_settings};
use crate::config::Config;
use crate::replay::recorded_turn::{recorded_turn, routed_targets};
use crate::time_parse::format_duration;
use crate::timeline::periods::{PeriodTracker, Periods};

/// How many differing decisions the report shows.
const DIFFERENCES_SHOWN: usize = 10;

/// One compared figure.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Row {
    /// `breaker openings`, `breaker open`, `cooling`, `disabled`, `locked`, …
    pub measure: String,
    /// The provider or connection it is about (`""` for totals).
    pub subject: String,
    pub recorded: u64,
    pub what_if: u64,
    /// `true`: a duration in milliseconds; `false`: a count.
    pub is_duration: bool,
}

/// The whole comparison.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WhatIfReport {
    pub config: String,
    /// Recorded requests routed again.
    pub requests_replayed: u64,
    /// Upstream attempts the what-if routing made.
    pub attempts_simulated: u64,
    /// Attempts on a target the recorded request did not try: outcome borrowed from the
    /// nearest recorded one on that target.
    pub attempts_borrowed: u64,
    /// Attempts on a target never tried in the journal: assumed to succeed.
    pub attempts_assumed: u64,
    /// Routing decisions of the what-if world that differ from the recorded ones (order,
    /// room, chosen target or affinity); 0 when CONFIG routes as the node did.
    pub decisions_differing: u64,
    /// The first few of them.
    pub differences: Vec<Difference>,
    pub rows: Vec<Row>,
}

/// One routing decision the what-if world took differently.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Difference {
    pub request_id: String,
    /// The chosen target's connection (`None`: nothing could serve).
    pub recorded: Option<String>,
    pub what_if: Option<String>,
    pub recorded_affinity: AffinityOutcome,
    pub what_if_affinity: AffinityOutcome,
}

/// A recorded request's attempts.
#[derive(Debug, Default)]
struct RecordedRequest {
    attempts: Vec<Outcome>,
}

/// Something that happens at an instant of the replay, in journal order.
#[derive(Debug)]
enum Happening {
    Config(Box<ConfigLoaded>),
    /// An operator's action, applied at the same instant in the what-if world.
    Admin(Box<Event>),
    /// A recorded routing decision (a held request has one per try).
    Route(Box<RouteDecided>),
}

/// An attempt of the what-if world in progress.
#[derive(Debug)]
struct InFlightAttempt {
    request_id: String,
    /// Its target's position in the request's `targets`.
    position: usize,
    outcome: Outcome,
    probe_taken_at_ms: Option<u64>,
}

/// A request of the what-if world between its attempts.
#[derive(Debug)]
struct LiveRequest {
    combo: String,
    /// Every target of the combo, config order.
    targets: Vec<Arc<RoutedTarget>>,
    /// The decision's order (positions in `targets`), where the request stands in it and its
    /// attempt budget, as the node's `Decision` keeps them.
    route: FailoverCursor,
    /// The conversation the first target was placed for, and that target's position.
    group: Option<(AffinityKey, usize)>,
}

/// The simulation, fed one envelope at a time in journal order; it runs in `finish`, when
/// every recorded outcome (what a re-routed attempt may borrow) is known.
#[derive(Debug)]
pub struct WhatIf {
    config: Config,
    /// CONFIG as the node would run it: connection specs with their limits and settings.
    planned: Topology,
    config_label: String,
    recorded: PeriodTracker,
    simulated: PeriodTracker,
    happenings: Vec<(u64, Happening)>,
    requests: BTreeMap<String, RecordedRequest>,
    /// Every recorded outcome per (connection, model), in journal order, by start time.
    history: BTreeMap<(String, String), Vec<Outcome>>,
    topology: Option<ConfigLoaded>,
    breakers: BTreeMap<String, (BreakerState, BreakerSettings)>,
    gates: BTreeMap<String, ProbeGate>,
    connections: BTreeMap<String, (ConnectionState, ConnectionSpec)>,
    /// Per combo: the what-if deficits, leads and conversation bindings.
    selection: BTreeMap<String, SelectionState>,
    /// Per combo: its requests by hour of the week, for `clock = "demand"` (behaviour §13).
    demand: BTreeMap<String, DemandProfile>,
    in_flight: BTreeMap<String, u32>,
    live: BTreeMap<String, LiveRequest>,
    recorded_unservable: BTreeSet<String>,
    simulated_unservable: BTreeSet<String>,
    requests_replayed: u64,
    attempts: u64,
    borrowed: u64,
    assumed: u64,
    decisions_differing: u64,
    differences: Vec<Difference>,
    span: Option<(u64, u64)>,
}

impl WhatIf {
    pub fn new(config: Config, config_label: impl Into<String>) -> Self {
        WhatIf {
            planned: topology(&config, ""),
            config,
            config_label: config_label.into(),
            recorded: PeriodTracker::default(),
            simulated: PeriodTracker::default(),
            happenings: Vec::new(),
            requests: BTreeMap::new(),
            history: BTreeMap::new(),
            topology: None,
            breakers: BTreeMap::new(),
            gates: BTreeMap::new(),
            connections: BTreeMap::new(),
            selection: BTreeMap::new(),
            demand: BTreeMap::new(),
            in_flight: BTreeMap::new(),
            live: BTreeMap::new(),
            recorded_unservable: BTreeSet::new(),
            simulated_unservable: BTreeSet::new(),
            requests_replayed: 0,
            attempts: 0,
            borrowed: 0,
            assumed: 0,
            decisions_differing: 0,
            differences: Vec::new(),
            span: None,
        }
    }

    pub fn observe(&mut self, envelope: &Envelope) {
        let at_ms = envelope.at_ms;
        self.span = Some(match self.span {
            None => (at_ms, at_ms),
            Some((start, end)) => (start.min(at_ms), end.max(at_ms)),
        });
        self.recorded.observe(at_ms, &envelope.event);
        match &envelope.event {
            Event::ConfigLoaded(config) => self
                .happenings
                .push((at_ms, Happening::Config(Box::new(config.clone())))),
            Event::RouteDecided(decided) => {
                if decided.chosen.is_none() {
                    self.recorded_unservable
                        .insert(decided.request_id.to_string());
                }
                self.requests
                    .entry(decided.request_id.to_string())
                    .or_default();
                self.happenings
                    .push((at_ms, Happening::Route(Box::new(decided.clone()))));
            }
            Event::RequestSucceeded(_) | Event::RequestFailed(_) => {
                if let Some(outcome) = Outcome::from_request_event(&envelope.event, at_ms) {
                    self.history
                        .entry((outcome.connection.to_string(), outcome.model.to_string()))
                        .or_default()
                        .push(outcome.clone());
                    if let Some(request) = self.requests.get_mut(&*outcome.request_id) {
                        request.attempts.push(outcome);
                    }
                }
            }
            Event::ConnectionCleared(e) if e.by != ActionBy::Router => self.admin(envelope),
            // What an upstream's headers (or a push) said of an account's windows: a fact of
            // the world, not of the routing, applied at its instant so paces (§13) and spent
            // windows read as they did live.
            Event::UsageObserved(_) => self.admin(envelope),
            Event::ModelUnlocked(e) if e.by == ActionBy::Admin => self.admin(envelope),
            Event::BreakerTransition(e)
                if e.by == ActionBy::Admin && e.to == BreakerPhase::Closed =>
            {
                self.admin(envelope)
            }
            _ => {}
        }
    }

    fn admin(&mut self, envelope: &Envelope) {
        self.happenings.push((
            envelope.at_ms,
            Happening::Admin(Box::new(envelope.event.clone())),
        ));
    }

    /// Runs the what-if world: the recorded happenings in order, each attempt completing at its
    /// start plus its latency (completions first when instants tie, as they were journaled
    /// before the decisions that followed them).
    fn simulate(&mut self) {
        let happenings = std::mem::take(&mut self.happenings);
        let mut completions: BinaryHeap<Reverse<(u64, u64)>> = BinaryHeap::new();
        let mut attempts: BTreeMap<u64, InFlightAttempt> = BTreeMap::new();
        let mut next_id = 0u64;
        let mut pending = Vec::new();
        for (at_ms, happening) in happenings {
            while let Some(&Reverse((done_ms, id))) = completions.peek() {
                if done_ms > at_ms {
                    break;
                }
                completions.pop();
                if let Some(attempt) = attempts.remove(&id) {
                    self.complete(done_ms, attempt, &mut pending);
                }
                self.start_pending(&mut pending, &mut completions, &mut attempts, &mut next_id);
            }
            match happening {
                Happening::Config(config) => self.topology = Some(*config),
                Happening::Admin(event) => self.apply_admin(at_ms, &event),
                Happening::Route(decided) => {
                    if let Some(attempt) = self.route(at_ms, &decided) {
                        pending.push(attempt);
                    }
                }
            }
            self.start_pending(&mut pending, &mut completions, &mut attempts, &mut next_id);
        }
        while let Some(Reverse((done_ms, id))) = completions.pop() {
            if let Some(attempt) = attempts.remove(&id) {
                self.complete(done_ms, attempt, &mut pending);
            }
            self.start_pending(&mut pending, &mut completions, &mut attempts, &mut next_id);
        }
    }

    fn start_pending(
        &mut self,
        pending: &mut Vec<InFlightAttempt>,
        completions: &mut BinaryHeap<Reverse<(u64, u64)>>,
        attempts: &mut BTreeMap<u64, InFlightAttempt>,
        next_id: &mut u64,
    ) {
        for attempt in pending.drain(..) {
            let done_ms = attempt
                .outcome
                .started_at_ms
                .saturating_add(attempt.outcome.latency_ms);
            completions.push(Reverse((done_ms, *next_id)));
            attempts.insert(*next_id, attempt);
            *next_id += 1;
        }
    }

    fn apply_admin(&mut self, at_ms: u64, event: &Event) {
        match event {
            Event::ConnectionCleared(e) => {
                self.connection(&e.provider, &e.connection)
                    .0
                    .apply(at_ms, event);
            }
            Event::ModelUnlocked(e) => {
                self.connection(&e.provider, &e.connection)
                    .0
                    .apply(at_ms, event);
            }
            Event::UsageObserved(e) => {
                self.connection(&e.provider, &e.connection)
                    .0
                    .apply(at_ms, event);
            }
            Event::BreakerTransition(e) => self.breaker(&e.provider).0.apply(at_ms, event),
            _ => return,
        }
        self.simulated.observe(at_ms, event);
    }

    /// Routes a recorded request again at `now` by `policy::selection::decide` on the what-if
    /// state, then starts its first attempt (`None`: nothing could serve, or the combo is
    /// unknown).
    fn route(&mut self, now_ms: u64, recorded: &RouteDecided) -> Option<InFlightAttempt> {
        let request_id = &recorded.request_id;
        let combo = recorded.combo.clone();
        let config = self.topology.as_ref()?;
        let (strategy, infos) = recorded_targets(config, &combo)?;
        let targets = routed_targets(config, &infos);
        if targets.is_empty() {
            return None;
        }
        self.requests_replayed += 1;
        let turn = recorded_turn(recorded, &targets);
        let pacing = self.pacing_of(&combo, strategy);
        let demand = self.demand.remove(&*combo).unwrap_or_default();
        let views: Vec<TargetView> = turn
            .positions
            .iter()
            .map(|&position| self.target_view(&targets[position], pacing.as_ref(), &demand, now_ms))
            .collect();
        let exponent_pm = pacing
            .as_ref()
            .map_or(quotaroute_actors::policy::pace::ON_PACE, |settings| {
                settings.knobs().exponent_pm
            });
        let settings = self.config.affinity;
        let rules = ComboRules {
            name: &combo,
            generation: recorded.generation,
            strategy,
            affinity: settings,
        };
        let request = SelectionRequest {
            request_id,
            model: &recorded.model,
            client: &turn.client,
            only_connection: None,
            encrypted_maker: turn.encrypted_maker.as_deref(),
            group: turn.group.as_ref(),
        };
        let mut state = self.selection.remove(&*combo).unwrap_or_default();
        let decided = decide(
            &rules,
            &state,
            Candidates {
                targets: &targets,
                positions: &turn.positions,
                views: &views,
            },
            &request,
            &mut WhatIfAdmit {
                what_if: self,
                targets: &targets,
                now_ms,
            },
            now_ms,
        );
        let Some(decided) = decided else {
            self.selection.insert(combo.to_string(), state);
            return None;
        };
        let mut demand = demand;
        demand.count(now_ms);
        self.demand.insert(combo.to_string(), demand);
        state.apply(
            &DrrKeys::new(strategy, &infos).with_exponent_pm(exponent_pm),
            &decided.route_decided,
            decided.changes,
            now_ms,
            (settings.max_groups, settings.ttl_ms),
            |client| Some(self.group_quota(client)),
        );
        self.selection.insert(combo.to_string(), state);
        self.compare(recorded, &decided.route_decided, &targets);
        let budget = self.budget_of(&combo);
        let Some((offset, probe_taken_at_ms)) = decided.taken else {
            self.simulated_unservable.insert(request_id.to_string());
            return None;
        };
        let position = decided.order[offset];
        let group = turn
            .group
            .filter(|_| decided.route_decided.group.is_some())
            .map(|key| (key, position));
        self.live.insert(
            request_id.to_string(),
            LiveRequest {
                combo: combo.to_string(),
                targets,
                route: FailoverCursor::new(decided.order, offset, budget),
                group,
            },
        );
        self.start_attempt(now_ms, request_id, position, probe_taken_at_ms)
    }

    /// Counts a what-if decision that differs from the recorded one (and keeps the first few).
    fn compare(
        &mut self,
        recorded: &RouteDecided,
        what_if: &RouteDecided,
        targets: &[Arc<RoutedTarget>],
    ) {
        let same = recorded.order == what_if.order
            && recorded.room == what_if.room
            && recorded.chosen == what_if.chosen
            && recorded.affinity == what_if.affinity;
        if same {
            return;
        }
        self.decisions_differing += 1;
        if self.differences.len() < DIFFERENCES_SHOWN {
            let name = |d: &RouteDecided| {
                d.chosen
                    .and_then(|i| targets.get(usize::from(i)))
                    .map(|t| String::from(&*t.connection))
            };
            self.differences.push(Difference {
                request_id: recorded.request_id.to_string(),
                recorded: name(recorded),
                what_if: name(what_if),
                recorded_affinity: recorded.affinity,
                what_if_affinity: what_if.affinity,
            });
        }
    }

    /// The what-if config's attempt budget for `combo` (its defaults for an implicit combo).
    fn budget_of(&self, combo: &str) -> (u32, u32) {
        let spec = self.config.combos.iter().find(|c| c.name == combo);
        attempt_budget(&self.config, spec)
    }

    fn admission_of(&mut self, provider: &str, now_ms: u64) -> BreakerAdmission {
        let gate = self.gates.get(provider).cloned().unwrap_or_default();
        let (state, settings) = self.breaker(provider);
        breaker_admission(state, settings, Some(&gate), now_ms)
    }

    /// The pacing `combo`'s turns use under the what-if config (behaviour §13), as its spec
    /// says (`ComboSpec::paced`): CONFIG's combo of that name, else the implicit combo CONFIG
    /// makes of a `provider/model` name, else (a combo only the journal knows) one of the
    /// journal's `strategy` with CONFIG's default pacing, as an implicit combo gets it.
    fn pacing_of(&self, combo: &str, strategy: quota_share::Strategy) -> Option<PacingSettings> {
        if let Some(spec) = self.planned.combo(combo) {
            return spec.paced().cloned();
        }
        let spec = self
            .planned
            .implicit_combo(combo)
            .unwrap_or_else(|| ComboSpec {
                strategy,
                pacing: self.planned.pacing.clone(),
                ..ComboSpec::quota_share(combo, &[])
            });
        spec.paced().cloned()
    }

    /// `client`'s quota for a new group in the combo being routed (behaviour §11), as the live
    /// combos' group ledger gives it: its share of CONFIG's `max_groups` among CONFIG's
    /// clients (`share_of`), and the groups it holds in the other combos. The combo being
    /// routed is out of `self.selection` while it decides, so every combo left is another.
    fn group_quota(&mut self, client: &str) -> ClientQuota {
        let held_elsewhere = self
            .selection
            .values_mut()
            .map(|other| other.bindings.held_by(client))
            .sum();
        ClientQuota {
            share: share_of(self.config.affinity.max_groups, self.planned.clients),
            held_elsewhere,
        }
    }

    /// What the selector sees of one target now: the same evaluation as the combo actor's, on
    /// the what-if state (the connection's copy as its actor would push it).
    fn target_view(
        &mut self,
        target: &RoutedTarget,
        pacing: Option<&PacingSettings>,
        demand: &DemandProfile,
        now_ms: u64,
    ) -> TargetView {
        let breaker = self.admission_of(&target.provider, now_ms);
        let in_flight = self
            .in_flight
            .get(&*target.connection)
            .copied()
            .unwrap_or(0);
        let (state, spec) = self.connection(&target.provider, &target.connection);
        let view = ConnectionView::of(state, spec, now_ms);
        let max_concurrent = spec.max_concurrent;
        evaluate_target(
            target.weight,
            exec_key(&target.connection, &target.model).into(),
            &target.model,
            breaker,
            Some(&view),
            in_flight,
            max_concurrent,
            pacing,
            Some(demand),
            now_ms,
        )
    }

    /// A failover: the next target of the request's order that is admitted now
    /// (`take_first_admitted`, as the combo's `Acquire` takes it), taken as the node's
    /// `Decision` takes it (`FailoverCursor::took`), with its attempt started.
    fn next_attempt(&mut self, now_ms: u64, request_id: &str) -> Option<InFlightAttempt> {
        let live = self.live.get(request_id)?;
        let candidates: Vec<usize> = live.route.untried().to_vec();
        let targets = live.targets.clone();
        let mut passed_over = Vec::new();
        let taken = take_first_admitted(
            &mut WhatIfAdmit {
                what_if: self,
                targets: &targets,
                now_ms,
            },
            &candidates,
            &mut passed_over,
        );
        let live = self.live.get_mut(request_id)?;
        let (offset, probe_taken_at_ms) = taken.unzip();
        let at = live.route.took(offset)?;
        let position = *live.route.order().get(at)?;
        self.start_attempt(now_ms, request_id, position, probe_taken_at_ms.flatten())
    }

    /// Starts the request's attempt on the target at `position` (taken already).
    fn start_attempt(
        &mut self,
        now_ms: u64,
        request_id: &str,
        position: usize,
        probe_taken_at_ms: Option<u64>,
    ) -> Option<InFlightAttempt> {
        let live = self.live.get(request_id)?;
        let target = live.targets.get(position)?.clone();
        let combo = live.combo.clone();
        let attempt_number = live.route.plan().upstream_requests();
        let mut outcome = self.outcome_for(request_id, &target, now_ms);
        outcome.request_id = Arc::from(request_id);
        outcome.combo = combo.into();
        outcome.provider = target.provider.clone();
        outcome.attempt = attempt_number;
        outcome.started_at_ms = now_ms;
        outcome.was_probe = probe_taken_at_ms.is_some();
        self.attempts += 1;
        *self
            .in_flight
            .entry(String::from(&*target.connection))
            .or_default() += 1;
        Some(InFlightAttempt {
            request_id: request_id.to_string(),
            position,
            outcome,
            probe_taken_at_ms,
        })
    }

    /// How `target` answers this request at `now` (see the module header).
    fn outcome_for(&mut self, request_id: &str, target: &RoutedTarget, now_ms: u64) -> Outcome {
        let same = |o: &&Outcome| *o.connection == *target.connection && *o.model == *target.model;
        if let Some(recorded) = self
            .requests
            .get(request_id)
            .and_then(|r| r.attempts.iter().find(same))
        {
            return recorded.clone();
        }
        let key = (
            String::from(&*target.connection),
            String::from(&*target.model),
        );
        if let Some(history) = self.history.get(&key).filter(|h| !h.is_empty()) {
            self.borrowed += 1;
            let after = history.partition_point(|o| o.started_at_ms <= now_ms);
            let nearest = match (after.checked_sub(1), history.get(after)) {
                (Some(before), Some(next))
                    if next.started_at_ms - now_ms < now_ms - history[before].started_at_ms =>
                {
                    next
                }
                (Some(before), _) => &history[before],
                (None, Some(next)) => next,
                (None, None) => &history[0],
            };
            return nearest.clone();
        }
        self.assumed += 1;
        Outcome {
            request_id: Arc::from(request_id),
            combo: Arc::from(""),
            client: None,
            provider: Arc::from(""),
            connection: target.connection.clone(),
            model: target.model.clone(),
            attempt: 1,
            started_at_ms: now_ms,
            latency_ms: 0,
            was_probe: false,
            skipped: Vec::new(),
            result: AttemptResult::success(200, 0, 0),
        }
    }

    /// An attempt completes at `now`: its outcome applied as the actors apply it (the breaker
    /// hears its signal, the connection everything), then the plan says what follows.
    fn complete(&mut self, now_ms: u64, attempt: InFlightAttempt, next: &mut Vec<InFlightAttempt>) {
        let InFlightAttempt {
            request_id,
            position,
            outcome,
            probe_taken_at_ms,
        } = attempt;
        if let Some(count) = self.in_flight.get_mut(&*outcome.connection) {
            *count = count.saturating_sub(1);
        }
        if let (Some(taken_at_ms), Some(gate)) =
            (probe_taken_at_ms, self.gates.get_mut(&*outcome.provider))
        {
            gate.release(taken_at_ms);
        }
        let class = outcome.result.class;
        self.apply_outcome(now_ms, &outcome);
        if class == OutcomeClass::Success {
            self.served(now_ms, &request_id, position);
        }
        let Some(live) = self.live.get_mut(&request_id) else {
            return;
        };
        let step = live
            .route
            .plan_mut()
            .after_attempt(class, outcome.result.stream, true);
        if step != Step::Failover {
            self.live.remove(&request_id);
            return;
        }
        match self.next_attempt(now_ms, &request_id) {
            Some(attempt) => next.push(attempt),
            None => {
                self.live.remove(&request_id);
            }
        }
    }

    /// A group's turn served at `position` after a failover: its binding follows, as the
    /// combo's does when the node's request tells it (`SelectionState::served`).
    fn served(&mut self, now_ms: u64, request_id: &str, position: usize) {
        let Some(live) = self.live.get(request_id) else {
            return;
        };
        let Some((key, first)) = &live.group else {
            return;
        };
        if *first == position {
            return;
        }
        let (Some(target), Some(state)) = (
            live.targets.get(position),
            self.selection.get_mut(&live.combo),
        ) else {
            return;
        };
        let settings = self.config.affinity;
        state.served(
            request_id,
            &live.combo,
            key,
            target,
            now_ms,
            (settings.max_groups, settings.ttl_ms),
        );
    }

    /// A settled attempt folded into its breaker and connection as their actors fold it
    /// (`settled_attempt::fold_settled`).
    fn apply_outcome(&mut self, now_ms: u64, outcome: &Outcome) {
        // Both made first, then borrowed side by side.
        self.breaker(&outcome.provider);
        self.connection(&outcome.provider, &outcome.connection);
        let (Some((breaker, settings)), Some((connection, spec))) = (
            self.breakers.get_mut(&*outcome.provider),
            self.connections.get_mut(&*outcome.connection),
        ) else {
            return;
        };
        let events = fold_settled(outcome, now_ms, (breaker, settings), (connection, spec));
        for event in &events {
            self.simulated.observe(now_ms, event);
        }
    }

    fn profile_of(&self, provider: &str) -> AuthKind {
        self.topology
            .as_ref()
            .and_then(|t| t.providers.iter().find(|p| p.name == provider))
            .map_or(AuthKind::ApiKey, |p| p.profile)
    }

    fn breaker(&mut self, provider: &str) -> &mut (BreakerState, BreakerSettings) {
        let profile = self.profile_of(provider);
        let config = &self.config;
        self.breakers
            .entry(provider.to_string())
            .or_insert_with(|| {
                (
                    BreakerState::new(provider),
                    breaker_settings(config, provider, profile),
                )
            })
    }

    /// The what-if state of connection `id`, specified as CONFIG's topology has it; a
    /// connection the journal knows and CONFIG does not keeps its journaled shape with CONFIG's
    /// settings for its provider.
    fn connection(&mut self, provider: &str, id: &str) -> &mut (ConnectionState, ConnectionSpec) {
        let planned = self.planned.connection(id).cloned();
        let info = self
            .topology
            .as_ref()
            .and_then(|t| t.connections.iter().find(|c| c.id == id));
        let config = &self.config;
        self.connections.entry(id.to_string()).or_insert_with(|| {
            let spec = planned.unwrap_or_else(|| {
                let auth = info.map_or(AuthKind::ApiKey, |c| c.auth);
                with_provider_settings(
                    config,
                    ConnectionSpec {
                        max_concurrent: info.and_then(|c| c.max_concurrent),
                        models: info.and_then(|c| c.models.clone()),
                        ..ConnectionSpec::new(id, provider, auth, info.map_or(1, |c| c.weight))
                    },
                )
            });
            (ConnectionState::new(provider, id), spec)
        })
    }

    pub fn finish(mut self) -> WhatIfReport {
        self.simulate();
        let (start, end) = self.span.unwrap_or((0, 0));
        let recorded = self.recorded.finish(start, end);
        let simulated = self.simulated.finish(start, end);
        let mut providers: BTreeSet<String> = self.breakers.keys().cloned().collect();
        let mut connections: BTreeSet<String> = self.connections.keys().cloned().collect();
        if let Some(topology) = &self.topology {
            providers.extend(topology.providers.iter().map(|p| p.name.clone()));
            connections.extend(topology.connections.iter().map(|c| c.id.clone()));
        }
        let mut rows = Vec::new();
        let count =
            |p: &Periods, name: &str| u64::from(p.breaker_openings.get(name).copied().unwrap_or(0));
        for provider in &providers {
            rows.push(row(
                "breaker openings",
                provider,
                count(&recorded, provider),
                count(&simulated, provider),
                false,
            ));
            rows.push(row(
                "breaker open",
                provider,
                recorded.breaker_open_ms(provider),
                simulated.breaker_open_ms(provider),
                true,
            ));
        }
        let locked = |p: &Periods, id: &str| p.locked_ms(id).values().sum::<u64>();
        for id in &connections {
            rows.push(row(
                "cooling",
                id,
                recorded.cooling_ms(id),
                simulated.cooling_ms(id),
                true,
            ));
            rows.push(row(
                "locked (all models)",
                id,
                locked(&recorded, id),
                locked(&simulated, id),
                true,
            ));
            let (r, s) = (recorded.disabled_ms(id), simulated.disabled_ms(id));
            if r > 0 || s > 0 {
                rows.push(row("disabled", id, r, s, true));
            }
        }
        rows.push(row(
            "requests with nothing to serve",
            "",
            self.recorded_unservable.len() as u64,
            self.simulated_unservable.len() as u64,
            false,
        ));
        WhatIfReport {
            config: self.config_label,
            requests_replayed: self.requests_replayed,
            attempts_simulated: self.attempts,
            attempts_borrowed: self.borrowed,
            attempts_assumed: self.assumed,
            decisions_differing: self.decisions_differing,
            differences: self.differences,
            rows,
        }
    }
}

/// The what-if state as [`take_first_admitted`] reads it: candidates are positions in the
/// request's targets; taking a HALF_OPEN target takes a probe token of the what-if gate.
struct WhatIfAdmit<'a> {
    what_if: &'a mut WhatIf,
    targets: &'a [Arc<RoutedTarget>],
    now_ms: u64,
}

impl Admit for WhatIfAdmit<'_> {
    /// When the probe token was taken, if one was.
    type Taken = Option<u64>;

    fn breaker(&mut self, i: usize) -> BreakerAdmission {
        let provider = self.targets[i].provider.clone();
        self.what_if.admission_of(&provider, self.now_ms)
    }

    fn connection_block(&mut self, i: usize) -> Option<Block> {
        let target = &self.targets[i];
        let (state, _) = self
            .what_if
            .connection(&target.provider, &target.connection);
        connection_block(&state.health, &state.lockouts, &target.model, self.now_ms)
    }

    fn take(&mut self, i: usize, breaker: BreakerAdmission) -> Result<Option<u64>, Block> {
        if breaker != BreakerAdmission::Probe {
            return Ok(None);
        }
        let provider = String::from(&*self.targets[i].provider);
        let now_ms = self.now_ms;
        let settings = self.what_if.breaker(&provider).1.clone();
        let gate = self.what_if.gates.entry(provider.clone()).or_default();
        if !gate.try_take(now_ms, &settings) {
            return Err((
                quotaroute_journal::BlockReason::ProbeInFlight,
                Some(settings.probe_timeout_ms),
            ));
        }
        if let Some((state, _)) = self.what_if.breakers.get_mut(&provider) {
            for event in state.on_probe_admitted(&provider, now_ms) {
                state.apply(now_ms, &event);
                self.what_if.simulated.observe(now_ms, &event);
            }
        }
        Ok(Some(now_ms))
    }
}

fn row(measure: &str, subject: &str, recorded: u64, what_if: u64, is_duration: bool) -> Row {
    Row {
        measure: measure.to_string(),
        subject: subject.to_string(),
        recorded,
        what_if,
        is_duration,
    }
}

/// The "recorded vs what-if" table.
pub fn render_text(report: &WhatIfReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "what-if {}: {} recorded requests routed again, {} attempts ({} with an outcome borrowed from the nearest on that target, {} assumed to succeed: never tried in the journal)",
        report.config,
        report.requests_replayed,
        report.attempts_simulated,
        report.attempts_borrowed,
        report.attempts_assumed
    );
    let _ = writeln!(
        out,
        "routing decisions that differ from the recorded ones: {} of {}",
        report.decisions_differing, report.requests_replayed
    );
    for d in &report.differences {
        let _ = writeln!(
            out,
            "  {}: recorded {} ({}), what-if {} ({})",
            d.request_id,
            d.recorded.as_deref().unwrap_or("nothing"),
            d.recorded_affinity.as_str(),
            d.what_if.as_deref().unwrap_or("nothing"),
            d.what_if_affinity.as_str()
        );
    }
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "{:<32} {:<14} {:>10} {:>10}  {:>10}",
        "MEASURE", "SUBJECT", "RECORDED", "WHAT-IF", "CHANGE"
    );
    for r in &report.rows {
        let show = |v: u64| {
            if r.is_duration {
                format_duration(v)
            } else {
                v.to_string()
            }
        };
        let change = match r.what_if.cmp(&r.recorded) {
            std::cmp::Ordering::Equal => "=".to_string(),
            std::cmp::Ordering::Greater => format!("+{}", show(r.what_if - r.recorded)),
            std::cmp::Ordering::Less => format!("-{}", show(r.recorded - r.what_if)),
        };
        let _ = writeln!(
            out,
            "{:<32} {:<14} {:>10} {:>10}  {:>10}",
            r.measure,
            r.subject,
            show(r.recorded),
            show(r.what_if),
            change
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use proptest::prelude::*;
    use quotaroute_actors::policy::breaker::ProbeGate;
    use quotaroute_actors::policy::drr::DrrDeficits;
    use quotaroute_actors::policy::quota_share::{select, Strategy as Routing};
    use quotaroute_journal::OutcomeClass;

    use super::*;

    const NOW: u64 = 1_764_000_000_000;
    const MODEL: &str = "m";

    /// One connection of a random case: weight, cap, a `requests_5h` limit, requests in
    /// flight, and the attempts it has seen (class, ms before now).
    #[derive(Debug, Clone)]
    struct Case {
        weight: u32,
        cap: Option<u32>,
        limit: Option<u64>,
        in_flight: u32,
        history: Vec<(u8, u64)>,
    }

    fn case() -> impl Strategy<Value = Case> {
        (
            1u32..4,
            proptest::option::of(1u32..3),
            proptest::option::of(1u64..6),
            0u32..4,
            proptest::collection::vec((0u8..6, 0u64..400_000), 0..6),
        )
            .prop_map(|(weight, cap, limit, in_flight, history)| Case {
                weight,
                cap,
                limit,
                in_flight,
                history,
            })
    }

    fn config_of(cases: &[Case]) -> Config {
        let mut text = String::from(
            "[server]\napi_keys = [\"k\"]\n[[providers]]\nname = \"p\"\nformat = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\n",
        );
        for (i, case) in cases.iter().enumerate() {
            text.push_str(&format!(
                "[[connections]]\nid = \"c{i}\"\nprovider = \"p\"\napi_key = \"x\"\nweight = {}\n",
                case.weight
            ));
            if let Some(cap) = case.cap {
                text.push_str(&format!("max_concurrent = {cap}\n"));
            }
            if let Some(limit) = case.limit {
                text.push_str(&format!("[connections.limits]\nrequests_5h = {limit}\n"));
            }
        }
        text.push_str("[[combos]]\nname = \"team\"\ntargets = [");
        for (i, case) in cases.iter().enumerate() {
            text.push_str(&format!(
                "{{ connection = \"c{i}\", model = \"{MODEL}\", weight = {} }},",
                case.weight
            ));
        }
        text.push_str("]\n");
        crate::config::parse(&text, "case.toml", &|_| None).unwrap()
    }

    fn result_of(class: u8) -> AttemptResult {
        match class {
            0 | 1 => AttemptResult::success(200, 10, 10),
            2 => AttemptResult::failure(OutcomeClass::RateLimited, Some(429)),
            3 => AttemptResult::failure(OutcomeClass::ServerError, Some(500)),
            4 => AttemptResult::failure(OutcomeClass::ModelUnavailable, Some(404)),
            _ => AttemptResult::failure(OutcomeClass::Timeout, None),
        }
    }

    /// The order the combo actor decides for `cases`: its connection copies as the supervisor
    /// builds them (`ConnectionView::of` on CONFIG's specs), its breaker copy with the shared
    /// gate, `evaluate_target` and `select`.
    fn combo_order(
        planned: &Topology,
        states: &[ConnectionState],
        breaker: &BreakerState,
        cases: &[Case],
    ) -> Vec<String> {
        let view = quotaroute_actors::view::BreakerView {
            state: Arc::new(breaker.clone()),
            settings: BreakerSettings::default(),
            gate: Arc::new(Mutex::new(ProbeGate::default())),
        };
        let combo = planned.combo("team").unwrap();
        let views: Vec<TargetView> = combo
            .targets
            .iter()
            .enumerate()
            .map(|(i, target)| {
                let spec = planned.connection(&target.connection).unwrap();
                let copy = ConnectionView::of(&states[i], spec, NOW);
                evaluate_target(
                    target.weight,
                    exec_key(&target.connection, &target.model).into(),
                    &target.model,
                    view.admission(NOW),
                    Some(&copy),
                    cases[i].in_flight,
                    spec.max_concurrent,
                    combo.paced(),
                    None,
                    NOW,
                )
            })
            .collect();
        select(Routing::QuotaShare, &views, &DrrDeficits::default())
            .order
            .iter()
            .map(|&i| combo.targets[i].connection.clone())
            .collect()
    }

    /// The order `--what-if` decides for the same state.
    fn what_if_order(
        config: &Config,
        states: &[ConnectionState],
        breaker: &BreakerState,
        cases: &[Case],
    ) -> Vec<String> {
        let mut what_if = WhatIf::new(config.clone(), "case");
        let planned = topology(config, "");
        what_if.topology = Some(planned.config_loaded(1));
        what_if
            .breakers
            .insert("p".into(), (breaker.clone(), BreakerSettings::default()));
        for (i, state) in states.iter().enumerate() {
            let id = format!("c{i}");
            let spec = planned.connection(&id).unwrap().clone();
            what_if
                .connections
                .insert(id.clone(), (state.clone(), spec));
            what_if.in_flight.insert(id, cases[i].in_flight);
        }
        // A record that names no target: every target of the combo is a candidate.
        let recorded = RouteDecided {
            request_id: "r".into(),
            generation: 1,
            combo: "team".into(),
            model: "team".into(),
            room: Vec::new(),
            chosen: None,
            order: Vec::new(),
            skipped: Vec::new(),
            affinity: AffinityOutcome::None,
            client: None,
            group: None,
            paces: Vec::new(),
        };
        what_if
            .requests
            .insert("r".into(), RecordedRequest::default());
        let _ = what_if.route(NOW, &recorded);
        let Some(live) = what_if.live.get("r") else {
            return Vec::new();
        };
        live.route
            .order()
            .iter()
            .map(|&i| live.targets[i].connection.to_string())
            .collect()
    }

    /// A connection whose configured `requests_5h` is used up goes behind the others in a
    /// what-if, as it does on the node (it used to stay first: what-if knew no limits).
    #[test]
    fn a_saturated_bucket_reorders_the_what_if_as_the_node_does() {
        let cases = vec![
            Case {
                weight: 3,
                cap: None,
                limit: Some(2),
                in_flight: 0,
                history: vec![(0, 1_000), (0, 2_000)],
            },
            Case {
                weight: 1,
                cap: None,
                limit: None,
                in_flight: 0,
                history: Vec::new(),
            },
        ];
        let config = config_of(&cases);
        let planned = topology(&config, "");
        let mut states = Vec::new();
        for (i, case) in cases.iter().enumerate() {
            let id = format!("c{i}");
            let spec = planned.connection(&id).unwrap();
            let mut state = ConnectionState::new("p", &id);
            for (n, &(class, ago)) in case.history.iter().enumerate() {
                let outcome = Outcome {
                    request_id: format!("h{n}").into(),
                    combo: "team".into(),
                    client: None,
                    provider: "p".into(),
                    connection: id.clone().into(),
                    model: MODEL.into(),
                    attempt: 1,
                    started_at_ms: NOW - ago,
                    latency_ms: 0,
                    was_probe: false,
                    skipped: Vec::new(),
                    result: result_of(class),
                };
                for event in state.on_outcome(&outcome, NOW - ago, spec) {
                    state.apply(NOW - ago, &event);
                }
            }
            states.push(state);
        }
        let breaker = BreakerState::new("p");
        let what_if = what_if_order(&config, &states, &breaker, &cases);
        assert_eq!(what_if, vec!["c1".to_string(), "c0".to_string()]);
        assert_eq!(combo_order(&planned, &states, &breaker, &cases), what_if);
    }

    /// Whether a combo is paced is its spec's word (`ComboSpec::paced`): CONFIG's combo, the
    /// implicit combo of a `provider/model` name, or (a combo only the journal knows) the
    /// journal's strategy with CONFIG's default pacing.
    #[test]
    fn the_what_if_paces_a_combo_as_its_spec_says() {
        let text = "[server]\napi_keys = [\"k\"]\n[[providers]]\nname = \"p\"\nformat = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\n[[connections]]\nid = \"c0\"\nprovider = \"p\"\napi_key = \"x\"\n[[combos]]\nname = \"calm\"\npacing = false\ntargets = [{ connection = \"c0\", model = \"m\" }]\n[[combos]]\nname = \"first\"\nstrategy = \"priority\"\ntargets = [{ connection = \"c0\", model = \"m\" }]\n[[combos]]\nname = \"team\"\ntargets = [{ connection = \"c0\", model = \"m\" }]\n";
        let config = crate::config::parse(text, "case.toml", &|_| None).unwrap();
        let what_if = WhatIf::new(config.clone(), "case");
        let share = quotaroute_actors::policy::quota_share::Strategy::QuotaShare;
        let priority = quotaroute_actors::policy::quota_share::Strategy::Priority;
        assert_eq!(what_if.pacing_of("calm", share), None);
        // CONFIG's strategy, not the journal's, for a combo CONFIG names.
        assert_eq!(what_if.pacing_of("first", share), None);
        assert_eq!(
            what_if.pacing_of("team", priority),
            Some(config.defaults.pacing.clone())
        );
        assert_eq!(
            what_if.pacing_of("p/m", share),
            Some(config.defaults.pacing.clone())
        );
        assert_eq!(
            what_if.pacing_of("gone", share),
            Some(config.defaults.pacing.clone())
        );
        assert_eq!(what_if.pacing_of("gone", priority), None);
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 10_000, failure_persistence: None, ..ProptestConfig::default() })]

        /// For random states (cooldowns, lockouts, saturated limits, caps, in-flight, an open or
        /// degraded breaker), `--what-if` orders a combo's targets exactly as the combo actor does.
        #[test]
        fn what_if_orders_as_the_combo_does(
            cases in proptest::collection::vec(case(), 1..5),
            breaker_failures in 0usize..12,
        ) {
            let config = config_of(&cases);
            let planned = topology(&config, "");
            let states: Vec<ConnectionState> = cases
                .iter()
                .enumerate()
                .map(|(i, case)| {
                    let id = format!("c{i}");
                    let spec = planned.connection(&id).unwrap();
                    let mut state = ConnectionState::new("p", &id);
                    let mut history = case.history.clone();
                    history.sort_by_key(|&(_, ago)| Reverse(ago));
                    for (n, &(class, ago)) in history.iter().enumerate() {
                        let at = NOW - ago;
                        let outcome = Outcome {
                            request_id: format!("h{n}").into(),
                            combo: "team".into(),
                            client: None,
                            provider: "p".into(),
                            connection: id.clone().into(),
                            model: MODEL.into(),
                            attempt: 1,
                            started_at_ms: at,
                            latency_ms: 0,
                            was_probe: false,
                            skipped: Vec::new(),
                            result: result_of(class),
                        };
                        for event in state.on_outcome(&outcome, at, spec) {
                            state.apply(at, &event);
                        }
                    }
                    state
                })
                .collect();
            let mut breaker = BreakerState::new("p");
            let settings = BreakerSettings::default();
            for n in 0..breaker_failures {
                let at = NOW - 1_000 + n as u64;
                for event in breaker.on_outcome("p", &format!("c{}", n % cases.len()), true, at, false, at, &settings) {
                    breaker.apply(at, &event);
                }
            }
            let combo = combo_order(&planned, &states, &breaker, &cases);
            let what_if = what_if_order(&config, &states, &breaker, &cases);
            prop_assert_eq!(combo, what_if);
        }
    }
}
