//! How many bytes of generated text one stream event carries: the string value of its
//! content member (`content`, `text`, `delta`, `arguments`, `partial_json`, `thinking`,
//! `reasoning…`, `refusal`). The relay adds these up so that a stream the client left before
//! its usage arrived can be charged an estimate of its output (behaviour §11). A byte search,
//! not a parse: it runs on every relayed event. It must not decide what an event means (that
//! is `stream_watch`).

use std::sync::LazyLock;

use memchr::memmem::Finder;

/// The members whose string value is generated text, in every protocol.
static CONTENT_MEMBERS: LazyLock<Vec<Finder<'static>>> = LazyLock::new(|| {
    [
        &b"\"content\":\""[..],
        b"\"text\":\"",
        b"\"delta\":\"",
        b"\"arguments\":\"",
        b"\"partial_json\":\"",
        b"\"thinking\":\"",
        b"\"reasoning_content\":\"",
        b"\"reasoning\":\"",
        b"\"refusal\":\"",
    ]
    .into_iter()
    .map(Finder::new)
    .collect()
});

/// The bytes of the first content string in `data` (an event's data; escapes count as the one
/// byte they stand for, roughly). 0 when there is none.
pub fn content_text_bytes(data: &[u8]) -> usize {
    let Some(start) = CONTENT_MEMBERS
        .iter()
        .filter_map(|finder| finder.find(data).map(|at| at + finder.needle().len()))
        .min()
    else {
        return 0;
    };
    let mut bytes = 0;
    let mut escaped = false;
    for &byte in data.get(start..).unwrap_or_default() {
        if escaped {
            escaped = false;
            continue;
        }
        match byte {
            b'\\' => {
                escaped = true;
                bytes += 1;
            }
            b'"' => return bytes,
            _ => bytes += 1,
        }
    }
    bytes
}

/// The tokens `bytes` of text or request body are estimated at: about four bytes a token
/// (OpenAI's and Anthropic's own rule of thumb for English), at least one for any bytes.
pub fn estimated_tokens(bytes: u64) -> u64 {
    bytes.div_ceil(4)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_of_each_protocols_content_event() {
        let table: [(&str, usize); 7] = [
            (
                r#"{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"Hello"},"finish_reason":null}]}"#,
                5,
            ),
            (
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi there"}}"#,
                8,
            ),
            (
                r#"{"type":"response.output_text.delta","item_id":"m","output_index":0,"content_index":0,"delta":"abc"}"#,
                3,
            ),
            (
                r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"a\":1}"}}"#,
                7,
            ),
            (
                r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"x\""}}]}}]}"#,
                4,
            ),
            (
                r#"{"choices":[{"index":0,"delta":{"role":"assistant"}}]}"#,
                0,
            ),
            ("[DONE]", 0),
        ];
        for (data, bytes) in table {
            assert_eq!(content_text_bytes(data.as_bytes()), bytes, "{data}");
        }
        assert_eq!(estimated_tokens(0), 0);
        assert_eq!(estimated_tokens(1), 1);
        assert_eq!(estimated_tokens(400), 100);
    }
}
