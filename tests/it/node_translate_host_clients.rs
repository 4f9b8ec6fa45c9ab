//! Issue 52 deliverable 7, real clients on accounts that do not serve their API (the mock run
//! as a chat-only host and as a responses-only host, providers' `apis` saying so): Codex `exec`
//! runs a tool and `exec resume` continues on a chat-only host (responses>chat); Claude Code
//! `-p` runs a tool, and an interactive Claude Code holds a two-turn conversation, on a
//! responses-only host (messages>responses); the official openai and anthropic SDKs (Python
//! and Node) on the host kinds `node_translate.rs` does not cover: Responses (and Messages
//! thinking) on a chat-only host that reasons; Messages (with thinking) and Chat Completions on
//! a responses-only host.
//! Each asserts what the client printed or parsed and what the mock received (the host's API).

#![expect(
    clippy::unwrap_used,
    reason = "test code: a failed step fails the test loudly"
)]

use std::path::PathBuf;

use serde_json::{json, Value};

use crate::node_translate_hosts::{openai_hosts_serving, upstream_paths};
use crate::support::claude_tmux::{claude_binary, tmux, two_pongs_on_team};
use crate::support::clients::*;
use crate::support::*;

const INSTALL: &str = "npm ci --ignore-scripts --prefix tests/clients";
const SIX: &str = "This is a mock reply.";
/// The mock's thinking text (its reasoning summary, its `reasoning_content`).
const THOUGHT: &str = "The user wants a reply; a short one will do.";

/// The bodies the mock received, parsed, each asserted to be on `path`.
fn bodies_on(harness: &Harness, path: &str) -> Vec<Value> {
    harness
        .mock
        .recent_bodies()
        .iter()
        .map(|(sent_to, body)| {
            assert_eq!(sent_to, path, "{:?}", upstream_paths(harness));
            serde_json::from_slice(body).unwrap()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_runs_a_tool_and_resumes_on_a_chat_only_host() {
    let Some(launcher) = codex_launcher() else {
        return not_installed("Codex CLI (@openai/codex)", INSTALL);
    };
    let harness = openai_hosts_serving(&["chat"]).await;
    let base_url = format!("{}/v1", harness.base);
    let home = client_home("qr-codex-chat-host-");
    let turns = [
        (
            false,
            r#"mock-tool-call:exec_command {"cmd":"echo ran-on-a-chat-host > proof.txt"}"#,
        ),
        (true, "say pong again"),
    ];
    for (resume, prompt) in turns {
        let (launcher, base_url, home_path) = (
            launcher.clone(),
            base_url.clone(),
            home.path().to_path_buf(),
        );
        // Web search is a built-in tool no Chat Completions host carries.
        let run = tokio::task::spawn_blocking(move || {
            codex_exec(
                &launcher,
                (&base_url, "team"),
                &home_path,
                resume,
                &["web_search=\"disabled\"".to_string()],
                prompt,
            )
        })
        .await
        .unwrap();
        assert!(run.success(), "`{prompt}`: {}", run.describe());
        assert!(run.stdout.contains(SIX), "`{prompt}`: {}", run.describe());
        // The host's `reasoning_content` (Codex asks for effort) reached Codex as reasoning.
        let reasoning = run.stdout.lines().any(|line| {
            let event: Value = serde_json::from_str(line).unwrap_or_default();
            event["item"]["type"] == "reasoning"
                && event["item"]["text"]
                    .as_str()
                    .is_some_and(|text| text.contains(THOUGHT))
        });
        assert!(reasoning, "`{prompt}`: {}", run.describe());
        eprintln!(
            "codex exec (resume: {resume}) on a chat-only host: ok in {:.2?}",
            run.elapsed
        );
    }
    // The tool ran, in the first turn.
    let proof = std::fs::read_to_string(home.path().join("work/proof.txt"))
        .unwrap_or_else(|e| panic!("the tool did not run: {e}"));
    assert_eq!(proof.trim(), "ran-on-a-chat-host");
    // Every upstream request was a Chat Completions request.
    let sent = bodies_on(&harness, "/v1/chat/completions");
    // The tool's output went up as a tool message answering the assistant's call.
    let with_result = sent
        .iter()
        .find(|s| {
            s["messages"]
                .as_array()
                .unwrap()
                .iter()
                .any(|m| m["role"] == "tool")
        })
        .unwrap_or_else(|| panic!("no tool result went up: {sent:?}"));
    let messages = with_result["messages"].as_array().unwrap();
    let call = messages
        .iter()
        .find_map(|m| m["tool_calls"].as_array().and_then(|calls| calls.first()))
        .unwrap_or_else(|| panic!("no assistant call before the result: {with_result}"));
    assert_eq!(call["function"]["name"], "exec_command");
    let result = messages.iter().find(|m| m["role"] == "tool").unwrap();
    assert_eq!(result["tool_call_id"], call["id"]);
    // The resumed turn carried the whole first turn (call, result, answer) and the new prompt.
    let last = sent.last().unwrap();
    let text = last.to_string();
    assert!(text.contains("say pong again"), "{last}");
    assert!(text.contains("ran-on-a-chat-host"), "{last}");
    let roles: Vec<&str> = last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["role"].as_str())
        .collect();
    assert!(roles.contains(&"tool"), "{roles:?}");
    assert_eq!(roles.last(), Some(&"user"), "{roles:?}");
    // Reasoning is not sent back to a chat host (DeepSeek refuses `reasoning_content` in
    // its input).
    assert!(!text.contains(THOUGHT), "{last}");
    assert!(
        sent.iter().all(|s| s["reasoning_effort"] == "low"),
        "{sent:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_runs_a_tool_turn_on_a_responses_only_host() {
    let Some(binary) = claude_binary() else {
        return not_installed("Claude Code", INSTALL);
    };
    let harness = openai_hosts_serving(&["responses"]).await;
    let home = client_home("qr-claude-responses-host-");
    let prompt = r#"mock-tool-call:Bash {"command":"echo ran-on-a-responses-host > proof.txt","description":"write proof"}"#;
    let command = claude_tool_turn(&binary, home.path(), (&harness.base, "team"), prompt);
    let run = tokio::task::spawn_blocking(move || run_bounded(command, CLIENT_TIMEOUT))
        .await
        .unwrap();
    assert!(run.success(), "claude -p: {}", run.describe());
    eprintln!(
        "claude -p on a responses-only host: ok in {:.2?}",
        run.elapsed
    );
    let out: Value = serde_json::from_str(run.stdout.trim())
        .unwrap_or_else(|e| panic!("{e}: {}", run.describe()));
    assert_eq!(out["is_error"], false, "{}", run.describe());
    let proof = std::fs::read_to_string(home.path().join("proof.txt"))
        .unwrap_or_else(|e| panic!("the tool did not run ({e}): {}", run.describe()));
    assert_eq!(proof.trim(), "ran-on-a-responses-host");
    assert_eq!(out["result"], mock_text(8), "{}", run.describe());
    assert!(out["num_turns"].as_u64().unwrap_or(0) >= 2, "{out}");
    // Every upstream request was a Responses request; the result went up as the call's output.
    let sent = bodies_on(&harness, "/v1/responses");
    let with_result = sent
        .iter()
        .find(|s| {
            s["input"].as_array().is_some_and(|items| {
                items
                    .iter()
                    .any(|item| item["type"] == "function_call_output")
            })
        })
        .unwrap_or_else(|| panic!("no function_call_output went up: {sent:?}"));
    let items = with_result["input"].as_array().unwrap();
    let call = items
        .iter()
        .find(|item| item["type"] == "function_call")
        .unwrap_or_else(|| panic!("no call before the output: {with_result}"));
    assert_eq!(call["name"], "Bash");
    let output = items
        .iter()
        .find(|item| item["type"] == "function_call_output")
        .unwrap();
    assert_eq!(output["call_id"], call["call_id"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interactive_claude_code_session_runs_on_a_responses_only_host() {
    let Some(binary) = claude_binary() else {
        return not_installed("Claude Code", INSTALL);
    };
    let Some(tmux_binary) = tmux() else {
        return not_installed("tmux", "apt-get install tmux");
    };
    let harness = openai_hosts_serving(&["responses"]).await;
    // Both answers are on the screen.
    two_pongs_on_team(tmux_binary, binary, harness.base.clone(), "responses-host").await;
    // Every request went up as a Responses request; the second turn carried the first. The
    // second turn is the request with its prompt and the longest history: Claude Code sends
    // side requests of its own (a title, a topic) that may come last, with the prompt alone.
    let sent = bodies_on(&harness, "/v1/responses");
    let last = sent
        .iter()
        .filter(|body| body.to_string().contains("say pong again"))
        .max_by_key(|body| body["input"].as_array().map_or(0, Vec::len))
        .unwrap_or_else(|| panic!("no request carried the second prompt: {sent:?}"));
    let roles: Vec<&str> = last["input"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|item| item["role"].as_str())
        .collect();
    assert!(roles.contains(&"assistant"), "{roles:?}");
}

fn sdk_python() -> Option<PathBuf> {
    if let Ok(path) = std::env::var("QUOTAROUTE_SDK_PYTHON") {
        return Some(PathBuf::from(path));
    }
    let venv = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".venv-sdk/bin/python");
    venv.exists().then_some(venv)
}

/// Runs `tests/sdk/sdk_hosts.py` and `tests/clients/node_sdks_hosts.mjs` against `harness`
/// for a host serving only `host`; what each printed, keyed `python` and `node`.
async fn run_sdks(harness: &Harness, host: &str) -> Value {
    let mut out = serde_json::Map::new();
    match sdk_python() {
        None => {
            eprintln!("SDK venv not installed (.ci/run creates .venv-sdk): nothing to run");
            assert!(std::env::var("CI").is_err(), "CI must install the SDK venv");
        }
        Some(python) => {
            let home = client_home("qr-python-hosts-");
            let mut command = clean_command(&python);
            command
                .env("HOME", home.path())
                .arg(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/sdk/sdk_hosts.py"))
                .args([&harness.base, CLIENT_KEY, host]);
            let run = tokio::task::spawn_blocking(move || run_bounded(command, CLIENT_TIMEOUT))
                .await
                .unwrap();
            assert!(run.success(), "sdk_hosts.py {host}: {}", run.describe());
            eprintln!("sdk_hosts.py {host}: ok in {:.2?}", run.elapsed);
            let parsed: Value = serde_json::from_str(run.stdout.trim()).unwrap();
            out.insert("python".into(), parsed);
        }
    }
    if clients_dir().join("node_modules/openai").exists() {
        let mut command = clean_command("node");
        command
            .arg(clients_dir().join("node_sdks_hosts.mjs"))
            .args([&harness.base, CLIENT_KEY, host])
            .current_dir(clients_dir());
        let run = tokio::task::spawn_blocking(move || run_bounded(command, CLIENT_TIMEOUT))
            .await
            .unwrap();
        assert!(
            run.success(),
            "node_sdks_hosts.mjs {host}: {}",
            run.describe()
        );
        eprintln!("node_sdks_hosts.mjs {host}: ok in {:.2?}", run.elapsed);
        let parsed: Value = serde_json::from_str(run.stdout.trim()).unwrap();
        out.insert("node".into(), parsed);
    } else {
        not_installed("the Node SDKs", INSTALL);
    }
    Value::Object(out)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn official_responses_sdks_and_thinking_work_on_a_chat_only_host() {
    let harness = openai_hosts_serving(&["chat"]).await;
    let out = run_sdks(&harness, "chat").await;
    for (sdk, out) in out.as_object().unwrap() {
        assert_eq!(out["responses"]["text"], SIX, "{sdk}: {out}");
        assert_eq!(out["responses"]["status"], "completed", "{sdk}: {out}");
        assert_eq!(out["responses"]["output_tokens"], 6, "{sdk}: {out}");
        assert!(
            out["responses"]["input_tokens"].as_u64().unwrap() > 0,
            "{sdk}: {out}"
        );
        assert_eq!(
            out["responses"]["translated"], "responses>chat",
            "{sdk}: {out}"
        );
        assert_eq!(out["responses_stream"]["text"], SIX, "{sdk}: {out}");
        assert_eq!(out["responses_stream"]["deltas"], 6, "{sdk}: {out}");
        assert_eq!(out["responses_stream"]["output_tokens"], 6, "{sdk}: {out}");
        assert_eq!(out["responses_tool"]["name"], "get_weather", "{sdk}: {out}");
        assert_eq!(
            out["responses_tool"]["arguments"],
            json!({"city": "Paris"}),
            "{sdk}: {out}"
        );
        assert_eq!(out["responses_tool"]["follow_up"], SIX, "{sdk}: {out}");
        assert_eq!(
            out["responses_tool_stream"]["arguments"],
            json!({"city": "Paris"}),
            "{sdk}: {out}"
        );
        assert!(
            out["responses_tool_stream"]["pieces"].as_u64().unwrap() > 1,
            "{sdk}: {out}"
        );
    }
    // Streamed on a reasoning chat host: the reasoning as summary deltas (openai-node) and
    // as a thinking block (@anthropic-ai/sdk, messages>chat).
    if let Some(node) = out.get("node") {
        let reasoning = &node["responses_reasoning_stream"];
        assert_eq!(reasoning["summary"], THOUGHT, "{node}");
        assert_eq!(
            reasoning["kinds"],
            json!(["reasoning", "message"]),
            "{node}"
        );
        assert_eq!(reasoning["text"], SIX, "{node}");
        let thinking = &node["messages_thinking_stream"];
        assert_eq!(thinking["thinking"], THOUGHT, "{node}");
        assert_eq!(thinking["kinds"], json!(["thinking", "text"]), "{node}");
    }
    // openai-python's reasoning round trip on a reasoning chat host.
    if let Some(python) = out.get("python") {
        let reasoning = &python["responses_reasoning"];
        assert_eq!(
            reasoning["kinds"],
            json!(["reasoning", "message"]),
            "{python}"
        );
        assert_eq!(reasoning["summary"], THOUGHT, "{python}");
        assert_eq!(reasoning["second"], SIX, "{python}");
    }
    let sent = bodies_on(&harness, "/v1/chat/completions");
    assert!(
        sent.iter().all(|s| !s.to_string().contains(THOUGHT)),
        "no reasoning went back to the chat host"
    );
    assert!(
        sent.iter().any(|s| s["messages"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["role"] == "tool" && m["content"] == "sunny")),
        "the tool's output went up as a tool message"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn official_messages_and_chat_sdks_work_on_a_responses_only_host() {
    let harness = openai_hosts_serving(&["responses"]).await;
    let out = run_sdks(&harness, "responses").await;
    for (sdk, out) in out.as_object().unwrap() {
        assert_eq!(out["messages"]["text"], SIX, "{sdk}: {out}");
        assert_eq!(out["messages"]["stop_reason"], "end_turn", "{sdk}: {out}");
        assert_eq!(out["messages"]["output_tokens"], 6, "{sdk}: {out}");
        assert!(
            out["messages"]["input_tokens"].as_u64().unwrap() > 0,
            "{sdk}: {out}"
        );
        assert_eq!(
            out["messages"]["translated"], "messages>responses",
            "{sdk}: {out}"
        );
        assert_eq!(out["messages_stream"]["text"], SIX, "{sdk}: {out}");
        assert_eq!(out["messages_stream"]["output_tokens"], 6, "{sdk}: {out}");
        // Thinking not asked for: the host's (empty) reasoning item opens no thinking block.
        assert_eq!(
            out["messages_stream"]["kinds"],
            json!(["text"]),
            "{sdk}: {out}"
        );
        assert_eq!(out["messages_tool"]["name"], "get_weather", "{sdk}: {out}");
        assert_eq!(
            out["messages_tool"]["input"],
            json!({"city": "Paris"}),
            "{sdk}: {out}"
        );
        assert_eq!(
            out["messages_tool"]["stop_reason"], "tool_use",
            "{sdk}: {out}"
        );
        assert!(
            out["messages_tool"]["pieces"].as_u64().unwrap() > 1,
            "{sdk}: {out}"
        );
        assert_eq!(out["messages_tool"]["follow_up"], SIX, "{sdk}: {out}");
        // Thinking asked for is shown: the host's reasoning summary as a thinking block.
        if sdk == "python" {
            let thinking = &out["messages_thinking"];
            assert_eq!(thinking["kinds"], json!(["thinking", "text"]), "{out}");
            assert_eq!(thinking["thinking"], THOUGHT, "{out}");
            assert_eq!(
                thinking["second_kinds"],
                json!(["thinking", "text"]),
                "{out}"
            );
            assert_eq!(thinking["second_text"], SIX, "{out}");
        } else {
            let thinking = &out["messages_thinking_stream"];
            assert_eq!(thinking["kinds"], json!(["thinking", "text"]), "{out}");
            assert_eq!(thinking["thinking"], THOUGHT, "{out}");
        }
        // Chat Completions clients on the same host (chat>responses).
        assert_eq!(out["chat"]["content"], SIX, "{sdk}: {out}");
        assert_eq!(out["chat"]["finish"], "stop", "{sdk}: {out}");
        assert_eq!(out["chat"]["completion_tokens"], 6, "{sdk}: {out}");
        assert_eq!(out["chat"]["translated"], "chat>responses", "{sdk}: {out}");
        assert_eq!(out["chat_stream"]["content"], SIX, "{sdk}: {out}");
        assert_eq!(out["chat_stream"]["completion_tokens"], 6, "{sdk}: {out}");
        assert_eq!(out["chat_tool"]["finish"], "tool_calls", "{sdk}: {out}");
        assert_eq!(
            out["chat_tool"]["arguments"],
            json!({"city": "Paris"}),
            "{sdk}: {out}"
        );
        assert!(
            out["chat_tool"]["pieces"].as_u64().unwrap() > 1,
            "{sdk}: {out}"
        );
        assert_eq!(out["chat_tool"]["follow_up"], SIX, "{sdk}: {out}");
    }
    let sent = bodies_on(&harness, "/v1/responses");
    assert!(
        sent.iter()
            .any(|s| s["input"].as_array().is_some_and(|items| items
                .iter()
                .any(|i| i["type"] == "function_call_output" && i["output"] == "sunny"))),
        "the tool's result went up as a function_call_output"
    );
}
