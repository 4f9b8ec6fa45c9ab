//! The `[[clients]]`, `[[prices]]` and `prices_file` checks (behaviour §11): each client's key
//! reduced to its SHA-256 digest at once (the key itself is never kept), duplicate ids and keys
//! and keyless clients named by their key path, limits checked. Never puts a key in a message.

use std::collections::HashMap;

use crate::clients::class::RequestClass;
use crate::clients::identity::{digest_of, parse_hex_digest};
use crate::clients::prices::{per_million_usd, per_token_usd};
use crate::clients::{BudgetPeriod, ClientConfig, ClientLimits, KeyDigest, ModelPrice, PriceTable};

use super::error::ErrorSink;
use super::raw::{RawClient, RawPrice};
use super::secret::Secret;

/// The id `server.api_keys` are known by.
pub const DEFAULT_CLIENT: &str = "default";

/// The error for a client key equal to `server.admin_key` (behaviour §11: it would be an admin
/// key too). Names the client and the key path, never the key.
fn admin_key_reused(sink: &mut ErrorSink, path: &str, client: &str) {
    sink.push(
        path,
        format!(
            "client `{client}`'s key equals server.admin_key: a client key must not be the admin key (give one of them another value)"
        ),
    );
}

/// `server.api_keys` as client `default`, then each `[[clients]]` entry. `admin_key`: no
/// client key may equal it.
pub(super) fn build_clients(
    api_keys: &[Secret],
    admin_key: Option<&Secret>,
    raw: Vec<Option<RawClient>>,
    sink: &mut ErrorSink,
    env: &dyn Fn(&str) -> Option<String>,
) -> Vec<ClientConfig> {
    let admin_digest = admin_key.map(|key| digest_of(key.expose()));
    let mut clients = Vec::new();
    // Digest → the key path that first used it.
    let mut keys_seen: HashMap<KeyDigest, String> = HashMap::new();
    let mut ids_seen: HashMap<String, String> = HashMap::new();
    if !api_keys.is_empty() {
        let mut digests = Vec::new();
        for (index, key) in api_keys.iter().enumerate() {
            let digest = digest_of(key.expose());
            let path = format!("server.api_keys[{index}]");
            if admin_digest == Some(digest) {
                admin_key_reused(sink, &path, DEFAULT_CLIENT);
                continue;
            }
            match keys_seen.get(&digest) {
                Some(first) => sink.push(&path, format!("duplicate client key (same as {first})")),
                None => {
                    keys_seen.insert(digest, path);
                    digests.push(digest);
                }
            }
        }
        ids_seen.insert(DEFAULT_CLIENT.to_owned(), "server.api_keys".to_owned());
        clients.push(ClientConfig {
            id: DEFAULT_CLIENT.to_owned(),
            weight: 1,
            key_digests: digests,
            limits: ClientLimits::default(),
            class: RequestClass::Normal,
            allow_spare_header: false,
        });
    }
    for (index, client) in raw.into_iter().enumerate() {
        let Some(client) = client else { continue };
        let prefix = format!("clients[{index}]");
        let id = match &client.id {
            None => {
                sink.push(format!("{prefix}.id"), "missing (required)");
                None
            }
            Some(id) if id.is_empty() || id.len() > 64 || id.chars().any(char::is_control) => {
                sink.push(format!("{prefix}.id"), "must be 1–64 printable characters");
                None
            }
            Some(id) => match ids_seen.get(id) {
                Some(first) => {
                    let note = if id == DEFAULT_CLIENT && first == "server.api_keys" {
                        " (server.api_keys are client `default`)".to_owned()
                    } else {
                        String::new()
                    };
                    sink.push(
                        format!("{prefix}.id"),
                        format!("duplicate client id `{id}` (first at {first}){note}"),
                    );
                    None
                }
                None => {
                    ids_seen.insert(id.clone(), prefix.clone());
                    Some(id.clone())
                }
            },
        };
        let digest = client_key(&client, &prefix, sink, env).and_then(|(digest, path)| {
            if admin_digest == Some(digest) {
                let named = id.as_deref().or(client.id.as_deref()).unwrap_or(&prefix);
                admin_key_reused(sink, &path, named);
                return None;
            }
            match keys_seen.get(&digest) {
                Some(first) => {
                    sink.push(&path, format!("duplicate client key (same as {first})"));
                    None
                }
                None => {
                    keys_seen.insert(digest, path);
                    Some(digest)
                }
            }
        });
        let limits = client_limits(&client, &prefix, sink);
        let weight = match client.weight {
            Some(0) => {
                sink.push(format!("{prefix}.weight"), "must be at least 1");
                1
            }
            Some(weight) => weight,
            None => 1,
        };
        let class = match client.class.as_deref() {
            None => Some(RequestClass::Normal),
            Some(text) => {
                let class = RequestClass::parse(text);
                if class.is_none() {
                    sink.push(
                        format!("{prefix}.class"),
                        format!("`{text}` is not one of `normal`, `spare`"),
                    );
                }
                class
            }
        };
        if let (Some(id), Some(digest), Some(limits), Some(class)) = (id, digest, limits, class) {
            clients.push(ClientConfig {
                id,
                weight,
                key_digests: vec![digest],
                limits,
                class,
                allow_spare_header: client.allow_spare_header.unwrap_or(false),
            });
        }
    }
    clients
}

/// The digest of the client's one key, and the key path it came from.
fn client_key(
    client: &RawClient,
    prefix: &str,
    sink: &mut ErrorSink,
    env: &dyn Fn(&str) -> Option<String>,
) -> Option<(KeyDigest, String)> {
    let set: Vec<&str> = [
        ("key_sha256", client.key_sha256.is_some()),
        ("key", client.key.is_some()),
        ("key_env", client.key_env.is_some()),
        ("key_file", client.key_file.is_some()),
    ]
    .into_iter()
    .filter_map(|(key, present)| present.then_some(key))
    .collect();
    let which = match set.as_slice() {
        [] => {
            sink.push(
                format!("{prefix}.key"),
                "missing: a client needs a key (set one of `key_sha256`, `key`, `key_env`, `key_file`)",
            );
            return None;
        }
        [one] => *one,
        [first, rest @ ..] => {
            sink.push(
                format!("{prefix}.{first}"),
                format!(
                    "set exactly one of `key_sha256`, `key`, `key_env` and `key_file`, not `{first}` with {}",
                    rest.iter().map(|key| format!("`{key}`")).collect::<Vec<_>>().join(" and ")
                ),
            );
            return None;
        }
    };
    let path = format!("{prefix}.{which}");
    let digest = match which {
        "key_sha256" => {
            let text = client.key_sha256.as_deref().unwrap_or_default();
            let digest = parse_hex_digest(text);
            if digest.is_none() {
                sink.push(&path, "must be 64 hex digits (the SHA-256 of the key)");
            }
            digest
        }
        "key" => non_empty(client.key.clone(), &path, sink),
        "key_env" => {
            let variable = client.key_env.as_deref().unwrap_or_default();
            let value = env(variable).filter(|value| !value.is_empty());
            if value.is_none() {
                sink.push(
                    &path,
                    format!("environment variable `{variable}` is not set"),
                );
            }
            value.map(|value| digest_of(&value))
        }
        _ => {
            let file = client.key_file.as_deref().unwrap_or_default();
            match std::fs::read_to_string(file) {
                Ok(text) => non_empty(Some(text.trim().to_owned()), &path, sink),
                Err(error) => {
                    sink.push(&path, format!("cannot read `{file}`: {}", error.kind()));
                    None
                }
            }
        }
    }?;
    Some((digest, path))
}

fn non_empty(key: Option<String>, path: &str, sink: &mut ErrorSink) -> Option<KeyDigest> {
    match key {
        Some(key) if !key.is_empty() => {
            // Held as a `Secret` so the text is zeroed once its digest is taken.
            let secret = Secret::new(key);
            Some(digest_of(secret.expose()))
        }
        _ => {
            sink.push(path, "must not be empty");
            None
        }
    }
}

fn client_limits(client: &RawClient, prefix: &str, sink: &mut ErrorSink) -> Option<ClientLimits> {
    let mut valid = true;
    let mut positive = |value: Option<u64>, key: &str| {
        if value == Some(0) {
            sink.push(
                format!("{prefix}.{key}"),
                "must be at least 1 (omit it for no limit)",
            );
            valid = false;
        }
        value
    };
    let max_concurrent =
        positive(client.max_concurrent.map(u64::from), "max_concurrent").map(|value| value as u32);
    let requests_per_min = positive(client.requests_per_min, "requests_per_min");
    let tokens_per_min = positive(client.tokens_per_min, "tokens_per_min");
    let tokens_per_day = positive(client.tokens_per_day, "tokens_per_day");
    let budget_pusd = match client.budget_usd {
        Some(budget) if !budget.is_finite() || budget < 0.0 => {
            sink.push(format!("{prefix}.budget_usd"), "must be a number ≥ 0");
            valid = false;
            None
        }
        Some(budget) => Some(per_token_usd(budget)),
        None => None,
    };
    let budget_period = match client.budget_period.as_deref() {
        None | Some("month") => BudgetPeriod::Month,
        Some("day") => BudgetPeriod::Day,
        Some(other) => {
            sink.push(
                format!("{prefix}.budget_period"),
                format!("`{other}` is not one of `day`, `month`"),
            );
            valid = false;
            BudgetPeriod::Month
        }
    };
    if client.models.as_ref().is_some_and(Vec::is_empty) {
        sink.push(
            format!("{prefix}.models"),
            "must name at least one combo (omit it for all)",
        );
        valid = false;
    }
    valid.then(|| ClientLimits {
        max_concurrent,
        requests_per_min,
        tokens_per_min,
        tokens_per_day,
        budget_pusd,
        budget_period,
        models: client.models.clone(),
    })
}

/// `prices_file` (LiteLLM's shape) first, then `[[prices]]` over it.
pub(super) fn build_prices(
    file: Option<String>,
    raw: Vec<Option<RawPrice>>,
    sink: &mut ErrorSink,
) -> PriceTable {
    let mut table = PriceTable::default();
    if let Some(path) = file {
        match std::fs::read_to_string(&path) {
            Ok(text) => {
                if let Err(reason) = table.read_litellm(&text) {
                    sink.push("prices_file", format!("`{path}`: {reason}"));
                }
            }
            Err(error) => sink.push("prices_file", format!("cannot read `{path}`: {error}")),
        }
    }
    for (index, price) in raw.into_iter().enumerate() {
        let Some(price) = price else { continue };
        let prefix = format!("prices[{index}]");
        let Some(model) = price.model.filter(|model| !model.is_empty()) else {
            sink.push(format!("{prefix}.model"), "missing (required)");
            continue;
        };
        let mut rate = |value: Option<f64>, key: &str| -> Option<u64> {
            match value {
                Some(usd) if usd.is_finite() && usd >= 0.0 => Some(per_million_usd(usd)),
                Some(_) => {
                    sink.push(
                        format!("{prefix}.{key}"),
                        "must be a number ≥ 0 (USD per million tokens)",
                    );
                    None
                }
                None => None,
            }
        };
        let input = rate(price.input, "input");
        let output = rate(price.output, "output");
        let cache_read = rate(price.cache_read, "cache_read");
        let cache_write = rate(price.cache_write, "cache_write");
        let (Some(input), Some(output)) = (input, output) else {
            if price.input.is_none() || price.output.is_none() {
                sink.push(
                    &prefix,
                    "needs `input` and `output` (USD per million tokens)",
                );
            }
            continue;
        };
        table.insert(
            model,
            ModelPrice {
                input,
                output,
                cache_read: cache_read.unwrap_or(input),
                cache_write: cache_write.unwrap_or(input),
            },
        );
    }
    table
}
