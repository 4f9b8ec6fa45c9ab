#!/usr/bin/env bash
# Governed against plain, beside nginx, in ONE invocation (issue 38): the shared bench's mock,
# load (wrk) and CPU accounting (../shared/bench/lib.sh), with two routers running side by side
# from the same release binary — `plain` on ../shared/bench/quotaroute-bench.toml (one bench key)
# and `governed` on quotaroute-bench-governed.toml (the bench key a `[[clients]]` key with
# limits, a budget and prices, beside two more clients) — and nginx. The three are measured in
# turn (and the mock directly, for the latency added), one run each per mode, ROUNDS times, so a host that gets busier or quieter during the
# invocation moves all three alike; medians over the rounds. Prints the table (peers nginx,
# plain, governed) and the ratios that count: governed over plain, and each over nginx.
# Run from the project root:   bench/governed-vs-plain.sh        (about 9 minutes)
#   knobs: ROUNDS=3, DURATION=8, MODES="nonstream stream nonstream_c1", QR_BINARY=path;
#   PLAIN_BINARY / GOVERNED_BINARY=path: that router's binary (default the release build), and
#   GOVERNED_CONFIG=template: its config — two builds side by side on one config, e.g.
#   PLAIN_BINARY=old GOVERNED_BINARY=new GOVERNED_CONFIG=../shared/bench/quotaroute-bench.toml
#   (the rows keep their slot's name: "governed" is then the new build, on the plain config)
# Needs nginx and wrk (apt-get install -y nginx wrk).
set -uo pipefail
root=$PWD
[ -f "$root/Cargo.toml" ] || { echo "run from the project root"; exit 2; }
bench=$(cd "$root/../shared/bench" && pwd)
command -v nginx >/dev/null && command -v wrk >/dev/null || { echo "needs nginx and wrk: apt-get install -y nginx wrk"; exit 2; }
source "$root/bench/bench-node.sh"
release_binary || exit 1
export NGINX_WORKERS=${NGINX_WORKERS:-$(nproc)}
export MODES=${MODES:-"nonstream stream nonstream_c1"} DURATION=${DURATION:-8}
rounds=${ROUNDS:-3}
source "$bench/lib.sh"
REPS=1
work=$(mktemp -d)
mkdir -p "$RUN_DIR"
trap 'cleanup; rm -rf "$work"' EXIT
trap 'cleanup; rm -rf "$work"; exit 130' INT TERM
RESULTS_TSV=$RUN_DIR/governed-vs-plain-$(date +%Y%m%d-%H%M%S).tsv
: >"$RESULTS_TSV"

# start_router NAME BINARY TEMPLATE PORT: that binary on that config (own journal, own port);
# sets ROUTER_PID.
start_router() {
  local name=$1 binary=$2 template=$3 port=$4
  sed -e "s|JOURNAL_DIR|$work/$name-journal|" -e "s|127.0.0.1:18183|127.0.0.1:$port|" \
    "$template" >"$work/$name.toml"
  "$binary" serve --config "$work/$name.toml" >"$RUN_DIR/$name.log" 2>&1 &
  ROUTER_PID=$!; STARTED_PIDS+=("$ROUTER_PID")
  wait_http "$(chat_url "http://127.0.0.1:$port")" 60 POST "$bench/bodies/chat-small.json" ||
    { log "$name did not answer 200 on port $port; see $RUN_DIR/$name.log"; exit 1; }
}

log "config: conns=$CONNS duration=${DURATION}s rounds=$rounds modes='$MODES' plain=${PLAIN_BINARY:-$bin} governed=${GOVERNED_BINARY:-$bin} on ${GOVERNED_CONFIG:-governed config}"
start_mock || exit 1
PEER_FAIL=""
start_nginx || { log "nginx: $PEER_FAIL"; exit 1; }
nginx_pid=$PEER_PID nginx_url=$PEER_URL
start_router plain "${PLAIN_BINARY:-$bin}" "$bench/quotaroute-bench.toml" 18183
plain_pid=$ROUTER_PID
start_router governed "${GOVERNED_BINARY:-$bin}" \
  "${GOVERNED_CONFIG:-$bench/quotaroute-bench-governed.toml}" 18184
governed_pid=$ROUTER_PID

for round in $(seq 1 "$rounds"); do
  for mode in $MODES; do
    measure direct "$mode" "http://127.0.0.1:$MOCK_PORT" ""
    measure nginx "$mode" "$nginx_url" "$nginx_pid"
    # the two routers in turn first, so neither always follows nginx
    if [ $((round % 2)) = 1 ]; then order="plain governed"; else order="governed plain"; fi
    for router in $order; do
      if [ $router = plain ]; then measure plain "$mode" http://127.0.0.1:18183 "$plain_pid"
      else measure governed "$mode" http://127.0.0.1:18184 "$governed_pid"; fi
    done
  done
  log "round $round of $rounds done"
done
cleanup

out=$(python3 "$bench/summarize.py" "$RESULTS_TSV")
echo "$out"
python3 - "$out" "$RESULTS_TSV" <<'PY'
import json, statistics, sys
rows = {}
for line in sys.argv[1].splitlines():
    c = [x.strip() for x in line.strip().strip('|').split('|')]
    if len(c) > 9 and c[0] in ('nginx', 'plain', 'governed'):
        rows[(c[0], c[1])] = c
def num(v):
    try: return float(v.replace(',', ''))
    except (ValueError, AttributeError): return None
for mode in ('nonstream', 'stream'):
    n, p, g = (rows.get((peer, mode)) for peer in ('nginx', 'plain', 'governed'))
    if not (n and p and g):
        continue
    cn, cp, cg = num(n[8]), num(p[8]), num(g[8])
    rn, rp, rg = num(n[2]), num(p[2]), num(g[2])
    print(f"{mode}: CPU per request plain {cp} µs ({cp / cn:.1f}x nginx's {cn}), governed {cg} µs "
          f"({cg / cn:.1f}x); governed over plain {100 * (cg / cp - 1):+.1f} %")
    print(f"{mode}: RPS over nginx plain {rp / rn:.2f}, governed {rg / rn:.2f}")
# Each round's governed run over the plain run next to it: the host's drift between rounds
# falls out of each ratio.
runs = {}
for line in open(sys.argv[2]):
    peer, mode, _, status, payload = line.rstrip("\n").split("\t", 4)
    if status == "OK" and peer in ("plain", "governed"):
        cpu = json.loads(payload).get("proxy_cpu_us")
        if cpu:
            runs.setdefault((peer, mode), []).append(cpu)
for mode in ('nonstream', 'stream', 'nonstream_c1'):
    pairs = sorted(g / p for p, g in zip(runs.get(('plain', mode), []), runs.get(('governed', mode), [])))
    if pairs:
        print(f"{mode}: governed over plain, round by round: median {100 * (statistics.median(pairs) - 1):+.1f} % "
              f"(range {100 * (pairs[0] - 1):+.1f} .. {100 * (pairs[-1] - 1):+.1f} %, {len(pairs)} rounds)")
n, p, g = (rows.get((peer, 'nonstream_c1')) for peer in ('nginx', 'plain', 'governed'))
if n and p and g:
    print(f"one connection: added p50 vs direct nginx {num(n[6]) * 1000:.0f} µs, "
          f"plain {num(p[6]) * 1000:.0f} µs, governed {num(g[6]) * 1000:.0f} µs")
PY
log "raw results: $RESULTS_TSV"
