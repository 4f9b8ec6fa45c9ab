//! `CredentialError`: why a credential could not be loaded, as a precise sentence that names
//! the file, the program or the endpoint and never holds a secret (no key, no token, no
//! command output: a command's stderr is reported by its length only).

/// One failed load of a credential. `Clone`: requests that shared one refresh all get its
/// outcome.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CredentialError {
    #[error("cannot read the key file {path}: {reason}")]
    FileUnreadable { path: String, reason: String },
    #[error("the key file {path} is empty")]
    FileEmpty { path: String },
    #[error("cannot start the key command `{program}`: {reason}")]
    CommandSpawn { program: String, reason: String },
    #[error("the key command `{program}` did not exit within {timeout_ms} ms and was killed")]
    CommandTimeout { program: String, timeout_ms: u64 },
    #[error("the key command `{program}` exited with {status} (stderr: {stderr_bytes} bytes, not shown)")]
    CommandFailed {
        program: String,
        status: String,
        stderr_bytes: usize,
    },
    #[error(
        "the key command `{program}` printed nothing (stderr: {stderr_bytes} bytes, not shown)"
    )]
    CommandPrintedNothing {
        program: String,
        stderr_bytes: usize,
    },
    #[error("the {what} is not usable as a credential: {reason}")]
    BadValue { what: String, reason: String },
    #[error("cannot read the refresh token file {path}: {reason}")]
    RefreshTokenUnreadable { path: String, reason: String },
    #[error("cannot write the rotated refresh token to {path}: {reason}")]
    RefreshTokenUnwritable { path: String, reason: String },
    #[error("the token endpoint {url} could not be reached: {reason}")]
    TokenTransport { url: String, reason: String },
    #[error("the token endpoint {url} refused the refresh token: {code}")]
    TokenRefused { url: String, code: String },
    #[error("the token endpoint {url} answered {status}")]
    TokenStatus { url: String, status: u16 },
    #[error("the token endpoint {url} answered garbage: {reason}")]
    TokenGarbage { url: String, reason: String },
    #[error("no credential yet: {0}")]
    NotLoaded(String),
    #[error("the credential expired at {expired_at_ms} (Unix ms) and could not be refreshed: {last_error}")]
    Expired {
        expired_at_ms: u64,
        last_error: String,
    },
}

impl CredentialError {
    /// What a client may be told: the kind of failure, without the file, program or endpoint
    /// it names (those are the operator's, in the journal and the log).
    pub fn public(&self) -> String {
        match self {
            Self::FileUnreadable { .. } => "its key file cannot be read".into(),
            Self::FileEmpty { .. } => "its key file is empty".into(),
            Self::CommandSpawn { .. } => "its key command cannot be started".into(),
            Self::CommandTimeout { timeout_ms, .. } => {
                format!("its key command did not exit within {timeout_ms} ms and was killed")
            }
            Self::CommandFailed { .. } => "its key command failed".into(),
            Self::CommandPrintedNothing { .. } => "its key command printed nothing".into(),
            Self::BadValue { reason, .. } => format!("the value is not usable: {reason}"),
            Self::RefreshTokenUnreadable { .. } | Self::RefreshTokenUnwritable { .. } => {
                "its refresh token file cannot be used".into()
            }
            Self::TokenTransport { .. } => "its token endpoint could not be reached".into(),
            Self::TokenRefused { code, .. } => {
                format!("its token endpoint refused the refresh token: {code}")
            }
            Self::TokenStatus { status, .. } => format!("its token endpoint answered {status}"),
            Self::TokenGarbage { .. } => "its token endpoint answered garbage".into(),
            Self::NotLoaded(_) => "no credential is loaded yet".into(),
            Self::Expired { .. } => "it expired and could not be refreshed".into(),
        }
    }
}

/// Checks a loaded value before it becomes a credential: not empty after trimming, one line,
/// no control characters, ASCII (it must fit in an HTTP header as every provider reads it).
pub(crate) fn check_value(value: &str, what: &str) -> Result<(), CredentialError> {
    let bad = |reason: &str| CredentialError::BadValue {
        what: what.to_owned(),
        reason: reason.to_owned(),
    };
    if value.contains(['\n', '\r']) {
        return Err(bad("it has more than one line"));
    }
    if value.chars().any(char::is_control) {
        return Err(bad("it has control characters"));
    }
    if !value.is_ascii() {
        return Err(bad("it is not ASCII"));
    }
    if http::HeaderValue::from_str(value).is_err() {
        return Err(bad("it is not a valid HTTP header value"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_must_fit_in_one_header() {
        assert!(check_value("sk-abc_123.XYZ", "key").is_ok());
        assert!(check_value("a\nb", "key")
            .unwrap_err()
            .to_string()
            .contains("more than one line"));
        assert!(check_value("a\u{1}b", "key").is_err());
        assert!(check_value("clé", "key").is_err());
    }

    #[test]
    fn messages_say_what_failed_without_values() {
        let error = CredentialError::CommandPrintedNothing {
            program: "/bin/get-key".into(),
            stderr_bytes: 12,
        };
        assert_eq!(
            error.to_string(),
            "the key command `/bin/get-key` printed nothing (stderr: 12 bytes, not shown)"
        );
    }
}
