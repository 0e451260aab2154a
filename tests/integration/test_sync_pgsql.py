"""proxysql-sync's PostgreSQL side against the ProxySQL double's 3.0 mode, fed with the keys Patroni
writes (service/<scope>/leader and members/<name>, as recorded from real Patroni 3.0.2 in
consul-facts.md) put by the test itself, so that every case is exact and quick. The same agent keeps
the MySQL side of the same target at once: the two sides must not touch each other's tables.
Real Patroni clusters drive the agent in test_sync_patroni.py."""

import json
import os
import re
import time

import pytest

from fakes.proxysql import ProxySQL
from test_sync import (ADMIN_PASSWORD, Agent, RuntimeSampler, consul, put_topology, synced,  # noqa: F401
                       wait_until, workdir)

SCRAM = ("SCRAM-SHA-256$4096:c2FsdHNhbHRzYWx0c2FsdA==$YWJjZGVmZ2hpamtsbW5vcHFyc3R1dnd4eXoxMjM0NTY=:"
         "YWJjZGVmZ2hpamtsbW5vcHFyc3R1dnd4eXoxMjM0NTY=")
CLEAR = "pg-" + os.urandom(6).hex()

PATRONI = """
patroni = ( { scope = "pgdemo"; namespace = "service"; writer_hostgroup = 20; reader_hostgroup = 21; } );
pgsql-users-prefix = "proxysql/pgsql-users"
resync-interval = 1.0
"""


def px30(version="3.0"):
    """The double playing ProxySQL 3.0, or the real binary of PROXYSQL_BIN when it is a 3.x."""
    p = ProxySQL(admin_password=ADMIN_PASSWORD, extra_args=["--proxysql-version", version]).start()
    if not p.is_fake and not p.query("SELECT @@version")[0][0].startswith("3."):
        real = p.query("SELECT @@version")[0][0]
        p.close()
        pytest.skip("the PostgreSQL side needs ProxySQL 3; PROXYSQL_BIN is %s" % real)
    return p


@pytest.fixture
def px():
    p = px30()
    yield p
    p.close()


@pytest.fixture
def agent(consul, px, workdir):
    a = Agent(consul, [px], workdir, extra=PATRONI)
    yield a
    rc = a.stop()
    logs = a.logs()
    print(logs)
    assert ADMIN_PASSWORD not in logs and CLEAR not in logs and SCRAM not in logs, "a secret reached the log"
    assert rc in (0, None), "agent exit code %r" % rc


def member(port, role, state="running", xlog=50331648, tags=None):
    m = {"conn_url": "postgres://127.0.0.1:%d/postgres" % port, "api_url": "http://127.0.0.1:%d/patroni" % (port + 1),
         "state": state, "role": role, "version": "3.0.2", "xlog_location": xlog, "timeline": 1}
    if tags:
        m["tags"] = tags
    return json.dumps(m).encode()


def put_cluster(consul, leader="pg1", members=(("pg1", 5441), ("pg2", 5442), ("pg3", 5443))):
    for name, port in members:
        consul.put("service/pgdemo/members/%s" % name, member(port, "master" if name == leader else "replica"))
    consul.put("service/pgdemo/leader", leader.encode())
    consul.put("service/pgdemo/status", b'{"optime": 50331648}')
    consul.put("service/pgdemo/config", b'{"ttl": 30}')


def pg_runtime(px):
    return sorted(tuple(r) for r in px.query(
        "SELECT hostgroup_id, hostname, port, status FROM runtime_pgsql_servers"))


def pg_table(px, table):
    return sorted(tuple(r) for r in px.query("SELECT hostgroup_id, hostname, port FROM %s" % table))


PG = [("20", "127.0.0.1", "5441", "ONLINE"), ("21", "127.0.0.1", "5442", "ONLINE"),
      ("21", "127.0.0.1", "5443", "ONLINE")]


def pg_synced(px, want=PG):
    return pg_runtime(px) == sorted(want)


def test_patroni_keys_and_users_reach_the_pgsql_tables_beside_the_mysql_side(consul, px, agent):
    put_topology(consul)
    put_cluster(consul)
    consul.put("proxysql/pgsql-users/app", json.dumps({"password": SCRAM, "default_hostgroup": 20}).encode())
    consul.put("proxysql/pgsql-users/batch", json.dumps(
        {"password": CLEAR, "default_hostgroup": 21, "max_connections": 7}).encode())
    agent.start()
    wait_until("both sides in sync", lambda: synced(px) and pg_synced(px) and agent.ready(), timeout=20)
    # memory = runtime = disk, on each side, and neither side's rows in the other's tables
    assert pg_table(px, "main.pgsql_servers") == pg_table(px, "disk.pgsql_servers") == \
        [(r[0], r[1], r[2]) for r in PG]
    assert not [r for r in px.query("SELECT hostname FROM mysql_servers") if r[0] == "127.0.0.1"]
    users = sorted(tuple(r) for r in px.query(
        "SELECT username, password, default_hostgroup, max_connections, frontend, backend FROM runtime_pgsql_users"))
    assert users == [("app", SCRAM, "20", "10000", "0", "1"), ("app", SCRAM, "20", "10000", "1", "0"),
                     ("batch", CLEAR, "21", "7", "0", "1"), ("batch", CLEAR, "21", "7", "1", "0")], users
    assert not px.query("SELECT username FROM mysql_users WHERE username IN ('app', 'batch') AND default_hostgroup "
                        "IN (20, 21)")
    status, text = agent.http("/metrics")
    assert status == 200
    assert 'proxysql_sync_target_in_sync{module="pgsql",target="px1"} 1' in text, text
    assert 'proxysql_sync_target_in_sync{target="px1"} 1' in text
    assert 'proxysql_sync_desired_servers{module="pgsql",scope="pgdemo",hostgroup="20"} 1' in text
    assert 'proxysql_sync_desired_users{module="pgsql"} 2' in text
    # one HELP per family: the two sides share them
    helps = re.findall(r"^# HELP (\S+)", text, re.M)
    assert len(helps) == len(set(helps)), [h for h in helps if helps.count(h) > 1]
    if px.is_fake:
        assert "LOAD PGSQL SERVERS TO RUNTIME" in [st["sql"].strip().upper() for st in px.statements()]


def test_failover_keeps_a_writer_and_follows_the_new_leader(consul, px, agent):
    put_topology(consul)
    put_cluster(consul)
    agent.start()
    wait_until("pgsql in sync", lambda: pg_synced(px) and agent.ready(), timeout=20)
    with RuntimeSampler(px, table="runtime_pgsql_servers") as rs:
        # Patroni's leader key goes (the session expired) and the old leader's member entry with it
        consul.delete("service/pgdemo/leader")
        consul.delete("service/pgdemo/members/pg1")
        time.sleep(1.5)                     # quiescence and a resync: the writer must stay
        assert [r for r in pg_runtime(px) if r[0] == "20"] == [("20", "127.0.0.1", "5441", "ONLINE")]
        # a leader without its member entry: still held
        consul.put("service/pgdemo/leader", b"pg9")
        time.sleep(1.0)
        assert [r for r in pg_runtime(px) if r[0] == "20"] == [("20", "127.0.0.1", "5441", "ONLINE")]
        # pg2 takes the key and says it is the primary
        consul.put("service/pgdemo/members/pg2", member(5442, "master"))
        consul.put("service/pgdemo/leader", b"pg2")
        wait_until("pg2 the writer", lambda: [r for r in pg_runtime(px) if r[0] == "20" and
                                              r[3] == "ONLINE"] == [("20", "127.0.0.1", "5442", "ONLINE")],
                   timeout=10)
        time.sleep(0.3)
    rs.assert_writer_never_empty(hostgroup="20")
    # pg2 left the readers: drained (OFFLINE_SOFT) until its connections end, then gone
    wait_until("pg3 the only reader", lambda: [r for r in pg_runtime(px) if r[0] == "21"] ==
               [("21", "127.0.0.1", "5443", "ONLINE")], timeout=10)


def test_reader_rules_noloadbalance_state_and_invalid_member(consul, px, agent):
    put_cluster(consul)
    consul.put("service/pgdemo/members/pg3", member(5443, "replica", tags={"noloadbalance": True}))
    consul.put("service/pgdemo/members/pg4", member(5444, "replica", state="starting"))
    consul.put("service/pgdemo/members/pg5", b'{"conn_url": "postgres://bad host:5432/x", "role": "replica"}')
    agent.start()
    want = [("20", "127.0.0.1", "5441", "ONLINE"), ("21", "127.0.0.1", "5442", "ONLINE")]
    wait_until("pgsql in sync", lambda: pg_synced(px, want), timeout=20)
    wait_until("the bad member rejected in the log", lambda: "service/pgdemo/members/pg5" in agent.logs())


def test_hand_edits_and_an_empty_restart_are_repaired(consul, px, agent):
    put_cluster(consul)
    agent.start()
    wait_until("pgsql in sync", lambda: pg_synced(px) and agent.ready(), timeout=20)
    px.query("DELETE FROM pgsql_servers WHERE hostgroup_id = 21")
    px.query("LOAD PGSQL SERVERS TO RUNTIME")
    wait_until("the hand edit repaired", lambda: pg_synced(px), timeout=10)
    px.query("UPDATE pgsql_servers SET weight = 5 WHERE hostgroup_id = 20")   # staged, not loaded
    wait_until("memory repaired", lambda: px.query(
        "SELECT weight FROM pgsql_servers WHERE hostgroup_id = 20") == [("1",)], timeout=10)
    px.restart(initial=True)                # a ProxySQL that starts with nothing
    wait_until("repaired after an empty restart", lambda: pg_synced(px) and pg_table(
        px, "disk.pgsql_servers") == [(r[0], r[1], r[2]) for r in PG], timeout=20)


def test_a_proxysql_without_pgsql_tables_is_refused_for_that_side_alone(consul, workdir):
    old = ProxySQL(admin_password=ADMIN_PASSWORD, extra_args=["--proxysql-version", "2.7"]).start()
    if not old.is_fake and old.query("SELECT @@version")[0][0].startswith("3."):
        old.close()
        pytest.skip("PROXYSQL_BIN is a ProxySQL 3: it has the pgsql tables")
    a = Agent(consul, [old], workdir, extra=PATRONI)
    try:
        put_topology(consul)
        put_cluster(consul)
        a.start()
        wait_until("the MySQL side in sync", lambda: synced(old), timeout=20)
        wait_until("the refusal in the log", lambda: "px1/pgsql: this ProxySQL has no pgsql tables" in a.logs())
        status, why = a.http("/readyz")
        assert status == 503 and "px1/pgsql" in why and "no pgsql tables" in why, why
        time.sleep(2.5)                     # retried, said once
        assert a.logs().count("this ProxySQL has no pgsql tables") == 1
    finally:
        a.stop()
        print(a.logs())
        old.close()


def test_dry_run_prints_the_pgsql_statements(consul, px, agent):
    put_cluster(consul)
    consul.put("proxysql/pgsql-users/app", json.dumps({"password": SCRAM, "default_hostgroup": 20}).encode())
    r = agent.run("--dry-run")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "INSERT INTO pgsql_servers" in out and "LOAD PGSQL SERVERS TO RUNTIME" in out, out
    assert "INSERT INTO pgsql_users (username, password, active, use_ssl, default_hostgroup, " \
           "transaction_persistent" in out, out
    assert SCRAM not in out and "'***'" in out
    assert pg_runtime(px) == []
    r = agent.run("--once")
    assert r.returncode == 0, r.stderr + r.stdout
    assert pg_synced(px)


def test_the_pgsql_monitor_rows_decide_with_roles_monitor(consul, px, workdir):
    """A pgsql_replication_hostgroups row over a Patroni entry's hostgroups: with roles = "kv" the
    entry is refused there (the monitor would fight the agent), with roles = "monitor" every member
    goes into the writer hostgroup once and the monitor moves them."""
    px.query("INSERT INTO pgsql_replication_hostgroups (writer_hostgroup, reader_hostgroup, comment) "
             "VALUES (20, 21, 'pgdemo')")
    px.query("LOAD PGSQL SERVERS TO RUNTIME")
    put_cluster(consul)
    a = Agent(consul, [px], workdir, extra=PATRONI)
    try:
        a.start()
        wait_until("the refusal in /readyz", lambda: "pgsql_replication_hostgroups row" in a.http("/readyz")[1])
        assert a.http("/readyz")[0] == 503
        assert pg_runtime(px) == []
    finally:
        a.stop()
    a = Agent(consul, [px], workdir, extra=PATRONI.replace("reader_hostgroup = 21;",
                                                           'reader_hostgroup = 21; roles = "monitor";'))
    try:
        a.start()
        want = [("20", "127.0.0.1", "5441"), ("20", "127.0.0.1", "5442"), ("20", "127.0.0.1", "5443")]
        wait_until("every member in the writer hostgroup", lambda: pg_table(px, "main.pgsql_servers") == want)
        wait_until("ready", a.ready)
    finally:
        a.stop()
        print(a.logs())
