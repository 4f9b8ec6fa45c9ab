//! Google's own clients, unchanged, on a pool of Gemini accounts through the node (issue 53
//! item 6): the google-genai Python SDK (`tests/sdk/sdk_gemini.py`, in `.venv-sdk`) and
//! `@google/genai` for Node (`tests/clients/node_genai.mjs`) — generate, stream, a function
//! call, countTokens — and Gemini CLI finishing a tool-using prompt. `.ci/run` installs them;
//! without them each test says so and does nothing else (in CI, with `CI` set, it fails).

use std::path::PathBuf;

use quotaroute_actors::SystemClock;
use serde_json::Value;

use crate::node_gemini_native::gemini_pool;
use crate::support::clients::*;
use crate::support::*;

async fn gemini_harness() -> Harness {
    Harness::start_on_clock(gemini_pool, std::sync::Arc::new(SystemClock)).await
}

fn sdk_python() -> Option<PathBuf> {
    if let Ok(path) = std::env::var("QUOTAROUTE_SDK_PYTHON") {
        return Some(PathBuf::from(path));
    }
    let venv = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".venv-sdk/bin/python");
    venv.exists().then_some(venv)
}

fn node_modules() -> PathBuf {
    clients_dir().join("node_modules")
}

async fn blocking(command: std::process::Command) -> ClientRun {
    tokio::task::spawn_blocking(move || run_bounded(command, CLIENT_TIMEOUT))
        .await
        .unwrap()
}

fn parse_json(run: &ClientRun, what: &str) -> Value {
    serde_json::from_str(run.stdout.trim().lines().last().unwrap_or("")).unwrap_or_else(|error| {
        panic!("{what}: not one JSON object ({error}):\n{}", run.describe())
    })
}

/// What both SDKs must have seen: the mock's reply, streamed in pieces, a function call, a
/// token count, usage from `usageMetadata`; and the node charged it to Gemini connections.
fn check_sdk(out: &Value, harness: &Harness, what: &str) {
    assert_eq!(out["generate"]["text"], mock_text(6), "{what}: {out}");
    assert!(
        out["generate"]["prompt_tokens"].as_u64().unwrap() > 0,
        "{what}: {out}"
    );
    assert!(
        out["generate"]["output_tokens"].as_u64().unwrap() > 0,
        "{what}: {out}"
    );
    assert_eq!(out["stream"]["text"], mock_text(6), "{what}: {out}");
    assert!(
        out["stream"]["chunks"].as_u64().unwrap() > 1,
        "{what}: {out}"
    );
    assert!(
        out["stream"]["output_tokens"].as_u64().unwrap() > 0,
        "{what}: {out}"
    );
    assert_eq!(out["tool"]["name"], "lookup", "{what}: {out}");
    assert_eq!(out["tool"]["args"]["q"], "x", "{what}: {out}");
    assert!(out["count_tokens"].as_u64().unwrap() > 0, "{what}: {out}");
    let stats = harness.mock.stats();
    let gemini: u64 = ["gm-1", "gm-2", "gm-3"]
        .iter()
        .map(|id| stats.for_key(&upstream_key(id)))
        .sum();
    // generate, stream, the call (countTokens is not a generation: the mock does not count it).
    assert!(gemini >= 3, "{what}: {stats:?}");
    assert!(mock_connections(harness).is_empty(), "{what}: {stats:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_google_genai_python_sdk_works_on_gemini_accounts() {
    let Some(python) = sdk_python() else {
        return not_installed("the google-genai Python SDK", ".ci/run creates .venv-sdk");
    };
    let harness = gemini_harness().await;
    let home = client_home("qr-genai-python-");
    let mut command = clean_command(&python);
    command
        .env("HOME", home.path())
        .arg(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/sdk/sdk_gemini.py"))
        .arg(&harness.base)
        .arg(CLIENT_KEY)
        .arg("gemini");
    let run = blocking(command).await;
    assert!(run.success(), "sdk_gemini.py: {}", run.describe());
    let out = parse_json(&run, "sdk_gemini.py");
    check_sdk(&out, &harness, "google-genai (Python)");
    // The router's own 404, in Google's shape, read by the SDK as Google's.
    assert_eq!(out["not_found"]["code"], 404, "{out}");
    assert_eq!(out["not_found"]["status"], "NOT_FOUND", "{out}");
    eprintln!("sdk_gemini.py: ok in {:.2?}", run.elapsed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_google_genai_node_sdk_works_on_gemini_accounts() {
    if !node_modules().join("@google/genai").is_dir() {
        return not_installed(
            "@google/genai",
            "npm ci --ignore-scripts --prefix tests/clients",
        );
    }
    let harness = gemini_harness().await;
    let mut command = clean_command("node");
    command
        .arg(clients_dir().join("node_genai.mjs"))
        .arg(&harness.base)
        .arg(CLIENT_KEY)
        .arg("gemini")
        .current_dir(clients_dir());
    let run = blocking(command).await;
    assert!(run.success(), "node_genai.mjs: {}", run.describe());
    let out = parse_json(&run, "node_genai.mjs");
    check_sdk(&out, &harness, "@google/genai (Node)");
    eprintln!("node_genai.mjs: ok in {:.2?}", run.elapsed);
}

/// Gemini CLI's entry point in its package (run with `node`: no install scripts ran).
fn gemini_cli() -> Option<PathBuf> {
    let entry = node_modules().join("@google/gemini-cli/bundle/gemini.js");
    entry.exists().then_some(entry)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gemini_cli_finishes_a_tool_using_prompt_on_gemini_accounts() {
    let Some(cli) = gemini_cli() else {
        return not_installed(
            "Gemini CLI",
            "npm ci --ignore-scripts --prefix tests/clients",
        );
    };
    let harness = gemini_harness().await;
    let home = client_home("qr-gemini-cli-");
    let work = tempfile::tempdir().unwrap();
    let target = work.path().join("note.txt");
    let settings = home.path().join(".gemini");
    std::fs::create_dir_all(&settings).unwrap();
    std::fs::write(
        settings.join("settings.json"),
        r#"{"security":{"auth":{"selectedType":"gemini-api-key"}},"general":{"disableAutoUpdate":true,"disableUpdateNag":true},"privacy":{"usageStatisticsEnabled":false},"telemetry":{"enabled":false}}"#,
    )
    .unwrap();
    let args = serde_json::json!({"file_path": target.display().to_string(), "content": "written through quotaroute"});
    let prompt = format!("mock-tool-call:write_file {args}");
    let mut command = clean_command("node");
    command
        .env("HOME", home.path())
        .env("GEMINI_API_KEY", CLIENT_KEY)
        // The base-URL setting Gemini CLI 0.61 reads (bundle/docs/reference/configuration.md).
        .env("GOOGLE_GEMINI_BASE_URL", &harness.base)
        .env("GEMINI_CLI_NO_RELAUNCH", "true")
        .env("GEMINI_CLI_TRUST_WORKSPACE", "true")
        .env("NO_COLOR", "1")
        .arg(&cli)
        .args(["--approval-mode", "yolo", "-m", "gemini", "-p", &prompt])
        .current_dir(work.path());
    let run = blocking(command).await;
    assert!(run.success(), "gemini cli: {}", run.describe());
    let written = std::fs::read_to_string(&target)
        .unwrap_or_else(|error| panic!("{error}: {}", run.describe()));
    assert_eq!(written, "written through quotaroute");
    assert!(run.stdout.contains("mock"), "{}", run.describe());
    let stats = harness.mock.stats();
    let gemini: u64 = ["gm-1", "gm-2", "gm-3"]
        .iter()
        .map(|id| stats.for_key(&upstream_key(id)))
        .sum();
    assert!(gemini >= 2, "{stats:?}");
    eprintln!("gemini cli: ok in {:.2?}", run.elapsed);
}
