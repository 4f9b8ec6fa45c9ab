#!/usr/bin/env bash
# What translation costs (issue 37, behaviour §14): the same Chat Completions client load sent
# through one router to a same-format combo (OpenAI-format mock account: the byte-preserving
# splice) and to a translated one (Anthropic-format mock account: chat>messages up, the answer
# back), alternating in one run, non-streaming; nginx in front of the same mock (same-format) as
# the bare-proxy reference when installed. Prints router CPU µs per request and RPS for each,
# per repetition, then the medians and the translated / same-format CPU ratio.
# Bounded: REPS x 2 cases x SECONDS_PER_CASE seconds of load (defaults 3 x 2 x 5 s).
#   bench/translate-cost.sh                       # from the project root
#   CONNS=16 REPS=5 SECONDS_PER_CASE=4 bench/translate-cost.sh
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_PER_CASE="${SECONDS_PER_CASE:-5}"
REPS="${REPS:-3}"
CONNS="${CONNS:-32}"
MOCK_PORT=4211; ROUTER_PORT=4213; NGINX_PORT=4212
work="$(mktemp -d)"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT

cargo build --release --quiet --bin quotaroute --example loadgen
bin=target/release/quotaroute
load=target/release/examples/loadgen
key_oa="sk-mock-cost-oa-0123456789"
key_an="sk-mock-cost-an-0123456789"

"$bin" mock-upstream --listen "127.0.0.1:$MOCK_PORT" 2>/dev/null & pids+=($!)
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$MOCK_PORT/mock/stats" >/dev/null && break; sleep 0.1; done
for key in "$key_oa" "$key_an"; do
  curl -sf -X POST "http://127.0.0.1:$MOCK_PORT/mock/budgets" -H 'content-type: application/json' \
    -d "{\"key\":\"$key\",\"requests_limit\":1000000000000,\"tokens_limit\":1000000000000000}"
done

cat > "$work/quotaroute.toml" <<TOML
[server]
listen = "127.0.0.1:$ROUTER_PORT"
api_keys = ["sk-bench"]
[journal]
path = "$work/journal"
[[providers]]
name = "openai"
format = "openai"
base_url = "http://127.0.0.1:$MOCK_PORT/v1"
[[providers]]
name = "anthropic"
format = "anthropic"
base_url = "http://127.0.0.1:$MOCK_PORT/v1"
[[connections]]
id = "oa"
provider = "openai"
api_key = "$key_oa"
[[connections]]
id = "an"
provider = "anthropic"
api_key = "$key_an"
[[combos]]
name = "same"
targets = [{ connection = "oa", model = "gpt-4o-mini" }]
[[combos]]
name = "translated"
targets = [{ connection = "an", model = "claude-3-5-haiku" }]
TOML
RUST_LOG=warn "$bin" serve --config "$work/quotaroute.toml" 2>"$work/router.log" & router=$!; pids+=($router)
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$ROUTER_PORT/healthz" >/dev/null && break; sleep 0.1; done

nginx_pid=""
if command -v nginx >/dev/null; then
  mkdir -p "$work/nginx/logs"
  cat > "$work/nginx/nginx.conf" <<NGINX
worker_processes $(nproc);
daemon off;
error_log $work/nginx/logs/error.log warn;
pid $work/nginx/nginx.pid;
events { worker_connections 4096; }
http {
  access_log off;
  upstream mock { server 127.0.0.1:$MOCK_PORT; keepalive 128; }
  server {
    listen 127.0.0.1:$NGINX_PORT;
    location / {
      proxy_pass http://mock;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Authorization "Bearer $key_oa";
      proxy_buffering off;
    }
  }
}
NGINX
  nginx -p "$work/nginx" -c "$work/nginx/nginx.conf" & nginx_pid=$!; pids+=($nginx_pid)
  sleep 0.5
fi

hz=$(getconf CLK_TCK)
# CPU ticks (user + system) of a PID and its children threads/processes.
ticks() {
  local total=0 p
  for p in "$1" $(ps -o pid= --ppid "$1" 2>/dev/null); do
    total=$(( total + $(awk '{print $14+$15}' "/proc/$p/stat" 2>/dev/null || echo 0) ))
  done
  echo "$total"
}
# run TARGET_PID URL MODEL -> "requests errors rps cpu_us_per_request"
run() {
  local before after out req err rps
  before=$(ticks "$1")
  out=$("$load" "$2" "$3" "$CONNS" "$SECONDS_PER_CASE" json sk-bench)
  after=$(ticks "$1")
  req=$(echo "$out" | sed -E 's/.*"requests":([0-9]+).*/\1/')
  err=$(echo "$out" | sed -E 's/.*"errors":([0-9]+).*/\1/')
  rps=$(echo "$out" | sed -E 's/.*"rps":([0-9]+).*/\1/')
  echo "$req $err $rps $(( (after - before) * 1000000 / hz / (req > 0 ? req : 1) ))"
}

# Warm-up: both paths once.
"$load" "http://127.0.0.1:$ROUTER_PORT/v1/chat/completions" same 4 1 json sk-bench >/dev/null
"$load" "http://127.0.0.1:$ROUTER_PORT/v1/chat/completions" translated 4 1 json sk-bench >/dev/null

printf '| rep | case | requests | errors | RPS | CPU µs/req |\n|---|---|---|---|---|---|\n'
same_cpu=(); tr_cpu=(); same_rps=(); tr_rps=(); ng_cpu=(); ng_rps=()
for rep in $(seq "$REPS"); do
  read -r req err rps cpu < <(run "$router" "http://127.0.0.1:$ROUTER_PORT/v1/chat/completions" same)
  printf '| %s | quotaroute same-format | %s | %s | %s | %s |\n' "$rep" "$req" "$err" "$rps" "$cpu"
  same_cpu+=("$cpu"); same_rps+=("$rps")
  read -r req err rps cpu < <(run "$router" "http://127.0.0.1:$ROUTER_PORT/v1/chat/completions" translated)
  printf '| %s | quotaroute translated (chat>messages) | %s | %s | %s | %s |\n' "$rep" "$req" "$err" "$rps" "$cpu"
  tr_cpu+=("$cpu"); tr_rps+=("$rps")
  if [ -n "$nginx_pid" ]; then
    read -r req err rps cpu < <(run "$nginx_pid" "http://127.0.0.1:$NGINX_PORT/v1/chat/completions" gpt-4o-mini)
    printf '| %s | nginx same-format | %s | %s | %s | %s |\n' "$rep" "$req" "$err" "$rps" "$cpu"
    ng_cpu+=("$cpu"); ng_rps+=("$rps")
  fi
done
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
s=$(median "${same_cpu[@]}"); t=$(median "${tr_cpu[@]}")
echo
echo "median router CPU per request: same-format $s µs, translated $t µs, ratio $(awk "BEGIN {printf \"%.2f\", $t / $s}")"
echo "median RPS: same-format $(median "${same_rps[@]}"), translated $(median "${tr_rps[@]}")"
if [ -n "$nginx_pid" ]; then
  echo "nginx (same-format): median CPU per request $(median "${ng_cpu[@]}") µs, RPS $(median "${ng_rps[@]}")"
fi
