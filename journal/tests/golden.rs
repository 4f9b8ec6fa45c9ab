//! The golden journal: records written by schema 1 of this crate, checked in byte for byte,
//! must replay to the checked-in events in every later version. Kinds added later are appended
//! as records of their own (written by the build that added them: `api_unserved`, schema 5,
//! seqs 70–72; `pacing_rule`, schema 5, seqs 73–75; `response_stored`, schema 5, seqs 76–78, and
//! `response_deleted`, seqs 79–81), so the old bytes stay as they were written.
//!
//! `fixtures/golden/records.hex` holds the raw sled entries (`<tree> <key hex> <value hex>`,
//! one per line — our format, diffable, rather than sled's own binary files, which belong to
//! the sled version and not to this crate), and
//! `events.ndjson` the events they must decode to. Kinds appended since are in records
//! appended after the first ones, in the record format of the build that added them (the
//! `api_unserved` record at seq 70 is format 2), so the older records keep their bytes. The test loads the records into a fresh
//! sled and replays. Regenerate (only when deliberately changing what "golden" means — never to
//! make a failing test pass): `QR_REGEN_GOLDEN=1 cargo test -p quotaroute-journal --test golden`.

// A test crate: its helpers may unwrap like the tests themselves.
#![expect(
    clippy::unwrap_used,
    reason = "test code: a failed step fails the test loudly"
)]

use quotaroute_journal::testkit::{sample_envelopes, KIND_COUNT};
use quotaroute_journal::*;
use std::path::PathBuf;

const SNAPSHOT_SEQ: u64 = 30;
const SNAPSHOT_AT_MS: u64 = 1_700_000_000_029;
const SNAPSHOT_STATE: &[u8] = b"golden snapshot state, schema 1";

fn fixture_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/golden")
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap())
        .collect()
}

/// Writes the golden journal with this build: three of every kind in three records, plus
/// one snapshot.
fn regenerate() {
    let envelopes = sample_envelopes(1, 1_700_000_000_000, 3 * KIND_COUNT as u64);
    let dir = tempfile::tempdir().unwrap();
    let mut journal = SledJournal::open(dir.path(), SledOptions::default()).unwrap();
    for record in envelopes.chunks(KIND_COUNT) {
        journal.write_batch(record).unwrap();
    }
    journal
        .put_snapshot(SNAPSHOT_SEQ, SNAPSHOT_AT_MS, 1, SNAPSHOT_STATE)
        .unwrap();
    journal.flush().unwrap();
    let records: String = journal
        .raw_entries()
        .into_iter()
        .map(|(tree, key, value)| format!("{tree} {} {}\n", hex(&key), hex(&value)))
        .collect();
    let events: String = envelopes
        .iter()
        .map(|e| envelope_to_json(e).unwrap() + "\n")
        .collect();
    std::fs::create_dir_all(fixture_dir()).unwrap();
    std::fs::write(fixture_dir().join("records.hex"), records).unwrap();
    std::fs::write(fixture_dir().join("events.ndjson"), events).unwrap();
}

#[test]
fn golden_journal_replays_to_the_checked_in_events() {
    if std::env::var_os("QR_REGEN_GOLDEN").is_some_and(|v| v == "1") {
        regenerate();
    }
    let records = std::fs::read_to_string(fixture_dir().join("records.hex")).unwrap();
    let expected_lines = std::fs::read_to_string(fixture_dir().join("events.ndjson")).unwrap();
    let expected: Vec<Envelope> = expected_lines
        .lines()
        .map(|line| envelope_from_json(line).unwrap())
        .collect();

    let dir = tempfile::tempdir().unwrap();
    let mut journal = SledJournal::open(dir.path(), SledOptions::default()).unwrap();
    for line in records.lines() {
        let mut parts = line.split(' ');
        let (tree, key, value) = (
            parts.next().unwrap(),
            parts.next().unwrap(),
            parts.next().unwrap(),
        );
        journal.put_raw(tree, &unhex(key), &unhex(value)).unwrap();
    }

    let replayed: Vec<Envelope> = journal.read_from(0).map(|r| r.unwrap()).collect();
    assert_eq!(replayed, expected);
    let kinds: std::collections::BTreeSet<&str> = replayed.iter().map(|e| e.event.kind()).collect();
    assert_eq!(
        kinds.len(),
        Event::KINDS.len(),
        "every kind is in the golden journal"
    );
    // Rendering is stable too: the same NDJSON, byte for byte.
    let rendered: String = replayed
        .iter()
        .map(|e| envelope_to_json(e).unwrap() + "\n")
        .collect();
    assert_eq!(rendered, expected_lines);

    let snapshots: Vec<Snapshot> = journal
        .snapshots()
        .into_iter()
        .map(|s| s.unwrap())
        .collect();
    assert_eq!(
        snapshots,
        vec![Snapshot {
            seq: SNAPSHOT_SEQ,
            at_ms: SNAPSHOT_AT_MS,
            // The golden journal was written before snapshots carried a state version.
            format: codec::SNAPSHOT_FORMAT_UNVERSIONED,
            state_version: None,
            state: SNAPSHOT_STATE.to_vec()
        }]
    );
    assert_eq!(journal.last_seq().unwrap(), Some(expected.len() as u64));
}
