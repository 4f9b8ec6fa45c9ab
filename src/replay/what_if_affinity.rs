//! `--what-if affinity=off`: what conversation affinity saved (behaviour §10). Every recorded
//! routing decision is taken again by `policy::selection::decide` — the combo actor's own
//! composition, with `[affinity]` off so groups play no part (encrypted items' maker, a hard
//! affinity, still does) — on the same candidates and eligible set (`recorded_turn`; the
//! recorded hard blocks and room), with its own DRR deficits; the report compares where
//! requests went with and without affinity, and estimates the cached input that affinity's
//! held turns read and DRR alone would have missed.
//!
//! The estimate: `route_decided` does not name its conversation group, so which turn followed
//! which is not in the journal. Without affinity, DRR places a conversation's turns like any
//! other requests, so a later turn (one affinity held or moved) reaches its previous turn's
//! connection with probability `Σ sᵢ²` over the what-if request shares `sᵢ` of its combo; the
//! cached input a held turn read is kept with that probability and otherwise lost. A prefix
//! that conversations share (one system prompt for all) would still be read from cache on a
//! connection that has served any of them; the journal does not say how much of a turn's
//! cached input was such a prefix, so the saving shown is an upper bound.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use quotaroute_actors::policy::admission::{Admit, Block, BreakerAdmission};
use quotaroute_actors::policy::affinity::AffinitySettings;
use quotaroute_actors::policy::exec_key::exec_key;
use quotaroute_actors::policy::quota_share::{DrrKeys, TargetView};
use quotaroute_actors::policy::selection::{
    decide, Candidates, ComboRules, SelectionRequest, SelectionState,
};
use quotaroute_actors::topology::recorded_targets;
use quotaroute_journal::{AffinityOutcome, ConfigLoaded, Envelope, Event, RouteDecided};
use serde::Serialize;

use crate::replay::recorded_turn::{recorded_turn, routed_targets};

/// The `--what-if` value that selects this comparison.
pub const AFFINITY_OFF: &str = "affinity=off";

/// One connection's requests with and without affinity.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ConnectionRouting {
    pub connection: String,
    pub with_affinity: u64,
    pub without_affinity: u64,
}

/// The whole comparison (`--format json` prints it as is).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AffinityOffReport {
    pub what_if: &'static str,
    /// Routing decisions taken again.
    pub requests: u64,
    /// Of those, where the chosen connection differs without affinity.
    pub requests_rerouted: u64,
    /// Decisions affinity had a say in: `new`, `held`, `moved`.
    pub affinity_new: u64,
    pub affinity_held: u64,
    pub affinity_moved: u64,
    /// Later turns (held or moved) that reached the previous turn's connection: recorded
    /// (every held turn) and estimated without affinity.
    pub later_turns: u64,
    pub later_turns_on_previous_connection: u64,
    pub later_turns_on_previous_connection_without: f64,
    /// Input tokens the upstreams reported, and the cached ones: recorded, and estimated
    /// without affinity; `cached_input_saved` is the difference.
    pub input_tokens: u64,
    pub cached_input_tokens: u64,
    pub cached_input_tokens_without: f64,
    pub cached_input_saved: f64,
    pub connections: Vec<ConnectionRouting>,
}

/// One recorded decision, remembered until the end (its tokens arrive after it).
#[derive(Debug)]
struct Decision {
    combo: String,
    affinity: AffinityOutcome,
    with: Option<String>,
    without: Option<String>,
}

/// Fed every envelope in journal order; [`AffinityOff::finish`] reports.
#[derive(Debug, Default)]
pub struct AffinityOff {
    configs: BTreeMap<u64, ConfigLoaded>,
    /// The knobs of pacing's rule per generation (`pacing_rule`).
    pacing: quotaroute_actors::policy::pacing_rules::PacingRules,
    /// Per combo: the deficits of routing without affinity.
    selection: BTreeMap<String, SelectionState>,
    decisions: BTreeMap<String, Decision>,
    /// Per request: input and cached input tokens of its successful attempt.
    tokens: BTreeMap<String, (u64, u64)>,
}

impl AffinityOff {
    pub fn observe(&mut self, envelope: &Envelope) {
        match &envelope.event {
            Event::ConfigLoaded(config) => {
                self.configs.insert(config.generation, config.clone());
            }
            Event::PacingRule(rule) => self.pacing.apply(rule),
            Event::RouteDecided(decided) => self.decide(decided),
            Event::RequestSucceeded(success) => {
                let entry = self
                    .tokens
                    .entry(success.request_id.to_string())
                    .or_default();
                entry.0 += success.tokens_in;
                entry.1 += success.tokens_cached.min(success.tokens_in);
            }
            _ => {}
        }
    }

    /// The recorded decision, and the one `decide` takes on the same candidates and eligible
    /// set without affinity.
    fn decide(&mut self, decided: &RouteDecided) {
        let Some(config) = self.configs.get(&decided.generation) else {
            return;
        };
        let Some((strategy, infos)) = recorded_targets(config, &decided.combo) else {
            return;
        };
        let targets = routed_targets(config, &infos);
        let name = |index: usize| targets.get(index).map(|t| String::from(&*t.connection));
        let with = decided.chosen.and_then(|i| name(usize::from(i)));
        let turn = recorded_turn(decided, &targets);
        let views: Vec<TargetView> = turn
            .positions
            .iter()
            .map(|&index| {
                let target = &targets[index];
                let blocked = decided
                    .skipped
                    .iter()
                    .find(|s| *s.connection == *target.connection && *s.model == *target.model);
                let in_room = decided.room.iter().any(|&r| usize::from(r) == index);
                // The pace the node recorded for it (§13; on pace when none).
                let pace = decided
                    .paces
                    .iter()
                    .find(|p| usize::from(p.target) == index)
                    .map_or(quotaroute_actors::policy::pace::ON_PACE, |p| p.pace);
                TargetView {
                    weight: target.weight,
                    exec_key: exec_key(&target.connection, &target.model).into(),
                    hard_block: blocked.map(|s| (s.reason, s.remaining_ms)),
                    saturated: false,
                    in_flight: 0,
                    max_concurrent: None,
                    // Out of the recorded room (at cap or DEGRADED): no room here either.
                    degraded: !in_room && !decided.room.is_empty(),
                    pace,
                    pace_window: None,
                    // The spending rule the generation journaled (`pacing_rule`; the one
                    // before the knobs when none).
                    spend: quotaroute_actors::policy::pace::spend_pm(
                        pace,
                        f64::from(self.pacing.exponent_pm(decided.generation, &decided.combo))
                            / 1_000.0,
                    ),
                }
            })
            .collect();
        let rules = ComboRules {
            name: &decided.combo,
            generation: decided.generation,
            strategy,
            affinity: AffinitySettings {
                enabled: false,
                ..AffinitySettings::default()
            },
        };
        let request = SelectionRequest {
            request_id: &decided.request_id,
            model: &decided.model,
            client: &turn.client,
            only_connection: None,
            encrypted_maker: turn.encrypted_maker.as_deref(),
            group: None,
        };
        let state = self.selection.entry(decided.combo.to_string()).or_default();
        let Some(without_decided) = decide(
            &rules,
            state,
            Candidates {
                targets: &targets,
                positions: &turn.positions,
                views: &views,
            },
            &request,
            &mut AsRecorded,
            0,
        ) else {
            return;
        };
        let chosen = without_decided.route_decided.chosen;
        state.apply(
            &DrrKeys::new(strategy, &infos),
            &without_decided.route_decided,
            without_decided.changes,
            0,
            (0, 0),
            |_| None,
        );
        let without = if decided.chosen.is_some() {
            chosen.and_then(|i| name(usize::from(i)))
        } else {
            None
        };
        self.decisions.insert(
            decided.request_id.to_string(),
            Decision {
                combo: decided.combo.to_string(),
                affinity: decided.affinity,
                with,
                without,
            },
        );
    }

    pub fn finish(self) -> AffinityOffReport {
        let mut connections: BTreeMap<String, (u64, u64)> = BTreeMap::new();
        let mut by_combo_without: BTreeMap<&str, BTreeMap<&str, u64>> = BTreeMap::new();
        let mut report = AffinityOffReport {
            what_if: AFFINITY_OFF,
            requests: 0,
            requests_rerouted: 0,
            affinity_new: 0,
            affinity_held: 0,
            affinity_moved: 0,
            later_turns: 0,
            later_turns_on_previous_connection: 0,
            later_turns_on_previous_connection_without: 0.0,
            input_tokens: 0,
            cached_input_tokens: 0,
            cached_input_tokens_without: 0.0,
            cached_input_saved: 0.0,
            connections: Vec::new(),
        };
        for decision in self.decisions.values() {
            report.requests += 1;
            if decision.with != decision.without {
                report.requests_rerouted += 1;
            }
            if let Some(with) = &decision.with {
                connections.entry(with.clone()).or_default().0 += 1;
            }
            if let Some(without) = &decision.without {
                connections.entry(without.clone()).or_default().1 += 1;
                *by_combo_without
                    .entry(&decision.combo)
                    .or_default()
                    .entry(without)
                    .or_default() += 1;
            }
        }
        // Σ sᵢ² per combo: the chance DRR alone puts a turn where the previous one went.
        let same_place: BTreeMap<&str, f64> = by_combo_without
            .iter()
            .map(|(combo, counts)| {
                let total: u64 = counts.values().sum();
                let p = counts
                    .values()
                    .map(|&n| {
                        let s = n as f64 / total.max(1) as f64;
                        s * s
                    })
                    .sum();
                (*combo, p)
            })
            .collect();
        for (request_id, decision) in &self.decisions {
            let (input, cached) = self.tokens.get(request_id).copied().unwrap_or((0, 0));
            report.input_tokens += input;
            report.cached_input_tokens += cached;
            let p = same_place
                .get(decision.combo.as_str())
                .copied()
                .unwrap_or(0.0);
            match decision.affinity {
                AffinityOutcome::None => report.cached_input_tokens_without += cached as f64,
                AffinityOutcome::New => {
                    report.affinity_new += 1;
                    report.cached_input_tokens_without += cached as f64;
                }
                AffinityOutcome::Held => {
                    report.affinity_held += 1;
                    report.later_turns += 1;
                    report.later_turns_on_previous_connection += 1;
                    report.later_turns_on_previous_connection_without += p;
                    report.cached_input_tokens_without += cached as f64 * p;
                }
                AffinityOutcome::Moved => {
                    report.affinity_moved += 1;
                    report.later_turns += 1;
                    report.later_turns_on_previous_connection_without += p;
                    report.cached_input_tokens_without += cached as f64;
                }
            }
        }
        report.cached_input_saved =
            report.cached_input_tokens as f64 - report.cached_input_tokens_without;
        report.connections = connections
            .into_iter()
            .map(|(connection, (with, without))| ConnectionRouting {
                connection,
                with_affinity: with,
                without_affinity: without,
            })
            .collect();
        report
    }
}

/// Admission as the recorded decision saw it: its hard blocks are in the views already, and
/// every other target took the request.
struct AsRecorded;

impl Admit for AsRecorded {
    type Taken = ();

    fn breaker(&mut self, _: usize) -> BreakerAdmission {
        BreakerAdmission::Healthy
    }

    fn connection_block(&mut self, _: usize) -> Option<Block> {
        None
    }

    fn take(&mut self, _: usize, _: BreakerAdmission) -> Result<(), Block> {
        Ok(())
    }
}

/// The report as text.
pub fn render_text(report: &AffinityOffReport) -> String {
    let share = |part: f64, whole: u64| {
        if whole == 0 {
            "n/a".to_string()
        } else {
            format!("{:.1} %", 100.0 * part / whole as f64)
        }
    };
    let mut out =
        String::from("WHAT IF affinity=off (every recorded decision taken again by §2 alone)\n");
    let _ = writeln!(
        out,
        "requests {}: {} would go elsewhere; affinity new {}, held {}, moved {}",
        report.requests,
        report.requests_rerouted,
        report.affinity_new,
        report.affinity_held,
        report.affinity_moved
    );
    let _ = writeln!(
        out,
        "{:<16} {:>14} {:>17}",
        "connection", "with affinity", "without affinity"
    );
    for c in &report.connections {
        let _ = writeln!(
            out,
            "{:<16} {:>14} {:>17}",
            c.connection, c.with_affinity, c.without_affinity
        );
    }
    let _ = writeln!(
        out,
        "later turns on the previous turn's connection: {} of {} with affinity, ~{:.1} without (estimated)",
        report.later_turns_on_previous_connection,
        report.later_turns,
        report.later_turns_on_previous_connection_without
    );
    let _ = writeln!(
        out,
        "cached input tokens: {} ({}) with affinity, ~{:.0} ({}) without (estimated); affinity saved ~{:.0} of {} input tokens from being read uncached (at most: prefixes shared by conversations are not told apart)",
        report.cached_input_tokens,
        share(report.cached_input_tokens as f64, report.input_tokens),
        report.cached_input_tokens_without,
        share(report.cached_input_tokens_without, report.input_tokens),
        report.cached_input_saved,
        report.input_tokens
    );
    out
}
