//! `[[connections]]`: ids, their provider, credential, limits, models and pacing.

use std::collections::{HashMap, HashSet};

use crate::config::error::ErrorSink;
use quotaroute_actors::policy::buckets::BucketLimits;

use crate::config::model::{AuthKind, ConnectionConfig, CredentialSource, ProviderConfig};
use crate::config::raw::{RawConnection, RawLimits};

use super::checks::{at_least_one_u32, check_unique, one_of, required_name};
use super::credentials::resolve_credential;

pub(super) fn build_connections(
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
            let reserve = crate::config::reserve::build(
                (connection.reserve_pct, connection.reserve),
                (raw_limits.reserve_pct, raw_limits.reserve.clone()),
                &prefix,
                sink,
            );
            let prime = crate::config::prime::build(
                connection.prime_at.as_deref(),
                connection.prime_days.as_deref(),
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
                prime,
            })
        })
        .collect()
}

/// `[connections.limits]` as the buckets count them: the one conversion from the TOML shape.
fn build_limits(raw: RawLimits) -> BucketLimits {
    BucketLimits {
        requests_5h: raw.requests_5h,
        tokens_5h: raw.tokens_5h,
        requests_7d: raw.requests_7d,
        tokens_7d: raw.tokens_7d,
        model_requests_7d: raw.model_requests_7d.unwrap_or_default(),
        model_tokens_7d: raw.model_tokens_7d.unwrap_or_default(),
    }
}
