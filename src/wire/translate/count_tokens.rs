//! `POST /v1/messages/count_tokens` for an OpenAI-format target, and Gemini's `:countTokens`
//! for a target that is not Gemini's, answered locally (behaviour §14): the request's text — system, messages (text, tool calls' inputs, tool results),
//! tools — counted with OpenAI's `o200k_base` tokenizer, plus OpenAI's per-message framing
//! (3 tokens a message, 3 to prime the answer). An estimate of what the target would bill;
//! nothing is sent upstream.

use serde_json::Value;

use super::TranslateError;

/// Tokens OpenAI's chat format adds around each message, and once to prime the reply.
const PER_MESSAGE: u64 = 3;
const PRIMING: u64 = 3;

/// Text counted token by token; a longer request's rest is estimated at the rate its first
/// `EXACT_BYTES` counted. Bounds one count's CPU (about a quarter of a second at worst: 10 MiB
/// counted whole took 5.5 s) whatever the body holds.
const EXACT_BYTES: usize = 256 * 1024;
/// The longest piece the tokenizer sees at once. Its regex backtracks over a long run of one
/// kind (1 MB of spaces exceeded its backtrack limit, and `tiktoken-rs` panics on that) and its
/// byte-pair merge is quadratic in a piece without spaces: a piece is cut before a space where
/// one is near the end (where the tokenizer splits anyway), else at this length.
const PIECE_BYTES: usize = 1024;

fn count(text: &str) -> u64 {
    let exact_end = char_boundary_at_most(text, EXACT_BYTES);
    let head = &text[..exact_end];
    let tokenizer = tiktoken_rs::o200k_base_singleton();
    let mut tokens: u64 = 0;
    for piece in pieces(head) {
        // Never a panic on a request's text: a piece the tokenizer refuses counts as a byte
        // per four (the estimate it would round to).
        let encode = std::panic::AssertUnwindSafe(|| tokenizer.encode_ordinary(piece).len());
        let counted = std::panic::catch_unwind(encode).unwrap_or_else(|_| piece.len().div_ceil(4));
        tokens += counted as u64;
    }
    if exact_end < text.len() && exact_end > 0 {
        let scaled = u128::from(tokens) * text.len() as u128 / exact_end as u128;
        tokens = u64::try_from(scaled).unwrap_or(u64::MAX);
    }
    tokens
}

/// The largest char boundary of `text` at or below `at`.
fn char_boundary_at_most(text: &str, at: usize) -> usize {
    let mut at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// `text` in pieces of at most `PIECE_BYTES` (a char longer than that alone), each cut before
/// a space that follows a non-space where the last half of the window has one.
fn pieces(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let mut end = char_boundary_at_most(rest, PIECE_BYTES);
        if end == 0 {
            end = rest.chars().next().map_or(rest.len(), char::len_utf8);
        }
        if end < rest.len() {
            let bytes = rest.as_bytes();
            if let Some(space) = (end / 2..end)
                .rev()
                .find(|&i| i > 0 && bytes[i] == b' ' && !bytes[i - 1].is_ascii_whitespace())
            {
                end = space;
            }
        }
        let (piece, after) = rest.split_at(end);
        rest = after;
        Some(piece)
    })
}

/// The text a content value holds: a string, or its blocks' text, inputs and results.
fn content_text(content: &Value, into: &mut String) {
    match content {
        Value::String(text) => into.push_str(text),
        Value::Array(blocks) => {
            for block in blocks {
                for key in ["text", "thinking", "name"] {
                    if let Some(text) = block.get(key).and_then(Value::as_str) {
                        into.push_str(text);
                    }
                }
                if let Some(input) = block.get("input") {
                    into.push_str(&input.to_string());
                }
                if let Some(inner) = block.get("content") {
                    content_text(inner, into);
                }
            }
        }
        _ => {}
    }
}

/// `{"input_tokens": N}` for a Messages `count_tokens` request body.
pub fn count_tokens_body(body: &[u8]) -> Result<Value, TranslateError> {
    let request: Value = serde_json::from_slice(body)
        .map_err(|error| TranslateError::Invalid(format!("the body is not JSON: {error}")))?;
    let messages = request
        .get("messages")
        .and_then(Value::as_array)
        .ok_or_else(|| TranslateError::Invalid("`messages` must be an array".into()))?;
    let mut total = PRIMING;
    let mut text = String::new();
    if let Some(system) = request.get("system") {
        content_text(system, &mut text);
        total += PER_MESSAGE;
    }
    for message in messages {
        total += PER_MESSAGE;
        content_text(message.get("content").unwrap_or(&Value::Null), &mut text);
    }
    if let Some(tools) = request.get("tools").filter(|t| !t.is_null()) {
        text.push_str(&tools.to_string());
    }
    total += count(&text);
    Ok(serde_json::json!({ "input_tokens": total }))
}

/// The text of Gemini parts: text, calls' names and arguments, results.
fn gemini_parts_text(content: &Value, into: &mut String) {
    let parts = content.get("parts").and_then(Value::as_array);
    for part in parts.into_iter().flatten() {
        if let Some(text) = part.get("text").and_then(Value::as_str) {
            into.push_str(text);
        }
        for key in [
            "functionCall",
            "function_call",
            "functionResponse",
            "function_response",
        ] {
            if let Some(call) = part.get(key) {
                into.push_str(&call.to_string());
            }
        }
    }
}

/// `{"totalTokens": N}` for a Gemini `countTokens` request body (`contents`, or a whole
/// `generateContentRequest` with its system instruction and tools).
pub fn gemini_count_tokens_body(body: &[u8]) -> Result<Value, TranslateError> {
    let request: Value = serde_json::from_slice(body)
        .map_err(|error| TranslateError::Invalid(format!("the body is not JSON: {error}")))?;
    let request = request
        .get("generateContentRequest")
        .or_else(|| request.get("generate_content_request"))
        .unwrap_or(&request);
    let contents = request
        .get("contents")
        .and_then(Value::as_array)
        .ok_or_else(|| TranslateError::Invalid("`contents` must be an array".into()))?;
    let mut total = PRIMING;
    let mut text = String::new();
    let system = request
        .get("systemInstruction")
        .or_else(|| request.get("system_instruction"));
    if let Some(system) = system.filter(|s| !s.is_null()) {
        gemini_parts_text(system, &mut text);
        total += PER_MESSAGE;
    }
    for content in contents {
        total += PER_MESSAGE;
        gemini_parts_text(content, &mut text);
    }
    if let Some(tools) = request.get("tools").filter(|t| !t.is_null()) {
        text.push_str(&tools.to_string());
    }
    total += count(&text);
    Ok(serde_json::json!({ "totalTokens": total }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn counts_with_a_real_tokenizer() {
        let body =
            json!({"model": "m", "messages": [{"role": "user", "content": "Hello, world!"}]});
        // "Hello, world!" is 4 o200k tokens: 3 + 3 framing.
        assert_eq!(
            count_tokens_body(body.to_string().as_bytes()).unwrap(),
            json!({"input_tokens": 10})
        );
        let longer = json!({"model": "m", "system": "You are terse.", "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Hello, world!"}]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "look", "input": {"at": "x"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "a cat"}]}]});
        let counted = count_tokens_body(longer.to_string().as_bytes()).unwrap()["input_tokens"]
            .as_u64()
            .unwrap();
        assert!(counted > 20 && counted < 40, "{counted}");
        assert!(count_tokens_body(b"{}").is_err());
    }

    #[test]
    fn gemini_count_tokens_are_counted_the_same_way() {
        let body = json!({"contents": [{"role": "user", "parts": [{"text": "Hello, world!"}]}]});
        assert_eq!(
            gemini_count_tokens_body(body.to_string().as_bytes()).unwrap(),
            json!({"totalTokens": 10})
        );
        let whole = json!({"generateContentRequest": {"model": "models/m",
            "systemInstruction": {"parts": [{"text": "You are terse."}]},
            "contents": [{"role": "user", "parts": [{"text": "Hello, world!"}]}]}});
        let counted = gemini_count_tokens_body(whole.to_string().as_bytes()).unwrap();
        assert!(counted["totalTokens"].as_u64().unwrap() > 10, "{counted}");
        assert!(gemini_count_tokens_body(b"{}").is_err());
    }

    #[test]
    fn pieces_cover_the_text_at_spaces_and_bounded() {
        let text = "word ".repeat(1000) + &"x".repeat(5000) + "é";
        let pieces: Vec<&str> = pieces(&text).collect();
        assert_eq!(pieces.concat(), text);
        assert!(pieces.iter().all(|p| p.len() <= PIECE_BYTES), "bounded");
        // Cut before a space: every piece but the long word's starts with one.
        assert!(
            pieces[1..5].iter().all(|p| p.starts_with(' ')),
            "{:?}",
            &pieces[..2]
        );
        // Cut where the tokenizer splits anyway: the same count as the whole.
        let words = "the quick brown fox jumps over the lazy dog ".repeat(200);
        let whole = tiktoken_rs::o200k_base_singleton()
            .encode_ordinary(&words)
            .len() as u64;
        assert_eq!(count(&words), whole);
    }

    /// The probe's bodies: 1 MB of spaces made the tokenizer panic; 10 MiB of one letter took
    /// 5.5 s of CPU (now at most `EXACT_BYTES` of it is tokenized). Both are counted, no panic.
    #[test]
    fn hostile_texts_are_counted_without_panic_in_bounded_time() {
        for text in [
            " ".repeat(1 << 20),
            "a".repeat(10 << 20),
            "\n \t".repeat(300_000),
        ] {
            let body = json!({"model": "m", "messages": [{"role": "user", "content": text}]});
            let counted = count_tokens_body(body.to_string().as_bytes()).unwrap()["input_tokens"]
                .as_u64()
                .unwrap();
            assert!(counted > 1000, "{counted}");
        }
    }
}
