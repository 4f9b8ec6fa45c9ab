#!/usr/bin/env bash
# Where one connection's latency goes: the release node (and with FLOOR=contract|design the
# floor relay of examples/http_floor beside it) in front of the shared bench mock, wrk at one
# connection, and `perf record` of every process's reads, writes and epoll waits for a second.
# Each request's time is then cut at the proxy's system calls:
#   wrk's write -> the proxy reads the request -> it writes to the upstream -> it reads the
#   answer -> it writes to the client -> wrk reads it
# and the median of each segment printed. perf's tracing slows every program a little, so the
# figures sit above an untraced run's; the segments compare proxies traced alike.
# A reading, not a target: it exits 0.
# Run from the project root:   bench/one-connection-timeline.sh        (about 20 s)
#   knobs: FLOOR=contract|design, QR_BINARY=path, FLOOR_BINARY=path
# Needs perf (root), wrk and python3; builds the shared mock like ../shared/bench does.
set -euo pipefail
root=$(pwd)
bench=$(cd "$root/../shared/bench" && pwd)
command -v perf >/dev/null || { echo "needs perf: apt-get install -y linux-perf"; exit 2; }
source "$root/bench/bench-node.sh"
release_binary
floor_binary
with_bench_mock
key=$(bench_key)
export BODY_FILE=$bench/bodies/chat-small.json API_KEY=$key
sed "s|JOURNAL_DIR|$work/journal|" "$bench/quotaroute-bench.toml" >"$work/qr.toml"
"$bin" serve --config "$work/qr.toml" >"$work/node.log" 2>&1 &
node=$!
pids+=("$node")
proxies="quotaroute:18183:$node"
if [ -n "$floor_bin" ]; then
  "$floor_bin" 127.0.0.1:18185 http://127.0.0.1:18180 "$FLOOR" "$work/floor-journal" >"$work/floor.log" 2>&1 &
  pids+=($!)
  proxies="$proxies floor:18185:$!"
fi
wait_up 18183
[ -n "$floor_bin" ] && wait_up 18185
for proxy in $proxies; do
  IFS=: read -r name port pid <<<"$proxy"
  url=http://127.0.0.1:$port/v1/chat/completions
  wrk -t1 -c1 -d2s -s "$bench/wrk/post.lua" "$url" >/dev/null
  wrk -t1 -c1 -d4s -s "$bench/wrk/post.lua" "$url" >"$work/$name.wrk" &
  load=$!
  sleep 1.5
  perf record -q -a -m 8192 -o "$work/$name.data" \
    -e syscalls:sys_enter_recvfrom,syscalls:sys_exit_recvfrom,syscalls:sys_enter_writev \
    -e syscalls:sys_enter_write,syscalls:sys_exit_read -- sleep 1 >/dev/null 2>&1
  wait "$load"
  perf script -i "$work/$name.data" -F comm,pid,tid,time,event,trace 2>/dev/null >"$work/$name.txt"
  python3 - "$work/$name.txt" "$pid" "$name" <<'PY'
import re, statistics, sys
path, pid, name = sys.argv[1:4]
events = []
for line in open(path):
    m = re.match(r'\s*(\S+)\s+(\d+)/(\d+)\s+([\d.]+):\s+syscalls:(\w+):\s*(.*)', line)
    if m:
        comm, p, tid, t, call, args = m.groups()
        events.append((float(t) * 1e6, comm, p, tid, call, args))
events.sort()
fd_of = {}  # the fd each thread's last call entered with
marks = []  # (µs, what, fd)
for t, comm, p, tid, call, args in events:
    fd = re.search(r'fd: (0x[0-9a-f]+)', args)
    if call.startswith('sys_enter') and fd:
        fd_of[tid] = int(fd.group(1), 16)
    returned = int(args.split()[0], 16) if call.startswith('sys_exit') and args.startswith('0x') else 0
    if returned >= 1 << 63:  # an error (EAGAIN on a read that found nothing): not a read
        returned = 0
    if p == pid and call == 'sys_exit_recvfrom' and returned > 0:
        marks.append((t, 'read', fd_of.get(tid)))
    elif p == pid and call == 'sys_enter_writev':
        marks.append((t, 'write', fd_of.get(tid)))
    elif comm == 'wrk' and call == 'sys_enter_write':
        marks.append((t, 'wrk sent', None))
    elif comm == 'wrk' and call == 'sys_exit_read' and returned > 0:
        marks.append((t, 'wrk got', None))
# The client's socket is the one the proxy reads right after wrk sends.
client = next((marks[j][2] for i, m in enumerate(marks) if m[1] == 'wrk sent'
               for j in range(i + 1, min(i + 8, len(marks))) if marks[j][1] == 'read'), None)
names = ['wrk sent -> request read', 'request read -> upstream written', 'upstream written -> answer read',
         'answer read -> client written', 'client written -> wrk got it']
segments = {n: [] for n in names}
at = {}
for t, what, fd in marks:
    if what == 'wrk sent':
        at = {'sent': t}
    elif what == 'read' and fd == client and 'sent' in at and 'req' not in at:
        at['req'] = t
    elif what == 'write' and fd != client and 'req' in at and 'up' not in at:
        at['up'] = t
    elif what == 'read' and fd != client and 'up' in at and 'ans' not in at:
        at['ans'] = t
    elif what == 'write' and fd == client and 'ans' in at and 'out' not in at:
        at['out'] = t
    elif what == 'wrk got' and 'out' in at:
        for n, (a, b) in zip(names, [('sent', 'req'), ('req', 'up'), ('up', 'ans'), ('ans', 'out'), ('out', t)]):
            segments[n].append((b if isinstance(b, float) else at[b]) - at[a])
        at = {}
# Every request, cut cleanly or not: wrk's write to its read of the answer.
whole, sent = [], None
for t, what, _ in marks:
    if what == 'wrk sent':
        sent = t
    elif what == 'wrk got' and sent is not None:
        whole.append(t - sent)
        sent = None
print(f"{name}: {len(whole)} requests traced, {len(segments[names[-1]])} of them cut at all five points")
for n in names:
    if segments[n]:
        print(f"  {n:36s} median {statistics.median(segments[n]):6.1f} µs")
if whole:
    print(f"  {'the whole request (every request)':36s} median {statistics.median(whole):6.1f} µs, "
          f"mean {statistics.mean(whole):6.1f} µs")
PY
  echo "  wrk's p50 over its 4 s (1 s of them traced): $(grep -o '"p50_us":[0-9]*' "$work/$name.wrk" | cut -d: -f2) µs"
done
