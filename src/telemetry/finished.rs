//! A finished span as typed data (what a request or an attempt recorded, no attribute list
//! built per span), the one place that lists its attributes in order
//! ([`FinishedSpan::each_attribute`]), and a batch of them as one OTLP
//! `ExportTraceServiceRequest` in protobuf, written straight into one buffer: attribute names
//! pre-encoded ([`AttributeKey`]), every length either known from the value or written after
//! the body. The tests decode every batch with the `opentelemetry-proto` types and compare it,
//! byte for byte, with what prost writes for the same spans built as those structs.

use std::sync::Arc;

use crate::telemetry::answer_usage::AnswerUsage;
use crate::telemetry::attributes::{self as attr, Value};
use crate::telemetry::key_value::{put_attribute, AttributeBlock, AttributeSink, SPAN_ATTRIBUTES};
use crate::telemetry::protobuf::{
    begin_message, end_message, field_key, field_len, put_header, AttributeKey, FIXED32, FIXED64,
    LENGTH_DELIMITED, VARINT,
};
use crate::telemetry::trace_context::{SpanId, TraceId};

#[derive(Debug, Clone)]
pub struct FinishedSpan {
    pub trace_id: TraceId,
    pub span_id: SpanId,
    pub parent: Option<SpanId>,
    /// The parent is the client's span (from its `traceparent`), not one of ours.
    pub remote_parent: bool,
    /// The GenAI operation (`chat`, `embeddings`, …); with `model` it names the span.
    pub operation: &'static str,
    /// A request's: the model the client asked for; an attempt's: the model its target was
    /// asked for.
    pub model: Arc<str>,
    pub start_unix_ns: u64,
    pub end_unix_ns: u64,
    pub usage: AnswerUsage,
    pub status: Option<u16>,
    /// `error.type`: set, the span's status is ERROR.
    pub error: Option<ErrorType>,
    pub role: Role,
}

/// What only one kind of span records.
#[derive(Debug, Clone)]
pub enum Role {
    /// The server span of a client request.
    Request {
        /// Who sent it (`default` when it was answered before routing).
        client: Option<Arc<str>>,
        affinity: &'static str,
        attempts: Option<u64>,
    },
    /// The client span of one upstream request.
    Attempt {
        connection: Arc<str>,
        /// Its provider's attributes ([`provider_attributes`]).
        provider: Arc<AttributeBlock>,
    },
}

/// A span's `error.type`: a class (behaviour §4), or the status of an error answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorType {
    Class(&'static str),
    Status(u16),
}

impl FinishedSpan {
    /// Hands each attribute to `sink`, in the order the span carries them. Inlined, so the
    /// encoder's sink sees each key as a constant.
    #[inline(always)]
    pub fn each_attribute(&self, sink: &mut impl AttributeSink) {
        sink.put(&attr::OPERATION_NAME, Value::Text(self.operation));
        sink.put(&attr::REQUEST_MODEL, Value::Text(&self.model));
        let usage = &self.usage;
        if let Some(model) = &usage.model {
            sink.put(&attr::RESPONSE_MODEL, Value::Text(model));
        }
        if let Some(count) = usage.input_tokens {
            sink.put(&attr::INPUT_TOKENS, Value::from(count));
        }
        if let Some(count) = usage.output_tokens {
            sink.put(&attr::OUTPUT_TOKENS, Value::from(count));
        }
        if let Some(count) = usage.cache_read_input_tokens {
            sink.put(&attr::CACHE_READ_INPUT_TOKENS, Value::from(count));
        }
        match &self.role {
            Role::Request {
                client,
                affinity,
                attempts,
            } => {
                sink.put(&attr::COMBO, Value::Text(&self.model));
                sink.put(
                    &attr::CLIENT,
                    Value::Text(client.as_deref().unwrap_or(attr::DEFAULT_CLIENT)),
                );
                sink.put(&attr::AFFINITY, Value::Text(affinity));
                if let Some(attempts) = *attempts {
                    sink.put(&attr::ATTEMPTS, Value::from(attempts));
                }
                if let Some(status) = self.status {
                    sink.put(&attr::STATUS_CODE, Value::Int(i64::from(status)));
                }
            }
            Role::Attempt {
                connection,
                provider,
            } => {
                sink.put_block(provider);
                sink.put(&attr::CONNECTION, Value::Text(connection));
                if let Some(status) = self.status {
                    sink.put(&attr::STATUS_CODE, Value::Int(i64::from(status)));
                }
            }
        }
        match self.error {
            Some(ErrorType::Class(class)) => sink.put(&attr::ERROR_TYPE, Value::Text(class)),
            Some(ErrorType::Status(status)) => {
                let digits = Decimal::of(status);
                sink.put(&attr::ERROR_TYPE, Value::Text(digits.as_str()));
            }
            None => {}
        }
    }

    fn is_server(&self) -> bool {
        matches!(self.role, Role::Request { .. })
    }
}

/// What every attempt span to one provider says of it, encoded once per config load: the
/// server's host and port (`server.address`, `server.port`) and the provider's id.
pub fn provider_attributes(provider: &str, address: Option<(&str, u16)>) -> AttributeBlock {
    let server = address.into_iter().flat_map(|(host, port)| {
        [
            (&attr::SERVER_ADDRESS, Value::Text(host)),
            (&attr::SERVER_PORT, Value::Int(i64::from(port))),
        ]
    });
    AttributeBlock::new(server.chain([(&attr::PROVIDER, Value::Text(provider))]))
}

/// A `u16` in decimal, on the stack.
struct Decimal {
    digits: [u8; 5],
    start: usize,
}

impl Decimal {
    fn of(mut n: u16) -> Self {
        let mut digits = [b'0'; 5];
        let mut start = digits.len();
        loop {
            start -= 1;
            digits[start] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                return Decimal { digits, start };
            }
        }
    }

    fn as_str(&self) -> &str {
        std::str::from_utf8(&self.digits[self.start..]).unwrap_or_default()
    }
}

// Field keys of opentelemetry/proto/{collector/trace,trace,common,resource}/v1.
const REQUEST_RESOURCE_SPANS: u8 = field_key(1, LENGTH_DELIMITED);
const RESOURCE_SPANS_RESOURCE: u8 = field_key(1, LENGTH_DELIMITED);
const RESOURCE_SPANS_SCOPE_SPANS: u8 = field_key(2, LENGTH_DELIMITED);
const RESOURCE_ATTRIBUTES: u8 = field_key(1, LENGTH_DELIMITED);
const SCOPE_SPANS_SCOPE: u8 = field_key(1, LENGTH_DELIMITED);
const SCOPE_SPANS_SPANS: u8 = field_key(2, LENGTH_DELIMITED);
const SCOPE_NAME: u8 = field_key(1, LENGTH_DELIMITED);
const SCOPE_VERSION: u8 = field_key(2, LENGTH_DELIMITED);
const SPAN_TRACE_ID: u8 = field_key(1, LENGTH_DELIMITED);
const SPAN_SPAN_ID: u8 = field_key(2, LENGTH_DELIMITED);
const SPAN_PARENT_SPAN_ID: u8 = field_key(4, LENGTH_DELIMITED);
const SPAN_NAME: u8 = field_key(5, LENGTH_DELIMITED);
const SPAN_KIND: u8 = field_key(6, VARINT);
const SPAN_START: u8 = field_key(7, FIXED64);
const SPAN_END: u8 = field_key(8, FIXED64);
const SPAN_STATUS: u8 = field_key(15, LENGTH_DELIMITED);
/// Field 16 (`flags`, fixed32): a key of two bytes.
const SPAN_FLAGS: [u8; 2] = [(16 << 3 | FIXED32) | 0x80, 1];
const STATUS_CODE: u8 = field_key(3, VARINT);
/// `SpanKind` values.
const KIND_SERVER: u8 = 2;
const KIND_CLIENT: u8 = 3;
/// `Status.StatusCode.STATUS_CODE_ERROR`.
const STATUS_ERROR: u8 = 2;

/// What a span usually takes, to size a batch's buffer (one that takes more grows it).
const TYPICAL_SPAN_BYTES: usize = 640;

/// The protobuf body of one export of `spans`, as `service_name` (the tests' one-shot form of
/// [`encode_into`]).
#[cfg(test)]
pub fn encode(spans: &[FinishedSpan], service_name: &str) -> bytes::Bytes {
    let mut out = Vec::new();
    let start = encode_into(spans, service_name, &mut out);
    bytes::Bytes::from(out).slice(start..)
}

/// Writes the protobuf body of one export of `spans` into `out` (emptied first, its capacity
/// reused) and returns where in it the body starts. The spans are written once, after room for
/// the batch's header (whose lengths need theirs), and the header is written into the end of
/// that room: the body is never copied.
pub fn encode_into(spans: &[FinishedSpan], service_name: &str, out: &mut Vec<u8>) -> usize {
    let mut resource = Vec::with_capacity(96);
    put_attribute(
        RESOURCE_ATTRIBUTES,
        &attr::SERVICE_NAME,
        Value::Text(service_name),
        &mut resource,
    );
    put_attribute(
        RESOURCE_ATTRIBUTES,
        &attr::SERVICE_VERSION,
        Value::Text(env!("CARGO_PKG_VERSION")),
        &mut resource,
    );
    let mut scope = Vec::with_capacity(32);
    put_bytes(SCOPE_NAME, b"quotaroute", &mut scope);
    put_bytes(
        SCOPE_VERSION,
        env!("CARGO_PKG_VERSION").as_bytes(),
        &mut scope,
    );
    // Two nesting levels with a key and at most ten bytes of length each, then these two.
    let room = 2 * (1 + 10) + field_len(resource.len()) + field_len(scope.len());

    out.clear();
    out.reserve(room + spans.len() * TYPICAL_SPAN_BYTES);
    out.resize(room, 0);
    for span in spans {
        put_span(span, out);
    }
    let scope_spans_len = field_len(scope.len()) + (out.len() - room);
    let resource_spans_len = field_len(resource.len()) + field_len(scope_spans_len);
    let mut header = Vec::with_capacity(room);
    put_header(REQUEST_RESOURCE_SPANS, resource_spans_len, &mut header);
    put_bytes(RESOURCE_SPANS_RESOURCE, &resource, &mut header);
    put_header(RESOURCE_SPANS_SCOPE_SPANS, scope_spans_len, &mut header);
    put_bytes(SCOPE_SPANS_SCOPE, &scope, &mut header);
    let start = room - header.len();
    out[start..room].copy_from_slice(&header);
    start
}

/// `span` as `ScopeSpans` field 2 (`spans`).
fn put_span(span: &FinishedSpan, buf: &mut Vec<u8>) {
    let body_start = begin_message(SCOPE_SPANS_SPANS, buf);
    buf.extend_from_slice(&[SPAN_TRACE_ID, 16]);
    buf.extend_from_slice(&span.trace_id.0);
    buf.extend_from_slice(&[SPAN_SPAN_ID, 8]);
    buf.extend_from_slice(&span.span_id.0);
    if let Some(parent) = span.parent {
        buf.extend_from_slice(&[SPAN_PARENT_SPAN_ID, 8]);
        buf.extend_from_slice(&parent.0);
    }
    put_header(SPAN_NAME, span.operation.len() + 1 + span.model.len(), buf);
    buf.extend_from_slice(span.operation.as_bytes());
    buf.push(b' ');
    buf.extend_from_slice(span.model.as_bytes());
    let kind = if span.is_server() {
        KIND_SERVER
    } else {
        KIND_CLIENT
    };
    let mut times = [0u8; 20];
    times[0] = SPAN_KIND;
    times[1] = kind;
    times[2] = SPAN_START;
    times[3..11].copy_from_slice(&span.start_unix_ns.to_le_bytes());
    times[11] = SPAN_END;
    let end = span.end_unix_ns.max(span.start_unix_ns);
    times[12..20].copy_from_slice(&end.to_le_bytes());
    buf.extend_from_slice(&times);
    span.each_attribute(&mut SpanAttributes(buf));
    if span.error.is_some() {
        buf.extend_from_slice(&[SPAN_STATUS, 2, STATUS_CODE, STATUS_ERROR]);
    }
    // The W3C flags (sampled), and whether the parent is remote: 0x100 says it is known,
    // 0x200 that it is (OTLP 1.1 span flags).
    let flags: u32 = 0x001 | 0x100 | if span.remote_parent { 0x200 } else { 0 };
    let [a, b, c, d] = flags.to_le_bytes();
    buf.extend_from_slice(&[SPAN_FLAGS[0], SPAN_FLAGS[1], a, b, c, d]);
    end_message(body_start, buf);
}

/// The encoder's [`AttributeSink`]: each attribute as `Span` field 9, written in place.
struct SpanAttributes<'a>(&'a mut Vec<u8>);

impl AttributeSink for SpanAttributes<'_> {
    #[inline(always)]
    fn put(&mut self, key: &'static AttributeKey, value: Value<'_>) {
        put_attribute(SPAN_ATTRIBUTES, key, value, self.0);
    }

    fn put_block(&mut self, block: &AttributeBlock) {
        self.0.extend_from_slice(block.encoded());
    }
}

fn put_bytes(key: u8, bytes: &[u8], buf: &mut Vec<u8>) {
    put_header(key, bytes.len(), buf);
    buf.extend_from_slice(bytes);
}

#[cfg(test)]
mod tests {
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use opentelemetry_proto::tonic::common::v1::InstrumentationScope;
    use opentelemetry_proto::tonic::resource::v1::Resource;
    use opentelemetry_proto::tonic::trace::v1::{
        span, status, ResourceSpans, ScopeSpans, Span, Status,
    };
    use prost::Message;

    use super::*;
    use crate::telemetry::key_value::kv;

    /// The same batch built as the `opentelemetry-proto` structs: what `encode` must equal.
    fn reference(spans: &[FinishedSpan], service_name: &str) -> ExportTraceServiceRequest {
        let to_span = |finished: &FinishedSpan| {
            let mut attributes = Vec::new();
            finished.each_attribute(&mut |key: &'static AttributeKey, value: Value<'_>| {
                attributes.push(kv(key.name, value))
            });
            Span {
                trace_id: finished.trace_id.0.to_vec(),
                span_id: finished.span_id.0.to_vec(),
                parent_span_id: finished
                    .parent
                    .map(|parent| parent.0.to_vec())
                    .unwrap_or_default(),
                flags: 0x001 | 0x100 | if finished.remote_parent { 0x200 } else { 0 },
                name: format!("{} {}", finished.operation, finished.model),
                kind: if finished.is_server() {
                    span::SpanKind::Server as i32
                } else {
                    span::SpanKind::Client as i32
                },
                start_time_unix_nano: finished.start_unix_ns,
                end_time_unix_nano: finished.end_unix_ns.max(finished.start_unix_ns),
                attributes,
                status: finished.error.is_some().then(|| Status {
                    code: status::StatusCode::Error as i32,
                    message: String::new(),
                }),
                ..Span::default()
            }
        };
        ExportTraceServiceRequest {
            resource_spans: vec![ResourceSpans {
                resource: Some(Resource {
                    attributes: vec![
                        kv("service.name", Value::Text(service_name)),
                        kv("service.version", Value::Text(env!("CARGO_PKG_VERSION"))),
                    ],
                    ..Resource::default()
                }),
                scope_spans: vec![ScopeSpans {
                    scope: Some(InstrumentationScope {
                        name: "quotaroute".to_owned(),
                        version: env!("CARGO_PKG_VERSION").to_owned(),
                        ..InstrumentationScope::default()
                    }),
                    spans: spans.iter().map(to_span).collect(),
                    schema_url: String::new(),
                }],
                schema_url: String::new(),
            }],
        }
    }

    fn span(seed: u8, parent: Option<SpanId>, role: Role) -> FinishedSpan {
        FinishedSpan {
            trace_id: TraceId([seed; 16]),
            span_id: SpanId([seed.wrapping_add(1); 8]),
            parent,
            remote_parent: parent.is_some() && seed.is_multiple_of(2),
            operation: "chat",
            model: Arc::from(format!("model-{seed}")),
            start_unix_ns: 1_764_000_000_000_000_000 + u64::from(seed),
            end_unix_ns: 1_764_000_000_250_000_000,
            usage: AnswerUsage::default(),
            status: None,
            error: None,
            role,
        }
    }

    fn request(client: Option<&str>, attempts: Option<u64>) -> Role {
        Role::Request {
            client: client.map(Arc::from),
            affinity: "new",
            attempts,
        }
    }

    fn attempt(address: Option<(&str, u16)>) -> Role {
        Role::Attempt {
            connection: Arc::from("oa-1"),
            provider: Arc::new(provider_attributes("openai", address)),
        }
    }

    #[test]
    fn a_batch_decodes_as_the_same_spans_built_as_opentelemetry_proto_structs() {
        let usage = |n: u64| AnswerUsage {
            model: Some(Arc::from("gpt-4o-mini-2024-07-18")),
            input_tokens: Some(n),
            output_tokens: Some(u64::MAX),
            cache_read_input_tokens: Some(0),
        };
        let spans = [
            FinishedSpan {
                usage: usage(19),
                status: Some(200),
                ..span(2, None, request(Some("team-a"), Some(1)))
            },
            FinishedSpan {
                status: Some(503),
                error: Some(ErrorType::Class("server_error")),
                ..span(
                    3,
                    Some(SpanId([9; 8])),
                    attempt(Some(("api.openai.com", 443))),
                )
            },
            FinishedSpan {
                status: Some(429),
                error: Some(ErrorType::Status(429)),
                ..span(4, Some(SpanId([7; 8])), request(None, None))
            },
            FinishedSpan {
                end_unix_ns: 0,
                usage: usage(1 << 40),
                ..span(5, None, attempt(None))
            },
            // Past 16,383 bytes: the span's length takes three bytes.
            FinishedSpan {
                model: Arc::from("m".repeat(20_000)),
                usage: AnswerUsage {
                    model: Some(Arc::from("x".repeat(300))),
                    ..AnswerUsage::default()
                },
                error: Some(ErrorType::Status(7)),
                ..span(6, None, request(Some("c"), Some(3)))
            },
        ];
        for batch in [&spans[..], &spans[..1], &spans[4..], &[]] {
            let bytes = encode(batch, "quotaroute-test");
            let decoded = ExportTraceServiceRequest::decode(bytes.clone()).expect("decodes");
            assert_eq!(decoded, reference(batch, "quotaroute-test"));
            // And byte for byte what prost writes for those structs (same field order).
            assert_eq!(bytes, reference(batch, "quotaroute-test").encode_to_vec());
        }
        // Into a buffer that held a longer export: the same body, nothing of the old one.
        let mut reused = Vec::new();
        encode_into(&spans, "quotaroute-test", &mut reused);
        let start = encode_into(&spans[..1], "quotaroute-test", &mut reused);
        assert_eq!(reused[start..], encode(&spans[..1], "quotaroute-test")[..]);
    }

    #[test]
    fn each_kind_of_span_lists_its_attributes_in_order() {
        let names = |span: &FinishedSpan| {
            let mut names = Vec::new();
            span.each_attribute(&mut |key: &'static AttributeKey, value: Value<'_>| {
                names.push(format!("{}={value:?}", key.name))
            });
            names
        };
        let served = FinishedSpan {
            status: Some(502),
            error: Some(ErrorType::Status(502)),
            ..span(2, None, request(None, Some(2)))
        };
        assert_eq!(
            names(&served),
            [
                "gen_ai.operation.name=Text(\"chat\")",
                "gen_ai.request.model=Text(\"model-2\")",
                "quotaroute.combo=Text(\"model-2\")",
                "quotaroute.client=Text(\"default\")",
                "quotaroute.affinity=Text(\"new\")",
                "quotaroute.attempts=Int(2)",
                "http.response.status_code=Int(502)",
                "error.type=Text(\"502\")",
            ]
        );
        let tried = FinishedSpan {
            usage: AnswerUsage {
                output_tokens: Some(4),
                ..AnswerUsage::default()
            },
            status: Some(200),
            ..span(3, None, attempt(Some(("h", 8080))))
        };
        assert_eq!(
            names(&tried),
            [
                "gen_ai.operation.name=Text(\"chat\")",
                "gen_ai.request.model=Text(\"model-3\")",
                "gen_ai.usage.output_tokens=Int(4)",
                "server.address=Text(\"h\")",
                "server.port=Int(8080)",
                "quotaroute.provider=Text(\"openai\")",
                "quotaroute.connection=Text(\"oa-1\")",
                "http.response.status_code=Int(200)",
            ]
        );
    }
}
