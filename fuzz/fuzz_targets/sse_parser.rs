//! Fuzzes the SSE parser: chunked feeding, every byte in exactly one event: no input may panic or hang (invariants in `fuzz/checks.rs`).
//! Run: `bench/fuzz.sh` or `cd fuzz && cargo +nightly fuzz run sse_parser`.
#![no_main]

#[path = "../checks.rs"]
mod checks;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| checks::sse(data));
