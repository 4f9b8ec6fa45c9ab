//! Issue 7 §6: secrets and access. A scripted session against the real binary (RUST_LOG=debug,
//! stderr captured) — successes, 401s and 429s whose bodies echo the upstream key, passed-through
//! errors, admin calls, a reload — then every upstream key is searched for in the logs, the
//! journal (as NDJSON), every admin output, /metrics and every client-facing body and header.
//! Also: the admin API is 404 without `admin_key`, and keys compare in constant time.

#![expect(
    clippy::too_many_lines,
    reason = "one secret-leak hunt per test, every surface in turn"
)]
use crate::reliability_support;
use crate::support;

use quotaroute::config::Secret;
use quotaroute_journal::envelope_to_json;
use quotaroute_mock::{Fault, OAuthSettings, ResetForm, Rule};
use reliability_support::*;
use serde_json::json;
use support::*;

const FILE_KEY: &str = "sk-file-SWEEPFILE-0123456789";
const COMMAND_KEY: &str = "sk-cmd-SWEEPCOMMAND";
const STDERR_SECRET: &str = "SWEEPSTDERR";
const REFRESH_TOKEN: &str = "mock-rt-SWEEPREFRESH";

/// An OpenAI-style error body that echoes the whole key (worse than OpenAI, which masks most).
fn echoing(status: u16, kind: &str, key: &str) -> Fault {
    Fault::Custom {
        status,
        body: json!({"error": {
            "message": format!("Incorrect API key provided: {key}. Bearer {key} rejected (key={key})"),
            "type": kind, "param": null, "code": "invalid_api_key"}})
        .to_string(),
    }
}

/// Everything a client or operator could read, gathered as text.
struct Seen {
    texts: Vec<(String, String)>,
}

impl Seen {
    fn add(&mut self, label: impl Into<String>, text: impl Into<String>) {
        self.texts.push((label.into(), text.into()));
    }

    async fn response(&mut self, label: &str, response: reqwest::Response) -> u16 {
        let status = response.status().as_u16();
        let headers = format!("{:?}", response.headers());
        let body = response.text().await.unwrap_or_default();
        self.add(format!("{label} ({status}) headers"), headers);
        self.add(format!("{label} ({status}) body"), body);
        status
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s6_no_upstream_key_in_logs_journal_admin_metrics_or_error_bodies() {
    let (mock_base, mock) = start_mock().await;
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let journal_path = dir.path().join("journal");
    // Issue 13's sources beside the static keys: a key file, a key command (that also writes
    // a secret to stderr) and an OAuth grant on the mock's token endpoint.
    std::fs::write(dir.path().join("file-key"), format!("{FILE_KEY}\n")).unwrap();
    std::fs::write(dir.path().join("refresh"), format!("{REFRESH_TOKEN}\n")).unwrap();
    mock.set_oauth(Some(OAuthSettings {
        client_id: "sweep".into(),
        refresh_token: REFRESH_TOKEN.into(),
        lifetime_ms: 60_000,
        rotate: true,
        garbage: false,
    }));
    let rotating = format!(
        r#"
[[connections]]
id = "file-s"
provider = "openai"
api_key_file = "{dir}/file-key"
models = ["gpt-4o-mini"]

[[connections]]
id = "cmd-s"
provider = "openai"
api_key_command = ["/bin/sh", "-c", "echo stderr-{STDERR_SECRET} >&2; echo {COMMAND_KEY}-$$"]
models = ["gpt-4o-mini"]

[[connections]]
id = "oauth-s"
provider = "openai"
models = ["gpt-4o-mini"]
[connections.oauth]
token_url = "{mock_base}/oauth/token"
client_id = "sweep"
refresh_token_file = "{dir}/refresh"

[[connections]]
id = "cmd-hang"
provider = "openai"
api_key_command = ["/bin/sh", "-c", "echo stderr-{STDERR_SECRET} >&2; exec sleep 30"]
api_key_command_timeout_ms = 300
models = ["gpt-4o-mini"]

[[combos]]
name = "rot"
strategy = "round-robin"
targets = [
  {{ connection = "file-s", model = "gpt-4o-mini" }},
  {{ connection = "cmd-s", model = "gpt-4o-mini" }},
  {{ connection = "oauth-s", model = "gpt-4o-mini" }},
]
"#,
        dir = dir.path().display()
    );
    let text = standard_config(&mock_base, &journal_path, &rotating).replace(
        "listen = \"127.0.0.1:0\"",
        &format!("listen = \"127.0.0.1:{port}\""),
    );
    let config_path = dir.path().join("quotaroute.toml");
    std::fs::write(&config_path, &text).unwrap();
    let log_path = dir.path().join("node.log");
    let mut node = spawn_node(&config_path, "debug", Some(&log_path));
    let base = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::new();
    wait_ready(&client, &base).await;
    let mut seen = Seen { texts: Vec::new() };
    let chat = |model: &str, stream: bool| {
        client
            .post(format!("{base}/v1/chat/completions"))
            .bearer_auth(CLIENT_KEY)
            .json(&json!({"model": model, "stream": stream, "messages": [{"role": "user", "content": "hi"}]}))
            .send()
    };
    let messages = || {
        client
            .post(format!("{base}/v1/messages"))
            .header("x-api-key", CLIENT_KEY)
            .json(&json!({"model": "claude", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]}))
            .send()
    };

    // Successes, streamed and not, both dialects.
    for n in 0..4 {
        let status = seen
            .response("chat", chat("team", n % 2 == 1).await.unwrap())
            .await;
        assert_eq!(status, 200);
        assert_eq!(
            seen.response("messages", messages().await.unwrap()).await,
            200
        );
    }
    // A 401 echoing the key disables oa-2; a 429 echoing it locks oa-1's model; the client
    // still succeeds through oa-3.
    mock.set_rules(vec![
        Rule::always(echoing(401, "invalid_request_error", &upstream_key("oa-2")))
            .for_key(upstream_key("oa-2")),
        Rule::always(echoing(429, "requests", &upstream_key("oa-1")))
            .for_key(upstream_key("oa-1"))
            .for_model("gpt-4o-mini"),
    ]);
    for _ in 0..4 {
        assert_eq!(
            seen.response("chat after 401/429", chat("team", false).await.unwrap())
                .await,
            200
        );
    }
    // The changing sources serve; a 401 that echoes the command's key makes the node run it
    // again and retry with the new one.
    for _ in 0..6 {
        assert_eq!(
            seen.response("rot", chat("rot", false).await.unwrap())
                .await,
            200
        );
    }
    let command_key = mock
        .stats()
        .per_key
        .keys()
        .find(|key| key.starts_with(COMMAND_KEY))
        .cloned()
        .expect("the command's key reached the mock");
    mock.set_rules(vec![Rule::always(echoing(
        401,
        "invalid_request_error",
        &command_key,
    ))
    .for_key(command_key.clone())]);
    for _ in 0..3 {
        assert_eq!(
            seen.response("rot after a 401", chat("rot", true).await.unwrap())
                .await,
            200
        );
    }
    mock.clear_rules();

    // Passed-through upstream errors: a 400 client error, a 500 and a 429 on every key, each
    // echoing the key; and every anthropic key refusing auth (→ 502 of our own).
    for (label, fault_for) in [
        ("400 passthrough", 400u16),
        ("429 passthrough", 429),
        ("500 passthrough", 500),
    ] {
        mock.set_rules(
            ["oa-1", "oa-2", "oa-3"]
                .iter()
                .map(|id| {
                    Rule::always(echoing(
                        fault_for,
                        "invalid_request_error",
                        &upstream_key(id),
                    ))
                    .for_key(upstream_key(id))
                    .for_model(format!("m-{fault_for}"))
                })
                .collect(),
        );
        let status = seen
            .response(
                label,
                chat(&format!("openai/m-{fault_for}"), false).await.unwrap(),
            )
            .await;
        assert_eq!(status, fault_for, "{label}");
    }
    mock.set_rules(vec![Rule::always(echoing(
        401,
        "authentication_error",
        &upstream_key("an-1"),
    ))]);
    for _ in 0..2 {
        seen.response("anthropic all 401", messages().await.unwrap())
            .await;
    }
    // A stream that breaks after content, with the key in the error event: committed stream.
    mock.set_rules(vec![Rule::always(Fault::StreamFailAfterContent)]);
    seen.response("stream broken", chat("openai/gpt-4o", true).await.unwrap())
        .await;
    mock.set_rules(vec![Rule::always(Fault::Status429 {
        reset: ResetForm::MessageTryAgainIn("1m30s".into()),
    })
    .for_model("gpt-4.1")]);
    seen.response(
        "429 try again",
        chat("openai/gpt-4.1", false).await.unwrap(),
    )
    .await;
    mock.clear_rules();
    // Bad client keys and wrong auth on both APIs.
    for key in [upstream_key("oa-1"), "nope".to_string()] {
        let response = client
            .post(format!("{base}/v1/chat/completions"))
            .bearer_auth(&key)
            .json(&json!({"model": "team"}))
            .send()
            .await
            .unwrap();
        seen.response("wrong client key", response).await;
    }

    // The admin API: every endpoint, then a reload.
    let admin = |method: reqwest::Method, path: &str| {
        client
            .request(method, format!("{base}{path}"))
            .bearer_auth(ADMIN_KEY)
    };
    for path in [
        "/admin/state",
        "/admin/lockouts",
        "/admin/journal",
        "/metrics",
        "/healthz",
    ] {
        let response = admin(reqwest::Method::GET, path).send().await.unwrap();
        assert_eq!(seen.response(path, response).await, 200, "{path}");
    }
    let response = client
        .get(format!("{base}/v1/models"))
        .bearer_auth(CLIENT_KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(seen.response("/v1/models", response).await, 200);
    for (method, path) in [
        (reqwest::Method::DELETE, "/admin/lockouts/oa-1/gpt-4o-mini"),
        (reqwest::Method::POST, "/admin/connections/oa-2/clear"),
        (
            reqwest::Method::POST,
            "/admin/providers/anthropic/breaker/reset",
        ),
        (reqwest::Method::POST, "/admin/connections/nope/clear"),
    ] {
        let response = admin(method, path).send().await.unwrap();
        seen.response(path, response).await;
    }
    let response = admin(reqwest::Method::POST, "/admin/connections/an-1/usage")
        .json(&json!({"window": "5h", "used_pct": 42.0, "resets_at": "2030-01-01T00:00:00Z"}))
        .send()
        .await
        .unwrap();
    assert_eq!(seen.response("usage push", response).await, 200);
    std::fs::write(&config_path, text.replace("weight = 2\n", "weight = 3\n")).unwrap();
    let response = admin(reqwest::Method::POST, "/admin/reload")
        .send()
        .await
        .unwrap();
    assert_eq!(seen.response("reload", response).await, 200);
    // A reload that fails names the problem, not the keys.
    std::fs::write(
        &config_path,
        text.replace("[[combos]]", "[[combos]]\nbogus = 1"),
    )
    .unwrap();
    let response = admin(reqwest::Method::POST, "/admin/reload")
        .send()
        .await
        .unwrap();
    seen.response("bad reload", response).await;
    for path in ["/admin/state", "/admin/journal", "/metrics"] {
        let response = admin(reqwest::Method::GET, path).send().await.unwrap();
        seen.response(&format!("{path} after"), response).await;
    }

    // The hanging key command has been killed by now (its 300 ms are long past, or soon).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let response = admin(reqwest::Method::GET, "/admin/state")
            .send()
            .await
            .unwrap();
        let text = response.text().await.unwrap();
        let state: serde_json::Value = serde_json::from_str(&text).unwrap();
        seen.add("/admin/state (credentials)", text);
        let killed = state["credentials"].as_array().unwrap().iter().any(|view| {
            view["connection"] == "cmd-hang"
                && view["last_error"]
                    .as_str()
                    .is_some_and(|error| error.contains("was killed"))
        });
        if killed {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the hanging command was not killed"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    sigterm(&node);
    assert!(node.wait().unwrap().success());
    let log = std::fs::read_to_string(&log_path).unwrap();
    assert!(log.lines().count() > 20, "debug logs were captured: {log}");
    // A hanging key command: killed at its timeout, one clear warning naming it.
    assert!(
        log.lines()
            .any(|line| line.contains("credential refresh failed")
                && line.contains("cmd-hang")
                && line.contains("did not exit within 300 ms and was killed")),
        "the hanging command's log line"
    );
    seen.add("node stderr (RUST_LOG=debug)", log);
    let journal: Vec<String> = journal_envelopes(&journal_path)
        .iter()
        .map(|e| envelope_to_json(e).unwrap())
        .collect();
    assert!(
        journal.iter().any(|l| l.contains("auth_failed")),
        "the 401 was journaled"
    );
    seen.add("journal (NDJSON)", journal.join("\n"));

    let mut secrets: Vec<String> = ["oa-1", "oa-2", "oa-3", "an-1", "an-2", "an-3"]
        .iter()
        .map(|id| upstream_key(id))
        .collect();
    // The part of every key after its prefix, so a partial echo is caught too.
    secrets.push("0123456789abcdef".to_string());
    // The changing sources: the file's key, every key the command printed and what it wrote
    // to stderr, the refresh tokens (the first and every rotated one) and the access tokens.
    secrets.extend(
        [
            FILE_KEY,
            "SWEEPFILE",
            COMMAND_KEY,
            STDERR_SECRET,
            "mock-rt-",
            "mock-at-",
        ]
        .map(str::to_owned),
    );
    assert!(
        journal
            .iter()
            .any(|l| l.contains("credential_refreshed")
                && l.contains("\"trigger\":\"unauthorized\"")),
        "the 401 made the command run again"
    );
    let mut leaks = Vec::new();
    for (label, text) in &seen.texts {
        for secret in &secrets {
            if text.contains(secret.as_str()) {
                let at = text.find(secret.as_str()).unwrap();
                let context: String = text[at.saturating_sub(120)..].chars().take(240).collect();
                leaks.push(format!("{label}: `{secret}` in …{context}…"));
            }
        }
        // Nor the client's or the admin's key, except where the client sent it.
        for own in [CLIENT_KEY, ADMIN_KEY] {
            if text.contains(own) {
                leaks.push(format!("{label}: `{own}`"));
            }
        }
    }
    println!(
        "searched {} texts, {} bytes",
        seen.texts.len(),
        seen.texts.iter().map(|(_, t)| t.len()).sum::<usize>()
    );
    assert!(
        leaks.is_empty(),
        "{} leak(s):\n{}",
        leaks.len(),
        leaks.join("\n")
    );
}

#[tokio::test]
async fn s6_admin_api_is_404_without_admin_key() {
    let harness = Harness::start().await;
    let text = std::fs::read_to_string(&harness.config_path)
        .unwrap()
        .replace(&format!("admin_key = \"{ADMIN_KEY}\"\n"), "");
    std::fs::write(&harness.config_path, &text).unwrap();
    assert_eq!(harness.admin_post("/admin/reload").await.status(), 200);
    for (method, path) in [
        ("GET", "/admin/state"),
        ("GET", "/admin/lockouts"),
        ("GET", "/admin/journal"),
        ("DELETE", "/admin/lockouts/oa-1/gpt-4o-mini"),
        ("POST", "/admin/connections/oa-1/clear"),
        ("POST", "/admin/connections/oa-1/usage"),
        ("POST", "/admin/providers/openai/breaker/reset"),
        ("POST", "/admin/reload"),
        ("GET", "/metrics"),
    ] {
        for key in [None, Some(ADMIN_KEY), Some(CLIENT_KEY)] {
            let mut request = harness
                .client
                .request(method.parse().unwrap(), harness.url(path));
            if let Some(key) = key {
                request = request.bearer_auth(key);
            }
            let status = request.send().await.unwrap().status();
            assert_eq!(status, 404, "{method} {path} with {key:?}");
        }
    }
    // Routing is unaffected.
    assert_eq!(harness.chat("team").await.status(), 200);
}

#[test]
fn s6_keys_match_exactly_and_compare_without_early_exit() {
    // `Secret::matches` folds every byte of the candidate into one difference (no early
    // return, lengths folded in too), and `LiveConfig::is_client_key` checks every client key
    // without short-circuiting (read in src/config/secret.rs and src/node/live.rs). Here: it
    // matches exactly the key, whatever the length or the position of a difference.
    let key = Secret::new("sk-qr-0123456789abcdef");
    assert!(key.matches("sk-qr-0123456789abcdef"));
    let raw = "sk-qr-0123456789abcdef";
    for index in 0..raw.len() {
        let mut bytes = raw.as_bytes().to_vec();
        bytes[index] ^= 1;
        assert!(
            !key.matches(std::str::from_utf8(&bytes).unwrap()),
            "{index}"
        );
    }
    for candidate in [
        "",
        "s",
        "sk-qr-0123456789abcde",
        "sk-qr-0123456789abcdef0",
        &raw.repeat(2),
    ] {
        assert!(!key.matches(candidate), "{candidate}");
    }
    // A key that is a repetition of a shorter secret is not accepted (the index wraps).
    let short = Secret::new("ab");
    assert!(!short.matches("abab"));
    assert!(!short.matches("a"));
}
