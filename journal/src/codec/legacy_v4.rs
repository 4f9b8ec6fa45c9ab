//! Event schema 4, frozen: the shapes records written before schema 5 hold, and their upgrade
//! to today's [`Event`]. Only `RequestSucceeded` changed (schema 5 appended
//! `period_spend_pusd` and `period_start_ms`, the client charge it may carry instead of a
//! `client_usage`); every other kind is today's type, unchanged. Never edit these shapes: they
//! are what those builds wrote.

use serde::{Deserialize, Serialize};

use crate::event::{self as today, Event, Skipped};

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
    pub translated: Option<String>,
    pub usage_estimated: bool,
    pub items_left_out: u32,
}

/// Schema 4's [`Event`], variant for variant (bincode stores the variant index).
#[derive(Serialize, Deserialize)]
pub enum EventV4 {
    NodeStarted(today::NodeStarted),
    ConfigLoaded(today::ConfigLoaded),
    RequestSucceeded(RequestSucceeded),
    RequestFailed(today::RequestFailed),
    ConnectionCooldown(today::ConnectionCooldown),
    ConnectionDisabled(today::ConnectionDisabled),
    ConnectionCleared(today::ConnectionCleared),
    ModelLocked(today::ModelLocked),
    ModelUnlocked(today::ModelUnlocked),
    BreakerTransition(today::BreakerTransition),
    UsageObserved(today::UsageObserved),
    AdminAction(today::AdminAction),
    NodeStopped(today::NodeStopped),
    RouteDecided(today::RouteDecided),
    BreakerCounted(today::BreakerCounted),
    ResponseBound(today::ResponseBound),
    JournalRecovered(today::JournalRecovered),
    CredentialRefreshed(today::CredentialRefreshed),
    CredentialFailed(today::CredentialFailed),
    /// A peer's event was itself written in schema 4.
    PeerApplied(PeerAppliedV4),
    AffinityBound(today::AffinityBound),
    ClientUsage(today::ClientUsage),
    ClientLimited(today::ClientLimited),
}

#[derive(Serialize, Deserialize)]
pub struct PeerAppliedV4 {
    pub origin_node: String,
    pub origin_seq: u64,
    pub origin_at_ms: u64,
    pub stream_id: String,
    pub event: Box<EventV4>,
}

impl From<RequestSucceeded> for today::RequestSucceeded {
    fn from(e: RequestSucceeded) -> today::RequestSucceeded {
        today::RequestSucceeded {
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
            translated: e.translated,
            usage_estimated: e.usage_estimated,
            items_left_out: e.items_left_out,
            period_spend_pusd: None,
            period_start_ms: None,
        }
    }
}

impl From<EventV4> for Event {
    fn from(old: EventV4) -> Event {
        match old {
            EventV4::NodeStarted(e) => Event::NodeStarted(e),
            EventV4::ConfigLoaded(e) => Event::ConfigLoaded(e),
            EventV4::RequestSucceeded(e) => Event::RequestSucceeded(e.into()),
            EventV4::RequestFailed(e) => Event::RequestFailed(e),
            EventV4::ConnectionCooldown(e) => Event::ConnectionCooldown(e),
            EventV4::ConnectionDisabled(e) => Event::ConnectionDisabled(e),
            EventV4::ConnectionCleared(e) => Event::ConnectionCleared(e),
            EventV4::ModelLocked(e) => Event::ModelLocked(e),
            EventV4::ModelUnlocked(e) => Event::ModelUnlocked(e),
            EventV4::BreakerTransition(e) => Event::BreakerTransition(e),
            EventV4::UsageObserved(e) => Event::UsageObserved(e),
            EventV4::AdminAction(e) => Event::AdminAction(e),
            EventV4::NodeStopped(e) => Event::NodeStopped(e),
            EventV4::RouteDecided(e) => Event::RouteDecided(e),
            EventV4::BreakerCounted(e) => Event::BreakerCounted(e),
            EventV4::ResponseBound(e) => Event::ResponseBound(e),
            EventV4::JournalRecovered(e) => Event::JournalRecovered(e),
            EventV4::CredentialRefreshed(e) => Event::CredentialRefreshed(e),
            EventV4::CredentialFailed(e) => Event::CredentialFailed(e),
            EventV4::PeerApplied(e) => Event::PeerApplied(today::PeerApplied {
                origin_node: e.origin_node,
                origin_seq: e.origin_seq,
                origin_at_ms: e.origin_at_ms,
                stream_id: e.stream_id,
                event: Box::new(Event::from(*e.event)),
            }),
            EventV4::AffinityBound(e) => Event::AffinityBound(e),
            EventV4::ClientUsage(e) => Event::ClientUsage(e),
            EventV4::ClientLimited(e) => Event::ClientLimited(e),
        }
    }
}
