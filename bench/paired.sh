#!/usr/bin/env bash
# nginx and quotaroute side by side, read in pairs: both run at once in front of one shared bench
# mock, and short windows of ../shared/bench/vs-nginx.sh's load alternate between them (wrk -t2
# -c64, the shared body and key; MODE=stream for the streaming body, MODE=c1 for one connection,
# serial, as vs-nginx.sh's nonstream_c1). Each pair's ratios are taken from windows seconds apart,
# so a drift of the host's speed (this VM's varies by ±20 % over seconds, the mock's CPU per
# request moving with it) moves both sides of a pair alike. vs-nginx.sh runs the two minutes
# apart, so its ratio carries that drift.
# FLOOR=design|contract adds a third side in every round: examples/http_floor with that relay
# (bench/floor.sh says what each does), read against nginx the same way. It shows where the
# design's or the contract's own minimum lies in the same seconds.
# MODE=c1 adds the mock itself as a side ("direct") and reads each side's added p50 (its p50
# minus the direct window's of the same round), as vs-nginx.sh does.
# The order of the sides turns each round. Prints each round's readings and ratios to nginx,
# then their medians.
# A reading, not a target: it exits 0.
# Run from the project root:   bench/paired.sh          (about a minute)
#   knobs: WINDOWS=10, SECONDS_OF_LOAD=3, MODE=nonstream|stream|c1, FLOOR=design|contract,
#          QR_BINARY=path (that build), FLOOR_BINARY=path (default: built now),
#          QR_CONFIG=path (default ../shared/bench/quotaroute-bench.toml),
#          MOCK_PORT / ROUTER_PORT / NGINX_PORT / FLOOR_PORT (18180 / 18183 / 18184 / 18185)
# Needs nginx and wrk; builds the shared mock like ../shared/bench does.
set -euo pipefail
root=$(pwd)
bench=$(cd "$root/../shared/bench" && pwd)
for tool in nginx wrk; do
  command -v "$tool" >/dev/null || { echo "needs $tool: apt-get install -y nginx wrk"; exit 2; }
done
mode=${MODE:-nonstream}
case "$mode" in nonstream | stream | c1) ;; *) echo "MODE is nonstream, stream or c1"; exit 2 ;; esac
mock_port=${MOCK_PORT:-18180}
router_port=${ROUTER_PORT:-18183}
nginx_port=${NGINX_PORT:-18184}
floor_port=${FLOOR_PORT:-18185}
secs=${SECONDS_OF_LOAD:-3}
body=$bench/bodies/chat-small.json
[ "$mode" = stream ] && body=$bench/bodies/chat-small-stream.json
source "$root/bench/bench-node.sh"
release_binary
floor_binary
with_bench_mock "$mock_port"
key=$(bench_key)
export BODY_FILE=$body API_KEY=$key

load() { # PORT SECONDS -> wrk's output
  if [ "$mode" = c1 ]; then
    wrk -t1 -c1 -d"$2s" --timeout 10s -s "$bench/wrk/post.lua" "http://127.0.0.1:$1/v1/chat/completions"
  else
    wrk -t2 -c64 -d"$2s" --timeout 10s -s "$bench/wrk/post.lua" "http://127.0.0.1:$1/v1/chat/completions"
  fi
}

mkdir -p "$work/nginx/tmp"
sed -e "s/@MOCK_PORT@/$mock_port/g" -e "s/@NGINX_PORT@/$nginx_port/g" -e "s/@NGINX_WORKERS@/$(nproc)/g" \
  "$bench/peers/nginx.conf.tmpl" >"$work/nginx/nginx.conf"
sed -e "s|JOURNAL_DIR|$work/journal|" -e "s/127.0.0.1:18183/127.0.0.1:$router_port/" \
  -e "s|127.0.0.1:18180|127.0.0.1:$mock_port|" "${QR_CONFIG:-$bench/quotaroute-bench.toml}" >"$work/qr.toml"
nginx -p "$work/nginx/" -c nginx.conf -e error.log >/dev/null 2>&1 &
nginx_pid=$!
pids+=("$nginx_pid")
"$bin" serve --config "$work/qr.toml" >"$work/node.log" 2>&1 &
node=$!
pids+=("$node")
sides="quotaroute nginx"
if [ -n "$floor_bin" ]; then
  "$floor_bin" "127.0.0.1:$floor_port" "http://127.0.0.1:$mock_port" "$FLOOR" "$work/floor-journal" \
    >"$work/floor.log" 2>&1 &
  floor_pid=$!
  pids+=("$floor_pid")
  sides="quotaroute floor nginx"
fi
[ "$mode" = c1 ] && sides="$sides direct"
wait_up "$nginx_port"
wait_up "$router_port"
[ -n "$floor_bin" ] && wait_up "$floor_port"
nginx_all="$nginx_pid $(pgrep -P "$nginx_pid" | tr '\n' ' ')"
for side in $sides; do
  case "$side" in
    quotaroute) port=$router_port ;; nginx) port=$nginx_port ;; floor) port=$floor_port ;; direct) port=$mock_port ;;
  esac
  load "$port" 2 >/dev/null
done
: >"$work/windows"
read -r -a side_list <<<"$sides"
for window in $(seq 1 "${WINDOWS:-10}"); do
  # Each round starts one side later than the last, so no side always follows the same one.
  for turn in $(seq 0 $((${#side_list[@]} - 1))); do
    side=${side_list[$(((window + turn) % ${#side_list[@]}))]}
    case "$side" in
      quotaroute) port=$router_port proxy=$node ;;
      nginx) port=$nginx_port proxy=$nginx_all ;;
      floor) port=$floor_port proxy=$floor_pid ;;
      direct) port=$mock_port proxy=$mock ;;
    esac
    # shellcheck disable=SC2086 # the proxy's PIDs, split on purpose
    read -r user system < <(ticks $proxy)
    before=$((user + system))
    load "$port" "$secs" >"$work/wrk.txt"
    # shellcheck disable=SC2086
    read -r user system < <(ticks $proxy)
    after=$((user + system))
    field() { grep -o "\"$1\":[0-9]*" "$work/wrk.txt" | cut -d: -f2; }
    echo "$window $side $(field requests) $(field duration_us) $((after - before)) $(field p50_us)" >>"$work/windows"
  done
done
python3 - "$work/windows" "$(getconf CLK_TCK)" "$mode" "${FLOOR:-}" <<'PY'
import statistics, sys
path, tck, mode, floor = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
read = {}
for line in open(path):
    window, side, requests, duration_us, ticks, p50 = line.split()
    requests = int(requests)
    read[(int(window), side)] = {
        "rps": requests / (int(duration_us) / 1e6),
        "cpu": int(ticks) / tck * 1e6 / requests,
        "p50": int(p50),
    }
windows = sorted({w for w, _ in read})
proxies = ["quotaroute"] + (["floor"] if floor else [])
med = statistics.median
label = {"quotaroute": "quotaroute", "floor": f"the {floor} floor"}
print(f"{mode}, {len(windows)} rounds of windows" + (f", with the {floor} floor" if floor else ""))
if mode == "c1":
    head = ["round"] + [f"{label[p]} added p50 µs" for p in proxies] + ["nginx added p50 µs"]
    head += [f"{label[p]} / nginx" for p in proxies]
    print("| " + " | ".join(head) + " |")
    print("|" + "---:|" * len(head))
    ratios = {p: [] for p in proxies}
    added = {p: [] for p in proxies + ["nginx"]}
    for w in windows:
        direct = read[(w, "direct")]["p50"]
        row = [str(w)]
        for p in proxies + ["nginx"]:
            added[p].append(read[(w, p)]["p50"] - direct)
            row.append(str(added[p][-1]))
        for p in proxies:
            ratios[p].append(added[p][-1] / max(added["nginx"][-1], 1))
            row.append(f"{ratios[p][-1]:.2f}")
        print("| " + " | ".join(row) + " |")
    for p in proxies:
        print(f"median: {label[p]} adds {med(added[p]):.0f} µs at p50, nginx {med(added['nginx']):.0f} µs; "
              f"median of the rounds' ratios {med(ratios[p]):.2f}x")
    for p in proxies + ["nginx"]:
        print(f"CPU per request at one connection, median: {label.get(p, p)} "
              f"{med(read[(w, p)]['cpu'] for w in windows):.1f} µs")
else:
    head = ["round"]
    for p in proxies + ["nginx"]:
        head += [f"{label.get(p, p)} req/s", "µs per request"]
    for p in proxies:
        head += [f"{label[p]} RPS ratio", "CPU ratio"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---:|" * len(head))
    rps = {p: [] for p in proxies}
    cpu = {p: [] for p in proxies}
    for w in windows:
        row = [str(w)]
        for p in proxies + ["nginx"]:
            row += [f"{read[(w, p)]['rps']:,.0f}", f"{read[(w, p)]['cpu']:.1f}"]
        n = read[(w, "nginx")]
        for p in proxies:
            rps[p].append(read[(w, p)]["rps"] / n["rps"])
            cpu[p].append(read[(w, p)]["cpu"] / n["cpu"])
            row += [f"{rps[p][-1]:.2f}", f"{cpu[p][-1]:.2f}"]
        print("| " + " | ".join(row) + " |")
    for p in proxies:
        print(f"median of the rounds: RPS {label[p]}/nginx = {med(rps[p]):.2f}, CPU per request = {med(cpu[p]):.2f}x "
              f"({label[p]} {med(read[(w, p)]['cpu'] for w in windows):.1f} µs, "
              f"nginx {med(read[(w, 'nginx')]['cpu'] for w in windows):.1f} µs)")
PY
