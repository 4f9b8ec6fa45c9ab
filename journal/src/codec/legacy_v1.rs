//! Event schema 1, frozen: the shapes records written before schema 2 hold, and their upgrade
//! to today's [`Event`]. Only `RouteDecided` and `RequestSucceeded` changed (schema 2 appended
//! `affinity` and the cache token counts); every other kind is today's type, unchanged.
//! Never edit these shapes: they are what those builds wrote.

use serde::Deserialize;

use crate::event::{self as today, AffinityOutcome, Event, Skipped};

#[derive(Deserialize)]
pub struct RouteDecided {
    request_id: String,
    generation: u64,
    combo: String,
    model: String,
    room: Vec<u16>,
    chosen: Option<u16>,
    order: Vec<u16>,
    skipped: Vec<Skipped>,
}

#[derive(Deserialize)]
pub struct RequestSucceeded {
    request_id: String,
    combo: String,
    provider: String,
    connection: String,
    model: String,
    status: u16,
    attempt: u32,
    latency_ms: u64,
    tokens_in: u64,
    tokens_out: u64,
    stream: bool,
    skipped: Vec<Skipped>,
}

/// Schema 1's [`Event`], variant for variant (bincode stores the variant index).
#[derive(Deserialize)]
pub enum EventV1 {
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
    RouteDecided(RouteDecided),
    BreakerCounted(today::BreakerCounted),
    ResponseBound(today::ResponseBound),
    JournalRecovered(today::JournalRecovered),
    CredentialRefreshed(today::CredentialRefreshed),
    CredentialFailed(today::CredentialFailed),
    /// A peer's event was itself written in schema 1.
    PeerApplied(PeerAppliedV1),
    AffinityBound(today::AffinityBound),
}

#[derive(Deserialize)]
pub struct PeerAppliedV1 {
    origin_node: String,
    origin_seq: u64,
    origin_at_ms: u64,
    stream_id: String,
    event: Box<EventV1>,
}

impl From<EventV1> for Event {
    fn from(old: EventV1) -> Event {
        match old {
            EventV1::NodeStarted(e) => Event::NodeStarted(e),
            EventV1::ConfigLoaded(e) => Event::ConfigLoaded(e),
            EventV1::RequestSucceeded(e) => Event::RequestSucceeded(today::RequestSucceeded {
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
                tokens_cached: 0,
                tokens_cache_write: 0,
            }),
            EventV1::RequestFailed(e) => Event::RequestFailed(e),
            EventV1::ConnectionCooldown(e) => Event::ConnectionCooldown(e),
            EventV1::ConnectionDisabled(e) => Event::ConnectionDisabled(e),
            EventV1::ConnectionCleared(e) => Event::ConnectionCleared(e),
            EventV1::ModelLocked(e) => Event::ModelLocked(e),
            EventV1::ModelUnlocked(e) => Event::ModelUnlocked(e),
            EventV1::BreakerTransition(e) => Event::BreakerTransition(e),
            EventV1::UsageObserved(e) => Event::UsageObserved(e),
            EventV1::AdminAction(e) => Event::AdminAction(e),
            EventV1::NodeStopped(e) => Event::NodeStopped(e),
            EventV1::RouteDecided(e) => Event::RouteDecided(today::RouteDecided {
                request_id: e.request_id,
                generation: e.generation,
                combo: e.combo,
                model: e.model,
                room: e.room,
                chosen: e.chosen,
                order: e.order,
                skipped: e.skipped,
                affinity: AffinityOutcome::None,
            }),
            EventV1::BreakerCounted(e) => Event::BreakerCounted(e),
            EventV1::ResponseBound(e) => Event::ResponseBound(e),
            EventV1::JournalRecovered(e) => Event::JournalRecovered(e),
            EventV1::CredentialRefreshed(e) => Event::CredentialRefreshed(e),
            EventV1::CredentialFailed(e) => Event::CredentialFailed(e),
            EventV1::PeerApplied(e) => Event::PeerApplied(today::PeerApplied {
                origin_node: e.origin_node,
                origin_seq: e.origin_seq,
                origin_at_ms: e.origin_at_ms,
                stream_id: e.stream_id,
                event: Box::new(Event::from(*e.event)),
            }),
            EventV1::AffinityBound(e) => Event::AffinityBound(e),
        }
    }
}
