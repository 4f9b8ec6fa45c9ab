#!/usr/bin/env bash
# Peak RSS under the shared bench's load, as issue 55 measures it: the router on
# ../shared/bench/quotaroute-bench.toml (GOVERNED=1: quotaroute-bench-governed.toml), the shared
# mock upstream, `wrk -t1 -c64 -d${SECS}s` POSTing chat-small.json (STREAM=1: the stream body).
# Prints one line: idle VmRSS, peak VmHWM, the largest RssAnon and RssFile sampled every 100 ms,
# requests, RPS and the router's CPU µs per request. QR_BINARY: the binary (default the release
# build, built first); QR_ENV: a prefix such as "env MIMALLOC_PURGE_DELAY=1000"; SCRAPE=0.5
# scrapes /metrics that often (metrics_public); EXTRA: a line added under [journal]
# (e.g. 'request_events = "failures"'); SAMPLES=FILE keeps the RSS samples.
# COLD=1 drops the binary's pages from the page cache before it starts (see below).
set -euo pipefail
cd "$(dirname "$0")/.."
shared=../shared/bench
SECS="${SECS:-12}"; MOCK_PORT=18290; ROUTER_PORT=18293
mock_bin=${MOCK_BIN:-${TMPDIR:-/tmp}/quotaroute-bench-mock-target/release/mock-upstream}
[ -x "$mock_bin" ] || (cd "$shared/mock-upstream" && CARGO_TARGET_DIR="$(dirname "$(dirname "$mock_bin")")" cargo build --release -q)
[ -n "${QR_BINARY:-}" ] || cargo build --release --quiet --bin quotaroute
bin=${QR_BINARY:-target/release/quotaroute}
# COLD=1: the binary's pages dropped from the page cache first. The kernel maps code 64 KiB
# around each fault only from pages already cached, so a binary just written (all cached)
# reads ~1.5 MB more RssFile than one read from disk: compare builds in the same state.
if [ "${COLD:-0}" = 1 ]; then
  python3 -c 'import os, sys; fd = os.open(sys.argv[1], os.O_RDONLY); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)' "$bin"
fi
work="$(mktemp -d)"; pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  [ -n "${SAMPLES:-}" ] && cp "$work/rss.samples" "$SAMPLES"
  rm -rf "$work"
}
trap cleanup EXIT
MOCK_ADDR=127.0.0.1:$MOCK_PORT MOCK_LATENCY_MS=0 MOCK_STREAM_CHUNKS=20 "$mock_bin" >/dev/null 2>&1 & pids+=($!)
template=$shared/quotaroute-bench.toml
[ "${GOVERNED:-0}" = 1 ] && template=$shared/quotaroute-bench-governed.toml
sed -e "s#127.0.0.1:18183#127.0.0.1:$ROUTER_PORT#; s#127.0.0.1:18180#127.0.0.1:$MOCK_PORT#; s#JOURNAL_DIR#$work/journal#" \
  "$template" >"$work/quotaroute.toml"
[ -n "${SCRAPE:-}" ] && sed -i "/^listen = /a metrics_public = true" "$work/quotaroute.toml"
[ -n "${EXTRA:-}" ] && sed -i "/^path = /a $EXTRA" "$work/quotaroute.toml"
for _ in $(seq 50); do curl -sf "http://127.0.0.1:$MOCK_PORT/health" >/dev/null && break; sleep 0.1; done
RUST_LOG=warn ${QR_ENV:-} "$bin" serve --config "$work/quotaroute.toml" 2>"$work/router.log" & router=$!; pids+=($router)
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$ROUTER_PORT/healthz" >/dev/null && break; sleep 0.1; done
sleep 1
idle=$(awk '/VmRSS/ {print $2}' "/proc/$router/status")
( while kill -0 "$router" 2>/dev/null; do
    awk '/RssAnon|RssFile/ {print $1, $2}' "/proc/$router/status" 2>/dev/null
    sleep 0.1
  done ) >"$work/rss.samples" &
pids+=($!)
if [ -n "${SCRAPE:-}" ]; then
  ( while kill -0 "$router" 2>/dev/null; do
      curl -s -o /dev/null "http://127.0.0.1:$ROUTER_PORT/metrics"; sleep "$SCRAPE"
    done ) & pids+=($!)
fi
hz=$(getconf CLK_TCK); t0=$(awk '{print $14+$15}' "/proc/$router/stat")
key=sk-bench-c8d7427854b11a80aeb8552c991c023f4e33702e3de9935b0ca203e9ac307100
body=$shared/bodies/chat-small.json; [ -n "${STREAM:-}" ] && body=$shared/bodies/chat-small-stream.json
out=$(BODY_FILE=$body API_KEY=$key wrk -t1 -c64 -d"${SECS}s" --timeout 10s -s "$shared/wrk/post.lua" \
  "http://127.0.0.1:$ROUTER_PORT/v1/chat/completions" 2>&1)
t1=$(awk '{print $14+$15}' "/proc/$router/stat")
req=$(echo "$out" | sed -nE 's/.*BENCH_JSON \{"requests":([0-9]+).*/\1/p')
hwm=$(awk '/VmHWM/ {print $2}' "/proc/$router/status")
sleep 0.3
read -r anon file < <(awk '{ if ($2 > m[$1]) m[$1] = $2 } END { print m["RssAnon:"], m["RssFile:"] }' "$work/rss.samples")
echo "$([ "${GOVERNED:-0}" = 1 ] && echo governed || echo plain): idle VmRSS $idle kB, peak VmHWM $hwm kB, largest RssAnon $anon kB, RssFile $file kB; $req requests, $((req / SECS)) RPS, CPU $(( (t1 - t0) * 1000000 / hz / req )) µs/req $(echo "$out" | grep -E 'Non-2xx|Socket errors' || true)"
