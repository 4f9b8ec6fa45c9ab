//! Fuzzes the stored-record decoders: no input may panic, hang or over-allocate.
//! Run: `cd journal/fuzz && cargo +nightly fuzz run record_decoder`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use quotaroute_journal::codec;

fuzz_target!(|data: &[u8]| {
    let _ = codec::decode_batch(data, None);
    let _ = codec::decode_snapshot(data);
    // Straight into bincode, past the checksum that would reject almost every input.
    let _ = codec::decode_payload(data);
    if let Some((key, rest)) = data.split_first_chunk::<8>() {
        let _ = codec::decode_batch(rest, Some(u64::from_be_bytes(*key)));
    }
});
