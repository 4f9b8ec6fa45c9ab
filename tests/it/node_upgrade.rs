//! Behaviour §12 with the real binary: a journal written by a newer build is refused (exit 1,
//! both versions named, the way back given) and left byte for byte as it was; an upgrade
//! under load — snapshot, records pruned, stop, start — keeps `/admin/state` exactly.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use crate::support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use quotaroute::mock_upstream::{Fault, MockUpstream, Rule};
use quotaroute_actors::snapshot::STATE_LAYOUT;
use quotaroute_journal::{Formats, Journal, SledJournal, SledOptions, FORMATS_FILE};
use support::*;

fn spawn_node(config: &Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_quotaroute"))
        .args(["serve", "--config"])
        .arg(config)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

fn sigterm_and_wait(node: &mut Child) {
    let status = Command::new("kill")
        .args(["-TERM", &node.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(status) = node.try_wait().unwrap() {
            assert!(status.success(), "{status:?}");
            return;
        }
        assert!(Instant::now() < deadline, "still running after SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Every file under `dir`, by relative path, with its length and crc32.
fn contents(dir: &Path) -> BTreeMap<PathBuf, (usize, u32)> {
    fn walk(root: &Path, dir: &Path, into: &mut BTreeMap<PathBuf, (usize, u32)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(root, &path, into);
            } else {
                let bytes = std::fs::read(&path).unwrap();
                into.insert(
                    path.strip_prefix(root).unwrap().to_path_buf(),
                    (bytes.len(), crc32fast::hash(&bytes)),
                );
            }
        }
    }
    let mut files = BTreeMap::new();
    walk(dir, dir, &mut files);
    files
}

/// Opens a journal a stopped node has just let go of.
fn open_released(path: &Path) -> SledJournal {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match SledJournal::open(path, SledOptions::default()) {
            Ok(journal) => return journal,
            Err(error) => {
                assert!(Instant::now() < deadline, "{error}");
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}

struct Node {
    mock: MockUpstream,
    dir: tempfile::TempDir,
    config: PathBuf,
    journal: PathBuf,
    base: String,
    client: reqwest::Client,
}

/// `standard_config` plus `extra` on a free port; not started.
async fn prepare(extra: &str) -> Node {
    let (mock_base, mock) = start_mock().await;
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("journal");
    let port = free_port();
    let text = standard_config(&mock_base, &journal, extra).replace(
        "listen = \"127.0.0.1:0\"",
        &format!("listen = \"127.0.0.1:{port}\""),
    );
    let config = dir.path().join("quotaroute.toml");
    std::fs::write(&config, text).unwrap();
    Node {
        mock,
        dir,
        config,
        journal,
        base: format!("http://127.0.0.1:{port}"),
        client: reqwest::Client::new(),
    }
}

/// `serve` run to its end: exit code and stderr.
fn serve_once(config: &Path) -> (Option<i32>, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_quotaroute"))
        .args(["serve", "--config"])
        .arg(config)
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_journal_from_a_newer_build_is_refused_and_left_byte_for_byte() {
    let node = prepare("").await;
    let mut child = spawn_node(&node.config);
    wait_ready(&node.client, &node.base).await;
    assert_eq!(chat(&node.client, &node.base, "team").await.status(), 200);
    sigterm_and_wait(&mut child);
    let recorded = Formats::read(&node.journal).unwrap().expect("formats recorded");
    assert_eq!(recorded.state_layout, u32::from(STATE_LAYOUT));

    // What a newer build leaves: its formats file, and a snapshot of a layout this one lacks.
    let newer_layout = STATE_LAYOUT + 1;
    {
        let mut journal = open_released(&node.journal);
        let last = journal.last_seq().unwrap().unwrap();
        journal
            .put_snapshot(last, 1_800_000_000_000, newer_layout, b"from the future")
            .unwrap();
        journal.flush().unwrap();
    }
    Formats {
        state_layout: u32::from(newer_layout),
        written_by: "quotaroute 9.9.9".into(),
        ..recorded.clone()
    }
    .write(&node.journal)
    .unwrap();
    std::thread::sleep(Duration::from_millis(200)); // sled lets go of its lock
    let before = contents(&node.journal);

    let (code, stderr) = serve_once(&node.config);
    assert_eq!(code, Some(1), "{stderr}");
    let versions = format!("snapshot state layout {newer_layout}, this build reads up to {STATE_LAYOUT}");
    assert!(stderr.contains(&versions), "{stderr}");
    assert!(stderr.contains("Upgrading and rolling back"), "{stderr}");
    assert!(stderr.contains("nothing was changed"), "{stderr}");
    assert!(stderr.contains(&node.journal.display().to_string()), "{stderr}");
    assert_eq!(contents(&node.journal), before, "the journal directory is unchanged");

    // Without the formats file (deleted by hand), the newer snapshot itself is refused: its
    // checksum holds, so it is not damage to skip. sled has opened the directory by then (and
    // may tidy its own files), but nothing of this build is written: every record and snapshot
    // stays as it was, and no formats file appears.
    std::fs::remove_file(node.journal.join(FORMATS_FILE)).unwrap();
    let entries = open_released(&node.journal).raw_entries();
    std::thread::sleep(Duration::from_millis(200));
    let (code, stderr) = serve_once(&node.config);
    assert_eq!(code, Some(1), "{stderr}");
    let versions =
        format!("snapshot state layout version {newer_layout} is newer than this build's {STATE_LAYOUT}");
    assert!(stderr.contains(&versions), "{stderr}");
    assert!(stderr.contains("Upgrading and rolling back"), "{stderr}");
    assert!(!node.journal.join(FORMATS_FILE).exists());
    assert_eq!(open_released(&node.journal).raw_entries(), entries);
    drop(node.mock);
    drop(node.dir);
}
