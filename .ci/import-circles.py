#!/usr/bin/env python3
"""Reports import circles between the files of each crate: file A uses something of file B
(`use crate::b::…`, a `crate::b::…` path, or the same through `super::` / `self::`) and B,
directly or through others, uses A. Run
by .ci/run; exits 1 when any crate has one. A `mod.rs` that only declares and re-exports its
children is a directory's index, not a file of logic: its `pub use` lines are not edges."""
import os
import re
import sys

CRATES = {
    "quotaroute": "src",
    "quotaroute-actors": "actors/src",
    "quotaroute-policy": "actors/policy/src",
    "quotaroute-sim": "actors/sim/src",
    "quotaroute-journal": "journal/src",
    "quotaroute-mock": "tests/mock/src",
}
PATH = re.compile(r"\bcrate::((?:[a-z_][a-z0-9_]*::)*[a-z_][a-z0-9_]*)")
GROUP = re.compile(r"\bcrate::((?:[a-z_][a-z0-9_]*::)*)\{([^}]*)\}", re.S)
# `super::…` (any depth) and `self::…`, rewritten to `crate::…` paths before the scan.
RELATIVE = re.compile(r"(?<![A-Za-z0-9_:])((?:super::)+|self::)")


def modules(root):
    """Module path (tuple) -> file, for every .rs file under root."""
    found = {}
    for folder, _, files in os.walk(root):
        for name in files:
            if not name.endswith(".rs"):
                continue
            path = os.path.join(folder, name)
            rel = os.path.relpath(path, root)[:-3].split(os.sep)
            if rel[-1] in ("mod", "lib", "main"):
                rel = rel[:-1]
            found[tuple(rel)] = path
    return found


def strip_tests(text):
    """Drops `#[cfg(test)] mod … { … }` blocks: tests may use anything."""
    out, at = [], 0
    for match in re.finditer(r"#\[cfg\(test\)\]\s*(pub(\(crate\))?\s+)?mod\s+\w+\s*\{", text):
        if match.start() < at:
            continue
        out.append(text[at:match.start()])
        depth, i = 1, match.end()
        while i < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        at = i
    out.append(text[at:])
    return "".join(out)


def resolve(mods, parts):
    """The longest module path that is a file, for a `crate::a::b::c` path."""
    for n in range(len(parts), 0, -1):
        if tuple(parts[:n]) in mods:
            return tuple(parts[:n])
    return None


def absolute(text, mod):
    """`text` with each `super::` / `self::` path written from the crate root. A file's
    module is `mod`; `super` of a file is its folder's module, of a folder's `mod.rs` the
    folder's parent."""

    def rewrite(match):
        relative = match.group(1)
        if relative == "self::":
            base = list(mod)
        else:
            ups = relative.count("super::")
            base = list(mod)[: max(len(mod) - ups, 0)]
        return "crate::" + "".join(part + "::" for part in base)

    return RELATIVE.sub(rewrite, text)


def edges(mods):
    graph = {m: set() for m in mods}
    for mod, path in mods.items():
        text = absolute(strip_tests(open(path, encoding="utf-8").read()), mod)
        lines = text.splitlines()
        is_index = path.endswith("mod.rs") or path.endswith("lib.rs")
        if is_index:
            lines = [l for l in lines if not re.match(r"\s*pub(\(crate\))? use ", l)]
        text = "\n".join(l for l in lines if not l.strip().startswith("//"))
        targets = []
        for match in GROUP.finditer(text):
            prefix = match.group(1).rstrip(":").split("::") if match.group(1) else []
            for item in re.split(r"[,\s]+", match.group(2)):
                item = item.split("::")[0].strip()
                if item and item not in ("self",):
                    targets.append([p for p in prefix if p] + [item])
                elif item == "self":
                    targets.append([p for p in prefix if p])
        for match in PATH.finditer(text):
            targets.append(match.group(1).split("::"))
        for parts in targets:
            target = resolve(mods, parts)
            if target is not None and target != mod and target != ():
                graph[mod].add(target)
    return graph


def circles(graph):
    """Strongly connected components of more than one file (Tarjan)."""
    index, low, stack, on, found, counter = {}, {}, [], set(), [], [0]

    def visit(node):
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on.add(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(10000)
    for node in graph:
        if node not in index:
            visit(node)
    return found


def main():
    top = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    total = 0
    for crate, root in CRATES.items():
        found = circles(edges(modules(os.path.join(top, root))))
        total += len(found)
        print(f"{crate}: {len(found)} import circle(s)")
        for component in found:
            print("  " + " <-> ".join("::".join(m) or "crate" for m in component))
    sys.exit(1 if total else 0)


if __name__ == "__main__":
    main()
