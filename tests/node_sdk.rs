//! The clients our users run: the official `openai` and `anthropic` Python SDKs against the
//! node (streaming and not). `.ci/run` installs them into `.venv-sdk`; without that venv (or
//! `QUOTAROUTE_SDK_PYTHON`) this test says so and does nothing else.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

mod support;

use std::path::PathBuf;

use serde_json::Value;
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
    let harness = Harness::start().await;
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/sdk/sdk_clients.py");
    let base = harness.base.clone();
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new(python)
            .arg(script)
            .arg(base)
            .arg(CLIENT_KEY)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(
        output.status.success(),
        "SDK script failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let result: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert!(!result["openai_chat"]["content"]
        .as_str()
        .unwrap()
        .is_empty());
    assert!(result["openai_chat"]["prompt_tokens"].as_u64().unwrap() > 0);
    assert!(result["openai_chat"]["connection"]
        .as_str()
        .unwrap()
        .starts_with("oa-"));
    assert!(result["openai_stream"]["chunks"].as_u64().unwrap() > 1);
    assert!(result["openai_stream_usage"].as_u64().unwrap() > 0);
    assert_eq!(result["openai_not_found"], 404);
    assert!(!result["anthropic_message"]["text"]
        .as_str()
        .unwrap()
        .is_empty());
    assert!(
        result["anthropic_stream"]["output_tokens"]
            .as_u64()
            .unwrap()
            > 0
    );
    assert!(!result["anthropic_stream"]["text"]
        .as_str()
        .unwrap()
        .is_empty());
}
