//! What the prime rule (`policy::prime`, behaviour §13) reads of one connection in the admin
//! view: its rolling window's reset and why it must not be primed (disabled, locked, spent,
//! reserved, cooling down, its breaker not closed) — the one reading the node's driver and the
//! simulator's week share.

use crate::admin_state::AdminState;
use crate::policy::prime::{is_rolling_window, PrimeBlock, PrimeInput};

/// What the prime rule reads of `connection_id` (of `provider`, primed with `model`) in the
/// admin view `state`.
pub fn prime_input(
    state: &AdminState,
    (provider_name, connection_id, model): (&str, &str, &str),
    last_primed_at_ms: Option<u64>,
) -> PrimeInput {
    let Some(connection) = state.connections.iter().find(|c| c.id == connection_id) else {
        return PrimeInput {
            last_primed_at_ms,
            ..PrimeInput::default()
        };
    };
    let window_resets_at_ms = connection
        .buckets
        .iter()
        .filter(|bucket| is_rolling_window(&bucket.window))
        .filter_map(|bucket| bucket.resets_at_ms)
        .max();
    let breaker_open = state.providers.iter().any(|provider| {
        provider.name == provider_name && !provider.breaker.eq_ignore_ascii_case("closed")
    });
    let block = if connection.disabled.is_some() {
        Some(PrimeBlock::Disabled)
    } else if connection
        .lockouts
        .iter()
        .any(|lockout| lockout.model == model)
    {
        Some(PrimeBlock::Locked)
    } else if connection.buckets.iter().any(|bucket| bucket.saturated) {
        Some(PrimeBlock::Spent)
    } else if connection.buckets.iter().any(|bucket| bucket.reserved) {
        Some(PrimeBlock::Reserved)
    } else if connection.cooldown_remaining_ms > 0 {
        Some(PrimeBlock::CoolingDown)
    } else if breaker_open {
        Some(PrimeBlock::BreakerOpen)
    } else {
        None
    };
    PrimeInput {
        window_resets_at_ms,
        block,
        last_primed_at_ms,
    }
}
