//! `Secret`: a credential held so that it cannot be printed, logged or serialized by accident
//! (`secrecy`'s `SecretString`, zeroed when dropped), compared in constant time (`constant_time_eq`).
//!
//! It owns only the wrapping; it never decides where a secret may go. The one way out is
//! [`Secret::expose`], to be called only where an upstream request's auth header is built or a
//! client key is compared.

use std::fmt;

use secrecy::{ExposeSecret, SecretString};

/// An API key, admin key or OAuth token. `Debug` and `Display` print `***`; there is no
/// `Serialize` impl, so a secret can never reach the journal, a log line or an API response.
#[derive(Clone)]
pub struct Secret(SecretString);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Self(SecretString::from(value.into()))
    }

    /// The raw value. Call only where the upstream request is built (or a client key checked).
    pub fn expose(&self) -> &str {
        self.0.expose_secret()
    }

    /// Compares with a candidate in time that does not depend on where they first differ, so a
    /// client cannot learn a key byte by byte from response timings (only its length shows).
    pub fn matches(&self, candidate: &str) -> bool {
        constant_time_eq::constant_time_eq(self.expose().as_bytes(), candidate.as_bytes())
    }
}

/// Equal secrets, compared in constant time (configs compare on reload).
impl PartialEq for Secret {
    fn eq(&self, other: &Self) -> bool {
        self.matches(other.expose())
    }
}

impl Eq for Secret {}

impl fmt::Debug for Secret {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("***")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("***")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_and_display_never_show_the_value() {
        let secret = Secret::new("sk-very-secret");
        assert_eq!(format!("{secret:?}"), "***");
        assert_eq!(format!("{secret}"), "***");
        assert_eq!(secret.expose(), "sk-very-secret");
    }

    #[test]
    fn matches_only_the_exact_value() {
        let secret = Secret::new("sk-abc");
        assert!(secret.matches("sk-abc"));
        assert!(!secret.matches("sk-abd"));
        assert!(!secret.matches("sk-ab"));
        assert!(!secret.matches("sk-abcd"));
        assert!(!secret.matches(""));
        assert!(!Secret::new("").matches("x"));
        assert!(Secret::new("").matches(""));
    }
}
