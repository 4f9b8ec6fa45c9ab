//! Recovery: find the newest snapshot the caller can decode, and replay the events after it.
//!
//! How to use: `let r = recover(&journal, decode_state);` then start from `r.state` (or the
//! empty state) and apply every `Ok` envelope of `r.tail(&journal)`; report `r.damages` and the
//! tail's `Err`s. Knows nothing of what the state is.

use crate::codec::DamageReason;
use crate::error::Damage;
use crate::event::Envelope;
use crate::store::{Journal, Snapshot};

/// What recovery found before replaying the tail.
#[derive(Debug)]
pub struct Recovery<S> {
    /// The decoded state of the newest usable snapshot; `None` means replay from the start.
    pub state: Option<S>,
    /// That snapshot's seq (the tail starts after it).
    pub snapshot_seq: Option<u64>,
    pub snapshot_at_ms: Option<u64>,
    /// Snapshots skipped on the way: unreadable bytes, or rejected by `decode`.
    pub damages: Vec<Damage>,
}

impl<S> Recovery<S> {
    /// The first snapshot skipped because a newer build wrote it.
    pub fn newer(&self) -> Option<&Damage> {
        self.damages.iter().find(|damage| damage.is_newer())
    }

    /// The first seq to replay.
    pub fn replay_from(&self) -> u64 {
        self.snapshot_seq.map_or(0, |seq| seq.saturating_add(1))
    }

    /// The events after the snapshot, in order (damaged records as `Err`).
    pub fn tail<'j>(
        &self,
        journal: &'j dyn Journal,
    ) -> Box<dyn Iterator<Item = Result<Envelope, Damage>> + 'j> {
        journal.read_from(self.replay_from())
    }
}

/// Picks the newest snapshot whose bytes are intact and that `decode` accepts, falling back
/// to older ones, or to none (a full replay).
pub fn recover<S>(journal: &dyn Journal, decode: impl Fn(&[u8]) -> Option<S>) -> Recovery<S> {
    recover_versioned(journal, |snapshot| {
        decode(&snapshot.state).ok_or(DamageReason::SnapshotRejected)
    })
}

/// [`recover`] for a decoder that reads the snapshot's `state_version` and says why it
/// refused one (a layout newer than it knows is `DamageReason::Newer`, see
/// [`Recovery::newer`]).
pub fn recover_versioned<S>(
    journal: &dyn Journal,
    decode: impl Fn(&Snapshot) -> Result<S, DamageReason>,
) -> Recovery<S> {
    let mut damages = Vec::new();
    for snapshot in journal.snapshots() {
        match snapshot {
            Ok(snapshot) => match decode(&snapshot) {
                Ok(state) => {
                    return Recovery {
                        state: Some(state),
                        snapshot_seq: Some(snapshot.seq),
                        snapshot_at_ms: Some(snapshot.at_ms),
                        damages,
                    }
                }
                Err(reason) => damages.push(Damage {
                    seq: snapshot.seq,
                    reason,
                }),
            },
            Err(damage) => damages.push(damage),
        }
    }
    Recovery {
        state: None,
        snapshot_seq: None,
        snapshot_at_ms: None,
        damages,
    }
}
