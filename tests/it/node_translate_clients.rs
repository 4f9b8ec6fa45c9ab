//! Issue 37 deliverable 6, real clients across formats on loopback (HOME in a temp dir, as
//! `node_clients.rs` runs them): Claude Code `-p` on the OpenAI-format combo `team` runs a tool
//! the (OpenAI-format) mock asks for and sends its result back, and an interactive Claude Code
//! typed into in tmux holds a two-turn conversation there; Codex `exec` on the
//! Anthropic-format combo `claude` completes two turns, the second carrying the first's
//! thinking back to the account that made it, and runs a tool loop there. Each asserts what
//! the client printed and what the mock received (the upstream request's format).

use std::path::Path;

use serde_json::Value;

use crate::support::claude_tmux::{claude_binary, tmux, two_pongs_on_team};
use crate::support::clients::*;
use crate::support::*;

const INSTALL: &str = "npm ci --ignore-scripts --prefix tests/clients";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_runs_a_tool_turn_on_openai_format_accounts() {
    let Some(binary) = claude_binary() else {
        return not_installed("Claude Code", INSTALL);
    };
    let harness = Harness::start().await;
    let home = client_home("qr-claude-translated-");
    let prompt = r#"mock-tool-call:Bash {"command":"echo ran-through-translation > proof.txt","description":"write proof"}"#;
    // The OpenAI-format combo: every request is translated messages>chat.
    let command = claude_tool_turn(&binary, home.path(), (&harness.base, "team"), prompt);
    let run = tokio::task::spawn_blocking(move || run_bounded(command, CLIENT_TIMEOUT))
        .await
        .unwrap();
    assert!(run.success(), "claude -p: {}", run.describe());
    let out: Value = serde_json::from_str(run.stdout.trim())
        .unwrap_or_else(|e| panic!("{e}: {}", run.describe()));
    assert_eq!(out["is_error"], false, "{}", run.describe());
    // Claude Code ran the tool the (OpenAI-format) upstream asked for...
    let proof = std::fs::read_to_string(home.path().join("proof.txt"))
        .unwrap_or_else(|e| panic!("the tool did not run ({e}): {}", run.describe()));
    assert_eq!(proof.trim(), "ran-through-translation");
    // ...sent its result back, and printed the answer to it.
    assert_eq!(out["result"], mock_text(8), "{}", run.describe());
    assert!(out["num_turns"].as_u64().unwrap_or(0) >= 2, "{out}");
    let bodies = harness.mock.recent_bodies();
    assert!(
        bodies
            .iter()
            .all(|(path, _)| path == "/v1/chat/completions"),
        "{bodies:?}"
    );
    let result_sent = bodies.iter().any(|(_, body)| {
        let sent: Value = serde_json::from_slice(body).unwrap();
        sent["messages"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["role"] == "tool")
    });
    assert!(result_sent, "the tool result went up as a tool message");
}

/// The answers Codex gets here: one sentence ([`mock_text`] of [`REPLY_CHUNKS`]), as a model
/// that is done says so. Uncapped, the router's default `max_tokens` (no Codex request sets
/// one) makes the mock stream 4096 text deltas, and Codex 0.171's in-process app server passes
/// each on through a bounded queue that drops what does not fit ("dropping in-process server
/// notification (queue full)", logged in most runs of such an answer): when the consumer falls
/// behind at the answer's end, the message's `item/completed` is dropped and `codex exec`
/// prints no `agent_message` although it received the whole item. The relay's side of long
/// answers is `stream_relay`'s translated tests.
const REPLY_CHUNKS: usize = 6;

/// The agent messages `codex exec --json` printed.
fn agent_messages(stdout: &str) -> Vec<String> {
    stdout
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|e| e["type"] == "item.completed" && e["item"]["type"] == "agent_message")
        .filter_map(|e| e["item"]["text"].as_str().map(str::to_owned))
        .collect()
}

/// `codex exec …` (or `codex exec resume --last …`) in `home` on the Anthropic-format combo
/// `claude`, reasoning on (Codex then asks for encrypted reasoning and sends it back), web
/// search off: OpenAI's built-in web search has no Anthropic equivalent, and offered it is
/// refused (behaviour §14).
fn codex_turn(
    launcher: &Path,
    base_url: &str,
    home: &Path,
    resume: bool,
    prompt: &str,
) -> ClientRun {
    let no_search = "web_search=\"disabled\"".to_string();
    codex_exec(
        launcher,
        (base_url, "claude"),
        home,
        resume,
        &[no_search],
        prompt,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_completes_two_turns_on_anthropic_format_accounts() {
    let Some(launcher) = codex_launcher() else {
        return not_installed("Codex CLI (@openai/codex)", INSTALL);
    };
    let harness = Harness::start().await;
    harness.mock.cap_reply_chunks(Some(REPLY_CHUNKS as u64));
    let base_url = format!("{}/v1", harness.base);
    let home = client_home("qr-codex-translated-");
    let mut served = Vec::new();
    for (resume, prompt) in [(false, "say pong"), (true, "say pong again")] {
        let (launcher, base_url, home_path) = (
            launcher.clone(),
            base_url.clone(),
            home.path().to_path_buf(),
        );
        let run = tokio::task::spawn_blocking(move || {
            codex_turn(&launcher, &base_url, &home_path, resume, prompt)
        })
        .await
        .unwrap();
        assert!(run.success(), "`{prompt}`: {}", run.describe());
        // Codex printed the (Anthropic-format) mock's answer as its agent message.
        assert_eq!(
            agent_messages(&run.stdout),
            [mock_text(REPLY_CHUNKS)],
            "{}",
            run.describe()
        );
        served.push(mock_connections(&harness));
    }
    // Every upstream request was a Messages request, with thinking on (Codex's effort).
    let bodies = harness.mock.recent_bodies();
    assert!(!bodies.is_empty());
    assert!(
        bodies.iter().all(|(path, _)| path == "/v1/messages"),
        "{:?}",
        bodies.iter().map(|(p, _)| p).collect::<Vec<_>>()
    );
    let sent: Vec<Value> = bodies
        .iter()
        .map(|(_, body)| serde_json::from_slice(body).unwrap())
        .collect();
    assert!(
        sent.iter().all(|s| s["thinking"]["type"] == "enabled"),
        "{sent:?}"
    );
    // The second turn carried the first's thinking back (Codex sends reasoning items back;
    // the router restored the block), to the account that made it, which verified it.
    let last = sent.last().unwrap();
    let thinking: Vec<&Value> = last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "assistant")
        .flat_map(|m| m["content"].as_array().unwrap())
        .filter(|b| b["type"] == "thinking")
        .collect();
    assert_eq!(thinking.len(), 1, "{last}");
    let accounts: Vec<&(String, u64)> = served
        .last()
        .unwrap()
        .iter()
        .filter(|(id, _)| id.starts_with("an-"))
        .collect();
    assert_eq!(
        accounts.len(),
        1,
        "one account served the session: {served:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interactive_claude_code_session_runs_on_openai_format_accounts() {
    let Some(binary) = claude_binary() else {
        return not_installed("Claude Code", INSTALL);
    };
    let Some(tmux_binary) = tmux() else {
        return not_installed("tmux", "apt-get install tmux");
    };
    let harness = Harness::start().await;
    // Both answers are on the screen.
    two_pongs_on_team(tmux_binary, binary, harness.base.clone(), "translated").await;
    let bodies = harness.mock.recent_bodies();
    assert!(!bodies.is_empty());
    assert!(
        bodies
            .iter()
            .all(|(path, _)| path == "/v1/chat/completions"),
        "{:?}",
        bodies.iter().map(|(p, _)| p).collect::<Vec<_>>()
    );
    // The second turn went up with the first turn's exchange in its history. The second turn
    // is the request with its prompt and the longest history: Claude Code sends side requests
    // of its own (a title, a topic) that may come last, with the prompt alone.
    let sent: Vec<Value> = bodies
        .iter()
        .map(|(_, body)| serde_json::from_slice(body).unwrap())
        .collect();
    let last = sent
        .iter()
        .filter(|body| body.to_string().contains("say pong again"))
        .max_by_key(|body| body["messages"].as_array().map_or(0, Vec::len))
        .unwrap_or_else(|| panic!("no request carried the second prompt: {sent:?}"));
    let roles: Vec<&str> = last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["role"].as_str())
        .collect();
    assert!(roles.contains(&"assistant"), "{roles:?}");
    assert!(
        mock_connections(&harness)
            .iter()
            .all(|(id, _)| id.starts_with("oa-")),
        "{:?}",
        mock_connections(&harness)
    );
}

/// Codex's tool loop on an Anthropic-format account: the mock (thinking on) answers with a
/// signed thinking block and an `exec_command` call; Codex runs it and sends the output back
/// with the reasoning item, which goes up again as the thinking block the call follows — so
/// thinking stays on for the tool result's turn, and the account accepts the signature.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_runs_a_tool_on_anthropic_format_accounts() {
    let Some(launcher) = codex_launcher() else {
        return not_installed("Codex CLI (@openai/codex)", INSTALL);
    };
    let harness = Harness::start().await;
    harness.mock.cap_reply_chunks(Some(REPLY_CHUNKS as u64));
    let base_url = format!("{}/v1", harness.base);
    let home = client_home("qr-codex-translated-tool-");
    let home_path = home.path().to_path_buf();
    let prompt =
        r#"mock-tool-call:exec_command {"cmd":"echo ran-through-translation > proof.txt"}"#;
    let run = tokio::task::spawn_blocking(move || {
        codex_turn(&launcher, &base_url, &home_path, false, prompt)
    })
    .await
    .unwrap();
    assert!(run.success(), "{}", run.describe());
    let proof = std::fs::read_to_string(home.path().join("work/proof.txt"))
        .unwrap_or_else(|e| panic!("the tool did not run ({e}): {}", run.describe()));
    assert_eq!(proof.trim(), "ran-through-translation");
    assert_eq!(
        agent_messages(&run.stdout),
        [mock_text(REPLY_CHUNKS)],
        "{}",
        run.describe()
    );
    let sent: Vec<Value> = harness
        .mock
        .recent_bodies()
        .iter()
        .map(|(path, body)| {
            assert_eq!(path, "/v1/messages");
            serde_json::from_slice(body).unwrap()
        })
        .collect();
    // The turn that handed the result back: the call after its thinking block, the result.
    let with_result = sent
        .iter()
        .find(|s| s.to_string().contains("tool_result"))
        .unwrap_or_else(|| panic!("no tool result went up: {sent:?}"));
    let assistant = with_result["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "assistant")
        .unwrap();
    let kinds: Vec<&str> = assistant["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|b| b["type"].as_str())
        .collect();
    assert_eq!(kinds, ["thinking", "tool_use"], "{assistant}");
    assert_eq!(with_result["thinking"]["type"], "enabled", "{with_result}");
}
