//! The credential checks as the mock's owner and its HTTP side reach them: the
//! [`MockUpstream`] methods that set the key gate and the OAuth endpoint, and the
//! `POST /oauth/token` handler. The checks themselves are `auth`'s.

use std::collections::HashMap;

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};

use super::auth::{now_ms, KeyGate, OAuthSettings, OAuthStats};
use super::state::MockUpstream;

impl MockUpstream {
    /// Checks keys of `gate.prefix` from now on (`None`: no gate).
    pub fn set_key_gate(&self, gate: Option<KeyGate>) {
        self.with_auth(|auth| auth.gate = gate);
    }

    /// Turns the OAuth token endpoint on (or off with `None`), forgetting issued tokens'
    /// counts but not the tokens.
    pub fn set_oauth(&self, settings: Option<OAuthSettings>) {
        self.with_auth(|auth| auth.oauth.configure(settings));
    }

    /// The refresh token the endpoint accepts now.
    pub fn oauth_refresh_token(&self) -> Option<String> {
        self.with_auth(|auth| {
            auth.oauth
                .settings
                .as_ref()
                .map(|settings| settings.refresh_token.clone())
        })
    }

    /// Changes what the endpoint does from now on (keeping its refresh token).
    pub fn set_oauth_garbage(&self, garbage: bool) {
        self.with_auth(|auth| {
            if let Some(settings) = auth.oauth.settings.as_mut() {
                settings.garbage = garbage;
            }
        });
    }

    pub fn oauth_stats(&self) -> OAuthStats {
        self.with_auth(|auth| auth.oauth.stats())
    }

    /// Whether an upstream request with `key` is let in (the gate and the issued tokens).
    pub(crate) fn key_admitted(&self, key: &str) -> bool {
        let now = now_ms();
        self.with_auth(|auth| {
            auth.gate.as_ref().is_none_or(|gate| gate.admits(key)) && auth.oauth.admits(key, now)
        })
    }
}

/// `POST /oauth/token` (form-encoded, RFC 6749 §6).
pub(crate) async fn token(State(mock): State<MockUpstream>, body: axum::body::Bytes) -> Response {
    let form: HashMap<String, String> = url::form_urlencoded::parse(&body).into_owned().collect();
    let now = now_ms();
    let (status, body) = mock.with_auth(|auth| auth.oauth.grant(&form, now));
    (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}
