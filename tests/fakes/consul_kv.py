#!/usr/bin/python3
"""A faithful test double of Consul's HTTP API for KV and health clients (one server or several
over one state, stdlib only).

It implements what a KV or service-health client sees from one Consul server agent:

  /v1/kv/<key>        GET (recurse, keys, separator, raw, index/wait, stale,
                      consistent, leader, dc), PUT (flags, cas, acquire,
                      release), DELETE (recurse, cas)
  /v1/txn             PUT, KV verbs only
  /v1/session/...     create, renew, destroy, info, node, list (TTL expiry at
                      2 x TTL, release/delete behaviour, lock delay)
  /v1/status/leader, /v1/status/peers, /v1/agent/self,
  /v1/catalog/datacenters
  /v1/agent/service/register, /v1/agent/service/deregister/<id>,
  /v1/agent/check/pass|warn|fail|update/<id> (TTL checks that expire;
                      HTTP and TCP checks run as an agent runs them, on
                      loopback targets only; DeregisterCriticalServiceAfter
                      reaps a service critical too long),
  /v1/catalog/register, /v1/catalog/deregister
  /v1/health/service/<name>, /v1/catalog/service/<name>
                      blocking, passing, tag, node-meta, filter (a go-bexpr
                      subset), the agent node's serfHealth check
  ACLs                optional (--acl-master-token), default deny, simple
                      per-token prefix and exact rules set through the control API;
                      --acl-default-token for requests without one;
                      /v1/acl/login and /v1/acl/logout against auth methods
                      set through the control API (tokens that expire)
  Several servers     --servers N: N server agents over one shared state, each
                      with its own node, agent-local services and checks;
                      /_fake/restart-server restarts one (serfHealth critical)
  Version differences --rpc-hold-timeout, --kv-key-validation

and the fault hooks under /_fake/ (see docs/consul-double.md).

Semantics follow Consul's documentation (website/content/api-docs/kv.mdx,
session.mdx, txn.mdx, features/blocking.mdx, features/consistency.mdx) and,
where the docs are silent, the server code (agent/kvs_endpoint.go,
agent/http.go, agent/consul/kvs_endpoint.go, agent/consul/state/kvs.go,
agent/consul/state/txn.go, agent/session_endpoint.go, agent/blockingquery,
agent/health_endpoint.go, agent/consul/state/catalog.go, agent/structs,
agent/checks/check.go and agent/local/state.go for the checks it runs, and
go-immutable-radix for the watch of a prefix without keys).
Comments name the source of each rule.

Run:  /usr/bin/python3 tests/fakes/consul_kv.py --listen 127.0.0.1:0 \
          [--datadir DIR] [--port-file FILE] [--dc dc1] [--acl-master-token T]
          [--check-reap-interval D] [--check-update-interval D]
"""

import argparse
import base64
import bisect
import dataclasses
import functools
import gzip
import http.client
import ipaddress
import json
import os
import queue
import random
import re
import resource
import signal
import socket
import ssl
import sys
import threading
import time
import traceback
import uuid
from fractions import Fraction
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, quote, quote_plus, unquote, urlsplit

# ---------------------------------------------------------------------------
# Constants (each from Consul's docs or code)
# ---------------------------------------------------------------------------

SECOND = 1_000_000_000                      # Go durations are nanoseconds
KV_MAX_VALUE_SIZE = 512 * 1024              # kv.mdx: values max 512kb (kv_max_value_size)
TXN_MAX_OPS_DEFAULT = 64                    # agent/txn_endpoint.go maxTxnOps (128 in newer releases)
DEFAULT_QUERY_TIME = 300 * SECOND           # blocking.mdx: wait defaults to 5 minutes
MAX_QUERY_TIME = 600 * SECOND               # blocking.mdx: limited to 10 minutes
JITTER_FRACTION = 16                        # blocking.mdx: adds up to wait/16
SESSION_TTL_MIN_DEFAULT = 10 * SECOND       # session.mdx: TTL between 10s ...
SESSION_TTL_MAX = 86400 * SECOND            # ... and 86400s
CHECK_REAP_INTERVAL_DEFAULT = 30 * SECOND     # agent config check_reap_interval
DEREGISTER_CRITICAL_MIN_DEFAULT = 60 * SECOND  # check_deregister_interval_min: "1m"
CHECK_MIN_INTERVAL = SECOND                 # agent/checks MinInterval: shorter intervals are raised to it
CHECK_TIMEOUT_DEFAULT = 10 * SECOND         # CheckHTTP's http.Client and CheckTCP's net.Dialer Timeout
CHECK_OUTPUT_MAX = 4 * 1024                 # agent/checks DefaultBufSize (check_output_max_size)
CHECK_USER_AGENT = "Consul Health Check"    # agent/checks UserAgent
CHECK_UPDATE_INTERVAL_DEFAULT = 5 * 60 * SECOND  # agent config check_update_interval
CHECK_RUN_MAX = 512                         # HTTP and TCP checks the double runs at once (its own bound)
CHECK_WORKERS = 4                           # threads that run due checks
SESSION_TTL_MULTIPLIER = 2                  # session.mdx: "may not be reaped for up to double this TTL"
DEFAULT_LOCK_DELAY = 15 * SECOND            # session.mdx: LockDelay default "15s"
MAX_LOCK_DELAY = 60 * SECOND                # structs.MaxLockDelay
LOCK_DELAY_MIN_THRESHOLD = 1000             # agent/session_endpoint.go lockDelayMinThreshold
TOMBSTONE_TTL_DEFAULT = 15 * 60 * SECOND    # KV tombstones are reaped after 15 minutes
GZIP_MIN_SIZE = 1400                        # NYTimes/gziphandler DefaultMinSize
INITIAL_RAFT_INDEX = 10                     # a fresh server has applied a few raft entries
ANONYMOUS_ACCESSOR = "00000000-0000-0000-0000-000000000002"
SERF_HEALTH = "serfHealth"
RPC_HOLD_TIMEOUT_DEFAULT = 7 * SECOND       # agent config rpc_hold_timeout (7s)
# Consul 1.21.5 (hashicorp/consul#22682, reverted in #22850): KV keys had to match this
KEY_PATTERN_1_21_5 = r"^[a-zA-Z0-9,_./\-?&=]+$"
KEY_VALIDATION = ("none", "1.21.5", "relaxed")
FAKE_CONSUL_VERSION = "1.20.1"
STATE_FORMAT = 1
THREAD_STACK_SIZE = 512 * 1024              # per connection thread (Linux default: 8 MiB of address space)


# ---------------------------------------------------------------------------
# Go-compatible helpers: durations, quoting, JSON
# ---------------------------------------------------------------------------

_GO_UNITS = {
    "ns": 1, "us": 1_000, "\u00b5s": 1_000, "\u03bcs": 1_000,
    "ms": 1_000_000, "s": SECOND, "m": 60 * SECOND, "h": 3600 * SECOND,
}


def parse_go_duration(text):
    """time.ParseDuration: "10s", "1m30s", "100ms", "1.5h"; returns int ns."""
    orig, s = text, text
    invalid = ValueError('time: invalid duration "%s"' % orig)
    neg = False
    if s[:1] in ("+", "-"):
        neg, s = s[0] == "-", s[1:]
    if s == "0":
        return 0
    if s == "":
        raise invalid
    total = Fraction(0)
    while s:
        m = re.match(r"([0-9]*)(\.[0-9]*)?", s)
        whole, frac = m.group(1), m.group(2) or ""
        if whole == "" and frac in ("", "."):
            raise invalid
        s = s[m.end():]
        u = re.match(r"[^0-9.]*", s)
        unit, s = u.group(0), s[u.end():]
        if unit == "":
            raise ValueError('time: missing unit in duration "%s"' % orig)
        if unit not in _GO_UNITS:
            raise ValueError('time: unknown unit "%s" in duration "%s"' % (unit, orig))
        number = Fraction(int(whole or "0"))
        if len(frac) > 1:
            number += Fraction(int(frac[1:]), 10 ** (len(frac) - 1))
        total += number * _GO_UNITS[unit]
    ns = int(total)
    return -ns if neg else ns


def _fmt_frac(value, digits):
    whole, rest = divmod(value, 10 ** digits)
    if rest == 0:
        return str(whole)
    return "%d.%s" % (whole, str(rest).rjust(digits, "0").rstrip("0"))


def format_go_duration(ns):
    """time.Duration.String(): 10s, 24h0m0s, 1.5s, 250ms."""
    if ns == 0:
        return "0s"
    sign, u = ("-" if ns < 0 else ""), abs(ns)
    if u < 1_000:
        return "%s%dns" % (sign, u)
    if u < 1_000_000:
        return sign + _fmt_frac(u, 3) + "\u00b5s"
    if u < SECOND:
        return sign + _fmt_frac(u, 6) + "ms"
    hours, rem = divmod(u, 3600 * SECOND)
    minutes, secs = divmod(rem, 60 * SECOND)
    s = _fmt_frac(secs, 9) + "s"
    if hours:
        return "%s%dh%dm%s" % (sign, hours, minutes, s)
    if minutes:
        return "%s%dm%s" % (sign, minutes, s)
    return sign + s


def go_time(unix):
    """A time.Time as encoding/json writes it (RFC 3339 with nanoseconds, UTC)."""
    whole = int(unix)
    nanos = int(round((unix - whole) * 1e9))
    text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole))
    return text + ("." + ("%09d" % nanos).rstrip("0") if nanos else "") + "Z"


def go_quote(s):
    """Roughly Go's %q for strings (enough for keys and ids)."""
    return json.dumps(s, ensure_ascii=False)


def go_json(obj, pretty=False):
    """encoding/json output: compact, raw UTF-8, HTML characters escaped."""
    if pretty:  # json.MarshalIndent(obj, "", "    ") + "\n"  (agent/http.go marshalJSON)
        text = json.dumps(obj, ensure_ascii=False, indent=4) + "\n"
    else:
        text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
    for ch, esc in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"),
                    ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(ch, esc)
    return text.encode("utf-8")


def json_type(value):
    """The JSON type name Go's decoder uses in its error messages."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    return {dict: "object", list: "array", str: "string"}.get(type(value), "null")


def go_clean_path(p):
    """net/http ServeMux cleanPath(): path.Clean, keeping a trailing slash."""
    if p == "":
        return "/"
    if p[0] != "/":
        p = "/" + p
    out = []
    for part in p.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if out:
                out.pop()
            continue
        out.append(part)
    np = "/" + "/".join(out)
    if p.endswith("/") and np != "/":
        np += "/"
    return np


def go_query_encode(query):
    """url.Values.Encode(): keys sorted, QueryEscape'd."""
    parts = []
    for k in sorted(query):
        for v in query[k]:
            parts.append("%s=%s" % (quote_plus(k), quote_plus(v)))
    return "&".join(parts)


def uuid_error(s):
    """go-memdb UUIDFieldIndex parsing errors for a session id, or None."""
    if len(s) != 36:
        return "UUID must be 36 characters"
    hexdigits = s.replace("-", "")
    if s.count("-") > 4 or len(hexdigits) % 2:
        return "Input (without hyphens) must be even length"
    try:
        bytes.fromhex(hexdigits)
    except ValueError:
        bad = next(c for c in hexdigits if c not in "0123456789abcdefABCDEF")
        return "Invalid UUID: encoding/hex: invalid byte: U+%04X '%s'" % (ord(bad), bad)
    return None


def query_timeout_ns(wait_ns):
    """Server.RPCQueryTimeout: default 5m, capped at 10m, plus jitter < wait/16."""
    timeout = DEFAULT_QUERY_TIME if wait_ns <= 0 else wait_ns
    timeout = min(timeout, MAX_QUERY_TIME)
    jitter = timeout // JITTER_FRACTION
    return timeout + (random.randrange(jitter) if jitter > 0 else 0)


# ---------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------

class ApiError(Exception):
    """An HTTP error answered with a plain-text body (agent/http.go wrap())."""

    def __init__(self, status, body="", headers=None):
        super().__init__(body)
        self.status, self.body, self.headers = status, body, headers or {}


class OpError(Exception):
    """A state-store error inside a KV or txn operation."""


class Stopping(Exception):
    """The server is shutting down: drop the connection without an answer."""


def no_leader():
    return ApiError(500, "No cluster leader")          # structs.ErrNoLeader


# ---------------------------------------------------------------------------
# Data model
# ---------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Entry:
    """structs.DirEntry. Instances are immutable: a write stores a new one."""
    key: str
    value: bytes = None           # None == empty: Go marshals nil []byte as null
    flags: int = 0
    session: str = ""
    lock_index: int = 0
    create_index: int = 0
    modify_index: int = 0

    def same_content(self, other):
        # DirEntry.Equal: LockIndex, Key, Flags, Value, Session
        return (self.lock_index, self.key, self.flags, self.value or None, self.session) == \
            (other.lock_index, other.key, other.flags, other.value or None, other.session)

    def to_api(self, with_value=True):
        # Field order of structs.DirEntry; Session is omitempty.
        out = {"LockIndex": self.lock_index, "Key": self.key, "Flags": self.flags,
               "Value": base64.b64encode(self.value).decode() if (with_value and self.value) else None}
        if self.session:
            out["Session"] = self.session
        out["CreateIndex"] = self.create_index
        out["ModifyIndex"] = self.modify_index
        return out

    @functools.cached_property
    def api_json(self):
        """go_json(self.to_api()), made once: an entry never changes (a write stores a new one),
        and a listing is the entries' JSON joined, byte for byte what go_json makes of the list."""
        return go_json(self.to_api())

    def to_disk(self):
        d = self.to_api()
        d["Session"] = self.session
        return d

    @staticmethod
    def from_disk(d):
        return Entry(key=d["Key"], value=base64.b64decode(d["Value"]) if d["Value"] else None,
                     flags=d["Flags"], session=d.get("Session", ""), lock_index=d["LockIndex"],
                     create_index=d["CreateIndex"], modify_index=d["ModifyIndex"])


@dataclasses.dataclass
class Session:
    """structs.Session (JSON field order as in session.mdx samples)."""
    id: str
    name: str
    node: str
    lock_delay: int
    behavior: str
    ttl: str
    node_checks: list
    create_index: int
    modify_index: int

    def to_api(self):
        return {"ID": self.id, "Name": self.name, "Node": self.node, "LockDelay": self.lock_delay,
                "Behavior": self.behavior, "TTL": self.ttl, "NodeChecks": self.node_checks,
                "ServiceChecks": None, "CreateIndex": self.create_index,
                "ModifyIndex": self.modify_index}

    @staticmethod
    def from_disk(d):
        return Session(id=d["ID"], name=d["Name"], node=d["Node"], lock_delay=d["LockDelay"],
                       behavior=d["Behavior"], ttl=d["TTL"], node_checks=d["NodeChecks"],
                       create_index=d["CreateIndex"], modify_index=d["ModifyIndex"])

    def ttl_ns(self):
        if self.ttl in ("", "0", "0s", "0m", "0h"):
            return 0
        return parse_go_duration(self.ttl)


@dataclasses.dataclass(eq=False)          # hashed by identity: kept in a set
class Watch:
    """One blocked query's interest: an exact key, a key prefix, sessions,
    a service's instances (health, catalog) or, for a prefix with no keys,
    the radix-tree node Consul's memdb watch lands on (see Store.radix_watch)."""
    kind: str            # "key" | "prefix" | "sessions" | "service" | "radix"
    target: str = ""
    node: tuple = ()     # radix: (watched node path, its parent's path)
    fired: bool = False
    thread: object = None      # the connection thread that waits on it
    cancelled: bool = False    # its server went away (/_fake/restart-server): drop the connection

    def matches(self, store, keys, sessions_changed, services_changed):
        if self.kind == "sessions":
            return sessions_changed
        if self.kind == "service":
            return self.target in services_changed
        if self.kind == "key":
            return self.target in keys
        if self.kind == "radix":
            return store.radix_touched(self.target, self.node, keys)
        return any(k.startswith(self.target) for k in keys)


@dataclasses.dataclass
class QueryResult:
    index: int
    value: object = None
    not_found: bool = False
    filtered: bool = False


# ---------------------------------------------------------------------------
# Filter expressions (?filter=, go-bexpr as Consul uses it: api-docs
# features/filtering.mdx). Selectors are dotted paths into the JSON answer;
# through a list (Checks.Status) a match holds when any element matches.
# ---------------------------------------------------------------------------

class FilterError(Exception):
    pass


_FILTER_TOKEN = re.compile(r'\s*(?:(==|!=|\(|\))|"((?:[^"\\]|\\.)*)"|`([^`]*)`|([^\s()"`=!]+))')


def _filter_tokens(text):
    pos, out = 0, []
    text = text.rstrip()
    while pos < len(text):
        m = _FILTER_TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise FilterError("1:%d (%d): no match found, expected: a match expression" % (pos + 1, pos))
        op, dq, bq, word = m.groups()
        if op:
            out.append(("op", op))
        elif dq is not None:
            out.append(("str", json.loads('"%s"' % dq)))
        elif bq is not None:
            out.append(("str", bq))
        else:
            out.append(("word", word))
        pos = m.end()
    return out


class FilterExpr:
    """A parsed expression: parse once, then .match(obj) for every result row.

    Grammar (a subset of go-bexpr's): or / and / not / parentheses over
    `Sel == v`, `Sel != v`, `v in Sel`, `v not in Sel`, `Sel contains v`,
    `Sel not contains v`, `Sel is empty`, `Sel is not empty`, `Sel matches re`,
    `Sel not matches re`. valid(selector) says whether a selector exists.
    """

    def __init__(self, text, valid):
        self.toks, self.pos, self.valid = _filter_tokens(text), 0, valid
        if not self.toks:
            raise FilterError("empty expression")
        self.tree = self._or()
        if self.pos != len(self.toks):
            raise FilterError("unexpected %r" % (self.toks[self.pos][1],))

    # -- parser --
    def _peek(self, k=0):
        i = self.pos + k
        return self.toks[i] if i < len(self.toks) else (None, None)

    def _word(self, w, k=0):
        t = self._peek(k)
        return t[0] == "word" and t[1].lower() == w

    def _take(self):
        t = self._peek()
        if t[0] is None:
            raise FilterError("unexpected end of expression")
        self.pos += 1
        return t

    def _binary(self, word, operand):
        node = operand()
        while self._word(word):
            self.pos += 1
            node = (word, node, operand())
        return node

    def _or(self):
        return self._binary("or", self._and)

    def _and(self):
        return self._binary("and", self._unary)

    def _unary(self):
        if self._word("not"):
            self.pos += 1
            return ("not", self._unary())
        if self._peek() == ("op", "("):
            self.pos += 1
            node = self._or()
            if self._take() != ("op", ")"):
                raise FilterError("expected )")
            return node
        return self._match()

    def _selector(self):
        kind, text = self._take()
        if kind != "word" or not re.fullmatch(r"[A-Za-z_][\w.\-]*", text):
            raise FilterError("expected a selector, got %r" % (text,))
        if not self.valid(text.split(".")):
            raise FilterError('Selector "%s" is not valid' % text)
        return text.split(".")

    def _value(self):
        kind, text = self._take()
        if kind not in ("str", "word"):
            raise FilterError("expected a value, got %r" % (text,))
        return text

    def _match(self):
        # value [not] in Selector
        if self._word("in", 1) or (self._word("not", 1) and self._word("in", 2)):
            value = self._value()
            neg = self._word("not")
            self.pos += 2 if neg else 1
            return ("in", self._selector(), value, neg)
        sel = self._selector()
        t = self._peek()
        if t in (("op", "=="), ("op", "!=")):
            self.pos += 1
            return ("eq", sel, self._value(), t[1] == "!=")
        neg = False
        if self._word("is"):
            self.pos += 1
            if self._word("not"):
                self.pos, neg = self.pos + 1, True
            if not self._word("empty"):
                raise FilterError("expected empty")
            self.pos += 1
            return ("empty", sel, None, neg)
        if self._word("not"):
            self.pos, neg = self.pos + 1, True
        if self._word("contains"):
            self.pos += 1
            return ("in", sel, self._value(), neg)
        if self._word("matches"):
            self.pos += 1
            pattern = self._value()
            try:
                return ("re", sel, re.compile(pattern), neg)
            except re.error as e:
                raise FilterError("invalid regular expression: %s" % e)
        raise FilterError("expected a match operator after %s" % ".".join(sel))

    # -- evaluation --
    @staticmethod
    def _resolve(obj, path):
        """Values the selector reaches (several when it passes through a list)."""
        vals = [obj]
        for name in path:
            nxt = []
            for v in vals:
                for item in (v if isinstance(v, list) else [v]):
                    if isinstance(item, dict) and name in item:
                        nxt.append(item[name])
            vals = nxt
        return vals

    @staticmethod
    def _same(have, want):
        if isinstance(have, bool):
            return want.lower() == ("true" if have else "false")
        if isinstance(have, (int, float)):
            try:
                return have == type(have)(want)
            except ValueError:
                return False
        return isinstance(have, str) and have == want

    def _eval(self, node, obj):
        kind = node[0]
        if kind == "or":
            return self._eval(node[1], obj) or self._eval(node[2], obj)
        if kind == "and":
            return self._eval(node[1], obj) and self._eval(node[2], obj)
        if kind == "not":
            return not self._eval(node[1], obj)
        _, sel, value, neg = node
        vals = self._resolve(obj, sel)
        if kind == "eq":
            hit = any(self._same(v, value) for v in vals)
        elif kind == "in":
            hit = any((value in v) if isinstance(v, (list, dict, str)) else False for v in vals)
        elif kind == "empty":
            hit = all(not v for v in vals)
        else:
            hit = any(isinstance(v, str) and value.search(v) for v in vals)
        return hit != neg

    def match(self, obj):
        return self._eval(self.tree, obj)


def filter_selector_checker(schema):
    """valid(path) against a schema: {field: 1 (a value) | "*" (a map: any
    key below) | {sub-schema}}, as each endpoint's "Filtering" table lists."""
    def valid(path):
        node = schema
        for i, name in enumerate(path):
            if node == "*":
                return i == len(path) - 1
            if not isinstance(node, dict) or name not in node:
                return False
            node = node[name]
        return True
    return valid


def same_record(old, new):
    """Equal but for CreateIndex / ModifyIndex: such a write changes nothing."""
    return old is not None and {k: v for k, v in old.items() if not k.endswith("Index")} == \
        {k: v for k, v in new.items() if not k.endswith("Index")}


def health_check(node, check_id, name, status, *, service_id="", service_name="", tags=None,
                 check_type="", notes="", output="", interval="", timeout=""):
    """structs.HealthCheck in its JSON field order."""
    return {"Node": node, "CheckID": check_id, "Name": name, "Status": status, "Notes": notes,
            "Output": output, "ServiceID": service_id, "ServiceName": service_name,
            "ServiceTags": list(tags or []), "Type": check_type, "Interval": interval,
            "Timeout": timeout, "ExposedPort": 0, "Definition": {}}

# ---------------------------------------------------------------------------
# ACLs (a simple stand-in for Consul's policy engine: prefix rules only)
# ---------------------------------------------------------------------------

RESOURCES = ("key", "session", "agent", "node", "service")
POLICIES = ("read", "write", "deny")


def rules_from_policy(triples):
    """[(rule, name, policy), ...] in the words of Consul's policy language ("key_prefix",
    "key", "service", "node_prefix", ...: a bare resource is an exact rule) -> Authorizer rules."""
    rules = {}
    for rule, name, policy in triples:
        resource, _, prefix = rule.partition("_")
        if resource not in RESOURCES or prefix not in ("", "prefix") or policy not in POLICIES:
            raise ValueError("bad rule %r: want key|session|agent|node|service[_prefix] and read|write|deny"
                             % ([rule, name, policy],))
        if prefix:
            rules.setdefault(resource, {})[name] = policy
        else:
            rules.setdefault("exact", {}).setdefault(resource, {})[name] = policy
    return rules


def service_identity_rules(name):
    """The policy a service identity stands for (acl/policy_templates: service-identity):
    write on the service and its sidecar, read on every service and node."""
    return rules_from_policy([("service", name, "write"), ("service", name + "-sidecar-proxy", "write"),
                              ("service_prefix", "", "read"), ("node_prefix", "", "read")])


class Authorizer:
    """What one resolved token may do. rules: {resource: {prefix: policy}, "exact": {resource:
    {name: policy}}}.

    As in Consul's policy language an exact rule (`key "a"`) wins over prefix rules
    (`key_prefix "a"`); among prefix rules the longest matching prefix wins; with no
    matching rule the default policy (deny) applies.
    """

    def __init__(self, accessor, token, rules=None, management=False, enabled=True):
        self.accessor, self.token = accessor, token
        self.rules = rules or {}
        self.management, self.enabled = management, enabled

    def _policy(self, resource, name):
        exact = self.rules.get("exact", {}).get(resource, {})
        if name in exact:
            return exact[name]
        best, policy = -1, None
        for prefix, pol in self.rules.get(resource, {}).items():
            if name.startswith(prefix) and len(prefix) > best:
                best, policy = len(prefix), pol
        return policy

    def allowed(self, resource, level, name):
        if not self.enabled or self.management:
            return True
        pol = self._policy(resource, name)
        if level == "read":
            return pol in ("read", "write")
        return pol == "write"

    def key_write_prefix(self, prefix):
        """KeyWritePrefix: write on the prefix and nothing weaker below it."""
        if not self.enabled or self.management:
            return True
        if self._policy("key", prefix) != "write":
            return False
        below = list(self.rules.get("key", {}).items()) + list(self.rules.get("exact", {}).get("key", {}).items())
        return all(pol == "write" for p, pol in below if p.startswith(prefix))

    def denied(self, resource, level, name):
        """acl.PermissionDeniedError text (acl/errors.go)."""
        msg = "Permission denied"
        if self.accessor == ANONYMOUS_ACCESSOR:
            msg += ": anonymous token"
        else:
            msg += ": token with AccessorID '%s'" % self.accessor
        msg += " lacks permission '%s:%s'" % (resource, level)
        if name:
            msg += " on %s" % go_quote(name)
        if self.accessor == ANONYMOUS_ACCESSOR:
            msg += (". The anonymous token is used implicitly when a request does not"
                    " specify a token.")
        return ApiError(403, msg)

    def require(self, resource, level, name):
        if not self.allowed(resource, level, name):
            raise self.denied(resource, level, name)


# ---------------------------------------------------------------------------
# The state store: KV, tombstones, sessions, lock delays, raft index,
# blocking-query watches and persistence. One lock guards everything.
# ---------------------------------------------------------------------------

class Store:
    def __init__(self, datadir=None, dc="dc1", node="fake-node", acl_master=None,
                 session_ttl_min=SESSION_TTL_MIN_DEFAULT, tombstone_ttl=TOMBSTONE_TTL_DEFAULT,
                 version=FAKE_CONSUL_VERSION, check_reap_interval=CHECK_REAP_INTERVAL_DEFAULT,
                 deregister_critical_min=DEREGISTER_CRITICAL_MIN_DEFAULT,
                 check_update_interval=CHECK_UPDATE_INTERVAL_DEFAULT, agent_nodes=None):
        """agent_nodes: the node names of the agents (servers) that share this state, each
        registered in the catalog with its own serfHealth; default [node]."""
        self.datadir, self.dc, self.node = datadir, dc, node
        self.agent_nodes = list(agent_nodes or [node])
        self.auth_methods = {}    # name -> auth method (see FakeControl.do_auth_method)
        self.acl_counts = {"logins": 0, "login_failures": 0, "logouts": 0}
        self.check_reap_interval, self.deregister_critical_min = check_reap_interval, deregister_critical_min
        self.check_update_interval = check_update_interval
        self.runner = CheckRunner(self)
        self.next_reap = time.monotonic() + check_reap_interval / SECOND
        self.version = version
        self.node_id = str(uuid.uuid5(uuid.NAMESPACE_DNS, node))
        self.acl_master = acl_master
        self.session_ttl_min, self.tombstone_ttl = session_ttl_min, tombstone_ttl
        self.lock = threading.Lock()
        self.changed = threading.Condition(self.lock)   # wakes blocking queries
        self.timers = threading.Condition(self.lock)    # wakes the timer thread
        self.watches = set()
        self.epoch = 0            # bumped when the whole state is "abandoned"
        self.stopping = False
        self._reset_state()
        self._load()
        self.register_agent_node()
        # Like a new leader (initializeSessionTimers), give every TTL session a full 2 x TTL.
        now = time.monotonic()
        for s in self.sessions.values():
            if s.ttl_ns():
                self.session_deadline[s.id] = now + s.ttl_ns() * SESSION_TTL_MULTIPLIER / SECOND
        self._timer_thread = threading.Thread(target=self._run_timers, name="timers", daemon=True)
        self._timer_thread.start()

    def _reset_state(self):
        self.raft_index = INITIAL_RAFT_INDEX
        self.table_index = {"kvs": 0, "tombstones": 0, "sessions": 0, "nodes": 0, "services": 0,
                            "checks": 0, "service_extinction": 0}
        self.kv = {}                # key -> Entry
        self.tombstones = {}        # key -> [index, reap deadline (monotonic)]
        self.sessions = {}          # id -> Session
        self.session_deadline = {}  # id -> monotonic time of invalidation
        self.lock_delays = {}       # key -> monotonic expiry (not persisted, like Consul)
        self.acl_tokens = {}        # secret -> {"accessor": ..., "rules": {...}}
        self.nodes = {}             # node name -> structs.Node as JSON
        self.services = {}          # (node, service ID) -> service record (see ensure_service)
        self.checks = {}            # (node, check ID) -> structs.HealthCheck as JSON
        self.check_ttl = {}         # (node, check ID) -> [TTL ns, monotonic expiry or None, last output]
        self.check_reap = {}        # (node, check ID) -> [DeregisterCriticalServiceAfter ns, critical since or None]
        self.check_run = {}         # (node, check ID) -> CheckRun: the HTTP and TCP checks the agent runs
        self.service_index = {}     # service name -> index of its last change ("service.<name>")
        self._changed_keys = set()
        self._changed_services = set()
        self._sessions_changed = False
        self._dirty = False

    # -- persistence -------------------------------------------------------

    def _state_file(self):
        return os.path.join(self.datadir, "consul-double-state.json") if self.datadir else None

    def _load(self):
        path = self._state_file()
        if not path or not os.path.exists(path):
            return
        with open(path, encoding="utf-8") as f:
            d = json.load(f)
        if d.get("format") != STATE_FORMAT:
            raise SystemExit("consul_kv: unknown state format in %s" % path)
        now = time.monotonic()
        self.raft_index = d["raft_index"]
        self.table_index.update(d["table_index"])
        self.kv = self._load_kv(d)
        # A journal line written just before a kill, with the state file not yet replaced.
        top = max((e.modify_index for e in self.kv.values()), default=0)
        self.raft_index = max(self.raft_index, top)
        self.table_index["kvs"] = max(self.table_index["kvs"], top)
        self.tombstones = {k: [i, now + self.tombstone_ttl / SECOND] for k, i in d["tombstones"].items()}
        self.sessions = {s["ID"]: Session.from_disk(s) for s in d["sessions"]}
        self.acl_tokens = d.get("acl_tokens", {})
        self.auth_methods = d.get("auth_methods", {})
        cat = d.get("catalog", {})
        self.nodes = {n["Node"]: n for n in cat.get("nodes", [])}
        self.services = {(v["Node"], v["ID"]): v for v in cat.get("services", [])}
        self.checks = {(c["Node"], c["CheckID"]): c for c in cat.get("checks", [])}
        self.service_index = cat.get("service_index", {})
        now = time.monotonic()
        self.check_ttl = {tuple(k.split("\x00", 1)): [t, now + t / SECOND, ""] for k, t in cat.get("ttl", {}).items()
                          if tuple(k.split("\x00", 1)) in self.checks}
        # A restarted agent rebuilds checkReapAfter from its check definitions; criticality counts anew.
        self.check_reap = {tuple(k.split("\x00", 1)): [t, None] for k, t in cat.get("reap", {}).items()
                           if tuple(k.split("\x00", 1)) in self.checks}
        # ... and starts its HTTP and TCP checks again
        self.check_run = {tuple(k.split("\x00", 1)): CheckRun(d, now) for k, d in cat.get("run", {}).items()
                          if tuple(k.split("\x00", 1)) in self.checks}

    def _kv_file(self):
        return os.path.join(self.datadir, "consul-double-kv.jsonl")

    def _load_kv(self, d):
        """The KV from its journal: one entry per line, a later line for a key replacing an
        earlier one ({"del": key} removes it); a torn last line (a kill mid-write) is skipped."""
        if "kv" in d:
            return {e["Key"]: Entry.from_disk(e) for e in d["kv"]}
        kv = {}
        if os.path.exists(self._kv_file()):
            with open(self._kv_file(), encoding="utf-8") as f:
                for line in f:
                    try:
                        rec = json.loads(line)
                    except ValueError:
                        continue
                    if "del" in rec:
                        kv.pop(rec["del"], None)
                    else:
                        kv[rec["Key"]] = Entry.from_disk(rec)
        self._kv_journal = (kv, 0)
        return kv

    def _persist(self, changed_keys=None):
        """Write the state. Everything but the KV is small and rewritten whole; the KV is a
        journal that a commit appends its changed keys to, so loading N keys costs O(N), not
        O(N^2). The journal is rewritten whole when the KV was replaced (a rollback, a wipe, an
        index reset), when the caller does not say what changed, or when it has grown to twice
        the live keys."""
        path = self._state_file()
        if not path:
            return
        journal_kv, lines = getattr(self, "_kv_journal", (None, 0))
        if changed_keys is not None and journal_kv is self.kv and lines <= 2 * len(self.kv) + 1024:
            with open(self._kv_file(), "a", encoding="utf-8") as f:
                for k in sorted(changed_keys):
                    e = self.kv.get(k)
                    f.write(json.dumps(e.to_disk() if e is not None else {"del": k}) + "\n")
            self._kv_journal = (self.kv, lines + len(changed_keys))
        else:
            tmp = self._kv_file() + ".tmp"
            with open(tmp, "w", encoding="utf-8") as f:
                for e in self.kv.values():
                    f.write(json.dumps(e.to_disk()) + "\n")
            os.replace(tmp, self._kv_file())
            self._kv_journal = (self.kv, len(self.kv))
        d = {"format": STATE_FORMAT, "raft_index": self.raft_index,
             "table_index": self.table_index,
             "tombstones": {k: v[0] for k, v in self.tombstones.items()},
             "sessions": [s.to_api() for s in self.sessions.values()],
             "acl_tokens": self.acl_tokens, "auth_methods": self.auth_methods,
             "catalog": {"nodes": list(self.nodes.values()), "services": list(self.services.values()),
                         "checks": list(self.checks.values()), "service_index": self.service_index,
                         "ttl": {"%s\x00%s" % k: v[0] for k, v in self.check_ttl.items()},
                         "reap": {"%s\x00%s" % k: v[0] for k, v in self.check_reap.items()},
                         "run": {"%s\x00%s" % k: v.definition for k, v in self.check_run.items()}}}
        tmp = path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(d, f)
        os.replace(tmp, path)

    # -- commit / watches ----------------------------------------------------

    def next_index(self):
        """Every raft-applied write takes the next raft index."""
        self.raft_index += 1
        self._dirty = True
        return self.raft_index

    def commit(self):
        """After a write (lock held): persist and wake the matching watches."""
        keys, sess, svcs = self._changed_keys, self._sessions_changed, self._changed_services
        self._changed_keys, self._sessions_changed, self._changed_services = set(), False, set()
        if self._dirty:
            self._persist(keys)
            self._dirty = False
        if keys or sess or svcs:
            for w in self.watches:
                if not w.fired and w.matches(self, keys, sess, svcs):
                    w.fired = True
            self.changed.notify_all()

    def abandon(self):
        """Like a snapshot restore: every blocked query returns (lock held)."""
        self.epoch += 1
        self.changed.notify_all()
        self.timers.notify_all()

    def shutdown(self):
        with self.lock:
            self.stopping = True
            self.changed.notify_all()
            self.timers.notify_all()
            self.runner.stop()

    # -- blocking queries (agent/blockingquery/blockingquery.go) ---------------

    def query(self, fn, watch, min_index, wait_ns):
        """Run fn() (lock held) and, when min_index > 0, block until its index
        moves past min_index, the watched data changes, the state is abandoned
        or the timeout (wait + jitter) passes. Never polls."""
        with self.lock:
            if min_index == 0:
                return fn()
            deadline = time.monotonic() + query_timeout_ns(wait_ns) / SECOND
            seen_not_found = False
            while True:
                epoch = self.epoch
                res = fn()
                if res.not_found:
                    if seen_not_found:
                        min_index = res.index   # still absent: the result did not change
                    seen_not_found = True
                if res.index > min_index:
                    return res
                w = watch() if callable(watch) else Watch(*watch)
                w.thread = threading.current_thread()
                self.watches.add(w)
                try:
                    while not w.fired and self.epoch == epoch and not self.stopping:
                        remaining = deadline - time.monotonic()
                        if remaining <= 0:
                            return res
                        self.changed.wait(remaining)
                finally:
                    self.watches.discard(w)
                if self.stopping or w.cancelled:
                    raise Stopping()
                if self.epoch != epoch:
                    return res

    # -- index helpers (agent/consul/state/kvs.go) ----------------------------

    def kvs_max_index(self):
        return max(self.table_index["kvs"], self.table_index["tombstones"])

    def list_index(self, prefix, entries):
        """kvsListTxn: max ModifyIndex in the prefix or of its tombstones,
        else the whole KV table's index."""
        idx = self.kvs_max_index()
        lindex = max((e.modify_index for e in entries), default=0)
        if prefix != "":
            gindex = max((t[0] for k, t in self.tombstones.items() if k.startswith(prefix)), default=0)
            lindex = max(lindex, gindex)
        else:
            lindex = idx
        return lindex if lindex != 0 else idx

    def _sorted_keys(self):
        """The stored keys, sorted; cached as _tree_keys is (a listing of 50,000 keys must not
        sort them all again for every read)."""
        stamp = (id(self.kv), self.table_index["kvs"], len(self.kv))
        if getattr(self, "_sorted_stamp", None) != stamp:
            self._sorted_cache, self._sorted_stamp = sorted(self.kv), stamp
        return self._sorted_cache

    def entries_with_prefix(self, prefix):
        keys = self._sorted_keys()
        out = []
        for k in keys[bisect.bisect_left(keys, prefix):]:
            if not k.startswith(prefix):
                break
            out.append(self.kv[k])
        return out

    # -- the watch of a prefix without keys (go-immutable-radix SeekPrefixWatch) --
    #
    # memdb stores each key as key + "\x00" in a radix tree; a prefix query
    # watches the mutate channel of the deepest node its walk reaches. When no
    # key has the prefix, that is its nearest existing ancestor, or the child
    # whose edge diverges from the prefix. A write closes the channels of the
    # nodes it rewrites: every node on the path to the written key, and a node
    # whose edge is split or merged. So a blocking list on an empty prefix
    # wakes on writes near it, and then answers the whole KV index (kvsListTxn),
    # which every KV write has moved: 404 with a higher X-Consul-Index.

    def _tree_keys(self):
        """The stored keys as memdb indexes them (key + "\x00"), sorted; cached until the KV
        table changes (every change moves its index or replaces the dict)."""
        stamp = (id(self.kv), self.table_index["kvs"], len(self.kv))
        if getattr(self, "_tree_stamp", None) != stamp:
            self._tree_cache, self._tree_stamp = sorted(k + "\x00" for k in self.kv), stamp
        return self._tree_cache

    def radix_watch(self, prefix):
        """(watched node path, parent node path) for a prefix with no keys."""
        keys = self._tree_keys()
        node, parent = "", None
        while len(node) < len(prefix):
            edge = node + prefix[len(node)]
            lo = bisect.bisect_left(keys, edge)
            hi = bisect.bisect_left(keys, edge + "\U0010ffff")
            if lo == hi:
                break
            child = os.path.commonprefix([keys[lo], keys[hi - 1]])
            if not prefix.startswith(child):
                return child, node
            node, parent = child, node
        return node, parent

    def radix_touched(self, prefix, watched, changed_keys):
        node, parent = watched
        floor = len(parent) if parent is not None else -1
        for k in changed_keys:
            k0 = k + "\x00"
            if k0.startswith(node) or len(os.path.commonprefix([k0, node])) > floor:
                return True
        return self.radix_watch(prefix) != watched

    # -- KV primitives (state/kvs.go); lock held, idx = this write's index -----

    def _put_entry(self, idx, entry):
        self.kv[entry.key] = entry
        self.table_index["kvs"] = idx
        self._changed_keys.add(entry.key)

    def kv_set(self, idx, entry, update_session=False):
        """kvsSetTxn. Preserves CreateIndex and (unless told) Session; an
        identical write changes nothing, not even ModifyIndex."""
        existing = self.kv.get(entry.key)
        create = existing.create_index if existing else idx
        session = entry.session if update_session else (existing.session if existing else "")
        new = dataclasses.replace(entry, value=entry.value or None, create_index=create,
                                  session=session, modify_index=idx)
        if existing is not None and existing.same_content(new):
            return existing
        self._put_entry(idx, new)
        return new

    def kv_cas(self, idx, entry, cas):
        """kvsSetCASTxn: cas 0 = create only; else ModifyIndex must match."""
        existing = self.kv.get(entry.key)
        if cas == 0 and existing is not None:
            return False, None
        if cas != 0 and (existing is None or existing.modify_index != cas):
            return False, None
        return True, self.kv_set(idx, entry)

    def kv_delete(self, idx, key):
        """kvsDeleteTxn: leaves a tombstone so list indexes never slide back."""
        if key not in self.kv:
            return
        del self.kv[key]
        self.tombstones[key] = [idx, time.monotonic() + self.tombstone_ttl / SECOND]
        self.table_index["tombstones"] = idx
        self.table_index["kvs"] = idx
        self._changed_keys.add(key)
        self.timers.notify_all()

    def kv_delete_cas(self, idx, cas, key):
        """kvsDeleteCASTxn: a missing key counts as success."""
        existing = self.kv.get(key)
        if existing is None or existing.modify_index != cas:
            return existing is None
        self.kv_delete(idx, key)
        return True

    def kv_delete_tree(self, idx, prefix):
        """kvsDeleteTreeTxn: one tombstone for the prefix (none for the root)."""
        doomed = [k for k in self.kv if k.startswith(prefix)]
        if not doomed:
            return
        for k in doomed:
            del self.kv[k]
            self._changed_keys.add(k)
        if prefix != "":
            self.tombstones[prefix] = [idx, time.monotonic() + self.tombstone_ttl / SECOND]
            self.table_index["tombstones"] = idx
            self.timers.notify_all()
        self.table_index["kvs"] = idx

    def kv_lock(self, idx, entry):
        """kvsLockTxn (lock delay is checked before, see lock_delay_active)."""
        if entry.session == "":
            raise OpError("missing session")
        err = uuid_error(entry.session)
        if err:
            raise OpError("failed session lookup: %s" % err)
        if entry.session not in self.sessions:
            raise OpError("invalid session %s" % go_quote(entry.session))
        existing = self.kv.get(entry.key)
        if existing is not None:
            if existing.session == entry.session:
                lock_index = existing.lock_index          # already held: no increment
            elif existing.session:
                return False, None                        # held by someone else
            else:
                lock_index = existing.lock_index + 1
        else:
            lock_index = 1
        return True, self.kv_set(idx, dataclasses.replace(entry, lock_index=lock_index), True)

    def kv_unlock(self, idx, entry):
        """kvsUnlockTxn: only the holder releases; LockIndex is kept."""
        if entry.session == "":
            raise OpError("missing session")
        existing = self.kv.get(entry.key)
        if existing is None or existing.session != entry.session:
            return False, None
        new = dataclasses.replace(entry, session="", lock_index=existing.lock_index)
        return True, self.kv_set(idx, new, True)

    def lock_delay_active(self, key):
        expiry = self.lock_delays.get(key)
        return expiry is not None and expiry > time.monotonic()

    # -- sessions (state/session.go, agent/consul/session_ttl.go) -------------

    def session_invalidate(self, sid, idx=None):
        """Destroy a session: release or delete its keys, start lock delays."""
        s = self.sessions.pop(sid, None)
        self.session_deadline.pop(sid, None)
        if s is None:
            return
        if idx is None:
            idx = self.next_index()
        delay = min(s.lock_delay, MAX_LOCK_DELAY)
        now = time.monotonic()
        for e in [e for e in self.kv.values() if e.session == sid]:
            if s.behavior == "delete":
                self.kv_delete(idx, e.key)
            else:
                self.kv_set(idx, dataclasses.replace(e, session=""), update_session=True)
            if delay > 0:
                self.lock_delays[e.key] = now + delay / SECOND
        self.table_index["sessions"] = idx
        self._sessions_changed = True

    def session_reset_timer(self, s):
        ttl = s.ttl_ns()
        if ttl:
            self.session_deadline[s.id] = time.monotonic() + ttl * SESSION_TTL_MULTIPLIER / SECOND
            self.timers.notify_all()

    def reap_tombstones(self, everything=False):
        """Tombstone GC: a raft write that does not move the KV table index."""
        now = time.monotonic()
        doomed = [k for k, (_, due) in self.tombstones.items() if everything or due <= now]
        if doomed:
            self.next_index()
            for k in doomed:
                del self.tombstones[k]
        return len(doomed)

    def _run_timers(self):
        """Session TTL expiry, tombstone reaping and running checks, sleeping until the next due time."""
        with self.lock:
            while not self.stopping:
                now = time.monotonic()
                for sid in [sid for sid, due in self.session_deadline.items() if due <= now]:
                    self.session_invalidate(sid)
                self.expire_ttl_checks(now)
                self.reap_critical_services(now)
                self.reap_tombstones()
                self.runner.dispatch(now)
                self.commit()
                dues = list(self.session_deadline.values()) + [t[1] for t in self.tombstones.values()]
                dues += [t[1] for t in self.check_ttl.values() if t[1] is not None]
                dues += self.runner.due_times()
                if any(r[1] is not None for r in self.check_reap.values()):
                    dues.append(self.next_reap)
                timeout = (min(dues) - time.monotonic()) if dues else None
                if timeout is None or timeout > 0:
                    self.timers.wait(timeout)

    # -- catalog: nodes, services, checks (state/catalog.go) --------------------
    #
    # One raft index for everything: every catalog write takes the next index,
    # as KV writes do. A service name's index ("service.<name>" in the index
    # table) moves when one of its instances, their checks or their node's
    # checks change; health and catalog queries on that name answer it and
    # block on it.

    def catalog_max_index(self):
        return max(self.table_index["nodes"], self.table_index["services"], self.table_index["checks"])

    def service_query_index(self, name, exists):
        """maxIndexForService: the name's index; for a name without instances
        the last extinction index, else the whole catalog's."""
        if not exists and self.table_index["service_extinction"]:
            return self.table_index["service_extinction"]
        return self.service_index.get(name) or self.catalog_max_index()

    def _touch_service(self, idx, name):
        self.service_index[name] = idx
        self._changed_services.add(name)

    def _touch_node_services(self, idx, node):
        for (n, _), svc in self.services.items():
            if n == node:
                self._touch_service(idx, svc["Service"])

    def ensure_node(self, idx, node):
        """node: structs.Node fields. A registration that changes nothing writes nothing."""
        old = self.nodes.get(node["Node"])
        new = dict(node, CreateIndex=old["CreateIndex"] if old else idx, ModifyIndex=idx)
        if same_record(old, new):
            return
        self.nodes[node["Node"]] = new
        self.table_index["nodes"] = idx
        self._touch_node_services(idx, node["Node"])

    def ensure_service(self, idx, node, svc):
        """svc: ID, Service, Tags, Address, Port, Meta, Weights, EnableTagOverride."""
        key = (node, svc["ID"])
        old = self.services.get(key)
        new = dict(svc, Node=node, CreateIndex=old["CreateIndex"] if old else idx, ModifyIndex=idx)
        if same_record(old, new):
            return
        self.services[key] = new
        self.table_index["services"] = idx
        self._touch_service(idx, svc["Service"])
        if old is not None and old["Service"] != svc["Service"]:
            self._touch_service(idx, old["Service"])
            self._note_extinction(idx, old["Service"])

    def ensure_check(self, idx, check):
        """check: structs.HealthCheck JSON fields (Node, CheckID, Status, ...).
        A check turning critical invalidates the sessions that name it."""
        key = (check["Node"], check["CheckID"])
        old = self.checks.get(key)
        new = dict(check, CreateIndex=old["CreateIndex"] if old else idx, ModifyIndex=idx)
        if same_record(old, new):
            return
        self.checks[key] = new
        self.table_index["checks"] = idx
        if key in self.check_reap:
            was = old["Status"] == "critical" if old else False
            if new["Status"] != "critical":
                self.check_reap[key][1] = None
            elif not was or self.check_reap[key][1] is None:
                self.check_reap[key][1] = time.monotonic()
        svc = self.services.get((check["Node"], check["ServiceID"])) if check["ServiceID"] else None
        if svc is not None:
            self._touch_service(idx, svc["Service"])
        elif not check["ServiceID"]:
            self._touch_node_services(idx, check["Node"])
        if new["Status"] == "critical":
            self._invalidate_sessions_of_check(idx, check["Node"], check["CheckID"])

    def _invalidate_sessions_of_check(self, idx, node, check_id):
        """state/catalog.go ensureCheckTxn: a critical check (or a deleted one)
        invalidates every session that lists it."""
        for sid, s in list(self.sessions.items()):
            if s.node == node and check_id in (s.node_checks or []):
                self.session_invalidate(sid, idx)

    def _note_extinction(self, idx, name):
        if not any(v["Service"] == name for v in self.services.values()):
            self.table_index["service_extinction"] = idx

    def delete_check(self, idx, node, check_id):
        c = self.checks.pop((node, check_id), None)
        self.check_ttl.pop((node, check_id), None)
        self.check_reap.pop((node, check_id), None)
        self.check_run.pop((node, check_id), None)      # its runner stops (a result in flight is dropped)
        if c is None:
            return False
        self.table_index["checks"] = idx
        svc = self.services.get((node, c["ServiceID"])) if c["ServiceID"] else None
        if svc is not None:
            self._touch_service(idx, svc["Service"])
        elif not c["ServiceID"]:
            self._touch_node_services(idx, node)
        self._invalidate_sessions_of_check(idx, node, check_id)
        return True

    def delete_service(self, idx, node, service_id):
        svc = self.services.pop((node, service_id), None)
        if svc is None:
            return False
        for (n, cid), c in list(self.checks.items()):
            if n == node and c["ServiceID"] == service_id:
                self.delete_check(idx, n, cid)
        self.table_index["services"] = idx
        self._touch_service(idx, svc["Service"])
        self._note_extinction(idx, svc["Service"])
        return True

    def delete_node(self, idx, node):
        if node not in self.nodes:
            return False
        for (n, sid) in [k for k in self.services if k[0] == node]:
            self.delete_service(idx, n, sid)
        for (n, cid) in [k for k in self.checks if k[0] == node]:
            self.delete_check(idx, n, cid)
        del self.nodes[node]
        self.table_index["nodes"] = idx
        for sid, s in list(self.sessions.items()):
            if s.node == node:
                self.session_invalidate(sid, idx)
        return True

    def register_agent_node(self):
        """Each agent's own node and its serfHealth check, as the leader
        registers every LAN member (leader.go reconcileMember)."""
        with self.lock:
            self._register_agent_node()

    def _register_agent_node(self):
        for node in self.agent_nodes:
            if node in self.nodes and (node, SERF_HEALTH) in self.checks:
                continue
            idx = self.next_index()
            self.ensure_node(idx, {
                "ID": str(uuid.uuid5(uuid.NAMESPACE_DNS, node)), "Node": node, "Address": "127.0.0.1",
                "Datacenter": self.dc,
                "TaggedAddresses": {"lan": "127.0.0.1", "lan_ipv4": "127.0.0.1",
                                    "wan": "127.0.0.1", "wan_ipv4": "127.0.0.1"},
                "Meta": {"consul-network-segment": "", "consul-version": self.version}})
            self.ensure_check(idx, health_check(node, SERF_HEALTH, "Serf Health Status",
                                                "passing", output="Agent alive and reachable"))
            self.commit()

    def set_check_status(self, idx, node, check_id, status, output=None):
        c = self.checks[(node, check_id)]
        self.ensure_check(idx, dict(c, Status=status, Output=c["Output"] if output is None else output))

    def expire_ttl_checks(self, now):
        """A TTL check not updated within its TTL turns critical (agent/checks CheckTTL), its output
        "TTL expired", followed by the last output a pass, warn, fail or update gave."""
        due = [k for k, (_, at, _) in self.check_ttl.items() if at is not None and at <= now]
        if not due:
            return
        idx = self.next_index()
        for k in due:
            self.check_ttl[k][1] = None
            last = self.check_ttl[k][2]     # CheckTTL.getExpiredOutput
            output = "TTL expired (last output before timeout follows): %s" % last if last else "TTL expired"
            self.set_check_status(idx, k[0], k[1], "critical", output)

    def reap_critical_services(self, now):
        """agent.go reapServicesInternal, every check_reap_interval: a service one of whose checks
        has been critical for longer than its DeregisterCriticalServiceAfter is deregistered."""
        if now < self.next_reap:
            return
        self.next_reap = now + self.check_reap_interval / SECOND
        due = {(k[0], self.checks[k]["ServiceID"]) for k, (after, since) in self.check_reap.items()
               if since is not None and now - since > after / SECOND and self.checks[k]["ServiceID"]}
        if due:
            idx = self.next_index()
            for node, sid in sorted(due):
                self.delete_service(idx, node, sid)

    def health_rows(self, name):
        """CheckServiceNodes of a service name, ordered by node and service ID."""
        rows = []
        for (node, sid) in sorted(k for k, v in self.services.items() if v["Service"] == name):
            svc = self.services[(node, sid)]
            checks = [self.checks[k] for k in sorted(self.checks)
                      if k[0] == node and self.checks[k]["ServiceID"] in ("", sid)]
            rows.append((self.nodes.get(node), svc, checks))
        return rows

    # -- ACL token table ----------------------------------------------------

    def resolve_token(self, token):
        """Secret -> Authorizer. Unknown secret -> 403 "ACL not found"."""
        if self.acl_master is None:
            return Authorizer("", token, enabled=False)
        if token in ("", "anonymous"):       # "anonymous" is that token's SecretID
            t = self.acl_tokens.get("anonymous", {})
            return Authorizer(ANONYMOUS_ACCESSOR, token, t.get("rules"))
        if token == self.acl_master:
            return Authorizer(str(uuid.uuid5(uuid.NAMESPACE_URL, "master:" + token)), token,
                              management=True)
        t = self.acl_tokens.get(token)
        if t is None or t.get("expires", float("inf")) <= time.time():
            raise ApiError(403, "ACL not found")    # an expired token is not found (structs.ACLToken.IsExpired)
        return Authorizer(t["accessor"], token, t["rules"])


# ---------------------------------------------------------------------------
# HTTP and TCP checks run as an agent runs them (agent/checks/check.go CheckHTTP,
# CheckTCP, StatusHandler; agent/local/state.go UpdateCheck). One timer thread
# (the Store's) says when a check is due; a few worker threads run it; the
# result is written through Store.set_check_status, so indexes move and
# blocking health queries wake as for any other check change. Only loopback
# addresses are contacted: tests send traffic to loopback alone.
# ---------------------------------------------------------------------------

class CheckRun:
    """One HTTP or TCP check the agent runs: its definition (plain JSON, persisted) and schedule."""

    def __init__(self, definition, now):
        self.definition = definition
        self.interval = max(definition["Interval"], CHECK_MIN_INTERVAL) / SECOND
        self.due = now + random.uniform(0, self.interval)    # lib.RandomStagger(Interval)
        self.in_flight = False
        # checks.NewStatusHandler: counters start at their thresholds, so the first result counts
        self.successes = definition["SuccessBeforePassing"]
        self.failures = definition["FailuresBeforeCritical"]
        self.pending_output, self.pending_due = None, None  # an output-only change not yet written


def loopback_refusal(definition):
    """Why the double will not run this check (its target is not a loopback address), or None."""
    if definition.get("HTTP"):
        try:
            host = urlsplit(definition["HTTP"]).hostname
        except ValueError:
            return None                     # an unparsable URL fails as Consul's would, at run time
        target = definition["HTTP"]
    else:
        host, target = split_host_port(definition["TCP"])[0], definition["TCP"]
    if host is None or host == "localhost":
        return None
    try:
        if ipaddress.ip_address(host).is_loopback:
            return None
    except ValueError:
        pass
    return ("consul double: check not run: %s is not a loopback address (the double contacts "
            "127.0.0.0/8, ::1 and localhost only)" % target)


def split_host_port(text):
    """net.SplitHostPort, roughly: "h:p" or "[v6]:p" -> (host, port text); no port -> (text, None)."""
    m = re.fullmatch(r"\[([^\]]*)\]:([^:]*)|([^:]*):([^:]*)", text)
    if not m:
        return text, None
    return (m.group(1), m.group(2)) if m.group(1) is not None else (m.group(3), m.group(4))


def dial_tcp(host, port, timeout):
    """net.Dialer.Dial("tcp", ...) within timeout seconds: a socket, or ConnectionError with Go's text."""
    ip = "127.0.0.1" if host in ("localhost", "") else host
    shown = "[%s]:%s" % (ip, port) if ":" in ip else "%s:%s" % (ip, port)
    try:
        return socket.create_connection((ip, int(port)), timeout=timeout)
    except socket.timeout:
        raise ConnectionError("dial tcp %s: i/o timeout" % shown)
    except OSError as e:
        why = os.strerror(e.errno).lower() if e.errno else str(e)
        raise ConnectionError("dial tcp %s: connect: %s" % (shown, why))


def run_tcp_check(d):
    """CheckTCP.check: a connection within the timeout passes, anything else is critical."""
    host, port = split_host_port(d["TCP"])
    if port is None:
        return "critical", "dial tcp: address %s: missing port in address" % d["TCP"]
    if not port.isdigit() or int(port) > 65535:
        return "critical", "dial tcp: address %s: invalid port" % d["TCP"]
    try:
        dial_tcp(host, port, (d["Timeout"] or CHECK_TIMEOUT_DEFAULT) / SECOND).close()
    except ConnectionError as e:
        return "critical", str(e)
    return "passing", "TCP connect %s: Success" % d["TCP"]


def run_http_check(d):
    """CheckHTTP.check: 2xx passing, 429 warning, any other answer or an error critical; the output
    is "HTTP <method> <url>: <status> Output: <body>", the body cut to its last OutputMaxSize bytes
    (a circular buffer). The timeout covers connecting, the request and the body."""
    method, url = d["Method"] or "GET", d["HTTP"]
    fail = lambda why: ("critical", "%s %s: %s" % (method[:1] + method[1:].lower(), go_quote(url), why))  # noqa: E731
    deadline = time.monotonic() + (d["Timeout"] or CHECK_TIMEOUT_DEFAULT) / SECOND
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        return fail("unsupported protocol scheme %s" % go_quote(parts.scheme))
    if not parts.hostname:
        return fail("http: no Host in request URL")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return fail("invalid port in URL")
    headers = d["Header"] or {}
    conn = None
    try:
        sock = dial_tcp(parts.hostname or "", port, max(deadline - time.monotonic(), 0.001))
        if parts.scheme == "https":
            ctx = ssl.create_default_context()
            if d["TLSSkipVerify"]:
                ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
            sock = ctx.wrap_socket(sock, server_hostname=d["TLSServerName"] or parts.hostname)
        conn = http.client.HTTPConnection(parts.hostname, port)
        conn.sock = sock
        target = (parts.path or "/") + ("?" + parts.query if parts.query else "")
        conn.putrequest(method, target, skip_host="Host" in headers, skip_accept_encoding=True)
        for name, values in headers.items():
            for v in values:
                conn.putheader(name, v)
        if "User-Agent" not in headers:
            conn.putheader("User-Agent", CHECK_USER_AGENT)
        if "Accept" not in headers:
            conn.putheader("Accept", "text/plain, text/*, */*")
        conn.putheader("Connection", "close")           # the check's transport disables keep-alives
        body = d["Body"].encode()
        if body or method in ("POST", "PUT", "PATCH"):
            conn.putheader("Content-Length", str(len(body)))
        sock.settimeout(max(deadline - time.monotonic(), 0.001))
        conn.endheaders(body or None)
        resp = conn.getresponse()
        output = bytearray()
        limit = min(d["OutputMaxSize"] or CHECK_OUTPUT_MAX, CHECK_OUTPUT_MAX)
        while not resp.isclosed():      # the body until EOF or the deadline (Consul logs a read error)
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                sock.settimeout(left)
                chunk = resp.read(8192)
            except (OSError, http.client.HTTPException):
                break
            if not chunk:
                break
            output += chunk
            del output[:-limit]
    except ConnectionError as e:
        return fail(str(e))
    except socket.timeout:
        return fail("context deadline exceeded (Client.Timeout exceeded while awaiting headers)")
    except http.client.RemoteDisconnected:
        return fail("EOF")
    except (OSError, http.client.HTTPException) as e:
        return fail(str(e) or type(e).__name__)
    finally:
        if conn is not None:
            conn.close()
    text = "HTTP %s %s: %s Output: %s" % (method, url, ("%d %s" % (resp.status, resp.reason)).rstrip(),
                                          output.decode("utf-8", "replace"))
    if 200 <= resp.status <= 299:
        return "passing", text
    return ("warning" if resp.status == 429 else "critical"), text


class CheckRunner:
    """Runs a Store's HTTP and TCP checks (store.check_run). Everything here but the probes
    themselves runs with store.lock held; the Store's timer thread calls dispatch() and sleeps
    until the earliest of due_times()."""

    def __init__(self, store):
        self.store = store
        self.jobs = queue.Queue()       # at most one job per check: bounded by CHECK_RUN_MAX
        self.workers = []

    def start(self, key, definition, check):
        """A check (re)registered through the agent: stop its old runner, start a new one.
        Returns the check to store: critical, saying why, when the double will not run it."""
        s = self.store
        s.check_run.pop(key, None)
        if definition is None:
            return check
        why = loopback_refusal(definition)
        if why is None and len(s.check_run) >= CHECK_RUN_MAX:
            why = "consul double: check not run: %d checks run already (its bound)" % CHECK_RUN_MAX
        if why:
            return dict(check, Status="critical", Output=why)
        s.check_run[key] = CheckRun(definition, time.monotonic())
        s.timers.notify_all()
        return check

    def due_times(self):
        runs = self.store.check_run.values()
        return [r.due for r in runs if not r.in_flight] + [r.pending_due for r in runs if r.pending_due]

    def dispatch(self, now):
        """Hand every due check to a worker; write output-only changes whose time has come."""
        s = self.store
        for key, run in s.check_run.items():
            if not run.in_flight and run.due <= now:
                run.in_flight = True
                if len(self.workers) < CHECK_WORKERS:
                    t = threading.Thread(target=self._work, name="check-runner", daemon=True)
                    self.workers.append(t)
                    t.start()
                self.jobs.put((key, run))
            if run.pending_due is not None and run.pending_due <= now:
                output, run.pending_output, run.pending_due = run.pending_output, None, None
                if key in s.checks:
                    s.set_check_status(s.next_index(), key[0], key[1], s.checks[key]["Status"], output)

    def stop(self):
        for _ in self.workers:
            self.jobs.put(None)

    def _work(self):
        s = self.store
        while True:
            job = self.jobs.get()
            if job is None:
                return
            key, run = job
            try:
                status, output = (run_http_check if run.definition.get("HTTP") else run_tcp_check)(run.definition)
            except Exception as e:          # a bug in the double: say so, loudly
                traceback.print_exc()
                status, output = "critical", "consul double internal error: %r" % e
            with s.lock:
                if s.stopping:
                    return
                if s.check_run.get(key) is not run:
                    continue                # deregistered or registered anew meanwhile
                run.in_flight = False
                run.due = time.monotonic() + run.interval
                self._update(key, run, status, output)
                s.commit()
                s.timers.notify_all()

    def _update(self, key, run, status, output):
        """StatusHandler.updateCheck, then the agent's local state UpdateCheck: a status change is
        written at once; an output-only change is written check_update_interval/2 plus up to
        check_update_interval later (or at once when that is 0)."""
        s, d = self.store, run.definition
        if status in ("passing", "warning"):
            run.successes, run.failures = run.successes + 1, 0
            if run.successes < d["SuccessBeforePassing"]:
                return
        else:
            run.failures, run.successes = run.failures + 1, 0
            if run.failures < d["FailuresBeforeCritical"]:
                if run.failures < (d["FailuresBeforeWarning"] or d["FailuresBeforeCritical"]):
                    return
                status = "warning"
        c = s.checks.get(key)
        if c is None:
            return
        if c["Status"] == status and c["Output"] == output:
            run.pending_output = run.pending_due = None
            return
        if c["Status"] == status and s.check_update_interval > 0:
            run.pending_output = output
            if run.pending_due is None:
                half = s.check_update_interval / SECOND / 2
                run.pending_due = time.monotonic() + half + random.uniform(0, 2 * half)
            return
        run.pending_output = run.pending_due = None
        s.set_check_status(s.next_index(), key[0], key[1], status, output)


# ---------------------------------------------------------------------------
# Fault injection state (/_fake/...)
# ---------------------------------------------------------------------------

class Faults:
    def __init__(self):
        self.lock = threading.Lock()
        self.cond = threading.Condition(self.lock)
        self.reset()

    def reset(self):
        self.fail_count, self.fail_code, self.fail_body = 0, 500, ""
        self.fail_path, self.fail_method = "", ""
        self.hang_count, self.hang_seconds, self.hang_then = 0, 0.0, "answer"
        self.release_gen = getattr(self, "release_gen", 0) + 1
        self.slow_ms = 0
        self.pad_count, self.pad_bytes, self.pad_path, self.pad_shape = 0, 0, "", "numbers"
        self.stale_empty_count, self.stale_empty_index = 0, 1
        self.leader_known, self.leaderless_since, self.leaderless_reads = True, 0.0, "fail"
        self.stale_lag_ms = 0                 # X-Consul-LastContact of stale reads while a leader is known
        self.consistent_reads = "ok"          # ok | verifying | lost
        self.counts = {}                      # API requests by endpoint (first two path segments after /v1/)
        self.requests = []

    def take_fail(self, method, path):
        with self.lock:
            if self.fail_count <= 0:
                return None
            if self.fail_path and not path.startswith(self.fail_path):
                return None
            if self.fail_method and method != self.fail_method:
                return None
            self.fail_count -= 1
            return self.fail_code, self.fail_body

    def take_pad(self, path):
        with self.lock:
            if self.pad_count <= 0 or not path.startswith(self.pad_path):
                return None
            self.pad_count -= 1
            return self.pad_bytes, self.pad_shape

    def take_hang(self):
        with self.lock:
            if self.hang_count <= 0:
                return None
            self.hang_count -= 1
            return self.hang_seconds, self.hang_then, self.release_gen

    def hang(self, seconds, gen, stopping):
        """Wait until released, the time passes, or the server stops."""
        deadline = time.monotonic() + seconds if seconds > 0 else None
        with self.cond:
            while self.release_gen == gen and not stopping():
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return
                self.cond.wait(remaining)

    def release(self):
        with self.cond:
            self.hang_count = 0
            self.release_gen += 1
            self.cond.notify_all()

    def wait_until(self, pred, seconds, stopping):
        """Wait (up to seconds) for pred() to hold; pred is read under the lock."""
        deadline = time.monotonic() + seconds
        with self.cond:
            while not pred():
                remaining = deadline - time.monotonic()
                if remaining <= 0 or stopping():
                    return False
                self.cond.wait(remaining)
            return True

    def take_stale_empty(self):
        with self.lock:
            if self.stale_empty_count <= 0:
                return None
            self.stale_empty_count -= 1
            return self.stale_empty_index

    def log(self, record):
        parts = record["path"].split("/")
        group = "/".join(parts[:4]) if len(parts) > 3 else record["path"]
        with self.lock:
            self.requests.append(record)
            del self.requests[:-10000]
            self.counts[group] = self.counts.get(group, 0) + 1


def padded(body, size, shape):
    """A listing grown to at least `size` bytes and still valid JSON with the same entries: the
    last entry gets an unknown field, an array of zeros (numbers) or one long string (string)."""
    room = max(0, size - len(body) - 10)
    if shape == "numbers":
        pad = b"[" + b",".join([b"0"] * max(1, room // 2)) + b"]"
    else:
        pad = b'"' + b"a" * room + b'"'
    return body[:-2] + b',"Pad":' + pad + b"}]"


# ---------------------------------------------------------------------------
# Requests and responses
# ---------------------------------------------------------------------------

class Request:
    def __init__(self, method, raw_path, raw_query, headers, read_body):
        self.method, self.raw_path, self.raw_query, self.headers = method, raw_path, raw_query, headers
        self.path = unquote(raw_path, errors="replace")
        self.query = parse_qs(raw_query, keep_blank_values=True)   # like url.Values
        self._read_body = read_body
        self._body = None

    def has(self, name):
        return name in self.query

    def get(self, name, default=""):
        vals = self.query.get(name)
        return vals[0] if vals else default

    def body(self):
        if self._body is None:
            self._body = self._read_body()
        return self._body

    def content_length(self):
        try:
            return int(self.headers.get("Content-Length", "-1"))
        except ValueError:
            return -1


@dataclasses.dataclass
class QueryOptions:
    dc: str
    token: str
    stale: bool
    consistent: bool
    min_index: int
    wait_ns: int

    def consistency(self):
        if self.consistent:
            return "consistent"
        return "stale" if self.stale else "leader"


class Response:
    def __init__(self, status=200, body=b"", content_type=None, headers=None):
        self.status, self.body = status, body
        self.headers = dict(headers or {})
        if content_type:
            self.headers["Content-Type"] = content_type


def json_response(obj, req, status=200, headers=None):
    return Response(status, go_json(obj, req.has("pretty")), "application/json", headers)


# ---------------------------------------------------------------------------
# The HTTP API (agent/*_endpoint.go)
# ---------------------------------------------------------------------------

class ConsulAPI:
    # Exact and subtree ("/" suffix) patterns with their allowed methods,
    # as registered on Consul's ServeMux.
    ROUTES = {
        "/v1/kv/": ("GET", "PUT", "DELETE"),
        "/v1/txn": ("PUT",),
        "/v1/session/create": ("PUT",),
        "/v1/session/destroy/": ("PUT",),
        "/v1/session/renew/": ("PUT",),
        "/v1/session/info/": ("GET",),
        "/v1/session/node/": ("GET",),
        "/v1/session/list": ("GET",),
        "/v1/status/leader": ("GET",),
        "/v1/status/peers": ("GET",),
        "/v1/agent/self": ("GET",),
        "/v1/catalog/datacenters": ("GET",),
        "/v1/catalog/service/": ("GET",),
        "/v1/catalog/register": ("PUT",),
        "/v1/catalog/deregister": ("PUT",),
        "/v1/health/service/": ("GET",),
        "/v1/agent/service/register": ("PUT",),
        "/v1/agent/service/deregister/": ("PUT",),
        "/v1/agent/check/pass/": ("PUT",),
        "/v1/agent/check/warn/": ("PUT",),
        "/v1/agent/check/fail/": ("PUT",),
        "/v1/agent/check/update/": ("PUT",),
        "/v1/acl/login": ("POST",),
        "/v1/acl/logout": ("POST",),
    }

    def __init__(self, store, faults, kv_max_value_size=KV_MAX_VALUE_SIZE,
                 txn_max_ops=TXN_MAX_OPS_DEFAULT, version=FAKE_CONSUL_VERSION,
                 rpc_hold_timeout=RPC_HOLD_TIMEOUT_DEFAULT, key_validation="none", default_token="",
                 node=None, server=True):
        """One agent's HTTP API over the shared store: node is this agent's node name (default the
        store's), server False makes it a client agent (/v1/agent/self Config.Server)."""
        self.store, self.faults = store, faults
        self.node, self.server = node or store.node, server
        self.rpc_hold_timeout = rpc_hold_timeout
        self.key_validation, self.default_token = key_validation, default_token
        self.kv_max_value_size, self.txn_max_ops = kv_max_value_size, txn_max_ops
        self.version = version
        self.node_id = str(uuid.uuid5(uuid.NAMESPACE_DNS, self.node))
        self.peers = ["127.0.0.1:8300"]     # server RPC addresses, the leader first (set by the cluster)
        self.handlers = {
            "/v1/kv/": self.kv, "/v1/txn": self.txn,
            "/v1/session/create": self.session_create, "/v1/session/destroy/": self.session_destroy,
            "/v1/session/renew/": self.session_renew, "/v1/session/info/": self.session_info,
            "/v1/session/node/": self.session_node, "/v1/session/list": self.session_list,
            "/v1/status/leader": self.status_leader, "/v1/status/peers": self.status_peers,
            "/v1/agent/self": self.agent_self, "/v1/catalog/datacenters": self.catalog_dcs,
            "/v1/catalog/service/": self.catalog_service, "/v1/catalog/register": self.catalog_register,
            "/v1/catalog/deregister": self.catalog_deregister, "/v1/health/service/": self.health_service,
            "/v1/agent/service/register": self.agent_service_register,
            "/v1/agent/service/deregister/": self.agent_service_deregister,
            "/v1/agent/check/pass/": self.agent_check_update, "/v1/agent/check/warn/": self.agent_check_update,
            "/v1/agent/check/fail/": self.agent_check_update, "/v1/agent/check/update/": self.agent_check_update,
            "/v1/acl/login": self.acl_login, "/v1/acl/logout": self.acl_logout,
        }

    # -- routing (net/http ServeMux + agent/http.go wrap) ----------------------

    def route(self, path):
        if path in self.ROUTES and not path.endswith("/"):
            return path
        best = None
        for pattern in self.ROUTES:
            if pattern.endswith("/") and path.startswith(pattern):
                if best is None or len(pattern) > len(best):
                    best = pattern
        return best

    def serve(self, req):
        # cleanhttp.PrintablePathCheckHandler: non-printable path -> bare 400
        if not req.path.isprintable():
            return Response(400)
        clean = go_clean_path(req.path)
        if clean != req.path:
            return self.redirect(req, clean)
        pattern = self.route(req.path)
        if pattern is None:
            if req.path + "/" in self.ROUTES:        # ServeMux: "/v1/kv" -> "/v1/kv/"
                return self.redirect(req, req.path + "/")
            return self.index(req)
        allowed = self.ROUTES[pattern]
        headers = {"Vary": "Accept-Encoding",
                   "X-Consul-Default-Acl-Policy": "deny" if self.store.acl_master is not None else "allow"}
        try:
            if req.method == "OPTIONS":
                resp = Response(200, headers={"Allow": ",".join(("OPTIONS",) + allowed)})
            elif req.method not in allowed:
                raise ApiError(405, "method %s not allowed" % req.method,
                               {"Allow": ",".join(("OPTIONS",) + allowed)})
            else:
                resp = self.handlers[pattern](req)
        except ApiError as e:
            resp = Response(e.status, e.body.encode(), "text/plain; charset=utf-8" if e.body else None,
                            e.headers)
        for k, v in headers.items():
            resp.headers.setdefault(k, v)
        return resp

    @staticmethod
    def redirect(req, path):
        """ServeMux answers a non-canonical path with 301 to the cleaned one."""
        location = quote(path, safe="/:@!$&'()*+,;=-._~")
        if req.raw_query:
            location += "?" + req.raw_query
        body = b""
        headers = {"Location": location}
        if req.method in ("GET", "HEAD"):
            body = ('<a href="%s">Moved Permanently</a>.\n\n' % location).encode()
            headers["Content-Type"] = "text/html; charset=utf-8"
        return Response(301, body, headers=headers)

    def index(self, req):
        if req.path == "/":
            return Response(200, b"Consul Agent: UI disabled. To enable, set ui_config.enabled=true"
                                 b" in the agent configuration and restart.",
                            "text/plain; charset=utf-8")
        if "/v1/" in req.path:
            text = "Invalid URL path: not a recognized HTTP API endpoint\n"
        else:
            text = "Invalid URL path: if attempting to use the HTTP API, ensure the path starts with '/v1/'\n"
        return Response(404, text.encode(), "text/plain; charset=utf-8")

    # -- common request parsing (agent/http.go parse*) ---------------------------

    def parse_token(self, req):
        """?token, then X-Consul-Token, then "Authorization: Bearer <t>"."""
        if req.get("token"):
            return req.get("token")
        if req.headers.get("X-Consul-Token"):
            return req.headers.get("X-Consul-Token")
        auth = req.headers.get("Authorization", "")
        parts = auth.split(" ")
        if len(parts) > 1 and parts[0].lower() == "bearer":
            return " ".join(parts[1:]).strip().split(" ")[0].strip()
        # No token: the agent's default token (acl.tokens.default), if set, is
        # sent on to the servers in its place (agent/http.go parseToken).
        return self.default_token

    def parse(self, req):
        """s.parse(): dc, token, consistency, wait and index."""
        dc = req.get("dc") or self.store.dc
        stale, consistent = req.has("stale"), req.has("consistent")
        if stale and consistent:
            raise ApiError(400, "Cannot specify ?stale with ?consistent, conflicting semantics.")
        wait_ns = 0
        if req.get("wait"):
            try:
                wait_ns = parse_go_duration(req.get("wait"))
            except ValueError:
                raise ApiError(400, "Invalid wait time")
        min_index = 0
        if req.get("index"):
            if not re.fullmatch(r"[0-9]+", req.get("index")) or int(req.get("index")) >= 2 ** 64:
                raise ApiError(400, "Invalid index")
            min_index = int(req.get("index"))
        return QueryOptions(dc, self.parse_token(req), stale, consistent, min_index, wait_ns)

    def rpc(self, opts, write):
        """Checks made on the way to the leader: datacenter, leader, token."""
        if opts.dc != self.store.dc:
            raise ApiError(500, "No path to datacenter")
        f = self.faults
        hold = self.rpc_hold_timeout / SECOND
        stopping = lambda: self.store.stopping  # noqa: E731
        # rpc.go ForwardRPC / canRetry: without a leader, writes and
        # non-stale reads are retried for up to rpc_hold_timeout before
        # "No cluster leader"; a leader elected meanwhile serves them.
        if write or not (opts.stale or f.leaderless_reads == "ok"):
            if not f.wait_until(lambda: f.leader_known, hold, stopping):
                raise no_leader()
        # rpc.go consistentRead: ?consistent verifies leadership first; a lost
        # verification fails at once, a leader not yet ready for consistent
        # reads (its barrier not written) is waited on for rpc_hold_timeout.
        if opts.consistent and not write:
            if f.consistent_reads == "lost":
                raise ApiError(500, "leadership lost while committing log")
            if not f.wait_until(lambda: f.consistent_reads == "ok", hold, stopping):
                raise ApiError(500, "Not ready to serve consistent reads")
        if self.store.stopping:
            raise Stopping()
        with self.store.lock:
            return self.store.resolve_token(opts.token)

    def validate_key(self, key):
        """KV key validation of some Consul releases (--kv-key-validation)."""
        if key == "" or self.key_validation == "none":
            return
        if self.key_validation == "1.21.5":
            # agent/kvs_endpoint.go in 1.21.5: a plain error, so 500
            if not re.fullmatch(KEY_PATTERN_1_21_5, key):
                raise ApiError(500, "invalid key name, keys should respect the %s format" % go_quote(KEY_PATTERN_1_21_5))
            if ".." in key:
                raise ApiError(500, "invalid key name, keys should not contain %s" % go_quote(".."))
            return
        # hashicorp/consul#22850 (1.21.6 and later): any character, but no
        # traversal and no leading or trailing space (disable_kv_key_validation
        # turns it off: --kv-key-validation none)
        low = key.lower()
        if "../" in key or "..\\" in key or key in ("..",) or key.endswith("/.."):
            raise ApiError(400, "key contains path traversal sequence")
        if any(t in low for t in ("%2e%2e%2f", "%2e%2e/", "..%2f", "%2e%2e%5c")):
            raise ApiError(400, "key contains encoded path traversal sequence")
        if key != key.strip(" "):
            raise ApiError(400, "key must not begin or end with a space")

    def set_meta(self, resp, opts, index, filtered=False, authz=None):
        """agent/http.go setMeta(): headers of every blocking read."""
        h = resp.headers
        h["X-Consul-Index"] = str(index if index > 0 else 1)   # never 0 (busy loops)
        h["X-Consul-Knownleader"] = "true" if self.faults.leader_known else "false"
        h["X-Consul-Lastcontact"] = str(self.last_contact_ms(opts))
        h["X-Consul-Effective-Consistency"] = opts.consistency()
        h["X-Consul-Query-Backend"] = "blocking-query"
        # maskResultsFilteredByACLs: only shown to requests that carry a token.
        if filtered and opts.token:
            h["X-Consul-Results-Filtered-By-Acls"] = "true"

    def last_contact_ms(self, opts=None):
        if self.faults.leader_known:
            # A stale read may be a follower's (/_fake/lag); other reads are the leader's.
            return self.faults.stale_lag_ms if opts is not None and opts.stale else 0
        return int((time.monotonic() - self.faults.leaderless_since) * 1000)

    # -- /v1/kv ----------------------------------------------------------------

    def kv(self, req):
        opts = self.parse(req)
        if "../" in req.path or "..\\" in req.path:
            raise ApiError(400, "URL path contains invalid traversal sequence")
        key = req.path[len("/v1/kv/"):]
        self.validate_key(key)
        if req.method == "GET":
            if req.has("keys"):
                return self.kv_get_keys(req, opts, key)
            return self.kv_get(req, opts, key)
        if req.method == "PUT":
            return self.kv_put(req, opts, key)
        return self.kv_delete(req, opts, key)

    def stale_empty(self, req, opts, listing, key):
        """Fault: a follower with empty state answering (hashicorp/consul#3975).
        Only reads that would find something take it: for a prefix that is
        empty anyway such an answer tells nothing false."""
        with self.store.lock:
            found = any(k.startswith(key) for k in self.store.kv) if listing else key in self.store.kv
        if not found:
            return None
        index = self.faults.take_stale_empty()
        if index is None:
            return None
        resp = json_response([], req) if listing else Response(404)
        self.set_meta(resp, opts, index)
        return resp

    def list_watch(self, prefix):
        """The watch of a KVS.List / ListKeys: the prefix while it has keys,
        else the radix node memdb's prefix iterator lands on (Store.radix_watch)."""
        store = self.store

        def watch():
            if any(k.startswith(prefix) for k in store.kv):
                return Watch("prefix", prefix)
            return Watch("radix", prefix, node=store.radix_watch(prefix))
        return watch

    def kv_get(self, req, opts, key):
        recurse = req.has("recurse")
        if not recurse and key == "":
            raise ApiError(400, "Missing key name")
        authz = self.rpc(opts, write=False)
        faked = self.stale_empty(req, opts, listing=recurse, key=key)
        if faked:
            return faked
        store = self.store

        def get_one():
            idx = store.kvs_max_index()
            ent = store.kv.get(key)
            authz.require("key", "read", key)
            if ent is None:
                return QueryResult(idx, None, not_found=True)
            return QueryResult(ent.modify_index, [ent])

        def get_list():
            entries = store.entries_with_prefix(key)
            idx = store.list_index(key, entries)
            visible = [e for e in entries if authz.allowed("key", "read", e.key)]
            return QueryResult(idx or 1, visible, filtered=len(visible) != len(entries))

        if recurse:
            res = store.query(get_list, self.list_watch(key), opts.min_index, opts.wait_ns)
        else:
            res = store.query(get_one, ("key", key), opts.min_index, opts.wait_ns)
        entries = res.value or []
        if not entries:
            resp = Response(404)
        elif req.has("raw") and not recurse:
            body = entries[0].value or b""
            resp = Response(200, body, "text/plain", {"X-Content-Type-Options": "nosniff",
                                                      "Content-Security-Policy": "sandbox"})
        elif req.has("pretty"):
            resp = json_response([e.to_api() for e in entries], req)
        else:
            resp = Response(200, b"[" + b",".join(e.api_json for e in entries) + b"]", "application/json")
        self.set_meta(resp, opts, res.index, res.filtered)
        return resp

    def kv_get_keys(self, req, opts, prefix):
        sep = req.get("separator") if req.has("separator") else req.get("seperator")
        authz = self.rpc(opts, write=False)
        faked = self.stale_empty(req, opts, listing=True, key=prefix)
        if faked:
            return faked
        store = self.store

        def list_keys():
            entries = store.entries_with_prefix(prefix)
            idx = store.list_index(prefix, entries) or 1
            visible = [e for e in entries if authz.allowed("key", "read", e.key)]
            keys, seen = [], set()
            for e in visible:
                if not sep:
                    keys.append(e.key)
                    continue
                cut = e.key.find(sep, len(prefix))
                if cut < 0:
                    keys.append(e.key)
                elif e.key[:cut + len(sep)] not in seen:
                    seen.add(e.key[:cut + len(sep)])
                    keys.append(e.key[:cut + len(sep)])
            return QueryResult(idx, keys, filtered=len(visible) != len(entries))

        res = store.query(list_keys, self.list_watch(prefix), opts.min_index, opts.wait_ns)
        # 404 for no keys, except at the root which answers [] (KVSGetKeys)
        if not res.value and prefix != "":
            resp = Response(404)
        else:
            resp = json_response(res.value, req)
        self.set_meta(resp, opts, res.index, res.filtered)
        return resp

    @staticmethod
    def conflicting(req, *flags):
        """conflictingFlags(): 400 "Conflicting flags: <encoded query>\\n"."""
        if sum(1 for f in flags if req.has(f)) > 1:
            raise ApiError(400, "Conflicting flags: %s\n" % go_query_encode(req.query))

    @staticmethod
    def parse_uint(req, name):
        text = req.get(name)
        if not re.fullmatch(r"[0-9]+", text) or int(text) >= 2 ** 64:
            raise ApiError(500, 'strconv.ParseUint: parsing %s: %s' % (
                go_quote(text), "value out of range" if text.isdigit() else "invalid syntax"))
        return int(text)

    def kv_put(self, req, opts, key):
        if key == "":
            raise ApiError(400, "Missing key name")
        self.conflicting(req, "cas", "acquire", "release")
        entry = Entry(key=key)
        op, cas = "set", None
        if req.has("flags"):
            entry = dataclasses.replace(entry, flags=self.parse_uint(req, "flags"))
        if req.has("cas"):
            op, cas = "cas", self.parse_uint(req, "cas")
        if req.has("acquire"):
            op, entry = "lock", dataclasses.replace(entry, session=req.get("acquire"))
        if req.has("release"):
            op, entry = "unlock", dataclasses.replace(entry, session=req.get("release"))
        length = req.content_length()
        if length > self.kv_max_value_size:
            raise self.too_large(length)
        body = req.body()
        if len(body) > self.kv_max_value_size:
            raise self.too_large(len(body))
        entry = dataclasses.replace(entry, value=body or None)
        authz = self.rpc(opts, write=True)
        store = self.store
        with store.lock:
            authz.require("key", "write", key)
            if op == "lock" and store.lock_delay_active(key):
                return json_response(False, req)             # kvsPreApply: lock delay
            idx = store.next_index()
            try:
                if op == "set":
                    store.kv_set(idx, entry)
                    ok = True
                elif op == "cas":
                    ok, _ = store.kv_cas(idx, entry, cas)
                elif op == "lock":
                    ok, _ = store.kv_lock(idx, entry)
                else:
                    ok, _ = store.kv_unlock(idx, entry)
            except OpError as e:
                store.commit()
                raise ApiError(500, str(e))
            store.commit()
        return json_response(ok, req)

    def too_large(self, length):
        return ApiError(413, "Request body(%d bytes) too large, max size: %d bytes. See %s." % (
            length, self.kv_max_value_size,
            "https://developer.hashicorp.com/docs/agent/config/config-files#kv_max_value_size"))

    def kv_delete(self, req, opts, key):
        self.conflicting(req, "recurse", "cas")
        recurse = req.has("recurse")
        if not recurse and key == "":
            raise ApiError(400, "Missing key name")
        cas = self.parse_uint(req, "cas") if req.has("cas") else None
        authz = self.rpc(opts, write=True)
        store = self.store
        with store.lock:
            if recurse:
                if not authz.key_write_prefix(key):
                    raise authz.denied("key", "write", key)
            else:
                authz.require("key", "write", key)
            idx = store.next_index()
            ok = True
            if recurse:
                store.kv_delete_tree(idx, key)
            elif cas is not None:
                ok = store.kv_delete_cas(idx, cas, key)
            else:
                store.kv_delete(idx, key)
            store.commit()
        return json_response(ok, req)

    # -- /v1/txn (agent/txn_endpoint.go, consul/txn_endpoint.go, state/txn.go) --

    WRITE_VERBS = {"set", "delete", "delete-cas", "delete-tree", "cas", "lock", "unlock"}

    def txn(self, req):
        max_len = self.kv_max_value_size
        if req.content_length() > max_len:
            raise ApiError(413, "Request body(%d bytes) too large, max size: %d bytes. See %s." % (
                req.content_length(), max_len,
                "https://www.consul.io/docs/agent/config/config-files#txn_max_req_len"))
        try:
            raw = json.loads(req.body().decode("utf-8"))
            if not isinstance(raw, list):
                raise ValueError("json: cannot unmarshal %s into Go value of type api.TxnOps"
                                 % json_type(raw))
        except (ValueError, UnicodeDecodeError) as e:
            raise ApiError(400, "Failed to parse body: %s" % e)
        if len(raw) > self.txn_max_ops:
            raise ApiError(413, "Transaction contains too many operations (%d > %d)"
                           % (len(raw), self.txn_max_ops))
        ops = [self.txn_op(o) for o in raw]
        for op in ops:
            if op and len(op["Value"] or b"") > self.kv_max_value_size:
                raise ApiError(413, "Value for key %s is too large (%d > %d bytes)" % (
                    go_quote(op["Key"]), len(op["Value"]), self.kv_max_value_size))
        writes = sum(1 for op in ops if op is None or op["Verb"] in self.WRITE_VERBS)
        if writes == 0:
            return self.txn_read(req, ops)
        opts = QueryOptions(req.get("dc") or self.store.dc, self.parse_token(req), False, False, 0, 0)
        authz = self.rpc(opts, write=True)
        store = self.store
        with store.lock:
            errors = self.txn_precheck(authz, ops)
            if errors:
                return json_response({"Results": None, "Errors": errors}, req, 409)
            idx = store.next_index()
            saved = (dict(store.kv), {k: list(v) for k, v in store.tombstones.items()},
                     dict(store.table_index))
            results, errors = self.txn_dispatch(idx, ops)
            if errors:
                store.kv, store.tombstones, store.table_index = saved
                store._changed_keys = set()
                store.commit()
                return json_response({"Results": None, "Errors": errors}, req, 409)
            store.commit()
        results = self.txn_filter(authz, results)
        return json_response({"Results": results, "Errors": None}, req)

    def txn_read(self, req, ops):
        """A read-only transaction: no raft, consistency modes, no blocking."""
        opts = self.parse(req)
        authz = self.rpc(opts, write=False)
        store = self.store
        with store.lock:
            errors = self.txn_precheck(authz, ops)
            results = None
            if not errors:
                results, errors = self.txn_dispatch(0, ops)
        if errors:
            results = None
        else:
            results, errors = self.txn_filter(authz, results), None
        body = {"Results": results, "Errors": errors,
                # structs.TxnReadResponse embeds QueryMeta
                "Index": 0, "LastContact": self.last_contact_ms() * 1_000_000,
                "KnownLeader": self.faults.leader_known, "ConsistencyLevel": "",
                "NotModified": False, "Backend": 0, "ResultsFilteredByACLs": False}
        resp = json_response(body, req, 409 if errors else 200)
        resp.headers["X-Consul-Lastcontact"] = str(self.last_contact_ms())
        resp.headers["X-Consul-Knownleader"] = "true" if self.faults.leader_known else "false"
        return resp

    @staticmethod
    def txn_op(o):
        """API TxnOp -> internal op dict (None for a non-KV operation).
        Field names match case-insensitively, as with Go's encoding/json."""
        def bad(value, go_type, field):
            return ApiError(400, "Failed to parse body: json: cannot unmarshal %s into Go struct"
                                 " field %s of type %s" % (json_type(value), field, go_type))

        if not isinstance(o, dict):
            raise bad(o, "api.TxnOp", "TxnOps")
        fields = {k.lower(): v for k, v in o.items()}
        kv = fields.get("kv")
        if kv is None:
            return None
        if not isinstance(kv, dict):
            raise bad(kv, "api.KVTxnOp", "TxnOp.KV")
        kv = {k.lower(): v for k, v in kv.items()}
        for name in ("verb", "key", "session"):
            if not isinstance(kv.get(name) or "", str):
                raise bad(kv[name], "string", "KVTxnOp." + name.capitalize())
        for name in ("flags", "index"):
            v = kv.get(name) or 0
            if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < 2 ** 64:
                raise bad(v, "uint64", "KVTxnOp." + name.capitalize())
        value = kv.get("value")
        if value is not None:
            if not isinstance(value, str):
                raise bad(value, "[]uint8", "KVTxnOp.Value")
            try:
                value = base64.b64decode(value, validate=True)
            except ValueError:
                raise ApiError(400, "Failed to parse body: illegal base64 data at input byte 0")
        return {"Verb": kv.get("verb") or "", "Key": kv.get("key") or "", "Value": value or None,
                "Flags": kv.get("flags") or 0, "Index": kv.get("index") or 0,
                "Session": kv.get("session") or ""}

    def txn_precheck(self, authz, ops):
        """Txn.preCheck / kvsPreApply: key, ACL and lock-delay checks."""
        errors = []
        for i, op in enumerate(ops):
            if op is None:
                continue
            verb, key = op["Verb"], op["Key"]
            what = None
            if key == "" and verb != "delete-tree":
                what = "Must provide key"
            elif verb == "delete-tree":
                if not authz.key_write_prefix(key):
                    what = authz.denied("key", "write", key).body
            elif verb in ("get", "get-tree", "get-or-empty"):
                pass                                        # filtered on output
            elif verb in ("check-session", "check-index"):
                if not authz.allowed("key", "read", key):
                    what = authz.denied("key", "read", key).body
            elif not authz.allowed("key", "write", key):
                what = authz.denied("key", "write", key).body
            if what is None and verb == "lock" and self.store.lock_delay_active(key):
                what = "failed to lock key %s due to lock delay" % go_quote(key)
            if what is not None:
                errors.append({"OpIndex": i, "What": what})
        return errors

    def txn_dispatch(self, idx, ops):
        """state.txnDispatch: run every op, collect every error."""
        results, errors = [], []
        for i, op in enumerate(ops):
            try:
                if op is None:
                    raise OpError("no operation specified (the Consul double supports KV operations only)")
                results.extend(self.txn_kv(idx, op))
            except OpError as e:
                errors.append({"OpIndex": i, "What": str(e)})
        return (None, errors) if errors else (results, None)

    def txn_kv(self, idx, op):
        store = self.store
        verb, key = op["Verb"], op["Key"]
        entry = Entry(key=key, value=op["Value"], flags=op["Flags"], session=op["Session"])
        q = go_quote(key)
        out = None
        if verb == "set":
            out = store.kv_set(idx, entry)
        elif verb == "cas":
            ok, out = store.kv_cas(idx, entry, op["Index"])
            if not ok:
                raise OpError("failed to set key %s, index is stale" % q)
        elif verb == "lock":
            ok, out = store.kv_lock(idx, entry)
            if not ok:
                raise OpError("failed to lock key %s, lock is already held" % q)
        elif verb == "unlock":
            ok, out = store.kv_unlock(idx, entry)
            if not ok:
                raise OpError("failed to unlock key %s, lock isn't held, or is held by another session" % q)
        elif verb == "delete":
            store.kv_delete(idx, key)
        elif verb == "delete-cas":
            if not store.kv_delete_cas(idx, op["Index"], key):
                raise OpError("failed to delete key %s, index is stale" % q)
        elif verb == "delete-tree":
            store.kv_delete_tree(idx, key)
        elif verb == "get":
            out = store.kv.get(key)
            if out is None:
                raise OpError("key %s doesn't exist" % q)
            return [{"KV": out.to_api()}]
        elif verb == "get-or-empty":
            out = store.kv.get(key) or Entry(key=key, flags=op["Flags"], session=op["Session"],
                                             modify_index=op["Index"])
            return [{"KV": out.to_api()}]
        elif verb == "get-tree":
            return [{"KV": e.to_api()} for e in store.entries_with_prefix(key)]
        elif verb == "check-index":
            out = store.kv.get(key)
            if out is None:
                raise OpError("failed to check index, key %s doesn't exist" % q)
            if out.modify_index != op["Index"]:
                raise OpError("failed index check for key %s, current modify index %d != %d"
                              % (q, out.modify_index, op["Index"]))
        elif verb == "check-session":
            out = store.kv.get(key)
            if out is None:
                raise OpError("failed to check session, key %s doesn't exist" % q)
            if out.session != op["Session"]:
                raise OpError("failed session check for key %s, current session %s != %s"
                              % (q, go_quote(out.session), go_quote(op["Session"])))
        elif verb == "check-not-exists":
            if key in store.kv:
                raise OpError("key %s exists" % q)
        else:
            raise OpError("unknown KV verb %s" % go_quote(verb))
        # Results carry no value except for reads; deletes add no result (txn.mdx)
        return [{"KV": out.to_api(with_value=False)}] if out is not None else []

    @staticmethod
    def txn_filter(authz, results):
        return [r for r in results if authz.allowed("key", "read", r["KV"]["Key"])]

    # -- /v1/session (agent/session_endpoint.go, consul/session_endpoint.go) ---

    def session_create(self, req):
        opts = self.parse(req)
        body = req.body()
        sess = {"name": "", "node": self.node, "lock_delay": DEFAULT_LOCK_DELAY,
                "behavior": "release", "ttl": "", "checks": [SERF_HEALTH]}
        if body:
            try:
                raw = json.loads(body.decode("utf-8"))
                if not isinstance(raw, dict):
                    raise ValueError("json: cannot unmarshal into structs.Session")
                fields = {k.lower(): v for k, v in raw.items()}
                if "lockdelay" in fields:       # FixupLockDelay: small numbers are seconds
                    v = fields["lockdelay"]
                    d = parse_go_duration(v) if isinstance(v, str) else int(v)
                    sess["lock_delay"] = d * SECOND if d < LOCK_DELAY_MIN_THRESHOLD else d
                for name in ("name", "node", "behavior", "ttl"):
                    if fields.get(name) is not None:
                        if not isinstance(fields[name], str):
                            raise ValueError("'%s' expected type 'string'" % name)
                        sess[name] = fields[name]
                if "checks" in fields or "nodechecks" in fields:   # FixupChecks
                    sess["checks"] = list(fields.get("nodechecks") or []) + list(fields.get("checks") or [])
            except (ValueError, UnicodeDecodeError, TypeError) as e:
                raise ApiError(400, "Request decode failed: %s" % e)
        authz = self.rpc(opts, write=True)
        authz.require("session", "write", sess["node"])
        store = self.store
        if sess["behavior"] == "":
            sess["behavior"] = "release"
        if sess["behavior"] not in ("release", "delete"):
            raise ApiError(500, "Invalid Behavior setting '%s'" % sess["behavior"])
        if sess["ttl"] != "":
            try:
                ttl = parse_go_duration(sess["ttl"])
            except ValueError as e:
                raise ApiError(500, "Session TTL '%s' invalid: %s" % (sess["ttl"], e))
            if ttl != 0 and (ttl < store.session_ttl_min or ttl > SESSION_TTL_MAX):
                raise ApiError(500, "Invalid Session TTL '%d', must be between [%s=%s]" % (
                    ttl, format_go_duration(store.session_ttl_min), format_go_duration(SESSION_TTL_MAX)))
        with store.lock:
            # state/session.go sessionCreateTxn: the node and every check must
            # exist, and no check may be critical.
            if sess["node"] not in store.nodes:
                raise ApiError(500, "Missing node registration")
            for cid in sess["checks"] or []:
                c = store.checks.get((sess["node"], cid))
                if c is None:
                    raise ApiError(500, "Missing check '%s' registration" % cid)
                if c["Status"] == "critical":
                    raise ApiError(500, "Check '%s' is in critical state" % cid)
            idx = store.next_index()
            s = Session(id=str(uuid.uuid4()), name=sess["name"], node=sess["node"],
                        lock_delay=sess["lock_delay"], behavior=sess["behavior"], ttl=sess["ttl"],
                        node_checks=sess["checks"] or None, create_index=idx, modify_index=idx)
            store.sessions[s.id] = s
            store.table_index["sessions"] = idx
            store._sessions_changed = True
            store.session_reset_timer(s)
            store.commit()
        return json_response({"ID": s.id}, req)

    @staticmethod
    def session_id(req, prefix):
        sid = req.path[len(prefix):]
        if sid == "":
            raise ApiError(400, "Missing session")
        return sid

    def session_destroy(self, req):
        sid = self.session_id(req, "/v1/session/destroy/")
        opts = self.parse(req)
        authz = self.rpc(opts, write=True)
        store = self.store
        err = uuid_error(sid)
        if err:
            raise ApiError(500, "failed session lookup: %s" % err)
        with store.lock:
            s = store.sessions.get(sid)
            if authz.enabled and not authz.management:
                if s is None:
                    raise ApiError(500, "Unknown session %s" % go_quote(sid))
                authz.require("session", "write", s.node)
            store.session_invalidate(sid, store.next_index())   # idempotent: true even if absent
            store.commit()
        return json_response(True, req)

    def session_renew(self, req):
        sid = self.session_id(req, "/v1/session/renew/")
        opts = self.parse(req)
        authz = self.rpc(opts, write=True)
        err = uuid_error(sid)
        if err:
            raise ApiError(500, "failed session lookup: %s" % err)
        store = self.store
        with store.lock:
            s = store.sessions.get(sid)
            if s is None:
                raise ApiError(404, "Session id '%s' not found" % sid)
            authz.require("session", "write", s.node)
            store.session_reset_timer(s)
            return json_response([s.to_api()], req)

    def _sessions_query(self, req, opts, select):
        authz = self.rpc(opts, write=False)
        store = self.store

        def run():
            found = select()
            visible = [s for s in found if authz.allowed("session", "read", s.node)]
            return QueryResult(store.table_index["sessions"], visible,
                               filtered=len(visible) != len(found))

        res = store.query(run, ("sessions",), opts.min_index, opts.wait_ns)
        resp = json_response([s.to_api() for s in res.value], req)
        self.set_meta(resp, opts, res.index, res.filtered)
        return resp

    def session_info(self, req):
        sid = self.session_id(req, "/v1/session/info/")
        opts = self.parse(req)
        err = uuid_error(sid)
        if err:
            self.rpc(opts, write=False)
            raise ApiError(500, "failed session lookup: %s" % err)
        return self._sessions_query(req, opts, lambda: [s for s in [self.store.sessions.get(sid)] if s])

    def session_node(self, req):
        node = req.path[len("/v1/session/node/"):]
        if node == "":
            raise ApiError(400, "Missing node name")
        opts = self.parse(req)
        return self._sessions_query(
            req, opts, lambda: [s for s in self.store.sessions.values() if s.node == node])

    def session_list(self, req):
        opts = self.parse(req)
        return self._sessions_query(req, opts, lambda: list(self.store.sessions.values()))

    # -- catalog, health and agent service endpoints -----------------------------
    # (agent/health_endpoint.go, agent/catalog_endpoint.go, agent/agent_endpoint.go,
    # agent/consul/health_endpoint.go, agent/consul/state/catalog.go)

    HEALTH_SCHEMA = {
        "Node": {"ID": 1, "Node": 1, "Address": 1, "Datacenter": 1, "TaggedAddresses": "*", "Meta": "*"},
        "Service": {"Kind": 1, "ID": 1, "Service": 1, "Tags": 1, "Address": 1, "TaggedAddresses": "*",
                    "Meta": "*", "Port": 1, "Weights": {"Passing": 1, "Warning": 1},
                    "EnableTagOverride": 1},
        "Checks": {"CheckID": 1, "Name": 1, "Node": 1, "Notes": 1, "Output": 1, "ServiceID": 1,
                   "ServiceName": 1, "ServiceTags": 1, "Status": 1, "Type": 1},
    }
    CATALOG_SCHEMA = {"ID": 1, "Node": 1, "Address": 1, "Datacenter": 1, "TaggedAddresses": "*",
                      "NodeMeta": "*", "ServiceKind": 1, "ServiceID": 1, "ServiceName": 1,
                      "ServiceTags": 1, "ServiceAddress": 1, "ServiceMeta": "*", "ServicePort": 1,
                      "ServiceWeights": {"Passing": 1, "Warning": 1}, "ServiceEnableTagOverride": 1}

    @staticmethod
    def service_api(svc):
        """structs.NodeService as the health endpoint writes it (Port omitempty)."""
        out = {"ID": svc["ID"], "Service": svc["Service"], "Tags": list(svc["Tags"] or []),
               "Address": svc["Address"], "Meta": dict(svc["Meta"] or {})}
        if svc["Port"]:
            out["Port"] = svc["Port"]
        out.update({"Weights": dict(svc["Weights"]), "EnableTagOverride": svc["EnableTagOverride"],
                    "Proxy": {"Mode": "", "MeshGateway": {}, "Expose": {}}, "Connect": {},
                    "PeerName": "", "CreateIndex": svc["CreateIndex"], "ModifyIndex": svc["ModifyIndex"]})
        return out

    @staticmethod
    def service_node_api(node, svc):
        """structs.ServiceNode, the row of /v1/catalog/service/<name>."""
        return {"ID": node["ID"], "Node": node["Node"], "Address": node["Address"],
                "Datacenter": node["Datacenter"], "TaggedAddresses": node["TaggedAddresses"],
                "NodeMeta": node["Meta"], "ServiceKind": "", "ServiceID": svc["ID"],
                "ServiceName": svc["Service"], "ServiceTags": list(svc["Tags"] or []),
                "ServiceAddress": svc["Address"], "ServiceWeights": dict(svc["Weights"]),
                "ServiceMeta": dict(svc["Meta"] or {}), "ServicePort": svc["Port"],
                "ServiceSocketPath": "", "ServiceEnableTagOverride": svc["EnableTagOverride"],
                "ServiceProxy": {"Mode": "", "MeshGateway": {}, "Expose": {}}, "ServiceConnect": {},
                "ServiceLocality": None, "CreateIndex": svc["CreateIndex"],
                "ModifyIndex": svc["ModifyIndex"]}

    @staticmethod
    def parse_bool_param(req, name):
        """getBoolQueryParam: a bare ?passing is true, else strconv.ParseBool."""
        if not req.has(name):
            return False
        v = req.get(name)
        if v == "":
            return True
        if v in ("1", "t", "T", "TRUE", "true", "True"):
            return True
        if v in ("0", "f", "F", "FALSE", "false", "False"):
            return False
        raise ApiError(400, "Invalid value for ?%s" % name)

    @staticmethod
    def parse_node_meta(req):
        """parseMetaFilter: node-meta=key:value, repeatable."""
        out = {}
        for item in req.query.get("node-meta", []):
            k, _, v = item.partition(":")
            out[k] = v
        return out

    def parse_filter(self, req, schema):
        if not req.get("filter"):
            return None
        try:
            return FilterExpr(req.get("filter"), filter_selector_checker(schema))
        except FilterError as e:
            raise ApiError(400, "Failed to create boolean expression evaluator: %s" % e)

    def service_query(self, req, prefix, build, schema):
        """Shared by /v1/health/service and /v1/catalog/service: blocking on the
        service name's index, the tag / node-meta / filter / passing filters,
        ACL filtering on node:read and service:read."""
        name = req.path[len(prefix):]
        opts = self.parse(req)
        if name == "":
            raise ApiError(400, "Missing service name")
        tags = req.query.get("tag") if req.has("tag") else None
        node_meta = self.parse_node_meta(req)
        expr = self.parse_filter(req, schema)
        passing = self.parse_bool_param(req, "passing") if prefix == "/v1/health/service/" else False
        authz = self.rpc(opts, write=False)
        store = self.store

        def run():
            rows = store.health_rows(name)
            idx = store.service_query_index(name, bool(rows))
            out, filtered = [], False
            for node, svc, checks in rows:
                if node is None:
                    continue
                if tags is not None and not all(t in (svc["Tags"] or []) for t in tags):
                    continue
                if any(node["Meta"].get(k) != v for k, v in node_meta.items()):
                    continue
                if not (authz.allowed("node", "read", node["Node"]) and
                        authz.allowed("service", "read", svc["Service"])):
                    filtered = True
                    continue
                row = build(node, svc, checks)
                if expr is not None and not expr.match(row):
                    continue
                if passing and any(c["Status"] != "passing" for c in checks):
                    continue
                out.append(row)
            return QueryResult(idx, out, filtered=filtered)

        res = store.query(run, ("service", name), opts.min_index, opts.wait_ns)
        resp = json_response(res.value, req)
        self.set_meta(resp, opts, res.index, res.filtered)
        return resp

    def health_service(self, req):
        def build(node, svc, checks):
            return {"Node": {k: node[k] for k in ("ID", "Node", "Address", "Datacenter", "TaggedAddresses",
                                                  "Meta", "CreateIndex", "ModifyIndex")},
                    "Service": self.service_api(svc), "Checks": [dict(c) for c in checks]}
        return self.service_query(req, "/v1/health/service/", build, self.HEALTH_SCHEMA)

    def catalog_service(self, req):
        return self.service_query(req, "/v1/catalog/service/",
                                  lambda node, svc, checks: self.service_node_api(node, svc),
                                  self.CATALOG_SCHEMA)

    # -- registration ------------------------------------------------------------

    @staticmethod
    def decode_object(req, what):
        try:
            raw = json.loads(req.body().decode("utf-8") or "null")
        except (ValueError, UnicodeDecodeError) as e:
            raise ApiError(400, "Request decode failed: %s" % e)
        if not isinstance(raw, dict):
            raise ApiError(400, "Request decode failed: json: cannot unmarshal %s into Go value of type %s"
                           % (json_type(raw), what))
        return raw

    @staticmethod
    def field(obj, name, kind, default=None):
        """A field, matched case-insensitively as Go's decoder does, of a JSON type."""
        for k, v in obj.items():
            if k.lower() == name.lower():
                if v is None:
                    return default
                if kind is int and (isinstance(v, bool) or not isinstance(v, int)):
                    raise ApiError(400, "Request decode failed: %s: expected a number" % name)
                if kind is not int and not isinstance(v, kind):
                    raise ApiError(400, "Request decode failed: %s: wrong type %s" % (name, json_type(v)))
                return v
        return default

    def service_def(self, body):
        """An agent or catalog service definition -> the stored record."""
        f = self.field
        name = f(body, "Name", str) or f(body, "Service", str) or ""
        if name == "":
            raise ApiError(400, "Missing service name")
        weights = f(body, "Weights", dict)
        if weights is None:
            weights = {"Passing": 1, "Warning": 1}
        else:
            weights = {"Passing": f(weights, "Passing", int, 0), "Warning": f(weights, "Warning", int, 0)}
            if weights["Passing"] < 1:
                raise ApiError(400, "Invalid Weights: Passing must be greater than 0")
            if weights["Warning"] < 0:
                raise ApiError(400, "Invalid Weights: Warning must be greater or equal than 0")
        meta = f(body, "Meta", dict, {})
        if not all(isinstance(v, str) for v in meta.values()):
            raise ApiError(400, "Request decode failed: Meta values must be strings")
        tags = f(body, "Tags", list, [])
        return {"ID": f(body, "ID", str) or name, "Service": name, "Tags": tags,
                "Address": f(body, "Address", str, ""), "Port": f(body, "Port", int, 0),
                "Meta": meta, "Weights": weights,
                "EnableTagOverride": bool(f(body, "EnableTagOverride", bool, False))}

    # structs.CheckType as the agent's decoder reads it (lib.DecodeJSON and CheckType.UnmarshalJSON in
    # agent/structs/check_type.go): field names match case-insensitively (encoding/json), snake_case
    # aliases stand in for some, unknown fields are refused (DisallowUnknownFields); Interval, Timeout,
    # TTL and DeregisterCriticalServiceAfter are Go duration strings or numbers of nanoseconds.
    CHECK_TYPE_FIELDS = {
        "CheckID": str, "Name": str, "Status": str, "Notes": str, "ScriptArgs": list, "HTTP": str,
        "H2PING": str, "H2PingUseTLS": bool, "Header": dict, "Method": str, "Body": str,
        "DisableRedirects": bool, "TCP": str, "UDP": str, "Interval": "duration", "AliasNode": str,
        "AliasService": str, "DockerContainerID": str, "Shell": str, "GRPC": str, "GRPCUseTLS": bool,
        "OSService": str, "TLSServerName": str, "TLSSkipVerify": bool, "Timeout": "duration",
        "TTL": "duration", "SuccessBeforePassing": int, "FailuresBeforeWarning": int,
        "FailuresBeforeCritical": int, "ProxyHTTP": str, "ProxyGRPC": str,
        "DeregisterCriticalServiceAfter": "duration", "OutputMaxSize": int, "ServiceID": str}
    CHECK_TYPE_ALIASES = {
        "args": "ScriptArgs", "script_args": "ScriptArgs",
        "deregister_critical_service_after": "DeregisterCriticalServiceAfter",
        "docker_container_id": "DockerContainerID", "tls_server_name": "TLSServerName",
        "tls_skip_verify": "TLSSkipVerify", "grpc_use_tls": "GRPCUseTLS", "h2ping_use_tls": "H2PingUseTLS",
        "service_id": "ServiceID"}
    _CHECK_TYPE_LOWER = {k.lower(): k for k in CHECK_TYPE_FIELDS}
    _ZERO = {str: "", list: [], dict: {}, bool: False, int: 0, "duration": 0}

    def check_type(self, body):
        """A check of a service definition -> {CheckType field: value}, every field present (zero
        values for those not given), durations in ns; a field given twice (names differing in case
        only) takes the later value, as encoding/json does, and a snake_case alias counts only when
        its field is not given."""
        given, alias = {}, {}
        for k, v in body.items():
            name = self._CHECK_TYPE_LOWER.get(k.lower())
            into = given
            if name is None:
                name, into = self.CHECK_TYPE_ALIASES.get(k.lower()), alias
            if name is None:
                raise ApiError(400, "Request decode failed: json: unknown field %s" % go_quote(k))
            into[name] = v
        out = {}
        for name, kind in self.CHECK_TYPE_FIELDS.items():
            v = given.get(name)
            if v is None or v is False or v == "":
                v = alias.get(name, v)
            out[name] = self._check_field(name, kind, v)
        return out

    def _check_field(self, name, kind, v):
        if v is None:
            return self._ZERO[kind]
        if kind == "duration":      # a string is parsed, a number is nanoseconds, anything else ignored
            if isinstance(v, str):
                try:
                    return parse_go_duration(v)
                except ValueError as e:
                    raise ApiError(400, "Request decode failed: %s" % e)
            return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else 0
        ok = (isinstance(v, int) and not isinstance(v, bool)) if kind is int else isinstance(v, kind)
        if ok and kind is dict:     # Header: map[string][]string
            ok = all(isinstance(x, list) and all(isinstance(y, str) for y in x) for x in v.values())
        if ok and kind is list:
            ok = all(isinstance(x, str) for x in v)
        if not ok:
            raise ApiError(400, "Request decode failed: json: cannot unmarshal %s into Go struct field "
                                "CheckType.%s" % (json_type(v), name))
        return v

    @staticmethod
    def check_kind(t):
        """CheckType.Type(), in its order."""
        run = t["Interval"] > 0
        for kind, on in (("grpc", t["GRPC"] and run), ("http", t["HTTP"] and run), ("ttl", t["TTL"] > 0),
                         ("tcp", t["TCP"] and run), ("udp", t["UDP"] and run),
                         ("alias", t["AliasNode"] or t["AliasService"]),
                         ("docker", t["ScriptArgs"] and t["DockerContainerID"] and run),
                         ("script", t["ScriptArgs"]), ("h2ping", t["H2PING"] and run),
                         ("os_service", t["OSService"] and run)):
            if on:
                return kind
        return ""

    @staticmethod
    def validate_check_type(t):
        """CheckType.Validate, as ServiceDefinition.CheckTypes() reports it (400 "Invalid check: ...");
        then the agent's addCheck, which refuses script checks registered over HTTP (a 500)."""
        interval_check = bool(t["ScriptArgs"] or t["HTTP"] or t["TCP"] or t["UDP"] or t["GRPC"]
                              or t["H2PING"] or t["OSService"])
        alias = bool(t["AliasNode"] or t["AliasService"])
        why = None
        if t["Interval"] > 0 and t["TTL"] > 0:
            why = "Interval and TTL cannot both be specified"
        elif interval_check and t["Interval"] <= 0:
            why = "Interval must be > 0 for Script, HTTP, H2PING, TCP, UDP or OSService checks"
        elif interval_check and alias:
            why = "Interval cannot be set for Alias checks"
        elif alias and t["TTL"] > 0:
            why = "TTL must be not be set for Alias checks"
        elif not interval_check and not alias and t["TTL"] <= 0:
            why = "TTL must be > 0 for TTL checks"
        elif t["OutputMaxSize"] < 0:
            why = "MaxOutputMaxSize must be positive"
        elif t["FailuresBeforeWarning"] > t["FailuresBeforeCritical"]:
            why = "FailuresBeforeWarning can't be higher than FailuresBeforeCritical"
        if why:
            raise ApiError(400, "Invalid check: " + why)
        if t["Status"] and t["Status"] not in ("passing", "warning", "critical"):
            raise ApiError(400, "Status for checks must 'passing', 'warning', 'critical'")
        if t["ScriptArgs"]:
            raise ApiError(500, "Scripts are disabled on this agent from remote calls; to enable, "
                                "configure 'enable_script_checks' to true")

    def check_def(self, node, svc, t, default_id, default_name):
        """A decoded check (check_type()) of service svc -> (structs.HealthCheck JSON, TTL ns or 0,
        DeregisterCriticalServiceAfter ns or 0, what the runner needs for an HTTP or TCP check or
        None). agent.go addServiceInternal: critical unless Status says otherwise; Interval and
        Timeout shown as Go durations ("" when not set)."""
        reap = t["DeregisterCriticalServiceAfter"]
        if reap > 0:
            # agent.go addCheck: shorter than check_deregister_interval_min is raised to it (a warning)
            reap = max(reap, self.store.deregister_critical_min)
        kind = self.check_kind(t)
        run = None
        if kind in ("http", "tcp"):
            run = {k: t[k] for k in ("HTTP", "TCP", "Method", "Header", "Body", "TLSSkipVerify",
                                     "TLSServerName", "Interval", "Timeout", "OutputMaxSize",
                                     "SuccessBeforePassing", "FailuresBeforeCritical", "FailuresBeforeWarning")}
            if kind == "http":
                run["TCP"] = ""
        fmt = lambda ns: format_go_duration(ns) if ns else ""  # noqa: E731
        check = health_check(node, t["CheckID"] or default_id, t["Name"] or default_name,
                             t["Status"] or "critical",
                             service_id=svc["ID"] if svc else "", service_name=svc["Service"] if svc else "",
                             tags=svc["Tags"] if svc else None, check_type=kind, notes=t["Notes"],
                             interval=fmt(t["Interval"]), timeout=fmt(t["Timeout"]))
        return check, (t["TTL"] if kind == "ttl" else 0), max(reap, 0), run

    def catalog_check(self, node, svc, body):
        """A check of /v1/catalog/register (structs.HealthCheck, stored as given, never run)."""
        f = self.field
        status = f(body, "Status", str, "") or "critical"
        if status not in ("passing", "warning", "critical"):
            raise ApiError(400, "Invalid check status: \"%s\"" % status)
        kind = next((k.lower() for k in ("TTL", "HTTP", "TCP") if f(body, k, str)), "")
        return health_check(node, f(body, "CheckID", str) or f(body, "ID", str) or "", f(body, "Name", str) or "",
                            status, service_id=svc["ID"] if svc else "", service_name=svc["Service"] if svc else "",
                            tags=svc["Tags"] if svc else None, check_type=kind,
                            notes=f(body, "Notes", str, ""), output=f(body, "Output", str, ""),
                            interval=f(body, "Interval", str, ""), timeout=f(body, "Timeout", str, ""))

    def write_rpc(self, req):
        opts = QueryOptions(req.get("dc") or self.store.dc, self.parse_token(req), False, False, 0, 0)
        return self.rpc(opts, write=True)

    def agent_service_register(self, req):
        body = self.decode_object(req, "structs.ServiceDefinition")
        svc = self.service_def(body)
        defs = []
        for d in [self.field(body, "Check", dict, {})] + self.field(body, "Checks", list, []):
            if not isinstance(d, dict):
                raise ApiError(400, "Request decode failed: json: cannot unmarshal %s into Go struct field "
                                    "ServiceDefinition.Checks of type structs.CheckType" % json_type(d))
            t = self.check_type(d)
            if any(t.values()):             # ServiceDefinition.CheckTypes skips an empty check
                self.validate_check_type(t)
                defs.append(t)
        checks = []
        for i, t in enumerate(defs):
            cid = "service:%s" % svc["ID"] + (":%d" % (i + 1) if len(defs) > 1 else "")
            checks.append(self.check_def(self.node, svc, t, cid, "Service '%s' check" % svc["Service"]))
        authz = self.write_rpc(req)
        authz.require("service", "write", svc["Service"])
        store = self.store
        with store.lock:
            idx = store.next_index()
            old = store.services.get((self.node, svc["ID"]))
            store.ensure_service(idx, self.node, svc)
            keep = {c["CheckID"] for c, _, _, _ in checks}
            if req.has("replace-existing-checks") or old is None:
                for (n, cid), c in list(store.checks.items()):
                    if n == self.node and c["ServiceID"] == svc["ID"] and cid not in keep:
                        store.delete_check(idx, n, cid)
            for t, (c, ttl, reap, run) in zip(defs, checks):
                prev = store.checks.get((self.node, c["CheckID"]))
                if prev is not None and not t["Status"]:
                    c = dict(c, Status=prev["Status"], Output=prev["Output"])   # a re-registration keeps the state
                store.ensure_check(idx, store.runner.start((self.node, c["CheckID"]), run, c))
                if ttl:
                    store.check_ttl[(self.node, c["CheckID"])] = [ttl, time.monotonic() + ttl / SECOND, ""]
                    store.timers.notify_all()
                else:
                    store.check_ttl.pop((self.node, c["CheckID"]), None)
                if reap:
                    state = store.check_reap.get((self.node, c["CheckID"]))
                    store.check_reap[(self.node, c["CheckID"])] = [reap, state[1] if state else None]
                    if c["Status"] == "critical" and not state:
                        store.check_reap[(self.node, c["CheckID"])][1] = time.monotonic()
                else:
                    store.check_reap.pop((self.node, c["CheckID"]), None)
            store.commit()
        return Response(200)

    def agent_service_deregister(self, req):
        sid = req.path[len("/v1/agent/service/deregister/"):]
        authz = self.write_rpc(req)
        store = self.store
        with store.lock:
            svc = store.services.get((self.node, sid))
            if svc is None:
                raise ApiError(404, "Unknown service ID %s. Ensure that the service ID is passed, "
                                    "not the service name." % go_quote(sid))
            authz.require("service", "write", svc["Service"])
            store.delete_service(store.next_index(), self.node, sid)
            store.commit()
        return Response(200)

    def agent_check_update(self, req):
        """/v1/agent/check/pass|warn|fail/<id>?note=, /v1/agent/check/update/<id> {Status, Output}."""
        verb, _, cid = req.path[len("/v1/agent/check/"):].partition("/")
        if verb == "update":
            body = self.decode_object(req, "checkUpdate")
            status = self.field(body, "Status", str, "")
            output = self.field(body, "Output", str, "")
            if status not in ("passing", "warning", "critical"):
                raise ApiError(400, "Invalid check status: \"%s\"" % status)
        else:
            status = {"pass": "passing", "warn": "warning", "fail": "critical"}[verb]
            output = req.get("note")
        authz = self.write_rpc(req)
        store = self.store
        with store.lock:
            key = (self.node, cid)
            # agent.go vetCheckUpdateWithAuthorizer: an unknown check is a 404 in current releases
            # (older ones: a 500 "Unknown check"); updateTTLCheck: a check without a TTL, a 500.
            if key not in store.checks:
                raise ApiError(404, "Unknown check ID %s. Ensure that the check ID is passed, not the check name."
                               % go_quote(cid))
            if key not in store.check_ttl:
                raise ApiError(500, "CheckID %s does not have associated TTL" % go_quote(cid))
            c = store.checks[key]
            authz.require("service" if c["ServiceID"] else "node", "write",
                          c["ServiceName"] if c["ServiceID"] else self.node)
            # CheckTTL.SetStatus: a long output is cut to check_output_max_size (bytes) and noted
            raw = output.encode()
            if len(raw) > CHECK_OUTPUT_MAX:
                output = "%s ... (captured %d of %d bytes)" % (raw[:CHECK_OUTPUT_MAX].decode("utf-8", "replace"),
                                                               CHECK_OUTPUT_MAX, len(raw))
            ttl = store.check_ttl[key][0]
            store.check_ttl[key][1:] = [time.monotonic() + ttl / SECOND, output]
            store.timers.notify_all()
            store.set_check_status(store.next_index(), self.node, cid, status, output)
            store.commit()
        return Response(200)

    def catalog_register(self, req):
        body = self.decode_object(req, "structs.RegisterRequest")
        f = self.field
        node = f(body, "Node", str, "")
        if node == "":
            raise ApiError(400, "Missing node name")
        address = f(body, "Address", str, "")
        if address == "":
            raise ApiError(400, "Missing node address")
        svc_body = f(body, "Service", dict)
        svc = self.service_def(svc_body) if svc_body else None
        check_bodies = ([f(body, "Check", dict)] if f(body, "Check", dict) else []) + f(body, "Checks", list, [])
        authz = self.write_rpc(req)
        authz.require("node", "write", node)
        if svc:
            authz.require("service", "write", svc["Service"])
        store = self.store
        with store.lock:
            idx = store.next_index()
            old = store.nodes.get(node, {})
            store.ensure_node(idx, {
                "ID": f(body, "ID", str, "") or old.get("ID", ""), "Node": node, "Address": address,
                "Datacenter": store.dc, "TaggedAddresses": f(body, "TaggedAddresses", dict, {}),
                "Meta": f(body, "NodeMeta", dict, {})})
            if svc:
                store.ensure_service(idx, node, svc)
            for cb in check_bodies:
                sid = f(cb, "ServiceID", str, "")
                target = store.services.get((node, sid)) if sid else None
                if sid and target is None:
                    raise ApiError(500, "Unknown service ID %s for check ID %s" % (
                        go_quote(sid), go_quote(f(cb, "CheckID", str, ""))))
                store.ensure_check(idx, self.catalog_check(node, target, cb))
            store.commit()
        return json_response(True, req)

    def catalog_deregister(self, req):
        body = self.decode_object(req, "structs.DeregisterRequest")
        node = self.field(body, "Node", str, "")
        if node == "":
            raise ApiError(400, "Missing node name")
        authz = self.write_rpc(req)
        authz.require("node", "write", node)
        store = self.store
        with store.lock:
            idx = store.next_index()
            sid, cid = self.field(body, "ServiceID", str, ""), self.field(body, "CheckID", str, "")
            if sid:
                store.delete_service(idx, node, sid)
            if cid:
                store.delete_check(idx, node, cid)
            if not sid and not cid:
                store.delete_node(idx, node)
            store.commit()
        return json_response(True, req)

    # -- ACL login (agent/acl_endpoint.go ACLLogin/ACLLogout, agent/consul/acl_endpoint.go
    #    Login/Logout, agent/consul/auth/token_writer.go Delete, acl/errors.go) ---------------

    def acl_login(self, req):
        """POST /v1/acl/login {AuthMethod, BearerToken, Meta}: a new local token for the
        identity the auth method vouches for, through its binding rules."""
        store = self.store
        if store.acl_master is None:
            raise ApiError(401, "ACL support disabled")
        try:
            body = json.loads(req.body().decode("utf-8") or "null")
            if not isinstance(body, dict):
                raise ValueError("json: cannot unmarshal %s into Go value of type structs.ACLLoginParams"
                                 % json_type(body))
        except (ValueError, UnicodeDecodeError) as e:
            raise ApiError(400, "Failed to decode request body: %s" % e)
        f = self.field
        name, bearer = f(body, "AuthMethod", str, ""), f(body, "BearerToken", str, "")
        meta = f(body, "Meta", dict, {})
        opts = QueryOptions(req.get("dc") or store.dc, "", False, False, 0, 0)
        self.rpc(opts, write=True)            # the request carries no token (Login refuses one)
        with store.lock:
            method = store.auth_methods.get(name)
            binding = None
            try:
                if method is None:
                    raise ApiError(403, "ACL not found: auth method %s not found" % go_quote(name))
                who = method["bearers"].get(bearer)
                if who is None:
                    # kubeauth ValidateLogin: the TokenReview did not authenticate the JWT (a plain error: 500)
                    raise ApiError(500, "lookup failed: service account jwt not valid")
                if who.get("rules") is not None:
                    binding = ("role", rules_from_policy(who["rules"]))
                elif who.get("service_identity"):
                    binding = ("service", service_identity_rules(who["service_identity"]))
                else:
                    raise ApiError(403, "Permission denied")    # no binding rule matched: no privileges
            except ApiError:
                store.acl_counts["login_failures"] += 1
                raise
            idx = store.next_index()
            now = time.time()
            accessor, secret = str(uuid.uuid4()), str(uuid.uuid4())
            description = "token created via login"
            if meta:                             # auth.BuildTokenDescription
                description += ": " + json.dumps(meta, separators=(",", ":"), sort_keys=True)
            token = {"AccessorID": accessor, "SecretID": secret, "Description": description}
            if binding[0] == "role":
                role = "%s-%s" % (name, who["service_account"])
                token["Roles"] = [{"ID": str(uuid.uuid5(uuid.NAMESPACE_URL, "role:" + role)), "Name": role}]
            else:
                token["ServiceIdentities"] = [{"ServiceName": who["service_identity"]}]
            token.update({"Local": True, "AuthMethod": name})
            record = {"accessor": accessor, "rules": binding[1], "auth_method": name}
            if method.get("max_token_ttl"):
                record["expires"] = now + method["max_token_ttl"] / SECOND
                token["ExpirationTime"] = go_time(record["expires"])
            token.update({"CreateTime": go_time(now),
                          "Hash": base64.b64encode(uuid.uuid5(uuid.NAMESPACE_URL, secret).bytes * 2).decode(),
                          "CreateIndex": idx, "ModifyIndex": idx})
            record["token"] = token
            store.acl_tokens[secret] = record
            store.acl_counts["logins"] += 1
            store.commit()
        return json_response(token, req)

    def acl_logout(self, req):
        """POST /v1/acl/logout: delete the request's token, if login made it."""
        store = self.store
        if store.acl_master is None:
            raise ApiError(401, "ACL support disabled")
        token = self.parse_token(req)
        if token == "":
            raise ApiError(401, "Supplied token does not exist")
        self.write_rpc(req)                  # an unknown or expired token: 403 "ACL not found"
        with store.lock:
            t = store.acl_tokens.get(token)
            if t is None or not t.get("auth_method"):
                raise ApiError(403, "Permission denied: token wasn't created via login")
            del store.acl_tokens[token]
            store.next_index()
            store.acl_counts["logouts"] += 1
            store.commit()
        return json_response(True, req)

    # -- status, agent, catalog ------------------------------------------------

    def status_leader(self, req):
        return json_response(self.peers[0] if self.faults.leader_known else "", req)

    def status_peers(self, req):
        return json_response(list(self.peers), req)

    def catalog_dcs(self, req):
        return json_response([self.store.dc], req)

    def agent_self(self, req):
        token = self.parse_token(req)
        with self.store.lock:
            authz = self.store.resolve_token(token)
        authz.require("agent", "read", self.node)
        s = self.store
        build = "%s:fake" % self.version
        if self.server:
            stats = {"server": "true", "leader": str(self.faults.leader_known).lower(), "known_datacenters": "1"}
        else:
            stats = {"server": "false", "known_servers": str(len(self.peers))}
        return json_response({
            "Config": {"Datacenter": s.dc, "PrimaryDatacenter": s.dc, "NodeName": self.node,
                       "NodeID": self.node_id, "Partition": "", "Revision": "fake",
                       "Server": self.server, "Version": self.version, "BuildDate": "2024-01-01T00:00:00Z"},
            "DebugConfig": {"Datacenter": s.dc, "NodeName": self.node, "ServerMode": self.server,
                            "ACLsEnabled": s.acl_master is not None,
                            "SessionTTLMin": format_go_duration(s.session_ttl_min),
                            "RPCHoldTimeout": format_go_duration(self.rpc_hold_timeout)},
            "Coord": {"Vec": [0, 0, 0, 0, 0, 0, 0, 0], "Error": 1.5, "Adjustment": 0, "Height": 1e-05},
            "Member": {"Name": self.node, "Addr": "127.0.0.1", "Port": 8301,
                       "Tags": {"acls": "1" if s.acl_master is not None else "0", "build": build,
                                "dc": s.dc, "id": self.node_id, "port": "8300",
                                "role": "consul" if self.server else "node",
                                "vsn": "2", "vsn_max": "3", "vsn_min": "2"},
                       "Status": 1, "ProtocolMin": 1, "ProtocolMax": 5, "ProtocolCur": 2,
                       "DelegateMin": 2, "DelegateMax": 5, "DelegateCur": 4},
            "Stats": {"consul": stats},
            "Meta": {"consul-network-segment": "", "consul-version": self.version},
            "xDS": None,
        }, req)


# ---------------------------------------------------------------------------
# Control API: /_fake/... (never used by Consul itself)
# ---------------------------------------------------------------------------

class FakeControl:
    def __init__(self, api, cluster=None):
        self.api, self.store, self.faults = api, api.store, api.faults
        self.cluster = cluster

    def serve(self, req):
        name = req.path[len("/_fake/"):].strip("/")
        handler = getattr(self, "do_" + name.replace("-", "_"), None)
        if handler is None:
            return self.reply({"error": "unknown fault hook %r" % name}, 404)
        try:
            return handler(req)
        except (ValueError, KeyError) as e:
            return self.reply({"error": str(e)}, 400)

    @staticmethod
    def reply(obj, status=200):
        return Response(status, json.dumps(obj, sort_keys=True).encode(), "application/json")

    @staticmethod
    def int_param(req, name, default=None):
        if not req.has(name):
            if default is None:
                raise ValueError("missing parameter %s" % name)
            return default
        return int(req.get(name))

    def do_fail(self, req):
        f = self.faults
        with f.lock:
            f.fail_count = self.int_param(req, "count", 1)
            f.fail_code = self.int_param(req, "code", 500)
            default = "No cluster leader" if f.fail_code == 500 else HTTPStatus(f.fail_code).phrase
            f.fail_body = req.get("body", default)
            f.fail_path, f.fail_method = req.get("path"), req.get("method").upper()
        return self.reply({"fail": f.fail_count, "code": f.fail_code})

    def do_hang(self, req):
        f = self.faults
        with f.lock:
            f.hang_count = self.int_param(req, "count", 1)
            f.hang_seconds = float(req.get("seconds", "0"))
            f.hang_then = req.get("then", "answer")
            if f.hang_then not in ("answer", "close"):
                raise ValueError("then must be answer or close")
        return self.reply({"hang": f.hang_count, "seconds": f.hang_seconds, "then": f.hang_then})

    def do_release(self, req):
        self.faults.release()
        return self.reply({"released": True})

    def do_pad(self, req):
        f = self.faults
        shape = req.get("shape", "numbers")
        if shape not in ("numbers", "string"):
            raise ValueError("shape must be numbers or string")
        with f.lock:
            f.pad_count = self.int_param(req, "count", 1)
            f.pad_bytes = self.int_param(req, "bytes")
            f.pad_path, f.pad_shape = req.get("path"), shape
        return self.reply({"pad": f.pad_count, "bytes": f.pad_bytes, "shape": shape})

    def do_slow(self, req):
        self.faults.slow_ms = self.int_param(req, "ms")
        return self.reply({"slow_ms": self.faults.slow_ms})

    def do_stale_empty(self, req):
        f = self.faults
        with f.lock:
            f.stale_empty_count = self.int_param(req, "count", 1)
            f.stale_empty_index = self.int_param(req, "index", 1)
        return self.reply({"stale_empty": f.stale_empty_count, "index": f.stale_empty_index})

    def do_lag(self, req):
        """Stale reads answered by a follower this far behind the leader (X-Consul-LastContact)."""
        ms = self.int_param(req, "ms")
        if ms < 0:
            raise ValueError("ms must be >= 0")
        with self.faults.lock:
            self.faults.stale_lag_ms = ms
        return self.reply({"stale_lag_ms": ms})

    def do_leader(self, req):
        f = self.faults
        known = self.int_param(req, "known") != 0
        reads = req.get("reads", "fail")
        if reads not in ("fail", "ok"):
            raise ValueError("reads must be fail or ok")
        consistent = req.get("consistent", "ok")
        if consistent not in ("ok", "verifying", "lost"):
            raise ValueError("consistent must be ok, verifying or lost")
        with f.lock:
            if f.leader_known and not known:
                f.leaderless_since = time.monotonic()
            f.leader_known, f.leaderless_reads, f.consistent_reads = known, reads, consistent
            f.cond.notify_all()
        return self.reply({"known": known, "reads": reads, "consistent": consistent})

    def do_counters(self, req):
        """API requests counted by endpoint group (/v1/kv, /v1/health, ...)."""
        with self.faults.lock:
            if req.method == "DELETE":
                self.faults.counts = {}
            counts = dict(self.faults.counts)
        return self.reply({"total": sum(counts.values()), "by_endpoint": counts})

    def do_index_backwards(self, req):
        """Like a snapshot restore of older data: every index drops to <= to."""
        s = self.store
        with s.lock:
            old = s.raft_index
            to = self.int_param(req, "to", 1)
            if not 1 <= to < old:
                raise ValueError("to must be >= 1 and below the raft index %d" % old)
            s.raft_index = to
            s.table_index = {k: min(v, to) for k, v in s.table_index.items()}
            s.kv = {k: dataclasses.replace(e, create_index=min(e.create_index, to),
                                           modify_index=min(e.modify_index, to))
                    for k, e in s.kv.items()}
            for t in s.tombstones.values():
                t[0] = min(t[0], to)
            for sess in s.sessions.values():
                sess.create_index, sess.modify_index = min(sess.create_index, to), min(sess.modify_index, to)
            s._persist()
            s.abandon()
        return self.reply({"raft_index": to, "previous": old})

    def do_reap_tombstones(self, req):
        with self.store.lock:
            n = self.store.reap_tombstones(everything=True)
            self.store.commit()
        return self.reply({"reaped": n})

    def do_acl(self, req):
        """?token=T&resource=&prefix=|exact=&policy=: a rule for token T (created when new);
        DELETE ?token=T revokes it. ?auth_method=NAME: the secrets of the tokens that method's
        logins minted and Consul still holds (GET), or revoke them all (DELETE), for tests that
        must reach a token nobody prints."""
        s = self.store
        if req.has("auth_method"):
            return self.acl_by_method(req)
        token = req.get("token")
        if not token:
            raise ValueError("missing parameter token")
        with s.lock:
            if req.method == "DELETE":
                s.acl_tokens.pop(token, None)
                s._persist()
                return self.reply({"revoked": True})
            resource = req.get("resource", "key")
            policy = req.get("policy")
            if resource not in RESOURCES or policy not in POLICIES or req.has("prefix") == req.has("exact"):
                raise ValueError("need prefix (a prefix rule) or exact (an exact rule), policy=read|write|deny, "
                                 "resource=key|session|agent|node|service")
            t = s.acl_tokens.setdefault(token, {"accessor": str(uuid.uuid4()), "rules": {}})
            if req.has("prefix"):
                t["rules"].setdefault(resource, {})[req.get("prefix")] = policy
            else:
                t["rules"].setdefault("exact", {}).setdefault(resource, {})[req.get("exact")] = policy
            s._persist()
            return self.reply({"accessor": t["accessor"] if token != "anonymous" else ANONYMOUS_ACCESSOR})

    def acl_by_method(self, req):
        s, method = self.store, req.get("auth_method")
        with s.lock:
            now = time.time()
            secrets = sorted(k for k, t in s.acl_tokens.items()
                             if t.get("auth_method") == method and t.get("expires", now + 1) > now)
            if req.method == "DELETE":
                for k in secrets:
                    del s.acl_tokens[k]
                s._persist()
                return self.reply({"revoked": len(secrets)})
            return self.reply({"tokens": secrets})

    def do_auth_method(self, req):
        """PUT: an auth method (a stand-in for a kubernetes one and its binding rules), body
        {"name", "type" (default kubernetes), "max_token_ttl" (Go duration, optional),
         "bearers": {JWT: {"service_account": NAME, "rules": [[rule, name, policy], ...]} or
                          {"service_account": NAME, "service_identity": SERVICE} or
                          {"service_account": NAME} (no binding rule matches it)}}.
        DELETE ?name=: remove it. GET: the methods and the login counts."""
        s = self.store
        if req.method == "GET":
            with s.lock:
                return self.reply({"methods": sorted(s.auth_methods), "counts": dict(s.acl_counts)})
        if req.method == "DELETE":
            with s.lock:
                s.auth_methods.pop(req.get("name"), None)
                s._persist()
            return self.reply({"deleted": True})
        body = json.loads(req.body().decode("utf-8"))
        name = body.get("name", "")
        if not re.fullmatch(r"[A-Za-z0-9_-]+", name):     # AuthMethodSet's validAuthMethod
            raise ValueError("name: only alphanumeric characters, '-' and '_'")
        bearers = body.get("bearers", {})
        for who in bearers.values():
            if not who.get("service_account"):
                raise ValueError("each bearer needs a service_account")
            if who.get("rules") is not None:
                rules_from_policy(who["rules"])            # refuse a bad rule now
        ttl = parse_go_duration(body["max_token_ttl"]) if body.get("max_token_ttl") else 0
        with s.lock:
            s.auth_methods[name] = {"type": body.get("type", "kubernetes"), "max_token_ttl": ttl,
                                    "bearers": bearers}
            s._persist()
        return self.reply({"name": name, "max_token_ttl": format_go_duration(ttl)})

    def do_restart_server(self, req):
        """Restart server n (1-based): refused for `down` seconds (default 1), its serfHealth
        critical meanwhile (its sessions invalidated), then back and passing."""
        if self.cluster is None:
            raise ValueError("no cluster")
        slot = self.cluster.slot(self.int_param(req, "n"))
        down = float(req.get("down", "1"))
        if not 0 <= down <= 600:
            raise ValueError("down must be between 0 and 600 seconds")
        handler = getattr(req, "handler", None)
        if handler is not None and handler.slot is slot:
            handler.close_connection = True          # this answer is its last
        slot.restart(down, keep=handler)
        return self.reply({"server": slot.n, "node": slot.api.node, "down": down})

    def do_servers(self, req):
        """The servers: n, node, address, whether it is restarting."""
        return self.reply([{"n": x.n, "node": x.api.node, "addr": x.addr(), "down": x.restarting,
                            "server": x.api.server} for x in self.cluster.slots])

    def do_requests(self, req):
        with self.faults.lock:
            if req.method == "DELETE":
                self.faults.requests = []
                return self.reply([])
            return self.reply(list(self.faults.requests))

    def do_reset(self, req):
        with self.faults.lock:
            self.faults.reset()
        self.faults.release()
        return self.reply({"reset": True})

    def do_expire_sessions(self, req):
        s = self.store
        with s.lock:
            ids = list(s.sessions)
            for sid in ids:
                s.session_invalidate(sid)
            s.commit()
        return self.reply({"expired": len(ids)})

    def do_wipe(self, req):
        s = self.store
        with s.lock:
            acl = s.acl_tokens
            s._reset_state()
            s.acl_tokens = acl                  # ACL config is not part of "data"
            s._register_agent_node()            # the agent registers itself again
            s._persist()
            s.abandon()
        return self.reply({"wiped": True, "raft_index": s.raft_index})

    def do_check(self, req):
        """Set any check's status (serfHealth included: a node failing its
        gossip health, which invalidates the node's sessions)."""
        s = self.store
        node = req.get("node") or s.node
        cid = req.get("id") or SERF_HEALTH
        status = req.get("status")
        if status not in ("passing", "warning", "critical"):
            raise ValueError("status must be passing, warning or critical")
        with s.lock:
            if (node, cid) not in s.checks:
                raise KeyError("no check %r on node %r" % (cid, node))
            idx = s.next_index()
            output = req.get("output") if req.has("output") else None
            s.set_check_status(idx, node, cid, status, output)
            s.commit()
        return self.reply({"node": node, "check": cid, "status": status, "index": idx})

    def do_state(self, req):
        s = self.store
        with s.lock:
            return self.reply({"raft_index": s.raft_index, "table_index": s.table_index,
                               "keys": len(s.kv), "tombstones": len(s.tombstones),
                               "sessions": len(s.sessions), "blocked_queries": len(s.watches),
                               "acl": dict(s.acl_counts), "tokens": len(s.acl_tokens)})


# ---------------------------------------------------------------------------
# HTTP server plumbing
# ---------------------------------------------------------------------------

class Handler(BaseHTTPRequestHandler):
    # Go's net/http (Consul) sets TCP_NODELAY on every connection; without it a response
    # written in pieces waits for the client's delayed ACK (about 40 ms on loopback).
    disable_nagle_algorithm = True

    protocol_version = "HTTP/1.1"
    server_version = "consul-double"
    api = None          # set on the class by make_server()
    control = None
    slot = None         # the ServerSlot this listener belongs to
    verbose = False

    def setup(self):
        super().setup()
        self.thread = threading.current_thread()
        self.slot.opened(self)

    def finish(self):
        try:
            super().finish()
        finally:
            self.slot.closed(self)

    def do_GET(self):
        self.dispatch()

    do_PUT = do_DELETE = do_POST = do_HEAD = do_OPTIONS = do_PATCH = do_GET

    def log_message(self, fmt, *args):
        if self.verbose:
            sys.stderr.write("consul_kv: %s %s\n" % (self.address_string(), fmt % args))

    continue_pending = False

    def handle_expect_100(self):
        # Like Go's server, answer "100 Continue" only once the handler starts
        # reading the body: a request refused early (413) is never uploaded.
        self.continue_pending = True
        return True

    def read_body(self):
        if self.continue_pending:
            self.continue_pending = False
            self.wfile.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            self.wfile.flush()
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline().strip():
                        pass
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def dispatch(self):
        parts = urlsplit(self.path)
        raw_path = parts.path or "/"
        req = Request(self.command, raw_path, parts.query, self.headers, self.read_body)
        req.handler = self
        faults = self.api.faults
        stopping = lambda: self.api.store.stopping  # noqa: E731

        if req.path.startswith("/_fake/"):
            resp = self.control.serve(req)
        else:
            record = self.log_record(req)
            record["server"] = self.slot.n
            faults.log(record)
            hang = faults.take_hang()
            if hang:
                seconds, then, gen = hang
                faults.hang(seconds, gen, stopping)
                if then == "close":
                    self.close_connection = True
                    return
            failed = faults.take_fail(req.method, req.path)
            if failed:
                code, body = failed
                resp = Response(code, body.encode(), "text/plain; charset=utf-8")
            else:
                try:
                    resp = self.api.serve(req)
                except Stopping:
                    self.close_connection = True
                    return
                except Exception as e:              # a bug in the double: say so, loudly
                    traceback.print_exc()
                    resp = Response(500, ("consul double internal error: %r" % e).encode())
        if req._body is None:
            if self.continue_pending:
                # The client waits for "100 Continue" that never came: it
                # never sends the body, so the connection cannot be reused.
                self.continue_pending = False
                resp.headers["Connection"] = "close"
                self.close_connection = True
            else:
                # Drain what the handler did not read, so that a client still
                # sending is not reset; after a 413 the connection is closed.
                if req.content_length() <= 64 * 1024 * 1024:
                    req.body()
                if resp.status == 413:
                    resp.headers["Connection"] = "close"
                    self.close_connection = True
        if faults.slow_ms and not req.path.startswith("/_fake/"):
            time.sleep(faults.slow_ms / 1000.0)
        if not req.path.startswith("/_fake/") and resp.status == 200 and resp.body.endswith(b"}]"):
            pad = faults.take_pad(req.path)
            if pad:
                resp.body = padded(resp.body, *pad)
        self.send(req, resp)

    @staticmethod
    def log_record(req):
        """Request log entry: never the token value, only where one came from."""
        source = None
        if req.get("token"):
            source = "query"
        elif req.headers.get("X-Consul-Token"):
            source = "header"
        elif req.headers.get("Authorization", "").lower().startswith("bearer "):
            source = "bearer"
        query = {k: (["<hidden>"] * len(v) if k == "token" else v) for k, v in req.query.items()}
        return {"method": req.method, "path": req.path, "query": query, "token": source,
                "time": time.time()}

    def send(self, req, resp):
        body = resp.body
        accept = self.headers.get("Accept-Encoding", "")
        if len(body) >= GZIP_MIN_SIZE and "gzip" in [a.split(";")[0].strip() for a in accept.split(",")]:
            body = gzip.compress(body, mtime=0)
            resp.headers["Content-Encoding"] = "gzip"
        resp.headers["Content-Length"] = str(len(body))
        resp.headers["Date"] = self.date_time_string()
        if resp.status >= 400 and resp.body and "Content-Type" not in resp.headers:
            resp.headers["Content-Type"] = "text/plain; charset=utf-8"
        # Head and body in one write, as Go's buffered writer sends a small answer: one segment,
        # and one system call here (hundreds of woken blocking queries take turns on one
        # interpreter lock, once per call that gives it up).
        reason = self.responses.get(resp.status, ("",))[0]
        head = ["HTTP/1.1 %d %s\r\n" % (resp.status, reason)]
        head += ["%s: %s\r\n" % (k, resp.headers[k]) for k in sorted(resp.headers)]  # Go sorts them
        out = "".join(head).encode("latin-1") + b"\r\n"
        try:
            self.wfile.write(out + body if req.method != "HEAD" else out)
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 1024               # listen backlog: hundreds of agents connect at once


def parse_listen(text):
    m = re.fullmatch(r"\[?([^\]]*?)\]?:(\d+)", text)
    if not m:
        raise ValueError("--listen wants HOST:PORT, got %r" % text)
    host, port = m.group(1), int(m.group(2))
    if host == "localhost":
        host = "127.0.0.1"
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        raise ValueError("--listen host must be a loopback IP address, got %r" % host)
    if not ip.is_loopback:
        raise ValueError("refusing to listen on non-loopback address %s" % host)
    return host, port, ip.version


class ServerSlot:
    """One server agent of the double: its HTTP API (its own node), its listener and the
    connections open on it. All slots share one Store (the replicated state) and one Faults."""

    def __init__(self, cluster, n, api, host, port, family):
        self.cluster, self.n, self.api = cluster, n, api
        self.host, self.port, self.family = host, port, family
        self.lock = threading.Lock()
        self.handlers = set()           # open connections (their Handler)
        self.httpd = None
        self.restarting = False

    def listen(self):
        handler = type("BoundHandler", (Handler,), {"api": self.api, "control": self.cluster.control,
                                                    "slot": self, "verbose": self.cluster.verbose})
        server_cls = type("ServerN", (Server,), {"address_family": self.family})
        self.httpd = server_cls((self.host, self.port), handler)
        self.port = self.httpd.server_address[1]
        # The serving thread is a daemon: an idle double wakes up for nothing (no poll interval);
        # stop_listening() wakes it with a connection of its own.
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 3600},
                         name="http-%d" % self.n, daemon=True).start()

    def addr(self):
        return "%s:%d" % (self.host if ":" not in self.host else "[%s]" % self.host, self.port)

    def opened(self, handler):
        with self.lock:
            self.handlers.add(handler)

    def closed(self, handler):
        with self.lock:
            self.handlers.discard(handler)

    def stop_listening(self):
        """Close the listener (connections are then refused): shutdown() waits for
        serve_forever's loop, which a connection of our own wakes."""
        httpd, self.httpd = self.httpd, None
        stopper = threading.Thread(target=httpd.shutdown, daemon=True)
        stopper.start()
        while stopper.is_alive():
            try:
                socket.create_connection((self.host, self.port), timeout=1).close()
            except OSError:
                pass
            stopper.join(0.05)
        httpd.server_close()

    def drop_connections(self, keep=None):
        """Reset every open connection but `keep`; blocking queries waiting on them give up."""
        with self.lock:
            doomed = [h for h in self.handlers if h is not keep]
        threads = set()
        for h in doomed:
            threads.add(h.thread)
            h.close_connection = True
            try:
                h.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        store = self.cluster.store
        with store.lock:
            for w in store.watches:
                if w.thread in threads:
                    w.cancelled = w.fired = True
            store.changed.notify_all()

    def restart(self, down, keep=None):
        """/_fake/restart-server: the agent stops (listener closed, connections reset), the leader
        marks its node's serfHealth critical (leader.go handleFailedMember), which invalidates the
        sessions bound to it; after `down` seconds it serves again and serfHealth passes
        (handleAliveMember). Its services and checks stay: agents persist what the API registered
        in their data dir (agent.go persistService / persistCheck) and load it at start."""
        with self.lock:
            if self.restarting:
                raise ValueError("server %d is already restarting" % self.n)
            self.restarting = True
        self.stop_listening()
        self.drop_connections(keep)
        self.cluster.set_serf(self.api.node, "critical", "Agent not live or unreachable")
        self.cluster.update_peers()
        timer = threading.Timer(down, self.come_back)
        timer.daemon = True
        timer.start()

    def come_back(self):
        if self.cluster.store.stopping:
            return
        deadline = time.monotonic() + 10
        while True:
            try:
                self.listen()
                break
            except OSError:
                if time.monotonic() > deadline or self.cluster.store.stopping:
                    raise
                time.sleep(0.05)
        self.cluster.set_serf(self.api.node, "passing", "Agent alive and reachable")
        with self.lock:
            self.restarting = False
        self.cluster.update_peers()


class Cluster:
    """N server agents over one shared state (--servers N, or several --listen)."""

    def __init__(self, store, faults, verbose=False):
        self.store, self.faults, self.verbose = store, faults, verbose
        self.slots = []
        self.control = None

    def update_peers(self):
        """Every server's /v1/status/peers: all servers' RPC addresses, the leader first (the
        first server that is up; the double elects at once)."""
        rpc = ["127.0.0.%d:8300" % s.n for s in self.slots]
        up = [s for s in self.slots if not s.restarting] or self.slots
        leader = rpc[up[0].n - 1]
        for s in self.slots:
            s.api.peers = [leader] + [a for a in rpc if a != leader]

    def set_serf(self, node, status, output):
        store = self.store
        with store.lock:
            if (node, SERF_HEALTH) in store.checks:
                store.set_check_status(store.next_index(), node, SERF_HEALTH, status, output)
                store.commit()

    def slot(self, n):
        if not 1 <= n <= len(self.slots):
            raise ValueError("n must be between 1 and %d" % len(self.slots))
        return self.slots[n - 1]


def make_server(args):
    """The shared state and one ServerSlot per listener, not yet listening: a Cluster."""
    listens = args.listen or ["127.0.0.1:0"]
    if len(listens) > 1 and args.servers not in (1, len(listens)):
        raise ValueError("--servers %d with %d --listen addresses" % (args.servers, len(listens)))
    count = max(args.servers, len(listens))
    if count < 1:
        raise ValueError("--servers must be at least 1")
    if args.client_agent and count > 1:
        raise ValueError("--client-agent is for a single listener")
    parsed = [parse_listen(x) for x in listens]
    if len(parsed) == 1 and count > 1:
        if parsed[0][1] != 0:
            raise ValueError("--servers %d needs port 0 or one --listen per server" % count)
        parsed = parsed * count
    nodes = [args.node] if count == 1 else ["%s-%d" % (args.node, i + 1) for i in range(count)]
    if args.datadir:
        os.makedirs(args.datadir, exist_ok=True)
    store = Store(datadir=args.datadir, dc=args.dc, node=nodes[0], version=args.consul_version,
                  acl_master=args.acl_master_token,
                  check_reap_interval=parse_go_duration(args.check_reap_interval),
                  deregister_critical_min=parse_go_duration(args.check_deregister_interval_min),
                  check_update_interval=parse_go_duration(args.check_update_interval),
                  session_ttl_min=parse_go_duration(args.session_ttl_min),
                  tombstone_ttl=parse_go_duration(args.tombstone_ttl), agent_nodes=nodes)
    faults = Faults()
    cluster = Cluster(store, faults, args.verbose)
    for i, (host, port, version) in enumerate(parsed):
        api = ConsulAPI(store, faults, kv_max_value_size=args.kv_max_value_size,
                        txn_max_ops=args.txn_max_ops, version=args.consul_version,
                        rpc_hold_timeout=parse_go_duration(args.rpc_hold_timeout),
                        key_validation=args.kv_key_validation, default_token=args.acl_default_token,
                        node=nodes[i], server=not args.client_agent)
        family = socket.AF_INET6 if version == 6 else socket.AF_INET
        cluster.slots.append(ServerSlot(cluster, i + 1, api, host, port, family))
    cluster.control = FakeControl(cluster.slots[0].api, cluster)
    cluster.update_peers()
    if args.client_agent:
        cluster.slots[0].api.peers = ["127.0.0.1:8300"]
    return cluster


def write_port_file(path, line):
    tmp = "%s.tmp.%d" % (path, os.getpid())
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(line + "\n")
    os.replace(tmp, path)


def main(argv=None):
    p = argparse.ArgumentParser(description="Consul KV HTTP API test double")
    p.add_argument("--listen", action="append",
                   help="HOST:PORT (loopback only; port 0 = any; default 127.0.0.1:0); repeat for several servers")
    p.add_argument("--servers", type=int, default=1,
                   help="server agents sharing one state, each with its own listener and node <node>-N (default 1)")
    p.add_argument("--client-agent", action="store_true",
                   help="answer /v1/agent/self as a client agent (Config.Server false); one listener only")
    p.add_argument("--datadir", help="persist KV, sessions and index here (restart with data)")
    p.add_argument("--port-file", help='write "http=HOST:PORT" here once listening (one line per server)')
    p.add_argument("--dc", default="dc1", help="datacenter name (default dc1)")
    p.add_argument("--node", default=socket.gethostname() or "fake-node", help="node name")
    p.add_argument("--acl-master-token", help="enable ACLs (default deny) with this management token")
    p.add_argument("--session-ttl-min", default="10s", help="session_ttl_min (default 10s)")
    p.add_argument("--tombstone-ttl", default="15m", help="KV tombstone lifetime (default 15m)")
    p.add_argument("--check-reap-interval", default="30s",
                   help="how often services whose check stayed critical too long are deregistered (default 30s)")
    p.add_argument("--check-deregister-interval-min", default="1m",
                   help="the least DeregisterCriticalServiceAfter honoured (default 1m)")
    p.add_argument("--check-update-interval", default="5m",
                   help="how long a run check's output-only change waits to be written (default 5m, 0 = at once)")
    p.add_argument("--txn-max-ops", type=int, default=TXN_MAX_OPS_DEFAULT,
                   help="operations allowed in one /v1/txn (default 64; Consul >= 1.x uses 128)")
    p.add_argument("--kv-max-value-size", type=int, default=KV_MAX_VALUE_SIZE)
    p.add_argument("--consul-version", default=FAKE_CONSUL_VERSION, help="version reported by /v1/agent/self")
    p.add_argument("--rpc-hold-timeout", default="7s",
                   help="how long reads and writes wait for a leader before 500 (default 7s, rpc_hold_timeout)")
    p.add_argument("--kv-key-validation", default="none", choices=KEY_VALIDATION,
                   help="KV key rules: none (before 1.21.5, or disable_kv_key_validation), 1.21.5 (the "
                        "character regex), relaxed (#22850: no traversal, no leading/trailing space)")
    p.add_argument("--acl-default-token", default="",
                   help="the agent's default token, used for requests that carry none")
    p.add_argument("--verbose", action="store_true", help="log every request to stderr")
    args = p.parse_args(argv)
    # A few hundred blocking clients each hold a connection (a thread and a
    # file descriptor here, as a goroutine and an fd in Consul): lift the
    # soft fd limit to the hard one and keep thread stacks small.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = hard if hard != resource.RLIM_INFINITY else 65536
    if soft != resource.RLIM_INFINITY and soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    threading.stack_size(THREAD_STACK_SIZE)
    # One write wakes every blocking query on it: hundreds of threads then take turns on the
    # interpreter lock. A holder is asked to give it up after this long (default 5 ms); at 0.5 ms
    # the woken queries are answered in a fairer order (measured with 200 agents: re-arm p99
    # 180-205 ms against 200-345 ms, tests/bench/fanout_bench.py).
    sys.setswitchinterval(0.0005)
    try:
        cluster = make_server(args)
        for slot in cluster.slots:
            slot.listen()
    except (ValueError, OSError) as e:
        print("consul_kv: %s" % e, file=sys.stderr)
        return 2
    store, faults = cluster.store, cluster.faults

    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    line = "\n".join("http=" + slot.addr() for slot in cluster.slots)
    if args.port_file:
        write_port_file(args.port_file, line)
    print(line, flush=True)
    while not stop.wait(0.2):  # short waits: see proxysql_admin.py's main (a SIGTERM another thread got)
        pass
    store.shutdown()          # waits for a write in progress; wakes blocked queries
    faults.release()
    for slot in cluster.slots:
        if slot.httpd is not None:
            slot.httpd.server_close()
    return 0                  # daemon threads (open connections) end with the process


if __name__ == "__main__":
    sys.exit(main())
