//! One upstream try against one target (behaviour §3, §4), one concept per file:
//! - [`shape`] — what a try needs ([`TryContext`]), how it ended ([`Attempted`]), what a failed
//!   one leaves for the final answer ([`LastFailure`]);
//! - `outgoing` — the try's request: the spliced or translated body, the target's items, the
//!   credential;
//! - `local_answer` — answers given without sending (a refused translation, a local count);
//! - [`try_target`] — the target tried, and tried again while policy's same-target rules say
//!   so (a refreshed credential, encrypted items or thinking left out);
//! - `send` — one upstream request of it and where the answer goes;
//! - `stream_start` — a stream opened until its first content;
//! - `whole_body` + `answer` — a whole answer read, decoded and classified;
//! - [`charge`] — a success's usage measured, and the client billed where the plan delivers.

mod answer;
pub(crate) mod charge;
mod local_answer;
mod outgoing;
mod send;
pub(crate) mod shape;
mod stream_start;
pub(crate) mod try_target;
mod whole_body;

pub(crate) use shape::{Attempted, LastFailure, Payload, TryContext};
pub(crate) use try_target::try_target;
