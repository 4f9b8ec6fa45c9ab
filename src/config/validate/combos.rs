//! `[[combos]]`: names, strategies and targets, each naming a known connection.

use std::collections::{BTreeMap, HashMap, HashSet};

use quotaroute_actors::policy::exec_key::exec_key;

use crate::config::error::ErrorSink;
use crate::config::model::{ComboConfig, ConnectionConfig, Strategy, TargetConfig};
use crate::config::raw::{RawCombo, RawComboPacing, RawTarget};

use super::checks::{at_least_one_u32, check_unique, one_of, required_name, usable_in_key};

pub(super) fn build_combos(
    raw: Vec<Option<RawCombo>>,
    connections: &[Option<ConnectionConfig>],
    declared: &HashSet<String>,
    sink: &mut ErrorSink,
) -> Vec<ComboConfig> {
    let connections_by_id: BTreeMap<&str, &ConnectionConfig> = connections
        .iter()
        .flatten()
        .map(|connection| (connection.id.as_str(), connection))
        .collect();
    let mut seen = HashMap::new();
    let mut combos = Vec::new();
    for (index, combo) in raw.into_iter().enumerate() {
        let Some(combo) = combo else { continue };
        let prefix = match combo.name.as_deref() {
            Some(name) if usable_in_key(name) => format!("combos.{name}"),
            _ => format!("combos[{index}]"),
        };
        let name_key = format!("combos[{index}].name");
        let name = required_name(combo.name, &name_key, sink);
        let unique = name
            .as_deref()
            .is_some_and(|name| check_unique(name, &name_key, "combo name", &mut seen, sink));
        let strategy = combo
            .strategy
            .map(|strategy| {
                one_of(
                    &strategy,
                    &[
                        ("quota-share", Strategy::QuotaShare),
                        ("priority", Strategy::Priority),
                        ("round-robin", Strategy::RoundRobin),
                        ("weighted", Strategy::Weighted),
                    ],
                    &format!("{prefix}.strategy"),
                    sink,
                )
            })
            .unwrap_or(Some(Strategy::QuotaShare));
        if combo.max_attempts == Some(0) {
            sink.push(format!("{prefix}.max_attempts"), "must be at least 1");
        }
        let targets = build_targets(combo.targets, &prefix, &connections_by_id, declared, sink);
        let (pacing, pacing_table) = match combo.pacing {
            None => (true, None),
            Some(RawComboPacing::Switch(on)) => (on, None),
            Some(RawComboPacing::Table(table)) => {
                // Checked here, merged over the defaults when the topology is built.
                let _ = crate::config::pacing::build_over(
                    Some(table.clone()),
                    &quotaroute_actors::policy::pace::PacingSettings::default(),
                    &format!("{prefix}.pacing"),
                    sink,
                );
                (true, Some(table))
            }
        };
        let (Some(name), Some(strategy), Some(targets)) = (name, strategy, targets) else {
            continue;
        };
        if unique {
            combos.push(ComboConfig {
                name,
                strategy,
                max_attempts: combo.max_attempts.filter(|attempts| *attempts > 0),
                hold_ms: combo.hold_ms.unwrap_or(0),
                queue_ms: combo.queue_ms.unwrap_or(0),
                pacing,
                pacing_table,
                translate: combo.translate.unwrap_or(true),
                targets,
            });
        }
    }
    combos
}

fn build_targets(
    raw: Option<Vec<RawTarget>>,
    prefix: &str,
    connections_by_id: &BTreeMap<&str, &ConnectionConfig>,
    declared: &HashSet<String>,
    sink: &mut ErrorSink,
) -> Option<Vec<TargetConfig>> {
    let Some(raw) = raw else {
        sink.push(
            format!("{prefix}.targets"),
            "missing (required): at least one target",
        );
        return None;
    };
    if raw.is_empty() {
        sink.push(format!("{prefix}.targets"), "must list at least one target");
        return None;
    }
    let mut targets = Vec::new();
    let mut seen = HashMap::new();
    let errors_before = sink.len();
    let mut invalid_reference = false;
    for (index, target) in raw.into_iter().enumerate() {
        let key = format!("{prefix}.targets[{index}]");
        let connection = match target.connection {
            None => {
                sink.push(format!("{key}.connection"), "missing (required)");
                None
            }
            Some(id) => match connections_by_id.get(id.as_str()) {
                Some(connection) => Some(*connection),
                // Declared but invalid: its own errors already say so.
                None if declared.contains(&id) => {
                    invalid_reference = true;
                    None
                }
                None => {
                    sink.push(
                        format!("{key}.connection"),
                        format!("unknown connection `{id}` (no valid [[connections]] entry has this id)"),
                    );
                    None
                }
            },
        };
        let model = match target.model {
            None => {
                sink.push(format!("{key}.model"), "missing (required)");
                None
            }
            Some(model) if model.is_empty() => {
                sink.push(format!("{key}.model"), "must not be empty");
                None
            }
            Some(model) => Some(model),
        };
        let weight = at_least_one_u32(target.weight, 1, &format!("{key}.weight"), sink);
        let (Some(connection), Some(model)) = (connection, model) else {
            continue;
        };
        if let Some(models) = &connection.models {
            if !models.contains(&model) {
                sink.push(
                    format!("{key}.model"),
                    format!(
                        "connection `{}` does not serve `{model}` (its models: {})",
                        connection.id,
                        models.join(", ")
                    ),
                );
                continue;
            }
        }
        let execution_key = exec_key(&connection.id, &model);
        if !check_unique(&execution_key, &key, "target", &mut seen, sink) {
            continue;
        }
        targets.push(TargetConfig {
            connection: connection.id.clone(),
            model,
            weight,
        });
    }
    (sink.len() == errors_before && !invalid_reference).then_some(targets)
}
