#!/usr/bin/env bash
# Two builds of the node side by side, read in pairs: both run at once in front of one shared
# bench mock, each with its own journal, and 3 s windows of vs-nginx's load (wrk -t2, the
# shared body and key) alternate between them, the order turning each round. Prints each
# round's CPU per request (user + system, all threads) and the mock's behind it, B's over A's,
# and the median of the rounds' ratios: what a change did in time, with the host's drift
# falling on both sides of each pair alike (bench/paired.sh does the same against nginx).
# A reading, not a target: it exits 0.
# Run from the project root:   A=path B=path bench/ab.sh        (about a minute)
#   knobs: MODE=nonstream|stream, CONNS=64, WINDOWS=8, SECS=3,
#          A_ENV / B_ENV ("NAME=value" set for that node only, e.g. the same binary twice)
# Needs wrk; builds the shared mock like ../shared/bench does.
set -euo pipefail
root=$(pwd)
bench=$(cd "$root/../shared/bench" && pwd)
command -v wrk >/dev/null || { echo "needs wrk: apt-get install -y wrk"; exit 2; }
: "${A:?A=path to the first build}" "${B:?B=path to the second build}"
body=$bench/bodies/chat-small.json
[ "${MODE:-nonstream}" = stream ] && body=$bench/bodies/chat-small-stream.json
source "$root/bench/bench-node.sh"
with_bench_mock 18180
key=$(bench_key)
export BODY_FILE=$body API_KEY=$key
for side in a b; do
  port=$([ "$side" = a ] && echo 18183 || echo 18186)
  sed -e "s|JOURNAL_DIR|$work/journal-$side|" -e "s/127.0.0.1:18183/127.0.0.1:$port/" \
    "$bench/quotaroute-bench.toml" >"$work/$side.toml"
done
# shellcheck disable=SC2086 # the settings, split on purpose
env ${A_ENV:-} "$A" serve --config "$work/a.toml" >"$work/a.log" 2>&1 &
node_a=$!
pids+=("$node_a")
# shellcheck disable=SC2086
env ${B_ENV:-} "$B" serve --config "$work/b.toml" >"$work/b.log" 2>&1 &
node_b=$!
pids+=("$node_b")
wait_up 18183
wait_up 18186
conns=${CONNS:-64}
load() { wrk -t2 -c"$conns" -d"$2s" -s "$bench/wrk/post.lua" "http://127.0.0.1:$1/v1/chat/completions"; }
load 18183 2 >/dev/null
load 18186 2 >/dev/null
: >"$work/windows"
for round in $(seq 1 "${WINDOWS:-8}"); do
  order="a b"
  [ $((round % 2)) = 0 ] && order="b a"
  for side in $order; do
    if [ "$side" = a ]; then port=18183 pid=$node_a; else port=18186 pid=$node_b; fi
    read -r user1 system1 < <(ticks "$pid")
    read -r mock_user1 mock_system1 < <(ticks "$mock")
    out=$(load "$port" "${SECS:-3}")
    read -r user2 system2 < <(ticks "$pid")
    read -r mock_user2 mock_system2 < <(ticks "$mock")
    requests=$(echo "$out" | sed -n 's/^BENCH_JSON .*"requests":\([0-9]*\).*/\1/p')
    echo "$round $side $requests $((user2 - user1)) $((system2 - system1))" \
      "$((mock_user2 + mock_system2 - mock_user1 - mock_system1))" >>"$work/windows"
  done
done
python3 - "$work/windows" "$(getconf CLK_TCK)" <<'PY'
import statistics, sys
path, tck = sys.argv[1], int(sys.argv[2])
read = {}
for line in open(path):
    round_, side, requests, user, system, mock = line.split()
    per = 1e6 / tck / int(requests)
    read[(int(round_), side)] = (int(requests), int(user) * per, int(system) * per, int(mock) * per)
ratios = []
print("| round | A requests | A user + system µs | mock behind A µs | B requests | B user + system µs | mock behind B µs | B / A |")
print("|---:|---:|---:|---:|---:|---:|---:|---:|")
for round_ in sorted({r for r, _ in read}):
    a, b = read[(round_, "a")], read[(round_, "b")]
    ratio = (b[1] + b[2]) / (a[1] + a[2])
    ratios.append(ratio)
    print(f"| {round_} | {a[0]:,} | {a[1]:.1f} + {a[2]:.1f} | {a[3]:.1f} | {b[0]:,} | {b[1]:.1f} + {b[2]:.1f} | {b[3]:.1f} | {ratio:.3f} |")
print(f"median of the rounds: B's CPU per request = {statistics.median(ratios):.3f} of A's; "
      f"B cheaper in {sum(r < 1 for r in ratios)} of {len(ratios)} rounds")
PY
