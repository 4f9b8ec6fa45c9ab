//! [`Formats`]: which format versions wrote a journal directory, kept beside sled's own files in
//! [`FORMATS_FILE`], so a build can see a journal from a newer build — and refuse it — by
//! reading one small file, before sled (which may tidy its files on open) touches the
//! directory (behaviour §12). Reading never writes; writing replaces the file atomically.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::codec::{RECORD_FORMAT, SNAPSHOT_FORMAT};
use crate::event::SCHEMA_VERSION;

/// The file in the journal directory (sled ignores files it did not make).
pub const FORMATS_FILE: &str = "quotaroute-formats.json";

/// The versions of everything stored in a journal directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Formats {
    pub record_format: u32,
    pub event_schema: u32,
    pub snapshot_format: u32,
    /// The snapshot state's layout, numbered by its owner (`quotaroute_actors::snapshot`).
    pub state_layout: u32,
    /// Who wrote it (`quotaroute 0.1.0`), for the operator; never compared.
    pub written_by: String,
}

/// One version of a journal newer than this build reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewerVersion {
    pub what: &'static str,
    pub found: u32,
    pub supported: u32,
}

/// Why the formats file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum FormatsError {
    #[error("cannot read {path}: {reason}")]
    Read { path: PathBuf, reason: String },
    #[error("cannot write {path}: {reason}")]
    Write { path: PathBuf, reason: String },
}

impl Formats {
    /// What this build writes, with its owner's state layout.
    pub fn this_build(state_layout: u16, written_by: impl Into<String>) -> Self {
        Formats {
            record_format: u32::from(RECORD_FORMAT),
            event_schema: u32::from(SCHEMA_VERSION),
            snapshot_format: u32::from(SNAPSHOT_FORMAT),
            state_layout: u32::from(state_layout),
            written_by: written_by.into(),
        }
    }

    /// Every version in `self` newer than the same one in `ours`.
    pub fn newer_than(&self, ours: &Formats) -> Vec<NewerVersion> {
        [
            ("record format", self.record_format, ours.record_format),
            ("event schema", self.event_schema, ours.event_schema),
            (
                "snapshot format",
                self.snapshot_format,
                ours.snapshot_format,
            ),
            (
                "snapshot state layout",
                self.state_layout,
                ours.state_layout,
            ),
        ]
        .into_iter()
        .filter(|(_, found, supported)| found > supported)
        .map(|(what, found, supported)| NewerVersion {
            what,
            found,
            supported,
        })
        .collect()
    }

    /// The formats file of the journal at `dir`; `None` when there is none (a new journal, or
    /// one written before the file existed, which is older than any build that reads it).
    /// Never writes.
    pub fn read(dir: &Path) -> Result<Option<Formats>, FormatsError> {
        let path = dir.join(FORMATS_FILE);
        let read_error = |reason: String| FormatsError::Read {
            path: path.clone(),
            reason,
        };
        match std::fs::read_to_string(&path) {
            Ok(text) => serde_json::from_str(&text)
                .map(Some)
                .map_err(|error| read_error(error.to_string())),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(error) => Err(read_error(error.to_string())),
        }
    }

    /// Records `self` as the journal's formats: written beside, then renamed over, the file.
    pub fn write(&self, dir: &Path) -> Result<(), FormatsError> {
        let path = dir.join(FORMATS_FILE);
        let write_error = |reason: String| FormatsError::Write {
            path: path.clone(),
            reason,
        };
        let text = serde_json::to_string_pretty(self).map_err(|e| write_error(e.to_string()))?;
        let partial = dir.join(format!("{FORMATS_FILE}.partial"));
        std::fs::write(&partial, text + "\n").map_err(|e| write_error(e.to_string()))?;
        std::fs::rename(&partial, &path).map_err(|e| write_error(e.to_string()))
    }
}

#[cfg(test)]
mod tests {

    use super::*;

    #[test]
    fn a_missing_file_is_none_and_reading_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(Formats::read(dir.path()).unwrap(), None);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn written_formats_read_back_and_only_newer_versions_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let ours = Formats::this_build(2, "test");
        ours.write(dir.path()).unwrap();
        let read = Formats::read(dir.path()).unwrap().unwrap();
        assert_eq!(read, ours);
        assert!(read.newer_than(&ours).is_empty());
        let older = Formats {
            snapshot_format: 1,
            state_layout: 1,
            ..ours.clone()
        };
        assert!(older.newer_than(&ours).is_empty());
        let newer = Formats {
            state_layout: 3,
            record_format: 7,
            ..ours.clone()
        };
        assert_eq!(
            newer.newer_than(&ours),
            vec![
                NewerVersion {
                    what: "record format",
                    found: 7,
                    supported: u32::from(RECORD_FORMAT)
                },
                NewerVersion {
                    what: "snapshot state layout",
                    found: 3,
                    supported: 2
                },
            ]
        );
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from(FORMATS_FILE)]);
    }

    #[test]
    fn an_unreadable_file_is_an_error_not_a_guess() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(FORMATS_FILE), "{not json").unwrap();
        assert!(matches!(
            Formats::read(dir.path()),
            Err(FormatsError::Read { .. })
        ));
    }
}
