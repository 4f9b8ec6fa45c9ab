//! Config validation: each error kind names file, key and reason, and one run reports them all.

#![expect(clippy::expect_used, reason = "test helpers fail loudly")]

use quotaroute::config::{self, ConfigErrors};

const VALID: &str = r#"
[server]
listen = "127.0.0.1:4100"
api_keys = ["sk-qr-client"]

[[providers]]
name = "openai"
format = "openai"
base_url = "http://127.0.0.1:9/v1"

[[connections]]
id = "oa-1"
provider = "openai"
api_key = "sk-inline-1"
weight = 2
models = ["gpt-4o-mini"]

[[connections]]
id = "oa-2"
provider = "openai"
api_key_env = "KEY_TWO"

[[combos]]
name = "team"
targets = [
  { connection = "oa-1", model = "gpt-4o-mini", weight = 2 },
  { connection = "oa-2", model = "gpt-4o-mini" },
]
"#;

fn env(variable: &str) -> Option<String> {
    (variable == "KEY_TWO").then(|| "sk-from-env-2".to_owned())
}

fn errors_of(text: &str) -> ConfigErrors {
    config::parse(text, "q.toml", &env).expect_err("config should be rejected")
}

/// (key, reason fragment) pairs, so a test can assert what was found.
fn pairs(errors: &ConfigErrors) -> Vec<(String, String)> {
    errors
        .errors
        .iter()
        .map(|error| (error.key.clone(), error.reason.clone()))
        .collect()
}

fn assert_error(text: &str, key: &str, reason_fragment: &str) {
    let errors = errors_of(text);
    assert!(
        errors
            .errors
            .iter()
            .any(|error| error.key == key && error.reason.contains(reason_fragment)),
        "expected `{key}: …{reason_fragment}…` in:\n{errors}"
    );
    assert!(errors.errors.iter().all(|error| error.file == "q.toml"));
}

#[test]
fn valid_config_parses_with_defaults() {
    let config = config::parse(VALID, "q.toml", &env).unwrap();
    assert_eq!(config.server.listen.to_string(), "127.0.0.1:4100");
    assert_eq!(config.server.max_body_bytes, 10_485_760);
    assert_eq!(config.server.request_timeout_ms, 600_000);
    assert_eq!(config.server.first_token_timeout_ms, 30_000);
    assert_eq!(config.server.shutdown_grace_ms, 30_000);
    assert!(!config.server.metrics_public);
    assert!(config.server.admin_key.is_none());
    assert_eq!(config.journal.flush_every_ms, 50);
    assert_eq!(config.journal.request_events, config::RequestEvents::All);
    assert_eq!(config.defaults.max_attempts, 3);
    assert_eq!(config.defaults.max_upstream_requests, 8);
    assert_eq!(config.connections.len(), 2);
    assert_eq!(
        config.connections[1]
            .credential
            .static_key()
            .unwrap()
            .expose(),
        "sk-from-env-2"
    );
    assert_eq!(config.connections[1].weight, 1);
    assert_eq!(config.connections[1].auth, config::AuthKind::ApiKey);
    let combo = config.combo("team").unwrap();
    assert_eq!(combo.strategy, config::Strategy::QuotaShare);
    assert_eq!(combo.hold_ms, 0);
    assert_eq!(combo.targets[1].weight, 1);
    assert!(config.source_path.is_none());
}

#[test]
fn unknown_keys_are_named_with_their_path() {
    let text = VALID
        .replace("weight = 2\nmodels", "wieght = 2\nmodels")
        .replace("listen =", "lisen = \"x\"\nlisten =");
    let errors = errors_of(&text);
    let found = pairs(&errors);
    assert!(found
        .iter()
        .any(|(key, reason)| key == "connections[0].wieght" && reason.starts_with("unknown key")));
    assert!(found
        .iter()
        .any(|(key, reason)| key == "server.lisen" && reason.contains("`listen`")));
}

#[test]
fn unknown_keys_in_nested_tables_and_top_level() {
    let text = format!(
        "{VALID}\n[connections.limits]\ntokens_5hh = 1\n\n[defaults.breaker]\nopen_att = 3\n\n[extra]\nx = 1\n"
    );
    let errors = errors_of(&text);
    let keys: Vec<String> = pairs(&errors).into_iter().map(|(key, _)| key).collect();
    assert!(
        keys.contains(&"connections[1].limits.tokens_5hh".to_owned()),
        "{errors}"
    );
    assert!(
        keys.contains(&"defaults.breaker.open_att".to_owned()),
        "{errors}"
    );
    assert!(keys.contains(&"extra".to_owned()), "{errors}");
}

#[test]
fn two_unknown_keys_in_one_element_are_both_reported() {
    let text = VALID.replace("id = \"oa-2\"", "id = \"oa-2\"\nfoo = 1\nbar = 2");
    let keys: Vec<String> = pairs(&errors_of(&text))
        .into_iter()
        .map(|(key, _)| key)
        .collect();
    assert!(keys.contains(&"connections[1].foo".to_owned()));
    assert!(keys.contains(&"connections[1].bar".to_owned()));
}

#[test]
fn wrong_type_is_reported_once_and_not_again_as_missing() {
    let text = VALID.replace(
        "provider = \"openai\"\napi_key_env",
        "provider = 5\napi_key_env",
    );
    let errors = errors_of(&text);
    let at_key: Vec<_> = errors
        .errors
        .iter()
        .filter(|error| error.key == "connections[1].provider")
        .collect();
    assert_eq!(at_key.len(), 1, "{errors}");
    assert!(at_key[0].reason.contains("invalid type"));
}

#[test]
fn duplicate_names_and_ids() {
    let text = format!(
        "{VALID}\n[[providers]]\nname = \"openai\"\nformat = \"openai\"\nbase_url = \"https://x.test/v1\"\n\n[[connections]]\nid = \"oa-1\"\nprovider = \"openai\"\napi_key = \"k\"\n\n[[combos]]\nname = \"team\"\ntargets = [{{ connection = \"oa-2\", model = \"m\" }}]\n"
    );
    let errors = errors_of(&text);
    let found = pairs(&errors);
    assert!(found
        .iter()
        .any(|(key, reason)| key == "providers[1].name" && reason.contains("duplicate")));
    assert!(found.iter().any(|(key, reason)| key == "connections[2].id"
        && reason.contains("duplicate connection id `oa-1`")));
    assert!(found
        .iter()
        .any(|(key, reason)| key == "combos[1].name" && reason.contains("duplicate combo name")));
}

#[test]
fn dangling_references() {
    assert_error(
        &VALID.replace(
            "provider = \"openai\"\napi_key_env",
            "provider = \"opena1\"\napi_key_env",
        ),
        "connections[1].provider",
        "unknown provider `opena1`",
    );
    assert_error(
        &VALID.replace("connection = \"oa-2\"", "connection = \"oa-9\""),
        "combos.team.targets[1].connection",
        "unknown connection `oa-9`",
    );
}

#[test]
fn zero_weights_are_rejected() {
    assert_error(
        &VALID.replace("weight = 2\nmodels", "weight = 0\nmodels"),
        "connections[0].weight",
        "at least 1",
    );
    assert_error(
        &VALID.replace(
            "model = \"gpt-4o-mini\", weight = 2",
            "model = \"gpt-4o-mini\", weight = 0",
        ),
        "combos.team.targets[0].weight",
        "at least 1",
    );
}

#[test]
fn bad_urls_are_rejected() {
    for bad in ["not a url", "ftp://example.com/v1", "file:///tmp/x"] {
        assert_error(
            &VALID.replace("http://127.0.0.1:9/v1", bad),
            "providers[0].base_url",
            bad,
        );
    }
}

#[test]
fn names_with_slashes_are_rejected() {
    assert_error(
        &VALID.replace("name = \"team\"", "name = \"te/am\""),
        "combos[0].name",
        "must not contain `/`",
    );
}

#[test]
fn enumerated_values_are_checked() {
    assert_error(
        &VALID.replace("format = \"openai\"", "format = \"gamini\""),
        "providers[0].format",
        "`gamini` is not one of `openai`, `anthropic`, `gemini`",
    );
    assert_error(
        &VALID.replace("name = \"team\"", "name = \"team\"\nstrategy = \"random\""),
        "combos.team.strategy",
        "`random` is not one of",
    );
    assert_error(
        &VALID.replace("weight = 2\nmodels", "auth = \"token\"\nmodels"),
        "connections[0].auth",
        "`token` is not one of `api_key`, `oauth`",
    );
    assert_error(
        &format!("{VALID}\n[journal]\nrequest_events = \"some\"\n"),
        "journal.request_events",
        "`some` is not one of `all`, `failures`",
    );
    assert_error(
        &format!("{VALID}\n[defaults.breaker]\nprofile = \"cookie\"\n"),
        "defaults.breaker.profile",
        "`cookie`",
    );
}

#[test]
fn connection_needs_exactly_one_key_source() {
    assert_error(
        &VALID.replace("api_key_env = \"KEY_TWO\"", ""),
        "connections[1].api_key_env",
        "missing",
    );
    assert_error(
        &VALID.replace(
            "api_key_env = \"KEY_TWO\"",
            "api_key_env = \"KEY_TWO\"\napi_key = \"k\"",
        ),
        "connections[1].api_key",
        "exactly one",
    );
}

#[test]
fn unset_env_var_is_named() {
    assert_error(
        &VALID.replace("KEY_TWO", "KEY_NOT_SET"),
        "connections[1].api_key_env",
        "environment variable `KEY_NOT_SET` is not set",
    );
}

#[test]
fn invalid_listen_address() {
    assert_error(
        &VALID.replace("127.0.0.1:4100", "localhost"),
        "server.listen",
        "invalid listen address `localhost`",
    );
}

#[test]
fn target_model_outside_the_connections_models() {
    assert_error(
        &VALID.replace(
            "model = \"gpt-4o-mini\", weight = 2",
            "model = \"gpt-4o\", weight = 2",
        ),
        "combos.team.targets[0].model",
        "does not serve `gpt-4o`",
    );
}

#[test]
fn syntax_errors_give_line_and_column_without_the_source_line() {
    let text = "[server]\napi_keys = [\"sk-secret-value\n";
    let errors = errors_of(text);
    assert_eq!(errors.errors.len(), 1);
    assert!(errors.errors[0].key.starts_with("line 2"), "{errors}");
    assert!(!errors.to_string().contains("sk-secret-value"));
}

#[test]
fn many_errors_in_one_run() {
    let text = VALID
        .replace("127.0.0.1:4100", "nowhere")
        .replace("http://127.0.0.1:9/v1", "nope")
        .replace("weight = 2\nmodels", "weight = 0\ncolour = \"red\"\nmodels")
        .replace("KEY_TWO", "KEY_MISSING")
        .replace("connection = \"oa-2\"", "connection = \"ghost\"");
    let errors = errors_of(&text);
    let keys: Vec<String> = pairs(&errors).into_iter().map(|(key, _)| key).collect();
    for expected in [
        "server.listen",
        "providers[0].base_url",
        "connections[0].weight",
        "connections[0].colour",
        "connections[1].api_key_env",
        "combos.team.targets[1].connection",
    ] {
        assert!(
            keys.contains(&expected.to_owned()),
            "{expected} missing in:\n{errors}"
        );
    }
    // Rendered one per line as `file: key: reason`.
    let rendered = errors.to_string();
    assert_eq!(rendered.lines().count(), errors.errors.len());
    assert!(rendered.lines().all(|line| line.starts_with("q.toml: ")));
}

#[test]
fn load_reads_a_file_and_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("quotaroute.toml");
    std::fs::write(
        &path,
        VALID.replace("api_key_env = \"KEY_TWO\"", "api_key = \"k2\""),
    )
    .unwrap();
    let config = config::load(&path).unwrap();
    assert_eq!(config.source_path.as_deref(), Some(path.as_path()));

    let missing = dir.path().join("absent.toml");
    let errors = config::load(&missing).unwrap_err();
    assert!(errors
        .to_string()
        .starts_with(&missing.display().to_string()));
}

#[test]
fn summary_lists_providers_connections_combos() {
    let config = config::parse(VALID, "q.toml", &env).unwrap();
    let summary = config.summary();
    assert!(summary.contains("providers (1)"));
    assert!(summary.contains("oa-1"));
    assert!(summary.contains("key from $KEY_TWO"));
    assert!(summary.contains("team  strategy=quota-share"));
}

/// `VALID` with `line` added to its `[server]` or its `[[providers]]` table.
fn with_server(line: &str) -> String {
    VALID.replacen("[server]\n", &format!("[server]\n{line}\n"), 1)
}

fn with_provider(line: &str) -> String {
    VALID.replacen(
        "base_url = \"http://127.0.0.1:9/v1\"\n",
        &format!("base_url = \"http://127.0.0.1:9/v1\"\n{line}\n"),
        1,
    )
}

#[test]
fn egress_and_tls_files_are_checked_and_named() {
    let dir = tempfile::tempdir().unwrap();
    let junk = dir.path().join("junk.pem");
    std::fs::write(&junk, "not pem at all").unwrap();
    let missing = dir.path().join("missing.pem");
    assert_error(
        &with_provider(&format!("ca_file = \"{}\"", missing.display())),
        "providers[0].ca_file",
        "cannot read",
    );
    assert_error(
        &with_provider(&format!("ca_file = \"{}\"", junk.display())),
        "providers[0].ca_file",
        "holds no PEM certificate",
    );
    let errors = errors_of(&with_provider(
        "proxy = \"socks5://bob:hunter2@proxy.corp:1080\"",
    ));
    let (key, reason) = pairs(&errors).remove(0);
    assert_eq!(key, "providers[0].proxy");
    assert!(reason.contains("is not an http(s) proxy URL"), "{reason}");
    assert!(
        !reason.contains("hunter2"),
        "the proxy password is never printed: {reason}"
    );
    assert_error(
        &with_server(&format!("tls_cert = \"{}\"", junk.display())),
        "server.tls_key",
        "needs its private key",
    );

    let one = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    let other = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    let cert = dir.path().join("cert.pem");
    let foreign_key = dir.path().join("foreign.key");
    std::fs::write(&cert, one.cert.pem()).unwrap();
    std::fs::write(&foreign_key, other.signing_key.serialize_pem()).unwrap();
    assert_error(
        &with_server(&format!(
            "tls_cert = \"{}\"\ntls_key = \"{}\"",
            cert.display(),
            foreign_key.display()
        )),
        "server.tls_cert",
        "does not belong to the certificate",
    );
    let key = dir.path().join("cert.key");
    std::fs::write(&key, one.signing_key.serialize_pem()).unwrap();
    let text = with_server(&format!(
        "tls_cert = \"{}\"\ntls_key = \"{}\"",
        cert.display(),
        key.display()
    ));
    assert!(config::parse(&text, "q.toml", &env).is_ok());
}

#[test]
fn a_combo_naming_an_invalid_connection_is_not_told_it_is_unknown_too() {
    // oa-2's key variable is unset: one error, about oa-2, not another about `team`'s target.
    let errors = config::parse(VALID, "q.toml", &|_| None).expect_err("oa-2 has no key");
    let found = pairs(&errors);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].0, "connections[1].api_key_env");
    // A connection that is not there at all is still named unknown.
    let text = VALID.replace("{ connection = \"oa-2\"", "{ connection = \"oa-9\"");
    assert_error(
        &text,
        "combos.team.targets[1].connection",
        "unknown connection `oa-9`",
    );
}

/// `VALID` with connection oa-2's `api_key_env` line replaced by `lines`.
fn with_source(lines: &str) -> String {
    VALID.replace("api_key_env = \"KEY_TWO\"", lines)
}

#[test]
fn changing_credential_sources_parse_with_their_defaults() {
    let parse = |lines: &str| {
        config::parse(&with_source(lines), "q.toml", &env)
            .unwrap_or_else(|errors| panic!("{errors}"))
            .connections[1]
            .clone()
    };
    let file = parse("api_key_file = \"/run/secrets/k2\"");
    assert_eq!(
        file.credential,
        config::CredentialSource::File {
            path: "/run/secrets/k2".into()
        }
    );
    let command = parse("api_key_command = [\"/usr/bin/get-key\", \"--team\", \"a b\"]");
    assert_eq!(
        command.credential,
        config::CredentialSource::Command {
            argv: vec!["/usr/bin/get-key".into(), "--team".into(), "a b".into()],
            ttl_ms: config::DEFAULT_API_KEY_TTL_MS,
            timeout_ms: config::DEFAULT_API_KEY_COMMAND_TIMEOUT_MS,
        }
    );
    assert_eq!(config::DEFAULT_API_KEY_TTL_MS, 300_000);
    let tuned = parse(
        "api_key_command = [\"get-key\"]\napi_key_ttl_ms = 60000\napi_key_command_timeout_ms = 2000",
    );
    assert!(matches!(
        tuned.credential,
        config::CredentialSource::Command {
            ttl_ms: 60_000,
            timeout_ms: 2_000,
            ..
        }
    ));
    let oauth = parse(
        "[connections.oauth]\ntoken_url = \"https://auth.example.com/oauth/token\"\nclient_id = \"qr\"\nrefresh_token_file = \"/var/lib/qr/rt\"",
    );
    let config::CredentialSource::OAuth(source) = &oauth.credential else {
        panic!("{:?}", oauth.credential)
    };
    assert_eq!(
        source.token_url.as_str(),
        "https://auth.example.com/oauth/token"
    );
    assert_eq!(source.client_id, "qr");
    assert_eq!(
        oauth.auth,
        config::AuthKind::OAuth,
        "an oauth table makes the connection oauth"
    );
    // `check` names the source, never a value.
    let summary = config::parse(
        &with_source("api_key_file = \"/run/secrets/k2\""),
        "q.toml",
        &env,
    )
    .unwrap()
    .summary();
    assert!(
        summary.contains("key from file /run/secrets/k2"),
        "{summary}"
    );
}

#[test]
fn every_bad_combination_of_credential_sources_is_named() {
    for (lines, key, reason) in [
        (
            "api_key_file = \"/k\"\napi_key_command = [\"get-key\"]",
            "connections[1].api_key_file",
            "exactly one of `api_key`, `api_key_env`, `api_key_file`, `api_key_command` and [connections.oauth], not `api_key_file` with `api_key_command`",
        ),
        (
            "api_key = \"k\"\n[connections.oauth]\ntoken_url = \"https://a.test/t\"\nclient_id = \"c\"\nrefresh_token_file = \"/rt\"",
            "connections[1].api_key",
            "not `api_key` with [connections.oauth]",
        ),
        (
            "api_key_env = \"KEY_TWO\"\napi_key_file = \"/k\"\napi_key_command = [\"x\"]",
            "connections[1].api_key_env",
            "not `api_key_env` with `api_key_file` and `api_key_command`",
        ),
        ("api_key_file = \"\"", "connections[1].api_key_file", "must not be empty"),
        ("api_key_command = []", "connections[1].api_key_command", "must name a program"),
        ("api_key_command = [\"\"]", "connections[1].api_key_command", "must name a program"),
        ("api_key_command = \"get-key --team a\"", "connections[1].api_key_command", ""),
        (
            "api_key_file = \"/k\"\napi_key_ttl_ms = 1000",
            "connections[1].api_key_ttl_ms",
            "only applies to `api_key_command`",
        ),
        (
            "api_key_env = \"KEY_TWO\"\napi_key_command_timeout_ms = 1000",
            "connections[1].api_key_command_timeout_ms",
            "only applies to `api_key_command`",
        ),
        (
            "api_key_command = [\"get-key\"]\napi_key_ttl_ms = 0",
            "connections[1].api_key_ttl_ms",
            "at least 1",
        ),
        (
            "[connections.oauth]\nclient_id = \"c\"\nrefresh_token_file = \"/rt\"",
            "connections[1].oauth.token_url",
            "missing (required)",
        ),
        (
            "[connections.oauth]\ntoken_url = \"not a url\"\nclient_id = \"c\"\nrefresh_token_file = \"/rt\"",
            "connections[1].oauth.token_url",
            "is not a valid URL",
        ),
        (
            "[connections.oauth]\ntoken_url = \"ftp://a.test/t\"\nclient_id = \"c\"\nrefresh_token_file = \"/rt\"",
            "connections[1].oauth.token_url",
            "must be an http or https URL",
        ),
        (
            "[connections.oauth]\ntoken_url = \"https://a.test/t\"\nrefresh_token_file = \"/rt\"",
            "connections[1].oauth.client_id",
            "missing (required)",
        ),
        (
            "[connections.oauth]\ntoken_url = \"https://a.test/t\"\nclient_id = \"\"\nrefresh_token_file = \"/rt\"",
            "connections[1].oauth.client_id",
            "must not be empty",
        ),
        (
            "[connections.oauth]\ntoken_url = \"https://a.test/t\"\nclient_id = \"c\"",
            "connections[1].oauth.refresh_token_file",
            "missing (required)",
        ),
        (
            "[connections.oauth]\ntoken_url = \"https://a.test/t\"\nclient_id = \"c\"\nrefresh_token_file = \"/rt\"\nclient_secret = \"s\"",
            "connections[1].oauth.client_secret",
            "unknown key",
        ),
        (
            "auth = \"api_key\"\n[connections.oauth]\ntoken_url = \"https://a.test/t\"\nclient_id = \"c\"\nrefresh_token_file = \"/rt\"",
            "connections[1].auth",
            "`api_key` cannot go with [connections.oauth]",
        ),
    ] {
        assert_error(&with_source(lines), key, reason);
    }
}

#[test]
fn all_credential_errors_of_a_file_come_in_one_run() {
    let text = with_source(
        "api_key_ttl_ms = 5\n[connections.oauth]\ntoken_url = \"nope\"\nclient_id = \"\"",
    );
    let found = pairs(&errors_of(&text));
    for key in [
        "connections[1].api_key_ttl_ms",
        "connections[1].oauth.token_url",
        "connections[1].oauth.client_id",
        "connections[1].oauth.refresh_token_file",
    ] {
        assert!(found.iter().any(|(k, _)| k == key), "{key} in {found:?}");
    }
    // No value of any kind is echoed: the errors name keys.
    assert!(!errors_of(&text).to_string().contains("sk-inline-1"));
}

#[test]
fn provider_apis_name_generation_apis_once() {
    for (apis, said) in [
        ("[\"chat\", \"gemini-ish\"]", "is not a generation API"),
        ("[\"chat\", \"chat\"]", "listed twice"),
        ("[]", "at least one API"),
    ] {
        assert_error(
            &VALID.replace(
                "format = \"openai\"",
                &format!("format = \"openai\"\napis = {apis}"),
            ),
            "providers[0].apis",
            said,
        );
    }
}

/// `server.seal_key` (issue 49 item 7): at most one of its three forms, at least 32
/// characters, an env variable that is set, a file that reads; errors never show the value.
#[test]
fn server_seal_key_forms_and_errors() {
    let with = |line: &str| {
        VALID.replace(
            "api_keys = [\"sk-qr-client\"]",
            &format!("api_keys = [\"sk-qr-client\"]\n{line}"),
        )
    };
    let secret = "a-cluster-wide-seal-secret-0123456789";
    let config = config::parse(&with(&format!("seal_key = \"{secret}\"")), "q.toml", &env).unwrap();
    assert_eq!(config.server.seal_key.as_ref().unwrap().expose(), secret);
    assert!(!format!("{config:?}").contains(secret));
    let config = config::parse(VALID, "q.toml", &env).unwrap();
    assert!(config.server.seal_key.is_none(), "absent: the node's own");

    let short = errors_of(&with("seal_key = \"short-secret\""));
    assert!(
        pairs(&short)
            .iter()
            .any(|(key, reason)| key == "server.seal_key" && reason.contains("at least 32")),
        "{short}"
    );
    assert!(!short.to_string().contains("short-secret"));
    assert_error(
        &with(&format!(
            "seal_key = \"{secret}\"\nseal_key_env = \"KEY_TWO\""
        )),
        "server.seal_key",
        "at most one",
    );
    assert_error(
        &with("seal_key_env = \"SEAL_NOT_SET\""),
        "server.seal_key_env",
        "environment variable `SEAL_NOT_SET` is not set",
    );
    assert_error(
        &with("seal_key_file = \"/nonexistent/seal\""),
        "server.seal_key_file",
        "cannot read",
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("seal");
    std::fs::write(&file, format!("{secret}\n")).unwrap();
    let config = config::parse(
        &with(&format!("seal_key_file = \"{}\"", file.display())),
        "q.toml",
        &env,
    )
    .unwrap();
    assert_eq!(config.server.seal_key.as_ref().unwrap().expose(), secret);
}

#[test]
fn responses_store_is_parsed_once_with_its_bounds() {
    let config = config::parse(VALID, "q.toml", &env).unwrap();
    assert_eq!(
        config.responses,
        config::ResponsesConfig {
            store: false,
            max_bytes: 1_073_741_824,
            ttl_ms: 30 * 24 * 3600 * 1000,
        }
    );
    let text = format!("{VALID}\n[responses]\nstore = true\nmax_bytes = 2097152\nttl_days = 2\n");
    let config = config::parse(&text, "q.toml", &env).unwrap();
    assert_eq!(
        config.responses,
        config::ResponsesConfig {
            store: true,
            max_bytes: 2_097_152,
            ttl_ms: 2 * 24 * 3600 * 1000,
        }
    );
}

#[test]
fn bad_responses_values_are_named() {
    let with = |section: &str| format!("{VALID}\n[responses]\n{section}\n");
    assert_error(
        &with("ttl_days = 0"),
        "responses.ttl_days",
        "must be 1 to 3650 days, got 0",
    );
    assert_error(&with("ttl_days = 4000"), "responses.ttl_days", "got 4000");
    assert_error(
        &with("max_bytes = 1000"),
        "responses.max_bytes",
        "at least 1048576",
    );
    assert_error(&with("store = \"yes\""), "responses.store", "");
    assert_error(&with("stor = true"), "responses.stor", "unknown key");
    // Every bad value in one run.
    let errors = errors_of(&with("ttl_days = 0\nmax_bytes = 1"));
    let keys: Vec<String> = pairs(&errors).into_iter().map(|(key, _)| key).collect();
    assert!(keys.contains(&"responses.ttl_days".to_owned()), "{keys:?}");
    assert!(keys.contains(&"responses.max_bytes".to_owned()), "{keys:?}");
}
