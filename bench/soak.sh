#!/usr/bin/env bash
# Soak (issue 7 §7), bounded: the release node in front of the mock upstream, driven by
# examples/loadgen.rs in two phases — STREAMS concurrent streaming connections for
# STREAM_SECONDS, then NONSTREAM_CONNS non-streaming connections for NONSTREAM_SECONDS (the
# full run aims at ≥ 1M requests) — while the node's RSS (VmRSS) and open fds are sampled every
# second. At the end: in-flight must be back to 0 (GET /admin/state), and the RSS/fd curve is
# printed with its start, peak and end.
#
#   bench/soak.sh                                                   # full: 1,000 streams × 60 s, then 120 s non-streaming
#   STREAMS=200 STREAM_SECONDS=15 NONSTREAM_SECONDS=15 bench/soak.sh # short validation run
#   REQUEST_EVENTS=failures bench/soak.sh                           # routine successes not journaled
#
# Exit status 1 when any request failed, in-flight is not 0 at the end, the fd count grew by
# more than FD_SLACK (default 50) between the end of the warm-up and the end, or the node died.
set -euo pipefail
cd "$(dirname "$0")/.."
STREAMS="${STREAMS:-1000}"
STREAM_SECONDS="${STREAM_SECONDS:-60}"
NONSTREAM_CONNS="${NONSTREAM_CONNS:-64}"
NONSTREAM_SECONDS="${NONSTREAM_SECONDS:-120}"
FD_SLACK="${FD_SLACK:-50}"
MOCK_PORT="${MOCK_PORT:-4301}"; ROUTER_PORT="${ROUTER_PORT:-4303}"
TARGET="${CARGO_TARGET_DIR:-target}"
work="$(mktemp -d)"
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"

cargo build --release --quiet --bin quotaroute --example loadgen
bin="$TARGET/release/quotaroute"
load="$TARGET/release/examples/loadgen"

source bench/pool.sh
start_mock
start_router sk-soak 'admin_key = "qr-admin-soak"'
node=$router

sample() { # phase → "t phase rss_kb fds"
    local rss fds
    rss="$(awk '/VmRSS/ {print $2}' "/proc/$node/status" 2>/dev/null || echo 0)"
    fds="$(ls "/proc/$node/fd" 2>/dev/null | wc -l)"
    echo "$SECONDS $1 $rss $fds"
}
sampler() { while kill -0 "$node" 2>/dev/null; do sample "$(cat "$work/phase")" >> "$work/samples"; sleep 1; done; }
echo idle > "$work/phase"; SECONDS=0
sampler & pids+=($!)
url="http://127.0.0.1:$ROUTER_PORT/v1/chat/completions"

echo streams > "$work/phase"
echo "phase 1: $STREAMS concurrent streams for ${STREAM_SECONDS}s"
"$load" "$url" team "$STREAMS" "$STREAM_SECONDS" stream sk-soak | tee "$work/streams.json"
echo nonstream > "$work/phase"
echo "phase 2: $NONSTREAM_CONNS connections, non-streaming, for ${NONSTREAM_SECONDS}s"
"$load" "$url" team "$NONSTREAM_CONNS" "$NONSTREAM_SECONDS" plain sk-soak | tee "$work/plain.json"
echo idle > "$work/phase"; sleep 3

status=0
kill -0 "$node" 2>/dev/null || { echo "FAIL: the node died"; status=1; }
for phase in streams plain; do
    errors="$(sed -n 's/.*"errors":\([0-9]*\).*/\1/p' "$work/$phase.json")"
    [ "${errors:-1}" = "0" ] || { echo "FAIL: $phase phase saw ${errors:-?} failed requests"; status=1; }
done
in_flight="$(curl -sf -H 'authorization: Bearer qr-admin-soak' "http://127.0.0.1:$ROUTER_PORT/admin/state" \
    | grep -o '"in_flight":[0-9]*' | cut -d: -f2 | paste -sd+ | bc)"
echo "in-flight at the end: ${in_flight:-?}"
[ "${in_flight:-1}" = "0" ] || { echo "FAIL: in-flight not back to 0"; status=1; }

echo; echo "RSS / fd curve (every second):"
echo "  t(s)  phase      RSS(MB)  fds"
awk '{printf "  %4d  %-9s  %7.1f  %4d\n", $1, $2, $3/1024, $4}' "$work/samples"
summary() { awk -v p="$1" '$2==p {if(!n++){f=$3}; if($3>m)m=$3; l=$3; if(!fd0)fd0=$4; fdl=$4} END {if(n) printf "%-9s RSS start %.1f MB, peak %.1f MB, end %.1f MB; fds %d → %d\n", p, f/1024, m/1024, l/1024, fd0, fdl}' "$work/samples"; }
echo; summary streams; summary nonstream; summary idle
# fd growth: end of the first phase's warm-up (5 s in) vs the final idle samples.
fd_warm="$(awk '$2=="streams"' "$work/samples" | sed -n 5p | awk '{print $4}')"
fd_end="$(tail -1 "$work/samples" | awk '{print $4}')"
if [ -n "$fd_warm" ] && [ -n "$fd_end" ] && [ $((fd_end - fd_warm)) -gt "$FD_SLACK" ]; then
    echo "FAIL: fds grew from $fd_warm to $fd_end"; status=1
fi
exit $status
