"""Consul ACL policies in the HCL subset docs/consul-acl.md uses, read into what the tests need.

    rules = parse('key_prefix "mysql/" { policy = "read" }')
    by_resource(rules)        # {"key": {"mysql/": "read"}}
    fake_rules(rules)         # [("key", "mysql/", "read")] for Consul.create_token
    policies(markdown_text)   # {"NAME": "<hcl>"} for each <!-- policy: NAME --> + ```hcl block

The subset: blocks `<resource>[_prefix] "<name>" { policy = "read"|"write"|"deny" }` for the
resources key, session, service, node and agent (`list` too for keys, as Consul's
acl.enable_key_list_policy knows it), with `#`, `//` and `/* */` comments. Anything else is a
ValueError naming the line: a policy file the tests load must mean exactly what it says.

The Consul double knows prefix rules only, so fake_rules() turns an exact rule (`key "a/b"`) into a
prefix rule on the same name: the double then grants it on every name that starts with it, which
is wider than Consul. A test that relies on an exact rule being exact must run against a real
Consul (CONSUL_BIN). `list` becomes `read` for the double, which has no list level.
Pure Python, standard library only.
"""

import collections
import re

RESOURCES = ("key", "session", "service", "node", "agent")
POLICIES = ("read", "write", "deny")

Rule = collections.namedtuple("Rule", "resource name policy exact line")

_TOKEN = re.compile(r"""
    (?P<space>[ \t\r]+)
  | (?P<newline>\n)
  | (?P<comment>\#[^\n]*|//[^\n]*|/\*.*?\*/)
  | (?P<string>"(?:[^"\\\n]|\\.)*")
  | (?P<word>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<punct>[{}=])
""", re.VERBOSE | re.DOTALL)

_ESCAPES = {'"': '"', "\\": "\\", "n": "\n", "t": "\t", "r": "\r"}


def _unquote(text, line):
    out, i = [], 1
    while i < len(text) - 1:
        ch = text[i]
        if ch == "\\":
            esc = text[i + 1]
            if esc not in _ESCAPES:
                raise ValueError("line %d: unsupported escape \\%s" % (line, esc))
            out.append(_ESCAPES[esc])
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def _tokens(text):
    """(kind, value, line) of every meaningful token."""
    pos, line = 0, 1
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m:
            raise ValueError("line %d: unexpected %r" % (line, text[pos:pos + 20]))
        kind = m.lastgroup
        value = m.group(kind)
        if kind == "string":
            yield kind, _unquote(value, line), line
        elif kind in ("word", "punct"):
            yield kind, value, line
        line += value.count("\n")
        pos = m.end()


def parse(text):
    """The rules of one policy, in order. Raises ValueError on anything outside the subset, on an
    unknown resource or policy, and on a resource and name given twice."""
    toks = list(_tokens(text))
    rules, seen, i = [], set(), 0

    def take(kind, value=None):
        nonlocal i
        if i >= len(toks):
            raise ValueError("unexpected end of policy (expected %s)" % (value or kind))
        k, v, ln = toks[i]
        if k != kind or (value is not None and v != value):
            raise ValueError("line %d: expected %s, found %r" % (ln, value or kind, v))
        i += 1
        return v, ln

    while i < len(toks):
        word, line = take("word")
        exact = not word.endswith("_prefix")
        resource = word if exact else word[:-len("_prefix")]
        if resource not in RESOURCES:
            raise ValueError("line %d: unknown rule %r (expected one of %s, with or without _prefix)"
                             % (line, word, ", ".join(RESOURCES)))
        name, _ = take("string")
        take("punct", "{")
        key, kline = take("word")
        if key != "policy":
            raise ValueError("line %d: unknown field %r (only policy)" % (kline, key))
        take("punct", "=")
        policy, pline = take("string")
        allowed = POLICIES + (("list",) if resource == "key" else ())
        if policy not in allowed:
            raise ValueError("line %d: %s policy %r (expected %s)" % (pline, word, policy, "|".join(allowed)))
        take("punct", "}")
        if (word, name) in seen:
            raise ValueError("line %d: %s %r given twice" % (line, word, name))
        seen.add((word, name))
        rules.append(Rule(resource, name, policy, exact, line))
    return rules


def by_resource(rules):
    """{resource: {name: policy}}; an exact rule and a prefix rule on the same name must agree (the
    map cannot tell them apart)."""
    out = {}
    for r in rules:
        got = out.setdefault(r.resource, {})
        if r.name in got and got[r.name] != r.policy:
            raise ValueError("line %d: %s %r: exact and prefix rules disagree" % (r.line, r.resource, r.name))
        got[r.name] = r.policy
    return out


def fake_rules(rules):
    """[(resource, prefix, policy)] for Consul.create_token (see the module's note on exactness)."""
    return [(r.resource, r.name, "read" if r.policy == "list" else r.policy) for r in rules]


_POLICY_BLOCK = re.compile(r"^<!-- policy: ([A-Za-z0-9_.-]+) -->\n```hcl\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def policies(markdown):
    """{name: hcl text} of every policy block in a Markdown document: a line `<!-- policy: NAME -->`
    right above a ```hcl fence. A name given twice is a ValueError."""
    out = {}
    for m in _POLICY_BLOCK.finditer(markdown):
        if m.group(1) in out:
            raise ValueError("policy %s given twice" % m.group(1))
        out[m.group(1)] = m.group(2)
    return out
