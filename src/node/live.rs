//! What the request path needs from the config, resolved once per load and swapped whole on
//! reload: the clients (key digests, limits, usage), the admin key, each provider's base URL and headers, each connection's
//! credentials (kept across reloads when their source is unchanged: `credentials`), and the
//! timeouts. The only place upstream secrets live after startup.

use quotaroute_actors::SharedClock;
use std::sync::Arc;
use std::time::Duration;

use http::{HeaderName, HeaderValue};
use rustc_hash::FxHashMap;

use crate::config::{ApiFormat, AuthKind, Config, Secret};
use crate::credentials::{CredentialStore, Echoes};
use crate::node::metrics::AttemptMetrics;
use crate::telemetry::finished::provider_attributes;
use crate::telemetry::key_value::AttributeBlock;
use crate::upstream::client::UpstreamClient;
use crate::upstream::egress;
use crate::wire::item_seal::SealKey;

/// One provider's upstream coordinates.
#[derive(Debug, Clone)]
pub struct ProviderRoute {
    /// `base_url` without a trailing `/`.
    pub base_url: String,
    /// Its URIs of the generation APIs' fixed paths, parsed once.
    pub known_uris: crate::node::known_uris::KnownUris,
    /// What its attempt spans say of it: its host and port (`server.address`, `.port`) and
    /// its id, encoded once per load.
    pub span_attributes: Arc<AttributeBlock>,
    pub format: ApiFormat,
    /// The generation APIs its hosts serve (behaviour §14).
    pub apis: Vec<crate::wire::translate::Api>,
    /// Header that carries the key raw (e.g. Azure `api-key`); `None`: the format's default.
    pub auth_header: Option<HeaderName>,
    pub headers: Vec<(HeaderName, HeaderValue)>,
    /// What the router asks the upstream for (`providers.accept_encoding`).
    pub accept_encoding: HeaderValue,
    /// The `Host` header of an `http://` base URL (`host[:port]`, the port only when not 80),
    /// built once per load: hyper would format the same value on every HTTP/1 request. `None`
    /// for `https://`, where ALPN may pick HTTP/2, which carries the authority itself.
    pub host: Option<HeaderValue>,
    /// Its pooled client: its trusted roots and egress proxy.
    pub client: UpstreamClient,
    /// A Gemini provider on a Vertex AI publisher URL (behaviour §15): its credential goes as
    /// Bearer, not `x-goog-api-key`.
    pub vertex: bool,
}

/// Whether `base_url` is a Vertex AI publisher URL (`…aiplatform.googleapis.com`, or any host
/// whose path names `/publishers/google`, as Vertex's do).
pub fn is_vertex_url(base_url: &url::Url) -> bool {
    base_url
        .host_str()
        .is_some_and(|host| host.ends_with("aiplatform.googleapis.com"))
        || base_url.path().contains("/publishers/google")
}

/// The config as the request path uses it.
pub struct LiveConfig {
    /// The clients (behaviour §11): key digests, limits and usage (usage kept across reloads).
    pub clients: crate::clients::ClientLedger,
    pub admin_key: Option<Secret>,
    pub metrics_public: bool,
    pub max_body_bytes: usize,
    pub request_timeout: Duration,
    pub first_token_timeout: Duration,
    pub stream_idle_timeout: Duration,
    /// `server.body_timeout_ms`: the longest silence while a client body is read.
    pub body_timeout: Duration,
    /// `server.usage_max_tokens`: any usage count above it is clamped (behaviour §11).
    pub usage_max_tokens: u64,
    /// `server.client_retry_max_ms`: a refusal waiting longer says `x-should-retry: false`.
    pub client_retry_max_ms: u64,
    /// How long, and how far, a stream the client left is read on for its usage.
    pub drain: crate::node::stream_drain::DrainBounds,
    /// `server.max_upstream_buffer_bytes` in KiB (read at start; a reload keeps the first).
    pub max_upstream_buffer_kib: usize,
    /// Browser origins allowed to call the client API (`"*"`: any).
    pub cors_allow_origins: Vec<String>,
    /// Provider name → its route. The maps keyed by config ids hash with FxHash: their keys
    /// come from the config, never from a client, and every try looks them up.
    pub providers: FxHashMap<String, ProviderRoute>,
    /// Connection id → its credential (current key or token, refreshed in place).
    pub credentials: CredentialStore,
    /// Connection id → how it authenticates (which header carries its credential).
    pub connection_auth: FxHashMap<String, AuthKind>,
    /// Connection id → its attempt metrics, registered once per load.
    pub attempt_metrics: FxHashMap<String, AttemptMetrics>,
    /// The router's clock, for the credentials (kept across reloads).
    pub clock: SharedClock,
    /// `[affinity]` (behaviour §10): how the node derives a request's group.
    pub affinity: quotaroute_actors::policy::affinity::AffinitySettings,
    /// `[translation]` (behaviour §14).
    pub translation: crate::config::TranslationConfig,
    /// `[responses]` (behaviour §14): whether translated Responses are kept.
    pub responses: crate::config::ResponsesConfig,
    /// The seal on encrypted items (behaviour §10 "Encrypted items"): the node's own secret
    /// or the cluster's `server.seal_key` (`seal_secret`), read at start; a reload keeps it.
    pub seal_key: SealKey,
    /// The `server.seal_key` the node started with (`None`: its own secret), to tell a reload
    /// that changes it apart.
    pub seal_key_configured: Option<Secret>,
    /// The connections that prime their window (behaviour §13).
    pub primes: Vec<crate::node::prime_plan::PrimePlan>,
}

impl std::fmt::Debug for LiveConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveConfig")
            .field("providers", &self.providers)
            .field("connection_auth", &self.connection_auth)
            .finish_non_exhaustive()
    }
}

/// The `Host` value hyper's HTTP/1 client would send for an `http://` URL: the host, with
/// `:port` when the port is not the scheme's default (`url` leaves a default port out).
fn http_host(base_url: &url::Url) -> Option<HeaderValue> {
    if base_url.scheme() != "http" {
        return None;
    }
    let host = base_url.host_str()?;
    let value = match base_url.port() {
        Some(port) => HeaderValue::try_from(format!("{host}:{port}")),
        None => HeaderValue::try_from(host),
    };
    value.ok()
}

impl LiveConfig {
    /// The live config of a first load: every credential new; `seal_key` is
    /// `seal_secret::seal_key(config)`.
    pub fn from_config(config: &Config, clock: SharedClock, seal_key: SealKey) -> Self {
        Self::build(config, None, clock, None, seal_key)
    }

    /// The live config after a reload: credentials whose source did not change are kept, and
    /// the seal key is the one the node started with (a changed `server.seal_key` takes effect
    /// at the next start, like `journal.*`: seals already handed out keep opening until then).
    pub fn reloaded(config: &Config, previous: &LiveConfig) -> Self {
        if config.server.seal_key != previous.seal_key_configured {
            tracing::warn!(
                "server.seal_key changed: it takes effect when the node restarts (encrypted \
                 items sealed with the current key are then left out of the turns that carry them)"
            );
        }
        let mut live = Self::build(
            config,
            Some(&previous.credentials),
            previous.clock.clone(),
            Some(&previous.clients),
            previous.seal_key.clone(),
        );
        live.seal_key_configured = previous.seal_key_configured.clone();
        live
    }

    fn build(
        config: &Config,
        previous: Option<&CredentialStore>,
        clock: SharedClock,
        previous_clients: Option<&crate::clients::ClientLedger>,
        seal_key: SealKey,
    ) -> Self {
        let providers: FxHashMap<String, ProviderRoute> = config
            .providers
            .iter()
            .map(|p| {
                let headers = p
                    .headers
                    .iter()
                    .filter_map(|(name, value)| {
                        Some((
                            HeaderName::from_bytes(name.as_bytes()).ok()?,
                            HeaderValue::from_str(value).ok()?,
                        ))
                    })
                    .collect();
                let base_url = p.base_url.as_str().trim_end_matches('/').to_string();
                let route = ProviderRoute {
                    known_uris: crate::node::known_uris::KnownUris::new(&base_url),
                    base_url,
                    span_attributes: Arc::new(provider_attributes(
                        &p.name,
                        p.base_url
                            .host_str()
                            .zip(p.base_url.port_or_known_default()),
                    )),
                    format: p.format,
                    apis: p.apis.clone(),
                    auth_header: p
                        .auth_header
                        .as_deref()
                        .and_then(|h| HeaderName::from_bytes(h.as_bytes()).ok()),
                    headers,
                    accept_encoding: HeaderValue::from_str(&p.accept_encoding)
                        .unwrap_or(HeaderValue::from_static("identity")),
                    host: http_host(&p.base_url),
                    client: UpstreamClient::with_egress(
                        &p.ca_certs,
                        egress::proxy_matcher(p.proxy.as_ref().map(Secret::expose), |name| {
                            std::env::var(name).ok()
                        }),
                    ),
                    vertex: is_vertex_url(&p.base_url),
                };
                (p.name.clone(), route)
            })
            .collect();
        let credentials = CredentialStore::build(
            config,
            |provider| {
                providers
                    .get(provider)
                    .map(|route| route.client.clone())
                    .unwrap_or_default()
            },
            previous,
            clock.clone(),
        );
        let connection_auth = config
            .connections
            .iter()
            .map(|c| (c.id.clone(), c.auth))
            .collect();
        let attempt_metrics = config
            .connections
            .iter()
            .map(|c| (c.id.clone(), AttemptMetrics::register(&c.provider, &c.id)))
            .collect();
        LiveConfig {
            seal_key,
            seal_key_configured: config.server.seal_key.clone(),
            affinity: config.affinity,
            translation: config.translation,
            responses: config.responses,
            attempt_metrics,
            clock,
            clients: crate::clients::ClientLedger::build(
                &config.clients,
                &config.prices,
                previous_clients,
            ),
            admin_key: config.server.admin_key.clone(),
            metrics_public: config.server.metrics_public,
            max_body_bytes: usize::try_from(config.server.max_body_bytes).unwrap_or(usize::MAX),
            request_timeout: Duration::from_millis(config.server.request_timeout_ms),
            body_timeout: Duration::from_millis(config.server.body_timeout_ms),
            usage_max_tokens: config.server.usage_max_tokens,
            client_retry_max_ms: config.server.client_retry_max_ms,
            drain: crate::node::stream_drain::DrainBounds {
                after_left: Duration::from_millis(config.server.drain_after_client_left_ms),
                max_bytes: config.server.drain_max_bytes,
            },
            max_upstream_buffer_kib: usize::try_from(
                config.server.max_upstream_buffer_bytes.div_ceil(1024),
            )
            .unwrap_or(usize::MAX)
            .min(tokio::sync::Semaphore::MAX_PERMITS),
            first_token_timeout: Duration::from_millis(config.server.first_token_timeout_ms),
            stream_idle_timeout: Duration::from_millis(config.server.stream_idle_timeout_ms),
            cors_allow_origins: config.server.cors_allow_origins.clone(),
            providers,
            credentials,
            connection_auth,
            primes: crate::node::prime_plan::plans(config),
        }
    }

    /// Every upstream secret in use (and each one just replaced), for masking echoes out of
    /// passed-through bodies and headers.
    pub fn upstream_secrets(&self) -> Vec<Secret> {
        self.credentials.secrets()
    }

    /// The keys `connection` sends (and just sent) upstream, so an upstream echoing one is
    /// caught.
    pub fn echoes_of(&self, connection: &str) -> Echoes {
        self.credentials
            .get(connection)
            .map(|credential| credential.echoes())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host_of(url: &str) -> Option<String> {
        let url = url::Url::parse(url).ok()?;
        http_host(&url).map(|value| value.to_str().unwrap_or_default().to_string())
    }

    #[test]
    fn http_base_urls_get_the_host_hyper_would_send() {
        assert_eq!(
            host_of("http://127.0.0.1:18180/v1").as_deref(),
            Some("127.0.0.1:18180")
        );
        assert_eq!(
            host_of("http://upstream.test/v1").as_deref(),
            Some("upstream.test")
        );
        // An explicit default port is no port, as in hyper's own value.
        assert_eq!(
            host_of("http://upstream.test:80/v1").as_deref(),
            Some("upstream.test")
        );
        assert_eq!(host_of("http://[::1]:9000/").as_deref(), Some("[::1]:9000"));
        // HTTPS may go over HTTP/2: the client sends its authority there itself.
        assert_eq!(host_of("https://api.openai.test/v1"), None);
    }
}
