//! A read handle on the node's journal that can be taken back: set once the journal is open,
//! released when the node stops (so its directory can be opened again). Shared by the admin
//! API, the dashboard and the cluster's publisher, none of which owns the journal.

use std::sync::{Arc, RwLock};

use quotaroute_journal::SledJournal;

/// Cheap to clone; every clone sees the same slot.
#[derive(Clone, Default)]
pub struct JournalReader {
    slot: Arc<RwLock<Option<SledJournal>>>,
}

impl JournalReader {
    /// A reader of the journal, while it is open.
    pub fn get(&self) -> Option<SledJournal> {
        let slot = self.slot.read().ok()?;
        slot.as_ref().map(SledJournal::reader)
    }

    /// Opens (`Some`) or releases (`None`) the slot.
    pub fn set(&self, reader: Option<SledJournal>) {
        if let Ok(mut slot) = self.slot.write() {
            *slot = reader;
        }
    }
}
