//! Issue 53 deliverable 6, the other way round: Claude Code and Codex, which speak Messages and
//! Responses only, each finish a tool-using turn on a pool of Gemini keys (`format = "gemini"`,
//! the mock speaking Google's API). Asserts what the client printed, that the tool ran, and
//! that every upstream request was Google's `models/{model}:{method}` with the tool's result
//! going back as a `functionResponse` named for its call.

use serde_json::Value;

use crate::node_gemini_native::gemini_pool;
use crate::support::claude_tmux::claude_binary;
use crate::support::clients::*;
use crate::support::*;

const INSTALL: &str = "npm ci --ignore-scripts --prefix tests/clients";
const SIX: &str = "This is a mock reply.";

/// Every body the mock received, each asserted to be one of Google's generation paths.
fn gemini_bodies(harness: &Harness) -> Vec<Value> {
    harness
        .mock
        .recent_bodies()
        .iter()
        .map(|(path, body)| {
            assert!(
                path.starts_with("/v1beta/models/gemini-2.5-flash:")
                    && path.contains("enerateContent"),
                "{path}"
            );
            serde_json::from_slice(body).unwrap_or_default()
        })
        .collect()
}

/// The `functionResponse` sent back for a call of `name`, with the call before it.
fn assert_result_went_back(sent: &[Value], name: &str) {
    let with_result = sent
        .iter()
        .find(|body| body.to_string().contains("\"functionResponse\""))
        .unwrap_or_else(|| panic!("no functionResponse went up: {sent:?}"));
    let parts: Vec<&Value> = with_result["contents"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|content| content["parts"].as_array().into_iter().flatten())
        .collect();
    let call = parts
        .iter()
        .find_map(|part| part.get("functionCall"))
        .unwrap_or_else(|| panic!("no call before the result: {with_result}"));
    assert_eq!(call["name"], name, "{with_result}");
    let response = parts
        .iter()
        .find_map(|part| part.get("functionResponse"))
        .unwrap();
    assert_eq!(response["name"], name, "{with_result}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_runs_a_tool_turn_on_gemini_keys() {
    let Some(binary) = claude_binary() else {
        return not_installed("Claude Code", INSTALL);
    };
    let harness = Harness::start_editing(gemini_pool).await;
    let home = client_home("qr-claude-gemini-");
    let prompt = r#"mock-tool-call:Bash {"command":"echo ran-on-gemini > proof.txt","description":"write proof"}"#;
    let command = claude_tool_turn(&binary, home.path(), (&harness.base, "gemini"), prompt);
    let run = tokio::task::spawn_blocking(move || run_bounded(command, CLIENT_TIMEOUT))
        .await
        .unwrap();
    assert!(run.success(), "claude -p: {}", run.describe());
    eprintln!("claude -p on Gemini keys: ok in {:.2?}", run.elapsed);
    let out: Value = serde_json::from_str(run.stdout.trim())
        .unwrap_or_else(|e| panic!("{e}: {}", run.describe()));
    assert_eq!(out["is_error"], false, "{}", run.describe());
    let proof = std::fs::read_to_string(home.path().join("proof.txt"))
        .unwrap_or_else(|e| panic!("the tool did not run ({e}): {}", run.describe()));
    assert_eq!(proof.trim(), "ran-on-gemini");
    assert!(out["num_turns"].as_u64().unwrap_or(0) >= 2, "{out}");
    assert_result_went_back(&gemini_bodies(&harness), "Bash");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_runs_a_tool_turn_on_gemini_keys() {
    let Some(launcher) = codex_launcher() else {
        return not_installed("Codex CLI (@openai/codex)", INSTALL);
    };
    let harness = Harness::start_editing(gemini_pool).await;
    let base_url = format!("{}/v1", harness.base);
    let home = client_home("qr-codex-gemini-");
    let prompt = r#"mock-tool-call:exec_command {"cmd":"echo ran-on-gemini > proof.txt"}"#;
    let home_path = home.path().to_path_buf();
    // Web search: Gemini's `googleSearch` is carried, but the mock does not search.
    let run = tokio::task::spawn_blocking(move || {
        codex_exec(
            &launcher,
            (&base_url, "gemini"),
            &home_path,
            false,
            &["web_search=\"disabled\"".to_string()],
            prompt,
        )
    })
    .await
    .unwrap();
    assert!(run.success(), "codex exec: {}", run.describe());
    assert!(run.stdout.contains(SIX), "{}", run.describe());
    eprintln!("codex exec on Gemini keys: ok in {:.2?}", run.elapsed);
    let proof = std::fs::read_to_string(home.path().join("work/proof.txt"))
        .unwrap_or_else(|e| panic!("the tool did not run: {e}"));
    assert_eq!(proof.trim(), "ran-on-gemini");
    assert_result_went_back(&gemini_bodies(&harness), "exec_command");
}
