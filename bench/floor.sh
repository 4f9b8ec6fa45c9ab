#!/usr/bin/env bash
# The floor under quotaroute's CPU per request: examples/http_floor/ is the same hyper server,
# hyper-util client and tokio runtime with no routing, parsing or journal. Two measures, run
# from the project root:
#   bench/floor.sh            # instructions per request under callgrind, floor vs quotaroute
#                             # (same wrk load as bench/profile.sh; steady on a shared machine)
#   VS_NGINX=1 bench/floor.sh # the floor beside nginx in one run (../shared/bench/run-target.sh)
#   RELAY=coalesce …          # the frames that already arrived gathered into one client write
#   RELAY=driven …            # and the upstream connection driven by the request holding it,
#                             # as the router's (upstream/driven.rs): the leanest hyper relay
#   RELAY=design …            # driven, plus what the decided design makes every request do
#                             # (examples/http_floor/design.rs: body read, a combo actor's ask,
#                             # a whole answer's usage read, a connection actor's message, two
#                             # journal events through the router's sled journal writer)
#   RELAY=contract …          # design, plus what the contract asks of every answered request
#                             # (examples/http_floor/contract.rs: the client's key checked,
#                             # headers filtered both ways, the key's credential set, the
#                             # x-quotaroute-* headers, the requests counter and overhead)
#   STREAM=1 bench/floor.sh   # instructions per stream (the bench's 20-event stream)
#   CALLGRIND_ARGS=--cache-sim=yes …  # more callgrind options (/tmp/floor-callgrind.out keeps them)
# Needs valgrind and wrk (and nginx for VS_NGINX=1).
set -euo pipefail
root=$(pwd)
# The shared bench's client key (../shared/bench/lib.sh), which `contract` checks.
client_key=sk-bench-c8d7427854b11a80aeb8552c991c023f4e33702e3de9935b0ca203e9ac307100
bench=$(cd "$root/../shared/bench" && pwd)
cargo build --release --example http_floor -q
floor="$root/target/release/examples/http_floor 127.0.0.1:18183 http://127.0.0.1:18180"
floor="$floor ${RELAY:-}"
if [ "${VS_NGINX:-0}" = 1 ]; then
  floor_journal=$(mktemp -d)
  trap 'rm -rf "$floor_journal"' EXIT
  case "${RELAY:-}" in design | contract) floor="$floor $floor_journal/journal" ;; esac
  NGINX_WORKERS=${NGINX_WORKERS:-$(nproc)} MODES=${MODES:-"nonstream stream"} REPS=${REPS:-3} \
    DURATION=${DURATION:-8} "$bench/run-target.sh" http://127.0.0.1:18183 --cmd "$floor" --with nginx
  exit
fi
source "$root/bench/bench-node.sh"
with_bench_mock
case "${RELAY:-}" in design | contract) floor="$floor $work/journal" ;; esac
# shellcheck disable=SC2086
valgrind --tool=callgrind --fair-sched=yes ${CALLGRIND_ARGS:-} --callgrind-out-file="$work/callgrind.out" $floor >"$work/floor.log" 2>&1 &
node=$!
pids+=($node)
body=$bench/bodies/chat-small.json
[ "${STREAM:-0}" = 1 ] && body=$bench/bodies/chat-small-stream.json
for _ in $(seq 1 300); do
  curl -sf -o /dev/null -H 'content-type: application/json' -H "authorization: Bearer $client_key" --data @"$body" \
    http://127.0.0.1:18183/v1/chat/completions && break
  sleep 0.2
done
BODY_FILE=$body API_KEY=$client_key wrk -t1 -c"${CONNS:-8}" -d"${SECONDS_OF_LOAD:-20}s" \
  -s "$bench/wrk/post.lua" http://127.0.0.1:18183/v1/chat/completions >"$work/wrk.txt"
requests=$(sed -n 's/^BENCH_JSON .*"requests":\([0-9]*\).*/\1/p' "$work/wrk.txt")
kill -TERM "$node"; wait "$node" 2>/dev/null || true
cp "$work/callgrind.out" /tmp/floor-callgrind.out
total=$(callgrind_annotate --auto=no "$work/callgrind.out" 2>/dev/null | sed -n 's/^ *\([0-9,]*\) .*PROGRAM TOTALS.*/\1/p' | tr -d ,)
what="hyper server + hyper-util client, nothing else"
case "${RELAY:-}" in
  design) what="driven relay + the design's own work per request" ;;
  contract) what="the design's floor + what the contract asks of every answered request" ;;
esac
echo "floor ($what): $requests requests, $((total / requests)) instructions per request"
echo "compare: bench/profile.sh prints quotaroute's under the same load"
