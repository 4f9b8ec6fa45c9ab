//! Behaviour §12 with the real binary: a journal written by a newer build is refused (exit 1,
//! both versions named, the way back given) and left byte for byte as it was; an upgrade
//! under load — snapshot, records pruned, stop, start — keeps `/admin/state` exactly.

#![expect(
    clippy::unwrap_used,
    reason = "test code: a failed step fails the test loudly"
)]
#![expect(
    clippy::too_many_lines,
    reason = "one upgrade scenario per test, step by step"
)]

use crate::support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use quotaroute_actors::snapshot::STATE_LAYOUT;
use quotaroute_journal::{Formats, Journal, SledJournal, SledOptions, FORMATS_FILE};
use quotaroute_mock::{Fault, MockUpstream, Rule};
use support::*;

/// A node process, killed if a test fails before it stops it.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

fn spawn_node(config: &Path) -> Running {
    Running(spawn_child(config))
}

fn spawn_child(config: &Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_quotaroute"))
        .args(["serve", "--config"])
        .arg(config)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

fn sigterm_and_wait(Running(node): &mut Running) {
    let status = Command::new("kill")
        .args(["-TERM", &node.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(status) = node.try_wait().unwrap() {
            assert!(status.success(), "{status:?}");
            return;
        }
        assert!(Instant::now() < deadline, "still running after SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Every file under `dir`, by relative path, with its length and crc32.
fn contents(dir: &Path) -> BTreeMap<PathBuf, (usize, u32)> {
    fn walk(root: &Path, dir: &Path, into: &mut BTreeMap<PathBuf, (usize, u32)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(root, &path, into);
            } else {
                let bytes = std::fs::read(&path).unwrap();
                into.insert(
                    path.strip_prefix(root).unwrap().to_path_buf(),
                    (bytes.len(), crc32fast::hash(&bytes)),
                );
            }
        }
    }
    let mut files = BTreeMap::new();
    walk(dir, dir, &mut files);
    files
}

/// Opens a journal a stopped node has just let go of.
fn open_released(path: &Path) -> SledJournal {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match SledJournal::open(path, SledOptions::default()) {
            Ok(journal) => return journal,
            Err(error) => {
                assert!(Instant::now() < deadline, "{error}");
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}

struct Node {
    mock: MockUpstream,
    dir: tempfile::TempDir,
    config: PathBuf,
    journal: PathBuf,
    base: String,
    client: reqwest::Client,
}

/// `standard_config` plus `extra` on a free port; not started.
async fn prepare(extra: &str) -> Node {
    prepare_editing(|text| text + extra).await
}

/// `standard_config` as `edit` rewrites it, on a free port; not started.
async fn prepare_editing(edit: impl FnOnce(String) -> String) -> Node {
    let (mock_base, mock) = start_mock().await;
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("journal");
    let port = free_port();
    let text = edit(standard_config(&mock_base, &journal, "")).replace(
        "listen = \"127.0.0.1:0\"",
        &format!("listen = \"127.0.0.1:{port}\""),
    );
    let config = dir.path().join("quotaroute.toml");
    std::fs::write(&config, text).unwrap();
    Node {
        mock,
        dir,
        config,
        journal,
        base: format!("http://127.0.0.1:{port}"),
        client: reqwest::Client::new(),
    }
}

/// `serve` run to its end: exit code and stderr.
fn serve_once(config: &Path) -> (Option<i32>, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_quotaroute"))
        .args(["serve", "--config"])
        .arg(config)
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_journal_from_a_newer_build_is_refused_and_left_byte_for_byte() {
    let node = prepare("").await;
    let mut child = spawn_node(&node.config);
    wait_ready(&node.client, &node.base).await;
    assert_eq!(chat(&node.client, &node.base, "team").await.status(), 200);
    sigterm_and_wait(&mut child);
    let recorded = Formats::read(&node.journal)
        .unwrap()
        .expect("formats recorded");
    assert_eq!(recorded.state_layout, u32::from(STATE_LAYOUT));

    // What a newer build leaves: its formats file, and a snapshot of a layout this one lacks.
    let newer_layout = STATE_LAYOUT + 1;
    {
        let mut journal = open_released(&node.journal);
        let last = journal.last_seq().unwrap().unwrap();
        journal
            .put_snapshot(last, 1_800_000_000_000, newer_layout, b"from the future")
            .unwrap();
        journal.flush().unwrap();
    }
    Formats {
        state_layout: u32::from(newer_layout),
        written_by: "quotaroute 9.9.9".into(),
        ..recorded.clone()
    }
    .write(&node.journal)
    .unwrap();
    std::thread::sleep(Duration::from_millis(200)); // sled lets go of its lock
    let before = contents(&node.journal);

    let (code, stderr) = serve_once(&node.config);
    assert_eq!(code, Some(1), "{stderr}");
    let versions =
        format!("snapshot state layout {newer_layout}, this build reads up to {STATE_LAYOUT}");
    assert!(stderr.contains(&versions), "{stderr}");
    assert!(stderr.contains("Upgrading and rolling back"), "{stderr}");
    assert!(stderr.contains("nothing was changed"), "{stderr}");
    assert!(
        stderr.contains(&node.journal.display().to_string()),
        "{stderr}"
    );
    assert_eq!(
        contents(&node.journal),
        before,
        "the journal directory is unchanged"
    );

    // Without the formats file (deleted by hand), the newer snapshot itself is refused: its
    // checksum holds, so it is not damage to skip. sled has opened the directory by then (and
    // may tidy its own files), but nothing of this build is written: every record and snapshot
    // stays as it was, and no formats file appears.
    std::fs::remove_file(node.journal.join(FORMATS_FILE)).unwrap();
    let entries = open_released(&node.journal).raw_entries();
    std::thread::sleep(Duration::from_millis(200));
    let (code, stderr) = serve_once(&node.config);
    assert_eq!(code, Some(1), "{stderr}");
    let versions = format!(
        "snapshot state layout version {newer_layout} is newer than this build's {STATE_LAYOUT}"
    );
    assert!(stderr.contains(&versions), "{stderr}");
    assert!(stderr.contains("Upgrading and rolling back"), "{stderr}");
    assert!(!node.journal.join(FORMATS_FILE).exists());
    assert_eq!(open_released(&node.journal).raw_entries(), entries);
    drop(node.mock);
    drop(node.dir);
}

/// `POST` `body` to `path` as a client.
async fn post(node: &Node, path: &str, body: serde_json::Value) -> reqwest::Response {
    node.client
        .post(format!("{}{path}", node.base))
        .bearer_auth(CLIENT_KEY)
        .json(&body)
        .send()
        .await
        .unwrap()
}

/// `requests` concurrent requests to `path`, four at a time (answers are not checked: some
/// fail on purpose).
async fn load(node: &Node, path: &str, model: &str, requests: usize) {
    let body = if path == "/v1/messages" {
        serde_json::json!({"model": model, "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]})
    } else {
        serde_json::json!({"model": model, "messages": [{"role": "user", "content": "hi"}]})
    };
    for wave in 0..requests.div_ceil(4) {
        let in_wave = (requests - wave * 4).min(4);
        let sends = (0..in_wave).map(|_| post(node, path, body.clone()));
        futures_util::future::join_all(sends).await;
    }
}

/// `/admin/state` as it will read at `at_ms`, without `credentials` (when this process loaded
/// each key: not learned state, and new in every process).
async fn state_at(node: &Node, at_ms: u64) -> serde_json::Value {
    let mut state = admin_json(
        &node.client,
        &node.base,
        &format!("/admin/state?at_ms={at_ms}"),
    )
    .await;
    state.as_object_mut().unwrap().remove("credentials");
    state
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// Every leaf path where `a` and `b` differ.
fn differences(path: &str, a: &serde_json::Value, b: &serde_json::Value, out: &mut Vec<String>) {
    use serde_json::Value;
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for key in x.keys().chain(y.keys().filter(|k| !x.contains_key(*k))) {
                let none = Value::Null;
                differences(
                    &format!("{path}.{key}"),
                    x.get(key).unwrap_or(&none),
                    y.get(key).unwrap_or(&none),
                    out,
                );
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (x, y)) in x.iter().zip(y).enumerate() {
                differences(&format!("{path}[{i}]"), x, y, out);
            }
        }
        _ if a != b => out.push(format!("{path}: before {a}, after {b}")),
        _ => {}
    }
}

/// Behaviour §12 and §8, end to end: state learned under load with faults — a lockout, a key
/// disabled by its 401, cooldowns, an open breaker, DRR deficits, response bindings — partly
/// only in a snapshot (the records it covers pruned, as retention does) and partly only in the
/// records after it, survives a stop and a start: `/admin/state` at one instant is the same
/// before and after, field for field. (Conversation affinity's bindings join this test with
/// behaviour §10.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upgrade_under_load_keeps_admin_state_exactly() {
    let node = prepare_editing(|text| {
        text.replace(
            "flush_every_ms = 10",
            "flush_every_ms = 10\nrequest_events = \"failures\"",
        )
        .replacen(
            "\n[[connections]]",
            "\n[providers.cooldown]\nbase_ms = 1\nmax_ms = 1\n\n[[connections]]",
            1,
        ) + "\n[defaults.breaker]\ndedup_ms = 1\nreset_ms = 3600000\n[defaults.cooldown]\nbase_ms = 600000\nmax_ms = 600000\n"
            + &format!(
                "\n[[connections]]\nid = \"oa-4\"\nprovider = \"openai\"\napi_key = \"{}\"\nweight = 1\n",
                upstream_key("oa-4")
            )
            + "\n[[combos]]\nname = \"duo\"\ntargets = [\n  { connection = \"oa-3\", model = \"gpt-4o-mini\", weight = 2 },\n  { connection = \"oa-4\", model = \"gpt-4o-mini\", weight = 1 },\n]\n\n[[combos]]\nname = \"solo4\"\ntargets = [{ connection = \"oa-4\", model = \"gpt-4o-mini\", weight = 1 }]\n"
    })
    .await;

    // Run 1, then its graceful stop's snapshot: oa-1 locked by a 429, oa-2 disabled by a 401,
    // deficits over the rest, two stored responses bound (to oa-4, through `solo4`).
    let mut child = spawn_node(&node.config);
    wait_ready(&node.client, &node.base).await;
    node.mock.set_rules(vec![
        Rule::rate_limited(3000).for_key(upstream_key("oa-1")),
        Rule::always(Fault::Status(401)).for_key(upstream_key("oa-2")),
    ]);
    load(&node, "/v1/chat/completions", "team", 12).await;
    let mut bound = Vec::new();
    for _ in 0..2 {
        let response = post(
            &node,
            "/v1/responses",
            serde_json::json!({"model": "solo4", "input": "hi"}),
        )
        .await;
        assert_eq!(response.status(), 200);
        let connection = header(&response, "x-quotaroute-connection");
        let body: serde_json::Value = response.json().await.unwrap();
        bound.push((body["id"].as_str().unwrap().to_string(), connection));
    }
    sigterm_and_wait(&mut child);

    // Run 2, kept only in records after that snapshot (every request journaled, so its stop
    // takes no snapshot): a 503 storm opens the anthropic breaker, combo `duo` (oa-3 and oa-4,
    // 2:1) is left with deficits, then a 500 cools oa-3 down.
    let text = std::fs::read_to_string(&node.config).unwrap();
    std::fs::write(
        &node.config,
        text.replace("request_events = \"failures\"", "request_events = \"all\""),
    )
    .unwrap();
    let mut child = spawn_node(&node.config);
    wait_ready(&node.client, &node.base).await;
    node.mock.set_rules(vec![
        Rule::always(Fault::Status(503)).for_model("claude-3-5-haiku")
    ]);
    load(&node, "/v1/messages", "claude", 12).await;
    node.mock.clear_rules();
    for _ in 0..2 {
        assert_eq!(chat(&node.client, &node.base, "duo").await.status(), 200);
    }
    node.mock.set_rules(vec![Rule::always(Fault::Status(500))
        .for_key(upstream_key("oa-3"))
        .times(1)]);
    let _ = chat(&node.client, &node.base, "team").await;
    node.mock.clear_rules();
    tokio::time::sleep(Duration::from_millis(200)).await;

    // One instant after the restart will be done: both views are read at it.
    let at_ms = now_ms() + 20_000;
    let before = state_at(&node, at_ms).await;
    assert_eq!(
        provider(&before, "anthropic")["breaker"],
        "OPEN",
        "{before}"
    );
    assert_eq!(
        connection(&before, "oa-1")["lockouts"][0]["model"],
        "gpt-4o-mini"
    );
    assert_eq!(connection(&before, "oa-2")["disabled"]["reason"], "auth");
    assert!(
        connection(&before, "oa-3")["cooldown_remaining_ms"]
            .as_u64()
            .unwrap()
            > 0
    );
    let duo = before["combos"]
        .as_array()
        .unwrap()
        .iter()
        .find(|combo| combo["name"] == "duo")
        .unwrap();
    let deficits: Vec<i64> = duo["targets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["deficit"].as_i64().unwrap())
        .collect();
    assert!(deficits.iter().any(|d| *d != 0), "{deficits:?}");
    sigterm_and_wait(&mut child);

    // Retention's work: every record the snapshot covers goes; run 2's records stay.
    {
        let mut journal = open_released(&node.journal);
        let report = journal.prune(u64::MAX).unwrap();
        assert!(report.records_removed > 0, "{report:?}");
        let kinds: Vec<&'static str> = journal
            .read_from(0)
            .map(|envelope| envelope.unwrap().event.kind())
            .collect();
        assert!(
            !kinds.contains(&"connection_disabled"),
            "the 401 lives only in the snapshot"
        );
        assert!(!kinds.contains(&"response_bound"), "so do the bindings");
        assert!(
            kinds.contains(&"breaker_transition"),
            "the storm lives only in records: {kinds:?}"
        );
        journal.flush().unwrap();
    }
    std::thread::sleep(Duration::from_millis(200));

    let mut child = spawn_node(&node.config);
    wait_ready(&node.client, &node.base).await;
    let after = state_at(&node, at_ms).await;
    assert!(now_ms() < at_ms, "the restart took longer than the margin");
    let mut diffs = Vec::new();
    differences("state", &before, &after, &mut diffs);
    assert!(
        diffs.is_empty(),
        "{} fields differ:\n{}",
        diffs.len(),
        diffs.join("\n")
    );
    // The bindings: each stored response is still served by the account that holds it.
    for (id, connection) in &bound {
        let response = node
            .client
            .get(format!("{}/v1/responses/{id}", node.base))
            .bearer_auth(CLIENT_KEY)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{id}");
        assert_eq!(
            &header(&response, "x-quotaroute-connection"),
            connection,
            "{id}"
        );
    }
    sigterm_and_wait(&mut child);
}

/// Journal schema 3 (client and price on request events) as a rollback meets it: a journal
/// whose event schema is newer than the build's is refused with both versions named — from
/// the formats file, and, without it, from a record of that schema — and left as it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_newer_event_schema_is_refused_with_both_versions_named() {
    use quotaroute_journal::{Envelope, SCHEMA_VERSION};
    let node = prepare("").await;
    let mut child = spawn_node(&node.config);
    wait_ready(&node.client, &node.base).await;
    assert_eq!(chat(&node.client, &node.base, "team").await.status(), 200);
    sigterm_and_wait(&mut child);
    let recorded = Formats::read(&node.journal)
        .unwrap()
        .expect("formats recorded");
    assert_eq!(recorded.event_schema, u32::from(SCHEMA_VERSION));

    // What the next schema's build leaves: its formats file and a record of its schema.
    let newer = SCHEMA_VERSION + 1;
    {
        let mut journal = open_released(&node.journal);
        let last = journal.last_seq().unwrap().unwrap();
        journal
            .write_batch(&[Envelope {
                schema_version: newer,
                seq: last + 1,
                at_ms: 1_800_000_000_000,
                event: quotaroute_journal::testkit::sample_event(12, 1),
            }])
            .unwrap();
        journal.flush().unwrap();
    }
    Formats {
        event_schema: u32::from(newer),
        written_by: "quotaroute 9.9.9".into(),
        ..recorded.clone()
    }
    .write(&node.journal)
    .unwrap();
    std::thread::sleep(Duration::from_millis(200)); // sled lets go of its lock
    let before = contents(&node.journal);

    let (code, stderr) = serve_once(&node.config);
    assert_eq!(code, Some(1), "{stderr}");
    let versions = format!("event schema {newer}, this build reads up to {SCHEMA_VERSION}");
    assert!(stderr.contains(&versions), "{stderr}");
    assert!(stderr.contains("Upgrading and rolling back"), "{stderr}");
    assert_eq!(contents(&node.journal), before, "the journal is unchanged");

    // Without the formats file, the record itself is refused (its checksum holds: not damage).
    std::fs::remove_file(node.journal.join(FORMATS_FILE)).unwrap();
    let entries = open_released(&node.journal).raw_entries();
    std::thread::sleep(Duration::from_millis(200));
    let (code, stderr) = serve_once(&node.config);
    assert_eq!(code, Some(1), "{stderr}");
    let versions =
        format!("event schema version {newer} is newer than this build's {SCHEMA_VERSION}");
    assert!(stderr.contains(&versions), "{stderr}");
    assert_eq!(open_released(&node.journal).raw_entries(), entries);
    drop(node.mock);
    drop(node.dir);
}
