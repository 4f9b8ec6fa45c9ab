//! The snapshot layouts, one step at a time: today's round-trips, layout 1 migrates (tagged or
//! from the unversioned format 1), a newer layout is refused by name, garbage is rejected.

use std::collections::BTreeMap;

use quotaroute_journal::codec::{self, DamageReason};
use quotaroute_journal::{Event, LockReason, ModelLocked, ResetSource, ResponseBound, Snapshot};

use super::layout_v1::{ConnectionStateV1, ModelLockV1, ModelLockoutsV1, RouterStateV1};
use super::*;
use crate::policy::buckets::UsageBuckets;
use crate::policy::cooldown::ConnectionHealth;

fn snapshot(state_version: Option<u16>, state: Vec<u8>) -> Snapshot {
    Snapshot {
        seq: 9,
        at_ms: 1_000,
        format: if state_version.is_some() { 2 } else { 1 },
        state_version,
        state,
    }
}

fn layout_1_state() -> RouterStateV1 {
    let mut locks = BTreeMap::new();
    locks.insert(
        "gpt-4o-mini".to_string(),
        ModelLockV1 {
            reason: LockReason::RateLimited,
            until_ms: 600_000,
            failure_count: 2,
            error_code: Some("rate_limit_exceeded".into()),
            source: ResetSource::Upstream,
            quota_backoff_ms: 0,
        },
    );
    let mut connections = BTreeMap::new();
    connections.insert(
        "oa-1".to_string(),
        ConnectionStateV1 {
            health: ConnectionHealth::new("openai", "oa-1"),
            lockouts: ModelLockoutsV1 {
                provider: "openai".into(),
                connection: "oa-1".into(),
                locks,
            },
            buckets: UsageBuckets::new(),
        },
    );
    RouterStateV1 {
        last_seq: 41,
        last_at_ms: 1_000,
        connections,
        ..RouterStateV1::default()
    }
}

/// A state of today's layout with a lock (and its status) and a response binding.
fn layout_2_state() -> RouterState {
    let mut state = RouterState::default();
    state.apply(
        1_000,
        &Event::ModelLocked(ModelLocked {
            provider: "openai".into(),
            connection: "oa-1".into(),
            model: "gpt-4o-mini".into(),
            reason: LockReason::RateLimited,
            status: Some(429),
            error_code: Some("rate_limit_exceeded".into()),
            until_ms: 600_000,
            failure_count: 1,
            source: ResetSource::Upstream,
        }),
    );
    state.apply(
        1_001,
        &Event::ResponseBound(ResponseBound {
            request_id: "r1".into(),
            response_id: "resp_1".into(),
            combo: "team".into(),
            provider: "openai".into(),
            connection: "oa-2".into(),
            model: "gpt-4o-mini".into(),
            client: None,
        }),
    );
    state
}

#[test]
fn layout_2_round_trips_tagged_and_as_format_1_wrote_it() {
    let state = layout_2_state();
    let bytes = codec::encode_state(&state).unwrap();
    assert_eq!(
        decode(&snapshot(Some(LAYOUT_WITHOUT_AFFINITY), bytes.clone())).unwrap(),
        state
    );
    // 0447244 wrote the same bytes under snapshot format 1, without a version.
    assert_eq!(decode(&snapshot(None, bytes)).unwrap(), state);
}

#[test]
fn todays_layout_keeps_affinity_bindings_after_layout_2s_bytes() {
    let mut state = layout_2_state();
    state.apply(
        2_000,
        &Event::AffinityBound(quotaroute_journal::AffinityBound {
            request_id: "r2".into(),
            combo: "team".into(),
            group: 42,
            client: "default".into(),
            provider: "openai".into(),
            connection: "oa-3".into(),
            model: "gpt-4o-mini".into(),
            moved_from: None,
            reason: None,
        }),
    );
    let bytes = codec::encode_state(&(&state, &state.affinity)).unwrap();
    let decoded = decode(&snapshot(Some(LAYOUT_WITHOUT_CACHED_INPUT), bytes.clone())).unwrap();
    assert_eq!(decoded, state);
    let binding = decoded.affinity["team"].get(42, 2_000, 1_000).unwrap();
    assert_eq!(&*binding.exec_key, "oa-3/gpt-4o-mini");
    // Layout 2's bytes are its prefix: a layout-2 reader of today's state sees the rest.
    let layout_2 = codec::encode_state(&state).unwrap();
    assert!(bytes.starts_with(&layout_2));
}

#[test]
fn todays_layout_keeps_cached_input_counts_after_layout_3s_bytes() {
    let mut state = layout_2_state();
    let mut success =
        quotaroute_journal::testkit::succeeded("openai", "oa-1", "gpt-4o-mini", 1_000, 10);
    if let Event::RequestSucceeded(s) = &mut success {
        s.tokens_cached = 800;
    }
    state.apply(2_000, &success);
    assert_eq!(state.cached_input.of("oa-1").cached_input_tokens, 800);
    let bytes = codec::encode_state(&(&state, &state.affinity, &state.cached_input)).unwrap();
    let decoded = decode(&snapshot(
        Some(LAYOUT_WITHOUT_RESPONSE_OWNERS),
        bytes.clone(),
    ))
    .unwrap();
    assert_eq!(decoded, state);
    assert_eq!(decoded.cached_input.of("oa-1").share(), Some(0.8));
    // Layout 3's bytes are its prefix; a layout-3 snapshot migrates with no counts.
    let layout_3 = codec::encode_state(&(&state, &state.affinity)).unwrap();
    assert!(bytes.starts_with(&layout_3));
    let migrated = decode(&snapshot(Some(LAYOUT_WITHOUT_CACHED_INPUT), layout_3)).unwrap();
    assert_eq!(migrated.cached_input.of("oa-1").input_tokens, 0);
    assert_eq!(migrated.connections, state.connections);
}

#[test]
fn layout_1_migrates_to_2_keeping_every_lock_and_adding_nothing_it_did_not_know() {
    let old = layout_1_state();
    let bytes = codec::encode_state(&old).unwrap();
    for version in [Some(1), None] {
        let state = decode(&snapshot(version, bytes.clone())).unwrap();
        assert_eq!((state.last_seq, state.last_at_ms), (41, 1_000));
        let lockouts = &state.connections["oa-1"].lockouts;
        assert_eq!(
            (lockouts.provider(), lockouts.connection()),
            ("openai", "oa-1")
        );
        let active = lockouts.list_at(1_000);
        assert_eq!(active.len(), 1, "{version:?}");
        let lock = &active[0];
        assert_eq!(lock.model, "gpt-4o-mini");
        assert_eq!(lock.reason, LockReason::RateLimited);
        assert_eq!(lock.remaining_ms, 599_000);
        assert_eq!(lock.failure_count, 2);
        assert_eq!(lock.error_code.as_deref(), Some("rate_limit_exceeded"));
        assert_eq!(lock.status, None, "layout 1 never knew the status");
        assert!(state.responses.get("resp_1", 1_000).is_none());
        assert!(state.peers.marks.is_empty());
    }
}

#[test]
fn a_layout_newer_than_this_build_is_refused_by_name() {
    let bytes = encode(&RouterState::default()).unwrap();
    assert_eq!(
        decode(&snapshot(Some(STATE_LAYOUT + 1), bytes)).unwrap_err(),
        DamageReason::Newer {
            what: "snapshot state layout",
            found: u32::from(STATE_LAYOUT) + 1,
            supported: u32::from(STATE_LAYOUT),
        }
    );
}

#[test]
fn bytes_of_no_layout_are_rejected() {
    assert_eq!(
        decode(&snapshot(None, b"not a state".to_vec())).unwrap_err(),
        DamageReason::SnapshotRejected
    );
    assert!(decode(&snapshot(Some(STATE_LAYOUT), b"not a state".to_vec())).is_err());
    assert!(decode(&snapshot(Some(1), Vec::new())).is_err());
}

/// Layout 1 read as 2, or 2 as 1, does not fit: the unversioned decode cannot confuse them.
#[test]
fn layouts_1_and_2_do_not_decode_as_each_other() {
    let one = codec::encode_state(&layout_1_state()).unwrap();
    let two = encode(&layout_2_state()).unwrap();
    assert!(codec::decode_state::<RouterState>(&one).is_err());
    assert!(codec::decode_state::<RouterStateV1>(&two).is_err());
}

#[test]
fn todays_layout_keeps_each_stored_responses_client_after_layout_4s_bytes() {
    let mut state = layout_2_state();
    state.apply(
        2_000,
        &Event::ResponseBound(ResponseBound {
            request_id: "r2".into(),
            response_id: "resp_alice".into(),
            combo: "team".into(),
            provider: "openai".into(),
            connection: "oa-1".into(),
            model: "gpt-4o-mini".into(),
            client: Some("alice".into()),
        }),
    );
    let bytes = encode(&state).unwrap();
    let decoded = decode(&snapshot(Some(STATE_LAYOUT), bytes.clone())).unwrap();
    assert_eq!(decoded, state);
    let alice = decoded.responses.get("resp_alice", 2_000).unwrap();
    assert!(alice.belongs_to("alice") && !alice.belongs_to("bob"));
    // The binding from before clients were recorded stays anyone's.
    assert!(decoded
        .responses
        .get("resp_1", 2_000)
        .unwrap()
        .belongs_to("bob"));
    // Layout 4's bytes are its prefix; a layout-4 snapshot migrates with no owners.
    let layout_4 = codec::encode_state(&(&state, &state.affinity, &state.cached_input)).unwrap();
    assert!(bytes.starts_with(&layout_4));
    let migrated = decode(&snapshot(Some(LAYOUT_WITHOUT_RESPONSE_OWNERS), layout_4)).unwrap();
    assert_eq!(
        migrated.responses.get("resp_alice", 2_000).unwrap().client,
        None
    );
}
