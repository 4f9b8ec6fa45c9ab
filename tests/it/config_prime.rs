//! `prime_at` / `prime_days` on a connection (behaviour §13): read once into a schedule; a bad
//! time, an unknown zone or a bad day is an error naming its key, all of them in one run.

#![expect(clippy::expect_used, reason = "test helpers fail loudly")]

use quotaroute::config;

fn with_prime(keys: &str) -> String {
    format!(
        r#"
[server]
listen = "127.0.0.1:4100"
api_keys = ["sk-qr-client"]

[[providers]]
name = "anthropic"
format = "anthropic"
base_url = "http://127.0.0.1:9/v1"

[[connections]]
id = "max-1"
provider = "anthropic"
api_key = "sk-inline-1"
models = ["claude-sonnet-4"]
{keys}
"#
    )
}

fn errors(keys: &str) -> Vec<(String, String)> {
    config::parse(&with_prime(keys), "q.toml", &|_| None)
        .expect_err("config should be rejected")
        .errors
        .into_iter()
        .map(|error| (error.key, error.reason))
        .collect()
}

#[test]
fn prime_at_is_read_once_with_its_zone_and_days() {
    let parsed = config::parse(
        &with_prime("prime_at = \"07:00 Europe/Berlin\"\nprime_days = [\"mon\", \"Wednesday\"]"),
        "q.toml",
        &|_| None,
    )
    .expect("valid");
    let schedule = parsed.connections[0].prime.as_ref().expect("a schedule");
    assert_eq!(schedule.to_string(), "07:00 Europe/Berlin mon,wed");

    // UTC when no zone is named; Monday to Friday when no days are.
    let parsed =
        config::parse(&with_prime("prime_at = \"06:30\""), "q.toml", &|_| None).expect("valid");
    assert_eq!(
        parsed.connections[0]
            .prime
            .as_ref()
            .expect("a schedule")
            .to_string(),
        "06:30 UTC mon,tue,wed,thu,fri"
    );
    // No prime_at: never primed.
    let parsed = config::parse(&with_prime(""), "q.toml", &|_| None).expect("valid");
    assert!(parsed.connections[0].prime.is_none());
}

#[test]
fn a_bad_prime_time_zone_or_day_names_its_key() {
    let found = errors("prime_at = \"7 o'clock\"");
    assert!(
        found
            .iter()
            .any(|(key, reason)| key == "connections[0].prime_at" && reason.contains("HH:MM")),
        "{found:?}"
    );
    let found = errors("prime_at = \"25:00\"");
    assert!(
        found
            .iter()
            .any(|(key, _)| key == "connections[0].prime_at"),
        "{found:?}"
    );
    let found = errors("prime_at = \"07:00 Europe/Berln\"");
    assert!(
        found
            .iter()
            .any(|(key, reason)| key == "connections[0].prime_at"
                && reason.contains("`Europe/Berln` is not a known time zone")),
        "{found:?}"
    );
    // Every bad day in one run, each by its index.
    let found = errors("prime_at = \"07:00\"\nprime_days = [\"mon\", \"fry\", \"someday\"]");
    for (key, day) in [
        ("connections[0].prime_days[1]", "fry"),
        ("connections[0].prime_days[2]", "someday"),
    ] {
        assert!(
            found.iter().any(
                |(k, reason)| k == key && reason.contains(&format!("`{day}` is not a weekday"))
            ),
            "{found:?}"
        );
    }
    let found = errors("prime_at = \"07:00\"\nprime_days = []");
    assert!(
        found
            .iter()
            .any(|(key, reason)| key == "connections[0].prime_days"
                && reason.contains("at least one weekday")),
        "{found:?}"
    );
    let found = errors("prime_days = [\"mon\"]");
    assert!(
        found
            .iter()
            .any(|(key, reason)| key == "connections[0].prime_days"
                && reason.contains("without `prime_at`")),
        "{found:?}"
    );
}
