//! Issue 7 §2: disk trouble. The router on a journal whose writes fail keeps routing and
//! learning, says so (`journal_stats().healthy`, `/healthz`, `/metrics`), never crashes, and
//! writes everything it kept once the disk is back.
//!
//! The node opens its sled journal itself (`RunningNode::start`), so there is no way to hand it
//! a failing one; the node-level test assembles the node from its public parts (`AppState`,
//! `routes`, `LiveConfig`) around a router on a `FailingJournal` instead.

#![expect(
    clippy::unwrap_used,
    reason = "test code: a failed step fails the test loudly"
)]

use crate::support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use quotaroute::config;
use quotaroute::node::app::AppState;
use quotaroute::node::live::LiveConfig;
use quotaroute::node::metrics;
use quotaroute::routes::routes;
use quotaroute_actors::{
    recover_state, AttemptResult, RouteRequest, Router, RouterOptions, SystemClock,
};
use quotaroute_journal::{
    ApiFormat, FailSwitch, FailingJournal, Journal, MemoryJournal, OutcomeClass, WriterConfig,
};
use quotaroute_mock::Rule;
use serde_json::Value;
use support::{chat, standard_config, start_mock, upstream_key, ADMIN_KEY};

/// A router on a failing in-memory journal, with the node's topology from the standard config.
async fn failing_router(mock_base: &str) -> (Router, MemoryJournal, FailSwitch, config::Config) {
    let dir = tempfile::tempdir().unwrap();
    let text = standard_config(mock_base, &dir.path().join("unused"), "");
    let path = dir.path().join("quotaroute.toml");
    std::fs::write(&path, &text).unwrap();
    let config = config::load(&path).unwrap();
    let topology = config::topology::topology(&config, "digest");
    let memory = MemoryJournal::new();
    let (failing, switch) = FailingJournal::new(memory.clone());
    let router = Router::start(
        topology,
        Box::new(failing),
        RouterOptions {
            writer: WriterConfig {
                flush_every_ms: 10,
                ..WriterConfig::default()
            },
            snapshot_every_events: 0,
            request_events: Default::default(),
            clock: Arc::new(SystemClock),
        },
    )
    .await
    .unwrap();
    (router, memory, switch, config)
}

async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn request(id: usize, model: &str) -> RouteRequest {
    RouteRequest {
        request_id: format!("disk-{id}").into(),
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s8_router_keeps_routing_while_writes_fail_and_catches_up_when_the_disk_is_back() {
    let (router, memory, switch, _config) = failing_router("http://127.0.0.1:9").await;
    router.flush().await.unwrap();
    let before = memory.last_seq().unwrap().unwrap();
    assert!(router.journal_stats().healthy);

    switch.set_failing(true);
    for n in 0..50 {
        let mut decision = router.route(request(n, "team")).await.unwrap();
        let served_by = decision.current().unwrap().connection.to_string();
        if n == 10 {
            // A 429 with a 10-minute reset while the disk is failing: learned all the same.
            let mut result = AttemptResult::failure(OutcomeClass::RateLimited, Some(429));
            result.reset_hint_ms = Some(600_000);
            decision.report(result);
            assert_ne!(served_by, "");
        } else {
            decision.report(AttemptResult::success(200, 10, 5));
        }
    }
    router.settle().await.unwrap();
    eventually("a failed write", || router.journal_stats().write_errors > 0).await;
    let stats = router.journal_stats();
    assert!(!stats.healthy, "{stats:?}");
    // Nothing new reached the disk, yet the events are kept (nothing dropped).
    assert_eq!(memory.last_seq().unwrap().unwrap(), before);
    assert_eq!(stats.dropped, 0);
    let errors_then = stats.write_errors;
    eventually("write errors keep counting retries", || {
        router.journal_stats().write_errors > errors_then
    })
    .await;
    let lockouts = router.state().await.unwrap().lockouts();
    assert_eq!(
        lockouts.len(),
        1,
        "the live state learned the 429: {lockouts:?}"
    );
    // Still routing.
    assert!(router.route(request(99, "team")).await.is_ok());

    switch.set_failing(false);
    eventually("healthy again", || router.journal_stats().healthy).await;
    let durable = router.flush().await.unwrap();
    let stats = router.journal_stats();
    assert_eq!(stats.written, stats.appended, "{stats:?}");
    assert_eq!(memory.last_seq().unwrap(), Some(durable));
    assert!(durable >= before + 51, "{before} → {durable}");
    // What was learned during the outage is on the "disk" now: a crash would keep it.
    let (replayed, _) = recover_state(&memory.after_crash());
    let admin = quotaroute_actors::AdminState::build(
        &router.topology().unwrap(),
        &replayed,
        &std::collections::HashMap::new(),
        quotaroute_actors::Clock::now_ms(&SystemClock),
    );
    assert_eq!(admin.lockouts().len(), 1);
    assert_eq!(admin.lockouts()[0].connection, lockouts[0].connection);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s8_node_reports_a_failing_journal_in_healthz_and_metrics_and_keeps_serving() {
    let (mock_base, mock) = start_mock().await;
    let (router, memory, switch, config) = failing_router(&mock_base).await;
    let app = AppState::new(
        LiveConfig::from_config(
            &config,
            std::sync::Arc::new(quotaroute_actors::SystemClock),
            quotaroute::node::seal_secret::seal_key(&config).unwrap(),
        ),
        metrics::install(),
        None,
    );
    app.set_router(router.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let server = tokio::spawn(async move {
        axum::serve(listener, routes(app)).await.unwrap();
    });
    let client = reqwest::Client::new();
    let health = || async {
        client
            .get(format!("{base}/healthz"))
            .send()
            .await
            .unwrap()
            .json::<Value>()
            .await
            .unwrap()
    };
    let metrics_text = || async {
        client
            .get(format!("{base}/metrics"))
            .bearer_auth(ADMIN_KEY)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    };
    assert_eq!(health().await["journal"], "ok");
    assert!(metrics_text()
        .await
        .contains("quotaroute_journal_healthy 1"));

    switch.set_failing(true);
    mock.set_rules(vec![Rule::rate_limited(600).for_key(upstream_key("oa-1"))]);
    for _ in 0..20 {
        assert_eq!(
            chat(&client, &base, "team").await.status(),
            200,
            "routing goes on"
        );
    }
    router.settle().await.unwrap();
    eventually("a failed write", || !router.journal_stats().healthy).await;
    let degraded = health().await;
    assert_eq!(degraded["status"], "ready");
    assert_eq!(degraded["journal"], "degraded", "{degraded}");
    assert!(degraded["journal_write_errors"].as_u64().unwrap() > 0);
    let text = metrics_text().await;
    assert!(text.contains("quotaroute_journal_healthy 0"), "{text}");
    assert!(
        !text.contains("quotaroute_journal_write_errors 0\n"),
        "{text}"
    );

    switch.set_failing(false);
    eventually("healthy again", || router.journal_stats().healthy).await;
    assert_eq!(health().await["journal"], "ok");
    assert!(metrics_text()
        .await
        .contains("quotaroute_journal_healthy 1"));
    router.flush().await.unwrap();
    let (replayed, _) = recover_state(&memory.after_crash());
    assert!(
        replayed
            .connection("openai", "oa-1")
            .lockouts
            .list_at(quotaroute_actors::Clock::now_ms(&SystemClock))
            .len()
            == 1,
        "the lockout learned during the outage was written after it"
    );
    server.abort();
}
