//! Issue #49 items 7 and 9, behaviour §10 "Encrypted items": the seal on encrypted items is the
//! node's own secret, never derived from anything a client knows — generated once from the OS
//! RNG into `quotaroute-seal.key` beside the journal (mode 0600), or `server.seal_key` for a
//! cluster — and a seal (or a carried thinking block) opens only for the client it was handed
//! to. A forged seal, a seal from a node with another key and another client's replayed seal
//! all count as unreadable items: left out, never steering the turn nor read upstream.

#![expect(
    clippy::unwrap_used,
    clippy::panic,
    reason = "test code: a failed step fails the test loudly"
)]

use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;

use base64::Engine;
use quotaroute_actors::SystemClock;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::support::*;

/// A second client of the node (behaviour §11).
const MALLORY_KEY: &str = "sk-qr-mallory-0123456789";

const MALLORY: &str = r#"
[[clients]]
id = "mallory"
key = "sk-qr-mallory-0123456789"
"#;

/// A cluster's shared seal key (`server.seal_key`).
const SHARED_SEAL_KEY: &str = "6f0c1d3e5a7b9c2d4e6f8a0b1c3d5e7f9a2b4c6d8e0f1a3b5c7d9e2f4a6b8c0d";

fn user(text: &str) -> Value {
    json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]})
}

fn turn(model: &str, input: &[Value]) -> Value {
    json!({
        "model": model,
        "input": input,
        "reasoning": {"effort": "low"},
        "include": ["reasoning.encrypted_content"],
        "store": false,
        "max_output_tokens": 16,
        "stream": false,
    })
}

/// `POST /v1/responses` as the client with `key`: status, connection, body, request id.
async fn send(harness: &Harness, key: &str, body: Value) -> (u16, String, Value, String) {
    let response = harness
        .client
        .post(harness.url("/v1/responses"))
        .bearer_auth(key)
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let connection = header(&response, "x-quotaroute-connection");
    let request_id = header(&response, "x-request-id");
    let body = response.json().await.unwrap_or(Value::Null);
    (status, connection, body, request_id)
}

fn reasoning_of(body: &Value) -> Value {
    body["output"]
        .as_array()
        .unwrap()
        .iter()
        .find(|item| item["type"] == "reasoning")
        .cloned()
        .unwrap_or_else(|| panic!("no reasoning item: {body}"))
}

/// Whether any request the mock received since its last reset carried `text`.
fn reached_upstream(harness: &Harness, text: &str) -> bool {
    harness
        .mock
        .recent_bodies()
        .iter()
        .any(|(_, body)| String::from_utf8_lossy(body).contains(text))
}

async fn items_left_out(harness: &Harness, request_id: &str) -> u64 {
    harness.settle().await;
    harness
        .journal_events()
        .await
        .into_iter()
        .find(|e| e["kind"] == "request_succeeded" && e["request_id"] == request_id)
        .unwrap_or_else(|| panic!("no request_succeeded for {request_id}"))["items_left_out"]
        .as_u64()
        .unwrap()
}

/// The seal key as builds up to 10958a4 derived it without `admin_key`: from the client keys'
/// digests, which any client can compute from its own key.
fn seal_key_a_client_can_compute(client_key: &str) -> [u8; 32] {
    let digest: [u8; 32] = Sha256::digest(client_key.as_bytes()).into();
    let mut hasher = Sha256::new();
    hasher.update(b"quotaroute encrypted item seal v1");
    hasher.update((digest.len() as u64).to_le_bytes());
    hasher.update(digest);
    hasher.finalize().into()
}

/// A seal naming `connection`, made with `key` as those builds made seals.
fn forged_seal(key: &[u8; 32], connection: &str, content: &str) -> String {
    let hmac = |parts: &[&[u8]]| -> [u8; 32] {
        let (mut inner, mut outer) = ([0x36u8; 64], [0x5cu8; 64]);
        for (at, byte) in key.iter().enumerate() {
            inner[at] ^= byte;
            outer[at] ^= byte;
        }
        let mut hasher = Sha256::new().chain_update(inner);
        for part in parts {
            hasher.update(part);
        }
        Sha256::new()
            .chain_update(outer)
            .chain_update(hasher.finalize())
            .finalize()
            .into()
    };
    let mac = hmac(&[
        &(connection.len() as u64).to_le_bytes(),
        connection.as_bytes(),
        content.as_bytes(),
    ]);
    let engine = &base64::engine::general_purpose::URL_SAFE_NO_PAD;
    format!(
        "qrs1.{}.{}.{content}",
        engine.encode(connection),
        engine.encode(&mac[..16])
    )
}

/// The starter config's case: one client key and no `admin_key`. The client computes the key
/// the old builds sealed with and forges seals naming the account of its choice: none steers
/// a turn, and none is read upstream (the item is left out).
#[tokio::test]
async fn a_forged_seal_steers_nothing_without_an_admin_key() {
    let harness = Harness::start_editing(|text| {
        text.replace(&format!("admin_key = \"{ADMIN_KEY}\"\n"), "")
            + "\n[affinity]\nenabled = false\n"
    })
    .await;
    let key = seal_key_a_client_can_compute(CLIENT_KEY);
    harness.mock.reset_stats();
    let mut chosen = 0;
    for i in 0..6 {
        let content = format!("gAAAAAforged{i}");
        let item = json!({"type": "reasoning", "summary": [], "encrypted_content": forged_seal(&key, "oa-3", &content)});
        let (status, served, body, _) = send(
            &harness,
            CLIENT_KEY,
            turn("team", &[user("hi"), item, user(&format!("forged {i}"))]),
        )
        .await;
        assert_eq!(status, 200, "{body}");
        if served == "oa-3" {
            chosen += 1;
        }
    }
    assert!(
        !reached_upstream(&harness, "gAAAAAforged"),
        "a forged seal's content went upstream"
    );
    assert!(
        chosen < 6,
        "{chosen} of 6 turns went where the forger chose"
    );
}

/// The key is the node's own: 32 random bytes in `quotaroute-seal.key` in the journal's
/// directory, mode 0600, made once (a restart reads it back), and it shows in no admin answer,
/// no metric and no journal record.
#[tokio::test]
async fn the_seal_key_is_the_nodes_own_file_kept_0600_beside_the_journal() {
    let mut harness = Harness::start().await;
    let path = harness
        .dir
        .path()
        .join("journal")
        .join("quotaroute-seal.key");
    let text = std::fs::read_to_string(&path).expect("the node made its seal key");
    let hex = text.trim();
    assert_eq!(hex.len(), 64, "{path:?} holds 32 bytes in hex");
    assert!(hex.chars().all(|c| c.is_ascii_hexdigit()));
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "mode {mode:o}");

    let (status, maker, first, _) = send(
        &harness,
        CLIENT_KEY,
        turn("team", &[user("own key: hello")]),
    )
    .await;
    assert_eq!(status, 200, "{first}");
    assert!(reasoning_of(&first)["encrypted_content"]
        .as_str()
        .unwrap()
        .starts_with("qrs1."));
    harness.settle().await;
    let mut seen = String::new();
    for path in [
        "/admin/journal",
        "/admin/state",
        "/admin/clients",
        "/metrics",
    ] {
        seen.push_str(&harness.admin_text(path).await);
    }
    assert!(!seen.contains(hex), "the seal key leaked");

    // A restart reads the same key back: the earlier seal still names its maker.
    harness.stop().await;
    let node = quotaroute::node::RunningNode::start(
        quotaroute::config::load(&harness.config_path).unwrap(),
        quotaroute::node::NodeOptions {
            config_path: Some(harness.config_path.clone()),
            config_text: std::fs::read_to_string(&harness.config_path).unwrap(),
            clock: Arc::new(SystemClock),
            listen: None,
        },
    )
    .await
    .unwrap();
    harness.base = format!("http://{}", node.addr);
    harness.node = Some(node);
    wait_ready(&harness.client, &harness.base).await;
    assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
    let mut input = vec![user("own key: hello")];
    input.extend(first["output"].as_array().cloned().unwrap());
    input.push(user("own key: again"));
    let (status, served, body, request_id) = send(&harness, CLIENT_KEY, turn("team", &input)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(served, maker);
    assert_eq!(items_left_out(&harness, &request_id).await, 0);
}

/// Two nodes with journals of their own: without `server.seal_key` each seals with its own key,
/// so one node's seal is an unreadable item on the other (left out); with the same
/// `server.seal_key` the other node reads it.
#[tokio::test]
async fn nodes_share_seals_only_through_server_seal_key() {
    for shared in [false, true] {
        let edit = move |text: String| {
            let text = text + "\n[affinity]\nenabled = false\n";
            if shared {
                text.replace(
                    "[server]\n",
                    &format!("[server]\nseal_key = \"{SHARED_SEAL_KEY}\"\n"),
                )
            } else {
                text
            }
        };
        let first_node = Harness::start_editing(edit).await;
        let second_node = Harness::on_mock(
            first_node.mock_base.clone(),
            first_node.mock.clone(),
            edit,
            Arc::new(SystemClock),
        )
        .await;
        let first_input = vec![user(&format!("two nodes {shared}: hello"))];
        let (status, _, first, _) = send(&first_node, CLIENT_KEY, turn("team", &first_input)).await;
        assert_eq!(status, 200, "{first}");
        let original = reasoning_of(&first)["encrypted_content"]
            .as_str()
            .unwrap()
            .splitn(4, '.')
            .nth(3)
            .unwrap()
            .to_owned();
        let mut input = first_input;
        input.extend(first["output"].as_array().cloned().unwrap());
        input.push(user("again"));
        first_node.mock.reset_stats();
        let (status, _, body, request_id) =
            send(&second_node, CLIENT_KEY, turn("team", &input)).await;
        assert_eq!(status, 200, "{body}");
        let left_out = items_left_out(&second_node, &request_id).await;
        assert_eq!(left_out, if shared { 0 } else { 1 }, "shared key: {shared}");
        assert_eq!(
            reached_upstream(&first_node, &original),
            shared,
            "shared key: {shared}"
        );
    }
}

/// Behaviour §11: one client's seal, replayed by another client, is an unreadable item there:
/// it neither steers the other client's turn to the maker nor is read by the maker's account.
/// The client it was handed to still reaches its maker with it.
#[tokio::test]
async fn another_clients_replayed_seal_does_not_open() {
    let harness = Harness::start_with(&format!("{MALLORY}\n[affinity]\nenabled = false\n")).await;
    let first_input = vec![user("bound: hello")];
    let (status, maker, first, _) = send(&harness, CLIENT_KEY, turn("team", &first_input)).await;
    assert_eq!(status, 200, "{first}");
    let sealed = reasoning_of(&first)["encrypted_content"]
        .as_str()
        .unwrap()
        .to_owned();
    let original = sealed.splitn(4, '.').nth(3).unwrap().to_owned();
    let mut input = first_input;
    input.extend(first["output"].as_array().cloned().unwrap());

    harness.mock.reset_stats();
    for i in 0..4 {
        let mut replay = input.clone();
        replay.push(user(&format!("mallory {i}")));
        let (status, _, body, request_id) =
            send(&harness, MALLORY_KEY, turn("team", &replay)).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(items_left_out(&harness, &request_id).await, 1, "{body}");
    }
    assert!(
        !reached_upstream(&harness, &original),
        "another client's item was read upstream"
    );

    // Its own client still reaches the maker, which reads it.
    input.push(user("bound: again"));
    let (status, served, body, request_id) = send(&harness, CLIENT_KEY, turn("team", &input)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(served, maker);
    assert_eq!(items_left_out(&harness, &request_id).await, 0);
    assert!(reached_upstream(&harness, &original));
}

/// The same for a thinking block the router carries for a Responses client on an
/// Anthropic-format account (behaviour §14): another client's copy does not open.
#[tokio::test]
async fn another_clients_carried_thinking_does_not_open() {
    let harness = Harness::start_with(&format!("{MALLORY}\n[affinity]\nenabled = false\n")).await;
    let first_input = vec![user("carried: hello")];
    let (status, _, first, _) = send(&harness, CLIENT_KEY, turn("claude", &first_input)).await;
    assert_eq!(status, 200, "{first}");
    assert!(reasoning_of(&first)["encrypted_content"]
        .as_str()
        .unwrap()
        .starts_with("qrt1."));
    let mut input = first_input;
    input.extend(first["output"].as_array().cloned().unwrap());

    harness.mock.reset_stats();
    for i in 0..3 {
        let mut replay = input.clone();
        replay.push(user(&format!("mallory {i}")));
        let (status, _, body, request_id) =
            send(&harness, MALLORY_KEY, turn("claude", &replay)).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(items_left_out(&harness, &request_id).await, 1, "{body}");
    }
    assert!(
        !reached_upstream(&harness, "The user wants a reply; a short one will do."),
        "another client's thinking block was sent upstream"
    );
}
