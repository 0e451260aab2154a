"""Conformance of the ProxySQL double's 3.0 mode for the PgSQL tables (tests/fakes/proxysql_admin.py).

1. Transcript replay: every step of tests/data/proxysql-3.0-pre/pgsql-admin-transcript.jsonl, recorded
   from a real ProxySQL 3.0 pre-release (sysown/proxysql v3.0 of 2024-10-15) with a PostgreSQL 15 behind
   hostgroup 10, replayed in order with the comparison of test_proxysql_double.py (one test per step;
   test_pgsql_transcript names the first differing step).  The recorded instance's settings (the pgsql
   interfaces, pgsql-monitor_enabled=false) are given to the double; see the README next to the data.
2. Beyond the recording, from the v3.0 source (lib/ProxySQL_Admin.cpp, Admin_Handler.cpp,
   PgSQL_HostGroups_Manager.cpp, PgSQL_Authentication.cpp): constraints and defaults, the runtime twins,
   checksums moving on LOAD, disk and memory, the pool's purge; and the 2.7 mode refusing all of it as a
   real 2.7.1 does (no such table, near "LOAD": syntax error).

With PROXYSQL_BIN pointing at a ProxySQL 3 binary the same checks run against it (the 2.7 ones skip).
"""

import json
import os
import sys
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(HERE)
for _p in (TESTS, HERE):
    if _p not in sys.path:
        sys.path.insert(0, _p)

import pymysql  # noqa: E402

from fakes.proxysql import ProxySQL, free_port  # noqa: E402
import test_proxysql_double as base  # noqa: E402

Replay, describe = base.Replay, base.describe
instrumented_pymysql = base.instrumented_pymysql     # the fixture: SQLSTATE and EOF status as recorded

TRANSCRIPT = os.path.join(TESTS, "data", "proxysql-3.0-pre", "pgsql-admin-transcript.jsonl")
with open(TRANSCRIPT, encoding="utf-8") as _f:
    STEPS = [json.loads(line) for line in _f if line.strip()]

REAL = bool(os.environ.get("PROXYSQL_BIN"))


@pytest.fixture(scope="module", autouse=True)
def version_3_0():
    """Every double of this module plays 3.0 (the recording is of a 3.0), whatever
    --proxysql-double-version says for the rest of the run."""
    old = os.environ.get("PROXYSQL_DOUBLE_VERSION")
    os.environ["PROXYSQL_DOUBLE_VERSION"] = "3.0"
    yield
    if old is None:
        del os.environ["PROXYSQL_DOUBLE_VERSION"]
    else:
        os.environ["PROXYSQL_DOUBLE_VERSION"] = old


class PgReplay(Replay):
    """The 2.7.1 replay, with the pgsql interfaces the recorded instance was configured with
    replaced by the ones this run chose (env-specific, like admin-mysql_ifaces)."""

    def __init__(self, proxysql, steps, interfaces):
        super().__init__(proxysql, steps)
        self.interfaces = interfaces

    def expected_rows(self, step):
        rows = super().expected_rows(step)
        for r in rows:
            if len(r) == 2 and r[0] in self.interfaces:
                r[1] = self.interfaces[r[0]]
        return rows


def recorded_settings():
    """What the recorded instance's proxysql.cnf set: its pgsql admin and frontend ports (here free
    loopback ports) and the pgsql monitor off."""
    interfaces = {"admin-pgsql_ifaces": "127.0.0.1:%d" % free_port(),
                  "pgsql-interfaces": "127.0.0.1:%d" % free_port()}
    return interfaces, list(interfaces.items()) + [("pgsql-monitor_enabled", "false")]


@pytest.fixture(scope="module")
def pgsql_replay(instrumented_pymysql):
    interfaces, variables = recorded_settings()
    p = ProxySQL(monitor_shun_after=None if REAL else 0, variables=variables)
    p.start()
    r = PgReplay(p, STEPS, interfaces)
    try:
        r.run()
    finally:
        p.close()
    return r


@pytest.mark.parametrize("step", STEPS, ids=lambda s: "%03d-%s" % (s["step"], s["type"]))
def test_pgsql_step(pgsql_replay, step):
    diffs = pgsql_replay.results[step["step"]]
    assert not diffs, describe(step) + "\n  " + "\n  ".join(diffs)


def test_pgsql_transcript(pgsql_replay):
    """The whole recording, with the first differing step spelled out."""
    assert len(STEPS) == 37 and [s["step"] for s in STEPS] == list(range(1, 38))
    failing = [s for s in STEPS if pgsql_replay.results[s["step"]]]
    if failing:
        first = failing[0]
        pytest.fail("%d of %d steps differ; first: %s\n  %s\n  (others: %s)"
                    % (len(failing), len(STEPS), describe(first), "\n  ".join(pgsql_replay.results[first["step"]]),
                       [s["step"] for s in failing[1:]]))


# ---------------------------------------------------------------------------
# Beyond the recording
# ---------------------------------------------------------------------------

@pytest.fixture
def px():
    p = ProxySQL(monitor_shun_after=None if REAL else 0).start()
    try:
        yield p
    finally:
        p.close()


def error_of(p, sql):
    """(code, message) of the error a statement gets, or None when it succeeds."""
    c = p.connect()
    try:
        c.cursor().execute(sql)
        return None
    except pymysql.err.MySQLError as e:
        return e.args[0], e.args[1]
    finally:
        c.close()


def checksums(p):
    return {r[0]: (int(r[1]), r[2]) for r in p.query("SELECT name, version, checksum FROM runtime_checksums_values")}


@pytest.mark.parametrize("sql,message", [
    ("INSERT INTO pgsql_servers (hostgroup_id, hostname) VALUES (-1, 'a')", "CHECK constraint failed: hostgroup_id>=0"),
    ("INSERT INTO pgsql_servers (hostname, weight) VALUES ('a', 10000001)",
     "CHECK constraint failed: weight >= 0 AND weight <=10000000"),
    ("INSERT INTO pgsql_servers (hostname, use_ssl) VALUES ('a', 2)", "CHECK constraint failed: use_ssl IN(0,1)"),
    ("INSERT INTO pgsql_servers (hostname, max_replication_lag) VALUES ('a', 126144001)",
     "CHECK constraint failed: max_replication_lag >= 0 AND max_replication_lag <= 126144000"),
    ("INSERT INTO pgsql_servers (hostgroup_id) VALUES (1)", "NOT NULL constraint failed: pgsql_servers.hostname"),
    ("INSERT INTO pgsql_users (username, backend, frontend) VALUES ('u', 1, 0), ('u', 1, 1)",
     "UNIQUE constraint failed: pgsql_users.username, pgsql_users.backend"),
    ("INSERT INTO pgsql_users (username, backend, frontend) VALUES ('u', 0, 1), ('u', 1, 1)",
     "UNIQUE constraint failed: pgsql_users.username, pgsql_users.frontend"),
    ("INSERT INTO pgsql_users (username, active) VALUES ('u', 2)", "CHECK constraint failed: active IN (0,1)"),
    ("INSERT INTO pgsql_users (username, max_connections) VALUES ('u', -1)",
     "CHECK constraint failed: max_connections >=0"),
    ("INSERT INTO pgsql_replication_hostgroups (writer_hostgroup, reader_hostgroup) VALUES (1, 2), (3, 2)",
     "UNIQUE constraint failed: pgsql_replication_hostgroups.reader_hostgroup"),
    ("INSERT INTO pgsql_replication_hostgroups (writer_hostgroup, reader_hostgroup, check_type) VALUES (1, 2, 'x')",
     "CHECK constraint failed: LOWER(check_type) IN ('read_only','innodb_read_only','super_read_only',"
     "'read_only|innodb_read_only','read_only&innodb_read_only')"),
    ("INSERT INTO pgsql_hostgroup_attributes (hostgroup_id, servers_defaults) VALUES (1, '{x')",
     "CHECK constraint failed: JSON_VALID(servers_defaults) OR servers_defaults = ''"),
    ("INSERT INTO pgsql_hostgroup_attributes (hostgroup_id, throttle_connections_per_sec) VALUES (1, 0)",
     "CHECK constraint failed: throttle_connections_per_sec >= 1 AND throttle_connections_per_sec <= 1000000"),
    ("INSERT INTO runtime_pgsql_servers (hostname, port) VALUES ('a', 65536)",
     "CHECK constraint failed: port >= 0 AND port <= 65535"),
    ("INSERT INTO disk.pgsql_users (username, attributes) VALUES ('u', '{')",
     "CHECK constraint failed: JSON_VALID(attributes) OR attributes = ''"),
])
def test_constraints(px, sql, message):
    """Every pgsql table and its runtime_ and disk. twins refuse bad rows with SQLite's message behind
    'ProxySQL Admin Error: ', error 1045 (the recorded shape; the DDL is ProxySQL_Admin_Tables_Definitions.h)."""
    assert error_of(px, sql) == (1045, "ProxySQL Admin Error: " + message)


def test_defaults(px):
    px.query("INSERT INTO pgsql_servers (hostname) VALUES ('pg1')")
    px.query("INSERT INTO pgsql_users (username) VALUES ('u')")
    px.query("INSERT INTO pgsql_replication_hostgroups (writer_hostgroup, reader_hostgroup) VALUES (1, 2)")
    px.query("INSERT INTO pgsql_hostgroup_attributes (hostgroup_id) VALUES (1)")
    assert px.query("SELECT * FROM pgsql_servers") == [
        ("0", "pg1", "5432", "ONLINE", "1", "0", "1000", "0", "0", "0", "")]
    assert px.query("SELECT * FROM pgsql_users") == [
        ("u", None, "1", "0", "0", "1", "0", "1", "1", "10000", "", "")]
    assert px.query("SELECT * FROM pgsql_replication_hostgroups") == [("1", "2", "read_only", "")]
    assert px.query("SELECT * FROM pgsql_hostgroup_attributes") == [
        ("1", "1000000", "-1", "10", "", "1", "0", "1000000", "", "", "", "")]


def test_runtime_twins(px):
    """runtime_pgsql_users: frontends (backend=0, frontend=1) then backends, inactive rows and the admin
    credentials left out; the replication and attribute tables as loaded; SAVE ... TO MEMORY."""
    px.query("INSERT INTO pgsql_users (username, password, default_hostgroup, backend, frontend) VALUES "
             "('both', 'p1', 10, 1, 1), ('fe', 'p2', 10, 0, 1), ('be', 'p3', 11, 1, 0)")
    px.query("INSERT INTO pgsql_users (username, password, active) VALUES ('off', 'p4', 0)")
    px.query("INSERT INTO pgsql_replication_hostgroups (writer_hostgroup, reader_hostgroup, comment) "
             "VALUES (10, 11, 'pair')")
    px.query("INSERT INTO pgsql_hostgroup_attributes (hostgroup_id, max_num_online_servers) VALUES (10, 3)")
    assert px.query("SELECT COUNT(*) FROM runtime_pgsql_users") == [("0",)]
    px.query("LOAD PGSQL USERS TO RUNTIME")
    assert px.query("SELECT username, password, active, backend, frontend FROM runtime_pgsql_users") == [
        ("both", "p1", "1", "0", "1"), ("fe", "p2", "1", "0", "1"),
        ("both", "p1", "1", "1", "0"), ("be", "p3", "1", "1", "0")]
    assert px.query("SELECT * FROM runtime_pgsql_replication_hostgroups") == []
    px.query("LOAD PGSQL SERVERS TO RUN")
    assert px.query("SELECT * FROM runtime_pgsql_replication_hostgroups") == [("10", "11", "read_only", "pair")]
    assert px.query("SELECT hostgroup_id, max_num_online_servers FROM runtime_pgsql_hostgroup_attributes") == [
        ("10", "3")]
    px.query("SAVE PGSQL USERS TO MEM")
    assert px.query("SELECT username, active, backend, frontend FROM pgsql_users ORDER BY username, backend") == [
        ("be", "1", "1", "0"), ("both", "1", "0", "1"), ("both", "1", "1", "0"), ("fe", "1", "0", "1"),
        ("off", "0", "1", "1")]
    # the MySQL side is another module
    assert px.query("SELECT COUNT(*) FROM runtime_mysql_users") == [("0",)]


def test_checksums_move_on_load(px):
    """A LOAD bumps its module's version and epoch; the checksum changes with the runtime content only
    (pgsql_servers: SpookyHash of the runtime servers, PgSQL_HostGroups_Manager::commit; pgsql_users:
    PgSQL_Authentication::get_runtime_checksum).  pgsql_variables does not move in this build."""
    start = checksums(px)
    assert start["pgsql_variables"] == (0, "")
    assert start["pgsql_servers"][1] == start["pgsql_users"][1] == "0x0000000000000000"
    px.query("LOAD PGSQL SERVERS TO RUNTIME")
    same = checksums(px)
    assert same["pgsql_servers"] == (start["pgsql_servers"][0] + 1, start["pgsql_servers"][1])
    px.query("INSERT INTO pgsql_servers (hostgroup_id, hostname, port) VALUES (10, '127.0.0.1', 45432)")
    px.query("LOAD PGSQL SERVERS FROM MEMORY")
    one = checksums(px)
    assert one["pgsql_servers"][0] == same["pgsql_servers"][0] + 1
    assert one["pgsql_servers"][1] != same["pgsql_servers"][1]
    # the same runtime content gives the same checksum again
    px.query("UPDATE pgsql_servers SET weight=5")
    px.query("LOAD PGSQL SERVERS TO RUNTIME")
    assert checksums(px)["pgsql_servers"][1] != one["pgsql_servers"][1]
    px.query("UPDATE pgsql_servers SET weight=1")
    px.query("LOAD PGSQL SERVERS TO RUNTIME")
    assert checksums(px)["pgsql_servers"][1] == one["pgsql_servers"][1]
    px.query("INSERT INTO pgsql_users (username, password, default_hostgroup) VALUES ('app', 'apppw', 10)")
    px.query("LOAD PGSQL USERS TO RUNTIME")
    px.query("LOAD PGSQL VARIABLES TO RUNTIME")
    end = checksums(px)
    assert end["pgsql_users"][0] == start["pgsql_users"][0] + 1
    assert end["pgsql_users"][1] not in ("", "0x0000000000000000")
    assert end["pgsql_variables"] == (0, "")
    for name in ("mysql_servers", "mysql_servers_v2", "mysql_users", "mysql_variables", "admin_variables"):
        assert end[name] == start[name], name
    epoch = int(px.query("SELECT epoch FROM runtime_checksums_values WHERE name='pgsql_users'")[0][0])
    assert abs(epoch - time.time()) < 60


def test_global_checksum_follows_pgsql_servers(px):
    """generate_global_checksum hashes pgsql_servers_v2 too: every LOAD PGSQL SERVERS changes it."""
    def global_checksum():
        return px.query("SELECT GLOBAL_CHECKSUM()")[0][0]
    before = global_checksum()
    px.query("LOAD PGSQL SERVERS TO RUNTIME")
    assert global_checksum() != before


def test_disk_memory_and_restart(px):
    px.query("INSERT INTO pgsql_servers (hostgroup_id, hostname) VALUES (10, 'pg1')")
    px.query("INSERT INTO pgsql_users (username, password) VALUES ('app', 'pw')")
    px.query("SAVE PGSQL SERVERS FROM MEMORY")
    px.query("SAVE PGSQL USERS TO DISK")
    assert px.query("SELECT hostname FROM disk.pgsql_servers") == [("pg1",)]
    px.query("DELETE FROM pgsql_servers")
    px.query("DELETE FROM pgsql_users")
    px.query("LOAD PGSQL SERVERS TO MEM")
    px.query("LOAD PGSQL USERS FROM DISK")
    assert px.query("SELECT hostname FROM pgsql_servers") == [("pg1",)]
    assert px.query("SELECT username FROM pgsql_users") == [("app",)]
    px.query("UPDATE global_variables SET variable_value='false' WHERE variable_name='pgsql-monitor_enabled'")
    px.query("SAVE PGSQL VARIABLES TO DISK")
    assert px.query("SELECT variable_value FROM disk.global_variables "
                    "WHERE variable_name='pgsql-monitor_enabled'") == [("false",)]
    # a restart loads disk into memory and runtime
    px.restart()
    assert px.query("SELECT hostgroup_id, hostname, port, status FROM runtime_pgsql_servers") == [
        ("10", "pg1", "5432", "ONLINE")]
    assert px.query("SELECT username, backend, frontend FROM runtime_pgsql_users") == [
        ("app", "0", "1"), ("app", "1", "0")]
    assert px.query("SELECT variable_value FROM runtime_global_variables "
                    "WHERE variable_name='pgsql-monitor_enabled'") == [("false",)]


@pytest.mark.skipif(REAL, reason="the double's order of purge (PROXYSQL_BIN is set)")
def test_pool_keeps_a_removed_server_until_the_purge(px):
    """PgSQL_HostGroups_Manager::commit marks a removed server OFFLINE_HARD and purges only at the start
    of the next commit or in dump_table_pgsql (a read of runtime_pgsql_servers), as for MySQL."""
    px.query("INSERT INTO pgsql_servers (hostgroup_id, hostname, port) VALUES (10, '127.0.0.1', 45432), "
             "(11, '127.0.0.1', 45432)")
    px.query("LOAD PGSQL SERVERS TO RUNTIME")
    assert px.query("SELECT hostgroup, srv_host, srv_port, status FROM stats_pgsql_connection_pool") == [
        ("10", "127.0.0.1", "45432", "ONLINE"), ("11", "127.0.0.1", "45432", "ONLINE")]
    px.query("DELETE FROM pgsql_servers WHERE hostgroup_id=11")
    px.query("LOAD PGSQL SERVERS TO RUNTIME")
    assert px.query("SELECT hostgroup, status FROM stats_pgsql_connection_pool") == [
        ("10", "ONLINE"), ("11", "OFFLINE_HARD")]
    px.query("SELECT * FROM runtime_pgsql_servers")
    assert px.query("SELECT hostgroup, status FROM stats_pgsql_connection_pool") == [("10", "ONLINE")]
    assert px.query("SELECT COUNT(*) FROM stats_mysql_connection_pool") == [("0",)]


def test_no_pgsql_checksum_commands(px):
    """v3.0's Admin_Handler.cpp has CHECKSUM commands for the MySQL tables only."""
    for sql in ("CHECKSUM MEMORY PGSQL SERVERS", "CHECKSUM DISK PGSQL USERS", "CHECKSUM PGSQL SERVERS"):
        assert error_of(px, sql) == (1045, 'ProxySQL Admin Error: near "CHECKSUM": syntax error'), sql


@pytest.mark.skipif(REAL, reason="a real binary is the version it is (PROXYSQL_BIN is set)")
def test_2_7_refuses_the_pgsql_tables():
    """A 2.7.1 has no PgSQL module: the tables do not exist (the recorded 'no such table' shape, 2.7.1
    steps 387-388) and LOAD/SAVE PGSQL are not commands (near "LOAD": syntax error, steps 154-161)."""
    p = ProxySQL(monitor_shun_after=0, extra_args=["--proxysql-version", "2.7"]).start()
    try:
        for table in ("pgsql_servers", "pgsql_users", "pgsql_replication_hostgroups", "pgsql_hostgroup_attributes",
                      "runtime_pgsql_servers", "runtime_pgsql_users", "disk.pgsql_servers", "disk.pgsql_users",
                      "stats_pgsql_connection_pool", "stats.stats_pgsql_connection_pool"):
            assert error_of(p, "SELECT * FROM %s" % table) == (1045, "ProxySQL Admin Error: no such table: %s"
                                                                % table), table
        assert error_of(p, "INSERT INTO pgsql_servers (hostname) VALUES ('a')") == (
            1045, "ProxySQL Admin Error: no such table: pgsql_servers")
        for verb in ("LOAD", "SAVE"):
            for what in ("PGSQL SERVERS", "PGSQL USERS", "PGSQL VARIABLES"):
                for where in ("TO RUNTIME", "FROM RUNTIME", "TO DISK", "FROM DISK", "TO MEMORY", "FROM MEMORY"):
                    sql = "%s %s %s" % (verb, what, where)
                    assert error_of(p, sql) == (1045, 'ProxySQL Admin Error: near "%s": syntax error' % verb), sql
        assert not [r for r in p.query("SELECT name FROM runtime_checksums_values") if "pgsql" in r[0]]
        assert not p.query("SELECT * FROM global_variables WHERE variable_name LIKE '%pgsql%'")
        assert not [r for r in p.query("SHOW TABLES FROM stats") if "pgsql" in r[0]]
    finally:
        p.close()
