"""proxysql-sync against what real Consul does that simpler doubles did not: an empty prefix that
wakes on writes nearby, reads without a leader held for rpc_hold_timeout, the agent's default
token filtering answers. Needs the Consul double's options (skipped with CONSUL_BIN)."""

import time
import uuid

import pytest

from fakes.consul import Consul
from test_sync import (Agent, first_sync, put_topology, px, runtime_servers, stop_and_check,  # noqa: F401
                       synced, wait_until, workdir, writes)
from test_sync_safety import metric


def double(**kw):
    c = Consul(use_double=True, **kw)
    c.start()
    return c


def test_empty_prefix_wakes_without_churn(px, workdir):
    """An empty users prefix wakes on every write under its nearest existing ancestor (404 with a
    higher X-Consul-Index, as Consul's radix watch does): the agent re-arms with the new index, writes
    nothing to ProxySQL and logs nothing for it."""
    c = double()
    try:
        put_topology(c, users=False)
        c.put("proxysql/other/seed", b"x")
        agent = Agent(c, [px], workdir, extra="wait = 30.0\n").start()
        first_sync(px, agent)
        before = metric(agent, "proxysql_sync_consul_index", prefix="proxysql/users/")
        lines = len(agent.logs().splitlines())
        px.clear_statements()
        for i in range(20):
            c.put("proxysql/other/k%d" % i, b"v")
        wait_until("the index metric moving", lambda: metric(
            agent, "proxysql_sync_consul_index", prefix="proxysql/users/") > before)
        time.sleep(1)
        assert writes(px) == []
        assert len(agent.logs().splitlines()) == lines, agent.logs()
        assert metric(agent, "proxysql_sync_consul_up", prefix="proxysql/users/") == 1
        stop_and_check(agent)
    finally:
        c.close()


def test_reads_held_without_a_leader(px, workdir):
    """Without a leader, default-consistency reads hang up to rpc_hold_timeout before the 500: the agent
    keeps the last good state, its health port keeps answering, and it recovers with the leader."""
    c = double(extra_args=["--rpc-hold-timeout", "2s"])
    try:
        put_topology(c, users=False)
        agent = Agent(c, [px], workdir, extra="wait = 1.0\n").start()
        first_sync(px, agent)
        px.clear_statements()
        c.fault("leader", known=0, reads="fail")
        wait_until("the 500 after the hold", lambda: "No cluster leader" in agent.logs(), timeout=20)
        t0 = time.monotonic()
        assert agent.http("/healthz")[0] == 200 and time.monotonic() - t0 < 0.5
        assert synced(px) and writes(px) == []
        assert agent.http("/readyz")[0] == 503
        c.fault("leader", known=1)
        c.put("mysql/replica/shop/eu/db6:3306", b"")
        wait_until("db6 once a leader is back", lambda: ("11", "db6", "3306", "ONLINE") in runtime_servers(px),
                   timeout=40)
        stop_and_check(agent)
    finally:
        c.close()


def test_default_token_that_cannot_read_everything(px, workdir):
    """The agent sends no token and its Consul agent has a default token (acl.tokens.default) that
    loses read on the replicas: the answers carry X-Consul-Results-Filtered-By-ACLs and are not
    believed; the readers stay."""
    master, default = "root-" + uuid.uuid4().hex, "dflt-" + uuid.uuid4().hex
    c = double(acl_master_token=master, extra_args=["--acl-default-token", default])
    try:
        for prefix in ("mysql/", "proxysql/"):
            c.fault("acl", token=default, prefix=prefix, policy="read", resource="key")
        for key, value in (("mysql/master/shop", b"db1:3306"), ("mysql/master/shop/hostname", b"db1"),
                           ("mysql/master/shop/port", b"3306"), ("mysql/replica/shop/eu/db2:3306", b""),
                           ("mysql/replica/shop/eu/db3:3306", b"")):
            Consul.put(c, key, value, token=master)
        agent = Agent(c, [px], workdir, extra="wait = 1.0\n").start()
        first_sync(px, agent)
        px.clear_statements()
        c.fault("acl", token=default, prefix="mysql/replica/", policy="deny", resource="key")
        wait_until("the filtered answer logged", lambda: "filtered by ACLs" in agent.logs(), timeout=10)
        time.sleep(2)
        assert synced(px) and writes(px) == []
        c.fault("acl", token=default, prefix="mysql/replica/", policy="read", resource="key")
        wait_until("/readyz again", agent.ready, timeout=20)
        stop_and_check(agent)
    finally:
        c.close()


@pytest.fixture(autouse=True)
def _not_real_consul():
    import os
    if os.environ.get("CONSUL_BIN"):
        pytest.skip("these model the double's Consul-version options")
