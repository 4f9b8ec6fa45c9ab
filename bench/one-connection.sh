#!/usr/bin/env bash
# A counted guard for one connection (issue 24): the release node on the shared bench mock
# (bench/profile.sh's setup, no valgrind) serves N sequential requests on ONE keep-alive
# connection, and this prints per request
#   - the node's context switches (voluntary = wake-ups after blocking, involuntary =
#     preempted), summed over all its threads from /proc/PID/task/*/status, in a run without
#     strace (strace itself would add switches);
#   - its syscalls by kind (strace -c -f -p: every thread), in a second run.
# Both without `[telemetry]` and with it (sample_ratio 1.0, exporting to a local sink that
# answers 200, as bench/telemetry.sh), and each on one tokio worker (TOKIO_WORKER_THREADS=1:
# no worker wakes another, so the counts are the request's own and barely move between runs)
# and on the default runtime (a worker per core: the counts include the workers waking each
# other, which depends on timing and moves with the machine's load, so its budgets are loose).
# Counts, not times. It exits 1 when a count passes its budget (below).
# Run from the project root:   bench/one-connection.sh      (about a minute)
#   knobs: N=500 (requests per run), MODES="plain telemetry", WORKERS="1 default",
#          QR_BINARY=path (that build), BUDGET=0 (report only),
#          NGINX=1 (also nginx in front of the same mock, one worker per core as
#          ../shared/bench runs it: its processes' context switches and syscalls per request
#          and the mock's behind it, the same counts beside the router's; no budget)
# Needs strace and python3; builds the shared mock like ../shared/bench does.
set -euo pipefail
root=$(pwd)
bench=$(cd "$root/../shared/bench" && pwd)
command -v strace >/dev/null || { echo "needs strace: apt-get install -y strace"; exit 2; }
n=${N:-500}
modes=${MODES:-"plain telemetry"}
workers_list=${WORKERS:-"1 default"}
source "$root/bench/bench-node.sh"
release_binary
build_bench_mock
work=$(mktemp -d)
pids=()
node=""
cleanup() {
  for p in "${pids[@]}" $node; do kill "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

# Budgets per request, "mode/workers:what=max": syscalls of all kinds together; switches are
# the node's voluntary + involuntary ones. Runs on 2026-12-02 (N=300, 2 cores shared with
# builds), one worker: plain 6.4 syscalls and 2.2 switches, telemetry 6.8 and 2.9 (one wake-up
# more per request would add ~2 syscalls and 1 switch). The default runtime's counts moved
# 12.6–21 syscalls and 4.3–8.1 switches between runs of the same build: a wide net only.
# Since the connection task's own wake-ups are repolled in place (`node::self_wake`, issue 55,
# 2026-12-05) the default runtime counts what one worker does: 6.9 syscalls, 2.1–2.7 switches
# and 1.2–1.8 voluntary switches of the workers (4.35, 9.6 syscalls before; the issue's bar is
# 2.5 voluntary switches of the workers), so its budgets are the same "workers" one and a
# little more room for the involuntary switches a busy machine adds.
budgets="plain/1:syscalls=8 plain/1:switches=3.5 telemetry/1:syscalls=8 telemetry/1:switches=3.8
  plain/1:workers=2.5 telemetry/1:workers=2.5
  plain/default:syscalls=10 plain/default:switches=4.5 plain/default:workers=2.5
  telemetry/default:syscalls=10 telemetry/default:switches=4.5 telemetry/default:workers=2.5"
[ "${BUDGET:-1}" = 0 ] && budgets=""

start_bench_mock
python3 "$root/bench/otlp-sink.py" 14318 >/dev/null 2>&1 &
pids+=($!)
key=$(bench_key)
body=$bench/bodies/chat-small.json

# N sequential POSTs on one keep-alive connection; fails on any answer but 200.
client() { python3 "$root/bench/sequential-client.py" "$1" "$key" "$body"; }

# The node's context switches so far, all threads, and its minor page faults (kernel work
# that no syscall count shows), and the voluntary ones of the tokio workers alone (issue 55's
# measure: the journal writer's and sled's threads are the rest): "voluntary involuntary
# faults workers".
switches() {
  local faults
  faults=$(awk '{print $10}' /proc/"$1"/stat)
  cat /proc/"$1"/task/*/status 2>/dev/null | awk -v faults="$faults" '
    /^Name:/ {worker = ($2 == "tokio-rt-worker")}
    /^voluntary_ctxt_switches/ {v += $2; if (worker) w += $2}
    /^nonvoluntary_ctxt_switches/ {i += $2}
    END {print v, i, faults, w + 0}'
}

start_node() {
  rm -rf "$work/journal-$1"
  sed "s|JOURNAL_DIR|$work/journal-$1|" "$bench/quotaroute-bench.toml" >"$work/qr-$1.toml"
  if [ "$1" = telemetry ]; then
    printf '\n[telemetry]\notlp_endpoint = "http://127.0.0.1:14318"\nservice_name = "quotaroute-one-connection"\nsample_ratio = 1.0\n' >>"$work/qr-$1.toml"
  fi
  if [ "$workers" = default ]; then
    env -u TOKIO_WORKER_THREADS "$bin" serve --config "$work/qr-$1.toml" >"$work/node-$1.log" 2>&1 &
  else
    TOKIO_WORKER_THREADS=$workers "$bin" serve --config "$work/qr-$1.toml" >"$work/node-$1.log" 2>&1 &
  fi
  node=$!
  for _ in $(seq 1 100); do
    curl -sf -o /dev/null -H "Authorization: Bearer $key" -H 'content-type: application/json' \
      --data @"$body" http://127.0.0.1:18183/v1/chat/completions && break
    sleep 0.1
  done
  client 50 # warm: pools, connections, lazily built state
}

stop_node() {
  kill -TERM "$node"
  wait "$node" 2>/dev/null || true
  node=""
}

# Syscalls per request from an `strace -c` summary: the total, then by kind.
summarize() {
  python3 - "$1" "$n" <<'PY'
import re, sys
path, n = sys.argv[1], int(sys.argv[2])
# Several summaries may be concatenated (one per traced process): sum each syscall's rows.
by_name, total = {}, 0
for line in open(path):
    fields = line.split()
    # % time, seconds, usecs/call, calls, [errors], syscall
    if len(fields) >= 5 and re.fullmatch(r"[\d.]+", fields[0]) and fields[-1] != "total":
        calls = int(fields[3])
        errors = int(fields[4]) if len(fields) == 6 else 0
        seen = by_name.get(fields[-1], (0, 0))
        by_name[fields[-1]] = (seen[0] + calls, seen[1] + errors)
        total += calls
rows = [(calls, errors, name) for name, (calls, errors) in by_name.items()]
print(f"{total / n:.2f}")
for calls, errors, name in sorted(rows, reverse=True):
    if calls / n >= 0.01:
        note = f" ({errors / n:.2f} failed)" if errors else ""
        print(f"  {calls / n:8.2f}  {name}{note}")
PY
}

fail=0
check() { # mode what value
  for budget in $budgets; do
    [ "${budget%%=*}" = "$1:$2" ] || continue
    limit=${budget#*=}
    if python3 -c "import sys; sys.exit(0 if $3 <= $limit else 1)"; then
      echo "within budget: $1 $2 per request $3 <= $limit"
    else
      echo "OVER BUDGET: $1 $2 per request $3 > $limit"
      fail=1
    fi
  done
}

for mode in $modes; do
for workers in $workers_list; do
  echo "== $mode, tokio workers: $workers; $n sequential requests on one connection"
  # Run 1: context switches, no tracer attached.
  start_node "$mode"
  read -r v0 i0 f0 w0 < <(switches "$node")
  read -r mv0 mi0 _ _ < <(switches "$mock")
  client "$n"
  read -r v1 i1 f1 w1 < <(switches "$node")
  read -r mv1 mi1 _ _ < <(switches "$mock")
  sleep 1
  read -r v2 i2 _ _ < <(switches "$node")
  stop_node
  per=$(python3 -c "print(f'{($v1 - $v0 + $i1 - $i0) / $n:.2f}')")
  echo "context switches per request: $per" \
    "(voluntary $(python3 -c "print(f'{($v1 - $v0) / $n:.2f}')")," \
    "involuntary $(python3 -c "print(f'{($i1 - $i0) / $n:.2f}')"));" \
    "voluntary on the tokio workers $(python3 -c "print(f'{($w1 - $w0) / $n:.2f}')");" \
    "idle afterwards: $((v2 - v1 + i2 - i1)) in 1 s"
  echo "upstream (the bench mock): context switches per request" \
    "$(python3 -c "print(f'{($mv1 - $mv0 + $mi1 - $mi0) / $n:.2f} (voluntary {($mv1 - $mv0) / $n:.2f})')")"
  echo "minor page faults per request: $(python3 -c "print(f'{($f1 - $f0) / $n:.2f}')")"
  check "$mode/$workers" switches "$per"
  check "$mode/$workers" workers "$(python3 -c "print(f'{($w1 - $w0) / $n:.2f}')")"

  # Run 2: syscalls by kind, every thread of the node.
  start_node "$mode"
  strace -c -f -q -o "$work/strace-$mode.txt" -p "$node" &
  tracer=$!
  strace -c -f -q -o "$work/strace-mock-$mode.txt" -p "$mock" &
  mock_tracer=$!
  sleep 0.5 # attached to every thread
  client "$n"
  kill -INT "$tracer" "$mock_tracer"
  wait "$tracer" "$mock_tracer" 2>/dev/null || true
  stop_node
  summarize "$work/strace-mock-$mode.txt" >"$work/mock-summary"
  echo "upstream (the bench mock): syscalls per request $(head -n1 "$work/mock-summary"):" \
    "$(tail -n +2 "$work/mock-summary" | awk '{printf "%s %s, ", $1, $2}')"
  summary=$(summarize "$work/strace-$mode.txt")
  total=$(head -n1 <<<"$summary")
  echo "syscalls per request: $total, by kind:"
  tail -n +2 <<<"$summary"
  check "$mode/$workers" syscalls "$total"
done
done

# nginx on the same port in front of the same mock, counted the same way (its master and
# workers together; the master does nothing per request).
if [ "${NGINX:-0}" = 1 ]; then
  command -v nginx >/dev/null || { echo "NGINX=1 needs nginx: apt-get install -y nginx"; exit 2; }
  mkdir -p "$work/nginx/tmp"
  sed -e "s/@MOCK_PORT@/18180/g" -e "s/@NGINX_PORT@/18183/g" -e "s/@NGINX_WORKERS@/$(nproc)/g" \
    "$bench/peers/nginx.conf.tmpl" >"$work/nginx/nginx.conf"
  nginx_switches() { # voluntary involuntary, over the master and its workers
    for p in "$1" $(pgrep -P "$1"); do cat /proc/"$p"/status; done 2>/dev/null | awk '
      /^voluntary_ctxt_switches/ {v += $2} /^nonvoluntary_ctxt_switches/ {i += $2}
      END {print v, i}'
  }
  for run in switches syscalls; do
    nginx -p "$work/nginx/" -c nginx.conf -e error.log >/dev/null 2>&1 &
    node=$!
    for _ in $(seq 1 100); do
      curl -sf -o /dev/null -H 'content-type: application/json' --data @"$body" \
        http://127.0.0.1:18183/v1/chat/completions && break
      sleep 0.1
    done
    client 50
    if [ "$run" = switches ]; then
      echo "== nginx ($(nproc) workers); $n sequential requests on one connection"
      read -r v0 i0 < <(nginx_switches "$node")
      read -r mv0 mi0 _ _ < <(switches "$mock")
      client "$n"
      read -r v1 i1 < <(nginx_switches "$node")
      read -r mv1 mi1 _ _ < <(switches "$mock")
      echo "context switches per request: $(python3 -c "print(f'{($v1 - $v0 + $i1 - $i0) / $n:.2f} (voluntary {($v1 - $v0) / $n:.2f}, involuntary {($i1 - $i0) / $n:.2f})')")"
      echo "upstream (the bench mock): context switches per request" \
        "$(python3 -c "print(f'{($mv1 - $mv0 + $mi1 - $mi0) / $n:.2f} (voluntary {($mv1 - $mv0) / $n:.2f})')")"
    else
      tracers=()
      for p in $(pgrep -P "$node"); do
        strace -c -q -o "$work/strace-nginx-$p.txt" -p "$p" &
        tracers+=($!)
      done
      strace -c -f -q -o "$work/strace-mock-nginx.txt" -p "$mock" &
      tracers+=($!)
      sleep 0.5
      client "$n"
      kill -INT "${tracers[@]}"
      wait "${tracers[@]}" 2>/dev/null || true
      cat "$work"/strace-nginx-*.txt >"$work/strace-nginx.txt"
      summary=$(summarize "$work/strace-nginx.txt")
      echo "syscalls per request: $(head -n1 <<<"$summary"), by kind:"
      tail -n +2 <<<"$summary"
      summarize "$work/strace-mock-nginx.txt" >"$work/mock-summary"
      echo "upstream (the bench mock): syscalls per request $(head -n1 "$work/mock-summary"):" \
        "$(tail -n +2 "$work/mock-summary" | awk '{printf "%s %s, ", $1, $2}')"
    fi
    kill -TERM "$node"
    wait "$node" 2>/dev/null || true
    node=""
  done
fi
exit $fail
