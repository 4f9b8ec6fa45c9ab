//! The seal, the carrier and the sealer together, on fixed keys.

use std::borrow::Cow;

use base64::Engine;
use serde_json::Value;

use super::*;

fn key() -> SealKey {
    SealKey::from_secret(&[7u8; 32])
}

/// The client every test seals for.
const C: &str = "team-a";

fn to(connection: &str) -> SealedFor<'_> {
    SealedFor {
        client: C,
        connection,
    }
}

#[test]
fn s10_a_seal_names_its_connection_and_keeps_the_original() {
    let sealed = key().seal(C, "oa-2", "gAAAAAbc==");
    assert!(sealed.starts_with(SEAL_PREFIX));
    assert!(sealed.ends_with(".gAAAAAbc=="));
    let opened = key().open(C, &sealed).unwrap();
    assert_eq!(opened.maker.as_deref(), Some("oa-2"));
    assert_eq!(opened.original, "gAAAAAbc==");
    assert_eq!(key().open(C, "gAAAAAbc=="), None);
}

#[test]
fn s10_a_seal_from_another_key_or_client_or_forged_names_no_maker() {
    let sealed = key().seal(C, "oa-2", "gAAAAAbc");
    let other = SealKey::from_secret(&[8u8; 32]);
    let opened = other.open(C, &sealed).unwrap();
    assert_eq!(opened.maker, None);
    assert_eq!(opened.original, "gAAAAAbc");
    // Sent by another client (behaviour §11): it does not open.
    assert_eq!(key().open("team-b", &sealed).unwrap().maker, None);
    assert_eq!(key().open("", &sealed).unwrap().maker, None);
    // The connection swapped for another: the MAC no longer matches.
    let engine = &base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let forged = sealed.replacen(&engine.encode("oa-2"), &engine.encode("oa-1"), 1);
    assert_eq!(key().open(C, &forged).unwrap().maker, None);
    // The client and connection are length-prefixed: moving a byte between them fails.
    let shifted = key().seal("team-ao", "a-2", "gAAAAAbc");
    assert_eq!(
        key()
            .open(
                C,
                &shifted.replacen(&engine.encode("a-2"), &engine.encode("oa-2"), 1)
            )
            .unwrap()
            .maker,
        None
    );
    assert_eq!(format!("{:?}", key()), "SealKey(***)");
}

#[test]
fn s10_seal_all_rewrites_only_the_encrypted_strings() {
    let body = br#"{"output":[{"type":"reasoning","id":"rs_1","encrypted_content" : "gAAA\/1"},{"type":"message","content":[{"text":"say \"encrypted_content\": \"x\""}]}],"n":1}"#;
    let sealed = seal_all(body, &key(), to("oa-1"), Items::Upstream);
    let text = std::str::from_utf8(&sealed).unwrap();
    let value: serde_json::Value = serde_json::from_str(text).unwrap();
    let content = value["output"][0]["encrypted_content"].as_str().unwrap();
    let opened = key().open(C, content).unwrap();
    assert_eq!(opened.maker.as_deref(), Some("oa-1"));
    assert_eq!(opened.original, "gAAA/1");
    assert_eq!(
        value["output"][1]["content"][0]["text"],
        "say \"encrypted_content\": \"x\""
    );
    assert!(text.ends_with(r#""n":1}"#));
    // Sealing twice changes nothing; no field, no copy.
    assert_eq!(
        seal_all(&sealed, &key(), to("oa-1"), Items::Upstream),
        sealed
    );
    assert!(matches!(
        seal_all(b"{\"a\":1}", &key(), to("oa-1"), Items::Upstream),
        Cow::Borrowed(_)
    ));
}

#[test]
fn s10_null_and_unterminated_contents_are_left_alone() {
    let body = br#"{"encrypted_content":null,"x":{"encrypted_content":"abc"#;
    assert_eq!(content_spans(body), Vec::new());
    assert!(matches!(
        seal_all(body, &key(), to("oa-1"), Items::Upstream),
        Cow::Borrowed(_)
    ));
}

/// Every way `text` could show in a sealed string: as it is, escaped, and base64 (standard
/// or URL-safe, at each of the three alignments).
fn in_clear(sealed: &str, text: &str) -> bool {
    use base64::engine::general_purpose::{STANDARD_NO_PAD, URL_SAFE_NO_PAD};
    if sealed.contains(text) {
        return true;
    }
    (0..3).any(|shift| {
        let padded = format!("{}{text}", "x".repeat(shift));
        [STANDARD_NO_PAD, URL_SAFE_NO_PAD].iter().any(|engine| {
            let encoded = engine.encode(&padded);
            // The 4-character groups made of `text`'s bytes alone.
            let start = 4 * shift.div_ceil(3);
            let end = 4 * (padded.len() / 3);
            start + 8 <= end && sealed.contains(&encoded[start..end])
        })
    })
}

#[test]
fn s14_a_carried_block_is_encrypted_for_its_connection() {
    let k = key();
    let plain = br#"{"type":"thinking","thinking":"secret plan","signature":"SIG-abcdef"}"#;
    let sealed = k.seal_carried(C, "an-1", plain).unwrap();
    assert!(sealed.starts_with(CARRIED_PREFIX));
    assert!(!in_clear(&sealed, "secret plan"), "{sealed}");
    assert!(!in_clear(&sealed, "SIG-abcdef"), "{sealed}");
    assert!(!in_clear(&sealed, "thinking"), "{sealed}");
    let opened = k.open_carried(C, &sealed).unwrap();
    assert_eq!(opened.connection, "an-1");
    assert_eq!(opened.plaintext, plain.to_vec());
    // A nonce of its own each time.
    let again = k.seal_carried(C, "an-1", plain).unwrap();
    assert_ne!(again, sealed);
    assert_eq!(k.open_carried(C, &again).unwrap().plaintext, plain.to_vec());
    // Not an HMAC seal, and an HMAC seal is not a carried block.
    assert_eq!(k.open(C, &sealed), None);
    assert_eq!(k.open_carried(C, &k.seal(C, "an-1", "qrthink1.e30")), None);
    // Another client's copy does not open.
    assert_eq!(k.open_carried("team-b", &sealed), None);
}

#[test]
fn s14_a_carried_block_fails_closed() {
    let k = key();
    let sealed = k
        .seal_carried(C, "an-1", b"{\"type\":\"thinking\"}")
        .unwrap();
    let engine = &base64::engine::general_purpose::URL_SAFE_NO_PAD;
    // Re-tagged with another connection: the associated data differs.
    let retagged = sealed.replacen(&engine.encode("an-1"), &engine.encode("an-2"), 1);
    assert_ne!(retagged, sealed);
    assert_eq!(k.open_carried(C, &retagged), None);
    // Another router's key.
    assert_eq!(
        SealKey::from_secret(&[8u8; 32]).open_carried(C, &sealed),
        None
    );
    // Truncated anywhere, or one character of the ciphertext changed.
    for cut in 0..sealed.len() {
        assert_eq!(k.open_carried(C, &sealed[..cut]), None, "cut at {cut}");
    }
    let (head, last) = sealed.split_at(sealed.len() - 6);
    let flipped = last.replacen(&last[..1], if &last[..1] == "A" { "B" } else { "A" }, 1);
    assert_eq!(k.open_carried(C, &format!("{head}{flipped}")), None);
    assert_eq!(k.open_carried(C, &format!("{sealed}.x")), None);
    assert_eq!(k.open_carried(C, "qrt1...."), None);
    // The seal key and the encryption key differ.
    assert_ne!(k.mac, k.cipher);
}

#[test]
fn s14_translated_answers_encrypt_carried_blocks_and_keep_upstream_items() {
    let engine = &base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let block = r#"{"type":"thinking","thinking":"secret plan","signature":"SIG-abcdef"}"#;
    let plain = format!("{CARRIED_PLAIN_PREFIX}{}", engine.encode(block));
    let body = format!(r#"{{"output":[{{"type":"reasoning","encrypted_content":"{plain}"}}]}}"#);
    let translated = seal_all(body.as_bytes(), &key(), to("an-1"), Items::Translated);
    let text = std::str::from_utf8(&translated).unwrap();
    let value: Value = serde_json::from_str(text).unwrap();
    let content = value["output"][0]["encrypted_content"].as_str().unwrap();
    assert!(content.starts_with(CARRIED_PREFIX), "{content}");
    assert!(
        !in_clear(text, "secret plan") && !in_clear(text, "SIG-abcdef"),
        "{text}"
    );
    let opened = key().open_carried(C, content).unwrap();
    assert_eq!(opened.connection, "an-1");
    assert_eq!(opened.plaintext, block.as_bytes());
    assert_eq!(
        seal_all(&translated, &key(), to("an-1"), Items::Translated),
        translated
    );
    // In a same-format answer the same string is the upstream's own: sealed, its bytes kept.
    let upstream = seal_all(body.as_bytes(), &key(), to("oa-1"), Items::Upstream);
    let value: Value = serde_json::from_slice(&upstream).unwrap();
    let opened = key()
        .open(C, value["output"][0]["encrypted_content"].as_str().unwrap())
        .unwrap();
    assert_eq!(opened.maker.as_deref(), Some("oa-1"));
    assert_eq!(opened.original, plain);
    assert!(in_clear(
        std::str::from_utf8(&upstream).unwrap(),
        "SIG-abcdef"
    ));
    // A translated answer's other items are sealed as ever.
    let other = seal_all(
        br#"{"encrypted_content":"gAAAAAbc"}"#,
        &key(),
        to("an-1"),
        Items::Translated,
    );
    let value: Value = serde_json::from_slice(&other).unwrap();
    let opened = key()
        .open(C, value["encrypted_content"].as_str().unwrap())
        .unwrap();
    assert_eq!(opened.original, "gAAAAAbc");
}

/// Seals made by a released build still read, byte for byte: the seal of a fixed secret,
/// client, connection and content is this exact string, and a carried block encrypted by
/// that build opens.
#[test]
fn s10_golden_seals_stay_byte_identical() {
    let sealed = key().seal(C, "oa-2", "gAAAAAbc==");
    assert_eq!(sealed, "qrs1.b2EtMg.opfOjvTaiYE8P8vGbyNLMQ.gAAAAAbc==");
    let carried = "qrt1.YW4tMQ.Z0IwMwnNM22KGmgjKzwlsYE-0UsTUZBB.Dwx7KAB_jurWojQZnqT_VVVJ304pVVIeUcoXpT-xl6GugRY";
    let opened = key().open_carried(C, carried).unwrap();
    assert_eq!(opened.connection, "an-1");
    assert_eq!(opened.plaintext, b"{\"type\":\"thinking\"}".to_vec());
}

/// A seal whose MAC was cut short does not verify, however few bytes are left.
#[test]
fn s10_a_truncated_seal_mac_names_no_maker() {
    let engine = &base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let sealed = key().seal(C, "oa-2", "gAAAAAbc");
    let mac = sealed.split('.').nth(2).unwrap();
    let full = engine.decode(mac).unwrap();
    for keep in 0..full.len() {
        let short = sealed.replacen(mac, &engine.encode(&full[..keep]), 1);
        assert_eq!(
            key().open(C, &short).unwrap().maker,
            None,
            "{keep} bytes kept"
        );
    }
}
