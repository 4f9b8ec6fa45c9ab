//! Makes one release fixture for `journal/tests/fixtures/releases/` (behaviour §12): the real
//! binary learns state under faults, stops gracefully (its snapshot), starts again on the same
//! journal and learns more, and is killed; the records the snapshot covers are then pruned, as
//! retention would. What remains — a snapshot and the records after it, in a real sled
//! directory — is copied to `$QR_FIXTURE_OUT/journal`, with `state.json`: the state this build
//! rebuilds from it at a fixed instant. Run by hand, with the build whose format is new:
//!
//! `QR_FIXTURE_OUT=journal/tests/fixtures/releases/<name> cargo test --test it make_release_fixture -- --ignored`
//!
//! Self-contained on purpose (no `support`): the same file builds in an older release's tree.

#![expect(
    clippy::unwrap_used,
    clippy::panic,
    reason = "test code: a failed step fails the test loudly"
)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use quotaroute_journal::{Journal, SledJournal, SledOptions};
use quotaroute_mock::{self as mock_upstream, Fault, MockUpstream, Rule};
use serde_json::{json, Value};

const CLIENT_KEY: &str = "sk-qr-fixture-client";
const ADMIN_KEY: &str = "qr-admin-fixture-key";

fn upstream_key(connection: &str) -> String {
    format!("sk-mock-{connection}-0123456789abcdef")
}

fn config_text(mock_base: &str, journal: &Path, port: u16) -> String {
    let mut text = format!(
        r#"
[server]
listen = "127.0.0.1:{port}"
api_keys = ["{CLIENT_KEY}"]
admin_key = "{ADMIN_KEY}"
shutdown_grace_ms = 2000

[journal]
path = "{journal}"
flush_every_ms = 10
request_events = "failures"

[defaults.breaker]
dedup_ms = 1
reset_ms = 3600000

[defaults.cooldown]
base_ms = 600000
max_ms = 600000

[[providers]]
name = "openai"
format = "openai"
base_url = "{mock_base}/v1"

[[providers]]
name = "anthropic"
format = "anthropic"
base_url = "{mock_base}/v1"

[providers.cooldown]
base_ms = 1
max_ms = 1
"#,
        journal = journal.display()
    );
    for (id, provider, weight) in [
        ("oa-1", "openai", 2),
        ("oa-2", "openai", 1),
        ("oa-3", "openai", 1),
        ("oa-4", "openai", 1),
        ("an-1", "anthropic", 1),
        ("an-2", "anthropic", 1),
    ] {
        text.push_str(&format!(
            "\n[[connections]]\nid = \"{id}\"\nprovider = \"{provider}\"\napi_key = \"{}\"\nweight = {weight}\n",
            upstream_key(id)
        ));
    }
    text.push_str(
        r#"
[[combos]]
name = "team"
targets = [
  { connection = "oa-1", model = "gpt-4o-mini", weight = 2 },
  { connection = "oa-2", model = "gpt-4o-mini", weight = 1 },
  { connection = "oa-3", model = "gpt-4o-mini", weight = 1 },
  { connection = "oa-4", model = "gpt-4o-mini", weight = 1 },
]

[[combos]]
name = "claude"
targets = [
  { connection = "an-1", model = "claude-3-5-haiku", weight = 1 },
  { connection = "an-2", model = "claude-3-5-haiku", weight = 1 },
]
"#,
    );
    text
}

fn spawn_node(config: &Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_quotaroute"))
        .args(["serve", "--config"])
        .arg(config)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

async fn wait_ready(client: &reqwest::Client, base: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(response) = client.get(format!("{base}/healthz")).send().await {
            if response.status() == 200 {
                return;
            }
        }
        assert!(Instant::now() < deadline, "{base} did not become ready");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn post(client: &reqwest::Client, url: String, body: Value) -> reqwest::Response {
    client
        .post(url)
        .bearer_auth(CLIENT_KEY)
        .json(&body)
        .send()
        .await
        .unwrap()
}

fn chat_body(model: &str) -> Value {
    json!({"model": model, "messages": [{"role": "user", "content": "hi"}]})
}

fn message_body(model: &str) -> Value {
    json!({"model": model, "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]})
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

fn open_released(path: &Path) -> SledJournal {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match SledJournal::open(path, SledOptions::default()) {
            Ok(journal) => return journal,
            Err(error) if Instant::now() < deadline => {
                let _ = error;
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(error) => panic!("{error}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "makes a release fixture; run by hand with QR_FIXTURE_OUT"]
async fn make_release_fixture() {
    let out = PathBuf::from(std::env::var("QR_FIXTURE_OUT").expect("QR_FIXTURE_OUT"));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let mock_base = format!("http://{}", listener.local_addr().unwrap());
    let mock = MockUpstream::new();
    tokio::spawn(mock_upstream::serve(listener, mock.clone()));
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("journal");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let config = dir.path().join("quotaroute.toml");
    std::fs::write(&config, config_text(&mock_base, &journal, port)).unwrap();
    let base = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::new();

    // Run 1, kept only in the snapshot of its graceful stop: oa-2 disabled by a 401, oa-1's
    // gpt-4o-mini locked by a 429, DRR deficits over the rest; stored responses bound.
    let mut node = spawn_node(&config);
    wait_ready(&client, &base).await;
    mock.set_rules(vec![
        Rule::rate_limited(3000).for_key(upstream_key("oa-1")),
        Rule::always(Fault::Status(401)).for_key(upstream_key("oa-2")),
    ]);
    for _ in 0..7 {
        let response = post(
            &client,
            format!("{base}/v1/chat/completions"),
            chat_body("team"),
        )
        .await;
        assert_eq!(response.status(), 200);
    }
    let mut response_ids = Vec::new();
    for _ in 0..2 {
        let response = post(
            &client,
            format!("{base}/v1/responses"),
            json!({"model": "team", "input": "hi"}),
        )
        .await;
        if response.status() == 200 {
            let body: Value = response.json().await.unwrap();
            if let Some(id) = body["id"].as_str() {
                response_ids.push(id.to_string());
            }
        }
    }
    let status = Command::new("kill")
        .args(["-TERM", &node.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    assert!(node.wait().unwrap().success());

    // Run 2, only in records after that snapshot: a 503 storm opens the anthropic breaker and
    // cools its keys down; oa-3 is cooled down by a 500.
    let mut node = spawn_node(&config);
    wait_ready(&client, &base).await;
    mock.set_rules(vec![
        Rule::always(Fault::Status(503)).for_model("claude-3-5-haiku"),
        Rule::always(Fault::Status(500))
            .for_key(upstream_key("oa-3"))
            .times(1),
    ]);
    for _ in 0..10 {
        let _ = post(
            &client,
            format!("{base}/v1/messages"),
            message_body("claude"),
        )
        .await;
        tokio::time::sleep(Duration::from_millis(3)).await;
    }
    for _ in 0..3 {
        let _ = post(
            &client,
            format!("{base}/v1/chat/completions"),
            chat_body("team"),
        )
        .await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    node.kill().unwrap();
    node.wait().unwrap();

    // Retention's work, done now: every record the snapshot covers goes.
    {
        let mut opened = open_released(&journal);
        let report = opened.prune(u64::MAX).unwrap();
        assert!(report.records_removed > 0, "{report:?}");
        opened.flush().unwrap();
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let _ = std::fs::remove_dir_all(&out);
    copy_dir(&journal, &out.join("journal"));

    // What this build rebuilds from the copy (opened elsewhere: the fixture stays as written).
    let scratch = tempfile::tempdir().unwrap();
    copy_dir(&out.join("journal"), scratch.path());
    let opened = open_released(scratch.path());
    let (state, report) = quotaroute_actors::recover_state(&opened);
    assert!(report.damaged.is_empty(), "{:?}", report.damaged);
    assert!(report.snapshot_seq.is_some(), "the snapshot is used");
    let at_ms = state.last_at_ms;
    let view = quotaroute::replay::state_at::view(&state, at_ms);
    let responses: serde_json::Map<String, Value> = response_ids
        .iter()
        .filter_map(|id| {
            let binding = state.responses.get(id, at_ms)?;
            let mut value = serde_json::to_value(binding).unwrap();
            // Its client (snapshot layout 5), which the binding's own shape leaves out.
            value["client"] = json!(binding.client);
            Some((id.clone(), value))
        })
        .collect();
    let expected = json!({
        "at_ms": at_ms,
        "snapshot_seq": report.snapshot_seq,
        "events_replayed": report.events_replayed,
        "last_seq": report.last_seq,
        "responses": responses,
        "state": view,
    });
    std::fs::write(
        out.join("state.json"),
        serde_json::to_string_pretty(&expected).unwrap() + "\n",
    )
    .unwrap();
}
