# Sourced by load.sh and soak.sh: the mock upstream and a router in front of it with a 2:1:1
# pool of three keys in combo `team`. Needs: bin, work, pids, MOCK_PORT, ROUTER_PORT.

# The pool's upstream keys (also what load.sh sends when it talks to the mock directly).
pool_key() { echo "sk-mock-bench-key-$1-0123456789"; }

# Starts the mock. Its keys have a budget of 1M requests from its start, then answer 429 like a
# real provider; a bench measures the router in steady state, so the pool's keys get budgets a
# run cannot spend.
start_mock() {
    "$bin" mock-upstream --listen "127.0.0.1:$MOCK_PORT" 2>/dev/null & pids+=($!)
    for _ in $(seq 100); do curl -sf "http://127.0.0.1:$MOCK_PORT/mock/stats" >/dev/null && break; sleep 0.1; done
    for n in 1 2 3; do
        curl -sf -X POST "http://127.0.0.1:$MOCK_PORT/mock/budgets" -H 'content-type: application/json' \
            -d "{\"key\":\"$(pool_key "$n")\",\"requests_limit\":1000000000000,\"tokens_limit\":1000000000000000}"
    done
}

# start_router CLIENT_KEY [SERVER_LINES]: writes $work/quotaroute.toml, starts the router (its
# pid in $router, its log in $work/router.log) and waits until it is ready. REQUEST_EVENTS sets
# `journal.request_events` (default "all"); CONFIG_APPEND is appended to the config (sections
# after the combo, e.g. `[[clients]]`).
start_router() {
    cat > "$work/quotaroute.toml" <<TOML
[server]
listen = "127.0.0.1:$ROUTER_PORT"
api_keys = ["$1"]
${2:-}
[journal]
path = "$work/journal"
request_events = "${REQUEST_EVENTS:-all}"
[[providers]]
name = "openai"
format = "openai"
base_url = "http://127.0.0.1:$MOCK_PORT/v1"
[[connections]]
id = "k1"
provider = "openai"
api_key = "$(pool_key 1)"
weight = 2
[[connections]]
id = "k2"
provider = "openai"
api_key = "$(pool_key 2)"
[[connections]]
id = "k3"
provider = "openai"
api_key = "$(pool_key 3)"
[[combos]]
name = "team"
targets = [
  { connection = "k1", model = "gpt-4o-mini", weight = 2 },
  { connection = "k2", model = "gpt-4o-mini" },
  { connection = "k3", model = "gpt-4o-mini" },
]
TOML
    if [ -n "${CONFIG_APPEND:-}" ]; then printf '%s\n' "$CONFIG_APPEND" >> "$work/quotaroute.toml"; fi
    RUST_LOG=warn ${QR_ENV:-} "$bin" serve --config "$work/quotaroute.toml" 2>"$work/router.log" & router=$!; pids+=($router)
    for _ in $(seq 100); do curl -sf "http://127.0.0.1:$ROUTER_PORT/healthz" >/dev/null && break; sleep 0.1; done
}

# governed_clients: prints `[[clients]]` and `[[prices]]` for CONFIG_APPEND, the way operators
# run the node: the load's key `sk-bench` is a client with limits, a budget and prices (never
# reached), beside two more clients (as ../shared/bench's governed config).
governed_clients() {
    sha() { printf '%s' "$1" | sha256sum | cut -d' ' -f1; }
    cat <<TOML
[[clients]]
id = "bench"
key_sha256 = "$(sha sk-bench)"
weight = 2
requests_per_min = 100000000
tokens_per_min = 100000000000
budget_usd = 1000000000.0
budget_period = "month"
[[clients]]
id = "team-b"
key_sha256 = "$(sha sk-team-b)"
requests_per_min = 600
[[clients]]
id = "team-c"
key_sha256 = "$(sha sk-team-c)"
budget_usd = 50.0
[[prices]]
model = "gpt-4o-mini"
input = 2.5
output = 10.0
cache_read = 1.25
TOML
}
