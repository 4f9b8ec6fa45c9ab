//! Fuzzes usage parsing: whole bodies and stream events of every format, any JSON in any count;
//! the checked counts always within `usage_max_tokens` and the prompt (invariants in
//! `fuzz/checks.rs`). Run: `bench/fuzz.sh` or `cd fuzz && cargo +nightly fuzz run usage_parse`.
#![no_main]

#[path = "../checks.rs"]
mod checks;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| checks::usage(data));
