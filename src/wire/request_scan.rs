//! A request body's top-level members the router reads (`model`, `stream`, `stream_options`,
//! and what may name its conversation), each as its raw JSON text borrowed from the body: by
//! one `json_scan` walk ([`top_members`]), which reads exactly what `body_rewrite`'s serde read
//! finds or declines (`None`) and leaves the body to it — a repeated member it reads, a body that
//! is not one object of UTF-8, a `messages` element before the first user turn that serde would
//! read by position (a list), and what `json_scan` does not read exactly as `serde_json` does.

use crate::wire::json_scan::{Scan, Seen, DEPTH};

/// The top-level members read, each the raw text of its value (`Some("null")` for `null`).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TopMembers<'a> {
    pub model: Option<&'a str>,
    pub stream: Option<&'a str>,
    pub stream_options: Option<&'a str>,
    pub prompt_cache_key: Option<&'a str>,
    pub metadata: Option<&'a str>,
    pub tools: Option<&'a str>,
    pub system: Option<&'a str>,
    /// `messages` through its first user turn, when asked for and it has one.
    pub messages: Option<ListPrefix<'a>>,
    pub instructions: Option<&'a str>,
    pub input: Option<&'a str>,
}

/// The raw text of a list's first element and of the element a prefix ends with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ListPrefix<'a> {
    pub first: &'a str,
    pub last: &'a str,
}

/// `body`'s members as serde's read finds them (`messages`' prefix only `with_prefix`), or
/// `None` when the walk declines the body.
pub(crate) fn top_members(body: &[u8], with_prefix: bool) -> Option<TopMembers<'_>> {
    let text = std::str::from_utf8(body).ok()?;
    let mut scan = Scan::new(text);
    let mut top = TopMembers::default();
    let mut seen = Seen::default();
    scan.object(|scan, key| {
        let (bit, slot) = match &*key {
            "model" => (0, &mut top.model),
            "stream" => (1, &mut top.stream),
            "stream_options" => (2, &mut top.stream_options),
            "prompt_cache_key" => (3, &mut top.prompt_cache_key),
            "metadata" => (4, &mut top.metadata),
            "tools" => (5, &mut top.tools),
            "system" => (6, &mut top.system),
            "instructions" => (7, &mut top.instructions),
            "input" => (8, &mut top.input),
            "messages" => {
                seen.first(9)?;
                if with_prefix {
                    top.messages = user_prefix(scan)?;
                } else {
                    scan.value(DEPTH)?;
                }
                return Some(());
            }
            _ => return scan.skip(DEPTH),
        };
        seen.first(bit)?;
        *slot = Some(scan.value(DEPTH)?);
        Some(())
    })?;
    scan.end()?;
    Some(top)
}

/// A list through its first element of `"role": "user"` (`None` inside: not a list, or no such
/// element; `None` outside: declined).
fn user_prefix<'a>(scan: &mut Scan<'a>) -> Option<Option<ListPrefix<'a>>> {
    if scan.next_byte()? != b'[' {
        scan.value(DEPTH)?;
        return Some(None);
    }
    let (mut first, mut last) = (None, None);
    scan.array(|scan| {
        let element = if last.is_none() {
            let (element, is_user) = role_is_user(scan)?;
            if is_user {
                last = Some(element);
            }
            element
        } else {
            scan.value(DEPTH)?
        };
        first.get_or_insert(element);
        Some(())
    })?;
    Some(
        first
            .zip(last)
            .map(|(first, last)| ListPrefix { first, last }),
    )
}

/// One element and whether it is an object of exactly one `role`, `"user"` as sent (a repeated
/// `role` is no user turn: serde refuses to read it). A list declines: serde reads a struct
/// from one by position.
fn role_is_user<'a>(scan: &mut Scan<'a>) -> Option<(&'a str, bool)> {
    let start = scan.value_start();
    match scan.next_byte()? {
        b'{' => {
            let (mut roles, mut user) = (0, false);
            scan.object(|scan, key| {
                if key != "role" {
                    return scan.skip(DEPTH);
                }
                roles += 1;
                user = scan.value(DEPTH)? == "\"user\"";
                Some(())
            })?;
            Some((scan.read_since(start)?, roles == 1 && user))
        }
        b'[' => None,
        _ => Some((scan.value(DEPTH)?, false)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chat_request_s_members_are_found() {
        let body = br#" {"model":"m","messages":[{"role":"system","content":"s"},{"content":"u","role" : "user"},{"role":"assistant"}],
            "stream":true,"stream_options":{"include_usage":true},"metadata":{"user_id":"u1"},"max_tokens":64} "#;
        let top = top_members(body, true).expect("read");
        assert_eq!(top.model, Some("\"m\""));
        assert_eq!(top.stream, Some("true"));
        assert_eq!(top.stream_options, Some("{\"include_usage\":true}"));
        assert_eq!(top.metadata, Some("{\"user_id\":\"u1\"}"));
        let prefix = top.messages.expect("a user turn");
        assert_eq!(prefix.first, "{\"role\":\"system\",\"content\":\"s\"}");
        assert_eq!(prefix.last, "{\"content\":\"u\",\"role\" : \"user\"}");
        assert_eq!(top_members(body, false).expect("read").messages, None);
    }

    #[test]
    fn what_serde_reads_otherwise_is_declined() {
        for body in [
            &br#"{"model":"m","model":"n"}"#[..],
            br#"{"model":"m","messages":[],"messages":[]}"#,
            br#"{"model":"m","messages":[["user"]]}"#,
            br#"{"model":1e3}"#,
            br#"{"model":"\ud800"}"#,
            b"{\"model\":\"m\x01\"}",
            b"{\"model\":\"\xc3\"}",
            br#"{"model":"m"} x"#,
            br#"[{"model":"m"}]"#,
        ] {
            assert_eq!(
                top_members(body, true),
                None,
                "{}",
                String::from_utf8_lossy(body)
            );
        }
        // A repeated role is no user turn; a list after the user turn is only passed over.
        let top = top_members(
            br#"{"messages":[{"role":"user","role":"user"},{"role":"user"},["x"]]}"#,
            true,
        )
        .expect("read");
        assert_eq!(top.messages.map(|p| p.last), Some("{\"role\":\"user\"}"));
    }
}
