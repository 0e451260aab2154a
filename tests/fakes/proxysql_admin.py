#!/usr/bin/env python3
"""ProxySQL 2.7.1 admin interface (port 6032) test double.

A small, faithful stand-in for a real ProxySQL admin interface, built from the
recordings in tests/data/proxysql-2.7.1/ (replayed by
tests/integration/test_proxysql_double.py) and from ProxySQL's source.  It speaks
the MySQL client/server protocol (enough for MariaDB Connector/C and PyMySQL),
keeps its tables in SQLite with ProxySQL's exact DDL and reproduces the admin
semantics a sync agent relies on: LOAD/SAVE between disk, memory and runtime,
runtime_* tables regenerated on read, checksums (bit-exact SpookyHash, as the
real one), restart from disk, credentials (and their clash with frontend
mysql_users), errors, a ping and a read_only monitor, ProxySQL Cluster
between doubles, and a MySQL port with PROXYSQL PAUSE/RESUME.  Test hooks that a real ProxySQL lacks live on a separate HTTP
control port.

    /usr/bin/python3 tests/fakes/proxysql_admin.py --listen 127.0.0.1:0 \\
        --datadir DIR [--initial] [--admin-credentials admin:admin] \\
        [--stats-credentials ...] [--cluster-username U] [--cluster-password P] \\
        [--monitor-username U] [--monitor-password P] [--variable NAME=VALUE] \\
        [--proxysql-server HOST:PORT[:WEIGHT[:COMMENT]]] \\
        [--control 127.0.0.1:0] [--port-file FILE] [--monitor-shun-after SECONDS] \\
        [--mysql-listen 127.0.0.1:0]

docs/proxysql-double.md describes what is implemented and the control API.
Only the standard library is used (sqlite is driven through ctypes so that a
query behaves exactly like ProxySQL's sqlite3_prepare_v2 + step loop).

Sections:
  1. constants          6. MySQL protocol (server side; a small client for peers and backends)
  2. SpookyHash, checksums   7. control HTTP API (test hooks)
  3. SQLite via ctypes  8. monitors (SHUNs servers that refuse TCP; read_only moves)
  4. table definitions  9. ProxySQL Cluster (peers' checksums, pulls)
  5. the admin module   10. the server and the command line
     (state, runtime models, query handling)
"""

import argparse
import contextlib
import ctypes
import ctypes.util
import hashlib
import http.server
import ipaddress
import json
import os
import re
import secrets
import signal
import socket
import ssl
import struct
import sys
import threading
import time
import urllib.parse

# ---------------------------------------------------------------------------
# 1. Constants (all recorded from ProxySQL 2.7.1, see SUMMARY.md)
# ---------------------------------------------------------------------------

PROXYSQL_VERSION = "2.7.1-0-g2726c27"
SERVER_VERSION = "8.0.11"               # mysql-server_version, sent in the handshake
SERVER_CAPABILITIES = 0x808FFA2F        # no DEPRECATE_EOF, no PLUGIN_AUTH_LENENC
HANDSHAKE_CHARSET = 33                  # utf8_general_ci
HANDSHAKE_STATUS = 0x0002               # AUTOCOMMIT
STATUS = 0x0202                         # AUTOCOMMIT | NO_BACKSLASH_ESCAPES, every OK/EOF
GLOBAL_CHECKSUM_STATUS = 0x0200         # the one exception (SELECT GLOBAL_CHECKSUM())

CLIENT_CONNECT_WITH_DB = 0x00000008
CLIENT_COMPRESS = 0x00000020
CLIENT_PROTOCOL_41 = 0x00000200
CLIENT_SSL = 0x00000800
CLIENT_SECURE_CONNECTION = 0x00008000
CLIENT_PLUGIN_AUTH = 0x00080000
CLIENT_CONNECT_ATTRS = 0x00100000
CLIENT_PLUGIN_AUTH_LENENC = 0x00200000

COM_QUIT, COM_INIT_DB, COM_QUERY, COM_FIELD_LIST = 0x01, 0x02, 0x03, 0x04
COM_PROCESS_INFO, COM_PROCESS_KILL, COM_DEBUG, COM_PING = 0x0A, 0x0C, 0x0D, 0x0E
COM_STMT_PREPARE, COM_RESET_CONNECTION = 0x16, 0x1F

TYPE_LONGLONG, TYPE_VAR_STRING = 8, 253
NATIVE_PLUGIN = b"mysql_native_password"

ADMIN_HOSTGROUP, STATS_HOSTGROUP = -2, -3  # default_hostgroup of admin / stats credentials

# server status codes of ProxySQL's MySrvC
ONLINE, SHUNNED, OFFLINE_SOFT, OFFLINE_HARD, SHUNNED_REPLICATION_LAG = 0, 1, 2, 3, 4
STATUS_TEXT = {ONLINE: "ONLINE", SHUNNED: "SHUNNED", OFFLINE_SOFT: "OFFLINE_SOFT",
               OFFLINE_HARD: "OFFLINE_HARD", SHUNNED_REPLICATION_LAG: "SHUNNED"}
STATUS_CODE = {"ONLINE": ONLINE, "SHUNNED": SHUNNED, "OFFLINE_SOFT": OFFLINE_SOFT,
               "OFFLINE_HARD": OFFLINE_HARD}

# runtime_checksums_values rows, in table order
CHECKSUM_MODULES = ("admin_variables", "mysql_query_rules", "mysql_servers", "mysql_users",
                    "mysql_variables", "proxysql_servers", "mysql_servers_v2")
# the order GLOBAL_CHECKSUM() hashes them in (ProxySQL_GlobalVariables::generate_global_checksum)
GLOBAL_CHECKSUM_ORDER = ("admin_variables", "mysql_query_rules", "mysql_servers",
                         "mysql_servers_v2", "mysql_users", "mysql_variables", "proxysql_servers")
ZERO_CHECKSUM = "0x0000000000000000"

# Admin variables in ProxySQL's own (code) order with their defaults (step 340).
# admin_credentials and mysql_ifaces come from the config (the command line here);
# ProxySQL writes them with INSERT OR REPLACE, which is why they end up last.
ADMIN_VARIABLES = [
    ("admin-admin_credentials", "admin:admin"),
    ("admin-stats_credentials", "stats:stats"),
    ("admin-stats_mysql_connections", "60"),
    ("admin-stats_mysql_connection_pool", "60"),
    ("admin-stats_mysql_query_cache", "60"),
    ("admin-stats_mysql_query_digest_to_disk", "0"),
    ("admin-stats_system_cpu", "60"),
    ("admin-stats_system_memory", "60"),
    ("admin-mysql_ifaces", "127.0.0.1:6032"),
    ("admin-telnet_admin_ifaces", "(null)"),
    ("admin-telnet_stats_ifaces", "(null)"),
    ("admin-refresh_interval", "2000"),
    ("admin-read_only", "false"),
    ("admin-vacuum_stats", "true"),
    ("admin-version", PROXYSQL_VERSION),
    ("admin-cluster_username", ""),
    ("admin-cluster_password", ""),
    ("admin-cluster_check_interval_ms", "1000"),
    ("admin-cluster_check_status_frequency", "10"),
    ("admin-cluster_mysql_query_rules_diffs_before_sync", "3"),
    ("admin-cluster_mysql_servers_diffs_before_sync", "3"),
    ("admin-cluster_mysql_users_diffs_before_sync", "3"),
    ("admin-cluster_proxysql_servers_diffs_before_sync", "3"),
    ("admin-cluster_mysql_variables_diffs_before_sync", "3"),
    ("admin-cluster_admin_variables_diffs_before_sync", "3"),
    ("admin-cluster_ldap_variables_diffs_before_sync", "3"),
    ("admin-cluster_mysql_query_rules_save_to_disk", "true"),
    ("admin-cluster_mysql_servers_save_to_disk", "true"),
    ("admin-cluster_mysql_users_save_to_disk", "true"),
    ("admin-cluster_proxysql_servers_save_to_disk", "true"),
    ("admin-cluster_mysql_variables_save_to_disk", "true"),
    ("admin-cluster_admin_variables_save_to_disk", "true"),
    ("admin-cluster_ldap_variables_save_to_disk", "true"),
    ("admin-cluster_mysql_servers_sync_algorithm", "1"),
    ("admin-checksum_mysql_query_rules", "true"),
    ("admin-checksum_mysql_servers", "true"),
    ("admin-checksum_mysql_users", "true"),
    ("admin-checksum_mysql_variables", "true"),
    ("admin-checksum_admin_variables", "true"),
    ("admin-checksum_ldap_variables", "true"),
    ("admin-restapi_enabled", "false"),
    ("admin-restapi_port", "6070"),
    ("admin-web_enabled", "false"),
    ("admin-web_port", "6080"),
    ("admin-web_verbosity", "0"),
    ("admin-prometheus_memory_metrics_interval", "61"),
    ("admin-coredump_generation_interval_ms", "30000"),
    ("admin-coredump_generation_threshold", "10"),
    ("admin-ssl_keylog_file", ""),
]
# not part of the admin_variables checksum (CLUSTER_SYNC_INTERFACES_ADMIN)
ADMIN_CHECKSUM_EXCLUDED = ("admin-mysql_ifaces", "admin-restapi_port", "admin-telnet_admin_ifaces",
                           "admin-telnet_stats_ifaces", "admin-web_port")

# Only the mysql-* variables seen in the recording plus a few that clients read
# (@@max_allowed_packet) or that the monitor emulation uses.  A real ProxySQL
# has ~200; the others do not exist here (SET on them says "Unknown").
MYSQL_VARIABLES = [
    ("mysql-server_version", SERVER_VERSION),          # recorded (13)
    ("mysql-threads", "2"),                            # recorded (342)
    ("mysql-interfaces", "127.0.0.1:6033"),            # recorded (342)
    ("mysql-monitor_enabled", "true"),                 # recorded (342)
    ("mysql-monitor_username", "monitor"),             # recorded (342)
    ("mysql-monitor_password", "monitor"),
    ("mysql-monitor_connect_interval", "120000"),      # recorded (342)
    ("mysql-monitor_ping_interval", "8000"),           # recorded (342)
    ("mysql-monitor_ping_max_failures", "3"),          # recorded (342)
    ("mysql-monitor_ping_timeout", "1000"),
    ("mysql-monitor_connect_timeout", "600"),
    ("mysql-monitor_read_only_interval", "1000"),
    ("mysql-monitor_read_only_timeout", "800"),
    ("mysql-monitor_read_only_max_timeout_count", "3"),
    ("mysql-monitor_writer_is_also_reader", "true"),   # recorded (agent-facts 83)
    ("mysql-monitor_galera_healthcheck_interval", "5000"),
    ("mysql-monitor_galera_healthcheck_timeout", "800"),
    ("mysql-default_authentication_plugin", "mysql_native_password"),
    ("mysql-max_allowed_packet", "67108864"),
    ("mysql-shun_on_failures", "5"),
    ("mysql-shun_recovery_time_sec", "10"),
]
# The real mysql_variables checksum covers all ~200 variables, which this double
# does not carry; for the default set it reports the recorded value (34), for any
# other content a SpookyHash of the variables it has (changes exactly with content).
MYSQL_VARIABLES_DEFAULT_CHECKSUM = "0x8E2C8317F3FD6A21"
MYSQL_CHECKSUM_EXCLUDED = ("mysql-threads", "mysql-interfaces")
# LOAD|SAVE <module> on global_variables: the prefix of the module's rows (3.0 adds PGSQL VARIABLES)
VARIABLE_MODULES = {"ADMIN VARIABLES": "admin-", "MYSQL VARIABLES": "mysql-"}

# ---------------------------------------------------------------------------
# 2. SpookyHash V2 (Bob Jenkins, public domain) and ProxySQL's checksum formats
# ---------------------------------------------------------------------------

_M64 = 0xFFFFFFFFFFFFFFFF
_SC_CONST = 0xDEADBEEFDEADBEEF
_MIX_ROT = (11, 32, 43, 31, 17, 28, 39, 57, 55, 54, 22, 46)
_END_ROT = (44, 15, 34, 21, 38, 33, 10, 13, 38, 53, 42, 54)


def _rot(x, k):
    return ((x << k) | (x >> (64 - k))) & _M64


def _short_mix(h0, h1, h2, h3):
    h = [h0, h1, h2, h3]
    # h[a] = rot(h[a], r); h[a] += h[b]; h[c] ^= h[a]  -- the twelve lines of ShortMix
    for i, r in enumerate((50, 52, 30, 41, 54, 48, 38, 37, 62, 34, 5, 36)):
        a, b, c = (2 + i) % 4, (3 + i) % 4, i % 4
        h[a] = (_rot(h[a], r) + h[b]) & _M64
        h[c] ^= h[a]
    return tuple(h)


def _short_end(h0, h1, h2, h3):
    h = [h0, h1, h2, h3]
    # h[a] ^= h[b]; h[b] = rot(h[b], r); h[a] += h[b]  -- the eleven lines of ShortEnd
    for i, r in enumerate((15, 52, 26, 51, 28, 9, 47, 54, 32, 25, 63)):
        a, b = (3 + i) % 4, (2 + i) % 4
        h[a] ^= h[b]
        h[b] = _rot(h[b], r)
        h[a] = (h[a] + h[b]) & _M64
    return tuple(h)


def _spooky_short(msg, seed1, seed2):
    n = len(msg)
    a, b, c, d = seed1, seed2, _SC_CONST, _SC_CONST
    p = 0
    if n > 15:
        for _ in range(n // 32):
            w = struct.unpack_from("<4Q", msg, p)
            c = (c + w[0]) & _M64
            d = (d + w[1]) & _M64
            a, b, c, d = _short_mix(a, b, c, d)
            a = (a + w[2]) & _M64
            b = (b + w[3]) & _M64
            p += 32
        if n % 32 >= 16:
            w = struct.unpack_from("<2Q", msg, p)
            c = (c + w[0]) & _M64
            d = (d + w[1]) & _M64
            a, b, c, d = _short_mix(a, b, c, d)
            p += 16
    rem = n - p
    d = (d + ((n & 0xFF) << 56)) & _M64
    if rem == 0:
        c = (c + _SC_CONST) & _M64
        d = (d + _SC_CONST) & _M64
    else:
        lo, hi = struct.unpack("<2Q", msg[p:] + b"\0" * (16 - rem))
        c = (c + lo) & _M64
        if rem > 8:
            d = (d + hi) & _M64
    a, b, c, d = _short_end(a, b, c, d)
    return a, b


def _spooky_mix(w, h):
    for i in range(12):
        h[i] = (h[i] + w[i]) & _M64
        h[(i + 2) % 12] ^= h[(i + 10) % 12]
        h[(i + 11) % 12] ^= h[i]
        h[i] = _rot(h[i], _MIX_ROT[i])
        h[(i + 11) % 12] = (h[(i + 11) % 12] + h[(i + 1) % 12]) & _M64


def _spooky_end_partial(h):
    for i in range(12):
        h[(i + 11) % 12] = (h[(i + 11) % 12] + h[(i + 1) % 12]) & _M64
        h[(i + 2) % 12] ^= h[(i + 11) % 12]
        h[(i + 1) % 12] = _rot(h[(i + 1) % 12], _END_ROT[i])


def spooky128(msg, seed1, seed2):
    """SpookyHash::Hash128; Init+Update(a)+Update(b)+Final equals spooky128(a+b)."""
    n = len(msg)
    if n < 192:
        return _spooky_short(msg, seed1, seed2)
    h = [seed1, seed2, _SC_CONST] * 4
    blocks = n // 96
    for i in range(blocks):
        _spooky_mix(struct.unpack_from("<12Q", msg, i * 96), h)
    rem = n - blocks * 96
    buf = bytearray(msg[blocks * 96:] + b"\0" * (96 - rem))
    buf[95] = rem
    w = struct.unpack("<12Q", bytes(buf))
    for i in range(12):
        h[i] = (h[i] + w[i]) & _M64
    for _ in range(3):
        _spooky_end_partial(h)
    return h[0], h[1]


def _as_bytes(v):
    if isinstance(v, bytes):
        return v
    if isinstance(v, str):
        return v.encode("utf-8", "surrogateescape")
    return str(v).encode()


def servers_v2_checksum(results):
    """compute_servers_tables_raw_checksum: SpookyHash(19,3) over the non-zero raw checksums of
    mysql_servers_v2 and the hostgroup tables, in CLUSTER_QUERY order."""
    parts = [struct.pack("<Q", h) for h in (raw_checksum(r) for r in results) if h]
    return spooky128(b"".join(parts), 19, 3)[0] if parts else 0


def raw_checksum(rows):
    """SQLite3_result::raw_checksum: SpookyHash(19,3) over every non-NULL field."""
    if not rows:
        return 0
    data = b"".join(_as_bytes(f) for r in rows for f in r if f is not None)
    return spooky128(data, 19, 3)[0]


def checksum_text(h):
    """SQLite3_result::checksum(): 0x + low 32 bits + high 32 bits, not zero-padded."""
    return "0x%X%X" % (h & 0xFFFFFFFF, h >> 32)


def runtime_checksum_text(h):
    """ProxySQL_Checksum_Value::set_checksum(): the same, right-padded with '0' to 16 digits."""
    s = checksum_text(h)
    return s + "0" * (18 - len(s)) if len(s) < 18 else s


def c_atoi(v):
    """C atoi() of a text value (ProxySQL reads every column as text)."""
    if v is None:
        return 0
    if isinstance(v, int):
        return v
    m = re.match(rb"\s*([+-]?\d+)", _as_bytes(v))
    return int(m.group(1)) if m else 0


def _text(v):
    if v is None:
        return None
    return v.decode("utf-8", "surrogateescape") if isinstance(v, bytes) else str(v)


def sql_literal(v):
    if v is None:
        return "NULL"
    if isinstance(v, int):
        return str(v)
    return "'" + _text(v).replace("'", "''") + "'"


# ---------------------------------------------------------------------------
# 3. SQLite through ctypes: sqlite3_prepare_v2 + step, exactly like ProxySQL's
#    SQLite3DB::execute_statement (the prepare tail is ignored, so only the
#    first statement of a multi-statement query runs; an empty statement gives
#    the error text "not an error"; every value is sqlite3_column_text).
# ---------------------------------------------------------------------------

SQLITE_OK, SQLITE_ROW, SQLITE_DONE, SQLITE_NULL = 0, 100, 101, 5
SQLITE_OPEN_READWRITE, SQLITE_OPEN_CREATE = 0x02, 0x04
SQLITE_OPEN_URI, SQLITE_OPEN_FULLMUTEX = 0x40, 0x10000

_sq = ctypes.CDLL(ctypes.util.find_library("sqlite3") or "libsqlite3.so.0")
_vp, _cp, _int = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int
for _name, _res, _args in (
        ("sqlite3_open_v2", _int, [_cp, ctypes.POINTER(_vp), _int, _cp]),
        ("sqlite3_close_v2", _int, [_vp]),
        ("sqlite3_prepare_v2", _int, [_vp, _cp, _int, ctypes.POINTER(_vp), ctypes.POINTER(_cp)]),
        ("sqlite3_step", _int, [_vp]),
        ("sqlite3_finalize", _int, [_vp]),
        ("sqlite3_column_count", _int, [_vp]),
        ("sqlite3_column_name", _cp, [_vp, _int]),
        ("sqlite3_column_type", _int, [_vp, _int]),
        ("sqlite3_column_text", _vp, [_vp, _int]),
        ("sqlite3_column_bytes", _int, [_vp, _int]),
        ("sqlite3_errmsg", _cp, [_vp]),
        ("sqlite3_changes", _int, [_vp]),
        ("sqlite3_get_autocommit", _int, [_vp]),
        ("sqlite3_busy_timeout", _int, [_vp, _int])):
    _fn = getattr(_sq, _name)
    _fn.restype, _fn.argtypes = _res, _args


class SQLiteError(Exception):
    pass


class QueryResult:
    """columns is None for a statement without a result set (then affected is used)."""

    def __init__(self, columns=None, rows=None, affected=0, error=None):
        self.columns, self.rows, self.affected, self.error = columns, rows or [], affected, error


class SQLiteDB:
    def __init__(self, filename):
        self.db = _vp()
        rc = _sq.sqlite3_open_v2(filename.encode(), ctypes.byref(self.db),
                                 SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_URI
                                 | SQLITE_OPEN_FULLMUTEX, None)
        if rc != SQLITE_OK:
            raise SQLiteError("cannot open %s: %s" % (filename, self.errmsg()))
        _sq.sqlite3_busy_timeout(self.db, 5000)

    def errmsg(self):
        return (_sq.sqlite3_errmsg(self.db) or b"").decode("utf-8", "replace")

    def run(self, sql):
        """Run the first statement of sql (str or bytes) and return a QueryResult."""
        if isinstance(sql, str):
            sql = sql.encode("utf-8", "surrogateescape")
        stmt = _vp()
        rc = _sq.sqlite3_prepare_v2(self.db, sql, -1, ctypes.byref(stmt), None)
        if rc != SQLITE_OK:
            return QueryResult(error=self.errmsg())
        if not stmt:                        # only whitespace or comments
            return QueryResult(error=self.errmsg())
        try:
            ncol = _sq.sqlite3_column_count(stmt)
            if ncol == 0:
                rc = _sq.sqlite3_step(stmt)
                if rc not in (SQLITE_DONE, SQLITE_ROW):
                    return QueryResult(error=self.errmsg())
                return QueryResult(affected=_sq.sqlite3_changes(self.db))
            cols = [_sq.sqlite3_column_name(stmt, i) or b"" for i in range(ncol)]
            rows = []
            # like ProxySQL's SQLite3_result(stmt): rows until the step stops
            while _sq.sqlite3_step(stmt) == SQLITE_ROW:
                row = []
                for i in range(ncol):
                    if _sq.sqlite3_column_type(stmt, i) == SQLITE_NULL:
                        row.append(None)
                    else:
                        p = _sq.sqlite3_column_text(stmt, i)
                        row.append(ctypes.string_at(p, _sq.sqlite3_column_bytes(stmt, i)))
                rows.append(tuple(row))
            return QueryResult(columns=cols, rows=rows)
        finally:
            _sq.sqlite3_finalize(stmt)

    def exec(self, sql):
        """Internal statement; raises on error."""
        r = self.run(sql)
        if r.error is not None:
            raise SQLiteError("%s -- in: %s" % (r.error, sql[:300]))
        return r

    def rows(self, sql):
        return self.exec(sql).rows

    @contextlib.contextmanager
    def transaction(self):
        """Group internal writes (a kill cannot leave the disk database half written)."""
        if not _sq.sqlite3_get_autocommit(self.db):      # already inside one (e.g. a SAVEPOINT)
            yield
            return
        self.exec("BEGIN")
        try:
            yield
        except BaseException:
            self.run("ROLLBACK")
            raise
        self.exec("COMMIT")

    def close(self):
        _sq.sqlite3_close_v2(self.db)


# ---------------------------------------------------------------------------
# 4. Table definitions: ProxySQL's DDL, byte-exact for every table the recording
#    shows with SHOW CREATE TABLE (SHOW CREATE turns " , " into ",\n    ").
#    The others are taken from upstream ProxySQL headers (2.7-era).
# ---------------------------------------------------------------------------

_MYSQL_SERVERS_COLS = (
    "hostgroup_id INT CHECK (hostgroup_id>=0) NOT NULL DEFAULT 0 , hostname VARCHAR NOT NULL , "
    "port INT CHECK (port >= 0 AND port <= 65535) NOT NULL DEFAULT 3306 , "
    "gtid_port INT CHECK ((gtid_port <> port OR gtid_port=0) AND gtid_port >= 0 AND gtid_port <= 65535) NOT NULL DEFAULT 0 , "
    "status VARCHAR CHECK (UPPER(status) IN ('ONLINE','SHUNNED','OFFLINE_SOFT', 'OFFLINE_HARD')) NOT NULL DEFAULT 'ONLINE' , "
    "weight INT CHECK (weight >= 0 AND weight <=10000000) NOT NULL DEFAULT 1 , "
    "compression INT CHECK (compression IN(0,1)) NOT NULL DEFAULT 0 , "
    "max_connections INT CHECK (max_connections >=0) NOT NULL DEFAULT 1000 , "
    "max_replication_lag INT CHECK (max_replication_lag >= 0 AND max_replication_lag <= 126144000) NOT NULL DEFAULT 0 , "
    "use_ssl INT CHECK (use_ssl IN(0,1)) NOT NULL DEFAULT 0 , "
    "max_latency_ms INT UNSIGNED CHECK (max_latency_ms>=0) NOT NULL DEFAULT 0 , "
    "comment VARCHAR NOT NULL DEFAULT '' , PRIMARY KEY (hostgroup_id, hostname, port) )")
_MYSQL_USERS_HEAD = (
    "username VARCHAR NOT NULL , password VARCHAR , active INT CHECK (active IN (0,1)) NOT NULL DEFAULT 1 , "
    "use_ssl INT CHECK (use_ssl IN (0,1)) NOT NULL DEFAULT 0 , default_hostgroup INT NOT NULL DEFAULT 0 , "
    "default_schema VARCHAR , schema_locked INT CHECK (schema_locked IN (0,1)) NOT NULL DEFAULT 0 , "
    "transaction_persistent INT CHECK (transaction_persistent IN (0,1)) NOT NULL DEFAULT 1 , "
    "fast_forward INT CHECK (fast_forward IN (0,1)) NOT NULL DEFAULT 0 , "
    "backend INT CHECK (backend IN (0,1)) NOT NULL DEFAULT 1 , frontend INT CHECK (frontend IN (0,1)) NOT NULL DEFAULT 1 , "
    "max_connections INT CHECK (max_connections >=0) NOT NULL DEFAULT 10000 , "
    "attributes VARCHAR CHECK (JSON_VALID(attributes) OR attributes = '') NOT NULL DEFAULT ''")
_MYSQL_USERS_TAIL = "comment VARCHAR NOT NULL DEFAULT '' , PRIMARY KEY (username, backend) , UNIQUE (username, frontend))"
_REPLICATION_HG_COLS = (
    "writer_hostgroup INT CHECK (writer_hostgroup>=0) NOT NULL PRIMARY KEY , "
    "reader_hostgroup INT NOT NULL CHECK (reader_hostgroup<>writer_hostgroup AND reader_hostgroup>=0) , "
    "check_type VARCHAR CHECK (LOWER(check_type) IN ('read_only','innodb_read_only','super_read_only',"
    "'read_only|innodb_read_only','read_only&innodb_read_only')) NOT NULL DEFAULT 'read_only' , "
    "comment VARCHAR NOT NULL DEFAULT '', UNIQUE (reader_hostgroup))")
_GR_GALERA_HG_COLS = (
    "writer_hostgroup INT CHECK (writer_hostgroup>=0) NOT NULL PRIMARY KEY , "
    "backup_writer_hostgroup INT CHECK (backup_writer_hostgroup>=0 AND backup_writer_hostgroup<>writer_hostgroup) NOT NULL , "
    "reader_hostgroup INT NOT NULL CHECK (reader_hostgroup<>writer_hostgroup AND backup_writer_hostgroup<>reader_hostgroup AND reader_hostgroup>0) , "
    "offline_hostgroup INT NOT NULL CHECK (offline_hostgroup<>writer_hostgroup AND offline_hostgroup<>reader_hostgroup "
    "AND backup_writer_hostgroup<>offline_hostgroup AND offline_hostgroup>=0) , "
    "active INT CHECK (active IN (0,1)) NOT NULL DEFAULT 1 , max_writers INT NOT NULL CHECK (max_writers >= 0) DEFAULT 1 , "
    "writer_is_also_reader INT CHECK (writer_is_also_reader IN (0,1,2)) NOT NULL DEFAULT 0 , "
    "max_transactions_behind INT CHECK (max_transactions_behind>=0) NOT NULL DEFAULT 0 , "
    "comment VARCHAR , UNIQUE (reader_hostgroup) , UNIQUE (offline_hostgroup) , UNIQUE (backup_writer_hostgroup))")
_AURORA_HG_COLS = (
    "writer_hostgroup INT CHECK (writer_hostgroup>=0) NOT NULL PRIMARY KEY , "
    "reader_hostgroup INT NOT NULL CHECK (reader_hostgroup<>writer_hostgroup AND reader_hostgroup>0) , "
    "active INT CHECK (active IN (0,1)) NOT NULL DEFAULT 1 , aurora_port INT NOT NUlL DEFAULT 3306 , "
    "domain_name VARCHAR NOT NULL CHECK (SUBSTR(domain_name,1,1) = '.') , "
    "max_lag_ms INT NOT NULL CHECK (max_lag_ms>= 10 AND max_lag_ms <= 600000) DEFAULT 600000 , "
    "check_interval_ms INT NOT NULL CHECK (check_interval_ms >= 100 AND check_interval_ms <= 600000) DEFAULT 1000 , "
    "check_timeout_ms INT NOT NULL CHECK (check_timeout_ms >= 80 AND check_timeout_ms <= 3000) DEFAULT 800 , "
    "writer_is_also_reader INT CHECK (writer_is_also_reader IN (0,1)) NOT NULL DEFAULT 0 , "
    "new_reader_weight INT CHECK (new_reader_weight >= 0 AND new_reader_weight <=10000000) NOT NULL DEFAULT 1 , "
    "add_lag_ms INT NOT NULL CHECK (add_lag_ms >= 0 AND add_lag_ms <= 600000) DEFAULT 30 , "
    "min_lag_ms INT NOT NULL CHECK (min_lag_ms >= 0 AND min_lag_ms <= 600000) DEFAULT 30 , "
    "lag_num_checks INT NOT NULL CHECK (lag_num_checks >= 1 AND lag_num_checks <= 16) DEFAULT 1 , "
    "comment VARCHAR , UNIQUE (reader_hostgroup))")
_HG_ATTRIBUTES_COLS = (
    "hostgroup_id INT NOT NULL PRIMARY KEY , "
    "max_num_online_servers INT CHECK (max_num_online_servers>=0 AND max_num_online_servers <= 1000000) NOT NULL DEFAULT 1000000 , "
    "autocommit INT CHECK (autocommit IN (-1, 0, 1)) NOT NULL DEFAULT -1 , "
    "free_connections_pct INT CHECK (free_connections_pct >= 0 AND free_connections_pct <= 100) NOT NULL DEFAULT 10 , "
    "init_connect VARCHAR NOT NULL DEFAULT '' , multiplex INT CHECK (multiplex IN (0, 1)) NOT NULL DEFAULT 1 , "
    "connection_warming INT CHECK (connection_warming IN (0, 1)) NOT NULL DEFAULT 0 , "
    "throttle_connections_per_sec INT CHECK (throttle_connections_per_sec >= 1 AND throttle_connections_per_sec <= 1000000) NOT NULL DEFAULT 1000000 , "
    "ignore_session_variables VARCHAR CHECK (JSON_VALID(ignore_session_variables) OR ignore_session_variables = '') NOT NULL DEFAULT '' , "
    "hostgroup_settings VARCHAR CHECK (JSON_VALID(hostgroup_settings) OR hostgroup_settings = '') NOT NULL DEFAULT '' , "
    "servers_defaults VARCHAR CHECK (JSON_VALID(servers_defaults) OR servers_defaults = '') NOT NULL DEFAULT '' , "
    "comment VARCHAR NOT NULL DEFAULT '')")
_SSL_PARAMS_COLS = (
    "hostname VARCHAR NOT NULL , port INT CHECK (port >= 0 AND port <= 65535) NOT NULL DEFAULT 3306 , "
    "username VARCHAR NOT NULL DEFAULT '' , ssl_ca VARCHAR NOT NULL DEFAULT '' , ssl_cert VARCHAR NOT NULL DEFAULT '' , "
    "ssl_key VARCHAR NOT NULL DEFAULT '' , ssl_capath VARCHAR NOT NULL DEFAULT '' , ssl_crl VARCHAR NOT NULL DEFAULT '' , "
    "ssl_crlpath VARCHAR NOT NULL DEFAULT '' , ssl_cipher VARCHAR NOT NULL DEFAULT '' , tls_version VARCHAR NOT NULL DEFAULT '' , "
    "comment VARCHAR NOT NULL DEFAULT '' , PRIMARY KEY (hostname, port, username) )")
_QUERY_RULES_COLS = (
    "rule_id INTEGER PRIMARY KEY AUTOINCREMENT NOT NULL , active INT CHECK (active IN (0,1)) NOT NULL DEFAULT 0 , "
    "username VARCHAR , schemaname VARCHAR , flagIN INT CHECK (flagIN >= 0) NOT NULL DEFAULT 0 , client_addr VARCHAR , "
    "proxy_addr VARCHAR , proxy_port INT CHECK (proxy_port >= 0 AND proxy_port <= 65535) , digest VARCHAR , "
    "match_digest VARCHAR , match_pattern VARCHAR , negate_match_pattern INT CHECK (negate_match_pattern IN (0,1)) NOT NULL DEFAULT 0 , "
    "re_modifiers VARCHAR DEFAULT 'CASELESS' , flagOUT INT CHECK (flagOUT >= 0) , "
    "replace_pattern VARCHAR CHECK(CASE WHEN replace_pattern IS NULL THEN 1 WHEN replace_pattern IS NOT NULL AND match_pattern IS NOT NULL THEN 1 ELSE 0 END) , "
    "destination_hostgroup INT DEFAULT NULL , cache_ttl INT CHECK(cache_ttl > 0) , "
    "cache_empty_result INT CHECK (cache_empty_result IN (0,1)) DEFAULT NULL , cache_timeout INT CHECK(cache_timeout >= 0) , "
    "reconnect INT CHECK (reconnect IN (0,1)) DEFAULT NULL , timeout INT UNSIGNED CHECK (timeout >= 0) , "
    "retries INT CHECK (retries>=0 AND retries <=1000) , delay INT UNSIGNED CHECK (delay >=0) , next_query_flagIN INT UNSIGNED , "
    "mirror_flagOUT INT UNSIGNED , mirror_hostgroup INT UNSIGNED , error_msg VARCHAR , OK_msg VARCHAR , "
    "sticky_conn INT CHECK (sticky_conn IN (0,1)) , multiplex INT CHECK (multiplex IN (0,1,2)) , gtid_from_hostgroup INT UNSIGNED , "
    "log INT CHECK (log IN (0,1)) , apply INT CHECK(apply IN (0,1)) NOT NULL DEFAULT 0 , "
    "attributes VARCHAR CHECK (JSON_VALID(attributes) OR attributes = '') NOT NULL DEFAULT '' , comment VARCHAR)")
_FAST_ROUTING_COLS = (
    "username VARCHAR NOT NULL , schemaname VARCHAR NOT NULL , flagIN INT NOT NULL DEFAULT 0 , "
    "destination_hostgroup INT CHECK (destination_hostgroup >= 0) NOT NULL , comment VARCHAR NOT NULL , "
    "PRIMARY KEY (username, schemaname, flagIN) )")
_VARIABLES_COLS = "variable_name VARCHAR NOT NULL PRIMARY KEY , variable_value VARCHAR NOT NULL)"
_PROXYSQL_SERVERS_COLS = ("hostname VARCHAR NOT NULL , port INT NOT NULL DEFAULT 6032 , "
                          "weight INT CHECK (weight >= 0) NOT NULL DEFAULT 0 , comment VARCHAR NOT NULL DEFAULT '' , "
                          "PRIMARY KEY (hostname, port) )")
_SCHEDULER_COLS = (
    "id INTEGER PRIMARY KEY AUTOINCREMENT NOT NULL , active INT CHECK (active IN (0,1)) NOT NULL DEFAULT 1 , "
    "interval_ms INTEGER CHECK (interval_ms>=100 AND interval_ms<=100000000) NOT NULL , filename VARCHAR NOT NULL , "
    "arg1 VARCHAR , arg2 VARCHAR , arg3 VARCHAR , arg4 VARCHAR , arg5 VARCHAR , comment VARCHAR NOT NULL DEFAULT '')")
_RESTAPI_COLS = (
    "id INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT , active INT CHECK (active IN (0,1)) NOT NULL DEFAULT 1 , "
    "timeout_ms INTEGER CHECK (timeout_ms>=100 AND timeout_ms<=100000000) NOT NULL , "
    "method VARCHAR NOT NULL CHECK (UPPER(method) IN ('GET','POST')) , uri VARCHAR NOT NULL , script VARCHAR NOT NULL , "
    "comment VARCHAR NOT NULL DEFAULT '')")
_FW_USERS_COLS = ("active INT CHECK (active IN (0,1)) NOT NULL DEFAULT 1 , username VARCHAR NOT NULL , "
                  "client_address VARCHAR NOT NULL , mode VARCHAR CHECK (mode IN ('OFF','DETECTING','PROTECTING')) "
                  "NOT NULL DEFAULT ('OFF') , comment VARCHAR NOT NULL , PRIMARY KEY (username, client_address) )")
_FW_RULES_COLS = ("active INT CHECK (active IN (0,1)) NOT NULL DEFAULT 1 , username VARCHAR NOT NULL , "
                  "client_address VARCHAR NOT NULL , schemaname VARCHAR NOT NULL , flagIN INT NOT NULL DEFAULT 0 , "
                  "digest VARCHAR NOT NULL , comment VARCHAR NOT NULL , "
                  "PRIMARY KEY (username, client_address, schemaname, flagIN, digest) )")
_FW_SQLI_COLS = "active INT CHECK (active IN (0,1)) NOT NULL DEFAULT 1 , fingerprint VARCHAR NOT NULL , PRIMARY KEY (fingerprint) )"
_COREDUMP_COLS = "filename VARCHAR NOT NULL , line INT NOT NULL , PRIMARY KEY (filename, line) )"


def _ddl(name, cols):
    return "CREATE TABLE %s (%s" % (name, cols)


# main (memory) schema, in creation order (which SHOW TABLES LIKE shows)
ADMIN_TABLES = [
    ("mysql_servers", _ddl("mysql_servers", _MYSQL_SERVERS_COLS)),
    ("mysql_servers_ssl_params", _ddl("mysql_servers_ssl_params", _SSL_PARAMS_COLS)),
    ("runtime_mysql_servers", _ddl("runtime_mysql_servers", _MYSQL_SERVERS_COLS)),
    ("runtime_mysql_servers_ssl_params", _ddl("runtime_mysql_servers_ssl_params", _SSL_PARAMS_COLS)),
    ("mysql_users", _ddl("mysql_users", _MYSQL_USERS_HEAD + " , " + _MYSQL_USERS_TAIL)),
    ("runtime_mysql_users", _ddl("runtime_mysql_users", _MYSQL_USERS_HEAD + ", " + _MYSQL_USERS_TAIL)),
    ("runtime_checksums_values", "CREATE TABLE runtime_checksums_values (name VARCHAR NOT NULL , version INT NOT NULL , "
                                 "epoch INT NOT NULL , checksum VARCHAR NOT NULL , PRIMARY KEY (name))"),
    ("runtime_mysql_replication_hostgroups", _ddl("runtime_mysql_replication_hostgroups", _REPLICATION_HG_COLS)),
    ("mysql_replication_hostgroups", _ddl("mysql_replication_hostgroups", _REPLICATION_HG_COLS)),
    ("mysql_group_replication_hostgroups", _ddl("mysql_group_replication_hostgroups", _GR_GALERA_HG_COLS)),
    ("runtime_mysql_group_replication_hostgroups", _ddl("runtime_mysql_group_replication_hostgroups", _GR_GALERA_HG_COLS)),
    ("mysql_galera_hostgroups", _ddl("mysql_galera_hostgroups", _GR_GALERA_HG_COLS)),
    ("runtime_mysql_galera_hostgroups", _ddl("runtime_mysql_galera_hostgroups", _GR_GALERA_HG_COLS)),
    ("mysql_aws_aurora_hostgroups", _ddl("mysql_aws_aurora_hostgroups", _AURORA_HG_COLS)),
    ("runtime_mysql_aws_aurora_hostgroups", _ddl("runtime_mysql_aws_aurora_hostgroups", _AURORA_HG_COLS)),
    ("mysql_hostgroup_attributes", _ddl("mysql_hostgroup_attributes", _HG_ATTRIBUTES_COLS)),
    ("runtime_mysql_hostgroup_attributes", _ddl("runtime_mysql_hostgroup_attributes", _HG_ATTRIBUTES_COLS)),
    ("mysql_query_rules", _ddl("mysql_query_rules", _QUERY_RULES_COLS)),
    ("mysql_query_rules_fast_routing", _ddl("mysql_query_rules_fast_routing", _FAST_ROUTING_COLS)),
    ("runtime_mysql_query_rules", _ddl("runtime_mysql_query_rules", _QUERY_RULES_COLS)),
    ("runtime_mysql_query_rules_fast_routing", _ddl("runtime_mysql_query_rules_fast_routing", _FAST_ROUTING_COLS)),
    ("global_variables", _ddl("global_variables", _VARIABLES_COLS)),
    ("runtime_global_variables", _ddl("runtime_global_variables", _VARIABLES_COLS)),
    ("mysql_collations", "CREATE TABLE mysql_collations (Id INTEGER NOT NULL PRIMARY KEY , Collation VARCHAR NOT NULL , "
                         "Charset VARCHAR NOT NULL , `Default` VARCHAR NOT NULL)"),
    ("scheduler", _ddl("scheduler", _SCHEDULER_COLS)),
    ("runtime_scheduler", _ddl("runtime_scheduler", _SCHEDULER_COLS)),
    ("restapi_routes", _ddl("restapi_routes", _RESTAPI_COLS)),
    ("runtime_restapi_routes", _ddl("runtime_restapi_routes", _RESTAPI_COLS)),
    ("mysql_firewall_whitelist_rules", _ddl("mysql_firewall_whitelist_rules", _FW_RULES_COLS)),
    ("runtime_mysql_firewall_whitelist_rules", _ddl("runtime_mysql_firewall_whitelist_rules", _FW_RULES_COLS)),
    ("mysql_firewall_whitelist_users", _ddl("mysql_firewall_whitelist_users", _FW_USERS_COLS)),
    ("runtime_mysql_firewall_whitelist_users", _ddl("runtime_mysql_firewall_whitelist_users", _FW_USERS_COLS)),
    ("mysql_firewall_whitelist_sqli_fingerprints", _ddl("mysql_firewall_whitelist_sqli_fingerprints", _FW_SQLI_COLS)),
    ("runtime_mysql_firewall_whitelist_sqli_fingerprints",
     _ddl("runtime_mysql_firewall_whitelist_sqli_fingerprints", _FW_SQLI_COLS)),
    ("coredump_filters", _ddl("coredump_filters", _COREDUMP_COLS)),
    ("runtime_coredump_filters", _ddl("runtime_coredump_filters", _COREDUMP_COLS)),
    ("proxysql_servers", _ddl("proxysql_servers", _PROXYSQL_SERVERS_COLS)),
    ("runtime_proxysql_servers", _ddl("runtime_proxysql_servers", _PROXYSQL_SERVERS_COLS)),
]
_ADMIN_DDL = dict(ADMIN_TABLES)

# disk (configdb) tables
DISK_TABLES = [(n, _ADMIN_DDL[n]) for n in (
    "mysql_servers", "mysql_servers_ssl_params", "mysql_users", "mysql_replication_hostgroups",
    "mysql_group_replication_hostgroups", "mysql_galera_hostgroups", "mysql_aws_aurora_hostgroups",
    "mysql_hostgroup_attributes", "mysql_query_rules", "mysql_query_rules_fast_routing", "global_variables",
    "mysql_collations", "scheduler", "restapi_routes", "mysql_firewall_whitelist_rules",
    "mysql_firewall_whitelist_users", "mysql_firewall_whitelist_sqli_fingerprints", "proxysql_servers")]
DISK_TABLES.append(("global_settings", "CREATE TABLE global_settings (variable_name VARCHAR NOT NULL PRIMARY KEY , "
                                       "variable_value VARCHAR NOT NULL)"))

_POOL_COLS = ("hostgroup INT , srv_host VARCHAR , srv_port INT , status VARCHAR , ConnUsed INT , ConnFree INT , "
              "ConnOK INT , ConnERR INT , MaxConnUsed INT , Queries INT , Queries_GTID_sync INT , "
              "Bytes_data_sent INT , Bytes_data_recv INT , Latency_us INT)")
_DIGEST_COLS = ("hostgroup INT , schemaname VARCHAR NOT NULL , username VARCHAR NOT NULL , client_address VARCHAR NOT NULL , "
                "digest VARCHAR NOT NULL , digest_text VARCHAR NOT NULL , count_star INTEGER NOT NULL , "
                "first_seen INTEGER NOT NULL , last_seen INTEGER NOT NULL , sum_time INTEGER NOT NULL , "
                "min_time INTEGER NOT NULL , max_time INTEGER NOT NULL , sum_rows_affected INTEGER NOT NULL , "
                "sum_rows_sent INTEGER NOT NULL , PRIMARY KEY(hostgroup, schemaname, username, client_address, digest))")
_ERRORS_COLS = ("hostgroup INT NOT NULL , hostname VARCHAR NOT NULL , port INT NOT NULL , username VARCHAR NOT NULL , "
                "client_address VARCHAR NOT NULL , schemaname VARCHAR NOT NULL , errno INT NOT NULL , "
                "count_star INTEGER NOT NULL , first_seen INTEGER NOT NULL , last_seen INTEGER NOT NULL , "
                "last_error VARCHAR NOT NULL DEFAULT '' , PRIMARY KEY (hostgroup, hostname, port, username, schemaname, errno) )")
_HOST_CACHE_COLS = "client_address VARCHAR NOT NULL , error_count INT NOT NULL , last_updated BIGINT NOT NULL)"
_MSG_METRICS_COLS = ("message_id VARCHAR NOT NULL , filename VARCHAR NOT NULL , line INT CHECK (line >= 0) NOT NULL DEFAULT 0 , "
                     "func VARCHAR NOT NULL , count_star INTEGER NOT NULL , first_seen INTEGER NOT NULL , "
                     "last_seen INTEGER NOT NULL , PRIMARY KEY (filename, line, func) )")

# stats schema (a shared in-memory database: "stats" for admin, "main" for stats users)
STATS_TABLES = [
    ("stats_mysql_query_rules", "CREATE TABLE stats_mysql_query_rules (rule_id INTEGER PRIMARY KEY , hits INT NOT NULL)"),
    ("stats_mysql_users", "CREATE TABLE stats_mysql_users (username VARCHAR PRIMARY KEY , frontend_connections INT NOT NULL , "
                          "frontend_max_connections INT NOT NULL)"),
    ("stats_mysql_commands_counters",
     "CREATE TABLE stats_mysql_commands_counters (Command VARCHAR NOT NULL PRIMARY KEY , Total_Time_us INT NOT NULL , "
     "Total_cnt INT NOT NULL , cnt_100us INT NOT NULL , cnt_500us INT NOT NULL , cnt_1ms INT NOT NULL , "
     "cnt_5ms INT NOT NULL , cnt_10ms INT NOT NULL , cnt_50ms INT NOT NULL , cnt_100ms INT NOT NULL , "
     "cnt_500ms INT NOT NULL , cnt_1s INT NOT NULL , cnt_5s INT NOT NULL , cnt_10s INT NOT NULL , cnt_INFs)"),
    ("stats_mysql_processlist",
     "CREATE TABLE stats_mysql_processlist (ThreadID INT NOT NULL , SessionID INTEGER PRIMARY KEY , user VARCHAR , "
     "db VARCHAR , cli_host VARCHAR , cli_port INT , hostgroup INT , l_srv_host VARCHAR , l_srv_port INT , "
     "srv_host VARCHAR , srv_port INT , command VARCHAR , time_ms INT NOT NULL , info VARCHAR , "
     "status_flags INT , extended_info VARCHAR)"),
    ("stats_mysql_connection_pool", _ddl("stats_mysql_connection_pool", _POOL_COLS)),
    ("stats_mysql_connection_pool_reset", _ddl("stats_mysql_connection_pool_reset", _POOL_COLS)),
    ("stats_mysql_free_connections",
     "CREATE TABLE stats_mysql_free_connections (fd INT NOT NULL , hostgroup INT NOT NULL , srv_host VARCHAR NOT NULL , "
     "srv_port INT NOT NULL , user VARCHAR NOT NULL , schema VARCHAR , init_connect VARCHAR , time_zone VARCHAR , "
     "sql_mode VARCHAR , autocommit VARCHAR , idle_ms INT , statistics VARCHAR , mysql_info VARCHAR)"),
    ("stats_mysql_query_digest", _ddl("stats_mysql_query_digest", _DIGEST_COLS)),
    ("stats_mysql_query_digest_reset", _ddl("stats_mysql_query_digest_reset", _DIGEST_COLS)),
    ("stats_mysql_global", "CREATE TABLE stats_mysql_global (Variable_Name VARCHAR NOT NULL PRIMARY KEY , "
                           "Variable_Value VARCHAR NOT NULL)"),
    ("stats_memory_metrics", "CREATE TABLE stats_memory_metrics (Variable_Name VARCHAR NOT NULL PRIMARY KEY , "
                             "Variable_Value VARCHAR NOT NULL)"),
    ("stats_mysql_gtid_executed", "CREATE TABLE stats_mysql_gtid_executed (hostname VARCHAR NOT NULL , "
                                  "port INT NOT NULL DEFAULT 3306 , gtid_executed VARCHAR , events INT NOT NULL)"),
    ("stats_mysql_errors", _ddl("stats_mysql_errors", _ERRORS_COLS)),
    ("stats_mysql_errors_reset", _ddl("stats_mysql_errors_reset", _ERRORS_COLS)),
    ("stats_mysql_client_host_cache", _ddl("stats_mysql_client_host_cache", _HOST_CACHE_COLS)),
    ("stats_mysql_client_host_cache_reset", _ddl("stats_mysql_client_host_cache_reset", _HOST_CACHE_COLS)),
    ("global_variables", _ddl("global_variables", _VARIABLES_COLS)),
    ("stats_proxysql_servers_clients_status",
     "CREATE TABLE stats_proxysql_servers_clients_status (uuid VARCHAR NOT NULL , hostname VARCHAR NOT NULL , "
     "port INT NOT NULL , admin_mysql_ifaces VARCHAR NOT NULL , last_seen_at INT NOT NULL , PRIMARY KEY (uuid, hostname, port) )"),
    ("stats_proxysql_servers_status",
     "CREATE TABLE stats_proxysql_servers_status (hostname VARCHAR NOT NULL , port INT NOT NULL DEFAULT 6032 , "
     "weight INT CHECK (weight >= 0) NOT NULL DEFAULT 0 , master VARCHAR NOT NULL , global_version INT NOT NULL , "
     "check_age_us INT NOT NULL , ping_time_us INT NOT NULL, checks_OK INT NOT NULL , checks_ERR INT NOT NULL , "
     "PRIMARY KEY (hostname, port) )"),
    ("stats_proxysql_servers_metrics",
     "CREATE TABLE stats_proxysql_servers_metrics (hostname VARCHAR NOT NULL , port INT NOT NULL DEFAULT 6032 , "
     "weight INT CHECK (weight >= 0) NOT NULL DEFAULT 0 , comment VARCHAR NOT NULL DEFAULT '' , "
     "response_time_ms INT NOT NULL , Uptime_s INT NOT NULL , last_check_ms INT NOT NULL , Queries INT NOT NULL , "
     "Client_Connections_connected INT NOT NULL , Client_Connections_created INT NOT NULL , PRIMARY KEY (hostname, port) )"),
    ("stats_proxysql_servers_checksums",
     "CREATE TABLE stats_proxysql_servers_checksums (hostname VARCHAR NOT NULL , port INT NOT NULL DEFAULT 6032 , "
     "name VARCHAR NOT NULL , version INT NOT NULL , epoch INT NOT NULL , checksum VARCHAR NOT NULL , "
     "changed_at INT NOT NULL , updated_at INT NOT NULL , diff_check INT NOT NULL , PRIMARY KEY (hostname, port, name) )"),
    ("stats_proxysql_message_metrics", _ddl("stats_proxysql_message_metrics", _MSG_METRICS_COLS)),
    ("stats_proxysql_message_metrics_reset", _ddl("stats_proxysql_message_metrics_reset", _MSG_METRICS_COLS)),
    ("stats_mysql_prepared_statements_info",
     "CREATE TABLE stats_mysql_prepared_statements_info (global_stmt_id INT NOT NULL , schemaname VARCHAR NOT NULL , "
     "username VARCHAR NOT NULL , digest VARCHAR NOT NULL , ref_count_client INT NOT NULL , ref_count_server INT NOT NULL , "
     "num_columns INT NOT NULL, num_params INT NOT NULL, query VARCHAR NOT NULL)"),
]

# monitor schema (not covered by the recording; shapes follow upstream, kept empty)
_MON_LOG = "hostname VARCHAR NOT NULL , port INT NOT NULL DEFAULT 3306 , time_start_us INT NOT NULL DEFAULT 0 , success_time_us INT DEFAULT 0 , "
MONITOR_TABLES = [
    ("mysql_server_connect_log", "CREATE TABLE mysql_server_connect_log (hostname VARCHAR NOT NULL , port INT NOT NULL DEFAULT 3306 , "
                                 "time_start_us INT NOT NULL DEFAULT 0 , connect_success_time_us INT DEFAULT 0 , "
                                 "connect_error VARCHAR , PRIMARY KEY (hostname, port, time_start_us))"),
    ("mysql_server_ping_log", "CREATE TABLE mysql_server_ping_log (hostname VARCHAR NOT NULL , port INT NOT NULL DEFAULT 3306 , "
                              "time_start_us INT NOT NULL DEFAULT 0 , ping_success_time_us INT DEFAULT 0 , "
                              "ping_error VARCHAR , PRIMARY KEY (hostname, port, time_start_us))"),
    ("mysql_server_read_only_log", "CREATE TABLE mysql_server_read_only_log (" + _MON_LOG +
     "read_only INT DEFAULT 1 , error VARCHAR , PRIMARY KEY (hostname, port, time_start_us))"),
    ("mysql_server_replication_lag_log", "CREATE TABLE mysql_server_replication_lag_log (" + _MON_LOG +
     "repl_lag INT DEFAULT 0 , error VARCHAR , PRIMARY KEY (hostname, port, time_start_us))"),
    ("mysql_server_group_replication_log", "CREATE TABLE mysql_server_group_replication_log (" + _MON_LOG +
     "viable_candidate VARCHAR NOT NULL DEFAULT 'NO' , read_only VARCHAR NOT NULL DEFAULT 'YES' , "
     "transactions_behind INT DEFAULT 0 , error VARCHAR , PRIMARY KEY (hostname, port, time_start_us))"),
    ("mysql_server_galera_log", "CREATE TABLE mysql_server_galera_log (" + _MON_LOG +
     "primary_partition VARCHAR NOT NULL DEFAULT 'NO' , read_only VARCHAR NOT NULL DEFAULT 'YES' , "
     "wsrep_local_recv_queue INT DEFAULT 0 , wsrep_local_state INT DEFAULT 0 , wsrep_desync VARCHAR NOT NULL DEFAULT 'NO' , "
     "wsrep_reject_queries VARCHAR NOT NULL DEFAULT 'NO' , wsrep_sst_donor_rejects_queries VARCHAR NOT NULL DEFAULT 'NO' , "
     "pxc_maint_mode VARCHAR NOT NULL DEFAULT 'NO' , error VARCHAR , PRIMARY KEY (hostname, port, time_start_us))"),
    ("mysql_server_aws_aurora_log", "CREATE TABLE mysql_server_aws_aurora_log (hostname VARCHAR NOT NULL , "
     "port INT NOT NULL DEFAULT 3306 , time_start_us INT NOT NULL DEFAULT 0 , success_time_us INT DEFAULT 0 , "
     "error VARCHAR , SERVER_ID VARCHAR NOT NULL DEFAULT '' , SESSION_ID VARCHAR , LAST_UPDATE_TIMESTAMP VARCHAR , "
     "replica_lag_in_milliseconds INT NOT NULL DEFAULT 0 , CPU INT NOT NULL DEFAULT 0 , "
     "PRIMARY KEY (hostname, port, time_start_us, SERVER_ID))"),
    ("mysql_server_aws_aurora_check_status", "CREATE TABLE mysql_server_aws_aurora_check_status (writer_hostgroup INT NOT NULL , "
     "hostname VARCHAR NOT NULL , port INT NOT NULL DEFAULT 3306 , last_checked_at VARCHAR , checks_tot INT NOT NULL DEFAULT 0 , "
     "checks_ok INT NOT NULL DEFAULT 0 , last_error VARCHAR , PRIMARY KEY (writer_hostgroup, hostname, port))"),
    ("mysql_server_aws_aurora_failovers", "CREATE TABLE mysql_server_aws_aurora_failovers (writer_hostgroup INT NOT NULL , "
     "hostname VARCHAR NOT NULL , inserted_at VARCHAR NOT NULL)"),
]

# a few rows of mysql_collations (a real ProxySQL lists every collation it knows)
COLLATIONS = [(8, "latin1_swedish_ci", "latin1", "Yes"), (33, "utf8_general_ci", "utf8", "Yes"),
              (45, "utf8mb4_general_ci", "utf8mb4", "Yes"), (46, "utf8mb4_bin", "utf8mb4", ""),
              (63, "binary", "binary", "Yes"), (83, "utf8_bin", "utf8", ""),
              (224, "utf8mb4_unicode_ci", "utf8mb4", ""), (255, "utf8mb4_0900_ai_ci", "utf8mb4", "")]

# Module table sets for LOAD/SAVE ... FROM DISK / TO DISK / TO RUNTIME
SERVERS_AUX_TABLES = ("mysql_replication_hostgroups", "mysql_group_replication_hostgroups", "mysql_galera_hostgroups",
                      "mysql_aws_aurora_hostgroups", "mysql_hostgroup_attributes", "mysql_servers_ssl_params")
# tables hashed into the mysql_servers_v2 checksum, with their ORDER BY (CUCFT1)
SERVERS_V2_TABLES = (("mysql_replication_hostgroups", "writer_hostgroup"),
                     ("mysql_group_replication_hostgroups", "writer_hostgroup"),
                     ("mysql_galera_hostgroups", "writer_hostgroup"),
                     ("mysql_aws_aurora_hostgroups", "writer_hostgroup"),
                     ("mysql_hostgroup_attributes", "hostgroup_id"),
                     ("mysql_servers_ssl_params", "hostname,port,username"))
SIMPLE_MODULE_TABLES = {
    "MYSQL QUERY RULES": ("mysql_query_rules", "mysql_query_rules_fast_routing"),
    "PROXYSQL SERVERS": ("proxysql_servers",),
    "SCHEDULER": ("scheduler",),
    "RESTAPI": ("restapi_routes",),
    "MYSQL FIREWALL": ("mysql_firewall_whitelist_users", "mysql_firewall_whitelist_rules",
                       "mysql_firewall_whitelist_sqli_fingerprints"),
}

# ---------------------------------------------------------------------------
# 5b. ProxySQL 3.0 (--proxysql-version 3.0): what its admin interface adds
#     (sysown/proxysql v3.0: include/ProxySQL_Admin_Tables_Definitions.h,
#     ProxySQL_Admin::dump_checksums_values_table, generate_global_checksum,
#     Admin_Handler.cpp's PROXYSQL PAUSE/RESUME), selected once at start
# ---------------------------------------------------------------------------

PROXYSQL_3_0_VERSION = "3.0.1-0-g0000000"
PGSQL_ADMIN_TABLES = [
    ("pgsql_servers",
     ("CREATE TABLE pgsql_servers (hostgroup_id INT CHECK (hostgroup_id>=0) NOT NULL DEFAULT 0 , hostna"
     "me VARCHAR NOT NULL , port INT CHECK (port >= 0 AND port <= 65535) NOT NULL DEFAULT 5432 , statu"
     "s VARCHAR CHECK (UPPER(status) IN ('ONLINE','SHUNNED','OFFLINE_SOFT', 'OFFLINE_HARD')) NOT NULL "
     "DEFAULT 'ONLINE' , weight INT CHECK (weight >= 0 AND weight <=10000000) NOT NULL DEFAULT 1 , com"
     "pression INT CHECK (compression IN(0,1)) NOT NULL DEFAULT 0 , max_connections INT CHECK (max_con"
     "nections >=0) NOT NULL DEFAULT 1000 , max_replication_lag INT CHECK (max_replication_lag >= 0 AN"
     "D max_replication_lag <= 126144000) NOT NULL DEFAULT 0 , use_ssl INT CHECK (use_ssl IN(0,1)) NOT"
     " NULL DEFAULT 0 , max_latency_ms INT UNSIGNED CHECK (max_latency_ms>=0) NOT NULL DEFAULT 0 , com"
     "ment VARCHAR NOT NULL DEFAULT '' , PRIMARY KEY (hostgroup_id, hostname, port) )")),
    ("runtime_pgsql_servers",
     ("CREATE TABLE runtime_pgsql_servers (hostgroup_id INT CHECK (hostgroup_id>=0) NOT NULL DEFAULT 0 "
     ", hostname VARCHAR NOT NULL , port INT CHECK (port >= 0 AND port <= 65535) NOT NULL DEFAULT 5432"
     " , status VARCHAR CHECK (UPPER(status) IN ('ONLINE','SHUNNED','OFFLINE_SOFT', 'OFFLINE_HARD')) N"
     "OT NULL DEFAULT 'ONLINE' , weight INT CHECK (weight >= 0 AND weight <=10000000) NOT NULL DEFAULT"
     " 1 , compression INT CHECK (compression IN(0,1)) NOT NULL DEFAULT 0 , max_connections INT CHECK "
     "(max_connections >=0) NOT NULL DEFAULT 1000 , max_replication_lag INT CHECK (max_replication_lag"
     " >= 0 AND max_replication_lag <= 126144000) NOT NULL DEFAULT 0 , use_ssl INT CHECK (use_ssl IN(0"
     ",1)) NOT NULL DEFAULT 0 , max_latency_ms INT UNSIGNED CHECK (max_latency_ms>=0) NOT NULL DEFAULT"
     " 0 , comment VARCHAR NOT NULL DEFAULT '' , PRIMARY KEY (hostgroup_id, hostname, port) )")),
    ("pgsql_users",
     ("CREATE TABLE pgsql_users (username VARCHAR NOT NULL , password VARCHAR , active INT CHECK (activ"
     "e IN (0,1)) NOT NULL DEFAULT 1 , use_ssl INT CHECK (use_ssl IN (0,1)) NOT NULL DEFAULT 0 , defau"
     "lt_hostgroup INT NOT NULL DEFAULT 0 , transaction_persistent INT CHECK (transaction_persistent I"
     "N (0,1)) NOT NULL DEFAULT 1 , fast_forward INT CHECK (fast_forward IN (0,1)) NOT NULL DEFAULT 0 "
     ", backend INT CHECK (backend IN (0,1)) NOT NULL DEFAULT 1 , frontend INT CHECK (frontend IN (0,1"
     ")) NOT NULL DEFAULT 1 , max_connections INT CHECK (max_connections >=0) NOT NULL DEFAULT 10000 ,"
     " attributes VARCHAR CHECK (JSON_VALID(attributes) OR attributes = '') NOT NULL DEFAULT '' , comm"
     "ent VARCHAR NOT NULL DEFAULT '' , PRIMARY KEY (username, backend) , UNIQUE (username, frontend))")),
    ("runtime_pgsql_users",
     ("CREATE TABLE runtime_pgsql_users (username VARCHAR NOT NULL , password VARCHAR , active INT CHEC"
     "K (active IN (0,1)) NOT NULL DEFAULT 1 , use_ssl INT CHECK (use_ssl IN (0,1)) NOT NULL DEFAULT 0"
     " , default_hostgroup INT NOT NULL DEFAULT 0 , transaction_persistent INT CHECK (transaction_pers"
     "istent IN (0,1)) NOT NULL DEFAULT 1 , fast_forward INT CHECK (fast_forward IN (0,1)) NOT NULL DE"
     "FAULT 0 , backend INT CHECK (backend IN (0,1)) NOT NULL DEFAULT 1 , frontend INT CHECK (frontend"
     " IN (0,1)) NOT NULL DEFAULT 1 , max_connections INT CHECK (max_connections >=0) NOT NULL DEFAULT"
     " 10000 , attributes VARCHAR CHECK (JSON_VALID(attributes) OR attributes = '') NOT NULL DEFAULT '"
     "', comment VARCHAR NOT NULL DEFAULT '' , PRIMARY KEY (username, backend) , UNIQUE (username, fro"
     "ntend))")),
    ("pgsql_replication_hostgroups",
     ("CREATE TABLE pgsql_replication_hostgroups (writer_hostgroup INT CHECK (writer_hostgroup>=0) NOT "
     "NULL PRIMARY KEY , reader_hostgroup INT NOT NULL CHECK (reader_hostgroup<>writer_hostgroup AND r"
     "eader_hostgroup>=0) , check_type VARCHAR CHECK (LOWER(check_type) IN ('read_only','innodb_read_o"
     "nly','super_read_only','read_only|innodb_read_only','read_only&innodb_read_only')) NOT NULL DEFA"
     "ULT 'read_only' , comment VARCHAR NOT NULL DEFAULT '', UNIQUE (reader_hostgroup))")),
    ("runtime_pgsql_replication_hostgroups",
     ("CREATE TABLE runtime_pgsql_replication_hostgroups (writer_hostgroup INT CHECK (writer_hostgroup>"
     "=0) NOT NULL PRIMARY KEY , reader_hostgroup INT NOT NULL CHECK (reader_hostgroup<>writer_hostgro"
     "up AND reader_hostgroup>=0) , check_type VARCHAR CHECK (LOWER(check_type) IN ('read_only','innod"
     "b_read_only','super_read_only','read_only|innodb_read_only','read_only&innodb_read_only')) NOT N"
     "ULL DEFAULT 'read_only' , comment VARCHAR NOT NULL DEFAULT '', UNIQUE (reader_hostgroup))")),
    ("pgsql_hostgroup_attributes",
     ("CREATE TABLE pgsql_hostgroup_attributes (hostgroup_id INT NOT NULL PRIMARY KEY , max_num_online_"
     "servers INT CHECK (max_num_online_servers>=0 AND max_num_online_servers <= 1000000) NOT NULL DEF"
     "AULT 1000000 , autocommit INT CHECK (autocommit IN (-1, 0, 1)) NOT NULL DEFAULT -1 , free_connec"
     "tions_pct INT CHECK (free_connections_pct >= 0 AND free_connections_pct <= 100) NOT NULL DEFAULT"
     " 10 , init_connect VARCHAR NOT NULL DEFAULT '' , multiplex INT CHECK (multiplex IN (0, 1)) NOT N"
     "ULL DEFAULT 1 , connection_warming INT CHECK (connection_warming IN (0, 1)) NOT NULL DEFAULT 0 ,"
     " throttle_connections_per_sec INT CHECK (throttle_connections_per_sec >= 1 AND throttle_connecti"
     "ons_per_sec <= 1000000) NOT NULL DEFAULT 1000000 , ignore_session_variables VARCHAR CHECK (JSON_"
     "VALID(ignore_session_variables) OR ignore_session_variables = '') NOT NULL DEFAULT '' , hostgrou"
     "p_settings VARCHAR CHECK (JSON_VALID(hostgroup_settings) OR hostgroup_settings = '') NOT NULL DE"
     "FAULT '' , servers_defaults VARCHAR CHECK (JSON_VALID(servers_defaults) OR servers_defaults = ''"
     ") NOT NULL DEFAULT '' , comment VARCHAR NOT NULL DEFAULT '')")),
    ("runtime_pgsql_hostgroup_attributes",
     ("CREATE TABLE runtime_pgsql_hostgroup_attributes (hostgroup_id INT NOT NULL PRIMARY KEY , max_num"
     "_online_servers INT CHECK (max_num_online_servers>=0 AND max_num_online_servers <= 1000000) NOT "
     "NULL DEFAULT 1000000 , autocommit INT CHECK (autocommit IN (-1, 0, 1)) NOT NULL DEFAULT -1 , fre"
     "e_connections_pct INT CHECK (free_connections_pct >= 0 AND free_connections_pct <= 100) NOT NULL"
     " DEFAULT 10 , init_connect VARCHAR NOT NULL DEFAULT '' , multiplex INT CHECK (multiplex IN (0, 1"
     ")) NOT NULL DEFAULT 1 , connection_warming INT CHECK (connection_warming IN (0, 1)) NOT NULL DEF"
     "AULT 0 , throttle_connections_per_sec INT CHECK (throttle_connections_per_sec >= 1 AND throttle_"
     "connections_per_sec <= 1000000) NOT NULL DEFAULT 1000000 , ignore_session_variables VARCHAR CHEC"
     "K (JSON_VALID(ignore_session_variables) OR ignore_session_variables = '') NOT NULL DEFAULT '' , "
     "hostgroup_settings VARCHAR CHECK (JSON_VALID(hostgroup_settings) OR hostgroup_settings = '') NOT"
     " NULL DEFAULT '' , servers_defaults VARCHAR CHECK (JSON_VALID(servers_defaults) OR servers_defau"
     "lts = '') NOT NULL DEFAULT '' , comment VARCHAR NOT NULL DEFAULT '')")),
    ("pgsql_query_rules",
     ("CREATE TABLE pgsql_query_rules (rule_id INTEGER PRIMARY KEY AUTOINCREMENT NOT NULL , active INT "
     "CHECK (active IN (0,1)) NOT NULL DEFAULT 0 , username VARCHAR , database VARCHAR , flagIN INT CH"
     "ECK (flagIN >= 0) NOT NULL DEFAULT 0 , client_addr VARCHAR , proxy_addr VARCHAR , proxy_port INT"
     " CHECK (proxy_port >= 0 AND proxy_port <= 65535) , digest VARCHAR , match_digest VARCHAR , match"
     "_pattern VARCHAR , negate_match_pattern INT CHECK (negate_match_pattern IN (0,1)) NOT NULL DEFAU"
     "LT 0 , re_modifiers VARCHAR DEFAULT 'CASELESS' , flagOUT INT CHECK (flagOUT >= 0) , replace_patt"
     "ern VARCHAR CHECK(CASE WHEN replace_pattern IS NULL THEN 1 WHEN replace_pattern IS NOT NULL AND "
     "match_pattern IS NOT NULL THEN 1 ELSE 0 END) , destination_hostgroup INT DEFAULT NULL , cache_tt"
     "l INT CHECK(cache_ttl > 0) , cache_empty_result INT CHECK (cache_empty_result IN (0,1)) DEFAULT "
     "NULL , cache_timeout INT CHECK(cache_timeout >= 0) , reconnect INT CHECK (reconnect IN (0,1)) DE"
     "FAULT NULL , timeout INT UNSIGNED CHECK (timeout >= 0) , retries INT CHECK (retries>=0 AND retri"
     "es <=1000) , delay INT UNSIGNED CHECK (delay >=0) , next_query_flagIN INT UNSIGNED , mirror_flag"
     "OUT INT UNSIGNED , mirror_hostgroup INT UNSIGNED , error_msg VARCHAR , OK_msg VARCHAR , sticky_c"
     "onn INT CHECK (sticky_conn IN (0,1)) , multiplex INT CHECK (multiplex IN (0,1,2)) , log INT CHEC"
     "K (log IN (0,1)) , apply INT CHECK(apply IN (0,1)) NOT NULL DEFAULT 0 , attributes VARCHAR CHECK"
     " (JSON_VALID(attributes) OR attributes = '') NOT NULL DEFAULT '' , comment VARCHAR)")),
    ("runtime_pgsql_query_rules",
     ("CREATE TABLE runtime_pgsql_query_rules (rule_id INTEGER PRIMARY KEY AUTOINCREMENT NOT NULL , act"
     "ive INT CHECK (active IN (0,1)) NOT NULL DEFAULT 0 , username VARCHAR , database VARCHAR , flagI"
     "N INT CHECK (flagIN >= 0) NOT NULL DEFAULT 0 , client_addr VARCHAR , proxy_addr VARCHAR , proxy_"
     "port INT CHECK (proxy_port >= 0 AND proxy_port <= 65535), digest VARCHAR , match_digest VARCHAR "
     ", match_pattern VARCHAR , negate_match_pattern INT CHECK (negate_match_pattern IN (0,1)) NOT NUL"
     "L DEFAULT 0 , re_modifiers VARCHAR DEFAULT 'CASELESS' , flagOUT INT CHECK (flagOUT >= 0), replac"
     "e_pattern VARCHAR CHECK(CASE WHEN replace_pattern IS NULL THEN 1 WHEN replace_pattern IS NOT NUL"
     "L AND match_pattern IS NOT NULL THEN 1 ELSE 0 END) , destination_hostgroup INT DEFAULT NULL , ca"
     "che_ttl INT CHECK(cache_ttl > 0) , cache_empty_result INT CHECK (cache_empty_result IN (0,1)) DE"
     "FAULT NULL , cache_timeout INT CHECK(cache_timeout >= 0) , reconnect INT CHECK (reconnect IN (0,"
     "1)) DEFAULT NULL , timeout INT UNSIGNED CHECK (timeout >= 0) , retries INT CHECK (retries>=0 AND"
     " retries <=1000) , delay INT UNSIGNED CHECK (delay >=0) , next_query_flagIN INT UNSIGNED , mirro"
     "r_flagOUT INT UNSIGNED , mirror_hostgroup INT UNSIGNED , error_msg VARCHAR , OK_msg VARCHAR , st"
     "icky_conn INT CHECK (sticky_conn IN (0,1)) , multiplex INT CHECK (multiplex IN (0,1,2)) , log IN"
     "T CHECK (log IN (0,1)) , apply INT CHECK(apply IN (0,1)) NOT NULL DEFAULT 0 , attributes VARCHAR"
     " CHECK (JSON_VALID(attributes) OR attributes = '') NOT NULL DEFAULT '' , comment VARCHAR)")),
    ("pgsql_query_rules_fast_routing",
     ("CREATE TABLE pgsql_query_rules_fast_routing (username VARCHAR NOT NULL , database VARCHAR NOT NU"
     "LL , flagIN INT NOT NULL DEFAULT 0 , destination_hostgroup INT CHECK (destination_hostgroup >= 0"
     ") NOT NULL , comment VARCHAR NOT NULL , PRIMARY KEY (username, database, flagIN) )")),
    ("runtime_pgsql_query_rules_fast_routing",
     ("CREATE TABLE runtime_pgsql_query_rules_fast_routing (username VARCHAR NOT NULL , database VARCHA"
     "R NOT NULL , flagIN INT NOT NULL DEFAULT 0 , destination_hostgroup INT CHECK (destination_hostgr"
     "oup >= 0) NOT NULL , comment VARCHAR NOT NULL , PRIMARY KEY (username, database, flagIN) )")),
]
PGSQL_STATS_TABLES = [   # include/ProxySQL_Admin_Tables_Definitions.h (v3.0), STATS_SQLITE_TABLE_PGSQL_*
    ("stats_pgsql_global",
     ("CREATE TABLE stats_pgsql_global (Variable_Name VARCHAR NOT NULL PRIMARY KEY , Variable_Value VAR"
     "CHAR NOT NULL)")),
    ("stats_pgsql_connection_pool",
     ("CREATE TABLE stats_pgsql_connection_pool (hostgroup INT , srv_host VARCHAR , srv_port INT , stat"
     "us VARCHAR , ConnUsed INT , ConnFree INT , ConnOK INT , ConnERR INT , MaxConnUsed INT , Queries "
     "INT , Bytes_data_sent INT , Bytes_data_recv INT , Latency_us INT)")),
    ("stats_pgsql_connection_pool_reset",
     ("CREATE TABLE stats_pgsql_connection_pool_reset (hostgroup INT , srv_host VARCHAR , srv_port INT "
     ", status VARCHAR , ConnUsed INT , ConnFree INT , ConnOK INT , ConnERR INT , MaxConnUsed INT , Qu"
     "eries INT , Bytes_data_sent INT , Bytes_data_recv INT , Latency_us INT)")),
    ("stats_pgsql_free_connections",
     ("CREATE TABLE stats_pgsql_free_connections (fd INT NOT NULL , hostgroup INT NOT NULL , srv_host V"
     "ARCHAR NOT NULL , srv_port INT NOT NULL , user VARCHAR NOT NULL , database VARCHAR , init_connec"
     "t VARCHAR , time_zone VARCHAR , sql_mode VARCHAR , idle_ms INT , statistics VARCHAR , pgsql_info"
     " VARCHAR)")),
    ("stats_pgsql_users",
     ("CREATE TABLE stats_pgsql_users (username VARCHAR PRIMARY KEY , frontend_connections INT NOT NULL"
     " , frontend_max_connections INT NOT NULL)")),
    ("stats_pgsql_processlist",
     ("CREATE TABLE stats_pgsql_processlist (ThreadID INT NOT NULL , SessionID INTEGER PRIMARY KEY , us"
     "er VARCHAR , database VARCHAR , cli_host VARCHAR , cli_port INT , hostgroup INT , l_srv_host VAR"
     "CHAR , l_srv_port INT , srv_host VARCHAR , srv_port INT , command VARCHAR , time_ms INT NOT NULL"
     " , info VARCHAR , status_flags INT , extended_info VARCHAR)")),
    ("stats_pgsql_errors",
     ("CREATE TABLE stats_pgsql_errors (hostgroup INT NOT NULL , hostname VARCHAR NOT NULL , port INT N"
     "OT NULL , username VARCHAR NOT NULL , client_address VARCHAR NOT NULL , database VARCHAR NOT NUL"
     "L , sqlstate VARCHAR NOT NULL , count_star INTEGER NOT NULL , first_seen INTEGER NOT NULL , last"
     "_seen INTEGER NOT NULL , last_error VARCHAR NOT NULL DEFAULT '' , PRIMARY KEY (hostgroup, hostna"
     "me, port, username, database, sqlstate) )")),
    ("stats_pgsql_errors_reset",
     ("CREATE TABLE stats_pgsql_errors_reset (hostgroup INT NOT NULL , hostname VARCHAR NOT NULL , port"
     " INT NOT NULL , username VARCHAR NOT NULL , client_address VARCHAR NOT NULL , database VARCHAR N"
     "OT NULL , sqlstate VARCHAR NOT NULL , count_star INTEGER NOT NULL , first_seen INTEGER NOT NULL "
     ", last_seen INTEGER NOT NULL , last_error VARCHAR NOT NULL DEFAULT '' , PRIMARY KEY (hostgroup, "
     "hostname, port, username, database, sqlstate) )")),
    ("stats_pgsql_client_host_cache",
     ("CREATE TABLE stats_pgsql_client_host_cache (client_address VARCHAR NOT NULL , error_count INT NO"
     "T NULL , last_updated BIGINT NOT NULL)")),
    ("stats_pgsql_client_host_cache_reset",
     ("CREATE TABLE stats_pgsql_client_host_cache_reset (client_address VARCHAR NOT NULL , error_count "
     "INT NOT NULL , last_updated BIGINT NOT NULL)")),
    ("stats_pgsql_query_rules",
     ("CREATE TABLE stats_pgsql_query_rules (rule_id INTEGER PRIMARY KEY , hits INT NOT NULL)")),
    ("stats_pgsql_commands_counters",
     ("CREATE TABLE stats_pgsql_commands_counters (Command VARCHAR NOT NULL PRIMARY KEY , Total_Time_us"
     " INT NOT NULL , Total_cnt INT NOT NULL , cnt_100us INT NOT NULL , cnt_500us INT NOT NULL , cnt_1"
     "ms INT NOT NULL , cnt_5ms INT NOT NULL , cnt_10ms INT NOT NULL , cnt_50ms INT NOT NULL , cnt_100"
     "ms INT NOT NULL , cnt_500ms INT NOT NULL , cnt_1s INT NOT NULL , cnt_5s INT NOT NULL , cnt_10s I"
     "NT NOT NULL , cnt_INFs)")),
    ("stats_pgsql_query_digest",
     ("CREATE TABLE stats_pgsql_query_digest (hostgroup INT , database VARCHAR NOT NULL , username VARC"
     "HAR NOT NULL , client_address VARCHAR NOT NULL , digest VARCHAR NOT NULL , digest_text VARCHAR N"
     "OT NULL , count_star INTEGER NOT NULL , first_seen INTEGER NOT NULL , last_seen INTEGER NOT NULL"
     " , sum_time INTEGER NOT NULL , min_time INTEGER NOT NULL , max_time INTEGER NOT NULL , sum_rows_"
     "affected INTEGER NOT NULL , sum_rows_sent INTEGER NOT NULL , PRIMARY KEY(hostgroup, database, us"
     "ername, client_address, digest))")),
    ("stats_pgsql_query_digest_reset",
     ("CREATE TABLE stats_pgsql_query_digest_reset (hostgroup INT , database VARCHAR NOT NULL , usernam"
     "e VARCHAR NOT NULL , client_address VARCHAR NOT NULL , digest VARCHAR NOT NULL , digest_text VAR"
     "CHAR NOT NULL , count_star INTEGER NOT NULL , first_seen INTEGER NOT NULL , last_seen INTEGER NO"
     "T NULL , sum_time INTEGER NOT NULL , min_time INTEGER NOT NULL , max_time INTEGER NOT NULL , sum"
     "_rows_affected INTEGER NOT NULL , sum_rows_sent INTEGER NOT NULL , PRIMARY KEY(hostgroup, databa"
     "se, username, client_address, digest))")),
]
# lib/ProxySQL_Admin.cpp (v3.0): pgsql_servers_tablenames, pgsql_query_rules_tablenames.  PGSQL SERVERS and
# PGSQL USERS have their own runtime (PgSQL_HostGroups_Manager, PgSQL_Authentication); query rules are
# only copied between disk, memory and runtime.
PGSQL_SERVERS_TABLES = ("pgsql_servers", "pgsql_replication_hostgroups", "pgsql_hostgroup_attributes")
PGSQL_SERVERS_AUX_TABLES = PGSQL_SERVERS_TABLES[1:]
PGSQL_MODULES = {"PGSQL QUERY RULES": ("pgsql_query_rules", ("pgsql_query_rules", "pgsql_query_rules_fast_routing"))}
# The pgsql-* variables a real 3.0 pre-release lists for LIKE 'pgsql-monitor%' and the interface/thread
# ones (pgsql-admin-transcript.jsonl step 8), with PgSQL_Thread.cpp's defaults (PgSQL_Threads_Handler's
# constructor; pgsql-interfaces empty becomes 0.0.0.0:6133 in init).  Not ProxySQL's ~100 pgsql-* variables.
PGSQL_VARIABLES_3_0 = [
    ("pgsql-threads", "4"),
    ("pgsql-interfaces", "0.0.0.0:6133"),
    ("pgsql-poll_timeout", "2000"),
    ("pgsql-monitor_enabled", "true"),
    ("pgsql-monitor_history", "7200000"),
    ("pgsql-monitor_connect_interval", "120000"),
    ("pgsql-monitor_connect_timeout", "600"),
    ("pgsql-monitor_ping_interval", "8000"),
    ("pgsql-monitor_ping_max_failures", "3"),
    ("pgsql-monitor_ping_timeout", "1000"),
    ("pgsql-monitor_username", "monitor"),
    ("pgsql-monitor_password", "monitor"),
    ("pgsql-monitor_threads", "2"),
]
PGSQL_VARIABLES = []           # 3.0: PGSQL_VARIABLES_3_0
# include/PgSQL_HostGroups_Manager.h: PGHGM_GEN_CLUSTER_ADMIN_PGSQL_SERVERS, what pgsql_servers_v2 hashes
PGSQL_SERVERS_V2_QUERY = (
    "SELECT hostgroup_id, hostname, port, CASE WHEN status=\"SHUNNED\" THEN \"ONLINE\" ELSE status END AS status, "
    "weight, compression, max_connections, max_replication_lag, use_ssl, max_latency_ms, comment "
    "FROM main.pgsql_servers WHERE status != \"OFFLINE_HARD\" ORDER BY hostgroup_id, hostname, port")
PGSQL_SERVERS_COLUMNS = ("hostgroup_id, hostname, port, status, weight, compression, max_connections, "
                         "max_replication_lag, use_ssl, max_latency_ms, comment")
PGSQL_USERS_COLUMNS = ("username, password, active, use_ssl, default_hostgroup, transaction_persistent, fast_forward, "
                       "backend, frontend, max_connections, attributes, comment")
# checksum rows kept for GLOBAL_CHECKSUM() but not shown in runtime_checksums_values
HIDDEN_CHECKSUM_MODULES = ()
PGSQL_ADMIN_VARIABLES = [("admin-pgsql_ifaces", "0.0.0.0:6132")] + [
    ("admin-cluster_pgsql_%s_%s" % (module, what), default)
    for what, default in (("diffs_before_sync", "3"), ("save_to_disk", "true"))
    for module in ("query_rules", "servers", "users", "variables")]
PGSQL_MODULE = False           # 3.0: the PgSQL module exists
HIDE_PGSQL_TABLES = False      # SHOW TABLES leaves pgsql_* out (newer 3.0 builds)
PAUSE_REPLIES_PER_MODULE = False   # PROXYSQL PAUSE/RESUME answer once for MySQL, once for PgSQL


def select_version(version, hide_pgsql_tables=False):
    """Make this process a ProxySQL 2.7 (the default, as recorded) or 3.0 admin interface. For 3.0:
    the version string; the pgsql_* tables with their runtime_ twins (memory, disk, LOAD/SAVE PGSQL
    SERVERS|USERS|QUERY RULES); stats_pgsql_global / _processlist / _connection_pool; the pgsql rows
    of runtime_checksums_values and GLOBAL_CHECKSUM(); the admin-pgsql_ifaces and
    admin-cluster_pgsql_*_diffs_before_sync / _save_to_disk variables; PROXYSQL PAUSE and RESUME
    sending two replies (MySQL's, then PgSQL's, both with sequence id 1: the second one is read by
    the client's next command); with hide_pgsql_tables, SHOW TABLES without the pgsql_* tables."""
    global PROXYSQL_VERSION, CHECKSUM_MODULES, GLOBAL_CHECKSUM_ORDER, HIDE_PGSQL_TABLES, PAUSE_REPLIES_PER_MODULE
    global PGSQL_MODULE, HIDDEN_CHECKSUM_MODULES
    if version == "2.7":
        return
    if version != "3.0":
        raise ValueError("--proxysql-version is 2.7 or 3.0, not %r" % version)
    PROXYSQL_VERSION = PROXYSQL_3_0_VERSION
    ADMIN_VARIABLES[:] = [(n, PROXYSQL_VERSION if n == "admin-version" else v) for n, v in ADMIN_VARIABLES]
    ADMIN_VARIABLES.extend(PGSQL_ADMIN_VARIABLES)
    VARIABLE_MODULES["PGSQL VARIABLES"] = "pgsql-"
    PGSQL_VARIABLES.extend(PGSQL_VARIABLES_3_0)
    ADMIN_TABLES.extend(PGSQL_ADMIN_TABLES)
    _ADMIN_DDL.update(PGSQL_ADMIN_TABLES)
    DISK_TABLES.extend((n, d) for n, d in PGSQL_ADMIN_TABLES if not n.startswith("runtime_"))
    STATS_TABLES.extend(PGSQL_STATS_TABLES)
    for module, (_, tables) in PGSQL_MODULES.items():
        SIMPLE_MODULE_TABLES[module] = tables
    CHECKSUM_MODULES = CHECKSUM_MODULES + ("pgsql_query_rules", "pgsql_servers", "pgsql_users", "pgsql_variables")
    # ProxySQL_GlobalVariables::generate_global_checksum (lib/ProxySQL_GloVars.cpp): pgsql_servers_v2 is
    # hashed too, though dump_checksums_values_table does not list it
    GLOBAL_CHECKSUM_ORDER = ("admin_variables", "mysql_query_rules", "mysql_servers", "mysql_servers_v2",
                             "mysql_users", "mysql_variables", "pgsql_query_rules", "pgsql_servers",
                             "pgsql_servers_v2", "pgsql_users", "pgsql_variables", "proxysql_servers")
    HIDDEN_CHECKSUM_MODULES = ("pgsql_servers_v2",)
    HIDE_PGSQL_TABLES = hide_pgsql_tables
    PAUSE_REPLIES_PER_MODULE = PGSQL_MODULE = True


MYSQL_SERVERS_COLUMNS = ("hostgroup_id, hostname, port, gtid_port, status, weight, compression, max_connections, "
                         "max_replication_lag, use_ssl, max_latency_ms, comment")
MYSQL_USERS_COLUMNS = ("username, password, active, use_ssl, default_hostgroup, default_schema, schema_locked, "
                       "transaction_persistent, fast_forward, backend, frontend, max_connections, attributes, comment")
# MYHGM_GEN_CLUSTER_ADMIN_MYSQL_SERVERS: what mysql_servers_v2 hashes (the memory table)
MYSQL_SERVERS_V2_QUERY = (
    "SELECT hostgroup_id, hostname, port, gtid_port, CASE WHEN status=\"SHUNNED\" THEN \"ONLINE\" ELSE status END AS status, "
    "weight, compression, max_connections, max_replication_lag, use_ssl, max_latency_ms, comment "
    "FROM main.mysql_servers WHERE status != \"OFFLINE_HARD\" ORDER BY hostgroup_id, hostname, port")

# stats_mysql_global (names as in ProxySQL; the first five are recorded, 339)
STATS_GLOBAL_NAMES = (
    "Access_Denied_Max_Connections", "Access_Denied_Max_User_Connections", "Access_Denied_Wrong_Password",
    "Active_Transactions", "Backend_query_time_nsec", "Client_Connections_aborted", "Client_Connections_connected",
    "Client_Connections_created", "Client_Connections_hostgroup_locked", "Client_Connections_non_idle",
    "Com_autocommit", "Com_autocommit_filtered", "Com_commit", "Com_commit_filtered", "Com_rollback",
    "Com_rollback_filtered", "ConnPool_get_conn_failure", "ConnPool_get_conn_immediate",
    "ConnPool_get_conn_latency_awareness", "ConnPool_get_conn_success", "ConnPool_memory_bytes",
    "MySQL_Monitor_Workers", "MySQL_Thread_Workers", "ProxySQL_Uptime", "Queries_backends_bytes_recv",
    "Queries_backends_bytes_sent", "Queries_frontends_bytes_recv", "Queries_frontends_bytes_sent", "Questions",
    "SQLite3_memory_bytes", "Server_Connections_aborted", "Server_Connections_connected",
    "Server_Connections_created", "Server_Connections_delayed", "Servers_table_version", "Slow_queries",
    "mysql_backend_buffers_bytes", "mysql_frontend_buffers_bytes", "mysql_session_internal_bytes")


# ---------------------------------------------------------------------------
# 5. The admin module
# ---------------------------------------------------------------------------

def remove_spaces(s):
    """ProxySQL's remove_spaces(): collapse whitespace runs to one space and trim."""
    return re.sub(r"[ \t\n\r\v\f]+", " ", s).strip(" ")


class Server:
    """One MySrvC of the hostgroup manager (runtime_mysql_servers / the pool)."""

    def __init__(self, hid, host, port):
        self.hid, self.host, self.port = hid, host, port
        self.gtid_port = self.weight = self.compression = self.max_connections = 0
        self.max_replication_lag = self.use_ssl = self.max_latency_ms = 0
        self.comment = ""
        self.status = ONLINE
        self.shunned_automatic = False
        self.online_since = time.monotonic()   # last time a LOAD (re)set it ONLINE
        self.conn_used = self.max_conn_used = 0

    def key(self):
        return (self.hid, self.host, self.port)


class HostgroupsManager:
    """MySQL_HostGroups_Manager, as far as the admin interface can see it.

    Hostgroups keep their creation order and servers their insertion order (the
    connection pool view shows that order, 224).  A LOAD processes the incoming
    servers in (hostgroup_id, hostname, port) order, like ProxySQL's join over its
    internal table.  A server removed (or configured OFFLINE_HARD) becomes
    OFFLINE_HARD; purge_mysql_servers_table() drops the OFFLINE_HARD servers without
    used connections, and ProxySQL runs it at the start of the next LOAD and at every
    read of runtime_mysql_servers, not at the end of a LOAD: until then the pool shows
    the removed server as OFFLINE_HARD (agent-facts 66-72).  With used connections (the
    /pool hook) it stays until they are released and a later purge runs.
    """

    def __init__(self):
        self.hostgroups = {}     # hid -> [Server], dict keeps creation order
        self.commits = 0
        self.readonly_flags = {}  # (host, port) -> 0 once read_only=0 was seen with nothing to do

    def servers(self):
        return [s for srvs in self.hostgroups.values() for s in srvs]

    def find(self, hid, host, port):
        for s in self.hostgroups.get(hid, ()):
            if s.host == host and s.port == port:
                return s
        return None

    def purge(self):
        for hid, srvs in self.hostgroups.items():
            srvs[:] = [s for s in srvs if not (s.status == OFFLINE_HARD and s.conn_used == 0)]

    def commit(self, rows):
        """rows: (hostgroup_id, hostname, port, gtid_port, status, weight, compression,
        max_connections, max_replication_lag, use_ssl, max_latency_ms, comment) as text."""
        self.purge()
        self.readonly_flags = {}                  # the mapping is rebuilt: flags start at 1 again
        incoming = {}
        for r in rows:
            hid, host, port = c_atoi(r[0]), _text(r[1]), c_atoi(r[2])
            incoming[(hid, host, port)] = r
        for s in self.servers():
            if s.key() not in incoming:
                s.status = OFFLINE_HARD          # "Removed server ... Setting status OFFLINE HARD"
        now = time.monotonic()
        for key in sorted(incoming, key=lambda k: (k[0], k[1].encode("utf-8", "surrogateescape"), k[2])):
            r = incoming[key]
            status = STATUS_CODE.get(_text(r[4]).upper(), ONLINE)
            s = self.find(*key)
            if s is None:
                if status == OFFLINE_HARD:
                    continue                      # would be purged right away
                s = Server(*key)                  # appended: the pool keeps insertion order
                self.hostgroups.setdefault(key[0], []).append(s)
            if s.status != status:                # e.g. SHUNNED by the monitor -> ONLINE at once
                s.status = status
                s.shunned_automatic = False
                if status == ONLINE:
                    s.online_since = now
            s.gtid_port, s.weight, s.compression = c_atoi(r[3]), c_atoi(r[5]), c_atoi(r[6])
            s.max_connections, s.max_replication_lag = c_atoi(r[7]), c_atoi(r[8])
            s.use_ssl, s.max_latency_ms, s.comment = c_atoi(r[9]), c_atoi(r[10]), _text(r[11])
        self.commits += 1

    # -- the read_only monitor's actions (read_only_action_v2) -------------------------

    def _insert_copy(self, hid, src):
        """HostGroup_Server_Mapping::insert_HGM: an OFFLINE_HARD server of that hostgroup comes
        back ONLINE with the source's settings, otherwise a copy is appended."""
        s = self.find(hid, src.host, src.port)
        if s is None or s.status != OFFLINE_HARD:
            s = Server(hid, src.host, src.port)
            self.hostgroups.setdefault(hid, []).append(s)
            s.status = src.status
        else:
            s.status = ONLINE
        s.gtid_port, s.weight, s.compression, s.comment = src.gtid_port, src.weight, src.compression, src.comment
        s.max_connections, s.max_replication_lag = src.max_connections, src.max_replication_lag
        s.use_ssl, s.max_latency_ms = src.use_ssl, src.max_latency_ms
        s.shunned_automatic, s.online_since = False, time.monotonic()
        return s

    def _copy_if_not_exists(self, dest, src, dest_is_writer):
        """Each (writer, reader) pair the server has on the src side and lacks on the dest side
        is added there; a SHUNNED source is ONLINE again (its read_only was just read)."""
        have = {(w, r) for w, r, _ in dest}
        for w, r, srv in src:
            if (w, r) in have:
                continue
            if srv.status in (SHUNNED, SHUNNED_REPLICATION_LAG):
                srv.status, srv.shunned_automatic = ONLINE, False
            self._insert_copy(w if dest_is_writer else r, srv)
            have.add((w, r))

    def read_only_action(self, results, replication_rows, writer_is_also_reader):
        """read_only_action_v2 for [(host, port, read_only)], with the runtime
        mysql_replication_hostgroups rows; True when runtime servers changed (then OFFLINE_HARD
        copies are purged).  read_only=1 moves a writer to the reader hostgroup; read_only=0
        copies a reader-only server into the writer hostgroup (and out of the reader one unless
        mysql-monitor_writer_is_also_reader); a writable server already in the writer hostgroup
        is left alone, even if it is not in the reader one."""
        pairs = [(c_atoi(r[0]), c_atoi(r[1])) for r in replication_rows]
        changed = False
        for host, port, read_only in results:
            def nodes(writer_side):
                out = []
                for w, r in pairs:
                    s = self.find(w if writer_side else r, host, port)
                    if s is not None and s.status != OFFLINE_HARD:
                        out.append((w, r, s))
                return out
            writers, readers = nodes(True), nodes(False)
            if read_only == 0:
                if writers and self.readonly_flags.get((host, port), 1) != 0:
                    writer_hgs = {w for w, _, _ in writers}
                    if all(w in writer_hgs for w, _, _ in readers):
                        self.readonly_flags[(host, port)] = 0
                        continue
                elif writers:
                    continue
                self._copy_if_not_exists(writers, readers, True)
                if not writer_is_also_reader:
                    for _, _, s in readers:
                        s.status = OFFLINE_HARD
                changed = True
            elif writers:
                self._copy_if_not_exists(readers, writers, False)
                for _, _, s in writers:
                    s.status = OFFLINE_HARD
                changed = True
        if changed:
            self.purge()
        return changed

    @staticmethod
    def _sorted(servers):
        return sorted(servers, key=lambda s: (s.hid, s.host.encode("utf-8", "surrogateescape"), s.port))

    def runtime_rows(self):
        """runtime_mysql_servers: regenerated from memory structures, sorted."""
        self.purge()
        return [(s.hid, s.host, s.port, s.gtid_port, STATUS_TEXT[s.status], s.weight, s.compression,
                 s.max_connections, s.max_replication_lag, s.use_ssl, s.max_latency_ms, s.comment)
                for s in self._sorted(self.servers())]

    def cluster_rows(self):
        """MYHGM_GEN_CLUSTER_ADMIN_RUNTIME_SERVERS: SHUNNED shown as ONLINE, no OFFLINE_HARD.
        Hashed into the mysql_servers checksum and written by SAVE MYSQL SERVERS TO MEMORY."""
        out = []
        for s in self._sorted(self.servers()):
            if s.status == OFFLINE_HARD:
                continue
            st = "OFFLINE_SOFT" if s.status == OFFLINE_SOFT else "ONLINE"
            out.append((s.hid, s.host, s.port, s.gtid_port, st, s.weight, s.compression, s.max_connections,
                        s.max_replication_lag, s.use_ssl, s.max_latency_ms, s.comment))
        return out

    def pool_rows(self):
        """stats_mysql_connection_pool, in hostgroup / server list order (not sorted), OFFLINE_HARD
        servers that no purge has dropped yet included."""
        return [(s.hid, s.host, s.port, STATUS_TEXT[s.status], s.conn_used, 0, 0, 0, s.max_conn_used,
                 0, 0, 0, 0, 0) for s in self.servers()]


class Account:
    __slots__ = ("username", "password", "use_ssl", "default_hostgroup", "default_schema", "schema_locked",
                 "transaction_persistent", "fast_forward", "max_connections", "attributes", "comment", "active")


class Authentication:
    """MySQL_Authentication: frontend and backend credential arrays.

    Each array keeps insertion order; a removed user is replaced by the last one
    (PtrArray::remove_index_fast), and runtime_mysql_users lists all frontends,
    then all backends (254).  The checksum walks a std::map keyed by
    SpookyHash(username, 1, 2), i.e. in hash order.
    """

    BACKEND_COLUMN = 8       # refresh(): the backend flag's position in a row (frontend follows)

    def __init__(self):
        self.arrays = {"frontend": [], "backend": []}
        self.index = {"frontend": {}, "backend": {}}     # username -> position in its array

    def _add(self, role, new):
        """MySQL_Authentication::add: an existing account of that name is updated in place."""
        arr, index = self.arrays[role], self.index[role]
        i = index.get(new.username)
        if i is not None and i < len(arr) and arr[i].username == new.username:
            arr[i] = new
        else:
            index[new.username] = len(arr)
            arr.append(new)

    def delete(self, role, username):
        """MySQL_Authentication::del: the last account takes the removed one's place."""
        arr, index = self.arrays[role], self.index[role]
        i = index.pop(username, None)
        if i is None or i >= len(arr) or arr[i].username != username:
            return
        last = arr.pop()
        if i < len(arr):
            arr[i] = last
            index[last.username] = i

    def add_credentials(self, creds, hostgroup):
        """ProxySQL_Admin::add_credentials: admin (-2) and stats (-3) users are frontend accounts
        too, so a frontend mysql_users row of the same name takes their place (identity clash)."""
        for user, password in creds:
            a = Account()
            a.username, a.password = user, password
            a.use_ssl, a.default_hostgroup, a.default_schema = 0, hostgroup, "main"
            a.schema_locked = a.transaction_persistent = a.fast_forward = 0
            a.max_connections, a.attributes, a.comment, a.active = 1000, "", "", True
            self._add("frontend", a)

    def delete_credentials(self, creds):
        for user, _ in creds:
            self.delete("frontend", user)

    @staticmethod
    def _account(r):
        a = Account()
        a.username = _text(r[0])
        a.password = _text(r[1]) if r[1] is not None else ""
        a.use_ssl = 1 if c_atoi(r[2]) else 0
        a.default_hostgroup = c_atoi(r[3])
        a.default_schema = _text(r[4]) if r[4] is not None else ""
        a.schema_locked = 1 if c_atoi(r[5]) else 0
        a.transaction_persistent = 1 if c_atoi(r[6]) else 0
        a.fast_forward = 1 if c_atoi(r[7]) else 0
        a.max_connections = c_atoi(r[10])
        a.attributes = _text(r[11]) if r[11] is not None else ""
        a.comment = _text(r[12]) if r[12] is not None else ""
        a.active = True
        return a

    def refresh(self, rows, admin_users=(), inactive=()):
        """__refresh_users: rows are the active users (username, password, use_ssl,
        default_hostgroup, default_schema, schema_locked, transaction_persistent,
        fast_forward, backend, frontend, max_connections, attributes, comment) in memory
        order; admin_users are (credentials, hostgroup) pairs, added before them; inactive
        are the (role, username) of active=0 rows, whose accounts go first
        (__delete_inactive_users, backends then frontends)."""
        for role, username in inactive:
            self.delete(role, username)
        for arr in self.arrays.values():
            for a in arr:
                a.active = False
        for creds, hostgroup in admin_users:
            self.add_credentials(creds, hostgroup)
        for r in rows:
            for role, flag in (("backend", r[self.BACKEND_COLUMN]), ("frontend", r[self.BACKEND_COLUMN + 1])):
                if c_atoi(flag):
                    self._add(role, self._account(r))
        for role, arr in self.arrays.items():
            i = 0
            while i < len(arr):          # remove_inactives: del() and start again at 0
                if not arr[i].active:
                    self.delete(role, arr[i].username)
                    i = 0
                    continue
                i += 1

    def dump(self):
        """runtime_mysql_users rows: every frontend (1,0) then every backend (0,1)."""
        out = []
        for role, be, fe in (("frontend", 0, 1), ("backend", 1, 0)):
            for a in self.arrays[role]:
                if a.default_hostgroup < 0:
                    continue
                out.append((a.username, a.password, 1, a.use_ssl, a.default_hostgroup, a.default_schema,
                            a.schema_locked, a.transaction_persistent, a.fast_forward, be, fe,
                            a.max_connections, a.attributes, a.comment))
        return out

    def checksum(self):
        total = 0
        for arr in self.arrays.values():
            accounts = sorted(arr, key=lambda a: spooky128(_as_bytes(a.username), 1, 2)[0])
            data = b"".join(
                struct.pack("<BiBBBi", a.use_ssl, a.default_hostgroup, a.schema_locked,
                            a.transaction_persistent, a.fast_forward, a.max_connections)
                + _as_bytes(a.username) + _as_bytes(a.password) + _as_bytes(a.default_schema)
                + _as_bytes(a.comment) + _as_bytes(a.attributes)
                for a in accounts if a.default_hostgroup >= 0)
            if data:
                total = (total + spooky128(data, 13, 4)[0]) & _M64
        return total

    def frontend(self, username):
        arr = self.arrays["frontend"]
        i = self.index["frontend"].get(username)
        return arr[i] if i is not None and i < len(arr) and arr[i].username == username else None


class PgSQLHostgroupsManager(HostgroupsManager):
    """PgSQL_HostGroups_Manager (lib/PgSQL_HostGroups_Manager.cpp, v3.0): MySQL's hostgroup manager
    without gtid_port (servers_add, commit with its purge first, OFFLINE_HARD for removed servers,
    dump_table_pgsql purging before it dumps).  Rows in and out have pgsql_servers' 11 columns;
    the pool has stats_pgsql_connection_pool's 13 (no Queries_GTID_sync).  No monitor moves its
    servers (pgsql monitors are not emulated)."""

    def commit(self, rows):
        super().commit([tuple(r[:3]) + (0,) + tuple(r[3:]) for r in rows])

    def runtime_rows(self):
        """PGHGM_GEN_ADMIN_RUNTIME_SERVERS: runtime_pgsql_servers, and what SAVE PGSQL SERVERS TO MEMORY
        writes (save_pgsql_servers_runtime_to_database(false) means to turn SHUNNED into ONLINE but
        compares the weight column, so statuses are written as they are)."""
        return [r[:3] + r[4:] for r in super().runtime_rows()]

    def cluster_rows(self):
        """PGHGM_GEN_CLUSTER_ADMIN_RUNTIME_SERVERS: what the pgsql_servers checksum hashes."""
        return [r[:3] + r[4:] for r in super().cluster_rows()]

    def pool_rows(self):
        return [r[:10] + r[11:] for r in super().pool_rows()]


class PgSQLAuthentication(Authentication):
    """PgSQL_Authentication (lib/PgSQL_Authentication.cpp, v3.0): MySQL's frontend and backend arrays
    (PtrArray, std::map by SpookyHash(username, 1, 2)) with accounts that have no default_schema or
    schema_locked.  Rows are __add_active_users<SERVER_TYPE_PGSQL>'s (username, password, use_ssl,
    default_hostgroup, transaction_persistent, fast_forward, backend, frontend, max_connections,
    attributes, comment).  A password is kept as given: clear text or a SCRAM-SHA-256$ secret."""

    BACKEND_COLUMN = 6

    @staticmethod
    def _account(r):
        a = Account()
        a.username = _text(r[0])
        a.password = _text(r[1]) if r[1] is not None else ""
        a.use_ssl = 1 if c_atoi(r[2]) else 0
        a.default_hostgroup = c_atoi(r[3])
        a.default_schema, a.schema_locked = "", 0
        a.transaction_persistent = 1 if c_atoi(r[4]) else 0
        a.fast_forward = 1 if c_atoi(r[5]) else 0
        a.max_connections = c_atoi(r[8])
        a.attributes = _text(r[9]) if r[9] is not None else ""
        a.comment = _text(r[10]) if r[10] is not None else ""
        a.active = True
        return a

    def dump(self):
        """runtime_pgsql_users (save_pgsql_users_runtime_to_database): every frontend (backend=0,
        frontend=1), then every backend (1, 0); admin and stats accounts (hostgroup < 0) left out."""
        out = []
        for role, be, fe in (("frontend", 0, 1), ("backend", 1, 0)):
            for a in self.arrays[role]:
                if a.default_hostgroup < 0:
                    continue
                out.append((a.username, a.password, 1, a.use_ssl, a.default_hostgroup, a.transaction_persistent,
                            a.fast_forward, be, fe, a.max_connections, a.attributes, a.comment))
        return out

    def checksum(self):
        """get_runtime_checksum: compute_accounts_hash (SpookyHash(13,4) over use_ssl, default_hostgroup,
        transaction_persistent, fast_forward, max_connections, username, password, comment, attributes
        of the accounts with hostgroup >= 0, in map order) of the backends plus that of the frontends."""
        total = 0
        for arr in self.arrays.values():
            accounts = sorted(arr, key=lambda a: spooky128(_as_bytes(a.username), 1, 2)[0])
            data = b"".join(
                struct.pack("<BiBBi", a.use_ssl, a.default_hostgroup, a.transaction_persistent, a.fast_forward,
                            a.max_connections)
                + _as_bytes(a.username) + _as_bytes(a.password) + _as_bytes(a.comment) + _as_bytes(a.attributes)
                for a in accounts if a.default_hostgroup >= 0)
            if data:
                total = (total + spooky128(data, 13, 4)[0]) & _M64
        return total


class Reply:
    """What a query answers: a result set, an OK packet, an ERR packet, or a dropped connection."""

    def __init__(self, kind, **kw):
        self.kind = kind
        self.__dict__.update(kw)

    @classmethod
    def ok(cls, affected=0, info=b""):
        return cls("ok", affected=affected, info=info)

    @classmethod
    def err(cls, code, message, sqlstate="28000"):
        return cls("err", code=code, message=message, sqlstate=sqlstate)

    @classmethod
    def admin_err(cls, message, code=1045):
        return cls.err(code, "ProxySQL Admin Error: " + message)

    @classmethod
    def rows(cls, columns, rows, coltype=None, status=STATUS):
        return cls("rows", columns=columns, rows=rows, coltype=coltype, status=status)


class Session:
    """Per-connection state the admin handler needs."""

    _ids = iter(range(1, 1 << 62))
    _ids_lock = threading.Lock()

    def __init__(self, user, stats, peer):
        with Session._ids_lock:
            self.id = next(Session._ids)
        self.user, self.stats, self.peer = user, stats, peer


class Admin:
    """ProxySQL_Admin: the SQLite databases, the runtime modules and query handling."""

    def __init__(self, datadir, initial=False, admin_credentials="admin:admin",
                 listen="127.0.0.1:6032", monitor_shun_after=None, config=(), proxysql_servers=()):
        self.lock = threading.RLock()       # sql_query_global_mutex: one admin query at a time
        self.datadir = os.path.abspath(datadir)
        self.disk_path = os.path.join(self.datadir, "proxysql.db")
        self.stats_history_path = os.path.join(self.datadir, "proxysql_stats.db")
        self.started = time.time()
        self.monitor_shun_after = monitor_shun_after
        self.hgm = HostgroupsManager()
        self.auth = Authentication()
        self.pg_hgm = PgSQLHostgroupsManager()   # 3.0: runtime pgsql_servers and its pool
        self.pg_auth = PgSQLAuthentication()     # 3.0: runtime pgsql_users
        self.rt_admin = {}                  # runtime admin variables
        self.rt_mysql = {}                  # runtime mysql variables
        self.rt_pgsql = {}                  # runtime pgsql variables (3.0)
        self.rt_tables = {}                 # runtime copies of the simple tables
        self.checksums = {}                 # module -> [version, epoch, checksum]
        self.admin_creds = []               # [(user, password)] of the runtime admin-admin_credentials
        self.stats_creds = []               # ... and of admin-stats_credentials
        self.creds_text = {}                # the values they were parsed from
        self.cnf = self._config_variables(admin_credentials, listen, config)
        self.cnf_proxysql_servers = list(proxysql_servers)   # (hostname, port, weight, comment)
        self.cluster = None                 # set by ProxySQLDouble once the node can reach peers
        self.frontend = None                # the MySQL port (Frontend), when the double has one
        self.mysql_paused = False           # PROXYSQL PAUSE
        self.pgsql_paused = False           # the same, for 3.0's PgSQL module
        self.servers_v2_rows = []           # mysql_servers_v2 as last loaded (a peer's pull reads it)
        self.current_users = []             # mysql_users rows as last loaded (ditto)
        self.listen = listen
        self.load_save = self._load_save_commands()
        os.makedirs(self.datadir, exist_ok=True)
        if initial:
            for suffix in ("", "-journal", "-wal", "-shm"):
                try:
                    os.unlink(self.disk_path + suffix)
                except FileNotFoundError:
                    pass
        uid = "%d_%d_%s" % (os.getpid(), id(self), secrets.token_hex(4))
        stats_uri = "file:proxysql_double_stats_%s?mode=memory&cache=shared" % uid
        # the stats database is shared: "main" of stats-user sessions, "stats" for admin
        self.statsdb = SQLiteDB(stats_uri)
        for _, ddl in STATS_TABLES:
            self.statsdb.exec(ddl)
        self.admindb = SQLiteDB(":memory:")
        db = self.admindb
        for _, ddl in ADMIN_TABLES:
            db.exec(ddl)
        # PRAGMA DATABASE_LIST then reads 0 main, 2 disk, 3 stats, 4 monitor, 5 stats_history
        db.exec("ATTACH DATABASE %s AS disk" % sql_literal(self.disk_path))
        db.exec("PRAGMA disk.synchronous=0")
        db.exec("ATTACH DATABASE %s AS stats" % sql_literal(stats_uri))
        db.exec("ATTACH DATABASE ':memory:' AS monitor")
        for _, ddl in MONITOR_TABLES:
            db.exec(ddl.replace("CREATE TABLE ", "CREATE TABLE monitor.", 1))
        db.exec("ATTACH DATABASE %s AS stats_history" % sql_literal(self.stats_history_path))
        self._bootstrap()

    # -- start-up --------------------------------------------------------------

    def _bootstrap(self):
        db = self.admindb
        for name, value in ADMIN_VARIABLES + MYSQL_VARIABLES + PGSQL_VARIABLES:
            db.exec("INSERT INTO main.global_variables VALUES (%s, %s)" % (sql_literal(name), sql_literal(value)))
        for row in COLLATIONS:
            db.exec("INSERT INTO main.mysql_collations VALUES (%s)" % ", ".join(sql_literal(v) for v in row))
        fresh = not db.rows("SELECT name FROM disk.sqlite_master WHERE type='table' AND name='mysql_servers'")
        if fresh:
            # first start (or --initial): build the disk database from memory + config
            self._read_config_variables("admin-")
            self._read_config_variables("mysql-")
            self._read_config_variables("pgsql-")
            self._insert("main.proxysql_servers", self.cnf_proxysql_servers)
            with db.transaction():
                for name, ddl in DISK_TABLES:
                    db.exec("DROP TABLE IF EXISTS disk.%s" % name)
                    db.exec(ddl.replace("CREATE TABLE ", "CREATE TABLE disk.", 1))
                    if name != "global_settings":
                        db.exec("INSERT INTO disk.%s SELECT * FROM main.%s" % (name, name))
        else:
            # restart: memory comes from disk (the config file is not read again)
            for name, _ in DISK_TABLES:
                if name in ("global_settings", "mysql_collations"):
                    continue
                if name == "global_variables":
                    db.exec("INSERT OR REPLACE INTO main.global_variables SELECT * FROM disk.global_variables")
                else:
                    db.exec("DELETE FROM main.%s" % name)
                    db.exec("INSERT INTO main.%s SELECT * FROM disk.%s" % (name, name))
        # the interface really listened on
        db.exec("UPDATE main.global_variables SET variable_value=%s WHERE variable_name='admin-mysql_ifaces'"
                % sql_literal(self.listen))
        # everything to runtime; every checksum module starts at version 1
        self.load_admin_variables_to_runtime(bump=False)
        self.load_mysql_variables_to_runtime(bump=False)
        self.load_mysql_servers_to_runtime(bump=False)
        self.load_mysql_users_to_runtime(bump=False)
        for module in SIMPLE_MODULE_TABLES:
            self.load_simple_to_runtime(module, bump=False)
        if PGSQL_MODULE:
            self.load_pgsql_variables_to_runtime()
            self.load_pgsql_servers_to_runtime(bump=False)
            self.load_pgsql_users_to_runtime(bump=False)
        now = int(time.time())
        for name in CHECKSUM_MODULES + HIDDEN_CHECKSUM_MODULES:
            if name == "pgsql_variables":
                # 3.0 (v3.0 of 2024-10, as recorded): flush_pgsql_variables___database_to_runtime has its
                # checksum code commented out (Admin_FlushVariables.cpp), so the row keeps the
                # ProxySQL_Checksum_Value it was constructed with: checksum '', version 0, epoch 0
                self.checksums[name] = [0, 0, ""]
                continue
            self.checksums.setdefault(name, [0, 0, ZERO_CHECKSUM])
            self.checksums[name][0] = 1
            self.checksums[name][1] = now

    @staticmethod
    def _config_variables(admin_credentials, listen, config):
        """What proxysql.cnf would hold: admin_credentials first, mysql_ifaces last among the
        admin variables (the command line plays the config file's role)."""
        known = dict(ADMIN_VARIABLES + MYSQL_VARIABLES + PGSQL_VARIABLES)
        admin = [("admin-admin_credentials", admin_credentials)]
        mysql = []
        for name, value in config:
            if name not in known or name in ("admin-version", "admin-mysql_ifaces"):
                raise ValueError("%s is not a variable the double can take from its config" % name)
            if name == "admin-admin_credentials":
                admin[0] = (name, value)
            else:
                (admin if name.startswith("admin-") else mysql).append((name, value))
        return admin + [("admin-mysql_ifaces", listen)] + mysql

    def _read_config_variables(self, prefix="admin-"):
        """Read_Global_Variables_from_configfile: INSERT OR REPLACE, in config order."""
        rows = [(n, v) for n, v in self.cnf if n.startswith(prefix)]
        for name, value in rows:
            self.admindb.exec("INSERT OR REPLACE INTO main.global_variables VALUES (%s, %s)"
                              % (sql_literal(name), sql_literal(value)))
        return len(rows)

    # -- checksums ---------------------------------------------------------------

    def _set_checksum(self, module, value, bump, peer=None, touch=False):
        """bump: a LOAD (version + 1, epoch now or the peer's); touch: a change of runtime without
        a LOAD (the monitor moved a server): epoch now, same version."""
        entry = self.checksums.setdefault(module, [0, 0, ZERO_CHECKSUM])
        entry[2] = value
        if bump:
            entry[0] += 1
        if bump or touch:
            entry[1] = peer[1] if peer and peer[1] and peer[0] == value else int(time.time())

    def monitor_read_only(self, results):
        """Apply read_only check results [(host, port, read_only)]: runtime only, main untouched;
        the runtime mysql_servers checksum follows (update_glovars_mysql_servers_checksum)."""
        if self.hgm.read_only_action(results, self.rt_tables.get("mysql_replication_hostgroups", []),
                                     self.rt_mysql.get("mysql-monitor_writer_is_also_reader") == "true"):
            self._set_checksum("mysql_servers", runtime_checksum_text(raw_checksum(self.hgm.cluster_rows())),
                               False, touch=True)

    def global_checksum(self):
        data = b""
        for name in GLOBAL_CHECKSUM_ORDER:
            version, _, cks = self.checksums[name]
            if version:
                data += cks.encode() + struct.pack("<Q", version)
        return spooky128(data, 9, 5)[0] // 2

    # -- LOAD / SAVE -------------------------------------------------------------

    def load_admin_variables_to_runtime(self, bump=True, peer=None):
        known = dict(ADMIN_VARIABLES)
        rt = dict(known)
        rt.update(self.rt_admin)
        for name, value in self.admindb.rows(
                "SELECT variable_name, variable_value FROM main.global_variables WHERE variable_name LIKE 'admin-%'"):
            name = _text(name)
            if name in known and name != "admin-version":
                rt[name] = _text(value)
        self.rt_admin = {name: rt[name] for name, _ in ADMIN_VARIABLES}
        # set_variable("admin_credentials"): a changed list replaces the old users in the
        # frontend array (compared case-insensitively, as ProxySQL does)
        for attr, name, hostgroup in (("admin_creds", "admin-admin_credentials", ADMIN_HOSTGROUP),
                                      ("stats_creds", "admin-stats_credentials", STATS_HOSTGROUP)):
            value = self.rt_admin[name]
            if not value or value.lower() == self.creds_text.get(attr, "").lower():
                continue
            self.auth.delete_credentials(getattr(self, attr))
            new = self._parse_credentials(value)
            self.auth.add_credentials(new, hostgroup)
            if PGSQL_MODULE:                # ProxySQL_Admin::set_variable: GloPgAuth gets them too
                self.pg_auth.delete_credentials(getattr(self, attr))
                self.pg_auth.add_credentials(new, hostgroup)
            setattr(self, attr, new)
            self.creds_text[attr] = value
        rows = sorted((n, v) for n, v in self.rt_admin.items() if n not in ADMIN_CHECKSUM_EXCLUDED)
        self._set_checksum("admin_variables", runtime_checksum_text(raw_checksum(rows)), bump, peer)

    @staticmethod
    def _parse_credentials(value):
        """'user:pass;user:pass' -> [(user, pass)] (c_split_2 at the first ':')."""
        creds = []
        for item in value.split(";"):
            if item:
                user, _, password = item.partition(":")
                creds.append((user, password))
        return creds


    def load_mysql_variables_to_runtime(self, bump=True, peer=None):
        known = dict(MYSQL_VARIABLES)
        rt = dict(known)
        rt.update(self.rt_mysql)
        for name, value in self.admindb.rows(
                "SELECT variable_name, variable_value FROM main.global_variables WHERE variable_name LIKE 'mysql-%'"):
            name = _text(name)
            if name in known:
                rt[name] = _text(value)
        self.rt_mysql = {name: rt[name] for name, _ in MYSQL_VARIABLES}
        rows = sorted((n, v) for n, v in self.rt_mysql.items() if n not in MYSQL_CHECKSUM_EXCLUDED)
        defaults = sorted((n, v) for n, v in MYSQL_VARIABLES if n not in MYSQL_CHECKSUM_EXCLUDED)
        value = (MYSQL_VARIABLES_DEFAULT_CHECKSUM if rows == defaults
                 else runtime_checksum_text(raw_checksum(rows)))
        self._set_checksum("mysql_variables", value, bump, peer)

    def load_mysql_servers_to_runtime(self, bump=True, runtime_rows=None, peer=None, only_runtime=False):
        """LOAD MYSQL SERVERS TO RUNTIME.  A cluster pull passes the peer's runtime servers
        (runtime_rows) and its checksums {module: (checksum, epoch)}: the epoch of a module
        whose new checksum equals the peer's is the peer's (update_glovars_checksum_with_peers);
        only_runtime commits the runtime servers alone (pull_runtime_mysql_servers_from_peer)."""
        db = self.admindb
        peer = peer or {}
        self.hgm.commit(runtime_rows if runtime_rows is not None
                        else db.rows("SELECT %s FROM main.mysql_servers" % MYSQL_SERVERS_COLUMNS))
        if not only_runtime:
            self.servers_v2_rows = db.rows(MYSQL_SERVERS_V2_QUERY)
            for table, order in SERVERS_V2_TABLES:
                self.rt_tables[table] = db.rows("SELECT * FROM main.%s ORDER BY %s" % (table, order))
            v2 = servers_v2_checksum([self.servers_v2_rows] + [self.rt_tables[t] for t, _ in SERVERS_V2_TABLES])
            self._set_checksum("mysql_servers_v2", runtime_checksum_text(v2), bump, peer.get("mysql_servers_v2"))
        self._set_checksum("mysql_servers", runtime_checksum_text(raw_checksum(self.hgm.cluster_rows())), bump,
                           peer.get("mysql_servers"))

    def save_mysql_servers_to_memory(self):
        db = self.admindb
        db.exec("DELETE FROM main.mysql_servers")
        self._insert("main.mysql_servers", self.hgm.cluster_rows())
        for table in SERVERS_AUX_TABLES:
            db.exec("DELETE FROM main.%s" % table)
            self._insert("main." + table, self.rt_tables.get(table, []))

    def load_mysql_users_to_runtime(self, bump=True, peer=None):
        """LOAD MYSQL USERS TO RUNTIME; a cluster pull passes the peer's (checksum, epoch), which
        the module then takes as they are (__refresh_users with a resultset)."""
        rows = self.admindb.rows(
            "SELECT username, password, use_ssl, default_hostgroup, default_schema, schema_locked, "
            "transaction_persistent, fast_forward, backend, frontend, max_connections, attributes, comment "
            "FROM main.mysql_users WHERE active = 1 AND default_hostgroup >= 0")
        # what PROXY_SELECT ... FROM runtime_mysql_users answers a peer: the rows as loaded, NULL as ''
        self.current_users = [tuple(b"" if v is None else v for v in r) for r in rows]
        inactive = [(role, _text(u)) for role in ("backend", "frontend") for (u,) in self.admindb.rows(
            "SELECT username FROM main.mysql_users WHERE %s=1 AND active=0" % role)]
        self.auth.refresh(rows, admin_users=((self.admin_creds, ADMIN_HOSTGROUP),
                                             (self.stats_creds, STATS_HOSTGROUP)), inactive=inactive)
        value = peer[0] if peer else runtime_checksum_text(self.auth.checksum())
        self._set_checksum("mysql_users", value, bump, peer)

    def save_mysql_users_to_memory(self):
        self.admindb.exec("UPDATE main.mysql_users SET active=0")
        for row in self.auth.dump():
            self.admindb.exec("INSERT OR REPLACE INTO main.mysql_users (%s) VALUES (%s)"
                              % (MYSQL_USERS_COLUMNS, ", ".join(sql_literal(v) for v in row)))

    # -- 3.0: the PgSQL module (lib/ProxySQL_Admin.cpp, Admin_Handler.cpp, Admin_FlushVariables.cpp
    #    of sysown/proxysql v3.0, the branch the recorded pre-release was built from) ----------------

    def load_pgsql_variables_to_runtime(self):
        """flush_pgsql_variables___database_to_runtime: the known pgsql-* rows of memory become the
        runtime values; its checksum code is commented out in v3.0, so runtime_checksums_values'
        pgsql_variables row does not move (checksum '', version 0)."""
        known = dict(PGSQL_VARIABLES)
        rt = dict(known)
        rt.update(self.rt_pgsql)
        for name, value in self.admindb.rows(
                "SELECT variable_name, variable_value FROM main.global_variables WHERE variable_name LIKE 'pgsql-%'"):
            name = _text(name)
            if name in known:
                rt[name] = _text(value)
        self.rt_pgsql = {name: rt[name] for name, _ in PGSQL_VARIABLES}

    def load_pgsql_servers_to_runtime(self, bump=True):
        """load_pgsql_servers_to_runtime + PgSQL_HostGroups_Manager::commit: the servers in (hostgroup_id,
        hostname, port) order, the replication hostgroups without a writer that is another pair's
        reader, the hostgroup attributes; then the pgsql_servers_v2 checksum (commit always bumps it;
        only GLOBAL_CHECKSUM() shows it) and the pgsql_servers one (a hash of the runtime servers as
        a cluster peer would see them, SHUNNED as ONLINE, no OFFLINE_HARD)."""
        db = self.admindb
        self.pg_hgm.commit(db.rows("SELECT %s FROM main.pgsql_servers ORDER BY hostgroup_id, hostname, port"
                                   % PGSQL_SERVERS_COLUMNS.replace(" ", "")))
        self.rt_tables["pgsql_replication_hostgroups"] = db.rows(
            "SELECT a.* FROM pgsql_replication_hostgroups a LEFT JOIN pgsql_replication_hostgroups b "
            "ON a.writer_hostgroup=b.reader_hostgroup WHERE b.reader_hostgroup IS NULL ORDER BY writer_hostgroup")
        self.rt_tables["pgsql_hostgroup_attributes"] = db.rows(
            "SELECT * FROM pgsql_hostgroup_attributes ORDER BY hostgroup_id")
        v2 = servers_v2_checksum([db.rows(PGSQL_SERVERS_V2_QUERY)] +
                                 [self.rt_tables[t] for t in PGSQL_SERVERS_AUX_TABLES])
        self._set_checksum("pgsql_servers_v2", runtime_checksum_text(v2), True)
        self._set_checksum("pgsql_servers", runtime_checksum_text(raw_checksum(self.pg_hgm.cluster_rows())), bump)

    def save_pgsql_servers_to_memory(self):
        """save_pgsql_servers_runtime_to_database(false): main's three tables replaced by runtime."""
        db = self.admindb
        db.exec("DELETE FROM main.pgsql_servers")
        self._insert("main.pgsql_servers", self.pg_hgm.runtime_rows())
        for table in PGSQL_SERVERS_AUX_TABLES:
            db.exec("DELETE FROM main.%s" % table)
            self._insert("main." + table, self.rt_tables.get(table, []))

    def load_pgsql_users_to_runtime(self, bump=True):
        """init_pgsql_users -> __refresh_pgsql_users: inactive rows' accounts deleted, admin and stats
        credentials added as frontends, the active rows with hostgroup >= 0 added, the rest removed;
        the pgsql_users checksum is recomputed, version + 1 and epoch now."""
        rows = self.admindb.rows(
            "SELECT username,password,use_ssl,default_hostgroup,transaction_persistent,fast_forward,backend,frontend,"
            "max_connections,attributes,comment FROM main.pgsql_users WHERE active=1 AND default_hostgroup>=0")
        inactive = [(role, _text(u)) for role in ("backend", "frontend") for (u,) in self.admindb.rows(
            "SELECT username FROM main.pgsql_users WHERE %s=1 AND active=0" % role)]
        self.pg_auth.refresh(rows, admin_users=((self.admin_creds, ADMIN_HOSTGROUP),
                                                (self.stats_creds, STATS_HOSTGROUP)), inactive=inactive)
        self._set_checksum("pgsql_users", runtime_checksum_text(self.pg_auth.checksum()), bump)

    def save_pgsql_users_to_memory(self):
        """save_pgsql_users_runtime_to_database(false): every row set active=0, then one REPLACE per
        runtime account, frontends (backend=0, frontend=1) then backends (1, 0): a user that is both
        becomes two rows in memory (recorded, step 29)."""
        self.admindb.exec("UPDATE main.pgsql_users SET active=0")
        for row in self.pg_auth.dump():
            self.admindb.exec("REPLACE INTO main.pgsql_users (%s) VALUES (%s)"
                              % (PGSQL_USERS_COLUMNS, ", ".join(sql_literal(v) for v in row)))

    def load_simple_to_runtime(self, module, bump=True):
        db = self.admindb
        for table in SIMPLE_MODULE_TABLES[module]:
            self.rt_tables[table] = db.rows("SELECT * FROM main.%s" % table)
        if module == "PROXYSQL SERVERS":
            h = raw_checksum(db.rows("SELECT hostname, port, weight, comment FROM main.proxysql_servers "
                                     "ORDER BY hostname, port"))
            self._set_checksum("proxysql_servers", runtime_checksum_text(h), bump)
            if self.cluster is not None:
                self.cluster.load_servers(self.rt_tables["proxysql_servers"])
        elif module == "MYSQL QUERY RULES":
            # not ProxySQL's exact algorithm (no query rules were recorded): a hash of both tables
            h1 = raw_checksum(db.rows("SELECT * FROM main.mysql_query_rules ORDER BY rule_id"))
            h2 = raw_checksum(db.rows("SELECT * FROM main.mysql_query_rules_fast_routing "
                                      "ORDER BY username, schemaname, flagIN"))
            h = spooky128(struct.pack("<QQ", h1, h2), 19, 3)[0] if (h1 or h2) else 0
            self._set_checksum("mysql_query_rules", runtime_checksum_text(h), bump)
        elif module in PGSQL_MODULES:
            # not ProxySQL's algorithm (no pgsql query rules were recorded): a hash of the tables
            hashes = [raw_checksum(db.rows("SELECT * FROM main.%s ORDER BY 1" % t)) for t in SIMPLE_MODULE_TABLES[module]]
            h = spooky128(struct.pack("<%dQ" % len(hashes), *hashes), 19, 3)[0] if any(hashes) else 0
            self._set_checksum(PGSQL_MODULES[module][0], runtime_checksum_text(h), bump)

    def save_simple_to_memory(self, module):
        for table in SIMPLE_MODULE_TABLES[module]:
            self.admindb.exec("DELETE FROM main.%s" % table)
            self._insert("main." + table, self.rt_tables.get(table, []))

    def _module_tables(self, module):
        if module == "MYSQL SERVERS":
            return ("mysql_servers",) + SERVERS_AUX_TABLES
        if module == "MYSQL USERS":
            return ("mysql_users",)
        if module == "PGSQL SERVERS":
            return PGSQL_SERVERS_TABLES
        if module == "PGSQL USERS":
            return ("pgsql_users",)
        return SIMPLE_MODULE_TABLES[module]

    def disk_to_memory(self, module):
        db = self.admindb
        if module in VARIABLE_MODULES:
            prefix = VARIABLE_MODULES[module] + "%"
            db.exec("INSERT OR REPLACE INTO main.global_variables SELECT * FROM disk.global_variables "
                    "WHERE variable_name LIKE '%s'" % prefix)
            return
        for table in self._module_tables(module):
            db.exec("DELETE FROM main.%s" % table)
            db.exec("INSERT INTO main.%s SELECT * FROM disk.%s" % (table, table))

    def memory_to_disk(self, module):
        db = self.admindb
        with db.transaction():
            if module in VARIABLE_MODULES:
                prefix = VARIABLE_MODULES[module] + "%"
                db.exec("INSERT OR REPLACE INTO disk.global_variables SELECT * FROM main.global_variables "
                        "WHERE variable_name LIKE '%s'" % prefix)
                return
            for table in self._module_tables(module):
                db.exec("DELETE FROM disk.%s" % table)
                db.exec("INSERT INTO disk.%s SELECT * FROM main.%s" % (table, table))

    def to_runtime(self, module, peer=None):
        if module == "MYSQL SERVERS":
            self.load_mysql_servers_to_runtime()
        elif module == "MYSQL USERS":
            self.load_mysql_users_to_runtime()
        elif module == "ADMIN VARIABLES":
            self.load_admin_variables_to_runtime(peer=peer)
        elif module == "MYSQL VARIABLES":
            self.load_mysql_variables_to_runtime(peer=peer)
        elif module == "PGSQL SERVERS":
            self.load_pgsql_servers_to_runtime()
        elif module == "PGSQL USERS":
            self.load_pgsql_users_to_runtime()
        elif module == "PGSQL VARIABLES":
            self.load_pgsql_variables_to_runtime()
        else:
            self.load_simple_to_runtime(module)

    def runtime_to_memory(self, module):
        if module == "MYSQL SERVERS":
            self.save_mysql_servers_to_memory()
        elif module == "MYSQL USERS":
            self.save_mysql_users_to_memory()
        elif module == "PGSQL SERVERS":
            self.save_pgsql_servers_to_memory()
        elif module == "PGSQL USERS":
            self.save_pgsql_users_to_memory()
        elif module in VARIABLE_MODULES:
            values = {"ADMIN VARIABLES": self.rt_admin, "MYSQL VARIABLES": self.rt_mysql}.get(module, self.rt_pgsql)
            for name, value in values.items():
                self.admindb.exec("INSERT OR REPLACE INTO main.global_variables VALUES (%s, %s)"
                                  % (sql_literal(name), sql_literal(value)))
        else:
            self.save_simple_to_memory(module)

    def from_config(self, module):
        # the only config ProxySQL gets here is the command line (admin_credentials, mysql_ifaces)
        if module in VARIABLE_MODULES:
            return self._read_config_variables(VARIABLE_MODULES[module])
        if module == "PROXYSQL SERVERS":
            for row in self.cnf_proxysql_servers:
                self.admindb.exec("INSERT OR REPLACE INTO main.proxysql_servers VALUES (%s)"
                                  % ", ".join(sql_literal(v) for v in row))
            return len(self.cnf_proxysql_servers)
        return 0

    def _load_save_commands(self):
        """Every accepted spelling (ProxySQL matches the whitespace-collapsed, upper-cased text)."""
        cmds = {}
        modules = ["MYSQL SERVERS", "MYSQL USERS", "ADMIN VARIABLES", "MYSQL VARIABLES"] + list(SIMPLE_MODULE_TABLES)
        if PGSQL_MODULE:       # Admin_Handler.cpp (v3.0): the same spellings as for MYSQL
            modules += ["PGSQL SERVERS", "PGSQL USERS", "PGSQL VARIABLES"]
        for m in modules:
            for form in ("LOAD %s TO RUNTIME", "LOAD %s TO RUN", "LOAD %s FROM MEMORY", "LOAD %s FROM MEM"):
                cmds[form % m] = (self.to_runtime, m)
            for form in ("SAVE %s TO MEMORY", "SAVE %s TO MEM", "SAVE %s FROM RUNTIME", "SAVE %s FROM RUN"):
                cmds[form % m] = (self.runtime_to_memory, m)
            for form in ("LOAD %s TO MEMORY", "LOAD %s TO MEM", "LOAD %s FROM DISK"):
                cmds[form % m] = (self.disk_to_memory, m)
            for form in ("SAVE %s FROM MEMORY", "SAVE %s FROM MEM", "SAVE %s TO DISK"):
                cmds[form % m] = (self.memory_to_disk, m)
            if m != "MYSQL FIREWALL":
                cmds["LOAD %s FROM CONFIG" % m] = (self.from_config, m)
        return cmds

    # -- runtime_* and stats tables, regenerated when a query names them --------

    def _insert(self, table, rows):
        for row in rows:
            self.admindb.exec("INSERT INTO %s VALUES (%s)" % (table, ", ".join(sql_literal(v) for v in row)))

    def replace_main_tables(self, tables):
        """A cluster pull's writes: for each (table, columns, rows) DELETE FROM main.table and
        INSERT the rows, in one SQLite transaction (one admin lock hold: between client queries)."""
        db = self.admindb
        with db.transaction():
            for table, columns, rows in tables:
                db.exec("DELETE FROM main.%s" % table)
                cols = "" if columns == "*" else " (%s)" % columns
                for row in rows:
                    db.exec("INSERT INTO main.%s%s VALUES (%s)" % (table, cols, ", ".join(sql_literal(v) for v in row)))

    def _replace_table(self, table, rows):
        self.admindb.exec("DELETE FROM %s" % table)
        self._insert(table, rows)

    def refresh(self, q, admin):
        """GenericRefreshStatistics: case-sensitive substring tests on the normalized query."""
        if "stats_mysql_connection_pool_reset" in q:
            self._replace_table("stats.stats_mysql_connection_pool_reset", self.hgm.pool_rows())
        elif "stats_mysql_connection_pool" in q:
            self._replace_table("stats.stats_mysql_connection_pool", self.hgm.pool_rows())
        if "stats_mysql_global" in q or q.upper().startswith("SHOW MYSQL STATUS"):
            self._replace_table("stats.stats_mysql_global", self._stats_global())
        if PGSQL_MODULE and "stats_pgsql_connection_pool_reset" in q:
            self._replace_table("stats.stats_pgsql_connection_pool_reset", self.pg_hgm.pool_rows())
        elif PGSQL_MODULE and "stats_pgsql_connection_pool" in q:
            self._replace_table("stats.stats_pgsql_connection_pool", self.pg_hgm.pool_rows())
        if PGSQL_MODULE and "stats_pgsql_users" in q:
            self._replace_table("stats.stats_pgsql_users",
                                [(a.username, 0, a.max_connections) for a in self.pg_auth.arrays["frontend"]
                                 if a.default_hostgroup >= 0])
        if "stats_pgsql_global" in q and PGSQL_MODULE:
            self._replace_table("stats.stats_pgsql_global", [("Client_Connections_connected", "0"),
                                                             ("Client_Connections_created", "0")])
        if "stats_mysql_processlist" in q:
            self._replace_table("stats.stats_mysql_processlist",
                                self.frontend.processlist() if self.frontend is not None else [])
        if "stats_mysql_users" in q:
            self._replace_table("stats.stats_mysql_users",
                                [(a.username, 0, a.max_connections) for a in self.auth.arrays["frontend"]
                                 if a.default_hostgroup >= 0])
        if "stats_proxysql_servers_checksums" in q and self.cluster is not None:
            self._replace_table("stats.stats_proxysql_servers_checksums", self.cluster.stats_checksums())
        if "stats_memory_metrics" in q:
            self._replace_table("stats.stats_memory_metrics", [("SQLite3_memory_bytes", "0"),
                                                               ("jemalloc_allocated", "0")])
        if not admin:
            return
        if "global_variables" in q:
            self._replace_table("main.runtime_global_variables",
                                list(self.rt_admin.items()) + list(self.rt_mysql.items()) + list(self.rt_pgsql.items()))
        if "runtime_" not in q:
            return
        if any(("runtime_" + t) in q for t in ("mysql_servers",) + SERVERS_AUX_TABLES):
            self._replace_table("main.runtime_mysql_servers", self.hgm.runtime_rows())
            for table in SERVERS_AUX_TABLES:
                self._replace_table("main.runtime_" + table, self.rt_tables.get(table, []))
        if "runtime_mysql_users" in q:
            self._replace_table("main.runtime_mysql_users", self.auth.dump())
        if PGSQL_MODULE and any(("runtime_" + t) in q for t in PGSQL_SERVERS_TABLES):
            self._replace_table("main.runtime_pgsql_servers", self.pg_hgm.runtime_rows())
            for table in PGSQL_SERVERS_AUX_TABLES:
                self._replace_table("main.runtime_" + table, self.rt_tables.get(table, []))
        if PGSQL_MODULE and "runtime_pgsql_users" in q:
            self._replace_table("main.runtime_pgsql_users", self.pg_auth.dump())
        for module, tables in SIMPLE_MODULE_TABLES.items():
            for table in tables:
                if ("runtime_" + table) in q:
                    self._replace_table("main.runtime_" + table, self.rt_tables.get(table, []))
        if "runtime_checksums_values" in q:
            self._replace_table("main.runtime_checksums_values",
                                [(n,) + tuple(self.checksums[n]) for n in CHECKSUM_MODULES])

    def _stats_global(self):
        values = dict.fromkeys(STATS_GLOBAL_NAMES, "0")
        values["ProxySQL_Uptime"] = str(int(time.time() - self.started))
        values["Servers_table_version"] = str(self.hgm.commits)
        values["MySQL_Thread_Workers"] = self.rt_mysql.get("mysql-threads", "0")
        if self.frontend is not None:
            values.update((k, str(v)) for k, v in self.frontend.counters().items())
        return sorted(values.items())

    # -- the admin session handler -------------------------------------------------

    RE_MAX_ALLOWED_PACKET = re.compile(r"^SELECT\s+@@max_allowed_packet\s*", re.I)
    RE_SELECT_VAR = re.compile(r"^SELECT\s+@@[0-9A-Za-z_-]+\s*", re.I)
    RE_SELECT_VAR_REWRITE = re.compile(r"^(\w+)  *@@([0-9A-Za-z_-]+) *")
    RE_SHOW_VARS_WHERE = re.compile(r"SHOW\s+VARIABLES\s+WHERE", re.I)
    RE_SHOW_VARS_LIKE = re.compile(r"SHOW\s+VARIABLES\s+LIKE", re.I)
    RE_SHOW_VARS_WHERE_REWRITE = re.compile(r"([Ss][Hh][Oo][Ww]\s+[Vv][Aa][Rr][Ii][Aa][Bb][Ll][Ee][Ss]\s+[Ww][Hh][Ee][Rr][Ee])")
    RE_SHOW_VARS_LIKE_REWRITE = re.compile(r"([Ss][Hh][Oo][Ww]\s+[Vv][Aa][Rr][Ii][Aa][Bb][Ll][Ee][Ss]\s+[Ll][Ii][Kk][Ee])")
    OK_PREFIXES = ("BEGIN", "START TRANSACTION", "COMMIT", "ROLLBACK", "SET CHARACTER_SET_RESULTS",
                   "SET SQL_AUTO_IS_NULL", "SET NAMES", "SET AUTOCOMMIT")
    MYSQLDUMP_PREFIXES = ("/*!40014 SET ", "/*!40101 SET ", "/*!40103 SET ", "/*!40111 SET ", "/*!40000 ALTER TABLE",
                          "/*!40100 SET @@SQL_MODE='' */", "/*!40103 SET TIME_ZONE=", "LOCK TABLES", "UNLOCK TABLES",
                          "SET SQL_QUOTE_SHOW_CREATE=1", "SET SESSION character_set_results", "SET SQL_SAFE_UPDATES=1")

    def handle_query(self, sess, raw):
        """Answer one COM_QUERY (raw = its payload).  Called with self.lock held."""
        raw = raw.split(b"\0", 1)[0]
        text = raw.decode("utf-8", "surrogateescape")
        nsp = remove_spaces(text)
        if nsp and not nsp.strip("; "):
            emulate_crash("a query made only of ';' crashes ProxySQL 2.7.1's admin (SIGSEGV)")
        nsp = nsp.rstrip("; ")             # "fix bug #925": trailing ';' and spaces
        up = nsp.upper()
        query = raw                        # what goes to SQLite unless rewritten

        # handled by the session before the admin module sees the query
        if up == "SELECT GLOBAL_CHECKSUM()":
            return Reply.rows([b"CHECKSUM"], [(str(self.global_checksum()).encode(),)],
                              coltype="longlong", status=GLOBAL_CHECKSUM_STATUS)
        if up == "SELECT CONNECTION_ID()":
            return Reply.rows([b"CONNECTION_ID()"], [(b"0",)])
        if up.startswith("SELECT $$"):
            return Reply.admin_err("Unknown column '$$' in 'field list'", code=1054)
        if up.startswith(self.OK_PREFIXES):
            return Reply.ok()
        if not sess.stats and up.startswith("PROXY_SELECT "):
            reply = self.cluster_query(up)
            if reply is not None:
                return reply
        if not sess.stats and up.startswith("PROXYSQL CLUSTER_NODE_UUID "):
            return Reply.ok()               # a peer's monitor introduces itself

        self.refresh(nsp, admin=not sess.stats)
        if up.startswith("SHOW GLOBAL VARIABLES LIKE 'READ_ONLY'"):
            ro = "ON" if self.rt_admin.get("admin-read_only") == "true" else "OFF"
            return Reply.rows([b"Variable_name", b"Value"], [(b"read_only", ro.encode())])
        if not sess.stats:
            if len(nsp) > 5 and up.startswith(("SAVE ", "LOAD ")):
                cmd = self.load_save.get(up)
                if cmd is None:
                    return self.run_sql(sess, query)       # near "LOAD": syntax error
                affected = cmd[0](cmd[1])
                return Reply.ok(affected=affected or 0)
            if up == "PROXYSQL FLUSH LOGS":
                return Reply.ok()
            if up in ("PROXYSQL PAUSE", "PROXYSQL RESUME"):
                return self.command_pause_resume(up)
            if nsp.startswith(self.MYSQLDUMP_PREFIXES) or up.startswith("USE "):
                return Reply.ok()

        rewritten = None
        if up == "SELECT @@VERSION_COMMENT LIMIT 1":
            rewritten = "SELECT '(ProxySQL Admin Module)'"
        elif up == "SELECT DATABASE(), USER() LIMIT 1":
            rewritten = "SELECT \"admin\" AS 'DATABASE()', \"%s\" AS 'USER()'" % sess.user
        elif up.startswith("SELECT @@VERSION"):
            rewritten = "SELECT '%s' AS '@@version'" % PROXYSQL_VERSION
        elif up.startswith("SELECT VERSION()"):
            rewritten = "SELECT '%s' AS 'version()'" % PROXYSQL_VERSION
        elif self.RE_MAX_ALLOWED_PACKET.search(nsp):
            rewritten = self.RE_SELECT_VAR_REWRITE.sub(
                "SELECT variable_value AS '@@max_allowed_packet' FROM global_variables "
                "WHERE variable_name='mysql-max_allowed_packet'", nsp, count=1)
        elif self.RE_SELECT_VAR.search(nsp):
            rewritten = self.RE_SELECT_VAR_REWRITE.sub(
                r"SELECT variable_value AS '@@\2' FROM global_variables WHERE variable_name='\2'", nsp, count=1)
        elif self.RE_SHOW_VARS_WHERE.search(nsp):
            rewritten = self.RE_SHOW_VARS_WHERE_REWRITE.sub(
                "SELECT variable_name AS Variable_name, variable_value AS Value FROM global_variables WHERE",
                nsp, count=1)
        elif self.RE_SHOW_VARS_LIKE.search(nsp):
            rewritten = self.RE_SHOW_VARS_LIKE_REWRITE.sub(
                "SELECT variable_name AS Variable_name, variable_value AS Value FROM global_variables "
                "WHERE variable_name LIKE", nsp, count=1)
        elif up.startswith("SET "):
            return self.command_set(sess, nsp)
        elif up.startswith("CHECKSUM "):
            reply = self.command_checksum(up)
            if reply is not None:
                return reply
        elif up.startswith("SHOW "):
            rewritten = self.command_show(sess, nsp, up)
        elif up == "SELECT DATABASE()":
            rewritten = "SELECT \"%s\" AS 'DATABASE()'" % ("stats" if sess.stats else "admin")
        if rewritten is None and sess.stats and up.startswith(("PRAGMA", "ATTACH")):
            return Reply.admin_err("Command not allowed")
        if rewritten is not None:
            query = rewritten.encode("utf-8", "surrogateescape")
        return self.run_sql(sess, query)

    def run_sql(self, sess, query):
        if sess.stats:
            db = self.statsdb
            db.exec("PRAGMA query_only = ON")
            try:
                r = db.run(query)
            finally:
                db.exec("PRAGMA query_only = OFF")
        elif self.rt_admin.get("admin-read_only") == "true":
            self.admindb.exec("PRAGMA query_only = ON")
            try:
                r = self.admindb.run(query)
            finally:
                self.admindb.exec("PRAGMA query_only = OFF")
        else:
            r = self.admindb.run(query)
        if r.error is not None:
            return Reply.admin_err(r.error)
        if r.columns is None:
            return Reply.ok(affected=r.affected)
        return Reply.rows(r.columns, r.rows)

    def cluster_query(self, up):
        """The CLUSTER_QUERY_* a peer sends, answered from the runtime structures (prefix match,
        as ProxySQL_Admin does); None for anything else (then SQLite says near "PROXY_SELECT")."""
        def rows(columns, data):
            return Reply.rows([c.encode() for c in columns], [tuple(None if v is None else _as_bytes(v) for v in r)
                                                              for r in data])
        servers_columns = MYSQL_SERVERS_COLUMNS.split(", ")
        if up.startswith(CLUSTER_QUERY_RUNTIME_MYSQL_SERVERS.upper()):
            return rows(servers_columns, self.hgm.cluster_rows())
        if up.startswith(CLUSTER_QUERY_MYSQL_SERVERS_V2.upper()):
            return rows(servers_columns, self.servers_v2_rows)
        for query, table in CLUSTER_QUERY_TABLES:
            if up.startswith(query.upper()):
                columns = [_text(c) for c in self.admindb.run("SELECT * FROM main.%s LIMIT 0" % table).columns]
                return rows(columns, self.rt_tables.get(table, []))
        if up.startswith(CLUSTER_QUERY_MYSQL_USERS.upper()):
            return rows(MYSQL_USERS_COLUMNS.replace("active, ", "").split(", "), self.current_users)
        return None

    def command_set(self, sess, nsp):
        """admin_handler_command_set: SET var=value becomes an UPDATE of global_variables."""
        name, _, value = nsp[4:].partition("=")
        name = name.strip(" ")
        if name == "mysql-init_connect":
            return Reply.admin_err("ERROR: Global variable '%s' is not configurable using SET command. "
                                   "You must run UPDATE global_variables" % name)
        known = dict(ADMIN_VARIABLES + MYSQL_VARIABLES + PGSQL_VARIABLES)
        if name not in known:
            msg = ("ERROR: Unknown global variable: '%s'." % name).encode("utf-8", "surrogateescape")
            return Reply.ok(info=msg)
        return self.run_sql(sess, ("UPDATE global_variables SET variable_value=%s WHERE variable_name='%s'"
                                   % (value, name)).encode("utf-8", "surrogateescape"))

    def command_checksum(self, up):
        target = {
            "CHECKSUM DISK MYSQL SERVERS": ("disk", "mysql_servers ORDER BY hostgroup_id, hostname, port", "MYSQL SERVERS"),
            "CHECKSUM DISK MYSQL USERS": ("disk", "mysql_users ORDER BY username", "MYSQL USERS"),
            "CHECKSUM DISK MYSQL QUERY RULES": ("disk", "mysql_query_rules ORDER BY rule_id", "MYSQL QUERY RULES"),
            "CHECKSUM DISK MYSQL VARIABLES": ("disk", "global_variables WHERE variable_name LIKE 'mysql-%' "
                                                      "ORDER BY variable_name", "MYSQL VARIABLES"),
            "CHECKSUM DISK MYSQL REPLICATION HOSTGROUPS": ("disk", "mysql_replication_hostgroups ORDER BY writer_hostgroup",
                                                           "MYSQL REPLICATION HOSTGROUPS"),
        }.get(up)
        if target is None:
            for prefix in ("CHECKSUM MEMORY ", "CHECKSUM MEM ", "CHECKSUM "):
                if up.startswith(prefix):
                    what = up[len(prefix):]
                    target = {
                        "MYSQL SERVERS": ("main", "mysql_servers ORDER BY hostgroup_id, hostname, port"),
                        "MYSQL USERS": ("main", "mysql_users ORDER BY username"),
                        "MYSQL QUERY RULES": ("main", "mysql_query_rules ORDER BY rule_id"),
                        "MYSQL VARIABLES": ("main", "global_variables WHERE variable_name LIKE 'mysql-%' "
                                                    "ORDER BY variable_name"),
                        "MYSQL REPLICATION HOSTGROUPS": ("main", "mysql_replication_hostgroups "
                                                                 "ORDER BY writer_hostgroup"),
                    }.get(what)
                    if target is not None:
                        target = target + (what,)
                        break
        if target is None:
            return None                          # falls through to SQLite: near "CHECKSUM"
        schema, rest, label = target
        rows = self.admindb.rows("SELECT * FROM %s.%s" % (schema, rest))
        return Reply.rows([b"table", b"checksum"], [(label.encode(), checksum_text(raw_checksum(rows)).encode())])

    def command_show(self, sess, nsp, up):
        """The SHOW commands of the admin module; None lets SQLite report the syntax error."""
        if up.startswith("SHOW GLOBAL VARIABLES LIKE 'VERSION'"):
            return ("SELECT 'version' Variable_name, '%s' Value FROM global_variables "
                    "WHERE Variable_name='admin-version'" % PROXYSQL_VERSION)
        if up == "SHOW TABLES":
            return ("SELECT name AS tables FROM sqlite_master WHERE type='table' "
                    "AND name NOT IN ('sqlite_sequence')%s ORDER BY name"
                    % (" AND name NOT LIKE '%pgsql%'" if HIDE_PGSQL_TABLES else ""))
        if up == "SHOW CHARSET":
            return "SELECT Charset, Collation AS 'Default collation' FROM mysql_collations WHERE `Default`='Yes'"
        if up == "SHOW COLLATION":
            return "SELECT * FROM mysql_collations"
        if len(nsp) > 17 and up.startswith("SHOW TABLES FROM "):
            return ("SELECT name AS tables FROM %s.sqlite_master WHERE type='table' "
                    "AND name NOT IN ('sqlite_sequence') ORDER BY name" % nsp[17:])
        if len(nsp) > 17 and up.startswith("SHOW TABLES LIKE "):
            name = "".join(c for c in nsp[17:] if c not in "\\`'")
            return "SELECT name AS tables FROM sqlite_master WHERE type='table' AND name LIKE '%s'" % name
        if up == "SHOW MYSQL USERS":
            return "SELECT * FROM mysql_users ORDER BY username, active DESC, username ASC"
        if up == "SHOW MYSQL SERVERS":
            return "SELECT * FROM mysql_servers ORDER BY hostgroup_id, hostname, port"
        if up in ("SHOW GLOBAL VARIABLES", "SHOW ALL VARIABLES", "SHOW VARIABLES"):
            return ("SELECT variable_name AS Variable_name, variable_value AS Value FROM global_variables "
                    "ORDER BY variable_name")
        if up == "SHOW ADMIN VARIABLES":
            return ("SELECT variable_name AS Variable_name, variable_value AS Value FROM global_variables "
                    "WHERE variable_name LIKE 'admin-%' ORDER BY variable_name")
        if up == "SHOW MYSQL VARIABLES":
            return ("SELECT variable_name AS Variable_name, variable_value AS Value FROM global_variables "
                    "WHERE variable_name LIKE 'mysql-%' ORDER BY variable_name")
        if up == "SHOW MYSQL STATUS":
            return ("SELECT Variable_Name AS Variable_name, Variable_Value AS Value FROM stats_mysql_global "
                    "ORDER BY variable_name")
        if up.startswith("SHOW CREATE TABLE "):
            dbh, _, tbh = nsp[18:].partition(".")
            if not tbh:
                dbh, tbh = "main", dbh
            if len(tbh) >= 3 and tbh[0] == "`" and tbh[-1] == "`":
                tbh = tbh[1:-1]
            return ("SELECT name AS 'table' , REPLACE(REPLACE(sql,' , ', X'2C0A20202020'),"
                    "'CREATE TABLE %s (','CREATE TABLE %s ('||X'0A20202020') AS 'Create Table' "
                    "FROM %s.sqlite_master WHERE type='table' AND name='%s'" % (tbh, tbh, dbh, tbh))
        if up in ("SHOW DATABASES", "SHOW SCHEMAS"):
            return "PRAGMA DATABASE_LIST"
        if up == "SHOW FULL PROCESSLIST":
            return "SELECT * FROM stats_mysql_processlist"
        if up == "SHOW PROCESSLIST":
            return ("SELECT SessionID, user, db, hostgroup, command, time_ms, SUBSTR(info,0,100) info "
                    "FROM stats_mysql_processlist")
        return None

    # -- authentication --------------------------------------------------------

    def authenticate(self, user, salt, token):
        """The admin port's login (MySQL_Protocol process_pkt_handshake_response and
        MySQL_Session handler___status_CONNECTING_CLIENT): True for a stats session,
        False for an admin one, None when access is denied.

        Admin and stats credentials live in the frontend user array with hostgroups -2
        and -3, so a frontend mysql_users row of the same (case-sensitive) name replaces
        them at LOAD MYSQL USERS TO RUNTIME and that name can no longer log in (either
        password: the row's hostgroup is >= 0).  From the source, not recorded: a frontend
        user whose name starts with mysql-monitor_username is let in as admin (bug #492),
        and the monitor user that is no frontend user logs in as stats with
        mysql-monitor_password."""
        with self.lock:
            monitor_user = self.rt_mysql.get("mysql-monitor_username", "")
            account = self.auth.frontend(user)
            if account is None:
                if user == monitor_user and token and \
                        token == scramble_native(self.rt_mysql.get("mysql-monitor_password", ""), salt):
                    return True
                return None
            if not password_matches(account.password, salt, token):
                return None
            if account.default_hostgroup == STATS_HOSTGROUP:
                return True
            if account.default_hostgroup < 0 or user.startswith(monitor_user):
                return False
            return None

    def authenticate_frontend(self, user, salt, token):
        """The MySQL port's login: the frontend account (default_hostgroup >= 0) or None."""
        with self.lock:
            account = self.auth.frontend(user)
            if account is None or account.default_hostgroup < 0 or not password_matches(account.password, salt, token):
                return None
            return account

    def frontend_route(self, account):
        """(host, port, backend password) of the first ONLINE runtime server of the account's
        default_hostgroup, or None."""
        with self.lock:
            i = self.auth.index["backend"].get(account.username)
            arr = self.auth.arrays["backend"]
            backend = arr[i] if i is not None and i < len(arr) and arr[i].username == account.username else account
            for srv in self.hgm._sorted(self.hgm.servers()):
                if srv.hid == account.default_hostgroup and srv.status == ONLINE:
                    return srv.host, srv.port, backend.password
            return None

    def command_pause_resume(self, up):
        """PROXYSQL PAUSE / PROXYSQL RESUME (admin_handler_command_proxysql); 3.0 answers once for
        the MySQL module and once more for the PgSQL one."""
        reply = self._pause_resume_mysql(up)
        if not PAUSE_REPLIES_PER_MODULE:
            return reply
        pause = up == "PROXYSQL PAUSE"
        if self.pgsql_paused == pause:
            second = Reply.admin_err("ProxySQL PgSQL module is %s, impossible to %s"
                                     % (("already paused", "pause") if pause else ("not paused", "resume")))
        else:
            self.pgsql_paused = pause
            second = Reply.ok()
        return Reply("pair", replies=(reply, second))

    def _pause_resume_mysql(self, up):
        if up == "PROXYSQL PAUSE":
            if self.mysql_paused:
                return Reply.admin_err("ProxySQL MySQL module is already paused, impossible to pause")
            if self.frontend is not None:
                self.frontend.stop_listener()
            self.mysql_paused = True
            return Reply.ok()
        if not self.mysql_paused:
            return Reply.admin_err("ProxySQL MySQL module is not paused, impossible to resume")
        if self.frontend is not None:
            self.frontend.start_listener()
        self.mysql_paused = False
        return Reply.ok()

    # -- hooks used by the control API and the monitor -----------------------------

    def set_pool_used(self, hid, host, port, used):
        with self.lock:
            s = self.hgm.find(hid, host, port)
            if s is None:
                return None
            s.conn_used = used
            s.max_conn_used = max(s.max_conn_used, used)
            return (s.hid, s.host, s.port, STATUS_TEXT[s.status], s.conn_used, s.max_conn_used)


def emulate_crash(reason):
    """Die like the real process does (SIGSEGV), without leaving a core file."""
    sys.stderr.write("proxysql_admin double: emulating a crash: %s\n" % reason)
    sys.stderr.flush()
    try:
        import resource
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    except (ImportError, ValueError, OSError):
        pass
    try:
        os.kill(os.getpid(), signal.SIGSEGV)      # default action: terminate (Python sets no handler)
        time.sleep(1)
    finally:
        os._exit(139)


# ---------------------------------------------------------------------------
# 6. MySQL protocol
# ---------------------------------------------------------------------------

def lenenc_int(n):
    if n < 251:
        return bytes([n])
    if n < 1 << 16:
        return b"\xfc" + struct.pack("<H", n)
    if n < 1 << 24:
        return b"\xfd" + struct.pack("<I", n)[:3]
    return b"\xfe" + struct.pack("<Q", n)


def lenenc_str(b):
    return lenenc_int(len(b)) + b


def ok_payload(affected=0, status=STATUS, info=b""):
    # insert_id is always 0 and warnings 0; ProxySQL prefixes a non-empty info with its length
    p = b"\x00" + lenenc_int(affected) + lenenc_int(0) + struct.pack("<HH", status, 0)
    if info:
        p += lenenc_str(info)
    return p


def err_payload(code, message, sqlstate="28000"):
    return (b"\xff" + struct.pack("<H", code) + b"#" + sqlstate.encode()[:5]
            + message.encode("utf-8", "surrogateescape"))


def eof_payload(status=STATUS):
    return b"\xfe" + struct.pack("<HH", 0, status)


def column_payload(name, coltype=None):
    if coltype == "longlong":          # SELECT GLOBAL_CHECKSUM()
        spec = struct.pack("<HIBHB", 63, 31, TYPE_LONGLONG, 161, 0)
    else:                              # every SQLite column: VAR_STRING, utf8, length 15, NOT_NULL
        spec = struct.pack("<HIBHB", 33, 15, TYPE_VAR_STRING, 1, 31)
    return (lenenc_str(b"def") + lenenc_str(b"") + lenenc_str(b"") + lenenc_str(b"")
            + lenenc_str(name) + lenenc_str(b"") + b"\x0c" + spec + b"\0\0")


def scramble_native(password, salt):
    """mysql_native_password token: SHA1(pw) XOR SHA1(salt + SHA1(SHA1(pw)))."""
    if not password:
        return b""
    h1 = hashlib.sha1(password.encode("utf-8", "surrogateescape")).digest()
    h2 = hashlib.sha1(h1).digest()
    h3 = hashlib.sha1(salt + h2).digest()
    return bytes(a ^ b for a, b in zip(h1, h3))


def password_matches(stored, salt, token):
    """mysql_native_password check against a stored cleartext password or a '*'+SHA1(SHA1)
    hash (PPHR_7auth1); an empty token matches an empty password only."""
    if not token or not stored:
        return not token and not stored
    if stored[0] != "*":
        return scramble_native(stored, salt) == token
    try:
        double = bytes.fromhex(stored[1:])
    except ValueError:
        return False
    h1 = bytes(a ^ b for a, b in zip(token, hashlib.sha1(salt + double).digest()))
    return len(token) == 20 and hashlib.sha1(h1).digest() == double


class ConnectionClosed(Exception):
    pass


class ClientConnection:
    """One client of the admin port, served by its own thread."""

    def __init__(self, server, sock, peer):
        self.server, self.sock, self.peer = server, sock, peer
        self.tls = False
        self.seq = 0
        self.rbuf = b""
        self.session = None

    # -- packets ---------------------------------------------------------------

    def _read_exact(self, n):
        while len(self.rbuf) < n:
            # before the login no more than asked for: a TLS ClientHello may follow the SSLRequest
            chunk = self.sock.recv(65536 if self.session else n - len(self.rbuf))
            if not chunk:
                raise ConnectionClosed()
            self.rbuf += chunk
        data, self.rbuf = self.rbuf[:n], self.rbuf[n:]
        return data

    def read_packet(self):
        payload = b""
        while True:
            header = self._read_exact(4)
            length = header[0] | header[1] << 8 | header[2] << 16
            self.seq = (header[3] + 1) & 0xFF
            payload += self._read_exact(length)
            if length < 0xFFFFFF:
                return payload

    def packet(self, payload):
        """Frame one payload (split at 16 MB) with the running sequence number."""
        out = b""
        while True:
            chunk, payload = payload[:0xFFFFFF], payload[0xFFFFFF:]
            out += struct.pack("<I", len(chunk))[:3] + bytes([self.seq]) + chunk
            self.seq = (self.seq + 1) & 0xFF
            if len(chunk) < 0xFFFFFF:
                return out

    def send(self, *payloads):
        self.sock.sendall(b"".join(self.packet(p) for p in payloads))

    def send_reply(self, reply):
        if reply.kind == "pair":
            for r in reply.replies:          # each with the sequence id of a first answer
                self.seq = 1
                self.send_reply(r)
            return
        if reply.kind == "ok":
            self.send(ok_payload(reply.affected, STATUS, reply.info))
        elif reply.kind == "err":
            self.send(err_payload(reply.code, reply.message, reply.sqlstate))
        else:
            out = [lenenc_int(len(reply.columns))]
            out += [column_payload(c, reply.coltype) for c in reply.columns]
            out.append(eof_payload(reply.status))
            for row in reply.rows:
                out.append(b"".join(b"\xfb" if v is None else lenenc_str(v) for v in row))
            out.append(eof_payload(reply.status))
            self.send(*out)

    # -- connection phase --------------------------------------------------------

    def handshake(self):
        salt = bytes(secrets.choice(range(0x21, 0x7F)) for _ in range(20))
        caps = SERVER_CAPABILITIES
        greeting = (b"\x0a" + SERVER_VERSION.encode() + b"\0" + struct.pack("<I", self.server.next_thread_id())
                    + salt[:8] + b"\0" + struct.pack("<H", caps & 0xFFFF) + bytes([HANDSHAKE_CHARSET])
                    + struct.pack("<HH", HANDSHAKE_STATUS, caps >> 16) + bytes([21]) + b"\0" * 10
                    + salt[8:] + b"\0" + NATIVE_PLUGIN + b"\0")
        self.seq = 0
        self.send(greeting)
        resp = self.read_packet()
        if len(resp) < 32:
            raise ConnectionClosed()
        client_caps = struct.unpack_from("<I", resp, 0)[0]
        if client_caps & CLIENT_SSL and len(resp) == 32:
            context = getattr(self.server, "tls_context", None)
            if context is None:
                self.send(err_payload(1045, "ProxySQL Error: TLS is not supported by this test double"))
                raise ConnectionClosed()
            # SSLRequest: the TLS handshake, then the handshake response again, encrypted
            self.sock.settimeout(10)
            self.sock = context.wrap_socket(self.sock, server_side=True)
            self.sock.settimeout(None)
            self.tls = True
            resp = self.read_packet()
            if len(resp) < 32:
                raise ConnectionClosed()
            client_caps = struct.unpack_from("<I", resp, 0)[0]
        if client_caps & CLIENT_COMPRESS:
            self.send(err_payload(1045, "ProxySQL Error: compression is not supported by this test double"))
            raise ConnectionClosed()
        pos = 32
        end = resp.index(b"\0", pos)
        user = resp[pos:end].decode("utf-8", "surrogateescape")
        pos = end + 1
        if client_caps & CLIENT_PLUGIN_AUTH_LENENC:
            n = resp[pos]
            pos += 1
            if n == 0xFC:
                n = struct.unpack_from("<H", resp, pos)[0]
                pos += 2
        elif client_caps & CLIENT_SECURE_CONNECTION:
            n = resp[pos]
            pos += 1
        else:
            n = resp.index(b"\0", pos) - pos
        token = resp[pos:pos + n]
        pos += n if client_caps & (CLIENT_PLUGIN_AUTH_LENENC | CLIENT_SECURE_CONNECTION) else n + 1
        if client_caps & CLIENT_CONNECT_WITH_DB and pos < len(resp):
            end = resp.find(b"\0", pos)
            pos = len(resp) if end < 0 else end + 1
        plugin = NATIVE_PLUGIN
        if client_caps & CLIENT_PLUGIN_AUTH and pos < len(resp):
            end = resp.find(b"\0", pos)
            plugin = resp[pos:end if end >= 0 else len(resp)]
        if plugin != NATIVE_PLUGIN and client_caps & CLIENT_PLUGIN_AUTH:
            # e.g. caching_sha2_password: ask the client to switch to mysql_native_password
            self.send(b"\xfe" + NATIVE_PLUGIN + b"\0" + salt + b"\0")
            token = self.read_packet()
        stats = self.authenticate(user, salt, token)
        if stats is None:
            msg = "ProxySQL Error: Access denied for user '%s'@'%s' (using password: %s)" % (
                user, self.peer[0], "YES" if token else "NO")
            self.send(err_payload(1045, msg))
            raise ConnectionClosed()
        self.session = Session(user, stats, self.peer)
        self.session.tls = self.tls
        self.send(ok_payload(0, HANDSHAKE_STATUS))

    def authenticate(self, user, salt, token):
        return self.server.admin.authenticate(user, salt, token)

    # -- command phase -------------------------------------------------------------

    def serve(self):
        try:
            self.handshake()
            while True:
                pkt = self.read_packet()
                if not pkt:
                    raise ConnectionClosed()
                cmd = pkt[0]
                if cmd == COM_QUIT:
                    return
                if not self.command(cmd, pkt):
                    return
        except (ConnectionClosed, OSError, ValueError, IndexError, struct.error):
            pass                                 # gone, or not speaking the protocol: close
        finally:
            self.ended()
            try:
                self.sock.close()
            except OSError:
                pass

    def ended(self):
        """Called once the connection is over, before the socket is closed."""

    def command(self, cmd, pkt):
        """Answer one command packet; False closes the connection."""
        if cmd == COM_QUERY:
            return self.server.serve_query(self, pkt[1:])
        if cmd in (COM_PING, COM_INIT_DB):
            self.send(ok_payload(0, STATUS))
        elif cmd in (COM_FIELD_LIST, COM_STMT_PREPARE):
            self.send(err_payload(1045, "Command not supported"))
        elif cmd == COM_PROCESS_KILL:
            self.send(err_payload(9003, "Command not supported"))
        elif cmd == COM_RESET_CONNECTION:
            self.seq = 2                 # recorded: sequence number 2 instead of 1
            self.send(err_payload(1047, "Command not supported"))
        else:                            # COM_PROCESS_INFO, COM_DEBUG, unknown: no reply
            return False
        return True


class MySQLClientError(Exception):
    def __init__(self, message, code=2013, sqlstate="HY000"):
        super().__init__(message)
        self.code, self.sqlstate = code, sqlstate

    @classmethod
    def from_err(cls, pkt):
        """From an ERR packet (0xff, errno, '#', sqlstate, message)."""
        return cls(pkt[9:].decode("utf-8", "replace"), struct.unpack_from("<H", pkt, 1)[0],
                   pkt[4:9].decode("ascii", "replace"))


class MySQLClient:
    """The client side of the protocol, as much as the cluster (peers' admin ports) and the
    read_only monitor (MariaDB backends) need: protocol 41 login with mysql_native_password
    and text-protocol COM_QUERY (ProxySQL uses libmysqlclient for both)."""

    CAPS = (0x00000001 | 0x00000200 | 0x00002000 | 0x00008000 | 0x00080000)  # LONG_PASSWORD, 41, TRANS, SECURE, PLUGIN

    def __init__(self, host, port, user, password, timeout=1.0, read_timeout=10.0):
        """timeout: to connect (the cluster's MYSQL_OPT_CONNECT_TIMEOUT is 1 s); read_timeout:
        for each answer (the monitor's check timeouts)."""
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.settimeout(read_timeout)
        self.rbuf, self.seq = b"", 0
        try:
            greeting = self._read()
            if greeting[:1] == b"\xff":
                raise MySQLClientError(greeting[9:].decode("utf-8", "replace"))
            end = greeting.index(b"\0", 1)
            salt = greeting[end + 5:end + 13] + greeting[end + 32:end + 44]
            token = scramble_native(password, salt)
            self._write(struct.pack("<IIB", self.CAPS, 1 << 24, HANDSHAKE_CHARSET) + b"\0" * 23
                        + user.encode("utf-8", "surrogateescape") + b"\0" + bytes([len(token)]) + token
                        + NATIVE_PLUGIN + b"\0")
            reply = self._read()
            if reply[:1] == b"\xfe":                    # AuthSwitchRequest
                salt = reply[1:].split(b"\0", 1)[1].rstrip(b"\0")
                self._write(scramble_native(password, salt))
                reply = self._read()
            if reply[:1] != b"\x00":
                raise MySQLClientError(reply[9:].decode("utf-8", "replace"))
        except BaseException:
            self.close()
            raise

    def _read(self):
        while True:
            if len(self.rbuf) >= 4:
                n = int.from_bytes(self.rbuf[:3], "little")
                if len(self.rbuf) >= 4 + n:
                    self.seq = (self.rbuf[3] + 1) & 0xFF
                    pkt, self.rbuf = self.rbuf[4:4 + n], self.rbuf[4 + n:]
                    return pkt
            chunk = self.sock.recv(65536)
            if not chunk:
                raise MySQLClientError("connection closed by the peer")
            self.rbuf += chunk

    def _write(self, payload):
        self.sock.sendall(struct.pack("<I", len(payload))[:3] + bytes([self.seq]) + payload)
        self.seq = (self.seq + 1) & 0xFF

    @staticmethod
    def _lenenc(buf, pos):
        first = buf[pos]
        if first < 251:
            return first, pos + 1
        if first == 0xFB:
            return None, pos + 1
        size = {0xFC: 2, 0xFD: 3, 0xFE: 8}[first]
        return int.from_bytes(buf[pos + 1:pos + 1 + size], "little"), pos + 1 + size

    def query(self, sql):
        """(column names, rows of bytes/None); ([], []) for an OK packet; MySQLClientError on ERR."""
        self.seq = 0
        self._write(b"\x03" + sql.encode("utf-8", "surrogateescape"))
        first = self._read()
        if first[:1] == b"\xff":
            raise MySQLClientError.from_err(first)
        if first[:1] == b"\x00":
            return [], []
        ncol, _ = self._lenenc(first, 0)
        columns = []
        for _ in range(ncol):
            col, pos = self._read(), 0
            for i in range(5):                          # catalog, schema, table, org_table, name
                n, pos = self._lenenc(col, pos)
                if i == 4:
                    columns.append(col[pos:pos + n].decode("utf-8", "surrogateescape"))
                pos += n
        self._read()                                    # EOF after the column definitions
        rows = []
        while True:
            pkt = self._read()
            if pkt[:1] == b"\xfe" and len(pkt) < 9:
                return columns, rows
            if pkt[:1] == b"\xff":
                raise MySQLClientError.from_err(pkt)
            row, pos = [], 0
            while pos < len(pkt):
                n, pos = self._lenenc(pkt, pos)
                row.append(None if n is None else pkt[pos:pos + n])
                pos += n or 0
            rows.append(tuple(row))

    def close(self):
        """COM_QUIT, then close (a server logs a bare close as an aborted connection)."""
        try:
            self.seq = 0
            self._write(b"\x01")
        except OSError:
            pass
        try:
            self.sock.close()
        except OSError:
            pass


# ---------------------------------------------------------------------------
# 6b. The MySQL port (mysql-interfaces), as far as draining needs it
# ---------------------------------------------------------------------------

class FrontendConnection(ClientConnection):
    """One client of the MySQL port: logs in as a frontend mysql_users account (hostgroup >= 0),
    and each COM_QUERY runs on a backend of the account's default_hostgroup (the first ONLINE
    runtime server) over one backend connection per client, logged in with the backend account
    of the same name (its password must be cleartext here). Results come back as text result
    sets (every column VAR_STRING), as the admin port sends them."""

    def __init__(self, frontend, sock, peer):
        super().__init__(frontend, sock, peer)
        self.account = None
        self.backend = None
        self.state, self.info, self.since = "Sleep", None, time.monotonic()
        self.srv = None

    def authenticate(self, user, salt, token):
        self.account = self.server.admin.authenticate_frontend(user, salt, token)
        return None if self.account is None else False

    def _backend(self):
        if self.backend is None:
            target = self.server.admin.frontend_route(self.account)
            if target is None:
                raise MySQLClientError("Max connect timeout reached while reaching hostgroup %d after 0ms"
                                       % self.account.default_hostgroup, 9001, "HY000")
            host, port, password = target
            self.backend = MySQLClient(host, port, self.account.username, password, timeout=2.0,
                                       read_timeout=3600.0)
            self.srv = (host, port)
            if self.account.default_schema:
                self.backend.query("USE `%s`" % self.account.default_schema.replace("`", "``"))
        return self.backend

    def run(self, sql):
        if sql.lstrip().upper().startswith("SET "):
            return Reply.ok()             # session variables: ProxySQL tracks them, no backend needed
        self.state, self.info, self.since = "Query", sql, time.monotonic()
        try:
            columns, rows = self._backend().query(sql)
        except MySQLClientError as e:
            return Reply.err(e.code, str(e), e.sqlstate)
        except OSError as e:
            if self.backend is not None:
                self.backend.close()
            self.backend = None
            return Reply.err(2013, "Lost connection to the backend: %s" % e, "HY000")
        finally:
            self.state, self.info, self.since = "Sleep", None, time.monotonic()
        if not columns:
            return Reply.ok()
        return Reply.rows([c.encode("utf-8", "surrogateescape") for c in columns], rows)

    def serve(self):
        self.server.opened(self)
        super().serve()

    def ended(self):
        if self.backend is not None:
            self.backend.close()
        self.server.closed(self)

    def command(self, cmd, pkt):
        if cmd == COM_QUERY:
            self.send_reply(self.run(pkt[1:].decode("utf-8", "surrogateescape")))
        elif cmd in (COM_PING, COM_INIT_DB):
            self.send(ok_payload(0, STATUS))
        else:
            self.send(err_payload(1047, "Command not supported by this test double", "08S01"))
        return True

    def processlist_row(self):
        srv = self.srv or ("", 0)
        return (0, self.session_id, self.account.username if self.account else "",
                self.account.default_schema if self.account else "", self.peer[0], self.peer[1],
                self.account.default_hostgroup if self.account else -1, self.sock_name[0], self.sock_name[1],
                srv[0], srv[1], self.state, int((time.monotonic() - self.since) * 1000), self.info, 0, None)


class Frontend:
    """ProxySQL's MySQL module seen from outside: a listener on mysql-interfaces, the clients it
    serves, PROXYSQL PAUSE (stop_listeners: the listening socket is closed, new connections are
    refused, open ones keep working) and PROXYSQL RESUME (start_listeners: the same address
    again), and the Client_Connections_* counters of stats_mysql_global."""

    def __init__(self, admin, host, port, next_thread_id):
        self.admin, self.host, self.port = admin, host, port
        self.next_thread_id = next_thread_id
        self.lock = threading.Lock()
        self.clients = {}                 # session id -> FrontendConnection
        self.created = self.aborted = 0
        self._ids = iter(range(1, 1 << 62))
        self.sock = None
        self.holding = False              # PROXYSQL PAUSE under way: connections wait in the backlog
        self.held = []
        self.start_listener()

    def start_listener(self):
        self.holding = False
        self.sock = listen_socket(self.host, self.port)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._accept_loop, args=(self.sock,), name="mysql-accept", daemon=True).start()

    def hold(self):
        """What stop_listeners does before the listener closes (MySQL_Thread.cpp listener_del): each
        MySQL thread in turn stops polling the listening socket, so a connect() still completes into
        the backlog but no handshake comes; closing the socket then resets those connections."""
        self.holding = True

    def stop_listener(self):
        sock, self.sock = self.sock, None
        held, self.held, self.holding = self.held, [], False
        for conn in held:
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))   # reset
            conn.close()
        try:
            sock.shutdown(socket.SHUT_RDWR)   # wakes the accept() of the accept loop
        except OSError:
            pass
        sock.close()

    def _accept_loop(self, sock):
        while True:
            try:
                conn, peer = sock.accept()
            except OSError:
                return
            if self.holding:
                self.held.append(conn)
                continue
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            client = FrontendConnection(self, conn, peer)
            client.sock_name = conn.getsockname()[:2]
            threading.Thread(target=client.serve, name="mysql-client", daemon=True).start()

    def opened(self, client):
        with self.lock:
            client.session_id = next(self._ids)
            self.clients[client.session_id] = client
            self.created += 1

    def closed(self, client):
        with self.lock:
            self.clients.pop(client.session_id, None)
            if client.account is None:
                self.aborted += 1

    def counters(self):
        with self.lock:
            return {"Client_Connections_connected": len(self.clients), "Client_Connections_created": self.created,
                    "Client_Connections_aborted": self.aborted,
                    "Client_Connections_non_idle": sum(1 for c in self.clients.values() if c.state != "Sleep")}

    def processlist(self):
        with self.lock:
            return [c.processlist_row() for c in self.clients.values() if c.account is not None]


# ---------------------------------------------------------------------------
# 7. Test hooks (what a real ProxySQL lacks), used through the control HTTP port
# ---------------------------------------------------------------------------

WRITE_KEYWORDS = ("INSERT", "UPDATE", "DELETE", "REPLACE", "LOAD", "SAVE", "CREATE", "DROP", "ALTER", "TRUNCATE")


class Hooks:
    def __init__(self):
        self.lock = threading.Condition()
        self.statements = []
        self.reset()

    def reset(self):
        with self.lock:
            self.latency_ms = 0
            self.hang_count, self.hang_seconds = 0, 0.0
            self.drop_count = 0
            self.fail_count, self.fail_code, self.fail_message = 0, 1045, "Injected failure"
            self.fail_sqlstate, self.fail_match = "28000", ""
            self.release_generation = getattr(self, "release_generation", 0) + 1
            self.lock.notify_all()

    def state(self):
        with self.lock:
            return {"latency_ms": self.latency_ms, "hang": {"count": self.hang_count, "seconds": self.hang_seconds},
                    "drop": {"count": self.drop_count},
                    "fail": {"count": self.fail_count, "code": self.fail_code, "message": self.fail_message,
                             "sqlstate": self.fail_sqlstate, "match": self.fail_match},
                    "statements": len(self.statements)}

    def record(self, session, sql):
        with self.lock:
            self.statements.append({"seq": len(self.statements) + 1, "conn": session.id, "user": session.user,
                                    "time": round(time.time(), 6), "sql": sql,
                                    "tls": getattr(session, "tls", False)})

    def take(self, name):
        with self.lock:
            n = getattr(self, name)
            if n > 0:
                setattr(self, name, n - 1)
                return True
            return False

    def hang(self):
        """Block while hung: until the timeout (seconds > 0) or a /release (seconds == 0)."""
        with self.lock:
            seconds, generation = self.hang_seconds, self.release_generation
            deadline = time.monotonic() + seconds if seconds > 0 else None
            while generation == self.release_generation:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    break
                self.lock.wait(left)

    def release(self):
        with self.lock:
            self.hang_count = 0
            self.release_generation += 1
            self.lock.notify_all()

    def take_failure(self, sql):
        up = remove_spaces(sql).upper()
        with self.lock:
            if self.fail_count <= 0 or not up.startswith(WRITE_KEYWORDS):
                return None
            if self.fail_match and self.fail_match.upper() not in up:
                return None
            self.fail_count -= 1
            return Reply.err(self.fail_code, self.fail_message, self.fail_sqlstate)


class ControlHandler(http.server.BaseHTTPRequestHandler):
    server_version = "proxysql-double-control"

    def log_message(self, *args):
        pass

    def _reply(self, code, obj):
        body = (json.dumps(obj, sort_keys=True) + "\n").encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _route(self, method):
        url = urllib.parse.urlsplit(self.path)
        params = dict(urllib.parse.parse_qsl(url.query, keep_blank_values=True))
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        try:
            code, obj = self.server.double.control(method, url.path.rstrip("/") or "/", params)
        except (KeyError, ValueError) as e:
            code, obj = 400, {"error": "bad parameter: %s" % e}
        self._reply(code, obj)

    def do_GET(self):
        self._route("GET")

    def do_POST(self):
        self._route("POST")

    def do_DELETE(self):
        self._route("DELETE")


# ---------------------------------------------------------------------------
# 8. Monitors.  The ping monitor is emulated: a server whose host:port refuses TCP
#    connections goes SHUNNED after mysql-monitor_ping_max_failures missed pings of
#    mysql-monitor_ping_interval (~24 s with defaults, 3.8 s recorded with 1000 ms),
#    or after a fixed --monitor-shun-after, and back ONLINE once it accepts again.
#    A LOAD resets it to ONLINE at once; the failures already logged shun it again at
#    the next ping (1 s recorded with 1000 ms).
# ---------------------------------------------------------------------------

MONITOR_MAX_PROBES = 64                 # probe threads at once (thousands of servers: one GIL)


class Monitor(threading.Thread):
    def __init__(self, admin, shun_after=None):
        """shun_after: fixed seconds of refused TCP before SHUNNED (again after a LOAD too), or
        None: from the runtime ping interval and max failures, like ProxySQL."""
        super().__init__(name="monitor", daemon=True)
        self.admin, self.fixed = admin, shun_after
        self.shun_after = self.reshun_after = shun_after or 24.0
        self.fail_since = {}                # (host, port) -> monotonic time of first failed probe
        self.in_flight = set()
        self.lock = threading.Lock()
        self.stop = threading.Event()

    def _probe(self, target):
        ok = False
        try:
            if target[0]:                   # an empty hostname never connects
                with socket.create_connection(target, timeout=min(1.0, max(0.2, self.reshun_after / 2))):
                    ok = True
        except (OSError, ValueError, UnicodeError):
            ok = False
        with self.lock:
            self.in_flight.discard(target)
            if ok:
                self.fail_since.pop(target, None)
            else:
                self.fail_since.setdefault(target, time.monotonic())

    def _timings(self, mysql):
        """(seconds of failures before SHUNNED, seconds after a LOAD before SHUNNED again)."""
        if self.fixed:
            return self.fixed, self.fixed
        ping = max(0.05, c_atoi(mysql.get("mysql-monitor_ping_interval")) / 1000.0)
        return ping * max(1, c_atoi(mysql.get("mysql-monitor_ping_max_failures"))), ping

    def run(self):
        interval = 0.05
        while not self.stop.wait(interval):
            admin = self.admin
            with admin.lock:
                self.shun_after, self.reshun_after = self._timings(admin.rt_mysql)
                interval = max(0.05, min(1.0, self.reshun_after / 4.0))
                if admin.rt_mysql.get("mysql-monitor_enabled", "true") != "true":
                    continue
                servers = [s for s in admin.hgm.servers()
                           if s.status == ONLINE or (s.status == SHUNNED and s.shunned_automatic)]
                targets = {(s.host, s.port) for s in servers}
            for target in targets:
                # Only loopback addresses are probed (an empty name fails without trying): tests
                # never send traffic elsewhere, nor DNS queries; any other host counts as reachable.
                if target[0] and not is_loopback(target[0]):
                    continue
                with self.lock:
                    if target in self.in_flight or len(self.in_flight) >= MONITOR_MAX_PROBES:
                        continue
                    self.in_flight.add(target)
                threading.Thread(target=self._probe, args=(target,), daemon=True).start()
            now = time.monotonic()
            with admin.lock, self.lock:
                for s in admin.hgm.servers():
                    since = self.fail_since.get((s.host, s.port))
                    if s.status == ONLINE and since is not None and now - since >= self.shun_after \
                            and now - s.online_since >= self.reshun_after:
                        s.status, s.shunned_automatic = SHUNNED, True
                    elif s.status == SHUNNED and s.shunned_automatic and since is None \
                            and (s.host, s.port) in targets:
                        s.status, s.shunned_automatic = ONLINE, False
                        s.online_since = now



# read_only check queries by mysql_replication_hostgroups.check_type (MySQL_Monitor.cpp)
READ_ONLY_QUERIES = {
    "read_only": "SELECT @@global.read_only read_only",
    "innodb_read_only": "SELECT @@global.innodb_read_only read_only",
    "super_read_only": "SELECT @@global.super_read_only read_only",
    "read_only|innodb_read_only": "SELECT @@global.read_only|@@global.innodb_read_only read_only",
    "read_only&innodb_read_only": "SELECT @@global.read_only&@@global.innodb_read_only read_only",
}


class ReadOnlyMonitor(threading.Thread):
    """ProxySQL's read_only monitor: every mysql-monitor_read_only_interval ms, each runtime
    server (not OFFLINE_*) of a writer or reader hostgroup of mysql_replication_hostgroups is
    asked its read_only (the row's check_type) as mysql-monitor_username, and the hostgroups
    manager moves it in runtime (read_only_action_v2).  Loopback backends only; a failed or
    timed-out check changes nothing."""

    def __init__(self, admin):
        super().__init__(name="monitor-read-only", daemon=True)
        self.admin = admin
        self.stop = threading.Event()
        self.conns = {}                     # (host, port) -> (user, password, MySQLClient)

    def _check(self, host, port, query, user, password, timeouts):
        cached = self.conns.get((host, port))
        if cached is not None and cached[:2] != (user, password):
            cached[2].close()
            cached = None
        try:
            if cached is None:
                cached = (user, password, MySQLClient(host, port, user, password, timeout=timeouts[0],
                                                      read_timeout=timeouts[1]))
                self.conns[(host, port)] = cached
            _, rows = cached[2].query(query)
            return c_atoi(rows[0][0])
        except (OSError, MySQLClientError, ValueError, IndexError, KeyError):
            dead = self.conns.pop((host, port), None)
            if dead is not None:
                dead[2].close()
            return None

    def run(self):
        interval = 1.0
        while not self.stop.wait(interval):
            admin = self.admin
            with admin.lock:
                mysql = admin.rt_mysql
                interval = max(0.05, c_atoi(mysql.get("mysql-monitor_read_only_interval")) / 1000.0)
                if mysql.get("mysql-monitor_enabled", "true") != "true":
                    continue
                user, password = mysql.get("mysql-monitor_username", ""), mysql.get("mysql-monitor_password", "")
                timeouts = tuple(max(0.05, c_atoi(mysql.get(v)) / 1000.0) for v in (
                    "mysql-monitor_connect_timeout", "mysql-monitor_read_only_timeout"))
                check_type = {}
                for r in admin.rt_tables.get("mysql_replication_hostgroups", []):
                    kind = (_text(r[2]) or "read_only").lower()
                    check_type.setdefault(c_atoi(r[0]), kind)
                    check_type.setdefault(c_atoi(r[1]), kind)
                targets = {}
                for srv in admin.hgm.servers():
                    if srv.hid in check_type and srv.status not in (OFFLINE_SOFT, OFFLINE_HARD):
                        targets.setdefault((srv.host, srv.port), check_type[srv.hid])
            results = []
            for (host, port), kind in targets.items():
                if is_loopback(host) and kind in READ_ONLY_QUERIES:
                    value = self._check(host, port, READ_ONLY_QUERIES[kind], user, password, timeouts)
                    if value is not None:
                        results.append((host, port, 1 if value else 0))
            if results:
                with admin.lock:
                    admin.monitor_read_only(results)


# ---------------------------------------------------------------------------
# 9. ProxySQL Cluster (lib/ProxySQL_Cluster.cpp): one monitor thread per row of
#    runtime proxysql_servers (this node included) logs in to that admin port
#    with admin-cluster_username/password, polls SELECT GLOBAL_CHECKSUM() every
#    admin-cluster_check_interval_ms, fetches runtime_checksums_values when it
#    changed, counts diff_check per module and pulls mysql_servers / mysql_users
#    from the newest peer once diff_check reaches *_diffs_before_sync (0: never).
#    A pull rewrites the main tables, LOADs them and (by default) saves them to
#    disk between two queries of any admin client: staged rows are lost.
# ---------------------------------------------------------------------------

# the queries a node sends its peers (CLUSTER_QUERY_* of ProxySQL_Cluster.hpp); the admin
# module answers them from its runtime structures, not from SQLite
_SERVERS_SELECT = ("PROXY_SELECT hostgroup_id, hostname, port, gtid_port, status, weight, compression, "
                   "max_connections, max_replication_lag, use_ssl, max_latency_ms, comment FROM ")
CLUSTER_QUERY_RUNTIME_MYSQL_SERVERS = (_SERVERS_SELECT + "runtime_mysql_servers WHERE status<>'OFFLINE_HARD' "
                                       "ORDER BY hostgroup_id, hostname, port")
CLUSTER_QUERY_MYSQL_SERVERS_V2 = (_SERVERS_SELECT + "mysql_servers_v2 WHERE status<>'OFFLINE_HARD' "
                                  "ORDER BY hostgroup_id, hostname, port")
CLUSTER_QUERY_TABLES = (   # (query, table), in the order the pull fetches them after mysql_servers_v2
    ("PROXY_SELECT writer_hostgroup, reader_hostgroup, comment FROM runtime_mysql_replication_hostgroups "
     "ORDER BY writer_hostgroup", "mysql_replication_hostgroups"),
    ("PROXY_SELECT writer_hostgroup, backup_writer_hostgroup, reader_hostgroup, offline_hostgroup, active, "
     "max_writers, writer_is_also_reader, max_transactions_behind, comment FROM "
     "runtime_mysql_group_replication_hostgroups ORDER BY writer_hostgroup", "mysql_group_replication_hostgroups"),
    ("PROXY_SELECT writer_hostgroup, backup_writer_hostgroup, reader_hostgroup, offline_hostgroup, active, "
     "max_writers, writer_is_also_reader, max_transactions_behind, comment FROM runtime_mysql_galera_hostgroups "
     "ORDER BY writer_hostgroup", "mysql_galera_hostgroups"),
    ("PROXY_SELECT writer_hostgroup, reader_hostgroup, active, aurora_port, domain_name, max_lag_ms, "
     "check_interval_ms, check_timeout_ms, writer_is_also_reader, new_reader_weight, add_lag_ms, min_lag_ms, "
     "lag_num_checks, comment FROM runtime_mysql_aws_aurora_hostgroups ORDER BY writer_hostgroup",
     "mysql_aws_aurora_hostgroups"),
    ("PROXY_SELECT hostgroup_id, max_num_online_servers, autocommit, free_connections_pct, init_connect, "
     "multiplex, connection_warming, throttle_connections_per_sec, ignore_session_variables, hostgroup_settings, "
     "servers_defaults, comment FROM runtime_mysql_hostgroup_attributes ORDER BY hostgroup_id",
     "mysql_hostgroup_attributes"),
    ("PROXY_SELECT hostname, port, username, ssl_ca, ssl_cert, ssl_key, ssl_capath, ssl_crl, ssl_crlpath, "
     "ssl_cipher, tls_version, comment FROM runtime_mysql_servers_ssl_params ORDER BY hostname, port, username",
     "mysql_servers_ssl_params"),
)
CLUSTER_QUERY_MYSQL_USERS = ("PROXY_SELECT username, password, use_ssl, default_hostgroup, default_schema, "
                             "schema_locked, transaction_persistent, fast_forward, backend, frontend, "
                             "max_connections, attributes, comment FROM runtime_mysql_users")


class PeerChecksum:
    """ProxySQL_Checksum_Value_2: a module's checksum as last fetched from one node."""
    __slots__ = ("version", "epoch", "checksum", "last_changed", "last_updated", "diff_check")

    def __init__(self):
        self.version = self.epoch = self.last_changed = self.last_updated = self.diff_check = 0
        self.checksum = ""


class ClusterNode:
    def __init__(self, host, port, weight, comment):
        self.host, self.port, self.weight, self.comment = host, port, weight, comment
        self.checksums = {name: PeerChecksum() for name in CHECKSUM_MODULES}
        self.global_checksum = 0
        self.active = True


class Cluster:
    """ProxySQL_Cluster + ProxySQL_Cluster_Nodes for one Admin (loopback peers only)."""

    def __init__(self, admin, stopping):
        self.admin, self.stopping = admin, stopping
        self.nodes = {}                        # (host, port) -> ClusterNode, runtime proxysql_servers order
        self.lock = threading.Lock()           # ProxySQL_Cluster_Nodes::mutex
        self.pull_locks = {"servers": threading.Lock(), "runtime_servers": threading.Lock(),
                           "users": threading.Lock()}
        self.uuid = "%08x-%04x-4%03x-8%03x-%012x" % (secrets.randbits(32), secrets.randbits(16), secrets.randbits(12),
                                                    secrets.randbits(12), secrets.randbits(48))
        self.started = False

    # -- settings, read from the runtime admin variables ---------------------------

    def setting(self, name):
        return self.admin.rt_admin.get("admin-cluster_" + name, "")

    def number(self, name):
        return c_atoi(self.setting(name))

    # -- nodes (load_servers_list) ----------------------------------------------------

    def load_servers(self, rows):
        """Called by LOAD PROXYSQL SERVERS TO RUNTIME (and at start) with (hostname, port, weight, comment)."""
        with self.lock:
            for node in self.nodes.values():
                node.active = False
            nodes = {}
            for r in rows:
                key = (_text(r[0]), c_atoi(r[1]))
                node = self.nodes.get(key)
                if node is None:
                    node = ClusterNode(key[0], key[1], c_atoi(r[2]), _text(r[3]))
                    if self.started:
                        self._spawn(node)
                node.active, node.weight, node.comment = True, c_atoi(r[2]), _text(r[3])
                nodes[key] = node
            self.nodes = nodes

    def start(self):
        with self.lock:
            self.started = True
            for node in self.nodes.values():
                self._spawn(node)

    def _spawn(self, node):
        threading.Thread(target=self._monitor, args=(node,), name="cluster-%d" % node.port, daemon=True).start()

    def _credentials(self):
        with self.admin.lock:
            return self.setting("username"), self.setting("password")

    def _wait(self, seconds):
        return self.stopping.wait(max(0.0, seconds))

    # -- the monitor thread of one node (ProxySQL_Cluster_Monitor_thread) --------------

    def _monitor(self, node):
        while node.active and not self.stopping.is_set():
            user, password = self._credentials()
            if not user:
                self._wait(1.0)                 # do not monitor if the username is empty
                continue
            if not is_loopback(node.host):      # the double talks to loopback peers only
                self._wait(1.0)
                continue
            try:
                conn = MySQLClient(node.host, node.port, user, password, timeout=1.0)
            except (OSError, MySQLClientError):
                self._wait(self.number("check_interval_ms") / 1000.0 + 1.0)
                continue
            try:
                self._poll(node, conn)
            except (OSError, MySQLClientError, ValueError, IndexError, KeyError):
                pass
            finally:
                conn.close()
            self._wait(self.number("check_interval_ms") / 1000.0)

    def _poll(self, node, conn):
        _, rows = conn.query("SELECT @@version")
        if not rows or _text(rows[0][0]) != PROXYSQL_VERSION:
            self._wait(30.0)                    # different version: no clustering
            return
        conn.query("PROXYSQL CLUSTER_NODE_UUID %s %s" % (self.uuid, self.admin.listen))
        frequency_count = 0
        while node.active and not self.stopping.is_set():
            start = time.monotonic()
            _, rows = conn.query("SELECT GLOBAL_CHECKSUM()")
            value = c_atoi(rows[0][0]) if rows else 0
            with self.lock:
                changed = value != node.global_checksum
                node.global_checksum = value
            if changed:
                _, rows = conn.query("SELECT * FROM runtime_checksums_values ORDER BY name")
                self.set_checksums(node, rows)
            else:
                self.set_checksums(node, None)
            frequency_count += 1
            frequency = self.number("check_status_frequency")
            if frequency and frequency_count >= frequency:
                frequency_count = 0
                conn.query("SELECT * FROM stats_mysql_global ORDER BY Variable_Name")
            self._wait(self.number("check_interval_ms") / 1000.0 - (time.monotonic() - start))

    # -- checksums and the decision to pull (ProxySQL_Node_Entry::set_checksums) ------

    def set_checksums(self, node, rows):
        now = int(time.time())
        with self.admin.lock:
            own = {name: list(self.admin.checksums[name]) for name in CHECKSUM_MODULES}
            diffs = {m: self.number(m + "_diffs_before_sync")
                     for m in ("mysql_servers", "mysql_users", "admin_variables", "mysql_variables")}
            algorithm = self.number("mysql_servers_sync_algorithm")
        with self.lock:
            if rows is not None:
                for r in rows:
                    name = _text(r[0])
                    v = node.checksums.get(name)
                    if v is None:
                        continue
                    v.version, v.epoch, v.last_updated = c_atoi(r[1]), c_atoi(r[2]), now
                    if v.checksum != _text(r[3]):
                        v.checksum, v.last_changed, v.diff_check = _text(r[3]), now, 1
                    else:
                        v.diff_check += 1
                    if v.checksum == own[name][2]:
                        v.diff_check = 0
            else:
                for name, v in node.checksums.items():
                    v.last_updated = now
                    if v.checksum == own[name][2]:
                        v.diff_check = 0
                    if v.diff_check:
                        v.diff_check += 1
            snapshot = {name: (v.version, v.epoch, v.checksum, v.diff_check) for name, v in node.checksums.items()}
        if diffs["mysql_servers"]:
            fetch_runtime = algorithm != 2      # 1 (default) and 3 without -M: runtime servers too
            pulled = False
            if self._newer(snapshot["mysql_servers_v2"], own["mysql_servers_v2"], diffs["mysql_servers"]):
                self.pull_servers(fetch_runtime)
                pulled = fetch_runtime
            if fetch_runtime and not pulled and \
                    self._newer(snapshot["mysql_servers"], own["mysql_servers"], diffs["mysql_servers"]):
                self.pull_runtime_servers()
        if diffs["mysql_users"] and self._newer(snapshot["mysql_users"], own["mysql_users"], diffs["mysql_users"]):
            self.pull_users()
        for kind in ("admin", "mysql"):
            module = kind + "_variables"
            if diffs[module] and self._newer(snapshot[module], own[module], diffs[module]):
                self.pull_variables(kind)

    @staticmethod
    def _newer(peer, own, diffs_before_sync):
        version, epoch, _, diff_check = peer
        return version > 1 and (own[0] == 1 or epoch > own[1]) and diff_check >= diffs_before_sync

    def _peer_to_sync(self, module, diffs_before_sync):
        """get_peer_to_sync_*: the node with the newest epoch, unless a newer one lacks diff_checks."""
        best, epoch, max_epoch = None, 0, 0
        with self.lock:
            for node in self.nodes.values():
                v = node.checksums[module]
                if v.version > 1 and v.epoch > epoch:
                    max_epoch = v.epoch
                    if v.diff_check >= diffs_before_sync:
                        epoch, best = v.epoch, (node.host, node.port, v.checksum, v.epoch,
                                                node.checksums["mysql_servers"].checksum,
                                                node.checksums["mysql_servers"].epoch)
        return None if best is None or max_epoch > epoch else best

    def _fetch(self, host, port, queries):
        """The rows of each query on the peer, or None after a failure (then a second's pause,
        as ProxySQL's fetch_failed)."""
        user, password = self._credentials()
        try:
            conn = MySQLClient(host, port, user, password, timeout=1.0)
            try:
                return [conn.query(q)[1] for q in queries]
            finally:
                conn.close()
        except (OSError, MySQLClientError, ValueError, IndexError, KeyError):
            self._wait(1.0)
            return None

    # -- the pulls -------------------------------------------------------------------

    def pull_servers(self, fetch_runtime):
        """pull_mysql_servers_v2_from_peer: DELETE + INSERT of mysql_servers and the hostgroup
        tables, LOAD, and with *_save_to_disk SAVE (runtime to memory first when the runtime
        servers were fetched too), all under the admin lock: between two client queries."""
        with self.pull_locks["servers"]:
            peer = self._peer_to_sync("mysql_servers_v2", self.number("mysql_servers_diffs_before_sync"))
            if peer is None:
                return
            host, port, v2_checksum, v2_epoch, rt_checksum, rt_epoch = peer
            queries = [CLUSTER_QUERY_MYSQL_SERVERS_V2] + [q for q, _ in CLUSTER_QUERY_TABLES]
            if fetch_runtime:
                queries.append(CLUSTER_QUERY_RUNTIME_MYSQL_SERVERS)
            results = self._fetch(host, port, queries)
            if results is None:
                return
            runtime = results.pop() if fetch_runtime else None
            if runtime_checksum_text(servers_v2_checksum(results)) != v2_checksum or \
                    (runtime is not None and runtime_checksum_text(raw_checksum(runtime)) != rt_checksum):
                self._wait(1.0)                 # "Checksum changed": try again later
                return
            servers = [r[:4] + (b"ONLINE" if r[4] == b"SHUNNED" else r[4],) + r[5:] for r in results[0]]
            admin = self.admin
            with admin.lock:
                admin.replace_main_tables([("mysql_servers", MYSQL_SERVERS_COLUMNS, servers)] + [
                    (table, "*", rows) for (_, table), rows in zip(CLUSTER_QUERY_TABLES, results[1:])])
                admin.load_mysql_servers_to_runtime(runtime_rows=runtime, peer={
                    "mysql_servers_v2": (v2_checksum, v2_epoch), "mysql_servers": (rt_checksum, rt_epoch)})
                if self.setting("mysql_servers_save_to_disk") == "true":
                    if fetch_runtime:
                        admin.save_mysql_servers_to_memory()
                    admin.memory_to_disk("MYSQL SERVERS")

    def pull_runtime_servers(self):
        """pull_runtime_mysql_servers_from_peer: only the runtime servers (a peer's monitor moved some)."""
        with self.pull_locks["runtime_servers"]:
            peer = self._peer_to_sync("mysql_servers", self.number("mysql_servers_diffs_before_sync"))
            if peer is None:
                return
            host, port, _, _, rt_checksum, rt_epoch = peer
            (runtime,) = self._fetch(host, port, [CLUSTER_QUERY_RUNTIME_MYSQL_SERVERS]) or (None,)
            if runtime is None or runtime_checksum_text(raw_checksum(runtime)) != rt_checksum:
                return
            admin = self.admin
            with admin.lock:
                admin.load_mysql_servers_to_runtime(runtime_rows=runtime, only_runtime=True,
                                                    peer={"mysql_servers": (rt_checksum, rt_epoch)})
                if self.setting("mysql_servers_save_to_disk") == "true":
                    admin.save_mysql_servers_to_memory()
                    admin.memory_to_disk("MYSQL SERVERS")

    def pull_users(self):
        """pull_mysql_users_from_peer: DELETE FROM mysql_users, the peer's loaded rows inserted
        (active=1), LOAD with the peer's checksum and epoch, SAVE TO DISK by default."""
        with self.pull_locks["users"]:
            peer = self._peer_to_sync("mysql_users", self.number("mysql_users_diffs_before_sync"))
            if peer is None:
                return
            host, port, checksum, epoch = peer[:4]
            (rows,) = self._fetch(host, port, [CLUSTER_QUERY_MYSQL_USERS]) or (None,)
            if rows is None:
                return
            probe = Authentication()
            probe.refresh(rows)
            if runtime_checksum_text(probe.checksum()) != checksum:
                self._wait(1.0)
                return
            with self.admin.lock:
                self.admin.replace_main_tables([("mysql_users", MYSQL_USERS_COLUMNS,
                                                 [r[:2] + (1,) + r[2:] for r in rows])])   # active=1
                self.admin.load_mysql_users_to_runtime(peer=(checksum, epoch))
                if self.setting("mysql_users_save_to_disk") == "true":
                    self.admin.memory_to_disk("MYSQL USERS")

    def pull_variables(self, kind):
        """pull_global_variables_from_peer: the peer's runtime admin-* (or mysql-*) variables but
        the interfaces (and mysql-threads) replace ours in memory, LOAD, SAVE TO DISK by default.
        So a diffs_before_sync=0 set and loaded on one node reaches its peers too."""
        module = kind + "_variables"
        with self.pull_locks.setdefault(module, threading.Lock()):
            peer = self._peer_to_sync(module, self.number(module + "_diffs_before_sync"))
            if peer is None:
                return
            host, port, checksum, epoch = peer[:4]
            excluded = ADMIN_CHECKSUM_EXCLUDED if kind == "admin" else MYSQL_CHECKSUM_EXCLUDED
            where = "variable_name LIKE '%s-%%' AND variable_name NOT IN (%s)" % (
                kind, ", ".join(sql_literal(n) for n in excluded))
            (rows,) = self._fetch(host, port, ["SELECT * FROM runtime_global_variables WHERE %s "
                                               "ORDER BY variable_name" % where]) or (None,)
            if rows is None or runtime_checksum_text(raw_checksum(rows)) != checksum:
                return
            admin = self.admin
            with admin.lock:
                db = admin.admindb
                with db.transaction():
                    db.exec("DELETE FROM main.global_variables WHERE " + where)
                    for name, value in rows:
                        db.exec("INSERT OR REPLACE INTO main.global_variables VALUES (%s, %s)"
                                % (sql_literal(name), sql_literal(value)))
                module_name = "%s VARIABLES" % kind.upper()
                admin.to_runtime(module_name, peer=(checksum, epoch))
                if self.setting(module + "_save_to_disk") == "true":
                    admin.memory_to_disk(module_name)

    # -- stats ---------------------------------------------------------------------------

    def stats_checksums(self):
        """stats_proxysql_servers_checksums rows."""
        with self.lock:
            return [(n.host, n.port, name, v.version, v.epoch, v.checksum, v.last_changed, v.last_updated,
                     v.diff_check)
                    for n in self.nodes.values()
                    for name, v in ((m, n.checksums[m]) for m in CHECKSUM_MODULES)]


# ---------------------------------------------------------------------------
# 10. The server
# ---------------------------------------------------------------------------

def is_loopback(host):
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def parse_hostport(value):
    host, sep, port = value.rpartition(":")
    if not sep:
        raise ValueError("expected HOST:PORT, got %r" % value)
    host = host.strip("[]")
    if not is_loopback(host):
        raise ValueError("%s is not a loopback address; the double listens on loopback only" % host)
    return ("127.0.0.1" if host == "localhost" else host), int(port)


def listen_socket(host, port):
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    s = socket.socket(family, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((host, port))
    s.listen(256)
    return s


def fmt_addr(host, port):
    return "[%s]:%d" % (host, port) if ":" in host else "%s:%d" % (host, port)


class ProxySQLDouble:
    """Admin port + control port + monitor around one Admin instance."""

    def __init__(self, listen=("127.0.0.1", 0), datadir=".", initial=False, admin_credentials="admin:admin",
                 control=None, monitor_shun_after=None, config=(), proxysql_servers=(), mysql_listen=None,
                 tls_cert=None, tls_key=None, pause_wait=2.0):
        self.pause_wait = pause_wait
        self.sock = listen_socket(*listen)
        self.tls_context = None
        if tls_cert:
            # the admin port accepts TLS (a real ProxySQL generates its own certificate in the datadir)
            self.tls_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            self.tls_context.load_cert_chain(tls_cert, tls_key)
        self.host, self.port = self.sock.getsockname()[:2]
        self.admin = Admin(datadir, initial=initial, admin_credentials=admin_credentials,
                           listen=fmt_addr(self.host, self.port), monitor_shun_after=monitor_shun_after,
                           config=config, proxysql_servers=proxysql_servers)
        self.hooks = Hooks()
        self._thread_ids = iter(range(1, 1 << 31))
        self._tid_lock = threading.Lock()
        self.stopping = threading.Event()
        self.admin.cluster = Cluster(self.admin, self.stopping)
        self.admin.cluster.load_servers(self.admin.rt_tables.get("proxysql_servers", []))
        if mysql_listen is not None:
            self.admin.frontend = Frontend(self.admin, mysql_listen[0], mysql_listen[1], self.next_thread_id)
        self.httpd = None
        if control is not None:
            self.httpd = http.server.ThreadingHTTPServer(control, ControlHandler)
            self.httpd.daemon_threads = True
            self.httpd.double = self
        self.monitor = self.read_only_monitor = None
        if monitor_shun_after is None or monitor_shun_after > 0:       # 0 disables both monitors
            self.monitor = Monitor(self.admin, monitor_shun_after)
            self.read_only_monitor = ReadOnlyMonitor(self.admin)

    @property
    def control_address(self):
        return self.httpd.server_address[:2] if self.httpd else None

    def next_thread_id(self):
        with self._tid_lock:
            return next(self._thread_ids)

    def start(self):
        threading.Thread(target=self._accept_loop, name="admin-accept", daemon=True).start()
        if self.httpd:
            threading.Thread(target=self.httpd.serve_forever, name="control", daemon=True).start()
        if self.monitor:
            self.monitor.start()
            self.read_only_monitor.start()
        self.admin.cluster.start()

    def _accept_loop(self):
        while not self.stopping.is_set():
            try:
                conn, peer = self.sock.accept()
            except OSError:
                return
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            client = ClientConnection(self, conn, peer)
            threading.Thread(target=client.serve, name="client", daemon=True).start()

    def serve_query(self, client, payload):
        """Hooks, then the admin handler under the global lock.  False closes the connection."""
        sess = client.session
        sql = payload.split(b"\0", 1)[0].decode("utf-8", "replace")
        hooks = self.hooks
        hooks.record(sess, sql)
        if hooks.take("drop_count"):
            return False
        if hooks.take("hang_count"):
            hooks.hang()
        if hooks.latency_ms:
            time.sleep(hooks.latency_ms / 1000.0)
        reply = hooks.take_failure(sql)
        if reply is None and self.pause_wait and not sess.stats and self.admin.frontend is not None and \
                not self.admin.mysql_paused and sql.strip().rstrip(";").strip().upper() == "PROXYSQL PAUSE":
            # A real 2.7.1 answers PAUSE only once every MySQL thread has let go of the listener:
            # 2.0-3.6 s measured on an idle one (4 threads), whatever mysql-poll_timeout is. The
            # admin lock is not held meanwhile.
            self.admin.frontend.hold()
            time.sleep(self.pause_wait)
        if reply is None:
            with self.admin.lock:
                try:
                    reply = self.admin.handle_query(sess, payload)
                except Exception as e:          # a bug of the double: say so, keep serving
                    import traceback
                    traceback.print_exc()
                    reply = Reply.admin_err("internal error of the test double: %s: %s" % (type(e).__name__, e))
        client.send_reply(reply)
        return True

    def control(self, method, path, params):
        """The control API; returns (http status, JSON object)."""
        hooks = self.hooks
        if path == "/statements":
            if method == "GET":
                with hooks.lock:
                    return 200, {"statements": list(hooks.statements)}
            if method == "DELETE":
                with hooks.lock:
                    n = len(hooks.statements)
                    hooks.statements.clear()
                return 200, {"cleared": n}
        elif path in ("/state", "/health") and method == "GET":
            return 200, {"admin": fmt_addr(self.host, self.port), "pid": os.getpid(), "hooks": hooks.state()}
        elif method == "POST":
            if path == "/latency":
                with hooks.lock:
                    hooks.latency_ms = max(0, int(params["ms"]))
                return 200, hooks.state()
            if path == "/hang":
                with hooks.lock:
                    hooks.hang_count = max(0, int(params.get("count", 1)))
                    hooks.hang_seconds = max(0.0, float(params.get("seconds", 0)))
                return 200, hooks.state()
            if path == "/release":
                hooks.release()
                return 200, hooks.state()
            if path == "/drop":
                with hooks.lock:
                    hooks.drop_count = max(0, int(params.get("count", 1)))
                return 200, hooks.state()
            if path == "/fail":
                with hooks.lock:
                    hooks.fail_count = max(0, int(params.get("count", 1)))
                    hooks.fail_code = int(params.get("code", 1045))
                    hooks.fail_message = params.get("message", "Injected failure")
                    hooks.fail_sqlstate = params.get("sqlstate", "28000")
                    hooks.fail_match = params.get("match", "")
                return 200, hooks.state()
            if path == "/pool":
                row = self.admin.set_pool_used(int(params["hostgroup"]), params["host"], int(params["port"]),
                                               max(0, int(params["used"])))
                if row is None:
                    return 404, {"error": "no such server in the runtime connection pool"}
                return 200, dict(zip(("hostgroup", "srv_host", "srv_port", "status", "ConnUsed", "MaxConnUsed"), row))
            if path == "/reset":
                hooks.reset()
                return 200, hooks.state()
        return 404, {"error": "unknown endpoint %s %s" % (method, path)}

    def shutdown(self):
        self.stopping.set()
        try:
            self.sock.close()
        except OSError:
            pass
        if self.monitor:
            self.monitor.stop.set()
            self.read_only_monitor.stop.set()
        if self.httpd:
            self.httpd.server_close()    # no shutdown(): it waits for serve_forever's 0.5 s poll


def main(argv=None):
    ap = argparse.ArgumentParser(description="ProxySQL 2.7.1 admin interface test double (loopback only).")
    ap.add_argument("--listen", default="127.0.0.1:6032", help="admin HOST:PORT (port 0 picks a free one)")
    ap.add_argument("--datadir", required=True, help="directory of proxysql.db (the disk database)")
    ap.add_argument("--initial", action="store_true", help="wipe the disk database first (like proxysql --initial)")
    ap.add_argument("--admin-credentials", default="admin:admin",
                    help="admin-admin_credentials of a fresh datadir (user:pass[;user:pass])")
    ap.add_argument("--stats-credentials", help="admin-stats_credentials of a fresh datadir")
    ap.add_argument("--cluster-username", help="admin-cluster_username of a fresh datadir")
    ap.add_argument("--cluster-password", help="admin-cluster_password of a fresh datadir")
    ap.add_argument("--monitor-username", help="mysql-monitor_username of a fresh datadir")
    ap.add_argument("--monitor-password", help="mysql-monitor_password of a fresh datadir")
    ap.add_argument("--variable", action="append", default=[], metavar="NAME=VALUE",
                    help="any other admin-*, mysql-* (or, 3.0, pgsql-*) variable of a fresh datadir (repeatable)")
    ap.add_argument("--proxysql-server", action="append", default=[], metavar="HOST:PORT[:WEIGHT[:COMMENT]]",
                    help="a proxysql_servers row of a fresh datadir (ProxySQL Cluster peers, repeatable)")
    ap.add_argument("--control", help="HOST:PORT of the HTTP control API (test hooks)")
    ap.add_argument("--proxysql-version", choices=("2.7", "3.0"),
                    default=os.environ.get("PROXYSQL_DOUBLE_VERSION", "2.7"),
                    help="the admin interface of ProxySQL 2.7 (as recorded, the default) or 3.0 (pgsql tables, "
                         "variables and checksum rows; default: $PROXYSQL_DOUBLE_VERSION or 2.7)")
    ap.add_argument("--hide-pgsql-tables", action="store_true",
                    help="with --proxysql-version 3.0: SHOW TABLES leaves the pgsql_* tables out, as newer builds do")
    ap.add_argument("--tls-cert", help="PEM certificate: the admin port accepts TLS (SSLRequest) with it")
    ap.add_argument("--tls-key", help="PEM key of --tls-cert")
    ap.add_argument("--mysql-listen", help="HOST:PORT of the MySQL port (mysql-interfaces: frontend logins, "
                                           "queries run on a backend, PROXYSQL PAUSE/RESUME); default: none")
    ap.add_argument("--port-file", help="write 'admin=HOST:PORT control=HOST:PORT [mysql=HOST:PORT]' here "
                                        "once listening")
    ap.add_argument("--monitor-shun-after", type=float, default=None,
                    help="fixed seconds after which a server refusing TCP goes SHUNNED (default: "
                         "mysql-monitor_ping_interval x mysql-monitor_ping_max_failures; 0 disables the monitors)")
    ap.add_argument("--pause-wait", type=float, default=2.0,
                    help="seconds PROXYSQL PAUSE takes to answer while the MySQL threads let go of the listener "
                         "(a real 2.7.1: 2.0-3.6 s; 0: at once)")
    args = ap.parse_args(argv)
    try:
        select_version(args.proxysql_version, args.hide_pgsql_tables)
        listen = parse_hostport(args.listen)
        control = parse_hostport(args.control) if args.control else None
        mysql_listen = parse_hostport(args.mysql_listen) if args.mysql_listen else None
        config = [(name, getattr(args, attr)) for name, attr in (
            ("admin-stats_credentials", "stats_credentials"), ("admin-cluster_username", "cluster_username"),
            ("admin-cluster_password", "cluster_password"), ("mysql-monitor_username", "monitor_username"),
            ("mysql-monitor_password", "monitor_password")) if getattr(args, attr) is not None]
        for item in args.variable:
            name, sep, value = item.partition("=")
            if not sep:
                raise ValueError("--variable wants NAME=VALUE, got %r" % item)
            config.append((name.strip(), value))
        peers = []
        for item in args.proxysql_server:
            host, port, weight, comment = (item.split(":", 3) + ["0", ""])[:4]
            peers.append((host, int(port), int(weight or 0), comment))
        double = ProxySQLDouble(listen, args.datadir, initial=args.initial,
                                admin_credentials=args.admin_credentials, control=control,
                                monitor_shun_after=args.monitor_shun_after, config=config, proxysql_servers=peers,
                                mysql_listen=mysql_listen, tls_cert=args.tls_cert, tls_key=args.tls_key,
                                pause_wait=args.pause_wait)
    except ValueError as e:
        ap.error(str(e))
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    double.start()
    line = "admin=%s" % fmt_addr(double.host, double.port)
    if double.control_address:
        line += " control=%s" % fmt_addr(*double.control_address)
    if double.admin.frontend is not None:
        line += " mysql=%s" % fmt_addr(double.admin.frontend.host, double.admin.frontend.port)
    if args.port_file:
        tmp = "%s.tmp.%d" % (args.port_file, os.getpid())
        with open(tmp, "w") as f:
            f.write(line + "\n")
        os.replace(tmp, args.port_file)
    print(line, flush=True)
    # Short waits: a SIGTERM the kernel hands to another thread (the main one still had the SIGCONT
    # that Process.stop sends first pending) only sets Python's flag; the handler runs when the main
    # thread next runs bytecode, which a long wait would put off past the stop timeout.
    while not stop.wait(0.2):
        pass
    double.shutdown()
    os._exit(0)      # do not wait for client threads (a hung query must not delay SIGTERM)


if __name__ == "__main__":
    main()
