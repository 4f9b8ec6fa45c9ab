//! `Router`: the crate's front door. Starts the actor system from a topology and a journal
//! (replaying it first), routes requests, exposes the learned state and the admin operations.
//!
//! Everything here is a thin `call`/`cast` onto the actors; no policy lives in this file.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use quotaroute_journal::{
    recover_versioned, ActionBy, AdminAction, ApiUnserved, Damage, Event, Journal, JournalHandle,
    JournalStats, NodeStarted, NodeStopped, PeerApplied, ResponseBound, Skipped, UsageObserved,
    UsageSource, WriterConfig,
};
use ractor::{Actor, ActorRef};

use crate::actor::messages::{
    BreakerMsg, ComboMsg, ConnectionMsg, QueuedRoute, RouteReply, RouteRequest,
};
use crate::actor::supervisor::{RouterSupervisor, SupervisorArgs, SupervisorMsg};
use crate::admin_state::AdminState;
use crate::clock::SharedClock;
use crate::decision::{
    Decision, ADMIN_CALL_TIMEOUT_MS, JOURNAL_CALL_TIMEOUT_MS, ROUTE_CALL_TIMEOUT_MS,
};
use crate::policy::exec_key::exec_key;
use crate::policy::fair_queue::Ticket;
use crate::policy::request::{hold_wait_ms, Unroutable};
use crate::policy::request_events::RequestEvents;
use crate::policy::router_state::RouterState;
use crate::policy::stored_responses::{ResponseBinding, ResponseBindings};
use crate::policy::topology::Topology;
use crate::policy::unserved_apis::UnservedApis;
use crate::recorder::{Recorder, RecorderArgs};
use crate::registry::Registry;
use crate::snapshot;
use crate::tap::EventTap;
use crate::RouterError;

/// `admin_action.action` of `POST /admin/clients/{id}/reset` (its `target` is the client id).
pub const CLIENT_RESET_ACTION: &str = "reset_client";

/// How to run the router.
pub struct RouterOptions {
    pub writer: WriterConfig,
    /// Snapshot the folded state every this many events (0: never).
    pub snapshot_every_events: u64,
    /// Which events reach the journal (`journal.request_events`).
    pub request_events: RequestEvents,
    pub clock: SharedClock,
}

/// Why a request could not be routed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RouteError {
    /// No combo and no `provider/model` of that name (or none of the endpoint's format).
    #[error("model `{0}` not found")]
    UnknownModel(String),
    /// The model exists, but none of its targets speaks the endpoint's format.
    #[error("model `{0}` has no target of this endpoint's format")]
    WrongFormat(String),
    /// The model has no target on the connection the request must use.
    #[error("model `{model}` has no target on connection `{connection}`")]
    NotOnConnection { model: String, connection: String },
    /// Every target is blocked (behaviour §7).
    #[error("no target can serve now")]
    NoTarget(Unroutable),
    #[error("router unavailable: {0}")]
    Unavailable(String),
    /// Every target stayed at cap for the combo's `queue_ms`, or its queue is full
    /// (behaviour §11: 429 `pool_busy`).
    #[error("the pool is busy: every target at its concurrency cap")]
    PoolBusy { waited_ms: u64, retry_after_ms: u64 },
}

/// Requests of one client waiting in one combo's queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueuedCount {
    pub combo: String,
    pub client: String,
    pub queued: usize,
}

impl QueuedCount {
    /// Waiting requests of `client` over every combo.
    pub fn of_client(counts: &[QueuedCount], client: &str) -> usize {
        counts
            .iter()
            .filter(|c| c.client == client)
            .map(|c| c.queued)
            .sum()
    }
}

/// What a restart recovered from the journal.
#[derive(Debug, Clone, Default)]
pub struct RecoveryReport {
    pub snapshot_seq: Option<u64>,
    pub events_replayed: u64,
    pub last_seq: u64,
    pub damaged: Vec<Damage>,
}

impl RecoveryReport {
    /// The first record or snapshot a newer build wrote (`DamageReason::Newer`): a node must
    /// not start on this journal (behaviour §12).
    pub fn newer(&self) -> Option<&Damage> {
        self.damaged.iter().find(|damage| damage.is_newer())
    }
}

/// Rebuilds the folded state from a journal: newest readable snapshot plus the events after it.
pub fn recover_state(journal: &dyn Journal) -> (RouterState, RecoveryReport) {
    recover_state_with(journal, None, 0)
}

/// [`recover_state`] with the configured `affinity.max_groups` and `ttl_ms` bounding the
/// bindings replayed (`None`: the defaults), each of the config's `clients` keeping its share.
pub fn recover_state_with(
    journal: &dyn Journal,
    affinity_limits: Option<(usize, u64)>,
    clients: usize,
) -> (RouterState, RecoveryReport) {
    let recovery = recover_versioned(journal, snapshot::decode);
    let mut report = RecoveryReport {
        snapshot_seq: recovery.snapshot_seq,
        damaged: recovery.damages.clone(),
        ..RecoveryReport::default()
    };
    let tail = recovery.tail(journal);
    let mut state = recovery.state.unwrap_or_default();
    state.affinity_limits = crate::policy::router_state::AffinityLimits(affinity_limits, clients);
    for item in tail {
        match item {
            Ok(envelope) => {
                state.apply_envelope(&envelope);
                report.events_replayed += 1;
            }
            Err(damage) => report.damaged.push(damage),
        }
    }
    report.last_seq = state.last_seq;
    (state, report)
}

/// A page of every combo's conversation bindings: `(combo, digest, binding)` in that order,
/// and how many groups match in all.
#[derive(Debug, Clone, Default)]
pub struct AffinityPageAll {
    pub matching: usize,
    pub groups: Vec<(
        String,
        u64,
        crate::policy::affinity_bindings::AffinityBinding,
    )>,
}

struct RouterInner {
    registry: Arc<Registry>,
    supervisor: ActorRef<SupervisorMsg>,
    recorder: Recorder,
    journal: JournalHandle,
    clock: SharedClock,
    started_at_ms: u64,
    recovery: RecoveryReport,
    /// Which request events reach the journal (`journal.request_events`).
    request_events: RequestEvents,
    /// Stored-response placement as requests read it: written here before the response reaches its
    /// client (so a follow-up finds it at once), journaled through the recorder.
    responses: Mutex<ResponseBindings>,
    /// The APIs providers' hosts were found not to serve (behaviour §14), as every try reads
    /// them; journaled through the recorder.
    unserved_apis: RwLock<UnservedApis>,
    /// Whether `unserved_apis` ever held an entry: until it has, every try's question is
    /// answered without its lock.
    any_unserved_apis: AtomicBool,
}

/// A running router. Cheap to clone.
#[derive(Clone)]
pub struct Router {
    inner: Arc<RouterInner>,
}

impl Router {
    /// Replays `journal`, then starts the actors on `topology`. Nothing is served before the
    /// replay is complete.
    pub async fn start(
        topology: Topology,
        journal: Box<dyn Journal>,
        options: RouterOptions,
    ) -> Result<Router, RouterError> {
        Self::start_with_tap(topology, journal, options, None).await
    }

    /// [`Router::start`] with an observer of every journaled event (a cluster node's sharing).
    pub async fn start_with_tap(
        topology: Topology,
        journal: Box<dyn Journal>,
        options: RouterOptions,
        tap: Option<Arc<dyn EventTap>>,
    ) -> Result<Router, RouterError> {
        let affinity = topology.affinity;
        let (mut state, recovery) = recover_state_with(
            journal.as_ref(),
            Some((affinity.max_groups, affinity.ttl_ms)),
            topology.clients,
        );
        // The shares the live combos keep (behaviour §11), which the journal's binds alone do
        // not say.
        crate::policy::affinity_bindings::trim_to_shares(
            state.affinity.values_mut(),
            crate::policy::affinity_bindings::share_of(affinity.max_groups, topology.clients),
        );
        // Refused before the writer exists: nothing of this build reaches the journal.
        if let Some(newer) = recovery.newer() {
            return Err(RouterError::NewerJournal(format!(
                "{} at seq {}",
                newer.reason, newer.seq
            )));
        }
        let mut responses = state.responses.clone();
        responses.set_clients(topology.clients);
        let responses = Mutex::new(responses);
        let any_unserved_apis = AtomicBool::new(!state.unserved_apis.is_empty());
        let unserved_apis = RwLock::new(state.unserved_apis.clone());
        let handle = JournalHandle::spawn(journal, options.writer).map_err(RouterError::Journal)?;
        let clock = options.clock;
        let now_ms = clock.now_ms();
        let generation = state.next_generation();
        let recorder = Recorder::new(RecorderArgs {
            journal: handle.clone(),
            state: state.clone(),
            snapshot_every_events: options.snapshot_every_events,
            request_events: options.request_events,
            tap,
        });
        let started = [
            (
                now_ms,
                Event::NodeStarted(NodeStarted {
                    version: env!("CARGO_PKG_VERSION").to_string(),
                    pid: std::process::id(),
                    recovered_seq: recovery.last_seq,
                }),
            ),
            (
                now_ms,
                Event::ConfigLoaded(topology.config_loaded(generation)),
            ),
        ];
        let rule = topology
            .pacing_rule(generation)
            .map(|rule| (now_ms, Event::PacingRule(rule)));
        recorder.record(started.into_iter().chain(rule));
        let registry = Arc::new(Registry::default());
        registry.groups.set_clients(topology.clients);
        let (supervisor, _) = Actor::spawn(
            None,
            RouterSupervisor,
            SupervisorArgs {
                topology,
                generation,
                state,
                registry: registry.clone(),
                recorder: recorder.clone(),
                clock: clock.clone(),
            },
        )
        .await
        .map_err(|e| RouterError::Actor(e.to_string()))?;
        Ok(Router {
            inner: Arc::new(RouterInner {
                registry,
                supervisor,
                recorder,
                journal: handle,
                clock,
                started_at_ms: now_ms,
                recovery,
                request_events: options.request_events,
                responses,
                unserved_apis,
                any_unserved_apis,
            }),
        })
    }

    /// Whether every request event reaches the journal (`journal.request_events = "all"`):
    /// then a success's own event can carry what the node would otherwise journal beside it.
    pub fn journals_every_request_event(&self) -> bool {
        self.inner.request_events == RequestEvents::All
    }

    /// What the start recovered from the journal.
    pub fn recovery(&self) -> &RecoveryReport {
        &self.inner.recovery
    }

    pub fn clock(&self) -> &SharedClock {
        &self.inner.clock
    }

    /// The running topology.
    pub fn topology(&self) -> Option<Topology> {
        self.inner.registry.load().topology.as_ref().clone()
    }

    /// `read` over the running topology, without copying it (for the request path).
    pub fn with_topology<R>(&self, read: impl FnOnce(&Topology) -> R) -> Option<R> {
        let tables = self.inner.registry.load();
        tables.topology.as_ref().as_ref().map(read)
    }

    async fn combo_for(&self, model: &str) -> Result<ActorRef<ComboMsg>, RouteError> {
        let tables = self.inner.registry.load();
        if let Some(combo) = tables.combos.get(model) {
            // Only `provider/model` names are implicit (combo names hold no `/`).
            if let Some(used) = model
                .contains('/')
                .then(|| tables.implicit_used.get(model))
                .flatten()
            {
                used.store(self.inner.registry.tick(), Ordering::Relaxed);
            }
            return Ok(combo.clone());
        }
        drop(tables);
        let ensured = ractor::call_t!(
            self.inner.supervisor,
            SupervisorMsg::EnsureCombo,
            ROUTE_CALL_TIMEOUT_MS,
            model.to_string()
        )
        .map_err(|e| RouteError::Unavailable(e.to_string()))?;
        ensured.ok_or_else(|| RouteError::UnknownModel(model.to_string()))
    }

    /// One routing decision: one `call` to the combo actor. With `hold_ms` on the combo, waits
    /// for the earliest unblock when it is that close instead of failing.
    pub async fn route(&self, request: RouteRequest) -> Result<Decision, RouteError> {
        let combo = self.combo_for(&request.model).await?;
        // When the hold began: read at the first queued or unroutable answer, not on every
        // route (the call before it lasts microseconds).
        let mut held_since_ms = None;
        let mut queue_wait_ms = 0;
        loop {
            let mut reply = ractor::call_t!(
                combo,
                ComboMsg::Route,
                ROUTE_CALL_TIMEOUT_MS,
                request.clone()
            )
            .map_err(|e| RouteError::Unavailable(e.to_string()))?;
            if let RouteReply::Queued(queued) = reply {
                let since_ms = self.inner.clock.now_ms();
                held_since_ms.get_or_insert(since_ms);
                reply = self.wait_queued(&combo, queued).await?;
                queue_wait_ms += self.inner.clock.now_ms().saturating_sub(since_ms);
            }
            match reply {
                RouteReply::Routed(routed) => {
                    return Ok(Decision::new(
                        request.request_id,
                        request.model,
                        routed.targets,
                        routed.order,
                        routed.position,
                        routed.permit,
                        routed.skipped,
                        (routed.max_attempts, routed.max_upstream_requests),
                        combo,
                        self.inner.registry.clone(),
                        self.inner.clock.clone(),
                        routed.decided_at_ms,
                    )
                    .with_queue_wait_ms(queue_wait_ms)
                    .with_affinity(routed.affinity)
                    .with_group(routed.group)
                    .with_client(request.client.id))
                }
                RouteReply::PoolBusy(busy) => {
                    return Err(RouteError::PoolBusy {
                        waited_ms: busy.waited_ms,
                        retry_after_ms: busy.retry_after_ms,
                    })
                }
                RouteReply::Queued(_) => {
                    return Err(RouteError::Unavailable(
                        "a queued request was queued again".into(),
                    ))
                }
                RouteReply::NoTargetForFormat => {
                    return Err(RouteError::WrongFormat(request.model.to_string()))
                }
                RouteReply::NoTargetOnConnection => {
                    return Err(RouteError::NotOnConnection {
                        model: request.model.to_string(),
                        connection: request.only_connection.unwrap_or_default(),
                    })
                }
                RouteReply::Unroutable(unroutable) => {
                    let now_ms = self.inner.clock.now_ms();
                    let waited_ms = now_ms.saturating_sub(*held_since_ms.get_or_insert(now_ms));
                    match hold_wait_ms(&unroutable, waited_ms) {
                        Some(wait_ms) => self.inner.clock.sleep_ms(wait_ms).await,
                        None => return Err(RouteError::NoTarget(unroutable)),
                    }
                }
            }
        }
    }

    /// Waits for a queued request's answer (behaviour §11). Dropping this future — the client
    /// went away — tells the combo at once, so the waiter leaves the queue and no permit is
    /// granted to it; the combo answers by `queue_ms` itself, the timer here is only a
    /// backstop against a combo that stopped.
    async fn wait_queued(
        &self,
        combo: &ActorRef<ComboMsg>,
        queued: QueuedRoute,
    ) -> Result<RouteReply, RouteError> {
        struct LeaveOnDrop<'a> {
            combo: &'a ActorRef<ComboMsg>,
            ticket: Option<Ticket>,
        }
        impl Drop for LeaveOnDrop<'_> {
            fn drop(&mut self) {
                if let Some(ticket) = self.ticket.take() {
                    let _ = self.combo.cast(ComboMsg::CancelQueued(ticket));
                }
            }
        }
        let mut guard = LeaveOnDrop {
            combo,
            ticket: Some(queued.ticket),
        };
        let backstop_ms = queued.queue_ms.saturating_add(ROUTE_CALL_TIMEOUT_MS);
        let answer = tokio::select! {
            answer = queued.answer => answer,
            () = self.inner.clock.sleep_ms(backstop_ms) => {
                return Err(RouteError::Unavailable("the combo did not answer a queued request".into()));
            }
        };
        match answer {
            Ok(reply) => {
                guard.ticket = None;
                Ok(reply)
            }
            Err(_) => Err(RouteError::Unavailable(
                "the combo dropped a queued request".into(),
            )),
        }
    }

    /// Requests waiting in each combo's queue, per client (behaviour §11): the one place the
    /// `queued` of `/admin/clients` and the `quotaroute_queued` gauge read. Combos with nobody
    /// waiting are left out.
    pub async fn queued(&self) -> Vec<QueuedCount> {
        let combos: Vec<(String, ActorRef<ComboMsg>)> = self
            .inner
            .registry
            .load()
            .combos
            .iter()
            .map(|(name, actor)| (name.clone(), actor.clone()))
            .collect();
        let mut counts = Vec::new();
        for (combo, actor) in combos {
            let Ok(by_client) = ractor::call_t!(actor, ComboMsg::Queued, ADMIN_CALL_TIMEOUT_MS)
            else {
                continue;
            };
            counts.extend(by_client.into_iter().map(|(client, queued)| QueuedCount {
                combo: combo.clone(),
                client: client.to_string(),
                queued,
            }));
        }
        counts.sort_by(|a, b| (&a.combo, &a.client).cmp(&(&b.combo, &b.client)));
        counts
    }

    /// The journal's fold: everything learned, as replay would rebuild it. A whole copy (every
    /// conversation group): for tests and comparisons, never a path a client can drive.
    pub async fn folded_state(&self) -> Result<RouterState, RouterError> {
        Ok(self.inner.recorder.state())
    }

    /// How far the cluster's shared stream was read (what a cluster node resumes from).
    pub fn peer_progress(&self) -> crate::policy::peer_progress::PeerProgress {
        self.inner.recorder.read(|state| state.peers.clone())
    }

    /// The longest of the active model locks on `connection` for `model` at now, in ms (`None`:
    /// not locked): a 429's own `Retry-After` (behaviour §7), read without the rest of the
    /// state.
    pub fn lock_remaining_ms(&self, connection: &str, model: &str) -> Option<u64> {
        let now_ms = self.inner.clock.now_ms();
        self.inner.recorder.read(|state| {
            state
                .connections
                .get(connection)
                .and_then(|learned| learned.lockouts.block_at(model, now_ms))
                .map(|(_, remaining_ms)| remaining_ms)
        })
    }

    /// How long reads of the fold held the recorder's lock, which every request's step
    /// takes too (issue 49: reads must not stall requests in proportion to the state).
    pub fn recorder_reads(&self) -> crate::recorder::RecorderReads {
        self.inner.recorder.reads()
    }

    /// The admin view of the state (contract `GET /admin/state`).
    pub async fn state(&self) -> Result<AdminState, RouterError> {
        self.state_at(self.inner.clock.now_ms()).await
    }

    /// The admin view for a person: [`state`](Self::state) with each window's newest upstream
    /// reading in place of the journaled one (the journal keeps a reading only when it matters
    /// to routing; a per-minute window's count moves on every response). Not for comparing two
    /// views: what it adds is not journaled and does not survive a restart.
    pub async fn state_live(&self) -> Result<AdminState, RouterError> {
        let mut view = self.state().await?;
        let now_ms = self.inner.clock.now_ms();
        let tables = self.inner.registry.load();
        for connection in &mut view.connections {
            let Some(actor) = tables.connections.get(&connection.id) else {
                continue;
            };
            let Ok(latest) =
                ractor::call_t!(actor, ConnectionMsg::LatestReadings, ADMIN_CALL_TIMEOUT_MS)
            else {
                continue;
            };
            let settings = tables
                .topology
                .as_ref()
                .as_ref()
                .and_then(|topology| topology.connection(&connection.id))
                .map(|spec| spec.buckets.clone())
                .unwrap_or_default();
            crate::admin_state::overlay_readings(connection, &latest, &settings, now_ms);
        }
        Ok(view)
    }

    /// The admin view as it will read at `at_ms` (not before now) if nothing else happens:
    /// remaining times counted down, expired blocks gone. Two views at one instant compare
    /// exactly — how an upgrade proves it kept the state (behaviour §12).
    pub async fn state_at(&self, at_ms: u64) -> Result<AdminState, RouterError> {
        let at_ms = at_ms.max(self.inner.clock.now_ms());
        // Everything the view shows, without the conversation groups it does not show.
        let folded = self
            .inner
            .recorder
            .read(|state| state.copy_without_traffic_tables(|_| false));
        let tables = self.inner.registry.load();
        let topology = tables
            .topology
            .as_ref()
            .clone()
            .unwrap_or_else(empty_topology);
        Ok(AdminState::build(
            &topology,
            &folded,
            &tables.in_flight,
            at_ms,
        ))
    }

    /// Every one of `targets` (connection, model) blocked now, as behaviour §7 lists them;
    /// `None` when a request would try one of them (`policy::target_block`, on the same fold
    /// as [`state`](Self::state)).
    pub fn all_blocked(&self, targets: &[(&str, &str)]) -> Option<Vec<Skipped>> {
        let tables = self.inner.registry.load();
        let topology = tables.topology.as_ref().as_ref()?;
        let now_ms = self.inner.clock.now_ms();
        self.inner.recorder.read(|folded| {
            crate::policy::target_block::all_blocked(
                folded,
                topology,
                targets.iter().copied(),
                now_ms,
            )
        })
    }

    /// Records that `bound.response_id` lives on `bound.connection` (journaled).
    pub fn bind_response(&self, bound: ResponseBound) {
        let now_ms = self.inner.clock.now_ms();
        if let Ok(mut responses) = self.inner.responses.lock() {
            responses.apply(now_ms, &bound);
        }
        self.inner
            .recorder
            .record_one(now_ms, Event::ResponseBound(bound));
    }

    /// Journals a change of the node's response store (behaviour §14: `response_stored`,
    /// `response_deleted`): metadata only, never the content. Other events are not taken.
    pub fn record_response_store(&self, event: Event) {
        if matches!(event, Event::ResponseStored(_) | Event::ResponseDeleted(_)) {
            let now_ms = self.inner.clock.now_ms();
            self.inner.recorder.record_one(now_ms, event);
        }
    }

    /// Learns that `unserved.provider`'s hosts do not serve `unserved.api` (behaviour §14: a
    /// 404 saying the route does not exist); journaled once, not again while it is known.
    /// Returns whether it was news.
    pub fn learn_api_unserved(&self, unserved: ApiUnserved) -> bool {
        let now_ms = self.inner.clock.now_ms();
        let Ok(mut learned) = self.inner.unserved_apis.write() else {
            return false;
        };
        if learned.lacks(&unserved.provider, &unserved.api, now_ms) {
            return false;
        }
        learned.apply(now_ms, &unserved);
        self.inner.any_unserved_apis.store(true, Ordering::Release);
        drop(learned);
        self.inner
            .recorder
            .record_one(now_ms, Event::ApiUnserved(unserved));
        true
    }

    /// Whether `provider`'s hosts are known not to serve the generation API `api` now.
    pub fn api_unserved(&self, provider: &str, api: &str) -> bool {
        if !self.inner.any_unserved_apis.load(Ordering::Acquire) {
            return false;
        }
        let Ok(learned) = self.inner.unserved_apis.read() else {
            return false;
        };
        !learned.is_empty() && learned.lacks(provider, api, self.inner.clock.now_ms())
    }

    /// The config now names `clients` clients: the shared tables' per-client shares follow.
    fn set_clients(&self, clients: usize) {
        self.inner.registry.groups.set_clients(clients);
        if let Ok(mut responses) = self.inner.responses.lock() {
            responses.set_clients(clients);
        }
    }

    /// Where the stored response `response_id` lives, if this router created it.
    pub fn response_binding(&self, response_id: &str) -> Option<ResponseBinding> {
        let now_ms = self.inner.clock.now_ms();
        let responses = self.inner.responses.lock().ok()?;
        responses.get(response_id, now_ms).cloned()
    }

    /// Journals a credential event of the node (`credential_refreshed`, `credential_failed`)
    /// that happened at `at_ms`; other kinds are not the node's to record and are ignored.
    pub fn record_credential(&self, at_ms: u64, event: Event) {
        if matches!(
            event,
            Event::CredentialRefreshed(_) | Event::CredentialFailed(_)
        ) {
            self.inner.recorder.record_one(at_ms, event);
        }
    }

    /// Journals a client event of the node (`client_usage`, `client_limited`, behaviour §11)
    /// that happened at `at_ms`; other kinds are not the node's to record and are ignored.
    pub fn record_client(&self, at_ms: u64, event: Event) {
        if matches!(event, Event::ClientUsage(_) | Event::ClientLimited(_)) {
            // One per answered request: no one-element Vec to allocate and free.
            self.inner.recorder.record_one(at_ms, event);
        }
    }

    /// Journals a window the node primed (behaviour §13) at `at_ms`.
    pub fn record_prime(&self, at_ms: u64, primed: quotaroute_journal::WindowPrimed) {
        self.inner
            .recorder
            .record_one(at_ms, Event::WindowPrimed(primed));
    }

    fn record_admin(&self, action: &str, target: &str) {
        self.inner.recorder.record_one(
            self.inner.clock.now_ms(),
            Event::AdminAction(AdminAction {
                action: action.to_string(),
                target: target.to_string(),
                by: "admin".to_string(),
            }),
        );
    }

    /// Journals an admin's reset of a client's spend and windows (behaviour §11; the node's
    /// client ledger did it and folds the event back in on restart).
    pub fn record_client_reset(&self, client: &str) {
        self.record_admin(CLIENT_RESET_ACTION, client);
    }

    /// Clears one model lockout; `Ok(false)` when there was none.
    pub async fn clear_lockout(&self, connection: &str, model: &str) -> Result<bool, RouterError> {
        let actor = self.connection_actor(connection)?;
        self.record_admin("clear_lockout", &exec_key(connection, model));
        ractor::call_t!(
            actor,
            ConnectionMsg::ClearLockout,
            ADMIN_CALL_TIMEOUT_MS,
            model.to_string()
        )
        .map_err(|e| RouterError::Actor(e.to_string()))
    }

    /// Clears a connection's cooldown and disabled state.
    pub async fn clear_connection(&self, connection: &str) -> Result<bool, RouterError> {
        let actor = self.connection_actor(connection)?;
        self.record_admin("clear_connection", connection);
        ractor::call_t!(
            actor,
            |reply| ConnectionMsg::Clear(ActionBy::Admin, Some(reply)),
            ADMIN_CALL_TIMEOUT_MS
        )
        .map_err(|e| RouterError::Actor(e.to_string()))
    }

    /// Forgets the window readings a connection learned from upstream headers; how many.
    pub async fn clear_readings(&self, connection: &str) -> Result<usize, RouterError> {
        let actor = self.connection_actor(connection)?;
        self.record_admin("clear_readings", connection);
        ractor::call_t!(actor, ConnectionMsg::ClearReadings, ADMIN_CALL_TIMEOUT_MS)
            .map_err(|e| RouterError::Actor(e.to_string()))
    }

    /// Closes a provider's breaker.
    pub async fn reset_breaker(&self, provider: &str) -> Result<bool, RouterError> {
        let actor = self.breaker_actor(provider)?;
        self.record_admin("reset_breaker", provider);
        ractor::call_t!(actor, BreakerMsg::Reset, ADMIN_CALL_TIMEOUT_MS)
            .map_err(|e| RouterError::Actor(e.to_string()))
    }

    /// A pushed usage reading (`used_pct` 0–100) for a window `5h`, `7d` or `7d:<model>`.
    pub async fn push_usage(
        &self,
        connection: &str,
        window: &str,
        used_pct: f64,
        resets_at_ms: Option<u64>,
    ) -> Result<(), RouterError> {
        let actor = self.connection_actor(connection)?;
        let provider = self
            .topology()
            .and_then(|t| t.connection(connection).map(|c| c.provider.clone()))
            .unwrap_or_default();
        self.record_admin("push_usage", connection);
        let reading = UsageObserved {
            provider,
            connection: connection.to_string(),
            window: window.to_string(),
            used: (used_pct.clamp(0.0, 100.0) * 100.0).round() as u64,
            limit: 10_000,
            resets_at_ms,
            source: UsageSource::Push,
        };
        ractor::call_t!(
            actor,
            ConnectionMsg::PushUsage,
            ADMIN_CALL_TIMEOUT_MS,
            reading
        )
        .map_err(|e| RouterError::Actor(e.to_string()))
    }

    /// A peer node's event (behaviour §9), handed to its connection's actor: applied there
    /// through the same reducers as a local one (unless it would shorten a longer block) and
    /// journaled as `peer_applied` with its origin. Fire-and-forget; an event about a
    /// connection this node does not have is refused with `UnknownConnection`. A conversation
    /// binding goes to its combo instead (`UnknownCombo` when this node has none of that name).
    pub fn apply_peer(&self, applied: PeerApplied) -> Result<(), RouterError> {
        if let quotaroute_journal::Event::AffinityBound(bound) = &*applied.event {
            // A conversation binding belongs to its combo (behaviour §10).
            let combo = self
                .inner
                .registry
                .load()
                .combos
                .get(&bound.combo)
                .cloned()
                .ok_or_else(|| RouterError::UnknownCombo(bound.combo.clone()))?;
            return combo
                .cast(ComboMsg::PeerBinding(Box::new(applied)))
                .map_err(|e| RouterError::Actor(e.to_string()));
        }
        let connection = applied.event.connection().unwrap_or_default().to_string();
        let actor = self.connection_actor(&connection)?;
        actor
            .cast(ConnectionMsg::Peer(Box::new(applied)))
            .map_err(|e| RouterError::Actor(e.to_string()))
    }

    /// A node-local usage reading (a cluster lease granted or refused), applied and journaled
    /// like a pushed one but never shared with peers.
    pub async fn observe_usage(&self, reading: UsageObserved) -> Result<(), RouterError> {
        let actor = self.connection_actor(&reading.connection)?;
        ractor::call_t!(
            actor,
            ConnectionMsg::PushUsage,
            ADMIN_CALL_TIMEOUT_MS,
            reading
        )
        .map_err(|e| RouterError::Actor(e.to_string()))
    }

    /// Applies a new topology, keeping what was learned about connections that remain.
    pub async fn reload(&self, topology: Topology) -> Result<(), RouterError> {
        self.record_admin("reload", &topology.source);
        self.set_clients(topology.clients);
        ractor::call_t!(
            self.inner.supervisor,
            SupervisorMsg::Reload,
            JOURNAL_CALL_TIMEOUT_MS,
            Box::new(topology)
        )
        .map_err(|e| RouterError::Actor(e.to_string()))
    }

    fn breaker_actor(&self, provider: &str) -> Result<ActorRef<BreakerMsg>, RouterError> {
        self.inner
            .registry
            .load()
            .breakers
            .get(provider)
            .cloned()
            .ok_or_else(|| RouterError::UnknownProvider(provider.to_string()))
    }

    fn connection_actor(&self, connection: &str) -> Result<ActorRef<ConnectionMsg>, RouterError> {
        self.inner
            .registry
            .load()
            .connections
            .get(connection)
            .cloned()
            .ok_or_else(|| RouterError::UnknownConnection(connection.to_string()))
    }

    /// Waits until everything recorded so far is on disk; returns the durable seq.
    pub async fn flush(&self) -> Result<u64, RouterError> {
        self.inner
            .recorder
            .flush()
            .await
            .map_err(|e| RouterError::Flush(e.to_string()))
    }

    pub fn journal_stats(&self) -> JournalStats {
        self.inner.journal.stats()
    }

    /// Waits until every report sent before this call has been applied by its connection and
    /// breaker actors and their changes have reached the combos. Reports stay fire-and-forget;
    /// this is for tests, the demo and orderly shutdown.
    pub async fn settle(&self) -> Result<(), RouterError> {
        let tables = self.inner.registry.load_full();
        for actor in tables.breakers.values() {
            ractor::call_t!(actor, BreakerMsg::Ping, ADMIN_CALL_TIMEOUT_MS)
                .map_err(|e| RouterError::Actor(e.to_string()))?;
        }
        for actor in tables.connections.values() {
            ractor::call_t!(actor, ConnectionMsg::Ping, ADMIN_CALL_TIMEOUT_MS)
                .map_err(|e| RouterError::Actor(e.to_string()))?;
        }
        for actor in tables.combos.values() {
            ractor::call_t!(actor, ComboMsg::Deficits, ADMIN_CALL_TIMEOUT_MS)
                .map_err(|e| RouterError::Actor(e.to_string()))?;
        }
        Ok(())
    }

    /// Every combo's live conversation bindings (behaviour §10), by combo name.
    pub async fn affinity_bindings(
        &self,
    ) -> Result<Vec<(String, crate::policy::affinity_bindings::AffinityBindings)>, RouterError>
    {
        let tables = self.inner.registry.load_full();
        let mut all = Vec::with_capacity(tables.combos.len());
        for (name, actor) in tables.combos.iter() {
            let bindings = ractor::call_t!(actor, ComboMsg::Affinity, ADMIN_CALL_TIMEOUT_MS)
                .map_err(|e| RouterError::Actor(e.to_string()))?;
            all.push((name.clone(), bindings));
        }
        all.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(all)
    }

    /// One page of the live conversation bindings of every combo (behaviour §10, `GET
    /// /admin/affinity`), ordered by (combo, digest): the groups after `after` (a combo and a
    /// digest), at most `query.limit`, and how many match in all. Each combo scans its own
    /// table and copies only its part of the page.
    pub async fn affinity_page(
        &self,
        after: Option<(String, u64)>,
        query: crate::actor::messages::AffinityPageQuery,
    ) -> Result<AffinityPageAll, RouterError> {
        let tables = self.inner.registry.load_full();
        let mut combos: Vec<(&String, &ActorRef<ComboMsg>)> = tables.combos.iter().collect();
        combos.sort_by(|a, b| a.0.cmp(b.0));
        let mut all = AffinityPageAll::default();
        for (name, actor) in combos {
            let left = query.limit.saturating_sub(all.groups.len());
            let (skip_to, limit) = match &after {
                Some((combo, _)) if name < combo => (None, 0),
                Some((combo, digest)) if name == combo => (Some(*digest), left),
                _ => (None, left),
            };
            let page = ractor::call_t!(
                actor,
                ComboMsg::AffinityPage,
                ADMIN_CALL_TIMEOUT_MS,
                crate::actor::messages::AffinityPageQuery {
                    after: skip_to,
                    limit,
                    ..query.clone()
                }
            )
            .map_err(|e| RouterError::Actor(e.to_string()))?;
            all.matching += page.matching;
            all.groups
                .extend(page.groups.into_iter().map(|(g, b)| (name.clone(), g, b)));
        }
        Ok(all)
    }

    /// The live DRR deficits of a combo (from its actor, not the journal's fold).
    pub async fn combo_deficits(
        &self,
        combo: &str,
    ) -> Result<crate::policy::drr::DrrDeficits, RouterError> {
        let actor = self
            .inner
            .registry
            .load()
            .combos
            .get(combo)
            .cloned()
            .ok_or_else(|| RouterError::Actor(format!("no combo `{combo}`")))?;
        ractor::call_t!(actor, ComboMsg::Deficits, ADMIN_CALL_TIMEOUT_MS)
            .map_err(|e| RouterError::Actor(e.to_string()))
    }

    /// A connection actor's own live state.
    pub async fn live_connection_state(
        &self,
        connection: &str,
    ) -> Result<crate::policy::connection_state::ConnectionState, RouterError> {
        let actor = self.connection_actor(connection)?;
        ractor::call_t!(actor, ConnectionMsg::State, ADMIN_CALL_TIMEOUT_MS)
            .map_err(|e| RouterError::Actor(e.to_string()))
    }

    /// A breaker actor's own live state.
    pub async fn live_breaker_state(
        &self,
        provider: &str,
    ) -> Result<crate::policy::breaker::BreakerState, RouterError> {
        let actor = self.breaker_actor(provider)?;
        ractor::call_t!(actor, BreakerMsg::State, ADMIN_CALL_TIMEOUT_MS)
            .map_err(|e| RouterError::Actor(e.to_string()))
    }

    /// Test hook: makes one connection actor fail, to exercise supervision.
    #[doc(hidden)]
    pub fn crash_connection(&self, connection: &str) -> Result<(), RouterError> {
        let actor = self.connection_actor(connection)?;
        actor
            .cast(ConnectionMsg::Crash)
            .map_err(|e| RouterError::Actor(e.to_string()))
    }

    /// Records `node_stopped`, stops the actors and closes the journal (flushing everything).
    pub async fn shutdown(self, reason: &str) -> Result<(), RouterError> {
        // Reports already sent (fire-and-forget) reach the journal before `node_stopped`, so
        // the journal of a clean stop ends with it.
        let _ = self.settle().await;
        let now_ms = self.inner.clock.now_ms();
        self.inner.recorder.record_one(
            now_ms,
            Event::NodeStopped(NodeStopped {
                reason: reason.to_string(),
                uptime_ms: now_ms.saturating_sub(self.inner.started_at_ms),
            }),
        );
        self.flush().await?;
        self.inner.supervisor.stop(None);
        // Close, not just flush: the writer thread ends and lets go of the journal's storage.
        self.inner
            .journal
            .clone()
            .close()
            .await
            .map_err(|e| RouterError::Flush(e.to_string()))?;
        Ok(())
    }
}

fn empty_topology() -> Topology {
    Topology::new(Vec::new(), Vec::new(), Vec::new(), "", "")
}
