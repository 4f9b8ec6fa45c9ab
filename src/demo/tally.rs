//! Counting the journal: per connection what was served (by model) and what failed. Fed
//! envelope by envelope, so the live table can tail the journal while the node runs and the
//! summary can read it whole afterwards. Decides nothing.

use std::collections::BTreeMap;

use quotaroute_journal::{Envelope, Event, Journal};

/// What happened on one connection.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConnectionTally {
    pub served: u64,
    pub failed: u64,
    pub served_by_model: BTreeMap<String, u64>,
    /// Input tokens the upstream reported on this connection's successes.
    pub input_tokens: u64,
    /// Of those, read from the upstream's prompt cache (behaviour §10).
    pub cached_input_tokens: u64,
}

/// The journal, counted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JournalTally {
    /// The next seq to read when tailing.
    pub next_seq: u64,
    pub connections: BTreeMap<String, ConnectionTally>,
    /// Unreadable records skipped (the replay summary reports them in detail).
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
            Event::RequestSucceeded(event) => {
                let connection = self.connection(&event.connection);
                connection.served += 1;
                connection.input_tokens += event.tokens_in;
                connection.cached_input_tokens += event.tokens_cached.min(event.tokens_in);
                *connection
                    .served_by_model
                    .entry(event.model.to_string())
                    .or_default() += 1;
            }
            Event::RequestFailed(event) => self.connection(&event.connection).failed += 1,
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

    /// Input tokens and cached input tokens over every connection.
    pub fn cached_input(&self) -> (u64, u64) {
        self.connections
            .values()
            .fold((0, 0), |(input, cached), c| {
                (input + c.input_tokens, cached + c.cached_input_tokens)
            })
    }

    fn connection(&mut self, id: &str) -> &mut ConnectionTally {
        self.connections.entry(id.to_string()).or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use quotaroute_journal::{OutcomeClass, SCHEMA_VERSION};

    fn envelope(seq: u64, at_ms: u64, event: Event) -> Envelope {
        Envelope {
            schema_version: SCHEMA_VERSION,
            seq,
            at_ms,
            event,
        }
    }

    fn succeeded(connection: &str, model: &str) -> Event {
        quotaroute_journal::testkit::succeeded("openai", connection, model, 1, 1)
    }

    fn failed(connection: &str, status: Option<u16>, class: OutcomeClass) -> Event {
        quotaroute_journal::testkit::failed(
            "anthropic",
            connection,
            "claude-3-5-haiku",
            status,
            class,
        )
    }

    #[test]
    fn counts_served_by_model_and_failures_per_connection() {
        let events = vec![
            succeeded("oa-1", "gpt-4o-mini"),
            succeeded("oa-1", "gpt-4o"),
            succeeded("oa-1", "gpt-4o-mini"),
            failed("an-1", Some(503), OutcomeClass::ServerError),
            failed("an-1", None, OutcomeClass::Network),
        ];
        let mut tally = JournalTally::default();
        for (seq, event) in events.into_iter().enumerate() {
            tally.add(&envelope(seq as u64 + 1, 1_000, event));
        }
        let oa1 = &tally.connections["oa-1"];
        assert_eq!(oa1.served, 3);
        assert_eq!(oa1.served_by_model["gpt-4o-mini"], 2);
        assert_eq!(oa1.served_by_model["gpt-4o"], 1);
        assert_eq!(tally.connections["an-1"].failed, 2);
        assert_eq!(tally.connections["an-1"].served, 0);
        assert_eq!(tally.next_seq, 6);
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
