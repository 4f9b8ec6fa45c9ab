#!/usr/bin/env bash
# What `[telemetry]` costs in wall CPU, on a machine whose speed drifts between runs: two nodes
# of the same release binary, one plain and one exporting every span (sample_ratio 1.0) to a
# live collector (bench/otlp-sink.py), both in front of the shared bench mock, both started
# before the first burst. The load alternates between them in short `wrk` bursts (ROUNDS
# pairs of BURST seconds, CONNS connections, the order of each pair swapped every round), so a
# change in the machine's speed falls on both alike. Per burst: the node's own CPU (utime +
# stime from /proc, all its threads) over the requests served. Prints each round and the
# medians; the ratio of the medians is the traces' cost.
#   bench/telemetry-ab.sh        (knobs: ROUNDS=10 BURST=4 CONNS=32 QR_BINARY=path; STREAM=1
#   (streaming requests: CPU per stream);
#   COLLECTOR=closed: the traced node exports to a port nobody listens on, so every span is
#   still made and encoded but no collector shares the cores; TOGETHER=1: each round loads both
#   nodes at once, CONNS connections each, so both see the same moment of the machine;
#   VS=governed: the second node is not traced but governed, on quotaroute-bench-governed.toml —
#   the bench key a `[[clients]]` key with limits, a budget and prices — so the ratio is what
#   governing costs, issue 38)
set -euo pipefail
root=$(pwd)
bench=$(cd "$root/../shared/bench" && pwd)
command -v wrk >/dev/null || { echo "needs wrk: apt-get install -y wrk"; exit 2; }
source "$root/bench/bench-node.sh"
release_binary
with_bench_mock
vs=${VS:-traced}
case "$vs" in traced|governed) ;; *) echo "VS is traced or governed"; exit 2 ;; esac
if [ "$vs" = traced ] && [ "${COLLECTOR:-sink}" != closed ]; then
  python3 "$root/bench/otlp-sink.py" 14319 >/dev/null 2>&1 &
  pids+=($!)
fi
key=$(bench_key)
start_node() { # name port [telemetry|governed]
  local template=$bench/quotaroute-bench.toml
  [ "${3:-}" = governed ] && template=$bench/quotaroute-bench-governed.toml
  sed "s|JOURNAL_DIR|$work/journal-$1|; s|127.0.0.1:18183|127.0.0.1:$2|" \
    "$template" >"$work/$1.toml"
  [ "${3:-}" = telemetry ] && printf '\n[telemetry]\notlp_endpoint = "http://127.0.0.1:14319"\nservice_name = "quotaroute-ab"\nsample_ratio = 1.0\n' >>"$work/$1.toml"
  RUST_LOG=warn "$bin" serve --config "$work/$1.toml" >"$work/$1.log" 2>&1 &
  pids+=($!)
  eval "pid_$1=$!"
  for _ in $(seq 1 100); do curl -sf -o /dev/null "http://127.0.0.1:$2/healthz" && return; sleep 0.1; done
  echo "node $1 did not start"; cat "$work/$1.log"; exit 1
}
start_node plain 18191
if [ "$vs" = traced ]; then start_node traced 18192 telemetry; else start_node governed 18192 governed; fi
hz=$(getconf CLK_TCK)
body=$bench/bodies/chat-small.json
[ "${STREAM:-0}" = 1 ] && body=$bench/bodies/chat-small-stream.json
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
kernel() { awk '{print $15}' "/proc/$1/stat"; }
burst() { # name port pid -> µs of CPU per request, then the kernel's part of it
  local before after requests kbefore kafter
  before=$(cpu "$3"); kbefore=$(kernel "$3")
  BODY_FILE=$body API_KEY=$key wrk -t1 -c"${CONNS:-32}" -d"${BURST:-4}s" \
    -s "$bench/wrk/post.lua" "http://127.0.0.1:$2/v1/chat/completions" >"$work/wrk-$1.txt"
  after=$(cpu "$3"); kafter=$(kernel "$3")
  requests=$(sed -n 's/^BENCH_JSON .*"requests":\([0-9]*\).*/\1/p' "$work/wrk-$1.txt")
  echo "$(((after - before) * 1000000 / hz / requests)) $(((kafter - kbefore) * 1000000 / hz / requests))"
}
# Warm both (connections, caches, the first export).
burst plain 18191 "$pid_plain" >/dev/null
pid_b=$(eval echo "\$pid_$vs")
burst "$vs" 18192 "$pid_b" >/dev/null
plain=(); second=(); plain_kernel=(); second_kernel=()
for round in $(seq 1 "${ROUNDS:-10}"); do
  if [ "${TOGETHER:-0}" = 1 ]; then
    burst plain 18191 "$pid_plain" >"$work/plain.out" &
    burst "$vs" 18192 "$pid_b" >"$work/second.out"
    wait $!
    read -r p pk <"$work/plain.out"; read -r t tk <"$work/second.out"
  elif ((round % 2)); then
    read -r p pk < <(burst plain 18191 "$pid_plain"); read -r t tk < <(burst "$vs" 18192 "$pid_b")
  else
    read -r t tk < <(burst "$vs" 18192 "$pid_b"); read -r p pk < <(burst plain 18191 "$pid_plain")
  fi
  plain+=("$p"); second+=("$t"); plain_kernel+=("$pk"); second_kernel+=("$tk")
  echo "round $round: plain $p µs/request ($pk in the kernel), $vs $t µs/request ($tk in the kernel)"
done
python3 - "${plain[*]}" "${second[*]}" "${plain_kernel[*]}" "${second_kernel[*]}" "$vs" <<'PY'
import statistics, sys
plain, second, plain_kernel, second_kernel = ([int(x) for x in arg.split()] for arg in sys.argv[1:5])
vs = sys.argv[5]
print(f"median kernel CPU per request: plain {statistics.median(plain_kernel)} µs, "
      f"{vs} {statistics.median(second_kernel)} µs")
p, t = statistics.median(plain), statistics.median(second)
pairs = sorted(b / a for a, b in zip(plain, second))
print(f"median CPU per request: plain {p} µs, {vs} {t} µs: {100 * (t / p - 1):+.1f} %; "
      f"per-round ratio median {100 * (statistics.median(pairs) - 1):+.1f} % "
      f"(range {100 * (pairs[0] - 1):+.1f} .. {100 * (pairs[-1] - 1):+.1f} %)")
PY
