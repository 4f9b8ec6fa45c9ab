//! Google's own clients, unchanged, on a pool of Gemini accounts through the node (issue 53
//! item 6): the google-genai Python SDK (`tests/sdk/sdk_gemini.py`, in `.venv-sdk`) and
//! `@google/genai` for Node (`tests/clients/node_genai.mjs`) — generate, stream, a function
//! call, countTokens — and Gemini CLI finishing a tool-using prompt; both SDKs also on OpenAI
//! and Anthropic accounts (translated, `countTokens` counted by the router). `.ci/run` installs them;
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
/// token count, usage from `usageMetadata`. The reply is the mock's six words, or as many
/// pieces as the request's output limit where a Messages account needs one (`max_tokens`, the
/// router's `default_max_tokens` when a Gemini client names none).
fn check_answers(out: &Value, what: &str) {
    let reply = |at: &str| {
        let text = out[at]["text"].as_str().unwrap_or_default();
        assert!(text.starts_with(&mock_text(6)), "{what}: {at}: {text:.200}");
    };
    reply("generate");
    assert!(
        out["generate"]["prompt_tokens"].as_u64().unwrap() > 0,
        "{what}: {out}"
    );
    assert!(
        out["generate"]["output_tokens"].as_u64().unwrap() > 0,
        "{what}: {out}"
    );
    reply("stream");
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
}

/// Upstream requests the keys of `ids` got.
fn asked(harness: &Harness, ids: &[&str]) -> u64 {
    let stats = harness.mock.stats();
    ids.iter().map(|id| stats.for_key(&upstream_key(id))).sum()
}

const GEMINI_KEYS: [&str; 3] = ["gm-1", "gm-2", "gm-3"];

/// What both SDKs must have seen ([`check_answers`]), and the node charged it to Gemini
/// connections only.
fn check_sdk(out: &Value, harness: &Harness, what: &str) {
    check_answers(out, what);
    assert_eq!(out["generate"]["text"], mock_text(6), "{what}: {out}");
    assert_eq!(out["stream"]["text"], mock_text(6), "{what}: {out}");
    // generate, stream, the call (countTokens is not a generation: the mock does not count it).
    assert!(asked(harness, &GEMINI_KEYS) >= 3, "{what}");
    assert!(mock_connections(harness).is_empty(), "{what}");
}

/// The same answers from accounts of another API (`ids`), translated; no Gemini key asked
/// and `countTokens` counted by the router.
fn check_sdk_elsewhere(out: &Value, harness: &Harness, ids: &[&str], what: &str) {
    check_answers(out, what);
    assert!(asked(harness, ids) >= 3, "{what}");
    assert_eq!(asked(harness, &GEMINI_KEYS), 0, "{what}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_google_genai_python_sdk_works_on_gemini_accounts() {
    let Some(python) = sdk_python() else {
        return not_installed("the google-genai Python SDK", ".ci/run creates .venv-sdk");
    };
    let harness = gemini_harness().await;
    let (run, out) = python_sdk(&harness, &python, "gemini").await;
    check_sdk(&out, &harness, "google-genai (Python)");
    check_router_404(&out);
    // The thinking turn's signatures came sealed (behaviour §15) and, decoded and re-encoded
    // by the SDK, went back to their maker as the account's own.
    let signatures = out["signed_turn"]["signatures"].as_array().unwrap();
    assert!(!signatures.is_empty(), "{out}");
    assert!(signatures.iter().all(|s| s == "qrg1"), "{out}");
    let originals: Vec<String> = GEMINI_KEYS
        .iter()
        .map(|id| quotaroute_mock::gemini_thought_signature(&upstream_key(id)))
        .collect();
    assert!(
        harness.mock.recent_bodies().iter().any(|(_, body)| {
            let body = String::from_utf8_lossy(body);
            body.contains("functionResponse") && originals.iter().any(|o| body.contains(o))
        }),
        "the maker got its own signature back"
    );
    eprintln!("sdk_gemini.py: ok in {:.2?}", run.elapsed);
}

/// The router's own 404, in Google's shape, read by the SDK as Google's.
fn check_router_404(out: &Value) {
    assert_eq!(out["not_found"]["code"], 404, "{out}");
    assert_eq!(out["not_found"]["status"], "NOT_FOUND", "{out}");
}

/// `sdk_gemini.py` against the node, asking for `model`.
async fn python_sdk(harness: &Harness, python: &PathBuf, model: &str) -> (ClientRun, Value) {
    let home = client_home("qr-genai-python-");
    let mut command = clean_command(python);
    command
        .env("HOME", home.path())
        .arg(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/sdk/sdk_gemini.py"))
        .arg(&harness.base)
        .arg(CLIENT_KEY)
        .arg(model);
    let run = blocking(command).await;
    assert!(run.success(), "sdk_gemini.py ({model}): {}", run.describe());
    let out = parse_json(&run, "sdk_gemini.py");
    (run, out)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_google_genai_sdks_work_on_openai_and_anthropic_accounts() {
    let Some(python) = sdk_python() else {
        return not_installed("the google-genai Python SDK", ".ci/run creates .venv-sdk");
    };
    let harness = gemini_harness().await;
    let (run, out) = python_sdk(&harness, &python, "team").await;
    check_sdk_elsewhere(
        &out,
        &harness,
        &["oa-1", "oa-2", "oa-3"],
        "google-genai (Python) on OpenAI",
    );
    check_router_404(&out);
    eprintln!(
        "sdk_gemini.py on OpenAI accounts: ok in {:.2?}",
        run.elapsed
    );
    if !node_modules().join("@google/genai").is_dir() {
        return not_installed(
            "@google/genai",
            "npm ci --ignore-scripts --prefix tests/clients",
        );
    }
    let mut command = clean_command("node");
    command
        .arg(clients_dir().join("node_genai.mjs"))
        .arg(&harness.base)
        .arg(CLIENT_KEY)
        .arg("claude")
        .current_dir(clients_dir());
    let run = blocking(command).await;
    assert!(run.success(), "node_genai.mjs (claude): {}", run.describe());
    let out = parse_json(&run, "node_genai.mjs");
    check_sdk_elsewhere(
        &out,
        &harness,
        &["an-1", "an-2", "an-3"],
        "@google/genai on Anthropic",
    );
    eprintln!(
        "node_genai.mjs on Anthropic accounts: ok in {:.2?}",
        run.elapsed
    );
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

/// Gemini CLI asked to write a file through its `write_file` tool, on the node's `model`:
/// what it printed, and the file's text.
async fn gemini_cli_writes_a_file(
    cli: &PathBuf,
    harness: &Harness,
    model: &str,
) -> (ClientRun, String) {
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
        .arg(cli)
        .args(["--approval-mode", "yolo", "-m", model, "-p", &prompt])
        .current_dir(work.path());
    let run = blocking(command).await;
    assert!(run.success(), "gemini cli ({model}): {}", run.describe());
    let written = std::fs::read_to_string(&target)
        .unwrap_or_else(|error| panic!("{error}: {}", run.describe()));
    (run, written)
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
    let (run, written) = gemini_cli_writes_a_file(&cli, &harness, "gemini").await;
    assert_eq!(written, "written through quotaroute");
    assert!(run.stdout.contains("mock"), "{}", run.describe());
    assert!(asked(&harness, &GEMINI_KEYS) >= 2, "{}", run.describe());
    eprintln!("gemini cli: ok in {:.2?}", run.elapsed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gemini_cli_finishes_a_tool_using_prompt_on_openai_accounts() {
    let Some(cli) = gemini_cli() else {
        return not_installed(
            "Gemini CLI",
            "npm ci --ignore-scripts --prefix tests/clients",
        );
    };
    let harness = gemini_harness().await;
    let (run, written) = gemini_cli_writes_a_file(&cli, &harness, "team").await;
    assert_eq!(written, "written through quotaroute");
    assert!(run.stdout.contains("mock"), "{}", run.describe());
    assert!(
        asked(&harness, &["oa-1", "oa-2", "oa-3"]) >= 2,
        "{}",
        run.describe()
    );
    assert_eq!(asked(&harness, &GEMINI_KEYS), 0);
    eprintln!("gemini cli on OpenAI accounts: ok in {:.2?}", run.elapsed);
}
