//! What charging a stream needs besides its usage, and what it used so far for its client's
//! budget (behaviour §11, "money holds"). Reports nothing.

use crate::node::stream_drain::DrainBounds;
use crate::node::usage_charge;
use crate::wire::stream_watch::StreamUsage;
use crate::wire::usage::TokenCounts;

/// What charging a stream needs besides its usage (behaviour §11, "money holds").
#[derive(Debug, Clone)]
pub struct StreamCharge {
    /// The client's request body's bytes: the input estimate when no usage comes.
    pub request_bytes: u64,
    /// `server.usage_max_tokens`.
    pub usage_max_tokens: u64,
    /// The serving connection, named in the logs of a clamped usage.
    pub connection: String,
    /// How far a stream the client left is read on for its usage.
    pub drain: DrainBounds,
    /// The combo's affinity counters, given a success's input tokens.
    pub combo_affinity: Option<std::sync::Arc<crate::node::combo_affinity::ComboAffinity>>,
}

impl StreamCharge {
    /// No reading on, no bound beyond `u64` (the relay's own tests).
    #[cfg(test)]
    pub(super) fn none() -> Self {
        StreamCharge {
            request_bytes: 0,
            usage_max_tokens: u64::MAX,
            connection: String::new(),
            drain: DrainBounds::NONE,
            combo_affinity: None,
        }
    }
}

/// What a stream has used so far (its usage read, or the estimate), for its client's budget.
pub(super) fn so_far(usage: &StreamUsage, charge: &StreamCharge) -> TokenCounts {
    usage_charge::so_far(
        TokenCounts {
            tokens_in: usage.tokens_in,
            tokens_out: usage.tokens_out,
            tokens_cached: usage.tokens_cached,
            tokens_cache_write: usage.tokens_cache_write,
            flaws: usage.flaws,
        },
        charge.request_bytes,
        usage.content_bytes,
        charge.usage_max_tokens,
    )
}
