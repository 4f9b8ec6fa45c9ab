//! "Why did this turn go to X?" for pacing (behaviour §13 "Seen"): each candidate's pace and
//! binding window from `route_decided.paces`, with what the journal last read of that window
//! (`usage_observed`: how much is used, when it resets), remembered while replay reads it, and
//! the knobs of the rule in force (`pacing_rule`). Owns that memory and its wording only; it
//! does not recompute any pace.

use std::collections::HashMap;
use std::fmt::Write as _;

use quotaroute_actors::policy::pacing_rules::PacingRules;
use quotaroute_journal::{CandidatePace, Envelope, Event, PaceWindows, PacingClock};

use crate::time_parse::format_duration;

/// A window's newest reading: used, limit, reset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ReadingSeen {
    used: u64,
    limit: u64,
    resets_at_ms: Option<u64>,
}

/// The newest reading of every (connection, window) seen so far.
#[derive(Debug, Default)]
pub struct PaceMemory {
    readings: HashMap<(String, String), ReadingSeen>,
    rules: PacingRules,
}

impl PaceMemory {
    /// Remembers a reading; call for every envelope, filtered or not.
    pub fn observe(&mut self, envelope: &Envelope) {
        if let Event::PacingRule(rule) = &envelope.event {
            self.rules.apply(rule);
        }
        if let Event::UsageObserved(observed) = &envelope.event {
            self.readings.insert(
                (observed.connection.clone(), observed.window.clone()),
                ReadingSeen {
                    used: observed.used,
                    limit: observed.limit,
                    resets_at_ms: observed.resets_at_ms,
                },
            );
        }
    }

    /// `rule: exponent 2, demand clock, longest windows`: the knobs `combo` ran with in
    /// `generation` (exponent 1, wall clock, all windows when no `pacing_rule` was journaled for
    /// it: the rule before the knobs, not this binary's default).
    pub fn rule(&self, generation: u64, combo: &str) -> String {
        let knobs = self.rules.knobs(generation, combo);
        let exponent = f64::from(knobs.exponent_pm) / 1_000.0;
        let clock = match knobs.clock {
            PacingClock::Wall => "wall",
            PacingClock::Demand => "demand",
        };
        let windows = match knobs.pace_windows {
            PaceWindows::All => "all",
            PaceWindows::Longest => "longest",
        };
        format!("rule: exponent {exponent}, {clock} clock, {windows} windows")
    }

    /// `k2/m: pace 0.25, 7d 90 % used, resets in 5h00m; k1/m: pace 2.50, 5h`: each paced
    /// candidate, named by `name` (`connection/model`) with its connection `connection`.
    pub fn explain(
        &self,
        paces: &[CandidatePace],
        name: impl Fn(u16) -> (String, Option<String>),
        at_ms: u64,
    ) -> String {
        let mut text = String::new();
        for (i, candidate) in paces.iter().enumerate() {
            let (target, connection) = name(candidate.target);
            if i > 0 {
                text.push_str("; ");
            }
            // Hundredths, rounded half up in integers (per mille 625 reads 0.63).
            let hundredths = candidate.pace.saturating_add(5) / 10;
            let _ = write!(
                text,
                "{target}: pace {}.{:02}",
                hundredths / 100,
                hundredths % 100
            );
            let Some(window) = &candidate.window else {
                continue;
            };
            let _ = write!(text, ", {window}");
            let seen = connection.and_then(|c| self.readings.get(&(c, window.clone())));
            if let Some(seen) = seen {
                let used_pct = u128::from(seen.used) * 100 / u128::from(seen.limit.max(1));
                let _ = write!(text, " {used_pct} % used");
                if let Some(reset) = seen.resets_at_ms.filter(|reset| *reset > at_ms) {
                    let _ = write!(text, ", resets in {}", format_duration(reset - at_ms));
                }
            }
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use quotaroute_journal::{UsageObserved, UsageSource};

    #[test]
    fn a_paced_choice_names_each_candidate_s_pace_window_and_reading() {
        let mut memory = PaceMemory::default();
        memory.observe(&Envelope {
            schema_version: quotaroute_journal::SCHEMA_VERSION,
            seq: 1,
            at_ms: 0,
            event: Event::UsageObserved(UsageObserved {
                provider: "p".into(),
                connection: "k2".into(),
                window: "7d".into(),
                used: 90,
                limit: 100,
                resets_at_ms: Some(5 * 3_600_000),
                source: UsageSource::Header,
            }),
        });
        let paces = [
            CandidatePace {
                target: 0,
                pace: 2_500,
                window: Some("5h".into()),
            },
            CandidatePace {
                target: 1,
                pace: 250,
                window: Some("7d".into()),
            },
        ];
        let name = |i: u16| {
            let connection = format!("k{}", i + 1);
            (format!("{connection}/m"), Some(connection))
        };
        assert_eq!(
            memory.explain(&paces, name, 0),
            "k1/m: pace 2.50, 5h; k2/m: pace 0.25, 7d 90 % used, resets in 5h00m"
        );
    }
}
