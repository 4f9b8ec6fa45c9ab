//! The node's configuration: the TOML file of contract.md "Config (TOML)", validated.
//!
//! Layout:
//! - `raw` — the file's shape: every key optional, unknown keys denied;
//! - `deserialize` — TOML → raw structs, collecting every unknown or mistyped key;
//! - `validate/` — raw → [`Config`]: defaults, value checks, references, all errors in one run;
//!   one file per section (`server`, `journal`, `defaults`, `providers`, `connections`, …);
//! - `clients` — `[[clients]]` (keys reduced to digests), `[[prices]]` and `prices_file`;
//! - `model` — the validated types the node runs on, and `check`'s summary;
//! - `secret` — [`Secret`], the only holder of keys: never printed, never serialized;
//! - `telemetry` — the `[telemetry]` section's checks (the OTLP endpoint, the sample ratio);
//! - `error` — [`ConfigError`] (`file: key: reason`) and [`ConfigErrors`];
//! - `starter.toml` — what `quotaroute init` writes: every key with its default.
//!
//! Nothing here reads the process environment except [`load`] (for `api_key_env`), and nothing
//! here knows the resilience defaults: those belong to the policy settings.

mod clients;
mod deserialize;
mod error;
mod model;
mod pacing;
mod prime;
pub mod raw;
mod reserve;
mod secret;
mod telemetry;
pub mod topology;
mod validate;

use std::path::Path;

pub use error::{ConfigError, ConfigErrors};
pub use model::{
    ApiFormat, AuthKind, ComboConfig, Config, ConnectionConfig, CredentialSource, DefaultsConfig,
    JournalConfig, OAuthSource, ProviderConfig, RequestEvents, ResponsesConfig, ServerConfig,
    ServerTls, Strategy, TargetConfig, TelemetryConfig, TranslationConfig,
};
pub use raw::{BreakerOverrides, BucketOverrides, CooldownOverrides, LockoutOverrides};
pub use secret::Secret;
pub use validate::parse;
pub use validate::{
    DEFAULT_API_KEY_COMMAND_TIMEOUT_MS, DEFAULT_API_KEY_TTL_MS, DEFAULT_FIRST_TOKEN_TIMEOUT_MS,
    DEFAULT_FLUSH_EVERY_MS, DEFAULT_JOURNAL_PATH, DEFAULT_LISTEN, DEFAULT_MAX_ATTEMPTS,
    DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_QUEUE_EVENTS, DEFAULT_MAX_UPSTREAM_REQUESTS,
    DEFAULT_REQUEST_TIMEOUT_MS, DEFAULT_RETENTION_HOURS, DEFAULT_SHUTDOWN_GRACE_MS,
    DEFAULT_SNAPSHOT_EVERY_EVENTS, DEFAULT_STREAM_IDLE_TIMEOUT_MS,
    DEFAULT_UPSTREAM_ACCEPT_ENCODING,
};

/// The commented starter config `quotaroute init` writes: every key, with its default.
pub const STARTER_CONFIG: &str = include_str!("starter.toml");

/// Reads and validates a config file; `api_key_env` variables come from the process
/// environment. Errors name the file as given.
pub fn load(path: &Path) -> Result<Config, ConfigErrors> {
    load_with_env(path, &|variable| std::env::var(variable).ok())
}

/// Reads and validates a config file for its settings only, never its keys (replay's
/// `--what-if`): every `api_key_env` reads as a placeholder, so an operator's production
/// config works offline without its key variables set.
pub fn load_settings(path: &Path) -> Result<Config, ConfigErrors> {
    load_with_env(path, &|_| {
        Some("unused-outside-the-node-placeholder".to_string())
    })
}

fn load_with_env(
    path: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Config, ConfigErrors> {
    let label = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|error| ConfigErrors {
        errors: vec![ConfigError {
            file: label.clone(),
            key: String::new(),
            reason: format!("cannot read the file: {error}"),
        }],
    })?;
    let mut config = parse(&text, &label, env)?;
    config.source_path = Some(path.to_path_buf());
    Ok(config)
}
