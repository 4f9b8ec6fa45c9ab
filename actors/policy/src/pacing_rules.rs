//! What pacing learns from the journal (behaviour §13): the knobs of the rule each config
//! generation ran with (its `pacing_rule`; a generation without one ran
//! [`PacingKnobs::UNJOURNALED`], whatever this binary's default) and each
//! combo's demand by hour of the week (from its `route_decided`s) — what replay, `--what-if`
//! and the router's fold read to take a paced turn as the node took it.

use std::collections::BTreeMap;

use quotaroute_journal::{ComboPacing, PacingKnobs, PacingRule, RouteDecided};

use crate::demand_profile::DemandProfile;

/// How many generations are kept (as `RouterState` keeps configs: a decision names the
/// current generation or, around a reload, one before it).
const GENERATIONS_KEPT: usize = 8;

/// Journaled `pacing_rule`s by generation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PacingRules {
    by_generation: BTreeMap<u64, PacingRule>,
}

impl PacingRules {
    /// Remembers `rule` for its generation (the newest few kept).
    pub fn apply(&mut self, rule: &PacingRule) {
        self.by_generation.insert(rule.generation, rule.clone());
        while self.by_generation.len() > GENERATIONS_KEPT {
            self.by_generation.pop_first();
        }
    }

    /// The knobs `combo` ran with in `generation`: its own, else the defaults (an implicit
    /// combo), else [`PacingKnobs::UNJOURNALED`] (no `pacing_rule` journaled: not the default
    /// of this binary, which a journal may predate).
    pub fn knobs(&self, generation: u64, combo: &str) -> PacingKnobs {
        self.by_generation
            .get(&generation)
            .map_or(PacingKnobs::UNJOURNALED, |rule| {
                rule.combos
                    .iter()
                    .find(|entry| entry.combo == combo)
                    .map_or_else(|| rule.defaults(), ComboPacing::knobs)
            })
    }

    /// The exponent `combo` ran with in `generation`, per mille.
    pub fn exponent_pm(&self, generation: u64, combo: &str) -> u32 {
        self.knobs(generation, combo).exponent_pm
    }
}

/// The rules by generation and the demand by combo, as one fold. Compares equal to any other:
/// it is not stored in snapshots (a fold from a snapshot holds less demand history than one
/// from the whole journal while the routing state is the same; the demand clock reads the wall
/// clock until it has a week again).
#[derive(Debug, Clone, Default)]
pub struct PacingFold {
    pub rules: PacingRules,
    pub demand: BTreeMap<String, DemandProfile>,
}

impl PartialEq for PacingFold {
    fn eq(&self, _other: &Self) -> bool {
        true
    }
}

impl PacingFold {
    /// Counts a decision in its combo's demand.
    pub fn count(&mut self, at_ms: u64, decided: &RouteDecided) {
        match self.demand.get_mut(&*decided.combo) {
            Some(profile) => profile.count(at_ms),
            None => self
                .demand
                .entry(decided.combo.to_string())
                .or_default()
                .count(at_ms),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use quotaroute_journal::{PaceWindows, PacingClock};

    #[test]
    fn a_combo_runs_its_own_knobs_else_the_defaults_else_the_unjournaled_rule() {
        let steep = PacingKnobs {
            exponent_pm: 2_000,
            clock: PacingClock::Demand,
            pace_windows: PaceWindows::Longest,
        };
        let defaults = PacingKnobs {
            exponent_pm: 3_000,
            ..PacingKnobs::UNJOURNALED
        };
        let mut rules = PacingRules::default();
        rules.apply(&PacingRule {
            generation: 2,
            exponent_pm: defaults.exponent_pm,
            clock: defaults.clock,
            pace_windows: defaults.pace_windows,
            combos: vec![ComboPacing::new("team", steep)],
        });
        assert_eq!(rules.knobs(2, "team"), steep);
        assert_eq!(rules.knobs(2, "openai/gpt-4o"), defaults);
        assert_eq!(rules.knobs(1, "team"), PacingKnobs::UNJOURNALED);
        // Not the binary's default: a journal without a rule predates it.
        assert_ne!(
            rules.knobs(1, "team"),
            crate::pace::PacingSettings::default().knobs()
        );
        assert_eq!(rules.exponent_pm(2, "team"), 2_000);
    }
}
