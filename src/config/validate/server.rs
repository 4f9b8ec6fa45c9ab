//! `[server]`: the listener, the edge's bounds and timeouts, the keys, TLS, CORS origins, the
//! upstream's encodings, usage and drain bounds — each with its default (behaviour.md,
//! contract.md).

use std::net::SocketAddr;
use std::path::PathBuf;

use url::Url;

use crate::config::error::ErrorSink;
use crate::config::model::{ServerConfig, ServerTls};
use crate::config::raw::RawServer;
use crate::config::secret::Secret;
use crate::tls_files;

use super::checks::at_least_one;

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

/// The fewest characters `server.seal_key` may have: a secret of at least 128 bits written
/// as hex (or anything longer).
pub const MIN_SEAL_KEY_CHARS: usize = 32;

pub(super) fn build_server(
    raw: RawServer,
    sink: &mut ErrorSink,
    env: &dyn Fn(&str) -> Option<String>,
) -> ServerConfig {
    let seal_key = seal_key(&raw, sink, env);
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
        seal_key,
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

/// `server.seal_key`, `seal_key_env` or `seal_key_file` (at most one): the secret a cluster's
/// nodes seal encrypted items with (behaviour §10), at least [`MIN_SEAL_KEY_CHARS`]
/// characters; a file's content is trimmed. Errors name the key, never the value.
fn seal_key(
    raw: &RawServer,
    sink: &mut ErrorSink,
    env: &dyn Fn(&str) -> Option<String>,
) -> Option<Secret> {
    let set: Vec<&str> = [
        ("seal_key", raw.seal_key.is_some()),
        ("seal_key_env", raw.seal_key_env.is_some()),
        ("seal_key_file", raw.seal_key_file.is_some()),
    ]
    .into_iter()
    .filter_map(|(key, present)| present.then_some(key))
    .collect();
    let which = match set.as_slice() {
        [] => return None,
        [one] => *one,
        [first, rest @ ..] => {
            sink.push(
                format!("server.{first}"),
                format!(
                    "set at most one of `seal_key`, `seal_key_env` and `seal_key_file`, not `{first}` with {}",
                    rest.iter().map(|key| format!("`{key}`")).collect::<Vec<_>>().join(" and ")
                ),
            );
            return None;
        }
    };
    let path = format!("server.{which}");
    let value = match which {
        "seal_key" => raw.seal_key.clone().map(Secret::new),
        "seal_key_env" => {
            let variable = raw.seal_key_env.as_deref().unwrap_or_default();
            let value = env(variable).map(Secret::new);
            if value.is_none() {
                sink.push(
                    &path,
                    format!("environment variable `{variable}` is not set"),
                );
                return None;
            }
            value
        }
        _ => {
            let file = raw.seal_key_file.as_deref().unwrap_or_default();
            match std::fs::read_to_string(file) {
                Ok(text) => Some(Secret::new(text.trim())),
                Err(error) => {
                    sink.push(&path, format!("cannot read `{file}`: {}", error.kind()));
                    return None;
                }
            }
        }
    }?;
    if value.expose().chars().count() < MIN_SEAL_KEY_CHARS {
        sink.push(
            &path,
            format!(
                "too short: at least {MIN_SEAL_KEY_CHARS} characters (e.g. `openssl rand -hex 32`)"
            ),
        );
        return None;
    }
    Some(value)
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
