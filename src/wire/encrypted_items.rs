//! A Responses request's encrypted items (behaviour §10 "Encrypted items"): which items of its
//! `input` carry `encrypted_content`, which connection made each (read from the router's seal,
//! `item_seal`), and the body one target gets — each sealed item restored to the upstream's own
//! bytes when the target made it, left out when another connection did (the target could not
//! read it: OpenAI answers 400 `invalid_encrypted_content`) or when its seal does not open for
//! the client that sent it (forged, made under another key, or handed to another client), or
//! every encrypted item left out for the one retry after such a 400. Everything outside the `input` array keeps its bytes;
//! a request without encrypted items is never touched.
//!
//! Owns the scan and the per-target body; where the request goes is the router's.

use std::borrow::Cow;

use bytes::Bytes;
use memchr::memmem;
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::wire::item_seal::{
    content_spans, write_json_string, SealKey, CARRIED_PREFIX, SEAL_PREFIX,
};

/// Who made one encrypted item of a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Maker {
    /// Sealed by this router when this connection answered.
    Connection(String),
    /// In the sealed form, but its seal does not verify for the client that sent it (another
    /// key, another client's, or forged): unreadable, so left out of every body — it neither
    /// steers the request nor reaches the account that made it.
    Unverified,
    /// Not sealed by the router (the client got it elsewhere): forwarded as it came.
    Unknown,
    /// A thinking block the router encrypted (behaviour §14), and the connection it opens for
    /// (`None`: it does not open). No OpenAI-format account reads it: left out of every body
    /// here (its own connection gets it through translation).
    Carried(Option<String>),
}

/// The encrypted items of one request, in `input` order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncryptedItems {
    makers: Vec<Maker>,
}

/// The body for one target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetBody {
    pub body: Bytes,
    /// Encrypted items left out of it.
    pub left_out: u32,
}

/// The byte spans of the `input` array and of each of its items.
struct InputItems {
    array: (usize, usize),
    items: Vec<(usize, usize)>,
}

fn offset_in(body: &[u8], part: &str) -> Option<(usize, usize)> {
    let start = (part.as_ptr() as usize).checked_sub(body.as_ptr() as usize)?;
    let end = start + part.len();
    (end <= body.len()).then_some((start, end))
}

/// Finds `input` and its items without building them.
fn input_items(body: &[u8]) -> Option<InputItems> {
    #[derive(Deserialize)]
    struct Top<'a> {
        #[serde(borrow)]
        input: Option<&'a RawValue>,
    }
    let top: Top = serde_json::from_slice(body).ok()?;
    let input = top.input?;
    let items: Vec<&RawValue> = serde_json::from_str(input.get()).ok()?;
    let array = offset_in(body, input.get())?;
    let items = items
        .iter()
        .map(|item| offset_in(body, item.get()))
        .collect::<Option<Vec<_>>>()?;
    Some(InputItems { array, items })
}

impl EncryptedItems {
    /// The request's encrypted items as `client` sent them (a seal opens only for the client
    /// it was handed to); `None` when it has none (the common case costs one substring search).
    pub fn scan(body: &[u8], key: &SealKey, client: &str) -> Option<EncryptedItems> {
        memmem::find(body, b"\"encrypted_content\"")?;
        let input = input_items(body)?;
        let mut makers = Vec::new();
        for &(start, end) in &input.items {
            let item = &body[start..end];
            let Some(span) = content_spans(item).into_iter().next() else {
                continue;
            };
            let maker = match span.value(item) {
                Some(value) if value.starts_with(CARRIED_PREFIX) => Maker::Carried(
                    key.open_carried(client, &value)
                        .map(|carried| carried.connection),
                ),
                Some(value) => match key.open(client, &value) {
                    Some(opened) => opened.maker.map_or(Maker::Unverified, Maker::Connection),
                    None => Maker::Unknown,
                },
                None => Maker::Unknown,
            };
            makers.push(maker);
        }
        (!makers.is_empty()).then_some(EncryptedItems { makers })
    }

    /// The connection the request should go to while it can serve: the maker of its newest
    /// sealed item (older items of another maker are left out wherever it goes).
    pub fn maker(&self) -> Option<&str> {
        self.makers.iter().rev().find_map(|maker| match maker {
            Maker::Connection(connection) | Maker::Carried(Some(connection)) => {
                Some(connection.as_str())
            }
            _ => None,
        })
    }

    /// How many items carry encrypted content.
    pub fn len(&self) -> usize {
        self.makers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.makers.is_empty()
    }

    /// The items `connection` cannot read (another connection made them, or their seal does
    /// not open), or every item when `leave_all_out`.
    pub fn unreadable_by(&self, connection: &str, leave_all_out: bool) -> u32 {
        let count = self
            .makers
            .iter()
            .filter(|maker| leave_all_out || Self::foreign(maker, connection))
            .count();
        u32::try_from(count).unwrap_or(u32::MAX)
    }

    fn foreign(maker: &Maker, connection: &str) -> bool {
        match maker {
            Maker::Connection(made_by) => made_by != connection,
            Maker::Carried(_) | Maker::Unverified => true,
            Maker::Unknown => false,
        }
    }

    /// `body` (the client's, or the one already rewritten for the target: only `model` and
    /// `stream_options` differ) as `connection` gets it: its own sealed items restored, items
    /// of other connections and items whose seal does not open left out (all of them when
    /// `leave_all_out`). `None`: `body` goes as it is.
    pub fn body_for(
        &self,
        body: &[u8],
        connection: &str,
        leave_all_out: bool,
    ) -> Option<TargetBody> {
        let input = input_items(body)?;
        let mut out = Vec::with_capacity(body.len());
        out.extend_from_slice(&body[..input.array.0]);
        out.push(b'[');
        let mut changed = false;
        let mut left_out = 0u32;
        let mut kept = 0usize;
        let mut makers = self.makers.iter();
        for &(start, end) in &input.items {
            let item = &body[start..end];
            let spans = content_spans(item);
            let restored: Cow<[u8]> = if spans.is_empty() {
                Cow::Borrowed(item)
            } else {
                let maker = makers.next().unwrap_or(&Maker::Unknown);
                if leave_all_out || Self::foreign(maker, connection) {
                    left_out += 1;
                    changed = true;
                    continue;
                }
                let restored = restore(item, &spans);
                changed |= matches!(restored, Cow::Owned(_));
                restored
            };
            if kept > 0 {
                out.push(b',');
            }
            out.extend_from_slice(&restored);
            kept += 1;
        }
        if !changed {
            return None;
        }
        out.push(b']');
        out.extend_from_slice(&body[input.array.1..]);
        Some(TargetBody {
            body: Bytes::from(out),
            left_out,
        })
    }
}

/// `item` with each sealed `encrypted_content` back to the upstream's original.
fn restore<'a>(item: &'a [u8], spans: &[crate::wire::item_seal::ContentSpan]) -> Cow<'a, [u8]> {
    let mut out: Option<Vec<u8>> = None;
    let mut copied_to = 0;
    for span in spans {
        let Some(value) = span.value(item) else {
            continue;
        };
        let Some(sealed) = value.strip_prefix(SEAL_PREFIX) else {
            continue;
        };
        // `<connection>.<mac>.<original>`: the original is whatever follows the second dot.
        let Some(original) = sealed.splitn(3, '.').nth(2) else {
            continue;
        };
        let out = out.get_or_insert_with(|| Vec::with_capacity(item.len()));
        out.extend_from_slice(&item[copied_to..span.start]);
        write_json_string(out, original);
        copied_to = span.end;
    }
    match out {
        None => Cow::Borrowed(item),
        Some(mut out) => {
            out.extend_from_slice(&item[copied_to..]);
            Cow::Owned(out)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn key() -> SealKey {
        SealKey::from_secret(b"k")
    }

    /// The client every test's items were handed to.
    const C: &str = "team-a";

    fn body(items: Value) -> Vec<u8> {
        serde_json::to_vec(
            &json!({"model": "team", "input": items, "include": ["reasoning.encrypted_content"]}),
        )
        .unwrap()
    }

    fn reasoning(content: &str) -> Value {
        json!({"type": "reasoning", "summary": [], "encrypted_content": content})
    }

    #[test]
    fn s10_a_body_without_encrypted_items_is_not_touched() {
        let plain = body(json!([{"role": "user", "content": "hi"}]));
        assert_eq!(EncryptedItems::scan(&plain, &key(), C), None);
        // An unsealed item (made elsewhere) is forwarded as it came.
        let foreign = body(json!([reasoning("gAAAAAx")]));
        let items = EncryptedItems::scan(&foreign, &key(), C).unwrap();
        assert_eq!(items.maker(), None);
        assert_eq!(items.body_for(&foreign, "oa-1", false), None);
        assert_eq!(items.unreadable_by("oa-1", false), 0);
    }

    #[test]
    fn s10_the_maker_gets_its_items_restored_and_others_leave_them_out() {
        let k = key();
        let sent = body(json!([
            {"role": "user", "content": "one"},
            reasoning(&k.seal(C, "oa-1", "gAAAAAold")),
            {"role": "user", "content": "two"},
            reasoning(&k.seal(C, "oa-2", "gAAAAAnew")),
            {"type": "compaction", "encrypted_content": k.seal(C, "oa-2", "gAAAAAcmp")},
        ]));
        let items = EncryptedItems::scan(&sent, &k, C).unwrap();
        assert_eq!(items.len(), 3);
        assert_eq!(
            items.maker(),
            Some("oa-2"),
            "the newest sealed item's maker"
        );

        let to_maker = items.body_for(&sent, "oa-2", false).unwrap();
        let value: Value = serde_json::from_slice(&to_maker.body).unwrap();
        assert_eq!(to_maker.left_out, 1);
        let input = value["input"].as_array().unwrap();
        assert_eq!(input.len(), 4);
        assert_eq!(input[1]["content"], "two");
        assert_eq!(input[2]["encrypted_content"], "gAAAAAnew");
        assert_eq!(input[3]["encrypted_content"], "gAAAAAcmp");
        assert_eq!(value["include"][0], "reasoning.encrypted_content");

        let elsewhere = items.body_for(&sent, "oa-3", false).unwrap();
        let value: Value = serde_json::from_slice(&elsewhere.body).unwrap();
        assert_eq!(elsewhere.left_out, 3);
        assert_eq!(
            value["input"],
            json!([{"role": "user", "content": "one"}, {"role": "user", "content": "two"}])
        );
        assert_eq!(items.unreadable_by("oa-3", false), 3);
        assert_eq!(items.unreadable_by("oa-2", false), 1);

        let retried = items.body_for(&sent, "oa-2", true).unwrap();
        assert_eq!(retried.left_out, 3);
    }

    #[test]
    fn s14_carried_thinking_steers_to_its_maker_and_is_left_out_of_spliced_bodies() {
        let k = key();
        let carried = k.seal_carried(C, "an-1", b"{}").unwrap();
        let engine = &base64::engine::general_purpose::URL_SAFE_NO_PAD;
        use base64::Engine;
        let retagged = carried.replacen(&engine.encode("an-1"), &engine.encode("an-2"), 1);
        let sent = body(json!([
            {"role": "user", "content": "one"},
            reasoning(&k.seal(C, "oa-1", "gAAAAAold")),
            reasoning(&retagged),
            reasoning(&carried),
        ]));
        let items = EncryptedItems::scan(&sent, &k, C).unwrap();
        assert_eq!(items.maker(), Some("an-1"), "the newest one that opens");
        // An OpenAI-format target reads neither; its own sealed item is restored.
        let to_openai = items.body_for(&sent, "oa-1", false).unwrap();
        let value: Value = serde_json::from_slice(&to_openai.body).unwrap();
        assert_eq!(to_openai.left_out, 2);
        assert_eq!(
            value["input"],
            json!([{"role": "user", "content": "one"}, reasoning("gAAAAAold")])
        );
        assert_eq!(items.unreadable_by("oa-1", false), 2);
        // In a spliced body no connection reads a carried block, its maker included.
        assert_eq!(items.unreadable_by("an-1", false), 3);
    }

    #[test]
    fn s10_a_seal_that_does_not_open_is_left_out_everywhere() {
        let k = key();
        let theirs = k.seal("team-b", "oa-1", "gAAAAAtheirs");
        let forged = SealKey::from_secret(b"guessed").seal(C, "oa-2", "gAAAAAforged");
        let sent = body(json!([
            {"role": "user", "content": "one"},
            reasoning(&theirs),
            reasoning(&forged),
        ]));
        let items = EncryptedItems::scan(&sent, &k, C).unwrap();
        assert_eq!(items.maker(), None, "neither steers the request");
        for connection in ["oa-1", "oa-2", "oa-3"] {
            let out = items.body_for(&sent, connection, false).unwrap();
            assert_eq!(out.left_out, 2, "{connection}");
            let text = std::str::from_utf8(&out.body).unwrap();
            assert!(!text.contains("gAAAAAtheirs") && !text.contains("gAAAAAforged"));
            assert_eq!(items.unreadable_by(connection, false), 2);
        }
        // The client it was handed to still reaches its maker with it.
        let own = EncryptedItems::scan(&sent, &k, "team-b").unwrap();
        assert_eq!(own.maker(), Some("oa-1"));
    }

    #[test]
    fn s10_bytes_outside_the_input_array_are_kept() {
        let k = key();
        let sealed = k.seal(C, "oa-1", "gAAAAAz");
        let sent = format!(
            "{{ \"model\" : \"team\",\n \"input\": [ {{\"type\":\"reasoning\",\"encrypted_content\":\"{sealed}\"}} ] , \"x\": 1 }}"
        );
        let items = EncryptedItems::scan(sent.as_bytes(), &k, C).unwrap();
        let out = items.body_for(sent.as_bytes(), "oa-1", false).unwrap();
        assert_eq!(
            std::str::from_utf8(&out.body).unwrap(),
            "{ \"model\" : \"team\",\n \"input\": [{\"type\":\"reasoning\",\"encrypted_content\":\"gAAAAAz\"}] , \"x\": 1 }"
        );
        assert_eq!(out.left_out, 0);
    }
}
