//! The messages the combo, connection and breaker actors take, and the data they carry: one
//! module both the actors and the registry (which holds their refs) depend on, so the actor
//! files never import each other.

use std::collections::HashMap;
use std::sync::Arc;

use quotaroute_journal::{
    ActionBy, AffinityOutcome, ApiFormat, PeerApplied, Skipped, UsageObserved,
};
use ractor::{ActorRef, RpcReplyPort};

use crate::permit::{InFlight, Permit};
use crate::policy::affinity::AffinitySettings;
use crate::policy::affinity_bindings::AffinityBindings;
use crate::policy::breaker::{BreakerSettings, BreakerState};
use crate::policy::connection_state::ConnectionState;
use crate::policy::drr::DrrDeficits;
use crate::policy::fair_queue::Ticket;
use crate::policy::outcome::Outcome;
use crate::policy::quota_share::DrrKeys;
use crate::policy::request::Unroutable;
pub use crate::policy::selection::{AffinityKey, RoutedTarget};
use crate::policy::topology::{ComboSpec, ConnectionSpec};
use crate::view::ConnectionView;

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
    /// `spec.name`, shared by every decision's record instead of copied into each.
    pub name: Arc<str>,
    /// The spec's targets as the DRR turn keys them (config order), resolved once; replay
    /// resolves the same table from the journal's `config_loaded`.
    pub keys: DrrKeys,
    pub generation: u64,
    pub targets: Vec<TargetRuntime>,
    pub breaker_settings: HashMap<String, BreakerSettings>,
    /// `[affinity]` (behaviour §10).
    pub affinity: AffinitySettings,
}

/// What a request asks of a combo.
#[derive(Debug, Clone)]
pub struct RouteRequest {
    /// Shared with the handler, the decision and every record of the request: cloning the
    /// request (each routing call, a held request's next) copies no string.
    pub request_id: Arc<str>,
    /// The model name the client sent (the combo name or `provider/model`).
    pub model: Arc<str>,
    /// The endpoint's format: targets of the other format are used only when the request
    /// is `translatable` and the combo translates (behaviour §14).
    pub format: ApiFormat,
    /// Whether the endpoint can be served by a target of the other format (chat, responses,
    /// messages, count_tokens; never completions, embeddings or stored responses).
    pub translatable: bool,
    /// Providers whose targets cannot carry this request (behaviour §14: a parameter their
    /// API has no equivalent for): never chosen for it.
    pub cannot_carry: Vec<Arc<str>>,
    /// Only this connection's targets (stored-response placement: a stored response lives in the
    /// account that created it).
    pub only_connection: Option<String>,
    /// The connection that made the request's encrypted items (behaviour §10 "Encrypted
    /// items"): it goes first while it can serve (not hard-blocked, with room; no `max_lead`,
    /// no binding to keep), otherwise §2 among the rest (`affinity::place_hard`). With
    /// `queue_ms` a turn whose maker is at cap waits for it, and past `queue_ms` goes to the
    /// rest when they have room (behaviour §11).
    pub encrypted_maker: Option<String>,
    /// The request's conversation (behaviour §10), if it has one and no hard affinity.
    pub affinity: Option<AffinityKey>,
    /// Who sent it (behaviour §11): its share of a full pool.
    pub client: ClientTag,
}

/// The client a request belongs to, as routing sees it: its id (never its key) and weight.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientTag {
    pub id: Arc<str>,
    /// Share of a full pool when requests queue (behaviour §11), ≥ 1.
    pub weight: u32,
    /// The request's class (behaviour §13): a spare one is served only from quota forecast to
    /// be lost, waits behind every other class and binds no conversation group.
    pub class: crate::policy::clients::class::RequestClass,
}

impl ClientTag {
    /// `server.api_keys`' client, and every request's when no `[[clients]]` are configured.
    pub fn default_client() -> ClientTag {
        static DEFAULT: std::sync::LazyLock<Arc<str>> =
            std::sync::LazyLock::new(|| Arc::from("default"));
        ClientTag {
            id: DEFAULT.clone(),
            weight: 1,
            class: crate::policy::clients::class::RequestClass::Normal,
        }
    }
}

impl Default for ClientTag {
    fn default() -> Self {
        ClientTag::default_client()
    }
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
    /// How conversation affinity placed it (as its `route_decided` says).
    pub affinity: AffinityOutcome,
    /// The conversation the turn was placed for, if any: a failover that serves it elsewhere
    /// tells the combo (`ComboMsg::Served`), so the binding follows.
    pub group: Option<AffinityKey>,
    /// When the combo decided, by its clock: the first attempt starts then (one clock read
    /// for both).
    pub decided_at_ms: u64,
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
    /// Every target is at cap and the combo queues (behaviour §11): the decision comes on
    /// `answer` (a `Routed`, or `PoolBusy` at `queue_ms`). Dropping `answer` leaves the
    /// queue; send `CancelQueued(ticket)` to leave it at once.
    Queued(QueuedRoute),
    /// The queue is full, or the request waited `queue_ms` without a permit.
    PoolBusy(PoolBusy),
}

/// A request waiting in a combo's queue.
#[derive(Debug)]
pub struct QueuedRoute {
    pub ticket: Ticket,
    pub answer: tokio::sync::oneshot::Receiver<RouteReply>,
    /// The combo's `queue_ms` when it queued the request.
    pub queue_ms: u64,
}

/// Why a queued (or queue-refused) request got no permit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolBusy {
    /// How long it waited (0: refused at once because the queue was full).
    pub waited_ms: u64,
    /// When to try again (`Retry-After`).
    pub retry_after_ms: u64,
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

/// A group's turn served after a failover: by whom, for which request.
#[derive(Debug, Clone)]
pub struct ServedTurn {
    pub request_id: Arc<str>,
    pub key: AffinityKey,
    pub target: Arc<RoutedTarget>,
}

/// Which page of a combo's bindings `GET /admin/affinity` asks for.
#[derive(Debug, Clone)]
pub struct AffinityPageQuery {
    /// Groups with a digest past this one (`None`: from the first).
    pub after: Option<u64>,
    pub limit: usize,
    /// Only groups bound to this connection.
    pub connection: Option<String>,
    /// Only groups used within `ttl_ms` before `now_ms`.
    pub now_ms: u64,
    pub ttl_ms: u64,
}

/// How many groups of a combo match an [`AffinityPageQuery`], and the page asked for.
#[derive(Debug, Clone, Default)]
pub struct AffinityPage {
    pub matching: usize,
    pub groups: Vec<(u64, crate::policy::affinity_bindings::AffinityBinding)>,
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
    /// The combo's conversation bindings (for tests; copies the whole table).
    Affinity(RpcReplyPort<AffinityBindings>),
    /// One page of the combo's conversation bindings (for `GET /admin/affinity`).
    AffinityPage(AffinityPageQuery, RpcReplyPort<AffinityPage>),
    /// A waiter went away (its client disconnected): it leaves the queue.
    CancelQueued(Ticket),
    /// An in-flight slot of one of the combo's targets was released while requests wait.
    PermitReleased,
    /// The earliest queue deadline may have passed.
    QueueTick,
    /// Grant permits to waiters now (`GRANT_ROUND_MS` after a release or a change).
    GrantRound,
    /// Requests waiting now, per client (for `/admin/clients` and the `queued` gauge).
    Queued(RpcReplyPort<Vec<(Arc<str>, usize)>>),
    /// A turn of a group was served by `target` after failing over inside its request
    /// (behaviour §10): the group's binding follows it there.
    Served(Box<ServedTurn>),
    /// A peer's conversation binding (`affinity_bound` in `peer_applied`, behaviour §10).
    PeerBinding(Box<PeerApplied>),
    /// Test hook: make the actor fail, to exercise supervision.
    Crash,
}

/// One outcome as the breaker sees it (built by `BreakerSignal::of`).
pub use crate::policy::settled_attempt::BreakerSignal;

/// Messages to a breaker actor.
pub enum BreakerMsg {
    /// An attempt's signal; the reply port (if any) is answered once its effect has been
    /// pushed to the combos (read-your-writes, behaviour §3).
    Signal(BreakerSignal, Option<RpcReplyPort<()>>),
    /// A combo admitted a probe: record OPEN → HALF_OPEN if the reset has passed.
    ProbeAdmitted,
    /// Admin: close the breaker; replies whether it was not already closed.
    Reset(RpcReplyPort<bool>),
    SetSubscribers(Vec<ActorRef<ComboMsg>>),
    Subscribe(ActorRef<ComboMsg>),
    Reconfigure(BreakerSettings),
    /// The actor's own live state.
    State(RpcReplyPort<BreakerState>),
    /// Replies once everything queued before it has been handled (see `Router::settle`).
    Ping(RpcReplyPort<()>),
    /// Test hook: make the actor fail, to exercise supervision.
    Crash,
}

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
    /// Admin: forget the window readings learned from upstream headers (a saturated or spent
    /// window); replies how many there were.
    ClearReadings(RpcReplyPort<usize>),
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
    /// The upstream's newest header reading of each window, journaled or not (admin views).
    LatestReadings(RpcReplyPort<Vec<crate::policy::rate_limit_headers::UsageReading>>),
    /// Replies once everything queued before it has been handled (see `Router::settle`).
    Ping(RpcReplyPort<()>),
    /// Test hook: make the actor fail, to exercise supervision.
    Crash,
}
