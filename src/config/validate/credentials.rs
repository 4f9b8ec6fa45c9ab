//! A connection's one credential source (`api_key`, `api_key_env`, `api_key_file`,
//! `api_key_command`, `[connections.oauth]`): checked complete, nothing read or run here; messages
//! name keys and variables, never a value.

use std::path::PathBuf;

use url::Url;

use crate::config::error::ErrorSink;
use crate::config::model::{CredentialSource, OAuthSource};
use crate::config::raw::{RawConnection, RawOAuth};
use crate::config::secret::Secret;

use super::checks::at_least_one;

/// `api_key_ttl_ms`: a command's key is used 5 minutes before the command runs again.
pub const DEFAULT_API_KEY_TTL_MS: u64 = 300_000;
/// `api_key_command_timeout_ms`: a command that has not exited by then is killed.
pub const DEFAULT_API_KEY_COMMAND_TIMEOUT_MS: u64 = 10_000;

/// Exactly one credential source per connection (`api_key`, `api_key_env`, `api_key_file`,
/// `api_key_command`, `[connections.oauth]`), its own keys complete, and the command's
/// `api_key_ttl_ms` / `api_key_command_timeout_ms` only beside a command. Nothing is read or
/// run here (the node does that); an env variable must be set. Errors name the key or the
/// variable, never a value.
pub(super) fn resolve_credential(
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
