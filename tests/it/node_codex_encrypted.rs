//! Issue #39 with the real Codex CLI: a session whose turns carry encrypted reasoning
//! (`include: ["reasoning.encrypted_content"]`) survives its account running out, and a low
//! `model_auto_compact_token_limit` makes it compact through the node.
//!
//! Codex talks to a small recording proxy in front of the node, which keeps each request's
//! path, status, serving connection and what its `input` carried (encrypted items, sealed or
//! not); the mock (like OpenAI) lets only the key that made an encrypted item read it.

#![expect(
    clippy::unwrap_used,
    reason = "test code: a failed step fails the test loudly"
)]

use std::path::Path;
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use quotaroute_mock::{Fault, ResetForm, Rule};
use serde_json::Value;

use crate::support::clients::*;
use crate::support::*;

const INSTALL: &str = "npm ci --ignore-scripts --prefix tests/clients";

/// One request Codex sent, as the proxy saw it.
#[derive(Debug, Clone)]
struct Seen {
    path: String,
    status: u16,
    connection: String,
    request_id: String,
    /// The body asked for encrypted reasoning.
    includes_encrypted: bool,
    /// Items of `input` that carry `encrypted_content`, and how many of them the router sealed.
    encrypted_items: usize,
    sealed_items: usize,
    /// The types of the items that carry `encrypted_content` (`reasoning`, `compaction`).
    encrypted_types: Vec<String>,
    /// The `input` ends with `compaction_trigger`: Codex's inline compaction.
    compaction_trigger: bool,
}

#[derive(Clone)]
struct Proxy {
    node: String,
    client: reqwest::Client,
    seen: Arc<Mutex<Vec<Seen>>>,
}

async fn start_proxy(node: &str) -> (String, Arc<Mutex<Vec<Seen>>>) {
    let proxy = Proxy {
        node: node.to_string(),
        client: reqwest::Client::new(),
        seen: Arc::default(),
    };
    let seen = proxy.seen.clone();
    let app = axum::Router::new().fallback(forward).with_state(proxy);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (base, seen)
}

/// Forwards one request to the node (answers buffered: the mock's are short) and records it.
/// A WebSocket upgrade (Codex's probe) is answered 426, as the node would.
async fn forward(
    State(proxy): State<Proxy>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if headers.contains_key("upgrade") {
        return (StatusCode::UPGRADE_REQUIRED, "no WebSocket here").into_response();
    }
    let path = uri.path_and_query().map(|p| p.as_str()).unwrap_or("/");
    let mut outgoing = proxy
        .client
        .request(method, format!("{}{path}", proxy.node))
        .body(body.clone());
    for (name, value) in &headers {
        if !matches!(
            name.as_str(),
            "host" | "content-length" | "connection" | "transfer-encoding" | "accept-encoding"
        ) {
            outgoing = outgoing.header(name, value);
        }
    }
    let answer = outgoing.send().await.unwrap();
    let status = answer.status();
    let answer_headers = answer.headers().clone();
    let answer_body = answer.bytes().await.unwrap_or_default();

    let json: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let items = json["input"].as_array().cloned().unwrap_or_default();
    let encrypted: Vec<&Value> = items
        .iter()
        .filter(|item| item["encrypted_content"].is_string())
        .collect();
    let text = |name: &str| {
        answer_headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string()
    };
    proxy.seen.lock().unwrap().push(Seen {
        path: uri.path().to_string(),
        status: status.as_u16(),
        connection: text("x-quotaroute-connection"),
        request_id: text("x-request-id"),
        includes_encrypted: json["include"]
            .as_array()
            .is_some_and(|i| i.iter().any(|v| v == "reasoning.encrypted_content")),
        encrypted_items: encrypted.len(),
        sealed_items: encrypted
            .iter()
            .filter(|item| {
                item["encrypted_content"]
                    .as_str()
                    .is_some_and(|c| c.starts_with("qrs1."))
            })
            .count(),
        encrypted_types: encrypted
            .iter()
            .map(|item| item["type"].as_str().unwrap_or("?").to_string())
            .collect(),
        compaction_trigger: items
            .last()
            .is_some_and(|item| item["type"] == "compaction_trigger"),
    });

    let mut response = Response::new(axum::body::Body::from(answer_body));
    *response.status_mut() = status;
    for (name, value) in &answer_headers {
        if !matches!(
            name.as_str(),
            "content-length" | "transfer-encoding" | "connection"
        ) {
            response.headers_mut().append(name, value.clone());
        }
    }
    response
}

/// The auto-compaction limit Codex is given: below what one turn of its own prompt counts (the
/// mock counts a quarter token per body byte), so it compacts as the session grows.
const AUTO_COMPACT_TOKENS: u64 = 2_000;

/// `codex exec …` (or `codex exec resume --last …`) in `home` on combo `team`, with a low
/// auto-compaction limit (reasoning on: Codex asks for encrypted reasoning and sends it back).
fn codex_turn(
    launcher: &Path,
    base_url: &str,
    home: &Path,
    resume: bool,
    prompt: &str,
) -> ClientRun {
    let compact = format!("model_auto_compact_token_limit={AUTO_COMPACT_TOKENS}");
    codex_exec(
        launcher,
        (base_url, "team"),
        home,
        resume,
        &[compact],
        prompt,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_codex_session_survives_its_account_running_out_and_compacts() {
    let Some(launcher) = codex_launcher() else {
        return not_installed("Codex CLI (@openai/codex)", INSTALL);
    };
    let harness = Harness::start().await;
    let (proxy, seen) = start_proxy(&harness.base).await;
    let base_url = format!("{proxy}/v1");
    let home = client_home("qr-codex-encrypted-");
    let reply = mock_text(6);

    let run_turn = |resume: bool, prompt: &'static str| {
        let (launcher, base_url, home_path) = (
            launcher.clone(),
            base_url.clone(),
            home.path().to_path_buf(),
        );
        tokio::task::spawn_blocking(move || {
            codex_turn(&launcher, &base_url, &home_path, resume, prompt)
        })
    };
    let mut runs = Vec::new();
    for (resume, prompt) in [(false, "say pong"), (true, "say pong again")] {
        let run = run_turn(resume, prompt).await.unwrap();
        assert!(run.success(), "`{prompt}`: {}", run.describe());
        assert!(run.stdout.contains(reply.as_str()), "{}", run.describe());
        runs.push(run);
    }
    let before: Vec<Seen> = seen.lock().unwrap().clone();
    for s in &before {
        eprintln!("before the lock: {s:?}");
    }
    let turns: Vec<&Seen> = before
        .iter()
        .filter(|s| s.path == "/v1/responses")
        .collect();
    assert!(turns.len() >= 3, "{before:#?}");
    assert!(turns.iter().all(|s| s.status == 200), "{before:#?}");
    assert!(
        turns.iter().all(|s| s.includes_encrypted),
        "Codex asks for encrypted reasoning: {before:#?}"
    );
    // One account served the session so far (conversation affinity, then the items' maker).
    let bound = turns[0].connection.clone();
    assert!(turns.iter().all(|s| s.connection == bound), "{before:#?}");
    // Codex sent the reasoning back, as the router sealed it (every encrypted item it sent).
    assert!(
        turns
            .iter()
            .any(|s| s.encrypted_types.iter().any(|t| t == "reasoning")),
        "{before:#?}"
    );
    assert!(
        before.iter().all(|s| s.sealed_items == s.encrypted_items),
        "{before:#?}"
    );
    // Codex 0.171 compacts inline: a `/v1/responses` whose input ends with
    // `compaction_trigger` (not `/v1/responses/compact`); it reached the node, was served, and
    // the next turn carried the (sealed) compaction item.
    assert!(
        turns.iter().any(|s| s.compaction_trigger),
        "a low model_auto_compact_token_limit makes Codex compact: {before:#?}"
    );
    assert!(
        turns
            .iter()
            .any(|s| s.encrypted_types.iter().any(|t| t == "compaction")),
        "{before:#?}"
    );

    // The account the session is on runs out: 429 for an hour.
    harness.mock.set_rules(vec![Rule::always(Fault::Status429 {
        reset: ResetForm::RetryAfterSeconds(3600),
    })
    .for_key(upstream_key(&bound))]);
    for prompt in ["say pong once more", "and the last pong"] {
        let run = run_turn(true, prompt).await.unwrap();
        assert!(run.success(), "`{prompt}`: {}", run.describe());
        assert!(run.stdout.contains(reply.as_str()), "{}", run.describe());
        runs.push(run);
    }
    let all: Vec<Seen> = seen.lock().unwrap().clone();
    let after = &all[before.len()..];
    for s in after {
        eprintln!("after the lock: {s:?}");
    }
    assert!(after.len() >= 2, "{after:#?}");
    assert!(
        after
            .iter()
            .all(|s| s.status == 200 && !s.connection.is_empty() && s.connection != bound),
        "served elsewhere, every one: {after:#?}"
    );
    assert!(after.iter().any(|s| s.compaction_trigger), "{after:#?}");

    // The first turn after the lock carried the locked account's items: left out, journaled.
    harness.settle().await;
    let events = harness.journal_events().await;
    let first_after = events
        .iter()
        .find(|e| {
            e["kind"] == "request_succeeded" && e["request_id"] == after[0].request_id.as_str()
        })
        .unwrap_or_else(|| panic!("no request_succeeded for {:?}", after[0]));
    assert_eq!(first_after["connection"], after[0].connection);
    assert!(
        first_after["items_left_out"].as_u64().unwrap() > 0,
        "{first_after}"
    );
    // Nothing the session sent later was left out: it stays on its new account.
    for s in &after[1..] {
        let event = events
            .iter()
            .find(|e| e["kind"] == "request_succeeded" && e["request_id"] == s.request_id.as_str())
            .unwrap();
        assert_eq!(event["items_left_out"], 0, "{event}");
    }
}
