//! Clients who share the pool (behaviour §11): per-client keys, limits answered before anything
//! goes upstream, spend priced from the usage the upstream reported, folded from the journal
//! after `kill -9`, and `check` naming bad `[[clients]]`. Keys never show anywhere.

use std::process::{Command, Stdio};

use serde_json::{json, Value};

use crate::support::*;

const KEY_A: &str = "sk-qr-client-team-a-secret";
const KEY_B: &str = "sk-qr-client-team-b-secret";

/// sha256(KEY_B), as an operator would write it.
fn key_b_sha256() -> String {
    use std::fmt::Write as _;
    let digest = quotaroute::clients::digest_of(KEY_B).0;
    digest.iter().fold(String::new(), |mut hex, byte| {
        let _ = write!(hex, "{byte:02x}");
        hex
    })
}

/// Two clients: `team-a` (key inline) with `limits`, `team-b` (key as its digest) unlimited;
/// `gpt-4o-mini` priced high so a few requests cost cents.
fn clients_config(limits: &str) -> String {
    format!(
        r#"
[[clients]]
id = "team-a"
key = "{KEY_A}"
weight = 3
{limits}

[[clients]]
id = "team-b"
key_sha256 = "{}"

[[prices]]
model = "gpt-4o-mini"
input = 150.0
output = 600.0
cache_read = 75.0
cache_write = 150.0
"#,
        key_b_sha256()
    )
}

async fn chat_as(
    client: &reqwest::Client,
    base: &str,
    key: &str,
    model: &str,
) -> reqwest::Response {
    client
        .post(format!("{base}/v1/chat/completions"))
        .bearer_auth(key)
        .json(&json!({"model": model, "messages": [{"role": "user", "content": "hello there"}]}))
        .send()
        .await
        .unwrap()
}

async fn error_code(response: reqwest::Response) -> (u16, Option<String>, Value) {
    let status = response.status().as_u16();
    let retry_after = response
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_string());
    let body: Value = response.json().await.unwrap();
    (status, retry_after, body)
}

fn client_view<'a>(clients: &'a Value, id: &str) -> &'a Value {
    clients["clients"]
        .as_array()
        .unwrap()
        .iter()
        .find(|client| client["id"] == id)
        .unwrap_or_else(|| panic!("no client {id} in {clients}"))
}

/// USD the journal's charges to `client` cost at the test's prices (150 / 600 / 75 / 150 USD
/// per million), recomputed here from their token counts.
fn expected_spend(events: &[Value], client: &str) -> f64 {
    client_charges(events)
        .iter()
        .filter(|e| e["client"] == client)
        .map(|e| {
            let n = |k: &str| e[k].as_u64().unwrap() as f64;
            let fresh = n("tokens_in") - n("tokens_cached") - n("tokens_cache_write");
            (fresh * 150.0
                + n("tokens_out") * 600.0
                + n("tokens_cached") * 75.0
                + n("tokens_cache_write") * 150.0)
                / 1e6
        })
        .sum()
}

#[tokio::test]
async fn over_requests_per_min_is_429_with_retry_after_and_nothing_goes_upstream() {
    let harness = Harness::start_with(&clients_config("requests_per_min = 2")).await;
    for _ in 0..2 {
        assert_eq!(
            chat_as(&harness.client, &harness.base, KEY_A, "team")
                .await
                .status(),
            200
        );
    }
    let upstream_before = harness.mock.stats().total;
    for _ in 0..5 {
        let (status, retry_after, body) =
            error_code(chat_as(&harness.client, &harness.base, KEY_A, "team").await).await;
        assert_eq!(status, 429, "{body}");
        assert_eq!(body["error"]["code"], "client_rate_limited", "{body}");
        assert_eq!(body["error"]["type"], "rate_limit_error", "{body}");
        let seconds: u64 = retry_after.expect("Retry-After").parse().unwrap();
        assert!((1..=60).contains(&seconds), "{seconds}");
    }
    // The Anthropic endpoint answers in its own shape.
    let response = harness
        .client
        .post(harness.url("/v1/messages"))
        .header("x-api-key", KEY_A)
        .json(&json!({"model": "claude", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    let (status, _, body) = error_code(response).await;
    assert_eq!(status, 429);
    assert_eq!(body["type"], "error", "{body}");
    assert_eq!(body["error"]["code"], "client_rate_limited", "{body}");
    assert_eq!(
        harness.mock.stats().total,
        upstream_before,
        "a limited client sends nothing upstream"
    );
    // Another client is served meanwhile, and so are `server.api_keys` (client `default`).
    assert_eq!(
        chat_as(&harness.client, &harness.base, KEY_B, "team")
            .await
            .status(),
        200
    );
    assert_eq!(harness.chat("team").await.status(), 200);
    assert_eq!(harness.mock.stats().total, upstream_before + 2);

    harness.settle().await;
    let events = harness.journal_events().await;
    let limited: Vec<&Value> = events
        .iter()
        .filter(|e| e["kind"] == "client_limited")
        .collect();
    assert_eq!(
        limited.len(),
        1,
        "only the transition is journaled: {limited:?}"
    );
    assert_eq!(limited[0]["client"], "team-a");
    assert_eq!(limited[0]["limit"], "requests_per_min");
    assert!(limited[0]["retry_after_ms"].as_u64().unwrap() > 0);
    let charges = client_charges(&events);
    let usage_clients: Vec<&str> = charges
        .iter()
        .map(|e| e["client"].as_str().unwrap())
        .collect();
    assert_eq!(usage_clients, ["team-a", "team-a", "team-b", "default"]);

    let clients = harness.admin_get("/admin/clients").await;
    let a = client_view(&clients, "team-a");
    assert_eq!(a["weight"], 3);
    assert_eq!(a["in_flight"], 0);
    assert_eq!(a["queued"], 0);
    assert_eq!(
        a["usage"][0],
        json!({"window": "requests_per_min", "used": 2, "limit": 2})
    );
    assert_eq!(client_view(&clients, "team-b")["weight"], 1);
    let metrics = harness.admin_text("/metrics").await;
    assert!(
        metrics.contains(
            "quotaroute_client_limited_total{client=\"team-a\",limit=\"requests_per_min\"}"
        ),
        "{metrics}"
    );
    // Other tests in this process count too (the recorder is global): only the series' presence.
    assert!(metrics.contains("quotaroute_client_requests_total{client=\"team-b\"}"));
    assert!(metrics.contains("quotaroute_client_spend_usd{client=\"team-a\"}"));

    // The keys never show: not in the journal, the admin answers or the metrics.
    let journal = admin_journal_all(&harness.client, &harness.base).await;
    for text in [&journal, &clients.to_string(), &metrics] {
        for key in [KEY_A, KEY_B, CLIENT_KEY] {
            assert!(!text.contains(key), "a key leaked");
        }
        assert!(!text.contains(&key_b_sha256()), "a key digest leaked");
    }
}

#[tokio::test]
async fn a_combo_outside_models_is_403_model_not_allowed() {
    let harness = Harness::start_with(&clients_config("models = [\"team\"]")).await;
    assert_eq!(
        chat_as(&harness.client, &harness.base, KEY_A, "team")
            .await
            .status(),
        200
    );
    let before = harness.mock.stats().total;
    let (status, retry_after, body) =
        error_code(chat_as(&harness.client, &harness.base, KEY_A, "openai/gpt-4o-mini").await)
            .await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["error"]["code"], "model_not_allowed");
    assert_eq!(body["error"]["type"], "permission_error");
    assert_eq!(retry_after, None);
    assert_eq!(harness.mock.stats().total, before);
    // team-b has no `models`: any combo.
    assert_eq!(
        chat_as(&harness.client, &harness.base, KEY_B, "openai/gpt-4o-mini")
            .await
            .status(),
        200
    );
}

#[tokio::test]
async fn a_budget_stops_the_client_after_the_request_that_crossed_it() {
    // Each request costs ~0.4 ¢ at these prices: 2 ¢ is crossed after a handful.
    let harness = Harness::start_with(&clients_config(
        "budget_usd = 0.02\nbudget_period = \"day\"",
    ))
    .await;
    let mut served = 0;
    let mut crossed_at = None;
    for request in 0..50 {
        let response = chat_as(&harness.client, &harness.base, KEY_A, "team").await;
        if response.status() == 200 {
            served += 1;
            continue;
        }
        let (status, retry_after, body) = error_code(response).await;
        assert_eq!(status, 429, "{body}");
        assert_eq!(body["error"]["code"], "budget_exceeded", "{body}");
        // Until midnight UTC.
        let seconds: u64 = retry_after.unwrap().parse().unwrap();
        assert!((1..=86_400).contains(&seconds));
        crossed_at = Some(request);
        break;
    }
    assert!(crossed_at.is_some(), "never stopped");
    harness.settle().await;
    let events = harness.journal_events().await;
    let costs: Vec<f64> = client_charges(&events)
        .iter()
        .filter(|e| e["client"] == "team-a")
        .map(|e| e["cost_usd"].as_f64().unwrap())
        .collect();
    assert_eq!(costs.len(), served);
    let total: f64 = costs.iter().sum();
    let before_last: f64 = costs[..costs.len() - 1].iter().sum();
    assert!(before_last < 0.02, "admitted only while under budget");
    assert!(total >= 0.02, "the last one served crossed it");

    let clients = harness.admin_get("/admin/clients").await;
    let a = client_view(&clients, "team-a");
    let spend = a["spend_usd"].as_f64().unwrap();
    let expected = expected_spend(&events, "team-a");
    assert!((spend - expected).abs() < 1e-9, "{spend} vs {expected}");
    assert_eq!((spend * 100.0).round(), (expected * 100.0).round());
    assert_eq!(a["budget_usd"], 0.02);
    assert!(a["budget_resets_at_ms"]
        .as_u64()
        .unwrap()
        .is_multiple_of(86_400_000));
    // Another client still goes through.
    assert_eq!(
        chat_as(&harness.client, &harness.base, KEY_B, "team")
            .await
            .status(),
        200
    );
}

fn spawn_node(
    dir: &std::path::Path,
    mock_base: &str,
    port: u16,
    log: &std::path::Path,
) -> std::process::Child {
    let text = standard_config(mock_base, &dir.join("journal"), &clients_config("")).replace(
        "listen = \"127.0.0.1:0\"",
        &format!("listen = \"127.0.0.1:{port}\""),
    );
    let config = dir.join("quotaroute.toml");
    std::fs::write(&config, text).unwrap();
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .unwrap();
    Command::new(env!("CARGO_BIN_EXE_quotaroute"))
        .args(["serve", "--config"])
        .arg(&config)
        .env("RUST_LOG", "debug")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap()
}

/// Spend is folded from the journal: after `kill -9` the restarted binary shows the same spend,
/// exact against the prices, and keeps adding to it. The key is in no log line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spend_is_exact_to_the_cent_and_survives_kill_9() {
    let (mock_base, _mock) = start_mock().await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("node.log");
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::new();

    let mut node = KillOnDrop(spawn_node(dir.path(), &mock_base, port, &log));
    wait_ready(&client, &base).await;
    for _ in 0..5 {
        assert_eq!(chat_as(&client, &base, KEY_A, "team").await.status(), 200);
    }
    // Streams count too (their usage chunk).
    let response = client
        .post(format!("{base}/v1/chat/completions"))
        .bearer_auth(KEY_A)
        .json(&json!({"model": "team", "stream": true, "messages": [{"role": "user", "content": "stream please"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let _ = response.text().await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let before = admin_json(&client, &base, "/admin/clients").await;
    let spend_before = client_view(&before, "team-a")["spend_usd"]
        .as_f64()
        .unwrap();
    let journal: Vec<Value> = admin_journal_all(&client, &base)
        .await
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let expected = expected_spend(&journal, "team-a");
    assert_eq!(
        client_charges(&journal)
            .iter()
            .filter(|e| e["client"] == "team-a")
            .count(),
        6
    );
    assert!(spend_before > 0.0);
    assert!(
        (spend_before - expected).abs() < 1e-9,
        "{spend_before} vs {expected}"
    );
    node.0.kill().unwrap();
    node.0.wait().unwrap();

    let _node = KillOnDrop(spawn_node(dir.path(), &mock_base, port, &log));
    wait_ready(&client, &base).await;
    let after = admin_json(&client, &base, "/admin/clients").await;
    let a = client_view(&after, "team-a");
    assert_eq!(a["spend_usd"].as_f64().unwrap(), spend_before);
    assert_eq!(
        (a["spend_usd"].as_f64().unwrap() * 100.0).round(),
        (expected * 100.0).round()
    );
    let tokens_day = a["usage"][2]["used"].as_u64().unwrap();
    assert!(tokens_day > 0, "{a}");
    assert_eq!(chat_as(&client, &base, KEY_A, "team").await.status(), 200);
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    let later = admin_json(&client, &base, "/admin/clients").await;
    assert!(client_view(&later, "team-a")["spend_usd"].as_f64().unwrap() > spend_before);

    let logs = std::fs::read_to_string(&log).unwrap();
    assert!(logs.contains("team-a"), "the log names the client id");
    for key in [KEY_A, KEY_B] {
        assert!(!logs.contains(key), "a client key is in the log");
    }
}

/// `check` reports a duplicate id, a duplicate key and a keyless client in one run, each by its
/// key path, never the key.
#[test]
fn check_names_duplicate_ids_and_keys_and_keyless_clients() {
    let dir = tempfile::tempdir().unwrap();
    let text = standard_config("http://127.0.0.1:9", &dir.path().join("journal"), "")
        + &format!(
            r#"
[[clients]]
id = "team-a"
key = "{KEY_A}"

[[clients]]
id = "team-a"
key = "sk-qr-another-secret"

[[clients]]
id = "team-c"
key_env = "QR_TEST_TEAM_C_KEY"

[[clients]]
id = "team-d"

[[clients]]
id = "default"
key = "sk-qr-default-twin"
"#
        );
    let config = dir.path().join("quotaroute.toml");
    std::fs::write(&config, text).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_quotaroute"))
        .args(["check", "--config"])
        .arg(&config)
        .env("QR_TEST_TEAM_C_KEY", KEY_A)
        .output()
        .unwrap();
    assert!(!output.status.success());
    let text = String::from_utf8_lossy(&output.stdout).to_string()
        + &String::from_utf8_lossy(&output.stderr);
    for expected in [
        "clients[1].id: duplicate client id `team-a` (first at clients[0])",
        "clients[2].key_env: duplicate client key (same as clients[0].key)",
        "clients[3].key: missing: a client needs a key",
        "clients[4].id: duplicate client id `default`",
    ] {
        assert!(text.contains(expected), "{expected} not in:\n{text}");
    }
    for secret in [KEY_A, "sk-qr-another-secret", "sk-qr-default-twin"] {
        assert!(!text.contains(secret), "check printed a key:\n{text}");
    }
}

/// `POST /admin/reload` picks up a new client, and a client that still exists keeps its usage.
#[tokio::test]
async fn a_reload_adds_clients_and_keeps_the_usage_of_those_that_stay() {
    let harness = Harness::start_with(&clients_config("requests_per_min = 2")).await;
    for _ in 0..2 {
        assert_eq!(
            chat_as(&harness.client, &harness.base, KEY_A, "team")
                .await
                .status(),
            200
        );
    }
    let key_c = "sk-qr-client-team-c-secret";
    assert_eq!(
        chat_as(&harness.client, &harness.base, key_c, "team")
            .await
            .status(),
        401
    );
    let text = std::fs::read_to_string(&harness.config_path).unwrap()
        + &format!("\n[[clients]]\nid = \"team-c\"\nkey = \"{key_c}\"\n");
    std::fs::write(&harness.config_path, text).unwrap();
    assert_eq!(harness.admin_post("/admin/reload").await.status(), 200);
    assert_eq!(
        chat_as(&harness.client, &harness.base, key_c, "team")
            .await
            .status(),
        200
    );
    let (status, _, body) =
        error_code(chat_as(&harness.client, &harness.base, KEY_A, "team").await).await;
    assert_eq!(status, 429, "usage kept across the reload: {body}");
    let clients = harness.admin_get("/admin/clients").await;
    assert_eq!(client_view(&clients, "team-c")["in_flight"], 0);
}

/// One kept-alive connection whose requests change keys: each request is its own key's client
/// (a connection remembers the key it presented last, to skip hashing it again), and a wrong
/// key after a right one is refused.
#[tokio::test]
async fn one_connection_answers_each_key_as_its_own_client() {
    let harness = Harness::start_with(&clients_config("requests_per_min = 2")).await;
    // One idle connection kept: every request below goes on the same one.
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(1)
        .build()
        .unwrap();
    let base = &harness.base;
    let status = |response: reqwest::Response| response.status().as_u16();
    assert_eq!(status(chat_as(&client, base, KEY_A, "team").await), 200);
    let wrong = "sk-qr-client-team-a-secreT";
    assert_eq!(status(chat_as(&client, base, wrong, "team").await), 401);
    assert_eq!(status(chat_as(&client, base, KEY_B, "team").await), 200);
    assert_eq!(status(chat_as(&client, base, KEY_A, "team").await), 200);
    // team-a's two requests a minute are used; team-b has no limit.
    assert_eq!(status(chat_as(&client, base, KEY_A, "team").await), 429);
    assert_eq!(status(chat_as(&client, base, KEY_B, "team").await), 200);
    assert_eq!(status(chat_as(&client, base, wrong, "team").await), 401);
}

/// A key a reload takes away is refused on a connection that presented it before the reload.
#[tokio::test]
async fn a_key_a_reload_takes_away_is_refused_on_a_kept_alive_connection() {
    let harness = Harness::start_with(&clients_config("")).await;
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(1)
        .build()
        .unwrap();
    let base = &harness.base;
    assert_eq!(chat_as(&client, base, KEY_A, "team").await.status(), 200);
    let key_c = "sk-qr-client-team-a-rotated";
    let text = std::fs::read_to_string(&harness.config_path)
        .unwrap()
        .replace(KEY_A, key_c);
    std::fs::write(&harness.config_path, text).unwrap();
    assert_eq!(harness.admin_post("/admin/reload").await.status(), 200);
    assert_eq!(chat_as(&client, base, KEY_A, "team").await.status(), 401);
    assert_eq!(chat_as(&client, base, key_c, "team").await.status(), 200);
    assert_eq!(chat_as(&client, base, KEY_A, "team").await.status(), 401);
}

/// `POST /v1/chat/completions` as `key` with the request id `request_id`; returns the status
/// and the body's text (a stream's SSE when `stream`).
async fn chat_with_id(
    harness: &Harness,
    key: &str,
    request_id: &str,
    stream: bool,
) -> (u16, String) {
    let response = harness
        .client
        .post(harness.url("/v1/chat/completions"))
        .bearer_auth(key)
        .header("x-request-id", request_id)
        .json(&json!({
            "model": "team",
            "stream": stream,
            "messages": [{"role": "user", "content": "hello there"}]
        }))
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.text().await.unwrap())
}

/// Journal schema 3: every request event names the client that sent it (`route_decided`,
/// `request_failed`, `request_succeeded`), and `request_succeeded` carries the price: the
/// configured price × the tokens the upstream reported. Schema 5: it carries the client's
/// whole charge too (its period spend after it), and no `client_usage` repeats it.
#[tokio::test]
async fn request_events_name_their_client_and_carry_the_price() {
    use quotaroute_mock::{Fault, Rule};
    let harness = Harness::start_with(&clients_config("")).await;
    // Each client's request meets one 500 first and fails over within the request.
    let requests = [
        (KEY_A, "req-a", false, "team-a"),
        (KEY_B, "req-b", true, "team-b"),
        (CLIENT_KEY, "req-default", false, "default"),
    ];
    for (key, request_id, stream, _) in requests {
        harness
            .mock
            .set_rules(vec![Rule::always(Fault::Status(500)).times(1)]);
        let (status, body) = chat_with_id(&harness, key, request_id, stream).await;
        assert_eq!(status, 200, "{request_id}: {body}");
        // The next request finds every key serving again (the 500 cooled one down).
        harness.settle().await;
        for connection in ["oa-1", "oa-2", "oa-3"] {
            let cleared = harness
                .admin_post(&format!("/admin/connections/{connection}/clear"))
                .await;
            assert!(cleared.status().is_success(), "clear {connection}");
        }
        harness
            .admin_post("/admin/providers/openai/breaker/reset")
            .await;
    }
    harness.settle().await;
    let events = harness.journal_events().await;
    let of = |kind: &str, request_id: &str| -> Vec<&Value> {
        events
            .iter()
            .filter(|e| e["kind"] == kind && e["request_id"] == request_id)
            .collect()
    };
    for (_, request_id, _, client) in requests {
        let decided = of("route_decided", request_id);
        assert_eq!(decided.len(), 1, "{request_id}: {decided:?}");
        assert_eq!(decided[0]["client"], client, "{}", decided[0]);
        let failed = of("request_failed", request_id);
        assert_eq!(failed.len(), 1, "{request_id}: {failed:?}");
        assert_eq!(failed[0]["client"], client, "{}", failed[0]);
        assert_eq!(failed[0]["status"], 500, "{}", failed[0]);
        let succeeded = of("request_succeeded", request_id);
        assert_eq!(succeeded.len(), 1, "{request_id}: {succeeded:?}");
        let success = succeeded[0];
        assert_eq!(success["client"], client, "{success}");
        assert!(success["tokens_out"].as_u64().unwrap() > 0, "{success}");
        // 150 / 600 / 75 / 150 USD per million tokens (see `clients_config`).
        let n = |k: &str| success[k].as_u64().unwrap() as f64;
        let fresh = n("tokens_in") - n("tokens_cached") - n("tokens_cache_write");
        let priced = (fresh * 150.0
            + n("tokens_out") * 600.0
            + n("tokens_cached") * 75.0
            + n("tokens_cache_write") * 150.0)
            / 1e6;
        let cost = success["cost_usd"]
            .as_f64()
            .unwrap_or_else(|| panic!("no cost_usd: {success}"));
        assert!(
            (cost - priced).abs() < 1e-12,
            "{cost} vs {priced}: {success}"
        );
        assert!(
            of("client_usage", request_id).is_empty(),
            "{request_id}: the success carries the charge"
        );
        // Each client's first request: its period spend is this one's price.
        let spend = success["period_spend_pusd"].as_u64().unwrap() as f64 / 1e12;
        assert!(
            (spend - priced).abs() < 1e-9,
            "{spend} vs {priced}: {success}"
        );
        assert!(success["period_start_ms"].as_u64().is_some(), "{success}");
    }
    // The stream's event says so: the streaming path priced it too.
    assert_eq!(of("request_succeeded", "req-b")[0]["stream"], true);
}

/// A model without a price: `request_succeeded.cost_usd` is null, the client still named.
#[tokio::test]
async fn an_unpriced_model_leaves_cost_usd_null() {
    let config = clients_config("").replace("model = \"gpt-4o-mini\"", "model = \"gpt-other\"");
    let harness = Harness::start_with(&config).await;
    let (status, body) = chat_with_id(&harness, KEY_A, "req-unpriced", false).await;
    assert_eq!(status, 200, "{body}");
    harness.settle().await;
    let events = harness.journal_events().await;
    let success = events
        .iter()
        .find(|e| e["kind"] == "request_succeeded" && e["request_id"] == "req-unpriced")
        .expect("request_succeeded");
    assert_eq!(success["client"], "team-a", "{success}");
    assert!(success["cost_usd"].is_null(), "{success}");
}
