//! Checks that the journal's memory stays flat as it grows: appends 2M events through the
//! writer into sled and prints the process RSS every 200k. sled 0.34 keeps large values in
//! memory, which is why records hold at most `RECORD_MAX_EVENTS` (24) events (~2 KB).
//!
//! `cargo run --release -p quotaroute-journal --example rss_check` (`CACHE_BYTES=N` sets sled's
//! page cache; the default is `SledOptions`')

#![expect(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a measuring tool: fail loudly"
)]

use quotaroute_journal::testkit::sample_event;
use quotaroute_journal::{JournalHandle, SledJournal, SledOptions, WriterConfig};

fn rss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let mut options = SledOptions::default();
        if let Ok(bytes) = std::env::var("CACHE_BYTES") {
            options.cache_bytes = bytes
                .parse()
                .expect("CACHE_BYTES must be a whole number of bytes");
        }
        let journal = SledJournal::open(dir.path(), options).unwrap();
        let handle = JournalHandle::spawn(Box::new(journal), WriterConfig::default()).unwrap();
        for round in 0..10u64 {
            for i in 0..200_000u64 {
                let n = round * 200_000 + i;
                handle.append(1_700_000_000_000 + n, sample_event((n % 15) as usize, n));
                if i % 5_000 == 0 {
                    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                }
            }
            handle.flush().await.unwrap();
            println!(
                "{:>9} events  RSS {:>6} MB",
                (round + 1) * 200_000,
                rss_kb() / 1024
            );
        }
    });
}
