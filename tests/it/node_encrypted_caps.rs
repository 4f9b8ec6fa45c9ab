//! Issue #49 item 4, behaviour §10 "Encrypted items" and §11 "Every path is governed": a turn
//! that carries a genuine sealed item is held to its maker only while the maker has room. With
//! the maker at its `max_concurrent` and no queue, the turn goes to a target with room and the
//! items that target cannot read are left out; with `queue_ms` it waits for the maker in the
//! fair queue, and past `queue_ms` it goes elsewhere without those items. 20 such turns at
//! once never put more than the cap on the maker (the mock counts what it had in flight).

#![expect(
    clippy::unwrap_used,
    reason = "test code: a failed step fails the test loudly"
)]

use futures_util::future::join_all;
use quotaroute_mock::{Fault, Rule};
use serde_json::{json, Value};

use crate::support::*;

/// Turns sent at once, each carrying the same genuine item (as the probe did).
const TURNS: usize = 20;

fn user(text: &str) -> Value {
    json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]})
}

fn turn(input: Vec<Value>) -> Value {
    json!({
        "model": "team",
        "input": input,
        "include": ["reasoning.encrypted_content"],
        "store": false,
        "stream": false,
    })
}

/// The first turn: its maker and its input with the sealed output appended.
async fn made(harness: &Harness) -> (String, Vec<Value>) {
    let input = vec![user("caps: hello")];
    let response = harness
        .post_json("/v1/responses", turn(input.clone()))
        .await;
    assert_eq!(response.status(), 200);
    let maker = header(&response, "x-quotaroute-connection");
    let body: Value = response.json().await.unwrap();
    let output = body["output"].as_array().cloned().unwrap();
    assert!(
        output.iter().any(|item| item["encrypted_content"]
            .as_str()
            .is_some_and(|c| c.starts_with("qrs1."))),
        "{body}"
    );
    let mut next = input;
    next.extend(output);
    (maker, next)
}

/// Rewrites the node's config so `maker` (alone) has `max_concurrent = 2` and the combo
/// `queue_ms`, then reloads it: the learned state and the seal key stay.
async fn cap_the_maker(harness: &Harness, maker: &str, queue_ms: u64) {
    let text = std::fs::read_to_string(&harness.config_path).unwrap();
    let text = text
        .replace(
            &format!("id = \"{maker}\"\n"),
            &format!("id = \"{maker}\"\nmax_concurrent = 2\n"),
        )
        .replace(
            "name = \"team\"\n",
            &format!("name = \"team\"\nqueue_ms = {queue_ms}\n"),
        );
    std::fs::write(&harness.config_path, text).unwrap();
    let reloaded = harness.admin_post("/admin/reload").await;
    assert_eq!(reloaded.status(), 200, "{}", reloaded.text().await.unwrap());
}

/// `TURNS` turns at once carrying the item; each one's (status, connection, request id).
async fn burst(harness: &Harness, input: &[Value]) -> Vec<(u16, String, String)> {
    let sends = (0..TURNS).map(|i| {
        let mut input = input.to_vec();
        input.push(user(&format!("caps: turn {i}")));
        async move {
            let response = harness.post_json("/v1/responses", turn(input)).await;
            let status = response.status().as_u16();
            let connection = header(&response, "x-quotaroute-connection");
            let request_id = header(&response, "x-request-id");
            let _ = response.bytes().await;
            (status, connection, request_id)
        }
    });
    join_all(sends).await
}

/// `items_left_out` of each request's `request_succeeded`, by request id.
async fn left_out(harness: &Harness) -> std::collections::HashMap<String, u64> {
    harness.settle().await;
    harness
        .journal_events()
        .await
        .into_iter()
        .filter(|e| e["kind"] == "request_succeeded")
        .map(|e| {
            (
                e["request_id"].as_str().unwrap().to_owned(),
                e["items_left_out"].as_u64().unwrap_or(0),
            )
        })
        .collect()
}

/// Runs the burst with the maker capped at 2 and every account answering after `latency_ms`;
/// returns the maker, the answers and the maker's peak in flight at the mock.
async fn capped_burst(
    queue_ms: u64,
    latency_ms: u64,
) -> (Harness, String, Vec<(u16, String, String)>, u64) {
    let harness = Harness::start_with("\n[affinity]\nenabled = false\n").await;
    let (maker, input) = made(&harness).await;
    cap_the_maker(&harness, &maker, queue_ms).await;
    harness
        .mock
        .set_rules(vec![Rule::always(Fault::Latency { ms: latency_ms })]);
    harness.mock.reset_stats();
    let answers = burst(&harness, &input).await;
    let peak = harness
        .mock
        .stats()
        .max_in_flight_for(&upstream_key(&maker));
    (harness, maker, answers, peak)
}

#[tokio::test]
async fn a_sealed_turn_never_pushes_its_maker_past_max_concurrent_without_a_queue() {
    let (harness, maker, answers, peak) = capped_burst(0, 300).await;
    for (status, _, id) in &answers {
        assert_eq!(*status, 200, "{id}");
    }
    assert!(
        peak <= 2,
        "the maker had {peak} in flight (cap 2): {answers:?}"
    );
    // The turns the maker had no room for went to accounts with room, without its item.
    let left = left_out(&harness).await;
    let elsewhere: Vec<_> = answers.iter().filter(|(_, c, _)| *c != maker).collect();
    assert!(elsewhere.len() >= TURNS - 2, "{answers:?}");
    for (_, connection, id) in &elsewhere {
        assert_eq!(left.get(id), Some(&1), "{id} on {connection}");
    }
}

/// Every account at its cap and no queue (§2's fail-open): the turns are spread by DRR like any
/// others rather than piled on the maker.
#[tokio::test]
async fn with_every_account_at_cap_sealed_turns_are_spread_not_piled_on_the_maker() {
    let harness = Harness::start_with("\n[affinity]\nenabled = false\n").await;
    let (maker, input) = made(&harness).await;
    let text = std::fs::read_to_string(&harness.config_path).unwrap();
    let text = text.replace("\nweight = ", "\nmax_concurrent = 2\nweight = ");
    std::fs::write(&harness.config_path, text).unwrap();
    let reloaded = harness.admin_post("/admin/reload").await;
    assert_eq!(reloaded.status(), 200);
    harness
        .mock
        .set_rules(vec![Rule::always(Fault::Latency { ms: 300 })]);
    harness.mock.reset_stats();
    let answers = burst(&harness, &input).await;
    let stats = harness.mock.stats();
    let peak = stats.max_in_flight_for(&upstream_key(&maker));
    // 6 slots, then 14 turns by DRR over weights 2:1:1: the maker's share is at most 7.
    assert!(
        peak <= 2 + 7 + 1,
        "the maker had {peak} in flight: {answers:?}"
    );
    for (status, _, id) in &answers {
        assert_eq!(*status, 200, "{id}");
    }
    for connection in ["oa-1", "oa-2", "oa-3"] {
        assert!(
            answers.iter().any(|(_, c, _)| c == connection),
            "{connection} served none: {answers:?}"
        );
    }
}

#[tokio::test]
async fn a_sealed_turn_waits_for_its_busy_maker_in_the_queue() {
    // 20 turns × 0.15 s on 2 slots take ~1.5 s: well inside `queue_ms`.
    let (harness, maker, answers, peak) = capped_burst(8_000, 150).await;
    assert!(
        peak <= 2,
        "the maker had {peak} in flight (cap 2): {answers:?}"
    );
    let left = left_out(&harness).await;
    for (status, connection, id) in &answers {
        assert_eq!(*status, 200, "{id}");
        assert_eq!(*connection, maker, "{id} waited for its maker");
        assert_eq!(left.get(id), Some(&0), "{id} kept its item");
    }
}

#[tokio::test]
async fn a_sealed_turn_past_queue_ms_goes_elsewhere_without_its_items() {
    // The maker's two slots are busy for 0.6 s; the others wait 0.2 s, then go elsewhere.
    let (harness, maker, answers, peak) = capped_burst(200, 600).await;
    assert!(
        peak <= 2,
        "the maker had {peak} in flight (cap 2): {answers:?}"
    );
    let left = left_out(&harness).await;
    let elsewhere: Vec<_> = answers.iter().filter(|(_, c, _)| *c != maker).collect();
    assert!(!elsewhere.is_empty(), "{answers:?}");
    for (status, connection, id) in &answers {
        assert_eq!(*status, 200, "{id}");
        let expected = if *connection == maker { 0 } else { 1 };
        assert_eq!(left.get(id), Some(&expected), "{id} on {connection}");
    }
}

/// A turn waiting for its busy maker does not hold up the rest of the queue: a request that can
/// go to another account (here a new conversation, with no encrypted items) is served at once,
/// not after the maker frees a slot.
#[tokio::test]
async fn a_turn_waiting_for_its_maker_does_not_hold_up_requests_that_can_go_elsewhere() {
    let harness = Harness::start_with("\n[affinity]\nenabled = false\n").await;
    let (maker, input) = made(&harness).await;
    cap_the_maker(&harness, &maker, 5_000).await;
    harness.mock.set_rules(vec![
        Rule::always(Fault::Latency { ms: 1_500 }).for_key(upstream_key(&maker))
    ]);
    // Two turns fill the maker's slots; a third waits for it in the queue.
    let bound = (0..3).map(|i| {
        let mut input = input.clone();
        input.push(user(&format!("caps: bound {i}")));
        harness.post_json("/v1/responses", turn(input))
    });
    let bound = futures_util::future::join_all(bound);
    let other = async {
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        let started = std::time::Instant::now();
        let response = harness
            .post_json(
                "/v1/responses",
                turn(vec![user("caps: a new conversation")]),
            )
            .await;
        let status = response.status().as_u16();
        let connection = header(&response, "x-quotaroute-connection");
        (status, connection, started.elapsed())
    };
    let (bound, (status, connection, took)) = tokio::join!(bound, other);
    for response in bound {
        assert_eq!(response.status(), 200);
        assert_eq!(header(&response, "x-quotaroute-connection"), maker);
    }
    assert_eq!(status, 200);
    assert_ne!(connection, maker);
    assert!(
        took < std::time::Duration::from_millis(700),
        "the new conversation waited {took:?} behind a turn bound to a busy account"
    );
}
