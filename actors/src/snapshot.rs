//! Encoding of `RouterState` snapshots, through the journal's codec (the only bincode user).

use quotaroute_journal::codec;

use crate::policy::router_state::RouterState;

/// Bytes for `JournalHandle::snapshot`.
pub fn encode(state: &RouterState) -> Result<Vec<u8>, codec::EncodeError> {
    codec::encode_state(state)
}

/// A snapshot's state, or `None` when it does not decode (recovery then falls back).
pub fn decode(bytes: &[u8]) -> Option<RouterState> {
    codec::decode_state(bytes).ok()
}
