#!/usr/bin/env bash
# What the upstream side of the wire costs the router per request, on the shared bench harness
# (../shared/bench/run-target.sh: its mock, its wrk load, its CPU accounting). An nginx "edge"
# sits in front of the mock three ways, and the router is measured through each:
#   plain — a bare hop (the baseline);
#   gzip  — the edge compresses like a CDN; the router asks for it (providers.accept_encoding =
#           "gzip") and decodes every answer and stream;
#   tls   — the edge speaks HTTPS with a certificate from a private CA made here
#           (providers.ca_file); the router's upstream connections are TLS (h2 by ALPN).
# The router's CPU µs per request in each, from the same run, is what to compare.
# Run from the project root:  bench/egress.sh        (knobs: REPS, DURATION, MODES)
# Needs nginx, wrk and openssl (apt-get install -y nginx wrk openssl).
set -euo pipefail
root=$(pwd)
[ -f "$root/Cargo.toml" ] || { echo "run from the project root"; exit 2; }
bench=$(cd "$root/../shared/bench" && pwd)
command -v nginx >/dev/null && command -v wrk >/dev/null && command -v openssl >/dev/null ||
  { echo "needs nginx, wrk and openssl: apt-get install -y nginx wrk openssl"; exit 2; }
cargo build --release --bin quotaroute -q
bin=$root/target/release/quotaroute
work=$(mktemp -d)
edge_pid=""
cleanup() { [ -n "$edge_pid" ] && kill "$edge_pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT

# A private CA and the edge's certificate for 127.0.0.1.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
  -subj /CN=quotaroute-bench-ca -keyout "$work/ca.key" -out "$work/ca.pem" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj /CN=127.0.0.1 \
  -keyout "$work/edge.key" -out "$work/edge.csr" 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1\n' >"$work/san.ext"
openssl x509 -req -in "$work/edge.csr" -CA "$work/ca.pem" -CAkey "$work/ca.key" -CAcreateserial \
  -days 2 -extfile "$work/san.ext" -out "$work/edge.pem" 2>/dev/null

mock_port=${MOCK_PORT:-18180}
mkdir -p "$work/edge/tmp"
cat >"$work/edge/nginx.conf" <<NGINX
worker_processes 2;
daemon off;
pid nginx.pid;
error_log error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path tmp/client_body; proxy_temp_path tmp/proxy;
  fastcgi_temp_path tmp/fastcgi; uwsgi_temp_path tmp/uwsgi; scgi_temp_path tmp/scgi;
  keepalive_requests 1000000;
  upstream mock { server 127.0.0.1:$mock_port; keepalive 256; keepalive_requests 1000000; }
  proxy_http_version 1.1;
  proxy_set_header Connection "";
  proxy_buffering off;
  server { listen 127.0.0.1:18190; location / { proxy_pass http://mock; } }
  server {
    listen 127.0.0.1:18191;
    gzip on; gzip_proxied any; gzip_min_length 0; gzip_comp_level 5;
    gzip_types application/json text/event-stream;
    location / { proxy_pass http://mock; }
  }
  server {
    listen 127.0.0.1:18192 ssl http2;
    ssl_certificate $work/edge.pem; ssl_certificate_key $work/edge.key;
    location / { proxy_pass http://mock; }
  }
}
NGINX
nginx -p "$work/edge/" -c nginx.conf -e error.log &
edge_pid=$!
sleep 0.5
kill -0 "$edge_pid" 2>/dev/null || { echo "the edge nginx did not start"; exit 1; }

config() { # name base_url provider_lines
  sed -e "s|JOURNAL_DIR|$work/journal-$1|" -e "s|base_url = \"http://127.0.0.1:18180/v1\"|base_url = \"$2\"\n$3|" \
    "$bench/quotaroute-bench.toml" >"$work/$1.toml"
}
config plain "http://127.0.0.1:18190/v1" ""
config gzip "http://127.0.0.1:18191/v1" 'accept_encoding = "gzip"'
config tls "https://127.0.0.1:18192/v1" "ca_file = \"$work/ca.pem\""

export MODES=${MODES:-"nonstream stream"} REPS=${REPS:-2} DURATION=${DURATION:-8}
for variant in plain gzip tls; do
  echo "== $variant"
  "$bench/run-target.sh" http://127.0.0.1:18183 --cmd "$bin serve --config $work/$variant.toml" 2>&1 |
    grep -E '^\| (peer|target|direct)'
done
