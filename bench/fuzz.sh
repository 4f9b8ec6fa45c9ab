#!/usr/bin/env bash
# Bounded fuzzing (issue 7 §5): runs every cargo-fuzz target for SECONDS each (default 60) and
# prints one line per target: executions, executions/s and whether it crashed. Targets: the
# config parser, the SSE parser, the body rewrite, the header parsers + classifier (fuzz/) and
# the journal record decoder (journal/fuzz/). Needs `cargo +nightly` and `cargo install cargo-fuzz`.
#
#   bench/fuzz.sh            # 60 s per target
#   bench/fuzz.sh 20         # 20 s per target
#   TARGETS="sse_parser" bench/fuzz.sh 300
#
# Crash inputs are kept by libFuzzer under fuzz/artifacts/<target>/ (journal/fuzz/artifacts/).
# Exit status: 1 when any target crashed.
set -uo pipefail
cd "$(dirname "$0")/.."
SECONDS_PER_TARGET="${1:-${SECONDS_PER_TARGET:-60}}"
TARGET_DIR="${FUZZ_TARGET_DIR:-${CARGO_TARGET_DIR:-target}/fuzz}"
ROOT_TARGETS="${TARGETS:-config_parse sse_parser body_rewrite headers_classify sse_mask body_reader usage_parse}"
JOURNAL_TARGETS="${JOURNAL_TARGETS:-record_decoder}"
logs="$(mktemp -d)"
trap 'rm -rf "$logs"' EXIT
crashed=0

run() { # dir target
    local dir="$1" target="$2" log="$logs/$2.log"
    (cd "$dir" && cargo +nightly fuzz build --target-dir "$TARGET_DIR" "$target" >/dev/null 2>&1) || {
        printf '%-18s BUILD FAILED\n' "$target"; crashed=1; return; }
    (cd "$dir" && cargo +nightly fuzz run --target-dir "$TARGET_DIR" "$target" -- \
        -max_total_time="$SECONDS_PER_TARGET" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
        >"$log" 2>&1)
    local status=$?
    local runs
    runs="$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)"
    [ -z "$runs" ] && runs="$(grep -o 'Done [0-9]* runs' "$log" | grep -o '[0-9]*' | tail -1)"
    local result="ok"
    if [ "$status" -ne 0 ]; then
        result="CRASH (exit $status): $(grep -m1 -E 'panicked|ERROR|SUMMARY' "$log")"
        crashed=1
        cp "$log" "$dir/fuzz-$target.log" 2>/dev/null || true
    fi
    printf '%-18s %12s execs  %8s execs/s  %s\n' "$target" "${runs:-?}" \
        "$(( ${runs:-0} / SECONDS_PER_TARGET ))" "$result"
}

echo "fuzzing ${SECONDS_PER_TARGET}s per target"
for target in $ROOT_TARGETS; do run fuzz "$target"; done
for target in $JOURNAL_TARGETS; do run journal/fuzz "$target"; done
exit $crashed
