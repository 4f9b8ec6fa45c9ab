//! Clients who share the pool (behaviour §11): who sent a request, what they may still use, and
//! what they spent.
//!
//! Layout:
//! - `identity` — keys as SHA-256 digests, and the digest → client lookup built once per load;
//! - `shared` — the interface to counts kept across nodes (`[cluster]`'s client leases);
//! - `ledger` — the node's live table of clients: admission tickets, usage recording, the
//!   journal fold on restart, and what `/admin/clients` shows.
//!
//! The pure rules they call — `limits` (`(state, now) → decision`), `window`, `calendar`,
//! `prices`, `usage_view` — are the policy crate's (`quotaroute_policy::clients`, within the
//! simulator's reach), re-exported here under their old paths.

pub mod identity;
pub mod ledger;
pub mod shared;

pub use quotaroute_actors::policy::clients::{calendar, class, limits, prices, usage_view, window};

pub use identity::digest_of;
pub use ledger::{ClientLedger, ClientTicket};
pub use limits::{BudgetPeriod, ClientConfig, ClientLimits, LimitKind, Refusal};
pub use prices::{ModelPrice, PriceTable};
pub use quotaroute_actors::policy::clients::key_digest::KeyDigest;
pub use shared::{ClusterUsageView, SharedCounts, SharedVerdict};
