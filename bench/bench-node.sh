# Shared by the counted benches (profile.sh, one-connection.sh, wakeups.sh, floor.sh); sourced,
# with `root` (the project) and `bench` (../shared/bench) set.
#   release_binary     sets `bin`: QR_BINARY, else the release build (built now)
#   floor_binary       sets `floor_bin` when FLOOR is set: FLOOR_BINARY, else examples/http_floor's
#                      release build (built now); empty without FLOOR
#   build_bench_mock   builds the shared bench's mock upstream into MOCK_TARGET_DIR
#   start_bench_mock [PORT]  starts it on 127.0.0.1:PORT (default 18180; 20-chunk streams);
#                      its pid is `mock` and joins `pids`
#   with_bench_mock [PORT]   builds and starts it, with `work` (a temp dir) and `pids` killed
#                      and removed at exit
#   bench_key          the shared bench config's client key
#   ticks PID...       user and system clock ticks of every thread of those processes
#   wait_up PORT       waits until a chat completion with `$key` and `$BODY_FILE` answers there
release_binary() {
  bin=${QR_BINARY:-}
  if [ -z "$bin" ]; then
    cargo build --release --bin quotaroute -q
    bin=${CARGO_TARGET_DIR:-$root/target}/release/quotaroute
  fi
}
floor_binary() {
  floor_bin=
  [ -n "${FLOOR:-}" ] || return 0
  case "$FLOOR" in design | contract) ;; *) echo "FLOOR is design or contract"; exit 2 ;; esac
  floor_bin=${FLOOR_BINARY:-}
  if [ -z "$floor_bin" ]; then
    cargo build --release --example http_floor -q
    floor_bin=${CARGO_TARGET_DIR:-$root/target}/release/examples/http_floor
  fi
}
mock_dir=${MOCK_TARGET_DIR:-/tmp/quotaroute-bench-mock-target}
build_bench_mock() {
  (cd "$bench/mock-upstream" && CARGO_TARGET_DIR="$mock_dir" cargo build --release -q)
}
start_bench_mock() {
  MOCK_ADDR=127.0.0.1:${1:-18180} MOCK_STREAM_CHUNKS=20 "$mock_dir/release/mock-upstream" >/dev/null 2>&1 &
  mock=$!
  pids+=("$mock")
}
with_bench_mock() {
  build_bench_mock
  work=$(mktemp -d)
  pids=()
  trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"' EXIT
  start_bench_mock "${1:-18180}"
}
bench_key() {
  sed -n 's/^api_keys = \["\(.*\)"\]/\1/p' "$bench/quotaroute-bench.toml"
}
ticks() {
  local user=0 system=0 task fields
  for pid in "$@"; do
    for task in /proc/"$pid"/task/*/stat; do
      read -r -a fields < <(sed 's/.*) //' "$task")
      user=$((user + fields[11])) system=$((system + fields[12]))
    done
  done
  echo "$user $system"
}
wait_up() {
  for _ in $(seq 1 100); do
    curl -sf -o /dev/null -H "authorization: Bearer $key" -H 'content-type: application/json' \
      --data @"$BODY_FILE" "http://127.0.0.1:$1/v1/chat/completions" && return 0
    sleep 0.1
  done
  echo "nothing answered on port $1"; exit 1
}
