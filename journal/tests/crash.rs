//! Crash simulation with a real process: a child writes through the journal writer, reports
//! its durable seq, keeps appending, and is killed (SIGKILL, no close, no flush). Reopening
//! must show every flushed event, in order, with nothing out of sequence.

// A test crate: its helpers may unwrap like the tests themselves.
#![expect(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a failed step fails the test loudly"
)]

use quotaroute_journal::testkit::sample_event;
use quotaroute_journal::*;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

const CHILD_DIR: &str = "QR_CRASH_CHILD_DIR";

/// This file has no test harness (`harness = false`): the same binary is the test and, when
/// started with `QR_CRASH_CHILD_DIR`, the child it kills — no ignored pseudo-test needed.
fn main() {
    if let Ok(dir) = std::env::var(CHILD_DIR) {
        crash_child_writer(&dir);
        return;
    }
    killed_writer_keeps_everything_flushed_in_order();
    println!("test killed_writer_keeps_everything_flushed_in_order ... ok");
    println!("1 passed, 0 failed");
}

/// The child: writes, reports its durable seq, keeps appending until it is killed.
fn crash_child_writer(dir: &str) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    runtime.block_on(async {
        let journal = SledJournal::open(dir, SledOptions::default()).unwrap();
        let handle = JournalHandle::spawn(Box::new(journal), WriterConfig::default()).unwrap();
        for i in 0..5_000u64 {
            handle.append(i, sample_event(i as usize, i));
        }
        let durable = handle.flush().await.unwrap();
        println!("durable {durable}");
        // Keep writing until killed.
        for i in 5_000u64.. {
            handle.append(i, sample_event(i as usize, i));
        }
    });
}

fn killed_writer_keeps_everything_flushed_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .env(CHILD_DIR, dir.path())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let durable: u64 = BufReader::new(stdout)
        .lines()
        .map_while(Result::ok)
        .find_map(|line| line.strip_prefix("durable ").map(|n| n.parse().unwrap()))
        .expect("child reports its durable seq");
    assert_eq!(durable, 5_000);
    // Let it write (and maybe flush) a little more, then kill it mid-stride.
    std::thread::sleep(std::time::Duration::from_millis(120));
    child.kill().unwrap();
    child.wait().unwrap();

    let journal = SledJournal::open(dir.path(), SledOptions::default()).unwrap();
    let mut count = 0u64;
    for envelope in journal.read_from(0) {
        let envelope = envelope.expect("no damage after a crash");
        assert_eq!(envelope.seq, count + 1);
        assert_eq!(envelope.event, sample_event(count as usize, count));
        count += 1;
    }
    assert!(
        count >= durable,
        "only {count} of {durable} flushed events survived"
    );
    assert_eq!(journal.last_seq().unwrap(), Some(count));
}
