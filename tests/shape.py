#!/usr/bin/env python3
"""The shape of the code, as numbers: function lengths, settings looked up by name outside the
code that loads them, and call cycles between files.

    tests/shape.py [--limit N] [--build DIR] [--max-over N] [--max-lookups N] [--no-cycles]

Functions are found by the house format (clang-format, Linux braces): a body opens with "{" in
column 0 and closes with "}" in column 0; its length counts the lines from the signature to the
closing brace. A lookup is a call of opt_str/opt_int/opt_num/opt_flag/opt_given/opt_source with a
quoted name; the loading code is any function whose name holds "settings" or "load" (where, per
binary, the option table becomes a typed struct) and lib/opt.c itself. Cycles come from the
objects in BUILD (nm): file A depends on file B when A uses a symbol B defines.

Exits 1 when a --max-* bound is passed or a cycle exists (unless --no-cycles), so the numbers
can be held in `make lint`.
"""
import argparse
import glob
import os
import re
import subprocess
import sys

SOURCES = ["lib/*.c", "checks/*.c", "sync/*.c"]
LOOKUP = re.compile(r'\bopt_(str|int|num|flag|given|source)\s*\([^,()]*,\s*"')
SIGNATURE = re.compile(r"^[A-Za-z_].*?\b([A-Za-z_][A-Za-z0-9_]*)\s*\(")


def functions(path):
    """Yield (name, first line, last line, lines) of each function defined in path."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    i = 0
    while i < len(lines):
        if lines[i] == "{":
            # The signature: the nearest line above that starts in column 0 and names a call.
            j = i - 1
            name = None
            while j >= 0 and j >= i - 8:
                m = SIGNATURE.match(lines[j])
                if m:
                    name = m.group(1)
                    break
                j -= 1
            k = i + 1
            while k < len(lines) and lines[k] != "}":
                k += 1
            if name is not None:
                yield name, j + 1, k + 1, lines[i : k + 1]
            i = k + 1
        else:
            i += 1


def scan_sources(root):
    funcs = []
    for pattern in SOURCES:
        for path in sorted(glob.glob(os.path.join(root, pattern))):
            rel = os.path.relpath(path, root)
            for name, first, last, body in functions(path):
                lookups = sum(len(LOOKUP.findall(line)) for line in body)
                funcs.append((rel, name, first, last - first + 1, lookups))
    return funcs


def symbol_graph(root, build):
    """Edges between source files from the objects' defined and undefined symbols."""
    defined, used = {}, {}
    objects = []
    for pattern in SOURCES:
        for path in sorted(glob.glob(os.path.join(root, pattern))):
            rel = os.path.relpath(path, root)
            obj = os.path.join(root, build, rel[:-2] + ".o")
            if os.path.exists(obj):
                objects.append((rel, obj))
    for rel, obj in objects:
        out = subprocess.run(["nm", obj], capture_output=True, text=True, check=True).stdout
        used[rel] = set()
        for line in out.splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[0] == "U":
                used[rel].add(parts[1])
            elif len(parts) == 3 and parts[1] in "TDBRC":
                defined[parts[2]] = rel
    edges = {rel: set() for rel, _ in objects}
    for rel, syms in used.items():
        for s in syms:
            owner = defined.get(s)
            if owner and owner != rel:
                edges[rel].add(owner)
    return edges, len(objects)


def cycles(edges):
    """Strongly connected components with more than one file (Tarjan)."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    ap.add_argument("--build", default="build")
    ap.add_argument("--limit", type=int, default=50, help="a long function has more lines than this")
    ap.add_argument("--list", action="store_true", help="list every long function and lookup")
    ap.add_argument("--max-over", type=int, help="fail when more functions than this are long")
    ap.add_argument("--max-lookups", type=int, help="fail when more lookups than this are outside loading")
    ap.add_argument("--no-cycles", action="store_true", help="report cycles without failing")
    a = ap.parse_args()
    root = os.path.abspath(a.root)

    funcs = scan_sources(root)
    longest = max(funcs, key=lambda f: f[3])
    over = sorted((f for f in funcs if f[3] > a.limit), key=lambda f: -f[3])
    outside = [f for f in funcs if f[4] and not re.search(r"settings|load", f[1]) and f[0] != "lib/opt.c"]
    n_outside = sum(f[4] for f in outside)
    edges, nobj = symbol_graph(root, a.build)
    cyc = cycles(edges) if nobj else []

    print("| measure | value |")
    print("|---|---|")
    print(f"| functions | {len(funcs)} |")
    print(f"| longest function | {longest[1]} ({longest[0]}) {longest[3]} lines |")
    print(f"| functions over {a.limit} lines | {len(over)} |")
    print(f"| settings looked up by name outside loading code | {n_outside} in {len(outside)} functions |")
    if nobj:
        print(f"| call cycles between files | {len(cyc)} |")
    else:
        print(f"| call cycles between files | not measured: no objects in {a.build}/ (run make all) |")
    for comp in cyc:
        ring = [f"{v} -> {', '.join(sorted(set(edges[v]) & set(comp)))}" for v in comp]
        print(f"cycle: {'; '.join(ring)}")
    if a.list:
        for f in over:
            print(f"long: {f[0]}:{f[2]} {f[1]} {f[3]}")
        for f in sorted(outside, key=lambda f: -f[4]):
            print(f"lookups: {f[0]}:{f[2]} {f[1]} {f[4]}")

    failed = False
    if a.max_over is not None and len(over) > a.max_over:
        print(f"shape: {len(over)} functions over {a.limit} lines (bound {a.max_over})", file=sys.stderr)
        failed = True
    if a.max_lookups is not None and n_outside > a.max_lookups:
        print(f"shape: {n_outside} lookups by name outside loading code (bound {a.max_lookups})", file=sys.stderr)
        failed = True
    if cyc and not a.no_cycles:
        print(f"shape: {len(cyc)} call cycle(s) between files", file=sys.stderr)
        failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
