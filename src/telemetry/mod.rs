//! OpenTelemetry traces (`[telemetry]`): one server span per client request and one client span
//! per upstream attempt, exported over OTLP/HTTP (protobuf) off the request path.
//!
//! Layout:
//! - [`trace_context`] — trace and span ids, the W3C `traceparent` header read and written;
//! - [`sampler`] — which traces are kept: a client's sampled flag, else `sample_ratio`;
//! - [`span`] — [`RequestSpan`] and [`AttemptSpan`], the only API the request path calls: a
//!   handful of calls that do nothing (and allocate nothing) when tracing is off or a trace is
//!   not sampled; a span ends when its last handle is dropped, so a stream's spans end with it;
//! - [`attributes`] — the attribute names (GenAI semantic conventions, `quotaroute.*`) and
//!   values: ids, models, counts and classes, never a key or prompt text;
//! - [`answer_usage`] — the response model and token counts of a whole upstream answer;
//! - [`finished`] — a finished span as typed data, its attributes in order, and a batch of
//!   them in OTLP protobuf;
//! - [`key_value`] — one attribute in OTLP protobuf, the sink that takes a span's attributes,
//!   and a block of attributes many spans share (a provider's), encoded once;
//! - [`protobuf`] — the wire primitives that encoding writes with (attribute keys pre-encoded);
//! - [`export`] — the bounded queue and the batching task that POSTs to the collector: a full
//!   queue or a failed export drops spans (counted in `/metrics`), never waits;
//! - [`tracer`] — [`Tracer`], what the node holds: the sampler and the queue.
//!
//! Knows nothing of routing: the node hands it headers, names and classes.

pub mod answer_usage;
pub mod attributes;
pub mod export;
pub mod finished;
pub mod key_value;
pub mod protobuf;
pub mod sampler;
pub mod span;
pub mod trace_context;
pub mod tracer;

pub use span::{AttemptSpan, RequestSpan};
pub use tracer::Tracer;
