//! Writing translated SSE events: the one encoder every stream direction shares.

use bytes::BytesMut;
use serde_json::Value;

/// Writes one SSE event (`event:` when named) with `data` as JSON.
pub fn write_data(out: &mut BytesMut, event: Option<&str>, data: &Value) {
    if let Some(event) = event {
        out.extend_from_slice(b"event: ");
        out.extend_from_slice(event.as_bytes());
        out.extend_from_slice(b"\n");
    }
    out.extend_from_slice(b"data: ");
    out.extend_from_slice(data.to_string().as_bytes());
    out.extend_from_slice(b"\n\n");
}
