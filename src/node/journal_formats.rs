//! Behaviour §12 at the node's start: a journal written by a newer build is refused before
//! sled opens it (nothing on disk changes), naming both versions and the way back; a journal
//! this build may use gets this build's formats recorded once the router has started on it.

use std::path::Path;

use quotaroute_journal::{Formats, NewerVersion};

/// Why a node refused its journal.
#[derive(Debug, thiserror::Error)]
pub enum FormatsRefusal {
    #[error(
        "journal {path} was written by a newer build ({versions}); nothing was changed. Run that \
         build again, or roll back with the copy of the journal taken before the upgrade \
         (docs/operations.md, \"Upgrading and rolling back\")"
    )]
    Newer { path: String, versions: String },
    #[error("journal {path}: {reason}")]
    Unreadable { path: String, reason: String },
}

/// What this build writes.
pub fn this_build() -> Formats {
    Formats::this_build(
        quotaroute_actors::snapshot::STATE_LAYOUT,
        concat!("quotaroute ", env!("CARGO_PKG_VERSION")),
    )
}

/// `versions` as the refusal names them: `snapshot state layout 3, this build reads up to 2`.
pub fn describe(versions: &[NewerVersion]) -> String {
    versions
        .iter()
        .map(|v| {
            format!(
                "{} {}, this build reads up to {}",
                v.what, v.found, v.supported
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// Reads the journal's formats file (never writes) and refuses one newer than `ours`.
pub fn check_before_open(path: &Path, ours: &Formats) -> Result<(), FormatsRefusal> {
    let stored = Formats::read(path).map_err(|error| FormatsRefusal::Unreadable {
        path: path.display().to_string(),
        reason: error.to_string(),
    })?;
    let newer = stored
        .map(|stored| stored.newer_than(ours))
        .unwrap_or_default();
    if newer.is_empty() {
        Ok(())
    } else {
        Err(FormatsRefusal::Newer {
            path: path.display().to_string(),
            versions: describe(&newer),
        })
    }
}

/// After the router started on the journal: record this build's formats (a failure is logged;
/// records and snapshots carry their versions anyway).
pub fn record(path: &Path, ours: &Formats) {
    if Formats::read(path).ok().flatten().as_ref() == Some(ours) {
        return;
    }
    if let Err(error) = ours.write(path) {
        tracing::warn!(%error, "journal formats not recorded");
    }
}
