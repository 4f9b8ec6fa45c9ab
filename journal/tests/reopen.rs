//! Through the writer onto sled and back: order after reopen, and recovery from snapshots.

// A test crate: its helpers may unwrap like the tests themselves.
#![expect(
    clippy::unwrap_used,
    reason = "test code: a failed step fails the test loudly"
)]

use quotaroute_journal::testkit::sample_event;
use quotaroute_journal::*;

fn config() -> WriterConfig {
    WriterConfig::default()
}

/// A trivial reducer: how many events, and the last seq applied.
#[derive(Debug, Default, PartialEq)]
struct Counted {
    events: u64,
    last_seq: u64,
}

impl Counted {
    fn apply(&mut self, envelope: &Envelope) {
        self.events += 1;
        self.last_seq = envelope.seq;
    }
    fn encode(&self) -> Vec<u8> {
        [self.events.to_le_bytes(), self.last_seq.to_le_bytes()].concat()
    }
    fn decode(bytes: &[u8]) -> Option<Counted> {
        let (events, last_seq) = bytes.split_at_checked(8)?;
        Some(Counted {
            events: u64::from_le_bytes(events.try_into().ok()?),
            last_seq: u64::from_le_bytes(last_seq.try_into().ok()?),
        })
    }
}

#[tokio::test]
async fn append_10k_then_reopen_reads_them_all_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let journal = SledJournal::open(dir.path(), SledOptions::default()).unwrap();
    let handle = JournalHandle::spawn(Box::new(journal), config()).unwrap();
    for i in 0..10_000u64 {
        assert_eq!(
            handle.append(1_000 + i, sample_event(i as usize, i)),
            Some(i + 1)
        );
    }
    assert_eq!(handle.close().await.unwrap(), 10_000);

    let journal = SledJournal::open(dir.path(), SledOptions::default()).unwrap();
    assert_eq!(journal.last_seq().unwrap(), Some(10_000));
    let mut expected = 0u64;
    for envelope in journal.read_from(0) {
        let envelope = envelope.unwrap();
        assert_eq!(envelope.seq, expected + 1);
        assert_eq!(envelope.at_ms, 1_000 + expected);
        assert_eq!(envelope.event, sample_event(expected as usize, expected));
        expected += 1;
    }
    assert_eq!(expected, 10_000);

    // A second writer continues the sequence.
    let handle = JournalHandle::spawn(Box::new(journal), config()).unwrap();
    assert_eq!(handle.append(0, sample_event(0, 0)), Some(10_001));
    assert_eq!(handle.close().await.unwrap(), 10_001);
}

/// Writes 300 events with snapshots of the reducer after 100 and 200; returns the dir.
async fn journal_with_snapshots() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let journal = SledJournal::open(dir.path(), SledOptions::default()).unwrap();
    let handle = JournalHandle::spawn(Box::new(journal), config()).unwrap();
    let mut live = Counted::default();
    for i in 0..300u64 {
        let event = sample_event(i as usize, i);
        let seq = handle.append(i, event.clone()).unwrap();
        live.apply(&Envelope {
            schema_version: SCHEMA_VERSION,
            seq,
            at_ms: i,
            event,
        });
        if [100, 200].contains(&seq) {
            handle.snapshot(seq, i, 1, live.encode());
        }
    }
    handle.close().await.unwrap();
    dir
}

fn replay(journal: &dyn Journal, recovery: Recovery<Counted>) -> (Counted, Option<u64>) {
    let from = recovery.snapshot_seq;
    let mut state = recovery.state.unwrap_or_default();
    for envelope in journal.read_from(from.map_or(0, |s| s + 1)) {
        state.apply(&envelope.unwrap());
    }
    (state, from)
}

#[tokio::test]
async fn recovery_uses_the_newest_snapshot_then_the_tail() {
    let dir = journal_with_snapshots().await;
    let journal = SledJournal::open(dir.path(), SledOptions::default()).unwrap();
    let recovery = recover(&journal, Counted::decode);
    assert!(recovery.damages.is_empty());
    assert_eq!(recovery.replay_from(), 201);
    assert_eq!(recovery.tail(&journal).count(), 100);
    let (state, from) = replay(&journal, recovery);
    assert_eq!(from, Some(200));
    assert_eq!(
        state,
        Counted {
            events: 300,
            last_seq: 300
        }
    );
}

#[tokio::test]
async fn corrupt_newest_snapshot_falls_back_to_an_older_one() {
    let dir = journal_with_snapshots().await;
    let mut journal = SledJournal::open(dir.path(), SledOptions::default()).unwrap();
    journal
        .put_raw("snapshots", &200u64.to_be_bytes(), b"\x01garbage!")
        .unwrap();
    let recovery = recover(&journal, Counted::decode);
    assert_eq!(recovery.damages.len(), 1);
    assert_eq!(recovery.damages[0].seq, 200);
    let (state, from) = replay(&journal, recovery);
    assert_eq!(from, Some(100));
    assert_eq!(
        state,
        Counted {
            events: 300,
            last_seq: 300
        }
    );
}

#[tokio::test]
async fn no_usable_snapshot_means_a_full_replay() {
    let dir = journal_with_snapshots().await;
    let journal = SledJournal::open(dir.path(), SledOptions::default()).unwrap();
    // The decoder rejects every snapshot (say, a state format this build no longer reads).
    let recovery = recover(&journal, |_| None::<Counted>);
    let rejected: Vec<(u64, DamageReason)> = recovery
        .damages
        .iter()
        .map(|d| (d.seq, d.reason.clone()))
        .collect();
    assert_eq!(
        rejected,
        vec![
            (200, DamageReason::SnapshotRejected),
            (100, DamageReason::SnapshotRejected)
        ]
    );
    let (state, from) = replay(&journal, recovery);
    assert_eq!(from, None);
    assert_eq!(
        state,
        Counted {
            events: 300,
            last_seq: 300
        }
    );
}
