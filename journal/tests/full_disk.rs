//! The journal comes back by itself (contract `/healthz`: `degraded` while writes fail, `ok`
//! again when the disk recovers): a real sled journal on a small tmpfs, filled until writes
//! fail, then grown. Every event appended while the disk was full is on disk afterwards, in
//! order. (A read-only remount cannot be staged this way: Linux refuses to remount a
//! filesystem read-only while a file on it is open for writing, as sled's are.)
//!
//! Needs root (CI runs as root) to mount the tmpfs; elsewhere it says so and does nothing.

#![expect(
    clippy::unwrap_used,
    clippy::panic,
    reason = "test code: a failed step fails the test loudly"
)]

use std::path::Path;
use std::time::{Duration, Instant};

use quotaroute_journal::test_disk::Tmpfs;
use quotaroute_journal::testkit::sample_event;
use quotaroute_journal::{Event, Journal, JournalHandle, SledJournal, SledOptions, WriterConfig};

/// A state event (never dropped when the queue is full): a model lockout.
fn state_event(n: u64) -> Event {
    sample_event(7, n)
}

fn wait_until(what: &str, within: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !done() {
        assert!(Instant::now() < deadline, "{what} within {within:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn assert_contiguous(path: &Path, last: u64) {
    let journal = SledJournal::open(path, SledOptions::default()).unwrap();
    let mut expected = 1;
    for item in journal.read_from(0) {
        let envelope = item.unwrap_or_else(|damage| panic!("damaged record: {damage:?}"));
        assert_eq!(envelope.seq, expected, "a gap or a duplicate");
        expected += 1;
    }
    assert_eq!(expected - 1, last, "every appended event is on disk");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_then_grown_disk_recovers_without_a_restart() {
    assert!(matches!(sample_event(7, 1), Event::ModelLocked(_)));
    let dir = tempfile::tempdir().unwrap();
    let Some(disk) = Tmpfs::mount(&dir.path().join("disk"), "2m") else {
        eprintln!("cannot mount a tmpfs here (needs root): nothing to run");
        assert!(
            std::env::var("CI").is_err(),
            "CI runs as root and must run this"
        );
        return;
    };
    let path = disk.path().join("journal");
    let journal = SledJournal::open(&path, SledOptions::default()).unwrap();
    let handle = JournalHandle::spawn(
        Box::new(journal),
        WriterConfig {
            flush_every_ms: 10,
            ..WriterConfig::default()
        },
    )
    .unwrap();

    // Fill the disk until writes fail.
    let mut last = 0;
    let started = Instant::now();
    while handle.stats().healthy {
        for _ in 0..500 {
            last = handle.append(1_000 + last, state_event(last + 1)).unwrap();
        }
        std::thread::sleep(Duration::from_millis(2));
        assert!(
            started.elapsed() < Duration::from_secs(30) && last < 2_000_000,
            "the 2 MB disk never filled ({last} events)"
        );
    }
    // Events keep arriving while it is full; none is dropped (they are state events).
    for _ in 0..2_000 {
        last = handle.append(2_000 + last, state_event(last + 1)).unwrap();
    }
    assert!(!handle.stats().healthy);
    assert!(disk.resize("64m"));
    wait_until(
        "writes recover after the disk grew",
        Duration::from_secs(15),
        || {
            let stats = handle.stats();
            stats.healthy && stats.durable_seq >= last
        },
    );

    assert_eq!(handle.stats().dropped, 0);
    handle.flush().await.unwrap();
    handle.close().await.unwrap();
    assert_contiguous(&path, last);
}
