//! `[affinity]`: conversation affinity's settings (behaviour §10): on or off, the prompt it needs,
//! how long and how many groups it keeps, how far a group may lead.

use crate::config::error::ErrorSink;

use super::checks::at_least_one;

pub(super) fn build_affinity(
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
