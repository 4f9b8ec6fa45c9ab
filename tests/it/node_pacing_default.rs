//! Pacing's default knobs over real HTTP (behaviour §13 "Knobs of the rule", chosen by
//! measurement: exponent 1, wall clock, `pace_windows = "longest"`), and the journals written
//! before that default: a generation without a `pacing_rule` ran the rule before the knobs
//! (exponent 1, wall clock, every window), whatever this binary's default is, so an old journal
//! replays — and `--what-if` re-routes it — as it was written.

use serde_json::Value;

use crate::support::{header, standard_config, upstream_key, Harness};

/// The pair of subscription accounts the tests pace.
const PAIR: &str = "\n[[combos]]\nname = \"pair\"\ntargets = [\n  { connection = \"an-1\", model = \"claude-3-5-haiku\" },\n  { connection = \"an-2\", model = \"claude-3-5-haiku\" },\n]\n";

/// `[defaults.pacing]` with the rule before the knobs spelled out.
const ALL_WINDOWS: &str = "\n[defaults.pacing]\npace_windows = \"all\"\n";

/// Requests counted after both readings are learned.
const REQUESTS: u32 = 60;

/// Where the journal written before the default changed is kept.
fn fixture_ndjson() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/pacing/journal.ndjson")
}

fn unix_s_in(seconds: u64) -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + seconds
}

/// Anthropic's unified headers for a 5-hour and a weekly window: utilisation and reset in s.
fn unified(five_hour: (&str, u64), week: (&str, u64)) -> Vec<(String, String)> {
    vec![
        (
            "anthropic-ratelimit-unified-5h-utilization".into(),
            five_hour.0.into(),
        ),
        (
            "anthropic-ratelimit-unified-5h-reset".into(),
            unix_s_in(five_hour.1).to_string(),
        ),
        (
            "anthropic-ratelimit-unified-7d-utilization".into(),
            week.0.into(),
        ),
        (
            "anthropic-ratelimit-unified-7d-reset".into(),
            unix_s_in(week.1).to_string(),
        ),
        (
            "anthropic-ratelimit-unified-status".into(),
            "allowed".into(),
        ),
    ]
}

/// A node with the pair and `extra` whose two accounts read: an-1 a 5-hour window 90 % used
/// (resets in 4 h) and a week half used that resets in a day; an-2 both windows half used,
/// resetting in 4 h and in 6 days. Every window pacing: an-1's 5-hour window binds (pace
/// 0.1 / 0.8 = 0.125 against an-2's 0.58), so an-2 takes most turns. The longest window
/// only: an-1's week about to be lost paces it at 3.5, so an-1 takes most. Returns an-1's
/// share of [`REQUESTS`] and the harness.
async fn pair_share(extra: &str) -> (f64, Harness) {
    let harness = Harness::start_with(&format!("{PAIR}{extra}")).await;
    let hour = 3_600;
    for (connection, headers) in [
        ("an-1", unified(("0.9", 4 * hour), ("0.5", 24 * hour))),
        ("an-2", unified(("0.5", 4 * hour), ("0.5", 6 * 24 * hour))),
    ] {
        harness
            .mock
            .set_subscription_account(&upstream_key(connection));
        harness
            .mock
            .set_response_headers(&upstream_key(connection), headers);
    }
    // Both readings learned first (one answer each).
    for connection in ["an-1", "an-2"] {
        let mut served = false;
        for _ in 0..12 {
            let response = harness.message("pair").await;
            assert_eq!(response.status(), 200);
            if header(&response, "x-quotaroute-connection") == connection {
                served = true;
                break;
            }
        }
        assert!(served, "{connection} served none of 12");
        harness.settle().await;
    }
    let mut an_1 = 0;
    for _ in 0..REQUESTS {
        let response = harness.message("pair").await;
        assert_eq!(response.status(), 200);
        if header(&response, "x-quotaroute-connection") == "an-1" {
            an_1 += 1;
        }
    }
    harness.settle().await;
    (f64::from(an_1) / f64::from(REQUESTS), harness)
}

/// `replay` of `journal` (a sled directory or an ndjson file) in text.
fn replay_text(journal: &std::path::Path) -> String {
    let (code, text, err) = crate::replay_support::run(&crate::replay_support::args(journal));
    assert_eq!(code, 0, "{err}");
    text
}

/// `replay --what-if` of `journal` under `config`: the decisions that differ from the recorded.
fn decisions_differing(journal: &std::path::Path, config: &str, dir: &std::path::Path) -> u64 {
    let path = dir.join(format!("what-if-{}.toml", config.len()));
    std::fs::write(&path, config).unwrap();
    let (code, out, err) = crate::replay_support::run(&quotaroute::replay::ReplayArgs {
        what_if: Some(path),
        format: quotaroute::replay::Format::Json,
        ..crate::replay_support::args(journal)
    });
    assert_eq!(code, 0, "{err}");
    let report: Value = serde_json::from_str(out.trim()).unwrap();
    report["decisions_differing"].as_u64().unwrap()
}

/// The paced decisions of a journal's lines and its `pacing_rule`s.
fn paced_and_rules(events: &[Value]) -> (usize, Vec<&Value>) {
    let paced = events
        .iter()
        .filter(|e| e["kind"] == "route_decided" && e["combo"] == "pair")
        .filter(|e| e["paces"].as_array().is_some_and(|p| p.len() == 2))
        .count();
    let rules = events
        .iter()
        .filter(|e| e["kind"] == "pacing_rule")
        .collect();
    (paced, rules)
}

/// The default knobs pace by the week about to be lost (an-1 takes most turns), journal their
/// rule right after `config_loaded` (it is not the rule a journal without one ran), replay
/// explains a paced choice with them, and `--what-if` re-routes the journal unchanged under
/// the same config and differently with `pace_windows = "all"`.
#[tokio::test]
async fn the_default_paces_by_the_longest_window_and_journals_its_rule() {
    let (share, mut harness) = pair_share("").await;
    assert!(share >= 0.7, "an-1's share under the default: {share}");
    let events = harness.journal_events().await;
    harness.stop().await;
    let (paced, rules) = paced_and_rules(&events);
    assert!(paced >= REQUESTS as usize, "{paced} paced decisions");
    assert_eq!(rules.len(), 1, "one rule for the one generation");
    let rule = rules[0];
    let loaded = events
        .iter()
        .position(|e| e["kind"] == "config_loaded")
        .unwrap();
    assert_eq!(events[loaded + 1]["kind"], "pacing_rule", "{rule}");
    assert_eq!(rule["generation"], events[loaded]["generation"], "{rule}");
    assert_eq!(rule["exponent_pm"], 1_000, "{rule}");
    assert_eq!(rule["clock"], "wall", "{rule}");
    assert_eq!(rule["pace_windows"], "longest", "{rule}");
    let combos = rule["combos"].as_array().unwrap();
    assert!(
        combos.iter().all(|c| c["pace_windows"] == "longest"),
        "{rule}"
    );

    let journal = harness.dir.path().join("journal");
    let text = replay_text(&journal);
    assert!(
        text.contains("(rule: exponent 1, wall clock, longest windows)"),
        "{text}"
    );
    assert!(!text.contains("all windows"), "{text}");

    let config = std::fs::read_to_string(&harness.config_path).unwrap();
    let dir = harness.dir.path();
    assert_eq!(decisions_differing(&journal, &config, dir), 0);
    let all = decisions_differing(&journal, &format!("{config}{ALL_WINDOWS}"), dir);
    assert!(all >= 20, "every window pacing moves most turns: {all}");
}

/// `pace_windows = "all"` (with exponent 1 and the wall clock) is the rule before the knobs:
/// an-1's busy 5-hour window holds it back, and nothing is journaled for it.
#[tokio::test]
async fn pace_windows_all_is_the_rule_before_the_knobs_and_journals_no_rule() {
    let (share, mut harness) = pair_share(ALL_WINDOWS).await;
    assert!(share <= 0.35, "an-1's share with every window: {share}");
    let events = harness.journal_events().await;
    harness.stop().await;
    let (paced, rules) = paced_and_rules(&events);
    assert!(paced >= REQUESTS as usize, "{paced} paced decisions");
    assert!(rules.is_empty(), "{rules:?}");
    let text = replay_text(&harness.dir.path().join("journal"));
    assert!(
        text.contains("(rule: exponent 1, wall clock, all windows)"),
        "{text}"
    );
}

/// A journal written before the default changed (no `pacing_rule`: the pair paced by every
/// window, an-2 taking most turns) replays with the rule it ran — exponent 1, wall clock, all
/// windows — not this binary's default; `--what-if` with `pace_windows = "all"` re-routes it
/// as recorded, and with the default (the longest window) differently.
#[test]
fn a_journal_from_before_the_default_replays_under_every_window() {
    let fixture = fixture_ndjson();
    let lines = std::fs::read_to_string(&fixture).unwrap();
    let events: Vec<Value> = lines
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let (paced, rules) = paced_and_rules(&events);
    assert!(paced >= REQUESTS as usize, "{paced} paced decisions");
    assert!(
        rules.is_empty(),
        "the fixture predates the default: {rules:?}"
    );

    let text = replay_text(&fixture);
    assert!(
        text.contains("(rule: exponent 1, wall clock, all windows)"),
        "{text}"
    );
    assert!(!text.contains("longest windows"), "{text}");

    let dir = tempfile::tempdir().unwrap();
    let config = standard_config("http://127.0.0.1:9", &dir.path().join("journal"), PAIR);
    let recorded = decisions_differing(&fixture, &format!("{config}{ALL_WINDOWS}"), dir.path());
    assert_eq!(recorded, 0, "the rule it ran re-routes it as recorded");
    let default = decisions_differing(&fixture, &config, dir.path());
    assert!(default >= 20, "the default moves most turns: {default}");
}

/// Writes [`fixture_ndjson`]: the pair paced by every window, as the node wrote it before the
/// default changed (e723b12; `pace_windows = "all"` journals no rule, as no knob did then).
#[tokio::test]
#[ignore = "writes tests/fixtures/pacing: QR_REGEN_PACING=1 cargo test --test it node_pacing_default -- --ignored"]
async fn generate_the_journal_from_before_the_default() {
    assert!(
        std::env::var_os("QR_REGEN_PACING").is_some_and(|v| v == "1"),
        "set QR_REGEN_PACING=1 to regenerate the pacing fixture"
    );
    let (share, mut harness) = pair_share(ALL_WINDOWS).await;
    assert!(share <= 0.35, "an-1's share with every window: {share}");
    let events = harness.journal_events().await;
    harness.stop().await;
    let mut ndjson = String::new();
    for mut event in events {
        if event["kind"] == "node_started" {
            event["pid"] = 4242.into(); // stable across regenerations
        }
        ndjson.push_str(&event.to_string());
        ndjson.push('\n');
    }
    let path = fixture_ndjson();
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, ndjson).unwrap();
}
