//! Event schema 2, frozen: the shapes records written before schema 3 hold, and their upgrade
//! to schema 3's shape (and so to today's `Event`). Only `RouteDecided`, `RequestSucceeded` and `RequestFailed` changed
//! (schema 3 appended `client` to all three and `cost_usd` to `RequestSucceeded`); every other
//! kind is today's type, unchanged. `ClientUsage` and `ClientLimited` were appended to schema 2
//! without a bump (new kinds at the end need none), so they are part of this shape.
//! Never edit these shapes: they are what those builds wrote. Schema 1 upgrades through here.

use serde::{Deserialize, Serialize};

use super::legacy_v3::{self as v3, EventV3};
use crate::event::{self as today, AffinityOutcome, Skipped};

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
    ResponseBound(v3::ResponseBound),
    JournalRecovered(today::JournalRecovered),
    CredentialRefreshed(today::CredentialRefreshed),
    CredentialFailed(today::CredentialFailed),
    /// A peer's event was itself written in schema 2.
    PeerApplied(PeerAppliedV2),
    AffinityBound(today::AffinityBound),
    ClientUsage(v3::ClientUsage),
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

impl From<EventV2> for EventV3 {
    fn from(old: EventV2) -> EventV3 {
        match old {
            EventV2::NodeStarted(e) => EventV3::NodeStarted(e),
            EventV2::ConfigLoaded(e) => EventV3::ConfigLoaded(e),
            EventV2::RequestSucceeded(e) => EventV3::RequestSucceeded(v3::RequestSucceeded {
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
            EventV2::RequestFailed(e) => EventV3::RequestFailed(v3::RequestFailed {
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
            EventV2::ConnectionCooldown(e) => EventV3::ConnectionCooldown(e),
            EventV2::ConnectionDisabled(e) => EventV3::ConnectionDisabled(e),
            EventV2::ConnectionCleared(e) => EventV3::ConnectionCleared(e),
            EventV2::ModelLocked(e) => EventV3::ModelLocked(e),
            EventV2::ModelUnlocked(e) => EventV3::ModelUnlocked(e),
            EventV2::BreakerTransition(e) => EventV3::BreakerTransition(e),
            EventV2::UsageObserved(e) => EventV3::UsageObserved(e),
            EventV2::AdminAction(e) => EventV3::AdminAction(e),
            EventV2::NodeStopped(e) => EventV3::NodeStopped(e),
            EventV2::RouteDecided(e) => EventV3::RouteDecided(v3::RouteDecided {
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
            EventV2::BreakerCounted(e) => EventV3::BreakerCounted(e),
            EventV2::ResponseBound(e) => EventV3::ResponseBound(e),
            EventV2::JournalRecovered(e) => EventV3::JournalRecovered(e),
            EventV2::CredentialRefreshed(e) => EventV3::CredentialRefreshed(e),
            EventV2::CredentialFailed(e) => EventV3::CredentialFailed(e),
            EventV2::PeerApplied(e) => EventV3::PeerApplied(v3::PeerAppliedV3 {
                origin_node: e.origin_node,
                origin_seq: e.origin_seq,
                origin_at_ms: e.origin_at_ms,
                stream_id: e.stream_id,
                event: Box::new(EventV3::from(*e.event)),
            }),
            EventV2::AffinityBound(e) => EventV3::AffinityBound(e),
            EventV2::ClientUsage(e) => EventV3::ClientUsage(e),
            EventV2::ClientLimited(e) => EventV3::ClientLimited(e),
        }
    }
}
