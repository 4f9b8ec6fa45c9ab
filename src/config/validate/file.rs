//! From TOML text to a validated `Config`: the file split into its sections (each array element on
//! its own, so one bad element hides no other's errors), each section built by its own file, and
//! *all* errors of the file reported in one run.

use std::collections::HashSet;

use crate::config::deserialize::deserialize_collecting;
use crate::config::error::{ConfigErrors, ErrorSink};
use crate::config::model::Config;
use crate::config::raw::{
    field_names, RawCombo, RawConfig, RawConnection, RawDefaults, RawJournal, RawProvider,
    RawServer,
};

use super::affinity::build_affinity;
use super::checks::usable_in_key;
use super::combos::build_combos;
use super::connections::build_connections;
use super::defaults::build_defaults;
use super::journal::build_journal;
use super::providers::build_providers;
use super::server::build_server;
use super::translation::{build_responses, build_translation};

/// Parses and validates config text. `file_label` names the file in errors; `env` looks up
/// `api_key_env` variables (injectable so tests never touch the process environment).
pub fn parse(
    text: &str,
    file_label: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Config, ConfigErrors> {
    let mut sink = ErrorSink::new(file_label);
    let table: toml::Table = match toml::from_str(text) {
        Ok(table) => table,
        Err(error) => {
            sink.push(syntax_error_position(text, &error), error.message().trim());
            return Err(sink.into_errors());
        }
    };
    let raw = split_sections(table, &mut sink);
    let config = build(raw, &mut sink, env);
    sink.finish()?;
    Ok(config)
}

/// `line L, column C` of a syntax error (never the source line itself: it may hold a key).
fn syntax_error_position(text: &str, error: &toml::de::Error) -> String {
    let Some(offset) = error.span().map(|span| span.start) else {
        return String::new();
    };
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let column = before
        .rsplit('\n')
        .next()
        .map_or(1, |line_text| line_text.chars().count() + 1);
    format!("line {line}, column {column}")
}

/// The raw file with array elements kept in place (`None` where an element was not a table) so
/// error keys keep their indexes.
struct RawSections {
    server: RawServer,
    journal: RawJournal,
    defaults: RawDefaults,
    providers: Vec<Option<RawProvider>>,
    connections: Vec<Option<RawConnection>>,
    combos: Vec<Option<RawCombo>>,
    cluster: Option<crate::cluster::config::RawCluster>,
    telemetry: Option<crate::config::raw::RawTelemetry>,
    affinity: crate::config::raw::RawAffinity,
    translation: crate::config::raw::RawTranslation,
    responses: crate::config::raw::RawResponses,
    clients: Vec<Option<crate::config::raw::RawClient>>,
    prices: Vec<Option<crate::config::raw::RawPrice>>,
    prices_file: Option<String>,
}

fn split_sections(table: toml::Table, sink: &mut ErrorSink) -> RawSections {
    let mut sections = RawSections {
        server: RawServer::default(),
        journal: RawJournal::default(),
        defaults: RawDefaults::default(),
        providers: Vec::new(),
        connections: Vec::new(),
        combos: Vec::new(),
        cluster: None,
        telemetry: None,
        affinity: Default::default(),
        translation: Default::default(),
        responses: Default::default(),
        clients: Vec::new(),
        prices: Vec::new(),
        prices_file: None,
    };
    for (key, value) in table {
        match key.as_str() {
            "server" => {
                sections.server = deserialize_collecting(value, "server", sink).unwrap_or_default();
            }
            "journal" => {
                sections.journal =
                    deserialize_collecting(value, "journal", sink).unwrap_or_default();
            }
            "defaults" => {
                sections.defaults =
                    deserialize_collecting(value, "defaults", sink).unwrap_or_default();
            }
            "affinity" => {
                sections.affinity =
                    deserialize_collecting(value, "affinity", sink).unwrap_or_default();
            }
            "translation" => {
                sections.translation =
                    deserialize_collecting(value, "translation", sink).unwrap_or_default();
            }
            "responses" => {
                sections.responses =
                    deserialize_collecting(value, "responses", sink).unwrap_or_default();
            }
            "cluster" => {
                sections.cluster =
                    Some(deserialize_collecting(value, "cluster", sink).unwrap_or_default());
            }
            "telemetry" => {
                sections.telemetry =
                    Some(deserialize_collecting(value, "telemetry", sink).unwrap_or_default());
            }
            "providers" => sections.providers = elements(value, "providers", sink, |_| None),
            "connections" => sections.connections = elements(value, "connections", sink, |_| None),
            "clients" => sections.clients = elements(value, "clients", sink, |_| None),
            "prices" => sections.prices = elements(value, "prices", sink, |_| None),
            "prices_file" => match value {
                toml::Value::String(path) if !path.is_empty() => sections.prices_file = Some(path),
                _ => sink.push("prices_file", "must be a file path (a non-empty string)"),
            },
            "combos" => {
                sections.combos = elements(value, "combos", sink, |element| {
                    element
                        .get("name")
                        .and_then(toml::Value::as_str)
                        .filter(|name| usable_in_key(name))
                        .map(|name| format!("combos.{name}"))
                });
            }
            _ => sink.push(key, unknown_key_reason(field_names::<RawConfig>())),
        }
    }
    sections
}

/// Deserializes each element of an array of tables on its own, so one bad element does not hide
/// the others' errors. `label` may name an element (`combos.team`) instead of `combos[1]`.
fn elements<T: serde::de::DeserializeOwned>(
    value: toml::Value,
    section: &str,
    sink: &mut ErrorSink,
    label: impl Fn(&toml::Value) -> Option<String>,
) -> Vec<Option<T>> {
    let toml::Value::Array(items) = value else {
        sink.push(
            section,
            "must be an array of tables ([[".to_owned() + section + "]])",
        );
        return Vec::new();
    };
    items
        .into_iter()
        .enumerate()
        .map(|(index, item)| {
            let prefix = label(&item).unwrap_or_else(|| format!("{section}[{index}]"));
            deserialize_collecting(item, &prefix, sink)
        })
        .collect()
}

fn unknown_key_reason(expected: &[&str]) -> String {
    let names = expected
        .iter()
        .map(|name| format!("`{name}`"))
        .collect::<Vec<_>>()
        .join(", ");
    format!("unknown key; expected one of {names}")
}

fn build(raw: RawSections, sink: &mut ErrorSink, env: &dyn Fn(&str) -> Option<String>) -> Config {
    let server = build_server(raw.server, sink, env);
    let journal = build_journal(raw.journal, sink);
    let defaults = build_defaults(raw.defaults, sink);
    let providers = build_providers(raw.providers, sink);
    // Ids of connections written in the file, valid or not: a combo naming one that has errors
    // of its own is not told the connection is unknown as well.
    let declared: HashSet<String> = raw
        .connections
        .iter()
        .flatten()
        .filter_map(|connection| connection.id.clone())
        .collect();
    let connections = build_connections(raw.connections, &providers, sink, env);
    let combos = build_combos(raw.combos, &connections, &declared, sink);
    let cluster = raw.cluster.map(|cluster| {
        crate::cluster::config::build(cluster, &mut |key, reason| sink.push(key, reason))
    });
    let telemetry = raw
        .telemetry
        .and_then(|telemetry| crate::config::telemetry::build(telemetry, sink));
    let affinity = build_affinity(raw.affinity, sink);
    let translation = build_translation(raw.translation, sink);
    let responses = build_responses(raw.responses, sink);
    let clients = crate::config::clients::build_clients(
        &server.api_keys,
        server.admin_key.as_ref(),
        raw.clients,
        sink,
        env,
    );
    let prices = crate::config::clients::build_prices(raw.prices_file, raw.prices, sink);
    Config {
        clients,
        prices,
        affinity,
        translation,
        responses,
        server,
        journal,
        defaults,
        providers: providers.into_iter().flatten().collect(),
        connections: connections.into_iter().flatten().collect(),
        combos,
        cluster,
        telemetry,
        source_path: None,
    }
}
