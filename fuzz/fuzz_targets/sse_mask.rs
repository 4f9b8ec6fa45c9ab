//! Fuzzes the SSE relay's mask over key-echoing error events, split at any read (invariants in `fuzz/checks.rs`).
//! Run: `bench/fuzz.sh` or `cd fuzz && cargo +nightly fuzz run sse_mask`.
#![no_main]

#[path = "../checks.rs"]
mod checks;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| checks::sse_mask(data));
