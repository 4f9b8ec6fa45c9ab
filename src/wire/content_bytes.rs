//! How many bytes of generated text one stream event carries: the string value of its
//! content member (`content`, `text`, `delta`, `arguments`, `partial_json`, `thinking`,
//! `reasoning…`, `refusal`). The relay adds these up so that a stream the client left before
//! its usage arrived can be charged an estimate of its output (behaviour §11). A byte search,
//! not a parse: it runs on every relayed event. It must not decide what an event means (that
//! is `stream_watch`).

use std::sync::LazyLock;

use super::json_member::MemberFinder;
use super::stream_format::StreamFormat;

fn finders(keys: &[&'static [u8]]) -> Vec<MemberFinder> {
    keys.iter().map(|key| MemberFinder::new(key)).collect()
}

/// The members whose string value is generated text, per protocol, the usual one first: each
/// event is searched for its own protocol's only, with any JSON spacing around the colon.
static CHAT_MEMBERS: LazyLock<Vec<MemberFinder>> = LazyLock::new(|| {
    finders(&[
        b"\"content\"",
        b"\"text\"",
        b"\"arguments\"",
        b"\"reasoning_content\"",
        b"\"reasoning\"",
        b"\"refusal\"",
    ])
});
static RESPONSES_MEMBERS: LazyLock<Vec<MemberFinder>> = LazyLock::new(|| finders(&[b"\"delta\""]));
static ANTHROPIC_MEMBERS: LazyLock<Vec<MemberFinder>> =
    LazyLock::new(|| finders(&[b"\"text\"", b"\"partial_json\"", b"\"thinking\""]));

/// Gemini's parts: `text` (thought parts too).
static GEMINI_MEMBERS: LazyLock<Vec<MemberFinder>> = LazyLock::new(|| finders(&[b"\"text\""]));

/// The bytes of the first content string in `data` (an event's data, or a whole answer, of
/// `format`; an escape counts as the one byte it stands for, roughly). 0 when there is none.
pub fn content_text_bytes(format: StreamFormat, data: &[u8]) -> usize {
    content_member_at(format, data)
        .and_then(|at| data.get(at..))
        .map_or(0, string_bytes)
}

/// Where the string [`content_text_bytes`] counts starts in `data` (just after its opening
/// quote); `None` when there is none.
pub fn content_member_at(format: StreamFormat, data: &[u8]) -> Option<usize> {
    let members = match format {
        StreamFormat::OpenAiChat | StreamFormat::OpenAiCompletions => &*CHAT_MEMBERS,
        StreamFormat::OpenAiResponses => &*RESPONSES_MEMBERS,
        StreamFormat::Anthropic => &*ANTHROPIC_MEMBERS,
        StreamFormat::Gemini => &*GEMINI_MEMBERS,
    };
    // The first member with a string value, in the order above (the usual one first: one
    // search per event).
    let text = members
        .iter()
        .find_map(|member| member.first_string(data))?;
    Some(data.len() - text.len())
}

/// The bytes [`content_text_bytes`] counts of the string `text` begins (just after its
/// opening quote).
pub fn string_bytes(text: &[u8]) -> usize {
    // To the closing quote, an escape (`\"`, `\n`, `\u00e9`) counted as one byte.
    let mut bytes = 0;
    let mut at = 0;
    while let Some(found) = memchr::memchr2(b'"', b'\\', text.get(at..).unwrap_or_default()) {
        bytes += found;
        at += found;
        if text.get(at) == Some(&b'"') {
            return bytes;
        }
        // A backslash and the byte it escapes.
        bytes += 1;
        at += 2;
    }
    bytes + text.len().saturating_sub(at)
}

/// The tokens `bytes` of text or request body are estimated at: about four bytes a token
/// (OpenAI's and Anthropic's own rule of thumb for English), at least one for any bytes.
pub fn estimated_tokens(bytes: u64) -> u64 {
    bytes.div_ceil(4)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `json` respaced outside its strings: `before` each `:`, `after` each `:` and `,`.
    fn respaced(json: &str, before: &str, after: &str) -> String {
        let mut out = String::new();
        let (mut in_string, mut escaped) = (false, false);
        for c in json.chars() {
            match c {
                _ if escaped => escaped = false,
                '\\' if in_string => escaped = true,
                '"' => in_string = !in_string,
                ':' if !in_string => {
                    out.push_str(before);
                    out.push(':');
                    out.push_str(after);
                    continue;
                }
                ',' if !in_string => {
                    out.push(',');
                    out.push_str(after);
                    continue;
                }
                _ => {}
            }
            out.push(c);
        }
        out
    }

    /// Every member each protocol's text is read from, as upstreams send it compact; each is
    /// also read with Python's `json.dumps` spacing, pretty-printed, and with tabs and line
    /// breaks on both sides of the colon.
    #[test]
    fn the_text_of_each_protocols_content_event_with_any_json_spacing() {
        use StreamFormat::*;
        let table: [(StreamFormat, &str, usize); 14] = [
            (
                OpenAiChat,
                r#"{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"Hello"},"finish_reason":null}]}"#,
                5,
            ),
            (
                OpenAiChat,
                r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"x\""}}]}}]}"#,
                4,
            ),
            (
                OpenAiChat,
                r#"{"choices":[{"index":0,"delta":{"content":null,"reasoning_content":"think"}}]}"#,
                5,
            ),
            (
                OpenAiChat,
                r#"{"choices":[{"index":0,"delta":{"reasoning":"why"}}]}"#,
                3,
            ),
            (
                OpenAiChat,
                r#"{"choices":[{"index":0,"delta":{"refusal":"no way"}}]}"#,
                6,
            ),
            (
                OpenAiCompletions,
                r#"{"choices":[{"text":"abcd","index":0}]}"#,
                4,
            ),
            (
                OpenAiChat,
                r#"{"choices":[{"index":0,"delta":{"role":"assistant"}}]}"#,
                0,
            ),
            (OpenAiChat, "[DONE]", 0),
            (
                OpenAiResponses,
                r#"{"type":"response.output_text.delta","item_id":"m","output_index":0,"content_index":0,"delta":"abc"}"#,
                3,
            ),
            (
                OpenAiResponses,
                r#"{"type":"response.function_call_arguments.delta","item_id":"fc","output_index":1,"delta":"{\"q\":1}"}"#,
                7,
            ),
            (
                Anthropic,
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi there"}}"#,
                8,
            ),
            (
                Anthropic,
                r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"a\":1}"}}"#,
                7,
            ),
            (
                Anthropic,
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hmm, ok"}}"#,
                7,
            ),
            // A string cut short counts what there is.
            (OpenAiChat, r#"{"content":"ab\"c"#, 4),
        ];
        for (format, data, bytes) in table {
            let mut spacings = vec![
                data.to_owned(),
                respaced(data, "", " "),
                respaced(data, " \t", "\n\r "),
            ];
            if let Ok(value) = serde_json::from_str::<serde_json::Value>(data) {
                spacings.push(serde_json::to_string_pretty(&value).unwrap());
            }
            for spaced in spacings {
                assert_eq!(
                    content_text_bytes(format, spaced.as_bytes()),
                    bytes,
                    "{format:?} {spaced}"
                );
            }
        }
        assert_eq!(estimated_tokens(0), 0);
        assert_eq!(estimated_tokens(1), 1);
        assert_eq!(estimated_tokens(400), 100);
    }
}
