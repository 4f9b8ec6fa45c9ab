//! The routing topology the actors run: providers, connections, combos and every resilience
//! number, already validated and resolved by the node (this crate never reads TOML).
//!
//! Owns the mapping from a topology to the journal's secret-free `ConfigLoaded` event, and the
//! rule for implicit `provider/model` combos (contract: "Client API").

use std::collections::BTreeMap;

use quotaroute_journal::{
    ApiFormat, AuthKind, ComboInfo, ComboPacing, ConfigLoaded, ConnectionInfo, PacingKnobs,
    PacingRule, ProviderInfo, TargetInfo,
};
use serde::{Deserialize, Serialize};

use crate::affinity::AffinitySettings;
use crate::breaker::BreakerSettings;
use crate::buckets::{BucketLimits, BucketSettings};
use crate::cooldown::CooldownSettings;
use crate::implicit_combo::ImplicitCombo;
use crate::lockout::LockoutSettings;
use crate::pace::PacingSettings;
use crate::quota_share::Strategy;
use crate::window_block::Reserve;

/// One upstream API with its breaker settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProviderSpec {
    pub name: String,
    pub format: ApiFormat,
    /// `oauth` when every connection of the provider is oauth, else `api_key`.
    pub profile: AuthKind,
    pub breaker: BreakerSettings,
}

/// One credential (account) of a provider, with its own quota and resilience numbers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConnectionSpec {
    pub id: String,
    pub provider: String,
    pub auth: AuthKind,
    pub weight: u32,
    pub max_concurrent: Option<u32>,
    /// `None`: serves any model.
    pub models: Option<Vec<String>>,
    pub limits: BucketLimits,
    pub cooldown: CooldownSettings,
    pub lockout: LockoutSettings,
    pub buckets: BucketSettings,
    /// The share of each window kept for the account's owner (behaviour §13).
    pub reserve: Reserve,
}

impl ProviderSpec {
    /// A provider with the breaker defaults of its profile.
    pub fn new(name: &str, format: ApiFormat, profile: AuthKind) -> Self {
        ProviderSpec {
            name: name.to_string(),
            format,
            profile,
            breaker: BreakerSettings::for_profile(profile),
        }
    }
}

impl ConnectionSpec {
    /// A connection with every other field at its default: no concurrency cap, any model, no
    /// configured usage limits, the spec's resilience numbers for its auth kind.
    pub fn new(id: &str, provider: &str, auth: AuthKind, weight: u32) -> Self {
        ConnectionSpec {
            id: id.to_string(),
            provider: provider.to_string(),
            auth,
            weight,
            max_concurrent: None,
            models: None,
            limits: BucketLimits::default(),
            cooldown: CooldownSettings::for_auth(auth),
            lockout: LockoutSettings::default(),
            buckets: BucketSettings::default(),
            reserve: Reserve::default(),
        }
    }

    pub fn serves(&self, model: &str) -> bool {
        self.models
            .as_ref()
            .is_none_or(|models| models.iter().any(|m| m == model))
    }
}

/// One target of a combo: a connection, the upstream model to ask it for, and a weight.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetSpec {
    pub connection: String,
    pub model: String,
    pub weight: u32,
}

impl TargetSpec {
    /// The execution key `connection/model` that DRR deficits are kept under.
    pub fn exec_key(&self) -> String {
        crate::exec_key::exec_key(&self.connection, &self.model)
    }
}

/// A named routing group that clients use as a model name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ComboSpec {
    pub name: String,
    pub strategy: Strategy,
    pub targets: Vec<TargetSpec>,
    /// Upstream requests that may fail with timeout/server/network before giving up.
    pub max_attempts: u32,
    /// Upstream requests of any kind per client request.
    pub max_upstream_requests: u32,
    /// Wait up to this long for the earliest unblock instead of failing (behaviour §7).
    pub hold_ms: u64,
    /// With every target at cap, wait up to this long for a permit, granted fairly between
    /// clients (behaviour §11); 0 = fail open as §2 step 2 says.
    #[serde(default)]
    pub queue_ms: u64,
    /// `[defaults.pacing]` with the combo's `pacing` switch (behaviour §13).
    #[serde(default)]
    pub pacing: PacingSettings,
    /// Whether a target of the other format serves translatable requests (behaviour §14);
    /// implicit combos translate.
    #[serde(default = "translates")]
    pub translate: bool,
}

fn translates() -> bool {
    true
}

/// Behaviour §3's defaults: upstream requests that may fail with timeout/server/network, and
/// upstream requests of any kind, per client request.
pub const DEFAULT_MAX_ATTEMPTS: u32 = 3;
pub const DEFAULT_MAX_UPSTREAM_REQUESTS: u32 = 8;

impl ComboSpec {
    /// A quota-share combo `name` over `(connection, model, weight)` targets with the spec's
    /// defaults (no `hold_ms`).
    pub fn quota_share(name: &str, targets: &[(&str, &str, u32)]) -> ComboSpec {
        ComboSpec {
            name: name.to_string(),
            strategy: Strategy::QuotaShare,
            targets: targets
                .iter()
                .map(|&(connection, model, weight)| TargetSpec {
                    connection: connection.to_string(),
                    model: model.to_string(),
                    weight,
                })
                .collect(),
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            max_upstream_requests: DEFAULT_MAX_UPSTREAM_REQUESTS,
            hold_ms: 0,
            queue_ms: 0,
            pacing: PacingSettings::default(),
            translate: true,
        }
    }

    /// The pacing its quota-share turns use (behaviour §13); `None` when off or for another
    /// strategy (every pace is then 1).
    pub fn paced(&self) -> Option<&PacingSettings> {
        (self.pacing.enabled && self.strategy == Strategy::QuotaShare).then_some(&self.pacing)
    }

    /// The targets as the journal names them.
    pub fn target_infos(&self) -> Vec<TargetInfo> {
        self.targets
            .iter()
            .map(|t| TargetInfo {
                connection: t.connection.clone(),
                model: t.model.clone(),
                weight: t.weight,
            })
            .collect()
    }
}

/// Implicit `provider/model` combos kept at once unless the config says otherwise.
pub const DEFAULT_MAX_IMPLICIT_COMBOS: usize = 1_024;

fn default_max_implicit_combos() -> usize {
    DEFAULT_MAX_IMPLICIT_COMBOS
}

/// Everything the actor system needs to run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Topology {
    pub providers: Vec<ProviderSpec>,
    pub connections: Vec<ConnectionSpec>,
    pub combos: Vec<ComboSpec>,
    /// Defaults for implicit combos.
    pub max_attempts: u32,
    pub max_upstream_requests: u32,
    /// Implicit combos kept at once (`server.max_implicit_combos`): past it the least
    /// recently used is dropped, so junk names cannot crowd out real ones or grow memory.
    #[serde(default = "default_max_implicit_combos")]
    pub max_implicit_combos: usize,
    /// `[affinity]` (behaviour §10).
    #[serde(default)]
    pub affinity: AffinitySettings,
    /// `[defaults.pacing]` (behaviour §13), for implicit combos.
    #[serde(default)]
    pub pacing: PacingSettings,
    /// Clients the config names (behaviour §11): tables several clients share (response
    /// bindings, conversation groups) give each `1 / clients` of their bound. 0 counts as 1.
    #[serde(default)]
    pub clients: usize,
    /// Where it came from (a path, `embedded`).
    pub source: String,
    /// Hex digest of the config's bytes.
    pub digest: String,
}

impl Topology {
    /// A topology of these parts, with the spec's defaults for implicit combos; `source` and
    /// `digest` say where it came from.
    pub fn new(
        providers: Vec<ProviderSpec>,
        connections: Vec<ConnectionSpec>,
        combos: Vec<ComboSpec>,
        source: &str,
        digest: &str,
    ) -> Topology {
        Topology {
            providers,
            connections,
            combos,
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            max_upstream_requests: DEFAULT_MAX_UPSTREAM_REQUESTS,
            max_implicit_combos: DEFAULT_MAX_IMPLICIT_COMBOS,
            affinity: AffinitySettings::default(),
            pacing: PacingSettings::default(),
            clients: 0,
            source: source.to_string(),
            digest: digest.to_string(),
        }
    }

    pub fn provider(&self, name: &str) -> Option<&ProviderSpec> {
        self.providers.iter().find(|p| p.name == name)
    }

    pub fn connection(&self, id: &str) -> Option<&ConnectionSpec> {
        self.connections.iter().find(|c| c.id == id)
    }

    pub fn combo(&self, name: &str) -> Option<&ComboSpec> {
        self.combos.iter().find(|c| c.name == name)
    }

    /// The implicit combo for `provider/model`: every connection of that provider that serves
    /// the model, with equal weights. `None` when the name is not of that form, the provider is
    /// unknown, or no connection serves the model.
    pub fn implicit_combo(&self, name: &str) -> Option<ComboSpec> {
        let ImplicitCombo { provider, model } = ImplicitCombo::parse(name)?;
        self.provider(provider)?;
        let combo = implicit_combo_of(
            name,
            self.connections
                .iter()
                .filter(|c| c.provider == provider && c.serves(model))
                .map(|c| c.id.as_str()),
            model,
            Strategy::QuotaShare,
            self.max_attempts,
            self.max_upstream_requests,
        )?;
        Some(ComboSpec {
            pacing: self.pacing.clone(),
            ..combo
        })
    }

    /// The secret-free shape of this topology, for the journal.
    /// The knobs of pacing's rule for `generation` as the journal records them, right after
    /// its `config_loaded` (behaviour §13); `None` only when the defaults and every combo run
    /// [`PacingKnobs::UNJOURNALED`] (exponent 1, wall clock, every window), which replay
    /// assumes without one — so under the default knobs (the longest window) it is journaled.
    pub fn pacing_rule(&self, generation: u64) -> Option<PacingRule> {
        let defaults = self.pacing.knobs();
        let rule = PacingRule {
            generation,
            exponent_pm: defaults.exponent_pm,
            clock: defaults.clock,
            pace_windows: defaults.pace_windows,
            combos: self
                .combos
                .iter()
                .map(|combo| ComboPacing::new(&combo.name, combo.pacing.knobs()))
                .collect(),
        };
        let unjournaled = PacingKnobs::UNJOURNALED;
        let differs =
            defaults != unjournaled || rule.combos.iter().any(|c| c.knobs() != unjournaled);
        differs.then_some(rule)
    }

    pub fn config_loaded(&self, generation: u64) -> ConfigLoaded {
        ConfigLoaded {
            generation,
            source: self.source.clone(),
            digest: self.digest.clone(),
            providers: self
                .providers
                .iter()
                .map(|p| ProviderInfo {
                    name: p.name.clone(),
                    format: p.format,
                    profile: p.profile,
                })
                .collect(),
            connections: self
                .connections
                .iter()
                .map(|c| ConnectionInfo {
                    id: c.id.clone(),
                    provider: c.provider.clone(),
                    auth: c.auth,
                    weight: c.weight,
                    max_concurrent: c.max_concurrent,
                    models: c.models.clone(),
                })
                .collect(),
            combos: self
                .combos
                .iter()
                .map(|c| ComboInfo {
                    name: c.name.clone(),
                    strategy: c.strategy.as_str().to_string(),
                    targets: c.target_infos(),
                })
                .collect(),
        }
    }

    /// The topology a journal recorded, for replay (which has no config file): the journaled
    /// providers, connections and combos with the default settings of each profile and auth
    /// kind (overrides are not journaled) and no configured usage limits.
    pub fn from_recorded(config: &ConfigLoaded) -> Topology {
        Topology {
            providers: config
                .providers
                .iter()
                .map(|p| ProviderSpec::new(&p.name, p.format, p.profile))
                .collect(),
            connections: config
                .connections
                .iter()
                .map(|c| ConnectionSpec {
                    max_concurrent: c.max_concurrent,
                    models: c.models.clone(),
                    ..ConnectionSpec::new(&c.id, &c.provider, c.auth, c.weight)
                })
                .collect(),
            combos: config
                .combos
                .iter()
                .filter_map(|combo| {
                    let (strategy, targets) = recorded_targets(config, &combo.name)?;
                    Some(ComboSpec {
                        pacing: PacingSettings::default(),
                        name: combo.name.clone(),
                        strategy,
                        targets: targets
                            .into_iter()
                            .map(|t| TargetSpec {
                                connection: t.connection,
                                model: t.model,
                                weight: t.weight,
                            })
                            .collect(),
                        max_attempts: 0,
                        max_upstream_requests: 0,
                        hold_ms: 0,
                        queue_ms: 0,
                        translate: true,
                    })
                })
                .collect(),
            max_attempts: 0,
            max_upstream_requests: 0,
            max_implicit_combos: DEFAULT_MAX_IMPLICIT_COMBOS,
            affinity: AffinitySettings::default(),
            pacing: PacingSettings::default(),
            clients: 0,
            source: config.source.clone(),
            digest: config.digest.clone(),
        }
    }

    /// Connection id → provider format, for filtering targets by the endpoint's format.
    pub fn connection_formats(&self) -> BTreeMap<String, ApiFormat> {
        self.connections
            .iter()
            .filter_map(|c| Some((c.id.clone(), self.provider(&c.provider)?.format)))
            .collect()
    }
}

/// The strategy and targets of a combo as the journal recorded them, for replay: explicit
/// combos from the `ConfigLoaded`, implicit ones derived by the same rule as live.
pub fn recorded_targets(config: &ConfigLoaded, combo: &str) -> Option<(Strategy, Vec<TargetInfo>)> {
    if let Some(c) = config.combos.iter().find(|c| c.name == combo) {
        let strategy = c.strategy.parse().unwrap_or(Strategy::QuotaShare);
        return Some((strategy, c.targets.clone()));
    }
    let ImplicitCombo { provider, model } = ImplicitCombo::parse(combo)?;
    config.providers.iter().find(|p| p.name == provider)?;
    let ids = config.connections.iter().filter(|c| {
        c.provider == provider
            && c.models
                .as_ref()
                .is_none_or(|models| models.iter().any(|m| m == model))
    });
    let spec = implicit_combo_of(
        combo,
        ids.map(|c| c.id.as_str()),
        model,
        Strategy::QuotaShare,
        0,
        0,
    )?;
    Some((spec.strategy, spec.target_infos()))
}

fn implicit_combo_of<'a>(
    name: &str,
    connection_ids: impl Iterator<Item = &'a str>,
    model: &str,
    strategy: Strategy,
    max_attempts: u32,
    max_upstream_requests: u32,
) -> Option<ComboSpec> {
    let targets: Vec<TargetSpec> = connection_ids
        .map(|id| TargetSpec {
            connection: id.to_string(),
            model: model.to_string(),
            weight: 1,
        })
        .collect();
    if targets.is_empty() {
        return None;
    }
    Some(ComboSpec {
        name: name.to_string(),
        strategy,
        targets,
        max_attempts,
        max_upstream_requests,
        hold_ms: 0,
        queue_ms: 0,
        pacing: PacingSettings::default(),
        translate: true,
    })
}
