#!/usr/bin/env bash
# What translation costs over every pair the hub serves (issue 55, behaviour §14): each client
# API (chat, responses, messages, gemini) against each upstream API (an OpenAI chat account, an
# OpenAI account serving only /v1/responses, an Anthropic account, a Gemini account), JSON and
# streams, on one router in front of the project's mock upstream. Per pair it prints the
# router's cost per request and its ratio to the same client API's same-API pair (chat>chat,
# responses>responses, messages>messages, gemini>gemini) and to the same upstream API's
# (chat>anthropic beside messages>anthropic: the same upstream answer, read without
# translation); issue 55's bar is 15 % more CPU. The last column takes the dearer of the two:
# a translated request does the client API's side of one and the upstream API's side of the
# other, so only what it pays beyond both is translation's own cost.
#   bench/translate-pairs.sh                  # CPU µs per request (/proc utime + stime; the bar's own
#                                             # measure) and RPS,
#                                             # wrk, REPS rounds of every case, medians: noisy
#                                             # on a busy host
#   COUNT=instructions bench/translate-pairs.sh  # the router under callgrind: instructions per
#                                             # request of each case (counters zeroed before and
#                                             # dumped after each case): steady on a shared host
# Knobs: CASES="chat>chat chat>anthropic ..." (default all 16 pairs), MODES="json stream",
# SECONDS_PER_CASE (3; 4 under callgrind), REPS (3; 1 under callgrind), CONNS (8; 2 under
# callgrind), MOCK_PORT/ROUTER_PORT (4231/4233), QR_BINARY=path (that build; else the release
# build), KEEP_CALLGRIND=dir (keeps each case's callgrind file there, for callgrind_annotate).
# Needs wrk (and valgrind for COUNT=instructions). Run from the project root.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
count=${COUNT:-cpu}
if [ "$count" = instructions ]; then
  SECONDS_PER_CASE=${SECONDS_PER_CASE:-4}; REPS=${REPS:-1}; CONNS=${CONNS:-2}
else
  SECONDS_PER_CASE=${SECONDS_PER_CASE:-3}; REPS=${REPS:-3}; CONNS=${CONNS:-8}
fi
modes=${MODES:-"json stream"}
clients="chat responses messages gemini"
upstreams="chat responses anthropic gemini"
cases=${CASES:-}
if [ -z "$cases" ]; then
  for c in $clients; do for u in $upstreams; do cases="$cases $c>$u"; done; done
fi
MOCK_PORT=${MOCK_PORT:-4231}; ROUTER_PORT=${ROUTER_PORT:-4233}
work="$(mktemp -d)"; pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT

bin=${QR_BINARY:-}
if [ -z "$bin" ]; then
  cargo build --release --quiet --bin quotaroute
  bin=target/release/quotaroute
fi
"$bin" mock-upstream --listen "127.0.0.1:$MOCK_PORT" 2>/dev/null & pids+=($!)
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$MOCK_PORT/mock/stats" >/dev/null && break; sleep 0.1; done
key() { echo "sk-mock-pairs-$1-0123456789"; }
for u in $upstreams; do
  curl -sf -X POST "http://127.0.0.1:$MOCK_PORT/mock/budgets" -H 'content-type: application/json' \
    -d "{\"key\":\"$(key "$u")\",\"requests_limit\":1000000000000,\"tokens_limit\":1000000000000000}"
done

base="http://127.0.0.1:$MOCK_PORT"
cat >"$work/quotaroute.toml" <<TOML
[server]
listen = "127.0.0.1:$ROUTER_PORT"
api_keys = ["sk-bench"]
[journal]
path = "$work/journal"
[[providers]]
name = "oa-chat"
format = "openai"
apis = ["chat"]
base_url = "$base/v1"
[[providers]]
name = "oa-responses"
format = "openai"
apis = ["responses"]
base_url = "$base/v1"
[[providers]]
name = "anthropic"
format = "anthropic"
base_url = "$base/v1"
[[providers]]
name = "google"
format = "gemini"
base_url = "$base/v1beta"
[[connections]]
id = "chat"
provider = "oa-chat"
api_key = "$(key chat)"
[[connections]]
id = "responses"
provider = "oa-responses"
api_key = "$(key responses)"
[[connections]]
id = "anthropic"
provider = "anthropic"
api_key = "$(key anthropic)"
[[connections]]
id = "gemini"
provider = "google"
api_key = "$(key gemini)"
[[combos]]
name = "to-chat"
targets = [{ connection = "chat", model = "gpt-4o-mini" }]
[[combos]]
name = "to-responses"
targets = [{ connection = "responses", model = "gpt-4o-mini" }]
[[combos]]
name = "to-anthropic"
targets = [{ connection = "anthropic", model = "claude-3-5-haiku" }]
[[combos]]
name = "to-gemini"
targets = [{ connection = "gemini", model = "gemini-2.5-flash" }]
TOML

# The request of one case: "PATH" and its body in $work/body-CLIENT-UPSTREAM-MODE.json.
prompt="Say hello in one short sentence."
request() { # client upstream mode -> prints the path; writes the body file
  local c=$1 u=$2 mode=$3 combo="to-$2" stream=false file="$work/body-$1-$2-$3.json"
  [ "$mode" = stream ] && stream=true
  case $c in
    chat)
      printf '{"model":"%s","messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"%s"}],"max_tokens":64,"temperature":0,"stream":%s}' \
        "$combo" "$prompt" "$stream" >"$file"
      echo /v1/chat/completions ;;
    responses)
      printf '{"model":"%s","instructions":"You are a helpful assistant.","input":"%s","max_output_tokens":64,"temperature":0,"stream":%s}' \
        "$combo" "$prompt" "$stream" >"$file"
      echo /v1/responses ;;
    messages)
      printf '{"model":"%s","system":"You are a helpful assistant.","messages":[{"role":"user","content":"%s"}],"max_tokens":64,"temperature":0,"stream":%s}' \
        "$combo" "$prompt" "$stream" >"$file"
      echo /v1/messages ;;
    gemini)
      printf '{"systemInstruction":{"parts":[{"text":"You are a helpful assistant."}]},"contents":[{"role":"user","parts":[{"text":"%s"}]}],"generationConfig":{"maxOutputTokens":64,"temperature":0}}' \
        "$prompt" >"$file"
      if [ "$mode" = stream ]; then
        echo "/v1beta/models/$combo:streamGenerateContent?alt=sse&key=sk-bench"
      else
        echo "/v1beta/models/$combo:generateContent?key=sk-bench"
      fi ;;
  esac
}

if [ "$count" = instructions ]; then
  command -v valgrind >/dev/null || { echo "needs valgrind: apt-get install -y valgrind"; exit 2; }
  valgrind --tool=callgrind --fair-sched=yes --callgrind-out-file="$work/callgrind.out" \
    "$bin" serve --config "$work/quotaroute.toml" >"$work/router.log" 2>&1 & router=$!
  tries=600
else
  RUST_LOG=warn "$bin" serve --config "$work/quotaroute.toml" 2>"$work/router.log" & router=$!
  tries=100
fi
pids+=($router)
for _ in $(seq $tries); do curl -sf "http://127.0.0.1:$ROUTER_PORT/healthz" >/dev/null && break; sleep 0.2; done

# Every case answers 200 before any is measured (and warms each path once).
for mode in $modes; do
  for case in $cases; do
    path=$(request "${case%%>*}" "${case##*>}" "$mode")
    status=$(curl -s -o "$work/answer" -w '%{http_code}' -H 'Authorization: Bearer sk-bench' \
      -H 'content-type: application/json' --data @"$work/body-${case%%>*}-${case##*>}-$mode.json" \
      "http://127.0.0.1:$ROUTER_PORT$path")
    if [ "$status" != 200 ]; then
      echo "$case ($mode) answered $status: $(head -c 300 "$work/answer")"; exit 1
    fi
  done
done

hz=$(getconf CLK_TCK)
ticks() { awk '{print $14+$15}' "/proc/$router/stat"; }
load() { # path body -> requests
  BODY_FILE=$2 API_KEY=sk-bench wrk -t1 -c"$CONNS" -d"${SECONDS_PER_CASE}s" \
    -s ../shared/bench/wrk/post.lua "http://127.0.0.1:$ROUTER_PORT$1" >"$work/wrk.txt"
  local requests status
  requests=$(sed -n 's/^BENCH_JSON .*"requests":\([0-9]*\).*/\1/p' "$work/wrk.txt")
  status=$(sed -n 's/^BENCH_JSON .*"err_status":\([0-9]*\).*/\1/p' "$work/wrk.txt")
  [ "${status:-0}" = 0 ] || { echo "wrk: $status answers were not 2xx on $1" >&2; exit 1; }
  echo "$requests"
}
results=$work/results
: >"$results"
for rep in $(seq "$REPS"); do
  for mode in $modes; do
    for case in $cases; do
      c=${case%%>*}; u=${case##*>}
      path=$(request "$c" "$u" "$mode")
      body=$work/body-$c-$u-$mode.json
      if [ "$count" = instructions ]; then
        callgrind_control --zero "$router" >/dev/null 2>&1
        requests=$(load "$path" "$body")
        dump="case-$rep-$c-$u-$mode"
        callgrind_control --dump="$dump" "$router" >/dev/null 2>&1
        out=$(grep -l "^desc: Trigger: .* $dump\$" "$work"/callgrind.out* | head -n1)
        [ -n "${KEEP_CALLGRIND:-}" ] && cp "$out" "$KEEP_CALLGRIND/$dump.out"
        total=$(sed -n 's/^summary: \([0-9]*\).*/\1/p; s/^totals: \([0-9]*\).*/\1/p' "$out" | head -n1)
        echo "$mode $c $u $(( total / requests )) $requests" >>"$results"
      else
        t0=$(ticks)
        requests=$(load "$path" "$body")
        t1=$(ticks)
        # nanoseconds, printed as µs with one decimal (a clock tick is 10 ms: whole µs would round
        # a 35 µs case by up to 3 %)
        echo "$mode $c $u $(( (t1 - t0) * 1000000000 / hz / requests )) $(( requests / SECONDS_PER_CASE ))" >>"$results"
      fi
    done
  done
done

python3 - "$results" "$count" <<'PY'
import statistics, sys
path, count = sys.argv[1], sys.argv[2]
rows = {}
for line in open(path):
    mode, c, u, cost, rate = line.split()
    cost = int(cost) if count == "instructions" else int(cost) / 1000
    rows.setdefault((mode, c, u), []).append((cost, int(rate)))
unit = "instructions per request" if count == "instructions" else "router CPU µs per request"
rate_name = "requests measured" if count == "instructions" else "RPS"
same = {"chat": "chat", "responses": "responses", "messages": "anthropic", "gemini": "gemini"}
client_of = {upstream: client for client, upstream in same.items()}
def ratio_to(cost, base):
    return cost / statistics.median(v[0] for v in base) if base else None
print(f"| mode | client API > upstream API | {unit} (median) | {rate_name} | vs same-API (same client) | vs same-API (same upstream) | vs the dearer of the two |")
print("|---|---|---:|---:|---:|---:|---:|")
over, over_upstream, over_both = [], [], []
for (mode, c, u), values in rows.items():
    cost = statistics.median(v[0] for v in values)
    rate = statistics.median(v[1] for v in values)
    shown = f"{cost:,.0f}" if count == "instructions" else f"{cost:,.1f}"
    if u == same[c]:
        print(f"| {mode} | {c} > {u} | {shown} | {rate:,.0f} | (same API) | (same API) | (same API) |")
        continue
    by_client = ratio_to(cost, rows.get((mode, c, same[c])))
    by_upstream = ratio_to(cost, rows.get((mode, client_of[u], u)))
    known = [r for r in (by_client, by_upstream) if r is not None]
    by_both = min(known) if known else None
    cells = []
    for r, names in ((by_client, over), (by_upstream, over_upstream), (by_both, over_both)):
        cells.append("" if r is None else f"{100 * (r - 1):+.1f} %")
        if r is not None and r > 1.15:
            names.append(f"{c}>{u} ({mode})")
    print(f"| {mode} | {c} > {u} | {shown} | {rate:,.0f} | {cells[0]} | {cells[1]} | {cells[2]} |")
print()
print("above +15 % over the same client's same-API case: " + (", ".join(over) if over else "none"))
print("above +15 % over the same upstream's same-API case: " + (", ".join(over_upstream) if over_upstream else "none"))
print("above +15 % over the dearer of its two same-API cases: " + (", ".join(over_both) if over_both else "none"))
PY
