//! The real client programs our users point at the node, each run against a node in front of a
//! plain mock and in front of a mock that compresses like a CDN:
//! - openai-node and @anthropic-ai/sdk (`tests/clients/node_sdks.mjs`);
//! - Claude Code (`claude -p … --output-format json`, one streaming `POST /v1/messages?beta=true`);
//! - Codex CLI (`codex exec --json`, built-in provider: a WebSocket probe the node answers 426,
//!   then `POST /v1/responses`), timed; plus one run straight at the mock for comparison.
//!
//! `.ci/run` installs the pinned packages (`npm ci --ignore-scripts --prefix tests/clients`);
//! without them each test says so and does nothing else (in CI, with `CI` set, it fails).

#![expect(
    clippy::unwrap_used,
    clippy::panic,
    reason = "test code: a failed step fails the test loudly"
)]
#![expect(clippy::too_many_lines, reason = "one scenario per test, step by step")]

use crate::support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;
use support::clients::*;
use support::*;

/// Codex through the node must not spend seconds in WebSocket retries (~6.5 s when the
/// upgrade gets anything but 426).
const CODEX_THROUGH_NODE_LIMIT: Duration = Duration::from_secs(5);

fn node_modules() -> PathBuf {
    clients_dir().join("node_modules")
}

const INSTALL: &str = "npm ci --ignore-scripts --prefix tests/clients";

/// Claude Code's native binary. With `--ignore-scripts` the postinstall that copies it over
/// the `bin/claude.exe` stub does not run, so use the platform package's binary.
fn claude_binary() -> Option<PathBuf> {
    let root = node_modules().join("@anthropic-ai");
    let platform = match (std::env::consts::OS, std::env::consts::ARCH) {
        ("linux", "x86_64") => ["linux-x64", "linux-x64-musl"],
        ("linux", "aarch64") => ["linux-arm64", "linux-arm64-musl"],
        ("macos", "x86_64") => ["darwin-x64", "darwin-x64"],
        ("macos", "aarch64") => ["darwin-arm64", "darwin-arm64"],
        _ => return None,
    };
    let native = platform
        .iter()
        .map(|p| root.join(format!("claude-code-{p}/claude")))
        .find(|path| path.is_file());
    // A postinstall that did run leaves the real binary (not a 500-byte stub) in bin/.
    let installed = root.join("claude-code/bin/claude.exe");
    native.or_else(|| {
        let big = std::fs::metadata(&installed).is_ok_and(|m| m.len() > 1_000_000);
        big.then_some(installed)
    })
}

fn parse_json(run: &ClientRun, what: &str) -> Value {
    serde_json::from_str(run.stdout.trim()).unwrap_or_else(|error| {
        panic!(
            "{what}: stdout is not one JSON object ({error}):\n{}",
            run.describe()
        )
    })
}

fn connection_of<'a>(value: &'a Value, what: &str) -> &'a str {
    value["connection"]
        .as_str()
        .unwrap_or_else(|| panic!("{what}: no x-quotaroute-connection in {value}"))
}

async fn blocking(command: std::process::Command) -> ClientRun {
    tokio::task::spawn_blocking(move || run_bounded(command, CLIENT_TIMEOUT))
        .await
        .unwrap()
}

// ---------------------------------------------------------------------------------------
// openai-node and @anthropic-ai/sdk

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_node_and_anthropic_sdk_work_through_the_node() {
    if !node_modules().join("openai").is_dir() || !node_modules().join("@anthropic-ai/sdk").is_dir()
    {
        return not_installed("openai-node and @anthropic-ai/sdk", INSTALL);
    }
    for upstream in Upstream::BOTH {
        let harness = upstream.harness().await;
        let mut command = clean_command("node");
        command
            .arg(clients_dir().join("node_sdks.mjs"))
            .arg(&harness.base)
            .arg(CLIENT_KEY)
            .current_dir(clients_dir());
        let run = blocking(command).await;
        let label = upstream.label();
        assert!(
            run.success(),
            "node_sdks.mjs on the {label}: {}",
            run.describe()
        );
        let out = parse_json(&run, label);
        check_node_sdks(&out, label);
        eprintln!(
            "node_sdks.mjs on the {label}: ok in {:.2?}; SDK-default (base64) embeddings gave {} dimensions",
            run.elapsed, out["openai_embeddings_default"]["dimensions"]
        );
        let seen = mock_connections(&harness);
        assert!(
            seen.iter().any(|(id, _)| id.starts_with("oa-")),
            "{label}: {seen:?}"
        );
        assert!(
            seen.iter().any(|(id, _)| id.starts_with("an-")),
            "{label}: {seen:?}"
        );
    }
}

fn check_node_sdks(out: &Value, label: &str) {
    let reply = mock_text(6);
    // Anthropic calls send max_tokens 16, so the mock sends 16 chunks.
    let long_reply = mock_text(16);
    let at = |key: &str| {
        let value = &out[key];
        assert!(value.is_object(), "{label}: no `{key}` in {out}");
        value
    };
    let openai = |key: &str| {
        let value = at(key);
        let connection = connection_of(value, key);
        assert!(
            connection.starts_with("oa-"),
            "{label}: {key} served by {connection}"
        );
        value
    };
    let anthropic = |key: &str| {
        let value = at(key);
        let connection = connection_of(value, key);
        assert!(
            connection.starts_with("an-"),
            "{label}: {key} served by {connection}"
        );
        value
    };

    let chat = openai("openai_chat");
    assert_eq!(chat["content"], reply.as_str(), "{label}: {chat}");
    assert_eq!(chat["finish_reason"], "stop", "{label}: {chat}");
    assert!(
        chat["prompt_tokens"].as_u64().unwrap() > 0,
        "{label}: {chat}"
    );
    assert_eq!(chat["completion_tokens"], 6, "{label}: {chat}");

    let stream = openai("openai_chat_stream");
    assert_eq!(stream["content"], reply.as_str(), "{label}: {stream}");
    assert!(stream["chunks"].as_u64().unwrap() > 6, "{label}: {stream}");
    assert_eq!(stream["finish_reason"], "stop", "{label}: {stream}");
    assert_eq!(stream["completion_tokens"], 6, "{label}: {stream}");

    let created = openai("openai_responses");
    let id = created["id"].as_str().unwrap();
    assert!(id.starts_with("resp_"), "{label}: {created}");
    assert_eq!(created["status"], "completed", "{label}: {created}");
    assert_eq!(created["text"], reply.as_str(), "{label}: {created}");
    assert!(
        created["input_tokens"].as_u64().unwrap() > 0,
        "{label}: {created}"
    );
    assert_eq!(created["output_tokens"], 6, "{label}: {created}");

    let streamed = openai("openai_responses_stream");
    assert_eq!(streamed["text"], reply.as_str(), "{label}: {streamed}");
    assert_eq!(streamed["output_tokens"], 6, "{label}: {streamed}");
    assert!(
        streamed["completed_id"]
            .as_str()
            .unwrap()
            .starts_with("resp_"),
        "{label}: {streamed}"
    );
    let types: Vec<&str> = streamed["event_types"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    for expected in [
        "response.created",
        "response.output_text.delta",
        "response.output_text.done",
        "response.completed",
    ] {
        assert!(
            types.contains(&expected),
            "{label}: no {expected} in {streamed}"
        );
    }

    let retrieved = openai("openai_responses_retrieve");
    assert_eq!(retrieved["id"], id, "{label}: {retrieved}");
    assert_eq!(retrieved["status"], "completed", "{label}: {retrieved}");
    assert_eq!(retrieved["text"], reply.as_str(), "{label}: {retrieved}");
    // The stored response lives on the connection that created it.
    assert_eq!(
        retrieved["connection"], created["connection"],
        "{label}: {retrieved} vs {created}"
    );

    let model = at("openai_model");
    assert_eq!(model["id"], "team", "{label}: {model}");
    assert_eq!(model["object"], "model", "{label}: {model}");

    let embeddings = openai("openai_embeddings");
    assert_eq!(embeddings["count"], 1, "{label}: {embeddings}");
    assert_eq!(embeddings["dimensions"], 8, "{label}: {embeddings}");
    assert_eq!(embeddings["numeric"], true, "{label}: {embeddings}");
    assert!(
        embeddings["prompt_tokens"].as_u64().unwrap() > 0,
        "{label}: {embeddings}"
    );

    let message = anthropic("anthropic_message");
    assert!(
        message["id"].as_str().unwrap().starts_with("msg_"),
        "{label}: {message}"
    );
    assert_eq!(message["text"], long_reply.as_str(), "{label}: {message}");
    assert_eq!(message["stop_reason"], "end_turn", "{label}: {message}");
    assert!(
        message["input_tokens"].as_u64().unwrap() > 0,
        "{label}: {message}"
    );
    assert_eq!(message["output_tokens"], 16, "{label}: {message}");

    let stream = anthropic("anthropic_stream");
    assert_eq!(stream["text"], long_reply.as_str(), "{label}: {stream}");
    assert!(
        stream["input_tokens"].as_u64().unwrap() > 0,
        "{label}: {stream}"
    );
    assert_eq!(stream["output_tokens"], 16, "{label}: {stream}");
    let types = stream["event_types"].to_string();
    for expected in [
        "message_start",
        "content_block_delta",
        "message_delta",
        "message_stop",
    ] {
        assert!(
            types.contains(expected),
            "{label}: no {expected} in {stream}"
        );
    }

    let helper = at("anthropic_stream_helper");
    assert_eq!(helper["text"], long_reply.as_str(), "{label}: {helper}");
    assert_eq!(helper["output_tokens"], 16, "{label}: {helper}");

    let counted = anthropic("anthropic_count_tokens");
    assert!(
        counted["input_tokens"].as_u64().unwrap() > 0,
        "{label}: {counted}"
    );

    let model = at("anthropic_model");
    assert_eq!(model["id"], "claude", "{label}: {model}");
    assert_eq!(model["type"], "model", "{label}: {model}");
}

// ---------------------------------------------------------------------------------------
// Claude Code

/// Claude Code's output limit for the test: the mock answers that many chunks.
const CLAUDE_MAX_OUTPUT_TOKENS: usize = 8;

fn claude_command(binary: &Path, base: &str, home: &Path) -> std::process::Command {
    let mut command = clean_command(binary);
    command
        .current_dir(home)
        .env("HOME", home)
        .env("TERM", "dumb")
        .env("ANTHROPIC_BASE_URL", base)
        .env("ANTHROPIC_API_KEY", CLIENT_KEY)
        // A combo of the standard config (the default model is not one of the node's names).
        .env("ANTHROPIC_MODEL", "claude")
        .env("ANTHROPIC_SMALL_FAST_MODEL", "claude")
        .env(
            "CLAUDE_CODE_MAX_OUTPUT_TOKENS",
            CLAUDE_MAX_OUTPUT_TOKENS.to_string(),
        )
        // Quiet: no telemetry or update traffic; fail fast instead of minutes of retries.
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("DISABLE_TELEMETRY", "1")
        .env("DISABLE_ERROR_REPORTING", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("CLAUDE_CODE_MAX_RETRIES", "0")
        .args(["-p", "say pong", "--output-format", "json"]);
    command
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_works_through_the_node() {
    let Some(binary) = claude_binary() else {
        return not_installed("Claude Code (@anthropic-ai/claude-code)", INSTALL);
    };
    for upstream in Upstream::BOTH {
        let label = upstream.label();
        let harness = upstream.harness().await;
        let home = client_home("qr-claude-");
        let run = blocking(claude_command(&binary, &harness.base, home.path())).await;
        assert!(run.success(), "claude on the {label}: {}", run.describe());
        let out = parse_json(&run, label);
        assert_eq!(out["type"], "result", "{label}: {}", run.describe());
        assert_eq!(out["is_error"], false, "{label}: {}", run.describe());
        let expected = mock_text(CLAUDE_MAX_OUTPUT_TOKENS);
        assert_eq!(
            out["result"],
            expected.as_str(),
            "{label}: {}",
            run.describe()
        );
        assert_eq!(
            out["usage"]["output_tokens"],
            CLAUDE_MAX_OUTPUT_TOKENS,
            "{label}: {}",
            run.describe()
        );
        assert!(
            out["usage"]["input_tokens"].as_u64().unwrap() > 0,
            "{label}: {}",
            run.describe()
        );
        let seen = mock_connections(&harness);
        assert!(!seen.is_empty(), "{label}: the mock saw no request");
        assert!(
            seen.iter().all(|(id, _)| id.starts_with("an-")),
            "{label}: Claude Code's requests went to {seen:?}"
        );
        assert_eq!(
            harness.mock.stats().total,
            seen.iter().map(|(_, n)| n).sum::<u64>(),
            "{label}: requests on keys that are no connection's"
        );
        eprintln!(
            "claude -p on the {label}: ok in {:.2?}, served by {seen:?}",
            run.elapsed
        );
    }
}

// ---------------------------------------------------------------------------------------
// Codex CLI

/// `codex exec --json "say pong"` with the built-in `openai` provider pointed at `base_url`.
fn codex_command(
    launcher: &Path,
    base_url: &str,
    key: &str,
    model: Option<&str>,
    home: &Path,
) -> std::process::Command {
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
        // Codex ignores OPENAI_API_KEY and OPENAI_BASE_URL.
        .env("CODEX_API_KEY", key)
        .env("RUST_LOG", "off")
        .args(["exec", "--json", "--skip-git-repo-check", "--ephemeral"])
        .args(["-s", "danger-full-access"]);
    if let Some(model) = model {
        command.args(["-m", model]);
    }
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
    command.arg("say pong");
    command
}

/// The JSON lines `codex exec --json` printed.
fn codex_events(run: &ClientRun) -> Vec<Value> {
    run.stdout
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| {
            serde_json::from_str(line).unwrap_or_else(|error| {
                panic!("not a JSON line ({error}): {line}\n{}", run.describe())
            })
        })
        .collect()
}

fn agent_messages(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .filter(|e| e["type"] == "item.completed" && e["item"]["type"] == "agent_message")
        .map(|e| e["item"]["text"].as_str().unwrap_or_default().to_string())
        .collect()
}

fn reconnects(events: &[Value]) -> usize {
    events
        .iter()
        .filter(|e| {
            e["type"] == "error"
                && e["message"]
                    .as_str()
                    .unwrap_or("")
                    .starts_with("Reconnecting")
        })
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_exec_works_through_the_node_without_websocket_retries() {
    let Some(launcher) = codex_launcher() else {
        return not_installed("Codex CLI (@openai/codex)", INSTALL);
    };
    let reply = mock_text(6);
    for upstream in Upstream::BOTH {
        let label = upstream.label();
        let harness = upstream.harness().await;
        let home = client_home("qr-codex-");
        let base_url = format!("{}/v1", harness.base);
        let command = codex_command(&launcher, &base_url, CLIENT_KEY, Some("team"), home.path());
        let run = blocking(command).await;
        assert!(
            run.success(),
            "codex exec on the {label}: {}",
            run.describe()
        );
        let events = codex_events(&run);
        assert_eq!(
            agent_messages(&events),
            [reply.as_str()],
            "{label}: {}",
            run.describe()
        );
        let completed = events
            .iter()
            .find(|e| e["type"] == "turn.completed")
            .unwrap_or_else(|| panic!("{label}: no turn.completed: {}", run.describe()));
        assert_eq!(
            completed["usage"]["output_tokens"], 6,
            "{label}: {completed}"
        );
        assert_eq!(reconnects(&events), 0, "{label}: {}", run.describe());
        let seen = mock_connections(&harness);
        assert!(!seen.is_empty(), "{label}: the mock saw no request");
        assert!(
            seen.iter().all(|(id, _)| id.starts_with("oa-")),
            "{label}: Codex's requests went to {seen:?}"
        );
        eprintln!(
            "codex exec through the node ({label}): {:.2?}, served by {seen:?}",
            run.elapsed
        );
        assert!(
            run.elapsed < CODEX_THROUGH_NODE_LIMIT,
            "{label}: codex exec through the node took {:.2?} (WebSocket retries?): {}",
            run.elapsed,
            run.describe()
        );

        if upstream == Upstream::Plain {
            // For comparison: straight at the mock, which has no WebSocket route (its
            // `GET /v1/responses` is a 405), so Codex retries the upgrade before falling back.
            let home = client_home("qr-codex-direct-");
            let base_url = format!("{}/v1", harness.mock_base);
            let command = codex_command(
                &launcher,
                &base_url,
                "sk-direct-to-the-mock",
                None,
                home.path(),
            );
            let direct = blocking(command).await;
            let events = codex_events(&direct);
            eprintln!(
                "codex exec straight at the mock: {:.2?}, {} reconnect events, fallback {}, rc {:?}; through the node: {:.2?}",
                direct.elapsed,
                reconnects(&events),
                events.iter().any(|e| e["item"]["message"].as_str().unwrap_or("").starts_with("Falling back")),
                direct.status.and_then(|s| s.code()),
                run.elapsed,
            );
            assert!(
                direct.success(),
                "codex exec straight at the mock: {}",
                direct.describe()
            );
            assert_eq!(
                agent_messages(&events),
                [reply.as_str()],
                "direct: {}",
                direct.describe()
            );
        }
    }
}

// ---------------------------------------------------------------------------------------
// The guard every client run relies on.

#[test]
fn a_hung_client_is_killed_with_its_children_after_the_timeout() {
    let mut command = clean_command("sh");
    // A child in the background holds stdout open, as a launcher's native binary would.
    command.args(["-c", "sleep 30 & sleep 30"]);
    let run = run_bounded(command, Duration::from_millis(300));
    assert!(run.timed_out, "{}", run.describe());
    assert!(!run.success());
    assert!(run.elapsed < Duration::from_secs(5), "{}", run.describe());
}
