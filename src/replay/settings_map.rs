//! A config's resilience numbers as policy settings: the profile's (or auth kind's) defaults,
//! then `[defaults.*]`, then `[providers.*]` overrides, in that order. Pure mapping, reusable by
//! the node; must not read files or decide anything else.

use quotaroute_actors::policy::breaker::BreakerSettings;
use quotaroute_actors::policy::buckets::BucketSettings;
use quotaroute_actors::policy::cooldown::CooldownSettings;
use quotaroute_actors::policy::lockout::LockoutSettings;
use quotaroute_journal::AuthKind;

use crate::config::{
    BreakerOverrides, BucketOverrides, Config, CooldownOverrides, LockoutOverrides,
};

fn small(value: u64) -> u32 {
    u32::try_from(value).unwrap_or(u32::MAX)
}

/// `"api_key"` / `"oauth"` as an auth kind.
fn profile_named(name: &str) -> Option<AuthKind> {
    match name {
        "api_key" => Some(AuthKind::ApiKey),
        "oauth" => Some(AuthKind::Oauth),
        _ => None,
    }
}

/// The provider's own overrides, if it is in the config.
fn provider_overrides<'a, T>(
    config: &'a Config,
    provider_name: &str,
    pick: impl Fn(&'a crate::config::ProviderConfig) -> &'a T,
) -> Option<&'a T> {
    config.provider(provider_name).map(pick)
}

/// The breaker profile: `[providers.breaker] profile`, else `[defaults.breaker] profile`, else
/// `derived` (oauth when all the provider's connections are oauth).
pub fn breaker_profile(config: &Config, provider_name: &str, derived: AuthKind) -> AuthKind {
    provider_overrides(config, provider_name, |p| &p.breaker)
        .and_then(|o| o.profile.as_deref())
        .or(config.defaults.breaker.profile.as_deref())
        .and_then(profile_named)
        .unwrap_or(derived)
}

fn apply_breaker(s: &mut BreakerSettings, o: &BreakerOverrides) {
    if let Some(v) = o.window_ms {
        s.window_ms = v;
    }
    if let Some(v) = o.dedup_ms {
        s.dedup_ms = v;
    }
    if let Some(v) = o.degrade_at {
        s.degrade_at = small(v);
    }
    if let Some(v) = o.open_at {
        s.open_at = small(v);
    }
    if let Some(v) = o.reset_ms {
        s.reset_ms = v;
    }
    if let Some(v) = o.escalate_after {
        s.escalate_after = small(v);
    }
    if let Some(v) = o.max_multiplier {
        s.max_multiplier = small(v);
    }
    if let Some(v) = o.half_open_probes {
        s.half_open_probes = small(v);
    }
    if let Some(v) = o.probe_timeout_ms {
        s.probe_timeout_ms = v;
    }
}

/// Breaker settings of `provider_name`; `profile` is the derived profile (see
/// [`breaker_profile`]), used when the config names none.
pub fn breaker_settings(
    config: &Config,
    provider_name: &str,
    profile: AuthKind,
) -> BreakerSettings {
    let mut s = BreakerSettings::for_profile(breaker_profile(config, provider_name, profile));
    apply_breaker(&mut s, &config.defaults.breaker);
    if let Some(o) = provider_overrides(config, provider_name, |p| &p.breaker) {
        apply_breaker(&mut s, o);
    }
    s
}

fn apply_cooldown(s: &mut CooldownSettings, o: &CooldownOverrides) {
    if let Some(v) = o.base_ms {
        s.base_ms = v;
    }
    if let Some(v) = o.max_level {
        s.max_level = small(v);
    }
    if let Some(v) = o.max_ms {
        s.max_ms = v;
    }
}

/// Cooldown settings of a connection of `provider_name` authenticating with `auth`.
pub fn cooldown_settings(config: &Config, provider_name: &str, auth: AuthKind) -> CooldownSettings {
    let mut s = CooldownSettings::for_auth(auth);
    apply_cooldown(&mut s, &config.defaults.cooldown);
    if let Some(o) = provider_overrides(config, provider_name, |p| &p.cooldown) {
        apply_cooldown(&mut s, o);
    }
    s
}

fn apply_lockout(s: &mut LockoutSettings, o: &LockoutOverrides) {
    let fields: [(&Option<u64>, &mut u64); 8] = [
        (&o.rate_limited_base_ms, &mut s.rate_limited_base_ms),
        (&o.not_found_base_ms, &mut s.not_found_base_ms),
        (&o.max_ms, &mut s.max_ms),
        (&o.max_upstream_ms, &mut s.max_upstream_ms),
        (&o.quota_ms, &mut s.quota_ms),
        (&o.quota_max_ms, &mut s.quota_max_ms),
        (&o.reset_window_ms, &mut s.reset_window_ms),
        (&o.billing_ms, &mut s.billing_ms),
    ];
    for (value, field) in fields {
        if let Some(v) = value {
            *field = *v;
        }
    }
    if let Some(v) = o.max_per_connection {
        s.max_per_connection = small(v);
    }
}

/// Lockout settings of connections of `provider_name`.
pub fn lockout_settings(config: &Config, provider_name: &str) -> LockoutSettings {
    let mut s = LockoutSettings::default();
    apply_lockout(&mut s, &config.defaults.lockout);
    if let Some(o) = provider_overrides(config, provider_name, |p| &p.lockout) {
        apply_lockout(&mut s, o);
    }
    s
}

fn apply_buckets(s: &mut BucketSettings, o: &BucketOverrides) {
    if let Some(v) = o.saturate_below_pct {
        s.saturate_below_pct = v as f64;
    }
}

/// Bucket settings of connections of `provider_name`.
pub fn bucket_settings(config: &Config, provider_name: &str) -> BucketSettings {
    let mut s = BucketSettings::default();
    apply_buckets(&mut s, &config.defaults.buckets);
    if let Some(o) = provider_overrides(config, provider_name, |p| &p.buckets) {
        apply_buckets(&mut s, o);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONFIG: &str = r#"
[server]
api_keys = ["k"]

[defaults.breaker]
open_at = 20
[defaults.cooldown]
base_ms = 1000
[defaults.lockout]
rate_limited_base_ms = 2000

[[providers]]
name = "openai"
format = "openai"
base_url = "http://127.0.0.1:1/v1"
[providers.breaker]
open_at = 30
profile = "oauth"
[providers.lockout]
max_ms = 60000

[[providers]]
name = "anthropic"
format = "anthropic"
base_url = "http://127.0.0.1:1"

[[connections]]
id = "k1"
provider = "openai"
api_key = "sk-1"

[[connections]]
id = "a1"
provider = "anthropic"
api_key = "sk-2"
"#;

    fn config() -> Config {
        crate::config::parse(CONFIG, "test.toml", &|_| None).unwrap()
    }

    #[test]
    fn provider_overrides_win_over_defaults_which_win_over_the_profile() {
        let config = config();
        let openai = breaker_settings(&config, "openai", AuthKind::ApiKey);
        assert_eq!(openai.open_at, 30);
        // Profile named oauth: the oauth reset, not the api_key one.
        assert_eq!(openai.reset_ms, 60_000);
        let anthropic = breaker_settings(&config, "anthropic", AuthKind::ApiKey);
        assert_eq!(anthropic.open_at, 20);
        assert_eq!(anthropic.degrade_at, 7);
        assert_eq!(
            cooldown_settings(&config, "openai", AuthKind::Oauth).base_ms,
            1_000
        );
        assert_eq!(
            cooldown_settings(&config, "openai", AuthKind::Oauth).max_level,
            8
        );
        let lockout = lockout_settings(&config, "openai");
        assert_eq!(
            (lockout.rate_limited_base_ms, lockout.max_ms),
            (2_000, 60_000)
        );
        assert_eq!(lockout_settings(&config, "anthropic").max_ms, 1_800_000);
    }

    #[test]
    fn a_provider_missing_from_the_config_gets_the_defaults() {
        let config = config();
        assert_eq!(
            breaker_settings(&config, "nope", AuthKind::ApiKey).open_at,
            20
        );
        assert_eq!(bucket_settings(&config, "nope"), BucketSettings::default());
    }
}
