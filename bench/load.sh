#!/usr/bin/env bash
# Load benchmark: the same mock upstream reached directly, through quotaroute, and through
# nginx (when installed: `apt-get install -y nginx`) with a worker per core, as many threads as
# the router's runtime uses, as the bare-proxy reference; non-streaming and streaming; 1 and 64
# connections. Prints a markdown table: RPS, p50, p99, time to first byte, router CPU µs per
# request and peak RSS; the ratios docs/measurements.md reports come from ../shared/bench/vs-nginx.sh. Bounded: SECONDS per case (default 5).
# REQUEST_EVENTS=failures runs the router with `journal.request_events = "failures"`.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_PER_CASE="${SECONDS_PER_CASE:-5}"
MOCK_PORT=4201; ROUTER_PORT=4203; NGINX_PORT=4202
work="$(mktemp -d)"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT

cargo build --release --quiet --bin quotaroute --example loadgen
bin=target/release/quotaroute
load=target/release/examples/loadgen

source bench/pool.sh
start_mock
start_router sk-bench

have_nginx=0
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
      proxy_buffering off;
    }
  }
}
NGINX
  nginx -p "$work/nginx" -c "$work/nginx/nginx.conf" & pids+=($!)
  sleep 0.5
  have_nginx=1
fi

cpu_ticks() { awk '{print $14+$15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)

printf '| target | mode | conns | RPS | p50 µs | p99 µs | first byte p50 µs | router CPU µs/req |\n'
printf '|---|---|---|---|---|---|---|---|\n'
declare -A p50 ttfb rps
for mode in json stream; do
  for conns in 1 64; do
    for target in direct quotaroute nginx; do
      case $target in
        direct) url="http://127.0.0.1:$MOCK_PORT/v1/chat/completions"; model=gpt-4o-mini; key="$(pool_key 1)" ;;
        quotaroute) url="http://127.0.0.1:$ROUTER_PORT/v1/chat/completions"; model=team; key=sk-bench ;;
        nginx) [ "$have_nginx" = 1 ] || continue
               url="http://127.0.0.1:$NGINX_PORT/v1/chat/completions"; model=gpt-4o-mini; key="$(pool_key 1)" ;;
      esac
      stream_arg=""; [ "$mode" = stream ] && stream_arg=stream || stream_arg=json
      before=$(cpu_ticks "$router")
      out=$("$load" "$url" "$model" "$conns" "$SECONDS_PER_CASE" "$stream_arg" "$key")
      after=$(cpu_ticks "$router")
      r=$(echo "$out" | sed -E 's/.*"rps":([0-9.]+).*/\1/'); req=$(echo "$out" | sed -E 's/.*"requests":([0-9]+).*/\1/')
      a=$(echo "$out" | sed -E 's/.*"p50_us":([0-9.]+).*/\1/'); b=$(echo "$out" | sed -E 's/.*"p99_us":([0-9.]+).*/\1/')
      t=$(echo "$out" | sed -E 's/.*"ttfb_p50_us":([0-9.]+).*/\1/')
      cpu="-"
      if [ "$target" = quotaroute ] && [ "$req" -gt 0 ]; then
        cpu=$(( (after - before) * 1000000 / hz / req ))
      fi
      p50[$target,$mode,$conns]=$a; ttfb[$target,$mode,$conns]=$t; rps[$target,$mode,$conns]=$r
      printf '| %s | %s | %s | %s | %s | %s | %s | %s |\n' "$target" "$mode" "$conns" "$r" "$a" "$b" "$t" "$cpu"
    done
  done
done
rss_kb=$(awk '/VmHWM/ {print $2}' "/proc/$router/status")
echo
echo "router peak RSS: $((rss_kb / 1024)) MB"
echo "added p50 at 1 connection (json): $(( ${p50[quotaroute,json,1]%.*} - ${p50[direct,json,1]%.*} )) µs"
echo "added time to first byte at 1 connection (stream): $(( ${ttfb[quotaroute,stream,1]%.*} - ${ttfb[direct,stream,1]%.*} )) µs"
if [ "$have_nginx" = 1 ]; then
  for mode in json stream; do
    echo "RPS quotaroute / nginx at 64 connections ($mode): $(awk "BEGIN {printf \"%.2f\", ${rps[quotaroute,$mode,64]} / ${rps[nginx,$mode,64]}}")"
  done
fi
