//! Secrets never leave through Debug output, summaries or error messages.

use quotaroute::config;

const TEXT: &str = r#"
[server]
api_keys = ["sk-qr-CLIENTSECRET"]
admin_key = "ADMINSECRET"

[[providers]]
name = "p"
format = "anthropic"
base_url = "https://api.anthropic.com/v1"

[[connections]]
id = "c1"
provider = "p"
api_key = "sk-INLINESECRET"

[[connections]]
id = "c2"
provider = "p"
api_key_env = "ENV_KEY"

[[combos]]
name = "all"
targets = [{ connection = "c1", model = "m" }, { connection = "c2", model = "m" }]
"#;

const SECRETS: [&str; 4] = ["CLIENTSECRET", "ADMINSECRET", "INLINESECRET", "ENVSECRET"];

fn env(variable: &str) -> Option<String> {
    (variable == "ENV_KEY").then(|| "sk-ENVSECRET".to_owned())
}

fn assert_no_secret(text: &str) {
    for secret in SECRETS {
        assert!(!text.contains(secret), "{secret} leaked into:\n{text}");
    }
}

#[test]
fn debug_and_summary_never_print_a_key() {
    let config = config::parse(TEXT, "q.toml", &env).unwrap();
    assert_no_secret(&format!("{config:?}"));
    assert_no_secret(&format!("{config:#?}"));
    assert_no_secret(&config.summary());
    assert_eq!(
        config.connections[0]
            .credential
            .static_key()
            .unwrap()
            .expose(),
        "sk-INLINESECRET"
    );
    assert!(config.server.api_keys[0].matches("sk-qr-CLIENTSECRET"));
}

#[test]
fn error_messages_never_print_a_key() {
    // A key put where a number belongs, keys beside other errors, a bad key type.
    let text = TEXT
        .replace(
            "id = \"c1\"",
            "id = \"c1\"\nweight = \"sk-MISPLACEDSECRET\"",
        )
        .replace("name = \"all\"", "name = \"all\"\nmax_attempts = 0")
        .replace(
            "admin_key = \"ADMINSECRET\"",
            "admin_key = \"ADMINSECRET\"\nadmin_kye = \"ADMINSECRET\"",
        );
    let errors = config::parse(&text, "q.toml", &env).unwrap_err();
    let rendered = format!("{errors}\n{errors:?}");
    assert!(rendered.contains("connections[0].weight"), "{rendered}");
    assert!(rendered.contains("server.admin_kye"), "{rendered}");
    assert_no_secret(&rendered);
    assert!(!rendered.contains("MISPLACEDSECRET"), "{rendered}");
}
