//! Errors of the router's embedding API.

use quotaroute_journal::JournalError;

#[derive(Debug, thiserror::Error)]
pub enum RouterError {
    #[error("journal: {0}")]
    Journal(#[from] JournalError),
    #[error("journal flush failed: {0}")]
    Flush(String),
    #[error("actor system: {0}")]
    Actor(String),
    #[error("unknown connection `{0}`")]
    UnknownConnection(String),
    #[error("unknown combo `{0}`")]
    UnknownCombo(String),
    #[error("unknown provider `{0}`")]
    UnknownProvider(String),
    /// The journal holds a record or snapshot of a version newer than this build's.
    #[error("the journal was written by a newer build ({0})")]
    NewerJournal(String),
}
