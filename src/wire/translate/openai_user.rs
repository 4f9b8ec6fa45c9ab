//! OpenAI's `user` for Anthropic's `metadata.user_id` (behaviour §14). OpenAI accepts at most
//! 64 characters there, and Claude Code sends a JSON string of about 150 (device, account and
//! session ids), which an OpenAI-format account may refuse with a 400. A longer id goes as a
//! stable digest of it (SHA-256 in hex: 64 characters), so the account still sees one user per
//! client user; a short one goes as it came. Affinity (behaviour §10) reads the client's own
//! body, so the whole id still groups the conversation.

use sha2::{Digest, Sha256};

/// The most characters OpenAI takes in `user`.
pub const OPENAI_USER_MAX_CHARS: usize = 64;

/// `user_id` as OpenAI's `user`: itself when it fits, else its SHA-256 in lowercase hex.
pub fn openai_user(user_id: &str) -> String {
    if user_id.chars().count() <= OPENAI_USER_MAX_CHARS {
        return user_id.to_owned();
    }
    Sha256::digest(user_id.as_bytes())
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shape Claude Code sends.
    const CLAUDE_CODE_USER_ID: &str = r#"{"device_id":"5f0c2a8e4b1d4e7f9a3c6b2d8e1f4a7c5f0c2a8e4b1d4e7f9a3c6b2d8e1f4a7c","account_uuid":"","session_id":"0f8b6c2e-3a1d-4e5f-9b7c-2d4e6f8a0b1c"}"#;

    #[test]
    fn a_long_user_id_goes_as_a_stable_digest_within_openais_limit() {
        assert!(CLAUDE_CODE_USER_ID.len() > 140);
        let user = openai_user(CLAUDE_CODE_USER_ID);
        assert_eq!(user.len(), OPENAI_USER_MAX_CHARS);
        assert!(user.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_eq!(user, openai_user(CLAUDE_CODE_USER_ID), "stable");
        let other = CLAUDE_CODE_USER_ID.replace("0f8b6c2e", "1f8b6c2e");
        assert_ne!(openai_user(&other), user, "another session, another user");
        // SHA-256 of "a" × 65, so the digest is the standard one.
        assert_eq!(
            openai_user(&"a".repeat(65)),
            "635361c48bb9eab14198e76ea8ab7f1a41685d6ad62aa9146d301d4f17eb0ae0"
        );
    }

    #[test]
    fn a_short_user_id_goes_as_it_came() {
        assert_eq!(openai_user("user_abc"), "user_abc");
        let exactly = "é".repeat(OPENAI_USER_MAX_CHARS);
        assert_eq!(openai_user(&exactly), exactly, "characters, not bytes");
    }
}
