//! Event schema 3, frozen: the shapes records written before schema 4 hold, and their upgrade
//! to today's [`Event`]. Only `RouteDecided`, `RequestSucceeded`, `RequestFailed`,
//! `ResponseBound` and `ClientUsage` changed (schema 4 appended `translated`, `usage_estimated` and
//! `items_left_out` to `request_succeeded`, `translated` to `request_failed`, `client` to
//! `response_bound`, `estimated` to `client_usage`, and the conversation group and each
//! candidate's pace to `route_decided`); every other kind is today's type,
//! unchanged. Never edit these shapes: they are what those builds wrote. Schemas 1 and 2
//! upgrade through here.

use serde::{Deserialize, Serialize};

use crate::event::{self as today, AffinityOutcome, Event, Skipped};

#[derive(Serialize, Deserialize)]
pub struct RouteDecided {
    pub request_id: String,
    pub generation: u64,
    pub combo: String,
    pub model: String,
    pub room: Vec<u16>,
    pub chosen: Option<u16>,
    pub order: Vec<u16>,
    pub skipped: Vec<Skipped>,
    pub affinity: AffinityOutcome,
    pub client: Option<String>,
}

#[derive(Serialize, Deserialize)]
pub struct RequestSucceeded {
    pub request_id: String,
    pub combo: String,
    pub provider: String,
    pub connection: String,
    pub model: String,
    pub status: u16,
    pub attempt: u32,
    pub latency_ms: u64,
    pub tokens_in: u64,
    pub tokens_out: u64,
    pub stream: bool,
    pub skipped: Vec<Skipped>,
    pub tokens_cached: u64,
    pub tokens_cache_write: u64,
    pub client: Option<String>,
    pub cost_usd: Option<f64>,
}

#[derive(Serialize, Deserialize)]
pub struct RequestFailed {
    pub request_id: String,
    pub combo: String,
    pub provider: String,
    pub connection: String,
    pub model: String,
    pub status: Option<u16>,
    pub class: today::OutcomeClass,
    pub error_code: Option<String>,
    pub message: Option<String>,
    pub attempt: u32,
    pub latency_ms: u64,
    pub reset_hint_ms: Option<u64>,
    pub stream: bool,
    pub after_first_content: bool,
    pub skipped: Vec<Skipped>,
    pub client: Option<String>,
}

#[derive(Serialize, Deserialize)]
pub struct ResponseBound {
    pub request_id: String,
    pub response_id: String,
    pub combo: String,
    pub provider: String,
    pub connection: String,
    pub model: String,
}

#[derive(Serialize, Deserialize)]
pub struct ClientUsage {
    pub request_id: String,
    pub client: String,
    pub combo: String,
    pub provider: String,
    pub connection: String,
    pub model: String,
    pub tokens_in: u64,
    pub tokens_out: u64,
    pub tokens_cached: u64,
    pub tokens_cache_write: u64,
    pub cost_usd: Option<f64>,
    pub period_spend_pusd: u64,
    pub period_start_ms: u64,
}

/// Schema 3's [`Event`], variant for variant (bincode stores the variant index).
#[derive(Serialize, Deserialize)]
pub enum EventV3 {
    NodeStarted(today::NodeStarted),
    ConfigLoaded(today::ConfigLoaded),
    RequestSucceeded(RequestSucceeded),
    RequestFailed(RequestFailed),
    ConnectionCooldown(today::ConnectionCooldown),
    ConnectionDisabled(today::ConnectionDisabled),
    ConnectionCleared(today::ConnectionCleared),
    ModelLocked(today::ModelLocked),
    ModelUnlocked(today::ModelUnlocked),
    BreakerTransition(today::BreakerTransition),
    UsageObserved(today::UsageObserved),
    AdminAction(today::AdminAction),
    NodeStopped(today::NodeStopped),
    RouteDecided(RouteDecided),
    BreakerCounted(today::BreakerCounted),
    ResponseBound(ResponseBound),
    JournalRecovered(today::JournalRecovered),
    CredentialRefreshed(today::CredentialRefreshed),
    CredentialFailed(today::CredentialFailed),
    /// A peer's event was itself written in schema 3.
    PeerApplied(PeerAppliedV3),
    AffinityBound(today::AffinityBound),
    ClientUsage(ClientUsage),
    ClientLimited(today::ClientLimited),
}

#[derive(Serialize, Deserialize)]
pub struct PeerAppliedV3 {
    pub origin_node: String,
    pub origin_seq: u64,
    pub origin_at_ms: u64,
    pub stream_id: String,
    pub event: Box<EventV3>,
}

impl From<EventV3> for Event {
    fn from(old: EventV3) -> Event {
        match old {
            EventV3::NodeStarted(e) => Event::NodeStarted(e),
            EventV3::ConfigLoaded(e) => Event::ConfigLoaded(e),
            EventV3::RequestSucceeded(e) => Event::RequestSucceeded(today::RequestSucceeded {
                request_id: e.request_id.into(),
                combo: e.combo.into(),
                provider: e.provider.into(),
                connection: e.connection.into(),
                model: e.model.into(),
                status: e.status,
                attempt: e.attempt,
                latency_ms: e.latency_ms,
                tokens_in: e.tokens_in,
                tokens_out: e.tokens_out,
                stream: e.stream,
                skipped: e.skipped,
                tokens_cached: e.tokens_cached,
                tokens_cache_write: e.tokens_cache_write,
                client: e.client.map(Into::into),
                cost_usd: e.cost_usd,
                translated: None,
                usage_estimated: false,
                items_left_out: 0,
                period_spend_pusd: None,
                period_start_ms: None,
            }),
            EventV3::RequestFailed(e) => Event::RequestFailed(today::RequestFailed {
                request_id: e.request_id.into(),
                combo: e.combo.into(),
                provider: e.provider.into(),
                connection: e.connection.into(),
                model: e.model.into(),
                status: e.status,
                class: e.class,
                error_code: e.error_code,
                message: e.message,
                attempt: e.attempt,
                latency_ms: e.latency_ms,
                reset_hint_ms: e.reset_hint_ms,
                stream: e.stream,
                after_first_content: e.after_first_content,
                skipped: e.skipped,
                client: e.client.map(Into::into),
                translated: None,
            }),
            EventV3::ConnectionCooldown(e) => Event::ConnectionCooldown(e),
            EventV3::ConnectionDisabled(e) => Event::ConnectionDisabled(e),
            EventV3::ConnectionCleared(e) => Event::ConnectionCleared(e),
            EventV3::ModelLocked(e) => Event::ModelLocked(e),
            EventV3::ModelUnlocked(e) => Event::ModelUnlocked(e),
            EventV3::BreakerTransition(e) => Event::BreakerTransition(e),
            EventV3::UsageObserved(e) => Event::UsageObserved(e),
            EventV3::AdminAction(e) => Event::AdminAction(e),
            EventV3::NodeStopped(e) => Event::NodeStopped(e),
            EventV3::RouteDecided(e) => Event::RouteDecided(today::RouteDecided {
                request_id: e.request_id.into(),
                generation: e.generation,
                combo: e.combo.into(),
                model: e.model.into(),
                room: e.room,
                chosen: e.chosen,
                order: e.order,
                skipped: e.skipped,
                affinity: e.affinity,
                client: e.client.map(Into::into),
                group: None,
                paces: Vec::new(),
            }),
            EventV3::BreakerCounted(e) => Event::BreakerCounted(e),
            EventV3::ResponseBound(e) => Event::ResponseBound(today::ResponseBound {
                request_id: e.request_id,
                response_id: e.response_id,
                combo: e.combo,
                provider: e.provider,
                connection: e.connection,
                model: e.model,
                client: None,
            }),
            EventV3::JournalRecovered(e) => Event::JournalRecovered(e),
            EventV3::CredentialRefreshed(e) => Event::CredentialRefreshed(e),
            EventV3::CredentialFailed(e) => Event::CredentialFailed(e),
            EventV3::PeerApplied(e) => Event::PeerApplied(today::PeerApplied {
                origin_node: e.origin_node,
                origin_seq: e.origin_seq,
                origin_at_ms: e.origin_at_ms,
                stream_id: e.stream_id,
                event: Box::new(Event::from(*e.event)),
            }),
            EventV3::AffinityBound(e) => Event::AffinityBound(e),
            EventV3::ClientUsage(e) => Event::ClientUsage(today::ClientUsage {
                request_id: e.request_id,
                client: e.client,
                combo: e.combo,
                provider: e.provider,
                connection: e.connection,
                model: e.model,
                tokens_in: e.tokens_in,
                tokens_out: e.tokens_out,
                tokens_cached: e.tokens_cached,
                tokens_cache_write: e.tokens_cache_write,
                cost_usd: e.cost_usd,
                period_spend_pusd: e.period_spend_pusd,
                period_start_ms: e.period_start_ms,
                estimated: false,
            }),
            EventV3::ClientLimited(e) => Event::ClientLimited(e),
        }
    }
}
