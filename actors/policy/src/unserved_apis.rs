//! Which generation APIs a provider's hosts were found not to serve (behaviour §14): a 404
//! whose body says the route does not exist teaches the router that the host lacks that API,
//! so the provider's `apis` are narrowed and its requests go through another API it serves —
//! never a (connection, model) lockout. Learned from `api_unserved` events (journaled, so a
//! restart keeps them); each is forgotten after [`UNSERVED_TTL_MS`], so a host that gains the
//! API later (an upgraded vLLM) is asked again, and a 404 then teaches it once more.

use std::collections::BTreeMap;

use quotaroute_journal::ApiUnserved;
use serde::{Deserialize, Serialize};

/// How long a learned gap holds: a day.
pub const UNSERVED_TTL_MS: u64 = 24 * 60 * 60 * 1000;

/// Provider → the APIs its hosts answered route-404 for, each with when it was learned.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnservedApis {
    by_provider: BTreeMap<String, Vec<(String, u64)>>,
}

impl UnservedApis {
    /// Folds one `api_unserved` event learned at `at_ms`.
    pub fn apply(&mut self, at_ms: u64, event: &ApiUnserved) {
        let learned = self.by_provider.entry(event.provider.clone()).or_default();
        match learned.iter_mut().find(|(api, _)| *api == event.api) {
            Some((_, when)) => *when = at_ms,
            None => learned.push((event.api.clone(), at_ms)),
        }
    }

    /// Whether `provider`'s hosts are known at `now_ms` not to serve `api`.
    pub fn lacks(&self, provider: &str, api: &str, now_ms: u64) -> bool {
        self.unserved(provider, now_ms).any(|known| known == api)
    }

    /// The APIs `provider`'s hosts are known at `now_ms` not to serve, in the order learned.
    pub fn unserved<'a>(&'a self, provider: &str, now_ms: u64) -> impl Iterator<Item = &'a str> {
        self.by_provider
            .get(provider)
            .into_iter()
            .flatten()
            .filter(move |(_, at_ms)| now_ms < at_ms.saturating_add(UNSERVED_TTL_MS))
            .map(|(api, _)| api.as_str())
    }

    /// Whether anything is learned at all (the request path's fast answer).
    pub fn is_empty(&self) -> bool {
        self.by_provider.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(provider: &str, api: &str) -> ApiUnserved {
        ApiUnserved {
            request_id: "r".into(),
            provider: provider.into(),
            connection: "c".into(),
            api: api.into(),
            path: format!("/v1/{api}"),
        }
    }

    #[test]
    fn s14_a_learned_gap_narrows_its_provider_only_and_ends_after_its_ttl() {
        let mut learned = UnservedApis::default();
        assert!(learned.is_empty());
        learned.apply(1_000, &event("vllm", "responses"));
        assert!(learned.lacks("vllm", "responses", 2_000));
        assert!(!learned.lacks("vllm", "chat", 2_000));
        assert!(!learned.lacks("openai", "responses", 2_000));
        assert!(!learned.lacks("vllm", "responses", 1_000 + UNSERVED_TTL_MS));
        // Learned again: the day counts from then.
        learned.apply(5_000, &event("vllm", "responses"));
        assert!(learned.lacks("vllm", "responses", 1_000 + UNSERVED_TTL_MS));
        assert_eq!(
            learned.unserved("vllm", 6_000).collect::<Vec<_>>(),
            ["responses"]
        );
    }
}
