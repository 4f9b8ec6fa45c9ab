//! The event schema: every fact the router journals, and the envelope around it.
//!
//! This file owns the *shape* of what is stored; it never encodes (see `codec`) and never
//! decides (policy lives in `quotaroute-actors`). Rules that keep old journals readable:
//! - new event kinds are appended at the **end** of [`Event`] (bincode stores the variant index);
//! - a field is never added to, removed from or reordered in an existing struct without bumping
//!   [`SCHEMA_VERSION`] and teaching `codec` to upgrade the old shape;
//! - no `#[serde(tag)]`, `untagged`, `flatten` or `skip_serializing_if`: bincode cannot read them.
//!
//! No type here may hold a secret: events carry connection *ids*, never credentials, and upstream
//! messages only after the node has masked them.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// The version written into every envelope by this build.
/// 2: `route_decided.affinity`, `request_succeeded.tokens_cached` / `tokens_cache_write`
/// (schema 1 is read through `codec::legacy_v1`).
/// 3: `client` on `route_decided`, `request_succeeded` and `request_failed`;
/// `request_succeeded.cost_usd` (schema 2 is read through `codec::legacy_v2`).
/// 4: `translated` on `request_succeeded` and `request_failed`; `usage_estimated` and
/// `items_left_out` on `request_succeeded`; `client` on `response_bound`; `estimated` on
/// `client_usage`; `group` and `paces` on `route_decided` (schema 3 is read through
/// `codec::legacy_v3`).
/// 5: `period_spend_pusd` and `period_start_ms` on `request_succeeded`, which then carries its
/// client's charge instead of a `client_usage` of its own (schema 4 is read through
/// `codec::legacy_v4`).
pub const SCHEMA_VERSION: u16 = 5;

/// One journaled event: its position, when it happened (Unix milliseconds, the policy's `now`)
/// and what happened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Envelope {
    pub schema_version: u16,
    pub seq: u64,
    pub at_ms: u64,
    pub event: Event,
}

/// Every kind of event. Append new kinds at the end only.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Event {
    NodeStarted(NodeStarted),
    ConfigLoaded(ConfigLoaded),
    RequestSucceeded(RequestSucceeded),
    RequestFailed(RequestFailed),
    ConnectionCooldown(ConnectionCooldown),
    ConnectionDisabled(ConnectionDisabled),
    ConnectionCleared(ConnectionCleared),
    ModelLocked(ModelLocked),
    ModelUnlocked(ModelUnlocked),
    BreakerTransition(BreakerTransition),
    UsageObserved(UsageObserved),
    AdminAction(AdminAction),
    NodeStopped(NodeStopped),
    RouteDecided(RouteDecided),
    BreakerCounted(BreakerCounted),
    ResponseBound(ResponseBound),
    JournalRecovered(JournalRecovered),
    CredentialRefreshed(CredentialRefreshed),
    CredentialFailed(CredentialFailed),
    PeerApplied(PeerApplied),
    AffinityBound(AffinityBound),
    ClientUsage(ClientUsage),
    ClientLimited(ClientLimited),
    /// Appended after schema 5; needs no schema bump (a new kind at the end).
    ApiUnserved(ApiUnserved),
    /// Appended after `api_unserved`; needs no schema bump (a new kind at the end).
    PacingRule(PacingRule),
    /// Appended after `pacing_rule` (store52); needs no schema bump (new kinds at the end).
    ResponseStored(ResponseStored),
    ResponseDeleted(ResponseDeleted),
    /// Appended after `response_deleted` (prime54); needs no schema bump (a new kind at the end).
    WindowPrimed(WindowPrimed),
}

impl Event {
    /// The contract's name of this kind (`request_failed`, `model_locked`, …).
    pub fn kind(&self) -> &'static str {
        match self {
            Event::NodeStarted(_) => "node_started",
            Event::ConfigLoaded(_) => "config_loaded",
            Event::RequestSucceeded(_) => "request_succeeded",
            Event::RequestFailed(_) => "request_failed",
            Event::ConnectionCooldown(_) => "connection_cooldown",
            Event::ConnectionDisabled(_) => "connection_disabled",
            Event::ConnectionCleared(_) => "connection_cleared",
            Event::ModelLocked(_) => "model_locked",
            Event::ModelUnlocked(_) => "model_unlocked",
            Event::BreakerTransition(_) => "breaker_transition",
            Event::UsageObserved(_) => "usage_observed",
            Event::AdminAction(_) => "admin_action",
            Event::NodeStopped(_) => "node_stopped",
            Event::RouteDecided(_) => "route_decided",
            Event::BreakerCounted(_) => "breaker_counted",
            Event::ResponseBound(_) => "response_bound",
            Event::JournalRecovered(_) => "journal_recovered",
            Event::CredentialRefreshed(_) => "credential_refreshed",
            Event::CredentialFailed(_) => "credential_failed",
            Event::PeerApplied(_) => "peer_applied",
            Event::AffinityBound(_) => "affinity_bound",
            Event::ClientUsage(_) => "client_usage",
            Event::ClientLimited(_) => "client_limited",
            Event::ApiUnserved(_) => "api_unserved",
            Event::PacingRule(_) => "pacing_rule",
            Event::ResponseStored(_) => "response_stored",
            Event::ResponseDeleted(_) => "response_deleted",
            Event::WindowPrimed(_) => "window_primed",
        }
    }

    /// Every kind name, in variant order.
    pub const KINDS: [&'static str; 28] = [
        "node_started",
        "config_loaded",
        "request_succeeded",
        "request_failed",
        "connection_cooldown",
        "connection_disabled",
        "connection_cleared",
        "model_locked",
        "model_unlocked",
        "breaker_transition",
        "usage_observed",
        "admin_action",
        "node_stopped",
        "route_decided",
        "breaker_counted",
        "response_bound",
        "journal_recovered",
        "credential_refreshed",
        "credential_failed",
        "peer_applied",
        "affinity_bound",
        "client_usage",
        "client_limited",
        "api_unserved",
        "pacing_rule",
        "response_stored",
        "response_deleted",
        "window_primed",
    ];

    /// Request events may be dropped when the journal queue is full; state events never are.
    pub fn is_request_event(&self) -> bool {
        matches!(
            self,
            Event::RequestSucceeded(_) | Event::RequestFailed(_) | Event::RouteDecided(_)
        )
    }

    /// The client (behaviour §11) this event is about, if any (for `replay --client`).
    pub fn client(&self) -> Option<&str> {
        match self {
            Event::RequestSucceeded(e) => e.client.as_deref(),
            Event::RequestFailed(e) => e.client.as_deref(),
            Event::RouteDecided(e) => e.client.as_deref(),
            Event::AffinityBound(e) => Some(&e.client),
            Event::ClientUsage(e) => Some(&e.client),
            Event::ClientLimited(e) => Some(&e.client),
            Event::ResponseStored(e) => Some(&e.client),
            Event::ResponseDeleted(e) => Some(&e.client),
            Event::PeerApplied(e) => e.event.client(),
            _ => None,
        }
    }

    /// The provider this event is about, if any (for filters).
    pub fn provider(&self) -> Option<&str> {
        match self {
            Event::RequestSucceeded(e) => Some(&e.provider),
            Event::RequestFailed(e) => Some(&e.provider),
            Event::ConnectionCooldown(e) => Some(&e.provider),
            Event::ConnectionDisabled(e) => Some(&e.provider),
            Event::ConnectionCleared(e) => Some(&e.provider),
            Event::ModelLocked(e) => Some(&e.provider),
            Event::ModelUnlocked(e) => Some(&e.provider),
            Event::BreakerTransition(e) => Some(&e.provider),
            Event::UsageObserved(e) => Some(&e.provider),
            Event::BreakerCounted(e) => Some(&e.provider),
            Event::ResponseBound(e) => Some(&e.provider),
            Event::AffinityBound(e) => Some(&e.provider),
            Event::ClientUsage(e) => Some(&e.provider),
            Event::CredentialRefreshed(e) => Some(&e.provider),
            Event::CredentialFailed(e) => Some(&e.provider),
            Event::ApiUnserved(e) => Some(&e.provider),
            Event::WindowPrimed(e) => Some(&e.provider),
            Event::PeerApplied(e) => e.event.provider(),
            _ => None,
        }
    }

    /// The connection this event is about, if any (for filters).
    pub fn connection(&self) -> Option<&str> {
        match self {
            Event::RequestSucceeded(e) => Some(&e.connection),
            Event::RequestFailed(e) => Some(&e.connection),
            Event::ConnectionCooldown(e) => Some(&e.connection),
            Event::ConnectionDisabled(e) => Some(&e.connection),
            Event::ConnectionCleared(e) => Some(&e.connection),
            Event::ModelLocked(e) => Some(&e.connection),
            Event::ModelUnlocked(e) => Some(&e.connection),
            Event::UsageObserved(e) => Some(&e.connection),
            Event::BreakerCounted(e) => Some(&e.connection),
            Event::ResponseBound(e) => Some(&e.connection),
            Event::AffinityBound(e) => Some(&e.connection),
            Event::ClientUsage(e) => Some(&e.connection),
            Event::ApiUnserved(e) => Some(&e.connection),
            Event::ResponseStored(e) => Some(&e.connection),
            Event::WindowPrimed(e) => Some(&e.connection),
            Event::PeerApplied(e) => e.event.connection(),
            _ => None,
        }
    }

    /// The upstream model this event is about, if any (for filters).
    pub fn model(&self) -> Option<&str> {
        match self {
            Event::RequestSucceeded(e) => Some(&e.model),
            Event::RequestFailed(e) => Some(&e.model),
            Event::ModelLocked(e) => Some(&e.model),
            Event::ModelUnlocked(e) => Some(&e.model),
            Event::RouteDecided(e) => Some(&e.model),
            Event::ResponseBound(e) => Some(&e.model),
            Event::AffinityBound(e) => Some(&e.model),
            Event::ClientUsage(e) => Some(&e.model),
            Event::WindowPrimed(e) => Some(&e.model),
            Event::PeerApplied(e) => e.event.model(),
            _ => None,
        }
    }
}

/// How a connection authenticates; decides breaker and cooldown profiles.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AuthKind {
    ApiKey,
    Oauth,
}

/// Wire format a provider speaks. Stored by variant index: new formats are appended at the
/// end, so records written before them keep decoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApiFormat {
    Openai,
    Anthropic,
    /// Google's Gemini API (generateContent; behaviour §15).
    Gemini,
}

/// The class of one upstream result (behaviour §4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutcomeClass {
    Success,
    ModelUnavailable,
    ClientError,
    AuthFailed,
    Billing,
    QuotaExhausted,
    Forbidden,
    RateLimited,
    Timeout,
    ServerError,
    Network,
}

impl OutcomeClass {
    pub fn as_str(self) -> &'static str {
        match self {
            OutcomeClass::Success => "success",
            OutcomeClass::ModelUnavailable => "model_unavailable",
            OutcomeClass::ClientError => "client_error",
            OutcomeClass::AuthFailed => "auth_failed",
            OutcomeClass::Billing => "billing",
            OutcomeClass::QuotaExhausted => "quota_exhausted",
            OutcomeClass::Forbidden => "forbidden",
            OutcomeClass::RateLimited => "rate_limited",
            OutcomeClass::Timeout => "timeout",
            OutcomeClass::ServerError => "server_error",
            OutcomeClass::Network => "network",
        }
    }
}

/// Why a target could not be used (behaviour §7), also the `reason` of a `skipped` entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BlockReason {
    BreakerOpen,
    ProbeInFlight,
    Cooldown,
    DisabledAuth,
    DisabledBilling,
    RateLimited,
    NotFound,
    QuotaExhausted,
    /// A window within the owner's reserve (behaviour §13); schema 4.
    Reserved,
    /// The target's API cannot carry what the request uses (behaviour §14); appended last so
    /// the variants before it keep their bincode indexes.
    CannotCarry,
    /// spare54: a spare-class request and a target whose quota is not forecast to be lost
    /// (behaviour §13 "Spare quota only"); appended last (bincode index 10).
    NoSpare,
}

impl BlockReason {
    pub fn as_str(self) -> &'static str {
        match self {
            BlockReason::BreakerOpen => "breaker_open",
            BlockReason::ProbeInFlight => "probe_in_flight",
            BlockReason::Cooldown => "cooldown",
            BlockReason::DisabledAuth => "disabled_auth",
            BlockReason::DisabledBilling => "disabled_billing",
            BlockReason::RateLimited => "rate_limited",
            BlockReason::NotFound => "not_found",
            BlockReason::QuotaExhausted => "quota_exhausted",
            BlockReason::Reserved => "reserved",
            BlockReason::CannotCarry => "cannot_carry",
            BlockReason::NoSpare => "no_spare",
        }
    }
}

/// Why a (connection, model) is locked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LockReason {
    RateLimited,
    NotFound,
    QuotaExhausted,
}

impl LockReason {
    /// The contract's name, as the journal, `/admin/state`, `replay` and the dashboard show it.
    pub fn as_str(self) -> &'static str {
        match self {
            LockReason::RateLimited => "rate_limited",
            LockReason::NotFound => "not_found",
            LockReason::QuotaExhausted => "quota_exhausted",
        }
    }
}

/// Why a whole connection is disabled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DisableReason {
    /// 401 or a plain 403: until an operator clears it or the config reloads.
    Auth,
    /// 402 or `insufficient_quota`: for `billing_ms`, then probed.
    Billing,
}

impl DisableReason {
    /// The contract's name, as the journal, `/admin/state`, `replay` and the dashboard show it.
    pub fn as_str(self) -> &'static str {
        match self {
            DisableReason::Auth => "auth",
            DisableReason::Billing => "billing",
        }
    }
}

/// Where a lock's duration came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResetSource {
    /// An upstream header or body hint, used exactly (capped).
    Upstream,
    /// Exponential backoff from the failure count.
    Backoff,
    /// `lockout.quota_ms` doubling per failed probe.
    Quota,
}

/// Who caused a change that was not an upstream result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ActionBy {
    /// The router's own policy (an outcome, a timer seen lazily).
    Router,
    /// An operator through the admin API.
    Admin,
    /// A config reload.
    Reload,
    /// Dropped to keep `lockout.max_per_connection`.
    Eviction,
}

/// Circuit breaker phase (behaviour §5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum BreakerPhase {
    #[serde(rename = "CLOSED")]
    Closed,
    #[serde(rename = "DEGRADED")]
    Degraded,
    #[serde(rename = "OPEN")]
    Open,
    #[serde(rename = "HALF_OPEN")]
    HalfOpen,
}

impl BreakerPhase {
    pub fn as_str(self) -> &'static str {
        match self {
            BreakerPhase::Closed => "CLOSED",
            BreakerPhase::Degraded => "DEGRADED",
            BreakerPhase::Open => "OPEN",
            BreakerPhase::HalfOpen => "HALF_OPEN",
        }
    }
}

/// Where a usage reading came from (behaviour §6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UsageSource {
    /// Rate-limit headers on an upstream response.
    Header,
    /// Pushed through `POST /admin/connections/{id}/usage`.
    Push,
    /// A cluster node's shared quota lease (`[cluster]`): `used == limit` when the shared
    /// counter refused this node a lease, below it when a lease was granted again.
    Lease,
}

/// A target a request did not use, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Skipped {
    pub connection: String,
    pub model: String,
    pub reason: BlockReason,
    /// `None` when the block does not end by itself.
    pub remaining_ms: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeStarted {
    pub version: String,
    pub pid: u32,
    /// Last seq recovered from the journal before this start.
    pub recovered_seq: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeStopped {
    pub reason: String,
    pub uptime_ms: u64,
}

/// The routing shape of a loaded config, without secrets, so a journal replays on its own.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfigLoaded {
    /// Counts config loads over the journal's life; `RouteDecided` names the one it used.
    pub generation: u64,
    /// Where it came from (a path, `embedded`, `admin reload`).
    pub source: String,
    /// Hex digest of the file's bytes, to tell configs apart.
    pub digest: String,
    pub providers: Vec<ProviderInfo>,
    pub connections: Vec<ConnectionInfo>,
    pub combos: Vec<ComboInfo>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProviderInfo {
    pub name: String,
    pub format: ApiFormat,
    /// `oauth` when all its connections are oauth, else `api_key`.
    pub profile: AuthKind,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConnectionInfo {
    pub id: String,
    pub provider: String,
    pub auth: AuthKind,
    pub weight: u32,
    pub max_concurrent: Option<u32>,
    /// `None`: serves any model.
    pub models: Option<Vec<String>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ComboInfo {
    pub name: String,
    pub strategy: String,
    pub targets: Vec<TargetInfo>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetInfo {
    pub connection: String,
    pub model: String,
    pub weight: u32,
}

/// A combo chose an order of targets for one request (its DRR step is rebuilt from this).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RouteDecided {
    pub request_id: Arc<str>,
    /// The config generation whose target list `room`, `chosen` and `order` index into.
    pub generation: u64,
    pub combo: Arc<str>,
    /// The model the client asked for.
    pub model: Arc<str>,
    /// Indices (into the combo's targets) that had room and so took part in DRR this turn.
    pub room: Vec<u16>,
    /// Index of the target that paid for this turn; `None` when nothing could serve.
    pub chosen: Option<u16>,
    /// The ordered candidates handed to the request, as target indices.
    pub order: Vec<u16>,
    pub skipped: Vec<Skipped>,
    /// What conversation affinity did (behaviour §10); schema 2.
    #[serde(default)]
    pub affinity: AffinityOutcome,
    /// The client that sent the request (its `[[clients]]` id, `default` for
    /// `server.api_keys`); `None` only in records from before schema 3.
    #[serde(default)]
    pub client: Option<Arc<str>>,
    /// The conversation group's digest (behaviour §10) when the request had one, so replay
    /// places turns as the node did; `None` without a group (and before schema 4).
    #[serde(default)]
    pub group: Option<u64>,
    /// Each paced candidate's pace and binding window (behaviour §13), for the targets of
    /// `room`; empty when every target was on pace (pace 1: DRR by weight alone).
    #[serde(default)]
    pub paces: Vec<CandidatePace>,
}

/// One candidate's pace in a routing decision (behaviour §13).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CandidatePace {
    /// Index into the combo's targets, as in `room`.
    pub target: u16,
    /// The pace in per mille (1000 = on pace), bounded by `pacing.min` / `pacing.max`.
    pub pace: u32,
    /// The window that set it (`5h`, `7d`, `requests:<model>`, …).
    pub window: Option<String>,
}

/// A stored response (OpenAI's Responses API) was created on a connection: later requests
/// naming it (`previous_response_id`, `GET /v1/responses/{id}`, …) must go to that account.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResponseBound {
    pub request_id: String,
    pub response_id: String,
    /// The combo (model name) the client asked for.
    pub combo: String,
    pub provider: String,
    pub connection: String,
    /// The upstream model.
    pub model: String,
    /// The client that created it: only that client may name it again (behaviour §11);
    /// `None` in records before schema 4 (then any client of the node may).
    #[serde(default)]
    pub client: Option<String>,
}

/// A conversation (behaviour §10) was bound to a target: on its first turn, or when it moved
/// because its target could not serve. Held turns journal nothing. Only the group's digest is
/// stored, never prompt text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AffinityBound {
    pub request_id: String,
    pub combo: String,
    /// The group's digest (xxh3 of its hint or stable prefix, namespaced by client).
    pub group: u64,
    pub client: String,
    pub provider: String,
    pub connection: String,
    /// The upstream model.
    pub model: String,
    /// `connection/model` it was bound to before, when it moved.
    pub moved_from: Option<String>,
    /// Why it moved (`model_locked`, `saturated`, `at_cap`, `max_lead`, `gone`, …); `None` for
    /// a new group.
    pub reason: Option<String>,
}

/// What conversation affinity did with one routing decision (behaviour §10 "Seen").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AffinityOutcome {
    /// No group: §2 alone.
    #[default]
    None,
    New,
    Held,
    Moved,
}

impl AffinityOutcome {
    /// The contract's name: `none`, `new`, `held` or `moved`.
    pub fn as_str(self) -> &'static str {
        match self {
            AffinityOutcome::None => "none",
            AffinityOutcome::New => "new",
            AffinityOutcome::Held => "held",
            AffinityOutcome::Moved => "moved",
        }
    }
}

/// The journal writes again after failing (a full disk that has room again): how long it
/// failed, and what was lost meanwhile (request events past `max_queue_events`; state events
/// are never dropped).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JournalRecovered {
    pub failed_for_ms: u64,
    pub write_errors: u64,
    pub dropped_request_events: u64,
}

/// A connection's credential was (re)loaded from a source that changes: a key file, a key
/// command or an OAuth refresh. Never carries the credential itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CredentialRefreshed {
    pub provider: String,
    pub connection: String,
    /// `file`, `command` or `oauth`.
    pub source: String,
    /// What caused it: `start`, `changed` (file), `ttl`, `expiring`, `expired` (a request found
    /// the token expired), `unauthorized` (a 401).
    pub trigger: String,
    /// When the new credential expires (Unix ms), if its source says.
    pub expires_at_ms: Option<u64>,
}

/// Loading a connection's credential failed; the last good one (if any) is kept until it
/// expires. `error` is a precise, secret-free reason (never the command's output).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CredentialFailed {
    pub provider: String,
    pub connection: String,
    pub source: String,
    pub trigger: String,
    pub error: String,
    /// Until when the last good credential is still used (Unix ms); `None` when there is none
    /// or it never expires.
    pub last_good_until_ms: Option<u64>,
}

/// One upstream attempt that succeeded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestSucceeded {
    pub request_id: Arc<str>,
    pub combo: Arc<str>,
    pub provider: Arc<str>,
    pub connection: Arc<str>,
    pub model: Arc<str>,
    pub status: u16,
    /// 1-based number of this upstream request within the client request.
    pub attempt: u32,
    pub latency_ms: u64,
    pub tokens_in: u64,
    pub tokens_out: u64,
    pub stream: bool,
    /// Targets passed over before this attempt, with why.
    pub skipped: Vec<Skipped>,
    /// Input tokens the upstream read from its prompt cache (OpenAI `cached_tokens`,
    /// Anthropic `cache_read_input_tokens`); schema 2.
    #[serde(default)]
    pub tokens_cached: u64,
    /// Input tokens written to the prompt cache (Anthropic `cache_creation_input_tokens`).
    #[serde(default)]
    pub tokens_cache_write: u64,
    /// The client that sent the request (its `[[clients]]` id, `default` for
    /// `server.api_keys`); `None` only in records from before schema 3.
    #[serde(default)]
    pub client: Option<Arc<str>>,
    /// USD, priced as the request's `client_usage` is (`[[prices]]` / `prices_file`); `None`
    /// when the model has no price (or the record is from before schema 3).
    #[serde(default)]
    pub cost_usd: Option<f64>,
    /// The translation the request went through (behaviour §14), e.g. `chat>messages`; `None`
    /// when client and target speak the same format (and in records before schema 4).
    #[serde(default)]
    pub translated: Option<String>,
    /// True when the usage was estimated by the router (the client left a stream before the
    /// upstream reported its usage, behaviour §11), false when the upstream reported it.
    #[serde(default)]
    pub usage_estimated: bool,
    /// Input items the router left out because the serving account cannot read them
    /// (another account's `encrypted_content`, behaviour §10); 0 when none.
    #[serde(default)]
    pub items_left_out: u32,
    /// The client's spend in its current budget period after this request, in pico-USD, and
    /// when that period began (Unix ms), as `client_usage` carries them: set when this event
    /// is the request's whole charge to its client (behaviour §11, journaled with the request
    /// event), `None` when a `client_usage` carries it (or nothing was charged, or the record
    /// is from before schema 5). Both set or both `None`.
    #[serde(default)]
    pub period_spend_pusd: Option<u64>,
    #[serde(default)]
    pub period_start_ms: Option<u64>,
}

impl RequestSucceeded {
    /// The client charge this event carries: its client, tokens, price and period spend as
    /// the `client_usage` it stands in for would say; `None` when it carries none.
    pub fn client_charge(&self) -> Option<ClientUsage> {
        let (client, period_spend_pusd, period_start_ms) = (
            self.client.as_ref()?,
            self.period_spend_pusd?,
            self.period_start_ms?,
        );
        Some(ClientUsage {
            request_id: self.request_id.to_string(),
            client: client.to_string(),
            combo: self.combo.to_string(),
            provider: self.provider.to_string(),
            connection: self.connection.to_string(),
            model: self.model.to_string(),
            tokens_in: self.tokens_in,
            tokens_out: self.tokens_out,
            tokens_cached: self.tokens_cached,
            tokens_cache_write: self.tokens_cache_write,
            cost_usd: self.cost_usd,
            period_spend_pusd,
            period_start_ms,
            estimated: self.usage_estimated,
        })
    }
}

/// One upstream attempt that failed, with what the classifier saw.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestFailed {
    pub request_id: Arc<str>,
    pub combo: Arc<str>,
    pub provider: Arc<str>,
    pub connection: Arc<str>,
    pub model: Arc<str>,
    /// `None` for network errors and timeouts before headers.
    pub status: Option<u16>,
    pub class: OutcomeClass,
    /// Upstream `error.code` / `error.type` when it had one.
    pub error_code: Option<String>,
    /// Upstream message, masked and truncated.
    pub message: Option<String>,
    pub attempt: u32,
    pub latency_ms: u64,
    /// The upstream's own reset hint, as a duration from `at_ms`, if it gave one.
    pub reset_hint_ms: Option<u64>,
    pub stream: bool,
    /// True when the stream had already sent content to the client (no failover possible).
    pub after_first_content: bool,
    pub skipped: Vec<Skipped>,
    /// The client that sent the request (its `[[clients]]` id, `default` for
    /// `server.api_keys`); `None` only in records from before schema 3.
    #[serde(default)]
    pub client: Option<Arc<str>>,
    /// The translation the request went through (behaviour §14), e.g. `chat>messages`; `None`
    /// when client and target speak the same format (and in records before schema 4).
    #[serde(default)]
    pub translated: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConnectionCooldown {
    pub provider: String,
    pub connection: String,
    pub class: OutcomeClass,
    pub status: Option<u16>,
    /// Backoff level that produced this cooldown (0 = base).
    pub level: u32,
    pub until_ms: u64,
    /// True when the upstream's `Retry-After` set the duration.
    pub from_retry_after: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConnectionDisabled {
    pub provider: String,
    pub connection: String,
    pub reason: DisableReason,
    pub status: Option<u16>,
    pub error_code: Option<String>,
    /// `None`: until an operator clears it or the config reloads.
    pub until_ms: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConnectionCleared {
    pub provider: String,
    pub connection: String,
    pub by: ActionBy,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelLocked {
    pub provider: String,
    pub connection: String,
    pub model: String,
    pub reason: LockReason,
    pub status: Option<u16>,
    pub error_code: Option<String>,
    pub until_ms: u64,
    /// Failures counted for this (connection, model) including this one.
    pub failure_count: u32,
    pub source: ResetSource,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelUnlocked {
    pub provider: String,
    pub connection: String,
    pub model: String,
    pub by: ActionBy,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BreakerTransition {
    pub provider: String,
    pub from: BreakerPhase,
    pub to: BreakerPhase,
    /// Failures counted in the window at the transition.
    pub failures: u32,
    /// Open cycles so far (drives the escalating reset).
    pub cycles: u32,
    /// For `OPEN`: when it may go HALF_OPEN.
    pub until_ms: Option<u64>,
    pub by: ActionBy,
}

/// A breaker counted one outcome (a failure after dedup, or a success that removed one).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BreakerCounted {
    pub provider: String,
    pub connection: String,
    /// True: a failure was added; false: a success removed one.
    pub failure: bool,
    /// Failures in the window after this change.
    pub failures: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsageObserved {
    pub provider: String,
    pub connection: String,
    /// `5h`, `7d`, `7d:<model>`, or a short window such as `requests:<model>`, `tokens:<model>`.
    pub window: String,
    /// Used amount, in the limit's unit (for percentage readings: basis points of 10 000).
    pub used: u64,
    pub limit: u64,
    pub resets_at_ms: Option<u64>,
    pub source: UsageSource,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdminAction {
    /// e.g. `clear_lockout`, `reset_breaker`, `clear_connection`, `push_usage`, `reload`.
    pub action: String,
    /// What it acted on (`conn/model`, a provider, a connection id).
    pub target: String,
    /// Always `admin` for the admin API.
    pub by: String,
}

/// A state change another node of the cluster journaled about a connection, read from the
/// shared stream and applied here through the same reducers as a local one. `event` is the
/// origin's event as it journaled it (never itself a `PeerApplied`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PeerApplied {
    /// The `node_id` of the node that saw it.
    pub origin_node: String,
    /// Its seq in the origin's journal (peers apply each origin's events once, in this order).
    pub origin_seq: u64,
    /// When the origin saw it (the `now` it is applied at).
    pub origin_at_ms: u64,
    /// The shared stream's entry id it was read from.
    pub stream_id: String,
    pub event: Box<Event>,
}

/// What one client request used and cost (behaviour §11): the usage the upstream reported,
/// priced. A state event (never dropped, journaled whatever `journal.request_events` says):
/// per-client windows and spend are folded from these on restart.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClientUsage {
    pub request_id: String,
    /// The client's configured id (never its key).
    pub client: String,
    /// The combo (model name) the client asked for.
    pub combo: String,
    pub provider: String,
    pub connection: String,
    /// The upstream model, the one priced.
    pub model: String,
    /// Input tokens including cache reads and writes, as `request_succeeded` counts them.
    pub tokens_in: u64,
    pub tokens_out: u64,
    pub tokens_cached: u64,
    pub tokens_cache_write: u64,
    /// USD, priced from `[[prices]]` / `prices_file`; `None` when the model has no price.
    pub cost_usd: Option<f64>,
    /// The client's spend in its current budget period after this request, in pico-USD
    /// (10⁻¹² USD, exact), and when that period began (Unix ms): restart takes the spend
    /// from the newest of these even when older events were pruned.
    pub period_spend_pusd: u64,
    pub period_start_ms: u64,
    /// True when the router estimated this usage (a stream the client left before the
    /// upstream's usage arrived); false when the upstream reported it. Schema 4.
    #[serde(default)]
    pub estimated: bool,
}

/// A client went over one of its limits (behaviour §11). Journaled on the transition into
/// limited (one per limit until the client is admitted again), so a flood of refused requests
/// writes one event, not one per request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientLimited {
    pub request_id: String,
    pub client: String,
    /// `max_concurrent`, `requests_per_min`, `tokens_per_min`, `tokens_per_day`, `budget_usd`
    /// or `models`.
    pub limit: String,
    /// Until the window frees (`None` for `models`, which never frees by itself).
    pub retry_after_ms: Option<u64>,
}

/// A provider's hosts answered a generation API's route with a 404 that says the route does
/// not exist (behaviour §14): the router learned they do not serve `api` and narrows the
/// provider's `apis` (until a config reload names them again). State: rebuilt by replay.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiUnserved {
    pub request_id: String,
    pub provider: String,
    /// The connection whose host answered.
    pub connection: String,
    /// `chat`, `responses` or `messages`.
    pub api: String,
    /// The upstream path that answered 404 (`/v1/responses`).
    pub path: String,
}

/// The knobs of pacing's spending rule in force for a config generation (behaviour §13),
/// journaled right after its `config_loaded` when any combo's differ from
/// [`PacingKnobs::UNJOURNALED`] (so at every start and reload under the default knobs, which
/// pace by the longest window), so replay explains a paced choice with them and rebuilds DRR
/// turns as the node took them. A generation without one ran [`PacingKnobs::UNJOURNALED`]
/// (exponent 1, wall clock, every window), whatever the default of the binary reading it.
/// Its own fields are `[defaults.pacing]`'s (implicit combos).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PacingRule {
    /// The `config_loaded` generation these knobs belong to.
    pub generation: u64,
    /// The exponent in per mille (1000 = proportional).
    pub exponent_pm: u32,
    pub clock: PacingClock,
    pub pace_windows: PaceWindows,
    /// Each named combo's (its `[combos.pacing]` over the defaults), in config order.
    pub combos: Vec<ComboPacing>,
}

impl PacingRule {
    /// `[defaults.pacing]`'s knobs.
    pub fn defaults(&self) -> PacingKnobs {
        PacingKnobs {
            exponent_pm: self.exponent_pm,
            clock: self.clock,
            pace_windows: self.pace_windows,
        }
    }
}

/// One combo's knobs in a [`PacingRule`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ComboPacing {
    pub combo: String,
    /// The exponent in per mille (1000 = proportional).
    pub exponent_pm: u32,
    pub clock: PacingClock,
    pub pace_windows: PaceWindows,
}

impl ComboPacing {
    /// `combo`'s entry with `knobs`.
    pub fn new(combo: &str, knobs: PacingKnobs) -> Self {
        ComboPacing {
            combo: combo.to_owned(),
            exponent_pm: knobs.exponent_pm,
            clock: knobs.clock,
            pace_windows: knobs.pace_windows,
        }
    }

    pub fn knobs(&self) -> PacingKnobs {
        PacingKnobs {
            exponent_pm: self.exponent_pm,
            clock: self.clock,
            pace_windows: self.pace_windows,
        }
    }
}

/// `exponent`, `clock` and `pace_windows` (contract: `[defaults.pacing]`), as one value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PacingKnobs {
    /// The exponent in per mille (1000 = proportional).
    pub exponent_pm: u32,
    pub clock: PacingClock,
    pub pace_windows: PaceWindows,
}

impl PacingKnobs {
    /// The rule a config generation without a `pacing_rule` ran: exponent 1, the wall clock,
    /// every window — the only rule before the knobs, and never journaled. What a journal means
    /// by the event's absence, tied to the journal, not to a binary's `[defaults.pacing]`.
    pub const UNJOURNALED: PacingKnobs = PacingKnobs {
        exponent_pm: 1_000,
        clock: PacingClock::Wall,
        pace_windows: PaceWindows::All,
    };
}

/// What a window's `time_left` counts (behaviour §13).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PacingClock {
    /// Wall-clock time to the reset.
    #[default]
    Wall,
    /// The share of the window's expected demand still to come (the combo's requests by hour
    /// of the week).
    Demand,
}

/// Which windows set a target's pace (behaviour §13).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PaceWindows {
    /// The slowest of every window with a reading.
    #[default]
    All,
    /// Windows of a day or shorter do not pace while a longer window has a reading.
    Longest,
}

/// A translated Responses answer the router kept (`[responses] store = true`, behaviour §14):
/// metadata only — its content lives in the router's response store, never in the journal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResponseStored {
    pub request_id: String,
    /// The Responses id the client was given (`resp_qrt_…`).
    pub response_id: String,
    /// The client it belongs to (behaviour §11).
    pub client: String,
    /// The connection that served it (its sealed reasoning opens only there).
    pub connection: String,
    /// What it takes in the store.
    pub bytes: u64,
    /// When it expires (`ttl_days` after it was made), Unix milliseconds.
    pub expires_at_ms: u64,
}

/// A kept response left the router's response store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResponseDeleted {
    pub response_id: String,
    pub client: String,
    /// `client` (its `DELETE`), `expired` (past `ttl_days`) or `evicted` (over `max_bytes`).
    pub reason: String,
}

/// A connection's rolling window started on purpose (behaviour §13 "Priming a window"): the
/// smallest request the upstream accepts, sent at the connection's `prime_at`, charged to no
/// client (its `request_succeeded` carries the same `request_id`). Replay rebuilds each
/// connection's last prime from these, so a restart never primes one window twice.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WindowPrimed {
    pub provider: String,
    pub connection: String,
    /// The window started: `5h`.
    pub window: String,
    /// The model the request asked for.
    pub model: String,
    /// The prime time it was sent for (Unix ms; the envelope's `at_ms` is when it was served).
    pub at: u64,
    pub request_id: String,
}
