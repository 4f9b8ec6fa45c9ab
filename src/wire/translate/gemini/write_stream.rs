//! The hub's events as a Gemini stream: each chunk a whole `GenerateContentResponse` with the
//! text or thought piece it carries (pieces go out as they come), a call once its arguments are
//! whole (Gemini's clients take a call in one piece), the last chunk with the `finishReason`
//! and `usageMetadata` — and `groundingMetadata` when the host searched the web; framed as SSE
//! or as one JSON array (`framing`). A signed thinking block (an Anthropic account's) is carried
//! in the `thoughtSignature` of the part after it, as in a whole answer. State: the open call's
//! arguments and the open thinking block (each bounded by its block), the open text block's
//! text (for its citations' byte spans, bounded: `held_text`), the searches and supports so far
//! (a few small entries each, capped) and a few fields.

use super::super::whole_values::WholeValues;
use bytes::BytesMut;
use serde_json::{json, Value};

use super::framing::{Framer, Framing};
use super::grounding::{self, Support};
use super::write::{
    answer_part, carried_block, error, finish_reason, response, signature_part, usage,
};
use crate::wire::translate::held_text::HeldText;
use crate::wire::translate::hub::form::{Citation, Event, Finish, Part, ToolCall, Usage};
use crate::wire::translate::sse_write::{
    json_bytes, write_json, write_json_str, write_json_u64, write_known_json_str,
};
use crate::wire::translate::thinking_carry::carried;

/// Most searches and supports one answer's `groundingMetadata` lists.
const MAX_GROUNDING: usize = 4096;

#[derive(Debug)]
pub struct GeminiWriter {
    framer: Framer,
    id: String,
    model: Value,
    /// The open call: its id, name and arguments so far.
    call: Option<ToolCall>,
    /// The open thinking block: its text and signature so far.
    thinking: Option<(String, String)>,
    /// A closed block's carried form, for the next part's `thoughtSignature`.
    pending: Option<String>,
    finish: Option<Finish>,
    usage: Usage,
    /// The text's bytes so far, where the open text block began, its text.
    text_bytes: usize,
    block_base: usize,
    held: Option<HeldText>,
    searches: Vec<crate::wire::translate::hub::form::SearchCall>,
    supports: Vec<Support>,
    /// What a text chunk holds after its text (the stream's model and id), made on the first
    /// text after the start: every text chunk of a stream ends the same.
    text_tail: Vec<u8>,
    /// A text chunk's JSON, reused from one chunk to the next.
    text_chunk: BytesMut,
    /// Whether `text_tail` holds no `thoughtSignature` (made with it).
    tail_without_signature: bool,
    /// Whether what the last [`Self::text`] wrote is a text chunk written around its text
    /// whose tail holds no `thoughtSignature`: then it holds no `"thoughtSignature"` member.
    /// Inside a JSON string every quote is escaped, so that name in quotes can end only at a
    /// string's closing quote; the text's is followed by `}`, not a `:`, and no other string of
    /// the chunk can end with the name.
    wrote_no_signature: bool,
    done: bool,
    /// Tests: the last chunk built as a `Value` and serialized (what the direct write is
    /// compared with).
    pub whole_values: WholeValues,
}

impl GeminiWriter {
    pub fn new(framing: Framing) -> Self {
        GeminiWriter {
            framer: Framer::new(framing),
            id: String::new(),
            model: Value::Null,
            call: None,
            thinking: None,
            pending: None,
            finish: None,
            usage: Usage::default(),
            text_bytes: 0,
            block_base: 0,
            held: None,
            searches: Vec::new(),
            supports: Vec::new(),
            text_tail: Vec::new(),
            text_chunk: BytesMut::new(),
            tail_without_signature: false,
            wrote_no_signature: false,
            done: false,
            whole_values: WholeValues::default(),
        }
    }

    /// Whether the last chunk is written directly when it can be (else built as a `Value`,
    /// in tests).
    fn direct(&self) -> bool {
        self.whole_values.fast()
    }

    /// The last chunk of an answer with no signature to carry and no grounding (most), as
    /// [`Self::event`] builds it as a `Value` for `Event::Done`, written directly: `None`
    /// when it has either (the caller builds it).
    fn last_chunk_direct(&self) -> Option<BytesMut> {
        if self.pending.is_some() || !self.searches.is_empty() || !self.supports.is_empty() {
            return None;
        }
        let usage = &self.usage;
        let mut chunk = BytesMut::with_capacity(256);
        chunk.extend_from_slice(
            b"{\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"\"}],\"role\":\"model\"},\"finishReason\":",
        );
        write_json_str(&mut chunk, finish_reason(self.finish.unwrap_or_default()));
        chunk.extend_from_slice(b",\"index\":0}],\"modelVersion\":");
        write_json(&mut chunk, &self.model);
        chunk.extend_from_slice(b",\"responseId\":");
        write_json_str(&mut chunk, &self.id);
        chunk.extend_from_slice(b",\"usageMetadata\":{");
        if usage.cached > 0 {
            chunk.extend_from_slice(b"\"cachedContentTokenCount\":");
            write_json_u64(&mut chunk, usage.cached);
            chunk.extend_from_slice(b",");
        }
        chunk.extend_from_slice(b"\"candidatesTokenCount\":");
        write_json_u64(&mut chunk, usage.output.saturating_sub(usage.reasoning));
        chunk.extend_from_slice(b",\"promptTokenCount\":");
        write_json_u64(&mut chunk, usage.input);
        if usage.reasoning > 0 {
            chunk.extend_from_slice(b",\"thoughtsTokenCount\":");
            write_json_u64(&mut chunk, usage.reasoning);
        }
        chunk.extend_from_slice(b",\"totalTokenCount\":");
        write_json_u64(&mut chunk, usage.input + usage.output);
        chunk.extend_from_slice(b"}}");
        Some(chunk)
    }

    /// A piece of text, as [`Self::event`] writes `Event::Text`: the translator hands a text
    /// event's piece here borrowed, without an event around it.
    pub fn text(&mut self, text: &str, out: &mut BytesMut) {
        self.text_known(text, false, out);
    }

    /// [`Self::text`] of a piece known to hold nothing JSON escapes when `is_plain` (read
    /// borrowed from a JSON string without escapes): written between quotes without the scan.
    pub fn text_known(&mut self, text: &str, is_plain: bool, out: &mut BytesMut) {
        self.wrote_no_signature = false;
        if self.done {
            return;
        }
        self.text_bytes += text.len();
        if let Some(held) = self.held.as_mut() {
            held.push(text);
        }
        if !text.is_empty() && self.pending.is_none() {
            self.text_part(text, is_plain, out);
            self.wrote_no_signature = self.tail_without_signature;
        } else {
            self.part(&Part::Text(text.to_string()), out)
        }
    }

    /// Whether what the last [`Self::text`] wrote holds no `"thoughtSignature"` member (the
    /// members a Gemini client's answer has sealed): false when it may.
    pub fn wrote_no_signature(&self) -> bool {
        self.wrote_no_signature
    }

    /// Switches to another framing (before anything is written).
    pub fn set_framing(&mut self, framing: Framing) {
        self.framer = Framer::new(framing);
    }

    fn chunk(&mut self, chunk: &Value, out: &mut BytesMut) {
        self.framer.chunk(&json_bytes(chunk), out);
    }

    /// The chunk [`Self::part`] writes for a text part with no signature to carry, byte for
    /// byte, written around the text instead of serialized from a `Value`: most of a translated
    /// stream's events are text.
    fn text_part(&mut self, text: &str, is_plain: bool, out: &mut BytesMut) {
        if self.text_tail.is_empty() {
            let mut tail = BytesMut::new();
            tail.extend_from_slice(b"}],\"role\":\"model\"},\"index\":0}],\"modelVersion\":");
            write_json(&mut tail, &self.model);
            tail.extend_from_slice(b",\"responseId\":");
            write_json_str(&mut tail, &self.id);
            tail.extend_from_slice(b"}");
            self.tail_without_signature =
                memchr::memmem::find(&tail, b"thoughtSignature").is_none();
            self.text_tail = tail.to_vec();
        }
        let mut chunk = std::mem::take(&mut self.text_chunk);
        chunk.clear();
        chunk.extend_from_slice(b"{\"candidates\":[{\"content\":{\"parts\":[{\"text\":");
        write_known_json_str(&mut chunk, text, is_plain);
        chunk.extend_from_slice(&self.text_tail);
        self.framer.chunk(&chunk, out);
        self.text_chunk = chunk;
    }

    fn part(&mut self, part: &Part, out: &mut BytesMut) {
        if let Some(mut written) = answer_part(part) {
            if !matches!(part, Part::Thinking { .. }) {
                if let Some(signature) = self.pending.take() {
                    written["thoughtSignature"] = json!(signature);
                }
            }
            let chunk = response(&self.id, &self.model, vec![written]);
            self.chunk(&chunk, out);
        }
    }

    /// A closed block to carry: on the next part, or alone when another comes first.
    fn carry(&mut self, block: Option<Value>, out: &mut BytesMut) {
        let Some(block) = block else {
            return;
        };
        if let Some(earlier) = self.pending.replace(carried(&block)) {
            let chunk = response(&self.id, &self.model, vec![signature_part(earlier)]);
            self.chunk(&chunk, out);
        }
    }

    pub fn event(&mut self, event: &Event, out: &mut BytesMut) {
        if self.done {
            return;
        }
        match event {
            Event::Start { id, model, usage } => {
                self.id = id.clone();
                self.model = model.clone();
                self.text_tail.clear();
                self.usage = usage.unwrap_or_default();
            }
            Event::TextStart => {
                self.block_base = self.text_bytes;
                self.held = Some(HeldText::default());
            }
            Event::Text(text) => self.text(text, out),
            Event::Citation(citation) => self.citation(citation),
            Event::Search(search) if self.searches.len() < MAX_GROUNDING => {
                self.searches.push(search.clone())
            }
            Event::ThinkingStart => self.thinking = Some((String::new(), String::new())),
            Event::Thinking(text) => {
                if let Some((whole, _)) = &mut self.thinking {
                    whole.push_str(text);
                }
                self.part(
                    &Part::Thinking {
                        text: text.clone(),
                        signature: String::new(),
                    },
                    out,
                )
            }
            Event::Signature(piece) => {
                if let Some((_, signature)) = &mut self.thinking {
                    signature.push_str(piece);
                }
            }
            Event::Redacted(data) => {
                let block = carried_block(&Part::RedactedThinking { data: data.clone() });
                self.carry(block, out);
            }
            Event::ToolStart { id, name } => {
                self.call = Some(ToolCall {
                    id: id.clone(),
                    name: name.clone(),
                    arguments: String::new(),
                });
            }
            Event::ToolArguments(piece) => {
                if let Some(call) = &mut self.call {
                    call.arguments.push_str(piece);
                }
            }
            Event::BlockStop => {
                self.held = None;
                if let Some((text, signature)) = self.thinking.take() {
                    let block = carried_block(&Part::Thinking { text, signature });
                    self.carry(block, out);
                }
                if let Some(call) = self.call.take() {
                    self.part(&Part::ToolCall(call), out);
                }
            }
            Event::Finish { finish, usage } => {
                self.finish = finish.or(self.finish);
                if let Some(usage) = usage {
                    self.usage = *usage;
                }
            }
            Event::Done => {
                if let Some(call) = self.call.take() {
                    self.part(&Part::ToolCall(call), out);
                }
                if let Some((text, signature)) = self.thinking.take() {
                    let block = carried_block(&Part::Thinking { text, signature });
                    self.carry(block, out);
                }
                self.done = true;
                if let Some(last) = self.last_chunk_direct().filter(|_| self.direct()) {
                    self.framer.chunk(&last, out);
                    self.framer.end(out);
                    return;
                }
                let mut ending = json!({"text": ""});
                if let Some(signature) = self.pending.take() {
                    ending["thoughtSignature"] = json!(signature);
                }
                let mut last = response(&self.id, &self.model, vec![ending]);
                last["candidates"][0]["finishReason"] =
                    json!(finish_reason(self.finish.unwrap_or_default()));
                last["usageMetadata"] = usage(&self.usage);
                if let Some(grounding) = grounding::metadata(&self.searches, &self.supports) {
                    last["candidates"][0]["groundingMetadata"] = grounding;
                }
                self.chunk(&last, out);
                self.framer.end(out);
            }
            Event::Error { message, kind } => self.error(message, kind, out),
            _ => {}
        }
    }

    /// A citation of the open text block, as a support spanning bytes of the whole text.
    fn citation(&mut self, citation: &Citation) {
        let Some(held) = self.held.as_ref() else {
            return;
        };
        let end = citation.end.min(held.chars());
        let (Some(start), Some(end_byte)) =
            (held.byte_at_char(citation.start), held.byte_at_char(end))
        else {
            return;
        };
        if self.supports.len() < MAX_GROUNDING && start <= end_byte {
            self.supports.push(Support {
                start: self.block_base + start,
                end: self.block_base + end_byte,
                text: held.slice(citation.start, end).unwrap_or_default(),
                url: citation.url.clone(),
                title: citation.title.clone(),
            });
        }
    }

    /// A break after commit (or a stream the router stopped) as Google's error object, the
    /// stream's last chunk; `code` (the upstream's status name or the router's code) as its
    /// reason.
    pub fn error(&mut self, message: &str, code: &str, out: &mut BytesMut) {
        self.done = true;
        let status = match code {
            "RESOURCE_EXHAUSTED" | "rate_limit_error" | "rate_limited" | "budget_exceeded" => 429,
            "UNAVAILABLE" | "overloaded_error" => 503,
            "DEADLINE_EXCEEDED" | "timeout_error" => 504,
            _ => 500,
        };
        let body = error(status, message, Some(code));
        self.framer.chunk(&json_bytes(&body), out);
        self.framer.end(out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_text_chunk_is_the_bytes_of_the_chunk_it_replaces() {
        for framing in [Framing::Sse, Framing::JsonArray] {
            let (mut fast, mut slow) = (GeminiWriter::new(framing), GeminiWriter::new(framing));
            let start = Event::Start {
                id: "r\"1\"".into(),
                model: json!("gemini-é"),
                usage: None,
            };
            let (mut fast_out, mut slow_out) = (BytesMut::new(), BytesMut::new());
            fast.event(&start, &mut fast_out);
            slow.event(&start, &mut slow_out);
            for text in ["hé \"q\"\n", "\u{1}</b>", "🦀", "plain words"] {
                // Written without the scan only when it is plain, as a borrowed piece is.
                let plain = crate::wire::json_scan::plain(text.as_bytes());
                fast.text_part(text, plain, &mut fast_out);
                slow.part(&Part::Text(text.into()), &mut slow_out);
            }
            assert_eq!(fast_out, slow_out);
        }
    }

    /// A text chunk the writer says holds no signature member is one a sealer of a Gemini
    /// client's signatures leaves as it is, whatever its text, model and id hold; one whose
    /// model holds such a member is not said to.
    #[test]
    fn a_text_chunk_said_to_hold_no_signature_is_left_as_it_is_by_the_sealer() {
        use crate::wire::item_seal::{ItemSealer, Items, SealKey};
        use std::borrow::Cow;
        let sealers = [Items::GeminiTranslated, Items::GeminiSignatures].map(|items| {
            let key = SealKey::from_secret(b"node secret");
            ItemSealer::new(key, "client".into(), "conn".into(), items)
        });
        let texts = [
            "plain",
            "thoughtSignature",
            "\"thoughtSignature",
            "\"thoughtSignature\":\"abc\"",
            "x\"thoughtSignature\": \"abc",
            "thoughtSignature\\",
        ];
        let models = [
            json!("gemini"),
            json!("thoughtSignature"),
            json!(["thoughtSignature", {"a": "\"thoughtSignature\":"}]),
            json!({"thoughtSignature": "abc"}),
        ];
        let mut sealed_some = false;
        for framing in [Framing::Sse, Framing::JsonArray] {
            for model in &models {
                for id in ["r1", "thoughtSignature", "\"thoughtSignature\":\"x\""] {
                    let mut writer = GeminiWriter::new(framing);
                    let mut out = BytesMut::new();
                    let start = Event::Start {
                        id: id.into(),
                        model: model.clone(),
                        usage: None,
                    };
                    writer.event(&start, &mut out);
                    for text in texts {
                        let mut out = BytesMut::new();
                        writer.text(text, &mut out);
                        let changed = sealers
                            .iter()
                            .any(|sealer| matches!(sealer.seal(&out), Cow::Owned(_)));
                        sealed_some |= changed;
                        if writer.wrote_no_signature() {
                            assert!(!changed, "{model} {id} {text}");
                        }
                        // Said of every chunk whose model and id do not hold the name.
                        let named = model.to_string().contains("thoughtSignature")
                            || id.contains("thoughtSignature");
                        assert_eq!(writer.wrote_no_signature(), !named, "{model} {id}");
                    }
                }
            }
        }
        assert!(sealed_some, "a model holding a signature member is sealed");
    }
}
