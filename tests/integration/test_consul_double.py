"""Conformance tests for the Consul KV test double (tests/fakes/consul_kv.py).

Each test pins one documented behaviour of Consul's HTTP API and names its
source (kv.mdx, txn.mdx, session.mdx, features/blocking.mdx,
features/consistency.mdx, or the server code where the docs are silent).
With CONSUL_BIN=/path/to/consul the same tests run against the real binary;
tests that need a fault hook of the double are then skipped with a reason.

Run: /usr/bin/python3 -m pytest -q tests/integration/test_consul_double.py
"""

import base64
import concurrent.futures
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from fakes.consul import DOUBLE, PYTHON, Consul  # noqa: E402
from fakes.process import free_port  # noqa: E402

MASTER = "root-" + uuid.uuid4().hex
POOL = concurrent.futures.ThreadPoolExecutor(max_workers=64)


# ---------------------------------------------------------------------------
# Fixtures and helpers
# ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def consul():
    """A shared instance with default settings; tests use their own key prefix."""
    with Consul() as c:
        yield c


@pytest.fixture(scope="module")
def fast():
    """session_ttl_min = 1s so TTL expiry can be observed in seconds."""
    with Consul(session_ttl_min="1s") as c:
        yield c


@pytest.fixture(scope="module")
def acl():
    """ACLs enabled, default deny, with a management token."""
    with Consul(acl_master_token=MASTER) as c:
        yield c


@pytest.fixture
def fresh():
    """A private instance for tests that restart, wipe or kill it."""
    with Consul() as c:
        yield c


@pytest.fixture
def ns():
    """A key prefix of this test's own."""
    return "t/%s/" % uuid.uuid4().hex[:12]


def need_fake(c, why):
    if not c.is_fake:
        pytest.skip("needs the Consul double: %s" % why)


def b64(s):
    return base64.b64encode(s if isinstance(s, bytes) else s.encode()).decode()


def entry(c, key, **kw):
    r = c.get(key, **kw)
    assert r.status == 200, r
    [e] = r.json()
    return e


def in_background(fn, *args, **kwargs):
    """Run fn in a thread; the future's result is (elapsed seconds, value)."""
    def timed():
        t0 = time.monotonic()
        value = fn(*args, **kwargs)
        return time.monotonic() - t0, value
    return POOL.submit(timed)


# ---------------------------------------------------------------------------
# GET /v1/kv/<key>
# ---------------------------------------------------------------------------

def test_get_returns_metadata_array(consul, ns):
    """kv.mdx "Metadata Response": an array of objects with CreateIndex,
    ModifyIndex, LockIndex, Key, Flags and a base64 Value; Session only when
    held (third-party fixtures show it omitted); ModifyIndex corresponds to
    X-Consul-Index."""
    assert consul.put(ns + "zip", b"test", flags=42).json() is True
    r = consul.get(ns + "zip")
    assert r.status == 200
    assert r.header("Content-Type") == "application/json"
    [e] = r.json()
    assert set(e) == {"CreateIndex", "ModifyIndex", "LockIndex", "Key", "Flags", "Value"}
    assert e["Key"] == ns + "zip" and e["Flags"] == 42 and e["LockIndex"] == 0
    assert base64.b64decode(e["Value"]) == b"test"
    assert e["CreateIndex"] == e["ModifyIndex"] == r.index


def test_missing_key_is_404_with_empty_body_and_meta_headers(consul, ns):
    """kv.mdx: "If no key exists at the given path, a 404 is returned";
    kvs_endpoint.go calls setMeta() before the 404 check, so X-Consul-Index
    (never below 1), X-Consul-KnownLeader and X-Consul-LastContact are set."""
    r = consul.get(ns + "missing")
    assert r.status == 404 and r.body == b""
    assert r.index >= 1
    assert r.header("X-Consul-KnownLeader") == "true"
    assert r.header("X-Consul-LastContact") == "0"


def test_empty_value_is_null(consul, ns):
    """Go marshals a nil []byte as null: an empty value comes back as
    "Value": null (sync.md 1.1, folder keys)."""
    assert consul.put(ns + "folder/", b"").json() is True
    assert entry(consul, ns + "folder/")["Value"] is None


def test_raw_returns_the_bytes_as_text_plain(consul, ns):
    """kv.mdx "Raw Response": ?raw gives the value without encoding or
    metadata, Content-Type text/plain; only for a single key (kvs_endpoint.go)."""
    blob = bytes(range(256))
    consul.put(ns + "blob", blob)
    r = consul.get(ns + "blob", raw=True)
    assert r.status == 200 and r.body == blob
    assert r.header("Content-Type") == "text/plain"
    assert r.header("X-Content-Type-Options") == "nosniff"
    r = consul.get(ns, recurse=True, raw=True)
    assert r.status == 200 and r.json()[0]["Key"] == ns + "blob"


def test_recurse_lists_the_prefix_and_indexes_its_latest_change(consul, ns):
    """kv.mdx: with ?recurse the key is a prefix, and X-Consul-Index
    "corresponds to the latest ModifyIndex within the prefix"."""
    for k in ("b/d", "a", "b/c"):
        consul.put(ns + k, k.encode())
    consul.put("other-" + ns, b"outside")
    r = consul.get(ns, recurse=True)
    assert r.status == 200
    keys = [e["Key"] for e in r.json()]
    assert keys == [ns + "a", ns + "b/c", ns + "b/d"]
    assert r.index == max(e["ModifyIndex"] for e in r.json())
    consul.put("other-" + ns, b"outside again")
    assert consul.get(ns, recurse=True).index == r.index


def test_prefix_is_a_plain_string_prefix(consul, ns):
    """kv.mdx: the key is "treated as a prefix": db1 also matches db10."""
    consul.put(ns + "db1/x", b"1")
    consul.put(ns + "db10/x", b"10")
    keys = [e["Key"] for e in consul.get(ns + "db1", recurse=True).json()]
    assert keys == [ns + "db1/x", ns + "db10/x"]


def test_recurse_on_missing_prefix_is_404_with_an_index(consul, ns):
    """kvs_endpoint.go: zero entries -> 404 with the meta headers; KVS.List
    never reports index 0 ("Must provide non-zero index to prevent blocking")."""
    r = consul.get(ns + "nothing/", recurse=True)
    assert r.status == 404 and r.body == b""
    assert r.index >= 1


def test_get_without_key_name_is_400(consul):
    """kvs_endpoint.go KVSGet: no key and no ?recurse -> 400 "Missing key name"."""
    r = consul.request("GET", "/v1/kv/")
    assert r.status == 400 and r.text == "Missing key name"


def test_keys_and_separator(consul, ns):
    """kv.mdx "Keys Response": ?keys returns key names only; with
    separator=/ listing /web/ gives ["/web/bar", "/web/foo", "/web/subdir/"]."""
    for k in ("web/bar", "web/foo", "web/subdir/x", "web/subdir/y"):
        consul.put(ns + k, b"v")
    r = consul.get(ns + "web/", keys=True, separator="/")
    assert r.status == 200
    assert r.json() == [ns + "web/bar", ns + "web/foo", ns + "web/subdir/"]
    assert len(consul.get(ns + "web/", keys=True).json()) == 4


def test_keys_on_missing_prefix_is_404_but_root_is_empty_list(fresh):
    """kvs_endpoint.go KVSGetKeys: no keys -> 404, "We do not generate not
    found for the root, but just provide the empty list"."""
    assert fresh.delete("", recurse=True).json() is True
    assert fresh.get("nothing/", keys=True).status == 404
    r = fresh.get("", keys=True)
    assert r.status == 200 and r.json() == []


def test_unknown_datacenter_is_500_no_path(consul, ns):
    """kv.mdx (Delete Key, dc): an invalid dc gives "No path to datacenter"."""
    for r in (consul.get(ns + "k", dc="nowhere"), consul.put(ns + "k", b"v", dc="nowhere"),
              consul.delete(ns + "k", dc="nowhere")):
        assert r.status == 500 and "No path to datacenter" in r.text
    assert consul.get(ns + "k", dc=consul.dc).status == 404


def test_consistency_modes_and_headers(consul, ns):
    """consistency.mdx: ?stale, ?consistent, ?leader choose the mode and
    X-Consul-Effective-Consistency names the query parameter of the mode used
    (default mode -> "leader"); http.go: ?stale with ?consistent -> 400."""
    consul.put(ns + "k", b"v")
    for params, mode in (({}, "leader"), ({"leader": True}, "leader"),
                         ({"stale": True}, "stale"), ({"consistent": True}, "consistent")):
        r = consul.get(ns + "k", **params)
        assert r.status == 200
        assert r.header("X-Consul-Effective-Consistency") == mode
        assert r.header("X-Consul-KnownLeader") == "true"
        assert r.header("X-Consul-LastContact") is not None
    r = consul.get(ns + "k", stale=True, consistent=True)
    assert r.status == 400 and "Cannot specify ?stale with ?consistent" in r.text


def test_header_names_are_go_canonical(consul, ns):
    """Go's net/http canonicalises header names: X-Consul-KnownLeader goes on
    the wire as X-Consul-Knownleader, so a client must compare names
    case-insensitively."""
    consul.put(ns + "k", b"v")
    names = set(consul.get(ns + "k").headers.keys())
    assert {"X-Consul-Index", "X-Consul-Knownleader", "X-Consul-Lastcontact"} <= names


def test_large_answers_are_gzipped_when_asked(consul, ns):
    """agent/http.go wraps every endpoint in gziphandler (1400-byte minimum)."""
    consul.put(ns + "big", b"x" * 4000)
    r = consul.get(ns + "big", )
    assert r.header("Content-Encoding") is None
    r = consul.request("GET", consul.key_path(ns + "big"), headers={"Accept-Encoding": "gzip"})
    assert r.header("Content-Encoding") == "gzip"
    import gzip
    assert json.loads(gzip.decompress(r.body))[0]["Key"] == ns + "big"


# ---------------------------------------------------------------------------
# PUT and DELETE /v1/kv/<key>
# ---------------------------------------------------------------------------

def test_put_stores_raw_body_and_flags(consul, ns):
    """kv.mdx Create/Update Key: the payload is loaded as supplied; flags is
    an unsigned value between 0 and 2^64-1; the answer is true."""
    r = consul.put(ns + "k", b"\x00raw\xff", flags=2 ** 64 - 1)
    assert r.status == 200 and r.json() is True
    e = entry(consul, ns + "k")
    assert e["Flags"] == 2 ** 64 - 1 and base64.b64decode(e["Value"]) == b"\x00raw\xff"


def test_put_cas(consul, ns):
    """kv.mdx cas: "If the index is 0, Consul will only put the key if it does
    not already exist. If the index is non-zero, the key is only set if the
    index matches the ModifyIndex of that key"; the answer is true or false."""
    k = ns + "cas"
    assert consul.put(k, b"1", cas=0).json() is True
    assert consul.put(k, b"2", cas=0).json() is False
    idx = entry(consul, k)["ModifyIndex"]
    assert consul.put(k, b"3", cas=idx + 1000).json() is False
    assert consul.put(k, b"3", cas=idx).json() is True
    assert consul.value(k) == b"3"
    assert consul.put(ns + "absent", b"x", cas=5).json() is False


def test_put_conflicting_flags_is_400(consul, ns):
    """kvs_endpoint.go: cas, acquire and release are mutually exclusive
    (400 "Conflicting flags: ...")."""
    r = consul.put(ns + "k", b"v", cas=0, acquire=str(uuid.uuid4()))
    assert r.status == 400 and r.text.startswith("Conflicting flags:")
    r = consul.delete(ns + "k", recurse=True, cas=1)
    assert r.status == 400 and r.text.startswith("Conflicting flags:")


def test_put_larger_than_512k_is_413(consul, ns):
    """kv.mdx: "Values in the KV store cannot be larger than 512kb";
    kvs_endpoint.go answers 413 on the Content-Length, before reading the
    body, so a client sending "Expect: 100-continue" gets the 413 instead of
    "100 Continue" and never uploads."""
    assert consul.put(ns + "max", b"m" * (512 * 1024)).json() is True
    with socket.create_connection(("127.0.0.1", consul.port), timeout=10) as sock:
        sock.sendall(("PUT /v1/kv/%sbig HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n"
                      "Expect: 100-continue\r\n\r\n" % (ns, consul.addr, 512 * 1024 + 1)).encode())
        status = sock.makefile("rb").readline()
    assert status.split()[1] == b"413", status
    assert consul.get(ns + "big").status == 404


def test_expect_100_continue_upload(consul, ns):
    """An accepted upload with "Expect: 100-continue" gets "100 Continue",
    then the final answer."""
    body = b"v" * 2000
    with socket.create_connection(("127.0.0.1", consul.port), timeout=10) as sock:
        sock.sendall(("PUT /v1/kv/%sk HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n"
                      "Expect: 100-continue\r\n\r\n" % (ns, consul.addr, len(body))).encode())
        f = sock.makefile("rb")
        assert f.readline().split()[1] == b"100"
        while f.readline().strip():
            pass
        sock.sendall(body)
        assert f.readline().split()[1] == b"200"
    assert consul.value(ns + "k") == body


def test_put_and_delete_need_a_key(consul):
    """kvs_endpoint.go: PUT or DELETE (without recurse) on /v1/kv/ -> 400."""
    assert consul.request("PUT", "/v1/kv/", body=b"x").status == 400
    r = consul.request("DELETE", "/v1/kv/")
    assert r.status == 400 and r.text == "Missing key name"


def test_identical_write_keeps_modify_index(consul, ns):
    """state/kvs.go kvsSetTxn: an entry equal to the stored one is not
    rewritten, so ModifyIndex (and a blocking query on it) does not move."""
    consul.put(ns + "same", b"v")
    idx = entry(consul, ns + "same")["ModifyIndex"]
    consul.put(ns + "same", b"v")
    assert entry(consul, ns + "same")["ModifyIndex"] == idx
    consul.put(ns + "same", b"w")
    assert entry(consul, ns + "same")["ModifyIndex"] > idx


def test_delete_single_recurse_and_cas(consul, ns):
    """kv.mdx Delete Key: deletes one key, or every key with the prefix with
    ?recurse; with cas "the index must be greater than 0 ... a 0 index will not
    delete the key", else it must match ModifyIndex; answers true/false."""
    for k in ("a", "b/1", "b/2", "c"):
        consul.put(ns + k, b"v")
    assert consul.delete(ns + "a").json() is True
    assert consul.get(ns + "a").status == 404
    assert consul.delete(ns + "never-existed").json() is True
    assert consul.delete(ns + "b/", recurse=True).json() is True
    assert consul.get(ns + "b/", recurse=True).status == 404
    idx = entry(consul, ns + "c")["ModifyIndex"]
    assert consul.delete(ns + "c", cas=0).json() is False
    assert consul.delete(ns + "c", cas=idx + 1).json() is False
    assert consul.get(ns + "c").status == 200
    assert consul.delete(ns + "c", cas=idx).json() is True
    assert consul.get(ns + "c").status == 404


def test_key_with_leading_slash_is_redirected(consul, ns):
    """Consul's HTTP mux is Go's ServeMux, which answers a path with "//" by a
    301 to the cleaned path; the Go client refuses keys starting with "/"."""
    r = consul.request("GET", "/v1/kv//" + ns + "k")
    assert r.status == 301 and r.header("Location") == "/v1/kv/" + ns + "k"


def test_unknown_endpoint_and_wrong_method(consul):
    """agent/http.go: unknown /v1/ paths -> 404 "Invalid URL path: not a
    recognized HTTP API endpoint"; a method an endpoint does not allow -> 405
    with an Allow header."""
    r = consul.request("GET", "/v1/nonsense")
    assert r.status == 404 and r.text.startswith("Invalid URL path")
    r = consul.request("POST", "/v1/kv/x", body=b"v")
    assert r.status == 405
    assert {"GET", "PUT", "DELETE"} <= set(r.header("Allow").split(","))


# ---------------------------------------------------------------------------
# Locks: ?acquire / ?release with sessions
# ---------------------------------------------------------------------------

def test_acquire_and_release(consul, ns):
    """kv.mdx acquire: takes the lock if it is free and the session valid,
    incrementing LockIndex and setting Session; re-acquiring by the holder does
    not increment LockIndex but updates the contents; an update without
    acquire proceeds even if another session holds the lock. release: only the
    holder releases; LockIndex unchanged, Session cleared."""
    k = ns + "lock"
    s1, s2 = consul.session_create(LockDelay="0s"), consul.session_create(LockDelay="0s")
    try:
        assert consul.put(k, b"v1", acquire=s1).json() is True
        e = entry(consul, k)
        assert e["LockIndex"] == 1 and e["Session"] == s1
        assert consul.put(k, b"v2", acquire=s1).json() is True
        e = entry(consul, k)
        assert e["LockIndex"] == 1 and base64.b64decode(e["Value"]) == b"v2"
        assert consul.put(k, b"x", acquire=s2).json() is False
        assert consul.put(k, release=s2).json() is False
        assert consul.put(k, b"v3", release=s1).json() is True
        e = entry(consul, k)
        assert e["LockIndex"] == 1 and "Session" not in e
        assert consul.put(k, b"v4", acquire=s2).json() is True
        assert entry(consul, k)["LockIndex"] == 2
        assert consul.put(k, b"plain write").json() is True
        e = entry(consul, k)
        assert e["Session"] == s2 and base64.b64decode(e["Value"]) == b"plain write"
    finally:
        for s in (s1, s2):
            consul.request("PUT", "/v1/session/destroy/" + s)


def test_acquire_with_unknown_session_fails(consul, ns):
    """state/kvs.go kvsLockTxn: a session that does not exist is an error
    ("invalid session"), answered as 500."""
    r = consul.put(ns + "k", b"v", acquire=str(uuid.uuid4()))
    assert r.status == 500 and "invalid session" in r.text


# ---------------------------------------------------------------------------
# PUT /v1/txn
# ---------------------------------------------------------------------------

def test_txn_success_shape(consul, ns):
    """txn.mdx: 200 with Results; "the Value for KV results will be null for
    any Verb other than get"; "no result entries will be added for verbs that
    delete keys"."""
    k1, k2 = ns + "one", ns + "two"
    r = consul.txn([{"KV": {"Verb": "set", "Key": k1, "Value": b64("one"), "Flags": 7}},
                    {"KV": {"Verb": "get", "Key": k1}},
                    {"KV": {"Verb": "set", "Key": k2, "Value": b64("two")}}])
    assert r.status == 200, r
    body = r.json()
    assert body["Errors"] is None and len(body["Results"]) == 3
    set_result, get_result = body["Results"][0]["KV"], body["Results"][1]["KV"]
    assert set_result["Key"] == k1 and set_result["Value"] is None and set_result["Flags"] == 7
    assert base64.b64decode(get_result["Value"]) == b"one"
    idx = get_result["ModifyIndex"]
    r = consul.txn([{"KV": {"Verb": "cas", "Key": k1, "Value": b64("uno"), "Index": idx}},
                    {"KV": {"Verb": "delete", "Key": k2}},
                    {"KV": {"Verb": "delete-tree", "Key": ns + "nothing/"}}])
    assert r.status == 200, r
    assert [res["KV"]["Key"] for res in r.json()["Results"]] == [k1]
    assert consul.value(k1) == b"uno" and consul.get(k2).status == 404
    idx = entry(consul, k1)["ModifyIndex"]
    r = consul.txn([{"KV": {"Verb": "delete-cas", "Key": k1, "Index": idx}}])
    assert r.status == 200 and consul.get(k1).status == 404


def test_txn_is_atomic_and_reports_errors(consul, ns):
    """txn.mdx: "If any operation fails, the transaction is rolled back and
    none of the changes are applied"; 409 with Errors [{OpIndex, What}]."""
    consul.put(ns + "cas", b"v")
    r = consul.txn([{"KV": {"Verb": "set", "Key": ns + "new", "Value": b64("x")}},
                    {"KV": {"Verb": "cas", "Key": ns + "cas", "Value": b64("y"), "Index": 1}},
                    {"KV": {"Verb": "get", "Key": ns + "missing"}}])
    assert r.status == 409
    body = r.json()
    assert body["Results"] is None
    assert [e["OpIndex"] for e in body["Errors"]] == [1, 2]
    assert all(isinstance(e["What"], str) and e["What"] for e in body["Errors"])
    assert consul.get(ns + "new").status == 404
    assert consul.value(ns + "cas") == b"v"


def test_txn_operation_limit(consul, ns):
    """agent/txn_endpoint.go maxTxnOps (64; 128 in newer releases): more ->
    413 "Transaction contains too many operations"."""
    ops = [{"KV": {"Verb": "set", "Key": "%sk%03d" % (ns, i), "Value": b64("v")}} for i in range(64)]
    assert consul.txn(ops).status == 200
    ops = [{"KV": {"Verb": "get", "Key": ns + "k000"}}] * 129
    r = consul.txn(ops)
    assert r.status == 413 and "Transaction contains too many operations" in r.text


def test_read_only_txn_headers(consul, ns):
    """txn.mdx: read-only transactions "provide the X-Consul-LastContact
    header ... The X-Consul-KnownLeader header also indicates if there is a
    known leader"; they do not block (no X-Consul-Index)."""
    consul.put(ns + "k", b"v")
    r = consul.txn([{"KV": {"Verb": "get", "Key": ns + "k"}}], stale=True)
    assert r.status == 200
    assert r.header("X-Consul-KnownLeader") == "true"
    assert r.header("X-Consul-LastContact") is not None
    assert r.header("X-Consul-Index") is None


def test_txn_bad_body_is_400(consul, ns):
    """agent/txn_endpoint.go: a body that does not decode -> 400 "Failed to parse body"."""
    r = consul.txn([{"KV": {"Verb": "set", "Key": ns + "k", "Value": "not base64!"}}])
    assert r.status == 400 and r.text.startswith("Failed to parse body")
    r = consul.request("PUT", "/v1/txn", body=b"{not json")
    assert r.status == 400


# ---------------------------------------------------------------------------
# Sessions
# ---------------------------------------------------------------------------

def test_session_create_info_list_destroy(consul):
    """session.mdx: create returns {"ID"}; defaults LockDelay 15s, Behavior
    release, Node = the agent's node, NodeChecks [serfHealth]; info returns a
    list ("[]" when the session does not exist); destroy returns true and is
    idempotent."""
    sid = consul.session_create(Name="test-session")
    r = consul.request("GET", "/v1/session/info/" + sid)
    assert r.status == 200 and r.index >= 1
    [s] = r.json()
    assert s["ID"] == sid and s["Name"] == "test-session" and s["Node"] == consul.node
    assert s["LockDelay"] == 15 * 10 ** 9 and s["Behavior"] == "release" and s["TTL"] == ""
    assert s["NodeChecks"] == ["serfHealth"]
    assert sid in [x["ID"] for x in consul.request("GET", "/v1/session/list").json()]
    assert consul.request("PUT", "/v1/session/destroy/" + sid).json() is True
    r = consul.request("GET", "/v1/session/info/" + sid)
    assert r.status == 200 and r.json() == []
    assert consul.request("PUT", "/v1/session/destroy/" + sid).json() is True


def test_session_ttl_bounds_and_behavior(consul):
    """session.mdx: TTL "between 10s and 86400s"; Behavior release|delete;
    the server rejects others (500)."""
    for ttl in ("5s", "86401s"):
        r = consul.request("PUT", "/v1/session/create", body=json.dumps({"TTL": ttl}))
        assert r.status == 500 and "Invalid Session TTL" in r.text
    r = consul.request("PUT", "/v1/session/create", body=json.dumps({"Behavior": "explode"}))
    assert r.status == 500 and "Invalid Behavior" in r.text
    sid = consul.session_create(TTL="10s", Behavior="delete")
    [s] = consul.request("GET", "/v1/session/info/" + sid).json()
    assert s["TTL"] == "10s" and s["Behavior"] == "delete"
    consul.request("PUT", "/v1/session/destroy/" + sid)


def test_session_lock_delay_forms(consul):
    """session_endpoint.go FixupLockDelay: a duration string, or a bare number
    below 1000 taken as seconds; "0s" means no lock delay."""
    for given, ns_value in (("0s", 0), (5, 5 * 10 ** 9), ("250ms", 250 * 10 ** 6)):
        sid = consul.session_create(LockDelay=given)
        [s] = consul.request("GET", "/v1/session/info/" + sid).json()
        assert s["LockDelay"] == ns_value, given
        consul.request("PUT", "/v1/session/destroy/" + sid)


def test_session_renew(consul):
    """session.mdx Renew: returns the session in a list; an unknown session
    -> 404 (session_endpoint.go "Session id '...' not found")."""
    sid = consul.session_create(TTL="10s")
    r = consul.request("PUT", "/v1/session/renew/" + sid)
    assert r.status == 200 and r.json()[0]["ID"] == sid
    consul.request("PUT", "/v1/session/destroy/" + sid)
    r = consul.request("PUT", "/v1/session/renew/" + sid)
    assert r.status == 404 and "not found" in r.text


def wait_gone(c, sid, limit):
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if c.request("GET", "/v1/session/info/" + sid).json() == []:
            return True
        time.sleep(0.05)
    return False


def test_ttl_expiry_releases_or_deletes_held_keys(fast, ns):
    """session.mdx: a TTL session "is invalidated if it is not renewed before
    the TTL expires" and "may not be reaped for up to double this TTL"
    (Consul's timer is 2 x TTL); Behavior release releases the locks, delete
    deletes the keys."""
    rel = fast.session_create(TTL="2s", LockDelay="0s")
    dele = fast.session_create(TTL="2s", LockDelay="0s", Behavior="delete")
    t0 = time.monotonic()
    assert fast.put(ns + "released", b"r", acquire=rel).json() is True
    assert fast.put(ns + "deleted", b"d", acquire=dele).json() is True
    time.sleep(2.3)                       # past the TTL, before 2 x TTL
    assert fast.request("GET", "/v1/session/info/" + rel).json() != []
    assert wait_gone(fast, rel, 8) and wait_gone(fast, dele, 3)
    assert time.monotonic() - t0 >= 3.8
    e = entry(fast, ns + "released")
    assert "Session" not in e and base64.b64decode(e["Value"]) == b"r"
    assert fast.get(ns + "deleted").status == 404


def test_renew_keeps_a_ttl_session_alive(fast):
    """session.mdx Renew: "extends the expiration by the TTL"."""
    sid = fast.session_create(TTL="1s")
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        assert fast.request("PUT", "/v1/session/renew/" + sid).status == 200
        time.sleep(0.4)
    assert fast.request("GET", "/v1/session/info/" + sid).json() != []
    assert wait_gone(fast, sid, 5)


def test_lock_delay_blocks_reacquire(consul, ns):
    """session.mdx LockDelay / kvs_endpoint preApply: after a session holding
    a lock is invalidated, the key cannot be acquired until the lock delay has
    passed; a LockDelay of 0s allows immediate re-acquire."""
    k = ns + "delayed"
    s1 = consul.session_create(LockDelay="2s")
    s2 = consul.session_create(LockDelay="0s")
    assert consul.put(k, b"v", acquire=s1).json() is True
    consul.request("PUT", "/v1/session/destroy/" + s1)
    t0 = time.monotonic()
    assert consul.put(k, b"v", acquire=s2).json() is False
    while consul.put(k, b"v", acquire=s2).json() is not True:
        assert time.monotonic() - t0 < 8
        time.sleep(0.05)
    assert time.monotonic() - t0 >= 1.8
    consul.request("PUT", "/v1/session/destroy/" + s2)
    s3 = consul.session_create(LockDelay="0s")
    assert consul.put(k, b"v", acquire=s3).json() is True
    consul.request("PUT", "/v1/session/destroy/" + s3)


# ---------------------------------------------------------------------------
# Blocking queries
# ---------------------------------------------------------------------------

def test_blocking_query_returns_when_the_key_changes(consul, ns):
    """blocking.mdx: with ?index the request hangs "until a change in the
    system occurs"; the answer carries a higher X-Consul-Index."""
    consul.put(ns + "k", b"1")
    idx = consul.get(ns + "k").index
    fut = in_background(consul.get, ns + "k", index=idx, wait="10s")
    time.sleep(0.3)
    assert not fut.done()
    consul.put(ns + "k", b"2")
    elapsed, r = fut.result(timeout=5)
    assert elapsed < 3 and r.status == 200 and r.index > idx
    assert base64.b64decode(r.json()[0]["Value"]) == b"2"


def test_blocking_query_times_out_after_wait_plus_jitter(consul, ns):
    """blocking.mdx: the wait parameter bounds the request; up to wait/16 of
    random jitter is added; a return "is no guarantee of a change"."""
    consul.put(ns + "k", b"1")
    idx = consul.get(ns + "k").index
    elapsed, r = in_background(consul.get, ns + "k", index=idx, wait="1s").result(timeout=10)
    assert 1.0 <= elapsed < 1.0 + 1 / 16 + 1.5      # generous: the machine may be busy
    assert r.status == 200 and r.index == idx


def test_blocking_wait_units(consul, ns):
    """blocking.mdx: wait "can be specified in the form of 10s or 5m"; Go
    durations also take ms."""
    consul.put(ns + "k", b"1")
    idx = consul.get(ns + "k").index
    elapsed, r = in_background(consul.get, ns + "k", index=idx, wait="200ms").result(timeout=10)
    assert 0.2 <= elapsed < 2.0


def test_blocking_bad_wait_or_index_is_400(consul, ns):
    """http.go parseWait: "Invalid wait time" / "Invalid index" (400)."""
    r = consul.get(ns + "k", index=1, wait="soon")
    assert r.status == 400 and r.text == "Invalid wait time"
    r = consul.get(ns + "k", index="-1")
    assert r.status == 400 and r.text == "Invalid index"


def test_blocking_on_a_prefix_ignores_writes_elsewhere(consul, ns):
    """kv.mdx: "a blocking query using that ?index will wait until any key
    within that prefix is updated"."""
    consul.put(ns + "in/a", b"1")
    idx = consul.get(ns + "in/", recurse=True).index
    fut = in_background(consul.get, ns + "in/", recurse=True, index=idx, wait="1s")
    time.sleep(0.2)
    consul.put(ns + "out/x", b"elsewhere")
    elapsed, r = fut.result(timeout=10)
    assert elapsed >= 1.0 and r.index == idx
    fut = in_background(consul.get, ns + "in/", recurse=True, index=idx, wait="10s")
    time.sleep(0.2)
    consul.put(ns + "in/b", b"2")
    elapsed, r = fut.result(timeout=10)
    assert elapsed < 3 and r.index > idx and len(r.json()) == 2


def test_blocking_on_a_missing_key_wakes_when_created(consul, ns):
    """blocking.mdx: "It is always safe to use an index of 1 to wait for
    updates when the data being requested doesn't exist yet"."""
    r = consul.get(ns + "later")
    assert r.status == 404
    fut = in_background(consul.get, ns + "later", index=r.index, wait="10s")
    time.sleep(0.3)
    consul.put(ns + "later", b"here")
    elapsed, r2 = fut.result(timeout=10)
    assert elapsed < 3 and r2.status == 200 and r2.index > r.index


def test_many_concurrent_blocking_clients(consul, ns):
    """blocking.mdx: many clients can block on the same data; one write
    releases them all."""
    consul.put(ns + "k", b"1")
    idx = consul.get(ns + "k").index
    futs = [in_background(consul.get, ns + "k", index=idx, wait="20s") for _ in range(50)]
    time.sleep(0.5)
    assert not any(f.done() for f in futs)
    consul.put(ns + "k", b"2")
    for f in futs:
        elapsed, r = f.result(timeout=10)
        assert r.status == 200 and r.index > idx


def test_deleting_the_newest_key_does_not_move_the_index_back(consul, ns):
    """state/kvs.go: deletes leave tombstones "to prevent the index from
    sliding backwards": a list's index covers the delete."""
    consul.put(ns + "a", b"1")
    consul.put(ns + "b", b"2")
    before = consul.get(ns, recurse=True).index
    consul.delete(ns + "b")
    after = consul.get(ns, recurse=True)
    assert [e["Key"] for e in after.json()] == [ns + "a"]
    assert after.index > before


def test_reaped_tombstone_lets_the_index_go_backwards(consul, ns):
    """blocking.mdx "Reset the index if it goes backwards": one cause is "KV
    list operations where an item with the highest index is removed" (once
    its tombstone is reaped)."""
    need_fake(consul, "reaping tombstones on demand (/_fake/reap_tombstones)")
    consul.put(ns + "a", b"1")
    a_idx = consul.get(ns + "a").index
    consul.put(ns + "b", b"2")
    consul.delete(ns + "b")
    assert consul.get(ns, recurse=True).index > a_idx
    consul.fault("reap_tombstones")
    assert consul.get(ns, recurse=True).index == a_idx


def test_blocked_clients_cost_no_cpu(consul, ns):
    """The double waits on a condition variable: 50 blocked clients for 2 s
    must not burn CPU (no polling)."""
    need_fake(consul, "reads the double's own CPU time")
    consul.put(ns + "k", b"1")
    idx = consul.get(ns + "k").index

    def cpu():
        with open("/proc/%d/stat" % consul.proc.pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    futs = [in_background(consul.get, ns + "k", index=idx, wait="3s") for _ in range(50)]
    time.sleep(0.5)
    c0 = cpu()
    time.sleep(2)
    assert cpu() - c0 < 0.2
    for f in futs:
        f.result(timeout=10)


def test_wait_default_cap_and_jitter():
    """blocking.mdx: wait defaults to 5 minutes, is limited to 10 minutes,
    plus up to wait/16 of jitter; Go duration syntax."""
    sys.path.insert(0, os.path.dirname(DOUBLE))
    import consul_kv as ck
    s = 10 ** 9
    assert ck.parse_go_duration("10s") == 10 * s
    assert ck.parse_go_duration("1m30s") == 90 * s
    assert ck.parse_go_duration("100ms") == s // 10
    assert ck.parse_go_duration("1.5h") == 5400 * s
    for bad in ("", "10", "5 m", "abc"):
        with pytest.raises(ValueError):
            ck.parse_go_duration(bad)
    assert ck.format_go_duration(86400 * s) == "24h0m0s"
    for _ in range(200):
        assert 300 * s <= ck.query_timeout_ns(0) < 300 * s + 300 * s // 16
        assert 600 * s <= ck.query_timeout_ns(3600 * s) < 600 * s + 600 * s // 16


# ---------------------------------------------------------------------------
# ACLs
# ---------------------------------------------------------------------------

def test_acl_default_deny_and_token_sources(acl, ns):
    """api-docs index.mdx: the token goes in X-Consul-Token, "Authorization:
    Bearer" or ?token; without one the anonymous token applies (default
    deny -> 403 "Permission denied"); an unknown token -> 403 "ACL not found"."""
    assert acl.put(ns + "k", b"v", token=MASTER).json() is True
    r = acl.get(ns + "k")
    assert r.status == 403 and r.text.startswith("Permission denied")
    assert acl.put(ns + "k", b"v").status == 403
    assert acl.get(ns + "k", token=MASTER).status == 200
    r = acl.request("GET", acl.key_path(ns + "k"), headers={"Authorization": "Bearer " + MASTER})
    assert r.status == 200
    r = acl.request("GET", acl.key_path(ns + "k"), params={"token": MASTER})
    assert r.status == 200
    r = acl.get(ns + "k", token=str(uuid.uuid4()))
    assert r.status == 403 and "ACL not found" in r.text


def test_acl_rules_and_silent_list_filtering(acl, ns):
    """kvs_endpoint.go: a single key needs key:read (else 403); list and keys
    reads silently drop what the token cannot read and set
    X-Consul-Results-Filtered-By-ACLs: true (sync.md 1.4)."""
    for k in ("pub/a", "pub/b", "secret/x"):
        acl.put(ns + k, b"v", token=MASTER)
    tok = acl.create_token([("key", ns + "pub/", "read")])
    assert acl.get(ns + "pub/a", token=tok).status == 200
    r = acl.get(ns + "secret/x", token=tok)
    assert r.status == 403 and r.text.startswith("Permission denied")
    r = acl.put(ns + "pub/a", b"w", token=tok)
    assert r.status == 403 and r.text.startswith("Permission denied")
    r = acl.get(ns, recurse=True, token=tok)
    assert r.status == 200
    assert [e["Key"] for e in r.json()] == [ns + "pub/a", ns + "pub/b"]
    assert r.header("X-Consul-Results-Filtered-By-ACLs") == "true"
    r = acl.get(ns, keys=True, token=tok)
    assert r.json() == [ns + "pub/a", ns + "pub/b"]
    assert r.header("X-Consul-Results-Filtered-By-ACLs") == "true"
    r = acl.get(ns + "pub/", recurse=True, token=tok)
    assert r.header("X-Consul-Results-Filtered-By-ACLs") is None


def test_acl_filtered_header_hidden_without_token(acl, ns):
    """agent/consul/rpc.go maskResultsFilteredByACLs: the header is only set
    for requests that present a token."""
    acl.put(ns + "k", b"v", token=MASTER)
    r = acl.get(ns, recurse=True)
    assert r.status == 404 and r.header("X-Consul-Results-Filtered-By-ACLs") is None


def test_acl_write_token_and_txn(acl, ns):
    """key write rules allow PUT; txn.mdx ACL "depends on the operations":
    a denied op fails the transaction (409, What "Permission denied...")."""
    tok = acl.create_token([("key", ns + "rw/", "write")])
    assert acl.put(ns + "rw/k", b"v", token=tok).json() is True
    r = acl.txn([{"KV": {"Verb": "set", "Key": ns + "rw/a", "Value": b64("1")}},
                 {"KV": {"Verb": "set", "Key": ns + "ro/a", "Value": b64("1")}}], token=tok)
    assert r.status == 409
    [err] = r.json()["Errors"]
    assert err["OpIndex"] == 1 and err["What"].startswith("Permission denied")
    assert acl.get(ns + "rw/a", token=MASTER).status == 404


def test_acl_revoked_token(acl, ns):
    """A deleted token no longer resolves: 403 "ACL not found"."""
    tok = acl.create_token([("key", ns, "read")])
    acl.put(ns + "k", b"v", token=MASTER)
    assert acl.get(ns + "k", token=tok).status == 200
    acl.revoke_token(tok)
    r = acl.get(ns + "k", token=tok)
    assert r.status == 403 and "ACL not found" in r.text


# ---------------------------------------------------------------------------
# Status and agent endpoints
# ---------------------------------------------------------------------------

def test_status_and_agent_self(consul):
    """status.mdx: /v1/status/leader answers the leader's "IP:port" as a JSON
    string and /v1/status/peers the raft peers; agent/self gives Config
    (Datacenter, NodeName, Server, Version) and Member (sync.md 1.6)."""
    leader = consul.request("GET", "/v1/status/leader").json()
    assert re.fullmatch(r"\d+\.\d+\.\d+\.\d+:\d+", leader)
    assert leader in consul.request("GET", "/v1/status/peers").json()
    me = consul.request("GET", "/v1/agent/self").json()
    assert me["Config"]["Datacenter"] == consul.dc
    assert me["Config"]["NodeName"] == consul.node
    assert me["Config"]["Server"] is True
    assert re.match(r"\d+\.\d+\.\d+", me["Config"]["Version"])
    assert me["Member"]["Name"] == consul.node


def test_stale_reads_of_a_lagging_follower(fresh, ns):
    """consistency.mdx: a stale read may be answered by a follower, X-Consul-LastContact saying how
    long ago it heard from the leader; default and consistent reads go to the leader (0).
    /_fake/lag sets the follower's lag for stale reads."""
    fresh.put(ns + "k", b"v")
    fresh.fault("lag", ms=12000)
    try:
        stale = fresh.get(ns, recurse=True, stale=True)
        assert stale.status == 200 and stale.header("X-Consul-LastContact") == "12000"
        assert stale.header("X-Consul-KnownLeader") == "true"
        for params in ({}, {"consistent": True}):
            r = fresh.get(ns, recurse=True, **params)
            assert r.status == 200 and r.header("X-Consul-LastContact") == "0", params
    finally:
        fresh.fault("lag", ms=0)
    assert fresh.get(ns, recurse=True, stale=True).header("X-Consul-LastContact") == "0"


# ---------------------------------------------------------------------------
# Restart, crash, persistence
# ---------------------------------------------------------------------------

def test_restart_with_data_keeps_keys_and_index(fresh, ns):
    """A server keeps its KV store and raft index across a restart."""
    fresh.put(ns + "k", b"kept")
    idx = fresh.get(ns + "k").index
    fresh.restart(keep_data=True)
    r = fresh.get(ns + "k")
    assert r.status == 200 and base64.b64decode(r.json()[0]["Value"]) == b"kept"
    assert r.index == idx
    fresh.put(ns + "k2", b"new")
    assert fresh.get(ns + "k2").index > idx


def test_restart_without_data_is_empty(fresh, ns):
    """A server that lost its data dir starts empty."""
    fresh.put(ns + "k", b"gone")
    fresh.restart(keep_data=False)
    assert fresh.get(ns + "k").status == 404


def test_kill_then_start(fresh, ns):
    """SIGKILL drops connections; a start on the same address serves the data."""
    fresh.put(ns + "k", b"v")
    fresh.kill()
    with pytest.raises(OSError):
        fresh.get(ns + "k", timeout=2)
    fresh.start()
    assert fresh.value(ns + "k") == b"v"


def test_kill_keeps_every_acknowledged_write_and_delete(fresh, ns):
    """The KV is journaled write by write: after many sets, overwrites, a failed transaction
    (which rewrites the journal whole) and deletes, a SIGKILL loses nothing that was answered."""
    for i in range(300):
        fresh.put(ns + "k%03d" % (i % 100), b"v%d" % i)
    bad = fresh.txn([{"KV": {"Verb": "set", "Key": ns + "k000", "Value": "eA=="}},
                     {"KV": {"Verb": "cas", "Key": ns + "k001", "Index": 1, "Value": "eA=="}}])
    assert bad.status == 409
    for i in range(0, 100, 3):
        fresh.delete(ns + "k%03d" % i)
    before = fresh.get(ns, recurse="")
    assert before.status == 200
    fresh.kill()
    fresh.start()
    after = fresh.get(ns, recurse="")
    assert after.json() == before.json() and after.index == before.index
    assert len(after.json()) == 100 - 34
    assert fresh.value(ns + "k001") == b"v201"


# ---------------------------------------------------------------------------
# Command line of the double
# ---------------------------------------------------------------------------

def test_cli_port_file_stdout_and_fast_start(tmp_path):
    """--listen 127.0.0.1:0 picks a free port; "http=HOST:PORT" goes to the
    port file (atomically) and stdout; start-up is well under a second."""
    pf = tmp_path / "port"
    t0 = time.monotonic()
    p = subprocess.Popen([PYTHON, DOUBLE, "--listen", "127.0.0.1:0", "--port-file", str(pf)],
                         stdout=subprocess.PIPE, text=True)
    try:
        line = p.stdout.readline().strip()
        assert time.monotonic() - t0 < 1.5      # about 0.2 s when the machine is idle
        assert re.fullmatch(r"http=127\.0\.0\.1:\d+", line)
        assert pf.read_text().strip() == line
        c = Consul(use_double=True, workdir=str(tmp_path))
        c.port = int(line.rsplit(":", 1)[1])
        assert c.request("GET", "/v1/status/leader").status == 200
    finally:
        p.terminate()
        p.wait(5)


def test_cli_refuses_non_loopback():
    """The double listens on loopback only."""
    for addr in ("0.0.0.0:0", "192.0.2.1:0"):
        r = subprocess.run([PYTHON, DOUBLE, "--listen", addr], capture_output=True, text=True,
                           timeout=10)
        assert r.returncode == 2 and "loopback" in r.stderr


def test_cli_sigterm_stops_promptly_with_blocked_clients(tmp_path):
    """SIGTERM stops the double at once, even with blocking queries open."""
    c = Consul(use_double=True, workdir=str(tmp_path))
    c.start()
    try:
        c.put("k", b"v")
        idx = c.get("k").index
        futs = [in_background(c.get, "k", index=idx, wait="60s") for _ in range(5)]
        time.sleep(0.3)
        t0 = time.monotonic()
        c.proc.send_signal(signal.SIGTERM)
        assert c.proc.wait(5) == 0
        assert time.monotonic() - t0 < 3
        for f in futs:
            try:
                f.result(timeout=5)
            except (OSError, http.client.HTTPException):
                pass                      # dropped by the stopping server
    finally:
        c.stop()


# ---------------------------------------------------------------------------
# Fault hooks of the double (skipped against real Consul)
# ---------------------------------------------------------------------------

def test_fault_fail(fresh, ns):
    """/_fake/fail?count=N&code=C: the next N API requests answer C with a body."""
    fresh.fault("fail", count=2, code=503)
    for _ in range(2):
        r = fresh.get(ns + "k")
        assert r.status == 503 and r.body
    assert fresh.get(ns + "k").status == 404
    fresh.fault("fail", count=1, code=500, path="/v1/kv/")
    assert fresh.request("GET", "/v1/status/leader").status == 200
    r = fresh.get(ns + "k")
    assert r.status == 500 and r.text == "No cluster leader"


def test_fault_hang_until_release(fresh, ns):
    """/_fake/hang?count=1&seconds=0 holds the next request until /_fake/release."""
    fresh.fault("hang", count=1, seconds=0)
    fut = in_background(fresh.get, ns + "k", timeout=20)
    time.sleep(0.5)
    assert not fut.done()
    fresh.fault("release")
    elapsed, r = fut.result(timeout=5)
    assert r.status == 404 and elapsed >= 0.5
    assert fresh.get(ns + "k").status == 404


def test_fault_hang_for_seconds_and_close(fresh, ns):
    """/_fake/hang?seconds=S delays the answer; then=close drops the connection."""
    fresh.fault("hang", count=1, seconds=0.5)
    t0 = time.monotonic()
    assert fresh.get(ns + "k").status == 404
    assert time.monotonic() - t0 >= 0.5
    fresh.fault("hang", count=1, seconds=0.1, then="close")
    with pytest.raises(OSError):
        fresh.get(ns + "k", timeout=5)


def test_fault_slow(fresh, ns):
    """/_fake/slow?ms=N delays every answer; ms=0 resets."""
    fresh.fault("slow", ms=1500)
    t0 = time.monotonic()
    fresh.get(ns + "k")
    assert time.monotonic() - t0 >= 1.5
    fresh.fault("slow", ms=0)
    t0 = time.monotonic()
    fresh.get(ns + "k")
    assert time.monotonic() - t0 < 1.5


def test_fault_index_backwards(fresh, ns):
    """/_fake/index_backwards: like a snapshot restore, the raft index is
    reset, X-Consul-Index goes down and blocked queries return at once."""
    fresh.put(ns + "k", b"v")
    idx = fresh.get(ns + "k").index
    fut = in_background(fresh.get, ns + "k", index=idx, wait="30s")
    time.sleep(0.3)
    fresh.fault("index_backwards")
    elapsed, r = fut.result(timeout=5)
    assert elapsed < 3 and r.status == 200
    after = fresh.get(ns + "k")
    assert after.status == 200 and after.index < idx
    fresh.put(ns + "k", b"w")
    assert fresh.get(ns + "k").index > after.index


def test_fault_stale_empty(fresh, ns):
    """/_fake/stale_empty?count=N: the next N KV reads answer 200 + [] for a
    prefix, as a fresh follower did in hashicorp/consul#3975."""
    fresh.put(ns + "k", b"v")
    fresh.fault("stale_empty", count=1)
    r = fresh.get(ns, recurse=True)
    assert r.status == 200 and r.json() == []
    assert len(fresh.get(ns, recurse=True).json()) == 1


def test_fault_leader(tmp_path, ns):
    """/_fake/leader?known=0: no leader. status/leader is "", stale reads are
    served with X-Consul-KnownLeader: false, other reads and writes fail with
    500 "No cluster leader" (consistency.mdx: stale "works without a leader");
    reads=ok serves every read; known=1 restores. (rpc_hold_timeout 0 here:
    see test_no_leader_holds_requests_for_rpc_hold_timeout.)"""
    fresh = Consul(use_double=True, workdir=str(tmp_path), extra_args=["--rpc-hold-timeout", "0s"])
    fresh.start()
    try:
        fault_leader_checks(fresh, ns)
    finally:
        fresh.close()


def fault_leader_checks(fresh, ns):
    fresh.put(ns + "k", b"v")
    fresh.fault("leader", known=0)
    assert fresh.request("GET", "/v1/status/leader").json() == ""
    r = fresh.get(ns + "k", stale=True)
    assert r.status == 200 and r.header("X-Consul-KnownLeader") == "false"
    r = fresh.get(ns + "k")
    assert r.status == 500 and r.text == "No cluster leader"
    assert fresh.put(ns + "k", b"w").status == 500
    fresh.fault("leader", known=0, reads="ok")
    r = fresh.get(ns + "k")
    assert r.status == 200 and r.header("X-Consul-KnownLeader") == "false"
    fresh.fault("leader", known=1)
    assert fresh.get(ns + "k").header("X-Consul-KnownLeader") == "true"
    assert fresh.request("GET", "/v1/status/leader").json() != ""


def test_fault_requests_log_never_holds_tokens(fresh, ns):
    """/_fake/requests: method, path, query and where a token came from, never
    the token itself."""
    fresh.fault("requests", method="DELETE")
    secret1, secret2 = "s1-" + uuid.uuid4().hex, "s2-" + uuid.uuid4().hex
    fresh.get(ns + "k", token=secret1, recurse=True)
    fresh.request("GET", fresh.key_path(ns + "k"), params={"token": secret2})
    fresh.request("GET", "/v1/status/leader", headers={"Authorization": "Bearer " + secret1})
    r = fresh.request("GET", "/_fake/requests")
    assert secret1 not in r.text and secret2 not in r.text
    log = r.json()
    assert [(e["method"], e["path"], e["token"]) for e in log] == [
        ("GET", "/v1/kv/" + ns + "k", "header"), ("GET", "/v1/kv/" + ns + "k", "query"),
        ("GET", "/v1/status/leader", "bearer")]
    assert "recurse" in log[0]["query"]


def test_fault_reset(fresh, ns):
    """/_fake/reset clears every pending fault."""
    fresh.fault("fail", count=5, code=500)
    fresh.fault("slow", ms=3000)
    fresh.fault("leader", known=0)
    fresh.fault("reset")
    t0 = time.monotonic()
    assert fresh.get(ns + "k").status == 404
    assert time.monotonic() - t0 < 3


def test_fault_expire_sessions(fresh, ns):
    """/_fake/expire_sessions invalidates every session now (as a TTL expiry)."""
    sid = fresh.session_create(LockDelay="0s")
    fresh.put(ns + "k", b"v", acquire=sid)
    assert fresh.fault("expire_sessions")["expired"] == 1
    assert "Session" not in entry(fresh, ns + "k")
    assert fresh.request("GET", "/v1/session/info/" + sid).json() == []


def test_fault_wipe(fresh, ns):
    """/_fake/wipe loses all data, as a server that lost its state."""
    fresh.put(ns + "k", b"v")
    fresh.fault("wipe")
    r = fresh.get(ns + "k")
    assert r.status == 404 and r.index == 1
    assert fresh.get("", recurse=True).status == 404


# ---------------------------------------------------------------------------
# Services, checks and /v1/health/service (health.mdx, agent/service.mdx,
# agent/check.mdx, catalog.mdx; agent/health_endpoint.go and state/catalog.go
# where the docs are silent)
# ---------------------------------------------------------------------------

@pytest.fixture
def svc():
    """A service name of this test's own."""
    return "svc-" + uuid.uuid4().hex[:10]


def register(c, name, sid=None, token=None, **fields):
    body = dict({"Name": name, "ID": sid or name}, **fields)
    r = c.request("PUT", "/v1/agent/service/register", body=json.dumps(body), token=token)
    assert r.status == 200, r
    return body["ID"]


def health(c, name, query="", token=None, timeout=30, **params):
    """GET /v1/health/service/<name>; query is a raw string for repeated
    parameters (tag=a&tag=b)."""
    path = "/v1/health/service/" + name + ("?" + query if query else "")
    return c.request("GET", path, params=params, token=token, timeout=timeout)


def check_pass(c, check_id, verb="pass", note=None):
    r = c.request("PUT", "/v1/agent/check/%s/%s" % (verb, check_id), params={"note": note})
    assert r.status == 200, r


def test_health_service_shape(consul, svc):
    """health.mdx "List Service Instances for Service": an array of {Node,
    Service, Checks}; Checks holds the service's checks and the node's
    serfHealth ("Serf Health Status", ServiceTags []); a check registered with
    a service gets the ID "service:<id>" and the name "Service '<name>' check"
    (agent/service.mdx); Weights default to Passing 1, Warning 1."""
    register(consul, svc, svc + "-1", Tags=["primary"], Address="10.0.0.5", Port=3306,
             Meta={"role": "writer"}, Check={"TTL": "30s"})
    r = health(consul, svc)
    assert r.status == 200 and r.header("Content-Type") == "application/json"
    assert r.index >= 1 and r.header("X-Consul-KnownLeader") == "true"
    [row] = r.json()
    assert list(row) == ["Node", "Service", "Checks"]
    node = row["Node"]
    assert {"ID", "Node", "Address", "Datacenter", "TaggedAddresses", "Meta", "CreateIndex",
            "ModifyIndex"} <= set(node)
    assert node["Node"] == consul.node and node["Datacenter"] == consul.dc
    s = row["Service"]
    assert {"ID", "Service", "Tags", "Address", "Meta", "Port", "Weights", "EnableTagOverride",
            "CreateIndex", "ModifyIndex"} <= set(s)
    assert (s["ID"], s["Service"], s["Tags"], s["Address"], s["Port"], s["Meta"]) == (
        svc + "-1", svc, ["primary"], "10.0.0.5", 3306, {"role": "writer"})
    assert s["Weights"] == {"Passing": 1, "Warning": 1}
    checks = {c["CheckID"]: c for c in row["Checks"]}
    assert set(checks) == {"serfHealth", "service:%s-1" % svc}
    serf = checks["serfHealth"]
    assert (serf["Name"], serf["Status"], serf["ServiceID"], serf["ServiceName"], serf["ServiceTags"]) == (
        "Serf Health Status", "passing", "", "", [])
    mine = checks["service:%s-1" % svc]
    assert mine["Name"] == "Service '%s' check" % svc
    assert (mine["ServiceID"], mine["ServiceName"], mine["ServiceTags"]) == (svc + "-1", svc, ["primary"])
    assert mine["Status"] == "critical"            # agent/check.mdx: TTL checks start critical
    assert {"Node", "CheckID", "Name", "Status", "Notes", "Output", "ServiceID", "ServiceName",
            "ServiceTags", "Type", "CreateIndex", "ModifyIndex"} <= set(mine)
    assert mine["Type"] == "ttl"


def test_health_unknown_service_and_missing_name(consul, svc):
    """An unknown service answers 200 [] with an index (never 0);
    health_endpoint.go: no name -> 400 "Missing service name"."""
    r = health(consul, svc)
    assert r.status == 200 and r.json() == [] and r.index >= 1
    r = consul.request("GET", "/v1/health/service/")
    assert r.status == 400 and r.text == "Missing service name"


def test_health_passing_and_ttl_check_states(consul, svc):
    """health.mdx passing: "only nodes with all checks in the passing state";
    agent/check.mdx TTL Check Pass / Warn / Fail set the status, `note` the
    output; a bare ?passing is true, a bad value 400 (getBoolQueryParam)."""
    sid = register(consul, svc, Check={"TTL": "60s"})
    cid = "service:" + sid
    assert health(consul, svc, passing=True).json() == []
    check_pass(consul, cid, "pass", note="all good")
    [row] = health(consul, svc, passing=True).json()
    [c] = [c for c in row["Checks"] if c["CheckID"] == cid]
    assert c["Status"] == "passing" and c["Output"] == "all good"
    check_pass(consul, cid, "warn")
    assert health(consul, svc, passing=True).json() == []
    assert len(health(consul, svc, passing="false").json()) == 1
    assert [c["Status"] for c in health(consul, svc).json()[0]["Checks"] if c["CheckID"] == cid] == ["warning"]
    check_pass(consul, cid, "fail")
    assert health(consul, svc, passing="1").json() == []
    r = health(consul, svc, passing="maybe")
    assert r.status == 400 and r.text == "Invalid value for ?passing"
    r = consul.request("PUT", "/v1/agent/check/update/" + cid,
                       body=json.dumps({"Status": "passing", "Output": "via update"}))
    assert r.status == 200
    [c] = [c for c in health(consul, svc, passing=True).json()[0]["Checks"] if c["CheckID"] == cid]
    assert c["Output"] == "via update"


def test_ttl_check_expires_to_critical(fast, svc):
    """agent/check.mdx TTL: "if the check is not set to the passing state
    before the TTL expires, the check is set to critical" (output "TTL expired",
    followed by the last output given, agent/checks/check.go getExpiredOutput)."""
    sid = register(fast, svc, Check={"TTL": "1s"})
    check_pass(fast, "service:" + sid)
    assert len(health(fast, svc, passing=True).json()) == 1
    time.sleep(1.6)
    [row] = health(fast, svc).json()
    [c] = [c for c in row["Checks"] if c["CheckID"] == "service:" + sid]
    assert c["Status"] == "critical" and c["Output"] == "TTL expired"
    check_pass(fast, "service:" + sid, note="replica lag 0")
    time.sleep(1.6)
    [row] = health(fast, svc).json()
    [c] = [c for c in row["Checks"] if c["CheckID"] == "service:" + sid]
    assert (c["Status"], c["Output"]) == ("critical", "TTL expired (last output before timeout follows): replica lag 0")


def test_service_critical_too_long_is_deregistered(svc):
    """agent/check.mdx DeregisterCriticalServiceAfter: "If a check is in the critical state for more
    than this configured value, then its associated service (and all of its associated checks) will
    automatically be deregistered"; agent.go: values under check_deregister_interval_min (1m) are
    raised to it, and the reaper runs every check_reap_interval (30s). Here both are shortened."""
    with Consul(extra_args=["--check-reap-interval", "200ms", "--check-deregister-interval-min", "1s"]) as c:
        sid = register(c, svc, Check={"TTL": "1s", "Status": "passing", "DeregisterCriticalServiceAfter": "10ms"})
        keep = register(c, svc, svc + "-kept", Check={"TTL": "1s", "Status": "passing"})
        assert len(health(c, svc, passing=True).json()) == 2
        time.sleep(1.5)                  # both TTLs expired: critical, not yet reaped (raised to 1s)
        assert sorted(r["Service"]["ID"] for r in health(c, svc).json()) == sorted([sid, keep])
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and len(health(c, svc).json()) == 2:
            time.sleep(0.1)
        assert [r["Service"]["ID"] for r in health(c, svc).json()] == [keep]
        check_pass(c, "service:" + keep)           # without DeregisterCriticalServiceAfter: stays
        assert len(health(c, svc, passing=True).json()) == 1
        # a check that turns passing again in time is not reaped
        sid = register(c, svc, svc + "-back", Check={"TTL": "1s", "Status": "passing",
                                                    "DeregisterCriticalServiceAfter": "1s"})
        time.sleep(1.3)
        check_pass(c, "service:" + sid)
        time.sleep(1.0)
        assert sid in [r["Service"]["ID"] for r in health(c, svc).json()]


def test_health_tag_filter_is_repeatable(consul, svc):
    """health.mdx tag: "Can be used multiple times ... returning only the
    results that include all of the tag values provided"."""
    register(consul, svc, svc + "-a", Tags=["eu", "replica"])
    register(consul, svc, svc + "-b", Tags=["eu"])
    register(consul, svc, svc + "-c", Tags=["us", "replica"])
    ids = lambda r: sorted(x["Service"]["ID"] for x in r.json())  # noqa: E731
    assert ids(health(consul, svc, "tag=eu")) == [svc + "-a", svc + "-b"]
    assert ids(health(consul, svc, "tag=eu&tag=replica")) == [svc + "-a"]
    assert ids(health(consul, svc, "tag=nowhere")) == []


def test_health_filter_expressions(consul, svc):
    """features/filtering.mdx and health.mdx "Filtering": selectors
    Service.Tags, Service.Meta.<k>, Node.Meta.<k>, Checks.Status, Service.ID
    with ==, !=, in, contains, not, and, or, parentheses; Checks.Status
    matches when any check does; an unknown selector is refused (400)."""
    register(consul, svc, svc + "-w", Tags=["primary"], Meta={"role": "writer"}, Check={"TTL": "60s"})
    register(consul, svc, svc + "-r", Tags=["replica"], Meta={"role": "reader"}, Check={"TTL": "60s"})
    check_pass(consul, "service:%s-w" % svc)

    def ids(expr):
        r = health(consul, svc, filter=expr)
        assert r.status == 200, (expr, r)
        return sorted(x["Service"]["ID"] for x in r.json())
    w, rd = svc + "-w", svc + "-r"
    assert ids('Service.Meta.role == "writer"') == [w]
    assert ids('Service.Meta.role != "writer"') == [rd]
    assert ids('"replica" in Service.Tags') == [rd]
    assert ids('"replica" not in Service.Tags') == [w]
    assert ids('Service.Tags contains "primary"') == [w]
    assert ids('Service.ID == "%s"' % rd) == [rd]
    assert ids('Checks.Status == critical') == [rd]
    assert ids('not (Checks.Status == critical)') == [w]
    assert ids('Service.Meta.role == "writer" or "replica" in Service.Tags') == [rd, w]
    assert ids('Service.Meta.role == "writer" and Checks.Status == critical') == []
    assert ids('Node.Meta.nowhere == "x"') == []
    assert ids('Node.Node == "%s" and Service.Tags is not empty' % consul.node) == [rd, w]
    r = health(consul, svc, filter="Service.NoSuchField == 1")
    assert r.status == 400 and "Selector" in r.text
    r = health(consul, svc, filter="Service.ID ==")
    assert r.status == 400


def test_health_node_meta_dc_and_near(consul, svc):
    """health.mdx: node-meta key:value (repeatable) filters on node metadata,
    dc another datacenter (500 "No path to datacenter" when unknown), near
    sorts by round trip time (accepted; one node here); catalog.mdx register
    adds an external node with NodeMeta."""
    r = consul.request("PUT", "/v1/catalog/register", body=json.dumps({
        "Node": "ext-" + svc, "Address": "192.0.2.10", "NodeMeta": {"rack": "r1", "zone": "z"},
        "Service": {"ID": svc + "-ext", "Service": svc, "Port": 3306}}))
    assert r.status == 200 and r.json() is True
    register(consul, svc, svc + "-local")
    ids = lambda r: sorted(x["Service"]["ID"] for x in r.json())  # noqa: E731
    assert ids(health(consul, svc, "node-meta=rack:r1")) == [svc + "-ext"]
    assert ids(health(consul, svc, "node-meta=rack:r1&node-meta=zone:z")) == [svc + "-ext"]
    assert ids(health(consul, svc, "node-meta=rack:r2")) == []
    assert ids(health(consul, svc, filter='Node.Meta.rack == "r1"')) == [svc + "-ext"]
    ext = [x for x in health(consul, svc).json() if x["Service"]["ID"] == svc + "-ext"][0]
    assert ext["Node"]["Address"] == "192.0.2.10" and ext["Checks"] == []
    assert health(consul, svc, near="_agent").status == 200
    assert health(consul, svc, dc=consul.dc).status == 200
    r = health(consul, svc, dc="elsewhere")
    assert r.status == 500 and "No path to datacenter" in r.text
    consul.request("PUT", "/v1/catalog/deregister", body=json.dumps({"Node": "ext-" + svc}))
    assert ids(health(consul, svc)) == [svc + "-local"]


def test_health_blocking_wakes_on_check_change(consul, svc, ns):
    """blocking.mdx: health queries block on ?index; X-Consul-Index is the
    raft index, one for the whole store: a KV write elsewhere does not wake
    a health query, a check of the service changing does, and later KV
    writes take higher indexes than the health answer's."""
    sid = register(consul, svc, Check={"TTL": "60s"})
    idx = health(consul, svc).index
    fut = in_background(health, consul, svc, index=idx, wait="2s")
    time.sleep(0.3)
    consul.put(ns + "elsewhere", b"x")
    elapsed, r = fut.result(timeout=10)
    assert elapsed >= 1.9 and r.index == idx
    fut = in_background(health, consul, svc, index=idx, wait="20s")
    time.sleep(0.3)
    assert not fut.done()
    check_pass(consul, "service:" + sid)
    elapsed, r = fut.result(timeout=10)
    assert elapsed < 5 and r.index > idx
    assert [c["Status"] for c in r.json()[0]["Checks"] if c["ServiceID"] == sid] == ["passing"]
    consul.put(ns + "after", b"y")
    assert consul.get(ns + "after").index > r.index


def test_health_blocking_wakes_on_register_and_deregister(consul, svc):
    """A blocking query on a service with no instances wakes when one is
    registered; deregistering wakes it again (agent/service.mdx; unknown ID:
    404 "Unknown service ID")."""
    r = health(consul, svc)
    fut = in_background(health, consul, svc, index=r.index, wait="20s")
    time.sleep(0.3)
    sid = register(consul, svc)
    elapsed, r2 = fut.result(timeout=10)
    assert elapsed < 5 and [x["Service"]["ID"] for x in r2.json()] == [sid]
    fut = in_background(health, consul, svc, index=r2.index, wait="20s")
    time.sleep(0.3)
    assert consul.request("PUT", "/v1/agent/service/deregister/" + sid).status == 200
    elapsed, r3 = fut.result(timeout=10)
    assert elapsed < 5 and r3.json() == [] and r3.index > r2.index
    r = consul.request("PUT", "/v1/agent/service/deregister/" + sid)
    assert r.status == 404 and "Unknown service ID" in r.text


def test_health_blocking_wakes_on_the_nodes_serf_health(fresh, svc):
    """state/catalog.go: a node-level check (serfHealth) changing moves the
    index of every service on that node, so their health queries wake."""
    register(fresh, svc)
    idx = health(fresh, svc).index
    fut = in_background(health, fresh, svc, index=idx, wait="20s")
    time.sleep(0.3)
    fresh.fault("check", id="serfHealth", status="critical")
    elapsed, r = fut.result(timeout=10)
    assert elapsed < 5 and r.index > idx
    assert [c["Status"] for c in r.json()[0]["Checks"] if c["CheckID"] == "serfHealth"] == ["critical"]
    assert health(fresh, svc, passing=True).json() == []


def test_catalog_service_shape(consul, svc):
    """catalog.mdx "List Nodes for Service": ServiceNode rows (Node, Address,
    NodeMeta, ServiceID, ServiceName, ServiceTags, ServicePort, ServiceMeta,
    ServiceWeights ...); tag and filter apply; no health filtering."""
    register(consul, svc, svc + "-1", Tags=["a"], Port=5432, Meta={"k": "v"}, Check={"TTL": "60s"})
    register(consul, svc, svc + "-2", Tags=["b"])
    r = consul.request("GET", "/v1/catalog/service/" + svc)
    assert r.status == 200 and r.index >= 1
    rows = {x["ServiceID"]: x for x in r.json()}
    assert set(rows) == {svc + "-1", svc + "-2"}
    one = rows[svc + "-1"]
    assert (one["Node"], one["ServiceName"], one["ServiceTags"], one["ServicePort"], one["ServiceMeta"]) == (
        consul.node, svc, ["a"], 5432, {"k": "v"})
    assert one["ServiceWeights"] == {"Passing": 1, "Warning": 1}
    assert {"ID", "Address", "Datacenter", "TaggedAddresses", "NodeMeta", "ServiceAddress",
            "ServiceEnableTagOverride", "CreateIndex", "ModifyIndex"} <= set(one)
    r = consul.request("GET", "/v1/catalog/service/%s?tag=b" % svc)
    assert [x["ServiceID"] for x in r.json()] == [svc + "-2"]
    r = consul.request("GET", "/v1/catalog/service/" + svc, params={"filter": 'ServiceMeta.k == "v"'})
    assert [x["ServiceID"] for x in r.json()] == [svc + "-1"]


def test_register_weights_and_bad_bodies(consul, svc):
    """agent/service.mdx Weights {Passing, Warning}; structs.ValidateWeights:
    Passing must be greater than 0 (400)."""
    register(consul, svc, Weights={"Passing": 10, "Warning": 1})
    assert health(consul, svc).json()[0]["Service"]["Weights"] == {"Passing": 10, "Warning": 1}
    r = consul.request("PUT", "/v1/agent/service/register",
                       body=json.dumps({"Name": svc, "Weights": {"Passing": 0, "Warning": 1}}))
    assert r.status == 400
    r = consul.request("PUT", "/v1/agent/service/register", body=json.dumps({"Port": 1}))
    assert r.status == 400 and "Missing service name" in r.text
    # agent.go vetCheckUpdateWithAuthorizer: an unknown check ID is a 404; updateTTLCheck: a
    # check that exists without a TTL is a 500 "CheckID ... does not have associated TTL".
    r = consul.request("PUT", "/v1/agent/check/pass/no-such-check")
    assert r.status == 404 and r.text.startswith('Unknown check ID "no-such-check"')
    sid = register(consul, svc, svc + "-tcp", Check={"TCP": "127.0.0.1:1", "Interval": "10s"})
    r = consul.request("PUT", "/v1/agent/check/pass/service:" + sid)
    assert r.status == 500 and "does not have associated TTL" in r.text


# ---------------------------------------------------------------------------
# Checks the agent runs (agent/check.mdx HTTP and TCP checks; agent/checks/check.go
# CheckHTTP and CheckTCP, agent/structs/check_type.go, agent/local/state.go)
# ---------------------------------------------------------------------------

class Target:
    """A tiny HTTP server on 127.0.0.1 for HTTP checks: answers `code` with `body` after `delay`
    seconds, and remembers each request's method, path and headers."""

    def __init__(self, code=200, body=b"all good\n"):
        self.code, self.body, self.delay, self.requests = code, body, 0.0, []
        target = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                target.requests.append((self.command, self.path, dict(self.headers)))
                time.sleep(target.delay)
                try:
                    self.send_response(target.code)
                    self.send_header("Content-Length", str(len(target.body)))
                    self.end_headers()
                    self.wfile.write(target.body)
                except OSError:
                    pass                    # the check gave up (its timeout)
            do_POST = do_GET

            def log_message(self, *args):
                pass
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = "http://127.0.0.1:%d/health" % self.server.server_port
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def target():
    t = Target()
    yield t
    t.close()


def check_of(c, name, check_id):
    """(Status, Output) of one check of the only instance of service `name`."""
    [row] = health(c, name).json()
    [chk] = [x for x in row["Checks"] if x["CheckID"] == check_id]
    return chk["Status"], chk["Output"]


def wait_check(c, name, check_id, status, timeout=6.0):
    """Until the check has `status`; returns its output."""
    deadline = time.monotonic() + timeout
    while True:
        got = check_of(c, name, check_id)
        if got[0] == status:
            return got[1]
        assert time.monotonic() < deadline, "check %s still %r, not %s" % (check_id, got, status)
        time.sleep(0.1)


def test_http_check_runs_and_passes(consul, svc, target):
    """agent/check.mdx HTTP check: the agent requests the URL every Interval; a 2xx answer is
    passing; it starts critical (agent.go addServiceInternal). check.go CheckHTTP: method GET by
    default, User-Agent "Consul Health Check", Accept "text/plain, text/*, */*", the Header map
    sent, output "HTTP GET <url>: <status> Output: <body>"; Interval and Timeout shown as Go
    durations (addServiceInternal)."""
    target.delay = 1.0                          # the first answer cannot have come yet below
    sid = register(consul, svc, Check={"HTTP": target.url, "Interval": "1s", "Header": {"X-Probe": ["a"]}})
    cid = "service:" + sid
    [row] = health(consul, svc).json()
    [chk] = [x for x in row["Checks"] if x["CheckID"] == cid]
    assert (chk["Status"], chk["Type"], chk["Interval"], chk["Timeout"]) == ("critical", "http", "1s", "")
    target.delay = 0.0
    out = wait_check(consul, svc, cid, "passing")
    assert out == "HTTP GET %s: 200 OK Output: all good\n" % target.url
    method, path, headers = target.requests[0]
    assert (method, path) == ("GET", "/health")
    assert headers["User-Agent"] == "Consul Health Check" and headers["Accept"] == "text/plain, text/*, */*"
    assert headers["X-Probe"] == "a"
    seen = len(target.requests)
    time.sleep(2.2)
    assert 1 <= len(target.requests) - seen <= 3      # every Interval (1s), not faster


def test_http_check_429_is_warning_and_503_critical(consul, svc, target):
    """check.go CheckHTTP: "The check is warning if the response code is 429", critical for any
    other code outside 2xx; a status change is written at once (agent/local/state.go UpdateCheck)."""
    target.code = 429
    sid = register(consul, svc, Check={"HTTP": target.url, "Interval": "1s", "Status": "passing"})
    out = wait_check(consul, svc, "service:" + sid, "warning")
    assert out == "HTTP GET %s: 429 Too Many Requests Output: all good\n" % target.url
    target.code, target.body = 503, b"Percona XtraDB Cluster Node is not synced.\r\n"
    out = wait_check(consul, svc, "service:" + sid, "critical")
    assert out == "HTTP GET %s: 503 Service Unavailable Output: %s" % (target.url, target.body.decode())
    assert health(consul, svc, passing=True).json() == []


def test_http_check_timeout_is_critical(consul, svc, target):
    """check.go CheckHTTP: the request gets Timeout (default 10s) as its http.Client timeout; an
    answer that does not come in time is an error, so critical, the output being Go's error."""
    target.delay = 3.0
    sid = register(consul, svc, Check={"HTTP": target.url, "Interval": "1s", "Timeout": "500ms",
                                       "Status": "passing"})
    t0 = time.monotonic()
    out = wait_check(consul, svc, "service:" + sid, "critical")
    assert time.monotonic() - t0 < 4
    assert out.startswith('Get "%s": ' % target.url) and "Client.Timeout exceeded" in out


def test_tcp_check_passes_when_it_connects_and_fails_when_refused(consul, svc):
    """agent/check.mdx TCP check: "If the connection is successful, the check status is success,
    otherwise it is critical"; check.go CheckTCP: output "TCP connect <addr>: Success", else Go's
    dial error."""
    with socket.socket() as lsock:
        lsock.bind(("127.0.0.1", 0))
        lsock.listen(16)
        addr = "127.0.0.1:%d" % lsock.getsockname()[1]
        sid = register(consul, svc, Check={"TCP": addr, "Interval": "1s"})
        assert wait_check(consul, svc, "service:" + sid, "passing") == "TCP connect %s: Success" % addr
    out = wait_check(consul, svc, "service:" + sid, "critical")
    assert out == "dial tcp %s: connect: connection refused" % addr


def test_python_consul_lower_case_check_keys(consul, svc, target):
    """agent/structs/check_type.go: the check of a service definition is read by encoding/json
    (names match whatever their case, as python-consul 0.7.1 sends them: Patroni's
    {"http", "interval", "DeregisterCriticalServiceAfter"}), snake_case aliases such as
    deregister_critical_service_after count, lib.DecodeJSON refuses unknown fields (400), and
    CheckType.Validate refuses an HTTP check without an interval (400 "Invalid check: ...")."""
    body = {"name": svc, "id": svc + "/node1", "address": "127.0.0.1", "port": 8008, "tags": ["master"],
            "check": {"http": target.url, "interval": "1s", "DeregisterCriticalServiceAfter": "150s"}}
    r = consul.request("PUT", "/v1/agent/service/register", body=json.dumps(body))
    assert r.status == 200, r
    wait_check(consul, svc, "service:%s/node1" % svc, "passing")
    [row] = health(consul, svc, passing=True).json()
    assert (row["Service"]["ID"], row["Service"]["Port"], row["Service"]["Tags"]) == (svc + "/node1", 8008, ["master"])
    snake = {"name": svc, "id": svc + "/node2",
             "check": {"tcp": "127.0.0.1:1", "interval": "1s", "deregister_critical_service_after": "1m",
                       "tls_skip_verify": True}}
    assert consul.request("PUT", "/v1/agent/service/register", body=json.dumps(snake)).status == 200
    for check, status, text in (({"http": target.url, "interval": "1s", "bogus": 1}, 400,
                                 'Request decode failed: json: unknown field "bogus"'),
                                ({"http": target.url}, 400, "Invalid check: Interval must be > 0"),
                                ({"ttl": "10s", "interval": "1s"}, 400,
                                 "Invalid check: Interval and TTL cannot both be specified"),
                                ({"http": target.url, "interval": "soon"}, 400,
                                 'Request decode failed: time: invalid duration "soon"')):
        r = consul.request("PUT", "/v1/agent/service/register",
                           body=json.dumps({"name": svc, "id": svc + "/bad", "check": check}))
        assert (r.status, r.text[:len(text)]) == (status, text), (check, r)


def test_run_check_critical_too_long_deregisters_the_service(svc):
    """agent/check.mdx DeregisterCriticalServiceAfter holds for checks the agent runs: an HTTP
    check that keeps failing (nothing listens) gets its service reaped (agent.go
    reapServicesInternal; here the reaper's interval and minimum are shortened)."""
    with Consul(extra_args=["--check-reap-interval", "200ms", "--check-deregister-interval-min", "1s"]) as c:
        need_fake(c, "--check-reap-interval")
        dead = "http://127.0.0.1:%d/" % free_port()
        sid = register(c, svc, Check={"HTTP": dead, "Interval": "1s", "Status": "passing",
                                      "DeregisterCriticalServiceAfter": "1s"})
        wait_check(c, svc, "service:" + sid, "critical")
        deadline = time.monotonic() + 5
        while health(c, svc).json() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert health(c, svc).json() == []


def test_blocking_health_query_wakes_on_a_run_checks_change(consul, svc, target):
    """blocking.mdx with a check the agent runs: a blocking /v1/health/service query wakes when
    the check's status changes because of what its target answered, with a higher index."""
    sid = register(consul, svc, Check={"HTTP": target.url, "Interval": "1s"})
    wait_check(consul, svc, "service:" + sid, "passing")
    idx = health(consul, svc).index
    fut = in_background(health, consul, svc, index=idx, wait="30s")
    time.sleep(1.5)
    assert not fut.done()                       # passing again and again changes nothing
    target.code = 503
    elapsed, r = fut.result(timeout=10)
    assert elapsed < 5 and r.index > idx
    assert [x["Status"] for x in r.json()[0]["Checks"] if x["CheckID"] == "service:" + sid] == ["critical"]


def test_deregistered_check_stops_and_non_loopback_targets_are_not_run(consul, svc, target):
    """A deregistered service's checks stop (agent.go removeServiceLocked); the double contacts
    loopback addresses only: a check on another address is stored critical, saying so."""
    need_fake(consul, "the loopback rule of the double")
    sid = register(consul, svc, Check={"HTTP": target.url, "Interval": "1s"})
    wait_check(consul, svc, "service:" + sid, "passing")
    assert consul.request("PUT", "/v1/agent/service/deregister/" + sid).status == 200
    time.sleep(0.3)
    seen = len(target.requests)
    time.sleep(1.5)
    assert len(target.requests) == seen
    sid = register(consul, svc, svc + "-far", Check={"HTTP": "http://192.0.2.1/", "Interval": "1s",
                                                    "Status": "passing"})
    status, out = check_of(consul, svc, "service:" + sid)
    assert status == "critical" and "not a loopback address" in out


def test_run_checks_run_again_after_a_restart(fresh, svc, target):
    """agent.go persists a service's checks in the data dir (persistCheck) and starts them
    again at boot (loadChecks): a restarted agent keeps running an HTTP check."""
    sid = register(fresh, svc, Check={"HTTP": target.url, "Interval": "1s"})
    wait_check(fresh, svc, "service:" + sid, "passing")
    fresh.restart(keep_data=True)
    target.code = 503
    wait_check(fresh, svc, "service:" + sid, "critical", timeout=15)


def test_sigterm_stops_promptly_with_a_check_in_flight(tmp_path, target):
    """A check waiting on a slow target does not hold the double up at SIGTERM."""
    target.delay = 8.0
    c = Consul(use_double=True, workdir=str(tmp_path))
    c.start()
    try:
        register(c, "slow", Check={"HTTP": target.url, "Interval": "1s"})
        deadline = time.monotonic() + 5
        while not target.requests and time.monotonic() < deadline:
            time.sleep(0.05)
        assert target.requests
        t0 = time.monotonic()
        c.proc.send_signal(signal.SIGTERM)
        assert c.proc.wait(5) == 0
        assert time.monotonic() - t0 < 2
    finally:
        c.stop()


def test_300_concurrent_blocking_queries_wake_on_one_write(consul, ns, svc):
    """blocking.mdx: many clients block on the same data; here 300 at once
    (half KV, half health), each on its own connection, all woken by one
    write of each kind; the double keeps one thread and one fd per client."""
    consul.put(ns + "k", b"1")
    kv_idx = consul.get(ns + "k").index
    sid = register(consul, svc, Check={"TTL": "120s"})
    h_idx = health(consul, svc).index
    socks = []
    try:
        for i in range(300):
            s = socket.create_connection(("127.0.0.1", consul.port), timeout=30)
            if i % 2:
                path = "/v1/health/service/%s?index=%d&wait=30s" % (svc, h_idx)
            else:
                path = "%s?index=%d&wait=30s" % (consul.key_path(ns + "k"), kv_idx)
            s.sendall(("GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" % path).encode())
            socks.append(s)
        deadline = time.monotonic() + 20
        while need_fake_state(consul) < 300 and time.monotonic() < deadline:
            time.sleep(0.1)
        for s in socks:
            s.setblocking(False)
            with pytest.raises(BlockingIOError):
                s.recv(1)                     # nobody answered yet
            s.setblocking(True)
        t0 = time.monotonic()
        consul.put(ns + "k", b"2")
        check_pass(consul, "service:" + sid)
        statuses = []
        for s in socks:
            with s.makefile("rb") as f:
                data = f.read()           # Connection: close: the answer ends with the connection
            head = data.split(b"\r\n\r\n", 1)[0].decode()
            statuses.append((head.split()[1], int(re.search(r"X-Consul-Index: (\d+)", head).group(1))))
        elapsed = time.monotonic() - t0
    finally:
        for s in socks:
            s.close()
    assert all(code == "200" for code, _ in statuses)
    assert all(i > (kv_idx if n % 2 == 0 else h_idx) for n, (_, i) in enumerate(statuses))
    assert elapsed < 15


def need_fake_state(c):
    """Blocked queries the double reports (300 on real Consul: it cannot say)."""
    if not c.is_fake:
        time.sleep(2)
        return 300
    return c.request("GET", "/_fake/state").json()["blocked_queries"]


# ---------------------------------------------------------------------------
# What real Consul does beyond the docs (each from its source)
# ---------------------------------------------------------------------------

def double_with(tmp_path, *args, **kwargs):
    """A private double started with extra command-line options."""
    c = Consul(use_double=True, workdir=str(tmp_path), extra_args=list(args), **kwargs)
    return c.start()


def test_empty_prefix_answers_the_whole_kv_index(fresh, ns):
    """state/kvs.go kvsListTxn: a prefix with no keys (and no tombstones)
    answers the KV table's index, so every KV write anywhere raises it;
    agent/consul/kvs_endpoint.go KVS.List: still 404 with that index."""
    fresh.put("elsewhere/a", b"1")
    r = fresh.get(ns + "users/", recurse=True)
    assert r.status == 404 and r.index == fresh.get("elsewhere/a").index
    fresh.put("elsewhere/b", b"2")
    r2 = fresh.get(ns + "users/", recurse=True)
    assert r2.status == 404 and r2.index == fresh.get("elsewhere/b").index > r.index
    r3 = fresh.get(ns + "users/", keys=True)
    assert r3.status == 404 and r3.index == r2.index


def test_blocking_list_on_an_empty_prefix_wakes_on_writes_near_it(fresh, ns):
    """state/kvs.go kvsListEntriesTxn watches the memdb prefix iterator; for
    a prefix with no keys go-immutable-radix SeekPrefixWatch hands back the
    channel of the nearest node on the way (its closest existing ancestor, or
    the sibling whose edge diverges). A write far away does not wake the
    query; a write next to the prefix does, and as the index of an empty
    prefix is the whole KV index the answer is 404 with a higher index."""
    fresh.put(ns + "mysql/master/shop", b"db1")
    fresh.put("zzz-far/a", b"1")
    r = fresh.get(ns + "mysql/users/", recurse=True)
    assert r.status == 404
    fut = in_background(fresh.get, ns + "mysql/users/", recurse=True, index=r.index, wait="2s")
    time.sleep(0.3)
    fresh.put("zzz-far/b", b"2")                      # another branch of the tree: no wake
    elapsed, r2 = fut.result(timeout=10)
    assert elapsed >= 1.9 and r2.status == 404 and r2.index == r.index
    r = fresh.get(ns + "mysql/users/", recurse=True)   # the far write moved the KV index
    assert r.index > r2.index
    fut = in_background(fresh.get, ns + "mysql/users/", recurse=True, index=r.index, wait="20s")
    time.sleep(0.3)
    assert not fut.done()
    fresh.put(ns + "mysql/replica/shop/db2", b"")      # next to the prefix: wakes it
    elapsed, r3 = fut.result(timeout=10)
    assert elapsed < 5 and r3.status == 404 and r3.index > r.index
    assert r3.index == fresh.get(ns + "mysql/replica/shop/db2").index
    fut = in_background(fresh.get, ns + "mysql/users/", keys=True, index=r3.index, wait="20s")
    time.sleep(0.3)
    fresh.put(ns + "mysql/users/app", b"{}")           # under the prefix: 200 now
    elapsed, r4 = fut.result(timeout=10)
    assert elapsed < 5 and r4.status == 200 and r4.json() == [ns + "mysql/users/app"]


def test_blocking_list_on_an_emptied_prefix_keeps_its_tombstone_index(fresh, ns):
    """kvsListTxn: the graveyard's highest index under the prefix wins over
    the table index, so after its last key is deleted an empty prefix keeps
    that index and a blocking query on it does not return for writes near
    it (blockingQuery loops while the index is not above ?index)."""
    fresh.put(ns + "users/a", b"1")
    fresh.delete(ns + "users/a")
    r = fresh.get(ns + "users/", recurse=True)
    assert r.status == 404
    fresh.put(ns + "servers/x", b"1")
    assert fresh.get(ns + "users/", recurse=True).index == r.index
    fut = in_background(fresh.get, ns + "users/", recurse=True, index=r.index, wait="1500ms")
    time.sleep(0.3)
    fresh.put(ns + "servers/y", b"2")
    elapsed, r2 = fut.result(timeout=10)
    assert elapsed >= 1.4 and r2.index == r.index


def test_key_validation_of_consul_1_21_5(tmp_path, ns):
    """Consul 1.21.5 (hashicorp/consul#22682) answered every KV request on a
    key outside ^[a-zA-Z0-9,_./\\-?&=]+$ with 500 "invalid key name, keys
    should respect the ... format" - existing keys could be neither read nor
    deleted (hashicorp/consul#22822, #22835). --kv-key-validation 1.21.5."""
    c = double_with(tmp_path)
    try:
        need_fake(c, "a command-line option of the double")
        for k in ("acme - host", "foo%2Fbar", "fooçbar"):
            assert c.put(ns + k, b"old").json() is True
        c.extra_args = ["--kv-key-validation", "1.21.5"]
        c.restart()
        for k in ("acme - host", "foo%2Fbar", "fooçbar", "con..fig"):
            for r in (c.get(ns + k), c.put(ns + k, b"v"), c.delete(ns + k)):
                assert r.status == 500, (k, r)
        r = c.get(ns + "acme - host")
        assert r.text == 'invalid key name, keys should respect the "^[a-zA-Z0-9,_./\\\\-?&=]+$" format'
        assert c.put(ns + "mysql/master/shop,a-b_c.d?e&f=g", b"ok").json() is True
        assert len(c.get(ns, recurse=True).json()) == 4       # the listing still shows them
    finally:
        c.close()


def test_key_validation_after_the_fix(tmp_path, ns):
    """hashicorp/consul#22850 (backports #22931, #22939): every character is
    allowed again, but not path traversal (plain or URL-encoded) nor leading
    or trailing spaces. --kv-key-validation relaxed."""
    c = double_with(tmp_path, "--kv-key-validation", "relaxed")
    try:
        need_fake(c, "a command-line option of the double")
        for k in ("acme - host", "foo%bar", "fooçbar", "con..fig", "a:b;c"):
            assert c.put(ns + k, b"v").json() is True, k
            assert c.get(ns + k).status == 200
        for k in (" " + ns + "lead", ns + "trail ", ns + "x/..%2fetc", ns + "x/%2e%2e%2fetc"):
            assert c.put(k, b"v").status == 400, k
        assert c.get(ns + "trail ").status == 400
    finally:
        c.close()


def test_no_leader_holds_requests_for_rpc_hold_timeout(tmp_path, ns):
    """agent/consul/rpc.go ForwardRPC/canRetry: without a leader, writes and
    default-consistency reads are retried for rpc_hold_timeout (7s by
    default) before 500 "No cluster leader"; a leader elected meanwhile
    serves them; stale reads answer at once. --rpc-hold-timeout."""
    default = double_with(tmp_path / "default")
    try:
        need_fake(default, "a command-line option of the double")
        assert default.request("GET", "/v1/agent/self").json()["DebugConfig"]["RPCHoldTimeout"] == "7s"
    finally:
        default.close()
    c = double_with(tmp_path / "short", "--rpc-hold-timeout", "1s")
    try:
        c.put(ns + "k", b"v")
        c.fault("leader", known=0)
        t0 = time.monotonic()
        r = c.get(ns + "k")
        assert r.status == 500 and r.text == "No cluster leader" and 1.0 <= time.monotonic() - t0 < 3
        t0 = time.monotonic()
        assert c.put(ns + "k", b"w").status == 500 and time.monotonic() - t0 >= 1.0
        t0 = time.monotonic()
        assert c.get(ns + "k", stale=True).status == 200 and time.monotonic() - t0 < 0.5
        c.extra_args = ["--rpc-hold-timeout", "5s"]
        c.restart()
        c.fault("leader", known=0)
        fut = in_background(c.get, ns + "k")
        time.sleep(0.5)
        c.fault("leader", known=1)
        elapsed, r = fut.result(timeout=10)
        assert r.status == 200 and elapsed < 3
    finally:
        c.close()


def test_consistent_reads_while_leadership_is_verified(tmp_path, ns):
    """rpc.go consistentRead: ?consistent first verifies leadership with a
    quorum; a lost verification fails at once (raft ErrLeadershipLost), a new
    leader not yet ready for consistent reads is waited on for
    rpc_hold_timeout, then 500 "Not ready to serve consistent reads";
    default and stale reads are served meanwhile."""
    c = double_with(tmp_path, "--rpc-hold-timeout", "1s")
    try:
        c.put(ns + "k", b"v")
        c.fault("leader", known=1, consistent="verifying")
        t0 = time.monotonic()
        r = c.get(ns + "k", consistent=True)
        assert r.status == 500 and r.text == "Not ready to serve consistent reads"
        assert time.monotonic() - t0 >= 1.0
        assert c.get(ns + "k").status == 200 and c.get(ns + "k", stale=True).status == 200
        c.fault("leader", known=1, consistent="lost")
        t0 = time.monotonic()
        r = c.get(ns + "k", consistent=True)
        assert r.status == 500 and "leadership lost" in r.text and time.monotonic() - t0 < 0.5
        c.fault("leader", known=1)
        assert c.get(ns + "k", consistent=True).status == 200
    finally:
        c.close()


def test_sessions_die_with_their_nodes_serf_health(fresh, ns):
    """session.mdx: NodeChecks default to ["serfHealth"]; "If any of the
    health checks go to the critical state, the session is invalidated":
    Behavior=release frees its locks, Behavior=delete deletes its keys; a
    session without checks survives; a new session on a node whose
    serfHealth is critical is refused (state/session.go: "Check 'serfHealth'
    is in critical state")."""
    rel = fresh.session_create(LockDelay="0s")
    dele = fresh.session_create(LockDelay="0s", Behavior="delete")
    bare = fresh.session_create(LockDelay="0s", NodeChecks=[])
    [info] = fresh.request("GET", "/v1/session/info/" + rel).json()
    assert info["NodeChecks"] == ["serfHealth"]
    assert fresh.put(ns + "rel", b"1", acquire=rel).json() is True
    assert fresh.put(ns + "del", b"1", acquire=dele).json() is True
    assert fresh.put(ns + "bare", b"1", acquire=bare).json() is True
    idx = fresh.request("GET", "/v1/session/list").index
    fut = in_background(fresh.request, "GET", "/v1/session/list", params={"index": idx, "wait": "20s"})
    time.sleep(0.3)
    fresh.fault("check", id="serfHealth", status="critical")
    elapsed, r = fut.result(timeout=10)
    assert elapsed < 5 and [s["ID"] for s in r.json()] == [bare]
    assert "Session" not in entry(fresh, ns + "rel")
    assert fresh.get(ns + "del").status == 404
    assert entry(fresh, ns + "bare")["Session"] == bare
    r = fresh.request("PUT", "/v1/session/create", body=json.dumps({"Name": "late"}))
    assert r.status == 500 and r.text == "Check 'serfHealth' is in critical state"
    fresh.fault("check", id="serfHealth", status="passing")
    assert fresh.session_create(Name="later")


def test_filtered_header_with_an_agent_default_token(tmp_path, ns):
    """rpc.go maskResultsFilteredByACLs hides X-Consul-Results-Filtered-By-ACLs
    only for the anonymous token; an agent with a default token sends that
    token for requests without one, so they do see the header.
    --acl-default-token."""
    default = "dflt-" + uuid.uuid4().hex
    c = double_with(tmp_path, "--acl-default-token", default, acl_master_token=MASTER)
    try:
        need_fake(c, "a command-line option of the double")
        c.fault("acl", token=default, prefix=ns + "pub/", policy="read")
        for k in ("pub/a", "secret/b"):
            c.put(ns + k, b"v", token=MASTER)
        r = c.get(ns, recurse=True)
        assert r.status == 200 and [e["Key"] for e in r.json()] == [ns + "pub/a"]
        assert r.header("X-Consul-Results-Filtered-By-ACLs") == "true"
        assert c.get(ns + "secret/b").status == 403
    finally:
        c.close()


def test_health_acl_filtering(acl, svc):
    """health.mdx ACL: node:read,service:read; rows the token cannot read are
    dropped and X-Consul-Results-Filtered-By-ACLs is set (token given);
    registering needs service:write."""
    r = acl.request("PUT", "/v1/agent/service/register", body=json.dumps({"Name": svc}))
    assert r.status == 403
    register(acl, svc, svc + "-a", token=MASTER)
    tok = acl.create_token([("service", svc, "read"), ("node", "", "read")])
    r = health(acl, svc, token=tok)
    assert r.status == 200 and [x["Service"]["ID"] for x in r.json()] == [svc + "-a"]
    assert r.header("X-Consul-Results-Filtered-By-ACLs") is None
    only_node = acl.create_token([("node", "", "read")])
    r = health(acl, svc, token=only_node)
    assert r.status == 200 and r.json() == []
    assert r.header("X-Consul-Results-Filtered-By-ACLs") == "true"


def test_restart_keeps_services_and_checks(fresh, svc):
    """The catalog is server state: services, checks and their statuses
    survive a restart with the data dir; TTL timers start afresh."""
    sid = register(fresh, svc, Tags=["t"], Check={"TTL": "60s"})
    check_pass(fresh, "service:" + sid, note="before")
    idx = health(fresh, svc).index
    fresh.restart(keep_data=True)
    r = health(fresh, svc)
    [row] = r.json()
    assert row["Service"]["Tags"] == ["t"] and r.index == idx
    assert [c["Output"] for c in row["Checks"] if c["CheckID"] == "service:" + sid] == ["before"]
    check_pass(fresh, "service:" + sid, "warn")


# ---------------------------------------------------------------------------
# Several servers over one state, restarts, a client agent
# ---------------------------------------------------------------------------

@pytest.fixture
def trio():
    """Three servers sharing one state (the double only), session_ttl_min 1s."""
    with Consul(servers=3, session_ttl_min="1s") as c:
        yield c


def test_servers_share_the_replicated_state(trio, ns):
    """consul-facts.md "Server-side vs agent-local state": KV, sessions and the catalog go
    through raft, so every server answers the same; each server is an agent of its own
    (agent/agent_endpoint.go AgentSelf: its NodeName, Config.Server true) with its own node
    and serfHealth in the catalog (leader.go reconcileMember)."""
    c = trio
    assert len(c.addrs) == 3 and len(set(c.addrs)) == 3
    assert c.request("PUT", c.key_path(ns + "k"), body=b"v", server=2).json() is True
    for n in (1, 2, 3):
        r = c.request("GET", c.key_path(ns + "k"), params={"raw": True}, server=n)
        assert r.status == 200 and r.body == b"v"
        me = c.request("GET", "/v1/agent/self", server=n).json()
        assert me["Config"]["NodeName"] == "consul-test-%d" % n and me["Config"]["Server"] is True
    peers = c.request("GET", "/v1/status/peers", server=3).json()
    assert len(peers) == 3 and c.request("GET", "/v1/status/leader", server=3).json() == peers[0]
    rows = c.request("GET", "/v1/catalog/service/consul").json()   # the double does not list itself
    assert rows == []
    nodes = {s["Node"] for s in c.request("GET", "/v1/session/list").json()}
    assert nodes <= {"consul-test-1", "consul-test-2", "consul-test-3"}


def test_agent_services_and_checks_belong_to_the_receiving_server(trio, svc):
    """agent_endpoint.go: /v1/agent/service/register registers with the agent that receives it
    (under its node); another agent does not know the check: check/pass answers 404 "Unknown
    check ID" (agent.go vetCheckUpdateWithAuthorizer, current releases) and deregister 404
    "Unknown service ID"."""
    c = trio
    body = {"Name": svc, "ID": svc, "Check": {"TTL": "30s", "Status": "passing"}}
    assert c.request("PUT", "/v1/agent/service/register", body=json.dumps(body), server=1).status == 200
    [row] = c.request("GET", "/v1/health/service/" + svc, server=3).json()
    assert row["Node"]["Node"] == "consul-test-1"
    assert {x["CheckID"]: x["Node"] for x in row["Checks"]} == {
        "serfHealth": "consul-test-1", "service:" + svc: "consul-test-1"}
    r = c.request("PUT", "/v1/agent/check/pass/service:" + svc, server=2)
    assert r.status == 404 and r.text.startswith('Unknown check ID "service:%s"' % svc)
    r = c.request("PUT", "/v1/agent/service/deregister/" + svc, server=3)
    assert r.status == 404 and r.text.startswith('Unknown service ID "%s"' % svc)
    assert c.request("PUT", "/v1/agent/check/pass/service:" + svc, server=1).status == 200
    assert c.request("PUT", "/v1/agent/service/deregister/" + svc, server=1).status == 200
    assert c.request("GET", "/v1/health/service/" + svc, server=2).json() == []


def test_sessions_bind_to_the_receiving_servers_node(trio, ns):
    """session.mdx: Node defaults to the agent's node and NodeChecks to ["serfHealth"]; a
    session created through server 2 names server 2's node (session_endpoint.go fills
    args.Session.Node from the agent's config)."""
    c = trio
    for n in (1, 2, 3):
        sid = c.session_create(server=n)
        [info] = c.request("GET", "/v1/session/info/" + sid, server=1).json()
        assert info["Node"] == "consul-test-%d" % n and info["NodeChecks"] == ["serfHealth"]


def test_restarting_a_server_invalidates_its_nodes_sessions(trio, ns):
    """A restarted server's node fails its serfHealth (leader.go handleFailedMember: critical,
    "Agent not live or unreachable"): every session bound to it is invalidated, its locks
    released or its keys deleted (Behavior); sessions of other nodes and sessions with
    NodeChecks [] and a TTL stay. Meanwhile the server refuses connections; then it is back
    and its serfHealth passes (handleAliveMember)."""
    c = trio
    on2_del = c.session_create(server=2, Behavior="delete", LockDelay="0s")
    on2_rel = c.session_create(server=2, LockDelay="0s")
    on2_ttl = c.session_create(server=2, NodeChecks=[], TTL="10s", Behavior="delete")
    on1 = c.session_create(server=1, Behavior="delete")
    for key, sid in (("del", on2_del), ("rel", on2_rel), ("ttl", on2_ttl), ("one", on1)):
        assert c.put(ns + key, b"x", acquire=sid).json() is True
    idx = c.get(ns, recurse=True).index
    fut = in_background(c.request, "GET", c.key_path(ns), params={"recurse": True, "index": idx,
                                                                  "wait": "30s"}, server=3)
    time.sleep(0.2)
    assert c.restart_server(2, down=1.5) == {"server": 2, "node": "consul-test-2", "down": 1.5}
    t0 = time.monotonic()
    elapsed, r = fut.result(timeout=10)
    assert elapsed < 5 and r.status == 200
    assert c.get(ns + "del").status == 404
    assert "Session" not in entry(c, ns + "rel")
    assert entry(c, ns + "ttl")["Session"] == on2_ttl and entry(c, ns + "one")["Session"] == on1
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", c.ports[1]), timeout=2).close()
    r = c.request("PUT", "/v1/session/create", body="{}", server=1)
    assert r.status == 200                      # server 1's node is fine
    r = c.request("PUT", "/v1/session/create", body=json.dumps({"Node": "consul-test-2"}), server=1)
    assert r.status == 500 and r.text == "Check 'serfHealth' is in critical state"
    while time.monotonic() - t0 < 1.4:
        time.sleep(0.1)
    deadline = time.monotonic() + 5
    while True:
        try:
            r = c.request("GET", "/v1/agent/self", server=2, timeout=2)
            break
        except OSError:
            assert time.monotonic() < deadline, "server 2 did not come back"
            time.sleep(0.05)
    assert time.monotonic() - t0 >= 1.4 and r.json()["Config"]["NodeName"] == "consul-test-2"
    assert c.session_create(server=2)           # serfHealth passing again


def test_restart_drops_open_connections_and_keeps_agent_services(trio, svc):
    """A restarting agent closes its connections: a blocking query held open on it ends without
    an answer (the client sees the connection closed). What was registered through its agent
    API stays: agents persist services and checks in their data dir (agent.go persistService,
    persistCheck) and load them at start, so after the restart check/pass through it works."""
    c = trio
    body = {"Name": svc, "ID": svc, "Check": {"TTL": "30s", "Status": "passing"}}
    assert c.request("PUT", "/v1/agent/service/register", body=json.dumps(body), server=2).status == 200
    idx = c.request("GET", "/v1/health/service/" + svc, server=2).index
    fut = in_background(c.request, "GET", "/v1/health/service/" + svc,
                        params={"index": idx + 1000, "wait": "30s"}, server=2)
    time.sleep(0.2)
    c.restart_server(2, down=0.5)
    with pytest.raises((OSError, http.client.HTTPException)):
        fut.result(timeout=5)[1]
    [row] = c.request("GET", "/v1/health/service/" + svc, server=1).json()
    assert {x["CheckID"]: x["Status"] for x in row["Checks"]}["serfHealth"] == "critical"
    assert [x["Output"] for x in row["Checks"] if x["CheckID"] == "serfHealth"] == ["Agent not live or unreachable"]
    deadline = time.monotonic() + 5
    while True:
        try:
            r = c.request("PUT", "/v1/agent/check/pass/service:" + svc, server=2, timeout=2)
            break
        except OSError:
            assert time.monotonic() < deadline
            time.sleep(0.05)
    assert r.status == 200
    [row] = c.request("GET", "/v1/health/service/" + svc, params={"passing": True}).json()
    assert row["Node"]["Node"] == "consul-test-2"


def test_restart_server_through_itself_answers_first(trio):
    """/_fake/restart-server sent to the server it restarts answers before that server goes."""
    r = trio.request("POST", "/_fake/restart-server", params={"n": 1, "down": 0.3}, server=1)
    assert r.status == 200 and r.json()["node"] == "consul-test-1"
    r = trio.request("POST", "/_fake/restart-server", params={"n": 4}, server=2)
    assert r.status == 400


def test_client_agent_says_so_in_agent_self():
    """agent_endpoint.go AgentSelf: Config.Server false on a client agent (--client-agent), the
    member role "node"; a server says true (what consul-agent = "auto" tells apart)."""
    with Consul(client_agent=True) as c:
        need_fake(c, "--client-agent")
        me = c.request("GET", "/v1/agent/self").json()
        assert me["Config"]["Server"] is False and me["DebugConfig"]["ServerMode"] is False
        assert me["Member"]["Tags"]["role"] == "node" and me["Config"]["NodeName"] == "consul-test"
        assert me["Stats"]["consul"]["server"] == "false"


def test_cli_several_servers_and_their_port_file(tmp_path):
    """--servers N: N listeners, one http= line each in the port file (a single server keeps
    the one-line form); port 0 only; --client-agent with one listener only."""
    pf = tmp_path / "port"
    p = subprocess.Popen([PYTHON, DOUBLE, "--servers", "2", "--port-file", str(pf), "--node", "n"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 10
        while not pf.exists():
            assert time.monotonic() < deadline
            time.sleep(0.02)
        lines = pf.read_text().split()
        assert len(lines) == 2 and all(re.fullmatch(r"http=127\.0\.0\.1:\d+", x) for x in lines)
    finally:
        p.terminate()
        assert p.wait(5) == 0
    for args in (["--servers", "2", "--listen", "127.0.0.1:5555"], ["--servers", "2", "--client-agent"]):
        r = subprocess.run([PYTHON, DOUBLE] + args, capture_output=True, text=True, timeout=10)
        assert r.returncode == 2 and r.stderr.startswith("consul_kv: "), r.stderr


# ---------------------------------------------------------------------------
# ACL login and logout, exact rules
# ---------------------------------------------------------------------------

JWT_OK = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQ6ZGVmYXVsdDpzeW5jIn0.c2ln"
JWT_SVC = "eyJhbGciOiJSUzI1NiJ9.c3ZjLWlkZW50aXR5.c2ln"
JWT_NOBODY = "eyJhbGciOiJSUzI1NiJ9.bm9iaW5kaW5n.c2ln"


@pytest.fixture
def k8s(tmp_path):
    """ACLs on and a kubernetes auth method "k8s" (max token TTL 2s): JWT_OK is service account
    sync, whose binding rule grants a role that reads "cfg/" and writes session on every node;
    JWT_SVC gets a service identity "proxysql"; JWT_NOBODY matches no binding rule."""
    with Consul(acl_master_token=MASTER, servers=2) as c:
        c.login_method("k8s", {
            JWT_OK: {"service_account": "sync", "rules": [("key_prefix", "cfg/", "read"),
                                                          ("session_prefix", "", "write")]},
            JWT_SVC: {"service_account": "px", "service_identity": "proxysql"},
            JWT_NOBODY: {"service_account": "nobody"}}, max_token_ttl="2s")
        yield c


def test_login_answers_a_token(k8s, ns):
    """api-docs/acl/index.mdx "Login to Auth Method": POST /v1/acl/login {AuthMethod,
    BearerToken, Meta} answers the new token: AccessorID, SecretID, Description "token created
    via login" (with the Meta as JSON: auth.BuildTokenDescription), Roles or
    ServiceIdentities from the binding rules, Local true, AuthMethod, ExpirationTime from the
    method's MaxTokenTTL, CreateTime, Hash, CreateIndex, ModifyIndex. The token works on
    every server (ACL tokens are replicated state)."""
    c = k8s
    r = c.login("k8s", JWT_OK, meta={"pod": "px-0"}, server=2)
    assert r.status == 200, r
    t = r.json()
    assert list(t) == ["AccessorID", "SecretID", "Description", "Roles", "Local", "AuthMethod",
                       "ExpirationTime", "CreateTime", "Hash", "CreateIndex", "ModifyIndex"]
    assert t["Description"] == 'token created via login: {"pod":"px-0"}'
    assert t["Local"] is True and t["AuthMethod"] == "k8s" and t["Roles"][0]["Name"] == "k8s-sync"
    assert t["CreateIndex"] == t["ModifyIndex"] > 0
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z", t["ExpirationTime"])
    c.put("cfg/a", b"1", token=MASTER)
    assert c.request("GET", c.key_path("cfg/a"), token=t["SecretID"], server=1).status == 200
    r = c.request("PUT", c.key_path("cfg/a"), body=b"2", token=t["SecretID"], server=1)
    assert r.status == 403 and "lacks permission 'key:write'" in r.text
    assert c.session_create(token=t["SecretID"], server=1)
    s = c.login("k8s", JWT_SVC).json()
    assert s["ServiceIdentities"] == [{"ServiceName": "proxysql"}] and "Roles" not in s
    assert s["Description"] == "token created via login"


def test_login_errors(k8s):
    """acl_endpoint.go Login: an unknown auth method is acl.ErrNotFound wrapped, so 403
    `ACL not found: auth method "x" not found` (http.go: ErrNotFound and ErrPermissionDenied
    answer 403); a JWT the TokenReview does not accept is a plain error, 500 "lookup failed:
    service account jwt not valid" (kubeauth/k8s.go ValidateLogin); an identity no binding rule
    matches gets 403 "Permission denied" (no privileges: acl.ErrPermissionDenied). A body that
    does not decode: 400 "Failed to decode request body: ..."."""
    c = k8s
    r = c.login("nope", JWT_OK)
    assert r.status == 403 and r.text == 'ACL not found: auth method "nope" not found'
    r = c.login("k8s", "not-a-known-jwt")
    assert r.status == 500 and r.text == "lookup failed: service account jwt not valid"
    r = c.login("k8s", JWT_NOBODY)
    assert r.status == 403 and r.text == "Permission denied"
    r = c.request("POST", "/v1/acl/login", body="[1]")
    assert r.status == 400 and r.text.startswith("Failed to decode request body: ")
    assert c.request("GET", "/v1/acl/login").status == 405
    counts = c.request("GET", "/_fake/auth-method").json()["counts"]
    assert counts == {"logins": 0, "login_failures": 3, "logouts": 0}


def test_login_tokens_expire_and_logout_destroys_them(k8s, ns):
    """A token minted with an ExpirationTime stops working then: 403 "ACL not found"
    (ACLToken.IsExpired: resolved as absent). POST /v1/acl/logout with the token in
    X-Consul-Token deletes it and answers true; then it is not found. Logout of a token login
    did not make: 403 "Permission denied: token wasn't created via login"
    (auth/token_writer.go Delete); of an unknown one: 403 "ACL not found"; without a token:
    401 "Supplied token does not exist" (agent/acl_endpoint.go ACLLogout). A login token
    revoked by control (DELETE /_fake/acl) is gone too. Logins and logouts are counted."""
    c = k8s
    a = c.login("k8s", JWT_OK).json()["SecretID"]
    b = c.login("k8s", JWT_OK).json()["SecretID"]
    d = c.login("k8s", JWT_OK).json()["SecretID"]
    assert c.get("cfg/", token=a, keys=True).status in (200, 404)
    r = c.logout(a, server=2)
    assert r.status == 200 and r.json() is True
    r = c.get("cfg/", token=a, keys=True)
    assert r.status == 403 and r.text == "ACL not found"
    assert c.logout(a).text == "ACL not found"
    r = c.logout(MASTER)
    assert r.status == 403 and r.text == "Permission denied: token wasn't created via login"
    r = c.request("POST", "/v1/acl/logout")
    assert r.status == 401 and r.text == "Supplied token does not exist"
    c.fault("acl", method="DELETE", token=d)
    assert c.get("cfg/", token=d, keys=True).text == "ACL not found"
    time.sleep(2.1)
    r = c.get("cfg/", token=b, keys=True)
    assert r.status == 403 and r.text == "ACL not found"
    counts = c.request("GET", "/_fake/auth-method").json()["counts"]
    assert counts["logins"] == 3 and counts["logouts"] == 1


def test_login_without_acls_is_401(consul):
    """agent/acl_endpoint.go: with ACLs disabled the ACL endpoints answer 401 "ACL support disabled"."""
    need_fake(consul, "a double without ACLs")
    for path in ("/v1/acl/login", "/v1/acl/logout"):
        r = consul.request("POST", path, body="{}")
        assert r.status == 401 and r.text == "ACL support disabled"


def test_acl_exact_rules_and_resources(acl, ns, svc):
    """acl/policy rules: an exact rule (`key "a"`) wins over any prefix rule (`key_prefix
    "a"`), for every resource; /v1/agent/service/register needs service:write on the name
    (agent_endpoint.go), /v1/catalog/register node:write and service:write, session create
    session:write on the node, health reads drop rows without service:read and node:read."""
    c = acl
    tok = str(uuid.uuid4())
    for params in ({"prefix": ns, "policy": "write"}, {"exact": ns + "ro", "policy": "read"},
                   {"prefix": ns + "ro", "policy": "deny", "resource": "key"},
                   {"exact": svc, "policy": "write", "resource": "service"},
                   {"prefix": "", "policy": "read", "resource": "service"},
                   {"exact": "consul-test", "policy": "write", "resource": "session"},
                   {"prefix": "", "policy": "read", "resource": "node"}):
        c.fault("acl", token=tok, **params)
    assert c.put(ns + "rw", b"1", token=tok).json() is True
    c.put(ns + "ro", b"1", token=MASTER)
    c.put(ns + "rox", b"1", token=MASTER)
    assert c.get(ns + "ro", token=tok).status == 200          # the exact read rule wins
    assert c.put(ns + "ro", b"2", token=tok).status == 403
    assert c.get(ns + "rox", token=tok).status == 403         # the longer prefix denies
    assert register(c, svc, token=tok)
    r = c.request("PUT", "/v1/agent/service/register", body=json.dumps({"Name": svc + "x"}), token=tok)
    assert r.status == 403 and "lacks permission 'service:write' on \"%sx\"" % svc in r.text
    r = c.request("PUT", "/v1/catalog/register", token=tok,
                  body=json.dumps({"Node": "n9", "Address": "10.0.0.9", "Service": {"Service": svc}}))
    assert r.status == 403 and "'node:write'" in r.text
    assert c.session_create(token=tok)
    r = c.request("PUT", "/v1/session/create", body=json.dumps({"Node": "other"}), token=tok)
    assert r.status == 403 and "'session:write' on \"other\"" in r.text
    assert [x["Service"]["ID"] for x in health(c, svc, token=tok).json()] == [svc]
