//! Generates the incident fixture (`tests/fixtures/incident/journal.ndjson`) through the REAL
//! router embedding API on a manual clock. Ignored by default: `QR_REGEN_INCIDENT=1 cargo test --test it replay_fixture -- --ignored`.
//!
//! The incident, over 20 simulated minutes (one step every 10 s):
//! - provider `openai`: keys ok1:ok2:ok3 weighted 2:1:1 serve combo `team` (gpt-4o); from 14:03
//!   to 14:09 ok2's gpt-4o answers 429 (a storm on one key's model; hints of 30 s on every other
//!   one), while ok2's gpt-4o-mini (combo `mini`) keeps serving;
//! - provider `anthropic`: keys an1..an3 serve combo `claude`; from 14:08 to 14:15 they mostly
//!   answer 503, so its breaker opens, probes, reopens (escalating) and finally closes.

#![expect(clippy::unwrap_used, reason = "test helpers outside #[test] fns")]

use crate::replay_support;

use quotaroute::actors::{
    AttemptResult, ComboSpec, ConnectionSpec, ManualClock, ProviderSpec, RouteRequest, Router,
    RouterOptions, Topology,
};
use quotaroute::journal::{
    envelope_to_json, ApiFormat, AuthKind, Journal, OutcomeClass, SledJournal, SledOptions,
    WriterConfig,
};
use replay_support::*;

fn provider(name: &str, format: ApiFormat) -> ProviderSpec {
    ProviderSpec::new(name, format, AuthKind::ApiKey)
}

fn connection(id: &str, provider: &str, weight: u32) -> ConnectionSpec {
    ConnectionSpec::new(id, provider, AuthKind::ApiKey, weight)
}

fn combo(name: &str, targets: &[(&str, &str, u32)]) -> ComboSpec {
    ComboSpec::quota_share(name, targets)
}

fn topology() -> Topology {
    Topology::new(
        vec![
            provider("openai", ApiFormat::Openai),
            provider("anthropic", ApiFormat::Anthropic),
        ],
        vec![
            connection("ok1", "openai", 2),
            connection("ok2", "openai", 1),
            connection("ok3", "openai", 1),
            connection("an1", "anthropic", 1),
            connection("an2", "anthropic", 1),
            connection("an3", "anthropic", 1),
        ],
        vec![
            combo(
                "team",
                &[
                    ("ok1", "gpt-4o", 2),
                    ("ok2", "gpt-4o", 1),
                    ("ok3", "gpt-4o", 1),
                ],
            ),
            combo("mini", &[("ok2", "gpt-4o-mini", 1)]),
            combo(
                "claude",
                &[
                    ("an1", "claude-sonnet", 1),
                    ("an2", "claude-sonnet", 1),
                    ("an3", "claude-sonnet", 1),
                ],
            ),
        ],
        "fixture://incident.toml",
        "1nc1d3nt",
    )
}

/// What the simulated upstream answers `connection`/`model` at `step` (10 s each).
fn upstream(step: u64, attempt: u32, connection: &str, model: &str) -> AttemptResult {
    let minute = step / 6;
    if connection == "ok2" && model == "gpt-4o" && (3..9).contains(&minute) {
        let result = AttemptResult::failure(OutcomeClass::RateLimited, Some(429))
            .with_error_code("rate_limit_exceeded");
        return if step.is_multiple_of(2) {
            result.with_reset_hint_ms(Some(30_000))
        } else {
            result
        };
    }
    if connection.starts_with("an") && (8..15).contains(&minute) {
        let lane = u64::from(connection.as_bytes()[2] - b'0');
        // Mostly down; recovering a little in the last minutes, so probes sometimes pass.
        let up = if minute >= 12 {
            (step + lane).is_multiple_of(3)
        } else {
            (step + lane + u64::from(attempt)).is_multiple_of(7)
        };
        if !up {
            return AttemptResult::failure(OutcomeClass::ServerError, Some(503))
                .with_error_code("overloaded_error");
        }
    }
    AttemptResult::success(200, 120 + step % 50, 40 + step % 30)
}

async fn serve(
    router: &Router,
    clock: &ManualClock,
    step: u64,
    combo: &str,
    format: ApiFormat,
    n: u32,
) {
    let request = RouteRequest {
        request_id: format!("{combo}-{step:03}-{n}").into(),
        model: combo.into(),
        format,
        translatable: false,
        cannot_carry: Vec::new(),
        only_connection: None,
        encrypted_maker: None,
        affinity: None,
        client: quotaroute_actors::ClientTag::default(),
    };
    let Ok(mut decision) = router.route(request).await else {
        router.settle().await.unwrap();
        return;
    };
    while let Some(target) = decision.current() {
        let (connection, model) = (target.connection.to_string(), target.model.to_string());
        clock.advance(180 + (step * 37 + u64::from(n) * 11) % 400);
        let result = upstream(step, decision.attempt(), &connection, &model);
        let failed = result.class != OutcomeClass::Success;
        decision.report(result);
        router.settle().await.unwrap();
        if !failed {
            break;
        }
        match decision.failover().await {
            Ok(Some(_)) => {}
            _ => break,
        }
    }
    router.settle().await.unwrap();
}

#[tokio::test]
#[ignore = "writes tests/fixtures/incident: QR_REGEN_INCIDENT=1 cargo test --test it replay_fixture -- --ignored"]
async fn generate_incident_fixture() {
    assert!(
        regenerating(),
        "set QR_REGEN_INCIDENT=1 to regenerate the incident fixture"
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("journal");
    let journal = SledJournal::open(&path, SledOptions::default()).unwrap();
    let clock = ManualClock::new(T0);
    let router = Router::start(
        topology(),
        Box::new(journal),
        RouterOptions {
            writer: WriterConfig::default(),
            snapshot_every_events: 0,
            request_events: Default::default(),
            clock: clock.clone(),
        },
    )
    .await
    .unwrap();
    router.settle().await.unwrap();
    for step in 0..120_u64 {
        clock.set(T0 + 1_000 + step * 10_000);
        serve(&router, &clock, step, "team", ApiFormat::Openai, 0).await;
        if step.is_multiple_of(2) {
            serve(&router, &clock, step, "team", ApiFormat::Openai, 1).await;
        }
        if step.is_multiple_of(3) {
            serve(&router, &clock, step, "mini", ApiFormat::Openai, 0).await;
        }
        serve(&router, &clock, step, "claude", ApiFormat::Anthropic, 0).await;
        let minute = step / 6;
        if (8..12).contains(&minute) {
            serve(&router, &clock, step, "claude", ApiFormat::Anthropic, 1).await;
        }
    }
    clock.set(T0 + 1_200_000);
    router.flush().await.unwrap();
    router.shutdown("end of incident").await.unwrap();

    // Shutdown closed the journal: it opens again at once.
    let journal = SledJournal::open(&path, SledOptions::default()).unwrap();
    let mut ndjson = String::new();
    for envelope in journal.read_from(0) {
        let mut envelope = envelope.unwrap();
        if let quotaroute::journal::Event::NodeStarted(started) = &mut envelope.event {
            started.pid = 4242; // stable across regenerations
        }
        ndjson.push_str(&envelope_to_json(&envelope).unwrap());
        ndjson.push('\n');
    }
    std::fs::write(fixture_ndjson(), ndjson).unwrap();
}
