//! Which conversation a request belongs to (behaviour §10 "Which requests belong together"):
//! the explicit hints in order (`prompt_cache_key`, Anthropic `metadata.user_id`, a session
//! header), else a digest of the stable prefix (`tools`, `system`, the messages through the
//! first user message; Responses: `instructions` and the first input item) — never the system
//! prompt alone. Namespaced by client.
//!
//! Pure and cheap: the body scan of `body_rewrite` records where the parts are
//! ([`PromptSpans`]); this file hashes those byte ranges of the original body in place (xxh3,
//! no copy) and allocates nothing, whether or not a group is found. The digest is all that
//! leaves this file: prompt text is never kept, logged or journaled.

use http::HeaderMap;
use xxhash_rust::xxh3::Xxh3;

/// A byte range `[start, end)` inside the request body (as `body_rewrite` finds them).
pub type Span = (usize, usize);

/// Session headers, in the order they are asked (behaviour §10): ours, Claude Code's, Codex's
/// two, the common one.
pub const SESSION_HEADERS: [&str; 5] = [
    "x-quotaroute-affinity",
    "x-claude-code-session-id",
    "session-id",
    "thread-id",
    "x-session-id",
];

/// Where the parts that may name a conversation sit in the body (found by the one body scan).
/// Spans are of the raw JSON values, quotes included.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PromptSpans {
    pub prompt_cache_key: Option<Span>,
    pub metadata_user_id: Option<Span>,
    pub tools: Option<Span>,
    pub system: Option<Span>,
    /// The messages from the first through the first `"role":"user"` one (none: no user
    /// message, so no prefix).
    pub messages_prefix: Option<Span>,
    pub instructions: Option<Span>,
    /// Responses: the `input` string, or its first item.
    pub first_input: Option<Span>,
}

/// What named the group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupSource {
    PromptCacheKey,
    MetadataUserId,
    Header(&'static str),
    Prefix,
    /// A chain of responses the router kept (`previous_response_id`, behaviour §14).
    KeptChain,
}

impl GroupSource {
    pub fn as_str(self) -> &'static str {
        match self {
            GroupSource::PromptCacheKey => "prompt_cache_key",
            GroupSource::MetadataUserId => "metadata.user_id",
            GroupSource::Header(name) => name,
            GroupSource::Prefix => "prefix",
            GroupSource::KeptChain => "previous_response_id",
        }
    }

    fn tag(self) -> u8 {
        match self {
            GroupSource::PromptCacheKey => 1,
            GroupSource::MetadataUserId => 2,
            // Every session header names the same thing: a client's session.
            GroupSource::Header(_) => 3,
            GroupSource::Prefix => 4,
            GroupSource::KeptChain => 5,
        }
    }
}

/// A request's conversation: a digest, namespaced by its client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Group {
    pub digest: u64,
    pub source: GroupSource,
}

/// The request's group, if it has one. `body` is the body `spans` were found in; without an
/// explicit hint a body shorter than `min_prompt_bytes` has none (behaviour §10).
pub fn derive_group(
    client: &str,
    body: &[u8],
    spans: &PromptSpans,
    headers: &HeaderMap,
    min_prompt_bytes: usize,
) -> Option<Group> {
    let part = |span: Option<Span>| span.and_then(|(start, end)| body.get(start..end));
    let hint = part(spans.prompt_cache_key)
        .filter(|raw| is_named(raw))
        .map(|raw| (GroupSource::PromptCacheKey, raw))
        .or_else(|| {
            part(spans.metadata_user_id)
                .filter(|raw| is_named(raw))
                .map(|raw| (GroupSource::MetadataUserId, raw))
        })
        .or_else(|| session_header(headers));
    if let Some((source, raw)) = hint {
        return Some(Group {
            digest: digest(client, source, &[raw]),
            source,
        });
    }
    if body.len() < min_prompt_bytes {
        return None;
    }
    // Never the system prompt alone: without the first user turn (or input item) no prefix.
    let turn = part(spans.messages_prefix).or_else(|| part(spans.first_input))?;
    let parts = [
        part(spans.tools).unwrap_or_default(),
        part(spans.system).unwrap_or_default(),
        part(spans.instructions).unwrap_or_default(),
        turn,
    ];
    Some(Group {
        digest: digest(client, GroupSource::Prefix, &parts),
        source: GroupSource::Prefix,
    })
}

/// The group of a chain of kept responses whose first is `root` (behaviour §14): every turn
/// of the chain is one conversation.
pub fn kept_chain_group(client: &str, root: &str) -> Group {
    Group {
        digest: digest(client, GroupSource::KeptChain, &[root.as_bytes()]),
        source: GroupSource::KeptChain,
    }
}

/// The first of [`SESSION_HEADERS`] (in that order) the request has with a value: one pass
/// over the request's headers, comparing names, rather than a hashed lookup per name.
fn session_header(headers: &HeaderMap) -> Option<(GroupSource, &[u8])> {
    let mut best: Option<(usize, &[u8])> = None;
    for (name, value) in headers {
        let name = name.as_str();
        let Some(rank) = SESSION_HEADERS
            .iter()
            .position(|known| known.len() == name.len() && *known == name)
        else {
            continue;
        };
        let value = value.as_bytes();
        if !value.is_empty() && best.is_none_or(|(best_rank, _)| rank < best_rank) {
            best = Some((rank, value));
        }
    }
    best.map(|(rank, value)| (GroupSource::Header(SESSION_HEADERS[rank]), value))
}

/// A hint value that names something: not `null`, not an empty string.
fn is_named(raw: &[u8]) -> bool {
    raw != b"null" && raw != b"\"\""
}

fn digest(client: &str, source: GroupSource, parts: &[&[u8]]) -> u64 {
    let mut hasher = Xxh3::new();
    hasher.update(client.as_bytes());
    hasher.update(&[0, source.tag()]);
    for part in parts {
        // Lengths first, so moving bytes between parts changes the digest.
        hasher.update(&(part.len() as u64).to_le_bytes());
        hasher.update(part);
    }
    hasher.digest()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::parse_request;

    const MIN: usize = 4096;

    fn group(body: &str, headers: &HeaderMap) -> Option<Group> {
        let info = parse_request(body.as_bytes()).unwrap();
        derive_group("default", body.as_bytes(), &info.prompt, headers, MIN)
    }

    fn none() -> HeaderMap {
        HeaderMap::new()
    }

    fn long_system() -> String {
        "You are a careful assistant. ".repeat(200)
    }

    fn chat(system: &str, first_user: &str, later: &[&str]) -> String {
        let mut messages = vec![
            serde_json::json!({"role": "system", "content": system}),
            serde_json::json!({"role": "user", "content": first_user}),
        ];
        for (i, text) in later.iter().enumerate() {
            let role = if i % 2 == 0 { "assistant" } else { "user" };
            messages.push(serde_json::json!({"role": role, "content": text}));
        }
        serde_json::json!({"model": "team", "messages": messages}).to_string()
    }

    #[test]
    fn later_turns_of_a_conversation_share_its_group_and_others_do_not() {
        let system = long_system();
        let turn1 = group(&chat(&system, "plan a trip", &[]), &none()).unwrap();
        let turn3 = group(&chat(&system, "plan a trip", &["ok", "more"]), &none()).unwrap();
        let other = group(&chat(&system, "write a poem", &[]), &none()).unwrap();
        assert_eq!(turn1.source, GroupSource::Prefix);
        assert_eq!(turn1, turn3);
        assert_ne!(
            turn1.digest, other.digest,
            "one system prompt is not one group"
        );
    }

    #[test]
    fn short_prompts_without_a_hint_have_no_group() {
        assert_eq!(group(&chat("be brief", "hi", &[]), &none()), None);
    }

    #[test]
    fn a_system_prompt_without_a_user_turn_has_no_group() {
        let body = serde_json::json!({"model": "team", "system": long_system(),
            "messages": [{"role": "assistant", "content": "hello"}]})
        .to_string();
        assert_eq!(group(&body, &none()), None);
    }

    #[test]
    fn hints_come_in_order_and_bind_unrelated_prompts() {
        let a = r#"{"model":"m","prompt_cache_key":"k1","metadata":{"user_id":"u1"},"messages":[{"role":"user","content":"a"}]}"#;
        let b =
            r#"{"model":"m","prompt_cache_key":"k1","messages":[{"role":"user","content":"b"}]}"#;
        let mut headers = HeaderMap::new();
        headers.insert("session-id", "s1".parse().unwrap());
        let ga = group(a, &headers).unwrap();
        assert_eq!(ga.source, GroupSource::PromptCacheKey);
        assert_eq!(ga, group(b, &none()).unwrap());

        let c = r#"{"model":"m","metadata":{"user_id":"u1"},"messages":[]}"#;
        let gc = group(c, &headers).unwrap();
        assert_eq!(gc.source, GroupSource::MetadataUserId);
        assert_ne!(gc.digest, ga.digest);

        let d = r#"{"model":"m","prompt_cache_key":null,"messages":[]}"#;
        let gd = group(d, &headers).unwrap();
        assert_eq!(gd.source, GroupSource::Header("session-id"));
        headers.insert("x-quotaroute-affinity", "s1".parse().unwrap());
        let ge = group(d, &headers).unwrap();
        assert_eq!(ge.source, GroupSource::Header("x-quotaroute-affinity"));
        assert_eq!(ge.digest, gd.digest, "every session header names a session");
    }

    #[test]
    fn session_headers_rank_in_their_order_whatever_order_they_arrive_in() {
        let d = r#"{"model":"m","messages":[]}"#;
        let mut headers = HeaderMap::new();
        headers.insert("x-session-id", "late".parse().unwrap());
        headers.insert("thread-id", "t".parse().unwrap());
        headers.insert("x-claude-code-session-id", "".parse().unwrap());
        headers.insert("user-agent", "claude-cli".parse().unwrap());
        // An empty value names nothing: the next header in rank does.
        let g = group(d, &headers).unwrap();
        assert_eq!(g.source, GroupSource::Header("thread-id"));
        headers.append("session-id", "s".parse().unwrap());
        assert_eq!(
            group(d, &headers).unwrap().source,
            GroupSource::Header("session-id")
        );
        let mut only_last = HeaderMap::new();
        only_last.insert("x-session-id", "late".parse().unwrap());
        assert_eq!(
            group(d, &only_last).unwrap().source,
            GroupSource::Header("x-session-id")
        );
        assert_eq!(group(d, &none()), None);
    }

    #[test]
    fn clients_never_share_a_group() {
        let body = br#"{"model":"m","prompt_cache_key":"k1"}"#;
        let info = parse_request(body).unwrap();
        let a = derive_group("a", body, &info.prompt, &none(), MIN).unwrap();
        let b = derive_group("b", body, &info.prompt, &none(), MIN).unwrap();
        assert_ne!(a.digest, b.digest);
    }

    #[test]
    fn anthropic_and_responses_prefixes() {
        let system = long_system();
        let msg = |later: &str| {
            serde_json::json!({"model": "m", "system": system, "tools": [{"name": "t"}],
                "messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": later}]})
            .to_string()
        };
        assert_eq!(group(&msg("x"), &none()), group(&msg("y"), &none()));
        assert!(group(&msg("x"), &none()).is_some());

        let responses = |first: &str, second: &str| {
            serde_json::json!({"model": "m", "instructions": system,
                "input": [{"role": "user", "content": first}, {"role": "user", "content": second}]})
            .to_string()
        };
        let r1 = group(&responses("a", "b"), &none()).unwrap();
        assert_eq!(Some(r1), group(&responses("a", "c"), &none()));
        assert_ne!(Some(r1), group(&responses("z", "b"), &none()));
        let text = serde_json::json!({"model": "m", "instructions": system, "input": "hello"});
        assert!(group(&text.to_string(), &none()).is_some());
    }

    /// The scan the node asks for (only what `derive_group` can use) names the same group as
    /// the full scan, for long and short bodies, with and without hints.
    #[test]
    fn the_scan_a_body_needs_gives_the_same_group_as_the_full_scan() {
        use crate::wire::body_rewrite::{parse_request_for, PromptScan};
        let system = long_system();
        let bodies = [
            chat(&system, "plan a trip", &["ok", "more"]),
            chat("be brief", "hi", &[]),
            r#"{"model":"m","prompt_cache_key":"k1","messages":[{"role":"user","content":"a"}]}"#
                .to_string(),
            r#"{"model":"m","metadata":{"user_id":"u1"},"messages":[]}"#.to_string(),
            serde_json::json!({"model": "m", "instructions": system, "input": "hello"}).to_string(),
        ];
        let mut session = HeaderMap::new();
        session.insert("session-id", "s1".parse().unwrap());
        let mut prefix_groups = 0;
        for body in &bodies {
            for headers in [none(), session.clone()] {
                let full = group(body, &headers);
                let scan = PromptScan::for_body(true, body.len(), MIN);
                let info = parse_request_for(body.as_bytes(), scan).unwrap();
                let scanned = derive_group("default", body.as_bytes(), &info.prompt, &headers, MIN);
                assert_eq!(scanned, full, "{scan:?} of {body:.60}");
                if full.is_some_and(|g| g.source == GroupSource::Prefix) {
                    prefix_groups += 1;
                }
            }
        }
        assert_eq!(prefix_groups, 2, "the long bodies are grouped by prefix");
        // Short and off: nothing of the prefix is collected.
        let short = parse_request_for(bodies[1].as_bytes(), PromptScan::HintsOnly).unwrap();
        assert_eq!(short.prompt, PromptSpans::default());
        let hinted = parse_request_for(bodies[2].as_bytes(), PromptScan::HintsOnly).unwrap();
        assert!(hinted.prompt.prompt_cache_key.is_some());
        assert_eq!(hinted.prompt.messages_prefix, None);
        let off = parse_request_for(bodies[2].as_bytes(), PromptScan::Nothing).unwrap();
        assert_eq!(off.prompt, PromptSpans::default());
        assert_eq!(&*off.model, "m");
    }

    #[test]
    fn odd_shapes_are_not_errors() {
        for body in [
            r#"{"model":"m","messages":"not a list"}"#,
            r#"{"model":"m","messages":[1,"x",{"role":7}]}"#,
            r#"{"model":"m","metadata":"x","input":{"a":1}}"#,
            r#"{"model":"m","metadata":{"user_id":{"nested":true}},"messages":{"a":[1]}}"#,
        ] {
            let info = parse_request(body.as_bytes()).unwrap();
            let _ = derive_group("default", body.as_bytes(), &info.prompt, &none(), 0);
        }
    }
}
