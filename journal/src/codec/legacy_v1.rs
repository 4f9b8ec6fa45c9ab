//! Event schema 1, frozen: the shapes records written before schema 2 hold, and their upgrade
//! to schema 2's (`legacy_v2`), which upgrades them on to today's [`Event`]. Only `RouteDecided`
//! and `RequestSucceeded` changed in schema 2 (it appended `affinity` and the cache token
//! counts); `RequestFailed` is schema 2's frozen shape, every other kind today's type.
//! Never edit these shapes: they are what those builds wrote.

use serde::Deserialize;

use super::legacy_v2::{self as v2, EventV2};
use crate::event::{self as today, AffinityOutcome, Skipped};

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
    RequestFailed(v2::RequestFailed),
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
    ResponseBound(super::legacy_v3::ResponseBound),
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

impl From<EventV1> for EventV2 {
    fn from(old: EventV1) -> EventV2 {
        match old {
            EventV1::NodeStarted(e) => EventV2::NodeStarted(e),
            EventV1::ConfigLoaded(e) => EventV2::ConfigLoaded(e),
            EventV1::RequestSucceeded(e) => EventV2::RequestSucceeded(v2::RequestSucceeded {
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
            EventV1::RequestFailed(e) => EventV2::RequestFailed(e),
            EventV1::ConnectionCooldown(e) => EventV2::ConnectionCooldown(e),
            EventV1::ConnectionDisabled(e) => EventV2::ConnectionDisabled(e),
            EventV1::ConnectionCleared(e) => EventV2::ConnectionCleared(e),
            EventV1::ModelLocked(e) => EventV2::ModelLocked(e),
            EventV1::ModelUnlocked(e) => EventV2::ModelUnlocked(e),
            EventV1::BreakerTransition(e) => EventV2::BreakerTransition(e),
            EventV1::UsageObserved(e) => EventV2::UsageObserved(e),
            EventV1::AdminAction(e) => EventV2::AdminAction(e),
            EventV1::NodeStopped(e) => EventV2::NodeStopped(e),
            EventV1::RouteDecided(e) => EventV2::RouteDecided(v2::RouteDecided {
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
            EventV1::BreakerCounted(e) => EventV2::BreakerCounted(e),
            EventV1::ResponseBound(e) => EventV2::ResponseBound(e),
            EventV1::JournalRecovered(e) => EventV2::JournalRecovered(e),
            EventV1::CredentialRefreshed(e) => EventV2::CredentialRefreshed(e),
            EventV1::CredentialFailed(e) => EventV2::CredentialFailed(e),
            EventV1::PeerApplied(e) => EventV2::PeerApplied(v2::PeerAppliedV2 {
                origin_node: e.origin_node,
                origin_seq: e.origin_seq,
                origin_at_ms: e.origin_at_ms,
                stream_id: e.stream_id,
                event: Box::new(EventV2::from(*e.event)),
            }),
            EventV1::AffinityBound(e) => EventV2::AffinityBound(e),
        }
    }
}
