//! The byte formats of stored records and snapshots: the ONLY module that touches bincode.
//!
//! It turns envelopes and snapshot state into sled values and back, checking a CRC and
//! reporting damage as a typed [`DamageReason`]. It never talks to sled and never panics on
//! input, whatever the bytes (see the property test and `journal/fuzz`).
//!
//! # Record layout
//! The payload is `bincode(Vec<Envelope>)` under [`bincode::config::standard`] with a byte
//! limit.
//! - format 2 (written): `[u8 2][u32 LE crc32 of what follows][u32 LE payload length]
//!   [LZ4 block of the payload]`. A record's events repeat their names (provider,
//!   connection, model, client), so the block is about a quarter of the payload, and sled
//!   holds about a quarter of the bytes in memory and on disk (docs/measurements.md, "Memory, 2026-12-04").
//! - format 1 (releases up to df50607): `[u8 1][u32 LE crc32 of payload][payload]`; still read.
//!
//! # Snapshot layout
//! - format 2 (written since snapshots carry their state's version):
//!   `[u8 2][u32 LE crc32][u64 LE at_ms][u16 LE state_version][state]`.
//! - format 1 (releases up to 0447244): `[u8 1][u32 LE crc32][u64 LE at_ms][state]`, the
//!   state's layout not recorded ([`Snapshot::state_version`](crate::Snapshot) is `None`); its
//!   owner tells the layouts such snapshots held apart (`quotaroute_actors::snapshot`).
//!
//! # Versions from the future
//! A value whose format byte (or an envelope whose `schema_version`) is newer than this
//! build's, behind a checksum that matches, was written by a newer build: it is reported as
//! [`DamageReason::Newer`], which a node refuses to start on, never as damage to skip.
//!
//! # Schema evolution
//! bincode is not self-describing, so an old shape can only be read by code that knows it.
//! The payload is therefore decoded piece by piece — the batch length, then for each envelope
//! its header `(schema_version, seq, at_ms)`, then its event with the shape of *that*
//! `schema_version` (see `decode_event`). When a field is added to an event struct:
//! bump [`SCHEMA_VERSION`], freeze the previous shape in a `legacy_v<N>` module, and add an
//! arm to `decode_event` that decodes the frozen shape and upgrades it (the codec test
//! `schema_field_added_later_is_read_through_a_frozen_shape` shows the pattern). New event
//! kinds appended at the end of [`Event`] need nothing: bincode stores the variant index, so
//! old records keep decoding (tested with a shorter, test-local enum).

use crate::event::{Envelope, Event, SCHEMA_VERSION};

/// The record format this build writes (the first byte of every event record): the payload
/// LZ4-compressed.
pub const RECORD_FORMAT: u8 = 2;
/// The record format of earlier releases: the payload as it is. Still read.
pub const RECORD_FORMAT_PLAIN: u8 = 1;
/// The snapshot format this build writes (the first byte of every snapshot value).
pub const SNAPSHOT_FORMAT: u8 = 2;
/// The first snapshot format, whose state carries no version (still read).
pub const SNAPSHOT_FORMAT_UNVERSIONED: u8 = 1;
/// Bytes before the payload: format byte + crc32.
const HEADER_LEN: usize = 5;
/// A compressed record's payload length, before its LZ4 block.
const PLAIN_LEN_BYTES: usize = 4;
/// Upper bound on what one decode may claim, so a corrupt length can never ask for gigabytes
/// (bincode allocates a string's bytes before reading them).
const DECODE_LIMIT_BYTES: usize = 64 * 1024 * 1024;

/// Why a stored record or snapshot could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DamageReason {
    #[error("record is {len} bytes, shorter than its header")]
    TooShort { len: usize },
    #[error("unknown record format {0}")]
    UnknownFormat(u8),
    #[error("checksum mismatch (stored {stored:#010x}, computed {computed:#010x})")]
    ChecksumMismatch { stored: u32, computed: u32 },
    #[error("undecodable payload: {0}")]
    Undecodable(String),
    #[error("unknown schema version {0}")]
    UnknownSchemaVersion(u16),
    /// Written by a newer build (its checksum matches): never skipped as damage.
    #[error("{what} version {found} is newer than this build's {supported}")]
    Newer {
        what: &'static str,
        found: u32,
        supported: u32,
    },
    #[error("{0} trailing bytes after the payload")]
    TrailingBytes(usize),
    #[error("record holds no events")]
    EmptyBatch,
    #[error("envelope seq {found} where {expected} was expected")]
    SeqMismatch { expected: u64, found: u64 },
    #[error("key is {len} bytes, not 8")]
    BadKey { len: usize },
    #[error("snapshot state rejected by its decoder")]
    SnapshotRejected,
    #[error("storage error while reading: {0}")]
    Storage(String),
}

/// Encoding can only fail if serde refuses a value (it does not for our types).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("could not encode: {0}")]
pub struct EncodeError(String);

fn config() -> impl bincode::config::Config {
    bincode::config::standard().with_limit::<DECODE_LIMIT_BYTES>()
}

/// The sled key of a record or snapshot: big-endian so byte order is seq order.
pub fn seq_key(seq: u64) -> [u8; 8] {
    seq.to_be_bytes()
}

/// Reads a key written by [`seq_key`].
pub fn key_seq(key: &[u8]) -> Result<u64, DamageReason> {
    let bytes: [u8; 8] = key
        .try_into()
        .map_err(|_| DamageReason::BadKey { len: key.len() })?;
    Ok(u64::from_be_bytes(bytes))
}

fn frame(format: u8, payload: &[u8]) -> Vec<u8> {
    let mut value = Vec::with_capacity(HEADER_LEN + payload.len());
    value.push(format);
    value.extend_from_slice(&crc32fast::hash(payload).to_le_bytes());
    value.extend_from_slice(payload);
    value
}

/// Checks the checksum and that the format byte is one of `known` (the newest last); returns
/// the format and the payload. A newer format behind a good checksum is [`DamageReason::Newer`].
fn unframe<'v>(
    value: &'v [u8],
    what: &'static str,
    known: &[u8],
) -> Result<(u8, &'v [u8]), DamageReason> {
    if value.len() < HEADER_LEN {
        return Err(DamageReason::TooShort { len: value.len() });
    }
    let format = value[0];
    let stored = u32::from_le_bytes([value[1], value[2], value[3], value[4]]);
    let payload = &value[HEADER_LEN..];
    let computed = crc32fast::hash(payload);
    let newest = known.last().copied().unwrap_or(0);
    if !known.contains(&format) {
        return Err(if format > newest && stored == computed {
            DamageReason::Newer {
                what,
                found: u32::from(format),
                supported: u32::from(newest),
            }
        } else {
            DamageReason::UnknownFormat(format)
        });
    }
    if stored != computed {
        return Err(DamageReason::ChecksumMismatch { stored, computed });
    }
    Ok((format, payload))
}

/// Encodes one batch of consecutive envelopes as a record value.
pub fn encode_batch(batch: &[Envelope]) -> Result<Vec<u8>, EncodeError> {
    let mut value = Vec::new();
    encode_batch_into(batch, &mut EncodeScratch::default(), &mut value)?;
    Ok(value)
}

/// What encoding a record works in, kept from one record to the next so a busy writer
/// allocates nothing per record: the payload before compression, and LZ4's hash table (8 KiB,
/// cleared per record where `compress_into` allocated a zeroed one per record).
#[derive(Default)]
pub struct EncodeScratch {
    plain: Vec<u8>,
    table: lz4_flex::block::CompressTable,
}

/// [`encode_batch`] into `value` (emptied first; its capacity reused), the payload encoded in
/// `scratch` first.
pub fn encode_batch_into(
    batch: &[Envelope],
    scratch: &mut EncodeScratch,
    value: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    let plain = &mut scratch.plain;
    plain.clear();
    plain.reserve(256 * batch.len());
    bincode::serde::encode_into_writer(Stamped(batch), AppendTo(plain), config())
        .map_err(|error| EncodeError(error.to_string()))?;
    let plain_len = u32::try_from(plain.len())
        .map_err(|_| EncodeError(format!("a batch of {} bytes", plain.len())))?;
    let block_at = HEADER_LEN + PLAIN_LEN_BYTES;
    value.clear();
    value.resize(
        block_at + lz4_flex::block::get_maximum_output_size(plain.len()),
        0,
    );
    let block_len = lz4_flex::block::compress_into_with_table(
        plain,
        &mut value[block_at..],
        &mut scratch.table,
    )
    .map_err(|error| EncodeError(error.to_string()))?;
    value.truncate(block_at + block_len);
    value[0] = RECORD_FORMAT;
    value[HEADER_LEN..block_at].copy_from_slice(&plain_len.to_le_bytes());
    let crc = crc32fast::hash(&value[HEADER_LEN..]);
    value[1..HEADER_LEN].copy_from_slice(&crc.to_le_bytes());
    Ok(())
}

/// A compressed record's payload: its length, bounded like any decode, then its LZ4 block,
/// which must fill exactly that length.
fn decompress(stored: &[u8]) -> Result<Vec<u8>, DamageReason> {
    let Some((len, block)) = stored.split_first_chunk::<PLAIN_LEN_BYTES>() else {
        return Err(DamageReason::TooShort {
            len: HEADER_LEN + stored.len(),
        });
    };
    let len = u32::from_le_bytes(*len) as usize;
    if len > DECODE_LIMIT_BYTES {
        return Err(DamageReason::Undecodable(format!(
            "a compressed payload of {len} bytes, over the {DECODE_LIMIT_BYTES} limit"
        )));
    }
    let mut plain = vec![0; len];
    let filled = lz4_flex::block::decompress_into(block, &mut plain)
        .map_err(|error| DamageReason::Undecodable(format!("LZ4 block: {error}")))?;
    if filled != len {
        return Err(DamageReason::Undecodable(format!(
            "LZ4 block of {filled} bytes where {len} were recorded"
        )));
    }
    Ok(plain)
}

/// A batch as bincode writes `Vec<(u16, u64, u64, &Event)>` — the same bytes as
/// `Vec<Envelope>`, a struct being its fields in order — without building that vector. The
/// event is encoded in today's shape, so an envelope read as an older schema (an NDJSON
/// import of an old export says 1) is written as today's.
struct Stamped<'a>(&'a [Envelope]);

impl serde::Serialize for Stamped<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.0.iter().map(|e| {
            (
                e.schema_version.max(SCHEMA_VERSION),
                e.seq,
                e.at_ms,
                &e.event,
            )
        }))
    }
}

/// bincode's output appended to a vector that already holds the record's header.
struct AppendTo<'v>(&'v mut Vec<u8>);

impl bincode::enc::write::Writer for AppendTo<'_> {
    fn write(&mut self, bytes: &[u8]) -> Result<(), bincode::error::EncodeError> {
        self.0.extend_from_slice(bytes);
        Ok(())
    }
}

/// Decodes a record value. The envelopes must be consecutive; when `first_seq` is given (the
/// record's key) the first one must carry it.
pub fn decode_batch(value: &[u8], first_seq: Option<u64>) -> Result<Vec<Envelope>, DamageReason> {
    let (format, stored) = unframe(
        value,
        "record format",
        &[RECORD_FORMAT_PLAIN, RECORD_FORMAT],
    )?;
    let envelopes = if format == RECORD_FORMAT {
        decode_payload(&decompress(stored)?)?
    } else {
        decode_payload(stored)?
    };
    let Some(first) = envelopes.first() else {
        return Err(DamageReason::EmptyBatch);
    };
    let mut expected = first_seq.unwrap_or(first.seq);
    for envelope in &envelopes {
        if envelope.seq != expected {
            return Err(DamageReason::SeqMismatch {
                expected,
                found: envelope.seq,
            });
        }
        expected = expected.wrapping_add(1);
    }
    Ok(envelopes)
}

/// Decodes `bincode(Vec<Envelope>)` piece by piece (see the module docs), without the frame.
/// Public so the fuzz target and property test can reach past the checksum.
pub fn decode_payload(payload: &[u8]) -> Result<Vec<Envelope>, DamageReason> {
    Ok(decode_payload_with(payload, decode_event)?
        .into_iter()
        .map(|decoded| Envelope {
            schema_version: decoded.schema_version,
            seq: decoded.seq,
            at_ms: decoded.at_ms,
            event: decoded.event,
        })
        .collect())
}

/// One envelope as read, with whatever event type the reader produces.
struct Decoded<E> {
    schema_version: u16,
    seq: u64,
    at_ms: u64,
    event: E,
}

/// The piecewise batch decoder, generic over how one event of a given schema version is read
/// (so a test can stand in a future schema).
fn decode_payload_with<E>(
    payload: &[u8],
    decode_one: impl Fn(u16, &mut &[u8]) -> Result<E, DamageReason>,
) -> Result<Vec<Decoded<E>>, DamageReason> {
    let mut rest = payload;
    let count: u64 = take(&mut rest)?;
    // Each envelope takes at least 4 bytes, so a larger count is damage, not a reason to
    // reserve memory.
    if count > (payload.len() as u64) / 4 {
        return Err(DamageReason::Undecodable(format!(
            "batch claims {count} envelopes in {} bytes",
            payload.len()
        )));
    }
    let mut envelopes = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let (schema_version, seq, at_ms): (u16, u64, u64) = take(&mut rest)?;
        let event = decode_one(schema_version, &mut rest)?;
        envelopes.push(Decoded {
            schema_version,
            seq,
            at_ms,
            event,
        });
    }
    if !rest.is_empty() {
        return Err(DamageReason::TrailingBytes(rest.len()));
    }
    Ok(envelopes)
}

/// Decodes one event written with `schema_version`'s shape and upgrades it to today's
/// [`Event`]. The one place to teach the codec an old shape: add `N => legacy_vN::…` arms here.
fn decode_event(schema_version: u16, rest: &mut &[u8]) -> Result<Event, DamageReason> {
    match schema_version {
        SCHEMA_VERSION => take(rest),
        4 => take::<legacy_v4::EventV4>(rest).map(Event::from),
        3 => take::<legacy_v3::EventV3>(rest).map(Event::from),
        2 => take::<legacy_v2::EventV2>(rest).map(|v2| Event::from(legacy_v3::EventV3::from(v2))),
        1 => take::<legacy_v1::EventV1>(rest)
            .map(|v1| Event::from(legacy_v3::EventV3::from(legacy_v2::EventV2::from(v1)))),
        newer if newer > SCHEMA_VERSION => Err(DamageReason::Newer {
            what: "event schema",
            found: u32::from(newer),
            supported: u32::from(SCHEMA_VERSION),
        }),
        other => Err(DamageReason::UnknownSchemaVersion(other)),
    }
}

/// Decodes one value from the front of `rest` and advances past it.
fn take<T: serde::de::DeserializeOwned>(rest: &mut &[u8]) -> Result<T, DamageReason> {
    let (value, used) = bincode::serde::decode_from_slice::<T, _>(rest, config())
        .map_err(|error| DamageReason::Undecodable(error.to_string()))?;
    *rest = rest.get(used..).unwrap_or_default();
    Ok(value)
}

/// A decoded snapshot value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotValue {
    /// The frame format it was written with.
    pub format: u8,
    pub at_ms: u64,
    /// The state's layout version; `None` for format 1, which did not record it.
    pub state_version: Option<u16>,
    pub state: Vec<u8>,
}

/// Encodes a snapshot value (format [`SNAPSHOT_FORMAT`]) of state in layout `state_version`.
pub fn encode_snapshot(at_ms: u64, state_version: u16, state: &[u8]) -> Vec<u8> {
    let mut payload = Vec::with_capacity(10 + state.len());
    payload.extend_from_slice(&at_ms.to_le_bytes());
    payload.extend_from_slice(&state_version.to_le_bytes());
    payload.extend_from_slice(state);
    frame(SNAPSHOT_FORMAT, &payload)
}

/// Decodes a snapshot value of format 1 or 2.
pub fn decode_snapshot(value: &[u8]) -> Result<SnapshotValue, DamageReason> {
    let (format, payload) = unframe(
        value,
        "snapshot format",
        &[SNAPSHOT_FORMAT_UNVERSIONED, SNAPSHOT_FORMAT],
    )?;
    let too_short = DamageReason::TooShort { len: value.len() };
    let (at_bytes, rest) = payload.split_first_chunk::<8>().ok_or(too_short.clone())?;
    let at_ms = u64::from_le_bytes(*at_bytes);
    if format == SNAPSHOT_FORMAT_UNVERSIONED {
        return Ok(SnapshotValue {
            format,
            at_ms,
            state_version: None,
            state: rest.to_vec(),
        });
    }
    let (version_bytes, state) = rest.split_first_chunk::<2>().ok_or(too_short)?;
    Ok(SnapshotValue {
        format,
        at_ms,
        state_version: Some(u16::from_le_bytes(*version_bytes)),
        state: state.to_vec(),
    })
}

mod legacy_v1;
mod legacy_v2;
mod legacy_v3;
mod legacy_v4;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_shared_names;

/// Encodes any serde state (a snapshot's payload) with the same codec as records, so bincode
/// stays inside this module.
pub fn encode_state<T: serde::Serialize>(state: &T) -> Result<Vec<u8>, EncodeError> {
    bincode::serde::encode_to_vec(state, config()).map_err(|e| EncodeError(e.to_string()))
}

/// Decodes what [`encode_state`] wrote; any error (truncation, another shape) is `Err`.
pub fn decode_state<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, DamageReason> {
    match bincode::serde::decode_from_slice(bytes, config()) {
        Ok((state, used)) if used == bytes.len() => Ok(state),
        Ok((_, used)) => Err(DamageReason::TrailingBytes(bytes.len() - used)),
        Err(e) => Err(DamageReason::Undecodable(e.to_string())),
    }
}
