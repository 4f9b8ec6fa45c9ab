#!/usr/bin/env bash
# Who wakes whom at one connection: the release node on the shared bench mock serves N
# sequential requests on one keep-alive connection while `perf` records, with call stacks,
# every eventfd `write` (waking the tokio worker that sleeps in epoll) and every `futex` wake
# (waking a worker or thread parked on a condvar). Prints those wake-ups per request, grouped
# by the first frame of ours (or hyper's, ractor's, sled's) that caused them.
# A diagnosis, not a guard (bench/one-connection.sh is the guard): the default runtime's counts
# move with the machine's load. Run from the project root:   bench/wakeups.sh   (~15 s)
#   knobs: N=300, QR_BINARY=path, TOKIO_WORKER_THREADS (unset: a worker per core),
#          SCRIPT_OUT=file (keeps perf's stacks, to read a wake-up's whole call chain)
# Needs perf (Debian: linux-perf) and python3; builds the shared mock like ../shared/bench.
set -euo pipefail
root=$(pwd)
bench=$(cd "$root/../shared/bench" && pwd)
command -v perf >/dev/null || { echo "needs perf: apt-get install -y linux-perf"; exit 2; }
n=${N:-300}
source "$root/bench/bench-node.sh"
release_binary
with_bench_mock
sed "s|JOURNAL_DIR|$work/journal|" "$bench/quotaroute-bench.toml" >"$work/qr.toml"
"$bin" serve --config "$work/qr.toml" >"$work/node.log" 2>&1 &
node=$!
pids+=($node)
key=$(bench_key)
body=$bench/bodies/chat-small.json
for _ in $(seq 1 100); do
  curl -sf -o /dev/null -H "Authorization: Bearer $key" -H 'content-type: application/json' \
    --data @"$body" http://127.0.0.1:18183/v1/chat/completions && break
  sleep 0.1
done
client() { python3 "$root/bench/sequential-client.py" "$1" "$key" "$body"; }
client 50 # warm: pools, connections, lazily built state
perf record -q -o "$work/perf.data" -e syscalls:sys_enter_write -e syscalls:sys_enter_futex \
  --call-graph dwarf,16384 -p "$node" >/dev/null 2>&1 &
recorder=$!
sleep 1
client "$n"
kill -INT "$recorder"
wait "$recorder" 2>/dev/null || true
perf script -i "$work/perf.data" 2>/dev/null >"$work/script.txt"
[ -n "${SCRIPT_OUT:-}" ] && cp "$work/script.txt" "$SCRIPT_OUT"
python3 - "$work/script.txt" "$n" <<'PY'
import collections, re, sys
path, n = sys.argv[1], int(sys.argv[2])
FUTEX_WAKE = {0x1, 0x81, 0xa, 0x8a}  # FUTEX_WAKE(_PRIVATE), FUTEX_WAKE_BITSET(_PRIVATE)
counts = collections.Counter()
for record in open(path).read().split('\n\n'):
    lines = record.strip().split('\n')
    if not lines or not lines[0].strip():
        continue
    head = lines[0]
    if 'sys_enter_futex' in head:
        op = re.search(r'op: (0x[0-9a-f]+)', head)
        if not op or int(op.group(1), 16) not in FUTEX_WAKE:
            continue
        kind = 'futex wake'
    elif 'sys_enter_write' in head:
        kind = 'eventfd write'
    else:
        continue
    frames = []
    for line in lines[1:]:
        m = re.match(r'\s*[0-9a-f]+\s+(.*?)\s+\(', line)
        if m:
            frames.append(re.sub(r'\+0x[0-9a-f]+$', '', re.sub(r'::h[0-9a-f]{16}', '', m.group(1))))
    # The first frame of ours (or sled's), else hyper's: who made the task runnable.
    cause = next((f for f in frames if f.startswith(('quotaroute', '<quotaroute', 'sled::'))), None)
    cause = cause or next((f for f in frames if 'hyper::' in f), None)
    counts[(kind, (cause or "tokio's scheduler: a poll left 2+ tasks runnable")[:110])] += 1
total = sum(counts.values())
print(f"wake-ups per request over {n} sequential requests: {total / n:.2f}")
for (kind, where), count in counts.most_common(14):
    print(f"  {count / n:5.2f}  {kind:13}  {where}")
PY
