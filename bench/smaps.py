#!/usr/bin/env python3
"""Where a process's resident memory is, by mapping (bench/memory.sh, SMAPS=1): the binary's
file pages, each library, the heap, thread stacks and anonymous mappings by size, largest
first.   usage: smaps.py PID"""
import collections
import os
import re
import sys

pid = sys.argv[1]
resident = collections.Counter()
name = None
for line in open(f"/proc/{pid}/smaps"):
    if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
        fields = line.split()
        start, end = (int(x, 16) for x in fields[0].split("-"))
        name = fields[5] if len(fields) > 5 else None
        if name is None:
            mib = (end - start) >> 20
            name = f"anonymous, {mib} MiB mappings" if mib else "anonymous, < 1 MiB mappings"
    elif line.startswith("Rss:"):
        resident[name] += int(line.split()[1])
for name, kib in resident.most_common(12):
    print(f"  {kib:8,} kB  {name}")
print(f"  threads: {len(os.listdir(f'/proc/{pid}/task'))}")
