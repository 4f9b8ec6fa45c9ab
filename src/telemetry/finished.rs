//! A finished span as plain data, and a batch of them as one OTLP `ExportTraceServiceRequest`
//! in protobuf. The batch is written field by field in one pass (each span's bytes once, every
//! length known, by prost's length functions, before it is written) rather than built as the
//! `opentelemetry-proto` structs first: those cost an owned `String` per attribute key and value
//! and a length computation per nesting level, which was most of what tracing cost a request;
//! and bytes are pushed straight onto the `Vec` (prost's `BufMut` writes copy byte by byte).
//! The tests decode every batch with the `opentelemetry-proto` types and compare it with the
//! same spans built as those structs.

use std::sync::Arc;

use prost::encoding::{encoded_len_varint, key_len, WireType};

use crate::telemetry::attributes::{Attributes, Value};
use crate::telemetry::trace_context::{SpanId, TraceId};

/// A span's name, `{operation} {model}` (GenAI conventions), written out only by the encoder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpanName {
    pub operation: &'static str,
    pub model: Arc<str>,
}

/// Whether a span served a client (the request) or called an upstream (an attempt).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Server,
    Client,
}

#[derive(Debug, Clone)]
pub struct FinishedSpan {
    pub trace_id: TraceId,
    pub span_id: SpanId,
    pub parent: Option<SpanId>,
    /// The parent is the client's span (from its `traceparent`), not one of ours.
    pub remote_parent: bool,
    pub name: SpanName,
    pub kind: Kind,
    pub start_unix_ns: u64,
    pub end_unix_ns: u64,
    pub attributes: Attributes,
    /// Set with `error.type`: the span's status is ERROR.
    pub failed: bool,
}

// Field numbers of opentelemetry/proto/{collector/trace,trace,common,resource}/v1.
const REQUEST_RESOURCE_SPANS: u32 = 1;
const RESOURCE_SPANS_RESOURCE: u32 = 1;
const RESOURCE_SPANS_SCOPE_SPANS: u32 = 2;
const RESOURCE_ATTRIBUTES: u32 = 1;
const SCOPE_SPANS_SCOPE: u32 = 1;
const SCOPE_SPANS_SPANS: u32 = 2;
const SCOPE_NAME: u32 = 1;
const SCOPE_VERSION: u32 = 2;
const SPAN_TRACE_ID: u32 = 1;
const SPAN_SPAN_ID: u32 = 2;
const SPAN_PARENT_SPAN_ID: u32 = 4;
const SPAN_NAME: u32 = 5;
const SPAN_KIND: u32 = 6;
const SPAN_START: u32 = 7;
const SPAN_END: u32 = 8;
const SPAN_ATTRIBUTES: u32 = 9;
const SPAN_STATUS: u32 = 15;
const SPAN_FLAGS: u32 = 16;
const STATUS_CODE: u32 = 3;
const KEY_VALUE_KEY: u32 = 1;
const KEY_VALUE_VALUE: u32 = 2;
const ANY_VALUE_STRING: u32 = 1;
const ANY_VALUE_INT: u32 = 3;
/// `SpanKind` values.
const KIND_SERVER: u64 = 2;
const KIND_CLIENT: u64 = 3;
/// `Status.StatusCode.STATUS_CODE_ERROR`.
const STATUS_ERROR: u64 = 2;

/// The protobuf body of one export of `spans`, as `service_name`.
pub fn encode(spans: Vec<FinishedSpan>, service_name: &str) -> Vec<u8> {
    let mut encoded_spans = Vec::with_capacity(spans.len() * 1024);
    let mut scratch = Vec::with_capacity(1024);
    for span in &spans {
        scratch.clear();
        span_fields(span, &mut scratch);
        message_field(SCOPE_SPANS_SPANS, &scratch, &mut encoded_spans);
    }
    let mut resource = Vec::with_capacity(96);
    key_value(
        RESOURCE_ATTRIBUTES,
        "service.name",
        Scalar::Text(service_name),
        &mut resource,
    );
    let version = Scalar::Text(env!("CARGO_PKG_VERSION"));
    key_value(
        RESOURCE_ATTRIBUTES,
        "service.version",
        version,
        &mut resource,
    );
    let mut scope = Vec::with_capacity(32);
    string_field(SCOPE_NAME, "quotaroute", &mut scope);
    string_field(SCOPE_VERSION, env!("CARGO_PKG_VERSION"), &mut scope);

    let scope_spans_len = field_len(SCOPE_SPANS_SCOPE, scope.len()) + encoded_spans.len();
    let resource_spans_len = field_len(RESOURCE_SPANS_RESOURCE, resource.len())
        + field_len(RESOURCE_SPANS_SCOPE_SPANS, scope_spans_len);
    let mut out = Vec::with_capacity(field_len(REQUEST_RESOURCE_SPANS, resource_spans_len));
    message_header(REQUEST_RESOURCE_SPANS, resource_spans_len, &mut out);
    message_field(RESOURCE_SPANS_RESOURCE, &resource, &mut out);
    message_header(RESOURCE_SPANS_SCOPE_SPANS, scope_spans_len, &mut out);
    message_field(SCOPE_SPANS_SCOPE, &scope, &mut out);
    out.extend_from_slice(&encoded_spans);
    out
}

fn span_fields(span: &FinishedSpan, buf: &mut Vec<u8>) {
    bytes_field(SPAN_TRACE_ID, &span.trace_id.0, buf);
    bytes_field(SPAN_SPAN_ID, &span.span_id.0, buf);
    if let Some(parent) = span.parent {
        bytes_field(SPAN_PARENT_SPAN_ID, &parent.0, buf);
    }
    let name = &span.name;
    message_header(SPAN_NAME, name.operation.len() + 1 + name.model.len(), buf);
    buf.extend_from_slice(name.operation.as_bytes());
    buf.push(b' ');
    buf.extend_from_slice(name.model.as_bytes());
    let kind = match span.kind {
        Kind::Server => KIND_SERVER,
        Kind::Client => KIND_CLIENT,
    };
    varint_field(SPAN_KIND, kind, buf);
    encode_key(SPAN_START, WireType::SixtyFourBit, buf);
    buf.extend_from_slice(&span.start_unix_ns.to_le_bytes());
    encode_key(SPAN_END, WireType::SixtyFourBit, buf);
    buf.extend_from_slice(&span.end_unix_ns.max(span.start_unix_ns).to_le_bytes());
    for (key, value) in &span.attributes {
        key_value(SPAN_ATTRIBUTES, key, Scalar::of(value), buf);
    }
    if span.failed {
        let status_len = key_len(STATUS_CODE) + encoded_len_varint(STATUS_ERROR);
        message_header(SPAN_STATUS, status_len, buf);
        varint_field(STATUS_CODE, STATUS_ERROR, buf);
    }
    // The W3C flags (sampled), and whether the parent is remote: 0x100 says it is known,
    // 0x200 that it is (OTLP 1.1 span flags).
    let flags: u32 = 0x001 | 0x100 | if span.remote_parent { 0x200 } else { 0 };
    encode_key(SPAN_FLAGS, WireType::ThirtyTwoBit, buf);
    buf.extend_from_slice(&flags.to_le_bytes());
}

/// An attribute value as the wire writes it.
#[derive(Clone, Copy)]
enum Scalar<'a> {
    Text(&'a str),
    Int(i64),
}

impl<'a> Scalar<'a> {
    fn of(value: &'a Value) -> Self {
        match value {
            Value::Static(text) => Scalar::Text(text),
            Value::Text(text) => Scalar::Text(text),
            Value::Shared(text) => Scalar::Text(text),
            Value::Int(n) => Scalar::Int(*n),
        }
    }
}

/// A `KeyValue` as field `tag`: `{key, value: AnyValue{string_value | int_value}}`.
fn key_value(tag: u32, key: &str, value: Scalar<'_>, buf: &mut Vec<u8>) {
    // int64 is written as the two's complement varint.
    let any_len = match value {
        Scalar::Text(text) => string_len(ANY_VALUE_STRING, text),
        Scalar::Int(n) => key_len(ANY_VALUE_INT) + encoded_len_varint(n as u64),
    };
    let len = string_len(KEY_VALUE_KEY, key) + field_len(KEY_VALUE_VALUE, any_len);
    message_header(tag, len, buf);
    string_field(KEY_VALUE_KEY, key, buf);
    message_header(KEY_VALUE_VALUE, any_len, buf);
    match value {
        Scalar::Text(text) => string_field(ANY_VALUE_STRING, text, buf),
        Scalar::Int(n) => varint_field(ANY_VALUE_INT, n as u64, buf),
    }
}

/// The bytes a length-delimited field of `len` bytes takes, key and length included.
fn field_len(tag: u32, len: usize) -> usize {
    key_len(tag) + encoded_len_varint(len as u64) + len
}

fn string_len(tag: u32, text: &str) -> usize {
    field_len(tag, text.len())
}

fn message_header(tag: u32, len: usize, buf: &mut Vec<u8>) {
    encode_key(tag, WireType::LengthDelimited, buf);
    encode_varint(len as u64, buf);
}

fn message_field(tag: u32, body: &[u8], buf: &mut Vec<u8>) {
    message_header(tag, body.len(), buf);
    buf.extend_from_slice(body);
}

fn bytes_field(tag: u32, bytes: &[u8], buf: &mut Vec<u8>) {
    message_field(tag, bytes, buf);
}

fn string_field(tag: u32, text: &str, buf: &mut Vec<u8>) {
    message_field(tag, text.as_bytes(), buf);
}

fn encode_key(tag: u32, wire_type: WireType, buf: &mut Vec<u8>) {
    encode_varint((u64::from(tag) << 3) | wire_type as u64, buf);
}

/// A base-128 varint, low group first.
fn encode_varint(mut value: u64, buf: &mut Vec<u8>) {
    while value >= 0x80 {
        buf.push((value as u8) | 0x80);
        value >>= 7;
    }
    buf.push(value as u8);
}

fn varint_field(tag: u32, value: u64, buf: &mut Vec<u8>) {
    encode_key(tag, WireType::Varint, buf);
    encode_varint(value, buf);
}

#[cfg(test)]
mod tests {
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use opentelemetry_proto::tonic::common::v1::{
        any_value, AnyValue, InstrumentationScope, KeyValue,
    };
    use opentelemetry_proto::tonic::resource::v1::Resource;
    use opentelemetry_proto::tonic::trace::v1::{
        span, status, ResourceSpans, ScopeSpans, Span, Status,
    };
    use prost::Message;

    use super::*;

    /// The same batch built as the `opentelemetry-proto` structs: what `encode` must equal.
    fn reference(spans: Vec<FinishedSpan>, service_name: &str) -> ExportTraceServiceRequest {
        let kv = |key: &str, value: Value| KeyValue {
            key: key.to_owned(),
            value: Some(AnyValue {
                value: Some(match value {
                    Value::Static(text) => any_value::Value::StringValue(text.to_owned()),
                    Value::Text(text) => any_value::Value::StringValue(text),
                    Value::Shared(text) => any_value::Value::StringValue(text.to_string()),
                    Value::Int(n) => any_value::Value::IntValue(n),
                }),
            }),
            ..KeyValue::default()
        };
        ExportTraceServiceRequest {
            resource_spans: vec![ResourceSpans {
                resource: Some(Resource {
                    attributes: vec![
                        kv("service.name", Value::Text(service_name.to_owned())),
                        kv("service.version", Value::Static(env!("CARGO_PKG_VERSION"))),
                    ],
                    ..Resource::default()
                }),
                scope_spans: vec![ScopeSpans {
                    scope: Some(InstrumentationScope {
                        name: "quotaroute".to_owned(),
                        version: env!("CARGO_PKG_VERSION").to_owned(),
                        ..InstrumentationScope::default()
                    }),
                    spans: spans
                        .into_iter()
                        .map(|finished| Span {
                            trace_id: finished.trace_id.0.to_vec(),
                            span_id: finished.span_id.0.to_vec(),
                            parent_span_id: finished
                                .parent
                                .map(|parent| parent.0.to_vec())
                                .unwrap_or_default(),
                            flags: 0x001 | 0x100 | if finished.remote_parent { 0x200 } else { 0 },
                            name: format!("{} {}", finished.name.operation, finished.name.model),
                            kind: match finished.kind {
                                Kind::Server => span::SpanKind::Server as i32,
                                Kind::Client => span::SpanKind::Client as i32,
                            },
                            start_time_unix_nano: finished.start_unix_ns,
                            end_time_unix_nano: finished.end_unix_ns.max(finished.start_unix_ns),
                            attributes: finished
                                .attributes
                                .into_iter()
                                .map(|(key, value)| kv(key, value))
                                .collect(),
                            status: finished.failed.then(|| Status {
                                code: status::StatusCode::Error as i32,
                                message: String::new(),
                            }),
                            ..Span::default()
                        })
                        .collect(),
                    schema_url: String::new(),
                }],
                schema_url: String::new(),
            }],
        }
    }

    fn span(
        seed: u8,
        failed: bool,
        parent: Option<SpanId>,
        attributes: Attributes,
    ) -> FinishedSpan {
        FinishedSpan {
            trace_id: TraceId([seed; 16]),
            span_id: SpanId([seed.wrapping_add(1); 8]),
            parent,
            remote_parent: parent.is_some() && seed.is_multiple_of(2),
            name: SpanName {
                operation: "chat",
                model: Arc::from(format!("model-{seed}")),
            },
            kind: if seed.is_multiple_of(2) {
                Kind::Server
            } else {
                Kind::Client
            },
            start_unix_ns: 1_764_000_000_000_000_000 + u64::from(seed),
            end_unix_ns: 1_764_000_000_250_000_000,
            attributes,
            failed,
        }
    }

    #[test]
    fn a_batch_decodes_as_the_same_spans_built_as_opentelemetry_proto_structs() {
        let attributes = |n: i64| -> Attributes {
            vec![
                ("gen_ai.operation.name", Value::Static("chat")),
                ("gen_ai.request.model", Value::Text("gpt-4o-mini".into())),
                ("quotaroute.connection", Value::Shared(Arc::from("oa-1"))),
                ("gen_ai.usage.input_tokens", Value::Int(n)),
                ("http.response.status_code", Value::Int(200)),
                ("big", Value::Int(i64::MAX)),
                ("negative", Value::Int(-5)),
                ("long", Value::Text("x".repeat(300))),
            ]
        };
        let spans = vec![
            span(2, false, None, attributes(19)),
            span(3, true, Some(SpanId([9; 8])), attributes(0)),
            span(4, true, Some(SpanId([7; 8])), Vec::new()),
            FinishedSpan {
                end_unix_ns: 0,
                ..span(5, false, None, attributes(1 << 40))
            },
        ];
        for batch in [spans.clone(), spans[..1].to_vec(), Vec::new()] {
            let bytes = encode(batch.clone(), "quotaroute-test");
            let decoded = ExportTraceServiceRequest::decode(bytes.as_slice()).expect("decodes");
            assert_eq!(decoded, reference(batch.clone(), "quotaroute-test"));
            // And byte for byte what prost writes for those structs (same field order).
            assert_eq!(bytes, reference(batch, "quotaroute-test").encode_to_vec());
        }
    }
}
