//! Pacing seen over real HTTP (behaviour §13 "Forecast" and "Seen"): after a few answers whose
//! 5-hour window moves from 40 % to 50 % used, `/admin/state` shows the window's pace, when it
//! runs out at that rate, that it is not reserved, the one-target combo's forecast and next
//! reset, and the target's pace; `/metrics` shows the same as gauges.

use serde_json::Value;

use crate::support::{connection, header, upstream_key, Harness};

const SOLO_CLAUDE: &str = r#"
[[combos]]
name = "solo-claude"
targets = [{ connection = "an-1", model = "claude-3-5-haiku" }]
"#;

fn now_s() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// Anthropic's unified 5-hour window at `utilization`, resetting at `reset_s`.
fn window_headers(utilization: &str, reset_s: u64) -> Vec<(String, String)> {
    [
        (
            "anthropic-ratelimit-unified-5h-utilization",
            utilization.to_owned(),
        ),
        ("anthropic-ratelimit-unified-5h-reset", reset_s.to_string()),
        ("anthropic-ratelimit-unified-status", "allowed".to_owned()),
    ]
    .into_iter()
    .map(|(name, value)| (name.to_owned(), value))
    .collect()
}

async fn served(harness: &Harness) {
    let response = harness.message("solo-claude").await;
    assert_eq!(response.status(), 200);
    assert_eq!(header(&response, "x-quotaroute-connection"), "an-1");
}

fn metric(metrics: &str, line_start: &str) -> f64 {
    let line = metrics
        .lines()
        .find(|line| line.starts_with(line_start))
        .unwrap_or_else(|| panic!("no {line_start} in\n{metrics}"));
    let value = line.rsplit(' ').next().unwrap();
    if value == "+Inf" {
        f64::INFINITY
    } else {
        value.parse().unwrap()
    }
}

#[tokio::test]
async fn admin_state_and_metrics_show_paces_and_when_a_window_and_a_combo_run_out() {
    let harness = Harness::start_with(SOLO_CLAUDE).await;
    let key = upstream_key("an-1");
    harness.mock.set_subscription_account(&key);
    let reset_s = now_s() + 3_600;
    harness
        .mock
        .set_response_headers(&key, window_headers("0.4", reset_s));
    served(&harness).await;
    served(&harness).await;
    // 10 % more of the window used within a few requests: it runs out long before its reset.
    harness
        .mock
        .set_response_headers(&key, window_headers("0.5", reset_s));
    served(&harness).await;
    served(&harness).await;
    harness.settle().await;

    let state = harness.admin_get("/admin/state").await;
    let now_ms = now_s() * 1_000;
    let buckets = connection(&state, "an-1")["buckets"].clone();
    let five_hours = buckets
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["window"] == "5h")
        .cloned()
        .unwrap_or_else(|| panic!("{buckets}"));
    // Half left with a fifth of the window to run: pace 2.5.
    let pace = five_hours["pace"].as_f64().unwrap();
    assert!((2.4..=2.6).contains(&pace), "{five_hours}");
    assert_eq!(five_hours["reserved"], false, "{five_hours}");
    let runs_out = five_hours["runs_out_at_ms"].as_u64().unwrap();
    assert!(
        runs_out >= now_ms.saturating_sub(2_000) && runs_out < reset_s * 1_000,
        "{five_hours}"
    );

    let combo: Value = state["combos"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "solo-claude")
        .cloned()
        .unwrap();
    assert_eq!(combo["next_reset_at_ms"], reset_s * 1_000, "{combo}");
    let combo_runs_out = combo["runs_out_at_ms"].as_u64().unwrap();
    assert!(combo_runs_out < reset_s * 1_000, "{combo}");
    let target_pace = combo["targets"][0]["pace"].as_f64().unwrap();
    assert!((2.4..=2.6).contains(&target_pace), "{combo}");
    // A combo nothing asked of and with no readings lasts (null).
    let team = state["combos"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "team")
        .cloned()
        .unwrap();
    assert_eq!(team["runs_out_at_ms"], Value::Null, "{team}");
    assert_eq!(team["targets"][0]["pace"], 1.0, "{team}");

    let metrics = harness.admin_text("/metrics").await;
    let gauge = metric(
        &metrics,
        "quotaroute_target_pace{combo=\"solo-claude\",connection=\"an-1\",model=\"claude-3-5-haiku\"}",
    );
    assert!((2.4..=2.6).contains(&gauge), "{gauge}");
    let window_s = metric(
        &metrics,
        "quotaroute_window_runs_out_seconds{connection=\"an-1\",window=\"5h\"}",
    );
    assert!(window_s < 3_600.0, "{window_s}");
    let combo_s = metric(
        &metrics,
        "quotaroute_combo_runs_out_seconds{combo=\"solo-claude\"}",
    );
    assert!(combo_s < 3_600.0, "{combo_s}");
    assert_eq!(
        metric(
            &metrics,
            "quotaroute_combo_runs_out_seconds{combo=\"team\"}"
        ),
        f64::INFINITY
    );
}
