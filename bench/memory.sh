#!/usr/bin/env bash
# Memory under load: the router's idle RSS, then its peak (VmHWM) under `loadgen` with 64
# connections, non-streaming then streaming, SECS each (default 8), on bench/pool.sh's config;
# per mode also RPS, CPU µs and minor page faults per request. QR_ENV="env MIMALLOC_PURGE_DELAY=1000"
# runs the router with an allocator setting; STRACE=1 adds the syscalls by count. GOVERNED=1 runs
# it governed, the way operators do: the load's key is a `[[clients]]` key with limits, a budget
# and prices (never reached), beside two more clients (as ../shared/bench's governed config).
# DROP_CACHES=1 (root) empties the page cache first, so the binary's pages are read in as after
# a boot: a binary just built or copied sits in the page cache in large pieces, and each fault
# then maps more of it (~1 MiB more file-backed RSS on this machine).
set -euo pipefail
cd "$(dirname "$0")/.."
SECS="${SECS:-8}"
MOCK_PORT=4301; ROUTER_PORT=4303
work="$(mktemp -d)"; pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT
# Two builds: with the example in the same one, its dev-dependencies unify features into the
# binary, whose names then differ from the binary operators build.
# QR_BINARY / LOADGEN: those builds instead (nothing is built for the one given).
[ -n "${QR_BINARY:-}" ] || cargo build --release --quiet --bin quotaroute
[ -n "${LOADGEN:-}" ] || cargo build --release --quiet --example loadgen
bin=${QR_BINARY:-target/release/quotaroute}; load=${LOADGEN:-target/release/examples/loadgen}
source bench/pool.sh
if [ -n "${DROP_CACHES:-}" ]; then sync; echo 3 > /proc/sys/vm/drop_caches; fi
start_mock
if [ -n "${GOVERNED:-}" ]; then
  CONFIG_APPEND="$(governed_clients)"
  start_router sk-not-used
else
  start_router sk-bench
fi
sleep 1
hz=$(getconf CLK_TCK)
idle=$(awk '/VmRSS/ {print $2}' "/proc/$router/status")
# The peak's parts, sampled every 100 ms: anonymous memory (heap, stacks, buffers) and the
# binary's and libraries' mapped pages (file-backed), the largest of each seen.
( while kill -0 "$router" 2>/dev/null; do
    awk '/RssAnon|RssFile/ {print $1, $2}' "/proc/$router/status" 2>/dev/null
    sleep 0.1
  done ) >"$work/rss.samples" &
pids+=($!)
for mode in json stream; do
  t0=$(awk '{print $14+$15}' "/proc/$router/stat"); f0=$(awk '{print $10}' "/proc/$router/stat")
  if [ -n "${STRACE:-}" ]; then strace -c -f -p "$router" -o "$work/strace.$mode" 2>/dev/null & st=$!; sleep 0.5; fi
  # SMAPS=1: where the resident memory is, halfway through the load (by mapping).
  if [ -n "${SMAPS:-}" ]; then (sleep "$((SECS / 2))"; python3 bench/smaps.py "$router" >"$work/smaps.$mode") & sm=$!; fi
  out=$("$load" "http://127.0.0.1:$ROUTER_PORT/v1/chat/completions" team 64 "$SECS" $mode sk-bench)
  [ -n "${SMAPS:-}" ] && { wait "$sm"; echo "$mode, resident halfway:"; cat "$work/smaps.$mode"; }
  t1=$(awk '{print $14+$15}' "/proc/$router/stat"); f1=$(awk '{print $10}' "/proc/$router/stat")
  req=$(echo "$out" | sed -E 's/.*"requests":([0-9]+).*/\1/')
  rps=$(echo "$out" | sed -E 's/.*"rps":([0-9.]+).*/\1/')
  if [ -n "${STRACE:-}" ]; then kill -INT "$st"; wait "$st" || true; sort -k4 -n -r "$work/strace.$mode" | head -8; fi
  echo "$mode: $rps RPS, CPU $(( (t1 - t0) * 1000000 / hz / req )) µs/req, minor faults $(( (f1 - f0) * 1000 / req )) per 1000 req, VmHWM $(awk '/VmHWM/ {print $2}' "/proc/$router/status") kB"
done
echo "idle VmRSS $idle kB; peak VmHWM $(awk '/VmHWM/ {print $2}' "/proc/$router/status") kB"
awk '{ if ($2 > max[$1]) max[$1] = $2 } END { printf "largest RssAnon %d kB, RssFile %d kB\n", max["RssAnon:"], max["RssFile:"] }' "$work/rss.samples"
