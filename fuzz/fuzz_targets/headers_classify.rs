//! Fuzzes every reset-hint and rate-limit header parser and the classifier: no input may panic or hang (invariants in `fuzz/checks.rs`).
//! Run: `bench/fuzz.sh` or `cd fuzz && cargo +nightly fuzz run headers_classify`.
#![no_main]

#[path = "../checks.rs"]
mod checks;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| checks::headers_and_classify(data));
