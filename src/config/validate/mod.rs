//! From TOML text to a validated [`Config`](crate::config::Config), one file per section:
//! `file` splits the text into sections and assembles what each section's file builds
//! (`server`, `journal`, `defaults`, `providers`, `connections` with `credentials`, `combos`,
//! `affinity`, `translation`; `[[clients]]`, `[cluster]` and `[telemetry]` are built beside
//! their own modules); `checks` holds the value checks they share.
//!
//! Owns the rules of contract.md "Config (TOML)" (what is required, what may reference what) and
//! the defaults of behaviour.md for the server, journal and attempt counts. It does not own the
//! resilience numbers' defaults (the policy settings do) and never puts a secret in a message.

mod affinity;
mod checks;
mod combos;
mod connections;
mod credentials;
mod defaults;
mod file;
mod journal;
mod providers;
mod server;
mod translation;

pub use credentials::{DEFAULT_API_KEY_COMMAND_TIMEOUT_MS, DEFAULT_API_KEY_TTL_MS};
pub use defaults::{DEFAULT_MAX_ATTEMPTS, DEFAULT_MAX_UPSTREAM_REQUESTS};
pub use file::parse;
pub use journal::{
    DEFAULT_FLUSH_EVERY_MS, DEFAULT_JOURNAL_PATH, DEFAULT_MAX_QUEUE_EVENTS,
    DEFAULT_RETENTION_HOURS, DEFAULT_SNAPSHOT_EVERY_EVENTS,
};
pub use server::{
    DEFAULT_FIRST_TOKEN_TIMEOUT_MS, DEFAULT_LISTEN, DEFAULT_MAX_BODY_BYTES,
    DEFAULT_REQUEST_TIMEOUT_MS, DEFAULT_SHUTDOWN_GRACE_MS, DEFAULT_STREAM_IDLE_TIMEOUT_MS,
    DEFAULT_UPSTREAM_ACCEPT_ENCODING,
};
