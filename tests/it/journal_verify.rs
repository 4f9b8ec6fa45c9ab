//! `quotaroute journal verify PATH [--json]` (behaviour §12): versions, counts, damage, what a
//! newer build wrote and the state a node would rebuild, read from a release fixture and from
//! a damaged journal — and the journal directory is byte for byte what it was.

#![expect(
    clippy::unwrap_used,
    reason = "test code: a failed step fails the test loudly"
)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use quotaroute_actors::snapshot::STATE_LAYOUT;
use quotaroute_journal::{Journal, SledJournal, SledOptions};
use serde_json::Value;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("journal/tests/fixtures/releases")
        .join(name)
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

/// Every file under `dir` with its length and crc32.
fn digest(dir: &Path) -> BTreeMap<PathBuf, (usize, u32)> {
    let mut files = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(at) = stack.pop() {
        for entry in std::fs::read_dir(&at).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let bytes = std::fs::read(&path).unwrap();
                files.insert(path, (bytes.len(), crc32fast::hash(&bytes)));
            }
        }
    }
    files
}

fn verify(path: &Path, json: bool) -> (Option<i32>, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_quotaroute"));
    command.args(["journal", "verify"]).arg(path);
    if json {
        command.arg("--json");
    }
    let output = command.output().unwrap();
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
    )
}

#[test]
fn verify_reports_a_release_journal_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&fixture("v1-94a0268/journal"), dir.path());
    let recorded: Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("v1-94a0268/state.json")).unwrap())
            .unwrap();
    let before = digest(dir.path());

    let (code, stdout) = verify(dir.path(), true);
    assert_eq!(code, Some(0), "{stdout}");
    let report: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["formats_file"], Value::Null, "94a0268 wrote none");
    assert_eq!(
        report["this_build"]["state_layout"],
        u32::from(STATE_LAYOUT)
    );
    assert_eq!(report["snapshots"][0]["format"], 1);
    assert_eq!(report["snapshots"][0]["state_layout"], Value::Null);
    assert_eq!(report["snapshots"][0]["status"], "ok");
    assert_eq!(report["snapshot_used"], recorded["snapshot_seq"]);
    assert_eq!(report["events_replayed"], recorded["events_replayed"]);
    assert_eq!(report["events"], recorded["events_replayed"]);
    assert_eq!(report["event_schemas"]["1"], recorded["events_replayed"]);
    assert_eq!(report["damaged"], serde_json::json!([]));
    assert_eq!(report["newer"], serde_json::json!([]));
    let oa2 = report["state"]["connections"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "oa-2")
        .unwrap();
    assert_eq!(
        oa2["disabled"]["reason"], "auth",
        "the snapshot's state is rebuilt"
    );

    let (code, text) = verify(dir.path(), false);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("state layout unrecorded: ok"), "{text}");
    assert!(text.contains("damaged records: 0"), "{text}");
    assert!(text.contains("newer than this build: nothing"), "{text}");
    assert_eq!(digest(dir.path()), before, "verify changed the journal");
}

#[test]
fn verify_names_damaged_records_and_what_a_newer_build_wrote() {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&fixture("v2-0447244/journal"), dir.path());
    {
        let mut journal = SledJournal::open(dir.path(), SledOptions::default()).unwrap();
        journal
            .put_raw("events", &1_000u64.to_be_bytes(), b"\x01torn record")
            .unwrap();
        journal
            .put_snapshot(2_000, 1, STATE_LAYOUT + 1, b"a layout from the future")
            .unwrap();
        journal.flush().unwrap();
    }
    std::thread::sleep(std::time::Duration::from_millis(200));
    let before = digest(dir.path());
    let (code, stdout) = verify(dir.path(), true);
    assert_eq!(code, Some(1), "{stdout}");
    let report: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["damaged"].as_array().unwrap().len(), 1, "{report}");
    assert_eq!(report["damaged"][0]["seq"], 1_000);
    assert_eq!(report["snapshots"][0]["status"], "newer", "{report}");
    let newer = report["newer"][0].as_str().unwrap();
    let expected = format!(
        "snapshot state layout version {} is newer than this build's {STATE_LAYOUT}",
        STATE_LAYOUT + 1
    );
    assert!(newer.contains(&expected), "{newer}");
    // The state still comes from the release's own snapshot, the one this build reads.
    assert_eq!(report["snapshots"][1]["status"], "ok");
    assert_eq!(report["snapshot_used"], report["snapshots"][1]["seq"]);
    assert_eq!(digest(dir.path()), before, "verify changed the journal");
}
