//! A finished span as plain data, and a batch of them as one OTLP `ExportTraceServiceRequest`
//! (protobuf, the `opentelemetry-proto` types).

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, InstrumentationScope, KeyValue};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{
    span, status, ResourceSpans, ScopeSpans, Span, Status,
};
use prost::Message;

use crate::telemetry::attributes::{Attributes, Value};
use crate::telemetry::trace_context::{SpanId, TraceId};

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
    pub name: String,
    pub kind: Kind,
    pub start_unix_ns: u64,
    pub end_unix_ns: u64,
    pub attributes: Attributes,
    /// Set with `error.type`: the span's status is ERROR.
    pub failed: bool,
}

/// The protobuf body of one export of `spans`, as `service_name`.
pub fn encode(spans: Vec<FinishedSpan>, service_name: &str) -> Vec<u8> {
    let resource = Resource {
        attributes: vec![
            key_value("service.name", Value::Text(service_name.to_owned())),
            key_value("service.version", Value::Static(env!("CARGO_PKG_VERSION"))),
        ],
        ..Resource::default()
    };
    let scope = InstrumentationScope {
        name: "quotaroute".to_owned(),
        version: env!("CARGO_PKG_VERSION").to_owned(),
        ..InstrumentationScope::default()
    };
    let request = ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(resource),
            scope_spans: vec![ScopeSpans {
                scope: Some(scope),
                spans: spans.into_iter().map(to_proto).collect(),
                schema_url: String::new(),
            }],
            schema_url: String::new(),
        }],
    };
    request.encode_to_vec()
}

fn to_proto(finished: FinishedSpan) -> Span {
    Span {
        trace_id: finished.trace_id.0.to_vec(),
        span_id: finished.span_id.0.to_vec(),
        parent_span_id: finished
            .parent
            .map(|parent| parent.0.to_vec())
            .unwrap_or_default(),
        // The W3C flags (sampled), and whether the parent is remote: 0x100 says it is known,
        // 0x200 that it is (OTLP 1.1 span flags).
        flags: 0x001 | 0x100 | if finished.remote_parent { 0x200 } else { 0 },
        name: finished.name,
        kind: match finished.kind {
            Kind::Server => span::SpanKind::Server as i32,
            Kind::Client => span::SpanKind::Client as i32,
        },
        start_time_unix_nano: finished.start_unix_ns,
        end_time_unix_nano: finished.end_unix_ns.max(finished.start_unix_ns),
        attributes: finished
            .attributes
            .into_iter()
            .map(|(key, value)| key_value(key, value))
            .collect(),
        status: finished.failed.then(|| Status {
            code: status::StatusCode::Error as i32,
            message: String::new(),
        }),
        ..Span::default()
    }
}

fn key_value(key: &str, value: Value) -> KeyValue {
    let value = match value {
        Value::Static(text) => any_value::Value::StringValue(text.to_owned()),
        Value::Text(text) => any_value::Value::StringValue(text),
        Value::Int(n) => any_value::Value::IntValue(n),
    };
    KeyValue {
        key: key.to_owned(),
        value: Some(AnyValue { value: Some(value) }),
        ..KeyValue::default()
    }
}
