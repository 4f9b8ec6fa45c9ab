#!/usr/bin/env bash
# Where the router copies memory per request: the release binary under the bench load with an
# LD_PRELOAD shim (bench/memcpy-shim.c) counting every memcpy call and its bytes by call site,
# turned on for the load alone. Prints the calls and bytes per request, then the sites that
# copy most (calls and bytes per request, bytes per call, the function and lines the call
# sits in, innermost first). Moves of large values (futures built and then moved into their
# caller's state, results returned by value) are most of them.
# Run from the project root:  bench/memcpy-sites.sh   (knobs: SECONDS_OF_LOAD=5, CONNS=8,
# STREAM=1, QR_BINARY=path, TOP=40). Needs gcc, wrk and addr2line (binutils). A reading, not a
# target: it exits 0.
set -euo pipefail
root=$(pwd)
bench=$(cd "$root/../shared/bench" && pwd)
source "$root/bench/bench-node.sh"
release_binary
with_bench_mock
gcc -O2 -shared -fPIC -o "$work/memcpy-shim.so" "$root/bench/memcpy-shim.c" -ldl
sed "s|JOURNAL_DIR|$work/journal|" "$bench/quotaroute-bench.toml" >"$work/qr.toml"
LD_PRELOAD="$work/memcpy-shim.so" "$bin" serve --config "$work/qr.toml" >"$work/node.log" 2>&1 &
node=$!
pids+=($node)
key=$(bench_key)
body=$bench/bodies/chat-small.json
[ "${STREAM:-0}" = 1 ] && body=$bench/bodies/chat-small-stream.json
BODY_FILE=$body wait_up 18183
rm -f "/tmp/memcpy-sites.$node.txt"
kill -USR2 "$node"
BODY_FILE=$body API_KEY=$key wrk -t1 -c"${CONNS:-8}" -d"${SECONDS_OF_LOAD:-5}s" \
  -s "$bench/wrk/post.lua" http://127.0.0.1:18183/v1/chat/completions >"$work/wrk.txt"
kill -USR2 "$node"
sleep 0.5
requests=$(sed -n 's/^BENCH_JSON .*"requests":\([0-9]*\).*/\1/p' "$work/wrk.txt")
cp "/proc/$node/maps" "$work/maps"
kill -TERM "$node"
wait "$node" 2>/dev/null || true
python3 - "$bin" "$work/maps" "/tmp/memcpy-sites.$node.txt" "$requests" "${TOP:-40}" <<'PY'
import subprocess, sys
binary, maps, counts, requests, top = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
rows = [(int(a, 16), int(c), int(b)) for a, c, b in (line.split() for line in open(counts))]
# The binary's first mapping is its load address (offset 0 at virtual address 0).
spans = [[int(x, 16) for x in line.split()[0].split('-')] for line in open(maps)
         if line.split()[-1] == binary]
base, end = spans[0][0], max(hi for _, hi in spans)
calls, copied = sum(r[1] for r in rows), sum(r[2] for r in rows)
print(f"requests {requests}: {calls / requests:.1f} memcpy calls and {copied / requests:,.0f} bytes per request")
print("calls/req  bytes/req  bytes/call  where")
for address, count, size in sorted(rows, key=lambda r: -r[2])[:top]:
    where = "(outside the binary)"
    if base <= address < end:
        lines = subprocess.run(['addr2line', '-f', '-C', '-i', '-e', binary, hex(address - base - 1)],
                               capture_output=True, text=True).stdout.split('\n')
        function = lines[-3] if len(lines) >= 3 else '?'
        at = ' < '.join(line.split('/')[-1] for line in lines[1::2][:3])
        where = f"{function[:70]} @ {at}"
    print(f"{count / requests:8.2f} {size / requests:10.0f} {size / max(count, 1):11.0f}  {where}")
PY
