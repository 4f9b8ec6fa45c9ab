//! `quotaroute journal verify PATH [--json]`: reads every record and snapshot of a sled journal
//! and reports the versions they carry, how many there are, what is damaged, what a newer build
//! wrote, and the state a node would rebuild from it — changing nothing. sled may tidy its own
//! files when it opens a directory, so the journal is read from a copy in a temporary
//! directory; the formats file is read in place (reading never writes).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use quotaroute_journal::{Formats, Journal, SledJournal, SledOptions};
use serde::Serialize;

use crate::node::journal_formats;
use crate::replay::state_at::{self, StateAt};

/// Why a journal could not be verified at all.
#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    #[error("no journal at {0}")]
    Missing(PathBuf),
    #[error("cannot copy {path} to read it: {reason}")]
    Copy { path: PathBuf, reason: String },
    #[error("cannot open {path}: {reason}")]
    Open { path: PathBuf, reason: String },
}

/// One stored snapshot, as read.
#[derive(Debug, Clone, Serialize)]
pub struct SnapshotReport {
    pub seq: u64,
    pub at_ms: Option<u64>,
    pub format: Option<u8>,
    /// `None`: snapshot format 1, which did not record it.
    pub state_layout: Option<u16>,
    /// `ok`, `newer` or `damaged`.
    pub status: &'static str,
    pub reason: Option<String>,
}

/// A record or snapshot that could not be read.
#[derive(Debug, Clone, Serialize)]
pub struct DamageReport {
    pub seq: u64,
    pub reason: String,
}

/// Everything `verify` found.
#[derive(Debug, Clone, Serialize)]
pub struct VerifyReport {
    pub path: String,
    /// The journal's formats file (`None`: written before it existed, or never by a node).
    pub formats_file: Option<Formats>,
    pub this_build: Formats,
    pub events: u64,
    pub first_seq: Option<u64>,
    pub last_seq: Option<u64>,
    /// Events by `schema_version`.
    pub event_schemas: BTreeMap<u16, u64>,
    pub snapshots: Vec<SnapshotReport>,
    /// Damaged records (snapshots say theirs in `snapshots`).
    pub damaged: Vec<DamageReport>,
    /// Versions newer than this build's, from the formats file or inside the journal.
    pub newer: Vec<String>,
    /// What a node of this build starts from: a snapshot's seq and the events after it.
    pub snapshot_used: Option<u64>,
    pub events_replayed: u64,
    pub state: StateAt,
}

impl VerifyReport {
    /// 0 when everything is readable by this build, 1 otherwise.
    pub fn exit_code(&self) -> u8 {
        let snapshots_ok = self.snapshots.iter().all(|s| s.status == "ok");
        if self.damaged.is_empty() && self.newer.is_empty() && snapshots_ok {
            0
        } else {
            1
        }
    }
}

fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), target)?;
        }
    }
    Ok(())
}

/// Verifies the journal at `path`; the state is shown as it reads at `now_ms`.
pub fn verify(path: &Path, now_ms: u64) -> Result<VerifyReport, VerifyError> {
    if !path.is_dir() {
        return Err(VerifyError::Missing(path.to_path_buf()));
    }
    let this_build = journal_formats::this_build();
    let mut newer = Vec::new();
    let formats_file = match Formats::read(path) {
        Ok(formats) => formats,
        Err(error) => {
            newer.push(format!("formats file unreadable: {error}"));
            None
        }
    };
    if let Some(stored) = &formats_file {
        let versions = stored.newer_than(&this_build);
        if !versions.is_empty() {
            newer.push(format!(
                "formats file: {}",
                journal_formats::describe(&versions)
            ));
        }
    }
    let scratch =
        std::env::temp_dir().join(format!("quotaroute-verify-{}-{now_ms}", std::process::id()));
    let copied = copy_dir(path, &scratch).map_err(|error| VerifyError::Copy {
        path: path.to_path_buf(),
        reason: error.to_string(),
    });
    let report =
        copied.and_then(|()| read_copy(path, &scratch, now_ms, this_build, formats_file, newer));
    let _ = std::fs::remove_dir_all(&scratch);
    report
}

fn read_copy(
    path: &Path,
    copy: &Path,
    now_ms: u64,
    this_build: Formats,
    formats_file: Option<Formats>,
    mut newer: Vec<String>,
) -> Result<VerifyReport, VerifyError> {
    let journal =
        SledJournal::open(copy, SledOptions::default()).map_err(|error| VerifyError::Open {
            path: path.to_path_buf(),
            reason: error.to_string(),
        })?;
    let mut events = 0;
    let (mut first_seq, mut last_seq) = (None, None);
    let mut event_schemas = BTreeMap::new();
    let mut damaged = Vec::new();
    for item in journal.read_from(0) {
        match item {
            Ok(envelope) => {
                events += 1;
                first_seq.get_or_insert(envelope.seq);
                last_seq = Some(envelope.seq);
                *event_schemas.entry(envelope.schema_version).or_insert(0) += 1;
            }
            Err(damage) => {
                if damage.is_newer() {
                    newer.push(format!("record at seq {}: {}", damage.seq, damage.reason));
                }
                damaged.push(DamageReport {
                    seq: damage.seq,
                    reason: damage.reason.to_string(),
                });
            }
        }
    }
    let snapshots = journal
        .snapshots()
        .into_iter()
        .map(|snapshot| match snapshot {
            Ok(snapshot) => {
                let decoded = quotaroute_actors::snapshot::decode(&snapshot);
                let (status, reason) = match &decoded {
                    Ok(_) => ("ok", None),
                    Err(reason)
                        if matches!(reason, quotaroute_journal::DamageReason::Newer { .. }) =>
                    {
                        ("newer", Some(reason.to_string()))
                    }
                    Err(reason) => ("damaged", Some(reason.to_string())),
                };
                SnapshotReport {
                    seq: snapshot.seq,
                    at_ms: Some(snapshot.at_ms),
                    format: Some(snapshot.format),
                    state_layout: snapshot.state_version,
                    status,
                    reason,
                }
            }
            Err(damage) => SnapshotReport {
                seq: damage.seq,
                at_ms: None,
                format: None,
                state_layout: None,
                status: if damage.is_newer() {
                    "newer"
                } else {
                    "damaged"
                },
                reason: Some(damage.reason.to_string()),
            },
        })
        .collect::<Vec<_>>();
    for snapshot in snapshots.iter().filter(|s| s.status == "newer") {
        newer.push(format!(
            "snapshot at seq {}: {}",
            snapshot.seq,
            snapshot.reason.clone().unwrap_or_default()
        ));
    }
    let (state, recovery) = quotaroute_actors::recover_state(&journal);
    let at = StateAt {
        at_ms: now_ms,
        last_seq: state.last_seq,
        events_applied: recovery.events_replayed,
        config_generation: state.config().map(|c| c.generation),
        state: state_at::view(&state, now_ms),
    };
    Ok(VerifyReport {
        path: path.display().to_string(),
        formats_file,
        this_build,
        events,
        first_seq,
        last_seq,
        event_schemas,
        snapshots,
        damaged,
        newer,
        snapshot_used: recovery.snapshot_seq,
        events_replayed: recovery.events_replayed,
        state: at,
    })
}

fn formats_line(formats: &Formats) -> String {
    format!(
        "record format {}, event schema {}, snapshot format {}, state layout {}",
        formats.record_format, formats.event_schema, formats.snapshot_format, formats.state_layout
    )
}

/// The text report.
pub fn render_text(report: &VerifyReport) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "journal {}", report.path);
    match &report.formats_file {
        Some(formats) => {
            let _ = writeln!(
                out,
                "formats file: {} (written by {})",
                formats_line(formats),
                formats.written_by
            );
        }
        None => {
            let _ = writeln!(
                out,
                "formats file: none (a journal of a release up to 0447244, or new)"
            );
        }
    }
    let _ = writeln!(
        out,
        "this build reads up to: {}",
        formats_line(&report.this_build)
    );
    let schemas: Vec<String> = report
        .event_schemas
        .iter()
        .map(|(version, count)| format!("schema {version}: {count}"))
        .collect();
    let _ = writeln!(
        out,
        "events: {} (seq {}..{}; {})",
        report.events,
        report.first_seq.map_or("-".into(), |s| s.to_string()),
        report.last_seq.map_or("-".into(), |s| s.to_string()),
        if schemas.is_empty() {
            "none".to_string()
        } else {
            schemas.join(", ")
        }
    );
    let _ = writeln!(out, "snapshots: {}", report.snapshots.len());
    for s in &report.snapshots {
        let layout = s
            .state_layout
            .map_or("unrecorded".to_string(), |l| l.to_string());
        let _ = writeln!(
            out,
            "  seq {}: format {}, state layout {layout}: {}{}",
            s.seq,
            s.format.map_or("-".into(), |f| f.to_string()),
            s.status,
            s.reason
                .as_ref()
                .map_or(String::new(), |r| format!(" ({r})"))
        );
    }
    let _ = writeln!(out, "damaged records: {}", report.damaged.len());
    for d in &report.damaged {
        let _ = writeln!(out, "  seq {}: {}", d.seq, d.reason);
    }
    if report.newer.is_empty() {
        let _ = writeln!(out, "newer than this build: nothing");
    } else {
        let _ = writeln!(
            out,
            "newer than this build (a node of this build refuses it):"
        );
        for n in &report.newer {
            let _ = writeln!(out, "  {n}");
        }
    }
    let _ = writeln!(
        out,
        "rebuilds from: {} + {} events",
        report
            .snapshot_used
            .map_or("no snapshot".to_string(), |s| format!("snapshot seq {s}")),
        report.events_replayed
    );
    let _ = writeln!(out);
    out.push_str(&state_at::render_text(&report.state));
    out
}
