//! What a load of a credential produced ([`Loaded`], with its generation and times), what
//! caused it ([`Trigger`]), and what may be shown of it: [`CredentialView`] for the admin API
//! and [`Echoes`] for masking (both without copying or printing the secret).
//!
//! Plain data; loading and the single flight are `credential`'s.

use std::sync::Arc;

use crate::config::Secret;
use crate::wire::upstream_mask::EchoSearch;

/// What caused a load (the journal's `trigger`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    /// The first load, when the node starts or the connection appears.
    Start,
    /// A key file's content may have changed (the poll).
    Changed,
    /// A key command's TTL ran out.
    Ttl,
    /// An OAuth token is about to expire.
    Expiring,
    /// A request found the credential expired (its refreshes failed until then).
    Expired,
    /// The upstream answered 401 to the credential.
    Unauthorized,
}

impl Trigger {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Start => "start",
            Self::Changed => "changed",
            Self::Ttl => "ttl",
            Self::Expiring => "expiring",
            Self::Expired => "expired",
            Self::Unauthorized => "unauthorized",
        }
    }
}

/// A credential as loaded.
#[derive(Debug)]
pub struct Loaded {
    pub secret: Secret,
    /// Counts loads that changed the secret (1 = the first); a request remembers the one it
    /// sent, so a refresh it asks for after a 401 is not repeated when one already happened.
    pub generation: u64,
    pub loaded_at_ms: u64,
    /// When it stops being used (OAuth's `expires_in`); `None`: never by itself.
    pub expires_at_ms: Option<u64>,
    /// When the source should be asked again (`None`: only when polled or on a 401).
    pub refresh_at_ms: Option<u64>,
    /// The secret's searcher for masking its echoes (`None` for an empty secret).
    pub echo: Option<EchoSearch>,
}

impl Loaded {
    /// A load of `secret` at `loaded_at_ms` (its echo searcher built here, once).
    pub fn new(
        secret: Secret,
        generation: u64,
        loaded_at_ms: u64,
        expires_at_ms: Option<u64>,
        refresh_at_ms: Option<u64>,
    ) -> Self {
        let echo = EchoSearch::new(secret.expose());
        Self {
            secret,
            generation,
            loaded_at_ms,
            expires_at_ms,
            refresh_at_ms,
            echo,
        }
    }

    pub fn expired(&self, now_ms: u64) -> bool {
        self.expires_at_ms.is_some_and(|expires| now_ms >= expires)
    }
}

/// What `GET /admin/state` shows of a credential (`credentials: [...]`): where it comes from
/// and how fresh it is, never the secret.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CredentialView {
    pub connection: String,
    pub provider: String,
    /// `static`, `file`, `command` or `oauth`.
    pub source: &'static str,
    /// 0 until the first load worked.
    pub generation: u64,
    pub loaded_at_ms: Option<u64>,
    pub expires_at_ms: Option<u64>,
    pub refresh_at_ms: Option<u64>,
    /// Why the last load failed, while no load has worked since.
    pub last_error: Option<String>,
}

/// A connection's current and previous secret, held for one response's scan for echoes.
#[derive(Default)]
pub struct Echoes {
    pub(crate) current: Option<Arc<Loaded>>,
    pub(crate) previous: Option<Arc<Loaded>>,
}

impl Echoes {
    /// Both as text (`""` for one that is not there, which matches nothing).
    pub fn exposed(&self) -> [&str; 2] {
        [&self.current, &self.previous].map(|loaded| {
            loaded
                .as_deref()
                .map_or("", |loaded| loaded.secret.expose())
        })
    }

    /// Both searchers, built when each was loaded (`None` for one that is not there).
    pub fn searches(&self) -> [Option<&EchoSearch>; 2] {
        [&self.current, &self.previous].map(|loaded| loaded.as_deref()?.echo.as_ref())
    }
}
