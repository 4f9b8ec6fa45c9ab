#!/usr/bin/env bash
# Cluster benchmark (issue #14): what `[cluster]` costs and how fast nodes learn from each other.
# 1. Router CPU µs per non-streaming request, one node without `[cluster]` against the same node
#    with `[cluster]` (two idle peers on the same Redis, and every key under a configured limit so
#    the lease path runs too): same mock, same loadgen, CONNS connections, SECONDS_PER_CASE each.
# 2. Propagation: TRIALS times, a 429 on node A for a fresh model; the time from A journaling its
#    lock to B journaling it as `peer_applied` (both clocks are this machine's), p50 and p99.
# Starts its own redis-server on a loopback port (no persistence) and stops everything by PID.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_PER_CASE="${SECONDS_PER_CASE:-8}"; CONNS="${CONNS:-64}"; TRIALS="${TRIALS:-100}"
LEASE_SIZE="${LEASE_SIZE:-100}"; RUNS="${RUNS:-3}"
MOCK_PORT=4241; REDIS_PORT=4249; SOLO_PORT=4242; A_PORT=4243; B_PORT=4244; C_PORT=4245
ADMIN=bench-admin
work="$(mktemp -d)"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT
command -v redis-server >/dev/null || { echo "needs redis-server (apt-get install -y redis-server)"; exit 1; }

cargo build --release --quiet --bin quotaroute --example loadgen
bin=target/release/quotaroute
load=target/release/examples/loadgen
source bench/pool.sh
start_mock

redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no >/dev/null & pids+=($!)
for _ in $(seq 100); do redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done

# node NAME PORT CLUSTER(0|1): writes its config and starts it; its pid in $node_pid.
node() {
    local name=$1 port=$2 cluster=$3
    local limits=""
    [ "$cluster" = 1 ] && limits=$'[connections.limits]\nrequests_5h = 1000000000000'
    {
        printf '[server]\nlisten = "127.0.0.1:%s"\napi_keys = ["sk-bench"]\nadmin_key = "%s"\n' "$port" "$ADMIN"
        printf '[journal]\npath = "%s/%s-journal"\n' "$work" "$name"
        printf '[[providers]]\nname = "openai"\nformat = "openai"\nbase_url = "http://127.0.0.1:%s/v1"\n' "$MOCK_PORT"
        for n in 1 2 3; do
            printf '[[connections]]\nid = "k%s"\nprovider = "openai"\napi_key = "%s"\n%s\n' "$n" "$(pool_key "$n")" "$limits"
        done
        printf '[[combos]]\nname = "team"\ntargets = [\n'
        printf '  { connection = "k1", model = "gpt-4o-mini", weight = 2 },\n  { connection = "k2", model = "gpt-4o-mini" },\n  { connection = "k3", model = "gpt-4o-mini" },\n]\n'
        [ "$cluster" = 1 ] && printf '[cluster]\nredis_url = "redis://127.0.0.1:%s"\nnode_id = "%s"\nlease_size = %s\n' "$REDIS_PORT" "$name" "$LEASE_SIZE"
    } > "$work/$name.toml"
    RUST_LOG=warn "$bin" serve --config "$work/$name.toml" 2>"$work/$name.log" & node_pid=$!; pids+=($node_pid)
    for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/healthz" >/dev/null && break; sleep 0.1; done
}

cpu_ticks() { awk '{print $14+$15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)
# measure PID PORT: one loadgen run; prints "rps cpu_us_per_request".
measure() {
    local before after out req rps
    before=$(cpu_ticks "$1")
    out=$("$load" "http://127.0.0.1:$2/v1/chat/completions" team "$CONNS" "$SECONDS_PER_CASE" json sk-bench)
    after=$(cpu_ticks "$1")
    req=$(echo "$out" | sed -E 's/.*"requests":([0-9]+).*/\1/'); rps=$(echo "$out" | sed -E 's/.*"rps":([0-9.]+).*/\1/')
    echo "$rps $(( (after - before) * 1000000 / hz / req ))"
}

# Both setups run side by side (the idle one costs nothing) and are measured in turns, so a
# machine whose speed drifts affects both alike.
node solo "$SOLO_PORT" 0; solo=$node_pid
node node-a "$A_PORT" 1; a=$node_pid
node node-b "$B_PORT" 1; node node-c "$C_PORT" 1
redis_pid=$(redis-cli -p "$REDIS_PORT" info server | awk -F: '/^process_id/ {print $2}' | tr -d '\r')
solo_results=(); cluster_results=(); redis_cpu=()
for _ in $(seq "$RUNS"); do
    solo_results+=("$(measure "$solo" "$SOLO_PORT")")
    rb=$(cpu_ticks "$redis_pid")
    cluster_results+=("$(measure "$a" "$A_PORT")")
    ra=$(cpu_ticks "$redis_pid"); redis_cpu+=("$(( (ra - rb) * 1000000 / hz ))")
done

printf '| case (%s conns, %ss, %s runs) | RPS | router CPU µs/request |\n|---|---|---|\n' "$CONNS" "$SECONDS_PER_CASE" "$RUNS"
for r in "${solo_results[@]}"; do printf '| one node, no [cluster] | %s | %s |\n' $r; done
for r in "${cluster_results[@]}"; do printf '| [cluster], lease_size %s, 3 nodes | %s | %s |\n' "$LEASE_SIZE" $r; done
printf 'Redis CPU per cluster run (µs): %s\n' "${redis_cpu[*]}"

# Propagation: a 429 on A for model p-i, once; B learns it from the stream.
for i in $(seq "$TRIALS"); do
    curl -sf -X POST "http://127.0.0.1:$MOCK_PORT/mock/rules" -H 'content-type: application/json' \
        -d "[{\"key\":\"$(pool_key 1)\",\"model\":\"p-$i\",\"fault\":{\"status429\":{\"reset\":{\"retry_after_seconds\":60}}},\"times\":1}]" >/dev/null
    curl -sf "http://127.0.0.1:$A_PORT/v1/chat/completions" -H 'authorization: Bearer sk-bench' \
        -H 'content-type: application/json' -d "{\"model\":\"openai/p-$i\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}" >/dev/null
    sleep 0.02
done
sleep 0.5
curl -sf -H "authorization: Bearer $ADMIN" "http://127.0.0.1:$B_PORT/admin/journal?since_seq=0&limit=10000000" \
  | python3 -c '
import json, sys
lags = sorted(e["at_ms"] - e["origin_at_ms"] for e in map(json.loads, sys.stdin)
              if e["kind"] == "peer_applied" and e.get("event_kind") == "model_locked" and e.get("model", "").startswith("p-"))
if not lags: sys.exit("no peer_applied locks on B")
pct = lambda p: lags[min(len(lags) - 1, len(lags) * p // 100)]
print(f"429 on A → lock journaled on B ({len(lags)} trials, ms): p50 {pct(50)}, p99 {pct(99)}, max {lags[-1]}")
'
