//! A client's request body parsed once for the carry check (behaviour §14) and the attempt's
//! translation of the same body, and what the check wrote of it: the attempt that crosses the
//! same pair takes that request instead of reading and writing the body again, when nothing it
//! translates with differs from what the check did (only the model, which the check leaves
//! empty and the attempt sets). A Gemini client's plain text request may come read already:
//! the scan that checked it at its intake read it into the hub's form, which the first
//! translation takes.

use std::sync::{Mutex, OnceLock};

use super::gemini::scanned_request;
use super::thinking_carry::ReasoningCounts;
use super::{
    translate_request_as, translate_source, translated, Api, Direction, ParsedObject,
    RequestSettings, Scanned, ScannedRead, Source, TranslateError, TranslatedRequest,
    WrittenRequest,
};
use bytes::Bytes;

/// A client's request body, its JSON object once a translation asks for it (one its client
/// API's typed shape declines), and the requests the carry check wrote of it.
#[derive(Debug)]
pub struct ParsedRequest {
    body: Bytes,
    parsed: ParsedObject,
    /// A Gemini client's plain text request in the hub's form, read at its intake.
    scanned: ScannedRead,
    checked: Mutex<Vec<Checked>>,
}

/// A request the carry check wrote (no model, no reasoning key).
#[derive(Debug)]
struct Checked {
    direction: Direction,
    default_max_tokens: u32,
    written: WrittenRequest,
}

impl ParsedRequest {
    /// `body`, not parsed yet (a request that is not translated never is).
    pub fn new(body: Bytes) -> ParsedRequest {
        ParsedRequest {
            body,
            parsed: OnceLock::new(),
            scanned: Mutex::new(Scanned::default()),
            checked: Mutex::new(Vec::new()),
        }
    }

    /// `read` (what the intake read) when it holds `body`, else `body` not parsed yet: parsed
    /// once, when a translation (the carry check, the attempt) first needs it.
    pub fn read_or_new(read: Option<ParsedRequest>, body: &Bytes) -> ParsedRequest {
        read.filter(|read| read.holds(body))
            .unwrap_or_else(|| ParsedRequest::new(body.clone()))
    }

    /// `body`, a Gemini client's request, scanned once as a plain text request
    /// (`gemini::scanned_request`): read into the hub's form when the scan takes it (the first
    /// translation takes the form instead of reading the body again), else marked declined
    /// (no translation scans it again). A body the scan reads is a JSON object as serde_json
    /// reads it (the scan declines whatever it does not read exactly so), so the scan is also
    /// the intake's check that it is one ([`ParsedRequest::holds_scanned`]).
    pub fn scanned_gemini(body: Bytes) -> ParsedRequest {
        let mut dropped = Vec::new();
        let read = scanned_request::request(&body, &mut dropped).map(|form| (form, dropped));
        let scanned = Scanned {
            declined: read.is_none(),
            read,
        };
        ParsedRequest {
            body,
            parsed: OnceLock::new(),
            scanned: Mutex::new(scanned),
            checked: Mutex::new(Vec::new()),
        }
    }

    /// The body.
    pub fn body(&self) -> &Bytes {
        &self.body
    }

    /// Whether this is `body` (an attempt may send another: without items its target cannot
    /// read).
    pub fn holds(&self, body: &[u8]) -> bool {
        let same = self.body.as_ptr() == body.as_ptr() && self.body.len() == body.len();
        same || self.body[..] == *body
    }

    /// The body as a translation reads it (its JSON object parsed on the first ask, with the
    /// same error as `translate_request`'s).
    pub(super) fn source(&self) -> Source<'_> {
        Source {
            body: &self.body,
            object: &self.parsed,
            scanned: Some(&self.scanned),
            typed: true,
        }
    }

    /// Keeps what the carry check wrote for `direction` with `settings` (kept only when
    /// written without a reasoning key, the only way the check writes).
    pub(super) fn keep(
        &self,
        direction: Direction,
        settings: RequestSettings<'_>,
        written: WrittenRequest,
    ) {
        if settings.reasoning.is_some() {
            return;
        }
        if let Ok(mut checked) = self.checked.lock() {
            checked.retain(|kept| kept.direction != direction);
            checked.push(Checked {
                direction,
                default_max_tokens: settings.default_max_tokens,
                written,
            });
        }
    }

    /// Whether the scan read the body into the hub's form and no translation took it yet.
    pub fn holds_scanned(&self) -> bool {
        self.scanned
            .lock()
            .is_ok_and(|scanned| scanned.read.is_some())
    }

    /// How many requests the check wrote that no attempt took.
    #[cfg(test)]
    pub(super) fn checked_len(&self) -> usize {
        self.checked.lock().map_or(0, |checked| checked.len())
    }

    /// What the check wrote for `direction`, when the attempt's translation with `settings`
    /// and `stream` would write the same but for the model.
    fn take(
        &self,
        direction: Direction,
        settings: RequestSettings<'_>,
        stream: Option<bool>,
    ) -> Option<WrittenRequest> {
        // The reasoning key opens what a Responses or Gemini client carries (and a Messages
        // client's Gemini signatures); the check read without one, which counts every such
        // item left out: with none, a key opens nothing either.
        let key_read = matches!(direction.client, Api::Responses | Api::Gemini)
            || direction == Direction::MESSAGES_TO_GEMINI;
        let key = settings
            .reasoning
            .filter(|_| matches!(direction.target, Api::Messages | Api::Gemini));
        let keyless = !key_read || key.is_none();
        let mut checked = self.checked.lock().ok()?;
        let at = checked.iter().position(|kept| {
            kept.direction == direction
                && kept.default_max_tokens == settings.default_max_tokens
                && stream.is_none_or(|stream| stream == kept.written.stream)
                && (keyless || kept.written.reasoning == ReasoningCounts::default())
        })?;
        Some(checked.swap_remove(at).written)
    }
}

/// `translate_request_as` of `body` through `parsed` when it holds that body: what the carry
/// check wrote for the pair when it wrote what this would, else a translation of the object
/// the check parsed; a body `parsed` does not hold is parsed here.
pub fn translate_parsed_as(
    direction: Direction,
    (parsed, body): (Option<&ParsedRequest>, &[u8]),
    settings: RequestSettings<'_>,
    stream: Option<bool>,
) -> Result<TranslatedRequest, TranslateError> {
    let Some(parsed) = parsed.filter(|parsed| parsed.holds(body)) else {
        return translate_request_as(direction, body, settings, stream);
    };
    let request = parsed.source();
    match parsed.take(direction, settings, stream) {
        Some(mut written) => {
            if direction.target != Api::Gemini {
                written.translated.set_model(settings.model);
            }
            translated(direction, request, written)
        }
        None => translate_source(direction, request, settings, stream),
    }
}
