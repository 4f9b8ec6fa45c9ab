//! One request's encrypted items across its tries (behaviour §10 "Encrypted items"): the items,
//! and whether the tries now leave them all out (after a 400 `invalid_encrypted_content` or a
//! refused thinking signature, see `attempt::try_target`). Each try asks it for the body its
//! target gets.

use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;

use crate::wire::encrypted_items::EncryptedItems;

/// One request's encrypted items and whether its tries now leave them all out.
#[derive(Debug)]
pub(crate) struct EncryptedTurn {
    pub items: EncryptedItems,
    leave_all_out: AtomicBool,
}

impl EncryptedTurn {
    pub(crate) fn new(items: EncryptedItems) -> Self {
        EncryptedTurn {
            items,
            leave_all_out: AtomicBool::new(false),
        }
    }

    /// Whether every encrypted item is left out now (after a 400 `invalid_encrypted_content`).
    pub(crate) fn leaves_all_out(&self) -> bool {
        self.leave_all_out.load(Ordering::Relaxed)
    }

    /// From now on, every try leaves every encrypted item out.
    pub(crate) fn leave_all_out(&self) {
        self.leave_all_out.store(true, Ordering::Relaxed);
    }

    /// Whether `connection`'s body carries at least one encrypted item.
    pub(crate) fn sends_any_to(&self, connection: &str) -> bool {
        !self.leaves_all_out()
            && (self.items.unreadable_by(connection, false) as usize) < self.items.len()
    }

    /// `body` (already rewritten for the target) as `connection` gets it, and how many
    /// encrypted items were left out of it.
    pub(crate) fn body_for(&self, body: Bytes, connection: &str) -> (Bytes, u32) {
        match self
            .items
            .body_for(&body, connection, self.leaves_all_out())
        {
            Some(target) => (target.body, target.left_out),
            None => (body, 0),
        }
    }
}
