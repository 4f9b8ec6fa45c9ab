//! A Chat Completions stream relayed as it is (a Chat client of a Chat account): its chunks of
//! text alone (most of a stream) recognised through the stream's template
//! ([`chunk_template`](super::chunk_template)) at the cost of a byte comparison, where the
//! relay would search each for every member that could make it matter
//! (`stream_watch::matters_after_commit`: an error, a usage, a finish reason) and again for its
//! text (`content_bytes`). Any other chunk is left to those searches.

use std::borrow::Cow;

use super::chunk_template::Learned;
use super::text_delta;
use crate::wire::content_bytes::content_text_bytes;
use crate::wire::sse::SseEvent;
use crate::wire::stream_format::StreamFormat;

/// One relayed Chat stream's template of its text chunks.
#[derive(Debug, Default)]
pub struct ChatTextWatch {
    chunks: Learned<()>,
}

impl ChatTextWatch {
    /// When `event` is a chunk of text alone (no error, no usage, one choice whose delta holds
    /// a non-empty `content` and nothing a reader acts on, no finish reason): the bytes of
    /// generated text it carries, as `content_text_bytes` counts them. `None`: any other event
    /// (the relay reads it as it reads every event).
    pub fn text_bytes(&mut self, event: &SseEvent) -> Option<usize> {
        if event.event.is_some() {
            return None;
        }
        match text_delta::chat_content_learned(&event.data, &mut self.chunks)? {
            // No escape: the text's bytes are the string's.
            Cow::Borrowed(text) => Some(text.len()),
            // Escapes are counted as `content_text_bytes` counts them (one byte each).
            Cow::Owned(_) => Some(content_text_bytes(
                StreamFormat::OpenAiChat,
                event.data.as_bytes(),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::stream_watch::{classify_event, EventMeaning};
    use bytes::Bytes;

    fn event(data: &str) -> SseEvent {
        SseEvent {
            event: None,
            data: data.to_owned(),
            raw: Bytes::new(),
        }
    }

    /// Real-shaped chunks of one stream, in order: the role chunk, text (plain, escaped,
    /// non-ASCII), a tool call, reasoning, a refusal, the finish, the usage chunk, an error.
    const STREAM: &[&str] = &[
        r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-mini","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}"#,
        r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-mini","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"content":"Hello"},"logprobs":null,"finish_reason":null}],"usage":null}"#,
        r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-mini","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"content":" wor"},"logprobs":null,"finish_reason":null}],"usage":null}"#,
        r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-mini","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"content":"ld \"quoted\"\n\u00e9"},"logprobs":null,"finish_reason":null}],"usage":null}"#,
        r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-mini","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"content":"café ☕"},"logprobs":null,"finish_reason":null}],"usage":null}"#,
        r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-mini","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"content":"error"},"logprobs":null,"finish_reason":null}],"usage":null}"#,
        r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-mini","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":""}}]},"logprobs":null,"finish_reason":null}],"usage":null}"#,
        r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-mini","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"reasoning_content":"think"},"logprobs":null,"finish_reason":null}],"usage":null}"#,
        r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-mini","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"content":"more"},"logprobs":null,"finish_reason":null}],"usage":null}"#,
        r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-mini","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"content":"end"},"logprobs":null,"finish_reason":"stop"}],"usage":null}"#,
        r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-mini","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"content":"x"},"logprobs":null,"finish_reason":null}],"usage":{"prompt_tokens":5,"completion_tokens":7,"total_tokens":12}}"#,
        r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-mini","system_fingerprint":"fp_1","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":7,"total_tokens":12}}"#,
        r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-mini","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"content":"y"},"logprobs":null,"finish_reason":null}],"error":{"message":"overloaded"}}"#,
        r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-mini","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"content":"a"},"logprobs":null,"finish_reason":null},{"index":1,"delta":{"content":"b"},"logprobs":null,"finish_reason":null}],"usage":null}"#,
        r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-mini","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"content":"last"},"logprobs":null,"finish_reason":null}],"usage":null}"#,
        "[DONE]",
    ];

    /// Which of `STREAM` are chunks of text alone.
    const TEXT_ALONE: &[bool] = &[
        false, true, true, true, true, true, false, false, true, false, false, false, false, false,
        true, false,
    ];

    /// A chunk the watch takes is content as the relay's whole reading classifies it, with
    /// the bytes its search counts; every other chunk is left to the relay. Run twice so the
    /// second pass reads through the template the first learned.
    #[test]
    fn a_taken_chunk_is_content_with_the_searched_bytes_and_the_rest_is_left() {
        let mut watch = ChatTextWatch::default();
        for round in 0..2 {
            for (data, text_alone) in STREAM.iter().zip(TEXT_ALONE) {
                let event = event(data);
                let bytes = watch.text_bytes(&event);
                assert_eq!(bytes.is_some(), *text_alone, "round {round}: {data}");
                if let Some(bytes) = bytes {
                    assert_eq!(
                        classify_event(StreamFormat::OpenAiChat, &event),
                        EventMeaning::Content,
                        "{data}"
                    );
                    assert_eq!(
                        bytes,
                        content_text_bytes(StreamFormat::OpenAiChat, data.as_bytes()),
                        "round {round}: {data}"
                    );
                }
            }
        }
    }

    /// An event with a name is not a Chat chunk the template speaks for.
    #[test]
    fn a_named_event_is_left_to_the_searches() {
        let mut watch = ChatTextWatch::default();
        let mut named = event(STREAM[1]);
        assert!(watch.text_bytes(&named).is_some());
        named.event = Some("message".into());
        assert_eq!(watch.text_bytes(&named), None);
    }
}
