"""proxysql-sync end to end: Consul (double, or real with CONSUL_BIN) -> the agent -> ProxySQL's
admin interface (double, or real with PROXYSQL_BIN).

Every test starts its own Consul, ProxySQL and agent on loopback with free ports. Tests that
need a fault hook only the doubles have are skipped against real servers, with the reason.
"""

import base64
import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request

import pytest

from fakes.consul import Consul
from fakes.process import track
from fakes.proxysql import ProxySQL

BIN = os.environ.get("SIDEKICK_BIN", os.path.join(os.path.dirname(__file__), "..", "..", "bin"))
SYNC = os.path.join(BIN, "proxysql-sync")

ADMIN_PASSWORD = "adm-" + os.urandom(6).hex()
USER_PASSWORD = "usr-" + os.urandom(6).hex()
NATIVE_HASH = "*" + os.urandom(20).hex().upper()

WRITES = ("INSERT", "UPDATE", "DELETE", "REPLACE", "LOAD", "SAVE")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_until(what, predicate, timeout=10.0, interval=0.05):
    """Poll `predicate` until it returns something true; fail naming `what` after `timeout`."""
    end = time.monotonic() + timeout
    last = None
    while time.monotonic() < end:
        try:
            last = predicate()
            if last:
                return last
        except Exception as e:  # a server that is restarting
            last = e
        time.sleep(interval)
    pytest.fail("timed out after %.1fs waiting for %s (last: %r)" % (timeout, what, last))


def runtime_servers(px):
    return sorted(tuple(r) for r in px.query(
        "SELECT hostgroup_id, hostname, port, status FROM runtime_mysql_servers"))


def memory_servers(px):
    return sorted(tuple(r) for r in px.query(
        "SELECT hostgroup_id, hostname, port, status FROM main.mysql_servers"))


def runtime_users(px):
    return sorted(tuple(r) for r in px.query(
        "SELECT username, frontend, backend, default_hostgroup FROM runtime_mysql_users"))


def writes(px):
    return [s["sql"] for s in px.statements() if s["sql"].lstrip().upper().startswith(WRITES)]


def first_sync(px, agent):
    """Until the agent's first apply is over, its SAVE included: runtime shows the rows at the
    LOAD, /readyz turns 200 only after the rest of the plan (a loaded machine showed the SAVE
    arriving after a test had cleared the statement log)."""
    wait_until("the first sync", lambda: synced(px))
    wait_until("/readyz after the first sync", agent.ready)


class RuntimeSampler:
    """Reads runtime_mysql_servers every `interval` seconds on an admin connection of its own while
    a fault runs, so that a test asserts on what ProxySQL served at every moment, not only at the end.

        with RuntimeSampler(px) as rs:
            ...fault...
        rs.assert_writer_never_empty()

    While ProxySQL is down or hung there are no samples (the connection is retried). A sample is
    stamped with the time its query was sent. Wrap a restart that starts ProxySQL empty in
    `with rs.empty_restart():` (or call expect_empty_restart() before a fresh ProxySQL first
    starts): samples sent inside the window, and those after it until the first one with a writer
    again, are not held against the agent. Inside the window the old process may still answer
    with its writer; that answer does not end the exemption, only one from the new process does."""

    def __init__(self, px, interval=0.02, table="runtime_mysql_servers"):
        self.px = px
        self.interval = interval
        self.table = table
        self.samples = []               # (time.monotonic() when the query was sent, sorted rows)
        self.windows = []               # (start, end) of each expected empty restart
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="runtime-sampler", daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self.stop()

    def stop(self):
        self._stop.set()
        self._thread.join(10)

    def _run(self):
        conn = None
        while not self._stop.is_set():
            try:
                if conn is None:
                    conn = self.px.connect(connect_timeout=1, read_timeout=2, write_timeout=2)
                sent = time.monotonic()
                with conn.cursor() as cur:
                    cur.execute("SELECT hostgroup_id, hostname, port, status FROM " + self.table)
                    rows = sorted(tuple(r) for r in cur.fetchall())
                self.samples.append((sent, rows))
            except Exception:           # ProxySQL down, restarting or hung: try again
                if conn is not None:
                    try:
                        conn.close()
                    except Exception:
                        pass
                    conn = None
                self._stop.wait(0.05)
                continue
            self._stop.wait(self.interval)
        if conn is not None:
            conn.close()

    def expect_empty_restart(self):
        now = time.monotonic()
        self.windows.append((now, now))

    @contextlib.contextmanager
    def empty_restart(self):
        start = time.monotonic()
        try:
            yield
        finally:
            self.windows.append((start, time.monotonic()))

    def since(self, t):
        return [rows for at, rows in self.samples if at >= t]

    @staticmethod
    def serving(rows, hostgroup):
        return [r for r in rows if r[0] == hostgroup and r[3] not in ("OFFLINE_SOFT", "OFFLINE_HARD")]

    def writerless(self, hostgroup="10"):
        """Samples in which `hostgroup` had no serving server, outside the expected empty restarts."""
        bad, exempt, end, windows = [], False, None, sorted(self.windows)
        for at, rows in self.samples:
            while windows and windows[0][0] <= at:
                end = windows.pop(0)[1]
                exempt = True
            if end is not None and at <= end:
                continue                # sent during the restart: old or new process, either is fine
            if self.serving(rows, hostgroup):
                exempt = False
            elif not exempt:
                bad.append((at, rows))
        return bad

    def assert_writer_never_empty(self, hostgroup="10", min_samples=10):
        assert len(self.samples) >= min_samples, "only %d runtime samples" % len(self.samples)
        bad = self.writerless(hostgroup)
        assert not bad, "writer hostgroup %s empty at runtime in %d of %d samples, first: %r" % (
            hostgroup, len(bad), len(self.samples), bad[0][1])


class Agent:
    """One proxysql-sync process with a generated config; logs captured to a file."""

    def __init__(self, consul, targets, workdir, extra="", args=()):
        self.workdir = workdir
        self.health_port = free_port()
        self.cfg = os.path.join(workdir, "sync.cfg")
        self.log = os.path.join(workdir, "agent.log")
        self.args = list(args)
        self.proc = None
        lines = []
        for i, px in enumerate(targets):
            pwfile = os.path.join(workdir, "admin-pw-%d" % i)
            with open(pwfile, "w") as f:
                f.write(px.admin_password)
            os.chmod(pwfile, 0o600)
            lines.append('{ name = "px%d"; address = "%s"; user = "%s"; password_file = "%s"; }'
                         % (i + 1, px.admin_addr, px.admin_user, pwfile))
        self.text = """
consul-addr = "%s"
region = "eu"
users-prefix = "proxysql/users"
health-listen = "127.0.0.1:%d"
quiescence-min = 0.05
quiescence-max = 1.0
drain-timeout = 30.0
confirmations = 3
lock-file = "%s/sync.lock"
clusters = ( { alias = "shop"; writer_hostgroup = 10; reader_hostgroup = 11; } );
targets = ( %s );
%s
""" % (consul.addr, self.health_port, workdir, ", ".join(lines), extra)
        self.write_config()

    def write_config(self, extra=None):
        text = self.text if extra is None else self.text + extra
        with open(self.cfg, "w") as f:
            f.write(text)

    def start(self):
        out = open(self.log, "ab")
        env = {k: v for k, v in os.environ.items() if not k.startswith("CONSUL_")}
        self.proc = track(subprocess.Popen([SYNC, "-c", self.cfg] + self.args, stdout=out,
                                           stderr=subprocess.STDOUT, env=env))
        out.close()
        return self

    def run(self, *args, timeout=30):
        env = {k: v for k, v in os.environ.items() if not k.startswith("CONSUL_")}
        return subprocess.run([SYNC, "-c", self.cfg] + list(args), capture_output=True, text=True,
                              timeout=timeout, env=env)

    def http(self, path):
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d%s" % (self.health_port, path), timeout=5) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()
        except OSError as e:
            return 0, str(e)

    def ready(self):
        return self.http("/readyz")[0] == 200

    def logs(self):
        if not os.path.exists(self.log):
            return ""
        with open(self.log, errors="replace") as f:
            return f.read()

    def stop(self, sig=signal.SIGTERM, timeout=5.0):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        return self.proc.returncode if self.proc else None


@pytest.fixture
def workdir():
    d = tempfile.mkdtemp(prefix="sync-test-")
    yield d
    subprocess.run(["rm", "-rf", d])


@pytest.fixture
def consul():
    c = Consul()
    c.start()
    yield c
    c.close()


@pytest.fixture
def px():
    p = ProxySQL(admin_password=ADMIN_PASSWORD)
    p.start()
    yield p
    p.close()


@pytest.fixture
def agent(consul, px, workdir):
    a = Agent(consul, [px], workdir)
    yield a
    rc = a.stop()
    logs = a.logs()
    print(logs)                             # shown by pytest when the test fails
    # No secret ever reaches the logs, whatever the test did.
    assert ADMIN_PASSWORD not in logs and USER_PASSWORD not in logs, "a password reached the agent's log"
    assert rc in (0, None), "agent exit code %r" % rc


def put_topology(consul, master="db1", replicas=("db2", "db3"), users=True):
    consul.put("mysql/master/shop", ("%s:3306" % master).encode())
    consul.put("mysql/master/shop/hostname", master.encode())
    consul.put("mysql/master/shop/port", b"3306")
    for r in replicas:
        consul.put("mysql/replica/shop/eu/%s:3306" % r, ("%s:3306" % r).encode())
    if users:
        consul.put("proxysql/users/app", json.dumps(
            {"password": USER_PASSWORD, "default_hostgroup": 10}).encode())
        consul.put("proxysql/users/report", json.dumps(
            {"password": NATIVE_HASH, "default_hostgroup": 11, "max_connections": 50}).encode())


TOPOLOGY = [("10", "db1", "3306", "ONLINE"), ("11", "db2", "3306", "ONLINE"), ("11", "db3", "3306", "ONLINE")]


def synced(px, want=TOPOLOGY):
    return runtime_servers(px) == sorted(want)


# ---- first sync, no-op wake-ups, failover ------------------------------------------------

def test_runtime_sampler_exempts_only_the_restart():
    """The sampler's own rule, on made-up samples: an answer from the old process inside the
    restart window does not end the exemption; an empty runtime after a writer came back does."""
    w = [("10", "db1", "3306", "ONLINE")]
    rs = RuntimeSampler(px=None)
    rs.windows = [(1.0, 2.0)]
    rs.samples = [(0.5, w), (1.5, w), (1.9, []), (2.1, []), (2.2, []), (2.3, w), (2.4, [])]
    assert rs.writerless() == [(2.4, [])]
    rs.samples = [(0.5, w), (0.9, [])]
    assert rs.writerless() == [(0.9, [])]
    rs.windows = [(1.0, 1.0)]               # expect_empty_restart(): a window of no length
    rs.samples = [(1.1, []), (1.2, w), (1.3, [("10", "db1", "3306", "OFFLINE_SOFT")])]
    assert rs.writerless() == [(1.3, [("10", "db1", "3306", "OFFLINE_SOFT")])]


def test_first_sync_servers_and_users(consul, px, agent):
    put_topology(consul)
    agent.start()
    first_sync(px, agent)                   # the users' LOAD follows the servers'
    assert runtime_users(px) == [("app", "0", "1", "10"), ("app", "1", "0", "10"),
                                 ("report", "0", "1", "11"), ("report", "1", "0", "11")]
    status, body = agent.http("/metrics")
    assert status == 200
    assert 'proxysql_sync_desired_servers{hostgroup="11"} 2' in body
    assert "proxysql_sync_desired_users 2" in body
    assert USER_PASSWORD not in body and ADMIN_PASSWORD not in body
    # memory was saved to disk
    assert sorted(tuple(r) for r in px.query(
        "SELECT hostgroup_id, hostname FROM disk.mysql_servers")) == [("10", "db1"), ("11", "db2"), ("11", "db3")]


def test_health_port_slow_and_oversized_clients_hold_up_nobody(consul, px, agent):
    """The health port answers on one event-loop thread: clients that send nothing, half a
    request, or headers larger than a connection's buffer hold up no other request."""
    put_topology(consul)
    agent.write_config("health-max-connections-per-ip = 64\n")    # all 32 come from 127.0.0.1
    agent.start()
    wait_until("/readyz", agent.ready)
    stuck = []
    try:
        for i in range(30):
            s = socket.create_connection(("127.0.0.1", agent.health_port), timeout=5)
            if i % 3 == 0:
                s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")     # never finished
            stuck.append(s)
        big = socket.create_connection(("127.0.0.1", agent.health_port), timeout=5)
        stuck.append(big)
        try:
            big.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 40000 + b"\r\n\r\n")
        except OSError:
            pass                        # closed before it had all of it: refused either way
        answer = b""
        try:
            while b"\r\n" not in answer:
                chunk = big.recv(4096)
                if not chunk:
                    break
                answer += chunk
        except ConnectionResetError:
            pass
        assert answer == b"" or answer.startswith(b"HTTP/1.1 431 "), answer[:100]
        for path in ("/healthz", "/readyz", "/metrics"):
            t0 = time.monotonic()
            status, body = agent.http(path)
            took = time.monotonic() - t0
            assert status == 200 and took < 1.0, (path, status, took, body[:200])
        assert "proxysql_sync_desired_users 2" in agent.http("/metrics")[1]
    finally:
        for s in stuck:
            s.close()
    assert agent.proc.poll() is None
    assert agent.http("/healthz") == (200, "ok\n")


def test_health_port_closes_a_kept_alive_connection_at_its_100th_answer(consul, px, agent):
    """One connection answers at most 100 requests: the 100th answer says "Connection: close" and
    the server closes the connection after it; the 99 before keep it alive."""
    put_topology(consul)
    agent.start()
    wait_until("/readyz", agent.ready)
    with socket.create_connection(("127.0.0.1", agent.health_port), timeout=5) as s:
        closing = []
        for i in range(100):
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            data = b""
            while not data.endswith(b"\r\n\r\nok\n"):
                chunk = s.recv(4096)
                assert chunk, "the connection closed after %d answers" % i
                data += chunk
            assert data.startswith(b"HTTP/1.1 200 "), data
            if b"\r\nconnection: close\r\n" in data.lower():
                closing.append(i + 1)
        assert closing == [100], closing
        assert s.recv(4096) == b""              # closed by the server
    assert agent.http("/healthz") == (200, "ok\n")


def test_wakeup_without_change_writes_nothing(consul, px, agent):
    put_topology(consul)
    agent.start()
    first_sync(px, agent)
    time.sleep(0.5)
    px.clear_statements()
    for _ in range(5):                      # the index moves, the content does not
        consul.put("mysql/replica/shop/eu/db2:3306", b"db2:3306")
        consul.put("mysql/master/shop/port", b"3306")
    time.sleep(1.5)
    assert writes(px) == []


def agent_after_first_sync(consul, px, workdir, extra):
    """The topology in KV, an agent of its own (config `extra`) through its first sync, then an
    empty statement log (the double's). The caller stops it (stop_and_check)."""
    put_topology(consul)
    agent = Agent(consul, [px], workdir, extra=extra).start()
    try:
        first_sync(px, agent)
    except BaseException:
        agent.stop()
        raise
    time.sleep(0.5)
    if px.is_fake:
        px.clear_statements()
    return agent


TABLE_READS = ("main.mysql_servers", "main.mysql_users", "runtime_mysql_servers", "runtime_mysql_users")


def verified_sync_logged(consul, px, agent):
    """The hot path's start: the topology in KV, the agent's first sync over, then an empty
    statement log (the double's: a real ProxySQL keeps none, and the test is skipped)."""
    if not px.is_fake:
        pytest.skip("needs the ProxySQL double's statement log")
    put_topology(consul)
    agent.start()
    first_sync(px, agent)
    time.sleep(0.5)
    px.clear_statements()


@pytest.mark.fault
def test_change_after_a_verified_sync_reads_no_table(consul, px, agent):
    """The change sends its UPDATE, LOAD and SAVE and reads checksums, not one row of `mysql_servers`/`mysql_users` in memory or runtime.

    The hot path: once a sync is verified, a change costs its statements and a few checksums,
    not a read of every row (before and after) of the target's tables."""
    verified_sync_logged(consul, px, agent)
    consul.put("mysql/replica/shop/eu/db2:3306", json.dumps({"weight": 5}).encode())
    wait_until("db2 at weight 5", lambda: ("5",) in [tuple(r) for r in px.query(
        "SELECT weight FROM runtime_mysql_servers WHERE hostname = 'db2'")])
    # the SAVE follows within save-delay (0.2 s), in a pass of its own
    wait_until("the SAVE", lambda: "SAVE MYSQL SERVERS TO DISK" in writes(px))
    sent = [s["sql"] for s in px.statements()]
    assert [q for q in sent if q.lstrip().upper().startswith(WRITES)] == [
        "UPDATE mysql_servers SET status='ONLINE', weight=5, compression=0, max_connections=1000, "
        "max_replication_lag=0, use_ssl=0, max_latency_ms=0, comment='' WHERE hostgroup_id=11 AND "
        "hostname='db2' AND port=3306", "LOAD MYSQL SERVERS TO RUNTIME", "SAVE MYSQL SERVERS TO DISK"]
    assert not [q for q in sent if any(t in q for t in TABLE_READS) and not q.startswith("SELECT weight")], sent


@pytest.mark.fault
def test_hand_edit_between_changes_is_seen_at_the_next_change(consul, px, agent):
    """The memory checksum differs from the one kept: the change reads the tables in full, and the edited row is put back with it.

    The hot path trusts no row it did not verify: a hand edit of memory (not loaded) changes the
    checksum, so the next KV change reads the tables in full and puts the edited row back too."""
    put_topology(consul)
    agent.start()
    first_sync(px, agent)
    time.sleep(0.5)
    px.query("UPDATE mysql_servers SET weight = 77 WHERE hostname = 'db3'")
    consul.put("mysql/replica/shop/eu/db2:3306", json.dumps({"weight": 5}).encode())
    wait_until("db2 at 5 and db3 back at 1 in memory and runtime", lambda: all(
        sorted(tuple(r) for r in px.query("SELECT hostname, weight FROM %s WHERE hostgroup_id = 11" % t))
        == [("db2", "5"), ("db3", "1")] for t in ("main.mysql_servers", "runtime_mysql_servers")))


# Others' users the agent must hash as ProxySQL does: attributes, no default_schema, and one name
# with a frontend-only and a backend-only row (inserted backend-only first).
FOREIGN_USERS = (
    "INSERT INTO mysql_users (username, password, default_hostgroup, attributes, comment) "
    "VALUES ('batch', 'b1', 10, '{\"spread\":1}', 'nightly jobs')",
    "INSERT INTO mysql_users (username, password, backend, frontend) VALUES ('split', 'be', 1, 0)",
    "INSERT INTO mysql_users (username, password, backend, frontend) VALUES ('split', 'fe', 0, 1)",
    "LOAD MYSQL USERS TO RUNTIME",
)


def report_connections(px, layer="runtime_"):
    rows = px.query("SELECT max_connections FROM %smysql_users WHERE username = 'report' AND frontend = 1" % layer)
    return rows[0][0] if rows else None


def test_user_change_after_a_verified_sync_reads_the_users_checksum_once(consul, px, workdir):
    """A users change on the hot path reads CHECKSUM MEMORY MYSQL USERS once, before it writes; the checksum it leaves is computed, and the next pass finds it.

    After a hot users write the agent does not read memory's users checksum back: it hashes the
    rows the plan leaves as ProxySQL does (every column, SQLite's order) and the next pass's check
    before it writes compares the one it reads with that. Others' rows with attributes and a
    name's frontend-only and backend-only rows are among them: a hash that is not ProxySQL's
    would send the SAVE pass after each change to read the tables in full, which the agent logs
    (debug). Against a real ProxySQL the log is the check; the double's statement log also shows
    which checksums were read."""
    for q in FOREIGN_USERS:
        px.query(q)
    agent = agent_after_first_sync(consul, px, workdir, 'log-level = "debug";\n')
    try:
        for conns in (60, 70):
            consul.put("proxysql/users/report", json.dumps(
                {"password": NATIVE_HASH, "default_hostgroup": 11, "max_connections": conns}).encode())
            wait_until("report at %d connections" % conns, lambda: report_connections(px) == str(conns))
            wait_until("the SAVE", lambda: report_connections(px, "disk.") == str(conns))
        logs = agent.logs()
        assert "is not the agent's hash" not in logs and "checksum is not the one known" not in logs, logs
        if not px.is_fake:
            return
        sent = [s["sql"] for s in px.statements() if "WHERE username = 'report' AND frontend = 1" not in s["sql"]]
        assert [q for q in sent if q.startswith(("LOAD", "SAVE"))] == [
            "LOAD MYSQL USERS TO RUNTIME", "SAVE MYSQL USERS TO DISK"] * 2, sent
        # one read per pass that wrote users (two changes, two SAVE passes), none after a write
        assert sent.count("CHECKSUM MEMORY MYSQL USERS") == 4, sent
        for i, q in enumerate(sent):
            if q.startswith(("DELETE", "INSERT", "LOAD")):
                later = sent[i + 1:]
                ends = [k for k, n in enumerate(later) if n.startswith("SAVE") or n == "CHECKSUM MEMORY MYSQL SERVERS"]
                assert "CHECKSUM MEMORY MYSQL USERS" not in later[:ends[0] if ends else len(later)], sent
        assert not [q for q in sent if any(t in q for t in TABLE_READS)], sent
    finally:
        stop_and_check(agent)


@pytest.mark.fault
def test_hand_edit_of_users_after_a_hot_users_change_is_seen(consul, px, workdir):
    """A user staged by hand after a hot-path users change (whose memory checksum the agent computed) makes the next change read in full.

    The computed checksum stands for what memory holds only until memory changes: the check before
    the next write reads CHECKSUM MEMORY MYSQL USERS, finds another value and reads the tables
    (logged at debug; the double's statement log shows the read too)."""
    agent = agent_after_first_sync(consul, px, workdir, 'log-level = "debug";\n')
    try:
        consul.put("proxysql/users/report", json.dumps(
            {"password": NATIVE_HASH, "default_hostgroup": 11, "max_connections": 60}).encode())
        wait_until("report at 60 connections", lambda: report_connections(px) == "60")
        wait_until("the SAVE", lambda: report_connections(px, "disk.") == "60")
        time.sleep(0.3)
        assert "checksum is not the one known" not in agent.logs()
        px.query("INSERT INTO mysql_users (username, password) VALUES ('staged', 'x')")
        if px.is_fake:
            px.clear_statements()
        consul.put("proxysql/users/report", json.dumps(
            {"password": NATIVE_HASH, "default_hostgroup": 11, "max_connections": 70}).encode())
        wait_until("report at 70 connections", lambda: report_connections(px) == "70")
        assert "memory's users checksum is not the one known: read in full" in agent.logs()
        if px.is_fake:
            sent = [s["sql"] for s in px.statements()]
            first_write = next(i for i, q in enumerate(sent) if q.startswith(("DELETE", "INSERT")))
            assert [q for q in sent[:first_write] if "main.mysql_users" in q], sent
    finally:
        stop_and_check(agent)

def disk_weight(px, host):
    rows = px.query("SELECT weight FROM disk.mysql_servers WHERE hostname = '%s'" % host)
    return rows[0][0] if rows else None


def runtime_weight(px, host):
    rows = px.query("SELECT weight FROM runtime_mysql_servers WHERE hostname = '%s'" % host)
    return rows[0][0] if rows else None


def test_a_burst_of_changes_costs_one_save(consul, px, workdir):
    """Changes on the hot path are LOADed at once and SAVEd together, save-delay after the first LOAD not yet saved.

    Five weight changes, each written once the one before is in runtime, within save-delay (1 s):
    five LOADs, then one SAVE of the last state; disk never lags runtime by more than save-delay."""
    agent = agent_after_first_sync(consul, px, workdir, "save-delay = 1.0\n")
    try:
        t0 = time.monotonic()
        for w in range(2, 7):
            consul.put("mysql/replica/shop/eu/db2:3306", json.dumps({"weight": w}).encode())
            wait_until("db2 at weight %d" % w, lambda: runtime_weight(px, "db2") == str(w), interval=0.01)
        assert time.monotonic() - t0 < 0.9, "the burst took too long to test save-delay"
        assert disk_weight(px, "db2") == "1", "saved before save-delay"
        wait_until("the SAVE", lambda: disk_weight(px, "db2") == "6", timeout=3)
        if px.is_fake:
            sent = [s for s in px.statements() if s["sql"].startswith(("LOAD", "SAVE"))]
            assert [s["sql"] for s in sent] == ["LOAD MYSQL SERVERS TO RUNTIME"] * 5 + ["SAVE MYSQL SERVERS TO DISK"], sent
            assert 0.9 <= sent[-1]["time"] - sent[0]["time"] <= 1.5, sent
    finally:
        stop_and_check(agent)


def test_save_delay_0_saves_with_each_load(consul, px, workdir):
    """save-delay = 0: each change is LOADed and SAVEd in one apply, as before save-delay."""
    put_topology(consul)
    agent = Agent(consul, [px], workdir, extra="save-delay = 0.0\n").start()
    try:
        first_sync(px, agent)
        time.sleep(0.5)
        for w in (2, 3):
            consul.put("mysql/replica/shop/eu/db2:3306", json.dumps({"weight": w}).encode())
            wait_until("db2 at weight %d on disk" % w, lambda: disk_weight(px, "db2") == str(w))
        wait_until("two applies of UPDATE, LOAD and SAVE",
                   lambda: len(re.findall(r"applied 3 statements", agent.logs())) == 2)
    finally:
        stop_and_check(agent)


@pytest.mark.fault
def test_sigterm_sends_the_save_put_off(consul, px, workdir):
    """A SAVE put off by save-delay is sent before the agent exits: a ProxySQL restarted from disk keeps the change."""
    put_topology(consul)
    agent = Agent(consul, [px], workdir, extra="save-delay = 30.0\n").start()
    first_sync(px, agent)
    time.sleep(0.5)
    consul.put("mysql/replica/shop/eu/db2:3306", json.dumps({"weight": 9}).encode())
    wait_until("db2 at weight 9", lambda: runtime_weight(px, "db2") == "9")
    time.sleep(0.3)
    assert disk_weight(px, "db2") == "1"
    logs = stop_and_check(agent)
    assert disk_weight(px, "db2") == "9"
    assert "saved to disk what was LOADed since the last SAVE" in logs


def test_failover_waits_for_orchestrator_to_finish_writing(consul, px, agent):
    put_topology(consul, users=False)
    agent.start()
    first_sync(px, agent)
    px.clear_statements()
    # orchestrator writes the main key first, then the children, one by one
    consul.put("mysql/master/shop", b"db2:3306")
    time.sleep(1.2)                         # longer than quiescence-max
    assert writes(px) == [], "a half-written failover was applied"
    assert ("10", "db1", "3306", "ONLINE") in runtime_servers(px)
    consul.put("mysql/master/shop/hostname", b"db2")
    want = [("10", "db2", "3306", "ONLINE"), ("11", "db2", "3306", "ONLINE"), ("11", "db3", "3306", "ONLINE")]
    # the old writer drains (OFFLINE_SOFT) and is deleted once unused: never an empty writer hostgroup
    seen = []

    def converged():
        rows = runtime_servers(px)
        seen.append(rows)
        return rows == sorted(want)
    wait_until("the new writer and the old one gone", converged)
    assert all(any(r[0] == "10" and r[3] == "ONLINE" for r in rows) for rows in seen), seen


# ---- drain, users, guards ------------------------------------------------------------------

def test_removed_replica_drains_until_unused(consul, px, agent):
    put_topology(consul, users=False)
    agent.start()
    wait_until("the first sync", lambda: synced(px))
    px.control("pool", hostgroup=11, host="db3", port=3306, used=2)
    consul.delete("mysql/replica/shop/eu/db3:3306")
    wait_until("db3 draining", lambda: ("11", "db3", "3306", "OFFLINE_SOFT") in runtime_servers(px))
    time.sleep(1.5)
    assert ("11", "db3", "3306", "OFFLINE_SOFT") in runtime_servers(px), "deleted while connections were used"
    px.control("pool", hostgroup=11, host="db3", port=3306, used=0)
    wait_until("db3 deleted", lambda: not any(r[1] == "db3" for r in memory_servers(px)))


def test_users_add_change_remove_and_foreign_users_untouched(consul, px, agent):
    put_topology(consul)
    px.query("INSERT INTO mysql_users (username, password, default_hostgroup, comment) "
             "VALUES ('human', 'x', 0, 'added by hand')")
    agent.start()
    # the agent's LOAD also loads the hand-made row: it is left in place, not removed
    wait_until("users", lambda: {r[0] for r in runtime_users(px)} == {"app", "report", "human"})
    consul.put("proxysql/users/report", json.dumps({"password": NATIVE_HASH, "default_hostgroup": 10}).encode())
    wait_until("report moved to hostgroup 10",
               lambda: ("report", "1", "0", "10") in runtime_users(px))
    consul.delete("proxysql/users/app")
    wait_until("app removed", lambda: not any(r[0] == "app" for r in px.query(
        "SELECT username FROM main.mysql_users")))
    assert ("human",) in [tuple(r) for r in px.query("SELECT username FROM main.mysql_users")]


def builds(agent):
    """proxysql_sync_desired_builds_total by part."""
    status, text = agent.http("/metrics")
    assert status == 200, text
    return {m.group(1): int(float(m.group(2))) for m in re.finditer(
        r'^proxysql_sync_desired_builds_total\{part="(\w+)"\} (\S+)$', text, re.M)}


def test_a_change_rebuilds_only_the_part_its_keys_feed(consul, px, agent):
    """A server change builds the servers again and keeps the users as built; a user change the
    reverse. Nothing of the part kept is lost: both changes reach ProxySQL beside the rest."""
    put_topology(consul)
    agent.start()
    first_sync(px, agent)
    time.sleep(0.5)
    before = builds(agent)
    assert before["both"] >= 1 and set(before) == {"servers", "users", "both"}, before
    consul.put("mysql/replica/shop/eu/db2:3306", json.dumps({"weight": 5}).encode())
    wait_until("db2 at weight 5", lambda: runtime_weight(px, "db2") == "5")
    mid = builds(agent)
    assert mid["servers"] > before["servers"] and mid["users"] == before["users"] \
        and mid["both"] == before["both"], (before, mid)
    consul.put("proxysql/users/report", json.dumps({"password": NATIVE_HASH, "default_hostgroup": 10}).encode())
    wait_until("report moved to hostgroup 10", lambda: ("report", "1", "0", "10") in runtime_users(px))
    after = builds(agent)
    assert after["users"] > mid["users"] and after["servers"] == mid["servers"] \
        and after["both"] == mid["both"], (mid, after)
    assert {r[0] for r in runtime_users(px)} == {"app", "report"}
    assert runtime_servers(px) == sorted(TOPOLOGY) and runtime_weight(px, "db2") == "5"


def test_user_with_a_hashed_password_reaches_proxysql_unchanged(consul, px, agent):
    """A KV user whose password is a mysql_native_password hash ("*" + 40 hex digits, what
    docs/from-consul-template.md advises keeping in KV): main, runtime (both rows) and disk hold
    that hash exactly, and a client logs in through ProxySQL's MySQL port with the clear password,
    which is nowhere in Consul or in the agent's output."""
    import hashlib

    import pymysql
    clear = "app-" + os.urandom(8).hex()
    digest = "*" + hashlib.sha1(hashlib.sha1(clear.encode()).digest()).hexdigest().upper()
    put_topology(consul, users=False)
    consul.put("proxysql/users/hashed", json.dumps({"password": digest, "default_hostgroup": 10}).encode())
    agent.start()
    first_sync(px, agent)
    wait_until("the hashed user in runtime", lambda: ("hashed", "1", "0", "10") in runtime_users(px))
    for table in ("main.mysql_users", "runtime_mysql_users", "disk.mysql_users"):
        rows = [tuple(r) for r in px.query("SELECT password FROM %s WHERE username = 'hashed'" % table)]
        assert rows and all(r == (digest,) for r in rows), (table, rows)
    assert len([r for r in runtime_users(px) if r[0] == "hashed"]) == 2      # frontend and backend
    c = pymysql.connect(host=px.host, port=px.mysql_port, user="hashed", password=clear, connect_timeout=5)
    c.close()
    with pytest.raises(pymysql.err.OperationalError):
        pymysql.connect(host=px.host, port=px.mysql_port, user="hashed", password=clear + "x", connect_timeout=5)
    assert consul.value("proxysql/users/hashed") == json.dumps({"password": digest, "default_hostgroup": 10}).encode()
    assert clear not in agent.logs() and digest not in agent.logs()
    dry = agent.run("--dry-run")
    assert clear not in dry.stdout + dry.stderr and digest not in dry.stdout + dry.stderr


@pytest.mark.fault
def test_empty_answer_is_confirmed_before_it_empties_readers(consul, px, agent):
    """A stale empty answer changes nothing; a real emptying is believed after `confirmations` reads."""
    put_topology(consul, users=False)
    agent.start()
    first_sync(px, agent)
    px.clear_statements()
    consul.fault("stale_empty", count=1)    # one stale follower answer: 200, [] and index 1
    # the blocking queries in flight return on a change; the next one gets the stale answer
    # (an identical rewrite does not move the index, so the values alternate)
    consul.put("mysql/replica/shop/eu/db2:3306", b"")
    time.sleep(0.3)
    consul.put("mysql/replica/shop/eu/db2:3306", b"db2:3306")
    time.sleep(1.5)
    assert synced(px), runtime_servers(px)
    assert writes(px) == []
    assert "confirming" in agent.logs() or "no known leader" in agent.logs()
    # a real removal of every replica is believed after the confirmations
    consul.delete("mysql/replica/shop/", recurse="")
    wait_until("readers gone", lambda: runtime_servers(px) == [("10", "db1", "3306", "ONLINE")])


def test_writer_hostgroup_is_never_emptied(consul, px, agent):
    put_topology(consul, users=False)
    agent.start()
    wait_until("the first sync", lambda: synced(px))
    for k in ("mysql/master/shop", "mysql/master/shop/hostname", "mysql/master/shop/port"):
        consul.delete(k)
    time.sleep(2.5)                          # confirmations, quiescence, a few target rounds
    assert ("10", "db1", "3306", "ONLINE") in runtime_servers(px)
    assert "writer hostgroup(s) would be empty" in agent.logs()


def test_hostile_values_are_rejected_alone(consul, px, agent):
    put_topology(consul, users=False)
    consul.put("mysql/replica/shop/eu/db9'; DELETE FROM mysql_servers; --", b"")
    consul.put("mysql/replica/shop/eu/db8", json.dumps({"comment": "o'brien; DROP TABLE x", "weight": 5}).encode())
    consul.put("mysql/replica/shop/eu/db7", b"x" * 200000)
    consul.put("proxysql/users/evil", b'{"password": "a\'b", "default_hostgroup": "10; DROP"}')
    consul.put("proxysql/users/ok", json.dumps({"password": "p'w\"\\x", "default_hostgroup": 10}).encode())
    agent.start()
    wait_until("the good entries", lambda: ("11", "db8", "3306", "ONLINE") in runtime_servers(px))
    assert [tuple(r) for r in px.query("SELECT comment FROM main.mysql_servers WHERE hostname='db8'")] == \
        [("o'brien; DROP TABLE x",)]
    assert [tuple(r) for r in px.query("SELECT password FROM main.mysql_users WHERE username='ok'")] == \
        [("p'w\"\\x",)]
    assert len(runtime_servers(px)) == 4
    logs = agent.logs()
    assert "rejected mysql/replica/shop/eu/db9'; DELETE FROM mysql_servers; --: address has characters" in logs
    assert "rejected proxysql/users/evil: default_hostgroup is not a number" in logs
    assert "value larger than 64 KiB" in logs
    status, metrics = agent.http("/metrics")
    assert "proxysql_sync_rejected_entries 3" in metrics


def dynamic_symbols():
    return subprocess.run(["nm", "-D", SYNC], capture_output=True, text=True).stdout


def sanitized_binary():
    out = dynamic_symbols()
    return "__asan_init" in out or "__tsan_init" in out


def exit_allowance():
    """Seconds a sanitizer's runtime adds to every exit: ThreadSanitizer sleeps atexit_sleep_ms
    (1000 by default) before exiting, to catch races with exit; measured 1.32 s against 0.32 s
    for the plain binary in test_sigterm_while_the_admin_hangs. 0 for other builds."""
    if "__tsan_init" not in dynamic_symbols():
        return 0.0
    m = re.search(r"atexit_sleep_ms=(\d+)", os.environ.get("TSAN_OPTIONS", ""))
    return (int(m.group(1)) if m else 1000) / 1000.0


def test_big_first_sync_peak_memory_is_bounded(px, workdir):
    """10,000 users + 500 servers synced into an empty ProxySQL: the agent's peak RSS stays under
    24 MiB. Runtime's users are compared as row hashes, every table is read row by row (never as a
    whole result set) and the statements' text is freed before the tables are read back; holding
    all of that took the peak to about 31 MiB (2 KB a key), it is about 19 MiB now (docs/bench.md)."""
    if sanitized_binary():
        pytest.skip("a sanitizer's shadow memory and quarantine make RSS meaningless")
    real = bool(os.environ.get("CONSUL_BIN"))
    ops = 64 if real else 2048        # a real Consul takes 64 operations a transaction; the double more
    consul = Consul() if real else Consul(extra_args=["--txn-max-ops", str(ops)])
    consul.start()
    agent = Agent(consul, [px], workdir)
    try:
        put_topology(consul, users=False)
        pairs = [("proxysql/users/u%05d" % i, json.dumps({"password": "*%040X" % i, "default_hostgroup": 10}))
                 for i in range(10000)]
        pairs += [("mysql/replica/shop/eu/r%04d:3306" % i, "r%04d:3306" % i) for i in range(500)]
        for at in range(0, len(pairs), ops):
            r = consul.txn([{"KV": {"Verb": "set", "Key": k, "Value": base64.b64encode(v.encode()).decode()}}
                            for k, v in pairs[at:at + ops]])
            assert r.status == 200, r
        agent.start()
        wait_until("10,000 users in runtime", lambda: re.search(
            r"in the desired state \(\d+ servers, 10000 users\)", agent.logs()), timeout=120, interval=0.2)
        with open("/proc/%d/status" % agent.proc.pid) as f:
            hwm = int(re.search(r"VmHWM:\s+(\d+) kB", f.read()).group(1))
        assert hwm < 24 * 1024, "peak RSS %d KiB" % hwm
        assert len(runtime_users(px)) == 2 * 10000        # one runtime row per role
        assert agent.stop() == 0
    finally:
        agent.stop()
        consul.close()


@pytest.mark.fault
def test_kv_data_cannot_forge_log_lines(consul, px, agent):
    """Every line of the text log is the agent's own: control characters in KV keys and values are escaped.

    A KV key or value holding a newline, a carriage return or an escape sequence is logged as
    \\n, \\r, \\x1b: no line starts with the data's own time stamp. (Consul's HTTP KV path
    refuses non-printable keys; a transaction takes them.)"""
    forged = "2099-01-01T00:00:00.000Z error proxysql-sync: FORGED"
    put_topology(consul, users=False)
    r = consul.txn([{"KV": {"Verb": "set", "Key": "mysql/replica/shop/eu/db%d%s%s" % (n, c, forged),
                            "Value": ""}} for n, c in ((9, "\n"), (8, "\r"))])
    assert r.status == 200, r.body
    consul.put("proxysql/users/app", json.dumps({"password": "pw", "x\n" + forged: 1}).encode())
    consul.put("mysql/replica/shop/eu/db7", json.dumps({"comment\x1b[2J\n" + forged: "x"}).encode())
    agent.start()
    wait_until("the rejects", lambda: agent.logs().count("rejected ") >= 4)
    logs = agent.logs()
    stamp = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z (debug|info|warn|error) proxysql-sync: ")
    lines = logs.split("\n")
    assert lines[-1] == ""
    for line in lines[:-1]:
        assert stamp.match(line), "a line the agent did not write: %r" % line
        assert not line.startswith("2099-") and "\r" not in line and "\x1b" not in line, line
    assert "rejected mysql/replica/shop/eu/db9\\n" + forged in logs
    assert "rejected mysql/replica/shop/eu/db8\\r" + forged in logs
    assert "comment\\x1b[2J\\n2099-01-01T00:00:00.000Z err" in logs


# ---- Consul trouble --------------------------------------------------------------------------

@pytest.mark.fault
def test_consul_down_keeps_the_last_good_state_and_recovers(consul, px, agent):
    """Last good config kept, /readyz 503, never exits; changes apply again once Consul is back."""
    put_topology(consul, users=False)
    agent.start()
    first_sync(px, agent)
    consul.stop()
    wait_until("/readyz turning 503", lambda: not agent.ready(), timeout=70)
    time.sleep(1)
    assert synced(px)
    assert agent.proc.poll() is None, "the agent exited while Consul was down"
    consul.start()                          # same data dir for the double: keys kept
    put_topology(consul, replicas=("db2", "db3", "db4"), users=False)
    wait_until("the change after Consul came back",
               lambda: ("11", "db4", "3306", "ONLINE") in runtime_servers(px), timeout=40)
    wait_until("/readyz again", agent.ready, timeout=40)


def consul_fault_agent(consul, px, workdir):
    """An agent with short blocking waits, synced, for a test of a Consul double's fault hook."""
    if not consul.is_fake:
        pytest.skip("needs the Consul double's fault hooks (CONSUL_BIN is set)")
    put_topology(consul, users=False)
    agent = Agent(consul, [px], workdir, extra="wait = 1.0\n").start()
    wait_until("the first sync", lambda: synced(px))
    return agent


def stop_and_check(agent):
    rc = agent.stop()
    logs = agent.logs()
    print(logs)
    assert ADMIN_PASSWORD not in logs
    assert rc == 0, "agent exit code %r" % rc
    return logs


@pytest.mark.fault
def test_consul_500_and_503_bursts(consul, px, workdir):
    """Logged, last good config kept, retried with backoff; the change made meanwhile applies after the burst."""
    agent = consul_fault_agent(consul, px, workdir)
    try:
        for burst, (code, host) in enumerate(((500, "db5"), (503, "db6")), 1):
            # the agent's reads fail, not our writes ("method" is also the fixture's own argument)
            r = consul.request("POST", "/_fake/fail", params={"count": 6, "code": code, "method": "GET"})
            assert r.status == 200, r
            consul.put("mysql/replica/shop/eu/%s:3306" % host, b"")
            # every failed read is counted; the agent is the only one reading
            wait_until("6 more consul errors counted", lambda: 'proxysql_sync_errors_total{stage="consul",target=""} %d'
                       % (6 * burst) in agent.http("/metrics")[1], timeout=20)
            assert "HTTP %d" % code in agent.logs()
            assert ("10", "db1", "3306", "ONLINE") in runtime_servers(px)
            wait_until("%s after a burst of %ds" % (host, code),
                       lambda: ("11", host, "3306", "ONLINE") in runtime_servers(px), timeout=40)
        assert agent.proc.poll() is None
    finally:
        stop_and_check(agent)


@pytest.mark.fault
def test_consul_no_leader(consul, px, workdir):
    """Answers without `X-Consul-KnownLeader: true` are ignored (logged once); applies again once a leader is known."""
    agent = consul_fault_agent(consul, px, workdir)
    try:
        px.clear_statements()
        # no known leader: reads still answer, with X-Consul-KnownLeader: false; they are ignored
        consul.fault("leader", known=0, reads="ok")
        wait_until("answers without a known leader", lambda: "no known leader" in agent.logs(), timeout=20)
        time.sleep(2)
        assert synced(px) and writes(px) == []
        for prefix in ("mysql/master/", "mysql/replica/", "proxysql/users/"):
            assert len([x for x in agent.logs().splitlines()
                        if "consul: %s: no known leader" % prefix in x]) == 1, agent.logs()
        consul.fault("leader", known=1)
        consul.put("mysql/replica/shop/eu/db5:3306", b"")
        wait_until("db5 once a leader is known", lambda: ("11", "db5", "3306", "ONLINE") in runtime_servers(px),
                   timeout=40)
        assert agent.proc.poll() is None
    finally:
        stop_and_check(agent)


@pytest.mark.fault
def test_consul_index_backwards(consul, px, workdir):
    """The index is reset (never 0, no busy loop) and a change after the drop still applies."""
    agent = consul_fault_agent(consul, px, workdir)
    try:
        consul.fault("index_backwards")
        consul.put("mysql/replica/shop/eu/db6:3306", b"")
        wait_until("db6 after the index went backwards",
                   lambda: ("11", "db6", "3306", "ONLINE") in runtime_servers(px), timeout=40)
        consul.request("DELETE", "/_fake/requests")
        time.sleep(1.0)
        reads = [r for r in consul.request("GET", "/_fake/requests").json() if r["method"] == "GET"]
        assert len(reads) <= 12, "busy loop: %d reads in 1 s" % len(reads)
        assert all(r["query"].get("index", ["1"]) != ["0"] for r in reads), reads
        assert agent.proc.poll() is None
    finally:
        stop_and_check(agent)


# ---- ProxySQL trouble ------------------------------------------------------------------------

@pytest.mark.fault
def test_proxysql_restarted_with_empty_config_is_reapplied(consul, px, agent):
    """Servers and users re-applied within 5 s of the restart."""
    put_topology(consul)
    agent.start()
    wait_until("the first sync", lambda: synced(px))
    with RuntimeSampler(px) as rs:
        time.sleep(0.3)
        with rs.empty_restart():            # empty until the agent applies: ProxySQL's doing, not the agent's
            px.restart(initial=True)        # config lost
        t0 = time.monotonic()
        wait_until("re-applied after the restart", lambda: synced(px) and len(runtime_users(px)) == 4)
        assert time.monotonic() - t0 < 5
        time.sleep(0.5)
    rs.assert_writer_never_empty()
    assert rs.since(t0), "no runtime sample after the restart"


@pytest.mark.fault
def test_proxysql_hanging_query_then_recovery(consul, px, agent):
    """Neither hangs nor exits, /readyz 503 names the target; converges once the admin answers."""
    put_topology(consul, users=False)
    agent.start()
    wait_until("the first sync", lambda: synced(px))
    with RuntimeSampler(px) as rs:
        time.sleep(0.3)
        px.control("hang", count=100000, seconds=0)   # every query hangs until released
        consul.put("mysql/replica/shop/eu/db4:3306", b"")
        time.sleep(7)                       # longer than admin-timeout (5 s)
        assert agent.proc.poll() is None
        # our own queries would hang too: ask the agent instead
        status, why = agent.http("/readyz")
        assert status == 503 and "px1" in why, (status, why)
        px.control("reset")                 # wakes the hung queries, no more hangs
        wait_until("db4 after the hang", lambda: ("11", "db4", "3306", "ONLINE") in runtime_servers(px),
                   timeout=30)
        wait_until("/readyz after the hang", agent.ready, timeout=30)
    rs.assert_writer_never_empty()


@pytest.mark.fault
def test_two_targets_one_down(consul, workdir):
    """The live target syncs and keeps its writer; the other converges once it starts; then /readyz 200."""
    put_topology(consul, users=False)
    with ProxySQL(admin_password=ADMIN_PASSWORD) as up, ProxySQL(admin_password=ADMIN_PASSWORD) as down:
        down.stop()
        a = Agent(consul, [up, down], workdir).start()
        try:
            wait_until("the live target synced", lambda: synced(up))
            assert not a.ready()
            with RuntimeSampler(up) as rs_up:
                with RuntimeSampler(down) as rs_down:
                    rs_down.expect_empty_restart()      # a fresh ProxySQL starts empty
                    down.start()
                    wait_until("the second target synced", lambda: synced(down), timeout=40)
                    wait_until("/readyz", a.ready, timeout=20)
                    time.sleep(0.3)             # and a while after: enough samples however fast it went
            rs_up.assert_writer_never_empty()
            rs_down.assert_writer_never_empty(min_samples=1)
        finally:
            assert a.stop() == 0


# ---- process behaviour -----------------------------------------------------------------------

@pytest.mark.fault
def test_sigterm_during_an_apply_stops_fast_and_leaves_runtime_whole(consul, px, agent):
    """Exit 0 within 1.5 s; the apply is abandoned before its LOAD: runtime holds the old state or the new."""
    put_topology(consul, users=False)
    agent.start()
    wait_until("the first sync", lambda: synced(px))
    before = runtime_servers(px)
    after = sorted([("10", "db4", "3306", "ONLINE"), ("10", "db1", "3306", "OFFLINE_SOFT")] + before[1:])
    px.control("latency", ms=300)           # every statement takes 0.3 s: the apply takes seconds
    consul.put("mysql/master/shop", b"db4:3306")
    consul.put("mysql/master/shop/hostname", b"db4")
    wait_until("the apply to start", lambda: any("db4" in x for x in writes(px)), timeout=10)
    t0 = time.monotonic()
    agent.proc.send_signal(signal.SIGTERM)
    agent.proc.wait(5)
    assert time.monotonic() - t0 < 1.5 + exit_allowance()
    assert agent.proc.returncode == 0
    px.control("latency", ms=0)
    assert runtime_servers(px) in (before, after), "runtime half applied"


@pytest.mark.fault
def test_sigterm_while_the_admin_hangs(consul, px, agent):
    """Exit 0 within 1.5 s even with admin queries hung."""
    put_topology(consul, users=False)
    agent.start()
    wait_until("the first sync", lambda: synced(px))
    px.control("hang", count=100000, seconds=0)
    time.sleep(1.2)                         # the agent's pings are stuck now
    t0 = time.monotonic()
    agent.proc.send_signal(signal.SIGTERM)
    agent.proc.wait(5)
    assert time.monotonic() - t0 < 1.5 + exit_allowance()
    assert agent.proc.returncode == 0
    px.control("release")


@pytest.mark.fault
def test_sighup_reloads_and_bad_config_keeps_running(consul, px, agent):
    """A good configuration is reloaded; a bad one is logged and the running one kept."""
    put_topology(consul, users=False)
    consul.put("generic/30/db30:3306", json.dumps({"weight": 3}).encode())
    agent.start()
    wait_until("the first sync", lambda: synced(px))
    agent.write_config('servers-prefix = "generic"\nmanaged-hostgroups = "30"\n')
    agent.proc.send_signal(signal.SIGHUP)
    wait_until("the generic server after reload", lambda: ("30", "db30", "3306", "ONLINE") in runtime_servers(px))
    agent.write_config("this is not a config\n")
    agent.proc.send_signal(signal.SIGHUP)
    time.sleep(0.5)
    assert agent.proc.poll() is None
    assert "reload failed, keeping the running configuration" in agent.logs()
    consul.put("generic/30/db31:3306", b"")     # the running configuration still watches generic/
    wait_until("a change under the kept configuration",
               lambda: ("30", "db31", "3306", "ONLINE") in runtime_servers(px))


def test_once_dry_run_and_lock(consul, px, agent):
    put_topology(consul)
    r = agent.run("--dry-run")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "INSERT INTO mysql_users" in r.stdout and "'***'" in r.stdout
    assert USER_PASSWORD not in r.stdout + r.stderr
    assert writes(px) == [], "--dry-run wrote to ProxySQL"
    r = agent.run("--once")
    assert r.returncode == 0, r.stdout + r.stderr
    assert synced(px) and len(runtime_users(px)) == 4
    with open(os.path.join(agent.workdir, "sync.lock"), "w") as held:
        import fcntl
        fcntl.flock(held, fcntl.LOCK_EX)
        r = agent.run("--once")
        assert r.returncode == 1
        assert "another proxysql-sync --once holds" in r.stdout + r.stderr


@pytest.mark.fault
def test_bad_configuration_exits_2_with_one_line(workdir):
    """Exit 2 with one line naming the problem."""
    cfg = os.path.join(workdir, "bad.cfg")
    cases = {
        'clusters = ( { alias = "a"; writer_hostgroup = 1; reader_hostgroup = 1; } );\n'
        'admin-addr = "127.0.0.1:6032"\n': "reader_hostgroup equals writer_hostgroup",
        'admin-addr = "127.0.0.1:6032"\nwait = 9999\n': "wait",
        'bogus = 1\n': "unknown setting",
        'clusters = ( { alias = "a"; writer_hostgroup = 1; } );\n': "no ProxySQL target",
        'health-request-timeout = 0.0\n': "health-request-timeout",
        'health-max-connections-per-ip = 0\n': "health-max-connections-per-ip",
        'health-max-connections = 100000\n': "health-max-connections",
        # as the start reads it: --check-config said "configuration ok" to this one
        'admin-addr = "127.0.0.1:6032"\nregion = "eu"\nhealth-listen = "99999"\n'
        'clusters = ( { alias = "a"; writer_hostgroup = 1; reader_hostgroup = 2; } );\n':
        "health-listen: '99999': port is not a number from 0 to 65535",
    }
    assert_check_config_refuses(cfg, cases)


def test_an_empty_admin_password_file_is_a_warning(workdir):
    """--check-config and the start share their warnings: an empty admin password file is named in
    both (--once is the start here, against an admin nobody listens on)."""
    pw = os.path.join(workdir, "empty-pw")
    open(pw, "w").close()
    os.chmod(pw, 0o600)
    cfg = os.path.join(workdir, "empty.cfg")
    with open(cfg, "w") as f:
        f.write('consul-addr = "127.0.0.1:1"\nregion = "eu"\nadmin-addr = "127.0.0.1:1"\n'
                'admin-password-file = "%s"\nadmin-timeout = 0.5\nlock-file = "%s/l"\n'
                'clusters = ( { alias = "a"; writer_hostgroup = 1; reader_hostgroup = 2; } );\n' % (pw, workdir))
    want = "target 127.0.0.1:1: the admin password is empty"
    r = subprocess.run([SYNC, "-c", cfg, "--check-config"], capture_output=True, text=True, timeout=10)
    assert r.returncode == 0 and want in r.stdout + r.stderr, (r.stdout, r.stderr)
    r = subprocess.run([SYNC, "-c", cfg, "--once"], capture_output=True, text=True, timeout=30)
    assert want in r.stdout + r.stderr, (r.stdout, r.stderr)


def assert_check_config_refuses(cfg, cases):
    """Each {config text: words}: --check-config exits 2 with one line holding the words."""
    for text, want in cases.items():
        with open(cfg, "w") as f:
            f.write(text)
        r = subprocess.run([SYNC, "-c", cfg, "--check-config"], capture_output=True, text=True, timeout=10)
        assert r.returncode == 2, (text, r.stdout, r.stderr)
        assert want in r.stderr and len(r.stderr.strip().splitlines()) == 1, (text, r.stderr)


def test_example_config_is_valid(workdir):
    """The shipped, commented example passes --check-config (with its secret paths made real)."""
    example = os.path.join(os.path.dirname(__file__), "..", "..", "sync", "proxysql-sync.example.cfg")
    pw = os.path.join(workdir, "admin-pw")
    with open(pw, "w") as f:
        f.write("x")
    with open(example) as f:
        text = f.read().replace("/run/secrets/proxysql-admin", pw)
    cfg = os.path.join(workdir, "example.cfg")
    with open(cfg, "w") as f:
        f.write(text)
    r = subprocess.run([SYNC, "-c", cfg, "--check-config"], capture_output=True, text=True, timeout=10)
    assert r.returncode == 0, r.stderr
    assert "configuration ok: 1 target(s), 1 cluster(s)" in r.stdout
