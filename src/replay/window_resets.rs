//! `--summary`'s quota left unused at resets (behaviour §13): from the quota-window readings
//! the journal holds (`usage_observed` from upstream headers or pushes, the node's own and its
//! peers'; not the per-minute count windows), each time a connection's window reset — a later reading came at or after the reset
//! it announced, or the journal ran past it — how much of that window was never used. Owns
//! the detection of resets and their rows; `summary.rs` renders them.

use std::collections::BTreeMap;

use quotaroute_actors::policy::pace::is_quota_window;
use quotaroute_journal::{Envelope, Event, UsageObserved, UsageSource};
use serde::Serialize;

use crate::timeline::filter::Filter;

/// One window reset the journal saw: its last reading before the reset.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WindowReset {
    pub connection: String,
    pub provider: String,
    /// The window's name as journaled (`5h`, `7d`, `7d:<model>`, …).
    pub window: String,
    pub reset_at_ms: u64,
    /// Used share of the window at its last reading, in percent.
    pub used_pct: f64,
    /// What the reset threw away: `100 − used_pct`.
    pub unused_pct: f64,
}

/// The last reading of one window.
#[derive(Debug, Clone)]
struct LastReading {
    provider: String,
    used: u64,
    limit: u64,
    resets_at_ms: u64,
}

impl LastReading {
    fn used_pct(&self) -> f64 {
        if self.limit == 0 {
            return 100.0;
        }
        (self.used.min(self.limit) as f64 * 100.0) / self.limit as f64
    }
}

/// Follows every window's readings in journal order and collects its resets.
#[derive(Debug, Default)]
pub struct WindowResets {
    /// (connection, window) → its last reading.
    last: BTreeMap<(String, String), LastReading>,
    resets: Vec<WindowReset>,
}

impl WindowResets {
    pub fn observe(&mut self, envelope: &Envelope) {
        let reading = match &envelope.event {
            Event::UsageObserved(reading) => reading,
            Event::PeerApplied(peer) => match peer.event.as_ref() {
                Event::UsageObserved(reading) => reading,
                _ => return,
            },
            _ => return,
        };
        // A cluster lease is the router's own counter, not a provider's window; a per-minute
        // count window is a rate, not quota that a reset throws away.
        if matches!(reading.source, UsageSource::Lease) || !is_quota_window(&reading.window) {
            return;
        }
        let Some(resets_at_ms) = reading.resets_at_ms else {
            return;
        };
        self.reading(envelope.at_ms, reading, resets_at_ms);
    }

    fn reading(&mut self, at_ms: u64, reading: &UsageObserved, resets_at_ms: u64) {
        let key = (reading.connection.clone(), reading.window.clone());
        let next = LastReading {
            provider: reading.provider.clone(),
            used: reading.used,
            limit: reading.limit,
            resets_at_ms,
        };
        if let Some(previous) = self.last.insert(key.clone(), next) {
            if at_ms >= previous.resets_at_ms {
                self.resets.push(reset_row(key, &previous));
            }
        }
    }

    /// The resets seen, in `filter`'s time window and for its provider/connection: the windows
    /// whose announced reset the journal ran past (`end_ms`) without a later reading count too.
    pub fn finish(mut self, filter: &Filter, end_ms: u64) -> Vec<WindowReset> {
        for (key, last) in std::mem::take(&mut self.last) {
            if last.resets_at_ms <= end_ms {
                self.resets.push(reset_row(key, &last));
            }
        }
        let mut resets: Vec<WindowReset> = self
            .resets
            .into_iter()
            .filter(|reset| {
                filter.in_window(reset.reset_at_ms)
                    && filter
                        .provider
                        .as_deref()
                        .is_none_or(|p| p == reset.provider)
                    && filter
                        .connection
                        .as_deref()
                        .is_none_or(|c| c == reset.connection)
            })
            .collect();
        resets.sort_by(|a, b| {
            (a.reset_at_ms, &a.connection, &a.window).cmp(&(
                b.reset_at_ms,
                &b.connection,
                &b.window,
            ))
        });
        resets
    }
}

fn reset_row((connection, window): (String, String), last: &LastReading) -> WindowReset {
    let used_pct = last.used_pct();
    WindowReset {
        connection,
        provider: last.provider.clone(),
        window,
        reset_at_ms: last.resets_at_ms,
        used_pct,
        unused_pct: 100.0 - used_pct,
    }
}

/// The mean unused share over `resets`, each window reset counted once (percent).
pub fn mean_unused_pct(resets: &[WindowReset]) -> Option<f64> {
    (!resets.is_empty())
        .then(|| resets.iter().map(|reset| reset.unused_pct).sum::<f64>() / resets.len() as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use quotaroute_journal::SCHEMA_VERSION;

    const HOUR: u64 = 3_600_000;

    fn reading(at_ms: u64, connection: &str, used_bp: u64, resets_at_ms: u64) -> Envelope {
        Envelope {
            schema_version: SCHEMA_VERSION,
            seq: at_ms,
            at_ms,
            event: Event::UsageObserved(UsageObserved {
                provider: "anthropic".into(),
                connection: connection.into(),
                window: "5h".into(),
                used: used_bp,
                limit: 10_000,
                resets_at_ms: Some(resets_at_ms),
                source: UsageSource::Header,
            }),
        }
    }

    #[test]
    fn a_reading_after_the_reset_closes_the_window_with_its_last_use() {
        let mut resets = WindowResets::default();
        resets.observe(&reading(0, "an-1", 1_000, 5 * HOUR));
        resets.observe(&reading(HOUR, "an-1", 3_000, 5 * HOUR));
        // The next window: the first reading after the reset.
        resets.observe(&reading(6 * HOUR, "an-1", 100, 11 * HOUR));
        let rows = resets.finish(&Filter::default(), 7 * HOUR);
        assert_eq!(rows.len(), 1, "{rows:?}");
        assert_eq!(rows[0].reset_at_ms, 5 * HOUR);
        assert!((rows[0].unused_pct - 70.0).abs() < 1e-9, "{rows:?}");
    }

    #[test]
    fn a_window_the_journal_ran_past_counts_and_one_still_open_does_not() {
        let mut resets = WindowResets::default();
        resets.observe(&reading(0, "an-1", 9_000, 2 * HOUR));
        resets.observe(&reading(0, "an-2", 2_000, 9 * HOUR));
        let rows = resets.finish(&Filter::default(), 3 * HOUR);
        assert_eq!(rows.len(), 1, "{rows:?}");
        assert_eq!(rows[0].connection, "an-1");
        assert!((rows[0].unused_pct - 10.0).abs() < 1e-9);
        assert_eq!(mean_unused_pct(&rows), Some(rows[0].unused_pct));
    }

    #[test]
    fn the_connection_filter_and_leases_are_honoured() {
        let mut resets = WindowResets::default();
        resets.observe(&reading(0, "an-1", 5_000, HOUR));
        resets.observe(&reading(0, "an-2", 5_000, HOUR));
        let mut lease = reading(0, "an-3", 10_000, HOUR);
        if let Event::UsageObserved(observed) = &mut lease.event {
            observed.source = UsageSource::Lease;
        }
        resets.observe(&lease);
        let filter = Filter {
            connection: Some("an-2".into()),
            ..Filter::default()
        };
        let rows = resets.finish(&filter, 2 * HOUR);
        assert_eq!(rows.len(), 1, "{rows:?}");
        assert_eq!(rows[0].connection, "an-2");
    }
}
