//! Priming a window (behaviour §13) over real HTTP with the mock's plan accounts: at the prime
//! time exactly one smallest request reaches the idle connection (and its 5-hour window then
//! shows as running), none the locked one; the prime is journaled as `window_primed`, shown in
//! `/admin/state`, kept over a restart, and not sent again within its window. Policy time is
//! the test's (a `ManualClock` near the real time, so the mock's windows agree with it).

#![expect(
    clippy::too_many_lines,
    reason = "one scenario against the real node, in the order it happens"
)]

use std::sync::Arc;
use std::time::Duration;

use quotaroute::actors::{Clock, ManualClock, SystemClock};
use quotaroute::config;
use quotaroute::node::{NodeOptions, RunningNode};
use quotaroute_mock::{PlanWindow, Rule, SubscriptionPlan, FIVE_HOURS_MS, WEEK_MS};
use serde_json::Value;

use crate::support::{connection, upstream_key, Harness};

const MINUTE: u64 = 60_000;

/// Waits (real time, at most 10 s) until the node journaled `count` `window_primed` events.
async fn primes_journaled(harness: &Harness, count: usize) -> Vec<Value> {
    for _ in 0..200 {
        let primes: Vec<Value> = harness
            .journal_events()
            .await
            .into_iter()
            .filter(|event| event["kind"] == "window_primed")
            .collect();
        if primes.len() >= count {
            return primes;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!(
        "no {count} window_primed journaled; an-1 asked {} times; state: {}",
        asked(harness, "an-1"),
        harness.admin_get("/admin/state").await
    );
}

fn asked(harness: &Harness, connection: &str) -> u64 {
    harness.mock.stats().for_key(&upstream_key(connection))
}

#[tokio::test]
async fn the_idle_window_is_primed_once_at_its_time_and_the_locked_one_never() {
    let real_now = SystemClock.now_ms();
    // The prime time: the whole minute two minutes from now (UTC), every day.
    let prime_at_ms = (real_now / MINUTE + 2) * MINUTE;
    let minute_of_day = (prime_at_ms / MINUTE) % (24 * 60);
    let prime_at = format!("{:02}:{:02}", minute_of_day / 60, minute_of_day % 60);
    let clock = ManualClock::new(real_now);
    let prime_keys = format!(
        "prime_at = \"{prime_at}\"\nprime_days = [\"mon\", \"tue\", \"wed\", \"thu\", \"fri\", \"sat\", \"sun\"]\n"
    );
    let edit = move |text: String| {
        let mut text = text;
        for id in ["an-1", "an-2"] {
            text = text.replacen(
                &format!("id = \"{id}\"\n"),
                &format!("id = \"{id}\"\n{prime_keys}"),
                1,
            );
        }
        text + r#"
[[combos]]
name = "solo-an-2"
targets = [{ connection = "an-2", model = "claude-3-5-haiku" }]
"#
    };
    let mut harness = Harness::start_on_clock(edit, clock.clone()).await;
    let plan = SubscriptionPlan {
        five_hour: PlanWindow::fresh(FIVE_HOURS_MS, 100),
        weekly: PlanWindow::fresh(WEEK_MS, 1_000),
    };
    for id in ["an-1", "an-2"] {
        harness.mock.set_plan(&upstream_key(id), plan);
    }

    // an-2 is locked out: the upstream refused it for an hour.
    harness
        .mock
        .set_rules(vec![Rule::rate_limited(3_600).for_key(upstream_key("an-2"))]);
    let refused = harness.message("solo-an-2").await;
    assert_eq!(refused.status(), 429, "{}", refused.text().await.unwrap());
    harness.settle().await;
    let state = harness.admin_get("/admin/state").await;
    let locked = connection(&state, "an-2");
    assert!(
        !locked["lockouts"].as_array().unwrap().is_empty()
            || locked["cooldown_remaining_ms"].as_u64().unwrap() > 0,
        "{locked}"
    );
    // Before the prime time nothing is sent; the state says when the prime comes.
    assert_eq!(asked(&harness, "an-1"), 0);
    let an2_before = asked(&harness, "an-2");
    let primes = state["primes"].as_array().unwrap();
    let an1 = primes.iter().find(|p| p["connection"] == "an-1").unwrap();
    assert_eq!(an1["next_prime_at_ms"], prime_at_ms, "{an1}");
    assert_eq!(an1["last_primed_at_ms"], Value::Null, "{an1}");
    assert_eq!(an1["model"], "claude-3-5-haiku", "{an1}");

    // The prime time: one smallest request to an-1, none to the locked an-2.
    clock.advance(prime_at_ms - real_now);
    let primes = primes_journaled(&harness, 1).await;
    harness.settle().await;
    assert_eq!(primes.len(), 1, "{primes:?}");
    let primed = &primes[0];
    assert_eq!(primed["connection"], "an-1", "{primed}");
    assert_eq!(primed["window"], "5h");
    assert_eq!(primed["model"], "claude-3-5-haiku");
    assert_eq!(primed["at"], prime_at_ms);
    assert_eq!(asked(&harness, "an-1"), 1);
    assert_eq!(
        asked(&harness, "an-2"),
        an2_before,
        "the locked one got a prime"
    );
    let (path, body) = harness.mock.recent_bodies().last().cloned().unwrap();
    assert!(path.ends_with("/v1/messages"), "{path}");
    let body: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(body["max_tokens"], 1, "{body}");
    assert_eq!(body["model"], "claude-3-5-haiku", "{body}");
    // The prime's own request event: served by an-1, charged to no configured client.
    let events = harness.journal_events().await;
    let served = events
        .iter()
        .find(|event| {
            event["kind"] == "request_succeeded" && event["request_id"] == primed["request_id"]
        })
        .unwrap_or_else(|| panic!("no request_succeeded for the prime: {events:?}"));
    assert_eq!(served["connection"], "an-1");
    assert_eq!(served["period_spend_pusd"], Value::Null, "{served}");
    // Its window now runs (read from the answer's headers), and the state shows the prime.
    let state = harness.admin_get("/admin/state").await;
    let now_ms = clock.now_ms();
    let five_hour = connection(&state, "an-1")["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|bucket| bucket["window"] == "5h")
        .cloned()
        .unwrap_or_else(|| panic!("no 5h window: {state}"));
    assert!(
        five_hour["resets_at_ms"].as_u64().unwrap() > now_ms + 4 * 60 * MINUTE,
        "{five_hour}"
    );
    let an1 = state["primes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["connection"] == "an-1")
        .cloned()
        .unwrap();
    assert_eq!(an1["last_primed_at_ms"], now_ms, "{an1}");
    assert_eq!(an1["next_prime_at_ms"], prime_at_ms + 24 * 60 * MINUTE);

    // A minute later: nothing more (one per window).
    clock.advance(MINUTE);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(asked(&harness, "an-1"), 1);

    // After a restart on the same journal the prime is remembered and not sent again.
    harness.stop().await;
    let text = std::fs::read_to_string(&harness.config_path).unwrap();
    let node = RunningNode::start(
        config::load(&harness.config_path).unwrap(),
        NodeOptions {
            config_path: Some(harness.config_path.clone()),
            config_text: text,
            clock: clock.clone() as Arc<dyn Clock>,
            listen: None,
        },
    )
    .await
    .unwrap();
    harness.base = format!("http://{}", node.addr);
    harness.node = Some(node);
    let state = harness.admin_get("/admin/state").await;
    let an1 = state["primes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["connection"] == "an-1")
        .cloned()
        .unwrap();
    assert_eq!(an1["last_primed_at_ms"], now_ms, "{an1}");
    clock.advance(MINUTE);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(asked(&harness, "an-1"), 1);
    assert_eq!(primes_journaled(&harness, 1).await.len(), 1);
    harness.stop().await;
}
