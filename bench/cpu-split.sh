#!/usr/bin/env bash
# Where the CPU of a non-streaming request goes between user space and the kernel, and how
# often the machine's threads sleep and wake per request: nginx, quotaroute and (FLOOR=1) the
# contract's floor (examples/http_floor, `contract`), one after another in front of the same
# shared bench mock, under the load of ../shared/bench/vs-nginx.sh's `nonstream` mode
# (wrk -t2 -c64, the shared body and key). Prints per request, for each proxy:
#   - its user and system CPU (µs, /proc/PID/task/*/stat), and the mock's behind it;
#   - system-wide while it runs (perf stat -a): wake-ups (sched:sched_waking), context
#     switches (sched:sched_switch) and reschedule interrupts (one CPU asking the other to run
#     a woken thread).
# A proxy that is the bottleneck leaves wrk and the mock waiting, so each of its writes wakes
# a sleeping peer, and that wake-up is paid inside its own `writev`: the kernel share of its
# CPU grows as its throughput falls. Counts and a split, not a target: it exits 0.
# Run from the project root:   bench/cpu-split.sh        (about a minute)
#   knobs: SECONDS_OF_LOAD=8, ROUNDS=1, FLOOR=1, QR_BINARY=path (that build),
#          MOCK_PORT / ROUTER_PORT / NGINX_PORT (18180 / 18183 / 18184)
# Needs nginx, wrk and perf (linux-perf); builds the shared mock like ../shared/bench does.
set -euo pipefail
root=$(pwd)
bench=$(cd "$root/../shared/bench" && pwd)
for tool in nginx wrk perf; do
  command -v "$tool" >/dev/null || { echo "needs $tool: apt-get install -y nginx wrk linux-perf"; exit 2; }
done
mock_port=${MOCK_PORT:-18180}
router_port=${ROUTER_PORT:-18183}
nginx_port=${NGINX_PORT:-18184}
secs=${SECONDS_OF_LOAD:-8}
source "$root/bench/bench-node.sh"
release_binary
with_bench_mock "$mock_port"
key=$(bench_key)
export BODY_FILE=$bench/bodies/chat-small.json API_KEY=$key

# measure NAME PORT PID...: a warm-up, then the counted load
measure() {
  local name=$1 port=$2
  shift 2
  local url=http://127.0.0.1:$port/v1/chat/completions
  wait_up "$port"
  wrk -t2 -c64 -d2s -s "$bench/wrk/post.lua" "$url" >/dev/null
  read -r u0 s0 < <(ticks "$@")
  read -r mu0 ms0 < <(ticks "$mock")
  perf stat -a -x, -o "$work/$name.perf" \
    -e sched:sched_waking,sched:sched_switch,irq_vectors:reschedule_entry \
    -- wrk -t2 -c64 -d"${secs}s" -s "$bench/wrk/post.lua" "$url" >"$work/$name.wrk" 2>/dev/null
  read -r u1 s1 < <(ticks "$@")
  read -r mu1 ms1 < <(ticks "$mock")
  python3 - "$name" "$work/$name.wrk" "$work/$name.perf" "$(getconf CLK_TCK)" \
    "$u0" "$s0" "$u1" "$s1" "$mu0" "$ms0" "$mu1" "$ms1" <<'PY'
import re, sys
name, wrk, perf, tck = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
u0, s0, u1, s1, mu0, ms0, mu1, ms1 = map(int, sys.argv[5:13])
requests = int(re.search(r'"requests":(\d+)', open(wrk).read()).group(1))
seconds = int(re.search(r'"duration_us":(\d+)', open(wrk).read()).group(1)) / 1e6
counts = {}
for line in open(perf):
    fields = line.strip().split(',')
    if len(fields) > 2 and fields[0].replace('.', '').isdigit():
        counts[fields[2]] = float(fields[0])
us = lambda ticks: ticks / tck * 1e6 / requests
per = lambda event: counts.get(event, 0) / requests
print(f"| {name} | {requests / seconds:,.0f} | {us(u1 - u0):.1f} | {us(s1 - s0):.1f} | "
      f"{us(mu1 - mu0 + ms1 - ms0):.1f} | {per('sched:sched_waking'):.2f} | "
      f"{per('sched:sched_switch'):.2f} | {per('irq_vectors:reschedule_entry'):.2f} |")
PY
}

mkdir -p "$work/nginx/tmp"
sed -e "s/@MOCK_PORT@/$mock_port/g" -e "s/@NGINX_PORT@/$nginx_port/g" -e "s/@NGINX_WORKERS@/$(nproc)/g" \
  "$bench/peers/nginx.conf.tmpl" >"$work/nginx/nginx.conf"
sed -e "s|JOURNAL_DIR|$work/journal|" -e "s/127.0.0.1:18183/127.0.0.1:$router_port/" \
  -e "s|127.0.0.1:18180|127.0.0.1:$mock_port|" "$bench/quotaroute-bench.toml" >"$work/qr.toml"
if [ "${FLOOR:-0}" = 1 ]; then
  cargo build --release --example http_floor -q
fi
echo "| proxy | requests/s | user µs | system µs | mock µs | wake-ups | switches | resched IPIs |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|"
for _ in $(seq 1 "${ROUNDS:-1}"); do
  nginx -p "$work/nginx/" -c nginx.conf -e error.log >/dev/null 2>&1 &
  proxy=$!
  pids+=("$proxy")
  sleep 0.5
  measure nginx "$nginx_port" "$proxy" $(pgrep -P "$proxy")
  kill "$proxy"
  wait "$proxy" 2>/dev/null || true
  rm -rf "$work/journal"
  "$bin" serve --config "$work/qr.toml" >"$work/node.log" 2>&1 &
  proxy=$!
  pids+=("$proxy")
  measure quotaroute "$router_port" "$proxy"
  kill "$proxy"
  wait "$proxy" 2>/dev/null || true
  if [ "${FLOOR:-0}" = 1 ]; then
    rm -rf "$work/floor-journal"
    "${CARGO_TARGET_DIR:-$root/target}/release/examples/http_floor" "127.0.0.1:$router_port" \
      "http://127.0.0.1:$mock_port" contract "$work/floor-journal" >"$work/floor.log" 2>&1 &
    proxy=$!
    pids+=("$proxy")
    measure "contract floor" "$router_port" "$proxy"
    kill "$proxy"
    wait "$proxy" 2>/dev/null || true
  fi
done
