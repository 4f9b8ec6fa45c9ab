//! quotaroute-policy: the routing rules as pure code — no runtime, no locks, no clock, no I/O.
//! Each file owns one rule of behaviour.md (state + input + `now` → events, `apply` as the only
//! mutator), or the plain data they read (`topology`: what the node hands in; `outcome`: one
//! attempt). The actors (`quotaroute-actors`) own this state and depend on this crate, never the
//! other way: its dependencies hold no tokio, ractor or arc-swap, so cargo refuses the wrong arrow.

pub mod admission;
pub mod affinity;
pub mod affinity_bindings;
pub mod breaker;
pub mod buckets;
pub mod burn_history;
pub mod cached_input;
pub mod classify;
#[cfg(test)]
mod classify_google_tests;
pub mod clients;
pub mod connection_state;
pub mod connection_view;
pub mod cooldown;
pub mod demand_profile;
pub mod drr;
pub mod exec_key;
pub mod failover_cursor;
pub mod fair_queue;
pub mod forecast;
pub mod google_errors;
pub mod implicit_combo;
#[cfg(test)]
mod journaled;
pub mod lockout;
pub mod outcome;
pub mod pace;
pub mod pacing_rules;
pub mod peer_merge;
pub mod peer_progress;
pub mod prime;
pub mod quota_share;
pub mod rate_limit_headers;
pub mod reading_end;
pub mod request;
pub mod request_events;
pub mod reset_hint;
pub mod router_state;
pub mod same_target_retry;
pub mod selection;
pub mod settled_attempt;
pub mod smooth_drr;
pub mod spare;
pub mod stored_responses;
pub mod target_block;
pub mod topology;
pub mod unserved_apis;
pub mod window;
pub mod window_block;
pub mod window_id;
