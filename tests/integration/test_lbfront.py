"""Tests of tests/fakes/lbfront.py, the round-robin front the fleet tests put before several
Consul servers (the double with servers=3): per connection, per request, a refused backend
skipped, a backend going away mid-answer, bounded connections, a prompt SIGTERM.

Run: /usr/bin/python3 -m pytest -q tests/integration/test_lbfront.py
"""

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from fakes.consul import PYTHON, Consul  # noqa: E402

LBFRONT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fakes", "lbfront.py")


class Front:
    """One lbfront process before `backends` (HOST:PORT strings)."""

    def __init__(self, tmp_path, backends, *args):
        pf = tmp_path / ("lb-port-%d" % time.monotonic_ns())
        cmd = [PYTHON, LBFRONT, "--port-file", str(pf)] + [x for b in backends for x in ("--backend", b)]
        self.proc = subprocess.Popen(cmd + list(args), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 10
        while not pf.exists():
            assert self.proc.poll() is None, self.proc.stderr.read()
            assert time.monotonic() < deadline
            time.sleep(0.02)
        self.port = int(pf.read_text().strip().rsplit(":", 1)[1])

    def conn(self, timeout=10):
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(5)
        return self.proc.returncode


@pytest.fixture
def trio():
    with Consul(servers=3) as c:
        if not c.is_fake:
            pytest.skip("needs the Consul double")
        yield c


def node_of(conn):
    conn.request("GET", "/v1/agent/self")
    r = conn.getresponse()
    assert r.status == 200
    return json.loads(r.read())["Config"]["NodeName"]


def test_per_connection_round_robin(tmp_path, trio):
    """Default mode: each new connection goes to the next backend, and all its requests stay there."""
    lb = Front(tmp_path, trio.addrs)
    try:
        seen = []
        for _ in range(6):
            c = lb.conn()
            first = node_of(c)
            assert node_of(c) == first and node_of(c) == first     # keep-alive: same server
            c.close()
            seen.append(first)
        assert seen == ["consul-test-%d" % (i % 3 + 1) for i in range(6)]
    finally:
        assert lb.stop() == 0


def test_per_request_round_robin(tmp_path, trio):
    """--per-request: each request on one keep-alive connection goes to the next backend; request
    bodies (a KV PUT), chunked uploads and gzip answers pass unchanged."""
    lb = Front(tmp_path, trio.addrs, "--per-request")
    try:
        c = lb.conn()
        assert [node_of(c) for _ in range(4)] == ["consul-test-1", "consul-test-2", "consul-test-3",
                                                  "consul-test-1"]
        c.request("PUT", "/v1/kv/lb/a", body=b"x" * 3000)
        r = c.getresponse()
        assert r.status == 200 and r.read() == b"true"
        c.putrequest("PUT", "/v1/kv/lb/b")
        c.putheader("Transfer-Encoding", "chunked")
        c.endheaders()
        c.send(b"3\r\nabc\r\n0\r\n\r\n")
        r = c.getresponse()
        assert r.status == 200 and r.read() == b"true"
        c.request("GET", "/v1/kv/lb/?recurse", headers={"Accept-Encoding": "gzip"})
        r = c.getresponse()
        assert r.status == 200 and r.getheader("Content-Encoding") == "gzip" and r.read()
        assert trio.value("lb/b") == b"abc"
        log = trio.request("GET", "/_fake/requests").json()
        assert {x["server"] for x in log if x["path"].startswith("/v1/kv/lb")} == {1, 2, 3}
    finally:
        assert lb.stop() == 0


def test_a_refusing_backend_is_skipped(tmp_path, trio):
    """A backend that refuses connections (a restarting server) is skipped in both modes; when it
    is back it gets its turn again."""
    for mode in ((), ("--per-request",)):
        lb = Front(tmp_path, trio.addrs, *mode)
        try:
            trio.restart_server(2, down=1.0)
            nodes = []
            for _ in range(4):
                c = lb.conn()
                nodes.append(node_of(c))
                c.close()
            assert "consul-test-2" not in nodes and len(nodes) == 4
            time.sleep(1.2)
            seen = set()
            for _ in range(3):
                c = lb.conn()
                seen.add(node_of(c))
                c.close()
            assert seen == {"consul-test-1", "consul-test-2", "consul-test-3"}
        finally:
            assert lb.stop() == 0


def test_a_backend_going_away_closes_the_client_connection(tmp_path, trio):
    """A blocking query held on a server that restarts: the client's connection is closed (as a
    reset would), in both modes; the next request is served by another server."""
    for mode in ((), ("--per-request",)):
        lb = Front(tmp_path, trio.addrs, *mode)
        try:
            idx = trio.get("lbq/", recurse=True).index
            c = lb.conn()
            assert node_of(c) == "consul-test-1"
            if mode:
                node_of(c)
                node_of(c)                  # the next request goes to server 1 again
            c.request("GET", "/v1/kv/lbq/?recurse&index=%d&wait=30s" % (idx + 10000))
            time.sleep(0.3)
            trio.restart_server(1, down=0.5)
            t0 = time.monotonic()
            with pytest.raises((OSError, http.client.HTTPException)):
                c.getresponse().read()
            assert time.monotonic() - t0 < 3
            c = lb.conn()
            assert node_of(c) in ("consul-test-2", "consul-test-3")
            time.sleep(0.6)
        finally:
            assert lb.stop() == 0


def test_no_backend_closes_and_sigterm_is_prompt(tmp_path):
    """No backend accepts: the client's connection is closed. SIGTERM with connections open
    (one idle, one in the middle of a request): exit 0 at once."""
    dead = socket.socket()
    dead.bind(("127.0.0.1", 0))
    addr = "127.0.0.1:%d" % dead.getsockname()[1]
    dead.close()
    lb = Front(tmp_path, [addr], "--max-connections", "4")
    c = lb.conn(timeout=5)
    with pytest.raises((OSError, http.client.HTTPException)):
        node_of(c)
    lb.stop()

    hold = socket.socket()
    hold.bind(("127.0.0.1", 0))
    hold.listen(8)                           # accepts TCP, never answers
    lb = Front(tmp_path, ["127.0.0.1:%d" % hold.getsockname()[1]], "--per-request")
    idle = socket.create_connection(("127.0.0.1", lb.port))
    busy = socket.create_connection(("127.0.0.1", lb.port))
    busy.sendall(b"GET /v1/kv/x HTTP/1.1\r\nHost: x\r\n\r\n")
    time.sleep(0.3)
    t0 = time.monotonic()
    assert lb.stop() == 0 and time.monotonic() - t0 < 1.5
    assert busy.recv(10) == b"" and idle.recv(10) == b""
    hold.close()


def test_refuses_non_loopback_and_no_backend(tmp_path):
    for args in (["--backend", "10.0.0.1:8500"], ["--listen", "0.0.0.0:0", "--backend", "127.0.0.1:1"], []):
        r = subprocess.run([PYTHON, LBFRONT] + args, capture_output=True, text=True, timeout=10)
        assert r.returncode == 2 and r.stderr.startswith("lbfront: "), r.stderr
