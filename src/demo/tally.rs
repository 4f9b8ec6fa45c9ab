//! Counting the journal: per connection what was served and failed (and on which model), which
//! models were locked, and per provider every breaker transition. Fed envelope by envelope, so
//! the live table can tail the journal and the summary can read it whole. Decides nothing.

use std::collections::BTreeMap;

use quotaroute_actors::admin_state::lock_reason_name;
use quotaroute_journal::{BreakerPhase, Envelope, Event, Journal};

/// One lock the router placed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockSeen {
    pub at_ms: u64,
    pub model: String,
    pub reason: &'static str,
    pub until_ms: u64,
}

/// What happened on one connection.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConnectionTally {
    pub served: u64,
    pub failed: u64,
    pub served_by_model: BTreeMap<String, u64>,
    /// Failed upstream requests by status (`"503"`, or the class when there was no status).
    pub failed_by_status: BTreeMap<String, u64>,
    pub cooldowns: u64,
    pub lockouts: Vec<LockSeen>,
}

/// One breaker transition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransitionSeen {
    pub at_ms: u64,
    pub from: BreakerPhase,
    pub to: BreakerPhase,
}

/// Every breaker transition of one provider.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProviderTally {
    pub transitions: Vec<TransitionSeen>,
}

impl ProviderTally {
    pub fn openings(&self) -> usize {
        self.transitions
            .iter()
            .filter(|t| t.to == BreakerPhase::Open)
            .count()
    }
}

/// The journal, counted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JournalTally {
    /// When the (first) node started: times in the summary are relative to it.
    pub started_at_ms: Option<u64>,
    /// The next seq to read when tailing.
    pub next_seq: u64,
    pub connections: BTreeMap<String, ConnectionTally>,
    pub providers: BTreeMap<String, ProviderTally>,
    pub damaged: u64,
}

impl JournalTally {
    /// Counts one envelope; envelopes before `next_seq` were counted already and are ignored.
    pub fn add(&mut self, envelope: &Envelope) {
        if envelope.seq < self.next_seq {
            return;
        }
        self.next_seq = envelope.seq + 1;
        match &envelope.event {
            Event::NodeStarted(_) => {
                self.started_at_ms.get_or_insert(envelope.at_ms);
            }
            Event::RequestSucceeded(event) => {
                let connection = self.connection(&event.connection);
                connection.served += 1;
                *connection
                    .served_by_model
                    .entry(event.model.clone())
                    .or_default() += 1;
            }
            Event::RequestFailed(event) => {
                let connection = self.connection(&event.connection);
                connection.failed += 1;
                let status = event
                    .status
                    .map_or_else(|| event.class.as_str().to_string(), |s| s.to_string());
                *connection.failed_by_status.entry(status).or_default() += 1;
            }
            Event::ConnectionCooldown(event) => {
                self.connection(&event.connection).cooldowns += 1;
            }
            Event::ModelLocked(event) => {
                self.connection(&event.connection).lockouts.push(LockSeen {
                    at_ms: envelope.at_ms,
                    model: event.model.clone(),
                    reason: lock_reason_name(event.reason),
                    until_ms: event.until_ms,
                });
            }
            Event::BreakerTransition(event) => {
                self.providers
                    .entry(event.provider.clone())
                    .or_default()
                    .transitions
                    .push(TransitionSeen {
                        at_ms: envelope.at_ms,
                        from: event.from,
                        to: event.to,
                    });
            }
            _ => {}
        }
    }

    /// Counts every envelope from `next_seq` on; damaged records are counted and skipped.
    pub fn read_new(&mut self, journal: &dyn Journal) {
        let envelopes: Vec<_> = journal.read_from(self.next_seq).collect();
        for envelope in envelopes {
            match envelope {
                Ok(envelope) => self.add(&envelope),
                Err(_) => self.damaged += 1,
            }
        }
    }

    fn connection(&mut self, id: &str) -> &mut ConnectionTally {
        self.connections.entry(id.to_string()).or_default()
    }

    /// `at_ms` as seconds since the node started, e.g. `+1.6s`.
    pub fn relative(&self, at_ms: u64) -> String {
        let since = at_ms.saturating_sub(self.started_at_ms.unwrap_or(at_ms));
        format!("+{:.1}s", since as f64 / 1000.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use quotaroute_journal::{
        ActionBy, BreakerTransition, LockReason, ModelLocked, NodeStarted, OutcomeClass,
        RequestFailed, RequestSucceeded, ResetSource, SCHEMA_VERSION,
    };

    fn envelope(seq: u64, at_ms: u64, event: Event) -> Envelope {
        Envelope {
            schema_version: SCHEMA_VERSION,
            seq,
            at_ms,
            event,
        }
    }

    fn succeeded(connection: &str, model: &str) -> Event {
        Event::RequestSucceeded(RequestSucceeded {
            request_id: "r".into(),
            combo: "team".into(),
            provider: "openai".into(),
            connection: connection.into(),
            model: model.into(),
            status: 200,
            attempt: 1,
            latency_ms: 1,
            tokens_in: 1,
            tokens_out: 1,
            stream: false,
            skipped: vec![],
        })
    }

    fn failed(connection: &str, status: Option<u16>, class: OutcomeClass) -> Event {
        Event::RequestFailed(RequestFailed {
            request_id: "r".into(),
            combo: "claude".into(),
            provider: "anthropic".into(),
            connection: connection.into(),
            model: "claude-3-5-haiku".into(),
            status,
            class,
            error_code: None,
            message: None,
            attempt: 1,
            latency_ms: 1,
            reset_hint_ms: None,
            stream: false,
            after_first_content: false,
            skipped: vec![],
        })
    }

    #[test]
    fn counts_served_by_model_failures_by_status_locks_and_openings() {
        let events = vec![
            Event::NodeStarted(NodeStarted {
                version: "0".into(),
                pid: 1,
                recovered_seq: 0,
            }),
            succeeded("oa-1", "gpt-4o-mini"),
            succeeded("oa-1", "gpt-4o"),
            succeeded("oa-1", "gpt-4o-mini"),
            failed("an-1", Some(503), OutcomeClass::ServerError),
            failed("an-1", None, OutcomeClass::Network),
            Event::ModelLocked(ModelLocked {
                provider: "openai".into(),
                connection: "oa-1".into(),
                model: "gpt-4o".into(),
                reason: LockReason::RateLimited,
                status: Some(429),
                error_code: None,
                until_ms: 9_000,
                failure_count: 1,
                source: ResetSource::Upstream,
            }),
            Event::BreakerTransition(BreakerTransition {
                provider: "anthropic".into(),
                from: BreakerPhase::Degraded,
                to: BreakerPhase::Open,
                failures: 6,
                cycles: 1,
                until_ms: Some(3_000),
                by: ActionBy::Router,
            }),
        ];
        let mut tally = JournalTally::default();
        for (seq, event) in events.into_iter().enumerate() {
            tally.add(&envelope(seq as u64 + 1, 1_000 + seq as u64 * 100, event));
        }
        let oa1 = &tally.connections["oa-1"];
        assert_eq!(oa1.served, 3);
        assert_eq!(oa1.served_by_model["gpt-4o-mini"], 2);
        assert_eq!(oa1.lockouts.len(), 1);
        assert_eq!(oa1.lockouts[0].reason, "rate_limited");
        let an1 = &tally.connections["an-1"];
        assert_eq!(an1.failed, 2);
        assert_eq!(an1.failed_by_status["503"], 1);
        assert_eq!(an1.failed_by_status["network"], 1);
        assert_eq!(tally.providers["anthropic"].openings(), 1);
        assert_eq!(tally.relative(1_700), "+0.7s");
        assert_eq!(tally.next_seq, 9);
    }

    #[test]
    fn an_envelope_already_counted_is_not_counted_twice() {
        let mut tally = JournalTally::default();
        tally.add(&envelope(5, 0, succeeded("oa-2", "gpt-4o-mini")));
        tally.add(&envelope(5, 0, succeeded("oa-2", "gpt-4o-mini")));
        tally.add(&envelope(4, 0, succeeded("oa-2", "gpt-4o-mini")));
        assert_eq!(tally.connections["oa-2"].served, 1);
    }
}
