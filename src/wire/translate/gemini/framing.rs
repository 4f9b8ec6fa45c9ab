//! The two framings of a Gemini stream for its client (behaviour §15): with `?alt=sse` each
//! chunk is an SSE event (`data: {chunk}\r\n\r\n`, as Google writes them); without it the
//! chunks are one JSON array, `[` + chunks joined by `,\r\n` + `]`, sent element by element.
//! Each chunk is a whole `GenerateContentResponse`.

use bytes::BytesMut;

/// How a Gemini client asked for its stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// `?alt=sse`.
    Sse,
    /// No `alt=sse`: one JSON array.
    JsonArray,
}

/// Writes chunks in one framing; state: whether the array is open and whether it was closed.
#[derive(Debug, Clone)]
pub struct Framer {
    framing: Framing,
    opened: bool,
    closed: bool,
}

impl Framer {
    pub fn new(framing: Framing) -> Self {
        Framer {
            framing,
            opened: false,
            closed: false,
        }
    }

    /// One chunk (a JSON object's text).
    pub fn chunk(&mut self, json: &[u8], out: &mut BytesMut) {
        if self.closed {
            return;
        }
        // The framed chunk at once: one allocation where growing writes would each grow
        // `out`.
        out.reserve(json.len() + 10);
        match self.framing {
            Framing::Sse => {
                out.extend_from_slice(b"data: ");
                out.extend_from_slice(json);
                out.extend_from_slice(b"\r\n\r\n");
            }
            Framing::JsonArray => {
                out.extend_from_slice(if self.opened { b",\r\n" } else { b"[" });
                self.opened = true;
                out.extend_from_slice(json);
            }
        }
    }

    /// The stream ended: the array closes (an empty one when no chunk came).
    pub fn end(&mut self, out: &mut BytesMut) {
        if self.closed {
            return;
        }
        self.closed = true;
        if self.framing == Framing::JsonArray {
            if !self.opened {
                out.extend_from_slice(b"[");
            }
            out.extend_from_slice(b"]");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    #[test]
    fn without_alt_sse_the_chunks_are_one_json_array() {
        let mut out = BytesMut::new();
        let mut framer = Framer::new(Framing::JsonArray);
        framer.chunk(br#"{"a":1}"#, &mut out);
        framer.chunk(br#"{"a":2}"#, &mut out);
        framer.end(&mut out);
        framer.chunk(br#"{"a":3}"#, &mut out);
        framer.end(&mut out);
        let parsed: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(parsed, serde_json::json!([{"a": 1}, {"a": 2}]));
        let mut empty = BytesMut::new();
        Framer::new(Framing::JsonArray).end(&mut empty);
        assert_eq!(&empty[..], b"[]");
    }

    #[test]
    fn with_alt_sse_each_chunk_is_an_event() {
        let mut out = BytesMut::new();
        let mut framer = Framer::new(Framing::Sse);
        framer.chunk(br#"{"a":1}"#, &mut out);
        framer.end(&mut out);
        assert_eq!(&out[..], b"data: {\"a\":1}\r\n\r\n");
    }
}
