//! The node: quotaroute as an OpenAI- and Anthropic-compatible HTTP gateway in front of the
//! actor system.
//!
//! - [`serve`] — start (bind, replay, route) and stop (drain, `node_stopped`, flush);
//!   [`accept`] — the accept loop (header-read timeout, graceful shutdown).
//! - [`journal_formats`] — refuse a journal from a newer build before sled opens it (§12).
//! - [`http`] — which path is served by which handler; health, metrics, model list.
//! - [`endpoint`] — the routing endpoints and their formats; [`proxy`] — serving them: parse
//!   once, route, try targets, fail over, answer; [`attempt`] — one try against one target;
//!   [`credential_retry`] — its credential, and one refresh-and-retry after a 401.
//! - [`stored_response`] — the `/v1/responses/{id}` endpoints, sent to the account holding it.
//! - [`stream_relay`] — SSE: hold until first content, then relay byte for byte.
//! - [`upstream`] / [`upstream_request`] — a provider's pooled client and building one upstream
//!   request; [`egress`] — trusted roots, egress proxies and naming their failures;
//!   [`upstream_body`] — an upstream body, decoded as it arrives when it is compressed.
//! - [`header_rules`] — which headers cross the router either way; [`cors`] — browser origins.
//! - [`admin`] / [`reload`] — the admin API and config reloads.
//! - [`ui`] — the operator's dashboard page (`GET /ui`); [`ui_events`] — its live feed
//!   (`/admin/events`); [`ui_timeline`] — its incident picture (`/admin/timeline.svg`);
//!   [`traffic`] — the attempt counters its rate chart reads.
//! - [`reply`] — the router's own error bodies and the `x-quotaroute-*` headers.
//! - [`live`] / [`app`] — the state handlers share; [`metrics`] — Prometheus.

pub mod accept;
pub mod admin;
pub mod app;
pub mod attempt;
pub mod cors;
pub mod credential_retry;
pub mod egress;
pub mod endpoint;
pub mod header_rules;
pub mod http;
pub mod journal_formats;
pub mod live;
pub mod metrics;
pub mod proxy;
pub mod reload;
pub mod reply;
pub mod serve;
pub mod stored_response;
pub mod stream_relay;
pub mod traffic;
pub mod ui;
pub mod ui_events;
pub mod ui_timeline;
pub mod upstream;
pub mod upstream_body;
pub mod upstream_request;

pub use serve::{NodeError, NodeOptions, RunningNode};
