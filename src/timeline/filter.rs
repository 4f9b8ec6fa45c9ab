//! The timeline filters (`--since`, `--until`, `--provider`, `--connection`, `--model`,
//! `--client`, `--translated`, `--kind`) as one predicate over envelopes. Owns matching only, never output.

use quotaroute_journal::{Envelope, Event};

use crate::time_parse::{parse_time, TimeError};
use quotaroute_actors::policy::implicit_combo::ImplicitCombo;

/// A usage error in the filter flags.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FilterError {
    #[error(transparent)]
    Time(#[from] TimeError),
    #[error("unknown event kind `{0}` (kinds: {kinds})", kinds = Event::KINDS.join(", "))]
    Kind(String),
}

/// Which envelopes the user asked for. Empty fields match everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filter {
    /// Inclusive lower bound on `at_ms`.
    pub since_ms: Option<u64>,
    /// Exclusive upper bound on `at_ms`.
    pub until_ms: Option<u64>,
    pub provider: Option<String>,
    pub connection: Option<String>,
    pub model: Option<String>,
    /// Only events about this client (behaviour §11): its request events (`route_decided`,
    /// `request_succeeded`, `request_failed`, which name it since journal schema 3), and its
    /// `client_usage`, `client_limited` and `affinity_bound` events.
    pub client: Option<String>,
    /// Only request events served through translation (behaviour §14): [`ANY_TRANSLATION`]
    /// for any direction, else one direction such as `chat>messages`.
    pub translated: Option<String>,
    /// Contract kind names; empty = every kind.
    pub kinds: Vec<&'static str>,
}

impl Filter {
    /// Builds the filter from the flags' text; relative times count back from `now_ms`.
    pub fn from_flags(
        since: Option<&str>,
        until: Option<&str>,
        provider: Option<&str>,
        connection: Option<&str>,
        model: Option<&str>,
        kind: Option<&str>,
        now_ms: u64,
    ) -> Result<Filter, FilterError> {
        let kinds = match kind {
            None => Vec::new(),
            Some(list) => list
                .split(',')
                .map(str::trim)
                .filter(|k| !k.is_empty())
                .map(|k| {
                    Event::KINDS
                        .iter()
                        .find(|known| **known == k)
                        .copied()
                        .ok_or_else(|| FilterError::Kind(k.to_string()))
                })
                .collect::<Result<_, _>>()?,
        };
        Ok(Filter {
            since_ms: since.map(|t| parse_time(t, now_ms)).transpose()?,
            until_ms: until.map(|t| parse_time(t, now_ms)).transpose()?,
            provider: provider.map(str::to_string),
            connection: connection.map(str::to_string),
            model: model.map(str::to_string),
            client: None,
            translated: None,
            kinds,
        })
    }

    /// Whether `at_ms` lies in the time window.
    pub fn in_window(&self, at_ms: u64) -> bool {
        self.since_ms.is_none_or(|since| at_ms >= since)
            && self.until_ms.is_none_or(|until| at_ms < until)
    }

    /// Whether the event is about the provider/connection/model asked for. Events that name
    /// none of them (node start, config) only match when no such filter is set; a
    /// `route_decided` matches a connection filter when it skipped that connection.
    pub fn matches_subject(&self, event: &Event) -> bool {
        let provider_ok = self.provider.as_deref().is_none_or(|wanted| {
            event.provider() == Some(wanted) || mentions_provider(event, wanted)
        });
        let connection_ok = self.connection.as_deref().is_none_or(|wanted| {
            event.connection() == Some(wanted) || skipped_mentions(event, wanted)
        });
        let model_ok = self
            .model
            .as_deref()
            .is_none_or(|wanted| event.model() == Some(wanted));
        let client_ok = self
            .client
            .as_deref()
            .is_none_or(|wanted| event.client() == Some(wanted));
        let translated_ok = self
            .translated
            .as_deref()
            .is_none_or(|wanted| translated_matches(event, wanted));
        provider_ok && connection_ok && model_ok && client_ok && translated_ok
    }

    /// The whole predicate.
    pub fn matches(&self, envelope: &Envelope) -> bool {
        self.in_window(envelope.at_ms)
            && (self.kinds.is_empty() || self.kinds.contains(&envelope.event.kind()))
            && self.matches_subject(&envelope.event)
    }
}

/// `--translated` without a direction.
pub const ANY_TRANSLATION: &str = "any";

/// Whether `event` is a request event translated as `wanted` says.
fn translated_matches(event: &Event, wanted: &str) -> bool {
    let translated = match event {
        Event::RequestSucceeded(e) => e.translated.as_deref(),
        Event::RequestFailed(e) => e.translated.as_deref(),
        _ => None,
    };
    translated.is_some_and(|direction| wanted == ANY_TRANSLATION || direction == wanted)
}

/// `route_decided` has no provider field; its combo may be `provider/model`.
fn mentions_provider(event: &Event, provider: &str) -> bool {
    match event {
        Event::RouteDecided(decided) => ImplicitCombo::parse(&decided.combo)
            .is_some_and(|implicit| implicit.provider == provider),
        _ => false,
    }
}

fn skipped_mentions(event: &Event, connection: &str) -> bool {
    match event {
        Event::RouteDecided(decided) => decided.skipped.iter().any(|s| s.connection == connection),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use quotaroute_journal::testkit::{sample_envelopes, sample_event, KIND_COUNT};
    use quotaroute_journal::{Envelope, SCHEMA_VERSION};

    #[test]
    fn unknown_kind_is_a_usage_error_naming_the_kinds() {
        let error = Filter::from_flags(None, None, None, None, None, Some("nope"), 0).unwrap_err();
        assert!(error.to_string().contains("request_failed"));
    }

    #[test]
    fn filters_combine_with_and() {
        let envelopes = sample_envelopes(1, 1_000, 60);
        let filter = Filter::from_flags(
            None,
            None,
            Some("anthropic"),
            None,
            None,
            Some("request_failed, model_locked"),
            0,
        )
        .unwrap();
        let kept: Vec<_> = envelopes.iter().filter(|e| filter.matches(e)).collect();
        assert!(!kept.is_empty());
        for envelope in kept {
            assert!(["request_failed", "model_locked"].contains(&envelope.event.kind()));
            assert_eq!(envelope.event.provider(), Some("anthropic"));
        }
    }

    /// `--client` keeps a client's own request events, and drops request events from before
    /// schema 3 (they name no client).
    #[test]
    fn the_client_filter_selects_request_events_by_their_client() {
        // Every kind once for each sample client (`team-{n % 2}`), whatever the number of
        // kinds, and one more failure that names no client.
        let mut envelopes: Vec<Envelope> = (0..2 * KIND_COUNT + 1)
            .map(|i| {
                let kind = i % KIND_COUNT;
                let n = (i / KIND_COUNT) as u64 % 2 + 2 * kind as u64;
                Envelope {
                    schema_version: SCHEMA_VERSION,
                    seq: i as u64 + 1,
                    at_ms: 1_000 + i as u64,
                    event: sample_event(kind, n),
                }
            })
            .collect();
        let unnamed = envelopes
            .iter()
            .position(|e| e.event.kind() == "request_failed")
            .unwrap();
        let mut failed = envelopes[unnamed].clone();
        if let Event::RequestFailed(e) = &mut failed.event {
            e.client = None;
        }
        envelopes.push(failed);
        let filter = Filter {
            client: Some("team-1".into()),
            ..Filter::default()
        };
        let kinds: std::collections::BTreeSet<&str> = envelopes
            .iter()
            .filter(|e| filter.matches(e))
            .map(|e| {
                assert_eq!(e.event.client(), Some("team-1"), "{e:?}");
                e.event.kind()
            })
            .collect();
        for kind in [
            "route_decided",
            "request_succeeded",
            "request_failed",
            "client_usage",
        ] {
            assert!(kinds.contains(kind), "{kind} missing from {kinds:?}");
        }
        let unnamed = envelopes.last().unwrap();
        assert!(!filter.matches(unnamed), "a request event naming no client");
    }

    #[test]
    fn the_translated_filter_keeps_translated_request_events() {
        let mut envelopes = sample_envelopes(1, 1_000, 92);
        let mut marked = 0;
        for envelope in &mut envelopes {
            match &mut envelope.event {
                Event::RequestSucceeded(e) if marked == 0 => {
                    e.translated = Some("chat>messages".into());
                    marked += 1;
                }
                Event::RequestFailed(e) if marked == 1 => {
                    e.translated = Some("messages>chat".into());
                    marked += 1;
                }
                _ => {}
            }
        }
        assert_eq!(marked, 2);
        let count = |wanted: &str| {
            let filter = Filter {
                translated: Some(wanted.into()),
                ..Filter::default()
            };
            envelopes.iter().filter(|e| filter.matches(e)).count()
        };
        assert_eq!(count(ANY_TRANSLATION), 2);
        assert_eq!(count("chat>messages"), 1);
        assert_eq!(count("responses>messages"), 0);
    }

    #[test]
    fn window_is_since_inclusive_until_exclusive() {
        let filter = Filter {
            since_ms: Some(10),
            until_ms: Some(20),
            ..Filter::default()
        };
        assert!(!filter.in_window(9));
        assert!(filter.in_window(10));
        assert!(filter.in_window(19));
        assert!(!filter.in_window(20));
    }
}
