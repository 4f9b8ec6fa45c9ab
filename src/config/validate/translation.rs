//! `[translation]`: what a translated request gets that the client did not say
//! (`default_max_tokens`).

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
