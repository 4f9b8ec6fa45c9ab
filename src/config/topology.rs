//! Config → the actor system's `Topology`: resolves every resilience number (policy default by
//! profile or auth kind, then `[defaults.*]`, then the provider's own overrides) and the
//! implicit defaults of combos. The one place config keys meet policy settings.

use quotaroute_actors::policy::breaker::BreakerSettings;
use quotaroute_actors::policy::buckets::BucketSettings;
use quotaroute_actors::policy::cooldown::CooldownSettings;
use quotaroute_actors::policy::lockout::LockoutSettings;
use quotaroute_actors::policy::pace::PacingSettings;
use quotaroute_actors::policy::quota_share::Strategy as PolicyStrategy;
use quotaroute_actors::{ComboSpec, ConnectionSpec, ProviderSpec, TargetSpec, Topology};
use quotaroute_journal::{ApiFormat as JournalFormat, AuthKind as JournalAuth};

use super::model::{ApiFormat, AuthKind, ComboConfig, Config, ProviderConfig, Strategy};
use super::raw::{BreakerOverrides, BucketOverrides, CooldownOverrides, LockoutOverrides};

fn set<T: TryFrom<u64>>(target: &mut T, value: Option<u64>) {
    if let Some(value) = value.and_then(|v| T::try_from(v).ok()) {
        *target = value;
    }
}

fn journal_auth(auth: AuthKind) -> JournalAuth {
    match auth {
        AuthKind::ApiKey => JournalAuth::ApiKey,
        AuthKind::OAuth => JournalAuth::Oauth,
    }
}

fn journal_format(format: ApiFormat) -> JournalFormat {
    match format {
        ApiFormat::OpenAi => JournalFormat::Openai,
        ApiFormat::Anthropic => JournalFormat::Anthropic,
        ApiFormat::Gemini => JournalFormat::Gemini,
    }
}

fn policy_strategy(strategy: Strategy) -> PolicyStrategy {
    match strategy {
        Strategy::QuotaShare => PolicyStrategy::QuotaShare,
        Strategy::Priority => PolicyStrategy::Priority,
        Strategy::RoundRobin => PolicyStrategy::RoundRobin,
        Strategy::Weighted => PolicyStrategy::Weighted,
    }
}

fn apply_breaker(settings: &mut BreakerSettings, o: &BreakerOverrides) {
    set(&mut settings.window_ms, o.window_ms);
    set(&mut settings.dedup_ms, o.dedup_ms);
    set(&mut settings.degrade_at, o.degrade_at);
    set(&mut settings.open_at, o.open_at);
    set(&mut settings.reset_ms, o.reset_ms);
    set(&mut settings.escalate_after, o.escalate_after);
    set(&mut settings.max_multiplier, o.max_multiplier);
    set(&mut settings.half_open_probes, o.half_open_probes);
    set(&mut settings.probe_timeout_ms, o.probe_timeout_ms);
}

fn apply_cooldown(settings: &mut CooldownSettings, o: &CooldownOverrides) {
    set(&mut settings.base_ms, o.base_ms);
    set(&mut settings.max_level, o.max_level);
    set(&mut settings.max_ms, o.max_ms);
}

fn apply_lockout(settings: &mut LockoutSettings, o: &LockoutOverrides) {
    set(&mut settings.rate_limited_base_ms, o.rate_limited_base_ms);
    set(&mut settings.not_found_base_ms, o.not_found_base_ms);
    set(&mut settings.max_ms, o.max_ms);
    set(&mut settings.max_upstream_ms, o.max_upstream_ms);
    set(&mut settings.quota_ms, o.quota_ms);
    set(&mut settings.quota_max_ms, o.quota_max_ms);
    set(&mut settings.reset_window_ms, o.reset_window_ms);
    set(&mut settings.billing_ms, o.billing_ms);
    set(&mut settings.max_per_connection, o.max_per_connection);
}

fn apply_buckets(settings: &mut BucketSettings, o: &BucketOverrides) {
    if let Some(pct) = o.saturate_below_pct {
        settings.saturate_below_pct = pct as f64;
    }
}

fn provider_config<'a>(config: &'a Config, provider_name: &str) -> Option<&'a ProviderConfig> {
    config.provider(provider_name)
}

fn profile_named(name: &str) -> Option<JournalAuth> {
    match name {
        "oauth" => Some(JournalAuth::Oauth),
        "api_key" => Some(JournalAuth::ApiKey),
        _ => None,
    }
}

/// The profile a provider gets from its connections: `oauth` when every one of them is oauth,
/// else `api_key` (behaviour §5).
pub fn derived_profile(config: &Config, provider_name: &str) -> JournalAuth {
    let mut connections = config
        .connections
        .iter()
        .filter(|c| c.provider == provider_name)
        .peekable();
    if connections.peek().is_some() && connections.all(|c| c.auth == AuthKind::OAuth) {
        JournalAuth::Oauth
    } else {
        JournalAuth::ApiKey
    }
}

/// A provider's breaker profile: its `breaker.profile`, else `[defaults.breaker].profile`,
/// else `derived` (see [`derived_profile`]; replay passes the journal's).
pub fn breaker_profile(config: &Config, provider_name: &str, derived: JournalAuth) -> JournalAuth {
    provider_config(config, provider_name)
        .and_then(|p| p.breaker.profile.as_deref())
        .or(config.defaults.breaker.profile.as_deref())
        .and_then(profile_named)
        .unwrap_or(derived)
}

/// The breaker settings of a provider: profile defaults, then `[defaults.breaker]`, then the
/// provider's `[providers.breaker]`.
pub fn breaker_settings(
    config: &Config,
    provider_name: &str,
    derived: JournalAuth,
) -> BreakerSettings {
    let mut settings =
        BreakerSettings::for_profile(breaker_profile(config, provider_name, derived));
    apply_breaker(&mut settings, &config.defaults.breaker);
    if let Some(provider) = provider_config(config, provider_name) {
        apply_breaker(&mut settings, &provider.breaker);
    }
    settings
}

/// The cooldown settings of a connection authenticating with `auth` on a provider.
pub fn cooldown_settings(
    config: &Config,
    provider_name: &str,
    auth: JournalAuth,
) -> CooldownSettings {
    let mut settings = CooldownSettings::for_auth(auth);
    apply_cooldown(&mut settings, &config.defaults.cooldown);
    if let Some(provider) = provider_config(config, provider_name) {
        apply_cooldown(&mut settings, &provider.cooldown);
    }
    settings
}

/// The lockout settings on a provider.
pub fn lockout_settings(config: &Config, provider_name: &str) -> LockoutSettings {
    let mut settings = LockoutSettings::default();
    apply_lockout(&mut settings, &config.defaults.lockout);
    if let Some(provider) = provider_config(config, provider_name) {
        apply_lockout(&mut settings, &provider.lockout);
    }
    settings
}

/// The bucket settings on a provider.
pub fn bucket_settings(config: &Config, provider_name: &str) -> BucketSettings {
    let mut settings = BucketSettings::default();
    apply_buckets(&mut settings, &config.defaults.buckets);
    if let Some(provider) = provider_config(config, provider_name) {
        apply_buckets(&mut settings, &provider.buckets);
    }
    settings
}

/// The topology the actors run for this config. `digest` tells configs apart in the journal.
/// A request's attempt budget, `(max_attempts, max_upstream_requests)`, on `combo` (its
/// `max_attempts` when set) or on an implicit combo (`None`: the defaults). The node's topology
/// and `--what-if` both read it here.
pub fn attempt_budget(config: &Config, combo: Option<&ComboConfig>) -> (u32, u32) {
    let defaults = &config.defaults;
    (
        combo
            .and_then(|c| c.max_attempts)
            .unwrap_or(defaults.max_attempts),
        defaults.max_upstream_requests,
    )
}

/// `spec` with its provider's resilience settings from `config` (cooldown by its auth,
/// lockout, buckets): how every `ConnectionSpec` takes the config's settings — the node's
/// topology, and `--what-if`'s connections that a journal names and the config does not.
pub fn with_provider_settings(config: &Config, spec: ConnectionSpec) -> ConnectionSpec {
    ConnectionSpec {
        cooldown: cooldown_settings(config, &spec.provider, spec.auth),
        lockout: lockout_settings(config, &spec.provider),
        buckets: bucket_settings(config, &spec.provider),
        ..spec
    }
}

/// A combo's pacing: `[defaults.pacing]` with its `pacing` switch, and its own table (already
/// validated) over them (behaviour §13).
fn combo_pacing(defaults: &PacingSettings, combo: &ComboConfig) -> PacingSettings {
    let switched = PacingSettings {
        enabled: defaults.enabled && combo.pacing,
        ..defaults.clone()
    };
    match &combo.pacing_table {
        Some(table) => super::pacing::build_over(
            Some(table.clone()),
            &switched,
            "combos.pacing",
            &mut super::error::ErrorSink::new(""),
        ),
        None => switched,
    }
}

pub fn topology(config: &Config, digest: &str) -> Topology {
    let providers = config
        .providers
        .iter()
        .map(|p| {
            let derived = derived_profile(config, &p.name);
            ProviderSpec {
                name: p.name.clone(),
                format: journal_format(p.format),
                profile: breaker_profile(config, &p.name, derived),
                breaker: breaker_settings(config, &p.name, derived),
            }
        })
        .collect();
    let connections = config
        .connections
        .iter()
        .map(|c| {
            with_provider_settings(
                config,
                ConnectionSpec {
                    max_concurrent: c.max_concurrent,
                    models: c.models.clone(),
                    limits: c.limits.clone(),
                    reserve: c.reserve.clone(),
                    ..ConnectionSpec::new(&c.id, &c.provider, journal_auth(c.auth), c.weight)
                },
            )
        })
        .collect();
    let combos = config
        .combos
        .iter()
        .map(|c| {
            let (max_attempts, max_upstream_requests) = attempt_budget(config, Some(c));
            ComboSpec {
                name: c.name.clone(),
                strategy: policy_strategy(c.strategy),
                targets: c
                    .targets
                    .iter()
                    .map(|t| TargetSpec {
                        connection: t.connection.clone(),
                        model: t.model.clone(),
                        weight: t.weight,
                    })
                    .collect(),
                max_attempts,
                max_upstream_requests,
                hold_ms: c.hold_ms,
                queue_ms: c.queue_ms,
                pacing: combo_pacing(&config.defaults.pacing, c),
                translate: c.translate,
            }
        })
        .collect();
    let (max_attempts, max_upstream_requests) = attempt_budget(config, None);
    Topology {
        providers,
        connections,
        combos,
        max_attempts,
        max_upstream_requests,
        affinity: config.affinity,
        pacing: config.defaults.pacing.clone(),
        clients: config.clients.len(),
        max_implicit_combos: usize::try_from(config.server.max_implicit_combos)
            .unwrap_or(usize::MAX),
        source: config
            .source_path
            .as_ref()
            .map_or_else(|| "embedded".to_string(), |p| p.display().to_string()),
        digest: digest.to_string(),
    }
}
