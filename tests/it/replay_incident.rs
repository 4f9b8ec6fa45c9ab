//! `replay` on the checked-in incident fixture: golden timeline, summary and state-at; JSON that
//! parses; filters; the SVG's lanes; what-if with a higher breaker threshold; damaged tails; a
//! journal held by a running node. Regenerate goldens with QR_REGEN_INCIDENT=1.

use crate::replay_support;

use quotaroute::journal::{envelope_from_json, Journal};
use quotaroute::replay::{Format, ReplayArgs};
use replay_support::*;

#[test]
fn item1_timeline_text_matches_the_golden() {
    let dir = incident_journal();
    let (code, out, err) = run(&args(&dir.path().join("journal")));
    assert_eq!(code, 0, "{err}");
    assert!(err.is_empty(), "{err}");
    golden("timeline.txt", &out);
}

#[test]
fn item2_summary_matches_the_golden() {
    let dir = incident_journal();
    let (code, out, err) = run(&ReplayArgs {
        summary: true,
        ..args(&dir.path().join("journal"))
    });
    assert_eq!(code, 0, "{err}");
    golden("summary.txt", &out);
    // The storm and the flapping are both visible.
    assert!(
        out.contains("ok2: top errors: 429 rate_limit_exceeded"),
        "{out}"
    );
    assert!(out.contains("anthropic"), "{out}");
}

#[test]
fn item3_state_at_matches_the_golden() {
    let dir = incident_journal();
    let (code, out, err) = run(&ReplayArgs {
        state_at: Some("2026-11-29T14:08:45Z".into()),
        ..args(&dir.path().join("journal"))
    });
    assert_eq!(code, 0, "{err}");
    golden("state_at.txt", &out);
}

/// The fixture is an export of journal schema 2; imported, it is stored in today's schema:
/// schema 3 appended `client` to `route_decided`, `request_failed` and `request_succeeded`,
/// and `cost_usd` to `request_succeeded`; schema 4 appended `translated`, `usage_estimated`,
/// `items_left_out`, a stored response's `client`, and `group` and `paces` to
/// `route_decided` (unknown for those records: `null`, `false`, 0, empty). Everything else is
/// byte for byte the same.
fn as_today(export: &str) -> String {
    assert!(
        export.lines().all(|l| l.contains(r#""schema_version":2,"#)),
        "the incident fixture is a schema-2 export"
    );
    let today = format!(
        r#""schema_version":{},"#,
        quotaroute::journal::SCHEMA_VERSION
    );
    export
        .lines()
        .map(|line| {
            let line = line.replacen(r#""schema_version":2,"#, &today, 1);
            // The fields schemas 3, 4 and 5 appended, at their "not so" values.
            let added = if line.contains(r#""kind":"request_succeeded""#) {
                r#","client":null,"cost_usd":null,"translated":null,"usage_estimated":false,"items_left_out":0,"period_spend_pusd":null,"period_start_ms":null"#
            } else if line.contains(r#""kind":"request_failed""#) {
                r#","client":null,"translated":null"#
            } else if line.contains(r#""kind":"route_decided""#) {
                r#","client":null,"group":null,"paces":[]"#
            } else if line.contains(r#""kind":"response_bound""#) {
                r#","client":null"#
            } else {
                ""
            };
            let body = line.strip_suffix('}').unwrap();
            format!("{body}{added}}}\n")
        })
        .collect()
}

#[test]
fn item1_json_output_is_ndjson_with_every_event() {
    let dir = incident_journal();
    let (code, out, _) = run(&ReplayArgs {
        format: Format::Json,
        ..args(&dir.path().join("journal"))
    });
    assert_eq!(code, 0);
    let fixture = std::fs::read_to_string(fixture_ndjson()).unwrap();
    assert_eq!(
        out,
        as_today(&fixture),
        "replay --format json reproduces the export byte for byte, in today's schema"
    );
    for line in out.lines() {
        envelope_from_json(line).unwrap();
    }
}

#[test]
fn item1_filters_select_kind_provider_and_time() {
    let dir = incident_journal();
    let (code, out, _) = run(&ReplayArgs {
        format: Format::Json,
        kind: Some("request_failed,breaker_transition".into()),
        provider: Some("anthropic".into()),
        since: Some("2026-11-29T14:09:00Z".into()),
        until: Some("2026-11-29T14:12:00Z".into()),
        ..args(&dir.path().join("journal"))
    });
    assert_eq!(code, 0);
    let envelopes: Vec<_> = out
        .lines()
        .map(|l| envelope_from_json(l).unwrap())
        .collect();
    assert!(envelopes.len() >= 5, "{out}");
    for e in &envelopes {
        assert!(["request_failed", "breaker_transition"].contains(&e.event.kind()));
        assert_eq!(e.event.provider(), Some("anthropic"));
        assert!(e.at_ms >= T0 + 540_000 && e.at_ms < T0 + 720_000);
    }
    // Relative: "1h" before now (= T0 + 1 h) is T0, so everything from the start is kept...
    let (_, all, _) = run(&ReplayArgs {
        since: Some("1h".into()),
        connection: Some("ok2".into()),
        model: Some("gpt-4o".into()),
        ..args(&dir.path().join("journal"))
    });
    assert!(all.lines().count() > 10);
    assert!(all.lines().all(|l| l.contains("ok2/gpt-4o")), "{all}");
    // ...and "30m" ago is after the incident: nothing.
    let (_, none, _) = run(&ReplayArgs {
        since: Some("30m".into()),
        ..args(&dir.path().join("journal"))
    });
    assert!(none.is_empty(), "{none}");
}

#[test]
fn item4_why_a_request_did_not_go_to_a_key_is_one_command() {
    let dir = incident_journal();
    let (_, out, _) = run(&ReplayArgs {
        kind: Some("route_decided".into()),
        connection: Some("ok2".into()),
        since: Some("2026-11-29T14:03:45Z".into()),
        until: Some("2026-11-29T14:04:05Z".into()),
        ..args(&dir.path().join("journal"))
    });
    assert!(
        out.lines()
            .any(|l| l.contains("skipped: ok2/gpt-4o rate_limited")),
        "{out}"
    );
}

#[test]
fn bad_flags_are_usage_errors() {
    let dir = incident_journal();
    for bad in [
        ReplayArgs {
            kind: Some("nope".into()),
            ..args(&dir.path().join("journal"))
        },
        ReplayArgs {
            state_at: Some("yesterday".into()),
            ..args(&dir.path().join("journal"))
        },
    ] {
        let (code, _, err) = run(&bad);
        assert_eq!(code, 2, "{err}");
    }
    let (code, _, err) = run(&args(&dir.path().join("missing")));
    assert_eq!(code, 1);
    assert!(err.contains("does not exist"), "{err}");
}

#[test]
fn item5_svg_parses_and_has_one_lane_per_connection() {
    let dir = incident_journal();
    let svg_path = dir.path().join("incident.svg");
    let (code, out, err) = run(&ReplayArgs {
        svg: Some(svg_path.clone()),
        ..args(&dir.path().join("journal"))
    });
    assert_eq!(code, 0, "{err}");
    assert!(out.is_empty());
    let text = std::fs::read_to_string(&svg_path).unwrap();
    if regenerating() {
        std::fs::write(fixture_dir().join("incident.svg"), &text).unwrap();
    }
    let document = roxmltree::Document::parse(&text).unwrap();
    let lanes: Vec<&str> = document
        .descendants()
        .filter(|n| n.attribute("class") == Some("lane"))
        .filter_map(|n| n.attribute("data-connection"))
        .collect();
    assert_eq!(lanes, ["ok1", "ok2", "ok3", "an1", "an2", "an3"]);
    let titles: Vec<String> = document
        .descendants()
        .filter(|n| n.has_tag_name("title"))
        .filter_map(|n| n.text().map(str::to_string))
        .collect();
    assert!(titles
        .iter()
        .any(|t| t.starts_with("anthropic breaker OPEN")));
    assert!(titles.iter().any(|t| t.starts_with("ok2/gpt-4o locked")));
    assert!(titles.iter().any(|t| t.starts_with("an1 cooling")));
}

const WHAT_IF_CONFIG: &str = r#"
[server]
api_keys = ["sk-qr-test"]

[defaults.breaker]
open_at = 40
degrade_at = 30

[[providers]]
name = "openai"
format = "openai"
base_url = "http://127.0.0.1:9/v1"

[[providers]]
name = "anthropic"
format = "anthropic"
base_url = "http://127.0.0.1:9"

[[connections]]
id = "ok1"
provider = "openai"
api_key = "sk-1"
"#;

#[test]
fn item6_what_if_with_a_higher_breaker_threshold_reports_fewer_openings() {
    let dir = incident_journal();
    let config = dir.path().join("what-if.toml");
    std::fs::write(&config, WHAT_IF_CONFIG).unwrap();
    let (code, out, err) = run(&ReplayArgs {
        what_if: Some(config.clone()),
        format: Format::Json,
        ..args(&dir.path().join("journal"))
    });
    assert_eq!(code, 0, "{err}");
    let report: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    let row = |measure: &str, subject: &str| {
        report["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["measure"] == measure && r["subject"] == subject)
            .cloned()
            .unwrap()
    };
    let openings = row("breaker openings", "anthropic");
    assert_eq!(openings["recorded"], 4);
    assert!(
        openings["what_if"].as_u64().unwrap() < 4,
        "{}",
        serde_json::to_string_pretty(&report).unwrap()
    );
    let unservable = row("requests with nothing to serve", "");
    assert!(unservable["what_if"].as_u64().unwrap() < unservable["recorded"].as_u64().unwrap());

    let (code, text, _) = run(&ReplayArgs {
        what_if: Some(config),
        ..args(&dir.path().join("journal"))
    });
    assert_eq!(code, 0);
    let text = text.replace(&dir.path().display().to_string(), "<tmp>");
    golden("what_if.txt", &text);
}

#[test]
fn item6_what_if_with_the_default_settings_reproduces_the_recorded_breaker_without_its_keys() {
    let dir = incident_journal();
    let config = dir.path().join("same.toml");
    // An operator's config keeps its keys in the environment; replay never needs them.
    let same = WHAT_IF_CONFIG
        .replace("open_at = 40\ndegrade_at = 30\n", "")
        .replace(
            "api_key = \"sk-1\"",
            "api_key_env = \"QUOTAROUTE_TEST_KEY_NEVER_SET\"",
        );
    assert!(same.contains("api_key_env"));
    std::fs::write(&config, same).unwrap();
    let (code, out, err) = run(&ReplayArgs {
        what_if: Some(config),
        format: Format::Json,
        ..args(&dir.path().join("journal"))
    });
    assert_eq!(code, 0, "{err}");
    let report: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    for row in report["rows"].as_array().unwrap() {
        if row["measure"] == "breaker openings" {
            assert_eq!(row["recorded"], row["what_if"], "{row}");
        }
    }
}

#[test]
fn item8_a_garbage_tail_replays_what_is_readable_and_reports_the_rest() {
    let dir = incident_journal();
    let path = dir.path().join("journal");
    {
        let mut journal = quotaroute::replay::source::open_sled(&path).unwrap();
        let last = journal.last_seq().unwrap().unwrap();
        journal
            .put_raw(
                "events",
                &(last + 1).to_be_bytes(),
                b"\x01garbage, torn mid-write",
            )
            .unwrap();
        journal
            .put_raw("events", &(last + 2).to_be_bytes(), &[0xff; 3])
            .unwrap();
        journal.flush().unwrap();
    }
    let (code, out, err) = run(&ReplayArgs {
        format: Format::Json,
        ..args(&path)
    });
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.lines().count(), 828);
    assert!(
        err.starts_with("2 damaged records skipped (seq 829, seq 830)"),
        "{err}"
    );
}

#[test]
fn item7_a_journal_held_by_a_running_node_is_a_clear_error() {
    let dir = incident_journal();
    let path = dir.path().join("journal");
    let _held = quotaroute::replay::source::open_sled(&path).unwrap();
    let (code, out, err) = run(&args(&path));
    assert_eq!(code, 1);
    assert!(out.is_empty());
    assert!(err.contains(&path.display().to_string()), "{err}");
    assert!(err.contains("--from URL"), "{err}");
}

#[test]
fn an_ndjson_export_replays_like_the_journal_it_came_from() {
    let dir = incident_journal();
    let (_, from_sled, _) = run(&ReplayArgs {
        summary: true,
        ..args(&dir.path().join("journal"))
    });
    let (_, from_file, _) = run(&ReplayArgs {
        summary: true,
        ..args(&fixture_ndjson())
    });
    assert_eq!(from_sled, from_file);
}
