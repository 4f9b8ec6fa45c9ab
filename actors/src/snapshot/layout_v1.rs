//! State layout 1, frozen: `RouterState` as releases up to 94a0268 stored it in snapshots.
//! Never change these shapes; they are how those bytes are read. Types whose shape has not
//! changed since (breaker, health, buckets, deficits, the journaled config) are today's; the
//! release fixture `v1-94a0268` fails the day one of them changes, and it is then frozen here.

use std::collections::BTreeMap;

use quotaroute_journal::{ConfigLoaded, LockReason, ResetSource};
use serde::{Deserialize, Serialize};

use crate::policy::breaker::BreakerState;
use crate::policy::buckets::UsageBuckets;
use crate::policy::cooldown::ConnectionHealth;
use crate::policy::drr::DrrDeficits;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RouterStateV1 {
    pub last_seq: u64,
    pub last_at_ms: u64,
    pub configs: Vec<ConfigLoaded>,
    pub breakers: BTreeMap<String, BreakerState>,
    pub connections: BTreeMap<String, ConnectionStateV1>,
    pub deficits: BTreeMap<String, DrrDeficits>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConnectionStateV1 {
    pub health: ConnectionHealth,
    pub lockouts: ModelLockoutsV1,
    pub buckets: UsageBuckets,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelLockoutsV1 {
    pub provider: String,
    pub connection: String,
    pub locks: BTreeMap<String, ModelLockV1>,
}

/// A lock before it recorded the HTTP status that caused it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelLockV1 {
    pub reason: LockReason,
    pub until_ms: u64,
    pub failure_count: u32,
    pub error_code: Option<String>,
    pub source: ResetSource,
    pub quota_backoff_ms: u64,
}
