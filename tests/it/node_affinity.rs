//! Behaviour §10 end to end: a conversation's turns stay on the account that served its first
//! turn (seen in `x-quotaroute-connection`), new conversations fill the pool by DRR, a
//! conversation whose key starts answering 429 moves once — to where its failed-over turn was
//! served — and stays, `prompt_cache_key` binds
//! unrelated prompts, and bindings are journaled (`affinity_bound`) and survive a restart.

#![expect(
    clippy::unwrap_used,
    reason = "test code: a failed step fails the test loudly"
)]

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use quotaroute_actors::SystemClock;
use quotaroute_mock::Rule;
use serde_json::{json, Value};

use crate::support::*;

/// Four equal keys (`k1`..`k4`) in combo `pool` and two 3:1 (`h`, `l`) in combo `duo`.
fn pool_config(text: String) -> String {
    let mut text = text;
    for id in ["k1", "k2", "k3", "k4", "h", "l"] {
        text.push_str(&format!(
            "\n[[connections]]\nid = \"{id}\"\nprovider = \"openai\"\napi_key = \"{}\"\n",
            upstream_key(id)
        ));
    }
    text.push_str(
        r#"
[[combos]]
name = "pool"
targets = [
  { connection = "k1", model = "gpt-4o-mini" },
  { connection = "k2", model = "gpt-4o-mini" },
  { connection = "k3", model = "gpt-4o-mini" },
  { connection = "k4", model = "gpt-4o-mini" },
]

[[combos]]
name = "duo"
targets = [
  { connection = "h", model = "gpt-4o-mini", weight = 3 },
  { connection = "l", model = "gpt-4o-mini", weight = 1 },
]
"#,
    );
    text
}

async fn start() -> Harness {
    Harness::start_on_clock(pool_config, Arc::new(SystemClock)).await
}

/// One system prompt for every conversation, long enough that the prefix alone counts.
fn system_prompt() -> String {
    "You are the support agent of a large shop; follow the policies below. ".repeat(80)
}

/// What a user asks and the agent answers: long, as an agent session's turns are (tool
/// output, files), so a turn's own history outweighs the shared system prompt.
fn question(conv: usize, t: usize) -> String {
    format!(
        "conversation {conv}, question {t}: {}",
        "the details of this case ".repeat(40)
    )
}

fn answer(conv: usize, t: usize) -> String {
    format!(
        "answer {t} to conversation {conv}: {}",
        "what the agent found out ".repeat(40)
    )
}

/// Turn `turn` (0-based) of conversation `conv`: the whole history so far, OpenAI format.
fn chat_turn(model: &str, conv: usize, turn: usize) -> Value {
    let mut messages = vec![json!({"role": "system", "content": system_prompt()})];
    for t in 0..=turn {
        messages.push(json!({"role": "user", "content": question(conv, t)}));
        if t < turn {
            messages.push(json!({"role": "assistant", "content": answer(conv, t)}));
        }
    }
    json!({"model": model, "messages": messages})
}

/// The same conversation in Anthropic's format (system at the top level).
fn message_turn(model: &str, conv: usize, turn: usize) -> Value {
    let mut messages = Vec::new();
    for t in 0..=turn {
        messages.push(json!({"role": "user", "content": question(conv, t)}));
        if t < turn {
            messages.push(json!({"role": "assistant", "content": answer(conv, t)}));
        }
    }
    json!({"model": model, "max_tokens": 16, "system": system_prompt(), "messages": messages})
}

async fn served_by(harness: &Harness, path: &str, body: Value) -> String {
    served_with_cache(harness, path, body).await.0
}

/// Who served `body`, and the cached input tokens its answer reported.
async fn served_with_cache(harness: &Harness, path: &str, body: Value) -> (String, u64) {
    let response = harness.post_json(path, body).await;
    assert_eq!(response.status(), 200, "{path}");
    let connection = header(&response, "x-quotaroute-connection");
    let answer: Value = response.json().await.unwrap();
    let usage = &answer["usage"];
    let cached = usage["prompt_tokens_details"]["cached_tokens"]
        .as_u64()
        .or_else(|| usage["cache_read_input_tokens"].as_u64())
        .unwrap();
    (connection, cached)
}

/// Cached input tokens the same conversations read with perfect affinity: every turn on one
/// account that has seen everything before it (straight to a fresh mock, one key, the same
/// order) — an upper bound no pool of several keys can beat.
async fn perfect_cached(
    path: &str,
    convs: usize,
    turns: usize,
    body: fn(usize, usize) -> Value,
) -> u64 {
    let (mock_base, _mock) = start_mock().await;
    let client = reqwest::Client::new();
    let mut total = 0;
    for turn in 0..turns {
        for i in 0..convs {
            let conv = (i * 7 + turn * 5) % convs;
            let answer: Value = client
                .post(format!("{mock_base}{path}"))
                .bearer_auth("sk-mock-perfect-0123456789abcdef")
                .header("x-api-key", "sk-mock-perfect-0123456789abcdef")
                .header("anthropic-version", "2023-06-01")
                .json(&body(conv, turn))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            let usage = &answer["usage"];
            total += usage["prompt_tokens_details"]["cached_tokens"]
                .as_u64()
                .or_else(|| usage["cache_read_input_tokens"].as_u64())
                .unwrap();
        }
    }
    total
}

/// Runs `convs` conversations of `turns` turns, interleaved turn by turn as concurrent users
/// would send them (in a shuffled order each round; `convs` must be coprime with 7); returns
/// who served each conversation's turns.
async fn run(
    harness: &Harness,
    path: &str,
    convs: usize,
    turns: usize,
    body: fn(usize, usize) -> Value,
) -> Vec<Vec<String>> {
    run_cached(harness, path, convs, turns, body).await.0
}

/// [`run`], with the cached input tokens every answer reported, summed.
async fn run_cached(
    harness: &Harness,
    path: &str,
    convs: usize,
    turns: usize,
    body: fn(usize, usize) -> Value,
) -> (Vec<Vec<String>>, u64) {
    let mut served = vec![Vec::new(); convs];
    let mut cached = 0;
    for turn in 0..turns {
        // Users do not come back in the same order each round (and a fixed order would let
        // plain DRR land each conversation on the same key by accident).
        for i in 0..convs {
            let conv = (i * 7 + turn * 5) % convs;
            let (connection, tokens) = served_with_cache(harness, path, body(conv, turn)).await;
            served[conv].push(connection);
            cached += tokens;
        }
    }
    (served, cached)
}

/// Turns that reached the key of the conversation's previous turn, and conversations per key.
fn stickiness(served: &[Vec<String>]) -> (usize, usize, HashMap<String, usize>) {
    let mut kept = 0;
    let mut later = 0;
    let mut per_key = HashMap::new();
    for turns in served {
        *per_key.entry(turns[0].clone()).or_insert(0) += 1;
        for pair in turns.windows(2) {
            later += 1;
            kept += usize::from(pair[0] == pair[1]);
        }
    }
    (kept, later, per_key)
}

#[tokio::test]
async fn sixteen_conversations_stay_on_their_keys_and_fill_all_four() {
    let harness = start().await;
    let body: fn(usize, usize) -> Value = |c, t| chat_turn("pool", c, t);
    let (served, cached) = run_cached(&harness, "/v1/chat/completions", 16, 6, body).await;
    let perfect = perfect_cached("/v1/chat/completions", 16, 6, body).await;
    assert!(
        cached * 10 >= perfect * 9,
        "cached input {cached} is under 0.9 of perfect affinity's {perfect}"
    );
    let (kept, later, per_key) = stickiness(&served);
    eprintln!(
        "affinity: cached {cached} of perfect {perfect}; {kept} of {later} turns kept their key"
    );
    assert!(
        kept * 10 >= later * 9,
        "{kept} of {later} later turns reached the previous turn's key: {served:?}"
    );
    assert_eq!(per_key.len(), 4, "{per_key:?}");
    assert!(per_key.values().all(|&n| n >= 2), "{per_key:?}");

    // Every conversation was bound once (16 `affinity_bound`, none moved); held turns journal
    // nothing of their own, and no prompt text reaches the journal.
    harness.settle().await;
    let events = harness.journal_events().await;
    let bound: Vec<&Value> = events
        .iter()
        .filter(|e| e["kind"] == "affinity_bound")
        .collect();
    assert_eq!(bound.len(), 16, "{bound:?}");
    assert!(bound
        .iter()
        .all(|e| e["moved_from"].is_null() && e["client"] == "default"));
    let groups: HashSet<String> = bound.iter().map(|e| e["group"].to_string()).collect();
    assert_eq!(groups.len(), 16);
    let decided = |outcome: &str| {
        events
            .iter()
            .filter(|e| e["kind"] == "route_decided" && e["affinity"] == outcome)
            .count()
    };
    assert_eq!((decided("new"), decided("held")), (16, 80));
    assert_eq!((decided("none"), decided("moved")), (0, 0));
    let journal = serde_json::to_string(&events).unwrap();
    assert!(
        !journal.contains("support agent"),
        "prompt text in the journal"
    );

    // `GET /admin/affinity?connection=ID`: that key's groups, digests only.
    let listed = harness.admin_get("/admin/affinity?connection=k1").await;
    let groups = listed["groups"].as_array().unwrap();
    assert_eq!(groups.len(), per_key["k1"], "{listed}");
    assert!(groups.iter().all(|g| g["connection"] == "k1"
        && g["turns"] == 6
        && g["digest"].as_str().unwrap().len() == 16));
    assert!(!listed.to_string().contains("support agent"));
    assert_eq!(harness.admin_get("/admin/affinity").await["total"], 16);

    // Each connection's cached share of input tokens, in Prometheus.
    let metrics = harness.admin_text("/metrics").await;
    let read = metrics
        .lines()
        .find(|l| {
            l.starts_with("quotaroute_input_tokens_total")
                && l.contains("connection=\"k1\"")
                && l.contains("cache=\"read\"")
        })
        .unwrap_or_else(|| panic!("no cached-input counter for k1"));
    let value: f64 = read.rsplit(' ').next().unwrap().parse().unwrap();
    assert!(value > 0.0, "{read}");

    // And in `/admin/state`: each connection's input tokens, the cached ones and their share.
    let state = harness.admin_get("/admin/state").await;
    for c in state["connections"].as_array().unwrap() {
        let input = c["input_tokens"].as_u64().unwrap();
        let cached = c["cached_input_tokens"].as_u64().unwrap();
        if !per_key.contains_key(c["id"].as_str().unwrap()) {
            assert_eq!(
                (input, cached, &c["cached_share"]),
                (0, 0, &Value::Null),
                "{c}"
            );
            continue;
        }
        let share = c["cached_share"].as_f64().unwrap();
        assert!(input > 0 && cached <= input, "{c}");
        assert!((share - cached as f64 / input as f64).abs() < 1e-9, "{c}");
        assert!(
            share > 0.5,
            "held turns read most of their input from cache: {c}"
        );
    }
}

#[tokio::test]
async fn anthropic_conversations_with_one_system_prompt_stay_too() {
    let harness = start().await;
    let body: fn(usize, usize) -> Value = |c, t| message_turn("claude", c, t);
    let (served, cached) = run_cached(&harness, "/v1/messages", 9, 5, body).await;
    let perfect = perfect_cached("/v1/messages", 9, 5, body).await;
    eprintln!("anthropic: cached {cached} of perfect {perfect}");
    assert!(
        cached * 10 >= perfect * 9,
        "cached {cached} of perfect {perfect}"
    );
    let (kept, later, per_key) = stickiness(&served);
    assert!(kept * 10 >= later * 9, "{kept} of {later}: {served:?}");
    assert_eq!(
        per_key.len(),
        3,
        "one system prompt is not one group: {per_key:?}"
    );
}

/// What affinity saves: the same 16 × 6 with `[affinity] enabled = false` read clearly less
/// from cache (DRR scatters the turns), as the issue measured before affinity.
#[tokio::test]
async fn without_affinity_the_same_conversations_read_much_less_from_cache() {
    let harness = Harness::start_on_clock(
        |text| pool_config(text) + "\n[affinity]\nenabled = false\n",
        Arc::new(SystemClock),
    )
    .await;
    let body: fn(usize, usize) -> Value = |c, t| chat_turn("pool", c, t);
    let (served, cached) = run_cached(&harness, "/v1/chat/completions", 16, 6, body).await;
    let perfect = perfect_cached("/v1/chat/completions", 16, 6, body).await;
    let (kept, later, _) = stickiness(&served);
    eprintln!(
        "no affinity: cached {cached} of perfect {perfect}; {kept} of {later} kept their key"
    );
    assert!(
        kept * 2 < later,
        "{kept} of {later} stayed without affinity"
    );
    assert!(
        cached * 10 < perfect * 9,
        "cached {cached} of perfect {perfect}"
    );
}

#[tokio::test]
async fn weights_3_to_1_over_40_conversations_give_the_heavy_key_its_share() {
    let harness = start().await;
    let served = run(&harness, "/v1/chat/completions", 40, 4, |c, t| {
        chat_turn("duo", c, t)
    })
    .await;
    let all: Vec<&String> = served.iter().flatten().collect();
    let heavy = all.iter().filter(|c| c.as_str() == "h").count();
    let share = heavy as f64 / all.len() as f64;
    assert!((0.65..=0.85).contains(&share), "share {share}");
    let (kept, later, _) = stickiness(&served);
    assert!(kept * 10 >= later * 9, "{kept} of {later}");
}

#[tokio::test]
async fn a_conversation_whose_key_starts_answering_429_moves_once_and_stays() {
    let harness = start().await;
    let body = |t: usize| chat_turn("pool", 7, t);
    let first = served_by(&harness, "/v1/chat/completions", body(0)).await;
    for t in 1..3 {
        assert_eq!(
            served_by(&harness, "/v1/chat/completions", body(t)).await,
            first
        );
    }
    harness
        .mock
        .set_rules(vec![Rule::rate_limited(600).for_key(upstream_key(&first))]);
    // The turn that meets the 429 fails over inside its request (affinity ignored there),
    // and the group follows it to where it was served: the next turns read that account's
    // cache of the whole conversation so far (behaviour §10).
    let failover = served_by(&harness, "/v1/chat/completions", body(3)).await;
    assert_ne!(failover, first);
    let mut after = Vec::new();
    for t in 4..10 {
        after.push(served_by(&harness, "/v1/chat/completions", body(t)).await);
    }
    assert!(
        after.iter().all(|c| *c == failover),
        "{failover}: {after:?}"
    );

    harness.settle().await;
    let events = harness.journal_events().await;
    let moved: Vec<&Value> = events
        .iter()
        .filter(|e| e["kind"] == "affinity_bound" && !e["moved_from"].is_null())
        .collect();
    assert_eq!(moved.len(), 1, "moved exactly once: {moved:?}");
    assert_eq!(moved[0]["moved_from"], format!("{first}/gpt-4o-mini"));
    assert_eq!(moved[0]["connection"], failover.as_str());
    assert_eq!(moved[0]["reason"], "failover");
}

#[tokio::test]
async fn prompt_cache_key_binds_unrelated_prompts_and_short_prompts_go_by_drr() {
    let harness = start().await;
    let mut keyed = HashSet::new();
    let mut plain = HashSet::new();
    for i in 0..8 {
        let prompt = format!("unrelated question number {i}");
        keyed.insert(
            served_by(
                &harness,
                "/v1/chat/completions",
                json!({"model": "pool", "prompt_cache_key": "user-42",
                       "messages": [{"role": "user", "content": prompt}]}),
            )
            .await,
        );
        plain.insert(
            served_by(
                &harness,
                "/v1/chat/completions",
                json!({"model": "pool", "messages": [{"role": "user", "content": prompt}]}),
            )
            .await,
        );
    }
    assert_eq!(keyed.len(), 1, "{keyed:?}");
    assert!(
        plain.len() >= 3,
        "short prompts without a hint go by DRR: {plain:?}"
    );
}

#[tokio::test]
async fn a_session_header_binds_a_session() {
    let harness = start().await;
    let mut seen = HashSet::new();
    for i in 0..6 {
        let response = harness
            .client
            .post(harness.url("/v1/chat/completions"))
            .bearer_auth(CLIENT_KEY)
            .header("x-claude-code-session-id", "3f1c-session")
            .json(&json!({"model": "pool", "messages": [{"role": "user", "content": format!("q{i}")}]}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        seen.insert(header(&response, "x-quotaroute-connection"));
    }
    assert_eq!(seen.len(), 1, "{seen:?}");
}

/// The real binary on `pool_config`, on `port`, over the journal in `dir`.
fn spawn_binary(dir: &std::path::Path, mock_base: &str, port: u16) -> std::process::Child {
    let text = pool_config(standard_config(mock_base, &dir.join("journal"), "")).replace(
        "listen = \"127.0.0.1:0\"",
        &format!("listen = \"127.0.0.1:{port}\""),
    );
    let config = dir.join("quotaroute.toml");
    std::fs::write(&config, text).unwrap();
    std::process::Command::new(env!("CARGO_BIN_EXE_quotaroute"))
        .args(["serve", "--config"])
        .arg(&config)
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

async fn turn_on(client: &reqwest::Client, base: &str, conv: usize, turn: usize) -> String {
    let response = client
        .post(format!("{base}/v1/chat/completions"))
        .bearer_auth(CLIENT_KEY)
        .json(&chat_turn("pool", conv, turn))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    header(&response, "x-quotaroute-connection")
}

/// Bindings are learned state: after `kill -9` (replayed from the journal's events) and after
/// a graceful stop (read back from its snapshot, layout 4) each conversation's next turn goes
/// to the key that served it before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bindings_survive_kill_9_and_a_snapshot() {
    let (mock_base, _mock) = start_mock().await;
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::new();

    let mut node = KillOnDrop(spawn_binary(dir.path(), &mock_base, port));
    wait_ready(&client, &base).await;
    let mut bound = Vec::new();
    for conv in 0..8 {
        bound.push(turn_on(&client, &base, conv, 0).await);
    }
    assert_eq!(bound.iter().collect::<HashSet<_>>().len(), 4, "{bound:?}");
    // Past the flush interval, so the bindings are on disk; then SIGKILL.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    node.0.kill().unwrap();
    node.0.wait().unwrap();

    let mut node = KillOnDrop(spawn_binary(dir.path(), &mock_base, port));
    wait_ready(&client, &base).await;
    for (conv, key) in bound.iter().enumerate() {
        assert_eq!(
            &turn_on(&client, &base, conv, 1).await,
            key,
            "conversation {conv}"
        );
    }
    let journal = admin_journal_all(&client, &base).await;
    assert_eq!(journal.matches("\"kind\":\"affinity_bound\"").count(), 8);

    // A graceful stop snapshots the fold; the next start reads the bindings (and each
    // connection's cached-input counts, layout 4) from it.
    let cached_counts = |state: &Value| -> Vec<(String, u64, u64)> {
        state["connections"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                (
                    c["id"].as_str().unwrap().to_owned(),
                    c["input_tokens"].as_u64().unwrap(),
                    c["cached_input_tokens"].as_u64().unwrap(),
                )
            })
            .collect()
    };
    let before = cached_counts(&admin_json(&client, &base, "/admin/state").await);
    assert!(
        before.iter().any(|(_, _, cached)| *cached > 0),
        "{before:?}"
    );
    let status = std::process::Command::new("kill")
        .args(["-TERM", &node.0.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    node.0.wait().unwrap();
    let _node = KillOnDrop(spawn_binary(dir.path(), &mock_base, port));
    wait_ready(&client, &base).await;
    let state = admin_json(&client, &base, "/admin/state").await;
    assert_eq!(
        cached_counts(&state),
        before,
        "the cached share survives the snapshot"
    );
    for (conv, key) in bound.iter().enumerate() {
        assert_eq!(
            &turn_on(&client, &base, conv, 2).await,
            key,
            "conversation {conv}"
        );
    }
}

/// `replay --what-if affinity=off` on what the node journaled: every decision taken again by
/// §2 alone, the routing with and without affinity, and what affinity saved in cached input.
#[tokio::test]
async fn replay_what_if_affinity_off_shows_what_affinity_saved() {
    let harness = start().await;
    let body: fn(usize, usize) -> Value = |c, t| chat_turn("pool", c, t);
    let (_, cached) = run_cached(&harness, "/v1/chat/completions", 8, 5, body).await;
    harness.settle().await;
    let dir = tempfile::tempdir().unwrap();
    let export = dir.path().join("journal.ndjson");
    std::fs::write(
        &export,
        admin_journal_all(&harness.client, &harness.base).await,
    )
    .unwrap();
    let replay = |format: quotaroute::replay::Format| {
        let args = quotaroute::replay::ReplayArgs {
            journal: Some(export.clone()),
            what_if: Some("affinity=off".into()),
            format,
            color: quotaroute::replay::ColorChoice::Never,
            ..Default::default()
        };
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let code = quotaroute::replay::run(&args, &mut out, &mut err, 0);
        let err = String::from_utf8(err).unwrap();
        assert_eq!(code, 0, "{err}");
        String::from_utf8(out).unwrap()
    };
    let report: Value = serde_json::from_str(&replay(quotaroute::replay::Format::Json)).unwrap();
    eprintln!("{report}");
    assert_eq!(report["requests"], 40, "{report}");
    assert_eq!(
        (
            &report["affinity_new"],
            &report["affinity_held"],
            &report["affinity_moved"]
        ),
        (&json!(8), &json!(32), &json!(0))
    );
    assert_eq!(report["later_turns_on_previous_connection"], 32);
    // Four equal keys: DRR alone puts about a quarter of the later turns where the last went.
    let without = report["later_turns_on_previous_connection_without"]
        .as_f64()
        .unwrap();
    assert!((4.0..=12.0).contains(&without), "{report}");
    assert_eq!(report["cached_input_tokens"], cached);
    let saved = report["cached_input_saved"].as_f64().unwrap();
    assert!(saved > 0.3 * cached as f64, "{report}");
    let connections = report["connections"].as_array().unwrap();
    let total = |field: &str| {
        connections
            .iter()
            .map(|c| c[field].as_u64().unwrap())
            .sum::<u64>()
    };
    assert_eq!(
        (total("with_affinity"), total("without_affinity")),
        (40, 40)
    );
    assert!(
        connections.iter().all(|c| c["without_affinity"] == 10),
        "{report}"
    );

    let text = replay(quotaroute::replay::Format::Text);
    assert!(text.starts_with("WHAT IF affinity=off"), "{text}");
    assert!(
        text.contains("later turns on the previous turn's connection: 32 of 32 with affinity"),
        "{text}"
    );
    assert!(text.contains("affinity saved ~"), "{text}");
}

/// `replay --what-if CONFIG` with the node's own config (affinity on, the default) re-routes a
/// recorded multi-turn journal exactly as the node routed it: every decision — held, new,
/// moved off a key that answered 429, and the group that followed its failed-over turn — is
/// taken again by the same `policy::selection::decide`, with the groups `route_decided`
/// names. With affinity off in CONFIG the same journal routes differently.
#[tokio::test]
async fn replay_what_if_with_the_nodes_config_routes_every_turn_as_the_node_did() {
    let harness = start().await;
    // Subscription accounts: no per-minute count headers. Those pace (§13) by the
    // millisecond, and a reading first seen reaches the combo's copy a moment after it is
    // journaled, so a decision in between is not reproducible to the turn; that race is the
    // live system's, not what this test is about.
    for id in ["k1", "k2", "k3", "k4", "h", "l"] {
        harness.mock.set_subscription_account(&upstream_key(id));
    }
    let body: fn(usize, usize) -> Value = |c, t| chat_turn("pool", c, t);
    let first = run(&harness, "/v1/chat/completions", 8, 3, body).await;
    // Conversation 0's key starts answering 429: its next turn fails over (and the group
    // follows), the conversations bound there move.
    harness.mock.set_rules(vec![
        Rule::rate_limited(600).for_key(upstream_key(&first[0][0]))
    ]);
    let later = run(&harness, "/v1/chat/completions", 8, 3, |c, t| {
        chat_turn("pool", c, t + 3)
    })
    .await;
    assert!(later.iter().flatten().all(|c| *c != first[0][0]));
    harness.settle().await;
    let events = harness.journal_events().await;
    let decided: Vec<&Value> = events
        .iter()
        .filter(|e| e["kind"] == "route_decided")
        .collect();
    assert_eq!(decided.len(), 48);
    assert!(
        decided.iter().all(|d| d["group"].is_u64()),
        "groups journaled"
    );
    let followed = events
        .iter()
        .filter(|e| e["kind"] == "affinity_bound" && e["reason"] == "failover")
        .count();
    assert!(followed >= 1, "a group followed its failed-over turn");

    let dir = tempfile::tempdir().unwrap();
    let export = dir.path().join("journal.ndjson");
    std::fs::write(
        &export,
        admin_journal_all(&harness.client, &harness.base).await,
    )
    .unwrap();
    let what_if = |config: std::path::PathBuf| {
        let args = quotaroute::replay::ReplayArgs {
            journal: Some(export.clone()),
            what_if: Some(config),
            format: quotaroute::replay::Format::Json,
            color: quotaroute::replay::ColorChoice::Never,
            ..Default::default()
        };
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let code = quotaroute::replay::run(&args, &mut out, &mut err, 0);
        assert_eq!(code, 0, "{}", String::from_utf8_lossy(&err));
        serde_json::from_slice::<Value>(&out).unwrap()
    };
    let report = what_if(harness.config_path.clone());
    assert_eq!(report["requests_replayed"], 48, "{report}");
    assert_eq!(report["decisions_differing"], 0, "{report}");

    let off = dir.path().join("affinity-off.toml");
    let text = std::fs::read_to_string(&harness.config_path).unwrap();
    std::fs::write(&off, format!("{text}\n[affinity]\nenabled = false\n")).unwrap();
    let report = what_if(off);
    assert!(
        report["decisions_differing"].as_u64().unwrap() > 0,
        "{report}"
    );
}
