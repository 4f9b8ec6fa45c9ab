#!/usr/bin/env bash
# nginx and quotaroute side by side, read in pairs: both run at once in front of one shared bench
# mock, and short windows of ../shared/bench/vs-nginx.sh's load alternate between them (wrk -t2
# -c64, the shared body and key; MODE=stream for the streaming body). Each pair's ratios are
# taken from two windows seconds apart, so a drift of the host's speed (this VM's varies by
# ±20 % over seconds, the mock's CPU per request moving with it) moves both sides of a pair
# alike. Prints every window, then each pair's RPS and CPU-per-request ratios and their medians.
# vs-nginx.sh runs the two minutes apart, so its ratio carries that drift.
# A reading, not a target: it exits 0.
# Run from the project root:   bench/paired.sh          (about a minute)
#   knobs: WINDOWS=10, SECONDS_OF_LOAD=3, MODE=nonstream|stream, QR_BINARY=path (that build),
#          QR_CONFIG=path (default ../shared/bench/quotaroute-bench.toml),
#          MOCK_PORT / ROUTER_PORT / NGINX_PORT (18180 / 18183 / 18184)
# Needs nginx and wrk; builds the shared mock like ../shared/bench does.
set -euo pipefail
root=$(pwd)
bench=$(cd "$root/../shared/bench" && pwd)
for tool in nginx wrk; do
  command -v "$tool" >/dev/null || { echo "needs $tool: apt-get install -y nginx wrk"; exit 2; }
done
mock_port=${MOCK_PORT:-18180}
router_port=${ROUTER_PORT:-18183}
nginx_port=${NGINX_PORT:-18184}
secs=${SECONDS_OF_LOAD:-3}
body=$bench/bodies/chat-small.json
[ "${MODE:-nonstream}" = stream ] && body=$bench/bodies/chat-small-stream.json
source "$root/bench/bench-node.sh"
release_binary
build_bench_mock
work=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"' EXIT
MOCK_ADDR=127.0.0.1:$mock_port MOCK_STREAM_CHUNKS=20 "$mock_dir/release/mock-upstream" >/dev/null 2>&1 &
pids+=($!)
mock=$!
key=$(sed -n 's/^api_keys = \["\(.*\)"\]/\1/p' "$bench/quotaroute-bench.toml")
export BODY_FILE=$body API_KEY=$key

load() { # PORT SECONDS -> wrk's output
  wrk -t2 -c64 -d"$2s" --timeout 10s -s "$bench/wrk/post.lua" "http://127.0.0.1:$1/v1/chat/completions"
}

mkdir -p "$work/nginx/tmp"
sed -e "s/@MOCK_PORT@/$mock_port/g" -e "s/@NGINX_PORT@/$nginx_port/g" -e "s/@NGINX_WORKERS@/$(nproc)/g" \
  "$bench/peers/nginx.conf.tmpl" >"$work/nginx/nginx.conf"
sed -e "s|JOURNAL_DIR|$work/journal|" -e "s/127.0.0.1:18183/127.0.0.1:$router_port/" \
  -e "s|127.0.0.1:18180|127.0.0.1:$mock_port|" "${QR_CONFIG:-$bench/quotaroute-bench.toml}" >"$work/qr.toml"
nginx -p "$work/nginx/" -c nginx.conf -e error.log >/dev/null 2>&1 &
nginx_pid=$!
pids+=("$nginx_pid")
"$bin" serve --config "$work/qr.toml" >"$work/node.log" 2>&1 &
node=$!
pids+=("$node")
wait_up "$nginx_port"
wait_up "$router_port"
nginx_all="$nginx_pid $(pgrep -P "$nginx_pid" | tr '\n' ' ')"
for port in "$router_port" "$nginx_port"; do load "$port" 2 >/dev/null; done
: >"$work/windows"
for window in $(seq 1 "${WINDOWS:-10}"); do
  for side in quotaroute nginx; do
    if [ "$side" = quotaroute ]; then port=$router_port proxy="$node"; else port=$nginx_port proxy="$nginx_all"; fi
    # shellcheck disable=SC2086 # the proxy's PIDs, split on purpose
    read -r user system < <(ticks $proxy)
    before=$((user + system))
    load "$port" "$secs" >"$work/wrk.txt"
    # shellcheck disable=SC2086
    read -r user system < <(ticks $proxy)
    after=$((user + system))
    echo "$window $side $(grep -o '"requests":[0-9]*' "$work/wrk.txt" | cut -d: -f2) \
$(grep -o '"duration_us":[0-9]*' "$work/wrk.txt" | cut -d: -f2) $((after - before))" >>"$work/windows"
  done
done
python3 - "$work/windows" "$(getconf CLK_TCK)" "${MODE:-nonstream}" <<'PY'
import statistics, sys
path, tck, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
read = {}
for line in open(path):
    window, side, requests, duration_us, ticks = line.split()
    requests = int(requests)
    read[(int(window), side)] = (requests / (int(duration_us) / 1e6), int(ticks) / tck * 1e6 / requests)
windows = sorted({w for w, _ in read})
print(f"{mode}, {len(windows)} pairs of windows")
print("| window | quotaroute req/s | its µs per request | nginx req/s | its µs | RPS ratio | CPU ratio |")
print("|---:|---:|---:|---:|---:|---:|---:|")
rps, cpu = [], []
for w in windows:
    (qr, qc), (nr, nc) = read[(w, "quotaroute")], read[(w, "nginx")]
    rps.append(qr / nr)
    cpu.append(qc / nc)
    print(f"| {w} | {qr:,.0f} | {qc:.1f} | {nr:,.0f} | {nc:.1f} | {qr / nr:.2f} | {qc / nc:.2f} |")
med = statistics.median
print(f"median of the pairs: RPS quotaroute/nginx = {med(rps):.2f}, CPU per request = {med(cpu):.2f}x "
      f"(quotaroute {med(read[(w, 'quotaroute')][1] for w in windows):.1f} µs, "
      f"nginx {med(read[(w, 'nginx')][1] for w in windows):.1f} µs)")
PY
