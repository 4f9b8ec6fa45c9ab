//! The pure rules of clients who share the pool (behaviour §11): what a client may still use,
//! and what its tokens cost. Time is an argument; nothing reads a clock or a file. The node
//! (`src/clients/`) keeps the state behind them (the ledger, the key lookup, the counts across
//! nodes) and calls these.
//!
//! - `limits` — a client's configured limits and its usage state: `(state, now) → decision`;
//! - `window` — a counter over a sliding window kept in fixed time bins (bounded memory);
//! - `calendar` — UTC day and month boundaries for `budget_period`;
//! - `prices` — USD per token for each model, from `[[prices]]` or a LiteLLM price file;
//! - `usage_view` — one window of a client's usage as `/admin/clients` shows it;
//! - `key_digest` — a client key's digest, as the limits name a client's keys;
//! - `class` — a request's class: normal, or spare (only quota that would otherwise be lost).

pub mod calendar;
pub mod class;
pub mod key_digest;
pub mod limits;
pub mod prices;
pub mod usage_view;
pub mod window;
