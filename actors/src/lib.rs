//! quotaroute-actors: the routing policy (pure) and the actors that own its state.
//!
//! # Layout
//! - [`policy`] — every rule of `behaviour.md` as pure code: state + input + now → events, and
//!   `apply(at_ms, &Event)` as the only way state changes, so replay runs the same code as live.
//!   [`policy::router_state::RouterState`] is the fold of the whole journal.
//! - [`actor`] — one `ComboActor` per combo (DRR deficits, views of its targets), one
//!   `ConnectionActor` per connection (cooldown, lockouts, buckets), one `BreakerActor` per
//!   provider and the `RouterSupervisor`; [`recorder`] — the `Recorder` they all record to
//!   (the fold of every event, the journal's sole appender, snapshots), called in the step
//!   that made the events, not messaged.
//! - [`router::Router`] — the front door: start from a topology and a journal, `route`,
//!   `Decision::report`, `state`, admin operations, reload.
//! - [`topology`] — what the node hands in (providers, connections, combos, settings).
//! - [`admin_state`] — the admin view of the fold; [`pool_forecast`] — its paces and forecasts
//!   (behaviour §13), composed from the fold and the topology.
//! - [`permit`], [`breaker_hint`], [`registry`], [`view`], [`decision`], [`outcome`], [`clock`] — the plumbing
//!   between them; [`tap`] — an optional observer of the journaled events (the node's cluster
//!   sharing).
//!
//! See `docs/runtime-semantics.md` for ordering, call vs cast and what happens on panic.

pub mod actor;
pub mod admin_state;
pub mod breaker_hint;
pub mod clock;
pub mod decision;
mod error;
pub mod group_ledger;
pub mod permit;
pub mod pool_forecast;
pub mod prime_input;
pub mod recorder;
pub mod registry;
pub mod router;
pub mod snapshot;
pub mod spare_now;
pub mod tap;
pub mod view;

pub use policy::{outcome, topology};
/// The pure rules, a crate of their own (`actors/policy/`): `crate::policy::…` reads as before.
pub use quotaroute_policy as policy;

pub use actor::messages::{AffinityKey, AffinityPageQuery, ClientTag, RouteRequest, RoutedTarget};
pub use admin_state::AdminState;
pub use clock::{Clock, ManualClock, SharedClock, SystemClock, TokioClock};
pub use decision::Decision;
pub use error::RouterError;
pub use outcome::{AttemptResult, ClientSpend, Outcome};
pub use permit::Permit;
pub use policy::request::Unroutable;
pub use policy::request_events::RequestEvents;
pub use router::{
    recover_state, recover_state_with, QueuedCount, RecoveryReport, RouteError, Router,
    RouterOptions,
};
pub use tap::EventTap;
pub use topology::{ComboSpec, ConnectionSpec, ProviderSpec, TargetSpec, Topology};
