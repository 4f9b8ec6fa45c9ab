//! The recent past the forecast measures rates from (behaviour §13 "Forecast"): each reading
//! window's journaled readings of the last hours (a connection's `UsageBuckets` keeps only the
//! newest) and each combo's decisions per minute. Folded by `RouterState::apply` from the same
//! events as the rest, so replay measures what live measured; but never stored in a snapshot
//! (the layout stays as it is): after a restart from a snapshot it refills from the events
//! after it, and until then a rate is measured over less time, or not at all.
//! Must not decide anything: routing never reads it.

use std::collections::{BTreeMap, VecDeque};

use quotaroute_journal::{Event, UsageObserved};

use crate::forecast::Burn;

/// How far back readings and decisions are kept: longer than any sensible `burn_window_ms`.
pub const HISTORY_MS: u64 = 6 * 3_600_000;
/// Readings kept per window at most (a window journals about one per percent used).
const MAX_SAMPLES: usize = 128;
/// Windows tracked per connection at most.
const MAX_WINDOWS: usize = 64;
/// Decisions are counted per minute.
const DECISION_BIN_MS: u64 = 60_000;
/// How far two readings' resets may differ and still be one window (as `connection_state`
/// allows for relative reset headers).
const SAME_WINDOW_MS: u64 = 60_000;

/// One journaled reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Sample {
    at_ms: u64,
    used: u64,
    limit: u64,
    resets_at_ms: Option<u64>,
}

impl Sample {
    fn used_pm(&self) -> f64 {
        self.used as f64 * 1_000.0 / self.limit.max(1) as f64
    }

    fn same_window(&self, other: &Sample) -> bool {
        match (self.resets_at_ms, other.resets_at_ms) {
            (Some(a), Some(b)) => a.abs_diff(b) <= SAME_WINDOW_MS,
            (None, None) => true,
            _ => false,
        }
    }
}

/// The fold; compares equal to any other (it is not stored, so a fold from a snapshot and one
/// from the whole journal hold different amounts of it while their state is the same).
#[derive(Debug, Clone, Default)]
pub struct BurnHistory {
    /// By connection, then window: readings, oldest first.
    readings: BTreeMap<String, BTreeMap<String, VecDeque<Sample>>>,
    /// By combo: decisions per minute bin.
    decisions: BTreeMap<String, ComboDecisions>,
}

/// One combo's recent decisions.
#[derive(Debug, Clone, Default)]
struct ComboDecisions {
    /// When the oldest decision counted here was made (or its bin began, once pruned), so a
    /// rate is measured over the time there is history for.
    since_ms: u64,
    by_bin: BTreeMap<u64, u64>,
}

impl PartialEq for BurnHistory {
    fn eq(&self, _other: &Self) -> bool {
        true
    }
}

impl BurnHistory {
    /// Takes a `usage_observed` (a reading) or a `route_decided` (a combo's request); other
    /// events are ignored.
    pub fn apply(&mut self, at_ms: u64, event: &Event) {
        match event {
            Event::UsageObserved(observed) => self.observe(at_ms, observed),
            Event::RouteDecided(decided) => {
                let combo = match self.decisions.get_mut(&*decided.combo) {
                    Some(combo) => combo,
                    None => self
                        .decisions
                        .entry(decided.combo.to_string())
                        .or_insert_with(|| ComboDecisions {
                            since_ms: at_ms,
                            by_bin: BTreeMap::new(),
                        }),
                };
                *combo.by_bin.entry(at_ms / DECISION_BIN_MS).or_default() += 1;
                let oldest_kept = at_ms.saturating_sub(HISTORY_MS) / DECISION_BIN_MS;
                while let Some(oldest) = combo.by_bin.first_entry() {
                    if *oldest.key() >= oldest_kept {
                        break;
                    }
                    oldest.remove();
                }
                if let Some(first) = combo.by_bin.keys().next() {
                    combo.since_ms = combo.since_ms.max(first * DECISION_BIN_MS);
                }
            }
            _ => {}
        }
    }

    fn observe(&mut self, at_ms: u64, observed: &UsageObserved) {
        if observed.limit == 0 {
            return;
        }
        let windows = self
            .readings
            .entry(observed.connection.clone())
            .or_default();
        let samples = windows.entry(observed.window.clone()).or_default();
        // As the buckets: a reading older than the newest says nothing new.
        if samples.back().is_some_and(|newest| newest.at_ms > at_ms) {
            return;
        }
        samples.push_back(Sample {
            at_ms,
            used: observed.used,
            limit: observed.limit,
            resets_at_ms: observed.resets_at_ms,
        });
        // Keep one reading at or before the horizon (the anchor of the longest rate).
        let horizon = at_ms.saturating_sub(HISTORY_MS);
        while samples.len() > MAX_SAMPLES || samples.get(1).is_some_and(|s| s.at_ms <= horizon) {
            samples.pop_front();
        }
        while windows.len() > MAX_WINDOWS {
            let stalest = windows
                .iter()
                .min_by_key(|(_, samples)| samples.back().map(|s| s.at_ms))
                .map(|(window, _)| window.clone());
            match stalest {
                Some(window) => windows.remove(&window),
                None => break,
            };
        }
    }

    /// How much of `window` on `connection` was used over the `period_ms` before `now_ms`:
    /// from its reading at `now - period` (the newest at or before it) to its newest reading,
    /// both of the same window (same reset); over less time when the readings go back less
    /// far. `None` without two readings of the current window.
    pub fn window_burn(
        &self,
        connection: &str,
        window: &str,
        now_ms: u64,
        period_ms: u64,
    ) -> Option<Burn> {
        let samples = self.readings.get(connection)?.get(window)?;
        let mut seen = samples.iter().rev().filter(|s| s.at_ms <= now_ms);
        let newest = seen.next()?;
        let start = now_ms.saturating_sub(period_ms);
        let mut anchor = None;
        for sample in seen {
            if !sample.same_window(newest) {
                break;
            }
            anchor = Some(sample);
            if sample.at_ms <= start {
                break;
            }
        }
        let anchor = anchor?;
        Some(Burn {
            used_pm: (newest.used_pm() - anchor.used_pm()).max(0.0),
            span_ms: now_ms - anchor.at_ms.max(start),
        })
    }

    /// `combo`'s decisions per millisecond over the `period_ms` before `now_ms` (counted in
    /// whole minutes, the current one included), or over less time when its history goes
    /// back less far.
    pub fn combo_rate(&self, combo: &str, now_ms: u64, period_ms: u64) -> f64 {
        let Some(combo) = self.decisions.get(combo) else {
            return 0.0;
        };
        let first = now_ms.saturating_sub(period_ms) / DECISION_BIN_MS;
        let last = now_ms / DECISION_BIN_MS;
        let count: u64 = combo
            .by_bin
            .range(first..=last)
            .map(|(_, count)| count)
            .sum();
        let start = (first * DECISION_BIN_MS).max(combo.since_ms);
        // At least a second, so a burst just begun is not read as an endless rate.
        let span = now_ms.saturating_sub(start).max(1_000);
        count as f64 / span as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use quotaroute_journal::UsageSource;

    const T0: u64 = 1_735_689_600_000;
    const MINUTE: u64 = 60_000;

    fn reading(window: &str, used: u64, resets_at_ms: u64) -> Event {
        Event::UsageObserved(UsageObserved {
            provider: "p".into(),
            connection: "k1".into(),
            window: window.into(),
            used,
            limit: 100,
            resets_at_ms: Some(resets_at_ms),
            source: UsageSource::Header,
        })
    }

    #[test]
    fn burn_is_measured_from_the_reading_at_the_period_s_start() {
        let reset = T0 + 300 * MINUTE;
        let mut history = BurnHistory::default();
        for (minute, used) in [(0, 10), (20, 20), (40, 30), (50, 35)] {
            history.apply(T0 + minute * MINUTE, &reading("5h", used, reset));
        }
        // Over the 30 min before minute 60: the reading at minute 20 holds at minute 30.
        assert_eq!(
            history.window_burn("k1", "5h", T0 + 60 * MINUTE, 30 * MINUTE),
            Some(Burn {
                used_pm: 150.0,
                span_ms: 30 * MINUTE
            })
        );
        // Readings going back less far than the period: over what there is.
        assert_eq!(
            history.window_burn("k1", "5h", T0 + 60 * MINUTE, 300 * MINUTE),
            Some(Burn {
                used_pm: 250.0,
                span_ms: 60 * MINUTE
            })
        );
        // As of minute 25 the newest is minute 20's.
        assert_eq!(
            history
                .window_burn("k1", "5h", T0 + 25 * MINUTE, 30 * MINUTE)
                .map(|b| b.used_pm),
            Some(100.0)
        );
        assert_eq!(history.window_burn("k1", "7d", T0, MINUTE), None);
        // A new window (its reset moved on) starts over: one reading, no rate yet.
        history.apply(T0 + 61 * MINUTE, &reading("5h", 1, reset + 300 * MINUTE));
        assert_eq!(
            history.window_burn("k1", "5h", T0 + 62 * MINUTE, 30 * MINUTE),
            None
        );
    }

    fn decided(combo: &str) -> Event {
        Event::RouteDecided(quotaroute_journal::RouteDecided {
            request_id: "r".into(),
            generation: 1,
            combo: combo.into(),
            model: "m".into(),
            room: vec![0],
            chosen: Some(0),
            order: vec![0],
            skipped: vec![],
            affinity: Default::default(),
            client: None,
            group: None,
            paces: vec![],
        })
    }

    #[test]
    fn a_combo_s_rate_is_over_the_period_or_the_history_there_is() {
        let mut history = BurnHistory::default();
        // Six decisions in the first 10 minutes.
        for minute in [0, 2, 4, 6, 8, 10] {
            history.apply(T0 + minute * MINUTE, &decided("pool"));
        }
        // At minute 10 over 30 min: history starts at minute 0, six in 10 minutes.
        let rate = history.combo_rate("pool", T0 + 10 * MINUTE, 30 * MINUTE);
        assert!((rate * MINUTE as f64 - 0.6).abs() < 1e-9, "{rate}");
        // At minute 60 over 30 min: none since minute 30.
        assert_eq!(
            history.combo_rate("pool", T0 + 60 * MINUTE, 30 * MINUTE),
            0.0
        );
        // Over 60 min from minute 40: six in 60 minutes.
        let rate = history.combo_rate("pool", T0 + 40 * MINUTE, 60 * MINUTE);
        assert!((rate * MINUTE as f64 - 0.15).abs() < 1e-9, "{rate}");
        assert_eq!(history.combo_rate("other", T0, MINUTE), 0.0);
    }

    #[test]
    fn history_stays_bounded() {
        let mut history = BurnHistory::default();
        for i in 0..1_000 {
            history.apply(
                T0 + i * MINUTE,
                &reading("5h", i % 100, T0 + 10_000 * MINUTE),
            );
        }
        let samples = &history.readings["k1"]["5h"];
        assert!(samples.len() <= MAX_SAMPLES);
    }
}
