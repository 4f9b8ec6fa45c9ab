//! What the contract asks of every answered request on top of the design's floor (`contract`
//! mode), with the router's own code where it has one: the client's key checked in constant
//! time (`config::Secret::matches`), the client's headers filtered for the upstream
//! (`node::header_rules::copy_client`) and the chosen key's credential set, the upstream's
//! headers filtered and masked (`header_rules::keep_upstream`), the `x-quotaroute-*` headers
//! (`node::reply::RouteHeaders`) and the requests counter and overhead histogram
//! (`node::metrics`). No limits, budgets, failover, cooldowns, breaker or translation.

use std::sync::Arc;

use http::header::{HeaderMap, HeaderValue, AUTHORIZATION};
use quotaroute::config::Secret;
use quotaroute::node::endpoint::Endpoint;
use quotaroute::node::header_rules::{copy_client, keep_upstream};
use quotaroute::node::metrics;
use quotaroute::node::reply::RouteHeaders;
use quotaroute::wire::upstream_mask::EchoSearch;

/// The shared bench's client key (`../shared/bench/lib.sh`), unless `FLOOR_CLIENT_KEY` says.
const BENCH_CLIENT_KEY: &str =
    "sk-bench-c8d7427854b11a80aeb8552c991c023f4e33702e3de9935b0ca203e9ac307100";
/// The bench combo's keys (`../shared/bench/quotaroute-bench.toml`), by connection index.
const UPSTREAM_KEYS: [(&str, &str); 3] = [("k1", "sk-up-1"), ("k2", "sk-up-2"), ("k3", "sk-up-3")];
const MODEL: &str = "mock-gpt";

struct Key {
    connection: Arc<str>,
    /// The key's echo searcher, built once as the router builds it when a key is loaded.
    echo: Option<EchoSearch>,
    bearer: HeaderValue,
}

/// The client's key and each connection's, read once.
pub struct Contract {
    client_key: Secret,
    keys: Vec<Key>,
    model: Arc<str>,
}

impl Contract {
    pub fn new() -> Self {
        let client_key =
            std::env::var("FLOOR_CLIENT_KEY").unwrap_or_else(|_| BENCH_CLIENT_KEY.to_string());
        let keys = UPSTREAM_KEYS
            .iter()
            .filter_map(|(connection, key)| {
                Some(Key {
                    connection: Arc::from(*connection),
                    echo: EchoSearch::new(key),
                    bearer: HeaderValue::from_str(&format!("Bearer {key}")).ok()?,
                })
            })
            .collect();
        Contract {
            client_key: Secret::new(client_key),
            keys,
            model: Arc::from(MODEL),
        }
    }

    /// Whether the client sent the node's key as a bearer token.
    pub fn admits(&self, client: &HeaderMap) -> bool {
        client
            .get(AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.strip_prefix("Bearer "))
            .is_some_and(|key| self.client_key.matches(key))
    }

    /// The client's headers that go upstream, with connection `chosen`'s credential.
    pub fn upstream_headers(&self, client: &HeaderMap, chosen: u16, out: &mut HeaderMap) {
        copy_client(client, out);
        if let Some(key) = self.keys.get(usize::from(chosen)) {
            out.insert(AUTHORIZATION, key.bearer.clone());
        }
    }

    /// The upstream's headers as the client gets them, with the route's own.
    pub fn answer_headers(
        &self,
        upstream: HeaderMap,
        chosen: u16,
        request_id: &str,
        overhead_us: u64,
    ) -> HeaderMap {
        let key = self.keys.get(usize::from(chosen));
        let mut headers = keep_upstream(upstream, &[key.and_then(|key| key.echo.as_ref())]);
        headers.reserve(RouteHeaders::MOST_ADDED);
        RouteHeaders {
            connection: key.map(|key| key.connection.clone()),
            model: Some(self.model.clone()),
            attempts: 1,
            overhead_us,
            request_id: request_id.into(),
            ..RouteHeaders::default()
        }
        .apply_over_relayed(&mut headers);
        metrics::request_finished(Endpoint::ChatCompletions, 200);
        metrics::overhead(overhead_us);
        headers
    }
}
