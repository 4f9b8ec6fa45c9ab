//! Issue 7 §1, behaviour §8: the node binary is killed with SIGKILL 20 times at random moments
//! while clients hammer it, and restarted on the same journal each time. It must open every
//! time, lose no flushed event, come back with exactly the state a replay of the journal gives,
//! and never forget a lockout learned more than `flush_every_ms` before the kill.

#![expect(
    clippy::too_many_lines,
    reason = "one crash scenario per test, step by step"
)]
use crate::reliability_support;
use crate::support;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use quotaroute::config;
use quotaroute::node::reload::digest;
use quotaroute_journal::envelope_to_json;
use quotaroute_mock::{Fault, Rule};
use reliability_support::*;
use serde_json::{json, Value};
use support::{free_port, standard_config, start_mock, upstream_key, ADMIN_KEY, CLIENT_KEY};

const LIVES: usize = 20;
const FLUSH_EVERY_MS: u64 = 10;
/// Scheduling slack on a loaded 2-core machine on top of `flush_every_ms`: the writer thread,
/// the recorder actor and this test all compete for the CPU.
const FLUSH_SLACK_MS: u64 = 40;

/// xorshift64*: reproducible "random" kill moments from a printed seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn between(&mut self, low: u64, high: u64) -> u64 {
        low + self.next() % (high - low + 1)
    }
}

/// One client hammering the node until `stop`: a mix of combo, implicit-model and streaming
/// requests. Errors (the node dies under it) are expected and only counted.
async fn hammer(
    base: String,
    client: reqwest::Client,
    life: usize,
    stop: Arc<AtomicBool>,
    sent: Arc<AtomicU64>,
) {
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        let (path, body) = match n % 4 {
            0 => (
                "/v1/chat/completions",
                json!({"model": "team", "messages": [{"role": "user", "content": "hi"}]}),
            ),
            1 => (
                "/v1/chat/completions",
                json!({"model": format!("openai/m-{life}"), "messages": [{"role": "user", "content": "hi"}]}),
            ),
            2 => (
                "/v1/chat/completions",
                json!({"model": "team", "stream": true, "messages": [{"role": "user", "content": "hi"}]}),
            ),
            _ => (
                "/v1/messages",
                json!({"model": "claude", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]}),
            ),
        };
        let result = client
            .post(format!("{base}{path}"))
            .bearer_auth(CLIENT_KEY)
            .json(&body)
            .send()
            .await;
        sent.fetch_add(1, Ordering::Relaxed);
        match result {
            Ok(response) => {
                let _ = response.bytes().await;
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(2)).await,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s8_twenty_kill_9_under_load_lose_nothing_flushed_and_replay_equals_live_state() {
    let (mock_base, mock) = start_mock().await;
    let dir = tempfile::tempdir().unwrap();
    let journal_path = dir.path().join("journal");
    let port = free_port();
    let text = standard_config(
        &mock_base,
        &journal_path,
        "\n[defaults.breaker]\ndedup_ms = 1\nreset_ms = 600000\n[defaults.cooldown]\nbase_ms = 1\nmax_ms = 1\n",
    )
    .replace("listen = \"127.0.0.1:0\"", &format!("listen = \"127.0.0.1:{port}\""))
    .replace("flush_every_ms = 10", &format!("flush_every_ms = {FLUSH_EVERY_MS}"));
    let config_path = dir.path().join("quotaroute.toml");
    std::fs::write(&config_path, &text).unwrap();
    let topology = config::topology::topology(&config::load(&config_path).unwrap(), &digest(&text));
    let base = format!("http://127.0.0.1:{port}");

    let seed = now_ms() | 1;
    let mut rng = Rng(seed);
    println!("seed {seed}");
    let started = Instant::now();
    let mut previous: Vec<String> = Vec::new();
    let mut witnessed_total = 0usize;
    let mut requests_total = 0u64;
    let mut replay_view = LearnedView::from_replay(&journal_path, &topology, now_ms());
    let mut lives_ms = Vec::new();

    for life in 0..LIVES {
        // A fresh client per life: pooled connections to the dead process are useless.
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(5))
            .build()
            .unwrap();
        // This life's faults: one key rate-limits this life's model for 10 min; from life 5 the
        // anthropic models fail (opening that breaker); in life 12 one key's auth fails.
        let mut rules = vec![Rule::rate_limited(600)
            .for_key(upstream_key(&format!("oa-{}", life % 3 + 1)))
            .for_model(format!("m-{life}"))];
        if life >= 5 {
            rules.push(Rule::always(Fault::Status(503)).for_model("claude-3-5-haiku"));
        }
        if life == 12 {
            rules.push(Rule::always(Fault::Status(401)).for_key(upstream_key("oa-3")));
        }
        mock.set_rules(rules);

        let mut node = spawn_node(&config_path, "warn", None);
        wait_ready(&client, &base).await;
        let born = Instant::now();

        // It opened on the journal the last life left: the state equals the replay.
        let live_state: Value = client
            .get(format!("{base}/admin/state"))
            .bearer_auth(ADMIN_KEY)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(
            LearnedView::from_json(&live_state),
            replay_view,
            "life {life}: restarted state differs from the journal's replay"
        );

        let stop = Arc::new(AtomicBool::new(false));
        let sent = Arc::new(AtomicU64::new(0));
        let clients: Vec<_> = (0..4)
            .map(|_| {
                tokio::spawn(hammer(
                    base.clone(),
                    client.clone(),
                    life,
                    stop.clone(),
                    sent.clone(),
                ))
            })
            .collect();

        // Kill at a random moment 30–400 ms into the life; meanwhile witness lockouts (seen in
        // the live state) and flushed events (`GET /admin/journal` flushes before it reads).
        let life_ms = rng.between(30, 400);
        lives_ms.push(life_ms);
        let kill_at = born + Duration::from_millis(life_ms);
        let mut witnessed: BTreeMap<(String, String), Instant> = BTreeMap::new();
        let mut flushed: BTreeMap<u64, String> = BTreeMap::new();
        let mut round = 0u32;
        while Instant::now() + Duration::from_millis(15) < kill_at {
            round += 1;
            if round % 3 == 1 {
                let since = flushed.keys().next_back().map_or(0, |s| s + 1);
                if let Ok(response) = client
                    .get(format!("{base}/admin/journal?since_seq={since}"))
                    .bearer_auth(ADMIN_KEY)
                    .send()
                    .await
                {
                    if let Ok(text) = response.text().await {
                        for line in text.lines() {
                            let value: Value = serde_json::from_str(line).unwrap();
                            flushed.insert(value["seq"].as_u64().unwrap(), line.to_string());
                        }
                    }
                }
            } else if let Ok(response) = client
                .get(format!("{base}/admin/lockouts"))
                .bearer_auth(ADMIN_KEY)
                .send()
                .await
            {
                let seen_at = Instant::now();
                if let Ok(value) = response.json::<Value>().await {
                    for lock in value["lockouts"].as_array().unwrap() {
                        let key = (
                            lock["connection"].as_str().unwrap().to_string(),
                            lock["model"].as_str().unwrap().to_string(),
                        );
                        witnessed.entry(key).or_insert(seen_at);
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        tokio::time::sleep_until(kill_at.into()).await;
        let killed_at = Instant::now();
        kill_9(&mut node);
        stop.store(true, Ordering::Relaxed);
        for task in clients {
            task.abort();
        }
        requests_total += sent.load(Ordering::Relaxed);

        // The dead node's journal: contiguous seqs, the previous life's events untouched, every
        // event it reported as flushed present and identical.
        let envelopes = journal_envelopes(&journal_path);
        let lines: Vec<String> = envelopes
            .iter()
            .map(|e| envelope_to_json(e).unwrap())
            .collect();
        for (index, envelope) in envelopes.iter().enumerate() {
            assert_eq!(
                envelope.seq,
                envelopes[0].seq + index as u64,
                "life {life}: seqs not contiguous"
            );
        }
        assert!(
            lines.len() >= previous.len(),
            "life {life}: the journal shrank ({} → {})",
            previous.len(),
            lines.len()
        );
        assert_eq!(
            &lines[..previous.len()],
            &previous[..],
            "life {life}: an earlier event changed or vanished"
        );
        let first_seq = envelopes[0].seq;
        for (seq, line) in &flushed {
            let stored = lines.get((seq - first_seq) as usize);
            assert_eq!(stored, Some(line), "life {life}: flushed event {seq} lost");
        }

        // Lockouts seen long enough before the kill are in the replay.
        replay_view = LearnedView::from_replay(&journal_path, &topology, now_ms());
        for ((connection, model), seen_at) in &witnessed {
            if *seen_at + Duration::from_millis(FLUSH_EVERY_MS + FLUSH_SLACK_MS) < killed_at {
                witnessed_total += 1;
                assert!(
                    replay_view
                        .lockouts
                        .iter()
                        .any(|(c, m, _)| c == connection && m == model),
                    "life {life}: lockout {connection}/{model} seen {:?} before the kill was forgotten",
                    killed_at - *seen_at
                );
            }
        }
        previous = lines;
    }

    // One last start: it opens, and equals the replay of the twentieth kill.
    let client = reqwest::Client::new();
    let mut node = spawn_node(&config_path, "warn", None);
    wait_ready(&client, &base).await;
    let live_state: Value = client
        .get(format!("{base}/admin/state"))
        .bearer_auth(ADMIN_KEY)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(LearnedView::from_json(&live_state), replay_view);
    sigterm(&node);
    assert!(node.wait().unwrap().success());

    // The scripted faults must actually have produced state, or the comparison proves little.
    assert!(replay_view.lockouts.len() >= 5, "{replay_view:?}");
    assert_eq!(replay_view.breakers["anthropic"], "OPEN", "{replay_view:?}");
    assert_eq!(
        replay_view.disabled.get("oa-3").map(String::as_str),
        Some("auth")
    );
    assert!(
        witnessed_total >= 5,
        "only {witnessed_total} lockouts witnessed before a kill"
    );
    println!(
        "{LIVES} kill -9s in {:?}: {} events in the journal, {requests_total} client requests, \
         {witnessed_total} witnessed lockouts kept, lives (ms) {lives_ms:?}, final {replay_view:?}",
        started.elapsed(),
        previous.len()
    );
}
