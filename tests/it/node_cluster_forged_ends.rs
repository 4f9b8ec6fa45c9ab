//! Nothing forged into Redis blocks the pool for good or mutes a peer (issue #49, behaviour
//! §9): real `quotaroute serve` nodes on one real `redis-server`, and a test that `XADD`s to
//! it as anyone who reaches it could.
//!
//! - spent readings with `resets_at_ms: null` and disables without `until_ms`, about every
//!   connection, block the pool on both nodes only for a bounded time (a reading its window's
//!   length, a disable `lockout.billing_ms`), also after a node restarts from its journal;
//! - a forged seq of 2^48 − 1 for an origin not seen yet, or one just inside the old bound
//!   (`first_seq + (elapsed + 10 s) × 1000`) for one seen, holds back none of that origin's
//!   real updates about the connection, before and after both nodes restart.

#![expect(
    clippy::unwrap_used,
    clippy::panic,
    reason = "test code: a failed step fails the test loudly"
)]

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use quotaroute_mock::Rule;
use serde_json::{json, Value};

use crate::node_cluster::{start_nodes, Cluster, RedisAt};
use crate::redis_support;
use crate::support::*;

const HOUR_MS: u64 = 3_600_000;
const CONNECTIONS: [(&str, &str); 6] = [
    ("oa-1", "openai"),
    ("oa-2", "openai"),
    ("oa-3", "openai"),
    ("an-1", "anthropic"),
    ("an-2", "anthropic"),
    ("an-3", "anthropic"),
];

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// XADDs one entry to the shared stream as `node` would (wire format 1, no `fresh` field: an
/// older build's entry, which may be a republish — the case that trusts its seq most).
fn forge(redis: &redis_support::Server, node: &str, seq: u64, event: &Value) {
    let client = redis::Client::open(format!("redis://127.0.0.1:{}", redis.port)).unwrap();
    let mut connection = client.get_connection().unwrap();
    let _: String = redis::cmd("XADD")
        .arg("qr:events")
        .arg("*")
        .arg("v")
        .arg("1")
        .arg("node")
        .arg(node)
        .arg("seq")
        .arg(seq.to_string())
        .arg("at_ms")
        .arg(now_ms().to_string())
        .arg("schema")
        .arg("4")
        .arg("event")
        .arg(event.to_string())
        .query(&mut connection)
        .unwrap();
}

fn lock_event(connection: &str, model: &str) -> Value {
    json!({"model_locked": {
        "provider": "openai", "connection": connection, "model": model,
        "reason": "rate_limited", "status": 429, "error_code": null,
        "until_ms": now_ms() + 60_000, "failure_count": 1, "source": "upstream"
    }})
}

/// Polls `check` until it holds, or fails after `within`.
async fn wait_for<F, Fut>(within: Duration, what: &str, check: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = Instant::now();
    while !check().await {
        assert!(start.elapsed() < within, "{what}: not within {within:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn locked(cluster: &Cluster, node: usize, connection: &str, model: &str) -> bool {
    let base = &cluster.nodes[node].base;
    admin_json(&cluster.client, base, "/admin/lockouts").await["lockouts"]
        .as_array()
        .unwrap()
        .iter()
        .any(|l| l["connection"] == connection && l["model"] == model)
}

/// A real 429 on `node`'s `oa-1` for `model`, and the lock it makes reaching `peer`.
async fn real_lock_reaches(cluster: &Cluster, node: usize, peer: usize, model: &str) {
    cluster.mock.add_rule(
        Rule::rate_limited(60)
            .for_key(upstream_key("oa-1"))
            .for_model(model)
            .times(1),
    );
    let base = &cluster.nodes[node].base;
    let response = chat(&cluster.client, base, &format!("openai/{model}")).await;
    assert_eq!(response.status(), 200);
    wait_for(
        Duration::from_secs(3),
        &format!("the lock on {model} locally"),
        || async { locked(cluster, node, "oa-1", model).await },
    )
    .await;
    wait_for(
        Duration::from_secs(5),
        &format!("the real lock on {model} reaching the peer"),
        || async { locked(cluster, peer, "oa-1", model).await },
    )
    .await;
}

async fn restart(cluster: &mut Cluster, node: usize) {
    // `GET /admin/journal` flushes the writer first: what it learned is on disk.
    let _ = admin_text(
        &cluster.client,
        &cluster.nodes[node].base,
        "/admin/journal?since_seq=0&limit=1",
    )
    .await;
    cluster.nodes[node].kill9();
    cluster.nodes[node].spawn();
    wait_ready(&cluster.client, &cluster.nodes[node].base).await;
}

/// Every connection of `node` disabled and its `5h` window spent, each with a bounded end.
async fn blocked_with_an_end(cluster: &Cluster, node: usize) {
    let base = &cluster.nodes[node].base;
    let state = admin_json(&cluster.client, base, "/admin/state").await;
    let now = now_ms();
    for (id, _) in CONNECTIONS {
        let view = connection(&state, id);
        let disabled = &view["disabled"];
        let remaining = disabled["remaining_ms"].as_u64();
        assert!(
            remaining.is_some_and(|ms| ms <= HOUR_MS),
            "node {node}: {id} disabled with no end or past lockout.billing_ms: {disabled}"
        );
        let spent = view["buckets"]
            .as_array()
            .unwrap()
            .iter()
            .find(|b| b["window"] == "5h")
            .unwrap_or_else(|| panic!("node {node}: {id} has no 5h reading: {view}"))
            .clone();
        assert_eq!(spent["saturated"], true, "{spent}");
        let ends = spent["resets_at_ms"].as_u64();
        assert!(
            ends.is_some_and(|at| at <= now + 5 * HOUR_MS + 20_000),
            "node {node}: {id}'s spent 5h window has no end or one past 5 h: {spent}"
        );
    }
    // A client is told when to come back (the earliest end), not left without one.
    let response = chat(&cluster.client, base, "team").await;
    assert_eq!(response.status(), 503, "every target is blocked");
    let retry_after: u64 = header(&response, "retry-after")
        .parse()
        .unwrap_or_else(|_| panic!("node {node}: a 503 with no Retry-After"));
    assert!(retry_after <= 5 * 3_600 + 20, "{retry_after}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_blocks_with_no_end_are_bounded_on_both_nodes_through_a_restart() {
    let redis = redis_support::plain();
    let mut cluster = start_nodes(&RedisAt::plain(&redis), 5, &["node-a", "node-b"], &|t| t).await;
    // Twelve `XADD`s from a node that does not exist: every connection's 5-hour window spent
    // with no reset, and every connection disabled (a 401's kind) with no end.
    let mut seq = 1;
    for (id, provider) in CONNECTIONS {
        let reading = json!({"usage_observed": {
            "provider": provider, "connection": id, "window": "5h",
            "used": 10_000, "limit": 10_000, "resets_at_ms": null, "source": "header"
        }});
        let disabled = json!({"connection_disabled": {
            "provider": provider, "connection": id, "reason": "auth",
            "status": 401, "error_code": null, "until_ms": null
        }});
        forge(&redis, "node-z", seq, &reading);
        forge(&redis, "node-z", seq + 1, &disabled);
        seq += 2;
    }
    for node in 0..2 {
        let base = cluster.nodes[node].base.clone();
        let client = cluster.client.clone();
        wait_for(Duration::from_secs(5), "every connection disabled", || {
            let (base, client) = (base.clone(), client.clone());
            async move {
                let state = admin_json(&client, &base, "/admin/state").await;
                CONNECTIONS
                    .iter()
                    .all(|(id, _)| !connection(&state, id)["disabled"].is_null())
            }
        })
        .await;
        blocked_with_an_end(&cluster, node).await;
    }
    // B restarts from its journal: the same bounded blocks, never endless ones.
    restart(&mut cluster, 1).await;
    blocked_with_an_end(&cluster, 1).await;
    // The operator's plain clear still lifts the disables at once (no `readings=1` needed
    // for them); the readings end by themselves.
    let journal = admin_journal_all(&cluster.client, &cluster.nodes[1].base).await;
    let applied: Vec<Value> = journal
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .filter(|e| e["kind"] == "peer_applied" && e["origin_node"] == "node-z")
        .collect();
    assert_eq!(applied.len(), 12, "{journal}");
    assert!(
        applied
            .iter()
            .all(|e| !e["until_ms"].is_null() || e["resets_at_ms"].as_u64().is_some()),
        "journaled with their bounded ends: {applied:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_seq_mutes_none_of_a_peers_real_updates_through_a_restart() {
    let redis = redis_support::plain();
    let mut cluster = start_nodes(&RedisAt::plain(&redis), 5, &["node-a", "node-b"], &|t| t).await;
    let (a, b) = (0, 1);
    // B has seen node-a: its first seq, as B's journal has it.
    real_lock_reaches(&cluster, a, b, "seen").await;
    let journal = admin_journal_all(&cluster.client, &cluster.nodes[b].base).await;
    let first_seq = journal
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .filter(|e| e["kind"] == "peer_applied" && e["origin_node"] == "node-a")
        .map(|e| e["origin_seq"].as_u64().unwrap())
        .min()
        .unwrap();
    // 1. node-b, which published nothing yet, "at" seq 2^48 − 1 about oa-1 (A takes it).
    forge(
        &redis,
        "node-b",
        (1 << 48) - 1,
        &lock_event("oa-1", "forged-b"),
    );
    // 2. node-a, seen by B, "at" its first seq plus ten seconds of a million events a second:
    //    inside the old bound, `first_seq + (elapsed + 10 s) × 1000`.
    forge(
        &redis,
        "node-a",
        first_seq + 10_000_000,
        &lock_event("oa-1", "forged-a"),
    );
    wait_for(
        Duration::from_secs(3),
        "the forged locks applied",
        || async {
            locked(&cluster, a, "oa-1", "forged-b").await
                && locked(&cluster, b, "oa-1", "forged-a").await
        },
    )
    .await;

    // Each origin's next real update about oa-1 still reaches the other node.
    real_lock_reaches(&cluster, a, b, "real-a1").await;
    real_lock_reaches(&cluster, b, a, "real-b1").await;

    // Both restart from their journals (where the forged marks are): still nothing muted.
    restart(&mut cluster, a).await;
    restart(&mut cluster, b).await;
    real_lock_reaches(&cluster, b, a, "real-b2").await;
    real_lock_reaches(&cluster, a, b, "real-a2").await;
    for (node, model) in [(a, "real-b1"), (b, "real-a1")] {
        assert!(
            locked(&cluster, node, "oa-1", model).await,
            "node {node} lost {model} over its restart"
        );
    }
}
