//! Clients who share the pool (behaviour §11): who sent a request, what they may still use, and
//! what they spent.
//!
//! Layout:
//! - `identity` — keys as SHA-256 digests, and the digest → client lookup built once per load;
//! - `window` — a counter over a sliding window kept in fixed time bins (bounded memory);
//! - `calendar` — UTC day and month boundaries for `budget_period`;
//! - `limits` — a client's configured limits and its usage state: `(state, now) → decision`;
//! - `shared` — the interface to counts kept across nodes (`[cluster]`'s client leases);
//! - `usage_view` — one window of a client's usage as `/admin/clients` shows it;
//! - `prices` — USD per token for each model, from `[[prices]]` or a LiteLLM price file;
//! - `ledger` — the node's live table of clients: admission tickets, usage recording, the
//!   journal fold on restart, and what `/admin/clients` shows.
//!
//! Everything but `ledger` (and the `shared` interface) is pure: time is an argument, nothing reads a clock or a file.

pub mod calendar;
pub mod identity;
pub mod ledger;
pub mod limits;
pub mod prices;
pub mod shared;
pub mod usage_view;
pub mod window;

pub use identity::{digest_of, KeyDigest};
pub use ledger::{ClientLedger, ClientTicket};
pub use limits::{BudgetPeriod, ClientConfig, ClientLimits, LimitKind, Refusal};
pub use prices::{ModelPrice, PriceTable};
pub use shared::{ClusterUsageView, SharedCounts, SharedVerdict};
