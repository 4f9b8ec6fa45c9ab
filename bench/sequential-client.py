#!/usr/bin/env python3
"""N sequential POSTs of BODY_FILE on one keep-alive connection to the bench node
(127.0.0.1:18183); exits non-zero on any answer but 200. Used by one-connection.sh and
wakeups.sh.   usage: sequential-client.py N API_KEY BODY_FILE"""
import http.client
import sys

n, key, body = int(sys.argv[1]), sys.argv[2], open(sys.argv[3], "rb").read()
conn = http.client.HTTPConnection("127.0.0.1", 18183)
headers = {"Authorization": "Bearer " + key, "content-type": "application/json"}
for _ in range(n):
    conn.request("POST", "/v1/chat/completions", body, headers)
    answer = conn.getresponse()
    answer.read()
    if answer.status != 200:
        sys.exit(f"answered {answer.status}")
conn.close()
