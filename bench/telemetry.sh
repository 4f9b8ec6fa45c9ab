#!/usr/bin/env bash
# What `[telemetry]` costs (issue 25): the vs-nginx run with traces exported to a live OTLP
# collector (a local sink that answers 200 to every export), beside nginx in the same run.
# Compare its "CPU per request" ratio with a plain ../shared/bench/vs-nginx.sh run.
#   bench/telemetry.sh                      # nonstream + stream, 3 runs each
#   MODES=nonstream REPS=2 bench/telemetry.sh
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
shared=${SHARED_BENCH:-$root/../shared/bench}
cd "$root" || exit 2
command -v nginx >/dev/null && command -v wrk >/dev/null || { echo "needs nginx and wrk"; exit 2; }
cargo build --release --bin quotaroute -q || exit 1
tmp=$(mktemp -d)
sink_pid=""
cleanup() { [ -n "$sink_pid" ] && kill "$sink_pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
# The collector: accepts every OTLP/HTTP export and counts them.
python3 "$root/bench/otlp-sink.py" 14318 > "$tmp/sink.log" 2>&1 &
sink_pid=$!
sed "s|JOURNAL_DIR|$tmp/journal|" "$shared/quotaroute-bench.toml" > "$tmp/qr.toml"
printf '\n[telemetry]\notlp_endpoint = "http://127.0.0.1:14318"\nservice_name = "quotaroute-bench"\nsample_ratio = 1.0\n' >> "$tmp/qr.toml"
export NGINX_WORKERS=${NGINX_WORKERS:-$(nproc)}
export MODES=${MODES:-"nonstream stream"} REPS=${REPS:-3} DURATION=${DURATION:-8}
"$shared/run-target.sh" http://127.0.0.1:18183 --cmd "$root/target/release/quotaroute serve --config $tmp/qr.toml" --with nginx 2>&1 | grep -E '^\|'
