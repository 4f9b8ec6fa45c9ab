//! `[connections.oauth]`: the refresh-token grant of RFC 6749 §6. POSTs
//! `grant_type=refresh_token&refresh_token=…&client_id=…` to `token_url` through the
//! provider's own client (its CA file and egress proxy), reads `access_token`, `expires_in`
//! and an optional rotated `refresh_token`, and writes a rotated one back to
//! `refresh_token_file` atomically (a temporary file in the same directory, fsync, rename,
//! mode 0600).
//!
//! The refresh token file is read before every refresh, so an operator who logs in again
//! only replaces the file. Owns one refresh; when to refresh is `watch`'s.

use std::io::Write as _;
use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use serde::Deserialize;

use crate::config::{OAuthSource, Secret};
use crate::credentials::error::{check_value, CredentialError};
use crate::upstream::client::UpstreamClient;

/// How long a token request may take, head and body.
pub const TOKEN_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// Largest token endpoint answer read.
const MAX_TOKEN_BODY_BYTES: usize = 64 * 1024;

/// An access token as the endpoint issued it.
#[derive(Debug)]
pub struct Issued {
    pub access_token: Secret,
    /// `expires_in`; `None` when the endpoint did not say.
    pub expires_in: Option<Duration>,
    /// The endpoint rotated the refresh token but it could not be saved: the new one is
    /// kept in memory for the next refresh, and this says why the file was not written.
    pub unsaved: Option<CredentialError>,
}

/// One OAuth connection's grant: its endpoint, its client, and the refresh token it holds
/// between refreshes (refreshes of one connection never overlap: `Credential`'s single flight).
pub struct OAuthGrant {
    source: OAuthSource,
    client: UpstreamClient,
    tokens: Mutex<RefreshTokens>,
}

/// A rotated refresh token that could not be written, and the file content it replaces (if
/// the file changes after that, an operator put a new token there and it wins).
#[derive(Default)]
struct RefreshTokens {
    unsaved: Option<(Secret, Option<Secret>)>,
}

impl std::fmt::Debug for OAuthGrant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OAuthGrant")
            .field("token_url", &self.source.token_url.as_str())
            .finish_non_exhaustive()
    }
}

/// The token endpoint's answer, success or error (RFC 6749 §5.1, §5.2).
#[derive(Deserialize)]
struct TokenAnswer {
    access_token: Option<serde_json::Value>,
    expires_in: Option<serde_json::Value>,
    refresh_token: Option<serde_json::Value>,
    error: Option<serde_json::Value>,
}

impl OAuthGrant {
    pub fn new(source: OAuthSource, client: UpstreamClient) -> Self {
        Self {
            source,
            client,
            tokens: Mutex::new(RefreshTokens::default()),
        }
    }

    fn url(&self) -> String {
        let mut url = self.source.token_url.clone();
        url.set_query(None);
        let _ = url.set_password(None);
        url.to_string()
    }

    /// Exchanges the refresh token for a new access token.
    pub async fn refresh(&self) -> Result<Issued, CredentialError> {
        let url = self.url();
        let in_file = read_refresh_token(&self.source.refresh_token_file).await?;
        let refresh_token = {
            let tokens = self.tokens.lock().map_err(|_| {
                CredentialError::NotLoaded("the refresh token state is poisoned".into())
            })?;
            match &tokens.unsaved {
                Some((unsaved, replaced)) if replaced.as_ref() == Some(&in_file) => unsaved.clone(),
                _ => in_file.clone(),
            }
        };
        let body = url::form_urlencoded::Serializer::new(String::new())
            .append_pair("grant_type", "refresh_token")
            .append_pair("refresh_token", refresh_token.expose())
            .append_pair("client_id", &self.source.client_id)
            .finish();
        let request = http::Request::post(self.source.token_url.as_str())
            .header(
                http::header::CONTENT_TYPE,
                "application/x-www-form-urlencoded",
            )
            .header(http::header::ACCEPT, "application/json")
            .body(Full::new(Bytes::from(body)))
            .map_err(|error| CredentialError::TokenTransport {
                url: url.clone(),
                reason: error.to_string(),
            })?;
        // One deadline for the head and the body.
        let deadline = tokio::time::Instant::now() + TOKEN_REQUEST_TIMEOUT;
        let response = self
            .client
            .send(request, deadline)
            .await
            .map_err(|failed| CredentialError::TokenTransport {
                url: url.clone(),
                reason: failed.message,
            })?;
        let status = response.status();
        let body = match tokio::time::timeout_at(
            deadline,
            Limited::new(response.into_body(), MAX_TOKEN_BODY_BYTES).collect(),
        )
        .await
        {
            Ok(Ok(collected)) => collected.to_bytes(),
            Ok(Err(_)) => {
                return Err(CredentialError::TokenTransport {
                    url,
                    reason: "the answer broke off or is larger than 64 KiB".into(),
                })
            }
            Err(_) => {
                return Err(CredentialError::TokenTransport {
                    url,
                    reason: "the answer did not arrive in time".into(),
                })
            }
        };
        let issued = parse_answer(&url, status.as_u16(), &body)?;
        let unsaved = match issued.rotated {
            Some(rotated) if rotated != refresh_token => {
                let path = self.source.refresh_token_file.clone();
                let value = rotated.clone();
                let written =
                    tokio::task::spawn_blocking(move || write_atomically(&path, value.expose()))
                        .await
                        .unwrap_or_else(|error| Err(std::io::Error::other(error.to_string())));
                let mut tokens = self.tokens.lock().map_err(|_| {
                    CredentialError::NotLoaded("the refresh token state is poisoned".into())
                })?;
                match written {
                    Ok(()) => {
                        tokens.unsaved = None;
                        None
                    }
                    Err(error) => {
                        tokens.unsaved = Some((rotated, Some(in_file)));
                        Some(CredentialError::RefreshTokenUnwritable {
                            path: self.source.refresh_token_file.display().to_string(),
                            reason: error.to_string(),
                        })
                    }
                }
            }
            _ => None,
        };
        Ok(Issued {
            access_token: issued.access_token,
            expires_in: issued.expires_in,
            unsaved,
        })
    }
}

/// A token answer that parsed.
#[derive(Debug)]
struct Parsed {
    access_token: Secret,
    expires_in: Option<Duration>,
    rotated: Option<Secret>,
}

/// Reads the token endpoint's answer: a precise error for every way it can be wrong, never
/// a token in it.
fn parse_answer(url: &str, status: u16, body: &[u8]) -> Result<Parsed, CredentialError> {
    let garbage = |reason: &str| CredentialError::TokenGarbage {
        url: url.to_owned(),
        reason: reason.to_owned(),
    };
    let answer = serde_json::from_slice::<TokenAnswer>(body);
    if !(200..300).contains(&status) {
        // RFC 6749 §5.2: `error` is a short ASCII code such as `invalid_grant`.
        let code = answer
            .ok()
            .and_then(|answer| answer.error)
            .and_then(|error| {
                error
                    .as_str()
                    .filter(|code| {
                        !code.is_empty()
                            && code.len() <= 64
                            && code.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
                    })
                    .map(str::to_owned)
            });
        return Err(match code {
            Some(code) => CredentialError::TokenRefused {
                url: url.to_owned(),
                code: format!("{code} (HTTP {status})"),
            },
            None => CredentialError::TokenStatus {
                url: url.to_owned(),
                status,
            },
        });
    }
    let answer = answer.map_err(|_| {
        garbage(&format!(
            "HTTP {status} with a body that is not a JSON object"
        ))
    })?;
    let access_token = match answer.access_token {
        Some(serde_json::Value::String(token)) if !token.trim().is_empty() => token,
        Some(_) => return Err(garbage("`access_token` is not a non-empty string")),
        None => return Err(garbage("no `access_token` in the answer")),
    };
    check_value(access_token.trim(), "access token")?;
    let expires_in = match answer.expires_in {
        None | Some(serde_json::Value::Null) => None,
        Some(value) => {
            let seconds = match &value {
                serde_json::Value::Number(number) => number.as_f64(),
                serde_json::Value::String(text) => text.trim().parse::<f64>().ok(),
                _ => None,
            };
            match seconds {
                Some(seconds) if seconds.is_finite() && seconds > 0.0 && seconds < 1e9 => {
                    Some(Duration::from_secs_f64(seconds))
                }
                _ => return Err(garbage("`expires_in` is not a positive number of seconds")),
            }
        }
    };
    let rotated = match answer.refresh_token {
        None | Some(serde_json::Value::Null) => None,
        Some(serde_json::Value::String(token)) if !token.trim().is_empty() => {
            check_value(token.trim(), "rotated refresh token")?;
            Some(Secret::new(token.trim()))
        }
        Some(_) => return Err(garbage("`refresh_token` is not a non-empty string")),
    };
    Ok(Parsed {
        access_token: Secret::new(access_token.trim()),
        expires_in,
        rotated,
    })
}

async fn read_refresh_token(path: &Path) -> Result<Secret, CredentialError> {
    let shown = path.display().to_string();
    let text = tokio::fs::read_to_string(path).await.map_err(|error| {
        CredentialError::RefreshTokenUnreadable {
            path: shown.clone(),
            reason: error.to_string(),
        }
    })?;
    let token = text.trim();
    if token.is_empty() {
        return Err(CredentialError::RefreshTokenUnreadable {
            path: shown,
            reason: "it is empty".into(),
        });
    }
    check_value(token, &format!("content of {shown}"))?;
    Ok(Secret::new(token))
}

/// Replaces `path` with `value` so that a reader (or a crash) sees the old token or the new
/// one, never a part: a temporary file beside it (mode 0600 whatever the old file's was: it
/// holds a secret), written and fsynced, renamed over it, then the directory fsynced.
pub fn write_atomically(path: &Path, value: &str) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = path
        .file_name()
        .map_or_else(|| "refresh-token".into(), |name| name.to_string_lossy());
    let temporary = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let result = (|| {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&temporary)?;
        file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
        file.write_all(value.as_bytes())?;
        file.write_all(b"\n")?;
        file.sync_all()?;
        std::fs::rename(&temporary, path)?;
        std::fs::File::open(&dir)?.sync_all()
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    const URL: &str = "http://127.0.0.1:9/oauth/token";

    #[test]
    fn a_good_answer_gives_token_lifetime_and_rotation() {
        let parsed = parse_answer(
            URL,
            200,
            br#"{"access_token":"at-1","token_type":"Bearer","expires_in":60,"refresh_token":"rt-2"}"#,
        )
        .unwrap();
        assert_eq!(parsed.access_token.expose(), "at-1");
        assert_eq!(parsed.expires_in, Some(Duration::from_secs(60)));
        assert_eq!(parsed.rotated.unwrap().expose(), "rt-2");
        let parsed =
            parse_answer(URL, 200, br#"{"access_token":"at-1","expires_in":"1.5"}"#).unwrap();
        assert_eq!(parsed.expires_in, Some(Duration::from_millis(1500)));
        assert!(parsed.rotated.is_none());
    }

    #[test]
    fn every_bad_answer_is_named_without_its_tokens() {
        let cases: [(u16, &[u8], &str); 8] = [
            (
                200,
                b"<html>oops</html>",
                "answered garbage: HTTP 200 with a body that is not a JSON object",
            ),
            (200, br#"{"token_type":"Bearer"}"#, "no `access_token`"),
            (
                200,
                br#"{"access_token":""}"#,
                "`access_token` is not a non-empty string",
            ),
            (
                200,
                br#"{"access_token":"at-9","expires_in":"soon"}"#,
                "`expires_in` is not a positive number",
            ),
            (
                200,
                br#"{"access_token":"at-9","expires_in":-5}"#,
                "`expires_in` is not a positive number",
            ),
            (
                400,
                br#"{"error":"invalid_grant","error_description":"rt-old was used"}"#,
                "refused the refresh token: invalid_grant (HTTP 400)",
            ),
            (503, b"busy", "answered 503"),
            (401, br#"{"error":"bad code with spaces"}"#, "answered 401"),
        ];
        for (status, body, expected) in cases {
            let error = parse_answer(URL, status, body).unwrap_err().to_string();
            assert!(error.contains(expected), "{status}: {error}");
            assert!(error.contains(URL), "{error}");
            assert!(
                !error.contains("at-9") && !error.contains("rt-old"),
                "{error}"
            );
        }
    }

    #[test]
    fn rotated_tokens_replace_the_file_whole_and_stay_private() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("refresh");
        std::fs::write(&path, "rt-0").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        write_atomically(&path, "rt-1").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "rt-1\n");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        write_atomically(&path, "rt-2").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "rt-2\n");
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|entry| entry.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 1, "no temporary file left: {names:?}");
    }
}
