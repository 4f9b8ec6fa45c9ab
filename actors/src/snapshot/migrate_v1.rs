//! State layout 1 → 2, pure: locks gain `status` (unknown for a lock learned before it was
//! recorded: `None`, never guessed from the reason); response bindings and peer progress
//! start empty, as they were when layout 1 was written (no build of it had them).

use crate::policy::connection_state::ConnectionState;
use crate::policy::lockout::{ModelLock, ModelLockouts};
use crate::policy::router_state::RouterState;

use super::layout_v1::{ConnectionStateV1, ModelLockV1, RouterStateV1};

/// Carries a layout-1 state to layout 2 (today's [`RouterState`]).
pub fn to_v2(old: RouterStateV1) -> RouterState {
    let mut state = RouterState::default();
    state.last_seq = old.last_seq;
    state.last_at_ms = old.last_at_ms;
    state.configs = old.configs;
    state.breakers = old.breakers;
    state.connections = old
        .connections
        .into_iter()
        .map(|(id, connection)| (id, connection_to_v2(connection)))
        .collect();
    state.deficits = old.deficits;
    state
}

fn connection_to_v2(old: ConnectionStateV1) -> ConnectionState {
    let locks = old
        .lockouts
        .locks
        .into_iter()
        .map(|(model, lock)| (model, lock_to_v2(lock)))
        .collect();
    ConnectionState {
        health: old.health,
        lockouts: ModelLockouts::from_locks(old.lockouts.provider, old.lockouts.connection, locks),
        buckets: old.buckets,
    }
}

fn lock_to_v2(old: ModelLockV1) -> ModelLock {
    ModelLock {
        reason: old.reason,
        until_ms: old.until_ms,
        failure_count: old.failure_count,
        status: None,
        error_code: old.error_code,
        source: old.source,
        quota_backoff_ms: old.quota_backoff_ms,
    }
}
