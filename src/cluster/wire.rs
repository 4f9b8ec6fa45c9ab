//! One shared-stream entry: a node's journaled event as flat string fields (`v`, `node`, `seq`,
//! `at_ms`, `schema`, `event` as the journal's JSON, and `fresh`: `1` when its node sends it
//! for the first time, `0` when it sends it again; an entry without it, from an older build,
//! reads as sent again — see `peer_progress` for what that changes). Decoding never panics: an entry that is
//! malformed, from another program, from a newer format or schema, or of a kind peers do not
//! apply, is a [`Skip`] with its reason, which the tail counts and logs.

use std::collections::HashMap;

use quotaroute_actors::policy::peer_merge::is_shared;
use quotaroute_journal::{Event, SCHEMA_VERSION};
use redis::Value;

/// The entry format this build writes and reads.
pub const WIRE_VERSION: u32 = 1;
/// Bytes of an entry's `event` JSON at most: a node's own largest shared event is under 2 KiB
/// (names are bounded), so a larger one is not a peer's and is not even decoded.
pub const EVENT_MAX_BYTES: usize = 16 * 1024;
/// Bytes of an origin's `node` id at most.
pub const NODE_MAX_BYTES: usize = 128;

/// A peer's event as read from the stream.
#[derive(Debug, Clone, PartialEq)]
pub struct Remote {
    pub node: String,
    pub seq: u64,
    pub at_ms: u64,
    pub event: Event,
    /// Its node sends it for the first time (not a republish).
    pub fresh: bool,
}

/// Why an entry is not applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Skip {
    #[error("field `{0}` missing or not a string")]
    Field(&'static str),
    #[error("field `{0}` is not a number")]
    Number(&'static str),
    #[error("entry format {0} is newer than this build's ({WIRE_VERSION})")]
    NewerFormat(u32),
    #[error("event schema {0} is newer than this build's ({SCHEMA_VERSION})")]
    NewerSchema(u32),
    #[error("event does not decode: {0}")]
    Event(String),
    #[error("`{0}` is not a kind peers share")]
    NotShared(&'static str),
    #[error("event is {0} bytes long; at most {EVENT_MAX_BYTES} are read")]
    TooLarge(usize),
    #[error(
        "`node` is not a node id (letters, digits, `-`, `_`, `.`; at most {NODE_MAX_BYTES} bytes)"
    )]
    NodeId,
}

impl Skip {
    /// Whether the entry broke a bound (counted as refused), rather than being one this build
    /// cannot or need not read (counted as skipped).
    pub fn is_refusal(&self) -> bool {
        matches!(self, Skip::TooLarge(_) | Skip::NodeId)
    }
}

/// The fields of `node`'s event `seq` for `XADD`; `fresh` when it is sent for the first time.
pub fn encode(
    node: &str,
    seq: u64,
    at_ms: u64,
    event: &Event,
    fresh: bool,
) -> Result<Vec<(&'static str, String)>, serde_json::Error> {
    Ok(vec![
        ("v", WIRE_VERSION.to_string()),
        ("node", node.to_owned()),
        ("seq", seq.to_string()),
        ("at_ms", at_ms.to_string()),
        ("schema", SCHEMA_VERSION.to_string()),
        ("event", serde_json::to_string(event)?),
        ("fresh", if fresh { "1" } else { "0" }.to_owned()),
    ])
}

fn text<'a>(fields: &'a HashMap<String, Value>, name: &'static str) -> Result<&'a str, Skip> {
    match fields.get(name) {
        Some(Value::BulkString(bytes)) => std::str::from_utf8(bytes).map_err(|_| Skip::Field(name)),
        Some(Value::SimpleString(text)) => Ok(text),
        _ => Err(Skip::Field(name)),
    }
}

fn number(fields: &HashMap<String, Value>, name: &'static str) -> Result<u64, Skip> {
    text(fields, name)?.parse().map_err(|_| Skip::Number(name))
}

/// Reads one entry's fields.
pub fn decode(fields: &HashMap<String, Value>) -> Result<Remote, Skip> {
    let version = u32::try_from(number(fields, "v")?).map_err(|_| Skip::Number("v"))?;
    if version > WIRE_VERSION {
        return Err(Skip::NewerFormat(version));
    }
    let schema = u32::try_from(number(fields, "schema")?).map_err(|_| Skip::Number("schema"))?;
    if schema > u32::from(SCHEMA_VERSION) {
        return Err(Skip::NewerSchema(schema));
    }
    let node = text(fields, "node")?.to_owned();
    if node.is_empty() {
        return Err(Skip::Field("node"));
    }
    if node.len() > NODE_MAX_BYTES
        || !node
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    {
        return Err(Skip::NodeId);
    }
    let seq = number(fields, "seq")?;
    let at_ms = number(fields, "at_ms")?;
    let json = text(fields, "event")?;
    if json.len() > EVENT_MAX_BYTES {
        return Err(Skip::TooLarge(json.len()));
    }
    let event: Event =
        serde_json::from_str(json).map_err(|error| Skip::Event(error.to_string()))?;
    if !is_shared(&event) {
        return Err(Skip::NotShared(event.kind()));
    }
    Ok(Remote {
        node,
        seq,
        at_ms,
        event,
        fresh: text(fields, "fresh").is_ok_and(|fresh| fresh == "1"),
    })
}

#[cfg(test)]
mod tests {
    use quotaroute_journal::testkit::sample_event;

    use super::*;

    fn fields(pairs: &[(&str, &str)]) -> HashMap<String, Value> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), Value::BulkString(v.as_bytes().to_vec())))
            .collect()
    }

    fn encoded(event: &Event) -> HashMap<String, Value> {
        let pairs = encode("node-a", 7, 1_000, event, true).unwrap();
        pairs
            .into_iter()
            .map(|(k, v)| (k.to_owned(), Value::BulkString(v.into_bytes())))
            .collect()
    }

    /// A peer still on journal schema 2 (this build writes 3) is read: the entry's event is
    /// JSON, and no kind peers share changed shape in schema 3.
    #[test]
    fn an_entry_from_a_schema_2_peer_is_applied() {
        let entry = fields(&[
            ("v", "1"),
            ("node", "node-old"),
            ("seq", "41"),
            ("at_ms", "2000"),
            ("schema", "2"),
            (
                "event",
                r#"{"model_locked":{"provider":"openai","connection":"k1","model":"gpt-4o","reason":"rate_limited","status":429,"error_code":null,"until_ms":62000,"failure_count":1,"source":"upstream"}}"#,
            ),
        ]);
        let remote = decode(&entry).unwrap();
        assert_eq!((remote.node.as_str(), remote.seq), ("node-old", 41));
        assert!(!remote.fresh, "an older build's entry may be a republish");
        let Event::ModelLocked(locked) = &remote.event else {
            panic!("{remote:?}");
        };
        assert_eq!(
            (locked.connection.as_str(), locked.until_ms),
            ("k1", 62_000)
        );
    }

    #[test]
    fn s9_a_shared_event_round_trips() {
        let locked = sample_event(7, 1);
        let remote = decode(&encoded(&locked)).unwrap();
        assert_eq!(remote.node, "node-a");
        assert_eq!(remote.seq, 7);
        assert_eq!(remote.at_ms, 1_000);
        assert_eq!(remote.event, locked);
        assert!(remote.fresh);
        let again = encode("node-a", 7, 1_000, &locked, false).unwrap();
        let again = again
            .into_iter()
            .map(|(k, v)| (k.to_owned(), Value::BulkString(v.into_bytes())))
            .collect();
        assert!(!decode(&again).unwrap().fresh);
    }

    #[test]
    fn s9_bad_entries_are_skipped_with_a_reason() {
        assert_eq!(decode(&fields(&[])), Err(Skip::Field("v")));
        assert_eq!(
            decode(&fields(&[("hello", "world")])),
            Err(Skip::Field("v"))
        );
        let mut newer = encoded(&sample_event(7, 1));
        newer.insert("v".into(), Value::BulkString(b"2".to_vec()));
        assert_eq!(decode(&newer), Err(Skip::NewerFormat(2)));
        let mut schema = encoded(&sample_event(7, 1));
        schema.insert("schema".into(), Value::BulkString(b"99".to_vec()));
        assert_eq!(decode(&schema), Err(Skip::NewerSchema(99)));
        let mut garbage = encoded(&sample_event(7, 1));
        garbage.insert(
            "event".into(),
            Value::BulkString(b"{\"no_such_kind\":{}}".to_vec()),
        );
        assert!(matches!(decode(&garbage), Err(Skip::Event(_))));
        let mut seq = encoded(&sample_event(7, 1));
        seq.insert("seq".into(), Value::BulkString(b"-1".to_vec()));
        assert_eq!(decode(&seq), Err(Skip::Number("seq")));
        // A request event is never shared: usage travels through leases.
        let success = quotaroute_journal::testkit::succeeded("openai", "k1", "m", 1, 1);
        assert_eq!(
            decode(&encoded(&success)),
            Err(Skip::NotShared("request_succeeded"))
        );
    }

    #[test]
    fn an_oversized_event_or_a_strange_node_id_is_refused_before_decoding() {
        let mut huge = encoded(&sample_event(7, 1));
        let big = format!("{{\"x\":\"{}\"}}", "m".repeat(1 << 20));
        huge.insert("event".into(), Value::BulkString(big.into_bytes()));
        let skip = decode(&huge).unwrap_err();
        assert!(matches!(skip, Skip::TooLarge(n) if n > 1 << 20), "{skip:?}");
        assert!(skip.is_refusal());
        let mut node = encoded(&sample_event(7, 1));
        node.insert("node".into(), Value::BulkString(b"node\na".to_vec()));
        assert_eq!(decode(&node), Err(Skip::NodeId));
        node.insert("node".into(), Value::BulkString(vec![b'n'; 129]));
        assert_eq!(decode(&node), Err(Skip::NodeId));
        assert!(!Skip::NewerFormat(2).is_refusal());
    }
}
