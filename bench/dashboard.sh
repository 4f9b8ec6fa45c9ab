#!/usr/bin/env bash
# What the dashboard's live update costs the node: the router at 64 connections (non-streaming,
# loadgen, the 2:1:1 pool of bench/pool.sh) with nobody subscribed, with one `GET /admin/events`
# subscriber (curl), with 32 (the most a node serves), and with the page itself open in headless
# chromium (when installed),
# interleaved REPS times, SECONDS each. Prints RPS and router CPU µs per request per case, then
# the medians. Bounded; loopback only.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_PER_CASE="${SECONDS_PER_CASE:-8}"
REPS="${REPS:-3}"
CASES="${CASES:-none sse sse32 page}"
MOCK_PORT=4211; ROUTER_PORT=4213
ADMIN_KEY="qr-bench-admin-$$"
work="$(mktemp -d)"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT

cargo build --release --quiet --bin quotaroute --example loadgen
bin=target/release/quotaroute
load=target/release/examples/loadgen
source bench/pool.sh
start_mock
start_router sk-bench "admin_key = \"$ADMIN_KEY\""

cpu_ticks() { awk '{print $14+$15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)
have_page=0
[ -x /usr/bin/chromium ] && [ -d tests/browser/node_modules/playwright-core ] && have_page=1

# A warm-up, so every case sees the same pools and caches.
"$load" "http://127.0.0.1:$ROUTER_PORT/v1/chat/completions" team 64 2 json sk-bench >/dev/null

printf '| case | rep | RPS | router CPU µs/req |\n|---|---|---|---|\n'
declare -A all_cpu all_rps
for rep in $(seq "$REPS"); do
  for case in $CASES; do
    watcher=""
    case $case in
      none) ;;
      sse)
        curl -sN -H "Authorization: Bearer $ADMIN_KEY" "http://127.0.0.1:$ROUTER_PORT/admin/events" \
          --max-time $((SECONDS_PER_CASE + 10)) > "$work/events.txt" & watcher=$!
        sleep 1 ;;
      sse32)
        # The most subscribers a node serves: their cost, divided by 32, is one subscriber's.
        watcher=""
        for n in $(seq 32); do
          curl -sN -H "Authorization: Bearer $ADMIN_KEY" "http://127.0.0.1:$ROUTER_PORT/admin/events" \
            --max-time $((SECONDS_PER_CASE + 10)) > "$work/events-$n.txt" & watcher="$watcher $!"
        done
        sleep 1 ;;
      page)
        [ "$have_page" = 1 ] || continue
        QR_NODE="http://127.0.0.1:$ROUTER_PORT" QR_ADMIN_KEY="$ADMIN_KEY" QR_SECONDS=$((SECONDS_PER_CASE + 4)) \
          timeout $((SECONDS_PER_CASE + 40)) node tests/browser/hold-dashboard.mjs > "$work/page.txt" 2>"$work/page.err" & watcher=$!
        for _ in $(seq 300); do grep -q 'dashboard open' "$work/page.err" 2>/dev/null && break; sleep 0.1; done
        sleep 1 ;;
    esac
    before=$(cpu_ticks "$router")
    out=$("$load" "http://127.0.0.1:$ROUTER_PORT/v1/chat/completions" team 64 "$SECONDS_PER_CASE" json sk-bench)
    after=$(cpu_ticks "$router")
    for w in $watcher; do kill "$w" 2>/dev/null || true; wait "$w" 2>/dev/null || true; done
    r=$(echo "$out" | sed -E 's/.*"rps":([0-9.]+).*/\1/'); req=$(echo "$out" | sed -E 's/.*"requests":([0-9]+).*/\1/')
    cpu=$(awk "BEGIN {printf \"%.1f\", ($after - $before) * 1000000 / $hz / $req}")
    if [ "$case" = sse32 ]; then
      states=$(cat "$work"/events-*.txt | grep -c '^event: state' || true)
      case="sse32 ($states state events in all)"
    fi
    if [ "$case" = sse ]; then
      states=$(grep -c '^event: state' "$work/events.txt" || true)
      traffic=$(grep -c '^event: traffic' "$work/events.txt" || true)
      case="sse ($states state, $traffic traffic events)"
    fi
    printf '| %s | %s | %s | %s |\n' "$case" "$rep" "$r" "$cpu"
    key=${case%% *}
    all_cpu[$key]="${all_cpu[$key]:-} $cpu"; all_rps[$key]="${all_rps[$key]:-} $r"
    sleep 1
  done
done
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
echo
for key in $CASES; do
  [ -n "${all_cpu[$key]:-}" ] || continue
  echo "$key: median RPS $(echo "${all_rps[$key]}" | median), median router CPU $(echo "${all_cpu[$key]}" | median) µs/request"
done
