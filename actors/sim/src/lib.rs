//! quotaroute-sim: the deterministic simulator, a dev crate. It drives real `Router`s on a
//! `MemoryJournal` and a `ManualClock` through seeded schedules and checks `behaviour.md`'s
//! invariants after every step; it sees only what an embedding program sees.
//!
//! # Layout
//! - [`engine`] — requests, upstream outcomes, held decisions, clock jumps, admin actions and
//!   restarts (invariants a–l), and the shrinking of a failing run.
//! - [`clients`] — clients sharing a full pool (behaviour §11; q1–q4).
//! - [`groups`] — conversation groups with affinity hints (behaviour §10; ga–gc).
//! - [`week`] — the subscription week, pacing on and off (behaviour §13; m, n).
//!
//! Used by `actors/tests/simulate.rs` (short runs) and `actors/examples/simulate.rs` (long
//! runs). A simulator's failed expectation is a failed run, so it may panic.

#![expect(
    clippy::panic,
    reason = "test code: a failed step fails the run loudly"
)]

pub mod clients;
pub mod engine;
pub mod groups;
pub mod knob_sweep;
pub mod week;
