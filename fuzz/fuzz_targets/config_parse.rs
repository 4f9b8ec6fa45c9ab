//! Fuzzes the config parser (`quotaroute::config::parse`): no input may panic or hang (invariants in `fuzz/checks.rs`).
//! Run: `bench/fuzz.sh` or `cd fuzz && cargo +nightly fuzz run config_parse`.
#![no_main]

#[path = "../checks.rs"]
mod checks;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| checks::config(data));
