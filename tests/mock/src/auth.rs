//! The mock's credential checks, for the tests of changing credentials (issue 13):
//! - a [`KeyGate`]: keys that start with its prefix are accepted only when they are the
//!   newest — a list the test sets, or the content of a file re-read on every request (so a
//!   key command can rotate the key and tell the mock in one step) — and get the provider's
//!   real 401 otherwise; keys without the prefix are not checked;
//! - an OAuth 2 token endpoint (`POST /oauth/token`, RFC 6749 §6) that issues short-lived
//!   access tokens (`mock-at-N`, accepted until they expire) and rotates refresh tokens
//!   (`mock-rt-N`): a used one is refused with `invalid_grant`. It can be told to answer
//!   garbage.
//!
//! Owns these checks only; the answers are `handler`'s and the error bodies `error_bodies`';
//! the mock's methods and the token endpoint that reach them are `auth_api`'s.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use axum::http::StatusCode;
use serde::{Deserialize, Serialize};

/// Access tokens the OAuth endpoint issues start with this; the upstream endpoints accept one
/// only while it has not expired.
pub const ACCESS_TOKEN_PREFIX: &str = "mock-at-";

/// Which keys of a prefix are accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Accepted {
    /// These and no other.
    Keys(Vec<String>),
    /// The file's trimmed content, read on every request (a missing file accepts nothing).
    File(PathBuf),
}

/// Keys starting with `prefix` must be accepted by `accepted`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyGate {
    pub prefix: String,
    pub accepted: Accepted,
}

impl KeyGate {
    pub(crate) fn admits(&self, key: &str) -> bool {
        if !key.starts_with(&self.prefix) {
            return true;
        }
        match &self.accepted {
            Accepted::Keys(keys) => keys.iter().any(|accepted| accepted == key),
            Accepted::File(path) => {
                std::fs::read_to_string(path).is_ok_and(|content| content.trim() == key)
            }
        }
    }
}

/// How the token endpoint behaves.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OAuthSettings {
    pub client_id: String,
    /// The refresh token valid now (the first one; each refresh replaces it when rotating).
    pub refresh_token: String,
    /// Lifetime of an issued access token.
    pub lifetime_ms: u64,
    /// Issue a new refresh token with every access token (and refuse the used one).
    pub rotate: bool,
    /// Answer 200 with a body that is not JSON.
    pub garbage: bool,
}

/// What the token endpoint did, for assertions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct OAuthStats {
    /// Every `POST /oauth/token`.
    pub requests: u64,
    /// Access tokens issued.
    pub issued: u64,
    /// Requests refused (`invalid_grant`, `invalid_client`, bad grant type).
    pub refused: u64,
}

/// The token endpoint's state.
#[derive(Debug, Default)]
pub(crate) struct OAuthServer {
    pub(crate) settings: Option<OAuthSettings>,
    /// Access token → when it expires (Unix ms).
    issued: HashMap<String, u64>,
    stats: OAuthStats,
}

pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| {
            u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
        })
}

impl OAuthServer {
    pub(crate) fn configure(&mut self, settings: Option<OAuthSettings>) {
        self.settings = settings;
    }

    pub(crate) fn stats(&self) -> OAuthStats {
        self.stats
    }

    /// Whether `key` passes: tokens of the access-token prefix must be issued and unexpired.
    pub(crate) fn admits(&self, key: &str, now_ms: u64) -> bool {
        if !key.starts_with(ACCESS_TOKEN_PREFIX) {
            return true;
        }
        self.issued
            .get(key)
            .is_some_and(|expires_at| now_ms < *expires_at)
    }

    /// One token request: the status and the JSON (or garbage) body.
    pub(crate) fn grant(
        &mut self,
        form: &HashMap<String, String>,
        now_ms: u64,
    ) -> (StatusCode, String) {
        self.stats.requests += 1;
        let Some(settings) = self.settings.as_mut() else {
            return (
                StatusCode::NOT_FOUND,
                "{\"error\":\"not_configured\"}".into(),
            );
        };
        if settings.garbage {
            return (StatusCode::OK, "<html>maintenance</html>".into());
        }
        let refuse = |stats: &mut OAuthStats, code: &str| {
            stats.refused += 1;
            (
                StatusCode::BAD_REQUEST,
                serde_json::json!({"error": code, "error_description": "refused by the mock"})
                    .to_string(),
            )
        };
        if form.get("grant_type").map(String::as_str) != Some("refresh_token") {
            return refuse(&mut self.stats, "unsupported_grant_type");
        }
        if form.get("client_id") != Some(&settings.client_id) {
            return refuse(&mut self.stats, "invalid_client");
        }
        if form.get("refresh_token") != Some(&settings.refresh_token) {
            return refuse(&mut self.stats, "invalid_grant");
        }
        self.stats.issued += 1;
        let n = self.stats.issued;
        let access_token = format!("{ACCESS_TOKEN_PREFIX}{n}-{:x}", now_ms);
        self.issued
            .insert(access_token.clone(), now_ms + settings.lifetime_ms);
        self.issued.retain(|_, expires_at| *expires_at > now_ms);
        let mut answer = serde_json::json!({
            "access_token": access_token,
            "token_type": "Bearer",
            "expires_in": settings.lifetime_ms as f64 / 1000.0,
        });
        if settings.rotate {
            settings.refresh_token = format!("mock-rt-{n}-{:x}", now_ms);
            answer["refresh_token"] = serde_json::Value::String(settings.refresh_token.clone());
        }
        (StatusCode::OK, answer.to_string())
    }
}

/// The credential checks' state, inside the mock's one mutex.
#[derive(Debug, Default)]
pub(crate) struct AuthState {
    pub(crate) gate: Option<KeyGate>,
    pub(crate) oauth: OAuthServer,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn form(refresh_token: &str) -> HashMap<String, String> {
        [
            ("grant_type", "refresh_token"),
            ("client_id", "qr"),
            ("refresh_token", refresh_token),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
    }

    #[test]
    fn refresh_tokens_rotate_and_a_used_one_is_refused() {
        let mut server = OAuthServer::default();
        server.configure(Some(OAuthSettings {
            client_id: "qr".into(),
            refresh_token: "rt-0".into(),
            lifetime_ms: 1_000,
            rotate: true,
            garbage: false,
        }));
        let (status, body) = server.grant(&form("rt-0"), 10_000);
        assert_eq!(status, StatusCode::OK);
        let answer: serde_json::Value = serde_json::from_str(&body).unwrap();
        let access = answer["access_token"].as_str().unwrap().to_owned();
        let rotated = answer["refresh_token"].as_str().unwrap().to_owned();
        assert_eq!(answer["expires_in"], 1.0);
        assert!(server.admits(&access, 10_999));
        assert!(!server.admits(&access, 11_000), "expired");
        assert!(!server.admits("mock-at-forged", 10_000));
        assert!(
            server.admits("sk-other", 10_000),
            "other keys are not checked"
        );
        let (status, body) = server.grant(&form("rt-0"), 10_100);
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert!(body.contains("invalid_grant"));
        assert_eq!(server.grant(&form(&rotated), 10_200).0, StatusCode::OK);
        assert_eq!(
            server.stats(),
            OAuthStats {
                requests: 3,
                issued: 2,
                refused: 1
            }
        );
    }

    #[test]
    fn the_gate_admits_only_the_newest_key_of_its_prefix() {
        let dir = tempfile::tempdir().unwrap();
        let newest = dir.path().join("newest");
        let gate = KeyGate {
            prefix: "tok-".into(),
            accepted: Accepted::File(newest.clone()),
        };
        assert!(!gate.admits("tok-1"), "no file: nothing accepted");
        std::fs::write(&newest, "tok-2\n").unwrap();
        assert!(gate.admits("tok-2"));
        assert!(!gate.admits("tok-1"));
        assert!(gate.admits("sk-static"));
    }
}
