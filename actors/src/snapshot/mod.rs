//! Snapshots of `RouterState`: the layout this build writes, and the chain of small, pure
//! migrations that reads every layout an earlier release wrote (behaviour §12).
//!
//! bincode is not self-describing, so a layout can only be read by the shape that wrote it.
//! Every layout ever written is therefore kept, frozen, in a `layout_v<N>` module and carried
//! forward one step at a time (`v1 → v2 → …`); today's types are never decoded from an older
//! layout. The layouts:
//! - 1 — releases up to 94a0268: breakers, connections (locks without their HTTP status),
//!   deficits ([`layout_v1`], migrated by [`migrate_v1`]).
//! - 2 — 0447244 and later: adds response bindings, peer progress and each lock's status.
//!   Snapshots of snapshot format 1 (no state version recorded) hold layout 1 or 2, told
//!   apart by [`decode_unversioned`].
//! - 3 — conversation affinity (behaviour §10): layout 2's bytes, unchanged, followed by the
//!   affinity bindings by combo (`RouterState::affinity`, which layout 2's shape skips). So
//!   layout 2 needs no frozen copy: it is today's shape minus the tail, and migrates to 3 with
//!   no bindings.
//! - 4 — each connection's input and cached input tokens (behaviour §10 "Seen",
//!   `RouterState::cached_input`): layout 3's bytes followed by those counts. Layout 3 migrates
//!   to 4 with no counts (the cached share then counts from the events after that snapshot).
//! - 5 — each stored response's client (behaviour §11 "A stored response belongs to the client
//!   that created it"): layout 4's bytes followed by `(response_id, client)` pairs
//!   (`ResponseBindings::owners`). Layout 4 migrates to 5 with no owners: its bindings were
//!   made before clients were recorded and stay usable by any client.
//!
//! Changing what `RouterState` (or anything inside it) stores means: freeze today's shape as
//! `layout_v<N>.rs` (or, as layout 3 did, append after it), bump [`STATE_LAYOUT`], write the
//! migration (tested), add an arm to [`decode`], and add a release fixture
//! (`journal/tests/fixtures/releases/`, made by the build that writes the new layout) — the
//! fixture test fails until all of that is done.

pub mod layout_v1;
pub mod migrate_v1;

use quotaroute_journal::codec::{self, DamageReason};
use quotaroute_journal::Snapshot;

use crate::policy::router_state::RouterState;

/// The state layout this build writes (the snapshot's `state_version`).
pub const STATE_LAYOUT: u16 = 5;

/// Layout 2's shape: today's [`RouterState`] without the affinity bindings it skips.
pub const LAYOUT_WITHOUT_AFFINITY: u16 = 2;

/// Layout 3's shape: layout 2's bytes, then the affinity bindings (no cached-input counts).
pub const LAYOUT_WITHOUT_CACHED_INPUT: u16 = 3;

/// Layout 4's shape: layout 3's bytes, then the cached-input counts (no response owners).
pub const LAYOUT_WITHOUT_RESPONSE_OWNERS: u16 = 4;

/// Bytes for `JournalHandle::snapshot`, in layout [`STATE_LAYOUT`].
pub fn encode(state: &RouterState) -> Result<Vec<u8>, codec::EncodeError> {
    codec::encode_state(&(
        state,
        &state.affinity,
        &state.cached_input,
        &state.responses.owners(),
    ))
}

/// Layout 5: layout 4's bytes, then the stored responses' clients.
fn decode_v5(bytes: &[u8]) -> Result<RouterState, DamageReason> {
    let (mut state, affinity, cached_input, owners): (
        RouterState,
        AffinityByCombo,
        CachedInputByConnection,
        Vec<(String, String)>,
    ) = codec::decode_state(bytes)?;
    state.affinity = affinity;
    state.cached_input = cached_input;
    state.responses.restore_owners(owners);
    Ok(state)
}

/// Layout 4: layout 3's bytes, then the cached-input counts.
fn decode_v4(bytes: &[u8]) -> Result<RouterState, DamageReason> {
    let (mut state, affinity, cached_input): (
        RouterState,
        AffinityByCombo,
        CachedInputByConnection,
    ) = codec::decode_state(bytes)?;
    state.affinity = affinity;
    state.cached_input = cached_input;
    Ok(state)
}

/// Layout 3: layout 2's bytes, then the affinity bindings.
fn decode_v3(bytes: &[u8]) -> Result<RouterState, DamageReason> {
    let (mut state, affinity): (RouterState, AffinityByCombo) = codec::decode_state(bytes)?;
    state.affinity = affinity;
    Ok(state)
}

use crate::policy::cached_input::CachedInputByConnection;

type AffinityByCombo =
    std::collections::BTreeMap<String, crate::policy::affinity_bindings::AffinityBindings>;

/// A stored snapshot's state, carried forward to today's layout. A layout newer than
/// [`STATE_LAYOUT`] is `DamageReason::Newer` (a newer build wrote it: refuse, never guess).
pub fn decode(snapshot: &Snapshot) -> Result<RouterState, DamageReason> {
    let bytes = snapshot.state.as_slice();
    match snapshot.state_version {
        None => decode_unversioned(bytes),
        Some(1) => Ok(migrate_v1::to_v2(codec::decode_state(bytes)?)),
        // Layout 2 → 3: no conversation was bound yet.
        Some(LAYOUT_WITHOUT_AFFINITY) => codec::decode_state(bytes),
        // Layout 3 → 4: nothing was counted yet.
        Some(LAYOUT_WITHOUT_CACHED_INPUT) => decode_v3(bytes),
        // Layout 4 → 5: no stored response named its client yet.
        Some(LAYOUT_WITHOUT_RESPONSE_OWNERS) => decode_v4(bytes),
        Some(STATE_LAYOUT) => decode_v5(bytes),
        Some(newer) if newer > STATE_LAYOUT => Err(DamageReason::Newer {
            what: "snapshot state layout",
            found: u32::from(newer),
            supported: u32::from(STATE_LAYOUT),
        }),
        Some(other) => Err(DamageReason::Undecodable(format!(
            "unknown snapshot state layout {other}"
        ))),
    }
}

/// Snapshot format 1 did not record its state's layout; it holds layout 2 (0447244) or
/// layout 1 (earlier). Each decode must consume the bytes exactly, and the two differ at the
/// end (layout 2 appends response bindings and peer progress), so at most one fits in
/// practice; layout 2 is tried first as the newer.
pub fn decode_unversioned(bytes: &[u8]) -> Result<RouterState, DamageReason> {
    if let Ok(state) = codec::decode_state::<RouterState>(bytes) {
        return Ok(state);
    }
    codec::decode_state::<layout_v1::RouterStateV1>(bytes)
        .map(migrate_v1::to_v2)
        .map_err(|_| DamageReason::SnapshotRejected)
}

#[cfg(test)]
mod tests;
