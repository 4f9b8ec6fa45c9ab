//! Behaviour §8 with real process restarts: the node binary is killed with SIGKILL and started
//! again on the same journal, and finds the same lockouts, disabled keys and breaker states.

#![expect(
    clippy::unwrap_used,
    reason = "test code: a failed step fails the test loudly"
)]

use crate::support;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use quotaroute_journal::testkit::succeeded;
use quotaroute_journal::{
    Envelope, Event, Journal, RouteDecided, SledJournal, SledOptions, SCHEMA_VERSION,
};
use quotaroute_mock::{Fault, MockUpstream, Rule};
use serde_json::{json, Value};
use support::*;

fn spawn_node(config: &std::path::Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_quotaroute"))
        .args(["serve", "--config"])
        .arg(config)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

async fn admin_state(client: &reqwest::Client, base: &str) -> Value {
    client
        .get(format!("{base}/admin/state"))
        .bearer_auth(ADMIN_KEY)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s8_kill_9_and_restart_remembers_lockouts_disabled_keys_and_breakers() {
    let BinaryNode {
        mock,
        dir: _dir, // keeps the journal's temp dir alive
        config,
        text: _,
        base,
        client,
        child: mut node,
    } = start_binary(
        "\n[defaults.breaker]\ndedup_ms = 1\nreset_ms = 600000\n[defaults.cooldown]\nbase_ms = 1\nmax_ms = 1\n",
    )
    .await;
    // A 429 locks gpt-4o-mini on oa-1 for 10 minutes; a 401 disables oa-2.
    mock.set_rules(vec![
        Rule::rate_limited(600).for_key(upstream_key("oa-1")),
        Rule::always(Fault::Status(401)).for_key(upstream_key("oa-2")),
        Rule::always(Fault::Status(503)).for_model("claude-3-5-haiku"),
    ]);
    for _ in 0..4 {
        let response = chat(&client, &base, "team").await;
        assert_eq!(response.status(), 200);
    }
    // A 503 storm over the three anthropic keys opens that provider's breaker.
    for _ in 0..8 {
        let _ = client
            .post(format!("{base}/v1/messages"))
            .bearer_auth(CLIENT_KEY)
            .json(&json!({"model": "claude", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]}))
            .send()
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(3)).await;
    }
    let before = admin_state(&client, &base).await;
    assert_eq!(provider(&before, "anthropic")["breaker"], "OPEN");
    assert_eq!(
        connection(&before, "oa-1")["lockouts"][0]["model"],
        "gpt-4o-mini"
    );
    assert_eq!(connection(&before, "oa-2")["disabled"]["reason"], "auth");

    // What was learned is on disk (`GET /admin/journal` flushes the writer first), then SIGKILL.
    let _ = admin_text(&client, &base, "/admin/journal?since_seq=0&limit=1").await;
    node.kill().unwrap();
    node.wait().unwrap();

    let mut node = spawn_node(&config);
    wait_ready(&client, &base).await;
    let after = admin_state(&client, &base).await;
    assert_eq!(provider(&after, "anthropic")["breaker"], "OPEN");
    assert_eq!(provider(&after, "openai")["breaker"], "CLOSED");
    let lock = &connection(&after, "oa-1")["lockouts"][0];
    assert_eq!(lock["model"], "gpt-4o-mini");
    assert_eq!(lock["reason"], "rate_limited");
    assert!(lock["remaining_ms"].as_u64().unwrap() > 590_000);
    assert_eq!(connection(&after, "oa-2")["disabled"]["reason"], "auth");
    assert!(connection(&after, "oa-3")["disabled"].is_null());
    // And it routes accordingly: only oa-3 serves the combo now.
    mock.clear_rules();
    for _ in 0..3 {
        let response = chat(&client, &base, "team").await;
        assert_eq!(header(&response, "x-quotaroute-connection"), "oa-3");
    }
    // A graceful stop records node_stopped.
    sigterm(&node);
    let status = node.wait().unwrap();
    assert!(status.success(), "{status:?}");
}

/// SIGTERM through the `kill` command (no libc dependency in tests).
/// Sends `signal` (`TERM`, `HUP`, …) to the node.
fn signal(node: &Child, signal: &str) {
    let status = Command::new("kill")
        .args([format!("-{signal}"), node.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

fn sigterm(node: &Child) {
    signal(node, "TERM");
}

/// `standard_config` listening on `port`, its journal at `journal`.
fn config_on_port(mock_base: &str, journal: &std::path::Path, port: u16, extra: &str) -> String {
    standard_config(mock_base, journal, extra).replace(
        "listen = \"127.0.0.1:0\"",
        &format!("listen = \"127.0.0.1:{port}\""),
    )
}

/// The real binary on `standard_config` plus `extra`, on a free port, ready to serve.
struct BinaryNode {
    mock: MockUpstream,
    dir: tempfile::TempDir,
    config: std::path::PathBuf,
    text: String,
    base: String,
    client: reqwest::Client,
    child: Child,
}

async fn start_binary(extra: &str) -> BinaryNode {
    let (mock_base, mock) = start_mock().await;
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let text = config_on_port(&mock_base, &dir.path().join("journal"), port, extra);
    let config = dir.path().join("quotaroute.toml");
    std::fs::write(&config, &text).unwrap();
    let base = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::new();
    let child = spawn_node(&config);
    wait_ready(&client, &base).await;
    BinaryNode {
        mock,
        dir,
        config,
        text,
        base,
        client,
        child,
    }
}

/// `journal.request_events = "failures"`: the 429 and the decisions that passed over its key
/// are journaled, the routine successes are not, and the graceful stop leaves a snapshot that
/// holds their counts.
#[tokio::test]
async fn request_events_failures_journals_the_429_but_not_the_routine_successes() {
    let mut harness = Harness::start_editing(|text| {
        text.replace(
            "flush_every_ms = 10",
            "flush_every_ms = 10\nrequest_events = \"failures\"",
        )
    })
    .await;
    harness.mock.set_rules(vec![Rule::rate_limited(120)
        .for_key(upstream_key("oa-1"))
        .for_model("gpt-4o-mini")]);
    for _ in 0..12 {
        assert_eq!(harness.chat("team").await.status(), 200);
    }
    harness.settle().await;
    harness.stop().await;

    let journal = SledJournal::open(harness.dir.path().join("journal"), SledOptions::default())
        .expect("the stopped node released its journal");
    let events: Vec<Event> = journal
        .read_from(0)
        .map(|envelope| envelope.expect("readable").event)
        .collect();
    let count = |kind: &str| events.iter().filter(|e| e.kind() == kind).count();
    assert_eq!(count("request_succeeded"), 0, "routine successes stay out");
    assert_eq!(count("request_failed"), 1);
    assert_eq!(count("model_locked"), 1);
    assert_eq!(count("node_stopped"), 1);
    let decisions: Vec<&RouteDecided> = events
        .iter()
        .filter_map(|e| match e {
            Event::RouteDecided(decided) => Some(decided),
            _ => None,
        })
        .collect();
    assert!(
        !decisions.is_empty(),
        "decisions that skipped oa-1 explain the routing"
    );
    assert!(decisions
        .iter()
        .all(|d| d.skipped.iter().any(|s| s.connection == "oa-1")));
    assert!(
        journal.snapshots().iter().any(|s| s.is_ok()),
        "the graceful stop snapshots the counts the journal does not hold"
    );
}

/// SIGHUP reloads the config file in the running binary (contract): a combo added to the file
/// starts routing, and the lockout learned before the reload is still there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_reloads_the_file_and_keeps_what_was_learned() {
    let BinaryNode {
        mock,
        dir: _dir, // keeps the journal's temp dir alive
        config,
        text,
        base,
        client,
        child: mut node,
    } = start_binary("").await;
    mock.set_rules(vec![Rule::rate_limited(600).for_key(upstream_key("oa-1"))]);
    for _ in 0..4 {
        assert_eq!(chat(&client, &base, "team").await.status(), 200);
    }
    assert_eq!(
        chat(&client, &base, "solo").await.status(),
        404,
        "no combo `solo` yet"
    );

    let added = "\n[[combos]]\nname = \"solo\"\ntargets = [{ connection = \"oa-3\", model = \"gpt-4o-mini\", weight = 1 }]\n";
    std::fs::write(&config, format!("{text}{added}")).unwrap();
    signal(&node, "HUP");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let response = chat(&client, &base, "solo").await;
        if response.status() == 200 {
            assert_eq!(header(&response, "x-quotaroute-connection"), "oa-3");
            break;
        }
        assert!(Instant::now() < deadline, "SIGHUP did not load `solo`");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let lockouts = client
        .get(format!("{base}/admin/lockouts"))
        .bearer_auth(ADMIN_KEY)
        .send()
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap();
    assert_eq!(lockouts["lockouts"][0]["connection"], "oa-1", "{lockouts}");
    node.kill().unwrap();
    node.wait().unwrap();
}

/// SIGTERM drains: a request in flight when the signal comes still gets its answer, the
/// process exits 0, and the journal ends with `node_stopped`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_lets_the_request_in_flight_finish_and_records_node_stopped() {
    let BinaryNode {
        mock,
        dir,
        config: _,
        text: _,
        base,
        client,
        child: mut node,
    } = start_binary("").await;
    mock.set_rules(vec![Rule::always(Fault::Latency { ms: 800 })]);
    let in_flight = tokio::spawn({
        let (client, base) = (client.clone(), base.clone());
        async move { chat(&client, &base, "team").await }
    });
    // The signal comes once the upstream holds the request (its 800 ms are then running).
    let reached = Instant::now();
    while mock.stats().total == 0 {
        assert!(
            reached.elapsed() < Duration::from_secs(5),
            "the request never reached the mock"
        );
        tokio::task::yield_now().await;
    }
    sigterm(&node);
    let response = in_flight.await.expect("answered during the drain");
    assert_eq!(response.status(), 200);
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = node.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "still running after SIGTERM");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(status.code(), Some(0));
    let journal = SledJournal::open(dir.path().join("journal"), SledOptions::default()).unwrap();
    let last = journal.read_from(0).last().unwrap().unwrap();
    assert_eq!(last.event.kind(), "node_stopped", "{:?}", last.event);
}

/// `/healthz` is 503 `{"status":"replaying"}` while the binary replays a long journal, and
/// requests get a clear 503 meanwhile; then it is 200 and routes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthz_is_503_replaying_until_the_journal_is_replayed() {
    let (mock_base, _mock) = start_mock().await;
    let dir = tempfile::tempdir().unwrap();
    let journal_path = dir.path().join("journal");
    {
        let mut journal = SledJournal::open(&journal_path, SledOptions::default()).unwrap();
        let envelopes: Vec<Envelope> = (1..=200_000u64)
            .map(|seq| Envelope {
                schema_version: SCHEMA_VERSION,
                seq,
                at_ms: 1_764_000_000_000 + seq,
                event: succeeded("openai", "oa-1", "gpt-4o-mini", 10, 20),
            })
            .collect();
        for record in envelopes.chunks(24) {
            journal.write_batch(record).unwrap();
        }
        journal.flush().unwrap();
    }
    let port = free_port();
    let text = config_on_port(&mock_base, &journal_path, port, "");
    let config = dir.path().join("quotaroute.toml");
    std::fs::write(&config, &text).unwrap();
    let base = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::new();
    let mut node = spawn_node(&config);

    let deadline = Instant::now() + Duration::from_secs(60);
    let mut saw_replaying = false;
    let mut chat_while_replaying = None;
    loop {
        assert!(Instant::now() < deadline, "never ready");
        let Ok(response) = client.get(format!("{base}/healthz")).send().await else {
            tokio::time::sleep(Duration::from_millis(2)).await;
            continue; // not listening yet
        };
        if response.status() == 200 {
            break;
        }
        assert_eq!(response.status(), 503);
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["status"], "replaying", "{body}");
        saw_replaying = true;
        if chat_while_replaying.is_none() {
            let refused = chat(&client, &base, "team").await;
            chat_while_replaying = Some((refused.status(), refused.text().await.unwrap()));
        }
    }
    assert!(saw_replaying, "the 200k-event replay was never observed");
    if let Some((status, body)) = chat_while_replaying {
        // Unless the replay ended in between, the request was refused clearly.
        assert!(status == 503 || status == 200, "{status} {body}");
        if status == 503 {
            assert!(body.contains("replaying its journal"), "{body}");
        }
    }
    let ready = chat(&client, &base, "team").await;
    assert_eq!(ready.status(), 200);
    node.kill().unwrap();
    node.wait().unwrap();
}

/// A second node on a journal another node holds exits 1 at once and names the journal,
/// instead of waiting or corrupting it; the first node keeps serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_node_on_a_held_journal_exits_1_naming_it() {
    let (mock_base, _mock) = start_mock().await;
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("journal");
    let write_config = |name: &str, port: u16| {
        let text = config_on_port(&mock_base, &journal, port, "");
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path
    };
    let port = free_port();
    let first_config = write_config("first.toml", port);
    let second_config = write_config("second.toml", free_port());
    let base = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::new();
    let mut first = spawn_node(&first_config);
    wait_ready(&client, &base).await;

    let second = Command::new(env!("CARGO_BIN_EXE_quotaroute"))
        .args(["serve", "--config"])
        .arg(&second_config)
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert_eq!(second.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains(&journal.display().to_string()), "{stderr}");

    let response = chat(&client, &base, "team").await;
    assert_eq!(response.status(), 200, "the first node still serves");
    first.kill().unwrap();
    first.wait().unwrap();
}
