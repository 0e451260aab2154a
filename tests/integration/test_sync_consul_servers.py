"""proxysql-sync against Consul servers directly (no local client agent), through one
load-balanced address: the deployment of consul-k8s 1.0 and later (docs: consul-facts.md).

Two agents in single-writer mode, each with its own ProxySQL, announce their ProxySQL under an
announce-prefix and keep proxysql_servers equal to the fleet; they reach a three-server Consul
double through tests/fakes/lbfront.py in per-request mode, so any request (a session create
among them) may land on any server. With consul-agent = "none" their sessions must not be bound
to the receiving server's serfHealth: restarting each server that holds one of their sessions
must neither drop an announced member from a proxysql_servers nor move the cluster lock.

The control case shows what the test would catch: a session created without NodeChecks through
a server is bound to that server's node, and restarting the server deletes its keys.

Run: SIDEKICK_BIN=$PWD/bin /usr/bin/python3 -m pytest -q tests/integration/test_sync_consul_servers.py
"""

import http.client
import json
import os
import subprocess
import threading
import time

import pytest

from fakes.consul import PYTHON, Consul
from fakes.process import track
from test_sync import Agent, put_topology, runtime_servers, stop_and_check, wait_until  # noqa: F401
from test_sync_cluster import SINGLE_WRITER, peers, proxysql_doubles
from test_sync_safety import metric

LBFRONT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fakes", "lbfront.py")
FLEET = "proxysql/fleet/"


class Endpoint:
    """What Agent needs of a Consul: the address in its config (here the front's)."""

    def __init__(self, addr):
        self.addr = addr


@pytest.fixture
def servers():
    """Three Consul server doubles over one state, session_ttl_min 1s."""
    c = Consul(servers=3, session_ttl_min="1s")
    c.start()
    if not c.is_fake:
        c.close()
        pytest.skip("three servers and restarts: the Consul double only")
    yield c
    c.close()


@pytest.fixture
def front(servers, tmp_path):
    """lbfront in per-request mode before the three servers: its address."""
    pf = tmp_path / "lb-port"
    cmd = [PYTHON, LBFRONT, "--per-request", "--port-file", str(pf)]
    for a in servers.addrs:
        cmd += ["--backend", a]
    proc = track(subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    wait_until("lbfront listening", pf.exists, timeout=10)
    yield pf.read_text().strip().split("=", 1)[1]
    proc.terminate()
    proc.wait(5)


class Sampler:
    """Every ~100 ms: each ProxySQL's proxysql_servers and each agent's lock metrics."""

    def __init__(self, pxs, agents):
        self.pxs, self.agents = pxs, agents
        self.samples = []           # (time, [peers per px], [(writer, acquired) per agent])
        self.errors = []
        self.done = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        while not self.done.is_set():
            try:
                fleet = [peers(p) for p in self.pxs]
                lock = [(metric(a, "proxysql_sync_cluster_writer"),
                         metric(a, "proxysql_sync_cluster_lock_acquired_total")) for a in self.agents]
                self.samples.append((time.monotonic(), fleet, lock))
            except Exception as e:        # a sample that fails is a finding too
                self.errors.append(repr(e))
            self.done.wait(0.1)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.done.set()
        self.thread.join(10)

    def dropped(self):
        """Members that left a proxysql_servers between two samples: [(time, px index, member)]."""
        out = []
        for (_, before, _), (t, after, _) in zip(self.samples, self.samples[1:]):
            for i, (b, a) in enumerate(zip(before, after)):
                out += [(t, i, m) for m in set(b) - set(a)]
        return out

    def lock_states(self):
        return sorted({tuple(s[2]) for s in self.samples})


def session_through(addr, fields):
    """PUT /v1/session/create sent to addr (the front); the session's ID."""
    host, port = addr.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        conn.request("PUT", "/v1/session/create", body=json.dumps(fields))
        r = conn.getresponse()
        assert r.status == 200
        return json.loads(r.read())["ID"]
    finally:
        conn.close()


def server_of(node):
    return int(node.rsplit("-", 1)[1])


def test_fleet_through_a_front_survives_server_restarts(servers, front, tmp_path):
    """consul-agent = "none", per-request front, three servers: each server holding one of the
    agents' sessions restarted in turn (1 s down each). At every sample (~100 ms) during and
    after: no announced member leaves any proxysql_servers, the writer stays the writer and the
    follower the follower (proxysql_sync_cluster_writer, cluster_lock_acquired_total unchanged,
    no "no longer the writer" line), the announcement keys keep their sessions; a KV change
    after the restarts reaches the writer's mysql_servers."""
    consul = servers
    pxs = proxysql_doubles(2)
    agents = []
    try:
        put_topology(consul, users=False)
        extra = lambda p: SINGLE_WRITER + (  # noqa: E731
            'consul-agent = "none"\nannounce-prefix = "%s"\nannounce-address = "127.0.0.1:%d"\n'
            'announce-ttl = 2.0\nresync-interval = 1.0\n' % (FLEET.rstrip("/"), p.admin_port))
        for i, p in enumerate(pxs):
            d = os.path.join(str(tmp_path), "a%d" % i)
            os.makedirs(d)
            agents.append(Agent(Endpoint(front), [p], d, extra=extra(p)).start())
        wait_until("one writer", lambda: sorted(metric(a, "proxysql_sync_cluster_writer") or 0
                                                for a in agents) == [0, 1], timeout=20)
        w = [a for a in agents if metric(a, "proxysql_sync_cluster_writer") == 1][0]
        wp = pxs[agents.index(w)]
        fleet = sorted(("127.0.0.1", p.admin_port) for p in pxs)
        wait_until("the fleet in the writer's proxysql_servers", lambda: peers(wp) == fleet, timeout=20)
        held = {e["Key"]: e.get("Session") for e in consul.get(FLEET, recurse=True).json()}
        assert len(held) == 2 and all(held.values()), held
        lock_before = [metric(a, "proxysql_sync_cluster_lock_acquired_total") for a in agents]
        nodes = {s["Node"] for s in consul.request("GET", "/v1/session/list").json()}
        targets = sorted({server_of(n) for n in nodes}) or [2]
        with Sampler(pxs, agents) as sampler:
            time.sleep(0.5)
            for n in targets:
                consul.restart_server(n, down=1.0)
                time.sleep(2.0)             # down, back, and a TTL's worth of renewals after
            consul.put("mysql/replica/shop/eu/db5:3306", b"db5:3306")
            wait_until("the KV change in the writer's mysql_servers",
                       lambda: ("11", "db5", "3306", "ONLINE") in runtime_servers(wp), timeout=15)
            time.sleep(2.5)                 # past the announce and lock TTLs (2 s)
        print("restarted servers %s; %d samples" % (targets, len(sampler.samples)))
        assert sampler.errors == [], sampler.errors
        assert len(sampler.samples) > 30
        assert sampler.dropped() == [], sampler.dropped()
        assert all(s[1][agents.index(w)] == fleet for s in sampler.samples)
        writer_i = agents.index(w)
        for _, _, lock in sampler.samples:
            assert lock[writer_i][0] == 1 and lock[1 - writer_i][0] == 0, lock
        assert [metric(a, "proxysql_sync_cluster_lock_acquired_total") for a in agents] == lock_before
        for a in agents:
            assert "no longer the writer" not in a.logs(), a.logs()
        assert {e["Key"]: e.get("Session") for e in consul.get(FLEET, recurse=True).json()} == held
        served = {r["server"] for r in consul.request("GET", "/_fake/requests").json()}
        assert served == {1, 2, 3}
    finally:
        try:
            for a in agents:
                stop_and_check(a)
        finally:
            for p in pxs:
                p.close()


def test_control_a_restart_deletes_keys_of_sessions_bound_to_its_node(servers, front):
    """What the test above would catch: a session created without NodeChecks is bound to the
    receiving server's node and serfHealth (session.mdx), whether it came straight to server 2
    or through the front; restarting that server deletes its keys (Behavior = delete), while a
    session with NodeChecks [] and a TTL keeps its key."""
    consul = servers
    bound = consul.session_create(server=2, Behavior="delete", LockDelay="0s")
    free = consul.session_create(server=2, Behavior="delete", LockDelay="0s", NodeChecks=[], TTL="10s")
    fronted = session_through(front, {"Behavior": "delete", "LockDelay": "0s"})
    [info] = consul.request("GET", "/v1/session/info/" + fronted).json()
    for key, sid in (("bound", bound), ("free", free), ("fronted", fronted)):
        assert consul.put(FLEET + key, b"{}", acquire=sid).json() is True
    consul.restart_server(2, down=0.5)
    assert consul.get(FLEET + "bound").status == 404
    assert consul.get(FLEET + "free").json()[0]["Session"] == free
    k = server_of(info["Node"])
    if k != 2:
        consul.restart_server(k, down=0.5)
    other = [n for n in (1, 2, 3) if n not in (2, k)][0]
    assert consul.request("GET", consul.key_path(FLEET + "fronted"), server=other).status == 404
