#!/usr/bin/env python3
"""The code a request executes, from a callgrind profile made with --dump-instr=yes.

Usage: code_footprint.py CALLGRIND_OUT REQUESTS [TOP]

Counts the distinct instructions run at least half as often as requests were served (the
request's own path, not start-up or a timer's rare tick), the 64-byte cache lines they lie in,
and which functions and crates hold those lines. An instruction count says how much work a
request is; the lines say how much code it runs through, which is what the code caches must
hold for the next request to find it there.
"""
import collections
import re
import sys

# A request's own path: run at least this many times per request.
HOT_PER_REQUEST = 0.5
LINE = 64


def read(path):
    """Cost (Ir) per instruction address, and the function each address belongs to."""
    ir_at = collections.Counter()
    function_at = {}
    names = {}
    positions = ["line"]
    last = []
    after_calls = False
    function = None
    for line in open(path, errors="replace"):
        head = line[:1]
        if head.isdigit() or head in "+-*":
            tokens = line.split()
            position = []
            for i, token in enumerate(tokens[: len(positions)]):
                if token == "*":
                    value = last[i]
                elif token[0] in "+-":
                    value = last[i] + int(token, 0)
                else:
                    value = int(token, 0)
                position.append(value)
            last = position
            if after_calls:
                # The cost line after `calls=` is the call's inclusive cost, not this
                # instruction's own.
                after_calls = False
                continue
            address = position[0]
            ir_at[address] += int(tokens[len(positions)]) if len(tokens) > len(positions) else 0
            function_at.setdefault(address, function)
        elif line.startswith("positions:"):
            positions = line.split()[1:]
            last = [0] * len(positions)
        elif line.startswith("calls="):
            after_calls = True
        elif line.startswith(("fn=", "cfn=")):
            named = re.match(r"c?fn=\((\d+)\)(?: (.*))?", line.strip())
            if named:
                if named.group(2):
                    names[named.group(1)] = named.group(2)
                if line.startswith("fn="):
                    function = names.get(named.group(1), named.group(1))
    if "instr" not in positions[:1]:
        sys.exit("no instruction addresses: run callgrind with --dump-instr=yes")
    return ir_at, function_at


def crate_of(function):
    """The crate, and for the project's own crates the module, a function belongs to."""
    name = function.lstrip("<")
    parts = re.match(r"([a-z_0-9]+)::([a-z_0-9]+)(?:::([a-z_0-9]+))?", name)
    if not parts:
        return name[:40]
    crate, module, inner = parts.groups()
    if crate.startswith("quotaroute") or crate == "http_floor":
        return "::".join(p for p in (crate, module, inner) if p)
    return crate


def main():
    path, requests = sys.argv[1], int(sys.argv[2])
    top = int(sys.argv[3]) if len(sys.argv) > 3 else 20
    ir_at, function_at = read(path)
    hot = [a for a, ir in ir_at.items() if ir / requests >= HOT_PER_REQUEST]
    lines = {a // LINE for a in hot}
    executed = sum(ir_at[a] for a in hot) / requests
    print(
        f"per request: {executed:,.0f} instructions run, {len(hot):,} distinct, "
        f"in {len(lines):,} cache lines of {LINE} bytes ({len(lines) * LINE / 1024:.0f} KiB); "
        f"{len(hot) / max(len(lines), 1):.1f} distinct instructions a line"
    )
    by_function = collections.defaultdict(set)
    for address in hot:
        by_function[function_at.get(address) or "?"].add(address // LINE)
    by_crate = collections.Counter()
    for function, its_lines in by_function.items():
        by_crate[crate_of(function)] += len(its_lines)
    print(f"\nlines by crate (module for the project's own), top {top}:")
    for crate, count in by_crate.most_common(top):
        print(f"{count:6,} {crate}")
    print(f"\nlines by function, top {top}:")
    ranked = sorted(by_function.items(), key=lambda item: -len(item[1]))
    for function, its_lines in ranked[:top]:
        print(f"{len(its_lines):6,} {function[:120]}")


if __name__ == "__main__":
    main()
