//! Shared helpers of the replay tests: the incident fixture, importing it into a sled journal,
//! running `replay` in-process, and golden files regenerated with `QR_REGEN_INCIDENT=1`.

#![expect(
    clippy::unwrap_used,
    clippy::panic,
    reason = "test support: failing loudly is the point"
)]

use std::path::{Path, PathBuf};

use quotaroute::replay::{self, ColorChoice, Format, ReplayArgs};

/// 2026-11-29T14:00:00Z: the incident starts here.
pub const T0: u64 = 1_795_960_800_000;

pub fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/incident")
}

pub fn fixture_ndjson() -> PathBuf {
    fixture_dir().join("journal.ndjson")
}

pub fn regenerating() -> bool {
    std::env::var_os("QR_REGEN_INCIDENT").is_some_and(|v| v == "1")
}

/// The fixture imported into a fresh sled journal (batches of 16, like a node's writer).
pub fn incident_journal() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let written =
        replay::source::import_ndjson(&fixture_ndjson(), &dir.path().join("journal"), 16).unwrap();
    assert!(written > 200, "fixture holds {written} events");
    dir
}

pub fn args(journal: &Path) -> ReplayArgs {
    ReplayArgs {
        journal: Some(journal.to_path_buf()),
        format: Format::Text,
        color: ColorChoice::Never,
        ..ReplayArgs::default()
    }
}

/// Runs replay; returns (exit code, stdout, stderr).
pub fn run(args: &ReplayArgs) -> (u8, String, String) {
    let mut out = Vec::new();
    let mut err = Vec::new();
    // "now" is an hour after the incident, so relative times are stable.
    let code = replay::run(args, &mut out, &mut err, T0 + 3_600_000);
    (
        code,
        String::from_utf8(out).unwrap(),
        String::from_utf8(err).unwrap(),
    )
}

/// Compares `actual` with the golden file `name` (or rewrites it when regenerating).
pub fn golden(name: &str, actual: &str) {
    let path = fixture_dir().join(name);
    if regenerating() {
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (regenerate with QR_REGEN_INCIDENT=1)",
            path.display()
        )
    });
    if expected != actual {
        let first = expected
            .lines()
            .zip(actual.lines())
            .position(|(e, a)| e != a)
            .unwrap_or(expected.lines().count().min(actual.lines().count()));
        panic!(
            "{name} differs from the golden file at line {}:\n expected: {:?}\n   actual: {:?}\n(regenerate with QR_REGEN_INCIDENT=1 if the change is intended)",
            first + 1,
            expected.lines().nth(first),
            actual.lines().nth(first)
        );
    }
}
