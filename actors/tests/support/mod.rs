//! Shared test fixtures: small topologies and a router on an in-memory journal.

#![expect(
    clippy::expect_used,
    reason = "test support: not every test calls every helper, and a failed step fails loudly"
)]

use std::sync::Arc;

use quotaroute_actors::{
    AttemptResult, ComboSpec, ConnectionSpec, ManualClock, ProviderSpec, RequestEvents,
    RouteRequest, Router, RouterOptions, Topology,
};
use quotaroute_journal::{ApiFormat, AuthKind, MemoryJournal, OutcomeClass, WriterConfig};

pub const T0: u64 = 1_764_000_000_000;

pub fn provider(name: &str) -> ProviderSpec {
    ProviderSpec::new(name, ApiFormat::Openai, AuthKind::ApiKey)
}

pub fn connection(id: &str, provider: &str, weight: u32) -> ConnectionSpec {
    ConnectionSpec::new(id, provider, AuthKind::ApiKey, weight)
}

pub fn combo(name: &str, targets: &[(&str, &str, u32)]) -> ComboSpec {
    ComboSpec::quota_share(name, targets)
}

pub fn topology(
    providers: Vec<ProviderSpec>,
    connections: Vec<ConnectionSpec>,
    combos: Vec<ComboSpec>,
) -> Topology {
    Topology::new(providers, connections, combos, "test", "0")
}

/// Three keys of one provider weighted 2:1:1 in combo `team` (model `m`).
pub fn pool_211() -> Topology {
    topology(
        vec![provider("p")],
        vec![
            connection("k1", "p", 2),
            connection("k2", "p", 1),
            connection("k3", "p", 1),
        ],
        vec![combo(
            "team",
            &[("k1", "m", 2), ("k2", "m", 1), ("k3", "m", 1)],
        )],
    )
}

pub async fn start(topology: Topology, journal: MemoryJournal, clock: Arc<ManualClock>) -> Router {
    start_journaling(topology, journal, clock, RequestEvents::All).await
}

/// `start` with a `journal.request_events` setting.
pub async fn start_journaling(
    topology: Topology,
    journal: MemoryJournal,
    clock: Arc<ManualClock>,
    request_events: RequestEvents,
) -> Router {
    Router::start(
        topology,
        Box::new(journal),
        RouterOptions {
            writer: WriterConfig::default(),
            snapshot_every_events: 0,
            request_events,
            clock,
        },
    )
    .await
    .expect("router starts")
}

pub fn request(model: &str) -> RouteRequest {
    RouteRequest {
        request_id: format!("req-{model}").into(),
        model: model.to_string().into(),
        format: ApiFormat::Openai,
        translatable: false,
        cannot_carry: Vec::new(),
        only_connection: None,
        encrypted_maker: None,
        affinity: None,
        client: quotaroute_actors::ClientTag::default(),
    }
}

/// Routes one request and reports `result` for it; returns the connection that served.
pub async fn serve(router: &Router, result: AttemptResult) -> String {
    let mut decision = router.route(request("team")).await.expect("routes");
    let connection = decision.current().expect("a target").connection.to_string();
    decision.report(result);
    connection
}

/// A 429 that locks the model for a minute.
pub fn rate_limited() -> AttemptResult {
    AttemptResult::failure(OutcomeClass::RateLimited, Some(429)).with_reset_hint_ms(Some(60_000))
}
