//! Behaviour §4 and §14: a 404 whose body says the ROUTE does not exist is not a missing
//! model. A host without `/responses/compact` locks nothing; a host that does not serve an API
//! it was said to serve is learned once (journaled `api_unserved`, in `/admin/state`, kept
//! across a restart) and its requests go through another API it serves.

use std::sync::Arc;

use quotaroute::config;
use quotaroute::node::{NodeOptions, RunningNode};
use quotaroute_actors::SystemClock;
use quotaroute_mock::{Fault, Route404, Rule};
use serde_json::{json, Value};

use crate::node_translate_hosts::upstream_paths;
use crate::support::*;

const OPENAI_KEYS: [&str; 3] = ["oa-1", "oa-2", "oa-3"];

fn codex_turn(text: &str) -> Value {
    json!({"model": "team", "instructions": "you are codex", "store": false,
           "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}]})
}

#[tokio::test]
async fn a_compact_route_404_locks_no_model_and_chat_keeps_serving() {
    let harness = Harness::start().await;
    for connection in OPENAI_KEYS {
        let key = upstream_key(connection);
        harness
            .mock
            .set_missing_routes(&key, &["/v1/responses/compact"]);
        harness.mock.set_route_404(&key, Route404::Go);
    }
    let compact = harness
        .post_json("/v1/responses/compact", codex_turn("compact this"))
        .await;
    assert_eq!(compact.status(), 404, "the host's own answer");
    assert_eq!(header(&compact, "x-quotaroute-attempts"), "1");
    harness.settle().await;
    let lockouts = harness.admin_get("/admin/lockouts").await;
    assert_eq!(lockouts["lockouts"], json!([]), "{lockouts}");
    // Nothing learned either: compaction is no generation API.
    let events = harness.journal_events().await;
    assert!(!events.iter().any(|e| e["kind"] == "api_unserved"));
    for i in 0..4 {
        let chat = harness.chat("team").await;
        assert_eq!(chat.status(), 200, "chat {i} on the same model");
    }
}

#[tokio::test]
async fn a_model_404_still_locks_the_model() {
    let harness = Harness::start().await;
    harness.mock.set_rules(vec![
        Rule::always(Fault::Status(404)).for_key(upstream_key("oa-1"))
    ]);
    for _ in 0..4 {
        assert_eq!(harness.chat("team").await.status(), 200);
    }
    harness.settle().await;
    let lockouts = harness.admin_get("/admin/lockouts").await;
    let locks: Vec<(&str, &str)> = lockouts["lockouts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|lock| {
            (
                lock["connection"].as_str().unwrap(),
                lock["reason"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(locks, [("oa-1", "not_found")], "{lockouts}");
}

/// The provider `openai` as `/admin/state` shows it.
async fn openai_state(harness: &Harness) -> Value {
    let state = harness.admin_get("/admin/state").await;
    state["providers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "openai")
        .cloned()
        .unwrap()
}

#[tokio::test]
async fn a_host_that_lost_responses_is_learned_once_and_kept_across_a_restart() {
    // Said to serve chat and responses (the default); vLLM answers FastAPI's 404 for the other.
    let mut harness = Harness::start().await;
    for connection in OPENAI_KEYS {
        let key = upstream_key(connection);
        harness.mock.set_served_apis(&key, &["chat"]);
        harness.mock.set_route_404(&key, Route404::Fastapi);
    }
    for i in 0..3 {
        let response = harness
            .post_json("/v1/responses", codex_turn(&format!("hi {i}")))
            .await;
        assert_eq!(response.status(), 200, "turn {i}");
        assert_eq!(
            header(&response, "x-quotaroute-translated"),
            "responses>chat"
        );
        let value: Value = response.json().await.unwrap();
        assert_eq!(value["object"], "response");
    }
    let responses_asked = |harness: &Harness| {
        upstream_paths(harness)
            .iter()
            .filter(|path| path.ends_with("/responses"))
            .count()
    };
    assert_eq!(
        responses_asked(&harness),
        1,
        "{:?}",
        upstream_paths(&harness)
    );
    harness.settle().await;
    let lockouts = harness.admin_get("/admin/lockouts").await;
    assert_eq!(lockouts["lockouts"], json!([]), "{lockouts}");
    let learned: Vec<Value> = harness
        .journal_events()
        .await
        .into_iter()
        .filter(|e| e["kind"] == "api_unserved")
        .collect();
    assert_eq!(learned.len(), 1, "{learned:?}");
    assert_eq!(learned[0]["provider"], "openai");
    assert_eq!(learned[0]["api"], "responses");
    assert_eq!(learned[0]["path"], "/v1/responses");
    assert_eq!(
        openai_state(&harness).await["apis_unserved"],
        json!(["responses"])
    );

    // A restart rebuilds it from the journal: the host is not asked for /responses again.
    harness.stop().await;
    let config = config::load(&harness.config_path).unwrap();
    let text = std::fs::read_to_string(&harness.config_path).unwrap();
    let node = RunningNode::start(
        config,
        NodeOptions {
            config_path: Some(harness.config_path.clone()),
            config_text: text,
            clock: Arc::new(SystemClock),
            listen: None,
        },
    )
    .await
    .unwrap();
    harness.base = format!("http://{}", node.addr);
    harness.node = Some(node);
    wait_ready(&harness.client, &harness.base).await;
    assert_eq!(
        openai_state(&harness).await["apis_unserved"],
        json!(["responses"])
    );
    let response = harness
        .post_json("/v1/responses", codex_turn("after the restart"))
        .await;
    assert_eq!(response.status(), 200);
    assert_eq!(
        header(&response, "x-quotaroute-translated"),
        "responses>chat"
    );
    assert_eq!(responses_asked(&harness), 1);
}
