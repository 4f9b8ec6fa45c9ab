//! `[defaults]`: the attempt budget (`max_attempts`, `max_upstream_requests`) and the breaker
//! overrides every connection starts from.

use crate::config::error::ErrorSink;
use crate::config::model::DefaultsConfig;
use crate::config::raw::{BreakerOverrides, RawDefaults};

use super::checks::{at_least_one_u32, one_of};

pub const DEFAULT_MAX_ATTEMPTS: u32 = 3;
pub const DEFAULT_MAX_UPSTREAM_REQUESTS: u32 = 8;

pub(super) fn check_breaker(breaker: &BreakerOverrides, prefix: &str, sink: &mut ErrorSink) {
    if let Some(profile) = &breaker.profile {
        one_of(
            profile,
            &[("api_key", ()), ("oauth", ())],
            &format!("{prefix}.breaker.profile"),
            sink,
        );
    }
}

pub(super) fn build_defaults(raw: RawDefaults, sink: &mut ErrorSink) -> DefaultsConfig {
    let breaker = raw.breaker.unwrap_or_default();
    check_breaker(&breaker, "defaults", sink);
    DefaultsConfig {
        max_attempts: at_least_one_u32(
            raw.max_attempts,
            DEFAULT_MAX_ATTEMPTS,
            "defaults.max_attempts",
            sink,
        ),
        max_upstream_requests: at_least_one_u32(
            raw.max_upstream_requests,
            DEFAULT_MAX_UPSTREAM_REQUESTS,
            "defaults.max_upstream_requests",
            sink,
        ),
        breaker,
        cooldown: raw.cooldown.unwrap_or_default(),
        lockout: raw.lockout.unwrap_or_default(),
        buckets: raw.buckets.unwrap_or_default(),
        pacing: crate::config::pacing::build(raw.pacing, sink),
    }
}
