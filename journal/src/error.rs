//! The journal's errors: [`JournalError`] for operations that failed, [`Damage`] for a stored
//! record or snapshot that could not be read (reported and skipped, never fatal).

use crate::codec::DamageReason;
use std::path::PathBuf;

/// An operation on the journal failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JournalError {
    /// Another process (or another open handle in this one) holds the journal directory.
    #[error("journal {path} is locked by another process (is a node running on it?)")]
    Locked { path: PathBuf },
    /// sled could not open the directory at all.
    #[error("cannot open journal {path}: {reason}")]
    Open { path: PathBuf, reason: String },
    /// The storage refused a read or write.
    #[error("journal storage error: {0}")]
    Storage(String),
    /// An envelope could not be encoded.
    #[error(transparent)]
    Encode(#[from] crate::codec::EncodeError),
    /// A write failed on purpose (see [`crate::FailingJournal`]).
    #[error("injected journal failure")]
    Injected,
    /// The writer thread is gone (closed, or it could not start).
    #[error("journal writer is closed")]
    Closed,
}

impl From<sled::Error> for JournalError {
    fn from(error: sled::Error) -> Self {
        JournalError::Storage(error.to_string())
    }
}

/// A record or snapshot that could not be read: where, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("damaged journal entry at seq {seq}: {reason}")]
pub struct Damage {
    /// The record's (or snapshot's) key: the first seq it holds.
    pub seq: u64,
    pub reason: DamageReason,
}

impl Damage {
    /// Written by a newer build (a version this one does not know, behind a good checksum):
    /// a node refuses to start on it rather than skip it (behaviour §12).
    pub fn is_newer(&self) -> bool {
        matches!(self.reason, DamageReason::Newer { .. })
    }
}
