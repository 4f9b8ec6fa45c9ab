//! The node: quotaroute as an OpenAI- and Anthropic-compatible HTTP gateway in front of the
//! actor system.
//!
//! - [`serve`] — start (bind, replay, route) and stop (drain, `node_stopped`, flush);
//!   [`accept`] — the accept loop (header-read timeout, graceful shutdown).
//! - [`journal_formats`] — refuse a journal from a newer build before sled opens it (§12).
//! - [`seal_secret`] — the node's seal secret: `server.seal_key`, or its own beside the journal (§10).
//! - [`http`] — the small handlers: health, metrics, model list, the 404 (which path is served
//!   by which handler is `crate::routes`, above the node and the dashboard).
//! - [`endpoint`] — the routing endpoints and their formats; [`routed`] — serving them: parse
//!   once, route, try targets as the decision's plan says, answer; [`attempt`] — one try
//!   against one target, with its credential and the same-target retries policy asks for.
//! - [`stored_response`] — the `/v1/responses/{id}` endpoints, sent to the account holding it.
//! - [`gemini_paths`] — Google's client paths (§15): the model from the path, the key from
//!   `x-goog-api-key` / `?key=`; [`google_errors`] — the router's errors in Google's shape;
//!   [`gemini_array`] — a stream asked for without `alt=sse` as one streamed JSON array;
//!   [`gemini_signatures`] — a turn refused for another account's `thoughtSignature`s, again
//!   without them.
//! - [`body_pieces`] — a body read piece by piece, joined once (one piece: no copy).
//! - [`stream_relay`] — SSE: hold until first content, then relay byte for byte;
//!   [`stream_drain`] — a stream the client left, read on (bounded) for its usage;
//!   [`usage_charge`] — what an answer is charged: the upstream's usage checked, or an estimate.
//! - [`upstream_request`] — building one upstream request (the client, egress and body
//!   decoding are the floor below: `crate::upstream`).
//! - [`header_rules`] — which headers cross the router either way; [`cors`] — browser origins.
//! - [`admin`] / [`reload`] — the admin API and config reloads.
//! - [`traffic`] — the attempt counters the dashboard's rate chart reads (the dashboard is its
//!   own wing: `crate::dashboard`); [`combo_affinity`] — each combo's affinity hit rate
//!   since start (held / new / moved turns, cached share of input), never journaled.
//! - [`reply`] — the router's own error bodies and the `x-quotaroute-*` headers
//!   ([`decimal_header`]: their numbers without an allocation);
//!   [`retry_advice`] — a long wait says `x-should-retry: false` and the time in words;
//!   [`plain_errors`] — axum's own plain answers (405, rejections) in that shape too.
//! - [`live`] / [`app`] — the state handlers share; [`metrics`] — Prometheus.
//! - [`client_gate`] — which client a key is, its limits before anything goes upstream, its usage.
//! - [`prime_driver`] — priming windows at each connection's `prime_at` (behaviour §13);
//!   [`prime_plan`] — which connections prime, with which model, and when each last did.
//! - [`timer_floor`] — a timer always pending, so a request's timers cost no runtime unpark;
//!   [`self_wake`] — a connection task's wake-ups of itself repolled in place, not queued;
//!   [`lazy_deadline`] — a read's deadline timer set only when the read must wait.

pub mod accept;
pub mod admin;
pub mod app;
pub mod attempt;
pub mod body_pieces;
pub mod client_gate;
pub mod combo_affinity;
pub mod cors;
pub mod decimal_header;
pub mod direct;
pub mod edge_counters;
pub mod encrypted_turn;
pub mod endpoint;
pub mod gemini_array;
pub mod gemini_paths;
pub mod gemini_signatures;
pub mod google_errors;
pub mod header_rules;
pub mod http;
pub mod journal_formats;
pub mod kept_responses;
pub mod known_key;
pub mod known_uris;
pub mod lazy_deadline;
pub mod live;
pub mod metrics;
pub mod plain_errors;
pub mod prime_driver;
pub mod prime_plan;
pub mod rejection_log;
pub mod reload;
pub mod reply;
pub mod response_store;
pub mod retry_advice;
pub mod routed;
pub mod seal_secret;
pub mod self_wake;
pub mod serve;
pub mod served_apis;
pub mod stop_watch;
pub mod stored_response;
pub mod stream_drain;
pub mod stream_relay;
pub mod timer_floor;
pub mod traffic;
pub mod upstream_request;
pub mod usage_charge;

pub use serve::{NodeError, NodeOptions, RunningNode};
