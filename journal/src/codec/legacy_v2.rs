//! Event schema 2, frozen: the shapes records written before schema 3 hold, and their upgrade
//! to today's [`Event`]. Only `RouteDecided`, `RequestSucceeded` and `RequestFailed` changed
//! (schema 3 appended `client` to all three and `cost_usd` to `RequestSucceeded`); every other
//! kind is today's type, unchanged. `ClientUsage` and `ClientLimited` were appended to schema 2
//! without a bump (new kinds at the end need none), so they are part of this shape.
//! Never edit these shapes: they are what those builds wrote. Schema 1 upgrades through here.

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
}

/// Schema 1 and 2's `RequestFailed` (the same shape in both).
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
}

/// Schema 2's [`Event`], variant for variant (bincode stores the variant index).
#[derive(Serialize, Deserialize)]
pub enum EventV2 {
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
    ResponseBound(today::ResponseBound),
    JournalRecovered(today::JournalRecovered),
    CredentialRefreshed(today::CredentialRefreshed),
    CredentialFailed(today::CredentialFailed),
    /// A peer's event was itself written in schema 2.
    PeerApplied(PeerAppliedV2),
    AffinityBound(today::AffinityBound),
    ClientUsage(today::ClientUsage),
    ClientLimited(today::ClientLimited),
}

#[derive(Serialize, Deserialize)]
pub struct PeerAppliedV2 {
    pub origin_node: String,
    pub origin_seq: u64,
    pub origin_at_ms: u64,
    pub stream_id: String,
    pub event: Box<EventV2>,
}

impl From<EventV2> for Event {
    fn from(old: EventV2) -> Event {
        match old {
            EventV2::NodeStarted(e) => Event::NodeStarted(e),
            EventV2::ConfigLoaded(e) => Event::ConfigLoaded(e),
            EventV2::RequestSucceeded(e) => Event::RequestSucceeded(today::RequestSucceeded {
                request_id: e.request_id,
                combo: e.combo,
                provider: e.provider,
                connection: e.connection,
                model: e.model,
                status: e.status,
                attempt: e.attempt,
                latency_ms: e.latency_ms,
                tokens_in: e.tokens_in,
                tokens_out: e.tokens_out,
                stream: e.stream,
                skipped: e.skipped,
                tokens_cached: e.tokens_cached,
                tokens_cache_write: e.tokens_cache_write,
                client: None,
                cost_usd: None,
            }),
            EventV2::RequestFailed(e) => Event::RequestFailed(today::RequestFailed {
                request_id: e.request_id,
                combo: e.combo,
                provider: e.provider,
                connection: e.connection,
                model: e.model,
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
                client: None,
            }),
            EventV2::ConnectionCooldown(e) => Event::ConnectionCooldown(e),
            EventV2::ConnectionDisabled(e) => Event::ConnectionDisabled(e),
            EventV2::ConnectionCleared(e) => Event::ConnectionCleared(e),
            EventV2::ModelLocked(e) => Event::ModelLocked(e),
            EventV2::ModelUnlocked(e) => Event::ModelUnlocked(e),
            EventV2::BreakerTransition(e) => Event::BreakerTransition(e),
            EventV2::UsageObserved(e) => Event::UsageObserved(e),
            EventV2::AdminAction(e) => Event::AdminAction(e),
            EventV2::NodeStopped(e) => Event::NodeStopped(e),
            EventV2::RouteDecided(e) => Event::RouteDecided(today::RouteDecided {
                request_id: e.request_id,
                generation: e.generation,
                combo: e.combo,
                model: e.model,
                room: e.room,
                chosen: e.chosen,
                order: e.order,
                skipped: e.skipped,
                affinity: e.affinity,
                client: None,
            }),
            EventV2::BreakerCounted(e) => Event::BreakerCounted(e),
            EventV2::ResponseBound(e) => Event::ResponseBound(e),
            EventV2::JournalRecovered(e) => Event::JournalRecovered(e),
            EventV2::CredentialRefreshed(e) => Event::CredentialRefreshed(e),
            EventV2::CredentialFailed(e) => Event::CredentialFailed(e),
            EventV2::PeerApplied(e) => Event::PeerApplied(today::PeerApplied {
                origin_node: e.origin_node,
                origin_seq: e.origin_seq,
                origin_at_ms: e.origin_at_ms,
                stream_id: e.stream_id,
                event: Box::new(Event::from(*e.event)),
            }),
            EventV2::AffinityBound(e) => Event::AffinityBound(e),
            EventV2::ClientUsage(e) => Event::ClientUsage(e),
            EventV2::ClientLimited(e) => Event::ClientLimited(e),
        }
    }
}
