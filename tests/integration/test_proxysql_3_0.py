"""The ProxySQL double's 3.0 mode (--proxysql-version 3.0, or PROXYSQL_DOUBLE_VERSION=3.0 /
pytest --proxysql-double-version 3.0 for a whole run): what ProxySQL 3.0's admin interface adds,
from its source (sysown/proxysql v3.0: ProxySQL_Admin_Tables_Definitions.h,
dump_checksums_values_table, generate_global_checksum, Admin_Handler.cpp), and the 2.7 mode left
as recorded. Of 3.0 only the pgsql tables were recorded (a pre-release, replayed by
test_proxysql_double_pgsql.py); with PROXYSQL_BIN pointing at a 3.0 binary the same checks run
against it (those needing --hide-pgsql-tables are skipped).
"""

import socket
import struct

import pytest

from fakes.proxysql import ProxySQL

PGSQL_TABLES = ("pgsql_servers", "pgsql_users", "pgsql_replication_hostgroups", "pgsql_hostgroup_attributes",
                "pgsql_query_rules", "pgsql_query_rules_fast_routing")


def double(version, *extra):
    return ProxySQL(monitor_shun_after=0, extra_args=["--proxysql-version", version] + list(extra)).start()


def names(p, sql):
    return [r[0] for r in p.query(sql)]


def test_3_0_tables_checksums_and_variables():
    p = double("3.0")
    try:
        if p.is_fake:
            assert p.query("SELECT @@version")[0][0].startswith("3.0.")
        tables = names(p, "SELECT name FROM sqlite_master WHERE type='table'")
        for t in PGSQL_TABLES:
            assert t in tables and "runtime_" + t in tables, t
        rows = names(p, "SELECT name FROM runtime_checksums_values")
        assert {"admin_variables", "mysql_query_rules", "mysql_servers", "mysql_users", "mysql_variables",
                "proxysql_servers", "mysql_servers_v2", "pgsql_query_rules", "pgsql_servers", "pgsql_users",
                "pgsql_variables"} <= set(rows), rows
        variables = names(p, "SELECT variable_name FROM global_variables WHERE variable_name LIKE 'admin-cluster_pgsql%'")
        for m in ("query_rules", "servers", "users", "variables"):
            assert "admin-cluster_pgsql_%s_diffs_before_sync" % m in variables
        # LOAD PGSQL SERVERS: the pgsql_servers row of runtime_checksums_values moves, mysql_servers does not
        before = dict((r[0], r[1]) for r in p.query("SELECT name, version FROM runtime_checksums_values"))
        p.query("INSERT INTO pgsql_servers (hostgroup_id, hostname, port) VALUES (1, 'pg1', 5432)")
        p.query("LOAD PGSQL SERVERS TO RUNTIME")
        after = dict((r[0], r[1]) for r in p.query("SELECT name, version FROM runtime_checksums_values"))
        assert int(after["pgsql_servers"]) == int(before["pgsql_servers"]) + 1
        assert after["mysql_servers"] == before["mysql_servers"]
        assert p.query("SELECT hostname FROM runtime_pgsql_servers") == [("pg1",)]
        assert [r[0] for r in p.query("SELECT Variable_Name FROM stats_pgsql_global "
                                      "WHERE Variable_Name='Client_Connections_connected'")] == \
            ["Client_Connections_connected"]
    finally:
        p.close()


def test_2_7_mode_has_no_pgsql():
    p = double("2.7")
    try:
        assert not [t for t in names(p, "SELECT name FROM sqlite_master WHERE type='table'") if "pgsql" in t]
        assert len(p.query("SELECT name FROM runtime_checksums_values")) == 7
    finally:
        p.close()


def test_hidden_pgsql_tables_are_still_there():
    """Newer 3.0 builds leave the pgsql tables out of SHOW TABLES: they still answer queries."""
    p = double("3.0", "--hide-pgsql-tables")
    if not p.is_fake:
        p.close()
        pytest.skip("a real ProxySQL shows what its build shows")
    try:
        assert not [t for t in names(p, "SHOW TABLES") if "pgsql" in t]
        assert p.query("SELECT COUNT(*) FROM pgsql_servers") == [("0",)]
    finally:
        p.close()


def raw_query(sock, sql):
    sock.sendall(struct.pack("<I", len(sql) + 1)[:3] + b"\x00" + b"\x03" + sql.encode())


def read_packet(sock):
    head = b""
    while len(head) < 4:
        head += sock.recv(4 - len(head))
    n = head[0] | head[1] << 8 | head[2] << 16
    body = b""
    while len(body) < n:
        body += sock.recv(n - len(body))
    return head[3], body


@pytest.mark.parametrize("version,answers", [("2.7", 1), ("3.0", 2)])
def test_pause_answers_once_per_module(version, answers):
    """PROXYSQL PAUSE on 3.0 answers for the MySQL module, then for the PgSQL one (two packets, each
    with sequence id 1), so a client reads the second as the answer to its next command; 2.7 answers
    once. A second PAUSE: one ERR per module."""
    import pymysql
    p = double(version)
    try:
        c = p.connect()
        sock = c._sock
        try:
            raw_query(sock, "PROXYSQL PAUSE")
            got = [read_packet(sock)]
            sock.settimeout(0.5)
            try:
                got.append(read_packet(sock))
            except socket.timeout:
                pass
            assert [(seq, body[:1]) for seq, body in got] == [(1, b"\x00")] * answers, got
            raw_query(sock, "PROXYSQL PAUSE")
            got = [read_packet(sock)]
            try:
                got.append(read_packet(sock))
            except socket.timeout:
                pass
            assert [body[:1] for _, body in got] == [b"\xff"] * answers, got
            assert b"already paused" in got[0][1]
        finally:
            try:
                c.close()
            except pymysql.err.Error:
                pass
    finally:
        p.close()
