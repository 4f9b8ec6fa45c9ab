//! The real binary's journal on a small tmpfs, filled by load until its writes fail, then
//! grown: routing never stops, `/healthz` says `degraded` and then `ok` again by itself, and a
//! lockout learned while the disk was full survives a kill -9 after the recovery.
//!
//! Needs root (CI runs as root) to mount the tmpfs; elsewhere it says so and does nothing.

#![expect(
    clippy::unwrap_used,
    reason = "test code: a failed step fails the test loudly"
)]

use crate::support;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use quotaroute_journal::test_disk::Tmpfs;
use quotaroute_mock::Rule;
use serde_json::Value;
use support::*;

fn spawn(config: &std::path::Path) -> KillOnDrop {
    KillOnDrop(
        Command::new(env!("CARGO_BIN_EXE_quotaroute"))
            .args(["serve", "--config"])
            .arg(config)
            .env("RUST_LOG", "error")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    )
}

async fn get(client: &reqwest::Client, url: String) -> Option<Value> {
    let response = client.get(url).bearer_auth(ADMIN_KEY).send().await.ok()?;
    response.json().await.ok()
}

async fn wait_for(what: &str, within: Duration, mut check: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !check().await {
        assert!(Instant::now() < deadline, "{what} within {within:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn oa1_lock(lockouts: &Value) -> Option<&Value> {
    lockouts["lockouts"]
        .as_array()?
        .iter()
        .find(|l| l["connection"] == "oa-1")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_degrades_the_journal_and_it_recovers_by_itself_keeping_what_it_learned() {
    let dir = tempfile::tempdir().unwrap();
    let Some(disk) = Tmpfs::mount(&dir.path().join("disk"), "3m") else {
        eprintln!("cannot mount a tmpfs here (needs root): nothing to run");
        assert!(
            std::env::var("CI").is_err(),
            "CI runs as root and must run this"
        );
        return;
    };
    let (mock_base, mock) = start_mock().await;
    let port = free_port();
    let text = standard_config(&mock_base, &disk.path().join("journal"), "").replace(
        "listen = \"127.0.0.1:0\"",
        &format!("listen = \"127.0.0.1:{port}\""),
    );
    let config_dir = tempfile::tempdir().unwrap();
    let config = config_dir.path().join("quotaroute.toml");
    std::fs::write(&config, text).unwrap();
    let base = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::new();
    let health = |client: reqwest::Client, base: String| async move {
        get(&client, format!("{base}/healthz")).await
    };

    let node = spawn(&config);
    wait_for("ready", Duration::from_secs(20), async || {
        health(client.clone(), base.clone())
            .await
            .is_some_and(|h| h["status"] == "ready")
    })
    .await;

    // Load until the journal's writes fail; every request is still served.
    let started = Instant::now();
    loop {
        for _ in 0..50 {
            assert_eq!(chat(&client, &base, "team").await.status(), 200);
        }
        let state = health(client.clone(), base.clone()).await.unwrap();
        if state["journal"] == "degraded" {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(90),
            "the 3 MB disk never filled: {state}"
        );
    }

    // A lockout learned while the disk is full.
    mock.add_rule(Rule::rate_limited(600).for_key(upstream_key("oa-1")));
    wait_for("oa-1 locked", Duration::from_secs(20), async || {
        assert_eq!(chat(&client, &base, "team").await.status(), 200);
        get(&client, format!("{base}/admin/lockouts"))
            .await
            .is_some_and(|l| oa1_lock(&l).is_some())
    })
    .await;
    mock.clear_rules();
    let state = health(client.clone(), base.clone()).await.unwrap();
    assert_eq!(state["journal"], "degraded", "{state}");

    // The disk grows: the journal says ok again by itself and writes what it kept.
    assert!(disk.resize("64m"));
    wait_for(
        "journal ok and caught up",
        Duration::from_secs(20),
        async || {
            health(client.clone(), base.clone())
                .await
                .is_some_and(|h| h["journal"] == "ok" && h["journal_lag_events"] == 0)
        },
    )
    .await;
    // Routing went on throughout; the journal says what the outage cost.
    assert_eq!(chat(&client, &base, "team").await.status(), 200);
    let journal = support::admin_journal_all(&client, &base).await;
    let recovered: Value = journal
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .find(|event| event["kind"] == "journal_recovered")
        .unwrap_or_else(|| panic!("no journal_recovered event"));
    assert!(
        recovered["failed_for_ms"].as_u64().unwrap() > 0,
        "{recovered}"
    );
    assert!(
        recovered["write_errors"].as_u64().unwrap() > 0,
        "{recovered}"
    );
    assert!(recovered["dropped_request_events"].is_u64(), "{recovered}");

    // kill -9, start again: the lockout learned while full is still there.
    drop(node);
    let _node = spawn(&config);
    wait_for(
        "ready after the restart",
        Duration::from_secs(30),
        async || {
            health(client.clone(), base.clone())
                .await
                .is_some_and(|h| h["status"] == "ready")
        },
    )
    .await;
    let lockouts = get(&client, format!("{base}/admin/lockouts"))
        .await
        .unwrap();
    let lock = oa1_lock(&lockouts).unwrap_or_else(|| panic!("lockout forgotten: {lockouts}"));
    assert!(lock["remaining_ms"].as_u64().unwrap() > 500_000, "{lock}");
    assert_eq!(lock["error_code"], 429);
}
