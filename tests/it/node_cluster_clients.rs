//! Client limits across nodes (behaviour §11 with `[cluster]`): two real `quotaroute serve`
//! processes on one mock upstream and one real `redis-server` (see `node_cluster`), one client
//! sending to both in turn.
//!
//! - `requests_per_min = N`: at most N + 2 × `lease_size` admitted across both, then 429
//!   `client_rate_limited` from both;
//! - `tokens_per_min`: both stop after the two nodes' tokens together crossed it;
//! - `budget_usd`: both stop after the spend crossed it (priced from `[[prices]]`), and
//!   `/admin/clients`' cluster-wide spend agrees between the nodes after the sync;
//! - Redis killed mid-run: both nodes still serve, and refuse by their own counts.

#![expect(
    clippy::unwrap_used,
    clippy::panic,
    reason = "test code: a failed step fails the test loudly"
)]

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::node_cluster::{start_nodes, Cluster, RedisAt};
use crate::redis_support;
use crate::support::*;

const KEY: &str = "sk-qr-client-shared-team-secret";

/// Client `team-a` with `limits`; `gpt-4o-mini` priced so one request costs ~0.4 ¢.
fn with_client(limits: &str) -> impl Fn(String) -> String + '_ {
    move |text| {
        text + &format!(
            r#"
[[clients]]
id = "team-a"
key = "{KEY}"
{limits}

[[prices]]
model = "gpt-4o-mini"
input = 150.0
output = 600.0
"#
        )
    }
}

async fn send(cluster: &Cluster, node: usize) -> (u16, Value) {
    let response = cluster
        .client
        .post(format!("{}/v1/chat/completions", cluster.nodes[node].base))
        .bearer_auth(KEY)
        .json(&json!({"model": "team", "messages": [{"role": "user", "content": "hello there"}]}))
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

async fn team_a(cluster: &Cluster, node: usize) -> Value {
    let clients = admin_json(&cluster.client, &cluster.nodes[node].base, "/admin/clients").await;
    clients["clients"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "team-a")
        .cloned()
        .unwrap()
}

fn window<'a>(usage: &'a Value, name: &str) -> &'a Value {
    usage
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["window"] == name)
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s11_requests_per_min_holds_across_two_nodes_within_two_leases() {
    let redis = redis_support::plain();
    requests_per_min_holds_across_two_nodes(&RedisAt::plain(&redis)).await;
}

/// `requests_per_min = 20`, leases of 2, 60 requests alternating between two nodes on `redis`
/// (also run on a three-shard Redis Cluster by `node_cluster_managed`).
pub async fn requests_per_min_holds_across_two_nodes(redis: &RedisAt) {
    const N: u64 = 20;
    const LEASE: u64 = 2;
    let limits = format!("requests_per_min = {N}");
    let edit = with_client(&limits);
    let cluster = start_nodes(redis, LEASE, &["node-a", "node-b"], &edit).await;
    let mut admitted = 0;
    let mut refused_by = [0u32; 2];
    for request in 0..(3 * N as usize) {
        let node = request % 2;
        let (status, body) = send(&cluster, node).await;
        match status {
            200 => admitted += 1,
            429 => {
                assert_eq!(body["error"]["code"], "client_rate_limited", "{body}");
                refused_by[node] += 1;
            }
            other => panic!("{other}: {body}"),
        }
    }
    let bound = N + 2 * LEASE;
    println!(
        "requests_per_min {N}, 2 nodes, lease_size {LEASE}: admitted {admitted} (bound {bound})"
    );
    assert!(admitted <= bound, "admitted {admitted} > {bound}");
    assert!(
        admitted >= N,
        "only {admitted}: the limit is used, not starved"
    );
    // The last requests met 429 on both nodes, though each admitted fewer than N itself.
    for (node, refused) in refused_by.into_iter().enumerate() {
        assert!(refused > 0, "node {node} never refused");
        let (status, body) = send(&cluster, node).await;
        assert_eq!(status, 429, "{body}");
        assert_eq!(body["error"]["code"], "client_rate_limited");
        let local = window(&team_a(&cluster, node).await["usage"], "requests_per_min")["used"]
            .as_u64()
            .unwrap();
        assert!(local < N, "node {node} alone admitted {local}");
    }
    assert_eq!(cluster.mock.stats().per_key.values().sum::<u64>(), admitted);
    // After the sync both nodes show the same cluster-wide count: every admitted request.
    wait_for(Duration::from_secs(3), || async {
        let a = team_a(&cluster, 0).await["cluster"].clone();
        let b = team_a(&cluster, 1).await["cluster"].clone();
        let used = |v: &Value| window(&v["usage"], "requests_per_min")["used"].clone();
        a["redis"] == "up" && used(&a) == json!(admitted) && used(&b) == json!(admitted)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s11_tokens_per_min_holds_across_two_nodes() {
    const LIMIT: u64 = 1_000;
    const LEASE: u64 = 50;
    let redis = redis_support::plain();
    let limits = format!("tokens_per_min = {LIMIT}");
    let edit = with_client(&limits);
    let cluster = start_nodes(&RedisAt::plain(&redis), LEASE, &["node-a", "node-b"], &edit).await;
    let mut stopped = [false; 2];
    for request in 0..400 {
        let node = request % 2;
        let (status, body) = send(&cluster, node).await;
        if status == 429 {
            assert_eq!(body["error"]["code"], "client_rate_limited", "{body}");
            stopped[node] = true;
        } else {
            assert_eq!(status, 200, "{body}");
        }
        if stopped == [true, true] {
            break;
        }
    }
    assert_eq!(stopped, [true, true], "both nodes stop");
    let mut used = Vec::new();
    let mut requests = 0;
    for node in 0..2 {
        let usage = team_a(&cluster, node).await["usage"].clone();
        used.push(window(&usage, "tokens_per_min")["used"].as_u64().unwrap());
        requests += window(&usage, "requests_per_min")["used"].as_u64().unwrap();
    }
    let total: u64 = used.iter().sum();
    let per_request = total.div_ceil(requests);
    println!("tokens_per_min {LIMIT}, 2 nodes, lease_size {LEASE}: {total} tokens ({used:?}, {per_request} per request)");
    assert!(total >= LIMIT, "stopped early: {total}");
    // One lease per node, and the one request each that crossed it.
    assert!(total <= LIMIT + 2 * LEASE + 2 * per_request, "{total}");
    assert!(
        used.iter().all(|u| *u < LIMIT),
        "one node alone reached the limit: {used:?}"
    );
    wait_for(Duration::from_secs(3), || async {
        let mut seen = Vec::new();
        for node in 0..2 {
            let view = team_a(&cluster, node).await["cluster"].clone();
            seen.push(window(&view["usage"], "tokens_per_min")["used"].clone());
        }
        seen == [json!(total), json!(total)]
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s11_a_budget_stops_both_nodes_and_their_cluster_spend_agrees() {
    const BUDGET: f64 = 0.04;
    let redis = redis_support::plain();
    let limits = format!("budget_usd = {BUDGET}\nbudget_period = \"day\"");
    let edit = with_client(&limits);
    // A lease of spend is `lease_size` cents: 1 ¢ here.
    let cluster = start_nodes(&RedisAt::plain(&redis), 1, &["node-a", "node-b"], &edit).await;
    let mut stopped = [false; 2];
    for request in 0..200 {
        let node = request % 2;
        let (status, body) = send(&cluster, node).await;
        if status == 429 {
            assert_eq!(body["error"]["code"], "budget_exceeded", "{body}");
            stopped[node] = true;
        } else {
            assert_eq!(status, 200, "{body}");
        }
        if stopped == [true, true] {
            break;
        }
    }
    assert_eq!(stopped, [true, true], "both nodes stop");
    for node in 0..2 {
        assert_eq!(send(&cluster, node).await.0, 429);
    }
    // The spend on each node's own ledger, and the cluster's: both nodes' summed.
    let mut local = 0.0;
    for node in 0..2 {
        local += team_a(&cluster, node).await["spend_usd"].as_f64().unwrap();
    }
    println!("budget ${BUDGET}, 2 nodes, 1 ¢ leases: spent ${local:.5}");
    assert!(local >= BUDGET, "stopped before the budget: {local}");
    // Overshoot: at most one lease (1 ¢) per node, plus one request each (~0.4 ¢).
    assert!(local <= BUDGET + 2.0 * 0.01 + 2.0 * 0.005, "spent {local}");
    wait_for(Duration::from_secs(3), || async {
        let a = team_a(&cluster, 0).await["cluster"]["spend_usd"]
            .as_f64()
            .unwrap();
        let b = team_a(&cluster, 1).await["cluster"]["spend_usd"]
            .as_f64()
            .unwrap();
        // Nano-USD in Redis, rounded up per request.
        a == b && (a - local).abs() < 1e-6
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s11_redis_down_nodes_serve_and_refuse_by_their_own_counts() {
    const N: usize = 6;
    let mut redis = redis_support::plain();
    let limits = format!("requests_per_min = {N}");
    let edit = with_client(&limits);
    let cluster = start_nodes(&RedisAt::plain(&redis), 2, &["node-a", "node-b"], &edit).await;
    for node in 0..2 {
        assert_eq!(send(&cluster, node).await.0, 200);
    }
    redis.kill();
    wait_for(Duration::from_secs(5), || async {
        let mut down = true;
        for node in 0..2 {
            let state =
                admin_json(&cluster.client, &cluster.nodes[node].base, "/admin/state").await;
            down &= state["cluster"]["redis"] == "down"
                && team_a(&cluster, node).await["cluster"]["redis"] == "down";
        }
        down
    })
    .await;
    // Each node now admits up to its own N in the minute (the one before the kill counted).
    for node in 0..2 {
        let mut admitted = 1;
        for _ in 0..N + 3 {
            let (status, body) = send(&cluster, node).await;
            if status == 200 {
                admitted += 1;
            } else {
                assert_eq!(status, 429, "{body}");
                assert_eq!(body["error"]["code"], "client_rate_limited", "{body}");
            }
        }
        assert_eq!(admitted, N, "node {node} counts alone with Redis down");
    }
    assert_eq!(
        cluster.mock.stats().per_key.values().sum::<u64>() as usize,
        2 * N
    );
}

/// Polls `check` until it holds, or fails after `within`.
async fn wait_for<F, Fut>(within: Duration, check: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = Instant::now();
    while !check().await {
        assert!(start.elapsed() < within, "not within {within:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
