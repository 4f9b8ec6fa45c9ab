//! Replay speed on a 1M-event journal (the bar: NDJSON ≥ 1M events/s, `--state-at`
//! ≤ 2 s). Ignored by default — `bench/replay.sh` runs it (release build, `-- --ignored`).
//! The journal repeats the incident fixture's traffic (shifted in seq and time), written in
//! 256-event records like the node's writer.

use crate::replay_support;

use std::time::Instant;

use quotaroute::journal::{Event, Journal, SledJournal, SledOptions};
use quotaroute::replay::{self, Format, ReplayArgs};
use replay_support::*;

const EVENTS: u64 = 1_000_000;

#[test]
#[ignore = "a benchmark on 1M events: bench/replay.sh runs it in release (-- --ignored)"]
fn replay_one_million_events() {
    let fixture: Vec<_> = replay::source::read_ndjson_file(&fixture_ndjson())
        .unwrap()
        .into_iter()
        .map(Result::unwrap)
        .collect();
    let mut config = fixture
        .iter()
        .find(|e| matches!(e.event, Event::ConfigLoaded(_)))
        .unwrap()
        .clone();
    config.seq = 1;
    let traffic: Vec<_> = fixture
        .iter()
        .filter(|e| {
            !matches!(
                e.event,
                Event::ConfigLoaded(_) | Event::NodeStarted(_) | Event::NodeStopped(_)
            )
        })
        .cloned()
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("journal");
    let started = Instant::now();
    {
        let mut journal = SledJournal::open(&path, SledOptions::default()).unwrap();
        let mut batch = vec![config];
        let mut seq = 1;
        let mut round = 0_u64;
        while seq < EVENTS {
            for envelope in &traffic {
                if seq >= EVENTS {
                    break;
                }
                seq += 1;
                let mut envelope = envelope.clone();
                envelope.seq = seq;
                envelope.at_ms += round * 1_200_000;
                batch.push(envelope);
                if batch.len() == 256 {
                    journal.write_batch(&batch).unwrap();
                    batch.clear();
                }
            }
            round += 1;
        }
        journal.write_batch(&batch).unwrap();
        journal.flush().unwrap();
    }
    eprintln!("generated {EVENTS} events in {:.2?}", started.elapsed());

    let base = ReplayArgs {
        journal: Some(path.clone()),
        ..args(&path)
    };
    let mut sink = std::io::sink();
    let mut err = Vec::new();
    let started = Instant::now();
    let code = replay::run(
        &ReplayArgs {
            format: Format::Json,
            ..base.clone()
        },
        &mut sink,
        &mut err,
        T0,
    );
    let ndjson = started.elapsed();
    assert_eq!(code, 0);
    let rate = EVENTS as f64 / ndjson.as_secs_f64();
    eprintln!("replay --format json: {EVENTS} events in {ndjson:.2?} = {rate:.0} events/s");

    let mut out = Vec::new();
    let started = Instant::now();
    let code = replay::run(
        &ReplayArgs {
            state_at: Some(format!("{}", T0 + 400 * 1_200_000)),
            ..base.clone()
        },
        &mut out,
        &mut err,
        T0,
    );
    let state_at = started.elapsed();
    assert_eq!(code, 0);
    eprintln!("replay --state-at (whole journal scanned): {state_at:.2?}");

    let started = Instant::now();
    let code = replay::run(
        &ReplayArgs {
            summary: true,
            ..base
        },
        &mut sink,
        &mut err,
        T0,
    );
    assert_eq!(code, 0);
    eprintln!("replay --summary: {:.2?}", started.elapsed());
    assert!(err.is_empty(), "{}", String::from_utf8_lossy(&err));
}
