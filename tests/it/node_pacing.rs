//! Pacing's blocks over real HTTP (behaviour §13): a window an upstream reports spent — by any
//! of the three header families — or one within the owner's reserve gets no request until its
//! reset; with nothing else to serve, the client gets 429 with `Retry-After` to the reset and
//! `blocked` naming `quota_exhausted` / `reserved`; `clear?readings=1` forgets the readings.

use quotaroute_mock::RateBudget;
use serde_json::Value;

use crate::support::{connection, header, upstream_key, Harness};

fn unix_s_in(seconds: u64) -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + seconds
}

/// A combo of one target (`solo` on oa-1, `solo-claude` on an-1) besides the standard ones.
const SOLO: &str = r#"
[[combos]]
name = "solo"
targets = [{ connection = "oa-1", model = "gpt-4o-mini" }]

[[combos]]
name = "solo-claude"
targets = [{ connection = "an-1", model = "claude-3-5-haiku" }]
"#;

fn pairs(list: &[(&str, String)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(name, value)| ((*name).to_owned(), value.clone()))
        .collect()
}

/// Sends `model` requests until `connection` has served one (at most 12).
async fn until_served_by(harness: &Harness, model: &str, anthropic: bool, connection: &str) {
    for _ in 0..12 {
        let response = if anthropic {
            harness.message(model).await
        } else {
            harness.chat(model).await
        };
        assert_eq!(response.status(), 200);
        if header(&response, "x-quotaroute-connection") == connection {
            harness.settle().await;
            return;
        }
    }
    panic!("{connection} served none of 12");
}

/// The 429 a combo whose one target is blocked answers: its `Retry-After` (seconds) and the
/// one `blocked` entry.
async fn refused(harness: &Harness, model: &str, anthropic: bool) -> (u64, Value) {
    let response = if anthropic {
        harness.message(model).await
    } else {
        harness.chat(model).await
    };
    assert_eq!(response.status(), 429, "{model}");
    let retry_after: u64 = header(&response, "retry-after").parse().unwrap();
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "all_targets_locked", "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("every account of this model is spent or kept in reserve"),
        "{message}"
    );
    let blocked = body["error"]["blocked"].as_array().unwrap();
    assert_eq!(blocked.len(), 1, "{body}");
    (retry_after, blocked[0].clone())
}

/// After `served` has answered with a spent window, the other targets take every request, and
/// the one-target combo is refused until the reset.
async fn spent_gets_nothing(
    harness: &Harness,
    (combo, solo): (&str, &str),
    anthropic: bool,
    served: &str,
    reset_s: (u64, u64),
) {
    until_served_by(harness, combo, anthropic, served).await;
    for _ in 0..12 {
        let response = if anthropic {
            harness.message(combo).await
        } else {
            harness.chat(combo).await
        };
        assert_eq!(response.status(), 200);
        assert_ne!(header(&response, "x-quotaroute-connection"), served);
    }
    let (retry_after, blocked) = refused(harness, solo, anthropic).await;
    assert_eq!(blocked["connection"], served);
    assert_eq!(blocked["reason"], "quota_exhausted", "{blocked}");
    assert!(
        (reset_s.0..=reset_s.1).contains(&retry_after),
        "{retry_after} not in {reset_s:?}"
    );
}

#[tokio::test]
async fn a_codex_window_at_100_pct_is_spent_until_its_reset() {
    let harness = Harness::start_with(SOLO).await;
    harness.mock.set_response_headers(
        &upstream_key("oa-1"),
        pairs(&[
            ("x-codex-primary-used-percent", "100".into()),
            ("x-codex-primary-window-minutes", "300".into()),
            ("x-codex-primary-reset-at", unix_s_in(3_600).to_string()),
        ]),
    );
    spent_gets_nothing(&harness, ("team", "solo"), false, "oa-1", (3_590, 3_601)).await;
}

#[tokio::test]
async fn an_openai_window_with_nothing_remaining_is_spent_until_its_reset() {
    let harness = Harness::start_with(SOLO).await;
    // One request a window: after it, `x-ratelimit-remaining-requests: 0` until the reset,
    // within the minute a per-minute window lasts (a reset further away is cut to that minute:
    // `node_header_resets`).
    harness.mock.set_budget(
        &upstream_key("oa-1"),
        RateBudget {
            requests_limit: 1,
            tokens_limit: 1_000_000,
            reset_ms: 50_000,
        },
    );
    spent_gets_nothing(&harness, ("team", "solo"), false, "oa-1", (35, 51)).await;
}

#[tokio::test]
async fn an_anthropic_subscription_rejected_is_spent_and_clear_readings_forgets_it() {
    let harness = Harness::start_with(SOLO).await;
    harness.mock.set_response_headers(
        &upstream_key("an-1"),
        pairs(&[
            ("anthropic-ratelimit-unified-status", "rejected".into()),
            (
                "anthropic-ratelimit-unified-representative-claim",
                "five_hour".into(),
            ),
            (
                "anthropic-ratelimit-unified-reset",
                unix_s_in(1_800).to_string(),
            ),
            ("anthropic-ratelimit-unified-5h-utilization", "0.42".into()),
        ]),
    );
    spent_gets_nothing(
        &harness,
        ("claude", "solo-claude"),
        true,
        "an-1",
        (1_790, 1_801),
    )
    .await;
    let state = harness.admin_get("/admin/state").await;
    let buckets = connection(&state, "an-1")["buckets"].clone();
    let five_hours = buckets
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["window"] == "5h")
        .cloned()
        .unwrap_or_else(|| panic!("{buckets}"));
    assert_eq!(five_hours["used"], five_hours["limit"], "{five_hours}");

    // The operator forgets the readings: the account serves again (and learns it is spent
    // from that answer, so the next request is refused again).
    harness
        .mock
        .set_response_headers(&upstream_key("an-1"), Vec::new());
    let cleared = harness
        .admin_post("/admin/connections/an-1/clear?readings=1")
        .await;
    assert_eq!(cleared.status(), 200);
    let cleared: Value = cleared.json().await.unwrap();
    // The 5-hour window and the mock's per-minute count windows.
    assert!(
        cleared["readings_forgotten"].as_u64().unwrap() >= 1,
        "{cleared}"
    );
    let state = harness.admin_get("/admin/state").await;
    let buckets = connection(&state, "an-1")["buckets"].clone();
    assert!(
        !buckets
            .as_array()
            .unwrap()
            .iter()
            .any(|b| b["window"] == "5h"),
        "{buckets}"
    );
    let response = harness.message("solo-claude").await;
    assert_eq!(response.status(), 200);
    let bad = harness
        .admin_post("/admin/connections/an-1/clear?readings=yes")
        .await;
    assert_eq!(bad.status(), 400);
    let events = harness.journal_events().await;
    assert!(
        events
            .iter()
            .any(|e| e["kind"] == "admin_action" && e["action"] == "clear_readings"),
        "no clear_readings admin_action"
    );
}

#[tokio::test]
async fn a_window_within_its_reserve_is_kept_for_the_owner() {
    let harness = Harness::start_editing(|text| {
        let text = text.replace(
            "id = \"oa-1\"\nprovider = \"openai\"",
            "id = \"oa-1\"\nprovider = \"openai\"\nreserve = { \"5h\" = 50 }",
        );
        text + SOLO
    })
    .await;
    harness.mock.set_response_headers(
        &upstream_key("oa-1"),
        pairs(&[
            ("x-codex-primary-used-percent", "60".into()),
            ("x-codex-primary-window-minutes", "300".into()),
            ("x-codex-primary-reset-after-seconds", "7200".into()),
        ]),
    );
    until_served_by(&harness, "team", false, "oa-1").await;
    for _ in 0..12 {
        let response = harness.chat("team").await;
        assert_eq!(response.status(), 200);
        assert_ne!(header(&response, "x-quotaroute-connection"), "oa-1");
    }
    let (retry_after, blocked) = refused(&harness, "solo", false).await;
    assert_eq!(blocked["reason"], "reserved", "{blocked}");
    assert!((7_190..=7_201).contains(&retry_after), "{retry_after}");
}

#[test]
fn check_names_a_bad_reserve() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("bad.toml");
    let text = crate::support::standard_config("http://127.0.0.1:9", dir.path(), "").replace(
        "id = \"oa-2\"\nprovider = \"openai\"",
        "id = \"oa-2\"\nprovider = \"openai\"\nreserve_pct = 150\nreserve = { \"fortnight\" = 5 }",
    );
    std::fs::write(&config, text).unwrap();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_quotaroute"))
        .args(["check", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("connections[1].reserve_pct: must be a percentage from 0 to 100"),
        "{stderr}"
    );
    assert!(
        stderr.contains("connections[1].reserve.fortnight"),
        "{stderr}"
    );
}

/// Two equal accounts whose 5-hour windows are half used, one resetting in 1 h and the other
/// in 4 h (Anthropic's unified headers on every answer): paced, they split 80 : 20 over 200
/// requests (§13: paces 2.5 and 0.625); with `pacing = false` on the combo, 50 : 50.
async fn split_of_two_half_used_windows(pacing: bool) -> f64 {
    let (share, _) = split_with(&pacing.to_string(), pacing).await;
    share
}

/// The pair's split with the combo's `pacing` set to `pacing_toml` (`false`, `true`, or an
/// inline table of knobs), and the harness.
async fn split_with(pacing_toml: &str, paced: bool) -> (f64, Harness) {
    let combo = format!(
        "\n[[combos]]\nname = \"pair\"\npacing = {pacing_toml}\ntargets = [\n  {{ connection = \"an-1\", model = \"claude-3-5-haiku\" }},\n  {{ connection = \"an-2\", model = \"claude-3-5-haiku\" }},\n]\n"
    );
    let harness = Harness::start_with(&combo).await;
    for (connection, reset_s) in [("an-1", 3_600), ("an-2", 4 * 3_600)] {
        // Subscription accounts: their windows only, no per-minute counts (which would pace
        // both near 1, the smallest pace binding).
        harness
            .mock
            .set_subscription_account(&upstream_key(connection));
        harness.mock.set_response_headers(
            &upstream_key(connection),
            pairs(&[
                ("anthropic-ratelimit-unified-5h-utilization", "0.5".into()),
                (
                    "anthropic-ratelimit-unified-5h-reset",
                    unix_s_in(reset_s).to_string(),
                ),
                ("anthropic-ratelimit-unified-status", "allowed".into()),
            ]),
        );
    }
    // Both readings learned first (one answer each), then 200 requests counted.
    until_served_by(&harness, "pair", true, "an-1").await;
    until_served_by(&harness, "pair", true, "an-2").await;
    let mut soon = 0;
    for _ in 0..200 {
        let response = harness.message("pair").await;
        assert_eq!(response.status(), 200);
        if header(&response, "x-quotaroute-connection") == "an-1" {
            soon += 1;
        }
    }
    if paced {
        // The decision says why: each candidate's pace and binding window.
        harness.settle().await;
        let events = harness.journal_events().await;
        let decided = events
            .iter()
            .rev()
            .find(|e| e["kind"] == "route_decided" && e["combo"] == "pair")
            .unwrap();
        let paces = decided["paces"].as_array().unwrap();
        assert_eq!(paces.len(), 2, "{decided}");
        assert!(paces.iter().all(|p| p["window"] == "5h"), "{decided}");
    }
    (f64::from(soon) / 200.0, harness)
}

/// Behaviour §13 "What it guarantees" with `exponent = 2` on the combo: the same two windows
/// (paces 2.5 and 0.625) split 2.5² : 0.625² = 94 : 6 (± 5) over 200 requests; the knobs are
/// journaled (`pacing_rule`), replay explains a paced choice with them, and `--what-if` with
/// exponent 1 re-routes the same journal (80 : 20 differs from what was recorded), while the
/// recorded knobs re-route it unchanged.
#[tokio::test]
async fn exponent_two_splits_94_6_and_replay_names_the_knobs() {
    let (share, mut harness) = split_with("{ exponent = 2 }", true).await;
    assert!((0.89..=0.99).contains(&share), "exponent 2 share {share}");
    let events = harness.journal_events().await;
    harness.stop().await;
    let rule = events
        .iter()
        .find(|e| e["kind"] == "pacing_rule")
        .expect("the knobs are journaled");
    assert_eq!(rule["exponent_pm"], 1_000, "{rule}");
    let combos = rule["combos"].as_array().unwrap();
    let pair = combos.iter().find(|c| c["combo"] == "pair").unwrap();
    assert_eq!(pair["exponent_pm"], 2_000, "{rule}");
    assert_eq!(pair["clock"], "wall", "{rule}");
    // Its other knobs are the defaults' (the longest window: here the 5-hour one, alone).
    assert_eq!(pair["pace_windows"], "longest", "{rule}");
    // The harness's other combos run the defaults.
    assert!(
        combos
            .iter()
            .filter(|c| c["combo"] != "pair")
            .all(|c| c["exponent_pm"] == 1_000 && c["pace_windows"] == "longest"),
        "{rule}"
    );

    let journal = harness.dir.path().join("journal");
    let (code, text, err) = crate::replay_support::run(&crate::replay_support::args(&journal));
    assert_eq!(code, 0, "{err}");
    assert!(
        text.contains("(rule: exponent 2, wall clock, longest windows)"),
        "{text}"
    );

    let config = std::fs::read_to_string(&harness.config_path).unwrap();
    let what_if = |exponent: &str| {
        let path = harness.dir.path().join(format!("what-if-{exponent}.toml"));
        let text = config.replace("exponent = 2", &format!("exponent = {exponent}"));
        assert_eq!(exponent == "2", text == config);
        std::fs::write(&path, text).unwrap();
        let (code, out, err) = crate::replay_support::run(&quotaroute::replay::ReplayArgs {
            what_if: Some(path),
            format: quotaroute::replay::Format::Json,
            ..crate::replay_support::args(&journal)
        });
        assert_eq!(code, 0, "{err}");
        let report: Value = serde_json::from_str(out.trim()).unwrap();
        report["decisions_differing"].as_u64().unwrap()
    };
    assert_eq!(
        what_if("2"),
        0,
        "the recorded knobs re-route it as recorded"
    );
    assert!(
        what_if("1") >= 15,
        "exponent 1 moves about 14 % of the turns"
    );
}

/// `[defaults.pacing]` and `[combos.pacing]` knobs are checked at load: each wrong value is
/// named with its key.
#[test]
fn check_names_bad_pacing_knobs() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("bad.toml");
    let text = crate::support::standard_config("http://127.0.0.1:9", dir.path(), "")
        + "\n[defaults.pacing]\nexponent = 0.5\nclock = \"sundial\"\npace_windows = \"some\"\n"
        + "\n[[combos]]\nname = \"pair\"\npacing = { exponent = 9, clock = \"demand\" }\ntargets = [{ connection = \"oa-1\", model = \"gpt-4o-mini\" }]\n";
    std::fs::write(&config, text).unwrap();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_quotaroute"))
        .args(["check", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    for expected in [
        "defaults.pacing.exponent: must be from 1 to 8",
        "defaults.pacing.clock: `sundial` is not one of `wall`, `demand`",
        "defaults.pacing.pace_windows: `some` is not one of `all`, `longest`",
        "combos.pair.pacing.exponent: must be from 1 to 8",
    ] {
        assert!(stderr.contains(expected), "{expected}: {stderr}");
    }
}

#[tokio::test]
async fn two_half_used_windows_resetting_in_1h_and_4h_split_80_20_when_paced() {
    let paced = split_of_two_half_used_windows(true).await;
    assert!((0.75..=0.85).contains(&paced), "paced share {paced}");
    let unpaced = split_of_two_half_used_windows(false).await;
    assert!((0.45..=0.55).contains(&unpaced), "unpaced share {unpaced}");
}

/// `replay --summary` names the share of each window left unused at each reset it saw: a
/// 5-hour window last read 30 % used before its reset, then the next window read 5 % used and
/// still open when the journal ends (behaviour §13).
#[tokio::test]
async fn replay_summary_reports_the_share_left_unused_at_each_reset() {
    let start_ms = unix_s_in(0) * 1_000;
    let clock = quotaroute::actors::ManualClock::new(start_ms);
    let mut harness = Harness::start_on_clock(|text| text + SOLO, clock.clone()).await;
    let five_hours = |utilization: &str, reset_s: u64| {
        pairs(&[
            ("anthropic-ratelimit-unified-status", "allowed".into()),
            (
                "anthropic-ratelimit-unified-5h-utilization",
                utilization.into(),
            ),
            ("anthropic-ratelimit-unified-5h-reset", reset_s.to_string()),
        ])
    };
    let key = upstream_key("an-1");
    harness
        .mock
        .set_response_headers(&key, five_hours("0.30", start_ms / 1_000 + 3_600));
    assert_eq!(harness.message("solo-claude").await.status(), 200);
    harness.settle().await;
    clock.advance(2 * 3_600_000);
    harness.mock.set_response_headers(
        &key,
        five_hours("0.05", start_ms / 1_000 + 2 * 3_600 + 5 * 3_600),
    );
    assert_eq!(harness.message("solo-claude").await.status(), 200);
    harness.settle().await;
    harness.stop().await;

    let mut args = crate::replay_support::args(&harness.dir.path().join("journal"));
    args.summary = true;
    args.format = quotaroute::replay::Format::Json;
    let (code, out, err) = crate::replay_support::run(&args);
    assert_eq!(code, 0, "{err}");
    let summary: Value = serde_json::from_str(&out).unwrap();
    let resets = summary["window_resets"].as_array().unwrap();
    assert_eq!(resets.len(), 1, "{summary}");
    assert_eq!(resets[0]["connection"], "an-1");
    assert_eq!(resets[0]["window"], "5h");
    assert_eq!(resets[0]["unused_pct"], 70.0, "{}", resets[0]);
    assert_eq!(summary["unused_at_resets_pct"], 70.0);

    args.format = quotaroute::replay::Format::Text;
    let (_, text, _) = crate::replay_support::run(&args);
    assert!(
        text.contains("unused at resets: 70.0% of each window on average (1 resets)"),
        "{text}"
    );
}

/// The mock's plan accounts report their rolling windows as the providers do (Anthropic's
/// unified headers on `/v1/messages`, Codex's on `/v1/chat/completions`): the request that
/// uses a 5-hour window up is the last the account gets; the router refuses the next one
/// itself, naming the spent window and its reset, and the upstream sees no request to a
/// spent window.
#[tokio::test]
async fn a_plan_account_used_up_gets_no_request_to_its_spent_window() {
    use quotaroute_mock::{PlanWindow, SubscriptionPlan, FIVE_HOURS_MS, WEEK_MS};
    let harness = Harness::start_with(SOLO).await;
    let plan = SubscriptionPlan {
        five_hour: PlanWindow::fresh(FIVE_HOURS_MS, 3),
        weekly: PlanWindow::fresh(WEEK_MS, 100),
    };
    for (connection, combo, anthropic) in [("an-1", "solo-claude", true), ("oa-1", "solo", false)] {
        harness.mock.set_plan(&upstream_key(connection), plan);
        for _ in 0..3 {
            let response = if anthropic {
                harness.message(combo).await
            } else {
                harness.chat(combo).await
            };
            assert_eq!(response.status(), 200, "{connection}");
        }
        harness.settle().await;
        let (retry_after, blocked) = refused(&harness, combo, anthropic).await;
        assert_eq!(blocked["connection"], connection);
        assert_eq!(blocked["reason"], "quota_exhausted", "{blocked}");
        assert!(
            (5 * 3_600 - 60..=5 * 3_600 + 1).contains(&retry_after),
            "{retry_after}"
        );
        let used = harness.mock.plan(&upstream_key(connection)).unwrap();
        assert_eq!(used.five_hour.used, 3, "{connection}: {used:?}");
        assert_eq!(
            harness.mock.stats().per_key[&upstream_key(connection)],
            3,
            "{connection} got a request to its spent window"
        );
    }
}
