//! Spare quota only over real HTTP (behaviour §13): a spare client (`class = "spare"`, or a
//! request with `x-quotaroute-class: spare` from a client allowed to send it) is served only by
//! accounts whose window is forecast to reset with quota unused; otherwise 429
//! `no_spare_quota` in the client's error shape, `Retry-After` to when spare quota is next
//! forecast and `x-should-retry: false` past `client_retry_max_ms`. The header is refused from
//! a client not allowed to send it and never reaches an upstream; spare requests wait behind
//! every normal waiter and bind no conversation group.

use std::time::Duration;

use quotaroute_mock::{Fault, Rule};
use serde_json::{json, Value};

use crate::support::{header, upstream_key, Harness, CLIENT_KEY};

const SPARE_KEY: &str = "sk-qr-spare-batch";
const MARKING_KEY: &str = "sk-qr-spare-marking";

/// The contract's first margin, 0.2 (the arithmetic below reads it; the default is larger, by
/// measurement). Two clients besides `default`: `batch` (every request spare) and `jobs` (may
/// mark single requests spare); a combo per Anthropic key; a one-key combo `queued` whose key takes one
/// request at a time and whose requests wait up to 5 s.
fn extra() -> String {
    format!(
        r#"
[defaults.pacing]
spare_margin = 0.2

[[clients]]
id = "batch"
key = "{SPARE_KEY}"
class = "spare"

[[clients]]
id = "jobs"
key = "{MARKING_KEY}"
allow_spare_header = true

[[connections]]
id = "q-1"
provider = "openai"
api_key = "{q1}"
max_concurrent = 1

[[combos]]
name = "queued"
queue_ms = 5000
targets = [{{ connection = "q-1", model = "gpt-4o-mini" }}]

[[combos]]
name = "c1"
targets = [{{ connection = "an-1", model = "claude-3-5-haiku" }}]

[[combos]]
name = "c2"
targets = [{{ connection = "an-2", model = "claude-3-5-haiku" }}]

[[combos]]
name = "c3"
targets = [{{ connection = "an-3", model = "claude-3-5-haiku" }}]
"#,
        q1 = upstream_key("q-1")
    )
}

fn unix_s_in(seconds: u64) -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + seconds
}

/// Anthropic's headers for a 5-hour window `utilization` used that resets in `reset_in_s`.
fn five_hours(utilization: &str, reset_in_s: u64) -> Vec<(String, String)> {
    vec![
        (
            "anthropic-ratelimit-unified-status".into(),
            "allowed".into(),
        ),
        (
            "anthropic-ratelimit-unified-5h-utilization".into(),
            utilization.into(),
        ),
        (
            "anthropic-ratelimit-unified-5h-reset".into(),
            unix_s_in(reset_in_s).to_string(),
        ),
    ]
}

/// `POST /v1/messages` for `model` as the client of `key`, with `headers`.
async fn message_as(
    harness: &Harness,
    key: &str,
    model: &str,
    headers: &[(&str, &str)],
) -> reqwest::Response {
    let mut request = harness
        .client
        .post(harness.url("/v1/messages"))
        .bearer_auth(key)
        .json(&json!({"model": model, "max_tokens": 16,
            "messages": [{"role": "user", "content": "hi"}]}));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.send().await.unwrap()
}

async fn chat_as(
    harness: &Harness,
    key: &str,
    model: &str,
    headers: &[(&str, &str)],
) -> reqwest::Response {
    let mut request = harness
        .client
        .post(harness.url("/v1/chat/completions"))
        .bearer_auth(key)
        .json(&json!({"model": model, "messages": [{"role": "user", "content": "hi"}]}));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.send().await.unwrap()
}

/// Gives each Anthropic key its 5-hour reading (`an-i` gets `readings[i-1]`) by one normal
/// request through its own combo.
async fn read_windows(harness: &Harness, readings: [(&str, u64); 3]) {
    for (i, (utilization, reset_in_s)) in readings.into_iter().enumerate() {
        let key = upstream_key(&format!("an-{}", i + 1));
        harness
            .mock
            .set_response_headers(&key, five_hours(utilization, reset_in_s));
        let response = message_as(harness, CLIENT_KEY, &format!("c{}", i + 1), &[]).await;
        assert_eq!(response.status(), 200);
    }
    harness.settle().await;
}

/// The no_spare_quota refusal: its `Retry-After` (seconds, if any) and the body.
async fn no_spare(response: reqwest::Response) -> (Option<u64>, Value) {
    assert_eq!(response.status(), 429);
    let retry_after = header(&response, "retry-after").parse().ok();
    let should_retry = header(&response, "x-should-retry");
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "no_spare_quota", "{body}");
    if retry_after.is_some_and(|s| s > 60) {
        assert_eq!(should_retry, "false", "{body}");
    }
    (retry_after, body)
}

#[tokio::test]
async fn a_spare_client_is_refused_no_spare_quota_when_the_pool_is_on_pace() {
    let harness = Harness::start_with(&extra()).await;
    // Each key half used with half its 5-hour window to run: on pace.
    read_windows(
        &harness,
        [("0.50", 9_000), ("0.50", 9_000), ("0.50", 9_000)],
    )
    .await;
    let served_before = harness.mock.stats().total;
    let (retry_after, body) = no_spare(message_as(&harness, SPARE_KEY, "claude", &[]).await).await;
    // Anthropic's shape.
    assert_eq!(body["type"], "error", "{body}");
    assert_eq!(body["error"]["type"], "rate_limit_error", "{body}");
    // With nothing more used, 499 ‰ left passes pace 1.2 with 499/1201 of 5 h to run:
    // 2 h 04 min 48 s before the reset, 25 min 12 s from now.
    let retry_after = retry_after.expect("a reset is known");
    assert!((1_490..=1_530).contains(&retry_after), "{retry_after}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("UTC, in 26 min"), "{message}");
    let blocked = body["error"]["blocked"].as_array().unwrap();
    assert_eq!(blocked.len(), 3, "{body}");
    assert!(blocked.iter().all(|b| b["reason"] == "no_spare"), "{body}");
    // Nothing went upstream; a normal client is served as before.
    assert_eq!(harness.mock.stats().total, served_before);
    assert_eq!(
        message_as(&harness, CLIENT_KEY, "claude", &[])
            .await
            .status(),
        200
    );
}

/// The OpenAI shape, and no reading at all: nothing is forecast to be lost, so no
/// `Retry-After` can be promised.
#[tokio::test]
async fn with_no_reading_a_spare_request_is_refused_without_a_retry_time() {
    let harness = Harness::start_with(&extra()).await;
    let (retry_after, body) = no_spare(chat_as(&harness, SPARE_KEY, "team", &[]).await).await;
    assert_eq!(retry_after, None, "{body}");
    assert_eq!(body["error"]["type"], "rate_limit_error", "{body}");
    assert_eq!(harness.mock.stats().total, 0);
}

#[tokio::test]
async fn a_spare_client_is_served_only_by_a_window_forecast_to_reset_unused() {
    let harness = Harness::start_with(&extra()).await;
    // an-1: 70 % left, resetting in 30 min (pace 7); an-2 and an-3 on pace.
    read_windows(
        &harness,
        [("0.30", 1_800), ("0.50", 9_000), ("0.50", 9_000)],
    )
    .await;
    for _ in 0..6 {
        let response = message_as(&harness, SPARE_KEY, "claude", &[]).await;
        assert_eq!(response.status(), 200);
        assert_eq!(header(&response, "x-quotaroute-connection"), "an-1");
    }
    harness.settle().await;
    let events = harness.journal_events().await;
    let spare_decisions: Vec<&Value> = events
        .iter()
        .filter(|e| e["kind"] == "route_decided" && e["client"] == "batch")
        .collect();
    assert_eq!(spare_decisions.len(), 6);
    for decided in spare_decisions {
        let skipped: Vec<(&str, &str)> = decided["skipped"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                (
                    s["connection"].as_str().unwrap(),
                    s["reason"].as_str().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            skipped,
            [("an-2", "no_spare"), ("an-3", "no_spare")],
            "{decided}"
        );
    }
}

#[tokio::test]
async fn the_class_header_marks_a_request_spare_only_for_a_client_allowed_to_send_it() {
    let harness = Harness::start_with(&extra()).await;
    read_windows(
        &harness,
        [("0.30", 1_800), ("0.50", 9_000), ("0.50", 9_000)],
    )
    .await;
    let spare = [("x-quotaroute-class", "spare")];
    // `jobs` may: its marked request is spare (on an-1 only: the pool is on pace elsewhere)...
    for _ in 0..3 {
        let response = message_as(&harness, MARKING_KEY, "claude", &spare).await;
        assert_eq!(response.status(), 200);
        assert_eq!(header(&response, "x-quotaroute-connection"), "an-1");
    }
    // ... and refused where only on-pace windows serve; unmarked it is a normal request.
    no_spare(message_as(&harness, MARKING_KEY, "c2", &spare).await).await;
    assert_eq!(
        message_as(&harness, MARKING_KEY, "c2", &[]).await.status(),
        200
    );
    // The header never reaches an upstream.
    let heads = harness.mock.recent_heads();
    assert!(!heads.is_empty());
    assert!(
        heads
            .iter()
            .all(|head| !head.to_ascii_lowercase().contains("x-quotaroute-class")),
        "{heads:?}"
    );
    // `default` may not: a 400 naming the setting, and nothing sent upstream.
    let before = harness.mock.stats().total;
    let refused = message_as(&harness, CLIENT_KEY, "claude", &spare).await;
    assert_eq!(refused.status(), 400);
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["error"]["code"], "invalid_request", "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("allow_spare_header = true"), "{message}");
    // Another value is refused, not ignored, even from a client that may mark.
    let odd = message_as(
        &harness,
        MARKING_KEY,
        "claude",
        &[("x-quotaroute-class", "urgent")],
    )
    .await;
    assert_eq!(odd.status(), 400);
    assert_eq!(harness.mock.stats().total, before);
}

/// Behaviour §10: a spare request never holds a conversation group; the same hint from a
/// normal client binds one.
#[tokio::test]
async fn a_spare_request_binds_no_conversation_group() {
    let harness = Harness::start_with(&extra()).await;
    read_windows(
        &harness,
        [("0.30", 1_800), ("0.10", 1_800), ("0.20", 1_800)],
    )
    .await;
    let hint = [("x-quotaroute-affinity", "nightly-eval")];
    for _ in 0..3 {
        let response = message_as(&harness, SPARE_KEY, "claude", &hint).await;
        assert_eq!(response.status(), 200);
    }
    assert_eq!(
        message_as(&harness, CLIENT_KEY, "claude", &hint)
            .await
            .status(),
        200
    );
    harness.settle().await;
    let events = harness.journal_events().await;
    let decided = |client: &str| -> Vec<Value> {
        events
            .iter()
            .filter(|e| e["kind"] == "route_decided" && e["client"] == client)
            .cloned()
            .collect()
    };
    let spare = decided("batch");
    assert_eq!(spare.len(), 3);
    assert!(
        spare
            .iter()
            .all(|d| d["group"].is_null() && d["affinity"] == "none"),
        "{spare:?}"
    );
    let bound: Vec<&Value> = events
        .iter()
        .filter(|e| e["kind"] == "affinity_bound")
        .collect();
    assert_eq!(bound.len(), 1, "{bound:?}");
    assert_eq!(bound[0]["client"], "default");
}

/// Behaviour §11 with §13: while a key at its `max_concurrent` has waiters, a spare waiter
/// that came first goes after a normal one that came later.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spare_waiter_goes_after_a_normal_waiter_that_came_later() {
    let harness = Harness::start_with(&extra()).await;
    // q-1: a Codex window 20 % used resetting in 20 min (spare).
    harness.mock.set_response_headers(
        &upstream_key("q-1"),
        vec![
            ("x-codex-primary-used-percent".into(), "20".into()),
            ("x-codex-primary-window-minutes".into(), "300".into()),
            (
                "x-codex-primary-reset-at".into(),
                unix_s_in(1_200).to_string(),
            ),
        ],
    );
    assert_eq!(
        chat_as(&harness, CLIENT_KEY, "queued", &[]).await.status(),
        200
    );
    harness.settle().await;
    harness
        .mock
        .set_rules(vec![Rule::always(Fault::Latency { ms: 400 })]);
    let send = |key: &'static str| {
        let client = harness.client.clone();
        let url = harness.url("/v1/chat/completions");
        tokio::spawn(async move {
            let response = client
                .post(url)
                .bearer_auth(key)
                .json(&json!({"model": "queued", "messages": [{"role": "user", "content": "hi"}]}))
                .send()
                .await
                .unwrap();
            (response.status().as_u16(), std::time::Instant::now())
        })
    };
    // The slot's holder, then a spare waiter, then a normal one.
    let holder = send(CLIENT_KEY);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let spare = send(SPARE_KEY);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let normal = send(CLIENT_KEY);
    let (holder, spare, normal) = (
        holder.await.unwrap(),
        spare.await.unwrap(),
        normal.await.unwrap(),
    );
    assert_eq!((holder.0, spare.0, normal.0), (200, 200, 200));
    assert!(
        normal.1 + Duration::from_millis(200) < spare.1,
        "the normal waiter finished {:?} after the spare one",
        normal.1.saturating_duration_since(spare.1)
    );
}

/// `class`, `allow_spare_header` and `spare_margin` are checked at load: each wrong value is
/// named with its key.
#[test]
fn check_names_bad_spare_settings() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("bad.toml");
    let text = crate::support::standard_config("http://127.0.0.1:9", dir.path(), "")
        + "\n[defaults.pacing]\nspare_margin = -0.1\n"
        + "\n[[clients]]\nid = \"batch\"\nkey = \"sk-qr-batch-1\"\nclass = \"leftovers\"\n"
        + "\n[[clients]]\nid = \"jobs\"\nkey = \"sk-qr-jobs-1\"\nallow_spare_header = \"yes\"\n"
        + "\n[[combos]]\nname = \"pair\"\npacing = { spare_margin = 40 }\ntargets = [{ connection = \"oa-1\", model = \"gpt-4o-mini\" }]\n";
    std::fs::write(&config, text).unwrap();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_quotaroute"))
        .args(["check", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    for expected in [
        "defaults.pacing.spare_margin: must be from 0 to 15",
        "clients[0].class: `leftovers` is not one of `normal`, `spare`",
        "allow_spare_header",
        "combos.pair.pacing.spare_margin: must be from 0 to 15",
    ] {
        assert!(stderr.contains(expected), "{expected}: {stderr}");
    }
}

/// A good spare config loads into types: the class on the client, the margin on the pacing
/// settings (the combo's own over the defaults).
#[test]
fn spare_settings_load_into_types() {
    use quotaroute::actors::policy::clients::class::RequestClass;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("good.toml");
    let text = crate::support::standard_config("http://127.0.0.1:9", &dir.path().join("j"), "")
        + "\n[defaults.pacing]\nspare_margin = 0.5\n"
        + "\n[[clients]]\nid = \"batch\"\nkey = \"sk-qr-batch-1\"\nclass = \"spare\"\n"
        + "\n[[clients]]\nid = \"jobs\"\nkey = \"sk-qr-jobs-1\"\nallow_spare_header = true\n"
        + "\n[[combos]]\nname = \"pair\"\npacing = { spare_margin = 0 }\ntargets = [{ connection = \"oa-1\", model = \"gpt-4o-mini\" }]\n";
    std::fs::write(&path, text).unwrap();
    let config = quotaroute::config::load(&path).unwrap_or_else(|errors| panic!("{errors}"));
    let client = |id: &str| config.clients.iter().find(|c| c.id == id).unwrap();
    assert_eq!(
        (client("batch").class, client("batch").allow_spare_header),
        (RequestClass::Spare, false)
    );
    assert_eq!(
        (client("jobs").class, client("jobs").allow_spare_header),
        (RequestClass::Normal, true)
    );
    assert_eq!(client("default").class, RequestClass::Normal);
    assert_eq!(config.defaults.pacing.spare_margin, 0.5);
    let topology = quotaroute::config::topology::topology(&config, "digest");
    let margin = |name: &str| {
        topology
            .combos
            .iter()
            .find(|c| c.name == name)
            .unwrap()
            .pacing
            .spare_margin
    };
    assert_eq!((margin("pair"), margin("team")), (0.0, 0.5));
}

/// Codex headers for a 5-hour window `used_pct` used that resets in `reset_in_s`.
fn codex_five_hours(used_pct: u32, reset_in_s: u64) -> Vec<(String, String)> {
    vec![
        ("x-codex-primary-used-percent".into(), used_pct.to_string()),
        ("x-codex-primary-window-minutes".into(), "300".into()),
        (
            "x-codex-primary-reset-at".into(),
            unix_s_in(reset_in_s).to_string(),
        ),
    ]
}

/// A spare client reads its own stored response whatever the windows say: reading spends no
/// quota, so it is no spare request.
#[tokio::test]
async fn a_spare_client_reads_its_stored_response_when_no_quota_is_spare() {
    let harness = Harness::start_with(&extra()).await;
    for key in ["oa-1", "oa-2", "oa-3"] {
        harness
            .mock
            .set_response_headers(&upstream_key(key), codex_five_hours(20, 1_200));
    }
    // Readings on every key, through normal requests.
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..24 {
        let response = chat_as(&harness, CLIENT_KEY, "team", &[]).await;
        assert_eq!(response.status(), 200);
        seen.insert(header(&response, "x-quotaroute-connection"));
    }
    assert_eq!(seen.len(), 3, "{seen:?}");
    harness.settle().await;
    let created = harness
        .client
        .post(harness.url("/v1/responses"))
        .bearer_auth(SPARE_KEY)
        .json(&json!({"model": "team", "input": "hello"}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 200);
    let value: Value = created.json().await.unwrap();
    let id = value["id"].as_str().unwrap().to_owned();
    // Every key on pace now: no spare quota anywhere.
    for key in ["oa-1", "oa-2", "oa-3"] {
        harness
            .mock
            .set_response_headers(&upstream_key(key), codex_five_hours(50, 9_000));
    }
    for _ in 0..24 {
        assert_eq!(
            chat_as(&harness, CLIENT_KEY, "team", &[]).await.status(),
            200
        );
    }
    harness.settle().await;
    no_spare(chat_as(&harness, SPARE_KEY, "team", &[]).await).await;
    let read = harness
        .client
        .get(harness.url(&format!("/v1/responses/{id}")))
        .bearer_auth(SPARE_KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(read.status(), 200);
}
