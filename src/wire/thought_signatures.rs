//! A Gemini request's `thoughtSignature`s (behaviour §15, "goes back only to the connection that
//! made it"): which connection made each (read from the router's seal, `item_seal::signature`),
//! and the body one connection gets — each sealed signature restored to the upstream's own
//! when that connection made it, left out when another did or when its seal does not open for
//! the client that sent it (forged, another key's, handed to another client); a thinking block
//! the router carried in one (behaviour §14) is left out too, and names its maker. A signature the
//! router did not seal (the client had it from Google directly) goes as it came: its maker is
//! unknown, and a refusal of it is policy's `LeaveThoughtSignaturesOut` retry. Only the
//! signatures' bytes change; a request without any is never touched.
//!
//! Owns the scan and the per-connection body; where the request goes is the router's.

use std::sync::LazyLock;

use bytes::Bytes;
use memchr::memmem;

use crate::wire::item_seal::{
    carried_in_signature, string_members, write_json_string, MemberSpan, SealKey, SIGNATURE_PREFIX,
};

/// The members a client's signatures ride in (Google's REST API takes either case).
const MEMBERS: [&[u8]; 2] = [b"\"thoughtSignature\"", b"\"thought_signature\""];

/// A searcher of each of [`MEMBERS`], built once: building one is most of what a search of a
/// short body (nearly every request, which carries none) costs.
static MEMBER_FINDERS: LazyLock<[memmem::Finder<'static>; 2]> =
    LazyLock::new(|| MEMBERS.map(memmem::Finder::new));

/// Who made one signature of a request.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Maker {
    /// Sealed by this router when this connection answered; the upstream's own signature.
    Connection {
        connection: String,
        original: String,
    },
    /// In the sealed form, but its seal does not open for this client: left out everywhere.
    Unverified,
    /// Not sealed by the router: forwarded as it came.
    Unknown,
    /// A thinking block the router carried (behaviour §14) and the connection it opens for:
    /// no Gemini account reads it, so it is left out of every body here (its own connection
    /// gets it through translation).
    Carried(Option<String>),
}

/// Every signature member of `body`, in order, with who made it.
fn signatures(body: &[u8], key: &SealKey, client: &str) -> Vec<(MemberSpan, Maker)> {
    if MEMBER_FINDERS
        .iter()
        .all(|member| member.find(body).is_none())
    {
        return Vec::new();
    }
    let mut found: Vec<(MemberSpan, Maker)> = MEMBERS
        .iter()
        .flat_map(|member| string_members(body, member))
        .map(|span| {
            let maker = match span.value.value(body) {
                Some(value) if value.starts_with(SIGNATURE_PREFIX) => {
                    match key.open_signature(client, &value) {
                        Some(opened) => match opened.maker {
                            Some(connection) => Maker::Connection {
                                connection,
                                original: opened.original,
                            },
                            None => Maker::Unverified,
                        },
                        None => Maker::Unknown,
                    }
                }
                Some(value) => match carried_in_signature(&value) {
                    Some(encrypted) => Maker::Carried(
                        key.open_carried(client, &encrypted)
                            .map(|carried| carried.connection),
                    ),
                    None => Maker::Unknown,
                },
                None => Maker::Unknown,
            };
            (span, maker)
        })
        .collect();
    found.sort_by_key(|(span, _)| span.key_start);
    found
}

/// The connection that made the newest signature of `body` the router sealed (for `client`):
/// the request goes there while it can serve (behaviour §10's hard affinity of encrypted
/// items); `None` when it carries none.
pub fn maker(body: &[u8], key: &SealKey, client: &str) -> Option<String> {
    signatures(body, key, client)
        .into_iter()
        .rev()
        .find_map(|(_, maker)| match maker {
            Maker::Connection { connection, .. } | Maker::Carried(Some(connection)) => {
                Some(connection)
            }
            _ => None,
        })
}

/// Whether `connection`'s body carries any signature (its own, or one the router did not seal).
pub fn sends_any_to(body: &[u8], key: &SealKey, client: &str, connection: &str) -> bool {
    signatures(body, key, client)
        .iter()
        .any(|(_, maker)| match maker {
            Maker::Connection { connection: by, .. } => by == connection,
            Maker::Unverified | Maker::Carried(_) => false,
            Maker::Unknown => true,
        })
}

/// `body` as `connection` gets it, for the client that sent it: its own sealed signatures
/// restored, every other sealed one left out, the rest as they came; with how many were left
/// out. `None`: `body` goes as it is.
pub fn body_for(
    body: &[u8],
    key: &SealKey,
    client: &str,
    connection: &str,
) -> Option<(Bytes, u32)> {
    let found = signatures(body, key, client);
    if found.iter().all(|(_, maker)| *maker == Maker::Unknown) {
        return None;
    }
    let mut out = Vec::with_capacity(body.len());
    let mut copied_to = 0;
    let mut left_out = 0u32;
    for (span, maker) in &found {
        match maker {
            Maker::Unknown => continue,
            Maker::Connection {
                connection: by,
                original,
            } if by == connection => {
                out.extend_from_slice(&body[copied_to..span.value.start]);
                write_json_string(&mut out, original);
                copied_to = span.value.end;
            }
            _ => {
                let (start, end) = span.removal(body);
                if start < copied_to {
                    // The last member, after one left out with the comma it reaches back to:
                    // the comma before that one goes instead.
                    while out.last().is_some_and(u8::is_ascii_whitespace) {
                        out.pop();
                    }
                    if out.last() == Some(&b',') {
                        out.pop();
                    }
                } else {
                    out.extend_from_slice(&body[copied_to..start]);
                }
                copied_to = end;
                left_out += 1;
            }
        }
    }
    out.extend_from_slice(&body[copied_to..]);
    Some((Bytes::from(out), left_out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn key() -> SealKey {
        SealKey::from_secret(b"k")
    }

    const C: &str = "team-a";

    /// A second turn: the model's turn carries `first` on its thought and `second` on its call.
    fn turn(first: &str, second: &str) -> Vec<u8> {
        serde_json::to_vec(&json!({"contents": [
            {"role": "user", "parts": [{"text": "look"}]},
            {"role": "model", "parts": [
                {"text": "hm", "thought": true, "thoughtSignature": first},
                {"functionCall": {"name": "f", "args": {}}, "thoughtSignature": second},
            ]},
            {"role": "user", "parts": [{"functionResponse": {"name": "f", "response": {}}}]},
        ]}))
        .unwrap()
    }

    #[test]
    fn s15_a_sealed_signature_goes_back_only_to_its_maker() {
        let k = key();
        let one = k.seal_signature(C, "gm-1", "R09PR0xFLTE=").unwrap();
        let two = k.seal_signature(C, "gm-1", "R09PR0xFLTI=").unwrap();
        assert!(one.starts_with(SIGNATURE_PREFIX), "{one}");
        let body = turn(&one, &two);
        assert_eq!(maker(&body, &k, C).as_deref(), Some("gm-1"));
        let (own, left_out) = body_for(&body, &k, C, "gm-1").unwrap();
        assert_eq!(left_out, 0);
        assert_eq!(
            std::str::from_utf8(&own).unwrap(),
            std::str::from_utf8(&turn("R09PR0xFLTE=", "R09PR0xFLTI=")).unwrap(),
            "only the signatures' bytes change"
        );
        let (elsewhere, left_out) = body_for(&body, &k, C, "gm-2").unwrap();
        assert_eq!(left_out, 2);
        let value: Value = serde_json::from_slice(&elsewhere).unwrap();
        assert_eq!(
            value["contents"][1]["parts"],
            json!([{"text": "hm", "thought": true}, {"functionCall": {"name": "f", "args": {}}}])
        );
        assert!(sends_any_to(&body, &k, C, "gm-1"));
        assert!(!sends_any_to(&body, &k, C, "gm-2"));
    }

    #[test]
    fn s15_two_left_out_members_side_by_side_keep_the_json_valid() {
        let k = key();
        let sealed = k.seal_signature(C, "gm-1", "R09PR0xF").unwrap();
        for template in [
            r#"{"text":"a","thoughtSignature":"@@", "thought_signature":"@@"}"#,
            r#"{"thoughtSignature":"@@","thought_signature":"@@"}"#,
        ] {
            let body = template.replace("@@", &sealed);
            let (out, left_out) = body_for(body.as_bytes(), &k, C, "gm-2").unwrap();
            assert_eq!(left_out, 2);
            let value: Value = serde_json::from_slice(&out).expect(template);
            assert!(!value.to_string().contains("ignature"), "{value}");
        }
    }

    #[test]
    fn s15_google_sdks_reencoding_still_opens() {
        // Python's SDK decodes the bytes and sends them back URL-safe.
        use base64::Engine;
        let k = key();
        let original = "c2lnbmF0dXJlIG9mIGdtLTE/Pz8+Pj4=";
        let sealed = k.seal_signature(C, "gm-1", original).unwrap();
        let raw = base64::engine::general_purpose::STANDARD
            .decode(&sealed)
            .unwrap();
        for sent in [
            base64::engine::general_purpose::URL_SAFE.encode(&raw),
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&raw),
            sealed.clone(),
        ] {
            let opened = k.open_signature(C, &sent).unwrap();
            assert_eq!(opened.maker.as_deref(), Some("gm-1"), "{sent}");
            assert_eq!(opened.original, original);
        }
        // Not base64 at all: kept as its text, restored the same.
        let odd = k.seal_signature(C, "gm-1", "not base64!").unwrap();
        assert_eq!(k.open_signature(C, &odd).unwrap().original, "not base64!");
    }

    #[test]
    fn s15_seals_that_do_not_open_are_left_out_and_unsealed_ones_kept() {
        let k = key();
        let theirs = k.seal_signature("team-b", "gm-1", "R09PR0xF").unwrap();
        let forged = SealKey::from_secret(b"guessed")
            .seal_signature(C, "gm-1", "R09PR0xF")
            .unwrap();
        let body = turn(&theirs, &forged);
        assert_eq!(maker(&body, &k, C), None);
        for connection in ["gm-1", "gm-2"] {
            let (out, left_out) = body_for(&body, &k, C, connection).unwrap();
            assert_eq!(left_out, 2);
            assert!(!String::from_utf8_lossy(&out).contains("thoughtSignature"));
            serde_json::from_slice::<Value>(&out).unwrap();
        }
        // Google's own (the client talked to Google first): as it came, everywhere.
        let direct = turn("R09PR0xF", "R09PR0xG");
        assert_eq!(body_for(&direct, &k, C, "gm-1"), None);
        assert_eq!(maker(&direct, &k, C), None);
        assert!(sends_any_to(&direct, &k, C, "gm-2"));
    }

    #[test]
    fn s14_a_carried_thinking_block_names_its_maker_and_no_gemini_account_gets_it() {
        let k = key();
        let encrypted = k.seal_carried(C, "an-1", b"{}").unwrap();
        let carried = crate::wire::item_seal::carried_signature(&encrypted);
        let body = turn(&carried, "R09PR0xF");
        assert_eq!(maker(&body, &k, C).as_deref(), Some("an-1"));
        for connection in ["an-1", "gm-1"] {
            let (out, left_out) = body_for(&body, &k, C, connection).unwrap();
            assert_eq!(left_out, 1);
            let text = String::from_utf8_lossy(&out);
            assert!(
                !text.contains(&carried) && text.contains("R09PR0xF"),
                "{text}"
            );
        }
    }

    #[test]
    fn s15_a_left_out_member_keeps_the_json_valid_wherever_it_sits() {
        let k = key();
        let sealed = k.seal_signature(C, "gm-1", "R09PR0xF").unwrap();
        for template in [
            r#"{"contents":[{"parts":[{"thoughtSignature":"@@"}]}]}"#,
            r#"{"contents":[{"parts":[{"thoughtSignature" : "@@" , "text":"a"}]}]}"#,
            r#"{"contents":[{"parts":[{"text":"a",  "thought_signature":"@@"  }]}]}"#,
            r#"{"contents":[{"parts":[{"text":"a","thoughtSignature":"@@","thought":true}]}]}"#,
        ] {
            let body = template.replace("@@", &sealed);
            let (out, left_out) = body_for(body.as_bytes(), &k, C, "gm-2").unwrap();
            assert_eq!(left_out, 1, "{template}");
            let value: Value = serde_json::from_slice(&out).expect(template);
            assert!(!value.to_string().contains("ignature"), "{value}");
            assert_eq!(
                value["contents"][0]["parts"][0].get("text").is_some(),
                template.contains("text")
            );
            let (own, _) = body_for(body.as_bytes(), &k, C, "gm-1").unwrap();
            assert_eq!(
                String::from_utf8_lossy(&own),
                template.replace("@@", "R09PR0xF")
            );
        }
    }
}
