#!/usr/bin/env bash
# Where the router's CPU per request goes, by layer: the release binary under callgrind
# (instructions, steady across runs on a shared machine) serving a bounded wrk load against the
# shared bench mock, with the shared bench config (journal on, request_events = "all").
# Prints the instructions per request of each layer (inclusive, so layers nest) and the total.
# Run from the project root:  bench/profile.sh      (knobs: SECONDS_OF_LOAD, CONNS, STREAM=1,
# QR_BINARY=path: that build; GOVERNED=1: client keys with limits and a budget; QR_CONFIG_APPEND=file: TOML appended to the config, e.g. an
# `[affinity]` table with `enabled = false`;
# TELEMETRY=1: `[telemetry]` on at sample_ratio 1.0, exporting to a local sink that answers 200;
# CALLGRIND_ARGS: more callgrind options, e.g. --cache-sim=yes for simulated cache misses in
# /tmp/quotaroute-callgrind.out)
# Only the load is counted: the counters are zeroed after the warm-up request and dumped before
# the stop, so start-up (TLS roots, journal open) does not swing the figure with how many
# requests valgrind got through.
# A regression guard, not a timed test: it exits 1 when the instructions per request pass
# BUDGET (default 109,500 for non-streaming: 106,340 measured on 2026-12-06 with the release
# profile's fat LTO after issue 55's cuts — ractor's span off, the connection's remembered
# key, the handler's future built in its box; 124,228 before them, 115,800 on 2026-12-02;
# ~3 % headroom for how the journal writer and sled batch under valgrind; 0 turns it off).
# Needs valgrind and wrk; builds the shared mock like ../shared/bench does.
set -euo pipefail
root=$(pwd)
bench=$(cd "$root/../shared/bench" && pwd)
command -v valgrind >/dev/null && command -v wrk >/dev/null ||
  { echo "needs valgrind and wrk: apt-get install -y valgrind wrk"; exit 2; }
source "$root/bench/bench-node.sh"
release_binary
with_bench_mock
# GOVERNED=1: the bench key is a [[clients]] key with limits, a budget and prices, beside two
# more clients (the shared bench's governed config), as operators run it.
template=$bench/quotaroute-bench.toml
[ "${GOVERNED:-0}" = 1 ] && template=$bench/quotaroute-bench-governed.toml
sed "s|JOURNAL_DIR|$work/journal|" "$template" >"$work/qr.toml"
[ -n "${QR_CONFIG_APPEND:-}" ] && cat "$QR_CONFIG_APPEND" >>"$work/qr.toml"
if [ "${TELEMETRY:-0}" = 1 ]; then
  python3 "$root/bench/otlp-sink.py" 14318 >/dev/null 2>&1 &
  pids+=($!)
  printf '\n[telemetry]\notlp_endpoint = "http://127.0.0.1:14318"\nservice_name = "quotaroute-profile"\nsample_ratio = 1.0\n' >>"$work/qr.toml"
fi
# shellcheck disable=SC2086
valgrind --tool=callgrind --fair-sched=yes ${CALLGRIND_ARGS:-} --callgrind-out-file="$work/callgrind.out" \
  "$bin" serve --config "$work/qr.toml" >"$work/node.log" 2>&1 &
node=$!
pids+=($node)
key=$(bench_key)
body=$bench/bodies/chat-small.json
[ "${STREAM:-0}" = 1 ] && body=$bench/bodies/chat-small-stream.json
for _ in $(seq 1 300); do
  curl -sf -o /dev/null -H "Authorization: Bearer $key" -H 'content-type: application/json' \
    --data @"$body" http://127.0.0.1:18183/v1/chat/completions && break
  sleep 0.2
done
# Count the load alone: start-up (config, TLS roots, journal open) is zeroed here and stop is
# left out by the dump below, so the figure does not move with how many requests valgrind
# got through on a busy machine.
callgrind_control --zero "$node" >/dev/null 2>&1
BODY_FILE=$body API_KEY=$key wrk -t1 -c"${CONNS:-8}" -d"${SECONDS_OF_LOAD:-20}s" \
  -s "$bench/wrk/post.lua" http://127.0.0.1:18183/v1/chat/completions >"$work/wrk.txt"
requests=$(sed -n 's/^BENCH_JSON .*"requests":\([0-9]*\).*/\1/p' "$work/wrk.txt")
callgrind_control --dump=load "$node" >/dev/null 2>&1
kill -TERM "$node"
wait "$node" 2>/dev/null || true
echo "requests served under callgrind: $requests"
load_out=$(grep -l '^desc: Trigger: .*load' "$work"/callgrind.out* | head -n1)
cp "$load_out" /tmp/quotaroute-callgrind.out
callgrind_annotate --auto=no --inclusive=yes --threshold=100 "$load_out" 2>/dev/null >"$work/inclusive.txt"
callgrind_annotate --auto=no --threshold=100 "$load_out" 2>/dev/null >"$work/self.txt"
default_budget=109500
[ "${STREAM:-0}" = 1 ] && default_budget=0
BUDGET=${BUDGET:-$default_budget} python3 - "$work/inclusive.txt" "$work/self.txt" "$requests" <<'PY'
import re, sys
inclusive, exclusive, requests = sys.argv[1], sys.argv[2], int(sys.argv[3])
def read(path):
    rows, total = [], None
    for line in open(path):
        m = re.match(r'\s*([\d,]+)\s+(?:\(\s*[\d.]+%\)\s+)?(.*)', line)
        if not m or not m.group(1).replace(',', '').isdigit():
            continue
        ir = int(m.group(1).replace(',', ''))
        name = m.group(2).strip()
        if 'PROGRAM TOTALS' in name:
            total = ir
        elif name:
            rows.append((ir, name))
    return rows, total
rows, total = read(inclusive)
self_rows, self_total = read(exclusive)
total = total or self_total
layers = [
    ("client connection task: hyper HTTP/1 server, incl. the handler", r"(^|:)(<hyper_util::server::conn::auto::UpgradeableConnection<I,S,E>|quotaroute::node::accept::serve::\{\{closure\}\}::\{\{closure\}\}|quotaroute::node::self_wake::absorbing::\{\{closure\}\}|quotaroute::node::accept::Shared::serve_one::\{\{closure\}\})"),
    ("    the handler: tries, failover, answer (routed::serve_tries)", r"(^|:)quotaroute::node::routed::tries::serve_tries::\{\{closure\}\}"),
    ("      one try (attempt::try_target)", r"(^|:)quotaroute::node::attempt::try_target::try_target::\{\{closure\}\}"),
    ("        upstream request sent (UpstreamClient::send: pool, HTTP/1.1 exchange to the head)", r"(^|:)quotaroute::upstream::client::UpstreamClient::send::\{\{closure\}\}"),
    ("        upstream body read (h1_conn::H1Body::poll_data)", r"(^|:)quotaroute::upstream::h1_conn::H1Body::poll_data"),
    ("        response usage (wire::usage::response_usage)", r"(^|:)quotaroute::wire::usage::response_usage"),
    ("        upstream request built (upstream_request::build)", r"(^|:)quotaroute::node::upstream_request::build"),
    ("        rate-limit headers (readings_from_headers)", r"readings_from_headers"),
    ("      header rules (header_rules::keep_upstream)", r"(^|:)quotaroute::node::header_rules::keep_upstream"),
    ("      x-quotaroute-* headers (RouteHeaders)", r"(^|:)quotaroute::node::reply::RouteHeaders::apply_over_relayed"),
    ("      reporting (Decision::report)", r"(^|:)quotaroute_actors::decision::Decision::report"),
    ("      metrics", r"(^|:)quotaroute::node::metrics::(attempt|request_finished|overhead)"),
    ("    body scan (body_rewrite::parse_request_for)", r"(^|:)quotaroute::wire::body_rewrite::parse_(request|with)"),
    ("    routing decision, caller side (Router::route)", r"(^|:)quotaroute_actors::router::Router::route"),
    ("upstream HTTP/2 connection task (pool::drive_http2)", r"(^|:)quotaroute::upstream::pool::drive_http2::\{\{closure\}\}"),
    ("actors: combo, connection, breaker, recorder (ractor runtime)", r"(^|:)ractor::actor::ActorRuntime<TActor>::start::\{\{closure\}\}::\{\{closure\}\}::\{\{closure\}\}"),
    ("  combo decision (ComboState::route)", r"(^|:)quotaroute_actors::actor::combo::ComboState::route"),
    ("  recorder fold + queue (RecorderState::record, called by the actors)", r"(^|:)quotaroute_actors::(actor::)?recorder::RecorderState::record"),
    ("journal writer thread (Writer::commit: encode, sled insert, flush)", r"(^|:)quotaroute_journal::writer::Writer::commit"),
    ("sled's own threads", r"(^|:)sled::threadpool::perform_work"),
    ("telemetry: span export task (encode + POST)", r"(^|:)quotaroute::telemetry::export::Exporter::run::\{\{closure\}\}"),
    ("telemetry: spans ended (RequestActive/AttemptActive drop)", r"drop_in_place<quotaroute::telemetry::span::(RequestActive|AttemptActive)>"),
    ("telemetry: answer usage parse (answer_usage)", r"(^|:)quotaroute::telemetry::answer_usage::answer_usage"),
]
per_request = total / requests
print(f"total {total:,} instructions = {per_request:,.0f} per request")
print("| layer | instructions per request (inclusive) | share |")
print("|---|---:|---:|")
for label, pattern in layers:
    best = 0
    regex = re.compile(pattern)
    for ir, name in rows:
        if regex.search(name):
            best = max(best, ir)
    print(f"| {label} | {best / requests:,.0f} | {100 * best / total:.1f}% |")
alloc = sum(ir for ir, name in self_rows
            if re.search(r"(^|[:\s])(malloc|free|realloc|calloc|_int_malloc|_int_free|malloc_consolidate|cfree|_int_realloc|mi_[a-z_]+|_mi_[a-z_]+)\b", name))
print(f"| malloc + free (self) | {alloc / requests:,.0f} | {100 * alloc / total:.1f}% |")
print()
print("top functions by their own instructions per request:")
for ir, name in sorted(self_rows, reverse=True)[:20]:
    print(f"  {ir / requests:8,.0f}  {name[:140]}")
budget = int(__import__("os").environ.get("BUDGET", "0"))
if budget and per_request > budget:
    print(f"OVER BUDGET: {per_request:,.0f} instructions per request > {budget:,}")
    sys.exit(1)
if budget:
    print(f"within budget: {per_request:,.0f} <= {budget:,} instructions per request")
PY
