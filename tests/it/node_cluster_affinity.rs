//! Conversation affinity across nodes (behaviour §10 "Memory", §9): two real `quotaroute serve`
//! processes on one mock upstream and one `redis-server` (started on a free loopback port).
//!
//! - turn 1 of four conversations on node A, the next turns alternating B, A, …: every turn
//!   lands on the key that served turn 1 (`x-quotaroute-connection`), also after B is killed
//!   with -9 and restarted; B's `/admin/affinity` lists the groups it learned (digests only);
//! - A's bound key starts answering 429: the conversation moves on A, and B follows it there;
//! - publish → apply latency of 200 bindings (printed: run with `--nocapture`), and two nodes
//!   that bound the same groups at once converge on one target per group.

#![expect(
    clippy::unwrap_used,
    reason = "test code: a failed step fails the test loudly"
)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use quotaroute_mock::Rule;
use serde_json::{json, Value};

use crate::redis_support;
use crate::support::*;

const KEYS: [&str; 4] = ["k1", "k2", "k3", "k4"];

struct Node {
    base: String,
    config: PathBuf,
    child: Option<KillOnDrop>,
}

impl Node {
    fn new(dir: &Path, name: &str, mock_base: &str, redis_port: u16) -> Node {
        let port = free_port();
        let mut text = standard_config(mock_base, &dir.join(name), "").replace(
            "listen = \"127.0.0.1:0\"",
            &format!("listen = \"127.0.0.1:{port}\""),
        );
        for id in KEYS {
            text.push_str(&format!(
                "\n[[connections]]\nid = \"{id}\"\nprovider = \"openai\"\napi_key = \"{}\"\n",
                upstream_key(id)
            ));
        }
        text.push_str(
            "\n[[combos]]\nname = \"pool\"\ntargets = [\n  { connection = \"k1\", model = \"gpt-4o-mini\" },\n  { connection = \"k2\", model = \"gpt-4o-mini\" },\n  { connection = \"k3\", model = \"gpt-4o-mini\" },\n  { connection = \"k4\", model = \"gpt-4o-mini\" },\n]\n",
        );
        text.push_str(&format!(
            "\n[cluster]\nredis_url = \"redis://127.0.0.1:{redis_port}\"\nnode_id = \"{name}\"\n"
        ));
        let config = dir.join(format!("{name}.toml"));
        std::fs::write(&config, text).unwrap();
        let mut node = Node {
            base: format!("http://127.0.0.1:{port}"),
            config,
            child: None,
        };
        node.spawn();
        node
    }

    fn spawn(&mut self) {
        let child = Command::new(env!("CARGO_BIN_EXE_quotaroute"))
            .args(["serve", "--config"])
            .arg(&self.config)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        self.child = Some(KillOnDrop(child));
    }

    fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.0.kill();
            let _ = child.0.wait();
        }
    }
}

struct Pair {
    mock: quotaroute_mock::MockUpstream,
    _redis: redis_support::Server,
    _dir: tempfile::TempDir,
    a: Node,
    b: Node,
    client: reqwest::Client,
}

async fn start_pair() -> Pair {
    let redis = redis_support::plain();
    let (mock_base, mock) = start_mock().await;
    let dir = tempfile::tempdir().unwrap();
    let a = Node::new(dir.path(), "node-a", &mock_base, redis.port);
    let b = Node::new(dir.path(), "node-b", &mock_base, redis.port);
    let client = reqwest::Client::new();
    wait_ready(&client, &a.base).await;
    wait_ready(&client, &b.base).await;
    Pair {
        mock,
        _redis: redis,
        _dir: dir,
        a,
        b,
        client,
    }
}

/// One system prompt for every conversation, long enough that the prefix alone counts.
fn system_prompt() -> String {
    "You are the support agent of a large shop; follow the policies below. ".repeat(80)
}

/// Turn `turn` (0-based) of conversation `conv`: the whole history so far, OpenAI format.
fn chat_turn(conv: usize, turn: usize) -> Value {
    let mut messages = vec![json!({"role": "system", "content": system_prompt()})];
    for t in 0..=turn {
        messages.push(json!({"role": "user", "content": format!("conversation {conv}, question {t}: {}", "the details ".repeat(20))}));
        if t < turn {
            messages.push(json!({"role": "assistant", "content": format!("answer {t} to {conv}")}));
        }
    }
    json!({"model": "pool", "messages": messages})
}

/// Who served `body` on `base`.
async fn served(client: &reqwest::Client, base: &str, body: &Value) -> String {
    let response = client
        .post(format!("{base}/v1/chat/completions"))
        .bearer_auth(CLIENT_KEY)
        .json(body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200, "{base}");
    header(&response, "x-quotaroute-connection")
}

/// `base`'s `/admin/affinity`: digest → connection.
async fn bound_on(client: &reqwest::Client, base: &str) -> HashMap<String, String> {
    let listed = admin_json(client, base, "/admin/affinity").await;
    listed["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            (
                g["digest"].as_str().unwrap().to_owned(),
                g["connection"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// Waits until `base` lists `want` (digest → connection) among its bindings.
async fn wait_bound(client: &reqwest::Client, base: &str, want: &HashMap<String, String>) {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let bound = bound_on(client, base).await;
        if want.iter().all(|(digest, c)| bound.get(digest) == Some(c)) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{base}: {bound:?}, want {want:?}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn journal(text: &str) -> Vec<Value> {
    text.lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_next_turn_on_another_node_goes_to_the_same_key_and_follows_a_move() {
    let mut pair = start_pair().await;
    let client = pair.client.clone();
    let (a, b) = (pair.a.base.clone(), pair.b.base.clone());
    let mut first = Vec::new();
    for conv in 0..4 {
        first.push(served(&client, &a, &chat_turn(conv, 0)).await);
    }
    // A's bindings, as B must learn them (the digests only).
    let on_a = bound_on(&client, &a).await;
    assert_eq!(on_a.len(), 4, "{on_a:?}");
    wait_bound(&client, &b, &on_a).await;
    let listed = admin_text(&client, &b, "/admin/affinity").await;
    assert!(!listed.contains("support agent") && !listed.contains("question"));
    for turn in 1..5 {
        let node = if turn % 2 == 1 { &b } else { &a };
        for (conv, key) in first.iter().enumerate() {
            assert_eq!(
                &served(&client, node, &chat_turn(conv, turn)).await,
                key,
                "conversation {conv}, turn {turn} on {node}"
            );
        }
    }
    // B journaled what it learned as `peer_applied` and published none of it back.
    let on_b = journal(&admin_journal_all(&client, &b).await);
    let learned = on_b
        .iter()
        .filter(|e| e["kind"] == "peer_applied" && e["event_kind"] == "affinity_bound")
        .count();
    assert_eq!(learned, 4);
    assert!(!on_b.iter().any(|e| e["kind"] == "affinity_bound"));
    let on_a_journal = journal(&admin_journal_all(&client, &a).await);
    assert!(!on_a_journal
        .iter()
        .any(|e| e["kind"] == "peer_applied" && e["event_kind"] == "affinity_bound"));

    // B killed with -9 and restarted keeps what it learned from A (its journal's replay).
    pair.b.kill9();
    pair.b.spawn();
    wait_ready(&client, &b).await;
    for (conv, key) in first.iter().enumerate() {
        assert_eq!(&served(&client, &b, &chat_turn(conv, 5)).await, key);
    }

    // A's bound key for conversation 0 starts answering 429: the turn on A fails over and the
    // conversation moves there; B follows the move (not its own DRR).
    pair.mock.set_rules(vec![
        Rule::rate_limited(600).for_key(upstream_key(&first[0]))
    ]);
    // The turn that meets the 429 fails over inside its request (affinity ignored there),
    // and the conversation moves to where that turn was served; the next one on A is held there.
    let failed_over_to = served(&client, &a, &chat_turn(0, 6)).await;
    assert_ne!(failed_over_to, first[0]);
    pair.mock.set_rules(vec![]);
    let moved_to = served(&client, &a, &chat_turn(0, 7)).await;
    assert_eq!(moved_to, failed_over_to);
    let on_a = journal(&admin_journal_all(&client, &a).await);
    let moved = on_a
        .iter()
        .find(|e| e["kind"] == "affinity_bound" && !e["moved_from"].is_null())
        .expect("A journaled the move");
    let digest = format!("{:016x}", moved["group"].as_u64().unwrap());
    wait_bound(&client, &b, &HashMap::from([(digest, moved_to.clone())])).await;
    for turn in 8..12 {
        let node = if turn % 2 == 0 { &b } else { &a };
        assert_eq!(
            served(&client, node, &chat_turn(0, turn)).await,
            moved_to,
            "turn {turn} on {node}"
        );
    }
}

/// The window in which a turn on B may not know A's binding yet: from A journaling
/// `affinity_bound` (its `at_ms`, as the stream carries it) to B applying it (B's `at_ms` of
/// the `peer_applied`), one clock on one machine. Then the same groups bound on both nodes at
/// once: they converge on one target each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publish_to_apply_latency_and_two_nodes_binding_at_once_converge() {
    let pair = start_pair().await;
    let client = pair.client.clone();
    let (a, b) = (pair.a.base.clone(), pair.b.base.clone());
    const BINDINGS: usize = 200;
    let hinted = |conv: usize| {
        json!({"model": "pool", "prompt_cache_key": format!("conv-{conv}"),
               "messages": [{"role": "user", "content": "hi"}]})
    };
    for conv in 0..BINDINGS {
        served(&client, &a, &hinted(conv)).await;
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    let lags: Vec<u64> = loop {
        let learned = peer_apply_lags_ms(&admin_journal_all(&client, &b).await, "affinity_bound");
        if learned.len() >= BINDINGS {
            break learned;
        }
        assert!(Instant::now() < deadline, "B learned {}", learned.len());
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let mut sorted = lags.clone();
    sorted.sort_unstable();
    let (p50, p99, max) = (
        percentile(&sorted, 50),
        percentile(&sorted, 99),
        sorted[sorted.len() - 1],
    );
    println!(
        "affinity publish→apply over loopback, {} bindings: p50 {p50} ms, p99 {p99} ms, max {max} ms",
        sorted.len()
    );
    assert!(p99 <= 100, "p99 {p99} ms");

    // The same new groups sent to both nodes at once: each may bind by its own DRR before it
    // hears of the other's; both end on one target per group (the later binding wins).
    // After 200 turns A's DRR is back where B's starts (4 equal keys): one request without a
    // group on B sets B's DRR one key further, so the two pick different keys by themselves.
    let plain = json!({"model": "pool", "messages": [{"role": "user", "content": "hi"}]});
    served(&client, &b, &plain).await;
    let mut raced = 0;
    for conv in 1_000..1_010 {
        let body = hinted(conv);
        let (on_a, on_b) = tokio::join!(served(&client, &a, &body), served(&client, &b, &body));
        raced += usize::from(on_a != on_b);
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let (bound_a, bound_b) = (bound_on(&client, &a).await, bound_on(&client, &b).await);
        if bound_a == bound_b && bound_a.len() == BINDINGS + 10 {
            break;
        }
        assert!(Instant::now() < deadline, "A {bound_a:?}\nB {bound_b:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    println!(
        "affinity: 10 groups bound on both nodes at once, {raced} on different keys; converged"
    );
    for conv in 1_000..1_010 {
        let body = hinted(conv);
        assert_eq!(
            served(&client, &a, &body).await,
            served(&client, &b, &body).await
        );
    }
}
