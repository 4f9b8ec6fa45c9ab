//! The proxy path's pure building blocks (contract "Client API", behaviour §3): reading and
//! rewriting request bodies, parsing upstream SSE, telling what each event means, counting
//! usage and rendering the stream-break event. Nothing here does I/O or reads a clock; the
//! HTTP server drives these.
//!
//! Layout:
//! - `body_rewrite` — find `model` / `stream` / `stream_options` once; splice the upstream model
//!   (and `include_usage`) into the original bytes.
//! - `affinity_group` — which conversation a request belongs to (hints, else the stable
//!   prefix's digest), hashed off the spans the body scan found.
//! - `content_coding` — `Content-Encoding` lists and decoding whole bodies in them.
//! - `sse` — incremental SSE parser that keeps each event's original bytes.
//! - `stream_watch` — per protocol, what an event means (preamble, content, usage, done, error);
//!   `openai_chunk` reads OpenAI chunks for it without building them.
//! - `usage` — token counts from whole JSON responses; `usage_count` reads one count from any
//!   JSON value (flagging bad ones); `usage_check` clamps counts before they are counted.
//! - `content_bytes` — how many bytes of text a content event carries (a left stream's
//!   output estimate); `json_member` finds a member by its key in raw bytes, with any JSON
//!   spacing around its colon, for that and `stream_watch`'s byte checks.
//! - `json_body` — a JSON body read by serde as a `str` when it is UTF-8 (every body reader);
//!   `json_scan` — a strict walk over JSON that reads exactly as serde does or declines.
//! - `stream_error` — the final SSE error event of a committed stream that broke.
//! - `upstream_mask` — masks keys in upstream error bodies passed through to the client.
//! - `item_seal` — the router's seal on encrypted items (the connection that made them);
//!   `encrypted_items` — a request's encrypted items and the body each target gets;
//!   `thought_signatures` — a Gemini request's sealed `thoughtSignature`s, the same;
//!   `foreign_thinking` — a Messages body's thinking blocks a Gemini key made, left out for a
//!   Messages host.

pub mod affinity_group;
pub mod body_rewrite;
pub mod content_bytes;
pub mod content_coding;
pub mod encrypted_items;
pub mod foreign_thinking;
pub mod item_seal;
mod json_body;
mod json_member;
mod json_scan;
pub mod missing_route;
mod openai_chunk;
mod request_scan;
pub mod sse;
pub mod stream_error;
pub mod stream_format;
pub mod stream_watch;
pub mod thought_signatures;
pub mod translate;
pub mod upstream_mask;
pub mod usage;
pub mod usage_check;
pub mod usage_count;

pub use body_rewrite::{parse_request, rewrite, BodyError, RequestInfo};
pub use sse::{SseError, SseEvent, SseParser};
pub use stream_error::{anthropic_stream_error, openai_stream_error};
pub use stream_watch::{classify_event, EventMeaning, StreamFormat, StreamUsage};
pub use upstream_mask::mask_upstream_body;
pub use usage::{is_valid_json, usage_from_json, TokenCounts};
