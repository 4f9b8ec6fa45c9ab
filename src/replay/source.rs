//! Where replay reads envelopes from: a sled journal directory (read in place, never written), an
//! NDJSON export of one (`replay --format json` output), or a live node over HTTP (`remote`).
//! Owns opening and the "held by a running node" error; it never interprets events.

use std::io::BufRead;
use std::path::{Path, PathBuf};

use quotaroute_journal::{Envelope, Journal, JournalError, SledJournal, SledOptions};

use crate::replay::ndjson_item::{parse_ndjson_line, Damaged, Item};
use crate::replay::remote::{self, RemoteError};

/// Why no events could be read at all.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error("journal {path} does not exist")]
    Missing { path: PathBuf },
    #[error(
        "journal {path} is held by a running node (sled lock); stop the node, copy the \
         directory, or read the live journal with `--from URL` (the node's admin API)"
    )]
    Locked { path: PathBuf },
    #[error("cannot open journal {path}: {reason}")]
    Open { path: PathBuf, reason: String },
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Remote(#[from] RemoteError),
    #[error("give --journal DIR or --from URL")]
    Nothing,
}

/// An opened source of envelopes.
pub enum Source {
    /// A sled journal, read lazily (large journals never sit in memory whole).
    Sled(SledJournal),
    /// Items already read (an NDJSON file, a live node).
    Loaded(Vec<Item>),
}

impl std::fmt::Debug for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Sled(journal) => f.debug_tuple("Sled").field(&journal.path()).finish(),
            Source::Loaded(items) => f.debug_tuple("Loaded").field(&items.len()).finish(),
        }
    }
}

impl Source {
    /// Opens `--journal PATH` (a sled directory or an NDJSON file) or `--from URL`.
    pub fn open(journal: Option<&Path>, from: Option<&str>) -> Result<Source, SourceError> {
        match (journal, from) {
            (Some(path), _) => Source::open_path(path),
            (None, Some(url)) => {
                let admin_key = std::env::var("QUOTAROUTE_ADMIN_KEY").ok();
                Ok(Source::Loaded(remote::fetch_journal(
                    url,
                    admin_key.as_deref(),
                    remote::PAGE_EVENTS,
                )?))
            }
            (None, None) => Err(SourceError::Nothing),
        }
    }

    /// A sled directory, or an NDJSON file. A missing path is an error: sled would create it.
    pub fn open_path(path: &Path) -> Result<Source, SourceError> {
        if !path.exists() {
            return Err(SourceError::Missing {
                path: path.to_path_buf(),
            });
        }
        if path.is_file() {
            return read_ndjson_file(path).map(Source::Loaded);
        }
        match open_sled(path) {
            Ok(journal) => Ok(Source::Sled(journal)),
            Err(JournalError::Locked { path }) => Err(SourceError::Locked { path }),
            Err(error) => Err(SourceError::Open {
                path: path.to_path_buf(),
                reason: error.to_string(),
            }),
        }
    }

    /// Every item, in order.
    pub fn items(&self) -> Box<dyn Iterator<Item = Item> + '_> {
        match self {
            Source::Sled(journal) => Box::new(journal.read_from(0).map(|item| {
                item.map_err(|damage| Damaged {
                    location: format!("seq {}", damage.seq),
                    reason: damage.reason.to_string(),
                })
            })),
            Source::Loaded(items) => Box::new(items.iter().cloned()),
        }
    }
}

/// How long a held lock is waited for: sled releases its file lock from a background thread a
/// moment after a process (or handle) closes the journal, so a lock seen right after a node
/// stopped is retried briefly before it is reported as held.
const LOCK_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// Opens a sled journal, retrying a held lock for [`LOCK_GRACE`].
pub fn open_sled(path: &Path) -> Result<SledJournal, JournalError> {
    let deadline = std::time::Instant::now() + LOCK_GRACE;
    loop {
        match SledJournal::open(path, SledOptions::default()) {
            Err(JournalError::Locked { .. }) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            result => return result,
        }
    }
}

/// Reads an NDJSON export; unreadable lines become [`Damaged`] items, blank lines are skipped.
pub fn read_ndjson_file(path: &Path) -> Result<Vec<Item>, SourceError> {
    let read_error = |source| SourceError::Read {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::File::open(path).map_err(read_error)?;
    let mut items = Vec::new();
    for (index, line) in std::io::BufReader::new(file).lines().enumerate() {
        let line = line.map_err(read_error)?;
        items.extend(parse_ndjson_line(&line, index + 1));
    }
    Ok(items)
}

/// Writes NDJSON envelopes (an export, a fixture) into a new sled journal at `dir`, one record
/// per `batch` envelopes, so it can be replayed like a node's own. Returns the events written.
pub fn import_ndjson(ndjson: &Path, dir: &Path, batch: usize) -> Result<u64, SourceError> {
    let open_error = |error: JournalError| SourceError::Open {
        path: dir.to_path_buf(),
        reason: error.to_string(),
    };
    let mut journal = SledJournal::open(dir, SledOptions::default()).map_err(open_error)?;
    let envelopes: Vec<Envelope> = read_ndjson_file(ndjson)?
        .into_iter()
        .filter_map(Result::ok)
        .collect();
    for chunk in envelopes.chunks(batch.max(1)) {
        journal.write_batch(chunk).map_err(open_error)?;
    }
    journal.flush().map_err(open_error)?;
    Ok(envelopes.len() as u64)
}
