//! Each connection's input tokens and how many of them the upstream read from its prompt cache
//! (behaviour §10 "Seen": `/admin/state` and the dashboard show each connection's cached
//! share). Folded from `request_succeeded` (`tokens_in`, `tokens_cached`); nothing else.

use std::collections::BTreeMap;

use quotaroute_journal::RequestSucceeded;
use serde::{Deserialize, Serialize};

/// One connection's counts since the fold began.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CachedInput {
    /// Every input token the upstream reported (cached, cache-written and uncached).
    pub input_tokens: u64,
    /// Of those, read from the prompt cache.
    pub cached_input_tokens: u64,
}

impl CachedInput {
    /// `cached_input_tokens / input_tokens`, `None` before any input was counted.
    pub fn share(&self) -> Option<f64> {
        (self.input_tokens > 0).then(|| {
            self.cached_input_tokens.min(self.input_tokens) as f64 / self.input_tokens as f64
        })
    }
}

/// Counts by connection id.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CachedInputByConnection {
    by_connection: BTreeMap<String, CachedInput>,
}

impl CachedInputByConnection {
    /// Counts one successful attempt.
    pub fn apply(&mut self, succeeded: &RequestSucceeded) {
        let counts = match self.by_connection.get_mut(&*succeeded.connection) {
            Some(counts) => counts,
            None => self
                .by_connection
                .entry(succeeded.connection.to_string())
                .or_default(),
        };
        counts.input_tokens = counts.input_tokens.saturating_add(succeeded.tokens_in);
        counts.cached_input_tokens = counts
            .cached_input_tokens
            .saturating_add(succeeded.tokens_cached.min(succeeded.tokens_in));
    }

    /// A connection's counts (zero when it never served).
    pub fn of(&self, connection: &str) -> CachedInput {
        self.by_connection
            .get(connection)
            .copied()
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn succeeded(connection: &str, tokens_in: u64, tokens_cached: u64) -> RequestSucceeded {
        RequestSucceeded {
            request_id: "r".into(),
            combo: "c".into(),
            provider: "p".into(),
            connection: connection.into(),
            model: "m".into(),
            status: 200,
            attempt: 1,
            latency_ms: 1,
            tokens_in,
            tokens_out: 1,
            stream: false,
            skipped: vec![],
            tokens_cached,
            tokens_cache_write: 0,
            client: None,
            cost_usd: None,
            items_left_out: 0,
            translated: None,
            usage_estimated: false,
            period_spend_pusd: None,
            period_start_ms: None,
        }
    }

    #[test]
    fn the_share_is_cached_over_all_input_per_connection() {
        let mut counts = CachedInputByConnection::default();
        assert_eq!(counts.of("a").share(), None);
        counts.apply(&succeeded("a", 1000, 0));
        counts.apply(&succeeded("a", 1000, 500));
        counts.apply(&succeeded("b", 100, 100));
        assert_eq!(
            counts.of("a"),
            CachedInput {
                input_tokens: 2000,
                cached_input_tokens: 500
            }
        );
        assert_eq!(counts.of("a").share(), Some(0.25));
        assert_eq!(counts.of("b").share(), Some(1.0));
        // An upstream that reports more cached than input tokens counts as all cached.
        counts.apply(&succeeded("c", 10, 50));
        assert_eq!(counts.of("c").share(), Some(1.0));
    }
}
