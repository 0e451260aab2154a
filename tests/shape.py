#!/usr/bin/env python3
"""The shape of the code, as numbers: function lengths, parameter counts, settings looked up by
name outside the code that loads them, the layers files call across, and call cycles between files.

    tests/shape.py [--limit N] [--build DIR] [--max-over N] [--max-lookups N]
                   [--max-params N [--max-over-params K]] [--no-cycles] [--list]
    tests/shape.py --self-test

Functions are found by the house format (clang-format, Linux braces): a body opens with "{" in
column 0 and closes with "}" in column 0; its length counts the lines from the signature to the
closing brace, its parameters are the signature's top-level commas ("void" is none, "..." is not
one). A lookup is a call of opt_str/opt_int/opt_num/opt_flag/opt_given/opt_source with a quoted
name; the loading code is the functions listed as `loader` in tests/shape-exempt.txt (by file and
name: a function is never let off by its name alone). Functions listed there as `params` (a
callback whose parameters a library fixes) are not counted against --max-params.

Calls between files come from the objects in BUILD (nm): file A depends on file B when A uses a
symbol B defines. The layers: lib/ calls nothing in checks/ or sync/, and checks/ and sync/ never
call each other. A cycle is a ring of files that call each other.

Exits 1 when a --max-* bound is passed, a layer is crossed or a cycle exists (unless --no-cycles),
so the numbers can be held in `make check-shape`. --self-test feeds each rule a small C snippet or
a made-up symbol table that breaks it and exits 1 unless every rule fires (and stays quiet on the
snippet that keeps it).
"""
import argparse
import glob
import os
import re
import subprocess
import sys

SOURCES = ["lib/*.c", "checks/*.c", "sync/*.c"]
EXEMPT_FILE = "tests/shape-exempt.txt"
LOOKUP = re.compile(r'\bopt_(str|int|num|flag|given|source)\s*\([^,()]*,\s*"')
SIGNATURE = re.compile(r"^[A-Za-z_].*?\b([A-Za-z_][A-Za-z0-9_]*)\s*\(")
# Which layer may call which: every layer may call itself and lib/.
LAYER_CALLS = {"lib": {"lib"}, "checks": {"checks", "lib"}, "sync": {"sync", "lib"}}


class Func:
    def __init__(self, path, name, line, length, lookups, params):
        self.path, self.name, self.line = path, name, line
        self.length, self.lookups, self.params = length, lookups, params


def count_params(sig):
    """The parameters of the signature text `sig` (from the name's "(" to its ")")."""
    start = sig.index("(")
    depth, parts, cur = 0, [], ""
    for ch in sig[start + 1 :]:
        if ch == "(":
            depth += 1
        elif ch == ")":
            if depth == 0:
                break
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    parts = [p.strip() for p in parts if p.strip()]
    if parts == ["void"]:
        return 0
    return len([p for p in parts if p != "..."])


def functions(text):
    """Yield (name, first line, last line, body lines, parameters) of each function in text."""
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        if lines[i] == "{":
            # The signature: the nearest line above that starts in column 0 and names a call.
            j = i - 1
            m = None
            while j >= 0 and j >= i - 8:
                m = SIGNATURE.match(lines[j])
                if m:
                    break
                j -= 1
            k = i + 1
            while k < len(lines) and lines[k] != "}":
                k += 1
            if m:
                sig = " ".join(lines[j:i])
                params = count_params(sig[sig.index(m.group(1)) :])
                yield m.group(1), j + 1, k + 1, lines[i : k + 1], params
            i = k + 1
        else:
            i += 1


def scan_text(rel, text):
    out = []
    for name, first, last, body, params in functions(text):
        lookups = sum(len(LOOKUP.findall(line)) for line in body)
        out.append(Func(rel, name, first, last - first + 1, lookups, params))
    return out


def scan_sources(root):
    funcs = []
    for pattern in SOURCES:
        for path in sorted(glob.glob(os.path.join(root, pattern))):
            with open(path, encoding="utf-8") as f:
                funcs += scan_text(os.path.relpath(path, root), f.read())
    return funcs


def read_exempt(text):
    """{"loader": {(file, function)}, "params": {...}} from the exemption list's text."""
    out = {"loader": set(), "params": set()}
    for n, line in enumerate(text.split("\n"), 1):
        line = line.split("#", 1)[0].split()
        if not line:
            continue
        if len(line) != 3 or line[0] not in out:
            raise SystemExit(f"{EXEMPT_FILE}:{n}: expected 'loader|params FILE FUNCTION'")
        out[line[0]].add((line[1], line[2]))
    return out


def object_symbols(root, build):
    """{source file: (defined symbols, used symbols)} from the objects' nm."""
    tables = {}
    for pattern in SOURCES:
        for path in sorted(glob.glob(os.path.join(root, pattern))):
            rel = os.path.relpath(path, root)
            obj = os.path.join(root, build, rel[:-2] + ".o")
            if not os.path.exists(obj):
                continue
            out = subprocess.run(["nm", obj], capture_output=True, text=True, check=True).stdout
            defined, used = set(), set()
            for line in out.splitlines():
                parts = line.split()
                if len(parts) == 2 and parts[0] == "U":
                    used.add(parts[1])
                elif len(parts) == 3 and parts[1] in "TDBRC":
                    defined.add(parts[2])
            tables[rel] = (defined, used)
    return tables


def symbol_edges(tables):
    """Edges between source files: A -> B when A uses a symbol B defines."""
    owner = {}
    for rel, (defined, _) in tables.items():
        for s in defined:
            owner[s] = rel
    edges = {rel: set() for rel in tables}
    for rel, (_, used) in tables.items():
        for s in used:
            o = owner.get(s)
            if o and o != rel:
                edges[rel].add(o)
    return edges


def layer(rel):
    return rel.split("/", 1)[0]


def layer_crossings(edges):
    """The calls that cross the layers: (caller file, callee file)."""
    out = []
    for a in sorted(edges):
        allowed = LAYER_CALLS.get(layer(a))
        for b in sorted(edges[a]):
            if allowed is not None and layer(b) in LAYER_CALLS and layer(b) not in allowed:
                out.append((a, b))
    return out


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


def measure(funcs, edges, exempt, limit, max_params):
    """The figures every rule is judged on."""
    m = {"funcs": funcs, "edges": edges}
    m["over"] = sorted((f for f in funcs if f.length > limit), key=lambda f: -f.length)
    m["outside"] = [f for f in funcs if f.lookups and (f.path, f.name) not in exempt["loader"]]
    m["n_outside"] = sum(f.lookups for f in m["outside"])
    m["many_params"] = sorted(
        (f for f in funcs if max_params is not None and f.params > max_params and (f.path, f.name) not in exempt["params"]),
        key=lambda f: (-f.params, f.path, f.name),
    )
    defined = {(f.path, f.name) for f in funcs}
    m["stale"] = sorted(f"{kind} {path} {name}" for kind in exempt for path, name in exempt[kind]
                        if (path, name) not in defined)
    m["crossings"] = layer_crossings(edges) if edges is not None else []
    m["cycles"] = cycles(edges) if edges else []
    return m


def judge(m, a):
    """The failures: one message per rule broken."""
    fails = []
    if m["stale"] and a.max_lookups is not None:
        fails.append(f"{EXEMPT_FILE} names functions that do not exist (renamed or gone: list them "
                     f"again or drop them): {', '.join(m['stale'])}")
    if a.max_over is not None and len(m["over"]) > a.max_over:
        fails.append(f"{len(m['over'])} functions over {a.limit} lines (bound {a.max_over})")
    if a.max_lookups is not None and m["n_outside"] > a.max_lookups:
        fails.append(f"{m['n_outside']} lookups by name outside loading code (bound {a.max_lookups})")
    if a.max_params is not None and len(m["many_params"]) > a.max_over_params:
        fails.append(
            f"{len(m['many_params'])} functions take more than {a.max_params} parameters (bound {a.max_over_params})"
        )
    if m["crossings"]:
        fails.append(f"{len(m['crossings'])} call(s) across the layers (lib/ calls neither checks/ nor sync/, "
                     "which never call each other)")
    if m["cycles"] and not a.no_cycles:
        fails.append(f"{len(m['cycles'])} call cycle(s) between files")
    return fails


def report(m, a):
    funcs, edges = m["funcs"], m["edges"]
    longest = max(funcs, key=lambda f: f.length)
    print("| measure | value |")
    print("|---|---|")
    print(f"| functions | {len(funcs)} |")
    print(f"| longest function | {longest.name} ({longest.path}) {longest.length} lines |")
    print(f"| functions over {a.limit} lines | {len(m['over'])} |")
    if a.max_params is not None:
        print(f"| functions of more than {a.max_params} parameters | {len(m['many_params'])} |")
    print(f"| settings looked up by name outside loading code | {m['n_outside']} in {len(m['outside'])} functions |")
    if edges:
        print(f"| calls across the layers | {len(m['crossings'])} |")
        print(f"| call cycles between files | {len(m['cycles'])} |")
    else:
        print(f"| calls across the layers, call cycles | not measured: no objects in {a.build}/ (run make all) |")
    for caller, callee in m["crossings"]:
        print(f"layers: {caller} calls {callee}")
    for comp in m["cycles"]:
        ring = [f"{v} -> {', '.join(sorted(set(edges[v]) & set(comp)))}" for v in comp]
        print(f"cycle: {'; '.join(ring)}")
    if a.list:
        for f in m["over"]:
            print(f"long: {f.path}:{f.line} {f.name} {f.length}")
        for f in m["many_params"]:
            print(f"params: {f.path}:{f.line} {f.name} {f.params}")
        for f in sorted(m["outside"], key=lambda f: -f.lookups):
            print(f"lookups: {f.path}:{f.line} {f.name} {f.lookups}")


# -- self-test: each rule must fire on a snippet that breaks it ------------------------------------

SELF_TEST_C = """
int short_fn(int a)
{
	return a;
}

static int seven(int a, const char *b, void (*cb)(int, int), struct x *c, size_t d, char *err,
		 size_t errlen)
{
	return 0;
}

static int six(int a, int b, int c, int d, int e, int f)
{
	return 0;
}

void none(void)
{
}

int logf_like(const char *fmt, ...)
{
	return 0;
}

static int target_payload_timeout(struct opts *o)
{
	return opt_num(o, "admin-timeout") > 0;
}

static int settings_load(struct opts *o)
{
	return opt_str(o, "host") && opt_int(o, "port");
}

int fixed_callback(void *a, void *b, void *c, void *d, void *e, void *f, void *g, void *h)
{
	return 0;
}
"""


def self_test():
    failures = []

    def expect(what, cond):
        if not cond:
            failures.append(what)

    exempt = read_exempt("loader x/t.c settings_load\nparams x/t.c fixed_callback\n")
    funcs = scan_text("x/t.c", SELF_TEST_C + "int long_fn(void)\n{\n" + "\tx();\n" * 49 + "}\n")
    by = {f.name: f for f in funcs}
    expect("params: seven parameters counted (a function pointer is one)", by["seven"].params == 7)
    expect("params: six counted", by["six"].params == 6)
    expect("params: (void) is none", by["none"].params == 0)
    expect("params: '...' is not one", by["logf_like"].params == 1)
    expect("length: 52 lines counted", by["long_fn"].length == 52)

    class A:
        limit, max_over, max_lookups, max_params, max_over_params, no_cycles = 50, 0, 0, 6, 0, False

    m = measure(funcs, {}, exempt, A.limit, A.max_params)
    fails = " | ".join(judge(m, A))
    expect("length rule fires on a 52-line function", [f.name for f in m["over"]] == ["long_fn"])
    expect("length rule fails the run", "over 50 lines" in fails)
    expect("parameter rule fires on 7 (not on 6, not on a listed callback)",
           [f.name for f in m["many_params"]] == ["seven"])
    expect("parameter rule fails the run", "more than 6 parameters" in fails)
    A.max_over_params = 1
    expect("parameter rule holds within --max-over-params", "parameters" not in " | ".join(judge(m, A)))
    expect("lookup rule fires on an unlisted function, whatever its name",
           [f.name for f in m["outside"]] == ["target_payload_timeout"])
    renamed = scan_text("x/t.c", SELF_TEST_C.replace("target_payload_timeout", "target_payload_load"))
    expect("lookup rule: a name holding 'load' is not enough",
           [f.name for f in measure(renamed, {}, exempt, 50, 6)["outside"]] == ["target_payload_load"])
    stale = measure(funcs, {}, read_exempt("loader x/t.c settings_load\nloader x/t.c gone_load\n"), 50, 6)
    expect("exemptions: one naming no function fails the run",
           stale["stale"] == ["loader x/t.c gone_load"] and "do not exist" in " | ".join(judge(stale, A)))
    expect("exemptions: none stale where all exist", m["stale"] == [])
    expect("lookup rule: a loader listed under another file is not let off",
           len(measure(scan_text("y/t.c", SELF_TEST_C), {}, exempt, 50, 6)["outside"]) == 2)
    expect("lookup rule fails the run", "lookups by name" in fails)

    def sym(defined, used):
        return (set(defined), set(used))

    good = {
        "lib/a.c": sym(["lib_a"], ["lib_b"]),
        "lib/b.c": sym(["lib_b"], []),
        "checks/c.c": sym(["chk_c"], ["lib_a"]),
        "sync/s.c": sym(["syn_s"], ["lib_b", "malloc"]),
    }
    expect("layers: lib/ <- checks/, sync/ is allowed", layer_crossings(symbol_edges(good)) == [])
    for caller, callee, sym_used in [
        ("lib/a.c", "checks/c.c", "chk_c"),
        ("lib/a.c", "sync/s.c", "syn_s"),
        ("checks/c.c", "sync/s.c", "syn_s"),
        ("sync/s.c", "checks/c.c", "chk_c"),
    ]:
        bad = {k: (set(d), set(u)) for k, (d, u) in good.items()}
        bad[caller][1].add(sym_used)
        m = measure(funcs, symbol_edges(bad), exempt, 50, 6)
        expect(f"layers: {caller} calling {callee} is found", m["crossings"] == [(caller, callee)])
        expect(f"layers: {caller} calling {callee} fails the run", "across the layers" in " | ".join(judge(m, A)))
    ring = {k: (set(d), set(u)) for k, (d, u) in good.items()}
    ring["lib/b.c"][1].add("lib_a")
    m = measure(funcs, symbol_edges(ring), exempt, 50, 6)
    expect("cycles: lib/a.c <-> lib/b.c is found", m["cycles"] == [["lib/a.c", "lib/b.c"]])
    expect("cycles: a cycle fails the run", "cycle" in " | ".join(judge(m, A)))
    expect("cycles: none where there is none", measure(funcs, symbol_edges(good), exempt, 50, 6)["cycles"] == [])

    for f in failures:
        print(f"shape self-test: the rule did not fire as it must: {f}", file=sys.stderr)
    if not failures:
        print("shape self-test: every rule fires (length, parameters, lookups, layers, cycles)")
    return 1 if failures else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    ap.add_argument("--build", default="build")
    ap.add_argument("--limit", type=int, default=50, help="a long function has more lines than this")
    ap.add_argument("--list", action="store_true", help="list every long function, long parameter list and lookup")
    ap.add_argument("--max-over", type=int, help="fail when more functions than this are long")
    ap.add_argument("--max-lookups", type=int, help="fail when more lookups than this are outside loading")
    ap.add_argument("--max-params", type=int, help="count the functions of more parameters than this")
    ap.add_argument("--max-over-params", type=int, default=0,
                    help="fail when more functions than this pass --max-params (default 0)")
    ap.add_argument("--no-cycles", action="store_true", help="report cycles without failing")
    ap.add_argument("--self-test", action="store_true", help="prove that each rule fires, then exit")
    a = ap.parse_args()
    if a.self_test:
        return self_test()
    root = os.path.abspath(a.root)
    with open(os.path.join(root, EXEMPT_FILE), encoding="utf-8") as f:
        exempt = read_exempt(f.read())

    tables = object_symbols(root, a.build)
    m = measure(scan_sources(root), symbol_edges(tables) if tables else None, exempt, a.limit, a.max_params)
    report(m, a)
    fails = judge(m, a)
    for msg in fails:
        print(f"shape: {msg}", file=sys.stderr)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
