//! Behaviour §10 with the real clients (issue #27): an interactive Claude Code session, typed
//! into in tmux, and a Codex `exec` with a follow-up (`exec resume --last`) each keep every
//! conversation turn on one account (`route_decided.affinity` new, then held), and a second
//! session's first turn is placed by §2 (DRR), away from the account the first one ran ahead on.
//!
//! Each client talks to a small recording proxy in front of the node, which keeps what formed
//! the group (the hints in the body, the session headers) and the connection that served; the
//! journal (`/admin/journal`) says what affinity did. Both are printed, so the README's
//! "real clients" paragraph can say what each version sends on the wire.

#![expect(
    clippy::unwrap_used,
    clippy::panic,
    reason = "test code: a failed step fails the test loudly"
)]

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use crate::support::claude_tmux::*;
use crate::support::clients::*;
use crate::support::*;

const INSTALL: &str = "npm ci --ignore-scripts --prefix tests/clients";

/// The session headers the node reads (`src/wire/affinity_group.rs`), in its order.
const SESSION_HEADERS: [&str; 5] = [
    "x-quotaroute-affinity",
    "x-claude-code-session-id",
    "session-id",
    "thread-id",
    "x-session-id",
];

/// Claude Code's small-fast model: its side requests (a one-message, tool-less title/topic
/// request before each turn) go to combo `quick` on its own key, so they are told apart from
/// the conversation by model and touch neither the pool's deficits nor its in-flight counts.
const SIDE_MODEL: &str = "quick";

/// The standard config plus connection `an-q` and combo `quick` on it.
fn with_side_combo(text: String) -> String {
    format!(
        "{text}\n[[connections]]\nid = \"an-q\"\nprovider = \"anthropic\"\napi_key = \"{}\"\n\
         \n[[combos]]\nname = \"{SIDE_MODEL}\"\ntargets = [{{ connection = \"an-q\", model = \"claude-3-5-haiku\" }}]\n",
        upstream_key("an-q")
    )
}

// ---------------------------------------------------------------------------------------
// The recording proxy

/// One request a client sent, as the proxy saw it.
#[derive(Debug, Clone)]
struct Seen {
    method: String,
    path: String,
    model: String,
    /// The body's hints that name a group (behaviour §10 order), as `(name, value)`.
    hints: Vec<(String, String)>,
    /// The session headers present, as `(name, value)`.
    headers: Vec<(String, String)>,
    /// `x-quotaroute-connection` of the node's answer.
    connection: String,
}

impl Seen {
    /// What the node derives the group from: the first hint it has.
    fn group_source(&self) -> String {
        if self.method != "POST" {
            return "none (no body)".into();
        }
        self.hints
            .iter()
            .chain(&self.headers)
            .next()
            .map(|(name, _)| name.clone())
            .unwrap_or_else(|| "prefix".into())
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

#[derive(Clone)]
struct Proxy {
    node: String,
    client: reqwest::Client,
    seen: Arc<Mutex<Vec<Seen>>>,
}

/// Starts the proxy on a free loopback port; returns its base URL and its record.
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

fn short(value: &str) -> String {
    let mut text: String = value.chars().take(100).collect();
    if value.chars().count() > 100 {
        text.push('…');
    }
    text
}

/// Forwards one request to the node (answers buffered: the mock's are short) and records it.
/// A WebSocket upgrade (Codex's probe) is answered 426 here, as the node would.
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
    let method_name = method.to_string();
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
    let mut hints = Vec::new();
    for (name, value) in [
        ("prompt_cache_key", &json["prompt_cache_key"]),
        ("metadata.user_id", &json["metadata"]["user_id"]),
    ] {
        if let Some(text) = value.as_str().filter(|t| !t.is_empty()) {
            hints.push((name.to_string(), text.to_string()));
        }
    }
    let session = SESSION_HEADERS
        .iter()
        .filter_map(|name| {
            let value = headers.get(*name)?.to_str().ok()?;
            Some((name.to_string(), value.to_string()))
        })
        .collect();
    proxy.seen.lock().unwrap().push(Seen {
        method: method_name,
        path: path.to_string(),
        model: json["model"].as_str().unwrap_or_default().to_string(),
        hints,
        headers: session,
        connection: answer_headers
            .get("x-quotaroute-connection")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string(),
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

fn print_seen(what: &str, seen: &[Seen]) {
    eprintln!("{what}: {} requests on the wire", seen.len());
    let pairs = |list: &[(String, String)]| {
        list.iter()
            .map(|(name, value)| format!("{name}={}", short(value)))
            .collect::<Vec<_>>()
    };
    for s in seen {
        eprintln!(
            "  {} {} model={:?} served_by={:?} group_from={} hints={:?} session_headers={:?}",
            s.method,
            s.path,
            s.model,
            s.connection,
            s.group_source(),
            pairs(&s.hints),
            pairs(&s.headers)
        );
    }
}

// ---------------------------------------------------------------------------------------
// The journal

/// One routed request of a combo: what affinity did and who served it, joined on request id.
#[derive(Debug, Clone)]
struct Turn {
    model: String,
    affinity: String,
    connection: String,
}

/// The routed requests in journal order, joined with the connection that served them.
async fn routed_turns(harness: &Harness) -> Vec<Turn> {
    let events = harness.journal_events().await;
    let served: HashMap<String, String> = events
        .iter()
        .filter(|e| e["kind"] == "request_succeeded")
        .map(|e| {
            (
                e["request_id"].as_str().unwrap().to_string(),
                e["connection"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    events
        .iter()
        .filter(|e| e["kind"] == "route_decided")
        .map(|e| {
            let id = e["request_id"].as_str().unwrap();
            Turn {
                model: e["model"].as_str().unwrap_or_default().to_string(),
                affinity: e["affinity"].as_str().unwrap_or_default().to_string(),
                connection: served.get(id).cloned().unwrap_or_default(),
            }
        })
        .collect()
}

/// The turns of combo `model` among `turns` (one session's): asserts there are at least
/// `min_turns`, all served by one connection, affinity `new` then `held`; returns it.
fn one_account(what: &str, turns: &[Turn], model: &str, min_turns: usize) -> String {
    let ours: Vec<&Turn> = turns.iter().filter(|t| t.model == model).collect();
    eprintln!(
        "{what}: {:?}",
        ours.iter()
            .map(|t| format!("{}:{}", t.connection, t.affinity))
            .collect::<Vec<_>>()
    );
    assert!(
        ours.len() >= min_turns,
        "{what}: {} turns of {model} in the journal, wanted ≥ {min_turns}: {turns:?}",
        ours.len()
    );
    let first = &ours[0];
    assert_eq!(first.affinity, "new", "{what}: {ours:?}");
    assert!(!first.connection.is_empty(), "{what}: {ours:?}");
    for turn in &ours[1..] {
        assert_eq!(turn.affinity, "held", "{what}: {ours:?}");
        assert_eq!(turn.connection, first.connection, "{what}: {ours:?}");
    }
    first.connection.clone()
}

// ---------------------------------------------------------------------------------------
// Claude Code, interactive, in tmux

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interactive_claude_code_session_keeps_its_turns_on_one_key() {
    let Some(binary) = claude_binary() else {
        return not_installed("Claude Code (@anthropic-ai/claude-code)", INSTALL);
    };
    let Some(tmux_binary) = tmux() else {
        return not_installed("tmux", "apt-get install tmux");
    };
    let version = std::process::Command::new(&binary)
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    let harness = Harness::start_editing(with_side_combo).await;
    let (proxy, seen) = start_proxy(&harness.base).await;
    let tmux = Tmux::new(tmux_binary, "claude");
    let _guard = TmuxGuard(tmux.clone());
    let session = |name: &'static str, prompts: &'static [&'static str]| {
        let (tmux, binary, proxy) = (tmux.clone(), binary.clone(), proxy.clone());
        tokio::task::spawn_blocking(move || {
            let started = Instant::now();
            let pane = claude_session(
                &tmux,
                &binary,
                &ClaudeSession {
                    base: &proxy,
                    name,
                    model: "claude",
                    side_model: SIDE_MODEL,
                },
                prompts,
            );
            tmux.run(&["kill-session", "-t", name]);
            eprintln!("session {name} in {:.2?}:\n{pane}", started.elapsed());
        })
    };

    let prompts: &[&str] = &[
        "first question alpha",
        "second question beta",
        "third question gamma",
    ];
    session("one", prompts).await.unwrap();
    let turns = routed_turns(&harness).await;
    let first = one_account("Claude Code session one", &turns, "claude", prompts.len());
    let side = turns.iter().filter(|t| t.model == SIDE_MODEL).count();
    eprintln!("session one: {side} side requests (model {SIDE_MODEL}) beside the conversation");

    // A second session: its group is new, so §2 places it. The first session's key took every
    // turn so far (and paid each turn's DRR share), so it is ahead of its share and DRR sends
    // the new session elsewhere (with N decisions on equal weights a key's count stays within
    // 1 of N/3, so the fourth cannot land on the key that holds three).
    let prompts2: &[&str] = &["another session asks", "and asks again"];
    session("two", prompts2).await.unwrap();
    let all = routed_turns(&harness).await;
    let later = &all[turns.len()..];
    let second = one_account("Claude Code session two", later, "claude", prompts2.len());
    assert_ne!(second, first, "the second session went by DRR: {all:?}");

    let seen = seen.lock().unwrap().clone();
    print_seen(&format!("Claude Code {version}"), &seen);
    let conversation: Vec<&Seen> = seen.iter().filter(|s| s.model == "claude").collect();
    assert!(conversation.len() >= prompts.len() + prompts2.len());
    for s in &conversation {
        assert!(!s.connection.is_empty(), "{s:?}");
        // The group comes from `metadata.user_id` (first in §10's order): a JSON string whose
        // `session_id` is the session header's value, so one group per session.
        assert_eq!(s.group_source(), "metadata.user_id", "{s:?}");
        let session = s.header("x-claude-code-session-id").unwrap_or_else(|| {
            panic!("Claude Code {version} sent no x-claude-code-session-id: {s:?}")
        });
        let user_id: Value = serde_json::from_str(&s.hints[0].1).unwrap();
        assert_eq!(user_id["session_id"], session, "{s:?}");
    }
    let sessions: std::collections::HashSet<&str> = conversation
        .iter()
        .filter_map(|s| s.header("x-claude-code-session-id"))
        .collect();
    assert_eq!(
        sessions.len(),
        2,
        "two sessions, two session ids: {sessions:?}"
    );
}

// ---------------------------------------------------------------------------------------
// Codex exec, then exec resume --last

/// `codex exec …` (or `codex exec resume --last …`) in `home`, the built-in provider pointed
/// at `base_url`. Not `--ephemeral`: the follow-up resumes the recorded session.
fn codex_turn(
    launcher: &Path,
    base_url: &str,
    home: &Path,
    resume: bool,
    prompt: &str,
) -> ClientRun {
    let codex_home = home.join("codex");
    let work = home.join("work");
    std::fs::create_dir_all(&codex_home).unwrap();
    std::fs::create_dir_all(&work).unwrap();
    let mut command = clean_command("node");
    command
        .arg(launcher)
        .current_dir(&work)
        .env("HOME", home)
        .env("CODEX_HOME", &codex_home)
        .env("CODEX_API_KEY", CLIENT_KEY)
        .env("RUST_LOG", "off")
        .arg("exec");
    if resume {
        command.args(["resume", "--last"]);
    }
    command
        .args(["--json", "--skip-git-repo-check", "-m", "team"])
        .args(["-c", "sandbox_mode=\"danger-full-access\""]);
    for setting in [
        format!("openai_base_url=\"{base_url}\""),
        "check_for_update_on_startup=false".to_string(),
        "analytics.enabled=false".to_string(),
        "features.plugins=false".to_string(),
        "features.remote_plugin=false".to_string(),
        "features.apps=false".to_string(),
    ] {
        command.args(["-c", &setting]);
    }
    command.arg(prompt);
    run_bounded(command, CLIENT_TIMEOUT)
}

/// The thread id `codex exec --json` reports.
fn codex_thread(run: &ClientRun) -> String {
    run.stdout
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .find(|e| e["type"] == "thread.started")
        .and_then(|e| e["thread_id"].as_str().map(str::to_string))
        .unwrap_or_else(|| panic!("no thread.started: {}", run.describe()))
}

/// One Codex session: `exec` then `exec resume --last`; returns the thread ids of both runs.
async fn codex_session(launcher: &Path, base_url: &str, what: &str) -> (String, String) {
    let home = client_home("qr-codex-affinity-");
    let reply = mock_text(6);
    let mut threads = Vec::new();
    for (resume, prompt) in [(false, "say pong"), (true, "say pong again")] {
        let (launcher, base_url, home_path) = (
            launcher.to_path_buf(),
            base_url.to_string(),
            home.path().to_path_buf(),
        );
        let run = tokio::task::spawn_blocking(move || {
            codex_turn(&launcher, &base_url, &home_path, resume, prompt)
        })
        .await
        .unwrap();
        assert!(run.success(), "{what}, `{prompt}`: {}", run.describe());
        assert!(
            run.stdout.contains(reply.as_str()),
            "{what}: {}",
            run.describe()
        );
        eprintln!(
            "{what}: `codex exec{}` in {:.2?}",
            if resume { " resume --last" } else { "" },
            run.elapsed
        );
        threads.push(codex_thread(&run));
    }
    (threads[0].clone(), threads[1].clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_exec_and_its_follow_up_stay_on_one_key() {
    let Some(launcher) = codex_launcher() else {
        return not_installed("Codex CLI (@openai/codex)", INSTALL);
    };
    let version = run_bounded(
        {
            let mut c = clean_command("node");
            c.arg(&launcher).arg("--version");
            c
        },
        CLIENT_TIMEOUT,
    )
    .stdout
    .trim()
    .to_string();
    let harness = Harness::start().await;
    let (proxy, seen) = start_proxy(&harness.base).await;
    let base_url = format!("{proxy}/v1");

    let (thread, resumed) = codex_session(&launcher, &base_url, "Codex session one").await;
    assert_eq!(thread, resumed, "`exec resume --last` is the same session");
    let turns = routed_turns(&harness).await;
    let first = one_account("Codex session one", &turns, "team", 2);

    // A second session (a fresh CODEX_HOME): a new group, placed by §2. Combo `team` is
    // oa-1:oa-2:oa-3 = 2:1:1; with every decision so far on the first session's key (which
    // paid each one's DRR share) that key is ahead of its share and the next goes elsewhere
    // (after N decisions a target's count is within 1 of N·w/Σw).
    let (thread2, _) = codex_session(&launcher, &base_url, "Codex session two").await;
    assert_ne!(thread2, thread);
    let all = routed_turns(&harness).await;
    let second = one_account("Codex session two", &all[turns.len()..], "team", 2);
    assert_ne!(second, first, "the second session went by DRR: {all:?}");

    let seen = seen.lock().unwrap().clone();
    print_seen(&format!("Codex {version}"), &seen);
    let turns: Vec<&Seen> = seen
        .iter()
        .filter(|s| s.path.starts_with("/v1/responses") && s.model == "team")
        .collect();
    assert!(turns.len() >= 4, "{turns:?}");
    for s in &turns {
        // The group comes from `prompt_cache_key` (first in §10's order), which Codex sets to
        // its thread id, as it does both session headers.
        assert_eq!(s.group_source(), "prompt_cache_key", "{s:?}");
        let key = s.hints[0].1.as_str();
        assert_eq!(s.header("session-id"), Some(key), "{version}: {s:?}");
        assert_eq!(s.header("thread-id"), Some(key), "{version}: {s:?}");
    }
    let keys: std::collections::HashSet<&str> =
        turns.iter().map(|s| s.hints[0].1.as_str()).collect();
    assert_eq!(keys.len(), 2, "two sessions, two thread ids: {keys:?}");
    assert!(keys.contains(thread.as_str()), "{keys:?} vs {thread}");
}
