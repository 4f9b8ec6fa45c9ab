#!/usr/bin/env bash
# How much code a request runs through, beside how many instructions: the router (and with
# FLOOR=contract the contract floor, examples/http_floor) under callgrind with
# --dump-instr=yes, on bench/profile.sh's and bench/floor.sh's load. Prints, per request, the
# instructions run, the distinct instructions among them and the 64-byte cache lines those lie
# in (bench/code_footprint.py), by crate and by function. A request whose path does not fit the
# code caches fetches its lines again each time, so its time follows the lines more than the
# instruction count.
# A reading, not a target: it exits 0.
# Run from the project root:   bench/code-footprint.sh       (about two minutes)
#   knobs: QR_BINARY=path, STREAM=1, SECONDS_OF_LOAD=8, TOP=20, FLOOR=contract (also the floor)
# Needs valgrind and wrk, like bench/profile.sh.
set -euo pipefail
root=$(pwd)
secs=${SECONDS_OF_LOAD:-8}
top=${TOP:-20}
out=$(CALLGRIND_ARGS=--dump-instr=yes SECONDS_OF_LOAD=$secs BUDGET=0 bench/profile.sh)
requests=$(echo "$out" | sed -n 's/^requests served under callgrind: \([0-9]*\)/\1/p')
echo "== quotaroute ($requests requests under callgrind)"
python3 "$root/bench/code_footprint.py" /tmp/quotaroute-callgrind.out "$requests" "$top"
if [ -n "${FLOOR:-}" ]; then
  out=$(CALLGRIND_ARGS=--dump-instr=yes SECONDS_OF_LOAD=$secs RELAY=$FLOOR bench/floor.sh)
  requests=$(echo "$out" | sed -n 's/^floor .*: \([0-9]*\) requests,.*/\1/p')
  echo
  echo "== the $FLOOR floor ($requests requests under callgrind)"
  python3 "$root/bench/code_footprint.py" /tmp/floor-callgrind.out "$requests" "$top"
fi
