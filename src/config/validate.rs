//! From TOML text to a validated [`Config`]: defaults filled in, every value and reference
//! checked, and *all* errors of the file reported in one run.
//!
//! Owns the rules of contract.md "Config (TOML)" (what is required, what may reference what) and
//! the defaults of behaviour.md for the server, journal and attempt counts. It does not own the
//! resilience numbers' defaults (the policy settings do) and never puts a secret in a message.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::SocketAddr;
use std::path::PathBuf;

use axum::http::{HeaderName, HeaderValue};
use url::Url;

use crate::wire::upstream_mask::mask_url;

use super::deserialize::deserialize_collecting;
use super::error::{ConfigErrors, ErrorSink};
use super::model::{
    ApiFormat, AuthKind, ComboConfig, Config, ConnectionConfig, ConnectionLimits, CredentialSource,
    DefaultsConfig, JournalConfig, OAuthSource, ProviderConfig, RequestEvents, ServerConfig,
    ServerTls, Strategy, TargetConfig,
};
use super::raw::{
    field_names, BreakerOverrides, RawCombo, RawConfig, RawConnection, RawDefaults, RawJournal,
    RawLimits, RawOAuth, RawProvider, RawServer, RawTarget,
};
use super::secret::Secret;
use crate::tls_files;

pub const DEFAULT_LISTEN: &str = "127.0.0.1:4100";
pub const DEFAULT_MAX_BODY_BYTES: u64 = 10_485_760;
pub const DEFAULT_REQUEST_TIMEOUT_MS: u64 = 600_000;
pub const DEFAULT_FIRST_TOKEN_TIMEOUT_MS: u64 = 30_000;
pub const DEFAULT_STREAM_IDLE_TIMEOUT_MS: u64 = 120_000;
pub const DEFAULT_UPSTREAM_ACCEPT_ENCODING: &str = "identity";
pub const DEFAULT_SHUTDOWN_GRACE_MS: u64 = 30_000;
pub const DEFAULT_HEADER_TIMEOUT_MS: u64 = 10_000;
pub const DEFAULT_BODY_TIMEOUT_MS: u64 = 30_000;
pub const DEFAULT_MAX_CONNECTIONS: u64 = 4_096;
pub const DEFAULT_MAX_IMPLICIT_COMBOS: u64 = 1_024;
pub const DEFAULT_MAX_UPSTREAM_BUFFER_BYTES: u64 = 256 * 1024 * 1024;
/// `server.usage_max_tokens` (contract).
pub const DEFAULT_USAGE_MAX_TOKENS: u64 = 10_000_000;
/// `server.client_retry_max_ms` (contract).
pub const DEFAULT_CLIENT_RETRY_MAX_MS: u64 = 60_000;
/// `server.drain_after_client_left_ms`.
pub const DEFAULT_DRAIN_AFTER_CLIENT_LEFT_MS: u64 = 10_000;
/// `server.drain_max_bytes`.
pub const DEFAULT_DRAIN_MAX_BYTES: u64 = 4 * 1024 * 1024;
pub const DEFAULT_JOURNAL_PATH: &str = "./data/journal";
pub const DEFAULT_FLUSH_EVERY_MS: u64 = 50;
pub const DEFAULT_SNAPSHOT_EVERY_EVENTS: u64 = 100_000;
pub const DEFAULT_RETENTION_HOURS: u64 = 168;
pub const DEFAULT_MAX_QUEUE_EVENTS: u64 = 100_000;
pub const DEFAULT_MAX_ATTEMPTS: u32 = 3;
pub const DEFAULT_MAX_UPSTREAM_REQUESTS: u32 = 8;
/// `api_key_ttl_ms`: a command's key is used 5 minutes before the command runs again.
pub const DEFAULT_API_KEY_TTL_MS: u64 = 300_000;
/// `api_key_command_timeout_ms`: a command that has not exited by then is killed.
pub const DEFAULT_API_KEY_COMMAND_TIMEOUT_MS: u64 = 10_000;

/// Parses and validates config text. `file_label` names the file in errors; `env` looks up
/// `api_key_env` variables (injectable so tests never touch the process environment).
pub fn parse(
    text: &str,
    file_label: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Config, ConfigErrors> {
    let mut sink = ErrorSink::new(file_label);
    let table: toml::Table = match toml::from_str(text) {
        Ok(table) => table,
        Err(error) => {
            sink.push(syntax_error_position(text, &error), error.message().trim());
            return Err(sink.into_errors());
        }
    };
    let raw = split_sections(table, &mut sink);
    let config = build(raw, &mut sink, env);
    sink.finish()?;
    Ok(config)
}

/// `line L, column C` of a syntax error (never the source line itself: it may hold a key).
fn syntax_error_position(text: &str, error: &toml::de::Error) -> String {
    let Some(offset) = error.span().map(|span| span.start) else {
        return String::new();
    };
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let column = before
        .rsplit('\n')
        .next()
        .map_or(1, |line_text| line_text.chars().count() + 1);
    format!("line {line}, column {column}")
}

/// The raw file with array elements kept in place (`None` where an element was not a table) so
/// error keys keep their indexes.
struct RawSections {
    server: RawServer,
    journal: RawJournal,
    defaults: RawDefaults,
    providers: Vec<Option<RawProvider>>,
    connections: Vec<Option<RawConnection>>,
    combos: Vec<Option<RawCombo>>,
    cluster: Option<crate::cluster::config::RawCluster>,
    telemetry: Option<super::raw::RawTelemetry>,
    affinity: crate::config::raw::RawAffinity,
    translation: crate::config::raw::RawTranslation,
    clients: Vec<Option<super::raw::RawClient>>,
    prices: Vec<Option<super::raw::RawPrice>>,
    prices_file: Option<String>,
}

fn split_sections(table: toml::Table, sink: &mut ErrorSink) -> RawSections {
    let mut sections = RawSections {
        server: RawServer::default(),
        journal: RawJournal::default(),
        defaults: RawDefaults::default(),
        providers: Vec::new(),
        connections: Vec::new(),
        combos: Vec::new(),
        cluster: None,
        telemetry: None,
        affinity: Default::default(),
        translation: Default::default(),
        clients: Vec::new(),
        prices: Vec::new(),
        prices_file: None,
    };
    for (key, value) in table {
        match key.as_str() {
            "server" => {
                sections.server = deserialize_collecting(value, "server", sink).unwrap_or_default();
            }
            "journal" => {
                sections.journal =
                    deserialize_collecting(value, "journal", sink).unwrap_or_default();
            }
            "defaults" => {
                sections.defaults =
                    deserialize_collecting(value, "defaults", sink).unwrap_or_default();
            }
            "affinity" => {
                sections.affinity =
                    deserialize_collecting(value, "affinity", sink).unwrap_or_default();
            }
            "translation" => {
                sections.translation =
                    deserialize_collecting(value, "translation", sink).unwrap_or_default();
            }
            "cluster" => {
                sections.cluster =
                    Some(deserialize_collecting(value, "cluster", sink).unwrap_or_default());
            }
            "telemetry" => {
                sections.telemetry =
                    Some(deserialize_collecting(value, "telemetry", sink).unwrap_or_default());
            }
            "providers" => sections.providers = elements(value, "providers", sink, |_| None),
            "connections" => sections.connections = elements(value, "connections", sink, |_| None),
            "clients" => sections.clients = elements(value, "clients", sink, |_| None),
            "prices" => sections.prices = elements(value, "prices", sink, |_| None),
            "prices_file" => match value {
                toml::Value::String(path) if !path.is_empty() => sections.prices_file = Some(path),
                _ => sink.push("prices_file", "must be a file path (a non-empty string)"),
            },
            "combos" => {
                sections.combos = elements(value, "combos", sink, |element| {
                    element
                        .get("name")
                        .and_then(toml::Value::as_str)
                        .filter(|name| usable_in_key(name))
                        .map(|name| format!("combos.{name}"))
                });
            }
            _ => sink.push(key, unknown_key_reason(field_names::<RawConfig>())),
        }
    }
    sections
}

/// Deserializes each element of an array of tables on its own, so one bad element does not hide
/// the others' errors. `label` may name an element (`combos.team`) instead of `combos[1]`.
fn elements<T: serde::de::DeserializeOwned>(
    value: toml::Value,
    section: &str,
    sink: &mut ErrorSink,
    label: impl Fn(&toml::Value) -> Option<String>,
) -> Vec<Option<T>> {
    let toml::Value::Array(items) = value else {
        sink.push(
            section,
            "must be an array of tables ([[".to_owned() + section + "]])",
        );
        return Vec::new();
    };
    items
        .into_iter()
        .enumerate()
        .map(|(index, item)| {
            let prefix = label(&item).unwrap_or_else(|| format!("{section}[{index}]"));
            deserialize_collecting(item, &prefix, sink)
        })
        .collect()
}

fn unknown_key_reason(expected: &[&str]) -> String {
    let names = expected
        .iter()
        .map(|name| format!("`{name}`"))
        .collect::<Vec<_>>()
        .join(", ");
    format!("unknown key; expected one of {names}")
}

/// A name that can appear in an error key as-is.
fn usable_in_key(name: &str) -> bool {
    !name.is_empty() && !name.contains(['/', '.', '[', ']', ' '])
}

fn build(raw: RawSections, sink: &mut ErrorSink, env: &dyn Fn(&str) -> Option<String>) -> Config {
    let server = build_server(raw.server, sink);
    let journal = build_journal(raw.journal, sink);
    let defaults = build_defaults(raw.defaults, sink);
    let providers = build_providers(raw.providers, sink);
    // Ids of connections written in the file, valid or not: a combo naming one that has errors
    // of its own is not told the connection is unknown as well.
    let declared: HashSet<String> = raw
        .connections
        .iter()
        .flatten()
        .filter_map(|connection| connection.id.clone())
        .collect();
    let connections = build_connections(raw.connections, &providers, sink, env);
    let combos = build_combos(raw.combos, &connections, &declared, sink);
    let cluster = raw.cluster.map(|cluster| {
        crate::cluster::config::build(cluster, &mut |key, reason| sink.push(key, reason))
    });
    let telemetry = raw
        .telemetry
        .and_then(|telemetry| super::telemetry::build(telemetry, sink));
    let affinity = build_affinity(raw.affinity, sink);
    let translation = build_translation(raw.translation, sink);
    let clients = super::clients::build_clients(
        &server.api_keys,
        server.admin_key.as_ref(),
        raw.clients,
        sink,
        env,
    );
    let prices = super::clients::build_prices(raw.prices_file, raw.prices, sink);
    Config {
        clients,
        prices,
        affinity,
        translation,
        server,
        journal,
        defaults,
        providers: providers.into_iter().flatten().collect(),
        connections: connections.into_iter().flatten().collect(),
        combos,
        cluster,
        telemetry,
        source_path: None,
    }
}

fn build_translation(
    raw: crate::config::raw::RawTranslation,
    sink: &mut ErrorSink,
) -> super::model::TranslationConfig {
    let defaults = super::model::TranslationConfig::default();
    let default_max_tokens = match raw.default_max_tokens {
        Some(0) => {
            sink.push("translation.default_max_tokens", "must be at least 1");
            defaults.default_max_tokens
        }
        Some(tokens) => tokens,
        None => defaults.default_max_tokens,
    };
    super::model::TranslationConfig { default_max_tokens }
}

fn build_affinity(
    raw: crate::config::raw::RawAffinity,
    sink: &mut ErrorSink,
) -> quotaroute_actors::policy::affinity::AffinitySettings {
    let defaults = quotaroute_actors::policy::affinity::AffinitySettings::default();
    let as_usize = |value: u64| usize::try_from(value).unwrap_or(usize::MAX);
    quotaroute_actors::policy::affinity::AffinitySettings {
        enabled: raw.enabled.unwrap_or(defaults.enabled),
        min_prompt_bytes: raw
            .min_prompt_bytes
            .map_or(defaults.min_prompt_bytes, as_usize),
        ttl_ms: at_least_one(raw.ttl_ms, defaults.ttl_ms, "affinity.ttl_ms", sink),
        max_groups: as_usize(at_least_one(
            raw.max_groups,
            defaults.max_groups as u64,
            "affinity.max_groups",
            sink,
        )),
        max_lead: raw.max_lead.unwrap_or(defaults.max_lead),
    }
}

fn at_least_one(value: Option<u64>, default: u64, key: &str, sink: &mut ErrorSink) -> u64 {
    match value {
        Some(0) => {
            sink.push(key, "must be at least 1");
            default
        }
        Some(value) => value,
        None => default,
    }
}

fn at_least_one_u32(value: Option<u32>, default: u32, key: &str, sink: &mut ErrorSink) -> u32 {
    match value {
        Some(0) => {
            sink.push(key, "must be at least 1");
            default
        }
        Some(value) => value,
        None => default,
    }
}

/// Looks a string up in a fixed table of allowed spellings.
fn one_of<T: Copy>(
    value: &str,
    allowed: &[(&str, T)],
    key: &str,
    sink: &mut ErrorSink,
) -> Option<T> {
    if let Some((_, parsed)) = allowed.iter().find(|(name, _)| *name == value) {
        return Some(*parsed);
    }
    let names = allowed
        .iter()
        .map(|(name, _)| format!("`{name}`"))
        .collect::<Vec<_>>()
        .join(", ");
    sink.push(key, format!("`{value}` is not one of {names}"));
    None
}

fn build_server(raw: RawServer, sink: &mut ErrorSink) -> ServerConfig {
    let listen_text = raw.listen.unwrap_or_else(|| DEFAULT_LISTEN.to_owned());
    let listen = listen_text.parse::<SocketAddr>().unwrap_or_else(|_| {
        sink.push(
            "server.listen",
            format!(
                "invalid listen address `{listen_text}`: expected IP:PORT such as {DEFAULT_LISTEN}"
            ),
        );
        SocketAddr::from(([127, 0, 0, 1], 4100))
    });
    let mut api_keys = Vec::new();
    for (index, key) in raw.api_keys.unwrap_or_default().into_iter().enumerate() {
        if key.is_empty() {
            sink.push(format!("server.api_keys[{index}]"), "must not be empty");
        } else {
            api_keys.push(Secret::new(key));
        }
    }
    let admin_key = match raw.admin_key {
        Some(key) if key.is_empty() => {
            sink.push(
                "server.admin_key",
                "must not be empty (omit it to turn the admin API off)",
            );
            None
        }
        other => other.map(Secret::new),
    };
    ServerConfig {
        listen,
        api_keys,
        admin_key,
        max_body_bytes: at_least_one(
            raw.max_body_bytes,
            DEFAULT_MAX_BODY_BYTES,
            "server.max_body_bytes",
            sink,
        ),
        request_timeout_ms: at_least_one(
            raw.request_timeout_ms,
            DEFAULT_REQUEST_TIMEOUT_MS,
            "server.request_timeout_ms",
            sink,
        ),
        first_token_timeout_ms: at_least_one(
            raw.first_token_timeout_ms,
            DEFAULT_FIRST_TOKEN_TIMEOUT_MS,
            "server.first_token_timeout_ms",
            sink,
        ),
        stream_idle_timeout_ms: at_least_one(
            raw.stream_idle_timeout_ms,
            DEFAULT_STREAM_IDLE_TIMEOUT_MS,
            "server.stream_idle_timeout_ms",
            sink,
        ),
        cors_allow_origins: cors_origins(raw.cors_allow_origins.unwrap_or_default(), sink),
        tls: server_tls(raw.tls_cert, raw.tls_key, sink),
        shutdown_grace_ms: raw.shutdown_grace_ms.unwrap_or(DEFAULT_SHUTDOWN_GRACE_MS),
        metrics_public: raw.metrics_public.unwrap_or(false),
        header_timeout_ms: at_least_one(
            raw.header_timeout_ms,
            DEFAULT_HEADER_TIMEOUT_MS,
            "server.header_timeout_ms",
            sink,
        ),
        body_timeout_ms: at_least_one(
            raw.body_timeout_ms,
            DEFAULT_BODY_TIMEOUT_MS,
            "server.body_timeout_ms",
            sink,
        ),
        max_connections: at_least_one(
            raw.max_connections,
            DEFAULT_MAX_CONNECTIONS,
            "server.max_connections",
            sink,
        ),
        max_implicit_combos: at_least_one(
            raw.max_implicit_combos,
            DEFAULT_MAX_IMPLICIT_COMBOS,
            "server.max_implicit_combos",
            sink,
        ),
        max_upstream_buffer_bytes: raw.max_upstream_buffer_bytes.map_or(
            DEFAULT_MAX_UPSTREAM_BUFFER_BYTES,
            |bytes| {
                if bytes < 64 * 1024 * 1024 {
                    sink.push(
                        "server.max_upstream_buffer_bytes",
                        "must be at least 67108864 (one whole upstream body of 64 MiB)",
                    );
                }
                bytes
            },
        ),
        usage_max_tokens: at_least_one(
            raw.usage_max_tokens,
            DEFAULT_USAGE_MAX_TOKENS,
            "server.usage_max_tokens",
            sink,
        ),
        client_retry_max_ms: at_least_one(
            raw.client_retry_max_ms,
            DEFAULT_CLIENT_RETRY_MAX_MS,
            "server.client_retry_max_ms",
            sink,
        ),
        drain_after_client_left_ms: raw
            .drain_after_client_left_ms
            .unwrap_or(DEFAULT_DRAIN_AFTER_CLIENT_LEFT_MS),
        drain_max_bytes: raw.drain_max_bytes.unwrap_or(DEFAULT_DRAIN_MAX_BYTES),
    }
}

/// `server.tls_cert` and `server.tls_key`: both or neither, readable, and one pair.
fn server_tls(
    cert: Option<String>,
    key: Option<String>,
    sink: &mut ErrorSink,
) -> Option<ServerTls> {
    match (cert, key) {
        (None, None) => None,
        (Some(_), None) => {
            sink.push(
                "server.tls_key",
                "missing: server.tls_cert needs its private key",
            );
            None
        }
        (None, Some(_)) => {
            sink.push(
                "server.tls_cert",
                "missing: server.tls_key needs its certificate",
            );
            None
        }
        (Some(cert), Some(key)) => {
            let tls = ServerTls {
                cert: PathBuf::from(cert),
                key: PathBuf::from(key),
            };
            match tls_files::server_tls(&tls.cert, &tls.key) {
                Ok(_) => Some(tls),
                Err(reason) => {
                    sink.push("server.tls_cert", reason);
                    None
                }
            }
        }
    }
}

/// A proxy URL as operators write it (`http://user:pass@proxy:3128`), with its credentials
/// hidden for error messages.
fn check_proxy(value: &str, key: &str, sink: &mut ErrorSink) -> bool {
    let shown = |url: &Url| {
        let mut url = url.clone();
        if url.password().is_some() {
            let _ = url.set_password(Some("***"));
        }
        url.to_string()
    };
    match Url::parse(value) {
        Ok(url) if matches!(url.scheme(), "http" | "https") && url.host().is_some() => true,
        Ok(url) => {
            sink.push(
                key,
                format!(
                    "`{}` is not an http(s) proxy URL (scheme `{}`); use e.g. http://proxy.corp:3128",
                    shown(&url),
                    url.scheme()
                ),
            );
            false
        }
        Err(error) => {
            sink.push(key, format!("not a valid proxy URL: {error}"));
            false
        }
    }
}

/// `server.cors_allow_origins`: `"*"`, or origins as browsers send them
/// (`scheme://host[:port]`, no path), kept lower-case for comparison.
fn cors_origins(origins: Vec<String>, sink: &mut ErrorSink) -> Vec<String> {
    let mut valid = Vec::new();
    for (index, origin) in origins.into_iter().enumerate() {
        let key = format!("server.cors_allow_origins[{index}]");
        if origin == "*" {
            valid.push(origin);
            continue;
        }
        match Url::parse(&origin) {
            Ok(url)
                if matches!(url.scheme(), "http" | "https")
                    && url.host_str().is_some()
                    && url.path() == "/"
                    && !origin.ends_with('/')
                    && url.query().is_none() =>
            {
                valid.push(origin.to_ascii_lowercase());
            }
            _ => sink.push(
                key,
                format!("`{origin}` is not an origin: expected \"*\" or scheme://host[:port] such as https://app.example.com"),
            ),
        }
    }
    valid
}

fn build_journal(raw: RawJournal, sink: &mut ErrorSink) -> JournalConfig {
    let path = raw.path.unwrap_or_else(|| DEFAULT_JOURNAL_PATH.to_owned());
    if path.is_empty() {
        sink.push("journal.path", "must not be empty");
    }
    let request_events = raw
        .request_events
        .and_then(|value| {
            one_of(
                &value,
                &[
                    ("all", RequestEvents::All),
                    ("failures", RequestEvents::Failures),
                ],
                "journal.request_events",
                sink,
            )
        })
        .unwrap_or(RequestEvents::All);
    JournalConfig {
        path: PathBuf::from(path),
        flush_every_ms: at_least_one(
            raw.flush_every_ms,
            DEFAULT_FLUSH_EVERY_MS,
            "journal.flush_every_ms",
            sink,
        ),
        snapshot_every_events: at_least_one(
            raw.snapshot_every_events,
            DEFAULT_SNAPSHOT_EVERY_EVENTS,
            "journal.snapshot_every_events",
            sink,
        ),
        retention_hours: at_least_one(
            raw.retention_hours,
            DEFAULT_RETENTION_HOURS,
            "journal.retention_hours",
            sink,
        ),
        max_queue_events: at_least_one(
            raw.max_queue_events,
            DEFAULT_MAX_QUEUE_EVENTS,
            "journal.max_queue_events",
            sink,
        ),
        request_events,
    }
}

fn check_breaker(breaker: &BreakerOverrides, prefix: &str, sink: &mut ErrorSink) {
    if let Some(profile) = &breaker.profile {
        one_of(
            profile,
            &[("api_key", ()), ("oauth", ())],
            &format!("{prefix}.breaker.profile"),
            sink,
        );
    }
}

fn build_defaults(raw: RawDefaults, sink: &mut ErrorSink) -> DefaultsConfig {
    let breaker = raw.breaker.unwrap_or_default();
    check_breaker(&breaker, "defaults", sink);
    DefaultsConfig {
        max_attempts: at_least_one_u32(
            raw.max_attempts,
            DEFAULT_MAX_ATTEMPTS,
            "defaults.max_attempts",
            sink,
        ),
        max_upstream_requests: at_least_one_u32(
            raw.max_upstream_requests,
            DEFAULT_MAX_UPSTREAM_REQUESTS,
            "defaults.max_upstream_requests",
            sink,
        ),
        breaker,
        cooldown: raw.cooldown.unwrap_or_default(),
        lockout: raw.lockout.unwrap_or_default(),
        buckets: raw.buckets.unwrap_or_default(),
        pacing: super::pacing::build(raw.pacing, sink),
    }
}

/// A required name (`name`, `id`) that also appears in URLs and `provider/model` strings.
fn required_name(value: Option<String>, key: &str, sink: &mut ErrorSink) -> Option<String> {
    match value {
        None => {
            sink.push(key, "missing (required)");
            None
        }
        Some(name) if name.is_empty() => {
            sink.push(key, "must not be empty");
            None
        }
        Some(name) if name.contains('/') => {
            sink.push(key, format!("`{name}` must not contain `/`"));
            None
        }
        Some(name) => Some(name),
    }
}

/// Reports a name already seen; remembers the first place each name was used.
fn check_unique(
    name: &str,
    key: &str,
    what: &str,
    seen: &mut HashMap<String, String>,
    sink: &mut ErrorSink,
) -> bool {
    if let Some(first) = seen.get(name) {
        sink.push(key, format!("duplicate {what} `{name}` (first at {first})"));
        false
    } else {
        seen.insert(name.to_owned(), key.to_owned());
        true
    }
}

fn build_providers(
    raw: Vec<Option<RawProvider>>,
    sink: &mut ErrorSink,
) -> Vec<Option<ProviderConfig>> {
    let mut seen = HashMap::new();
    raw.into_iter()
        .enumerate()
        .map(|(index, provider)| {
            let provider = provider?;
            let prefix = format!("providers[{index}]");
            let name_key = format!("{prefix}.name");
            let name = required_name(provider.name, &name_key, sink);
            let unique = name.as_deref().is_some_and(|name| {
                check_unique(name, &name_key, "provider name", &mut seen, sink)
            });
            let format = match provider.format {
                Some(format) => one_of(
                    &format,
                    &[
                        ("openai", ApiFormat::OpenAi),
                        ("anthropic", ApiFormat::Anthropic),
                    ],
                    &format!("{prefix}.format"),
                    sink,
                ),
                None => {
                    sink.push(
                        format!("{prefix}.format"),
                        "missing: `openai` or `anthropic`",
                    );
                    None
                }
            };
            let base_url = parse_base_url(provider.base_url, &format!("{prefix}.base_url"), sink);
            if let Some(header) = &provider.auth_header {
                if HeaderName::from_bytes(header.as_bytes()).is_err() {
                    sink.push(
                        format!("{prefix}.auth_header"),
                        format!("`{header}` is not a valid HTTP header name"),
                    );
                }
            }
            let headers = provider.headers.unwrap_or_default();
            for (header, value) in &headers {
                let key = format!("{prefix}.headers.{header}");
                if HeaderName::from_bytes(header.as_bytes()).is_err() {
                    sink.push(key, "not a valid HTTP header name");
                } else if HeaderValue::from_str(value).is_err() {
                    sink.push(key, "value is not a valid HTTP header value");
                }
            }
            let accept_encoding = provider
                .accept_encoding
                .unwrap_or_else(|| DEFAULT_UPSTREAM_ACCEPT_ENCODING.to_owned());
            if accept_encoding.is_empty() || HeaderValue::from_str(&accept_encoding).is_err() {
                sink.push(
                    format!("{prefix}.accept_encoding"),
                    "must be an Accept-Encoding value such as \"identity\" or \"gzip, br\"",
                );
            }
            let ca_file = provider.ca_file.map(PathBuf::from);
            let ca_certs = match &ca_file {
                Some(path) => tls_files::read_certificates(path).unwrap_or_else(|reason| {
                    sink.push(format!("{prefix}.ca_file"), reason);
                    Vec::new()
                }),
                None => Vec::new(),
            };
            let proxy = provider
                .proxy
                .filter(|url| check_proxy(url, &format!("{prefix}.proxy"), sink))
                .map(Secret::new);
            let breaker = provider.breaker.unwrap_or_default();
            check_breaker(&breaker, &prefix, sink);
            let (name, format, base_url) = (name?, format?, base_url?);
            unique.then_some(ProviderConfig {
                name,
                format,
                base_url,
                auth_header: provider.auth_header,
                headers,
                accept_encoding,
                ca_file,
                ca_certs,
                proxy,
                breaker,
                cooldown: provider.cooldown.unwrap_or_default(),
                lockout: provider.lockout.unwrap_or_default(),
                buckets: provider.buckets.unwrap_or_default(),
            })
        })
        .collect()
}

fn parse_base_url(value: Option<String>, key: &str, sink: &mut ErrorSink) -> Option<Url> {
    let Some(text) = value else {
        sink.push(key, "missing (required), e.g. `https://api.openai.com/v1`");
        return None;
    };
    // Printed only with its credentials cut: a URL may carry a key where it should not.
    let shown = mask_url(&text);
    match Url::parse(&text) {
        Ok(url) if !url.username().is_empty() || url.password().is_some() => {
            sink.push(
                key,
                "must not carry credentials (user:password@): give the key to the connection, or send it with the provider's `headers` or `auth_header`",
            );
            None
        }
        Ok(url) if url.query().is_some() || url.fragment().is_some() => {
            sink.push(
                key,
                "must not carry a query string or fragment (a `?key=` would be sent and logged with every path): use the provider's `headers` or `auth_header`",
            );
            None
        }
        Ok(url) if matches!(url.scheme(), "http" | "https") && url.host().is_some() => Some(url),
        Ok(url) => {
            sink.push(
                key,
                format!(
                    "`{shown}` must be an http or https URL with a host (scheme is `{}`)",
                    url.scheme()
                ),
            );
            None
        }
        Err(error) => {
            sink.push(key, format!("`{shown}` is not a valid URL: {error}"));
            None
        }
    }
}

fn build_connections(
    raw: Vec<Option<RawConnection>>,
    providers: &[Option<ProviderConfig>],
    sink: &mut ErrorSink,
    env: &dyn Fn(&str) -> Option<String>,
) -> Vec<Option<ConnectionConfig>> {
    let provider_names: HashSet<&str> = providers
        .iter()
        .flatten()
        .map(|provider| provider.name.as_str())
        .collect();
    let mut seen = HashMap::new();
    raw.into_iter()
        .enumerate()
        .map(|(index, connection)| {
            let connection = connection?;
            let prefix = format!("connections[{index}]");
            let id_key = format!("{prefix}.id");
            let credential = resolve_credential(&connection, &prefix, sink, env);
            let id = required_name(connection.id, &id_key, sink);
            let unique = id
                .as_deref()
                .is_some_and(|id| check_unique(id, &id_key, "connection id", &mut seen, sink));
            let provider = match connection.provider {
                None => {
                    sink.push(format!("{prefix}.provider"), "missing (required)");
                    None
                }
                Some(name) if !provider_names.contains(name.as_str()) => {
                    sink.push(
                        format!("{prefix}.provider"),
                        format!("unknown provider `{name}` (no [[providers]] entry has this name)"),
                    );
                    None
                }
                Some(name) => Some(name),
            };
            let default_auth = match credential {
                Some(CredentialSource::OAuth(_)) => AuthKind::OAuth,
                _ => AuthKind::ApiKey,
            };
            let auth = connection
                .auth
                .as_ref()
                .map(|auth| {
                    one_of(
                        auth,
                        &[("api_key", AuthKind::ApiKey), ("oauth", AuthKind::OAuth)],
                        &format!("{prefix}.auth"),
                        sink,
                    )
                })
                .unwrap_or(Some(default_auth));
            if connection.oauth.is_some() && auth == Some(AuthKind::ApiKey) {
                sink.push(
                    format!("{prefix}.auth"),
                    "`api_key` cannot go with [connections.oauth]: an OAuth access token is sent as a Bearer token (omit `auth` or set \"oauth\")",
                );
            }
            let weight = at_least_one_u32(connection.weight, 1, &format!("{prefix}.weight"), sink);
            if connection.max_concurrent == Some(0) {
                sink.push(
                    format!("{prefix}.max_concurrent"),
                    "must be at least 1 (omit it for no cap)",
                );
            }
            if let Some(models) = &connection.models {
                if models.is_empty() {
                    sink.push(
                        format!("{prefix}.models"),
                        "must not be empty (omit it to serve any model)",
                    );
                }
                for (model_index, model) in models.iter().enumerate() {
                    if model.is_empty() {
                        sink.push(
                            format!("{prefix}.models[{model_index}]"),
                            "must not be empty",
                        );
                    }
                }
            }
            let raw_limits = connection.limits.unwrap_or_default();
            let reserve = super::reserve::build(
                (connection.reserve_pct, connection.reserve),
                (raw_limits.reserve_pct, raw_limits.reserve.clone()),
                &prefix,
                sink,
            );
            let limits = build_limits(raw_limits);
            let (id, provider, credential, auth) = (id?, provider?, credential?, auth?);
            unique.then_some(ConnectionConfig {
                id,
                provider,
                credential,
                auth,
                weight,
                max_concurrent: connection.max_concurrent.filter(|cap| *cap > 0),
                models: connection.models,
                limits,
                reserve,
            })
        })
        .collect()
}

/// Exactly one credential source per connection (`api_key`, `api_key_env`, `api_key_file`,
/// `api_key_command`, `[connections.oauth]`), its own keys complete, and the command's
/// `api_key_ttl_ms` / `api_key_command_timeout_ms` only beside a command. Nothing is read or
/// run here (the node does that); an env variable must be set. Errors name the key or the
/// variable, never a value.
fn resolve_credential(
    connection: &RawConnection,
    prefix: &str,
    sink: &mut ErrorSink,
    env: &dyn Fn(&str) -> Option<String>,
) -> Option<CredentialSource> {
    let set: Vec<&str> = [
        ("api_key", connection.api_key.is_some()),
        ("api_key_env", connection.api_key_env.is_some()),
        ("api_key_file", connection.api_key_file.is_some()),
        ("api_key_command", connection.api_key_command.is_some()),
        ("oauth", connection.oauth.is_some()),
    ]
    .into_iter()
    .filter_map(|(key, present)| present.then_some(key))
    .collect();
    let is_command = connection.api_key_command.is_some();
    for (key, present) in [
        ("api_key_ttl_ms", connection.api_key_ttl_ms.is_some()),
        (
            "api_key_command_timeout_ms",
            connection.api_key_command_timeout_ms.is_some(),
        ),
    ] {
        if present && !is_command {
            sink.push(
                format!("{prefix}.{key}"),
                "only applies to `api_key_command` (this connection has no key command)",
            );
        }
    }
    match set.as_slice() {
        [] => {
            sink.push(
                format!("{prefix}.api_key_env"),
                "missing: set `api_key_env` (or `api_key`, `api_key_file`, `api_key_command`, [connections.oauth])",
            );
            return None;
        }
        [_] => (),
        [first, rest @ ..] => {
            let named = |key: &&str| match *key {
                "oauth" => "[connections.oauth]".to_owned(),
                key => format!("`{key}`"),
            };
            sink.push(
                format!("{prefix}.{first}"),
                format!(
                    "set exactly one of `api_key`, `api_key_env`, `api_key_file`, `api_key_command` and [connections.oauth], not {} with {}",
                    named(first),
                    rest.iter().map(named).collect::<Vec<_>>().join(" and ")
                ),
            );
            return None;
        }
    }
    if let Some(key) = &connection.api_key {
        if key.is_empty() {
            sink.push(format!("{prefix}.api_key"), "must not be empty");
            return None;
        }
        return Some(CredentialSource::Static {
            key: Secret::new(key.clone()),
            env: None,
        });
    }
    if let Some(variable) = &connection.api_key_env {
        return match env(variable).filter(|value| !value.is_empty()) {
            Some(value) => Some(CredentialSource::Static {
                key: Secret::new(value),
                env: Some(variable.clone()),
            }),
            None => {
                sink.push(
                    format!("{prefix}.api_key_env"),
                    format!("environment variable `{variable}` is not set"),
                );
                None
            }
        };
    }
    if let Some(path) = &connection.api_key_file {
        if path.is_empty() {
            sink.push(format!("{prefix}.api_key_file"), "must not be empty");
            return None;
        }
        return Some(CredentialSource::File {
            path: PathBuf::from(path),
        });
    }
    if let Some(argv) = &connection.api_key_command {
        let ttl_ms = at_least_one(
            connection.api_key_ttl_ms,
            DEFAULT_API_KEY_TTL_MS,
            &format!("{prefix}.api_key_ttl_ms"),
            sink,
        );
        let timeout_ms = at_least_one(
            connection.api_key_command_timeout_ms,
            DEFAULT_API_KEY_COMMAND_TIMEOUT_MS,
            &format!("{prefix}.api_key_command_timeout_ms"),
            sink,
        );
        if argv.first().is_none_or(String::is_empty) {
            sink.push(
                format!("{prefix}.api_key_command"),
                "must name a program: an argv such as [\"/usr/local/bin/get-key\", \"--team\", \"a\"] (no shell)",
            );
            return None;
        }
        return Some(CredentialSource::Command {
            argv: argv.clone(),
            ttl_ms,
            timeout_ms,
        });
    }
    connection
        .oauth
        .as_ref()
        .and_then(|oauth| resolve_oauth(oauth, &format!("{prefix}.oauth"), sink))
        .map(CredentialSource::OAuth)
}

/// `[connections.oauth]`: every key present, `token_url` an http(s) URL.
fn resolve_oauth(raw: &RawOAuth, prefix: &str, sink: &mut ErrorSink) -> Option<OAuthSource> {
    let token_url = match &raw.token_url {
        None => {
            sink.push(
                format!("{prefix}.token_url"),
                "missing (required): the token endpoint, e.g. `https://auth.example.com/oauth/token`",
            );
            None
        }
        Some(text) => match Url::parse(text) {
            Ok(url) if matches!(url.scheme(), "http" | "https") && url.host().is_some() => {
                Some(url)
            }
            Ok(url) => {
                sink.push(
                    format!("{prefix}.token_url"),
                    format!(
                        "`{text}` must be an http or https URL with a host (scheme is `{}`)",
                        url.scheme()
                    ),
                );
                None
            }
            Err(error) => {
                sink.push(
                    format!("{prefix}.token_url"),
                    format!("`{text}` is not a valid URL: {error}"),
                );
                None
            }
        },
    };
    let mut required = |value: &Option<String>, key: &str, what: &str| match value {
        None => {
            sink.push(
                format!("{prefix}.{key}"),
                format!("missing (required): {what}"),
            );
            None
        }
        Some(value) if value.is_empty() => {
            sink.push(format!("{prefix}.{key}"), "must not be empty");
            None
        }
        Some(value) => Some(value.clone()),
    };
    let client_id = required(&raw.client_id, "client_id", "the OAuth client id");
    let refresh_token_file = required(
        &raw.refresh_token_file,
        "refresh_token_file",
        "the file holding the refresh token (a rotated one is written back to it)",
    );
    Some(OAuthSource {
        token_url: token_url?,
        client_id: client_id?,
        refresh_token_file: PathBuf::from(refresh_token_file?),
    })
}

fn build_limits(raw: RawLimits) -> ConnectionLimits {
    ConnectionLimits {
        requests_5h: raw.requests_5h,
        tokens_5h: raw.tokens_5h,
        requests_7d: raw.requests_7d,
        tokens_7d: raw.tokens_7d,
        model_requests_7d: raw.model_requests_7d.unwrap_or_default(),
        model_tokens_7d: raw.model_tokens_7d.unwrap_or_default(),
    }
}

fn build_combos(
    raw: Vec<Option<RawCombo>>,
    connections: &[Option<ConnectionConfig>],
    declared: &HashSet<String>,
    sink: &mut ErrorSink,
) -> Vec<ComboConfig> {
    let connections_by_id: BTreeMap<&str, &ConnectionConfig> = connections
        .iter()
        .flatten()
        .map(|connection| (connection.id.as_str(), connection))
        .collect();
    let mut seen = HashMap::new();
    let mut combos = Vec::new();
    for (index, combo) in raw.into_iter().enumerate() {
        let Some(combo) = combo else { continue };
        let prefix = match combo.name.as_deref() {
            Some(name) if usable_in_key(name) => format!("combos.{name}"),
            _ => format!("combos[{index}]"),
        };
        let name_key = format!("combos[{index}].name");
        let name = required_name(combo.name, &name_key, sink);
        let unique = name
            .as_deref()
            .is_some_and(|name| check_unique(name, &name_key, "combo name", &mut seen, sink));
        let strategy = combo
            .strategy
            .map(|strategy| {
                one_of(
                    &strategy,
                    &[
                        ("quota-share", Strategy::QuotaShare),
                        ("priority", Strategy::Priority),
                        ("round-robin", Strategy::RoundRobin),
                        ("weighted", Strategy::Weighted),
                    ],
                    &format!("{prefix}.strategy"),
                    sink,
                )
            })
            .unwrap_or(Some(Strategy::QuotaShare));
        if combo.max_attempts == Some(0) {
            sink.push(format!("{prefix}.max_attempts"), "must be at least 1");
        }
        let targets = build_targets(combo.targets, &prefix, &connections_by_id, declared, sink);
        let (Some(name), Some(strategy), Some(targets)) = (name, strategy, targets) else {
            continue;
        };
        if unique {
            combos.push(ComboConfig {
                name,
                strategy,
                max_attempts: combo.max_attempts.filter(|attempts| *attempts > 0),
                hold_ms: combo.hold_ms.unwrap_or(0),
                queue_ms: combo.queue_ms.unwrap_or(0),
                pacing: combo.pacing.unwrap_or(true),
                translate: combo.translate.unwrap_or(true),
                targets,
            });
        }
    }
    combos
}

fn build_targets(
    raw: Option<Vec<RawTarget>>,
    prefix: &str,
    connections_by_id: &BTreeMap<&str, &ConnectionConfig>,
    declared: &HashSet<String>,
    sink: &mut ErrorSink,
) -> Option<Vec<TargetConfig>> {
    let Some(raw) = raw else {
        sink.push(
            format!("{prefix}.targets"),
            "missing (required): at least one target",
        );
        return None;
    };
    if raw.is_empty() {
        sink.push(format!("{prefix}.targets"), "must list at least one target");
        return None;
    }
    let mut targets = Vec::new();
    let mut seen = HashMap::new();
    let errors_before = sink.len();
    let mut invalid_reference = false;
    for (index, target) in raw.into_iter().enumerate() {
        let key = format!("{prefix}.targets[{index}]");
        let connection = match target.connection {
            None => {
                sink.push(format!("{key}.connection"), "missing (required)");
                None
            }
            Some(id) => match connections_by_id.get(id.as_str()) {
                Some(connection) => Some(*connection),
                // Declared but invalid: its own errors already say so.
                None if declared.contains(&id) => {
                    invalid_reference = true;
                    None
                }
                None => {
                    sink.push(
                        format!("{key}.connection"),
                        format!("unknown connection `{id}` (no valid [[connections]] entry has this id)"),
                    );
                    None
                }
            },
        };
        let model = match target.model {
            None => {
                sink.push(format!("{key}.model"), "missing (required)");
                None
            }
            Some(model) if model.is_empty() => {
                sink.push(format!("{key}.model"), "must not be empty");
                None
            }
            Some(model) => Some(model),
        };
        let weight = at_least_one_u32(target.weight, 1, &format!("{key}.weight"), sink);
        let (Some(connection), Some(model)) = (connection, model) else {
            continue;
        };
        if let Some(models) = &connection.models {
            if !models.contains(&model) {
                sink.push(
                    format!("{key}.model"),
                    format!(
                        "connection `{}` does not serve `{model}` (its models: {})",
                        connection.id,
                        models.join(", ")
                    ),
                );
                continue;
            }
        }
        let execution_key = format!("{}/{model}", connection.id);
        if !check_unique(&execution_key, &key, "target", &mut seen, sink) {
            continue;
        }
        targets.push(TargetConfig {
            connection: connection.id.clone(),
            model,
            weight,
        });
    }
    (sink.len() == errors_before && !invalid_reference).then_some(targets)
}
