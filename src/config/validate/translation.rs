//! `[translation]`: what a translated request gets that the client did not say
//! (`default_max_tokens`); `[responses]`: whether translated Responses are kept, and the
//! bounds of their store.

use crate::config::error::ErrorSink;

pub(super) fn build_translation(
    raw: crate::config::raw::RawTranslation,
    sink: &mut ErrorSink,
) -> crate::config::model::TranslationConfig {
    let defaults = crate::config::model::TranslationConfig::default();
    let default_max_tokens = match raw.default_max_tokens {
        Some(0) => {
            sink.push("translation.default_max_tokens", "must be at least 1");
            defaults.default_max_tokens
        }
        Some(tokens) => tokens,
        None => defaults.default_max_tokens,
    };
    crate::config::model::TranslationConfig { default_max_tokens }
}

/// The largest `ttl_days`: ten years (a longer one is a typo, not a wish).
const MAX_TTL_DAYS: u64 = 3650;
/// The smallest `max_bytes`: one large response must fit.
const MIN_STORE_BYTES: u64 = 1 << 20;

pub(super) fn build_responses(
    raw: crate::config::raw::RawResponses,
    sink: &mut ErrorSink,
) -> crate::config::model::ResponsesConfig {
    let defaults = crate::config::model::ResponsesConfig::default();
    let max_bytes = match raw.max_bytes {
        Some(bytes) if bytes < MIN_STORE_BYTES => {
            sink.push(
                "responses.max_bytes",
                format!("must be at least {MIN_STORE_BYTES} (1 MiB), got {bytes}"),
            );
            defaults.max_bytes
        }
        Some(bytes) => bytes,
        None => defaults.max_bytes,
    };
    let ttl_ms = match raw.ttl_days {
        Some(days) if days == 0 || days > MAX_TTL_DAYS => {
            sink.push(
                "responses.ttl_days",
                format!("must be 1 to {MAX_TTL_DAYS} days, got {days}"),
            );
            defaults.ttl_ms
        }
        Some(days) => days * crate::config::model::DAY_MS,
        None => defaults.ttl_ms,
    };
    crate::config::model::ResponsesConfig {
        store: raw.store.unwrap_or(defaults.store),
        max_bytes,
        ttl_ms,
    }
}
