//! Upstream credentials that change while the node runs (issue 13): a connection's key comes
//! from `api_key` / `api_key_env` (fixed per load), `api_key_file` (re-read when it
//! changes), `api_key_command` (an argv run again after its TTL) or `[connections.oauth]` (a
//! refresh-token grant whose access token is refreshed before it expires), and every
//! refreshable one is loaded again at once on a 401.
//!
//! Layout:
//! - `credential` — [`Credential`]: the current secret behind an `ArcSwap` (the request path
//!   reads it without awaiting), the single-flight refresh, the journal events;
//! - `loaded` — [`Loaded`], [`Trigger`], and what may be shown of a credential
//!   ([`CredentialView`], [`Echoes`]);
//! - `store` — [`CredentialStore`]: one credential per connection, kept across reloads when
//!   its source is unchanged;
//! - `watch` — the per-credential task: file poll, command TTL, OAuth expiry, retries;
//! - `file`, `command`, `oauth` — loading from each source, one load each;
//! - `schedule` — when to refresh and retry, as pure arithmetic;
//! - `journal` — [`CredentialJournal`]: hands `credential_refreshed` / `credential_failed`
//!   to the router, holding them until the router runs;
//! - `error` — [`CredentialError`]: precise, secret-free reasons.
//!
//! Nothing here decides routing: what a 401 does to a request is `node::attempt::try_target`'s.

pub mod command;
pub mod credential;
pub mod error;
pub mod file;
pub mod journal;
pub mod loaded;
pub mod oauth;
pub mod schedule;
pub mod store;
pub mod watch;

pub use loaded::{Echoes, Trigger};
pub use store::CredentialStore;
