//! The raw TOML shapes: exactly the keys of contract.md "Config (TOML)", every one optional.
//!
//! These structs only mirror the file; they never judge values (that is `validate`) and never
//! hold defaults (a missing key stays `None`, so "absent" and "set to the default" differ).
//! Every struct denies unknown keys, so a typo is an error that names the key.

use std::collections::BTreeMap;

use serde::de::{self, Visitor};
use serde::Deserialize;

/// The whole file. `parse` deserializes its sections one by one so one bad element does not
/// hide the errors of the others; this type is the list of top-level keys.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawConfig {
    pub server: Option<RawServer>,
    pub journal: Option<RawJournal>,
    pub defaults: Option<RawDefaults>,
    pub providers: Option<Vec<RawProvider>>,
    pub connections: Option<Vec<RawConnection>>,
    pub combos: Option<Vec<RawCombo>>,
    pub cluster: Option<crate::cluster::config::RawCluster>,
    pub telemetry: Option<RawTelemetry>,
    pub affinity: Option<RawAffinity>,
    pub translation: Option<RawTranslation>,
    pub responses: Option<RawResponses>,
    pub clients: Option<Vec<RawClient>>,
    pub prices: Option<Vec<RawPrice>>,
    /// A model price list in LiteLLM's `model_prices_and_context_window.json` shape;
    /// `[[prices]]` entries override its models.
    pub prices_file: Option<String>,
}

/// `[[clients]]` (contract; behaviour §11).
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawClient {
    pub id: Option<String>,
    pub key_sha256: Option<String>,
    pub key: Option<String>,
    pub key_env: Option<String>,
    pub key_file: Option<String>,
    pub weight: Option<u32>,
    pub max_concurrent: Option<u32>,
    pub requests_per_min: Option<u64>,
    pub tokens_per_min: Option<u64>,
    pub tokens_per_day: Option<u64>,
    pub budget_usd: Option<f64>,
    pub budget_period: Option<String>,
    pub models: Option<Vec<String>>,
    /// Behaviour §13 "Spare quota only".
    pub class: Option<String>,
    pub allow_spare_header: Option<bool>,
}

/// `[[prices]]`: USD per million tokens.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawPrice {
    pub model: Option<String>,
    pub input: Option<f64>,
    pub output: Option<f64>,
    pub cache_read: Option<f64>,
    pub cache_write: Option<f64>,
}

/// `[telemetry]`: OpenTelemetry traces over OTLP/HTTP; absent = no tracing.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTelemetry {
    pub otlp_endpoint: Option<String>,
    pub service_name: Option<String>,
    pub sample_ratio: Option<f64>,
}

/// `[translation]` (contract; behaviour §14).
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTranslation {
    pub default_max_tokens: Option<u32>,
}

/// `[responses]` (contract; behaviour §14: translated Responses kept by the router).
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawResponses {
    pub store: Option<bool>,
    pub max_bytes: Option<u64>,
    pub ttl_days: Option<u64>,
}

/// `[affinity]` (contract; behaviour §10).
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAffinity {
    pub enabled: Option<bool>,
    pub min_prompt_bytes: Option<u64>,
    pub ttl_ms: Option<u64>,
    pub max_groups: Option<u64>,
    pub max_lead: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawServer {
    pub listen: Option<String>,
    pub api_keys: Option<Vec<String>>,
    pub admin_key: Option<String>,
    pub seal_key: Option<String>,
    pub seal_key_env: Option<String>,
    pub seal_key_file: Option<String>,
    pub max_body_bytes: Option<u64>,
    pub request_timeout_ms: Option<u64>,
    pub first_token_timeout_ms: Option<u64>,
    pub stream_idle_timeout_ms: Option<u64>,
    pub cors_allow_origins: Option<Vec<String>>,
    pub tls_cert: Option<String>,
    pub tls_key: Option<String>,
    pub shutdown_grace_ms: Option<u64>,
    pub metrics_public: Option<bool>,
    pub header_timeout_ms: Option<u64>,
    pub body_timeout_ms: Option<u64>,
    pub max_connections: Option<u64>,
    pub max_implicit_combos: Option<u64>,
    pub max_upstream_buffer_bytes: Option<u64>,
    pub usage_max_tokens: Option<u64>,
    pub client_retry_max_ms: Option<u64>,
    pub drain_after_client_left_ms: Option<u64>,
    pub drain_max_bytes: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawJournal {
    pub path: Option<String>,
    pub flush_every_ms: Option<u64>,
    pub snapshot_every_events: Option<u64>,
    pub retention_hours: Option<u64>,
    pub max_queue_events: Option<u64>,
    pub request_events: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawDefaults {
    pub max_attempts: Option<u32>,
    pub max_upstream_requests: Option<u32>,
    pub breaker: Option<BreakerOverrides>,
    pub cooldown: Option<CooldownOverrides>,
    pub lockout: Option<LockoutOverrides>,
    pub buckets: Option<BucketOverrides>,
    pub pacing: Option<RawPacing>,
}

/// `[defaults.pacing]`: behaviour §13.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawPacing {
    pub enabled: Option<bool>,
    pub min_time_left: Option<f64>,
    pub min: Option<f64>,
    pub max: Option<f64>,
    pub burn_window_ms: Option<u64>,
    /// ≥ 1: a target adds `weight × pace^exponent`.
    pub exponent: Option<f64>,
    /// `"wall"` | `"demand"`.
    pub clock: Option<String>,
    /// `"all"` | `"longest"`.
    pub pace_windows: Option<String>,
    /// Spare quota only: a spare request goes where the pace after it stays above 1 + this.
    pub spare_margin: Option<f64>,
}

/// A combo's `pacing`: `false` spends by weight alone; a table sets the combo's own knobs
/// over `[defaults.pacing]` (behaviour §13).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum RawComboPacing {
    Switch(bool),
    Table(RawPacing),
}

/// `[defaults.breaker]` / `[providers.breaker]`: behaviour.md §5, provider breaker.
/// `None` means "use the default of the provider's profile".
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BreakerOverrides {
    pub window_ms: Option<u64>,
    pub dedup_ms: Option<u64>,
    /// "api_key" | "oauth"; absent = derived from the provider's connections.
    pub profile: Option<String>,
    pub degrade_at: Option<u64>,
    pub open_at: Option<u64>,
    pub reset_ms: Option<u64>,
    pub escalate_after: Option<u64>,
    pub max_multiplier: Option<u64>,
    pub half_open_probes: Option<u64>,
    pub probe_timeout_ms: Option<u64>,
}

/// `[defaults.cooldown]` / `[providers.cooldown]`: behaviour.md §5, connection cooldown.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CooldownOverrides {
    pub base_ms: Option<u64>,
    pub max_level: Option<u64>,
    pub max_ms: Option<u64>,
}

/// `[defaults.lockout]` / `[providers.lockout]`: behaviour.md §5, model lockout.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LockoutOverrides {
    pub rate_limited_base_ms: Option<u64>,
    pub not_found_base_ms: Option<u64>,
    pub max_ms: Option<u64>,
    pub max_upstream_ms: Option<u64>,
    pub quota_ms: Option<u64>,
    pub quota_max_ms: Option<u64>,
    pub reset_window_ms: Option<u64>,
    pub billing_ms: Option<u64>,
    pub max_per_connection: Option<u64>,
}

/// `[defaults.buckets]` / `[providers.buckets]`: behaviour.md §6.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BucketOverrides {
    pub saturate_below_pct: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawProvider {
    pub name: Option<String>,
    pub format: Option<String>,
    pub apis: Option<Vec<String>>,
    pub base_url: Option<String>,
    pub auth_header: Option<String>,
    pub headers: Option<BTreeMap<String, String>>,
    pub accept_encoding: Option<String>,
    pub ca_file: Option<String>,
    pub proxy: Option<String>,
    pub breaker: Option<BreakerOverrides>,
    pub cooldown: Option<CooldownOverrides>,
    pub lockout: Option<LockoutOverrides>,
    pub buckets: Option<BucketOverrides>,
}

#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawConnection {
    pub id: Option<String>,
    pub provider: Option<String>,
    pub api_key: Option<String>,
    pub api_key_env: Option<String>,
    /// A file holding the key, re-read when it changes.
    pub api_key_file: Option<String>,
    /// An argv (no shell) whose trimmed stdout is the key.
    pub api_key_command: Option<Vec<String>>,
    /// How long a command's key is used before the command runs again.
    pub api_key_ttl_ms: Option<u64>,
    /// How long the command may run before it is killed.
    pub api_key_command_timeout_ms: Option<u64>,
    /// `[connections.oauth]`: an OAuth 2 refresh-token grant.
    pub oauth: Option<RawOAuth>,
    pub auth: Option<String>,
    pub weight: Option<u32>,
    pub max_concurrent: Option<u32>,
    pub models: Option<Vec<String>>,
    pub limits: Option<RawLimits>,
    /// Behaviour §13: the share of every window kept for the owner (percent).
    pub reserve_pct: Option<u32>,
    /// Per window: `{ "7d" = 20, "5h" = 10 }`.
    pub reserve: Option<BTreeMap<String, u32>>,
    /// Behaviour §13: when to start the 5-hour window (`"07:00 Europe/Berlin"`).
    pub prime_at: Option<String>,
    /// The weekdays to prime on (`["mon", "fri"]`); Monday to Friday when absent.
    pub prime_days: Option<Vec<String>>,
}

/// `[connections.oauth]`: the refresh-token grant of RFC 6749 §6.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawOAuth {
    pub token_url: Option<String>,
    pub client_id: Option<String>,
    pub refresh_token_file: Option<String>,
}

/// `[connections.limits]`: configured usage limits (behaviour.md §6, source 1).
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawLimits {
    pub requests_5h: Option<u64>,
    pub tokens_5h: Option<u64>,
    pub requests_7d: Option<u64>,
    pub tokens_7d: Option<u64>,
    pub model_requests_7d: Option<BTreeMap<String, u64>>,
    pub model_tokens_7d: Option<BTreeMap<String, u64>>,
    /// As on the connection (the contract's sample writes them here).
    pub reserve_pct: Option<u32>,
    pub reserve: Option<BTreeMap<String, u32>>,
}

#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawCombo {
    pub name: Option<String>,
    pub strategy: Option<String>,
    pub max_attempts: Option<u32>,
    pub hold_ms: Option<u64>,
    pub queue_ms: Option<u64>,
    /// Behaviour §13: `false` spends by weight alone; a table, the combo's own knobs.
    pub pacing: Option<RawComboPacing>,
    pub translate: Option<bool>,
    pub targets: Option<Vec<RawTarget>>,
}

#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTarget {
    pub connection: Option<String>,
    pub model: Option<String>,
    pub weight: Option<u32>,
}

/// Every key the raw structs accept, as dotted paths without array indexes
/// (`server.listen`, `connections.limits.tokens_7d`, `combos.targets.weight`), derived from the
/// structs themselves so the starter config and the docs can be checked against them.
pub fn accepted_keys() -> Vec<String> {
    let sections: [(&str, &'static [&'static str]); 24] = [
        ("", field_names::<RawConfig>()),
        ("server", field_names::<RawServer>()),
        ("journal", field_names::<RawJournal>()),
        ("defaults", field_names::<RawDefaults>()),
        ("defaults.breaker", field_names::<BreakerOverrides>()),
        ("defaults.cooldown", field_names::<CooldownOverrides>()),
        ("defaults.lockout", field_names::<LockoutOverrides>()),
        ("defaults.buckets", field_names::<BucketOverrides>()),
        ("defaults.pacing", field_names::<RawPacing>()),
        ("providers", field_names::<RawProvider>()),
        ("providers.breaker", field_names::<BreakerOverrides>()),
        ("providers.cooldown", field_names::<CooldownOverrides>()),
        ("providers.lockout", field_names::<LockoutOverrides>()),
        ("providers.buckets", field_names::<BucketOverrides>()),
        ("connections", field_names::<RawConnection>()),
        ("connections.limits", field_names::<RawLimits>()),
        ("connections.oauth", field_names::<RawOAuth>()),
        ("combos", field_names::<RawCombo>()),
        ("combos.targets", field_names::<RawTarget>()),
        ("combos.pacing", field_names::<RawPacing>()),
        ("telemetry", field_names::<RawTelemetry>()),
        ("clients", field_names::<RawClient>()),
        ("prices", field_names::<RawPrice>()),
        ("responses", field_names::<RawResponses>()),
    ];
    sections
        .iter()
        .flat_map(|(section, fields)| {
            fields.iter().map(move |field| {
                if section.is_empty() {
                    (*field).to_owned()
                } else {
                    format!("{section}.{field}")
                }
            })
        })
        .collect()
}

/// The field names serde knows for struct `T` (what `deny_unknown_fields` accepts), read by
/// asking `T` to deserialize itself from a deserializer that only records what it is asked for.
pub fn field_names<T: for<'de> Deserialize<'de>>() -> &'static [&'static str] {
    let mut captured: &'static [&'static str] = &[];
    let _ = T::deserialize(FieldNameCapture {
        captured: &mut captured,
    });
    captured
}

struct FieldNameCapture<'a> {
    captured: &'a mut &'static [&'static str],
}

impl<'de> de::Deserializer<'de> for FieldNameCapture<'_> {
    type Error = de::value::Error;

    fn deserialize_any<V: Visitor<'de>>(self, _visitor: V) -> Result<V::Value, Self::Error> {
        Err(de::Error::custom("only structs are introspected"))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        _visitor: V,
    ) -> Result<V::Value, Self::Error> {
        *self.captured = fields;
        Err(de::Error::custom("field names captured"))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
        ignored_any
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_names_lists_every_field_of_a_struct() {
        assert_eq!(
            field_names::<RawTarget>(),
            &["connection", "model", "weight"]
        );
    }

    #[test]
    fn accepted_keys_cover_nested_sections() {
        let keys = accepted_keys();
        for expected in [
            "server.listen",
            "journal.request_events",
            "defaults.breaker.probe_timeout_ms",
            "providers.lockout.billing_ms",
            "connections.limits.model_tokens_7d",
            "connections.oauth.refresh_token_file",
            "combos.targets.weight",
        ] {
            assert!(keys.iter().any(|key| key == expected), "{expected}");
        }
    }
}
