//! Behaviour §12: every release's journal decodes in this build. Each directory of
//! `journal/tests/fixtures/releases/` is a real sled journal one release wrote (a snapshot and
//! the records after it; the records the snapshot covers pruned) with `state.json`, the state
//! that release rebuilt from it at `at_ms`. This build must rebuild the same, field by field.

#![expect(
    clippy::unwrap_used,
    reason = "test code: a failed step fails the test loudly"
)]

use std::path::{Path, PathBuf};

use quotaroute_actors::snapshot::STATE_LAYOUT;
use quotaroute_journal::{SledJournal, SledOptions};
use serde_json::Value;

fn releases_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("journal/tests/fixtures/releases")
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// `/admin/state` fields renamed since a release: a lock's upstream code string was
/// `error_code` until the lock's HTTP status took that name (0447244).
fn as_today(mut recorded: Value) -> Value {
    if let Some(connections) = recorded["connections"].as_array_mut() {
        for connection in connections {
            if let Some(locks) = connection["lockouts"].as_array_mut() {
                for lock in locks {
                    if lock.get("upstream_code").is_none() {
                        if let Some(map) = lock.as_object_mut() {
                            let code = map.remove("error_code").unwrap_or(Value::Null);
                            map.insert("upstream_code".into(), code);
                        }
                    }
                }
            }
        }
    }
    recorded
}

/// Every leaf of `expected` compared with the same path in `actual`; returns the differences
/// and how many leaves were compared. Fields only `actual` has (added since) are not compared.
fn compare(path: &str, expected: &Value, actual: &Value, diffs: &mut Vec<String>) -> usize {
    match (expected, actual) {
        (Value::Object(e), Value::Object(a)) => e
            .iter()
            .map(|(key, value)| {
                compare(
                    &format!("{path}.{key}"),
                    value,
                    a.get(key).unwrap_or(&Value::Null),
                    diffs,
                )
            })
            .sum(),
        (Value::Array(e), Value::Array(a)) => {
            if e.len() != a.len() {
                diffs.push(format!("{path}: {} items, rebuilt {}", e.len(), a.len()));
            }
            e.iter()
                .zip(a)
                .enumerate()
                .map(|(i, (e, a))| compare(&format!("{path}[{i}]"), e, a, diffs))
                .sum()
        }
        _ => {
            if expected != actual {
                diffs.push(format!("{path}: recorded {expected}, rebuilt {actual}"));
            }
            1
        }
    }
}

#[test]
fn every_release_fixture_rebuilds_its_recorded_state_field_by_field() {
    let mut names: Vec<String> = std::fs::read_dir(releases_dir())
        .unwrap()
        .map(|entry| entry.unwrap())
        .filter(|entry| entry.file_type().unwrap().is_dir())
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    for layout in 1..=STATE_LAYOUT {
        assert!(
            names
                .iter()
                .any(|name| name.starts_with(&format!("v{layout}-"))),
            "no release fixture of snapshot layout {layout} in {names:?}"
        );
    }
    for name in &names {
        let fixture = releases_dir().join(name);
        let recorded: Value =
            serde_json::from_str(&std::fs::read_to_string(fixture.join("state.json")).unwrap())
                .unwrap();
        // Opened as a copy: sled may tidy its files on open, and the fixture stays as written.
        let scratch = tempfile::tempdir().unwrap();
        copy_dir(&fixture.join("journal"), scratch.path());
        let journal = SledJournal::open(scratch.path(), SledOptions::default()).unwrap();
        let (state, report) = quotaroute_actors::recover_state(&journal);
        assert!(report.damaged.is_empty(), "{name}: {:?}", report.damaged);
        assert_eq!(
            report.snapshot_seq,
            recorded["snapshot_seq"].as_u64(),
            "{name}: the release's snapshot is the one used"
        );
        assert_eq!(
            Some(report.events_replayed),
            recorded["events_replayed"].as_u64(),
            "{name}"
        );
        assert_eq!(
            Some(report.last_seq),
            recorded["last_seq"].as_u64(),
            "{name}"
        );
        let at_ms = recorded["at_ms"].as_u64().unwrap();
        let rebuilt =
            serde_json::to_value(quotaroute::replay::state_at::view(&state, at_ms)).unwrap();
        let mut diffs = Vec::new();
        let compared = compare(
            "state",
            &as_today(recorded["state"].clone()),
            &rebuilt,
            &mut diffs,
        );
        assert!(
            diffs.is_empty(),
            "{name}: {} fields differ:\n{}",
            diffs.len(),
            diffs.join("\n")
        );
        assert!(compared > 100, "{name}: only {compared} fields compared");
        // What /admin/state does not show: the response bindings.
        let responses = recorded["responses"]
            .as_object()
            .cloned()
            .unwrap_or_default();
        for (id, binding) in &responses {
            let rebuilt = state.responses.get(id, at_ms).map(|b| {
                let mut value = serde_json::to_value(b).unwrap();
                // Layout 5 on: the binding's client, recorded beside it.
                if binding.get("client").is_some() {
                    value["client"] = serde_json::json!(b.client);
                }
                value
            });
            assert_eq!(rebuilt.as_ref(), Some(binding), "{name}: response {id}");
        }
    }
}
