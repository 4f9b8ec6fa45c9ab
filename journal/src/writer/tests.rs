//! Writer tests on the in-memory journal: order, flush, close, back-pressure, disk trouble,
//! snapshots after their events, retention, and what a crash leaves.

use super::*;
use crate::event::{AdminAction, NodeStopped};
use crate::failing::FailingJournal;
use crate::memory::MemoryJournal;
use crate::testkit::sample_event;

fn state_event(n: u64) -> Event {
    Event::AdminAction(AdminAction {
        action: "clear_lockout".into(),
        target: format!("t{n}"),
        by: "admin".into(),
    })
}

fn request_event(n: u64) -> Event {
    sample_event(2, n) // request_succeeded
}

fn read_all(journal: &MemoryJournal) -> Vec<Envelope> {
    journal.read_from(0).map(|r| r.unwrap()).collect()
}

/// Long timers, so only explicit flushes and thresholds drive writes in these tests.
fn quiet_config() -> WriterConfig {
    WriterConfig {
        flush_every_ms: 60_000,
        ..WriterConfig::default()
    }
}

#[tokio::test]
async fn appends_from_many_threads_are_stored_in_seq_order() {
    let journal = MemoryJournal::new();
    let handle = JournalHandle::spawn(Box::new(journal.clone()), quiet_config()).unwrap();
    let threads: Vec<_> = (0..4u64)
        .map(|t| {
            let handle = handle.clone();
            std::thread::spawn(move || {
                (0..2_500u64)
                    .map(|i| {
                        handle
                            .append(t * 10_000 + i, state_event(t * 10_000 + i))
                            .unwrap()
                    })
                    .collect::<Vec<u64>>()
            })
        })
        .collect();
    let seqs: Vec<Vec<u64>> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    assert_eq!(handle.flush().await.unwrap(), 10_000);
    let stored = read_all(&journal);
    assert_eq!(stored.len(), 10_000);
    for (i, envelope) in stored.iter().enumerate() {
        assert_eq!(envelope.seq, i as u64 + 1);
        assert_eq!(envelope.schema_version, SCHEMA_VERSION);
    }
    // Each thread's own events keep their order and the seq they were given.
    for (t, thread_seqs) in seqs.iter().enumerate() {
        assert!(thread_seqs.windows(2).all(|w| w[0] < w[1]));
        for (i, seq) in thread_seqs.iter().enumerate() {
            assert_eq!(
                stored[*seq as usize - 1].at_ms,
                t as u64 * 10_000 + i as u64
            );
        }
    }
    let stats = handle.stats();
    assert_eq!(
        (stats.appended, stats.written, stats.queue_len),
        (10_000, 10_000, 0)
    );
    handle.close().await.unwrap();
}

#[tokio::test]
async fn records_hold_at_most_record_max_events_consecutive_envelopes() {
    let journal = MemoryJournal::new();
    let handle = JournalHandle::spawn(Box::new(journal.clone()), quiet_config()).unwrap();
    for i in 0..60 {
        handle.append(i, state_event(i));
    }
    handle.close().await.unwrap();
    // RECORD_MAX_EVENTS = 24: records start at seqs 1, 25 and 49.
    assert_eq!(journal.record_keys(), vec![1, 25, 49]);
    assert_eq!(read_all(&journal).len(), 60);
}

#[tokio::test]
async fn a_few_hundred_waiting_events_are_written_as_whole_records_before_the_tick() {
    let journal = MemoryJournal::new();
    let handle = JournalHandle::spawn(Box::new(journal.clone()), quiet_config()).unwrap();
    for i in 0..250 {
        handle.append(i, request_event(i));
    }
    // The 60 s timer is far away: only the default threshold (240 events) writes now, and
    // only whole records of 24, so none short is left behind.
    let deadline = Instant::now() + Duration::from_secs(10);
    while journal.record_keys().len() < 10 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    let whole: Vec<u64> = (0..10).map(|r| 1 + 24 * r).collect();
    assert_eq!(journal.record_keys(), whole);
    handle.close().await.unwrap();
    assert_eq!(journal.record_keys().last(), Some(&241));
    assert_eq!(read_all(&journal).len(), 250);
}

#[tokio::test]
async fn seqs_continue_after_the_journals_last_seq() {
    let journal = MemoryJournal::new();
    let handle = JournalHandle::spawn(Box::new(journal.clone()), quiet_config()).unwrap();
    handle.append(1, state_event(1));
    assert_eq!(handle.close().await.unwrap(), 1);
    let handle = JournalHandle::spawn(Box::new(journal.clone()), quiet_config()).unwrap();
    assert_eq!(handle.append(2, state_event(2)), Some(2));
    assert_eq!(handle.close().await.unwrap(), 2);
}

#[tokio::test]
async fn full_queue_drops_request_events_and_keeps_state_events() {
    let (failing, switch) = FailingJournal::new(MemoryJournal::new());
    let config = WriterConfig {
        max_queue_events: 10,
        ..quiet_config()
    };
    let handle = JournalHandle::spawn(Box::new(failing), config).unwrap();
    switch.set_failing(true);
    for i in 0..10 {
        assert!(handle.append(i, request_event(i)).is_some());
    }
    assert_eq!(handle.append(10, request_event(10)), None);
    assert_eq!(handle.append(11, state_event(11)), Some(11));
    let stats = handle.stats();
    assert_eq!(
        (stats.dropped, stats.queue_len, stats.appended),
        (1, 11, 11)
    );
}

#[tokio::test]
async fn write_error_keeps_events_marks_unhealthy_and_recovers() {
    let memory = MemoryJournal::new();
    let (failing, switch) = FailingJournal::new(memory.clone());
    let handle = JournalHandle::spawn(Box::new(failing), quiet_config()).unwrap();
    switch.set_failing(true);
    for i in 0..5 {
        handle.append(i, state_event(i));
    }
    assert_eq!(handle.flush().await, Err(JournalError::Injected));
    let stats = handle.stats();
    assert!(!stats.healthy);
    assert!(stats.write_errors >= 1);
    assert_eq!(stats.queue_len, 5);
    assert!(memory.record_keys().is_empty());

    switch.set_failing(false);
    assert_eq!(handle.flush().await, Ok(5));
    let stats = handle.stats();
    assert!(stats.healthy);
    assert_eq!(
        (stats.written, stats.queue_len, stats.durable_seq),
        (5, 0, 5)
    );
    assert_eq!(read_all(&memory).len(), 5);
}

#[tokio::test]
async fn snapshot_is_written_only_once_its_events_are_durable() {
    let journal = MemoryJournal::new();
    let handle = JournalHandle::spawn(Box::new(journal.clone()), quiet_config()).unwrap();
    handle.append(1, state_event(1));
    handle.snapshot(2, 2, 1, b"after two".to_vec());
    handle.flush().await.unwrap();
    assert!(journal.snapshots().is_empty(), "seq 2 is not written yet");
    handle.append(2, state_event(2));
    handle.flush().await.unwrap();
    let snapshots: Vec<_> = journal
        .snapshots()
        .into_iter()
        .map(|s| s.unwrap())
        .collect();
    assert_eq!(snapshots.len(), 1);
    assert_eq!(
        (snapshots[0].seq, snapshots[0].state.as_slice()),
        (2, &b"after two"[..])
    );
    handle.close().await.unwrap();
}

#[tokio::test]
async fn retention_prunes_covered_old_records_at_most_once_a_minute() {
    const HOUR: u64 = 3_600_000;
    let journal = MemoryJournal::new();
    let config = WriterConfig {
        retention_hours: 1,
        flush_every_events: 1,
        ..quiet_config()
    };
    let handle = JournalHandle::spawn(Box::new(journal.clone()), config).unwrap();
    // seq 1..=3 are old; a snapshot covers 1..=2.
    for seq in 1..=3 {
        handle.append(seq, state_event(seq));
    }
    handle.flush().await.unwrap();
    handle.snapshot(2, 3, 1, b"s".to_vec());
    handle.flush().await.unwrap();
    // First prune ran at event time 3 (nothing old enough yet); the next is due a minute of
    // event time later.
    handle.append(2 * HOUR, state_event(4));
    handle.flush().await.unwrap();
    let keys = journal.record_keys();
    assert_eq!(keys, vec![3, 4], "records 1 and 2 pruned, 3 not covered");
    // Within the same minute nothing more is pruned even if a new snapshot would allow it.
    handle.snapshot(4, 2 * HOUR, 1, b"s2".to_vec());
    handle.append(2 * HOUR + 1, state_event(5));
    handle.flush().await.unwrap();
    assert_eq!(journal.record_keys(), vec![3, 4, 5]);
    handle.close().await.unwrap();
}

#[tokio::test]
async fn crash_without_close_keeps_everything_flushed_in_order() {
    let journal = MemoryJournal::new();
    let handle = JournalHandle::spawn(Box::new(journal.clone()), quiet_config()).unwrap();
    for i in 0..1_000 {
        handle.append(i, sample_event(i as usize, i));
    }
    let durable = handle.flush().await.unwrap();
    for i in 1_000..1_500 {
        handle.append(i, state_event(i));
    }
    // The node dies: no close, no flush.
    std::mem::forget(handle);
    let survivor = journal.after_crash();
    let stored = read_all(&survivor);
    assert!(stored.len() as u64 >= durable);
    for (i, envelope) in stored.iter().enumerate() {
        assert_eq!(envelope.seq, i as u64 + 1);
    }
    assert_eq!(stored[999].event, sample_event(999, 999));
}

#[tokio::test]
async fn close_writes_everything_and_later_appends_are_dropped() {
    let journal = MemoryJournal::new();
    let handle = JournalHandle::spawn(Box::new(journal.clone()), quiet_config()).unwrap();
    let other = handle.clone();
    for i in 0..100 {
        handle.append(i, state_event(i));
    }
    assert_eq!(handle.close().await.unwrap(), 100);
    assert_eq!(journal.after_crash().read_from(0).count(), 100);
    let stopped = Event::NodeStopped(NodeStopped {
        reason: "late".into(),
        uptime_ms: 1,
    });
    assert_eq!(other.append(101, stopped), None);
    assert_eq!(other.flush().await, Err(JournalError::Closed));
}

#[tokio::test]
async fn dropping_every_handle_still_writes_what_was_queued() {
    let journal = MemoryJournal::new();
    let handle = JournalHandle::spawn(Box::new(journal.clone()), quiet_config()).unwrap();
    for i in 0..10 {
        handle.append(i, state_event(i));
    }
    let thread = handle.thread.lock().unwrap().take().unwrap();
    drop(handle);
    thread.join().unwrap();
    assert_eq!(journal.after_crash().read_from(0).count(), 10);
}
