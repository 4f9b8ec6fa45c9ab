//! The cluster trusts Redis no more than an upstream (issue #34, behaviour §9 and §11): real
//! `quotaroute serve` nodes on one real `redis-server` (see `node_cluster`), and a test that
//! writes to that Redis itself, as anyone who reaches it could.
//!
//! - forged stream entries: a 73-year lock is cut to the node's own cap, a 1 MB model name
//!   and a `seq = u64::MAX` are refused (state, journal size, and the origin's later updates
//!   still arriving), and `/metrics` counts them;
//! - a usage of `u64::MAX` tokens, or a counter holding text, breaks no lease script (a
//!   client's nor a connection's):
//!   Redis stays `up` and another client's cluster-wide `requests_per_min` holds within its
//!   two leases;
//! - one lease whose script Redis fails (a counter of the wrong type) leaves the other leases
//!   working and Redis `up`;
//! - Redis frozen for 3 s (SIGSTOP) under 150 requests/s refuses no client below its limit,
//!   and the limit holds within its documented overshoot once Redis is back.

#![expect(
    clippy::unwrap_used,
    clippy::panic,
    reason = "test code: a failed step fails the test loudly"
)]

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use quotaroute_mock::{Fault, Rule};
use serde_json::{json, Value};

use crate::node_cluster::{start_nodes, Cluster, RedisAt};
use crate::redis_support;
use crate::support::*;

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// XADDs one entry to the shared stream as node `node` would (wire format 1).
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

fn lock_event(connection: &str, model: &str, until_ms: u64) -> Value {
    json!({"model_locked": {
        "provider": "openai", "connection": connection, "model": model,
        "reason": "rate_limited", "status": 429, "error_code": null,
        "until_ms": until_ms, "failure_count": 1, "source": "upstream"
    }})
}

async fn lockouts(cluster: &Cluster, node: usize) -> Vec<Value> {
    let base = &cluster.nodes[node].base;
    admin_json(&cluster.client, base, "/admin/lockouts").await["lockouts"]
        .as_array()
        .unwrap()
        .clone()
}

async fn lock_on(cluster: &Cluster, node: usize, connection: &str, model: &str) -> Option<Value> {
    lockouts(cluster, node)
        .await
        .into_iter()
        .find(|l| l["connection"] == connection && l["model"] == model)
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

/// A metric's value in `/metrics` of `node` (0 when absent).
async fn metric(cluster: &Cluster, node: usize, name: &str) -> f64 {
    let text = admin_text(&cluster.client, &cluster.nodes[node].base, "/metrics").await;
    text.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or(0.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s9_forged_stream_entries_are_held_to_the_nodes_own_bounds() {
    const DAY_MS: u64 = 24 * 3_600_000;
    let redis = redis_support::plain();
    let cluster = start_nodes(&RedisAt::plain(&redis), 5, &["node-a", "node-b"], &|t| t).await;
    let (a, b) = (&cluster.nodes[0].base, &cluster.nodes[1].base);
    // A real lock learned by A reaches B: B has seen node-a and its seq.
    let lock_once = |model: &str| {
        cluster.mock.add_rule(
            Rule::rate_limited(60)
                .for_key(upstream_key("oa-1"))
                .for_model(model)
                .times(1),
        );
    };
    lock_once("before");
    assert_eq!(
        chat(&cluster.client, a, "openai/before").await.status(),
        200
    );
    wait_for(Duration::from_secs(3), "the real lock on B", || async {
        lock_on(&cluster, 1, "oa-1", "before").await.is_some()
    })
    .await;
    let journal = admin_journal_all(&cluster.client, b).await;
    let seen = journal
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .filter(|e| e["kind"] == "peer_applied" && e["origin_node"] == "node-a")
        .map(|e| e["origin_seq"].as_u64().unwrap())
        .max()
        .unwrap();
    let size_before = journal.len();

    // 1. A 73-year lock on oa-2: applied only as long as B's own cap (lockout.max_upstream_ms,
    //    7 days by default), like an upstream's `Retry-After` of 73 years.
    let years_73 = now_ms() + 73 * 365 * DAY_MS;
    forge(
        &redis,
        "node-a",
        seen + 10,
        &lock_event("oa-2", "forever", years_73),
    );
    // 2. A 1 MB model name on oa-3: refused.
    let huge = "x".repeat(1 << 20);
    forge(
        &redis,
        "node-a",
        seen + 11,
        &lock_event("oa-3", &huge, now_ms() + 60_000),
    );
    // 3. seq = u64::MAX about oa-1: refused, so it never mutes node-a's later entries on oa-1.
    forge(
        &redis,
        "node-a",
        u64::MAX,
        &lock_event("oa-1", "muted", now_ms() + 60_000),
    );

    wait_for(Duration::from_secs(3), "the capped lock on B", || async {
        lock_on(&cluster, 1, "oa-2", "forever").await.is_some()
    })
    .await;
    let capped = lock_on(&cluster, 1, "oa-2", "forever").await.unwrap();
    let remaining = capped["remaining_ms"].as_u64().unwrap();
    assert!(remaining <= 7 * DAY_MS, "a 73-year lock kept: {capped}");
    assert!(remaining > 7 * DAY_MS - 60_000, "{capped}");
    wait_for(Duration::from_secs(3), "two entries refused", || async {
        metric(&cluster, 1, "quotaroute_cluster_events_refused_total").await >= 2.0
    })
    .await;
    assert!(metric(&cluster, 1, "quotaroute_cluster_events_clamped_total").await >= 1.0);
    let state = admin_json(&cluster.client, b, "/admin/state").await;
    assert_eq!(
        state["cluster"]["events_refused"], 2,
        "{}",
        state["cluster"]
    );
    for lock in lockouts(&cluster, 1).await {
        let model = lock["model"].as_str().unwrap();
        assert!(model.len() <= 256 && model != "muted", "applied: {lock}");
    }

    // node-a's next real lock on oa-1 (a seq far below u64::MAX) still reaches B.
    lock_once("after");
    assert_eq!(chat(&cluster.client, a, "openai/after").await.status(), 200);
    wait_for(
        Duration::from_secs(3),
        "node-a's later lock on B",
        || async { lock_on(&cluster, 1, "oa-1", "after").await.is_some() },
    )
    .await;

    // B's journal: the capped lock, never the refused entries, and no megabyte.
    let journal = admin_journal_all(&cluster.client, b).await;
    let grown = journal.len() - size_before;
    println!("B's journal grew {grown} bytes over the forged entries and one real lock");
    assert!(grown < 64 * 1024, "journal grew {grown} bytes");
    let applied: Vec<Value> = journal
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .filter(|e| e["kind"] == "peer_applied")
        .collect();
    assert!(applied.iter().all(|e| e["origin_seq"] != json!(u64::MAX)));
    let forever = applied.iter().find(|e| e["model"] == "forever").unwrap();
    assert!(forever["until_ms"].as_u64().unwrap() <= now_ms() + 7 * DAY_MS);
    let log = cluster.nodes[1].log();
    assert!(log.contains("stream entry refused"), "{log}");
    assert!(!log.contains(&huge[..1024]), "the name itself was logged");
}

/// A chat completion whose usage says `u64::MAX` prompt tokens.
fn absurd_usage() -> Fault {
    let body = json!({
        "id": "chatcmpl-absurd", "object": "chat.completion", "created": 1, "model": "gpt-4o-mini",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": u64::MAX, "completion_tokens": 1, "total_tokens": u64::MAX}
    });
    Fault::Custom {
        status: 200,
        body: body.to_string(),
    }
}

const HOG_KEY: &str = "sk-qr-client-hog-secret";
const TEAM_KEY: &str = "sk-qr-client-team-secret";

async fn send(cluster: &Cluster, node: usize, key: &str) -> (u16, Value) {
    let response = cluster
        .client
        .post(format!("{}/v1/chat/completions", cluster.nodes[node].base))
        .bearer_auth(key)
        .json(&json!({"model": "team", "messages": [{"role": "user", "content": "hello"}]}))
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// Team-a (`requests_per_min = n`, leases of `lease`) sends 3 × n requests alternating
/// between the two nodes: at most n + 2 leases admitted, at least n, and Redis seen `up` by
/// both all along. Returns how many were admitted.
async fn team_holds_with_redis_up(cluster: &Cluster, n: u64, lease: u64) -> u64 {
    let mut admitted = 0;
    let mut redis_seen = Vec::new();
    for request in 0..(3 * n as usize) {
        let node = request % 2;
        let (status, body) = send(cluster, node, TEAM_KEY).await;
        match status {
            200 => admitted += 1,
            429 => assert_eq!(body["error"]["code"], "client_rate_limited", "{body}"),
            other => panic!("{other}: {body}"),
        }
        if request % 10 == 0 {
            let state =
                admin_json(&cluster.client, &cluster.nodes[node].base, "/admin/state").await;
            redis_seen.push(state["cluster"]["redis"].as_str().unwrap().to_owned());
        }
    }
    let bound = n + 2 * lease;
    assert!(redis_seen.iter().all(|r| r == "up"), "{redis_seen:?}");
    assert!(admitted <= bound, "admitted {admitted} > {bound}");
    assert!(admitted >= n, "only {admitted}");
    admitted
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s9_one_leases_redis_error_leaves_the_others_and_redis_up() {
    const N: u64 = 40;
    const LEASE: u64 = 2;
    const BROKEN_KEY: &str = "sk-qr-client-broken-secret";
    let redis = redis_support::plain();
    // The broken client first: its leases are synced before the team's in every round.
    let edit = |text: String| {
        text + &format!(
            "\n[[clients]]\nid = \"broken\"\nkey = \"{BROKEN_KEY}\"\nrequests_per_min = 1000\n\
             \n[[clients]]\nid = \"team-a\"\nkey = \"{TEAM_KEY}\"\nrequests_per_min = {N}\n"
        )
    };
    let cluster = start_nodes(&RedisAt::plain(&redis), LEASE, &["node-a", "node-b"], &edit).await;
    // The broken client's counters for the next minute are lists: its script fails with
    // WRONGTYPE at every refill, an error Redis answers (not a Redis that is down).
    let redis_client = redis::Client::open(format!("redis://127.0.0.1:{}", redis.port)).unwrap();
    let mut connection = redis_client.get_connection().unwrap();
    let bin = now_ms() / 5_000;
    for bin in bin.saturating_sub(1)..bin + 14 {
        for side in ["g", "s"] {
            let key = format!("qr:{{client:broken}}:requests_per_min:{side}:{bin}");
            let _: () = redis::cmd("DEL").arg(&key).query(&mut connection).unwrap();
            let _: () = redis::cmd("RPUSH")
                .arg(&key)
                .arg("not a counter")
                .query(&mut connection)
                .unwrap();
        }
    }
    for request in 0..8 {
        let (status, body) = send(&cluster, request % 2, BROKEN_KEY).await;
        assert!(status == 200 || status == 429, "{status}: {body}");
    }
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let admitted = team_holds_with_redis_up(&cluster, N, LEASE).await;
    let mut errors = 0.0;
    for node in 0..2 {
        errors += metric(&cluster, node, "quotaroute_cluster_lease_errors_total").await;
    }
    println!(
        "a lease failing in Redis ({errors} errors): team-a admitted {admitted} (bound {})",
        N + 2 * LEASE
    );
    assert!(
        errors >= 1.0,
        "the broken lease never failed: the test tests nothing"
    );
    let log = cluster.nodes[0].log() + &cluster.nodes[1].log();
    assert!(
        log.contains("Redis failed this client lease's sync"),
        "{log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s11_a_u64_max_usage_breaks_no_lease_and_redis_stays_up() {
    const N: u64 = 40;
    const LEASE: u64 = 2;
    let redis = redis_support::plain();
    // The hog first: its leases are synced before the team's in every round. Each openai
    // connection has a `tokens_5h` limit, leased by the other script: far above the team's
    // use, below the hog's (also once usage is clamped at `usage_max_tokens`, 10 M).
    let edit = |mut text: String| {
        for id in ["oa-1", "oa-2", "oa-3"] {
            let key = format!("api_key = \"{}\"\n", upstream_key(id));
            let at = text.find(&key).unwrap() + key.len();
            let weight_end = at + text[at..].find('\n').unwrap() + 1;
            text.insert_str(weight_end, "[connections.limits]\ntokens_5h = 5000000\n");
        }
        text + &format!(
            "\n[[clients]]\nid = \"hog\"\nkey = \"{HOG_KEY}\"\ntokens_per_min = 1000000\n\
             \n[[clients]]\nid = \"team-a\"\nkey = \"{TEAM_KEY}\"\nrequests_per_min = {N}\n"
        )
    };
    let cluster = start_nodes(&RedisAt::plain(&redis), LEASE, &["node-a", "node-b"], &edit).await;
    // And a damaged counter: the hog's spent-tokens bins hold text, not a number.
    let redis_client = redis::Client::open(format!("redis://127.0.0.1:{}", redis.port)).unwrap();
    let mut connection = redis_client.get_connection().unwrap();
    for bin in [now_ms() / 5_000, now_ms() / 5_000 + 1] {
        let key = format!("qr:{{client:hog}}:tokens_per_min:s:{bin}");
        let _: () = redis::cmd("SET")
            .arg(key)
            .arg("not a number")
            .query(&mut connection)
            .unwrap();
    }
    cluster.mock.add_rule(Rule::always(absurd_usage()).times(1));
    let (status, body) = send(&cluster, 0, HOG_KEY).await;
    assert_eq!(status, 200, "{body}");
    // A few lease rounds with the absurd usage to charge.
    tokio::time::sleep(Duration::from_millis(1_500)).await;

    let admitted = team_holds_with_redis_up(&cluster, N, LEASE).await;
    println!(
        "after a u64::MAX usage: team-a admitted {admitted} (bound {})",
        N + 2 * LEASE
    );
    for node in 0..2 {
        assert_eq!(
            metric(&cluster, node, "quotaroute_cluster_lease_errors_total").await,
            0.0
        );
        assert_eq!(
            metric(&cluster, node, "quotaroute_cluster_redis_up").await,
            1.0
        );
    }
    // The connection that served the hog: its shared `tokens_5h` counter took the tokens
    // (saturated, not failed), so its lease is refused on both nodes.
    for node in 0..2 {
        wait_for(
            Duration::from_secs(3),
            "tokens_5h@cluster saturated",
            || async {
                let state =
                    admin_json(&cluster.client, &cluster.nodes[node].base, "/admin/state").await;
                state["connections"].as_array().unwrap().iter().any(|c| {
                    c["buckets"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .any(|b| b["window"] == "tokens_5h@cluster" && b["saturated"] == true)
                })
            },
        )
        .await;
    }
    // The hog's spent counter reads as the scripts' cap (2^53 − 1) on both nodes.
    for node in 0..2 {
        wait_for(
            Duration::from_secs(3),
            "the hog's counter at the cap",
            || async {
                let clients =
                    admin_json(&cluster.client, &cluster.nodes[node].base, "/admin/clients").await;
                clients["clients"].as_array().unwrap().iter().any(|c| {
                    c["id"] == "hog"
                        && c["cluster"]["usage"].as_array().unwrap().iter().any(|w| {
                            w["window"] == "tokens_per_min" && w["used"] == json!((1u64 << 53) - 1)
                        })
                })
            },
        )
        .await;
    }
    // The hog's tokens reached the shared counter, saturated, and it is refused everywhere.
    wait_for(Duration::from_secs(3), "the hog refused on B", || async {
        send(&cluster, 1, HOG_KEY).await.0 == 429
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s9_a_redis_stall_refuses_no_client_below_its_limit() {
    const N: u64 = 600;
    const LEASE: u64 = 5;
    const RATE: u64 = 150;
    let redis = redis_support::plain();
    let edit = |text: String| {
        text + &format!(
            "\n[[clients]]\nid = \"team-a\"\nkey = \"{TEAM_KEY}\"\nrequests_per_min = {N}\n"
        )
    };
    let cluster = std::sync::Arc::new(
        start_nodes(&RedisAt::plain(&redis), LEASE, &["node-a", "node-b"], &edit).await,
    );
    for request in 0..10 {
        assert_eq!(send(&cluster, request % 2, TEAM_KEY).await.0, 200);
    }
    // Redis freezes for 3 s while the client sends 150 requests a second to both nodes
    // (450 of its 600 a minute).
    let thaw = redis.stall(Duration::from_secs(3));
    let started = Instant::now();
    let mut ticker = tokio::time::interval(Duration::from_micros(1_000_000 / RATE));
    let mut requests = Vec::new();
    for request in 0..(3 * RATE as usize) {
        ticker.tick().await;
        let cluster = cluster.clone();
        requests.push(tokio::spawn(async move {
            send(&cluster, request % 2, TEAM_KEY).await
        }));
    }
    let mut statuses = std::collections::BTreeMap::<u16, u64>::new();
    for request in requests {
        let (status, body) = request.await.unwrap();
        if status != 200 {
            println!("{status}: {body}");
        }
        *statuses.entry(status).or_default() += 1;
    }
    println!(
        "Redis frozen 3 s, {} requests at {RATE}/s in {:?}: {statuses:?}",
        3 * RATE,
        started.elapsed()
    );
    thaw.join().unwrap();
    assert_eq!(
        statuses.keys().copied().collect::<Vec<u16>>(),
        [200],
        "a client below its limit was refused during the stall: {statuses:?}"
    );

    // Redis is back: both nodes say so, and the limit holds across them again.
    wait_for(Duration::from_secs(10), "Redis up on both", || async {
        let mut up = true;
        for node in &cluster.nodes {
            let state = admin_json(&cluster.client, &node.base, "/admin/state").await;
            up &= state["cluster"]["redis"] == "up";
        }
        up
    })
    .await;
    let mut refused_in_a_row = 0;
    let mut request = 0;
    while refused_in_a_row < 20 {
        let (status, body) = send(&cluster, request % 2, TEAM_KEY).await;
        request += 1;
        match status {
            200 => refused_in_a_row = 0,
            429 => {
                assert_eq!(body["error"]["code"], "client_rate_limited", "{body}");
                refused_in_a_row += 1;
            }
            other => panic!("{other}: {body}"),
        }
        assert!(request < 2 * N as usize, "never refused");
    }
    let admitted = cluster.mock.stats().per_key.values().sum::<u64>();
    let bound = N + 2 * LEASE;
    println!("after the stall: {admitted} admitted in the minute (limit {N}, bound {bound})");
    assert!(admitted <= bound, "admitted {admitted} > {bound}");
    // Each node may hold up to one and a half leases unspent when the counter refuses.
    assert!(admitted >= N - 4 * LEASE, "only {admitted}");
}
