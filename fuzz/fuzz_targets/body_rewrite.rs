//! Fuzzes the request body parse and model rewrite: no input may panic or hang (invariants in `fuzz/checks.rs`).
//! Run: `bench/fuzz.sh` or `cd fuzz && cargo +nightly fuzz run body_rewrite`.
#![no_main]

#[path = "../checks.rs"]
mod checks;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| checks::body_rewrite(data));
