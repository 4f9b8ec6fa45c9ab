"""A stand-in OTLP/HTTP collector for the benches: answers every export 200 and keeps nothing.

Usage: python3 bench/otlp-sink.py [PORT]   (default 14318, on 127.0.0.1)
"""
import http.server
import sys


class Sink(http.server.BaseHTTPRequestHandler):
    # Keep-alive, as a real collector: the exporter's connection is reused, not reopened per
    # export.
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", 0)))
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


port = int(sys.argv[1]) if len(sys.argv) > 1 else 14318
http.server.ThreadingHTTPServer(("127.0.0.1", port), Sink).serve_forever()
