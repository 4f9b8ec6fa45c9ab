//! Read-your-writes (behaviour §3) on the real binary: a client that sends its next request
//! the moment the last one returned never lands on a key its last request just found failing,
//! and an admin read right after an answer already shows what that answer taught the router.
//! Fifty rounds over fourteen keys that all answer 503.

#![expect(
    clippy::unwrap_used,
    reason = "test code: a failed step fails the test loudly"
)]

use crate::support;

use std::collections::{BTreeMap, BTreeSet};
use std::process::{Command, Stdio};

use quotaroute_mock::{Fault, Rule};
use serde_json::Value;
use support::*;

const KEYS: usize = 14;
const ROUNDS: usize = 50;

fn key_id(i: usize) -> String {
    format!("f{i:02}")
}

fn config(mock_base: &str, journal: &std::path::Path, port: u16) -> String {
    let mut text = format!(
        r#"
[server]
listen = "127.0.0.1:{port}"
api_keys = ["{CLIENT_KEY}"]
admin_key = "{ADMIN_KEY}"
request_timeout_ms = 10000

[journal]
path = "{journal}"

[[providers]]
name = "flaky"
format = "openai"
base_url = "{mock_base}/v1"
"#,
        journal = journal.display()
    );
    let mut targets = String::new();
    for i in 1..=KEYS {
        let id = key_id(i);
        text.push_str(&format!(
            "\n[[connections]]\nid = \"{id}\"\nprovider = \"flaky\"\napi_key = \"{}\"\n",
            upstream_key(&id)
        ));
        targets.push_str(&format!("  {{ connection = \"{id}\", model = \"m\" }},\n"));
    }
    text.push_str(&format!(
        "\n[[combos]]\nname = \"pool\"\nmax_attempts = 3\ntargets = [\n{targets}]\n"
    ));
    text
}

async fn admin(client: &reqwest::Client, base: &str, method: reqwest::Method, path: &str) -> Value {
    let response = client
        .request(method, format!("{base}{path}"))
        .bearer_auth(ADMIN_KEY)
        .send()
        .await
        .unwrap();
    let text = response.text().await.unwrap();
    serde_json::from_str(&text).unwrap_or(Value::Null)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sequential_client_never_revisits_the_key_its_last_request_failed_on() {
    let (mock_base, mock) = start_mock().await;
    mock.add_rule(Rule::always(Fault::Status(503)));
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let config_path = dir.path().join("quotaroute.toml");
    std::fs::write(
        &config_path,
        config(&mock_base, &dir.path().join("journal"), port),
    )
    .unwrap();
    let _node = KillOnDrop(
        Command::new(env!("CARGO_BIN_EXE_quotaroute"))
            .args(["serve", "--config"])
            .arg(&config_path)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let base = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::new();
    wait_ready(&client, &base).await;

    for round in 0..ROUNDS {
        // A fresh pool: every key cleared, the breaker closed.
        for i in 1..=KEYS {
            admin(
                &client,
                &base,
                reqwest::Method::POST,
                &format!("/admin/connections/{}/clear", key_id(i)),
            )
            .await;
        }
        admin(
            &client,
            &base,
            reqwest::Method::POST,
            "/admin/providers/flaky/breaker/reset",
        )
        .await;
        let mut failed_so_far: BTreeSet<String> = BTreeSet::new();
        for request in 1..=4 {
            let before: BTreeMap<String, u64> = mock.stats().per_key;
            let response = chat(&client, &base, "pool").await;
            assert_eq!(response.status(), 503, "round {round} request {request}");
            let after = mock.stats().per_key;
            let tried: BTreeSet<String> = (1..=KEYS)
                .map(key_id)
                .filter(|id| {
                    let key = upstream_key(id);
                    after.get(&key) != before.get(&key)
                })
                .collect();
            assert_eq!(tried.len(), 3, "round {round} request {request}: {tried:?}");
            let revisited: Vec<&String> = tried.intersection(&failed_so_far).collect();
            assert!(
                revisited.is_empty(),
                "round {round} request {request} went back to {revisited:?}, which just failed"
            );
            failed_so_far.extend(tried.iter().cloned());
            // The admin read right after the answer already shows every cooldown and count.
            let state = admin(&client, &base, reqwest::Method::GET, "/admin/state").await;
            for id in &tried {
                let cooling = connection(&state, id)["cooldown_remaining_ms"]
                    .as_u64()
                    .unwrap();
                assert!(
                    cooling > 0,
                    "round {round}: {id} not cooling right after its failure"
                );
            }
            let breaker = provider(&state, "flaky");
            if request < 4 {
                assert_eq!(breaker["failures"], 3 * request, "round {round}: {breaker}");
            } else {
                // Twelve distinct failures: the breaker opened on this very answer.
                assert_eq!(breaker["breaker"], "OPEN", "round {round}: {breaker}");
            }
        }
    }
}
