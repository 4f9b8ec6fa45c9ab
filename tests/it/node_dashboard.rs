//! The operator's dashboard (issue 15): `GET /ui`, its live feed `GET /admin/events` and its
//! incident picture `GET /admin/timeline.svg`, over HTTP; then the page itself in Debian's
//! chromium, driven by playwright-core (`tests/browser/dashboard.mjs`) against the real
//! binary: it asks for the key, refuses a wrong one clearly, shows the pool, shows a lockout
//! caused by a 429 within a second, and clears it (and a cooldown) with a click; its clients
//! panel shows what `/admin/clients` says, a client refused with 429 `client_rate_limited`
//! among them as limited.
//!
//! `.ci/run` installs chromium and `npm ci --prefix tests/browser`; without them the browser
//! test says so and does nothing else, except in CI (`CI` set), where it fails.
//! `QUOTAROUTE_UPDATE_SCREENSHOTS=1` writes its screenshots to `docs/` (else to a temp dir).

#![expect(
    clippy::unwrap_used,
    clippy::panic,
    reason = "test code: a failed step fails the test loudly"
)]
#![expect(
    clippy::too_many_lines,
    reason = "one dashboard session per test, step by step"
)]

use crate::support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use quotaroute_mock::{Fault, ResetForm, Rule};
use serde_json::Value;
use support::clients::{clean_command, not_installed, run_bounded};
use support::*;

const CHROMIUM: &str = "/usr/bin/chromium";
/// The whole browser run (launch included) may take this long.
const BROWSER_TIMEOUT: Duration = Duration::from_secs(55);

fn without_admin_key(text: String) -> String {
    let line = format!("admin_key = \"{ADMIN_KEY}\"\n");
    assert!(text.contains(&line));
    text.replace(&line, "")
}

async fn get(client: &reqwest::Client, url: &str, key: Option<&str>) -> reqwest::Response {
    let mut request = client.get(url);
    if let Some(key) = key {
        request = request.bearer_auth(key);
    }
    request.send().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_and_its_feeds_are_404_without_an_admin_key() {
    let mut harness = Harness::start_editing(without_admin_key).await;
    for path in [
        "/ui",
        "/ui/",
        "/ui/dashboard.js",
        "/ui/dashboard.css",
        "/admin/events",
        "/admin/timeline.svg",
    ] {
        let response = get(&harness.client, &harness.url(path), Some(ADMIN_KEY)).await;
        assert_eq!(response.status(), 404, "{path}");
    }
    harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_is_served_from_the_binary_and_its_feeds_need_the_admin_key() {
    let mut harness = Harness::start().await;
    let page = get(&harness.client, &harness.url("/ui"), None).await;
    assert_eq!(page.status(), 200);
    assert!(header(&page, "content-type").starts_with("text/html"));
    let csp = header(&page, "content-security-policy");
    assert!(
        csp.contains("script-src 'self'") && csp.contains("connect-src 'self'"),
        "{csp}"
    );
    let html = page.text().await.unwrap();
    assert!(html.contains("/ui/dashboard.js") && html.contains("/ui/dashboard.css"));
    assert!(
        html.contains("type=\"password\""),
        "the page asks for a key"
    );
    let script = get(&harness.client, &harness.url("/ui/dashboard.js"), None).await;
    assert!(header(&script, "content-type").starts_with("text/javascript"));
    let script = script.text().await.unwrap();
    assert!(script.contains("sessionStorage") && !script.contains("localStorage.setItem"));
    assert!(script.contains("/admin/events") && script.contains("Authorization"));

    for path in ["/admin/events", "/admin/timeline.svg"] {
        let none = get(&harness.client, &harness.url(path), None).await;
        assert_eq!(none.status(), 401, "{path} without a key");
        let client_key = get(&harness.client, &harness.url(path), Some(CLIENT_KEY)).await;
        assert_eq!(client_key.status(), 403, "{path} with a client key");
    }
    harness.stop().await;
}

/// Reads SSE events off `response` until `wanted` accepts one or `deadline` passes.
async fn next_event(
    response: &mut reqwest::Response,
    buffer: &mut String,
    deadline: Instant,
    mut wanted: impl FnMut(&str, &Value) -> bool,
) -> Option<(String, Value)> {
    loop {
        while let Some(end) = buffer.find("\n\n") {
            let block: String = buffer.drain(..end + 2).collect();
            let mut name = "message".to_string();
            let mut data = String::new();
            for line in block.lines() {
                if let Some(value) = line.strip_prefix("event: ") {
                    name = value.to_string();
                } else if let Some(value) = line.strip_prefix("data: ") {
                    data.push_str(value);
                }
            }
            if data.is_empty() {
                continue;
            }
            let value: Value = serde_json::from_str(&data).unwrap();
            if wanted(&name, &value) {
                return Some((name, value));
            }
        }
        let left = deadline.checked_duration_since(Instant::now())?;
        match tokio::time::timeout(left, response.chunk()).await {
            Ok(Ok(Some(chunk))) => buffer.push_str(std::str::from_utf8(&chunk).unwrap()),
            _ => return None,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_feed_pushes_a_lockout_within_a_second_and_traffic_every_second() {
    let mut harness = Harness::start().await;
    let mut events = get(
        &harness.client,
        &harness.url("/admin/events"),
        Some(ADMIN_KEY),
    )
    .await;
    assert_eq!(events.status(), 200);
    assert_eq!(header(&events, "content-type"), "text/event-stream");
    let mut buffer = String::new();
    let (_, first) = next_event(
        &mut events,
        &mut buffer,
        Instant::now() + Duration::from_secs(2),
        |name, _| name == "state",
    )
    .await
    .expect("a state event at once");
    assert_eq!(first["connections"].as_array().unwrap().len(), 6);
    // The same document as `GET /admin/state` (its providers do not count down at rest).
    assert_eq!(
        first["providers"],
        harness.admin_get("/admin/state").await["providers"]
    );

    harness.mock.add_rule(
        Rule::always(Fault::Status429 {
            reset: ResetForm::RetryAfterSeconds(300),
        })
        .for_model("gpt-4o-mini")
        .times(1),
    );
    let answer = harness.chat("team").await;
    assert_eq!(answer.status(), 200, "failed over past the 429");
    let answered = Instant::now();
    let (_, locked) = next_event(
        &mut events,
        &mut buffer,
        answered + Duration::from_secs(1),
        |name, state| {
            name == "state"
                && state["connections"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|c| !c["lockouts"].as_array().unwrap().is_empty())
        },
    )
    .await
    .expect("the lockout pushed within a second of the answer");
    let lock = locked["connections"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c["lockouts"].as_array().unwrap().clone())
        .next()
        .unwrap();
    assert_eq!(lock["model"], "gpt-4o-mini");
    assert_eq!(lock["reason"], "rate_limited");
    assert_eq!(lock["error_code"], 429);

    // Traffic: the two attempts of that request (the 429 and the success), as deltas.
    let mut attempts = 0;
    let mut failures = 0;
    let deadline = Instant::now() + Duration::from_secs(3);
    while attempts < 2 {
        let Some((_, traffic)) = next_event(&mut events, &mut buffer, deadline, |name, _| {
            name == "traffic"
        })
        .await
        else {
            panic!("traffic counted {attempts} attempts, {failures} failures");
        };
        assert!(traffic["interval_ms"].as_u64().unwrap() >= 1000);
        for c in traffic["connections"].as_array().unwrap() {
            attempts += c["attempts"].as_u64().unwrap();
            failures += c["failures"].as_u64().unwrap();
        }
    }
    assert_eq!((attempts, failures), (2, 1));

    // An open feed does not hold the drain (the harness's grace is 2 s).
    let stopping = Instant::now();
    harness.stop().await;
    assert!(
        stopping.elapsed() < Duration::from_millis(1500),
        "stop took {:?} with a subscriber",
        stopping.elapsed()
    );
    let deadline = Instant::now() + Duration::from_secs(1);
    let ended = next_event(&mut events, &mut buffer, deadline, |name, value| {
        name == "error" && value["reason"] == "stopping"
    })
    .await;
    assert!(ended.is_some(), "the feed says why it ends");
}

const KEY_A: &str = "sk-qr-dashboard-team-a";
const KEY_B: &str = "sk-qr-dashboard-team-b";

/// Two clients beside `default` (`server.api_keys`): `team-a` limited to 2 requests a minute,
/// a budget and one combo; `team-b` unlimited. `gpt-4o-mini` priced so each request costs.
fn clients_config() -> String {
    format!(
        r#"
[[clients]]
id = "team-a"
key = "{KEY_A}"
weight = 3
requests_per_min = 2
budget_usd = 5.0
models = ["team"]

[[clients]]
id = "team-b"
key = "{KEY_B}"

[[prices]]
model = "gpt-4o-mini"
input = 150.0
output = 600.0
"#
    )
}

async fn chat_as(harness: &Harness, key: &str) -> reqwest::Response {
    harness
        .client
        .post(harness.url("/v1/chat/completions"))
        .bearer_auth(key)
        .json(&serde_json::json!({"model": "team", "messages": [{"role": "user", "content": "hello there"}]}))
        .send()
        .await
        .unwrap()
}

fn client_of<'a>(clients: &'a Value, id: &str) -> &'a Value {
    clients["clients"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == id)
        .unwrap_or_else(|| panic!("no client {id} in {clients}"))
}

fn window_used(client: &Value, window: &str) -> u64 {
    client["usage"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["window"] == window)
        .unwrap()["used"]
        .as_u64()
        .unwrap()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_feed_pushes_clients_when_their_usage_changes_and_never_a_key() {
    let mut harness = Harness::start_with(&clients_config()).await;
    let mut events = get(
        &harness.client,
        &harness.url("/admin/events"),
        Some(ADMIN_KEY),
    )
    .await;
    assert_eq!(events.status(), 200);
    let mut buffer = String::new();
    let mut pushed = Vec::new();
    let (_, first) = next_event(
        &mut events,
        &mut buffer,
        Instant::now() + Duration::from_secs(2),
        |name, _| name == "clients",
    )
    .await
    .expect("a clients event at once");
    // The same document as `GET /admin/clients` (nothing moves at rest).
    assert_eq!(first, harness.admin_get("/admin/clients").await);
    let ids: Vec<&str> = first["clients"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert!(
        ids.contains(&"team-a") && ids.contains(&"team-b"),
        "{ids:?}"
    );
    let a = client_of(&first, "team-a");
    assert_eq!(a["weight"], 3);
    assert_eq!(a["models"], serde_json::json!(["team"]));
    assert_eq!(a["budget_usd"], 5.0);
    assert_eq!(a["limited"], Value::Null);
    assert_eq!(client_of(&first, "team-b")["models"], Value::Null);
    pushed.push(first.to_string());

    // Nothing changed: no second clients event, though traffic keeps coming.
    let quiet = next_event(
        &mut events,
        &mut buffer,
        Instant::now() + Duration::from_millis(1500),
        |name, _| name == "clients",
    )
    .await;
    assert!(
        quiet.is_none(),
        "a clients event with nothing changed: {quiet:?}"
    );

    assert_eq!(chat_as(&harness, KEY_A).await.status(), 200);
    let answered = Instant::now();
    let (_, after_one) = next_event(
        &mut events,
        &mut buffer,
        answered + Duration::from_secs(2),
        |name, clients| {
            name == "clients"
                && client_of(clients, "team-a")["spend_usd"].as_f64().unwrap() > 0.0
                && client_of(clients, "team-a")["in_flight"] == 0
        },
    )
    .await
    .expect("team-a's spend pushed after its request");
    let a = client_of(&after_one, "team-a");
    let spent_one = a["spend_usd"].as_f64().unwrap();
    assert_eq!(window_used(a, "requests_per_min"), 1);
    let tokens_one = window_used(a, "tokens_per_min");
    assert!(tokens_one > 0, "{a}");
    assert_eq!(window_used(a, "tokens_per_day"), tokens_one);
    let b = client_of(&after_one, "team-b");
    assert_eq!(b["spend_usd"], 0.0);
    assert_eq!(window_used(b, "tokens_per_min"), 0);
    pushed.push(after_one.to_string());

    // The second request fills its requests_per_min: the third is refused and the client is
    // shown limited, with when it frees.
    assert_eq!(chat_as(&harness, KEY_A).await.status(), 200);
    let refused = chat_as(&harness, KEY_A).await;
    assert_eq!(refused.status(), 429);
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["error"]["code"], "client_rate_limited", "{body}");
    let (_, limited) = next_event(
        &mut events,
        &mut buffer,
        Instant::now() + Duration::from_secs(2),
        |name, clients| {
            name == "clients"
                && window_used(client_of(clients, "team-a"), "tokens_per_min") > tokens_one
                && !client_of(clients, "team-a")["limited"].is_null()
        },
    )
    .await
    .expect("team-a pushed as limited after its 429");
    let a = client_of(&limited, "team-a");
    assert!(a["spend_usd"].as_f64().unwrap() > spent_one, "{a}");
    assert_eq!(window_used(a, "requests_per_min"), 2);
    assert_eq!(a["limited"]["limit"], "requests_per_min");
    let retry = a["limited"]["retry_after_ms"].as_u64().unwrap();
    assert!(retry > 0 && retry <= 60_000, "{retry}");
    assert_eq!(client_of(&limited, "team-b")["limited"], Value::Null);
    pushed.push(limited.to_string());

    for text in &pushed {
        for secret in [KEY_A, KEY_B, CLIENT_KEY, ADMIN_KEY] {
            assert!(!text.contains(secret), "a key in a clients event: {text}");
            let digest = hex(&quotaroute::clients::digest_of(secret).0);
            assert!(
                !text.contains(&digest),
                "a key digest in a clients event: {text}"
            );
        }
    }
    harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_clients_configured_the_clients_event_holds_the_default_client() {
    let mut harness = Harness::start().await;
    let mut events = get(
        &harness.client,
        &harness.url("/admin/events"),
        Some(ADMIN_KEY),
    )
    .await;
    let mut buffer = String::new();
    let (_, first) = next_event(
        &mut events,
        &mut buffer,
        Instant::now() + Duration::from_secs(2),
        |name, _| name == "clients",
    )
    .await
    .expect("a clients event at once");
    let clients = first["clients"].as_array().unwrap();
    assert_eq!(clients.len(), 1, "{first}");
    assert_eq!(clients[0]["id"], "default");
    assert_eq!(clients[0]["models"], Value::Null);
    assert_eq!(clients[0]["limited"], Value::Null);
    assert_eq!(clients[0]["budget_usd"], Value::Null);
    harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_timeline_is_the_replay_svg_of_the_last_hour() {
    let mut harness = Harness::start().await;
    harness.mock.add_rule(
        Rule::always(Fault::Status429 {
            reset: ResetForm::RetryAfterSeconds(300),
        })
        .for_model("gpt-4o-mini")
        .times(1),
    );
    assert_eq!(harness.chat("team").await.status(), 200);
    let locked = harness.admin_get("/admin/lockouts").await["lockouts"][0].clone();
    let connection = locked["connection"].as_str().unwrap().to_string();

    let response = get(
        &harness.client,
        &harness.url("/admin/timeline.svg?since=1h"),
        Some(ADMIN_KEY),
    )
    .await;
    assert_eq!(response.status(), 200);
    assert_eq!(header(&response, "content-type"), "image/svg+xml");
    let svg = response.text().await.unwrap();
    let document = roxmltree::Document::parse(&svg).unwrap();
    let title = document
        .descendants()
        .find(|n| n.attribute("class") == Some("title"))
        .and_then(|n| n.text())
        .unwrap();
    assert!(title.ends_with("(1h)") || title.contains("(1h"), "{title}");
    // Every connection of the config has its lane, traffic or not.
    let lanes: Vec<&str> = document
        .descendants()
        .filter_map(|n| n.attribute("data-connection"))
        .collect();
    assert_eq!(lanes, ["oa-1", "oa-2", "oa-3", "an-1", "an-2", "an-3"]);
    let lane = document
        .descendants()
        .find(|n| n.attribute("data-connection") == Some(connection.as_str()))
        .unwrap();
    let lock_title = format!("{connection}/gpt-4o-mini locked (rate_limited)");
    assert!(
        lane.descendants()
            .any(|n| n.text().is_some_and(|t| t.starts_with(&lock_title))),
        "the lane of {connection} draws its lock:\n{svg}"
    );
    assert!(lane
        .descendants()
        .any(|n| n.attribute("class") == Some("failures")));

    let bad = get(
        &harness.client,
        &harness.url("/admin/timeline.svg?since=yesterdayish"),
        Some(ADMIN_KEY),
    )
    .await;
    assert_eq!(bad.status(), 400);
    harness.stop().await;
}

fn browser_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/browser")
}

/// Starts the real binary on `config` and waits until it is ready.
async fn start_binary(config_path: &Path, base: &str) -> KillOnDrop {
    let node = KillOnDrop(
        Command::new(env!("CARGO_BIN_EXE_quotaroute"))
            .args(["serve", "--config"])
            .arg(config_path)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let client = reqwest::Client::new();
    wait_ready(&client, base).await;
    node
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_in_a_real_browser() {
    if !Path::new(CHROMIUM).is_file() {
        return not_installed("chromium", "apt-get install chromium, as .ci/run does");
    }
    if !browser_dir().join("node_modules/playwright-core").is_dir() {
        return not_installed(
            "playwright-core",
            "npm ci --ignore-scripts --prefix tests/browser",
        );
    }
    let (mock_base, mock) = start_mock().await;
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    // Cooldowns long enough to still be there when the driver clicks them away.
    let cooldowns =
        "\n[defaults.cooldown]\nbase_ms = 20000\nmax_ms = 60000\n".to_string() + &clients_config();
    let config = standard_config(&mock_base, &dir.path().join("journal"), &cooldowns).replace(
        "listen = \"127.0.0.1:0\"",
        &format!("listen = \"127.0.0.1:{port}\""),
    );
    let config_path = dir.path().join("quotaroute.toml");
    std::fs::write(&config_path, config).unwrap();
    let base = format!("http://127.0.0.1:{port}");
    let _node = start_binary(&config_path, &base).await;

    let shots = if std::env::var("QUOTAROUTE_UPDATE_SCREENSHOTS").is_ok_and(|v| v == "1") {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("docs")
    } else {
        dir.path().join("shots")
    };
    std::fs::create_dir_all(&shots).unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let mut command = clean_command("node");
    command
        .arg(browser_dir().join("dashboard.mjs"))
        .current_dir(browser_dir())
        .env("HOME", &home)
        .env("QR_NODE", &base)
        .env("QR_ADMIN_KEY", ADMIN_KEY)
        .env("QR_CLIENT_KEY", CLIENT_KEY)
        .env("QR_LIMITED_KEY", KEY_A)
        .env("QR_OTHER_KEY", KEY_B)
        .env("QR_MOCK", &mock_base)
        .env("QR_SHOTS", &shots)
        .env("QR_CHROMIUM", CHROMIUM);
    let run = tokio::task::spawn_blocking(move || run_bounded(command, BROWSER_TIMEOUT))
        .await
        .unwrap();
    eprintln!("{}", run.describe());
    let last = run.stdout.lines().last().unwrap_or_default();
    let report: Value = serde_json::from_str(last).unwrap_or_else(|e| {
        panic!(
            "the driver's last line is not JSON ({e}):\n{}",
            run.describe()
        )
    });
    assert_eq!(report["ok"], true, "{}", run.describe());
    assert!(run.success(), "{}", run.describe());
    // Each connection's card showed the cached share of input tokens `/admin/state` gives.
    let shares = report["cached_shares"].as_array().unwrap();
    assert!(!shares.is_empty(), "{report}");
    // Combo `team`'s card showed its affinity hit rate as `/admin/state` counted it: held
    // turns, and the cached share of the input its successes were served.
    let affinity = &report["affinity"];
    assert!(affinity["held"].as_u64().unwrap() >= 1, "{report}");
    let input = affinity["input_tokens"].as_u64().unwrap();
    let cached = affinity["cached_input_tokens"].as_u64().unwrap();
    assert!(cached > 0 && cached < input, "{report}");
    assert_eq!(
        affinity["cached_share"].as_f64().unwrap(),
        cached as f64 / input as f64
    );
    let shown = affinity["shown"].as_str().unwrap();
    assert!(
        shown.contains(" held · ") && shown.ends_with(" input tokens"),
        "{report}"
    );
    // `/admin/clients` gave them.
    let held = report["clients_in_flight"].as_array().unwrap();
    let held_b = held.iter().find(|c| c["id"] == "team-b").unwrap();
    assert_eq!(held_b["in_flight"], "1", "{report}");
    assert_eq!(held.len(), 3, "default, team-a and team-b: {report}");
    let after = report["clients_after"].as_array().unwrap();
    let a = after.iter().find(|c| c["id"] == "team-a").unwrap();
    assert!(
        a["spend"].as_str().unwrap().ends_with(" / $5.00") && a["spend"] != "$0.0000 / $5.00",
        "{report}"
    );
    let limited_ms = report["client_limited_shown_ms"].as_u64().unwrap();
    assert!(
        limited_ms <= 2000,
        "the limited client took {limited_ms} ms to show"
    );
    // A pool whose only model is locked for an hour read as `/admin/state` said: none usable,
    // refused with 429 until a time in UTC, its accounts not "ready".
    let locked_pool = &report["locked_pool"];
    assert!(
        locked_pool["refusal"]
            .as_str()
            .unwrap()
            .starts_with("429 until "),
        "{report}"
    );
    let shown_ms = report["lockout_shown_ms"].as_u64().unwrap();
    assert!(shown_ms <= 1000, "the lockout took {shown_ms} ms to show");
    assert!(
        report["wrong_key_message"]
            .as_str()
            .unwrap()
            .contains("not the admin key"),
        "{report}"
    );
    for name in [
        "ui-normal.png",
        "ui-incident.png",
        "ui-phone.png",
        "ui-clients.png",
    ] {
        let bytes = std::fs::read(shots.join(name)).unwrap();
        assert!(
            bytes.starts_with(b"\x89PNG") && bytes.len() > 10_000,
            "{name}"
        );
    }

    // What the clicks did, seen through the admin API and the journal, not the page.
    let client = reqwest::Client::new();
    let admin_json = |path: &str| {
        let request = client
            .get(format!("{base}{path}"))
            .bearer_auth(ADMIN_KEY)
            .send();
        async move { request.await.unwrap().text().await.unwrap() }
    };
    let locked = report["locked_connection"].as_str().unwrap();
    let lockouts: Value = serde_json::from_str(&admin_json("/admin/lockouts").await).unwrap();
    assert!(
        !lockouts["lockouts"]
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l["connection"] == locked && l["model"] == "gpt-4o-mini"),
        "{lockouts}"
    );
    let journal: Vec<Value> = admin_json("/admin/journal?since_seq=0&limit=10000")
        .await
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let admin_did = |action: &str, target: &str| {
        journal.iter().any(|e| {
            e["kind"] == "admin_action"
                && e["action"] == action
                && e["target"] == target
                && e["by"] == "admin"
        })
    };
    assert!(admin_did("clear_lockout", &format!("{locked}/gpt-4o-mini")));
    let cleared = report["cleared_connection"].as_str().unwrap();
    assert!(admin_did("clear_connection", cleared));
    assert!(journal
        .iter()
        .any(|e| e["kind"] == "admin_action" && e["action"] == "reload" && e["by"] == "admin"));
    // The refusal the panel showed is the one the journal holds.
    assert!(journal.iter().any(|e| e["kind"] == "client_limited"
        && e["client"] == "team-a"
        && e["limit"] == "requests_per_min"));
    assert!(
        mock.stats()
            .per_key
            .get(&upstream_key(locked))
            .copied()
            .unwrap_or(0)
            > 0,
        "the locked connection had served"
    );
}

/// What the dashboard reads (`/admin/state`, its `state` event) shows a per-minute window's
/// newest upstream reading, not its first: the journal keeps such a reading only when it flips
/// (issue #50: "1 / 40" while the upstream said 34 left).
#[tokio::test]
async fn the_state_shows_a_windows_newest_upstream_reading() {
    let harness = Harness::start().await;
    for id in ["oa-1", "oa-2", "oa-3"] {
        harness.mock.set_budget(
            &upstream_key(id),
            quotaroute_mock::RateBudget {
                requests_limit: 40,
                tokens_limit: 1_000_000,
                reset_ms: 60_000,
            },
        );
    }
    let mut last_used = std::collections::HashMap::new();
    for _ in 0..8 {
        let response = harness.chat("team").await;
        assert_eq!(response.status(), 200);
        let remaining: u64 = header(&response, "x-ratelimit-remaining-requests")
            .parse()
            .unwrap();
        last_used.insert(header(&response, "x-quotaroute-connection"), 40 - remaining);
    }
    harness.settle().await;
    let state = harness.admin_get("/admin/state").await;
    let busiest = last_used.iter().max_by_key(|(_, used)| **used).unwrap();
    assert!(*busiest.1 >= 3, "{last_used:?}");
    for (id, used) in &last_used {
        let connection = state["connections"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["id"] == id.as_str())
            .unwrap();
        let window = connection["buckets"]
            .as_array()
            .unwrap()
            .iter()
            .find(|b| b["window"] == "requests:gpt-4o-mini")
            .unwrap_or_else(|| panic!("{connection}"));
        assert_eq!(window["used"], *used, "{id}: {window}");
        assert_eq!(window["limit"], 40);
    }
}

/// Issue 50: each combo's affinity hit rate since start, in `/admin/state` and the dashboard's
/// `state` event: one conversation's four turns through `team` (the last one streamed) count
/// one new and three held turns, and the input and cached tokens the answers reported.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_state_counts_each_combos_affinity_turns_and_cached_input() {
    let mut harness = Harness::start().await;
    // A system prompt long enough for affinity (behaviour §10: `min_prompt_bytes`).
    let mut messages = vec![serde_json::json!({"role": "system",
        "content": "You are the support agent of a large shop; follow the policies below. ".repeat(80)})];
    let (mut input, mut cached, mut served) = (0, 0, Vec::new());
    for turn in 0..3 {
        messages.push(serde_json::json!({"role": "user",
            "content": format!("question {turn}: {}", "the details of this case ".repeat(40))}));
        let response = harness
            .post_json(
                "/v1/chat/completions",
                serde_json::json!({"model": "team", "messages": messages}),
            )
            .await;
        assert_eq!(response.status(), 200);
        served.push(header(&response, "x-quotaroute-connection"));
        let answer: Value = response.json().await.unwrap();
        input += answer["usage"]["prompt_tokens"].as_u64().unwrap();
        cached += answer["usage"]["prompt_tokens_details"]["cached_tokens"]
            .as_u64()
            .unwrap_or(0);
        messages.push(serde_json::json!({"role": "assistant",
            "content": answer["choices"][0]["message"]["content"]}));
    }
    // The fourth turn streamed: its usage comes in the stream's last chunk.
    messages.push(serde_json::json!({"role": "user", "content": "question 3: and now?"}));
    let response = harness
        .post_json(
            "/v1/chat/completions",
            serde_json::json!({"model": "team", "messages": messages, "stream": true,
                "stream_options": {"include_usage": true}}),
        )
        .await;
    assert_eq!(response.status(), 200);
    served.push(header(&response, "x-quotaroute-connection"));
    let text = response.text().await.unwrap();
    let usage = text
        .lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .filter_map(|data| serde_json::from_str::<Value>(data).ok())
        .find(|chunk| chunk["usage"].is_object())
        .unwrap_or_else(|| panic!("no usage in the stream: {text}"))["usage"]
        .clone();
    let streamed_cached = usage["prompt_tokens_details"]["cached_tokens"]
        .as_u64()
        .unwrap_or(0);
    assert!(streamed_cached > 0, "{usage}");
    input += usage["prompt_tokens"].as_u64().unwrap();
    cached += streamed_cached;
    assert!(served.iter().all(|c| *c == served[0]), "{served:?}");
    assert!(cached > 0, "the held turns read the account's prompt cache");

    let state = harness.admin_get("/admin/state").await;
    let team = state["affinity"]
        .as_array()
        .unwrap_or_else(|| panic!("no affinity in /admin/state: {state}"))
        .iter()
        .find(|a| a["combo"] == "team")
        .unwrap_or_else(|| panic!("no affinity for team: {state}"))
        .clone();
    assert_eq!(
        (&team["new"], &team["held"], &team["moved"]),
        (&Value::from(1), &Value::from(3), &Value::from(0)),
        "{team}"
    );
    assert_eq!(team["input_tokens"], input, "{team}");
    assert_eq!(team["cached_input_tokens"], cached, "{team}");
    assert_eq!(
        team["cached_share"].as_f64().unwrap(),
        cached as f64 / input as f64
    );
    // No routed turn through `claude`: not counted.
    assert!(
        !state["affinity"].to_string().contains("\"claude\""),
        "{state}"
    );

    // The dashboard's feed carries the same numbers.
    let mut events = get(
        &harness.client,
        &harness.url("/admin/events"),
        Some(ADMIN_KEY),
    )
    .await;
    let mut buffer = String::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    let (_, pushed) = next_event(&mut events, &mut buffer, deadline, |name, _| {
        name == "state"
    })
    .await
    .expect("a state event");
    assert_eq!(pushed["affinity"], state["affinity"]);
    drop(events);

    // And Prometheus counts the turns by combo and outcome.
    let metrics = harness.admin_text("/metrics").await;
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("quotaroute_affinity_turns_total")
                && l.contains("combo=\"team\"")
                && l.contains("outcome=\"held\"")),
        "no affinity turns counter for team"
    );
    harness.stop().await;
}
