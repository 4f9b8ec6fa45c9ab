//! The demo's embedded config: two simulated providers in front of the mock upstream, with
//! breaker and cooldown numbers small enough that the whole story fits in a short run.
//! Owns only the text and the names in it; starts nothing and reads no environment.

use std::path::Path;

/// The key the demo's own clients present to the node.
pub const CLIENT_KEY: &str = "sk-qr-demo-client";
/// The key of the demo's spare client (`class = "spare"`, behaviour §13): batch work that
/// may use only quota the windows are forecast to lose at their resets.
pub const SPARE_KEY: &str = "sk-qr-demo-spare-batch";
/// The spare client's id.
pub const SPARE_CLIENT: &str = "batch";
/// The node's admin key while the demo runs (printed, so `/admin/state` can be tried by hand).
pub const ADMIN_KEY: &str = "qr-demo-admin";

/// The OpenAI-format provider: three keys weighted 2:1:1, two models.
pub const OPENAI: &str = "openai";
/// The Anthropic-format provider: three keys, one model, the one that flaps.
pub const ANTHROPIC: &str = "anthropic";
/// The Gemini provider (`format = "gemini"`, behaviour §15): two free-tier keys, one of which
/// spends its day's quota.
pub const GOOGLE: &str = "google";

/// Combo of `gpt-4o-mini` over the three OpenAI keys (2:1:1).
pub const COMBO_MINI: &str = "team";
/// Combo of `gpt-4o` over the same three keys (2:1:1).
pub const COMBO_4O: &str = "team-4o";
/// Combo of `claude-3-5-haiku` over the three Anthropic keys.
pub const COMBO_CLAUDE: &str = "claude";
/// Combo of `gemini-2.5-flash` over the two Gemini keys, asked on Google's own paths.
pub const COMBO_GEMINI: &str = "gemini";

pub const MODEL_MINI: &str = "gpt-4o-mini";
pub const MODEL_4O: &str = "gpt-4o";
pub const MODEL_CLAUDE: &str = "claude-3-5-haiku";
pub const MODEL_GEMINI: &str = "gemini-2.5-flash";

/// One simulated upstream account.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DemoConnection {
    pub id: &'static str,
    pub provider: &'static str,
    pub weight: u32,
}

/// Every connection of the demo, in table order.
pub const CONNECTIONS: [DemoConnection; 8] = [
    DemoConnection {
        id: "oa-1",
        provider: OPENAI,
        weight: 2,
    },
    DemoConnection {
        id: "oa-2",
        provider: OPENAI,
        weight: 1,
    },
    DemoConnection {
        id: "oa-3",
        provider: OPENAI,
        weight: 1,
    },
    DemoConnection {
        id: "an-1",
        provider: ANTHROPIC,
        weight: 1,
    },
    DemoConnection {
        id: "an-2",
        provider: ANTHROPIC,
        weight: 1,
    },
    DemoConnection {
        id: "an-3",
        provider: ANTHROPIC,
        weight: 1,
    },
    DemoConnection {
        id: "gm-1",
        provider: GOOGLE,
        weight: 1,
    },
    DemoConnection {
        id: "gm-2",
        provider: GOOGLE,
        weight: 1,
    },
];

/// The connection whose 5-hour window the demo primes (behaviour §13), a moment after start.
pub const PRIMED: &str = "oa-3";

/// `text` with [`PRIMED`]'s `prime_at` set to the whole second at or after `at_ms` (UTC), on
/// every day, so the run shows one primed window whatever the day.
pub fn with_prime_at(text: &str, at_ms: u64) -> String {
    let second_of_day = at_ms.div_ceil(1_000) % 86_400;
    text.replacen(
        &format!("id = \"{PRIMED}\"\n"),
        &format!(
            "id = \"{PRIMED}\"\nprime_at = \"{:02}:{:02}:{:02}\"\nprime_days = [\"mon\", \"tue\", \"wed\", \"thu\", \"fri\", \"sat\", \"sun\"]\n",
            second_of_day / 3_600,
            second_of_day / 60 % 60,
            second_of_day % 60
        ),
        1,
    )
}

/// The fake upstream key of a connection; the mock tells keys apart by it.
pub fn upstream_key(connection: &str) -> String {
    format!("sk-mock-{connection}-demo-0000000000")
}

/// The config text for a mock upstream at `mock_base` (`http://127.0.0.1:PORT`) and a journal
/// at `journal`.
///
/// The Anthropic provider's breaker opens after 5 counted failures (dedup 10 ms, so a burst on
/// three keys trips it within a second) and allows a probe after 2 s; its connections cool for
/// 0.25–1 s, short enough that they keep failing (and counting) while the burst lasts. The OpenAI provider keeps the spec's defaults: its story is the 429 lockout.
pub fn config_text(mock_base: &str, journal: &Path) -> String {
    let journal = toml::Value::String(journal.display().to_string());
    let mut text = format!(
        r#"# quotaroute demo: simulated upstream accounts (the built-in mock), no keys, no network.
[server]
api_keys = ["{CLIENT_KEY}"]
admin_key = "{ADMIN_KEY}"
request_timeout_ms = 10000
first_token_timeout_ms = 5000
shutdown_grace_ms = 2000

[journal]
path = {journal}
flush_every_ms = 20

[[providers]]
name = "{OPENAI}"
format = "openai"
base_url = "{mock_base}/v1"

[[providers]]
name = "{ANTHROPIC}"
format = "anthropic"
base_url = "{mock_base}/v1"

[providers.breaker]
dedup_ms = 10
degrade_at = 3
open_at = 5
reset_ms = 2000

[providers.cooldown]
base_ms = 250
max_ms = 1000

[[providers]]
name = "{GOOGLE}"
format = "gemini"
base_url = "{mock_base}/v1beta"
"#
    );
    for connection in CONNECTIONS {
        text.push_str(&format!(
            "\n[[connections]]\nid = \"{}\"\nprovider = \"{}\"\napi_key = \"{}\"\nweight = {}\n",
            connection.id,
            connection.provider,
            upstream_key(connection.id),
            connection.weight
        ));
    }
    for (combo, provider, model) in [
        (COMBO_MINI, OPENAI, MODEL_MINI),
        (COMBO_4O, OPENAI, MODEL_4O),
        (COMBO_CLAUDE, ANTHROPIC, MODEL_CLAUDE),
        (COMBO_GEMINI, GOOGLE, MODEL_GEMINI),
    ] {
        text.push_str(&format!("\n[[combos]]\nname = \"{combo}\"\ntargets = [\n"));
        for connection in CONNECTIONS.iter().filter(|c| c.provider == provider) {
            text.push_str(&format!(
                "  {{ connection = \"{}\", model = \"{model}\", weight = {} }},\n",
                connection.id, connection.weight
            ));
        }
        text.push_str("]\n");
    }
    text.push_str(&format!(
        "\n[[clients]]\nid = \"{SPARE_CLIENT}\"\nkey = \"{SPARE_KEY}\"\nclass = \"spare\"\n"
    ));
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_config_is_valid_and_names_every_connection() {
        let text = config_text(
            "http://127.0.0.1:9",
            Path::new("/tmp/qr demo \"x\"/journal"),
        );
        let config = crate::config::parse(&text, "embedded", &|_| None)
            .unwrap_or_else(|errors| panic!("{errors}\n{text}"));
        assert_eq!(config.connections.len(), 8);
        // 2026-12-05T07:00:00.250Z: primed at 07:00:01.
        let primed = crate::config::parse(
            &with_prime_at(&text, 1_796_454_000_250),
            "embedded",
            &|_| None,
        )
        .unwrap_or_else(|errors| panic!("{errors}"));
        let schedule = primed.connections[2]
            .prime
            .as_ref()
            .map(ToString::to_string);
        assert_eq!(
            schedule.as_deref(),
            Some("07:00 UTC mon,tue,wed,thu,fri,sat,sun")
        );
        assert_eq!(config.combos.len(), 4);
        let spare = config
            .clients
            .iter()
            .find(|c| c.id == SPARE_CLIENT)
            .unwrap();
        assert_eq!(spare.class, crate::clients::class::RequestClass::Spare);
        assert_eq!(
            config.journal.path,
            Path::new("/tmp/qr demo \"x\"/journal").to_path_buf()
        );
    }
}
