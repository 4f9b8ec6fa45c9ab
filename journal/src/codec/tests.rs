//! Codec tests: round trips, every damage reason, schema evolution, and no panics on any bytes.

#![expect(
    clippy::too_many_lines,
    reason = "each test walks one codec scenario end to end"
)]
use super::*;
use crate::event::*;
use crate::testkit::{sample_envelopes, sample_event, KIND_COUNT};
use proptest::prelude::*;
use serde::{Deserialize, Serialize};

#[test]
fn sample_kinds_cover_every_event_kind_in_variant_order() {
    let kinds: Vec<&str> = (0..KIND_COUNT).map(|i| sample_event(i, 0).kind()).collect();
    assert_eq!(kinds, Event::KINDS.to_vec());
}

#[test]
fn batch_of_every_kind_round_trips() {
    let batch = sample_envelopes(7, 1_700_000_000_000, 3 * KIND_COUNT as u64);
    let value = encode_batch(&batch).unwrap();
    assert_eq!(value[0], RECORD_FORMAT);
    assert_eq!(decode_batch(&value, Some(7)).unwrap(), batch);
}

#[test]
fn records_encoded_one_after_another_in_one_scratch_are_each_as_encoded_alone() {
    // The writer keeps one scratch (its payload and LZ4's table) across records: what an
    // earlier record left in the table must change no later record's bytes.
    let mut scratch = EncodeScratch::default();
    let mut value = Vec::new();
    for (at, len) in [3, 40, 1, 2 * KIND_COUNT as u64, 7].into_iter().enumerate() {
        let batch = sample_envelopes(at as u64 * 100 + 1, 1_700_000_000_000, len);
        encode_batch_into(&batch, &mut scratch, &mut value).unwrap();
        assert_eq!(value, encode_batch(&batch).unwrap(), "record {at}");
        assert_eq!(
            decode_batch(&value, Some(at as u64 * 100 + 1)).unwrap(),
            batch
        );
    }
}

#[test]
fn a_record_is_the_frame_of_the_batch_as_a_vec_of_envelopes() {
    // The record bytes are the format: written in place, they must equal the frame of
    // `bincode(Vec<Envelope>)` byte for byte (an old schema written as today's).
    let mut batch = sample_envelopes(40, 1_700_000_000_000, 2 * KIND_COUNT as u64);
    batch[3].schema_version = 1;
    let value = encode_batch(&batch).unwrap();
    let today: Vec<Envelope> = batch
        .iter()
        .cloned()
        .map(|e| Envelope {
            schema_version: e.schema_version.max(SCHEMA_VERSION),
            ..e
        })
        .collect();
    let payload = bincode::serde::encode_to_vec(&today, config()).unwrap();
    // Format 2: the checksum over the length and the block, the block that payload in LZ4.
    assert_eq!(value[0], RECORD_FORMAT);
    assert_eq!(&value[1..5], &crc32fast::hash(&value[5..]).to_le_bytes());
    assert_eq!(&value[5..9], &(payload.len() as u32).to_le_bytes());
    let mut plain = vec![0; payload.len()];
    let filled = lz4_flex::block::decompress_into(&value[9..], &mut plain).unwrap();
    assert_eq!((filled, plain), (payload.len(), payload.clone()));
    assert!(
        value.len() < payload.len(),
        "{} bytes stored for a payload of {}",
        value.len(),
        payload.len()
    );
    // Format 1, what earlier releases wrote, reads as the same batch.
    assert_eq!(
        decode_batch(&frame(RECORD_FORMAT_PLAIN, &payload), Some(40)).unwrap(),
        today
    );
}

#[test]
fn a_compressed_record_that_lies_about_its_length_or_block_is_damage_not_a_panic() {
    let good = encode_batch(&sample_envelopes(1, 0, 8)).unwrap();
    let block = good[9..].to_vec();
    let claimed = u32::from_le_bytes(good[5..9].try_into().unwrap());
    let reframe = |len: u32, block: &[u8]| {
        let mut stored = len.to_le_bytes().to_vec();
        stored.extend_from_slice(block);
        frame(RECORD_FORMAT, &stored)
    };
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("no length", frame(RECORD_FORMAT, &[1, 2]), "shorter"),
        ("over the limit", reframe(u32::MAX, &block), "over the"),
        ("one byte longer", reframe(claimed + 1, &block), "where"),
        (
            "one byte shorter",
            reframe(claimed - 1, &block),
            "LZ4 block",
        ),
        (
            "cut block",
            reframe(claimed, &block[..block.len() / 2]),
            "LZ4 block",
        ),
        ("garbage block", reframe(64, &[0xff; 16]), "LZ4 block"),
    ];
    for (name, value, says) in cases {
        let error = decode_batch(&value, Some(1)).unwrap_err();
        assert!(error.to_string().contains(says), "{name}: {error}");
    }
}

#[test]
fn damage_reasons_are_typed() {
    let batch = sample_envelopes(1, 0, 4);
    let good = encode_batch(&batch).unwrap();

    let mut flipped = good.clone();
    let last = flipped.len() - 1;
    flipped[last] ^= 0xff;
    // Format 9 behind a good checksum was written by a newer build; a 0 is damage.
    let mut newer_format = good.clone();
    newer_format[0] = 9;
    let mut bad_format = good.clone();
    bad_format[0] = 0;
    let mut with_trailing = bincode::serde::encode_to_vec(&batch, config()).unwrap();
    with_trailing.push(0);
    let mut future = batch.clone();
    future[1].schema_version = SCHEMA_VERSION + 1;
    let mut gap = batch.clone();
    gap[2].seq = 10;
    let empty: Vec<Envelope> = Vec::new();

    type Case = (
        &'static str,
        Vec<u8>,
        Option<u64>,
        fn(&DamageReason) -> bool,
    );
    let cases: Vec<Case> = vec![
        ("short", vec![1, 2], None, |r| {
            matches!(r, DamageReason::TooShort { len: 2 })
        }),
        ("format", bad_format, None, |r| {
            matches!(r, DamageReason::UnknownFormat(0))
        }),
        ("newer format", newer_format, None, |r| {
            matches!(
                r,
                DamageReason::Newer {
                    what: "record format",
                    found: 9,
                    supported: 2
                }
            )
        }),
        ("crc", flipped, None, |r| {
            matches!(r, DamageReason::ChecksumMismatch { .. })
        }),
        (
            "trailing",
            frame(RECORD_FORMAT_PLAIN, &with_trailing),
            None,
            |r| matches!(r, DamageReason::TrailingBytes(1)),
        ),
        ("future schema", encode_batch(&future).unwrap(), None, |r| {
            matches!(r, DamageReason::Newer { what: "event schema", found, supported }
                    if *found == u32::from(SCHEMA_VERSION) + 1 && *supported == u32::from(SCHEMA_VERSION))
        }),
        ("gap", encode_batch(&gap).unwrap(), None, |r| {
            matches!(
                r,
                DamageReason::SeqMismatch {
                    expected: 3,
                    found: 10
                }
            )
        }),
        ("key", good.clone(), Some(2), |r| {
            matches!(
                r,
                DamageReason::SeqMismatch {
                    expected: 2,
                    found: 1
                }
            )
        }),
        ("empty", encode_batch(&empty).unwrap(), None, |r| {
            matches!(r, DamageReason::EmptyBatch)
        }),
        (
            "garbage",
            frame(RECORD_FORMAT_PLAIN, &[3, 1, 0xff, 0xff]),
            None,
            |r| matches!(r, DamageReason::Undecodable(_)),
        ),
    ];
    for (name, value, key, check) in cases {
        let error = decode_batch(&value, key).unwrap_err();
        assert!(check(&error), "{name}: unexpected {error:?}");
    }
}

#[test]
fn keys_are_big_endian_so_byte_order_is_seq_order() {
    assert!(seq_key(255) < seq_key(256));
    assert_eq!(key_seq(&seq_key(u64::MAX - 1)).unwrap(), u64::MAX - 1);
    assert_eq!(
        key_seq(&[1, 2]).unwrap_err(),
        DamageReason::BadKey { len: 2 }
    );
}

#[test]
fn snapshot_round_trips_and_detects_corruption() {
    let value = encode_snapshot(42, 7, b"state bytes");
    assert_eq!(value[0], SNAPSHOT_FORMAT);
    assert_eq!(
        decode_snapshot(&value).unwrap(),
        SnapshotValue {
            format: SNAPSHOT_FORMAT,
            at_ms: 42,
            state_version: Some(7),
            state: b"state bytes".to_vec()
        }
    );
    let mut corrupt = value.clone();
    corrupt[10] ^= 1;
    assert!(matches!(
        decode_snapshot(&corrupt),
        Err(DamageReason::ChecksumMismatch { .. })
    ));
    assert!(matches!(
        decode_snapshot(&frame(SNAPSHOT_FORMAT, &[1, 2, 3])),
        Err(DamageReason::TooShort { .. })
    ));
    // Format 2 needs its state version after at_ms.
    assert!(matches!(
        decode_snapshot(&frame(SNAPSHOT_FORMAT, &42u64.to_le_bytes())),
        Err(DamageReason::TooShort { .. })
    ));
}

/// Format 1 (releases up to 0447244): `[at_ms][state]`, no state version; still read.
#[test]
fn snapshot_format_1_is_read_without_a_state_version() {
    let mut payload = 42u64.to_le_bytes().to_vec();
    payload.extend_from_slice(b"old state");
    assert_eq!(
        decode_snapshot(&frame(SNAPSHOT_FORMAT_UNVERSIONED, &payload)).unwrap(),
        SnapshotValue {
            format: 1,
            at_ms: 42,
            state_version: None,
            state: b"old state".to_vec()
        }
    );
}

/// A snapshot format newer than this build's, with a good checksum, is `Newer` (a refusal),
/// not damage; with a bad checksum it is damage.
#[test]
fn a_newer_snapshot_format_is_named_not_skipped() {
    let mut value = encode_snapshot(42, 2, b"state");
    value[0] = SNAPSHOT_FORMAT + 1;
    assert_eq!(
        decode_snapshot(&value).unwrap_err(),
        DamageReason::Newer {
            what: "snapshot format",
            found: u32::from(SNAPSHOT_FORMAT) + 1,
            supported: u32::from(SNAPSHOT_FORMAT)
        }
    );
    let last = value.len() - 1;
    value[last] ^= 0xff;
    assert_eq!(
        decode_snapshot(&value).unwrap_err(),
        DamageReason::UnknownFormat(SNAPSHOT_FORMAT + 1)
    );
}

/// The event enum as an older build had it: the first 13 kinds, before `route_decided` and
/// `breaker_counted` were appended.
#[derive(Serialize, Deserialize)]
enum EventBeforeRouteDecided {
    NodeStarted(NodeStarted),
    ConfigLoaded(ConfigLoaded),
    RequestSucceeded(RequestSucceeded),
    RequestFailed(RequestFailed),
    ConnectionCooldown(ConnectionCooldown),
    ConnectionDisabled(ConnectionDisabled),
    ConnectionCleared(ConnectionCleared),
    ModelLocked(ModelLocked),
    ModelUnlocked(ModelUnlocked),
    BreakerTransition(BreakerTransition),
    UsageObserved(UsageObserved),
    AdminAction(AdminAction),
    NodeStopped(NodeStopped),
}

#[derive(Serialize)]
struct OldEnvelope {
    schema_version: u16,
    seq: u64,
    at_ms: u64,
    event: EventBeforeRouteDecided,
}

#[test]
fn schema_kind_appended_at_end_still_reads_old_records() {
    let old = vec![
        OldEnvelope {
            schema_version: SCHEMA_VERSION,
            seq: 1,
            at_ms: 10,
            event: EventBeforeRouteDecided::ModelLocked(match sample_event(7, 1) {
                Event::ModelLocked(e) => e,
                other => panic!("{other:?}"),
            }),
        },
        OldEnvelope {
            schema_version: SCHEMA_VERSION,
            seq: 2,
            at_ms: 11,
            event: EventBeforeRouteDecided::NodeStopped(NodeStopped {
                reason: "old build".into(),
                uptime_ms: 5,
            }),
        },
    ];
    let payload = bincode::serde::encode_to_vec(&old, config()).unwrap();
    let decoded = decode_batch(&frame(RECORD_FORMAT_PLAIN, &payload), Some(1)).unwrap();
    assert_eq!(decoded[0].event, sample_event(7, 1));
    assert_eq!(
        decoded[1].event,
        Event::NodeStopped(NodeStopped {
            reason: "old build".into(),
            uptime_ms: 5
        })
    );
}

#[test]
fn cannot_carry_is_appended_so_older_block_reasons_keep_their_bytes() {
    // bincode stores the variant index: the reasons written before `cannot_carry` keep theirs.
    for (reason, index) in [
        (BlockReason::BreakerOpen, 0u8),
        (BlockReason::ProbeInFlight, 1),
        (BlockReason::Cooldown, 2),
        (BlockReason::DisabledAuth, 3),
        (BlockReason::DisabledBilling, 4),
        (BlockReason::RateLimited, 5),
        (BlockReason::NotFound, 6),
        (BlockReason::QuotaExhausted, 7),
        (BlockReason::Reserved, 8),
        (BlockReason::CannotCarry, 9),
    ] {
        assert_eq!(
            bincode::serde::encode_to_vec(reason, config()).unwrap(),
            vec![index]
        );
    }
    assert_eq!(BlockReason::CannotCarry.as_str(), "cannot_carry");
}

#[test]
fn no_spare_is_appended_after_cannot_carry() {
    assert_eq!(
        bincode::serde::encode_to_vec(BlockReason::NoSpare, config()).unwrap(),
        vec![10u8]
    );
    assert_eq!(BlockReason::NoSpare.as_str(), "no_spare");
}

#[test]
fn the_gemini_format_is_appended_so_older_formats_keep_their_bytes() {
    // bincode stores the variant index: the formats written before Gemini keep theirs.
    for (format, index) in [
        (ApiFormat::Openai, 0u8),
        (ApiFormat::Anthropic, 1),
        (ApiFormat::Gemini, 2),
    ] {
        assert_eq!(
            bincode::serde::encode_to_vec(format, config()).unwrap(),
            vec![index]
        );
    }
    // A configuration naming a Gemini provider round-trips through a record.
    let mut event = sample_event(1, 4);
    if let Event::ConfigLoaded(loaded) = &mut event {
        loaded.providers.push(ProviderInfo {
            name: "google".into(),
            format: ApiFormat::Gemini,
            profile: AuthKind::ApiKey,
        });
    }
    let envelopes = vec![Envelope {
        schema_version: SCHEMA_VERSION,
        seq: 1,
        at_ms: 10,
        event: event.clone(),
    }];
    let decoded = decode_batch(&encode_batch(&envelopes).unwrap(), Some(1)).unwrap();
    assert_eq!(decoded[0].event, event);
}

/// A pretend future: schema 2 adds `exit_code` to `NodeStopped`. Schema 1's shape is kept
/// frozen and upgraded, exactly as a `legacy_v1` arm in `decode_event` would do.
mod future {
    use serde::{Deserialize, Serialize};

    pub mod v1 {
        use super::*;
        #[derive(Debug, Serialize, Deserialize)]
        pub struct NodeStopped {
            pub reason: String,
            pub uptime_ms: u64,
        }
        #[derive(Debug, Serialize, Deserialize)]
        pub enum Event {
            NodeStopped(NodeStopped),
        }
    }

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    pub struct NodeStopped {
        pub reason: String,
        pub uptime_ms: u64,
        pub exit_code: Option<i32>,
    }
    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    pub enum Event {
        NodeStopped(NodeStopped),
    }

    impl From<v1::Event> for Event {
        fn from(old: v1::Event) -> Self {
            match old {
                v1::Event::NodeStopped(e) => Event::NodeStopped(NodeStopped {
                    reason: e.reason,
                    uptime_ms: e.uptime_ms,
                    exit_code: None,
                }),
            }
        }
    }
}

#[test]
fn schema_field_added_later_is_read_through_a_frozen_shape() {
    #[derive(Serialize)]
    struct V1Envelope {
        schema_version: u16,
        seq: u64,
        at_ms: u64,
        event: future::v1::Event,
    }
    #[derive(Serialize)]
    struct V2Envelope {
        schema_version: u16,
        seq: u64,
        at_ms: u64,
        event: future::Event,
    }
    let stopped = |reason: &str| future::v1::NodeStopped {
        reason: reason.into(),
        uptime_ms: 9,
    };
    // Two records from the old build, and one from the new.
    let old = vec![
        V1Envelope {
            schema_version: 1,
            seq: 1,
            at_ms: 1,
            event: future::v1::Event::NodeStopped(stopped("a")),
        },
        V1Envelope {
            schema_version: 1,
            seq: 2,
            at_ms: 2,
            event: future::v1::Event::NodeStopped(stopped("b")),
        },
    ];
    let new = vec![V2Envelope {
        schema_version: 2,
        seq: 3,
        at_ms: 3,
        event: future::Event::NodeStopped(future::NodeStopped {
            reason: "c".into(),
            uptime_ms: 9,
            exit_code: Some(0),
        }),
    }];
    let old_payload = bincode::serde::encode_to_vec(&old, config()).unwrap();
    let new_payload = bincode::serde::encode_to_vec(&new, config()).unwrap();

    // Reading old bytes with the new shape alone misreads them: that is why the version is
    // consulted before the event is decoded.
    let naive = decode_payload_with(&old_payload, |_, rest| take::<future::Event>(rest));
    assert!(naive.is_err());

    let upgrade = |version: u16, rest: &mut &[u8]| match version {
        2 => take::<future::Event>(rest),
        1 => take::<future::v1::Event>(rest).map(future::Event::from),
        other => Err(DamageReason::UnknownSchemaVersion(other)),
    };
    let old_read = decode_payload_with(&old_payload, upgrade).unwrap();
    let new_read = decode_payload_with(&new_payload, upgrade).unwrap();
    let reasons: Vec<(u16, Option<i32>, String)> = old_read
        .into_iter()
        .chain(new_read)
        .map(|d| match d.event {
            future::Event::NodeStopped(e) => (d.schema_version, e.exit_code, e.reason),
        })
        .collect();
    assert_eq!(
        reasons,
        vec![
            (1, None, "a".to_string()),
            (1, None, "b".to_string()),
            (2, Some(0), "c".to_string())
        ]
    );
}

/// Records a schema-2 build wrote — request events without `client` / `cost_usd`, and the
/// `client_usage` kind appended to schema 2 without a bump — decode as today's events, the new
/// fields `None`, everything else as written.
#[test]
fn schema_2_request_events_decode_without_client_or_cost() {
    use super::legacy_v2 as v2;
    #[derive(Serialize)]
    struct V2Envelope {
        schema_version: u16,
        seq: u64,
        at_ms: u64,
        event: v2::EventV2,
    }
    let skipped = vec![Skipped {
        connection: "k2".into(),
        model: "gpt-4o".into(),
        reason: BlockReason::Cooldown,
        remaining_ms: Some(900),
    }];
    let usage = match sample_event(21, 3) {
        Event::ClientUsage(usage) => usage,
        other => panic!("{other:?}"),
    };
    let events = vec![
        v2::EventV2::RouteDecided(v2::RouteDecided {
            request_id: "r1".into(),
            generation: 4,
            combo: "team".into(),
            model: "team".into(),
            room: vec![0, 1],
            chosen: Some(1),
            order: vec![1, 0],
            skipped: skipped.clone(),
            affinity: AffinityOutcome::Held,
        }),
        v2::EventV2::RequestFailed(v2::RequestFailed {
            request_id: "r1".into(),
            combo: "team".into(),
            provider: "openai".into(),
            connection: "k1".into(),
            model: "gpt-4o".into(),
            status: Some(429),
            class: OutcomeClass::RateLimited,
            error_code: Some("rate_limit_exceeded".into()),
            message: Some("slow down".into()),
            attempt: 1,
            latency_ms: 12,
            reset_hint_ms: Some(6_000),
            stream: true,
            after_first_content: false,
            skipped: skipped.clone(),
        }),
        v2::EventV2::RequestSucceeded(v2::RequestSucceeded {
            request_id: "r1".into(),
            combo: "team".into(),
            provider: "openai".into(),
            connection: "k2".into(),
            model: "gpt-4o".into(),
            status: 200,
            attempt: 2,
            latency_ms: 34,
            tokens_in: 120,
            tokens_out: 45,
            stream: true,
            skipped: skipped.clone(),
            tokens_cached: 64,
            tokens_cache_write: 8,
        }),
        v2::EventV2::ClientUsage(schema_3_usage(&usage)),
    ];
    let old: Vec<V2Envelope> = events
        .into_iter()
        .enumerate()
        .map(|(i, event)| V2Envelope {
            schema_version: 2,
            seq: 1 + i as u64,
            at_ms: 100 + i as u64,
            event,
        })
        .collect();
    let payload = bincode::serde::encode_to_vec(&old, config()).unwrap();
    let decoded = decode_batch(&frame(RECORD_FORMAT_PLAIN, &payload), Some(1)).unwrap();
    let events: Vec<Event> = decoded.iter().map(|e| e.event.clone()).collect();
    assert!(decoded.iter().all(|e| e.schema_version == 2));
    assert_eq!(
        events,
        vec![
            Event::RouteDecided(RouteDecided {
                request_id: "r1".into(),
                generation: 4,
                combo: "team".into(),
                model: "team".into(),
                room: vec![0, 1],
                chosen: Some(1),
                order: vec![1, 0],
                skipped: skipped.clone(),
                affinity: AffinityOutcome::Held,
                client: None,
                group: None,
                paces: Vec::new(),
            }),
            Event::RequestFailed(RequestFailed {
                request_id: "r1".into(),
                combo: "team".into(),
                provider: "openai".into(),
                connection: "k1".into(),
                model: "gpt-4o".into(),
                status: Some(429),
                class: OutcomeClass::RateLimited,
                error_code: Some("rate_limit_exceeded".into()),
                message: Some("slow down".into()),
                attempt: 1,
                latency_ms: 12,
                reset_hint_ms: Some(6_000),
                stream: true,
                after_first_content: false,
                skipped: skipped.clone(),
                client: None,
                translated: None,
            }),
            Event::RequestSucceeded(RequestSucceeded {
                request_id: "r1".into(),
                combo: "team".into(),
                provider: "openai".into(),
                connection: "k2".into(),
                model: "gpt-4o".into(),
                status: 200,
                attempt: 2,
                latency_ms: 34,
                tokens_in: 120,
                tokens_out: 45,
                stream: true,
                skipped,
                tokens_cached: 64,
                tokens_cache_write: 8,
                client: None,
                cost_usd: None,
                items_left_out: 0,
                translated: None,
                usage_estimated: false,
                period_spend_pusd: None,
                period_start_ms: None,
            }),
            Event::ClientUsage(usage),
        ]
    );
    // Read through today's shape alone, the same bytes do not decode: the version decides.
    let naive = decode_payload_with(&payload, |_, rest| take::<Event>(rest));
    assert!(naive.is_err());
}

/// Today's request events keep their client and price through the codec.
#[test]
fn schema_3_request_events_keep_client_and_cost() {
    let mut succeeded = crate::testkit::succeeded("openai", "k1", "gpt-4o", 1_000, 500);
    if let Event::RequestSucceeded(e) = &mut succeeded {
        e.client = Some("team-a".into());
        e.cost_usd = Some(0.0125);
    }
    let mut failed = crate::testkit::failed(
        "openai",
        "k1",
        "gpt-4o",
        Some(500),
        OutcomeClass::ServerError,
    );
    if let Event::RequestFailed(e) = &mut failed {
        e.client = Some("team-b".into());
    }
    let batch: Vec<Envelope> = [succeeded, failed]
        .into_iter()
        .enumerate()
        .map(|(i, event)| Envelope {
            schema_version: SCHEMA_VERSION,
            seq: 1 + i as u64,
            at_ms: 5,
            event,
        })
        .collect();
    let decoded = decode_batch(&encode_batch(&batch).unwrap(), Some(1)).unwrap();
    assert_eq!(decoded, batch);
    assert_eq!(decoded[0].event.client(), Some("team-a"));
    assert_eq!(decoded[1].event.client(), Some("team-b"));
    assert!(matches!(&decoded[0].event, Event::RequestSucceeded(e) if e.cost_usd == Some(0.0125)));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn arbitrary_bytes_never_panic_the_record_decoder(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = decode_batch(&bytes, None);
        let _ = decode_snapshot(&bytes);
        // Past the checksum, straight into bincode.
        let _ = decode_payload(&bytes);
        let _ = decode_batch(&frame(RECORD_FORMAT_PLAIN, &bytes), Some(1));
        // Past the checksum, straight into the LZ4 block's length and the block.
        let _ = decode_batch(&frame(RECORD_FORMAT, &bytes), Some(1));
    }

    #[test]
    fn mutated_compressed_blocks_never_panic(flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..8)) {
        let good = encode_batch(&sample_envelopes(1, 0, KIND_COUNT as u64)).unwrap();
        // The length and the block, checksum recomputed so the mutation reaches the decoder.
        let mut stored = good[HEADER_LEN..].to_vec();
        for (at, byte) in flips {
            let len = stored.len();
            stored[at % len] = byte;
        }
        let _ = decode_batch(&frame(RECORD_FORMAT, &stored), Some(1));
    }

    #[test]
    fn mutated_valid_records_never_panic(flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..8)) {
        let batch = sample_envelopes(1, 0, KIND_COUNT as u64);
        let mut payload = bincode::serde::encode_to_vec(&batch, config()).unwrap();
        for (at, byte) in flips {
            let len = payload.len();
            payload[at % len] = byte;
        }
        let _ = decode_payload(&payload);
    }
}

/// Today's `client_usage` in the shape schemas 2 and 3 wrote (no `estimated`).
fn schema_3_usage(usage: &ClientUsage) -> super::legacy_v3::ClientUsage {
    super::legacy_v3::ClientUsage {
        request_id: usage.request_id.clone(),
        client: usage.client.clone(),
        combo: usage.combo.clone(),
        provider: usage.provider.clone(),
        connection: usage.connection.clone(),
        model: usage.model.clone(),
        tokens_in: usage.tokens_in,
        tokens_out: usage.tokens_out,
        tokens_cached: usage.tokens_cached,
        tokens_cache_write: usage.tokens_cache_write,
        cost_usd: usage.cost_usd,
        period_spend_pusd: usage.period_spend_pusd,
        period_start_ms: usage.period_start_ms,
    }
}

/// Records a schema-3 build wrote — request events without `translated`, `usage_estimated`
/// and `items_left_out`, a `response_bound` without its client, a `client_usage` without
/// `estimated`, and a peer's event in that shape — decode as today's events with those fields
/// at their "not so" values and everything else as written.
#[test]
fn schema_3_events_decode_without_the_schema_4_fields() {
    use super::legacy_v3 as v3;
    #[derive(Serialize)]
    struct V3Envelope {
        schema_version: u16,
        seq: u64,
        at_ms: u64,
        event: v3::EventV3,
    }
    let usage = match sample_event(21, 3) {
        Event::ClientUsage(usage) => usage,
        other => panic!("{other:?}"),
    };
    let succeeded = v3::RequestSucceeded {
        request_id: "r1".into(),
        combo: "team".into(),
        provider: "openai".into(),
        connection: "k2".into(),
        model: "gpt-4o".into(),
        status: 200,
        attempt: 2,
        latency_ms: 34,
        tokens_in: 120,
        tokens_out: 45,
        stream: true,
        skipped: vec![],
        tokens_cached: 64,
        tokens_cache_write: 8,
        client: Some("alice".into()),
        cost_usd: Some(0.25),
    };
    let bound = v3::ResponseBound {
        request_id: "r2".into(),
        response_id: "resp_1".into(),
        combo: "team".into(),
        provider: "openai".into(),
        connection: "k1".into(),
        model: "gpt-4o".into(),
    };
    let events = vec![
        v3::EventV3::RequestSucceeded(succeeded),
        v3::EventV3::ResponseBound(bound),
        v3::EventV3::ClientUsage(schema_3_usage(&usage)),
        v3::EventV3::PeerApplied(v3::PeerAppliedV3 {
            origin_node: "n2".into(),
            origin_seq: 9,
            origin_at_ms: 90,
            stream_id: "1-0".into(),
            event: Box::new(v3::EventV3::ResponseBound(v3::ResponseBound {
                request_id: "r3".into(),
                response_id: "resp_2".into(),
                combo: "team".into(),
                provider: "openai".into(),
                connection: "k2".into(),
                model: "gpt-4o".into(),
            })),
        }),
    ];
    let old: Vec<V3Envelope> = events
        .into_iter()
        .enumerate()
        .map(|(i, event)| V3Envelope {
            schema_version: 3,
            seq: 1 + i as u64,
            at_ms: 100 + i as u64,
            event,
        })
        .collect();
    let payload = bincode::serde::encode_to_vec(&old, config()).unwrap();
    let decoded = decode_batch(&frame(RECORD_FORMAT_PLAIN, &payload), Some(1)).unwrap();
    assert!(decoded.iter().all(|e| e.schema_version == 3));
    let events: Vec<Event> = decoded.into_iter().map(|e| e.event).collect();
    let Event::RequestSucceeded(ok) = &events[0] else {
        panic!("{:?}", events[0])
    };
    assert_eq!(
        (
            ok.translated.as_deref(),
            ok.usage_estimated,
            ok.items_left_out
        ),
        (None, false, 0)
    );
    assert_eq!(
        (ok.client.as_deref(), ok.cost_usd, ok.tokens_cached),
        (Some("alice"), Some(0.25), 64)
    );
    let Event::ResponseBound(bound) = &events[1] else {
        panic!("{:?}", events[1])
    };
    assert_eq!(
        (bound.response_id.as_str(), bound.client.as_deref()),
        ("resp_1", None)
    );
    assert_eq!(
        events[2],
        Event::ClientUsage(ClientUsage {
            estimated: false,
            ..usage
        })
    );
    let Event::PeerApplied(peer) = &events[3] else {
        panic!("{:?}", events[3])
    };
    let Event::ResponseBound(inner) = peer.event.as_ref() else {
        panic!("{peer:?}")
    };
    assert_eq!(
        (inner.connection.as_str(), inner.client.as_deref()),
        ("k2", None)
    );
}

/// Records a schema-4 build wrote — a `request_succeeded` without the client charge schema 5
/// appended, on its own and as a peer's event, beside a `client_usage` — decode as today's
/// events with no charge on the success and everything else as written; today's success
/// keeps its charge through the codec.
#[test]
fn schema_4_successes_decode_without_a_client_charge() {
    use super::legacy_v4 as v4;
    #[derive(Serialize)]
    struct V4Envelope {
        schema_version: u16,
        seq: u64,
        at_ms: u64,
        event: v4::EventV4,
    }
    let usage = match sample_event(21, 3) {
        Event::ClientUsage(usage) => usage,
        other => panic!("{other:?}"),
    };
    let succeeded = || v4::RequestSucceeded {
        request_id: "r1".into(),
        combo: "team".into(),
        provider: "openai".into(),
        connection: "k2".into(),
        model: "gpt-4o".into(),
        status: 200,
        attempt: 2,
        latency_ms: 34,
        tokens_in: 120,
        tokens_out: 45,
        stream: true,
        skipped: vec![],
        tokens_cached: 64,
        tokens_cache_write: 8,
        client: Some("alice".into()),
        cost_usd: Some(0.25),
        translated: Some("chat>messages".into()),
        usage_estimated: true,
        items_left_out: 2,
    };
    let events = vec![
        v4::EventV4::RequestSucceeded(succeeded()),
        v4::EventV4::ClientUsage(usage.clone()),
        v4::EventV4::PeerApplied(v4::PeerAppliedV4 {
            origin_node: "n2".into(),
            origin_seq: 9,
            origin_at_ms: 90,
            stream_id: "1-0".into(),
            event: Box::new(v4::EventV4::RequestSucceeded(succeeded())),
        }),
    ];
    let old: Vec<V4Envelope> = events
        .into_iter()
        .enumerate()
        .map(|(i, event)| V4Envelope {
            schema_version: 4,
            seq: 1 + i as u64,
            at_ms: 100 + i as u64,
            event,
        })
        .collect();
    let payload = bincode::serde::encode_to_vec(&old, config()).unwrap();
    let decoded = decode_batch(&frame(RECORD_FORMAT_PLAIN, &payload), Some(1)).unwrap();
    assert!(decoded.iter().all(|e| e.schema_version == 4));
    let events: Vec<Event> = decoded.into_iter().map(|e| e.event).collect();
    let expected = RequestSucceeded {
        request_id: "r1".into(),
        combo: "team".into(),
        provider: "openai".into(),
        connection: "k2".into(),
        model: "gpt-4o".into(),
        status: 200,
        attempt: 2,
        latency_ms: 34,
        tokens_in: 120,
        tokens_out: 45,
        stream: true,
        skipped: vec![],
        tokens_cached: 64,
        tokens_cache_write: 8,
        client: Some("alice".into()),
        cost_usd: Some(0.25),
        translated: Some("chat>messages".into()),
        usage_estimated: true,
        items_left_out: 2,
        period_spend_pusd: None,
        period_start_ms: None,
    };
    assert_eq!(events[0], Event::RequestSucceeded(expected.clone()));
    assert_eq!(expected.client_charge(), None);
    assert_eq!(events[1], Event::ClientUsage(usage));
    let Event::PeerApplied(peer) = &events[2] else {
        panic!("{:?}", events[2])
    };
    assert_eq!(*peer.event, Event::RequestSucceeded(expected.clone()));
    // Read through today's shape alone, the same bytes do not decode: the version decides.
    assert!(decode_payload_with(&payload, |_, rest| take::<Event>(rest)).is_err());

    // Today's success carries its charge through the codec, and says it as a `client_usage`.
    let charged = RequestSucceeded {
        period_spend_pusd: Some(7_000_000_000),
        period_start_ms: Some(1_764_547_200_000),
        ..expected
    };
    let envelope = Envelope {
        schema_version: SCHEMA_VERSION,
        seq: 1,
        at_ms: 5,
        event: Event::RequestSucceeded(charged.clone()),
    };
    let decoded = decode_batch(&encode_batch(&[envelope]).unwrap(), Some(1)).unwrap();
    assert_eq!(decoded[0].event, Event::RequestSucceeded(charged.clone()));
    let charge = charged.client_charge().expect("a charge");
    assert_eq!(
        (
            charge.client.as_str(),
            charge.tokens_in,
            charge.cost_usd,
            charge.period_spend_pusd,
            charge.period_start_ms,
            charge.estimated
        ),
        (
            "alice",
            120,
            Some(0.25),
            7_000_000_000,
            1_764_547_200_000,
            true
        )
    );
}

#[test]
fn the_response_store_kinds_are_appended_after_pacing_rule() {
    // bincode stores the variant index: `response_stored` and `response_deleted` come after
    // every kind written before them (store52).
    for (kind, index) in [(25usize, 25u8), (26, 26)] {
        let bytes = bincode::serde::encode_to_vec(sample_event(kind, 1), config()).unwrap();
        assert_eq!(bytes[0], index, "{}", Event::KINDS[kind]);
    }
    assert_eq!(sample_event(25, 1).kind(), "response_stored");
    assert_eq!(sample_event(26, 1).kind(), "response_deleted");
    assert_eq!(sample_event(24, 1).kind(), "pacing_rule");
}

#[test]
fn window_primed_is_appended_after_the_response_store_kinds_so_older_kinds_keep_their_index() {
    // bincode stores the variant index first: `response_deleted` keeps 26, `window_primed` is 27.
    let index_of = |kind_index: usize| {
        bincode::serde::encode_to_vec(sample_event(kind_index, 3), config()).unwrap()[0]
    };
    assert_eq!(sample_event(26, 3).kind(), "response_deleted");
    assert_eq!(index_of(26), 26);
    assert_eq!(sample_event(27, 3).kind(), "window_primed");
    assert_eq!(index_of(27), 27);
    assert_eq!(Event::KINDS[27], "window_primed");
}
