//! Streams: hold the client's response until the upstream produced its first content event
//! (failing over cleanly before that), then relay event by event, byte for byte, counting
//! usage; after commit an upstream break becomes one final SSE error event in the client's
//! protocol (behaviour §3). Every relayed byte passes the one mask (`upstream_mask`): the
//! connection's key is masked in every event and an upstream error event is masked like an
//! error body, whole events at a time, so a key split across reads is caught too.
//!
//! - `open` — the opening: read until the first content, or fail over cleanly.
//! - `relay` — the committed stream, event by event, for the client's response body.
//! - `charge` — what charging a stream needs, and what it used so far for a budget.
//! - `report` — the relay's end: what the stream is charged, and its attempt's report (read
//!   on for its usage when the client left).
//! - `schedule` — when the relay reads: bursts gathered into one write, deadlines.

mod charge;
mod open;
mod relay;
mod report;
mod schedule;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_gemini;
#[cfg(test)]
mod tests_translated;

pub use charge::StreamCharge;
pub use open::{open, CommittedStream, StreamStart, StreamTiming};
pub use relay::relay_body;
pub use schedule::remaining;
