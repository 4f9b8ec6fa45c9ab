//! Shared harness for the node's black-box tests: a mock upstream and a node on ephemeral
//! loopback ports, a journal in a temp dir, and a reqwest client.

#![expect(
    clippy::unwrap_used,
    clippy::panic,
    reason = "test support: not every test calls every helper, and a failed step fails loudly"
)]

pub mod claude_tmux;
pub mod clients;

use std::path::PathBuf;
use std::sync::Arc;

use quotaroute::config;
use quotaroute::node::{NodeOptions, RunningNode};
use quotaroute_actors::{SharedClock, SystemClock};
use quotaroute_mock::{self as mock_upstream, MockUpstream};
use serde_json::Value;

pub const CLIENT_KEY: &str = "sk-qr-test-client";
pub const ADMIN_KEY: &str = "qr-admin-test-key";

/// The mock's keys are the connections' upstream keys.
pub fn upstream_key(connection: &str) -> String {
    format!("sk-mock-{connection}-0123456789abcdef")
}

pub async fn start_mock() -> (String, MockUpstream) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let mock = MockUpstream::new();
    tokio::spawn(mock_upstream::serve(listener, mock.clone()));
    (base, mock)
}

/// A config with an `openai` provider (keys oa-1..oa-3 weighted 2:1:1, combo `team` on
/// `gpt-4o-mini`) and an `anthropic` provider (keys an-1..an-3, combo `claude`).
pub fn standard_config(mock_base: &str, journal: &std::path::Path, extra: &str) -> String {
    let mut text = format!(
        r#"
[server]
listen = "127.0.0.1:0"
api_keys = ["{CLIENT_KEY}"]
admin_key = "{ADMIN_KEY}"
request_timeout_ms = 10000
first_token_timeout_ms = 3000
shutdown_grace_ms = 2000

[journal]
path = "{journal}"
flush_every_ms = 10

[[providers]]
name = "openai"
format = "openai"
base_url = "{mock_base}/v1"

[[providers]]
name = "anthropic"
format = "anthropic"
base_url = "{mock_base}/v1"
"#,
        journal = journal.display()
    );
    for (id, provider, weight) in [
        ("oa-1", "openai", 2),
        ("oa-2", "openai", 1),
        ("oa-3", "openai", 1),
        ("an-1", "anthropic", 1),
        ("an-2", "anthropic", 1),
        ("an-3", "anthropic", 1),
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
]

[[combos]]
name = "claude"
targets = [
  { connection = "an-1", model = "claude-3-5-haiku", weight = 1 },
  { connection = "an-2", model = "claude-3-5-haiku", weight = 1 },
  { connection = "an-3", model = "claude-3-5-haiku", weight = 1 },
]
"#,
    );
    text.push_str(extra);
    text
}

pub struct Harness {
    pub mock: MockUpstream,
    pub mock_base: String,
    pub node: Option<RunningNode>,
    pub base: String,
    pub dir: tempfile::TempDir,
    pub client: reqwest::Client,
    pub config_path: PathBuf,
}

impl Harness {
    pub async fn start() -> Harness {
        Self::start_with("").await
    }

    pub async fn start_with(extra: &str) -> Harness {
        Self::start_editing(|text| text + extra).await
    }

    /// A node on `standard_config` as `edit` rewrites it (for keys inside its tables).
    pub async fn start_editing(edit: impl FnOnce(String) -> String) -> Harness {
        Self::start_on_clock(edit, Arc::new(SystemClock)).await
    }

    /// A node whose router reads `clock` (a `ManualClock` lets a test move policy time —
    /// cooldowns, breaker resets — without sleeping; I/O timeouts stay on real time).
    pub async fn start_on_clock(
        edit: impl FnOnce(String) -> String,
        clock: SharedClock,
    ) -> Harness {
        let (mock_base, mock) = start_mock().await;
        Self::on_mock(mock_base, mock, edit, clock).await
    }

    /// A node on `standard_config` as `edit` rewrites it, against a mock the caller has set
    /// up already (so what the node loads at start finds it ready).
    pub async fn on_mock(
        mock_base: String,
        mock: MockUpstream,
        edit: impl FnOnce(String) -> String,
        clock: SharedClock,
    ) -> Harness {
        let dir = tempfile::tempdir().unwrap();
        let text = edit(standard_config(&mock_base, &dir.path().join("journal"), ""));
        let config_path = dir.path().join("quotaroute.toml");
        std::fs::write(&config_path, &text).unwrap();
        let config = config::load(&config_path).unwrap_or_else(|errors| panic!("{errors}"));
        let node = RunningNode::start(
            config,
            NodeOptions {
                config_path: Some(config_path.clone()),
                config_text: text,
                clock,
                listen: None,
            },
        )
        .await
        .unwrap();
        let base = format!("http://{}", node.addr);
        Harness {
            mock,
            mock_base,
            node: Some(node),
            base,
            dir,
            client: reqwest::Client::new(),
            config_path,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub async fn chat(&self, model: &str) -> reqwest::Response {
        self.client
            .post(self.url("/v1/chat/completions"))
            .bearer_auth(CLIENT_KEY)
            .json(&serde_json::json!({"model": model, "messages": [{"role": "user", "content": "hi"}]}))
            .send()
            .await
            .unwrap()
    }

    /// `POST /v1/messages` for `model` with a one-line conversation.
    pub async fn message(&self, model: &str) -> reqwest::Response {
        self.post_json(
            "/v1/messages",
            serde_json::json!({"model": model, "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]}),
        )
        .await
    }

    pub async fn post_json(&self, path: &str, body: Value) -> reqwest::Response {
        self.client
            .post(self.url(path))
            .bearer_auth(CLIENT_KEY)
            .json(&body)
            .send()
            .await
            .unwrap()
    }

    pub async fn admin_get(&self, path: &str) -> Value {
        serde_json::from_str(&self.admin_text(path).await).unwrap()
    }

    /// `GET path` with the admin key, as text.
    pub async fn admin_text(&self, path: &str) -> String {
        admin_text(&self.client, &self.base, path).await
    }

    /// Every journaled event so far, through `GET /admin/journal`, as JSON.
    pub async fn journal_events(&self) -> Vec<Value> {
        let text = admin_journal_all(&self.client, &self.base).await;
        text.lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect()
    }

    pub async fn admin_post(&self, path: &str) -> reqwest::Response {
        self.client
            .post(self.url(path))
            .bearer_auth(ADMIN_KEY)
            .send()
            .await
            .unwrap()
    }

    /// Waits until reports sent so far are applied (they are fire-and-forget).
    pub async fn settle(&self) {
        let router = self.node.as_ref().unwrap().app.router().unwrap().clone();
        router.settle().await.unwrap();
    }

    pub async fn stop(&mut self) {
        if let Some(node) = self.node.take() {
            node.stop("test").await.unwrap();
        }
    }
}

/// `POST {base}/v1/chat/completions` for `model` with a one-line conversation (for nodes
/// outside a `Harness`, such as the real binary).
/// Waits (at most 30 s) for `/healthz` to answer 200: the journal is replayed and the node
/// routes.
pub async fn wait_ready(client: &reqwest::Client, base: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        if let Ok(response) = client.get(format!("{base}/healthz")).send().await {
            if response.status() == 200 {
                return;
            }
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{base} did not become ready"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

/// `GET base + path` with the admin key, as JSON.
pub async fn admin_json(client: &reqwest::Client, base: &str, path: &str) -> Value {
    serde_json::from_str(&admin_text(client, base, path).await).unwrap()
}

/// `GET base + path` with the admin key, as text.
pub async fn admin_text(client: &reqwest::Client, base: &str, path: &str) -> String {
    client
        .get(format!("{base}{path}"))
        .bearer_auth(ADMIN_KEY)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

/// Every journaled event of the node at `base` as NDJSON, paging `GET /admin/journal` (its
/// pages are bounded) until a short page.
pub async fn admin_journal_all(client: &reqwest::Client, base: &str) -> String {
    const PAGE: usize = 10_000;
    let mut all = String::new();
    let mut since = 0u64;
    loop {
        let page = admin_text(
            client,
            base,
            &format!("/admin/journal?since_seq={since}&limit={PAGE}"),
        )
        .await;
        let mut lines = 0;
        for line in page.lines() {
            let value: Value = serde_json::from_str(line).unwrap();
            since = value["seq"].as_u64().unwrap() + 1;
            all.push_str(line);
            all.push('\n');
            lines += 1;
        }
        if lines < PAGE {
            return all;
        }
    }
}

pub async fn chat(client: &reqwest::Client, base: &str, model: &str) -> reqwest::Response {
    client
        .post(format!("{base}/v1/chat/completions"))
        .bearer_auth(CLIENT_KEY)
        .json(&serde_json::json!({"model": model, "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap()
}

pub fn header(response: &reqwest::Response, name: &str) -> String {
    response
        .headers()
        .get(name)
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default()
}

/// A provider's entry in `GET /admin/state`.
pub fn provider<'a>(state: &'a Value, name: &str) -> &'a Value {
    state["providers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == name)
        .unwrap()
}

/// A connection's entry in `GET /admin/state`.
pub fn connection<'a>(state: &'a Value, id: &str) -> &'a Value {
    state["connections"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == id)
        .unwrap()
}

/// A child process killed when dropped, so a failing test leaves no node running.
pub struct KillOnDrop(pub std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A loopback port free right now (for configs of the real binary).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// From a node's journal (NDJSON): for each `peer_applied` of `event_kind`, how long after its
/// origin journaled it this node applied it, in ms (one clock on one machine).
pub fn peer_apply_lags_ms(journal: &str, event_kind: &str) -> Vec<u64> {
    journal
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .filter(|e| e["kind"] == "peer_applied" && e["event_kind"] == event_kind)
        .map(|e| {
            e["at_ms"]
                .as_u64()
                .unwrap()
                .saturating_sub(e["origin_at_ms"].as_u64().unwrap())
        })
        .collect()
}

/// The `pct`-th percentile (0..=100) of `sorted`, and its largest value.
pub fn percentile<T: Copy>(sorted: &[T], pct: usize) -> T {
    sorted[(sorted.len() * pct / 100).min(sorted.len() - 1)]
}

/// The journal's charges to clients (behaviour §11), in order: each `client_usage`, and each
/// `request_succeeded` that carries its client's charge (`period_spend_pusd`, journal schema
/// 5), which has the same fields (`estimated` is its `usage_estimated`).
pub fn client_charges(events: &[Value]) -> Vec<Value> {
    events
        .iter()
        .filter_map(|e| match e["kind"].as_str() {
            Some("client_usage") => Some(e.clone()),
            Some("request_succeeded") if !e["period_spend_pusd"].is_null() => {
                let mut charge = e.clone();
                charge["estimated"] = e["usage_estimated"].clone();
                Some(charge)
            }
            _ => None,
        })
        .collect()
}
