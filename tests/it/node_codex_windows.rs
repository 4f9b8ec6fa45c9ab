//! Codex (ChatGPT account) windows over real HTTP (upstream-errors.md "Subscription windows"):
//! the `x-codex-*` headers of an answer become `5h`/`7d` buckets named by their minutes, a full
//! weekly window moves traffic off the account, and the other `x-codex-*` headers reach the
//! client untouched.

use serde_json::Value;

use crate::support::{connection, header, upstream_key, Harness};

/// An hour from now, as Codex's `-reset-at` (Unix seconds).
fn in_an_hour_unix_s() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 3_600
}

/// Codex's headers with the weekly window full, in `weekly_slot` (`primary` or `secondary`),
/// and the 5-hour window barely used in the other slot.
fn codex_headers(weekly_slot: &str, reset_at_s: u64) -> Vec<(String, String)> {
    let other = if weekly_slot == "primary" {
        "secondary"
    } else {
        "primary"
    };
    let pairs = [
        (format!("x-codex-{weekly_slot}-used-percent"), "100".into()),
        (
            format!("x-codex-{weekly_slot}-window-minutes"),
            "10080".into(),
        ),
        (
            format!("x-codex-{weekly_slot}-reset-at"),
            reset_at_s.to_string(),
        ),
        (format!("x-codex-{other}-used-percent"), "3".into()),
        (format!("x-codex-{other}-window-minutes"), "300".into()),
        (format!("x-codex-{other}-reset-after-seconds"), "600".into()),
        ("x-codex-plan-type".into(), "plus".into()),
        ("x-codex-credits-has-credits".into(), "False".into()),
    ];
    pairs.into_iter().collect()
}

fn bucket<'a>(buckets: &'a [Value], window: &str) -> Option<&'a Value> {
    buckets.iter().find(|b| b["window"] == window)
}

#[tokio::test]
async fn s6_codex_weekly_window_at_100_pct_saturates_7d_in_either_slot() {
    for weekly_slot in ["primary", "secondary"] {
        let harness = Harness::start().await;
        let reset_at_s = in_an_hour_unix_s();
        harness.mock.set_response_headers(
            &upstream_key("oa-1"),
            codex_headers(weekly_slot, reset_at_s),
        );
        // oa-1 (weight 2 of 4) serves within a few requests; its answer reaches the client
        // with Codex's plan headers untouched.
        let mut served = None;
        for _ in 0..8 {
            let response = harness.chat("team").await;
            assert_eq!(response.status(), 200);
            if header(&response, "x-quotaroute-connection") == "oa-1" {
                served = Some(response);
                break;
            }
        }
        let served = served.expect("oa-1 served one of 8");
        assert_eq!(
            header(&served, "x-codex-plan-type"),
            "plus",
            "{weekly_slot}"
        );
        assert_eq!(header(&served, "x-codex-credits-has-credits"), "False");
        assert!(!header(&served, "x-codex-primary-used-percent").is_empty());
        harness.settle().await;

        let state = harness.admin_get("/admin/state").await;
        let buckets = connection(&state, "oa-1")["buckets"]
            .as_array()
            .unwrap()
            .clone();
        let weekly = bucket(&buckets, "7d").unwrap_or_else(|| panic!("{weekly_slot}: {buckets:?}"));
        assert_eq!(weekly["saturated"], true, "{weekly_slot}: {weekly}");
        assert_eq!(weekly["used"], 10_000);
        assert_eq!(weekly["resets_at_ms"], reset_at_s * 1000, "{weekly}");
        let five_hours = bucket(&buckets, "5h").unwrap_or_else(|| panic!("{buckets:?}"));
        assert_eq!(five_hours["saturated"], false, "{five_hours}");
        assert_eq!(five_hours["used"], 300);

        // With room on oa-2 and oa-3, the saturated account is no longer chosen.
        for _ in 0..12 {
            let response = harness.chat("team").await;
            assert_eq!(response.status(), 200);
            assert_ne!(
                header(&response, "x-quotaroute-connection"),
                "oa-1",
                "{weekly_slot}"
            );
        }
    }
}
