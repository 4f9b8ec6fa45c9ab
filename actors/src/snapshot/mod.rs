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
//! - 6 — DRR deficits in quanta (behaviour §13: a target adds `weight × pace × 1024` a turn):
//!   layout 5's bytes, unchanged, each deficit counted in 1/1024 of a weight. Layouts up to 5
//!   counted whole weights; their deficits are multiplied by 1024 on the way in, so the DRR
//!   phase carries over exactly.
//! - 7 — the APIs providers' hosts were found not to serve (behaviour §14,
//!   `RouterState::unserved_apis`): layout 6's bytes followed by them. Layout 6 migrates to 7
//!   with none learned.
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

use crate::policy::pace::QUANTUM_PER_WEIGHT;
use crate::policy::router_state::RouterState;

/// The state layout this build writes (the snapshot's `state_version`).
pub const STATE_LAYOUT: u16 = 7;

/// Layout 6's shape: today's bytes without the learned unserved APIs at the end.
pub const LAYOUT_WITHOUT_UNSERVED_APIS: u16 = 6;

/// Layout 5's shape: today's bytes, deficits in whole weights.
pub const LAYOUT_WITH_WEIGHT_DEFICITS: u16 = 5;

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
        &state.unserved_apis,
    ))
}

/// Layouts up to 5 counted deficits in whole weights; layout 6 in quanta (1/1024 of a weight).
fn deficits_to_quanta(mut state: RouterState) -> RouterState {
    for deficits in state.deficits.values_mut() {
        deficits.scale(QUANTUM_PER_WEIGHT);
    }
    state
}

/// Layouts 5 and 6: layout 4's bytes, then the stored responses' clients.
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

/// Layout 7: layout 6's bytes, then the learned unserved APIs.
fn decode_v7(bytes: &[u8]) -> Result<RouterState, DamageReason> {
    let (mut state, affinity, cached_input, owners, unserved_apis): (
        RouterState,
        AffinityByCombo,
        CachedInputByConnection,
        Vec<(String, String)>,
        crate::policy::unserved_apis::UnservedApis,
    ) = codec::decode_state(bytes)?;
    state.affinity = affinity;
    state.cached_input = cached_input;
    state.responses.restore_owners(owners);
    state.unserved_apis = unserved_apis;
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
        Some(1) => Ok(deficits_to_quanta(migrate_v1::to_v2(codec::decode_state(
            bytes,
        )?))),
        // Layout 2 → 3: no conversation was bound yet.
        Some(LAYOUT_WITHOUT_AFFINITY) => codec::decode_state(bytes).map(deficits_to_quanta),
        // Layout 3 → 4: nothing was counted yet.
        Some(LAYOUT_WITHOUT_CACHED_INPUT) => decode_v3(bytes).map(deficits_to_quanta),
        // Layout 4 → 5: no stored response named its client yet.
        Some(LAYOUT_WITHOUT_RESPONSE_OWNERS) => decode_v4(bytes).map(deficits_to_quanta),
        // Layout 5 → 6: deficits from whole weights to quanta.
        Some(LAYOUT_WITH_WEIGHT_DEFICITS) => decode_v5(bytes).map(deficits_to_quanta),
        // Layout 6 → 7: no API was learned unserved yet.
        Some(LAYOUT_WITHOUT_UNSERVED_APIS) => decode_v5(bytes),
        Some(STATE_LAYOUT) => decode_v7(bytes),
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
        return Ok(deficits_to_quanta(state));
    }
    codec::decode_state::<layout_v1::RouterStateV1>(bytes)
        .map(migrate_v1::to_v2)
        .map(deficits_to_quanta)
        .map_err(|_| DamageReason::SnapshotRejected)
}

#[cfg(test)]
mod tests;
