//! `[journal]`: where the journal lives, how often it flushes and snapshots, how long it keeps
//! events, how much it queues, which request events it records.

use std::path::PathBuf;

use crate::config::error::ErrorSink;
use crate::config::model::{JournalConfig, RequestEvents};
use crate::config::raw::RawJournal;

use super::checks::{at_least_one, one_of};

pub const DEFAULT_JOURNAL_PATH: &str = "./data/journal";
pub const DEFAULT_FLUSH_EVERY_MS: u64 = 50;
pub const DEFAULT_SNAPSHOT_EVERY_EVENTS: u64 = 100_000;
pub const DEFAULT_RETENTION_HOURS: u64 = 168;
pub const DEFAULT_MAX_QUEUE_EVENTS: u64 = 100_000;

pub(super) fn build_journal(raw: RawJournal, sink: &mut ErrorSink) -> JournalConfig {
    let path = raw.path.unwrap_or_else(|| DEFAULT_JOURNAL_PATH.to_owned());
    if path.is_empty() {
        sink.push("journal.path", "must not be empty");
    }
    let request_events = raw
        .request_events
        .and_then(|value| {
            one_of(
                &value,
                &[
                    ("all", RequestEvents::All),
                    ("failures", RequestEvents::Failures),
                ],
                "journal.request_events",
                sink,
            )
        })
        .unwrap_or(RequestEvents::All);
    JournalConfig {
        path: PathBuf::from(path),
        flush_every_ms: at_least_one(
            raw.flush_every_ms,
            DEFAULT_FLUSH_EVERY_MS,
            "journal.flush_every_ms",
            sink,
        ),
        snapshot_every_events: at_least_one(
            raw.snapshot_every_events,
            DEFAULT_SNAPSHOT_EVERY_EVENTS,
            "journal.snapshot_every_events",
            sink,
        ),
        retention_hours: at_least_one(
            raw.retention_hours,
            DEFAULT_RETENTION_HOURS,
            "journal.retention_hours",
            sink,
        ),
        max_queue_events: at_least_one(
            raw.max_queue_events,
            DEFAULT_MAX_QUEUE_EVENTS,
            "journal.max_queue_events",
            sink,
        ),
        request_events,
    }
}
