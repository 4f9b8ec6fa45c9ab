#!/usr/bin/env bash
# Writes src/hot-text.ld: the functions the release node runs when it starts and serves (plain
# and governed, non-streaming and streaming, on bench/pool.sh's config), which build.rs has the
# linker place together in `.text.hot`. The kernel maps a binary's code 64 KiB around each page
# first run (fault-around), so ~2,200 hot functions scattered over 13 MiB of code kept ~10 MiB
# of it resident; together they fill ~4 MiB (docs/measurements.md, "Memory, 2026-12-04").
# Names are matched without their hash (`17h…E`) and LTO's `.N` suffix, which change with the
# toolchain, dependencies and where the workspace sits; a name no longer in the binary matches
# nothing and costs nothing, so a stale list only costs memory. Run it after a large change to
# the request path or a toolchain bump, then rebuild:  bench/hot-text.sh   (needs valgrind)
set -euo pipefail
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || { echo "needs valgrind: apt-get install -y valgrind"; exit 2; }
# Two builds: with the example in the same one, its dev-dependencies unify features into the
# binary, whose names then differ from the binary operators build.
cargo build --release --quiet --bin quotaroute
cargo build --release --quiet --example loadgen
bin=target/release/quotaroute; load=target/release/examples/loadgen
MOCK_PORT=4321; ROUTER_PORT=4323
work="$(mktemp -d)"; pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT
source bench/pool.sh
start_mock
for run in plain governed; do
  rm -rf "$work/journal"
  QR_ENV="valgrind --tool=callgrind --fair-sched=yes --demangle=no --callgrind-out-file=$work/$run.out"
  if [ $run = governed ]; then CONFIG_APPEND="$(governed_clients)" start_router sk-not-used; else start_router sk-bench; fi
  for _ in $(seq 300); do curl -sf "http://127.0.0.1:$ROUTER_PORT/healthz" >/dev/null && break; sleep 0.2; done
  curl -sf "http://127.0.0.1:$ROUTER_PORT/metrics" >/dev/null || true
  for mode in json stream; do
    "$load" "http://127.0.0.1:$ROUTER_PORT/v1/chat/completions" team 8 4 $mode sk-bench >/dev/null
  done
  kill -TERM "$router"; wait "$router" || true
done
python3 - "$bin" "$work/plain.out" "$work/governed.out" >"$work/hot-text.ld" <<'PY'
import re, subprocess, sys
binary, outs = sys.argv[1], sys.argv[2:]
executed = set()
for out in outs:
    for line in open(out, errors="replace"):
        m = re.match(r"^c?fn=\(\d+\) (.*)", line)
        if m:
            executed.add(m.group(1).strip())
# Code symbols of the binary, by address: the list keeps the order they are laid out in now.
symbols = []
for line in subprocess.run(["nm", "--defined-only", binary], capture_output=True, text=True, check=True).stdout.splitlines():
    parts = line.split()
    if len(parts) == 3 and parts[1] in "tTwW" and parts[2] in executed:
        symbols.append((int(parts[0], 16), parts[2]))
# First each function by its exact name (in the order it is laid out now), so a list written
# from this build packs exactly what runs; then each without its hash, so after the hashes
# change the same functions (and their unrun generic siblings) still land in `.text.hot`.
exact, fallback, seen = [], [], set()
for _, name in sorted(symbols):
    name = re.sub(r"\.\d+$", "", name)
    for pattern, into in ((name + "*", exact), (re.sub(r"17h[0-9a-f]{16}E$", "17h", name) + "*", fallback)):
        if pattern not in seen:
            seen.add(pattern)
            into.append(pattern)
print("/* The node's hot code, placed together by the linker (build.rs); written by")
print(f"   bench/hot-text.sh from {len(symbols)} functions run at start-up and under load. */")
print("SECTIONS\n{\n  .text.hot : {")
for pattern in exact + fallback:
    print(f"    *(.text.{pattern} .text.unlikely.{pattern})")
print("  }\n}\nINSERT BEFORE .text;")
print(f"{len(symbols)} functions, {len(exact) + len(fallback)} patterns", file=sys.stderr)
PY
mv "$work/hot-text.ld" src/hot-text.ld
