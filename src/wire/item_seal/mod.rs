//! The router's seal on encrypted items (behaviour §10 "Encrypted items"): every
//! `encrypted_content` an upstream hands out through the router is given back to the client as
//! `qrs1.<connection>.<mac>.<original>`, so a later request that carries it names the connection
//! (account) that made it — no table to look up or lose, the same on every node of a cluster and
//! after a restart. The MAC (HMAC-SHA-256, truncated to 128 bits) binds the connection and the
//! client the item was handed to (behaviour §11) to the original content, under the node's own
//! secret (`node::seal_secret`: generated once, or `server.seal_key` for a cluster; never
//! derived from anything a client knows), so a client can neither steer a request by forging a
//! seal nor use another client's: an item whose seal does not verify is unreadable, and left
//! out like any item no target can read.
//!
//! A thinking block the router itself carries for a Responses client (behaviour §14,
//! `translate::thinking_carry`) is not merely sealed but encrypted: in a translated answer its
//! plain form (`qrthink1.…`) leaves as `qrt1.<connection>.<nonce>.<ciphertext>`,
//! XChaCha20-Poly1305 under a key of its own (an HMAC of the node's secret under another label,
//! so the MAC key and the encryption key differ), a random 192-bit nonce per seal, and the
//! client and the connection as associated data: the client reads neither the text nor the
//! signature, and a blob re-tagged with another connection, replayed by another client,
//! truncated or altered does not open.
//!
//! A Gemini answer's `thoughtSignature`s (behaviour §15) are sealed with the same HMAC, in a
//! base64 form of their own (`signature`: Google's clients decode and re-encode them as bytes),
//! so a later request that carries one names the connection that made it, and it goes back only
//! there (`thought_signatures`).
//!
//! - `key` — the node's two keys, derived from its secret, never printed.
//! - `seal` — the HMAC seal (`qrs1.`): made, and checked in constant time (`hmac`'s verify).
//! - `carried` — the AEAD carrier (`qrt1.`): encrypted with a fresh random nonce, opened.
//! - `json_spans` — where `"encrypted_content"` strings sit in JSON text, byte by byte.
//! - `signature` — the HMAC seal of a `thoughtSignature` (`qrg1…`, base64): made, opened.
//! - `sealer` — a body or stream event with every item sealed, for one answer.
//!
//! What a request does with its items is `encrypted_items`'.

mod carried;
mod json_spans;
mod key;
mod seal;
mod sealer;
mod signature;
#[cfg(test)]
mod tests;

pub use carried::{Carried, CARRIED_PLAIN_PREFIX, CARRIED_PREFIX};
pub use json_spans::{content_spans, string_members, write_json_string, ContentSpan, MemberSpan};
pub use key::SealKey;
pub use seal::{Opened, SEAL_PREFIX};
pub use sealer::{seal_all, ItemSealer, Items, SealedFor, SIGNATURE_FIELD};
pub use signature::{
    carried_in_signature, carried_signature, OpenedSignature, CARRIED_SIGNATURE_PREFIX,
    SIGNATURE_PLAIN_PREFIX, SIGNATURE_PREFIX,
};
