//! The validated config: what the node runs on, with every default filled in and every
//! reference checked.
//!
//! These types only hold values; building them is `validate`'s job. Resilience overrides stay as
//! the raw optional structs: the policy crate's settings own those defaults and map them.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use url::Url;

use super::raw::{BreakerOverrides, BucketOverrides, CooldownOverrides, LockoutOverrides};
use super::secret::Secret;
use crate::wire::translate::Api;

#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub server: ServerConfig,
    pub journal: JournalConfig,
    pub defaults: DefaultsConfig,
    pub providers: Vec<ProviderConfig>,
    pub connections: Vec<ConnectionConfig>,
    pub combos: Vec<ComboConfig>,
    /// `[cluster]`: several nodes sharing through Redis; `None` = one node.
    pub cluster: Option<crate::cluster::config::ClusterConfig>,
    /// `[telemetry]`: traces over OTLP/HTTP; `None` = no tracing.
    pub telemetry: Option<TelemetryConfig>,
    /// `[affinity]`: conversation affinity (behaviour §10).
    pub affinity: quotaroute_actors::policy::affinity::AffinitySettings,
    /// `[translation]`: serving a client API from a target of the other format (behaviour §14).
    pub translation: TranslationConfig,
    /// `[responses]`: translated Responses kept by the router (behaviour §14).
    pub responses: ResponsesConfig,
    /// `[[clients]]` and `server.api_keys` (client `default`, first when it has keys).
    pub clients: Vec<crate::clients::ClientConfig>,
    /// `[[prices]]` over `prices_file`'s models.
    pub prices: crate::clients::PriceTable,
    /// The file this came from; `None` when parsed from text (tests, the embedded demo).
    pub source_path: Option<PathBuf>,
}

/// `[translation]`, validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TranslationConfig {
    /// `max_tokens` sent to Anthropic-format targets when the client gave none.
    pub default_max_tokens: u32,
}

impl Default for TranslationConfig {
    fn default() -> Self {
        TranslationConfig {
            default_max_tokens: 8192,
        }
    }
}

/// `[responses]`, validated: whether the router keeps translated Responses, and its store's
/// bounds (behaviour §14).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResponsesConfig {
    /// Keep every translated Responses answer (`store = true`); off by default.
    pub store: bool,
    /// The most bytes the store holds: past it the oldest responses are evicted.
    pub max_bytes: u64,
    /// How long a kept response lives, in milliseconds (`ttl_days` × one day).
    pub ttl_ms: u64,
}

/// One day in milliseconds.
pub const DAY_MS: u64 = 24 * 3600 * 1000;

impl Default for ResponsesConfig {
    fn default() -> Self {
        ResponsesConfig {
            store: false,
            max_bytes: 1 << 30,
            ttl_ms: 30 * DAY_MS,
        }
    }
}

/// `[telemetry]`, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct TelemetryConfig {
    /// Where spans are POSTed: the configured URL with `/v1/traces` appended unless it ends so.
    pub traces_url: Url,
    /// `service.name` of the exported resource.
    pub service_name: String,
    /// The share of new traces kept, 0.0–1.0 (a client's sampled `traceparent` is followed).
    pub sample_ratio: f64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ServerConfig {
    pub listen: SocketAddr,
    /// Keys clients send as `Authorization: Bearer`; empty = every client request rejected.
    pub api_keys: Vec<Secret>,
    /// `None` = the admin API is off (every `/admin/*` path is 404).
    pub admin_key: Option<Secret>,
    /// The secret seals on encrypted items are made with, shared by a cluster's nodes
    /// (`server.seal_key`, `seal_key_env` or `seal_key_file`); `None` = the node's own,
    /// generated once beside the journal (`node::seal_secret`).
    pub seal_key: Option<Secret>,
    pub max_body_bytes: u64,
    pub request_timeout_ms: u64,
    pub first_token_timeout_ms: u64,
    pub stream_idle_timeout_ms: u64,
    /// Browser origins allowed to call the client API (`"*"` = any); empty = no CORS.
    pub cors_allow_origins: Vec<String>,
    /// Serve HTTPS with this certificate chain and key (`server.tls_cert` / `tls_key`).
    pub tls: Option<ServerTls>,
    pub shutdown_grace_ms: u64,
    pub metrics_public: bool,
    /// From accept until the request head is read (contract "Hostile input and bounds").
    pub header_timeout_ms: u64,
    /// The longest silence while a request body is read.
    pub body_timeout_ms: u64,
    /// Open client connections at most; past it new ones are closed at once.
    pub max_connections: u64,
    /// Implicit `provider/model` combos kept at once (least recently used idle one dropped).
    pub max_implicit_combos: u64,
    /// Bytes of whole upstream bodies all requests hold at once.
    pub max_upstream_buffer_bytes: u64,
    /// Any usage count an upstream reports above this is clamped to it (behaviour §11).
    pub usage_max_tokens: u64,
    /// A refusal whose wait is longer says `x-should-retry: false` (behaviour §7).
    pub client_retry_max_ms: u64,
    /// After a client left a stream: how long the router keeps reading the upstream for its
    /// usage (behaviour §11, "money holds").
    pub drain_after_client_left_ms: u64,
    /// … and how many upstream bytes it reads at most while doing so.
    pub drain_max_bytes: u64,
}

/// The node's own certificate: checked when validated, loaded again when serving.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerTls {
    pub cert: PathBuf,
    pub key: PathBuf,
}

#[derive(Debug, Clone, PartialEq)]
pub struct JournalConfig {
    pub path: PathBuf,
    pub flush_every_ms: u64,
    pub snapshot_every_events: u64,
    pub retention_hours: u64,
    pub max_queue_events: u64,
    pub request_events: RequestEvents,
}

/// Which request outcomes become journal events (the policy owns the rule).
pub use quotaroute_actors::RequestEvents;

#[derive(Debug, Clone, PartialEq)]
pub struct DefaultsConfig {
    pub max_attempts: u32,
    pub max_upstream_requests: u32,
    pub breaker: BreakerOverrides,
    pub cooldown: CooldownOverrides,
    pub lockout: LockoutOverrides,
    pub buckets: BucketOverrides,
    /// `[defaults.pacing]` (behaviour §13).
    pub pacing: quotaroute_actors::policy::pace::PacingSettings,
}

/// The wire format of a provider: which client endpoints its targets can serve.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApiFormat {
    #[serde(rename = "openai")]
    OpenAi,
    Anthropic,
    /// Google's Gemini API (behaviour §15).
    Gemini,
}

impl ApiFormat {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::OpenAi => "openai",
            Self::Anthropic => "anthropic",
            Self::Gemini => "gemini",
        }
    }

    /// The generation APIs its hosts serve when the provider does not say (behaviour §14).
    pub fn default_apis(self) -> Vec<Api> {
        match self {
            Self::OpenAi => vec![Api::Chat, Api::Responses],
            Self::Anthropic => vec![Api::Messages],
            Self::Gemini => vec![Api::Gemini],
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct ProviderConfig {
    pub name: String,
    pub format: ApiFormat,
    /// The generation APIs its hosts serve (`apis`; default by format): a request in another
    /// is translated to one of these (behaviour §14).
    pub apis: Vec<Api>,
    /// Carries the version prefix: `/v1/<path>` goes to `<base_url>/<path>`.
    pub base_url: Url,
    /// Header that carries the raw key instead of the format's default (e.g. Azure `api-key`).
    pub auth_header: Option<String>,
    /// Added to every upstream request.
    pub headers: BTreeMap<String, String>,
    /// The `Accept-Encoding` the router sends upstream (default `identity`; whatever comes
    /// back is decoded either way).
    pub accept_encoding: String,
    /// Extra trusted roots for this provider's TLS (`ca_file`), read when validated.
    pub ca_file: Option<PathBuf>,
    pub ca_certs: Vec<rustls::pki_types::CertificateDer<'static>>,
    /// The egress proxy (`proxy`); `None`: the environment's, as curl reads it. A `Secret`:
    /// its URL may carry the proxy's password.
    pub proxy: Option<Secret>,
    /// Per-provider overrides; `None` fields fall back to `defaults`.
    pub breaker: BreakerOverrides,
    pub cooldown: CooldownOverrides,
    pub lockout: LockoutOverrides,
    pub buckets: BucketOverrides,
}

/// How a connection authenticates; picks the breaker profile and cooldown defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AuthKind {
    ApiKey,
    #[serde(rename = "oauth")]
    OAuth,
}

impl AuthKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ApiKey => "api_key",
            Self::OAuth => "oauth",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct ConnectionConfig {
    pub id: String,
    pub provider: String,
    /// Where its key or token comes from.
    pub credential: CredentialSource,
    pub auth: AuthKind,
    pub weight: u32,
    /// `None` = no cap.
    pub max_concurrent: Option<u32>,
    /// `None` = any model.
    pub models: Option<Vec<String>>,
    /// Configured usage limits (behaviour.md §6, source 1): the policy's own type, so config
    /// hands it to the buckets as read.
    pub limits: quotaroute_actors::policy::buckets::BucketLimits,
    /// The share of each window kept for the owner (behaviour §13).
    pub reserve: quotaroute_actors::policy::window_block::Reserve,
}

/// Where a connection's credential comes from: exactly one of `api_key` / `api_key_env`
/// (read once per load), `api_key_file`, `api_key_command` or `[connections.oauth]` (which
/// change while the node runs; `crate::credentials` keeps them fresh).
#[derive(Debug, Clone, PartialEq)]
pub enum CredentialSource {
    /// `api_key`, or `api_key_env` (`env` names the variable; never the value).
    Static { key: Secret, env: Option<String> },
    /// `api_key_file`: the file's trimmed content, re-read when it changes and on a 401.
    File { path: PathBuf },
    /// `api_key_command`: the argv's trimmed stdout, run again after `ttl_ms` and on a 401.
    Command {
        argv: Vec<String>,
        ttl_ms: u64,
        timeout_ms: u64,
    },
    /// `[connections.oauth]`: an access token from a refresh-token grant.
    OAuth(OAuthSource),
}

/// `[connections.oauth]` (RFC 6749 §6).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OAuthSource {
    pub token_url: Url,
    pub client_id: String,
    /// Holds the refresh token; a rotated one is written back here.
    pub refresh_token_file: PathBuf,
}

impl CredentialSource {
    /// `static`, `file`, `command` or `oauth`: the `source` of the credential journal events.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Static { .. } => "static",
            Self::File { .. } => "file",
            Self::Command { .. } => "command",
            Self::OAuth(_) => "oauth",
        }
    }

    /// The key when it is fixed for the life of a load (`api_key` / `api_key_env`).
    pub fn static_key(&self) -> Option<&Secret> {
        match self {
            Self::Static { key, .. } => Some(key),
            _ => None,
        }
    }

    /// Where the key comes from, for `check`'s summary: never a value.
    pub fn describe(&self) -> String {
        match self {
            Self::Static {
                env: Some(variable),
                ..
            } => format!("key from ${variable}"),
            Self::Static { env: None, .. } => "key inline".to_owned(),
            Self::File { path } => format!("key from file {}", path.display()),
            Self::Command { argv, ttl_ms, .. } => format!(
                "key from command `{}` every {} ms",
                argv.first().map_or("", String::as_str),
                ttl_ms
            ),
            Self::OAuth(oauth) => format!("oauth via {}", oauth.token_url),
        }
    }
}

/// A combo's selection strategy (behaviour.md §2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Strategy {
    QuotaShare,
    Priority,
    RoundRobin,
    Weighted,
}

impl Strategy {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::QuotaShare => "quota-share",
            Self::Priority => "priority",
            Self::RoundRobin => "round-robin",
            Self::Weighted => "weighted",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct ComboConfig {
    pub name: String,
    pub strategy: Strategy,
    /// `None` = `defaults.max_attempts`.
    pub max_attempts: Option<u32>,
    pub hold_ms: u64,
    /// Behaviour §11: wait for a permit when every target is at cap (0 = fail open).
    pub queue_ms: u64,
    /// Behaviour §13: quota-share spends by pace (`false`: by weight alone).
    pub pacing: bool,
    /// Behaviour §13: the combo's `[combos.pacing]` table, validated, over `[defaults.pacing]`.
    pub pacing_table: Option<crate::config::raw::RawPacing>,
    /// Whether a target of the other format serves through translation (behaviour §14).
    pub translate: bool,
    pub targets: Vec<TargetConfig>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetConfig {
    pub connection: String,
    pub model: String,
    pub weight: u32,
}

impl Config {
    pub fn provider(&self, name: &str) -> Option<&ProviderConfig> {
        self.providers.iter().find(|provider| provider.name == name)
    }

    pub fn connection(&self, id: &str) -> Option<&ConnectionConfig> {
        self.connections
            .iter()
            .find(|connection| connection.id == id)
    }

    pub fn combo(&self, name: &str) -> Option<&ComboConfig> {
        self.combos.iter().find(|combo| combo.name == name)
    }

    /// What `quotaroute check` prints: providers, connections, combos. Never a key's value.
    pub fn summary(&self) -> String {
        let mut text = String::new();
        let _ = writeln!(
            text,
            "listen {}; {} client key(s) of {} client(s); admin API {}; journal {}",
            self.server.listen,
            // Every key a client may send: `server.api_keys` (client `default`) and each
            // `[[clients]]` key.
            self.clients
                .iter()
                .map(|client| client.key_digests.len())
                .sum::<usize>(),
            self.clients.len(),
            if self.server.admin_key.is_some() {
                "on"
            } else {
                "off"
            },
            self.journal.path.display()
        );
        if let Some(cluster) = &self.cluster {
            // The URL is not repeated: it may carry a password.
            let _ = writeln!(
                text,
                "cluster: node {} (lease_size {}), shared through Redis",
                cluster.node_id, cluster.lease_size
            );
        }
        if let Some(telemetry) = &self.telemetry {
            let _ = writeln!(
                text,
                "telemetry: traces to {} as `{}`, sample_ratio {}",
                crate::wire::upstream_mask::mask_url(telemetry.traces_url.as_str()),
                telemetry.service_name,
                telemetry.sample_ratio
            );
        }
        let _ = writeln!(text, "providers ({}):", self.providers.len());
        for provider in &self.providers {
            let _ = writeln!(
                text,
                "  {}  format={}  base_url={}",
                provider.name,
                provider.format.as_str(),
                crate::wire::upstream_mask::mask_url(provider.base_url.as_str())
            );
        }
        let _ = writeln!(text, "connections ({}):", self.connections.len());
        for connection in &self.connections {
            let key_source = connection.credential.describe();
            let cap = connection
                .max_concurrent
                .map_or_else(|| "none".to_owned(), |cap| cap.to_string());
            let models = connection
                .models
                .as_ref()
                .map_or_else(|| "any".to_owned(), |models| models.join(","));
            let _ = writeln!(
                text,
                "  {}  provider={}  auth={}  weight={}  max_concurrent={}  models={}  {}",
                connection.id,
                connection.provider,
                connection.auth.as_str(),
                connection.weight,
                cap,
                models,
                key_source
            );
        }
        if !self.clients.is_empty() {
            let _ = writeln!(text, "clients ({}):", self.clients.len());
            for client in &self.clients {
                let limits = &client.limits;
                let show =
                    |value: Option<u64>| value.map_or_else(|| "none".to_owned(), |v| v.to_string());
                let _ = writeln!(
                    text,
                    "  {}  weight={}  keys={}  max_concurrent={}  requests_per_min={}  tokens_per_min={}  tokens_per_day={}  budget_usd={} per {}  models={}",
                    client.id,
                    client.weight,
                    client.key_digests.len(),
                    show(limits.max_concurrent.map(u64::from)),
                    show(limits.requests_per_min),
                    show(limits.tokens_per_min),
                    show(limits.tokens_per_day),
                    limits
                        .budget_pusd
                        .map_or_else(|| "none".to_owned(), |b| crate::clients::prices::to_usd(b).to_string()),
                    limits.budget_period.as_str(),
                    limits.models.as_ref().map_or_else(|| "all".to_owned(), |m| m.join(",")),
                );
            }
        }
        if !self.prices.is_empty() {
            let _ = writeln!(text, "prices: {} model(s)", self.prices.len());
        }
        let _ = writeln!(text, "combos ({}):", self.combos.len());
        for combo in &self.combos {
            let targets = combo
                .targets
                .iter()
                .map(|target| format!("{}/{}×{}", target.connection, target.model, target.weight))
                .collect::<Vec<_>>()
                .join(", ");
            let _ = writeln!(
                text,
                "  {}  strategy={}  targets: {}",
                combo.name,
                combo.strategy.as_str(),
                targets
            );
        }
        text
    }
}
