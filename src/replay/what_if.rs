//! `--what-if CONFIG`: the recorded outcomes (`request_succeeded` / `request_failed`) re-run
//! through the same pure policy — `BreakerState::on_outcome`, `ConnectionState::on_outcome`
//! (cooldown + lockout), each followed by `apply` of what they return, exactly as the actors
//! compose them — with CONFIG's resilience settings, then compared with what the journal says
//! happened. Owns the simulation and its table; the settings come from `config::topology`.
//!
//! What a replay cannot know: where an attempt would have gone had its target been blocked under
//! the new settings. Such attempts are counted as "not sent" and their outcome is not applied
//! (the upstream would not have seen them); requests that found every target of their combo
//! blocked at their `route_decided` instant are "nothing to serve".

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use quotaroute_actors::policy::breaker::{BreakerSettings, BreakerState};
use quotaroute_actors::policy::classify::rules;
use quotaroute_actors::policy::connection_state::ConnectionState;
use quotaroute_actors::topology::recorded_targets;
use quotaroute_actors::{ConnectionSpec, Outcome};
use quotaroute_journal::{ActionBy, AuthKind, BreakerPhase, ConfigLoaded, Envelope, Event};
use serde::Serialize;

use crate::config::topology::{
    breaker_settings, bucket_settings, cooldown_settings, lockout_settings,
};
use crate::config::Config;
use crate::replay::periods::{PeriodTracker, Periods};
use crate::time_parse::format_duration;

/// One compared figure.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Row {
    /// `breaker openings`, `breaker open`, `cooling`, `disabled`, `locked`, …
    pub measure: String,
    /// The provider or connection it is about (`""` for totals).
    pub subject: String,
    pub recorded: u64,
    pub what_if: u64,
    /// `true`: a duration in milliseconds; `false`: a count.
    pub is_duration: bool,
}

/// The whole comparison.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WhatIfReport {
    pub config: String,
    pub outcomes_replayed: u64,
    /// Attempts whose target the what-if settings would have had blocked.
    pub attempts_not_sent: u64,
    pub rows: Vec<Row>,
}

/// The simulation, fed one envelope at a time in journal order.
#[derive(Debug)]
pub struct WhatIf {
    config: Config,
    config_label: String,
    recorded: PeriodTracker,
    simulated: PeriodTracker,
    topology: Option<ConfigLoaded>,
    breakers: BTreeMap<String, (BreakerState, BreakerSettings)>,
    connections: BTreeMap<String, (ConnectionState, ConnectionSpec)>,
    recorded_unservable: BTreeSet<String>,
    simulated_unservable: BTreeSet<String>,
    outcomes: u64,
    not_sent: u64,
    span: Option<(u64, u64)>,
}

impl WhatIf {
    pub fn new(config: Config, config_label: impl Into<String>) -> Self {
        WhatIf {
            config,
            config_label: config_label.into(),
            recorded: PeriodTracker::default(),
            simulated: PeriodTracker::default(),
            topology: None,
            breakers: BTreeMap::new(),
            connections: BTreeMap::new(),
            recorded_unservable: BTreeSet::new(),
            simulated_unservable: BTreeSet::new(),
            outcomes: 0,
            not_sent: 0,
            span: None,
        }
    }

    pub fn observe(&mut self, envelope: &Envelope) {
        let at_ms = envelope.at_ms;
        self.span = Some(match self.span {
            None => (at_ms, at_ms),
            Some((start, end)) => (start.min(at_ms), end.max(at_ms)),
        });
        self.recorded.observe(at_ms, &envelope.event);
        match &envelope.event {
            Event::ConfigLoaded(config) => self.topology = Some(config.clone()),
            Event::RouteDecided(decided) => {
                if decided.chosen.is_none() {
                    self.recorded_unservable.insert(decided.request_id.clone());
                }
                if self.all_targets_blocked(&decided.combo, at_ms) {
                    self.simulated_unservable.insert(decided.request_id.clone());
                }
            }
            Event::RequestSucceeded(_) | Event::RequestFailed(_) => {
                if let Some(outcome) = Outcome::from_request_event(&envelope.event, at_ms) {
                    self.replay_outcome(at_ms, outcome);
                }
            }
            // Operators acted at the same instants in the what-if world.
            Event::ConnectionCleared(e) if e.by != ActionBy::Router => {
                let event = envelope.event.clone();
                self.connection(&e.provider, &e.connection)
                    .0
                    .apply(at_ms, &event);
                self.simulated.observe(at_ms, &event);
            }
            Event::ModelUnlocked(e) if e.by == ActionBy::Admin => {
                let event = envelope.event.clone();
                self.connection(&e.provider, &e.connection)
                    .0
                    .apply(at_ms, &event);
                self.simulated.observe(at_ms, &event);
            }
            Event::BreakerTransition(e)
                if e.by == ActionBy::Admin && e.to == BreakerPhase::Closed =>
            {
                let event = envelope.event.clone();
                self.breaker(&e.provider).0.apply(at_ms, &event);
                self.simulated.observe(at_ms, &event);
            }
            _ => {}
        }
    }

    fn profile_of(&self, provider: &str) -> AuthKind {
        self.topology
            .as_ref()
            .and_then(|t| t.providers.iter().find(|p| p.name == provider))
            .map_or(AuthKind::ApiKey, |p| p.profile)
    }

    fn breaker(&mut self, provider: &str) -> &mut (BreakerState, BreakerSettings) {
        let profile = self.profile_of(provider);
        let config = &self.config;
        self.breakers
            .entry(provider.to_string())
            .or_insert_with(|| {
                (
                    BreakerState::new(provider),
                    breaker_settings(config, provider, profile),
                )
            })
    }

    fn connection(&mut self, provider: &str, id: &str) -> &mut (ConnectionState, ConnectionSpec) {
        let info = self
            .topology
            .as_ref()
            .and_then(|t| t.connections.iter().find(|c| c.id == id));
        let config = &self.config;
        self.connections.entry(id.to_string()).or_insert_with(|| {
            let auth = info.map_or(AuthKind::ApiKey, |c| c.auth);
            let spec = ConnectionSpec {
                id: id.to_string(),
                provider: provider.to_string(),
                auth,
                weight: info.map_or(1, |c| c.weight),
                max_concurrent: info.and_then(|c| c.max_concurrent),
                models: info.and_then(|c| c.models.clone()),
                limits: Default::default(),
                cooldown: cooldown_settings(config, provider, auth),
                lockout: lockout_settings(config, provider),
                buckets: bucket_settings(config, provider),
            };
            (ConnectionState::new(provider, id), spec)
        })
    }

    /// Whether `(provider, connection, model)` is hard-blocked under the what-if state at `now`.
    fn blocked(&mut self, provider: &str, connection: &str, model: &str, now_ms: u64) -> bool {
        let (breaker, settings) = self.breaker(provider);
        if breaker.phase_at(now_ms, settings) == BreakerPhase::Open {
            return true;
        }
        self.connection(provider, connection)
            .0
            .block_for(model, now_ms)
            .is_some()
    }

    fn all_targets_blocked(&mut self, combo: &str, now_ms: u64) -> bool {
        let Some(targets) = self.topology.as_ref().and_then(|config| {
            let (_, targets) = recorded_targets(config, combo)?;
            Some(
                targets
                    .into_iter()
                    .filter_map(|t| {
                        let provider = config
                            .connections
                            .iter()
                            .find(|c| c.id == t.connection)?
                            .provider
                            .clone();
                        Some((provider, t.connection, t.model))
                    })
                    .collect::<Vec<_>>(),
            )
        }) else {
            return false;
        };
        !targets.is_empty()
            && targets
                .iter()
                .all(|(p, c, m)| self.blocked(p, c, m, now_ms))
    }

    /// Decision::report's split: the breaker hears trips and successes, the connection hears
    /// everything (`ConnectionState::on_outcome`), each change applied as the actors apply it.
    fn replay_outcome(&mut self, now_ms: u64, mut outcome: Outcome) {
        self.outcomes += 1;
        if self.blocked(
            &outcome.provider,
            &outcome.connection,
            &outcome.model,
            outcome.started_at_ms,
        ) {
            self.not_sent += 1;
            return;
        }
        let class_rules = rules(outcome.result.class);
        let signal = if class_rules.trips_breaker {
            Some(true)
        } else if class_rules.counts_as_breaker_success {
            Some(false)
        } else {
            None
        };
        let (breaker, settings) = self.breaker(&outcome.provider);
        // Replay cannot see probe tokens: the first outcome sent while HALF_OPEN is the probe.
        outcome.was_probe =
            breaker.phase_at(outcome.started_at_ms, settings) == BreakerPhase::HalfOpen;
        let breaker_events = match signal {
            Some(failure) => breaker.on_outcome(
                &outcome.provider,
                &outcome.connection,
                failure,
                outcome.started_at_ms,
                outcome.was_probe,
                now_ms,
                settings,
            ),
            None => Vec::new(),
        };
        for event in &breaker_events {
            breaker.apply(now_ms, event);
        }
        let (connection, spec) = self.connection(&outcome.provider, &outcome.connection);
        let connection_events = connection.on_outcome(&outcome, now_ms, spec);
        for event in &connection_events {
            connection.apply(now_ms, event);
        }
        for event in breaker_events.iter().chain(&connection_events) {
            self.simulated.observe(now_ms, event);
        }
    }

    pub fn finish(self) -> WhatIfReport {
        let (start, end) = self.span.unwrap_or((0, 0));
        let recorded = self.recorded.finish(start, end);
        let simulated = self.simulated.finish(start, end);
        let mut providers: BTreeSet<String> = self.breakers.keys().cloned().collect();
        let mut connections: BTreeSet<String> = self.connections.keys().cloned().collect();
        if let Some(topology) = &self.topology {
            providers.extend(topology.providers.iter().map(|p| p.name.clone()));
            connections.extend(topology.connections.iter().map(|c| c.id.clone()));
        }
        let mut rows = Vec::new();
        let count =
            |p: &Periods, name: &str| u64::from(p.breaker_openings.get(name).copied().unwrap_or(0));
        for provider in &providers {
            rows.push(row(
                "breaker openings",
                provider,
                count(&recorded, provider),
                count(&simulated, provider),
                false,
            ));
            rows.push(row(
                "breaker open",
                provider,
                recorded.breaker_open_ms(provider),
                simulated.breaker_open_ms(provider),
                true,
            ));
        }
        let locked = |p: &Periods, id: &str| p.locked_ms(id).values().sum::<u64>();
        for id in &connections {
            rows.push(row(
                "cooling",
                id,
                recorded.cooling_ms(id),
                simulated.cooling_ms(id),
                true,
            ));
            rows.push(row(
                "locked (all models)",
                id,
                locked(&recorded, id),
                locked(&simulated, id),
                true,
            ));
            let (r, s) = (recorded.disabled_ms(id), simulated.disabled_ms(id));
            if r > 0 || s > 0 {
                rows.push(row("disabled", id, r, s, true));
            }
        }
        rows.push(row(
            "requests with nothing to serve",
            "",
            self.recorded_unservable.len() as u64,
            self.simulated_unservable.len() as u64,
            false,
        ));
        WhatIfReport {
            config: self.config_label,
            outcomes_replayed: self.outcomes,
            attempts_not_sent: self.not_sent,
            rows,
        }
    }
}

fn row(measure: &str, subject: &str, recorded: u64, what_if: u64, is_duration: bool) -> Row {
    Row {
        measure: measure.to_string(),
        subject: subject.to_string(),
        recorded,
        what_if,
        is_duration,
    }
}

/// The "recorded vs what-if" table.
pub fn render_text(report: &WhatIfReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "what-if {}: {} recorded outcomes re-run; {} attempts would not have been sent (target blocked)",
        report.config, report.outcomes_replayed, report.attempts_not_sent
    );
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "{:<32} {:<14} {:>10} {:>10}  {:>10}",
        "MEASURE", "SUBJECT", "RECORDED", "WHAT-IF", "CHANGE"
    );
    for r in &report.rows {
        let show = |v: u64| {
            if r.is_duration {
                format_duration(v)
            } else {
                v.to_string()
            }
        };
        let change = match r.what_if.cmp(&r.recorded) {
            std::cmp::Ordering::Equal => "=".to_string(),
            std::cmp::Ordering::Greater => format!("+{}", show(r.what_if - r.recorded)),
            std::cmp::Ordering::Less => format!("-{}", show(r.recorded - r.what_if)),
        };
        let _ = writeln!(
            out,
            "{:<32} {:<14} {:>10} {:>10}  {:>10}",
            r.measure,
            r.subject,
            show(r.recorded),
            show(r.what_if),
            change
        );
    }
    out
}
