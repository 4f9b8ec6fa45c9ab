//! The one selection composition (behaviour §2 with §10 on top): [`decide`] takes a combo's
//! strategy, its targets' views, its deficits, leads and bindings, the request's group and
//! hard affinities, and an [`Admit`](crate::admission::Admit) for "does this target
//! admit now", and returns the decision with what it changes ([`SelectionState::apply`]).
//!
//! Its callers, and nobody else, compose selection: the combo actor (live routing; the
//! simulator drives it through the router) and `replay --what-if` (CONFIG, and
//! `affinity=off`). The fair queue asks the same candidates whether the pool is full.
//!
//! - `target` — what a target and a conversation are called ([`RoutedTarget`], [`AffinityKey`]).
//! - `candidates` — the targets of one request with their views; `only_connection`; room.
//! - `decide` — the composition.
//! - `state` — deficits, leads and bindings, and the only ways a turn changes them.

mod candidates;
mod decide;
mod state;
mod target;

pub use candidates::Candidates;
pub use decide::{decide, decide_with, ComboRules, Decided, SelectionRequest};
pub use state::{Applied, BindingChange, Changes, SelectionState, SERVED_ELSEWHERE};
pub use target::{AffinityKey, RoutedTarget};

#[cfg(test)]
mod tests;
