//! An incremental Server-Sent Events parser: upstream chunks in, whole events out, each with the
//! ORIGINAL bytes it was made of so the proxy forwards them untouched. It owns line splitting
//! (`\n`, `\r\n`, `\r`, split across chunks at any byte) and the size cap; it must not interpret
//! what an event means (that is `stream_watch`).

use std::borrow::Cow;

use bytes::{Bytes, BytesMut};
use memchr::memchr2;

/// Largest event (raw bytes, blank line included) the parser buffers before giving up.
pub const DEFAULT_MAX_EVENT_BYTES: usize = 1 << 20;

const BOM: &[u8] = "\u{feff}".as_bytes();

/// Why an upstream stream cannot be parsed as SSE (a 2xx that does this is a `server_error`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SseError {
    #[error("SSE event exceeds {limit} bytes")]
    EventTooLarge { limit: usize },
    #[error("SSE stream is not valid UTF-8")]
    InvalidUtf8,
}

/// One dispatched block of lines (everything up to and including a blank line).
///
/// Unlike a browser, the parser also yields blocks with no `data` line (comments such as
/// `: keep-alive`, stray blank lines): their `data` is empty, and yielding them means every
/// upstream byte is in exactly one `raw`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The last non-empty `event:` field (a name the providers send, not allocated).
    pub event: Option<Cow<'static, str>>,
    /// The `data:` lines joined with `\n`.
    pub data: String,
    /// The event's original bytes, terminating blank line included.
    pub raw: Bytes,
}

/// Feeds on chunks, yields whole events; see [`SseParser::feed`] and [`SseParser::finish`].
#[derive(Debug)]
pub struct SseParser {
    /// Bytes of the current, not yet dispatched event.
    pending: BytesMut,
    /// Where the first unprocessed line of `pending` starts.
    line_start: usize,
    fields: Fields,
    max_event_bytes: usize,
    /// The first error; the parser refuses further input after it.
    failed: Option<SseError>,
}

impl Default for SseParser {
    fn default() -> Self {
        Self::new()
    }
}

impl SseParser {
    pub fn new() -> Self {
        Self::with_max_event_bytes(DEFAULT_MAX_EVENT_BYTES)
    }

    pub fn with_max_event_bytes(max_event_bytes: usize) -> Self {
        SseParser {
            pending: BytesMut::new(),
            line_start: 0,
            fields: Fields {
                event: None,
                data: String::new(),
                has_data: false,
                at_stream_start: true,
            },
            max_event_bytes,
            failed: None,
        }
    }

    /// Parses `chunk`, pushing every event it completes onto `out` (events completed before an
    /// error are still pushed). After an error every later call returns the same error.
    pub fn feed(&mut self, chunk: &[u8], out: &mut Vec<SseEvent>) -> Result<(), SseError> {
        if let Some(error) = &self.failed {
            return Err(error.clone());
        }
        self.pending.extend_from_slice(chunk);
        let result = self
            .drain_lines(false, out)
            .and_then(|()| self.check_size());
        self.remember(result)
    }

    /// [`feed`](Self::feed) for a chunk the caller owns as `Bytes`: the events it holds whole
    /// are cut from it without a copy (each `raw` a slice of `chunk`); only an event it leaves
    /// unfinished is copied to wait for the next chunk.
    pub fn feed_bytes(&mut self, chunk: Bytes, out: &mut Vec<SseEvent>) -> Result<(), SseError> {
        if self.failed.is_some() || !self.pending.is_empty() {
            return self.feed(&chunk, out);
        }
        let result = self.drain_chunk(&chunk, out);
        self.remember(result)
    }

    /// Processes the complete lines of `chunk` (nothing pending before it); what follows the
    /// last complete event becomes `pending`.
    fn drain_chunk(&mut self, chunk: &Bytes, out: &mut Vec<SseEvent>) -> Result<(), SseError> {
        let mut event_start = 0;
        let mut line_start = 0;
        while let Some(offset) = memchr2(b'\n', b'\r', &chunk[line_start..]) {
            let line_end = line_start + offset;
            let next = match chunk[line_end] {
                b'\r' => match chunk.get(line_end + 1) {
                    Some(b'\n') => line_end + 2,
                    Some(_) => line_end + 1,
                    None => break,
                },
                _ => line_end + 1,
            };
            let blank = self.fields.apply(&chunk[line_start..line_end])?;
            line_start = next;
            if blank {
                out.push(self.event_of(chunk.slice(event_start..next))?);
                event_start = next;
            }
        }
        self.pending.extend_from_slice(&chunk[event_start..]);
        self.line_start = line_start - event_start;
        self.check_size()
    }

    /// The stream ended: a last line without its line break is taken as complete, and an
    /// unterminated event is yielded (a browser would drop it; a lenient proxy keeps it, e.g.
    /// `data: [DONE]\n` with no blank line). Returns `None` when nothing was left over.
    pub fn finish(&mut self) -> Result<Option<SseEvent>, SseError> {
        if let Some(error) = &self.failed {
            return Err(error.clone());
        }
        let mut out = Vec::new();
        let mut result = self.drain_lines(true, &mut out);
        if result.is_ok() && self.line_start < self.pending.len() {
            let end = self.pending.len();
            result = self.process_line(self.line_start, end).map(|_| {
                self.line_start = end;
            });
        }
        let result = result.and_then(|()| {
            if self.pending.is_empty() {
                return Ok(out.pop());
            }
            let len = self.pending.len();
            self.dispatch(len).map(Some)
        });
        match result {
            Ok(event) => Ok(event),
            Err(error) => {
                self.failed = Some(error.clone());
                Err(error)
            }
        }
    }

    fn remember(&mut self, result: Result<(), SseError>) -> Result<(), SseError> {
        if let Err(error) = &result {
            self.failed = Some(error.clone());
        }
        result
    }

    fn check_size(&self) -> Result<(), SseError> {
        if self.pending.len() > self.max_event_bytes {
            return Err(SseError::EventTooLarge {
                limit: self.max_event_bytes,
            });
        }
        Ok(())
    }

    /// Processes every complete line in `pending`; a trailing `\r` waits for the next chunk
    /// (it may be half of `\r\n`) unless `at_eof`.
    fn drain_lines(&mut self, at_eof: bool, out: &mut Vec<SseEvent>) -> Result<(), SseError> {
        while let Some(offset) = memchr2(b'\n', b'\r', &self.pending[self.line_start..]) {
            let line_end = self.line_start + offset;
            let next = match self.pending[line_end] {
                b'\r' => match self.pending.get(line_end + 1) {
                    Some(b'\n') => line_end + 2,
                    Some(_) => line_end + 1,
                    None if at_eof => line_end + 1,
                    None => return Ok(()),
                },
                _ => line_end + 1,
            };
            let blank = self.process_line(self.line_start, line_end)?;
            self.line_start = next;
            if blank {
                out.push(self.dispatch(next)?);
            }
        }
        Ok(())
    }

    /// Applies one line (`pending[start..end]`, no line break); returns whether it was blank.
    fn process_line(&mut self, start: usize, end: usize) -> Result<bool, SseError> {
        self.fields.apply(&self.pending[start..end])
    }

    /// Cuts the first `len` pending bytes off as one event.
    fn dispatch(&mut self, len: usize) -> Result<SseEvent, SseError> {
        let raw = self.pending.split_to(len).freeze();
        self.line_start -= len;
        self.event_of(raw)
    }

    /// The event whose bytes are `raw`, with the fields its lines set.
    fn event_of(&mut self, raw: Bytes) -> Result<SseEvent, SseError> {
        if raw.len() > self.max_event_bytes {
            return Err(SseError::EventTooLarge {
                limit: self.max_event_bytes,
            });
        }
        self.fields.has_data = false;
        Ok(SseEvent {
            event: self.fields.event.take(),
            data: std::mem::take(&mut self.fields.data),
            raw,
        })
    }
}

/// What the lines of the event being read set so far.
#[derive(Debug)]
struct Fields {
    event: Option<Cow<'static, str>>,
    data: String,
    has_data: bool,
    /// No line has been processed yet (a leading BOM is ignored, as the SSE spec says).
    at_stream_start: bool,
}

impl Fields {
    /// Applies one line (no line break); returns whether it was blank.
    fn apply(&mut self, mut line: &[u8]) -> Result<bool, SseError> {
        if std::mem::take(&mut self.at_stream_start) {
            line = line.strip_prefix(BOM).unwrap_or(line);
        }
        if line.is_empty() {
            return Ok(true);
        }
        // Split at the first `:` on bytes (`:` is ASCII, so never inside a character); the
        // whole line must still be UTF-8, whatever its field: a known field's name is ASCII,
        // so only its value is checked.
        let (field, value) = match memchr::memchr(b':', line) {
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &b""[..]),
        };
        let text = |bytes| std::str::from_utf8(bytes).map_err(|_| SseError::InvalidUtf8);
        match field {
            b"data" => {
                let value = text(value)?;
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            b"event" => {
                self.event = match known_name(value) {
                    Some(name) => Some(Cow::Borrowed(name)),
                    None => {
                        let value = text(value)?;
                        (!value.is_empty()).then(|| Cow::Owned(value.to_owned()))
                    }
                };
            }
            // A comment (the line starts with `:`), `id`, `retry` and unknown fields stay in
            // `raw` and mean nothing to the router.
            _ => {
                text(field)?;
                text(value)?;
            }
        }
        Ok(false)
    }
}

/// An event name Anthropic's or OpenAI's Responses streams send (most of their events are
/// named), as the same text without a copy; `None` for any other bytes.
fn known_name(name: &[u8]) -> Option<&'static str> {
    Some(match name {
        b"content_block_delta" => "content_block_delta",
        b"content_block_start" => "content_block_start",
        b"content_block_stop" => "content_block_stop",
        b"message_start" => "message_start",
        b"message_delta" => "message_delta",
        b"message_stop" => "message_stop",
        b"ping" => "ping",
        b"error" => "error",
        b"response.output_text.delta" => "response.output_text.delta",
        b"response.created" => "response.created",
        b"response.in_progress" => "response.in_progress",
        b"response.output_item.added" => "response.output_item.added",
        b"response.output_item.done" => "response.output_item.done",
        b"response.content_part.added" => "response.content_part.added",
        b"response.content_part.done" => "response.content_part.done",
        b"response.output_text.done" => "response.output_text.done",
        b"response.completed" => "response.completed",
        b"response.incomplete" => "response.incomplete",
        b"response.failed" => "response.failed",
        b"response.function_call_arguments.delta" => "response.function_call_arguments.delta",
        b"response.function_call_arguments.done" => "response.function_call_arguments.done",
        b"response.reasoning_summary_text.delta" => "response.reasoning_summary_text.delta",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Everything the parser yields for `chunks`, `finish` included.
    fn parse_chunks(chunks: &[&[u8]]) -> Result<Vec<SseEvent>, SseError> {
        let mut parser = SseParser::new();
        let mut out = Vec::new();
        for chunk in chunks {
            parser.feed(chunk, &mut out)?;
        }
        out.extend(parser.finish()?);
        Ok(out)
    }

    /// [`parse_chunks`] with every chunk fed as `Bytes` (events cut from the chunk itself).
    fn parse_owned_chunks(chunks: &[&[u8]]) -> Result<Vec<SseEvent>, SseError> {
        let mut parser = SseParser::new();
        let mut out = Vec::new();
        for chunk in chunks {
            parser.feed_bytes(Bytes::copy_from_slice(chunk), &mut out)?;
        }
        out.extend(parser.finish()?);
        Ok(out)
    }

    fn parse(input: &str) -> Vec<SseEvent> {
        parse_chunks(&[input.as_bytes()]).unwrap()
    }

    fn summary(events: &[SseEvent]) -> Vec<(Option<&str>, &str, &[u8])> {
        events
            .iter()
            .map(|e| (e.event.as_deref(), e.data.as_str(), &e.raw[..]))
            .collect()
    }

    #[test]
    fn the_providers_event_names_are_read_without_a_copy_and_others_as_before() {
        let known = [
            "content_block_delta",
            "content_block_start",
            "content_block_stop",
            "message_start",
            "message_delta",
            "message_stop",
            "ping",
            "error",
            "response.output_text.delta",
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.output_item.done",
            "response.content_part.added",
            "response.content_part.done",
            "response.output_text.done",
            "response.completed",
            "response.incomplete",
            "response.failed",
            "response.function_call_arguments.delta",
            "response.function_call_arguments.done",
            "response.reasoning_summary_text.delta",
        ];
        for name in known {
            let events = parse(&format!("event: {name}\ndata: {{}}\n\n"));
            assert_eq!(events[0].event.as_deref(), Some(name));
            assert!(matches!(events[0].event, Some(Cow::Borrowed(_))), "{name}");
        }
        // Any other name is its own text, as before; a near miss of a known one too.
        for name in [
            "message_star",
            "Message_start",
            "ping ",
            "response.created.x",
            "é",
        ] {
            let events = parse(&format!("event: {name}\ndata: {{}}\n\n"));
            assert_eq!(events[0].event.as_deref(), Some(name));
            assert!(matches!(events[0].event, Some(Cow::Owned(_))), "{name}");
        }
        // The last non-empty name counts; an empty one leaves none.
        assert_eq!(
            parse("event: ping\nevent: x\ndata: 1\n\n")[0]
                .event
                .as_deref(),
            Some("x")
        );
        assert_eq!(parse("event: ping\nevent:\ndata: 1\n\n")[0].event, None);
        // A name that is not UTF-8 is still refused.
        assert_eq!(
            parse_chunks(&[b"event: \xff\ndata: 1\n\n"]),
            Err(SseError::InvalidUtf8)
        );
    }

    #[test]
    fn s3_openai_chunks_and_done_are_separate_events() {
        let input = "data: {\"a\":1}\n\ndata: [DONE]\n\n";
        let events = parse(input);
        assert_eq!(
            summary(&events),
            vec![
                (None, "{\"a\":1}", &b"data: {\"a\":1}\n\n"[..]),
                (None, "[DONE]", &b"data: [DONE]\n\n"[..]),
            ]
        );
    }

    #[test]
    fn s3_anthropic_event_names_and_all_line_endings() {
        for newline in ["\n", "\r\n", "\r"] {
            let input = format!(
                "event: message_start{newline}data: {{}}{newline}{newline}event: ping{newline}data: x{newline}{newline}"
            );
            let events = parse(&input);
            assert_eq!(events.len(), 2, "newline {newline:?}");
            assert_eq!(events[0].event.as_deref(), Some("message_start"));
            assert_eq!(events[0].data, "{}");
            assert_eq!(events[1].event.as_deref(), Some("ping"));
            assert_eq!(events[1].data, "x");
            let joined: Vec<u8> = events.iter().flat_map(|e| e.raw.to_vec()).collect();
            assert_eq!(joined, input.as_bytes());
        }
    }

    #[test]
    fn s3_multi_line_data_comments_and_field_forms() {
        let input = ": comment\ndata:first\ndata:  second\ndata\nid: 7\nretry: 10\nevent\n\n";
        let events = parse(input);
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].data, "first\n second\n");
        assert_eq!(events[0].event, None);
        assert_eq!(&events[0].raw[..], input.as_bytes());
    }

    #[test]
    fn s3_comment_only_blocks_and_stray_blank_lines_are_yielded_empty() {
        let events = parse(": keep-alive\n\n\ndata: x\n\n");
        assert_eq!(
            summary(&events),
            vec![
                (None, "", &b": keep-alive\n\n"[..]),
                (None, "", &b"\n"[..]),
                (None, "x", &b"data: x\n\n"[..]),
            ]
        );
    }

    #[test]
    fn s3_crlf_split_between_chunks_is_one_line_break() {
        let events = parse_chunks(&[b"data: a\r", b"\n\r", b"\ndata: b\r\n\r\n"]).unwrap();
        assert_eq!(summary(&events)[0], (None, "a", &b"data: a\r\n\r\n"[..]));
        assert_eq!(events[1].data, "b");
        assert_eq!(events.len(), 2);
    }

    #[test]
    fn s3_unterminated_last_event_is_yielded_at_finish() {
        let mut parser = SseParser::new();
        let mut out = Vec::new();
        parser.feed(b"data: 1\n\ndata: [DONE]\n", &mut out).unwrap();
        assert_eq!(out.len(), 1);
        let last = parser.finish().unwrap().unwrap();
        assert_eq!(last.data, "[DONE]");
        assert_eq!(&last.raw[..], b"data: [DONE]\n");
        assert_eq!(parser.finish().unwrap(), None);
    }

    #[test]
    fn s3_leading_bom_is_ignored_but_kept_in_raw() {
        let input = "\u{feff}data: x\n\n";
        let events = parse(input);
        assert_eq!(events[0].data, "x");
        assert_eq!(&events[0].raw[..], input.as_bytes());
    }

    #[test]
    fn s3_event_over_the_cap_is_an_error_and_sticks() {
        let mut parser = SseParser::with_max_event_bytes(16);
        let mut out = Vec::new();
        parser.feed(b"data: ok\n\n", &mut out).unwrap();
        let error = parser
            .feed(b"data: 0123456789abcdef", &mut out)
            .unwrap_err();
        assert_eq!(error, SseError::EventTooLarge { limit: 16 });
        assert_eq!(parser.feed(b"\n\n", &mut out), Err(error.clone()));
        assert_eq!(parser.finish(), Err(error));
        assert_eq!(out.len(), 1);

        // A whole oversized event inside one chunk fails too, fed as a slice or as `Bytes`.
        let mut parser = SseParser::with_max_event_bytes(16);
        let error = parser.feed(b"data: 0123456789abcdef\n\n", &mut out);
        assert_eq!(error, Err(SseError::EventTooLarge { limit: 16 }));
        let mut parser = SseParser::with_max_event_bytes(16);
        let chunk = Bytes::from_static(b"data: ok\n\ndata: 0123456789abcdef\n\n");
        let mut out = Vec::new();
        let error = parser.feed_bytes(chunk, &mut out);
        assert_eq!(error, Err(SseError::EventTooLarge { limit: 16 }));
        assert_eq!(out.len(), 1);
        assert_eq!(
            parser.feed_bytes(Bytes::from_static(b"\n"), &mut out),
            error
        );
        // An unfinished event over the cap fails as soon as it is.
        let mut parser = SseParser::with_max_event_bytes(16);
        let chunk = Bytes::from_static(b"data: 0123456789abcdef");
        let error = parser.feed_bytes(chunk, &mut out);
        assert_eq!(error, Err(SseError::EventTooLarge { limit: 16 }));
    }

    #[test]
    fn s3_invalid_utf8_is_an_error() {
        let mut parser = SseParser::new();
        let mut out = Vec::new();
        let error = parser.feed(b"data: \xff\xfe\n\n", &mut out);
        assert_eq!(error, Err(SseError::InvalidUtf8));
        // In any field's name or value, a comment's too.
        for line in [
            &b"da\xffta: x\n\n"[..],
            b"event: \xff\n\n",
            b": \xff\n\n",
            b"\xff\n\n",
        ] {
            let mut out = Vec::new();
            let error = SseParser::new().feed(line, &mut out);
            assert_eq!(error, Err(SseError::InvalidUtf8), "{line:?}");
        }
        // A multi-byte character split across chunks is fine.
        let events = parse_chunks(&[
            "data: é\n\n".as_bytes()[..7].as_ref(),
            &"data: é\n\n".as_bytes()[7..],
        ])
        .unwrap();
        assert_eq!(events[0].data, "é");
    }

    /// Splits `input` at the given (sorted, deduplicated) cut points.
    fn split_at_cuts<'a>(input: &'a [u8], cuts: &[usize]) -> Vec<&'a [u8]> {
        let mut chunks = Vec::new();
        let mut from = 0;
        for &cut in cuts {
            chunks.push(&input[from..cut]);
            from = cut;
        }
        chunks.push(&input[from..]);
        chunks
    }

    fn sse_text() -> impl Strategy<Value = String> {
        let line = prop_oneof![
            "data: [ -~é\u{1F600}]{0,12}",
            "data:[a-z]{0,4}",
            "event: [a-z_.]{0,10}",
            ": [ -~]{0,8}",
            "id: [0-9]{1,3}",
            Just(String::new()),
        ];
        let newline = prop_oneof![Just("\n"), Just("\r\n"), Just("\r")];
        prop::collection::vec((line, newline), 0..24).prop_map(|lines| {
            lines
                .into_iter()
                .map(|(line, newline)| line + newline)
                .collect()
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn s3_split_points_never_change_the_events(
            text in sse_text(),
            cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..8),
        ) {
            let input = text.as_bytes();
            let mut cuts: Vec<usize> = cuts.iter().map(|i| i.index(input.len() + 1)).collect();
            cuts.sort_unstable();
            cuts.dedup();
            let whole = parse_chunks(&[input]).unwrap();
            let split = parse_chunks(&split_at_cuts(input, &cuts)).unwrap();
            prop_assert_eq!(&whole, &split);
            let owned = parse_owned_chunks(&split_at_cuts(input, &cuts)).unwrap();
            prop_assert_eq!(&whole, &owned);
            let joined: Vec<u8> = split.iter().flat_map(|e| e.raw.to_vec()).collect();
            prop_assert_eq!(joined, input.to_vec());
        }

        #[test]
        fn s3_arbitrary_bytes_never_panic_and_keep_every_byte(
            input in prop::collection::vec(any::<u8>(), 0..256),
            cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..8),
        ) {
            let mut cuts: Vec<usize> = cuts.iter().map(|i| i.index(input.len() + 1)).collect();
            cuts.sort_unstable();
            cuts.dedup();
            let whole = parse_chunks(&[&input]);
            let split = parse_chunks(&split_at_cuts(&input, &cuts));
            prop_assert_eq!(&whole, &split);
            let owned = parse_owned_chunks(&split_at_cuts(&input, &cuts));
            prop_assert_eq!(&whole, &owned);
            if let Ok(events) = whole {
                let joined: Vec<u8> = events.iter().flat_map(|e| e.raw.to_vec()).collect();
                prop_assert_eq!(joined, input);
            }
        }
    }
}
