//! sled backend tests: reading, last seq, damage, locking, snapshots and retention.

use super::*;
use crate::codec::DamageReason;
use crate::testkit::sample_envelopes;

fn open(dir: &tempfile::TempDir) -> SledJournal {
    SledJournal::open(dir.path(), SledOptions::default()).unwrap()
}

/// Records of `per_record` envelopes covering seqs 1..=count, at_ms = seq.
fn fill(journal: &mut SledJournal, count: u64, per_record: u64) {
    let all = sample_envelopes(1, 1, count);
    for chunk in all.chunks(per_record as usize) {
        journal.write_batch(chunk).unwrap();
    }
    journal.flush().unwrap();
}

#[test]
fn read_from_starts_inside_a_record_and_keeps_order() {
    let dir = tempfile::tempdir().unwrap();
    let mut journal = open(&dir);
    fill(&mut journal, 100, 10);
    let seqs: Vec<u64> = journal.read_from(35).map(|r| r.unwrap().seq).collect();
    assert_eq!(seqs, (35..=100).collect::<Vec<_>>());
    assert_eq!(journal.read_from(0).count(), 100);
    assert_eq!(journal.read_from(101).count(), 0);
    assert_eq!(journal.last_seq().unwrap(), Some(100));
}

#[test]
fn empty_journal_has_no_last_seq() {
    let dir = tempfile::tempdir().unwrap();
    let journal = open(&dir);
    assert_eq!(journal.last_seq().unwrap(), None);
    assert_eq!(journal.read_from(0).count(), 0);
    assert!(journal.snapshots().is_empty());
}

#[test]
fn corrupt_record_is_reported_with_its_seq_and_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let mut journal = open(&dir);
    fill(&mut journal, 30, 10);
    // Overwrite bytes of the middle record (seqs 11..=20) directly in sled.
    let events = journal.trees().unwrap().events.clone();
    let mut value = events.get(codec::seq_key(11)).unwrap().unwrap().to_vec();
    let middle = value.len() / 2;
    value[middle] ^= 0x5a;
    events.insert(codec::seq_key(11), value).unwrap();

    let read: Vec<_> = journal.read_from(0).collect();
    assert_eq!(read.len(), 21);
    let damage = read[10].clone().unwrap_err();
    assert_eq!(damage.seq, 11);
    assert!(matches!(
        damage.reason,
        DamageReason::ChecksumMismatch { .. }
    ));
    let seqs: Vec<u64> = read.into_iter().flatten().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=10).chain(21..=30).collect::<Vec<_>>());
}

#[test]
fn damaged_last_record_still_gives_a_last_seq_from_its_key() {
    let dir = tempfile::tempdir().unwrap();
    let mut journal = open(&dir);
    fill(&mut journal, 30, 10);
    journal
        .put_raw("events", &codec::seq_key(21), b"torn")
        .unwrap();
    assert_eq!(journal.last_seq().unwrap(), Some(21));
}

#[test]
fn second_open_of_a_held_directory_is_locked() {
    let dir = tempfile::tempdir().unwrap();
    let _held = open(&dir);
    let error = SledJournal::open(dir.path(), SledOptions::default()).unwrap_err();
    assert_eq!(
        error,
        JournalError::Locked {
            path: dir.path().to_path_buf()
        }
    );
    assert!(error.to_string().contains("locked"));
}

#[test]
fn unopenable_path_names_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, b"not a directory").unwrap();
    let error = SledJournal::open(&file, SledOptions::default()).unwrap_err();
    assert!(
        matches!(&error, JournalError::Open { path, .. } if *path == file),
        "{error:?}"
    );
}

#[test]
fn snapshots_keep_the_newest_three_newest_first() {
    let dir = tempfile::tempdir().unwrap();
    let mut journal = open(&dir);
    for seq in [10, 20, 30, 40] {
        journal
            .put_snapshot(seq, seq * 2, 1, &seq.to_le_bytes())
            .unwrap();
    }
    let seqs: Vec<(u64, u64)> = journal
        .snapshots()
        .into_iter()
        .map(|s| s.map(|s| (s.seq, s.at_ms)).unwrap())
        .collect();
    assert_eq!(seqs, vec![(40, 80), (30, 60), (20, 40)]);
}

#[test]
fn prune_removes_only_old_records_covered_by_the_newest_readable_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let mut journal = open(&dir);
    fill(&mut journal, 100, 10); // at_ms = seq
                                 // No snapshot: nothing goes, however old.
    assert_eq!(journal.prune(u64::MAX).unwrap().records_removed, 0);

    journal.put_snapshot(45, 45, 1, b"s").unwrap();
    // Cutoff 31: records 1..=10, 11..=20, 21..=30 are all older; 31..=40 is not.
    let report = journal.prune(31).unwrap();
    assert_eq!((report.records_removed, report.events_removed), (3, 30));
    assert_eq!(report.covered_by, Some(45));
    // Everything is old now, but 41..=50 is not fully covered by seq 45.
    let report = journal.prune(u64::MAX).unwrap();
    assert_eq!(report.records_removed, 1);
    let first = journal.read_from(0).next().unwrap().unwrap();
    assert_eq!(first.seq, 41);

    // A newer snapshot that is corrupt does not count: the readable one (45) still bounds.
    journal
        .put_raw("snapshots", &codec::seq_key(90), b"bad")
        .unwrap();
    assert_eq!(journal.prune(u64::MAX).unwrap().records_removed, 0);
    assert_eq!(journal.read_from(0).count(), 60);
}
