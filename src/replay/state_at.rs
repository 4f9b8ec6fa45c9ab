//! `--state-at TIME`: the router state at an instant — breakers, cooldowns, disables, lockouts
//! with remaining time, buckets, DRR deficits, paces and the forecast (behaviour §13) — folded
//! by `RouterState::apply_envelope` (the node's own reducers) and read through the reducers'
//! own `*_at(now)` methods. The journal's latest `config_loaded` stands in for the topology
//! (replay has no config file); breaker settings are the profile's defaults, since overrides
//! are not journaled.

use std::fmt::Write as _;

use std::collections::HashMap;

use quotaroute_actors::policy::exec_key::exec_key;
use quotaroute_actors::policy::router_state::RouterState;
use quotaroute_actors::{AdminState, Topology};
use quotaroute_journal::Envelope;
use serde::Serialize;

use crate::time_parse::{format_duration, format_utc_ms};

/// The fold of every envelope at or before `at_ms`.
#[derive(Debug, Default)]
pub struct StateFold {
    at_ms: u64,
    state: RouterState,
    applied: u64,
}

impl StateFold {
    pub fn new(at_ms: u64) -> Self {
        StateFold {
            at_ms,
            state: RouterState::default(),
            applied: 0,
        }
    }

    /// Applies `envelope` if it happened at or before the instant.
    pub fn observe(&mut self, envelope: &Envelope) {
        if envelope.at_ms <= self.at_ms {
            self.state.apply_envelope(envelope);
            self.applied += 1;
        }
    }

    pub fn state(&self) -> &RouterState {
        &self.state
    }

    pub fn finish(self) -> StateAt {
        StateAt {
            at_ms: self.at_ms,
            last_seq: self.state.last_seq,
            events_applied: self.applied,
            config_generation: self.state.config().map(|c| c.generation),
            state: view(&self.state, self.at_ms),
        }
    }
}

/// The state at an instant, shaped like `GET /admin/state` plus where in the journal it is.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StateAt {
    pub at_ms: u64,
    pub last_seq: u64,
    pub events_applied: u64,
    pub config_generation: Option<u64>,
    #[serde(flatten)]
    pub state: AdminState,
}

/// `AdminState::build` for replay: the journaled config stands in for the `Topology`; nothing
/// is in flight.
pub fn view(state: &RouterState, now_ms: u64) -> AdminState {
    match state.config() {
        Some(config) => AdminState::build(
            &Topology::from_recorded(config),
            state,
            &HashMap::new(),
            now_ms,
        ),
        None => AdminState {
            providers: Vec::new(),
            connections: Vec::new(),
            combos: Vec::new(),
        },
    }
}

fn remaining(ms: Option<u64>) -> String {
    ms.map_or("-".to_string(), format_duration)
}

/// The providers' table: each breaker and when it lets requests through again.
fn write_providers(out: &mut String, s: &AdminState) {
    let _ = writeln!(
        *out,
        "{:<12} {:<8} {:<10} {:>8} {:>6}  {:>10}",
        "PROVIDER", "PROFILE", "BREAKER", "FAILURES", "CYCLES", "RETRY IN"
    );
    for p in &s.providers {
        let _ = writeln!(
            *out,
            "{:<12} {:<8} {:<10} {:>8} {:>6}  {:>10}",
            p.name,
            p.profile,
            p.breaker,
            p.failures,
            p.cycles,
            remaining(p.retry_after_ms)
        );
    }
}

/// The text rendering: providers, connections (with lockouts and buckets), combos.
pub fn render_text(at: &StateAt) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "state at {} (after seq {}, {} events applied, config generation {})",
        format_utc_ms(at.at_ms),
        at.last_seq,
        at.events_applied,
        at.config_generation
            .map_or("none".to_string(), |g| g.to_string())
    );
    let s = &at.state;
    let _ = writeln!(out);
    write_providers(&mut out, s);
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "{:<12} {:<12} {:<8} {:>10} {:>6}  {:<20}",
        "CONNECTION", "PROVIDER", "AUTH", "COOLING", "LEVEL", "DISABLED"
    );
    for c in &s.connections {
        let disabled = c.disabled.as_ref().map_or("-".to_string(), |d| {
            format!(
                "{} {}",
                d.reason,
                d.remaining_ms
                    .map_or("until cleared".to_string(), format_duration)
            )
        });
        let cooling = if c.cooldown_remaining_ms > 0 {
            format_duration(c.cooldown_remaining_ms)
        } else {
            "-".to_string()
        };
        let _ = writeln!(
            out,
            "{:<12} {:<12} {:<8} {:>10} {:>6}  {:<20}",
            c.id, c.provider, c.auth, cooling, c.cooldown_level, disabled
        );
        for lock in &c.lockouts {
            let _ = writeln!(
                out,
                "  lockout {}: {} {} left, failures={}{}",
                lock.model,
                lock.reason,
                format_duration(lock.remaining_ms),
                lock.failure_count,
                lock.error_code
                    .map(|status| format!(" status={status}"))
                    .unwrap_or_default()
                    + &lock
                        .upstream_code
                        .as_ref()
                        .map(|c| format!(" code={c}"))
                        .unwrap_or_default()
            );
        }
        for bucket in &c.buckets {
            let _ = writeln!(
                out,
                "  bucket {}: {}/{}{}{}{} pace {:.2}{}",
                bucket.window,
                bucket.used,
                bucket.limit,
                if bucket.saturated { " SATURATED" } else { "" },
                if bucket.reserved { " RESERVED" } else { "" },
                bucket
                    .resets_at_ms
                    .map(|r| format!(" resets {}", format_utc_ms(r)))
                    .unwrap_or_default(),
                bucket.pace,
                bucket
                    .runs_out_at_ms
                    .map(|r| format!(" runs out {}", format_utc_ms(r)))
                    .unwrap_or_default()
            );
        }
    }
    for combo in &s.combos {
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "combo {} ({}){}{}",
            combo.name,
            combo.strategy,
            combo
                .runs_out_at_ms
                .map(|r| format!(" RUNS OUT {}", format_utc_ms(r)))
                .unwrap_or_default(),
            combo
                .next_reset_at_ms
                .map(|r| format!(" next reset {}", format_utc_ms(r)))
                .unwrap_or_default()
        );
        for t in &combo.targets {
            let _ = writeln!(
                out,
                "  {:<28} weight={:<3} deficit={:<4} pace={:.2}",
                exec_key(&t.connection, &t.model),
                t.weight,
                t.deficit,
                t.pace
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use quotaroute_journal::testkit::sample_envelopes;

    #[test]
    fn item3_only_events_up_to_the_instant_are_folded() {
        let envelopes = sample_envelopes(1, 1_000, 30);
        let mut fold = StateFold::new(1_009);
        for envelope in &envelopes {
            fold.observe(envelope);
        }
        let at = fold.finish();
        assert_eq!(at.last_seq, 10);
        assert_eq!(at.events_applied, 10);
        assert!(render_text(&at).contains("state at 1970-01-01T00:00:01.009Z"));
    }
}
