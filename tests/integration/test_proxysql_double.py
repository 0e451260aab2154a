"""Conformance of the ProxySQL admin double (tests/fakes/proxysql_admin.py).

1. Transcript replay: every step of tests/data/proxysql-2.7.1/admin-transcript.jsonl,
   recorded from a real ProxySQL 2.7.1 with PyMySQL 1.0.2, is replayed in order and
   each answer is compared field by field (one test per step; test_transcript
   reports the first differing step).  With PROXYSQL_BIN set the same replay runs
   against the real binary.
2. agent-facts.jsonl (131 steps, recorded with more credentials, the identity clash,
   the pool, the monitor and the passwords): the bare sections against a double (or a
   real binary) configured like the recorded one, the monitor sections against node 1
   of the harness's Galera cluster (shell steps: SET GLOBAL on that node).
3. cluster-node-b.jsonl (23 steps): node B of a pair of doubles (or real binaries)
   that list each other in proxysql_servers; its shell steps run on node A.
4. Checksums, cluster pulls, monitor moves and logins beyond the recordings; the
   test hooks of the control API, start time, loopback-only listening, SIGTERM,
   protocol corners (auth switch, unsupported commands) and concurrency.

Run: /usr/bin/python3 -m pytest -q tests/integration/test_proxysql_double.py (from the repository root)
"""

import json
import os
import socket
import struct
import subprocess
import sys
import threading
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(HERE)
if TESTS not in sys.path:
    sys.path.insert(0, TESTS)

import pymysql  # noqa: E402
import pymysql.connections  # noqa: E402
import pymysql.err  # noqa: E402
from pymysql.constants import CLIENT  # noqa: E402
from pymysql.protocol import EOFPacketWrapper  # noqa: E402

from fakes.proxysql import DOUBLE, PYTHON, ProxySQL, free_port  # noqa: E402

TRANSCRIPT = os.path.join(TESTS, "data", "proxysql-2.7.1", "admin-transcript.jsonl")
with open(TRANSCRIPT, encoding="utf-8") as _f:
    STEPS = [json.loads(line) for line in _f if line.strip()]

REAL = bool(os.environ.get("PROXYSQL_BIN"))
double_only = pytest.mark.skipif(REAL, reason="property of the double (PROXYSQL_BIN is set)")
# The monitor section (468-475) waits for servers that refuse TCP to go SHUNNED:
# ~24 s on a real ProxySQL with monitor defaults; the double is restarted at the
# recorded restart (454) with a 3 s delay instead.  Phase 1 keeps the default 24 s,
# well above the few seconds the replay needs, as in the recording.
MONITOR_SHUN_AFTER = 3.0
POLL_TIMEOUT = 60.0 if REAL else 20.0
# columns whose values are times or time-driven counters
TIME_COLUMNS = {"epoch", "ConnERR", "Latency_us"}


# ---------------------------------------------------------------------------
# PyMySQL instrumentation: the recording has the SQLSTATE of errors and the
# status flags of the final EOF packet, which PyMySQL does not keep.
# ---------------------------------------------------------------------------

class Wire(threading.local):
    sqlstate = None
    eof_status = None


WIRE = Wire()


@pytest.fixture(scope="module", autouse=True)
def recorded_version():
    """The recordings are of 2.7.1: every double of this module plays 2.7, whatever
    --proxysql-double-version (PROXYSQL_DOUBLE_VERSION) says for the rest of the run."""
    old = os.environ.get("PROXYSQL_DOUBLE_VERSION")
    os.environ["PROXYSQL_DOUBLE_VERSION"] = "2.7"
    yield
    if old is None:
        del os.environ["PROXYSQL_DOUBLE_VERSION"]
    else:
        os.environ["PROXYSQL_DOUBLE_VERSION"] = old


@pytest.fixture(scope="module")
def instrumented_pymysql():
    orig_raise = pymysql.err.raise_mysql_exception
    orig_eof = pymysql.connections.MySQLResult._check_packet_is_eof

    def raise_mysql_exception(data):
        WIRE.sqlstate = data[4:9].decode() if data[3:4] == b"#" else None
        return orig_raise(data)

    def check_packet_is_eof(self, packet):
        if not packet.is_eof_packet():
            return False
        wp = EOFPacketWrapper(packet)
        self.warning_count, self.has_next = wp.warning_count, wp.has_next
        WIRE.eof_status = wp.server_status
        return True

    pymysql.err.raise_mysql_exception = raise_mysql_exception
    pymysql.connections.MySQLResult._check_packet_is_eof = check_packet_is_eof
    try:
        yield
    finally:
        pymysql.err.raise_mysql_exception = orig_raise
        pymysql.connections.MySQLResult._check_packet_is_eof = orig_eof


def text(v):
    return v.decode("utf-8", "surrogateescape") if isinstance(v, (bytes, bytearray)) else v


def run_sql(conn, sql):
    """One COM_QUERY, described like the recording describes it."""
    WIRE.sqlstate = WIRE.eof_status = None
    cur = conn.cursor()
    try:
        cur.execute(sql)
    except pymysql.err.MySQLError as e:
        return {"ok": False, "error": {"code": e.args[0], "sqlstate": WIRE.sqlstate,
                                       "message": e.args[1] if len(e.args) > 1 else "",
                                       "exception": type(e).__name__}}
    r = conn._result
    out = {"ok": True, "warning_count": r.warning_count}
    if r.description:
        out["columns"] = [text(f.name) for f in r.fields]
        out["fields"] = [{"catalog": text(f.catalog), "db": text(f.db), "table": text(f.table_name),
                          "org_table": text(f.org_table), "name": text(f.name), "org_name": text(f.org_name),
                          "charsetnr": f.charsetnr, "length": f.length, "type_code": f.type_code,
                          "flags": f.flags, "decimals": f.scale} for f in r.fields]
        out["rows"] = [[text(v) for v in row] for row in r.rows]
        out["affected_rows"] = None
        out["eof_server_status"] = WIRE.eof_status
    else:
        out.update(columns=None, rows=None, affected_rows=r.affected_rows, insert_id=r.insert_id,
                   server_status=r.server_status, info=bytes(r.message or b""))
    return out


# ---------------------------------------------------------------------------
# The replay
# ---------------------------------------------------------------------------

class Replay:
    """Plays recorded steps against a fixture; results[step] lists the differences found.

    shell: a callable(step) performing a recorded side action (a SET GLOBAL on a harness
    node, SQL on a peer) and returning its differences; without one, shell steps fail."""

    def __init__(self, proxysql, steps=None, shell=None):
        self.p = proxysql
        self.steps = STEPS if steps is None else steps
        self.shell = shell
        self.conns = {}
        self.results = {}        # step -> list of differences ([] = identical)

    # -- connections -------------------------------------------------------------

    def conn(self, name):
        if name not in self.conns:
            flags = CLIENT.MULTI_STATEMENTS if name == "multi" else 0
            self.conns[name] = self.p.connect(client_flag=flags)
        return self.conns[name]

    def close_all(self):
        for c in self.conns.values():
            try:
                c.close()
            except Exception:
                pass
        self.conns.clear()

    # -- comparison ----------------------------------------------------------------

    def expected_rows(self, step):
        rows = [list(r) for r in step["rows"]]
        for r in rows:      # env-specific: the interface the admin really listens on
            if len(r) == 2 and r[0] == "admin-mysql_ifaces":
                r[1] = self.p.admin_addr
        return rows

    def compare_rows(self, step, got, diffs, exp=None):
        exp = self.expected_rows(step) if exp is None else exp
        cols = step.get("columns") or []
        if len(exp) != len(got):
            diffs.append("row count: expected %d, got %d\n  expected %s\n  got      %s"
                         % (len(exp), len(got), short(exp), short(got)))
            return
        for i, (e, g) in enumerate(zip(exp, got)):
            if len(e) != len(g):
                diffs.append("rows[%d]: expected %s, got %s" % (i, short(e), short(g)))
                continue
            for j, (ev, gv) in enumerate(zip(e, g)):
                col = cols[j] if j < len(cols) else str(j)
                if step.get("time_dependent") and col in TIME_COLUMNS:
                    if not str(gv).lstrip("-").isdigit():
                        diffs.append("rows[%d].%s: expected an integer (time-dependent), got %r" % (i, col, gv))
                    elif col == "epoch" and abs(int(gv) - time.time()) > 3600:
                        diffs.append("rows[%d].epoch: %s is not a current unix time" % (i, gv))
                    continue
                if step["step"] == 12 and col == "file" and ev:
                    want = os.path.join(self.p.datadir, os.path.basename(ev))
                    if gv != want and not (REAL and str(gv).endswith(os.path.basename(ev))):
                        diffs.append("rows[%d].file: expected %s (env-specific), got %r" % (i, want, gv))
                    continue
                if ev != gv:
                    diffs.append("rows[%d].%s: expected %r, got %r" % (i, col, ev, gv))

    def compare_sql(self, step, got):
        diffs = []
        if step["ok"] != got["ok"]:
            diffs.append("ok: expected %s, got %s (%s)" % (step["ok"], got["ok"], got.get("error") or
                                                           "a result"))
            return diffs
        if not step["ok"]:
            for k in ("code", "sqlstate", "message", "exception"):
                if step["error"].get(k) != got["error"].get(k):
                    diffs.append("error.%s: expected %r, got %r" % (k, step["error"].get(k), got["error"].get(k)))
            return diffs
        if step["columns"] != got["columns"]:
            diffs.append("columns: expected %s, got %s" % (step["columns"], got["columns"]))
        for i, f in enumerate(step.get("fields") or []):
            g = got["fields"][i] if i < len(got.get("fields", [])) else {}
            for k, v in f.items():
                if k == "type_name":
                    continue
                if g.get(k) != v:
                    diffs.append("fields[%d].%s: expected %r, got %r" % (i, k, v, g.get(k)))
        for i, ct in enumerate(step.get("column_types") or []):
            g = got["fields"][i] if i < len(got.get("fields", [])) else {}
            have = [g.get("type_code"), g.get("charsetnr"), g.get("length"), g.get("flags"), g.get("decimals")]
            if have != ct:
                diffs.append("column_types[%d] (type, charset, length, flags, decimals): expected %s, got %s"
                             % (i, ct, have))
        if step.get("rows") is not None:
            self.compare_rows(step, got.get("rows") or [], diffs)
        elif step["columns"] is None and got.get("rows") is not None:
            diffs.append("expected an OK packet, got a result set %s" % short(got["rows"]))
        elif step.get("rows_omitted") and not got.get("rows"):
            diffs.append("expected some rows (values not recorded), got none")
        if step.get("row_count") is not None and step.get("rows") is None \
                and len(got.get("rows") or []) != step["row_count"]:
            diffs.append("row_count: expected %d, got %d" % (step["row_count"], len(got.get("rows") or [])))
        for k in ("affected_rows", "warning_count", "eof_server_status", "server_status", "insert_id"):
            if k in step and step[k] != got.get(k):
                diffs.append("%s: expected %r, got %r" % (k, step[k], got.get(k)))
        if "info" in step:
            want = bytes.fromhex(step["info_raw_hex"]) if "info_raw_hex" in step else step["info"].encode()
            if want != got.get("info"):
                diffs.append("info: expected %r, got %r" % (want, got.get("info")))
        return diffs

    # -- step types ----------------------------------------------------------------

    def step_start(self, step):
        self.p.start(initial=step.get("initial", False))
        return []

    def step_restart(self, step):
        self.close_all()
        self.p.restart(initial=False, monitor_shun_after=MONITOR_SHUN_AFTER)
        return []

    def step_stop(self, step):
        self.close_all()
        self.p.stop()
        return [] if self.p.returncode in (0, None) or REAL else ["exit status %s after SIGTERM" % self.p.returncode]

    def step_sleep(self, step):
        return []     # only makes epochs differ; nothing compared depends on it

    def step_handshake(self, step):
        diffs = []
        with socket.create_connection((self.p.host, self.p.admin_port), timeout=10) as s:
            data = b""
            while len(data) < 4 or len(data) < 4 + int.from_bytes(data[:3], "little"):
                chunk = s.recv(4096)
                if not chunk:
                    break
                data += chunk
        pkt = data[4:]
        end = pkt.index(b"\0", 1)
        got = {"protocol_version": pkt[0], "server_version": pkt[1:end].decode()}
        pos = end + 1
        got["thread_id"] = struct.unpack_from("<I", pkt, pos)[0]
        salt1 = pkt[pos + 4:pos + 12]
        pos += 13
        lo = struct.unpack_from("<H", pkt, pos)[0]
        got["server_language"] = pkt[pos + 2]
        got["server_status"] = struct.unpack_from("<H", pkt, pos + 3)[0]
        hi = struct.unpack_from("<H", pkt, pos + 5)[0]
        got["server_capabilities"] = lo | hi << 16
        salt_len = pkt[pos + 7]
        pos += 18
        salt2 = pkt[pos:pos + max(13, salt_len - 8) - 1]
        pos += max(13, salt_len - 8)
        got["auth_plugin_name"] = pkt[pos:pkt.index(b"\0", pos)].decode()
        got["salt_length"] = len(salt1 + salt2)
        exp = step["handshake"]
        for k in ("protocol_version", "server_version", "server_capabilities", "server_language",
                  "server_status", "auth_plugin_name", "salt_length"):
            if exp[k] != got[k]:
                diffs.append("handshake.%s: expected %r, got %r" % (k, exp[k], got[k]))
        if not isinstance(got["thread_id"], int) or got["thread_id"] <= 0:   # env-specific value
            diffs.append("handshake.thread_id: expected a positive id, got %r" % got["thread_id"])
        return diffs

    def step_connect(self, step):
        diffs = []
        WIRE.sqlstate = None
        try:
            c = self.p.connect(step["user"], step["password"])
        except pymysql.err.MySQLError as e:
            if step["ok"]:
                return ["connect: expected success, got %r" % (e.args,)]
            got = {"code": e.args[0], "sqlstate": WIRE.sqlstate, "message": e.args[1],
                   "exception": type(e).__name__}
            for k in ("code", "sqlstate", "message", "exception"):
                if step["error"][k] != got[k]:
                    diffs.append("error.%s: expected %r, got %r" % (k, step["error"][k], got[k]))
            return diffs
        if not step["ok"]:
            c.close()
            return ["connect: expected %s, but the login succeeded" % step["error"]]
        if c.server_version != step["server_version"]:
            diffs.append("server_version: expected %r, got %r" % (step["server_version"], c.server_version))
        if step.get("conn"):
            self.conns[step["conn"]] = c
        else:
            c.close()
        return diffs

    def step_close(self, step):
        c = self.conns.pop(step["conn"], None)
        if c is not None:
            c.close()
        return []

    def step_sql(self, step):
        return self.compare_sql(step, run_sql(self.conn(step["conn"]), step["sql"]))

    def step_poll(self, step):
        """Poll until the last recorded snapshot shows up; every answer seen must be a recorded one."""
        snapshots = [s["rows"] for s in step["snapshots"]]
        final = snapshots[-1]
        settle = min(step.get("polled_s", 0), 1.0) if len(snapshots) == 1 else 0
        deadline = time.monotonic() + POLL_TIMEOUT
        start = time.monotonic()
        while True:
            got = run_sql(self.conn(step["conn"]), step["sql"])
            if not got["ok"]:
                return ["poll: %s" % got["error"]]
            if got["columns"] != step["columns"]:
                return ["columns: expected %s, got %s" % (step["columns"], got["columns"])]
            rows = got["rows"]
            if rows not in snapshots:
                return ["poll: answer %s is none of the recorded snapshots %s" % (short(rows), short(snapshots))]
            if rows == final and time.monotonic() - start >= settle:
                return []
            if time.monotonic() > deadline:
                return ["poll: the final snapshot %s did not show up in %.0fs (last: %s)"
                        % (short(final), POLL_TIMEOUT, short(rows))]
            time.sleep(0.1)

    def step_shell(self, step):
        if self.shell is None:
            return ["shell step %r: this replay has no way to perform it" % step.get("action")]
        return self.shell(step)

    def run(self):
        for step in self.steps:
            try:
                self.results[step["step"]] = getattr(self, "step_" + step["type"])(step)
            except Exception as e:     # a crash of one step must not hide the others
                self.results[step["step"]] = ["%s raised %s: %s" % (step["type"], type(e).__name__, e)]
        self.close_all()


def short(v, n=400):
    s = repr(v)
    return s if len(s) <= n else s[:n] + "..."


def describe(step):
    what = step.get("sql") if "sql" in step else step["type"]
    return "step %d (%s, %s): %s" % (step["step"], step["type"], step["section"], short(what, 200))


@pytest.fixture(scope="module")
def replay(instrumented_pymysql):
    for port in (13401, 13402):    # the monitor section needs servers that refuse TCP
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                pytest.fail("127.0.0.1:%d accepts connections; the recorded monitor steps need it closed" % port)
    p = ProxySQL(monitor_shun_after=24.0)
    r = Replay(p)
    try:
        r.run()
    finally:
        p.close()
    return r


@pytest.mark.parametrize("step", STEPS, ids=lambda s: "%03d-%s" % (s["step"], s["type"]))
def test_step(replay, step):
    diffs = replay.results[step["step"]]
    assert not diffs, describe(step) + "\n  " + "\n  ".join(diffs)


def test_transcript(replay):
    """The whole recording, with the first differing step spelled out."""
    assert len(STEPS) == 476 and [s["step"] for s in STEPS] == list(range(1, 477))
    failing = [s for s in STEPS if replay.results[s["step"]]]
    if failing:
        first = failing[0]
        pytest.fail("%d of %d steps differ; first: %s\n  %s\n  (others: %s)"
                    % (len(failing), len(STEPS), describe(first), "\n  ".join(replay.results[first["step"]]),
                       [s["step"] for s in failing[1:30]]))


# ---------------------------------------------------------------------------
# agent-facts.jsonl: what a sync agent depends on (identity clash, pool, passwords),
# recorded from a real 2.7.1 started with the credentials below.
# ---------------------------------------------------------------------------

def load_steps(name):
    with open(os.path.join(TESTS, "data", "proxysql-2.7.1", name), encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


AGENT_FACTS = load_steps("agent-facts.jsonl")
# the sections replayed against a bare ProxySQL (no MariaDB backend needed)
AGENT_FACTS_BARE = [s for s in AGENT_FACTS
                    if s["section"].startswith(("identity", "pool")) or s["section"] == "passwords"]
AGENT_FACTS_CONFIG = dict(
    admin_credentials="admin:admin;ops:opspw;cluster1:clusterpw", stats_credentials="stats:stats;observer:obspw",
    cluster_username="cluster1", cluster_password="clusterpw", monitor_username="monitor",
    monitor_password="monitorpw",
    variables=[("mysql-monitor_ping_interval", "1000"), ("mysql-monitor_read_only_interval", "500")])


def replay_results(steps, shell=None, **kwargs):
    p = ProxySQL(**dict(AGENT_FACTS_CONFIG, **dict(dict(monitor_shun_after=0 if not REAL else None), **kwargs)))
    p.start()
    r = Replay(p, steps, shell=shell)
    try:
        r.run()
    finally:
        p.close()
    return r


def require_refused(ports, what):
    for port in ports:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                pytest.fail("127.0.0.1:%d accepts connections; the recorded %s steps need it closed" % (port, what))


@pytest.fixture(scope="module")
def agent_facts_bare(instrumented_pymysql):
    require_refused(range(13501, 13512), "pool")    # the pool section's servers refuse TCP, as recorded
    return replay_results(AGENT_FACTS_BARE)


@pytest.mark.parametrize("step", AGENT_FACTS_BARE, ids=lambda s: "%03d-%s-%s" % (s["step"], s["type"], s["section"]))
def test_agent_facts_step(agent_facts_bare, step):
    diffs = agent_facts_bare.results[step["step"]]
    assert not diffs, describe(step) + "\n  " + "\n  ".join(diffs)


# The monitor sections need a live MariaDB: the recording's 1-node Galera on 127.0.0.1:3391 is
# node 1 of the harness cluster here (its port replaces 3391 in the SQL and the answers), the
# monitor logs in with the harness's monitor user, and the shell steps run on that node.
AGENT_FACTS_MONITOR = [s for s in AGENT_FACTS
                       if s["section"] in ("replication_hostgroups", "shunned", "galera_hostgroups")]
RECORDED_NODE_PORT = "3391"


def retarget(steps, old, new):
    """The steps with the recorded port `old` replaced by `new` in SQL, rows and snapshots."""
    def values(rows):
        return [[new if v == old else v for v in r] for r in rows]
    out = []
    for step in steps:
        step = dict(step)
        if "sql" in step:
            step["sql"] = step["sql"].replace(",%s)" % old, ",%s)" % new).replace("port=%s" % old, "port=%s" % new)
        if step.get("rows") is not None:
            step["rows"] = values(step["rows"])
        if "snapshots" in step:
            step["snapshots"] = [dict(snap, rows=values(snap["rows"])) for snap in step["snapshots"]]
        out.append(step)
    return out


def on_node(node):
    actions = {"SET GLOBAL read_only=ON on the node": lambda: node.set_read_only(True),
               "SET GLOBAL read_only=OFF on the node": lambda: node.set_read_only(False),
               "SET GLOBAL wsrep_desync=ON": lambda: node.desync(True),
               "SET GLOBAL wsrep_desync=OFF": lambda: node.desync(False)}

    def shell(step):
        actions[step["action"]]()
        return []
    return shell


@pytest.fixture(scope="module")
def agent_facts_monitor(instrumented_pymysql, galera, mysql_creds):
    require_refused([13511], "shunned")
    node = galera[1]
    galera.heal()
    assert node.ip == "127.0.0.1"
    try:
        return replay_results(retarget(AGENT_FACTS_MONITOR, RECORDED_NODE_PORT, str(node.port)), shell=on_node(node),
                              monitor_password=mysql_creds.password, monitor_shun_after=None)
    finally:
        galera.heal()


@pytest.mark.parametrize("step", AGENT_FACTS_MONITOR, ids=lambda s: "%03d-%s-%s" % (s["step"], s["type"], s["section"]))
def test_agent_facts_monitor_step(agent_facts_monitor, step):
    diffs = agent_facts_monitor.results[step["step"]]
    assert not diffs, describe(step) + "\n  " + "\n  ".join(diffs)


def test_monitor_move_changes_the_runtime_checksum_only(instrumented_pymysql, galera, mysql_creds):
    """AGENT-FACTS.md, checksums: when the monitor moves a server (read_only=ON) the runtime
    mysql_servers checksum changes and its epoch with it, not its version; mysql_servers_v2 and
    memory stay; a LOAD with nothing changed puts the server back (and the checksum)."""
    node = galera[1]
    galera.heal()
    p = ProxySQL(**dict(AGENT_FACTS_CONFIG, monitor_password=mysql_creds.password,
                        monitor_shun_after=None if REAL else 30.0))
    p.start()
    try:
        q = p.query
        sums = "SELECT name, version, checksum FROM runtime_checksums_values WHERE name LIKE 'mysql_servers%' ORDER BY name"
        q("INSERT INTO mysql_replication_hostgroups (writer_hostgroup, reader_hostgroup) VALUES (40, 41)")
        q("INSERT INTO mysql_servers (hostgroup_id, hostname, port) VALUES (40, '127.0.0.1', %d)" % node.port)
        q(LOAD_SERVERS)
        loaded = q(sums)
        memory = q("CHECKSUM MEMORY MYSQL SERVERS")
        node.set_read_only(True)
        moved = wait_for_rows(p, "SELECT hostgroup_id FROM runtime_mysql_servers", [("41",)])
        after = q(sums)
        assert moved == [("41",)]
        assert after[1] == loaded[1] and after[0][:2] == loaded[0][:2] and after[0][2] != loaded[0][2]
        assert q("CHECKSUM MEMORY MYSQL SERVERS") == memory
        q(LOAD_SERVERS)
        assert q("SELECT checksum FROM runtime_checksums_values WHERE name='mysql_servers'") == [(loaded[0][2],)]
    finally:
        p.close()
        galera.heal()


@double_only
def test_read_only_monitor_leaves_servers_it_cannot_check():
    """A read_only check that fails (refused, or a login the backend rejects) moves nothing."""
    require_refused([13509], "read_only")
    with socket.socket() as listener:            # accepts TCP, then closes: no MySQL greeting
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        mute = listener.getsockname()[1]
        p = ProxySQL(monitor_shun_after=30.0, variables=[("mysql-monitor_read_only_interval", "100")])
        p.start()
        try:
            p.query("INSERT INTO mysql_replication_hostgroups (writer_hostgroup, reader_hostgroup) VALUES (40, 41)")
            p.query("INSERT INTO mysql_servers (hostgroup_id, hostname, port) VALUES (40, '127.0.0.1', 13509), "
                    "(41, '127.0.0.1', %d)" % mute)
            p.query(LOAD_SERVERS)
            time.sleep(0.6)
            assert p.query("SELECT hostgroup_id, port FROM runtime_mysql_servers") == [
                ("40", "13509"), ("41", str(mute))]
        finally:
            p.close()


# ---------------------------------------------------------------------------
# cluster-node-b.jsonl: node B of a 2-node ProxySQL Cluster; the shell steps are SQL
# sent to node A.  Both nodes list each other in proxysql_servers and pull each
# other's mysql_servers over the admin protocol.
# ---------------------------------------------------------------------------

CLUSTER_B = load_steps("cluster-node-b.jsonl")
RECORDED_PORTS = {"17040": "A", "17050": "B"}
LOAD_SERVERS = "LOAD MYSQL SERVERS TO RUNTIME"
# what node A was sent at each shell step (the recording describes it in words; the rows
# follow from B's answers): a list of statements, or a wait for A's own main table
CLUSTER_SHELL = {
    5: ["INSERT INTO mysql_servers (hostgroup_id,hostname,port) VALUES (10,'10.0.0.1',3306),(11,'10.0.0.2',3306)",
        LOAD_SERVERS],
    14: ("10", "10.0.0.1", "11", "10.0.0.2", "11", "10.0.0.3"),   # A has pulled B's row, as in the recording
    15: ["DELETE FROM mysql_servers WHERE hostname='10.0.0.2'", LOAD_SERVERS],
    21: ["INSERT INTO mysql_servers (hostgroup_id,hostname,port) VALUES (12,'10.0.0.4',3306)", LOAD_SERVERS],
}
# the recorded 8-s sleeps are many check intervals (200 ms); the double needs far fewer
CLUSTER_SLEEP = None if REAL else 2.0


class ClusterReplay(Replay):
    """The replay of node B, with node A at hand for the shell steps."""

    def __init__(self, node_b, node_a, steps):
        super().__init__(node_b, steps, shell=self.on_node_a)
        self.a = node_a
        self.ports = {"A": str(node_a.admin_port), "B": str(node_b.admin_port)}

    def expected_rows(self, step):
        return [[self.ports[RECORDED_PORTS[v]] if v in RECORDED_PORTS else v for v in r]
                for r in super().expected_rows(step)]

    def compare_rows(self, step, got, diffs, exp=None):
        exp = self.expected_rows(step) if exp is None else exp
        cols = step.get("columns") or []
        if step.get("time_dependent") and "diff_check" in cols and len(exp) == len(got):
            # how many checks have passed since the pull, and whether B's monitor of itself
            # has fetched B's new version yet, is timing: a settled answer is accepted too
            own = self.p.query("SELECT version FROM runtime_checksums_values WHERE name='mysql_servers'")[0][0]
            vi, di, pi = cols.index("version"), cols.index("diff_check"), cols.index("port")
            for e, g in zip(exp, got):
                if g[di] == "0":
                    e[di] = "0"
                if e[pi] == self.ports["B"] and g[vi] == own:
                    e[vi] = own
        super().compare_rows(step, got, diffs, exp)

    def step_sleep(self, step):
        time.sleep(step["seconds"] if CLUSTER_SLEEP is None else min(step["seconds"], CLUSTER_SLEEP))
        return []

    last_load = 0.0

    def before_load(self):
        """Epochs are unix seconds and a node pulls only a strictly newer one: two LOADs on the
        two nodes within one second make a conflict nobody resolves.  The recorded steps were
        further apart; here each LOAD starts in a later second than the one in which the previous
        LOAD ended (a LOAD takes its epoch while the server runs it, so the second it was sent in
        is not enough: one sent at x.995 may take epoch x+1)."""
        while int(time.time()) <= int(self.last_load):
            time.sleep(1.0 - time.time() % 1.0 + 0.01)

    def after_load(self):
        self.last_load = time.time()

    def step_sql(self, step):
        if not step["sql"].upper().startswith("LOAD MYSQL SERVERS"):
            return super().step_sql(step)
        self.before_load()
        try:
            return super().step_sql(step)
        finally:
            self.after_load()

    def on_node_a(self, step):
        action = CLUSTER_SHELL[step["step"]]
        if isinstance(action, tuple):
            want = [list(action[i:i + 2]) for i in range(0, len(action), 2)]
            deadline = time.monotonic() + POLL_TIMEOUT
            while True:
                got = [list(r) for r in self.a.query("SELECT hostgroup_id, hostname FROM main.mysql_servers "
                                                     "ORDER BY hostgroup_id, hostname")]
                if got == want:
                    return []
                if time.monotonic() > deadline:
                    return ["node A's main: expected %s, got %s" % (want, got)]
                time.sleep(0.1)
        for sql in action:
            if sql == LOAD_SERVERS:
                self.before_load()
            self.a.query(sql)
            if sql == LOAD_SERVERS:
                self.after_load()
        return []


def cluster_pair(**kwargs):
    """Nodes A and B (A on the lower port, as recorded: ORDER BY port lists A first)."""
    ports = sorted(free_port() for _ in range(2))
    peers = [("127.0.0.1", ports[0], 0, "A"), ("127.0.0.1", ports[1], 0, "B")]
    config = dict(admin_credentials="admin:admin;cluster1:clusterpw", cluster_username="cluster1",
                  cluster_password="clusterpw", proxysql_servers=peers,
                  variables=[("admin-cluster_check_interval_ms", "200")])
    if not REAL:
        config["monitor_shun_after"] = 0
    config.update(kwargs)
    return ProxySQL(admin_port=ports[0], **config), ProxySQL(admin_port=ports[1], **config)


@pytest.fixture(scope="module")
def cluster_replay(instrumented_pymysql):
    a, b = cluster_pair()
    try:
        a.start()
        b.start()
        r = ClusterReplay(b, a, CLUSTER_B)
        r.run()
    finally:
        b.close()
        a.close()
    return r


@pytest.mark.parametrize("step", CLUSTER_B, ids=lambda s: "%02d-%s-%s" % (s["step"], s["type"], s["section"]))
def test_cluster_node_b_step(cluster_replay, step):
    diffs = cluster_replay.results[step["step"]]
    assert not diffs, describe(step) + "\n  " + "\n  ".join(diffs)


def wait_for_rows(p, sql, want, timeout=POLL_TIMEOUT):
    deadline = time.monotonic() + timeout
    while True:
        got = p.query(sql)
        if got == want or time.monotonic() > deadline:
            return got
        time.sleep(0.05)


def next_second():
    time.sleep(1.0 - time.time() % 1.0 + 0.01)


def test_cluster_pull_loses_staged_rows_and_pulls_users():
    """Measured by hand on the recorded pair (AGENT-FACTS.md): B's staged rows are lost to a pull
    of A's change, and B's next LOAD publishes A's row plus what B staged after it.  Users follow
    the same way (the peer's loaded rows), saved to disk; diffs_before_sync=0 stops a module, and
    (from the source) reaches the peer with the admin variables."""
    a, b = cluster_pair()
    try:
        a.start()
        b.start()
        servers = "SELECT hostgroup_id, hostname FROM main.mysql_servers ORDER BY hostgroup_id, hostname"
        b.query("INSERT INTO mysql_servers (hostgroup_id, hostname) VALUES (20, 'staged1'), (20, 'staged2')")
        a.query("INSERT INTO mysql_servers (hostgroup_id, hostname) VALUES (10, 'from-a')")
        a.query(LOAD_SERVERS)
        assert wait_for_rows(b, servers, [("10", "from-a")]) == [("10", "from-a")]
        b.query("INSERT INTO mysql_servers (hostgroup_id, hostname) VALUES (20, 'staged3')")
        next_second()
        b.query(LOAD_SERVERS)
        assert b.query("SELECT hostgroup_id, hostname FROM runtime_mysql_servers") == [
            ("10", "from-a"), ("20", "staged3")]

        users = "SELECT username, frontend, backend FROM main.mysql_users ORDER BY username"
        a.query("INSERT INTO mysql_users (username, password, default_hostgroup) VALUES ('app', 'pw', 10)")
        a.query("LOAD MYSQL USERS TO RUNTIME")
        assert wait_for_rows(b, users, [("app", "1", "1")]) == [("app", "1", "1")]
        assert b.query("SELECT username FROM disk.mysql_users") == [("app",)]
        assert b.query("SELECT checksum FROM runtime_checksums_values WHERE name='mysql_users'") == \
            a.query("SELECT checksum FROM runtime_checksums_values WHERE name='mysql_users'")

        b.query("SET admin-cluster_mysql_users_diffs_before_sync=0")
        b.query("LOAD ADMIN VARIABLES TO RUNTIME")
        # admin variables are pulled like the rest: A takes B's newer ones, the 0 included
        setting = ("SELECT variable_value FROM runtime_global_variables "
                   "WHERE variable_name='admin-cluster_mysql_users_diffs_before_sync'")
        assert wait_for_rows(a, setting, [("0",)]) == [("0",)]
        assert a.query(setting.replace("runtime_global_variables", "disk.global_variables")) == [("0",)]
        next_second()
        a.query("INSERT INTO mysql_users (username, password, default_hostgroup) VALUES ('late', 'pw', 10)")
        a.query("LOAD MYSQL USERS TO RUNTIME")
        time.sleep(1.5)
        assert b.query(users) == [("app", "1", "1")]
    finally:
        b.close()
        a.close()


# ---------------------------------------------------------------------------
# Test hooks, lifecycle and protocol corners
# ---------------------------------------------------------------------------

@pytest.fixture
def proxysql():
    p = ProxySQL(monitor_shun_after=0)
    p.start()
    try:
        yield p
    finally:
        p.close()


def timed(fn):
    t = time.monotonic()
    result = fn()
    return time.monotonic() - t, result


def test_hook_statements(proxysql):
    proxysql.clear_statements()
    c = proxysql.connect()
    with c.cursor() as cur:
        cur.execute("SELECT 1")
        cur.execute("INSERT INTO mysql_servers (hostgroup_id,hostname) VALUES (1,'x')")
    s = proxysql.connect("stats", "stats")
    with s.cursor() as cur:
        cur.execute("SELECT * FROM stats_mysql_global LIMIT 1")
    got = proxysql.statements()
    assert [(x["user"], x["sql"]) for x in got] == [
        ("admin", "SELECT 1"), ("admin", "INSERT INTO mysql_servers (hostgroup_id,hostname) VALUES (1,'x')"),
        ("stats", "SELECT * FROM stats_mysql_global LIMIT 1")]
    assert got[0]["conn"] == got[1]["conn"] != got[2]["conn"]
    assert [x["seq"] for x in got] == [1, 2, 3]
    assert proxysql.clear_statements() == {"cleared": 3}
    assert proxysql.statements() == []
    c.close()
    s.close()


def test_hook_latency(proxysql):
    c = proxysql.connect()
    proxysql.control("latency", ms=300)
    with c.cursor() as cur:
        elapsed, _ = timed(lambda: cur.execute("SELECT 1"))
        assert elapsed >= 0.3
        proxysql.control("latency", ms=0)
        elapsed, _ = timed(lambda: cur.execute("SELECT 1"))
        assert elapsed < 0.2
    c.close()


def test_hook_hang_until_release(proxysql):
    c = proxysql.connect(read_timeout=30)
    proxysql.control("hang", count=1, seconds=0)
    done = threading.Event()
    result = []

    def run():
        with c.cursor() as cur:
            cur.execute("SELECT 42")
            result.append(cur.fetchall())
        done.set()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    assert not done.wait(0.8), "the query answered although it should hang"
    # other connections are not blocked by a hung query
    assert proxysql.query("SELECT 7") == [("7",)]
    proxysql.control("release")
    assert done.wait(5)
    assert result == [(("42",),)]
    c.close()


def test_hook_hang_seconds_and_count(proxysql):
    c = proxysql.connect()
    proxysql.control("hang", count=2, seconds=0.4)
    with c.cursor() as cur:
        for _ in range(2):
            elapsed, _ = timed(lambda: cur.execute("SELECT 1"))
            assert 0.35 <= elapsed < 3
        elapsed, _ = timed(lambda: cur.execute("SELECT 1"))
        assert elapsed < 0.2
    c.close()


def test_hook_drop(proxysql):
    c = proxysql.connect()
    proxysql.control("drop", count=1)
    with pytest.raises(pymysql.err.OperationalError) as e:
        with c.cursor() as cur:
            cur.execute("SELECT 1")
    assert e.value.args[0] in (2013, 2006)
    assert proxysql.query("SELECT 1") == [("1",)]


def test_hook_fail_writes_and_load(proxysql):
    proxysql.control("fail", count=2, code=1045, message="ProxySQL Admin Error: injected")
    c = proxysql.connect()
    with c.cursor() as cur:
        cur.execute("SELECT COUNT(*) FROM mysql_servers")          # reads are not failed
        with pytest.raises(pymysql.err.OperationalError) as e:
            cur.execute("INSERT INTO mysql_servers (hostgroup_id,hostname) VALUES (1,'a')")
        assert e.value.args == (1045, "ProxySQL Admin Error: injected")
        with pytest.raises(pymysql.err.OperationalError):
            cur.execute("LOAD MYSQL SERVERS TO RUNTIME")
        cur.execute("INSERT INTO mysql_servers (hostgroup_id,hostname) VALUES (1,'b')")
        cur.execute("SELECT hostname FROM mysql_servers")
        assert cur.fetchall() == (("b",),)                           # the failed one never ran
    proxysql.control("fail", count=1, code=2013, message="gone", match="LOAD MYSQL")
    with c.cursor() as cur:
        cur.execute("DELETE FROM mysql_servers")                      # not matched
        with pytest.raises(pymysql.err.MySQLError) as e:
            cur.execute("LOAD MYSQL SERVERS TO RUNTIME")
        assert e.value.args == (2013, "gone")
    c.close()


def test_hook_pool_drain(proxysql):
    q = proxysql.query
    q("INSERT INTO mysql_servers (hostgroup_id,hostname,port) VALUES (10,'127.0.0.1',13306)")
    q("LOAD MYSQL SERVERS TO RUNTIME")
    assert proxysql.control("pool", hostgroup=10, host="127.0.0.1", port=13306, used=5)["ConnUsed"] == 5
    pool = "SELECT hostgroup, srv_host, srv_port, status, ConnUsed, MaxConnUsed FROM stats_mysql_connection_pool"
    assert q(pool) == [("10", "127.0.0.1", "13306", "ONLINE", "5", "5")]
    # drain: OFFLINE_SOFT keeps the used connections
    q("UPDATE mysql_servers SET status='OFFLINE_SOFT'")
    q("LOAD MYSQL SERVERS TO RUNTIME")
    assert q(pool) == [("10", "127.0.0.1", "13306", "OFFLINE_SOFT", "5", "5")]
    # deleted while connections are in use: OFFLINE_HARD until they are released
    q("DELETE FROM mysql_servers")
    q("LOAD MYSQL SERVERS TO RUNTIME")
    assert q(pool) == [("10", "127.0.0.1", "13306", "OFFLINE_HARD", "5", "5")]
    assert q("SELECT hostgroup_id, hostname, port, status FROM runtime_mysql_servers") == [
        ("10", "127.0.0.1", "13306", "OFFLINE_HARD")]
    proxysql.control("pool", hostgroup=10, host="127.0.0.1", port=13306, used=0)
    # released, but only a purge (a read of runtime_mysql_servers or the next LOAD) drops it
    assert q(pool) == [("10", "127.0.0.1", "13306", "OFFLINE_HARD", "0", "5")]
    assert q("SELECT * FROM runtime_mysql_servers") == []
    assert q(pool) == []
    with pytest.raises(RuntimeError, match="404"):
        proxysql.control("pool", hostgroup=10, host="127.0.0.1", port=13306, used=1)


def test_hook_reset(proxysql):
    proxysql.control("latency", ms=500)
    proxysql.control("fail", count=5)
    proxysql.control("drop", count=5)
    state = proxysql.control("reset")
    assert state["latency_ms"] == 0 and state["fail"]["count"] == 0 and state["drop"]["count"] == 0
    elapsed, rows = timed(lambda: proxysql.query("SELECT 1"))
    assert rows == [("1",)] and elapsed < 0.5
    assert proxysql.query("INSERT INTO mysql_servers (hostgroup_id,hostname) VALUES (1,'x')") == 1


@double_only
def test_starts_in_well_under_a_second(tmp_path):
    port_file = tmp_path / "ports"
    t = time.monotonic()
    proc = subprocess.Popen([PYTHON, DOUBLE, "--listen", "127.0.0.1:0", "--datadir", str(tmp_path / "d"),
                             "--initial", "--port-file", str(port_file)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        while not port_file.exists():
            assert proc.poll() is None, proc.stderr.read()
            assert time.monotonic() - t < 5
            time.sleep(0.002)
        started = time.monotonic() - t
        line = port_file.read_text().strip()
        port = int(line.split(":")[-1])
        conn = pymysql.connect(host="127.0.0.1", port=port, user="admin", password="admin", autocommit=None)
        conn.close()
        ready = time.monotonic() - t
    finally:
        proc.terminate()
        proc.wait(5)
    assert line.startswith("admin=127.0.0.1:")
    assert started < 1.0 and ready < 1.0, (started, ready)


@double_only
def test_config_options_of_a_fresh_datadir(tmp_path):
    """--variable takes only variables the double has; config values land in global_variables of a
    fresh datadir only (like proxysql.cnf), proxysql_servers rows too."""
    r = subprocess.run([PYTHON, DOUBLE, "--listen", "127.0.0.1:0", "--datadir", str(tmp_path / "x"),
                        "--variable", "mysql-no_such_thing=1"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "mysql-no_such_thing" in r.stderr, r.stderr
    p = ProxySQL(monitor_shun_after=0, stats_credentials="stats:stats;observer:obspw",
                 variables=[("mysql-monitor_read_only_interval", "500")],
                 proxysql_servers=[("127.0.0.1", 16998, 1, "peer")])
    p.start()
    try:
        q = "SELECT variable_value FROM global_variables WHERE variable_name IN " \
            "('admin-stats_credentials', 'mysql-monitor_read_only_interval') ORDER BY variable_name"
        assert p.query(q) == [("stats:stats;observer:obspw",), ("500",)]
        assert p.query("SELECT * FROM runtime_proxysql_servers") == [("127.0.0.1", "16998", "1", "peer")]
        assert p.query("SELECT 1", "observer", "obspw") == [("1",)]
        p.query("UPDATE global_variables SET variable_value='900' WHERE variable_name='mysql-monitor_read_only_interval'")
        p.query("SAVE MYSQL VARIABLES TO DISK")
        p.restart()                              # not fresh: the config is not read again
        assert p.query(q)[1] == ("900",)
        assert p.query("LOAD MYSQL VARIABLES FROM CONFIG") == 1     # one mysql-* variable in the config
        assert p.query(q)[1] == ("500",)
    finally:
        p.close()


@double_only
def test_listens_on_loopback_only(tmp_path):
    for addr in ("0.0.0.0:0", "192.0.2.1:0", "[::]:0"):
        r = subprocess.run([PYTHON, DOUBLE, "--listen", addr, "--datadir", str(tmp_path)],
                           capture_output=True, text=True, timeout=30)
        assert r.returncode == 2 and "loopback" in r.stderr, (addr, r.returncode, r.stderr)
    r = subprocess.run([PYTHON, DOUBLE, "--listen", "127.0.0.1:0", "--control", "0.0.0.0:0",
                        "--datadir", str(tmp_path)], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "loopback" in r.stderr
    p = ProxySQL(monitor_shun_after=0)
    p.start()
    try:
        # the admin port is bound to 127.0.0.1: another local address of this host refuses it
        others = set()
        try:
            for info in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET):
                if not info[4][0].startswith("127."):
                    others.add(info[4][0])
        except OSError:
            pass
        for ip in others:
            with socket.socket() as s:
                s.settimeout(2)
                assert s.connect_ex((ip, p.admin_port)) != 0, ip
        out = subprocess.run(["ss", "-ltnH"], capture_output=True, text=True).stdout if \
            os.path.exists("/usr/bin/ss") or os.path.exists("/bin/ss") else ""
        for line in out.splitlines():
            if ":%d " % p.admin_port in line + " ":
                assert "127.0.0.1:%d" % p.admin_port in line, line
    finally:
        p.close()


def test_sigterm_is_prompt_even_with_a_hung_query(proxysql):
    proxysql.control("hang", count=1, seconds=0)
    c = proxysql.connect(read_timeout=30)

    def hung():
        try:
            with c.cursor() as cur:
                cur.execute("SELECT 1")
        except pymysql.err.MySQLError:
            pass

    threading.Thread(target=hung, daemon=True).start()
    time.sleep(0.3)
    elapsed, _ = timed(lambda: proxysql.stop(timeout=10))
    assert elapsed < 1.5 and proxysql.returncode == 0, (elapsed, proxysql.returncode)


def test_many_concurrent_connections(proxysql):
    proxysql.query("INSERT INTO mysql_servers (hostgroup_id,hostname) VALUES (1,'h')")
    errors, counts = [], []

    def client(i):
        try:
            c = proxysql.connect()
            with c.cursor() as cur:
                for j in range(20):
                    cur.execute("UPDATE mysql_servers SET comment='%d-%d'" % (i, j))
                    cur.execute("SELECT COUNT(*) FROM mysql_servers")
                    counts.append(cur.fetchone()[0])
                cur.execute("LOAD MYSQL SERVERS TO RUNTIME")
            c.close()
        except Exception as e:      # noqa: BLE001 - collected and asserted below
            errors.append(e)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(60)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors and len(counts) == 60 * 20 and set(counts) == {"1"}
    assert proxysql.query("SELECT name, version FROM runtime_checksums_values WHERE name='mysql_servers'") == [
        ("mysql_servers", "61")]


def raw_client(proxysql, user="admin", password="admin", plugin=b"mysql_native_password", first_token=None):
    """A minimal protocol-41 client; returns (socket, packets read so far, next sequence number)."""
    import hashlib
    s = socket.create_connection((proxysql.host, proxysql.admin_port), timeout=10)

    def read():
        hdr = b""
        while len(hdr) < 4:
            hdr += s.recv(4 - len(hdr))
        n = int.from_bytes(hdr[:3], "little")
        body = b""
        while len(body) < n:
            body += s.recv(n - len(body))
        return hdr[3], body

    _, greet = read()
    end = greet.index(b"\0", 1)
    salt = greet[end + 5:end + 13] + greet[end + 32:end + 44]

    def native(salt):
        h1 = hashlib.sha1(password.encode()).digest()
        h3 = hashlib.sha1(salt + hashlib.sha1(h1).digest()).digest()
        return bytes(a ^ b for a, b in zip(h1, h3))

    caps = (CLIENT.PROTOCOL_41 | CLIENT.SECURE_CONNECTION | CLIENT.PLUGIN_AUTH | CLIENT.LONG_PASSWORD
            | CLIENT.TRANSACTIONS)
    token = native(salt) if first_token is None else first_token
    resp = struct.pack("<IIB", caps, 1 << 24, 45) + b"\0" * 23 + user.encode() + b"\0" \
        + bytes([len(token)]) + token + plugin + b"\0"
    s.sendall(len(resp).to_bytes(3, "little") + b"\x01" + resp)
    return s, read, native


def test_auth_switch_to_native_password(proxysql):
    s, read, native = raw_client(proxysql, plugin=b"caching_sha2_password", first_token=b"\x01" * 32)
    seq, pkt = read()
    assert pkt[0] == 0xFE and pkt[1:].startswith(b"mysql_native_password\0"), pkt
    salt = pkt[1 + len(b"mysql_native_password\0"):][:20]
    token = native(salt)
    s.sendall(len(token).to_bytes(3, "little") + bytes([seq + 1]) + token)
    seq, pkt = read()
    assert pkt[0] == 0x00, pkt
    s.close()


def test_protocol_commands(proxysql):
    c = proxysql.connect()
    c.ping(reconnect=False)
    c.select_db("whatever")                                  # COM_INIT_DB: OK
    with pytest.raises(pymysql.err.MySQLError) as e:
        c.kill(12345)                                        # COM_PROCESS_KILL
    assert e.value.args[0] == 9003
    assert proxysql.query("SELECT 1") == [("1",)]
    # COM_FIELD_LIST and COM_STMT_PREPARE: ERR 1045, the connection stays usable
    s, read, _ = raw_client(proxysql)
    assert read()[1][0] == 0x00
    for cmd in (b"\x04mysql_servers\0", b"\x16SELECT 1"):
        s.sendall(len(cmd).to_bytes(3, "little") + b"\x00" + cmd)
        seq, pkt = read()
        assert (seq, pkt[0], struct.unpack("<H", pkt[1:3])[0], pkt[9:]) == (1, 0xFF, 1045, b"Command not supported")
    s.sendall(b"\x01\x00\x00\x00\x1f")                       # COM_RESET_CONNECTION: ERR 1047, seq 2
    seq, pkt = read()
    assert seq == 2 and struct.unpack("<H", pkt[1:3])[0] == 1047
    s.sendall(b"\x01\x00\x00\x00\x0e")                       # still usable: COM_PING
    assert read()[1][0] == 0x00
    s.sendall(b"\x01\x00\x00\x00\x0d")                       # COM_DEBUG: no reply, closed
    s.settimeout(5)
    assert s.recv(10) == b""
    s.close()
    c.close()


def test_wrong_password_and_stats_user(proxysql):
    with pytest.raises(pymysql.err.OperationalError) as e:
        proxysql.connect(password="nope")
    assert e.value.args == (1045, "ProxySQL Error: Access denied for user 'admin'@'127.0.0.1' (using password: YES)")
    assert proxysql.query("SELECT DATABASE()", "stats", "stats") == [("stats",)]
    with pytest.raises(pymysql.err.OperationalError, match="attempt to write a readonly database"):
        proxysql.query("DELETE FROM stats_mysql_global", "stats", "stats")


@double_only
def test_semicolon_only_query_crashes_like_2_7_1(proxysql):
    c = proxysql.connect()
    with pytest.raises(pymysql.err.OperationalError):
        with c.cursor() as cur:
            cur.execute(";")
    proxysql.proc.wait(10)
    assert proxysql.proc.returncode == -11            # SIGSEGV


def test_restart_keeps_port_and_reloads_disk(proxysql):
    port = proxysql.admin_port
    proxysql.query("INSERT INTO mysql_servers (hostgroup_id,hostname) VALUES (1,'saved')")
    proxysql.query("SAVE MYSQL SERVERS TO DISK")
    proxysql.query("INSERT INTO mysql_servers (hostgroup_id,hostname) VALUES (2,'lost')")
    proxysql.restart()
    assert proxysql.admin_port == port
    assert proxysql.query("SELECT hostname FROM mysql_servers") == [("saved",)]
    assert proxysql.query("SELECT hostname FROM runtime_mysql_servers") == [("saved",)]
    proxysql.kill()
    proxysql.start()                                  # after a crash too (not --initial)
    assert proxysql.query("SELECT hostname FROM disk.mysql_servers") == [("saved",)]
    proxysql.restart(initial=True)
    assert proxysql.query("SELECT COUNT(*) FROM disk.mysql_servers") == [("0",)]


def test_identity_clash_and_monitor_logins():
    """From ProxySQL's source, beyond the recording: the monitor user that is no frontend user
    logs in as stats with mysql-monitor_password; a frontend user named like the monitor user
    is let in as admin (bug #492); a changed admin_credentials list replaces the clashing row
    until the next LOAD MYSQL USERS."""
    p = ProxySQL(monitor_shun_after=0, admin_credentials="admin:admin;ops:opspw",
                 monitor_username="monitor", monitor_password="monitorpw")
    p.start()
    try:
        assert p.query("SELECT DATABASE()", "monitor", "monitorpw") == [("stats",)]
        p.query("INSERT INTO mysql_users (username, password) VALUES ('monitor', 'mpw'), ('ops', 'x')")
        p.query("LOAD MYSQL USERS TO RUNTIME")
        assert p.query("SELECT DATABASE()", "monitor", "mpw") == [("admin",)]
        with pytest.raises(pymysql.err.OperationalError):
            p.connect("monitor", "monitorpw")
        with pytest.raises(pymysql.err.OperationalError):
            p.connect("ops", "opspw")
        p.query("UPDATE global_variables SET variable_value='admin:admin;ops:newpw' "
                "WHERE variable_name='admin-admin_credentials'")
        p.query("LOAD ADMIN VARIABLES TO RUNTIME")
        assert p.query("SELECT 1", "ops", "newpw") == [("1",)]
        p.query("LOAD MYSQL USERS TO RUNTIME")
        with pytest.raises(pymysql.err.OperationalError):
            p.connect("ops", "newpw")
    finally:
        p.close()


def test_which_checksum_follows_what():
    """AGENT-FACTS.md "Which checksum follows what" (measured by hand on a real 2.7.1): memory =
    disk is a plain comparison, runtime mysql_servers = memory right after a LOAD, mysql_servers_v2
    changes only with a LOAD, the users' runtime checksum is not CHECKSUM MEMORY MYSQL USERS."""
    p = ProxySQL(monitor_shun_after=0)
    p.start()
    try:
        q = p.query

        def cks(what):
            return q("CHECKSUM %s" % what)[0][1]

        def runtime(name):
            return q("SELECT checksum FROM runtime_checksums_values WHERE name='%s'" % name)[0][0]

        q("INSERT INTO mysql_replication_hostgroups (writer_hostgroup, reader_hostgroup) VALUES (40, 41)")
        q("INSERT INTO mysql_servers (hostgroup_id, hostname, port) VALUES (40,'127.0.0.1',3391),"
          "(20,'127.0.0.1',13501)")
        staged = ("0x248FC739B0B507DA", "0x00", "0x0000000000000000", "0x0000000000000000")
        assert (cks("MEMORY MYSQL SERVERS"), cks("DISK MYSQL SERVERS"), runtime("mysql_servers"),
                runtime("mysql_servers_v2")) == staged
        q("LOAD MYSQL SERVERS TO RUNTIME")
        assert (runtime("mysql_servers"), runtime("mysql_servers_v2")) == ("0x248FC739B0B507DA",
                                                                           "0xEA759BE23E923295")
        q("SAVE MYSQL SERVERS TO DISK")
        assert cks("DISK MYSQL SERVERS") == cks("MEMORY MYSQL SERVERS") == "0x248FC739B0B507DA"
        q("UPDATE mysql_servers SET weight=2 WHERE port=13501")
        assert cks("MEMORY MYSQL SERVERS") != "0x248FC739B0B507DA"
        assert (runtime("mysql_servers"), runtime("mysql_servers_v2"), cks("DISK MYSQL SERVERS")) == (
            "0x248FC739B0B507DA", "0xEA759BE23E923295", "0x248FC739B0B507DA")
        q("UPDATE mysql_servers SET weight=1 WHERE port=13501")
        assert cks("MEMORY MYSQL SERVERS") == "0x248FC739B0B507DA"

        q("INSERT INTO mysql_users (username, password, default_hostgroup) VALUES ('app', 'pw', 10)")
        q("LOAD MYSQL USERS TO RUNTIME")
        loaded = runtime("mysql_users")
        assert loaded != cks("MEMORY MYSQL USERS")
        q("SAVE MYSQL USERS TO DISK")
        assert cks("DISK MYSQL USERS") == cks("MEMORY MYSQL USERS")
        memory = cks("MEMORY MYSQL USERS")
        q("UPDATE mysql_users SET default_hostgroup=11")
        assert cks("MEMORY MYSQL USERS") != memory and runtime("mysql_users") == loaded
    finally:
        p.close()
