//! Papercuts found driving real clients (issue #25), on the real binary:
//! - every request the router refuses (unknown model or endpoint, a bad key, the WebSocket
//!   probe) leaves one `info` line with its request id, status, code and client;
//! - `GET /v1/responses` answers 426 with or without `Upgrade` (a proxy may drop it);
//! - resetting a CLOSED breaker logs no CLOSED → CLOSED transition;
//! - SIGTERM leaves a "stopped" line;
//! - every command exits quietly when its output pipe is closed (`… | head -1`).

#![expect(clippy::too_many_lines, reason = "one scenario per test, step by step")]
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::{free_port, standard_config, wait_ready, KillOnDrop, ADMIN_KEY, CLIENT_KEY};

fn quotaroute() -> Command {
    Command::new(env!("CARGO_BIN_EXE_quotaroute"))
}

/// The node's JSON log lines.
fn log_lines(path: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_are_logged_the_probe_is_426_a_closed_reset_is_quiet_and_sigterm_says_stopped() {
    let (mock_base, _mock) = crate::support::start_mock().await;
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let text = standard_config(&mock_base, &dir.path().join("journal"), "").replace(
        "listen = \"127.0.0.1:0\"",
        &format!("listen = \"127.0.0.1:{port}\""),
    );
    let config = dir.path().join("quotaroute.toml");
    std::fs::write(&config, text).unwrap();
    let log = dir.path().join("node.log");
    let mut node = KillOnDrop(
        quotaroute()
            .args(["serve", "--config"])
            .arg(&config)
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap(),
    );
    let base = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::new();
    wait_ready(&client, &base).await;

    let chat = |key: &str, model: &str| {
        client
            .post(format!("{base}/v1/chat/completions"))
            .bearer_auth(key)
            .header("x-request-id", format!("req-{model}"))
            .json(&serde_json::json!({"model": model, "messages": [{"role": "user", "content": "hi"}]}))
            .send()
    };
    assert_eq!(
        chat(CLIENT_KEY, "no-such-model").await.unwrap().status(),
        404
    );
    assert_eq!(chat("sk-wrong", "team").await.unwrap().status(), 401);
    let unknown = client
        .get(format!("{base}/v1/assistants"))
        .bearer_auth(CLIENT_KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(unknown.status(), 404);
    // The WebSocket probe, as Codex sends it and as a proxy that drops `Upgrade` passes it.
    for upgrade in [true, false] {
        let mut probe = client
            .get(format!("{base}/v1/responses"))
            .bearer_auth(CLIENT_KEY);
        if upgrade {
            probe = probe
                .header("connection", "Upgrade")
                .header("upgrade", "websocket")
                .header("sec-websocket-version", "13")
                .header("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ==");
        }
        let response = probe.send().await.unwrap();
        assert_eq!(response.status(), 426, "upgrade: {upgrade}");
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["error"]["code"], "websocket_not_supported");
    }
    // A routed request is no refusal.
    assert_eq!(chat(CLIENT_KEY, "team").await.unwrap().status(), 200);
    // The breaker is CLOSED: resetting it changes nothing worth a transition line.
    let reset = client
        .post(format!("{base}/admin/providers/openai/breaker/reset"))
        .bearer_auth(ADMIN_KEY)
        .send()
        .await
        .unwrap();
    assert!(reset.status().is_success(), "{}", reset.status());

    let pid = node.0.id().to_string();
    assert!(Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = node.0.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "no exit after SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{status:?}");

    let lines = log_lines(&log);
    let refused: Vec<&Value> = lines
        .iter()
        .map(|line| &line["fields"])
        .filter(|fields| fields["message"] == "request refused")
        .collect();
    let seen: Vec<(u64, String, String)> = refused
        .iter()
        .map(|f| {
            // The client the key names; a key that names none is `-` (#34: every refused
            // request used to be logged as `default`).
            let client = if f["status"] == 401 { "-" } else { "default" };
            assert_eq!(f["client"], client, "{f}");
            (
                f["status"].as_u64().unwrap(),
                f["code"].as_str().unwrap().to_owned(),
                f["request_id"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(seen.len(), 5, "one line per refusal: {seen:?}");
    assert_eq!(
        seen[0],
        (404, "model_not_found".into(), "req-no-such-model".into())
    );
    assert_eq!(
        (seen[1].0, seen[1].2.as_str()),
        (401, "req-team"),
        "{seen:?}"
    );
    assert_eq!((seen[2].0, seen[2].1.as_str()), (404, "not_found"));
    for probe in &seen[3..] {
        assert_eq!(
            (probe.0, probe.1.as_str()),
            (426, "websocket_not_supported")
        );
    }
    assert!(
        !lines
            .iter()
            .any(|line| line["fields"]["message"] == "breaker transition"),
        "a CLOSED breaker's reset is no transition"
    );
    let stopped = lines
        .iter()
        .find(|line| line["fields"]["message"] == "quotaroute stopped")
        .unwrap_or_else(|| panic!("no stopped line: {lines:?}"));
    assert_eq!(stopped["fields"]["reason"], "SIGTERM");
    assert_eq!(stopped["level"], "INFO");
}

#[test]
fn every_command_exits_quietly_on_a_closed_pipe() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.toml");
    std::fs::write(
        &good,
        standard_config("http://127.0.0.1:9", &dir.path().join("journal"), ""),
    )
    .unwrap();
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "[server]\nlisten = 5\n").unwrap();
    let fresh = dir.path().join("fresh.toml");
    // (arguments, the exit code the command has with an open pipe)
    let cases: Vec<(Vec<std::ffi::OsString>, i32)> = vec![
        (vec!["check".into(), "--config".into(), good.into()], 0),
        (vec!["check".into(), "--config".into(), bad.into()], 1),
        (vec!["init".into(), fresh.into()], 0),
        (vec!["--help".into()], 0),
        (vec!["check".into(), "--help".into()], 0),
    ];
    for (args, code) in cases {
        // A pipe whose reader is gone before the command writes: every write is EPIPE, on
        // stdout and stderr alike (`… 2>&1 | head -0`).
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let status = quotaroute()
            .args(&args)
            .stdout(writer.try_clone().unwrap())
            .stderr(writer)
            .status()
            .unwrap();
        assert_eq!(
            status.code(),
            Some(code),
            "{args:?}: {status:?} (101 = panic)"
        );
    }
}
