//! The clients our users run: the official `openai` and `anthropic` Python SDKs against the
//! node (streaming and not), in front of a plain mock and of one that compresses like a CDN.
//! `.ci/run` installs them into `.venv-sdk`; without that venv (or `QUOTAROUTE_SDK_PYTHON`)
//! this test says so and does nothing else (in CI, with `CI` set, it fails).
//! The Node SDKs, Claude Code and Codex CLI are in `node_clients.rs`.

#![expect(
    clippy::unwrap_used,
    reason = "test code: a failed step fails the test loudly"
)]

use crate::support;

use std::path::PathBuf;

use serde_json::Value;
use support::clients::*;
use support::*;

fn sdk_python() -> Option<PathBuf> {
    if let Ok(path) = std::env::var("QUOTAROUTE_SDK_PYTHON") {
        return Some(PathBuf::from(path));
    }
    let venv = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".venv-sdk/bin/python");
    venv.exists().then_some(venv)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn official_openai_and_anthropic_sdks_work_through_the_router() {
    let Some(python) = sdk_python() else {
        eprintln!("SDK venv not installed (.ci/run creates .venv-sdk): nothing to run");
        assert!(std::env::var("CI").is_err(), "CI must install the SDK venv");
        return;
    };
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/sdk/sdk_clients.py");
    for upstream in Upstream::BOTH {
        let label = upstream.label();
        let harness = upstream.harness().await;
        let mut command = clean_command(&python);
        // No proxies, no user config: only what the SDKs need.
        let home = client_home("qr-python-sdk-");
        command
            .env("HOME", home.path())
            .arg(&script)
            .arg(&harness.base)
            .arg(CLIENT_KEY);
        let output = tokio::task::spawn_blocking(move || run_bounded(command, CLIENT_TIMEOUT))
            .await
            .unwrap();
        assert!(
            output.success(),
            "SDK script failed on the {label}: {}",
            output.describe()
        );
        let result: Value = serde_json::from_str(output.stdout.trim())
            .unwrap_or_else(|error| panic!("{label}: {error}: {}", output.describe()));
        check(&result, label);
        eprintln!(
            "sdk_clients.py on the {label}: ok in {:.2?}",
            output.elapsed
        );
    }
}

fn check(result: &Value, label: &str) {
    // The mock's words: 6 chunks by default, `max_tokens` (32 here) on Anthropic calls.
    assert_eq!(result["openai_chat"]["content"], mock_text(6), "{label}");
    assert_eq!(result["openai_stream"]["content"], mock_text(6), "{label}");
    assert_eq!(
        result["anthropic_message"]["text"],
        mock_text(32),
        "{label}"
    );
    assert_eq!(result["anthropic_stream"]["text"], mock_text(32), "{label}");
    assert!(
        !result["openai_chat"]["content"]
            .as_str()
            .unwrap()
            .is_empty(),
        "{label}: {result}"
    );
    assert!(
        result["openai_chat"]["prompt_tokens"].as_u64().unwrap() > 0,
        "{label}: {result}"
    );
    assert!(
        result["openai_chat"]["connection"]
            .as_str()
            .unwrap()
            .starts_with("oa-"),
        "{label}: {result}"
    );
    assert!(
        result["openai_stream"]["chunks"].as_u64().unwrap() > 1,
        "{label}: {result}"
    );
    assert!(
        result["openai_stream_usage"].as_u64().unwrap() > 0,
        "{label}: {result}"
    );
    assert_eq!(result["openai_not_found"], 404, "{label}: {result}");
    assert!(
        !result["anthropic_message"]["text"]
            .as_str()
            .unwrap()
            .is_empty(),
        "{label}: {result}"
    );
    assert!(
        result["anthropic_stream"]["output_tokens"]
            .as_u64()
            .unwrap()
            > 0,
        "{label}: {result}"
    );
    assert!(
        !result["anthropic_stream"]["text"]
            .as_str()
            .unwrap()
            .is_empty(),
        "{label}: {result}"
    );
}
