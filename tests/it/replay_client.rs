//! `replay --client ID` on a journal of two clients (behaviour §11, journal schema 3): request
//! events are selected by the client they name, beside that client's `client_usage`; request
//! events of before schema 3 (no client) are not; `--summary`'s spend table still prices each
//! client's usage, whether a `client_usage` or (schema 5) the success itself carries it.

#![expect(clippy::unwrap_used, reason = "test helpers outside #[test] fns")]

use crate::replay_support;

use quotaroute::journal::testkit::{failed, succeeded};
use quotaroute::journal::{envelope_to_json, ClientUsage, Envelope, Event, OutcomeClass};
use quotaroute::replay::{self, Format};
use replay_support::{args, run, T0};
use serde_json::Value;

/// How a request's charge to its client was journaled.
#[derive(Clone, Copy, PartialEq)]
enum Charge {
    /// A `client_usage` of its own (schemas 3 and 4; a precharged stream today).
    Separate,
    /// On its `request_succeeded` (schema 5).
    OnTheSuccess,
}

/// One request of `client` (`None`: written before schema 3): its failed attempt, its
/// successful one and, with a client, its charge as `charge` says.
fn request(id: &str, client: Option<&str>, cost_usd: Option<f64>, charge: Charge) -> Vec<Event> {
    let mut failure = failed(
        "openai",
        "k1",
        "gpt-4o",
        Some(503),
        OutcomeClass::ServerError,
    );
    let mut success = succeeded("openai", "k2", "gpt-4o", 1_000, 200);
    if let Event::RequestFailed(e) = &mut failure {
        e.request_id = id.into();
        e.client = client.map(str::to_owned).map(Into::into);
    }
    if let Event::RequestSucceeded(e) = &mut success {
        e.request_id = id.into();
        e.client = client.map(str::to_owned).map(Into::into);
        e.cost_usd = cost_usd;
        if client.is_some() && charge == Charge::OnTheSuccess {
            e.period_spend_pusd = Some(1);
            e.period_start_ms = Some(T0);
        }
    }
    let mut events = vec![failure, success];
    if let (Some(client), Charge::Separate) = (client, charge) {
        events.push(Event::ClientUsage(ClientUsage {
            request_id: id.into(),
            client: client.into(),
            combo: "c".into(),
            provider: "openai".into(),
            connection: "k2".into(),
            model: "gpt-4o".into(),
            tokens_in: 1_000,
            tokens_out: 200,
            tokens_cached: 0,
            tokens_cache_write: 0,
            cost_usd,
            period_spend_pusd: 0,
            period_start_ms: T0,
            estimated: false,
        }));
    }
    events
}

/// The journal as a node would have written it, imported into sled.
fn journal() -> tempfile::TempDir {
    let events: Vec<Event> = [
        request("r-old", None, None, Charge::Separate),
        request("r-a1", Some("team-a"), Some(0.0025), Charge::Separate),
        request("r-b1", Some("team-b"), Some(0.5), Charge::Separate),
        request("r-a2", Some("team-a"), Some(0.0075), Charge::Separate),
        request("r-a3", Some("team-a"), Some(0.005), Charge::OnTheSuccess),
    ]
    .into_iter()
    .flatten()
    .collect();
    let ndjson: String = events
        .into_iter()
        .enumerate()
        .map(|(i, event)| {
            let envelope = Envelope {
                schema_version: quotaroute::journal::SCHEMA_VERSION,
                seq: 1 + i as u64,
                at_ms: T0 + i as u64 * 1_000,
                event,
            };
            envelope_to_json(&envelope).unwrap() + "\n"
        })
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let export = dir.path().join("export.ndjson");
    std::fs::write(&export, ndjson).unwrap();
    replay::source::import_ndjson(&export, &dir.path().join("journal"), 4).unwrap();
    dir
}

#[test]
fn client_selects_request_events_by_their_own_client() {
    let dir = journal();
    let mut replay = args(&dir.path().join("journal"));
    replay.client = Some("team-a".into());
    replay.format = Format::Json;
    let (code, out, err) = run(&replay);
    assert_eq!(code, 0, "{err}");
    let picked: Vec<(String, String)> = out
        .lines()
        .map(|line| {
            let event: Value = serde_json::from_str(line).unwrap();
            assert_eq!(event["client"], "team-a", "{line}");
            (
                event["kind"].as_str().unwrap().to_owned(),
                event["request_id"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let mut expected: Vec<(String, String)> = ["r-a1", "r-a2"]
        .into_iter()
        .flat_map(|id| {
            ["request_failed", "request_succeeded", "client_usage"]
                .map(|kind| (kind.to_owned(), id.to_owned()))
        })
        .collect();
    expected.extend(
        ["request_failed", "request_succeeded"].map(|kind| (kind.to_owned(), "r-a3".to_owned())),
    );
    assert_eq!(picked, expected);
    // The price is on the request event itself.
    let success: Value = serde_json::from_str(
        out.lines()
            .find(|l| l.contains("request_succeeded") && l.contains("r-a2"))
            .unwrap(),
    )
    .unwrap();
    assert_eq!(success["cost_usd"], 0.0075);
}

/// The text timeline names the client and the price on the attempt lines that carry them.
#[test]
fn client_text_lines_name_the_client_and_price() {
    let dir = journal();
    let mut replay = args(&dir.path().join("journal"));
    replay.client = Some("team-b".into());
    let (code, out, err) = run(&replay);
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3, "{out}");
    assert!(lines[0].contains("request_failed"), "{out}");
    assert!(lines[0].ends_with(" client=team-b req=r-b1"), "{out}");
    assert!(lines[1].contains("request_succeeded"), "{out}");
    assert!(
        lines[1].ends_with(" client=team-b cost_usd=0.5 req=r-b1"),
        "{out}"
    );
    assert!(lines[2].contains("client_usage"), "{out}");
}

#[test]
fn summary_spend_table_still_prices_each_client() {
    let dir = journal();
    let mut replay = args(&dir.path().join("journal"));
    replay.summary = true;
    let (code, out, err) = run(&replay);
    assert_eq!(code, 0, "{err}");
    let row = |client: &str| -> Vec<String> {
        out.lines()
            .find(|line| line.starts_with(client))
            .unwrap_or_else(|| panic!("no {client} row in:\n{out}"))
            .split_whitespace()
            .map(str::to_owned)
            .collect()
    };
    // CLIENT MODEL REQUESTS TOKENS_IN CACHED TOKENS_OUT SPEND
    // r-a3's charge is on its success: counted once, like the others.
    assert_eq!(
        row("team-a"),
        ["team-a", "gpt-4o", "3", "3000", "0", "600", "0.0150"]
    );
    assert_eq!(
        row("team-b"),
        ["team-b", "gpt-4o", "1", "1000", "0", "200", "0.5000"]
    );
}
