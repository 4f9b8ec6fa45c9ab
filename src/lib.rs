//! quotaroute: the node (config, HTTP, upstream client, CLI, replay) and the embedding facade.
//!
//! # Layout
//!
//! Four crates of the workspace do four jobs: `journal/` (re-exported as [`journal`]) stores
//! and replays events and knows nothing else; `actors/policy/` (`quotaroute-policy`, reached
//! as `actors::policy`) is the pure routing policy — every rule as `state + input + now →
//! events`, one selection (`policy::selection::decide`), the window ids, limits and implicit
//! combo names parsed once — with no runtime, lock or clock among its dependencies;
//! `actors/` (re-exported as [`actors`]) holds the actors that own the policy's state; this
//! crate is the node around them. Two more serve the tests: `tests/mock/` (`quotaroute-mock`),
//! the mock upstream the tests, the bench and `demo` talk to (it imports nothing of the
//! router, and nothing here but the `demo` feature's commands imports it), and `actors/sim/`
//! (`quotaroute-sim`), the deterministic simulator, a dev crate of `actors/`.
//!
//! This crate's folders stand on floors; a file imports only from its own floor's folder or
//! from floors below (`.ci/import-circles.py` finds no import circle between files):
//!
//! ```text
//!  entry        main.rs → cli (arguments), commands (one fn per command), cli_output
//!  composition  routes (which handler serves which path: the node's and the dashboard's),
//!               demo (a node against the mock), journal_verify
//!  wings        dashboard (reads the node's admin state and journal; never imported by it),
//!               replay (the debugger: filters, state-at, summary, --what-if)
//!  the node     node (HTTP edge, routed requests, one attempt, streams, admin, metrics),
//!               cluster (Redis: publisher, tail, leases), credentials (keys from files,
//!               commands, OAuth), clients (who a key is, its limits, its ledger),
//!               telemetry (OTLP spans), config (TOML → Config → the actors' Topology)
//!  shared       timeline (periods and the SVG: replay's and the dashboard's), upstream (a
//!               provider's pooled client, egress, body decoding), api_error (the one error
//!               at the HTTP edge), journal_reader, time_parse, tls_files
//!  pure bytes   wire (body rewrite, SSE, stream meanings, usage, codings, translation, the
//!               one mask)
//!  ──────────── below every floor: actors/ (the actors), actors/policy/ (the pure rules),
//!               journal/ (events, codec, sled)
//! ```
//!
//! The public surface is what embedders and the binary use. Embedders use
//! [`node::RunningNode`] (serving [`routes::routes`]) with a [`config::Config`], or the actors
//! directly ([`actors::Router`], see `examples/embed.rs`); the replay tool is [`replay::run`].
//! The binary (`main.rs`) uses [`cli`], [`commands`] and [`cli_output`]. [`wire`] stays public
//! for the fuzz targets (`fuzz/`), which feed its parsers arbitrary bytes, and [`clients`] for
//! a client key's digest. Everything else — `api_error`, `cluster`, `credentials`,
//! `dashboard`, `demo`, `journal_reader`, `journal_verify`, `telemetry`, `time_parse`,
//! `timeline`, `tls_files`, `upstream` — is private to the crate; the few items of theirs that
//! the black-box tests and the fuzz targets drive are re-exported one by one in [`internals`].

pub use quotaroute_actors as actors;
pub use quotaroute_journal as journal;

mod api_error;
pub mod cli;
pub mod cli_output;
pub mod clients;
mod cluster;
pub mod commands;
pub mod config;
mod credentials;
mod dashboard;
#[cfg(feature = "demo")]
mod demo;
mod journal_reader;
mod journal_verify;
pub mod node;
pub mod replay;
pub mod routes;
mod telemetry;
mod time_parse;
mod timeline;
mod tls_files;
mod upstream;
pub mod wire;

/// Items below the embedding surface that the black-box tests (`tests/it`) and the fuzz
/// targets (`fuzz/checks.rs`) drive directly, one by one: the error kinds the edge answers
/// with, the upstream client and the TLS loader. Not part of the embedding API.
#[doc(hidden)]
pub mod internals {
    pub use crate::api_error::ApiErrorKind;
    pub use crate::tls_files::server_tls;
    pub use crate::upstream::client::UpstreamClient;
}
