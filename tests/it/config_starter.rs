//! The starter config `quotaroute init` writes parses, and mentions every accepted key.

use quotaroute::config::{self, raw::accepted_keys, STARTER_CONFIG};

fn starter_env(variable: &str) -> Option<String> {
    ["OPENAI_KEY_1", "OPENAI_KEY_2", "ANTHROPIC_KEY_1"]
        .contains(&variable)
        .then(|| format!("test-value-of-{variable}"))
}

#[test]
fn starter_config_parses_with_its_env_vars() {
    let config = config::parse(STARTER_CONFIG, "starter.toml", &starter_env)
        .unwrap_or_else(|errors| panic!("{errors}"));
    assert_eq!(config.providers.len(), 2);
    assert_eq!(config.connections.len(), 3);
    assert_eq!(config.combos.len(), 2);
    assert_eq!(config.server.listen.to_string(), config::DEFAULT_LISTEN);
}

#[test]
fn starter_config_without_env_vars_names_them() {
    let errors = config::parse(STARTER_CONFIG, "starter.toml", &|_| None).unwrap_err();
    let rendered = errors.to_string();
    for variable in ["OPENAI_KEY_1", "OPENAI_KEY_2", "ANTHROPIC_KEY_1"] {
        assert!(rendered.contains(variable), "{rendered}");
    }
}

/// Whether `leaf = ` appears as a whole key (not as the tail of a longer key) or as a table
/// header `[…leaf]`.
fn mentions_key(text: &str, leaf: &str) -> bool {
    let assignment = format!("{leaf} =");
    let as_assignment = text.match_indices(&assignment).any(|(at, _)| {
        text[..at]
            .chars()
            .next_back()
            .is_none_or(|before| !(before.is_ascii_alphanumeric() || before == '_'))
    });
    as_assignment || text.contains(&format!(".{leaf}]")) || text.contains(&format!("[{leaf}]"))
}

#[test]
fn starter_config_mentions_every_accepted_key() {
    let missing: Vec<String> = accepted_keys()
        .into_iter()
        .filter(|key| {
            let (section, leaf) = key.rsplit_once('.').unwrap_or(("", key));
            let section_mentioned = section.is_empty()
                || section == "combos.targets"
                || STARTER_CONFIG.contains(&format!("[{section}]"))
                || STARTER_CONFIG.contains(&format!("[[{section}]]"));
            !(section_mentioned && mentions_key(STARTER_CONFIG, leaf))
        })
        .collect();
    assert!(missing.is_empty(), "starter config lacks: {missing:?}");
}

#[test]
fn key_mention_check_can_fail() {
    assert!(mentions_key("a = 1\n# weight = 2", "weight"));
    assert!(!mentions_key("max_weight = 2", "weight"));
    assert!(mentions_key("[connections.limits]", "limits"));
}

#[test]
fn starter_config_values_are_the_defaults() {
    let config = config::parse(STARTER_CONFIG, "starter.toml", &starter_env).unwrap();
    assert_eq!(config.server.max_body_bytes, config::DEFAULT_MAX_BODY_BYTES);
    assert_eq!(
        config.server.request_timeout_ms,
        config::DEFAULT_REQUEST_TIMEOUT_MS
    );
    assert_eq!(
        config.server.first_token_timeout_ms,
        config::DEFAULT_FIRST_TOKEN_TIMEOUT_MS
    );
    assert_eq!(
        config.server.shutdown_grace_ms,
        config::DEFAULT_SHUTDOWN_GRACE_MS
    );
    assert_eq!(
        config.journal.flush_every_ms,
        config::DEFAULT_FLUSH_EVERY_MS
    );
    assert_eq!(
        config.journal.snapshot_every_events,
        config::DEFAULT_SNAPSHOT_EVERY_EVENTS
    );
    assert_eq!(
        config.journal.retention_hours,
        config::DEFAULT_RETENTION_HOURS
    );
    assert_eq!(
        config.journal.max_queue_events,
        config::DEFAULT_MAX_QUEUE_EVENTS
    );
    assert_eq!(config.defaults.max_attempts, config::DEFAULT_MAX_ATTEMPTS);
    assert_eq!(
        config.defaults.max_upstream_requests,
        config::DEFAULT_MAX_UPSTREAM_REQUESTS
    );
    // Resilience keys are commented out so each provider's profile picks its own defaults.
    assert_eq!(config.defaults.breaker, config::BreakerOverrides::default());
}
