//! quotaroute-actors: the routing policy (pure) and the actors that own its state.
//!
//! Layout
//! - `policy/` — every rule of `behaviour.md` as pure code: state + input + now → events, and
//!   `apply(at_ms, &Event)` as the only way state changes, so replay runs the same code as live.

pub mod policy;
