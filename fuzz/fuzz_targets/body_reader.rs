//! Fuzzes the client body reader with stalls, size limits and chunking (invariants in `fuzz/checks.rs`).
//! Run: `bench/fuzz.sh` or `cd fuzz && cargo +nightly fuzz run body_reader`.
#![no_main]

#[path = "../checks.rs"]
mod checks;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| checks::body_reader(data));
