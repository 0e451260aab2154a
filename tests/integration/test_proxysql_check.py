"""proxysql-check against the ProxySQL admin double (or a real ProxySQL with PROXYSQL_BIN):
--liveness when the admin answers, is down or hangs; --readiness with ONLINE servers in the
writer hostgroup(s) loaded through the admin interface, and with proxysql-sync's /readyz.

Run: make all && /usr/bin/python3 -m pytest -q tests/integration/test_proxysql_check.py
"""

from __future__ import annotations

import http.server
import os
import re
import secrets
import threading
import time

import pytest

import probes_cases as pc
from fakes.proxysql import ProxySQL, free_port

PROBE = os.path.join(pc.BIN, "proxysql-check")


@pytest.fixture
def proxysql(tmp_path):
    password = "adm-" + secrets.token_hex(8)
    pc.register_secret(password)
    p = ProxySQL(admin_password=password, monitor_shun_after=0)
    p.start()
    pw_file = tmp_path / "admin-password"
    pw_file.write_text(password + "\n")
    os.chmod(pw_file, 0o600)
    p.password_file = str(pw_file)
    try:
        yield p
    finally:
        p.close()


def check(p, *args, env=None, password_file=True):
    argv = [PROBE, "--host", p.host, "--port", p.admin_port, "--defaults-extra-file", ""]
    if password_file:
        argv += ["--password-file", p.password_file]
    return pc.run(argv + list(args), env=env)


def load_servers(p, rows):
    """Replace mysql_servers with rows (hostgroup, host, port, status) and LOAD them to runtime."""
    conn = p.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("DELETE FROM mysql_servers")
            for hg, host, port, status in rows:
                cur.execute("INSERT INTO mysql_servers (hostgroup_id, hostname, port, status) "
                            f"VALUES ({hg}, '{host}', {port}, '{status}')")
            cur.execute("LOAD MYSQL SERVERS TO RUNTIME")
    finally:
        conn.close()


def probe_connections(p):
    """Connections that ran the probe's statements (each probe run: exactly one)."""
    return {s["conn"] for s in p.statements() if s["user"] == p.admin_user}


# -- liveness --------------------------------------------------------------------------------
def test_liveness_ok(proxysql):
    if proxysql.is_fake:
        proxysql.clear_statements()
    r = check(proxysql, "--liveness")
    assert (r.rc, r.text, r.err) == (0, "alive: admin interface answers\n", b""), r
    if proxysql.is_fake:
        assert len(probe_connections(proxysql)) == 1
        assert [s["sql"] for s in proxysql.statements()] == ["SELECT 1"]


def test_liveness_with_password_from_the_environment(proxysql):
    r = check(proxysql, "--liveness", "--json", password_file=False,
              env={"PROXYSQL_ADMIN_PASSWORD": proxysql.admin_password})
    assert r.rc == 0, r
    assert r.text.startswith('{"probe":"proxysql-liveness","up":true,"reason":"ok",'), r


def test_liveness_down(proxysql):
    port = proxysql.admin_port
    proxysql.stop()
    r = check(proxysql, "--liveness")
    assert r.rc == 1, r
    assert r.text.startswith(f"not alive: connection refused (127.0.0.1:{port}): "), r
    assert r.text.count("\n") == 1 and r.err == b"", r


def test_liveness_hung_returns_within_the_deadline(proxysql):
    proxysql.pause()
    try:
        for timeout in ("1", "0.4"):
            r = check(proxysql, "--liveness", "--timeout", timeout)
            assert r.rc == 1, r
            assert r.text == (f"not alive: timeout after {float(timeout):.1f}s connecting "
                              f"(127.0.0.1:{proxysql.admin_port}, --timeout)\n"), r
            assert float(timeout) - 0.02 <= r.wall <= float(timeout) + pc.SLACK, r
    finally:
        proxysql.resume()
    assert check(proxysql, "--liveness").rc == 0


def test_liveness_query_hangs_after_login(proxysql):
    """Login works, then SELECT 1 never gets an answer: the same deadline covers the query."""
    proxysql.control("hang", count=1, seconds=0)
    try:
        r = check(proxysql, "--liveness", "--timeout", "1")
    finally:
        proxysql.control("release")
    assert r.rc == 1, r
    assert r.text == (f"not alive: timeout after 1.0s waiting for the query "
                      f"(127.0.0.1:{proxysql.admin_port}, --timeout)\n"), r
    assert 0.98 <= r.wall <= 1.0 + pc.SLACK, r


def test_liveness_wrong_password(proxysql, tmp_path):
    wrong = tmp_path / "wrong"
    wrong.write_text(pc.WRONG_PASSWORD)
    r = pc.run([PROBE, "--liveness", "--host", "127.0.0.1", "--port", proxysql.admin_port,
                "--defaults-extra-file", "", "--password-file", wrong])
    assert r.rc == 1, r
    assert r.text == (f"not alive: access denied (127.0.0.1:{proxysql.admin_port}): ProxySQL Error: "
                      "Access denied for user 'admin'@'127.0.0.1' (using password: YES) (1045)\n"), r


# -- readiness -------------------------------------------------------------------------------
def test_readiness_online_writer(proxysql):
    load_servers(proxysql, [(10, "db1", 3306, "ONLINE"), (20, "db2", 3306, "ONLINE")])
    if proxysql.is_fake:
        proxysql.clear_statements()
    r = check(proxysql, "--readiness", "--writer-hostgroup", "10")
    assert (r.rc, r.text) == (0, "ready: every writer hostgroup (10) has an ONLINE server\n"), r
    if proxysql.is_fake:
        assert len(probe_connections(proxysql)) == 1


def test_readiness_no_writer(proxysql):
    r = check(proxysql, "--readiness", "--writer-hostgroup", "10")
    assert (r.rc, r.text) == (1, "not ready: no ONLINE server in writer hostgroup 10\n"), r
    # Configured but not loaded: runtime is what counts.
    conn = proxysql.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("INSERT INTO mysql_servers (hostgroup_id, hostname, port) VALUES (10, 'db1', 3306)")
    finally:
        conn.close()
    r = check(proxysql, "--readiness", "--writer-hostgroup", "10")
    assert (r.rc, r.text) == (1, "not ready: no ONLINE server in writer hostgroup 10\n"), r
    # Only OFFLINE_SOFT writers.
    load_servers(proxysql, [(10, "db1", 3306, "OFFLINE_SOFT")])
    r = check(proxysql, "--readiness", "--writer-hostgroup", "10")
    assert (r.rc, r.text) == (1, "not ready: no ONLINE server in writer hostgroup 10\n"), r


def test_readiness_several_writer_hostgroups(proxysql):
    load_servers(proxysql, [(10, "db1", 3306, "ONLINE"), (30, "db3", 3306, "OFFLINE_SOFT"),
                            (30, "db4", 3306, "ONLINE"), (20, "db2", 3306, "OFFLINE_SOFT")])
    r = check(proxysql, "--readiness", "--writer-hostgroup", "10,30")
    assert (r.rc, r.text) == (0, "ready: every writer hostgroup (10,30) has an ONLINE server\n"), r
    r = check(proxysql, "--readiness", "--writer-hostgroup", "10,20,30")
    assert (r.rc, r.text) == (1, "not ready: no ONLINE server in writer hostgroup 20\n"), r
    r = check(proxysql, "--readiness", env={"PROXYSQL_WRITER_HOSTGROUPS": "30, 10"})
    assert r.rc == 0, r


def test_readiness_shunned_writer_is_not_ready(tmp_path):
    """The monitor shuns a writer whose port refuses: not ONLINE, so not ready."""
    password = "adm-" + secrets.token_hex(8)
    pc.register_secret(password)
    dead_port = free_port()
    with ProxySQL(admin_password=password, monitor_shun_after=1) as p:
        if not p.is_fake:
            pytest.skip("relies on the double's emulated monitor timing")
        pw = tmp_path / "pw"
        pw.write_text(password)
        load_servers(p, [(10, "127.0.0.1", dead_port, "ONLINE")])
        argv = [PROBE, "--readiness", "-w", "10", "--port", p.admin_port, "--defaults-extra-file", "",
                "--password-file", pw]
        deadline = time.monotonic() + 15
        while True:
            r = pc.run(argv)
            if r.rc == 1:
                break
            assert time.monotonic() < deadline, f"the shunned writer still counts as ready: {r}"
            time.sleep(0.3)
        assert r.text == "not ready: no ONLINE server in writer hostgroup 10\n", r


class Readyz:
    """A tiny proxysql-sync stand-in: /readyz answers `status` (or never, when hang is set)."""

    def __init__(self):
        self.status = 200
        self.hang = threading.Event()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                if outer.hang.is_set():
                    time.sleep(3)
                body = b"ok\n" if outer.status == 200 else b"not ready\n"
                try:
                    self.send_response(outer.status if self.path == "/readyz" else 404)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:
                    pass            # the probe gave up first (its deadline)

            def log_message(self, *a):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_port}/readyz"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def test_readiness_with_sync_readyz(proxysql):
    load_servers(proxysql, [(10, "db1", 3306, "ONLINE")])
    rz = Readyz()
    try:
        r = check(proxysql, "--readiness", "-w", "10", "--sync-readyz", rz.url)
        assert (r.rc, r.text) == (0, "ready: every writer hostgroup (10) has an ONLINE server, "
                                     "proxysql-sync ready\n"), r
        rz.status = 503
        r = check(proxysql, "--readiness", "-w", "10", "--sync-readyz", rz.url)
        assert (r.rc, r.text) == (1, f"not ready: proxysql-sync {rz.url} answered 503\n"), r
        rz.hang.set()
        r = check(proxysql, "--readiness", "-w", "10", "--sync-readyz", rz.url, "--timeout", "1")
        assert r.rc == 1 and r.text.startswith(f"not ready: proxysql-sync {rz.url}: "), r
        assert r.wall <= 1.0 + pc.SLACK, r
    finally:
        rz.close()
    closed = f"http://127.0.0.1:{free_port()}/readyz"
    r = check(proxysql, "--readiness", "-w", "10", "--sync-readyz", closed)
    assert r.rc == 1 and r.text.startswith(f"not ready: proxysql-sync {closed}: "), r
    # No writer: the hostgroup decides before /readyz is asked.
    load_servers(proxysql, [])
    r = check(proxysql, "--readiness", "-w", "10", "--sync-readyz", closed)
    assert (r.rc, r.text) == (1, "not ready: no ONLINE server in writer hostgroup 10\n"), r


def test_sync_readyz_on_loopback_never_through_a_proxy(proxysql):
    """http_proxy, HTTP_PROXY and ALL_PROXY name a proxy (a kubelet exec probe inherits the pod's
    environment): the agent's /readyz on 127.0.0.1 is asked directly, as proxysql-sync asks a
    loopback Consul, and the probe says ready; the proxy sees nothing."""
    from test_sync_consul_client import RecordingProxy
    load_servers(proxysql, [(10, "db1", 3306, "ONLINE")])
    rz = Readyz()
    try:
        with RecordingProxy(("127.0.0.1", 1)) as proxy:
            env = {name: proxy.url for name in ("http_proxy", "HTTP_PROXY", "ALL_PROXY", "all_proxy")}
            r = check(proxysql, "--readiness", "-w", "10", "--sync-readyz", rz.url, env=env)
            assert r.rc == 0, r
            assert proxy.seen() == []
    finally:
        rz.close()


def test_readiness_hung_admin(proxysql):
    load_servers(proxysql, [(10, "db1", 3306, "ONLINE")])
    proxysql.pause()
    try:
        r = check(proxysql, "--readiness", "-w", "10", "--timeout", "1")
    finally:
        proxysql.resume()
    assert r.rc == 1, r
    assert r.text == (f"not ready: timeout after 1.0s connecting (127.0.0.1:{proxysql.admin_port}, "
                      "--timeout)\n"), r
    assert 0.98 <= r.wall <= 1.0 + pc.SLACK, r


def test_no_password_in_any_output(proxysql):
    r = check(proxysql, "--readiness", "--json", "--user", "nosuchadmin")
    assert r.rc == 1 and '"reason":"access denied"' in r.text, r
    for argv, out, err in pc.OUTPUTS:
        pc.assert_no_secret(out, f"stdout of {argv}")
        pc.assert_no_secret(err, f"stderr of {argv}")


# -- drain (before a stop) --------------------------------------------------------------------
def frontend_user(p, user, password, hostgroup=10, servers=()):
    """A frontend+backend mysql_users row (cleartext password) and servers in its hostgroup."""
    if servers:
        load_servers(p, [(hostgroup, host, port, "ONLINE") for host, port in servers])
    p.query("INSERT INTO mysql_users (username, password, default_hostgroup) VALUES ('%s', '%s', %d)"
            % (user, password, hostgroup))
    p.query("LOAD MYSQL USERS TO RUNTIME")


def client(p, user, password, **kw):
    import pymysql
    return pymysql.connect(host=p.host, port=p.mysql_port, user=user, password=password, **kw)


def refused(p, user, password):
    import pymysql
    try:
        client(p, user, password, connect_timeout=1).close()
    except pymysql.err.OperationalError as e:
        return e.args[0] == 2003
    return False


class Background:
    """A probe run in a thread; .result and .ended (monotonic) once it exits."""

    def __init__(self, argv_fn):
        self.result = self.ended = None
        self.thread = threading.Thread(target=self._run, args=(argv_fn,), daemon=True)
        self.thread.start()

    def _run(self, argv_fn):
        self.result = argv_fn()
        self.ended = time.monotonic()

    def join(self, timeout):
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "the drain did not exit"
        return self.result


def test_drain_lets_in_flight_queries_finish(proxysql, galera, mysql_creds):
    """--drain-delay 1: new connections are still accepted during the delay; then PROXYSQL PAUSE,
    which a real 2.7.1 answers only after 2-3.6 s (lifecycle facts): from then on new connections
    are refused while a query in flight through the paused ProxySQL finishes without error; the
    drain exits 0 soon after the last client leaves."""
    galera.heal()
    node = galera[1]
    frontend_user(proxysql, mysql_creds.user, mysql_creds.password, servers=[(node.ip, node.port)])
    c = client(proxysql, mysql_creds.user, mysql_creds.password)
    results = {}

    def slow_query():
        with c.cursor() as cur:
            cur.execute("SELECT SLEEP(6), 42")
            results["row"] = cur.fetchone()
    t0 = time.monotonic()
    d = Background(lambda: check(proxysql, "--drain", "--drain-delay", "1", "--timeout", "10"))
    time.sleep(0.3)
    client(proxysql, mysql_creds.user, mysql_creds.password).close()     # accepted during the delay
    q = threading.Thread(target=slow_query)
    q.start()
    until = time.monotonic() + 5.5
    while not refused(proxysql, mysql_creds.user, mysql_creds.password) and time.monotonic() < until:
        time.sleep(0.1)
    assert refused(proxysql, mysql_creds.user, mysql_creds.password)     # paused: refused
    assert q.is_alive()                                                  # while the query is in flight
    q.join(10)
    assert tuple(str(v) for v in results["row"]) == ("0", "42"), results   # the double sends text columns
    left = time.monotonic()
    c.close()
    r = d.join(15)
    assert r.rc == 0, r
    lines = r.text.splitlines()
    assert len(lines) == 2 and re.match(r"proxysql-drain: paused \(new connections refused\) after [1-5]\.", lines[0])
    assert "1 client(s) connected" in lines[0] and lines[1].startswith("drained: no client connected, "), r
    assert d.ended - t0 > 6
    print("drain exit %.0f ms after the last client left" % ((d.ended - left) * 1000))
    assert d.ended - left < 0.2 + pc.SLACK, (d.ended - left, r)


def test_drain_ends_at_its_deadline_naming_the_clients_left(proxysql):
    """A client that never leaves: the drain ends at --timeout with exit 1, naming it; the client's
    connection still works; a second drain while paused is fine (PAUSE says "already paused") and
    exits 0 once the client has gone; polls of the client count at most one per 100 ms."""
    frontend_user(proxysql, "app", "app-pw")
    c = client(proxysql, "app", "app-pw")
    port = c.socket.getsockname()[1] if hasattr(c, "socket") else c._sock.getsockname()[1]
    if proxysql.is_fake:
        proxysql.clear_statements()
    r = check(proxysql, "--drain", "--timeout", "5")       # PAUSE itself takes 2-3.6 s (the double: 2)
    assert r.rc == 1, r
    assert f"not drained: 1 client(s) still connected at the deadline (--timeout 5.0s): app@127.0.0.1:{port} (Sleep" \
        in r.text, r
    assert 5 - 0.11 <= r.wall <= 5 + pc.SLACK, r      # the last 100 ms name the clients
    if proxysql.is_fake:
        polls = [s for s in proxysql.statements() if "FROM stats_mysql_global" in s["sql"]]
        assert 24 <= len(polls) <= 30, len(polls)      # 5 s less PAUSE's 2 s and the tail, one per 100 ms
        times = [s["time"] for s in polls]
        assert min(b - a for a, b in zip(times, times[1:])) >= 0.095, times
    c.ping(reconnect=False)
    assert refused(proxysql, "app", "app-pw")
    c.close()
    r = check(proxysql, "--drain", "--timeout", "2")
    assert r.rc == 0, r
    assert r.text.startswith("proxysql-drain: already paused after "), r
    proxysql.query("PROXYSQL RESUME")
    client(proxysql, "app", "app-pw").close()
    import pymysql
    with pytest.raises(pymysql.err.OperationalError) as exc:      # recorded on 2.7.1 (lifecycle facts)
        proxysql.query("PROXYSQL RESUME")
    assert exc.value.args == (1045, "ProxySQL Admin Error: ProxySQL MySQL module is not paused, impossible to "
                                    "resume"), exc.value.args


def drain_deadline(proxysql):
    """A --timeout that PAUSE answers well within: the double answers in 2 s, a real 2.7.1 in 3 to
    4 s on the test machine (a deadline of 4 s there ends while PAUSE is still answering)."""
    return 4 if proxysql.is_fake else 8


def test_drain_failure_says_proxysql_stays_paused(proxysql):
    """A drain that ends at its deadline leaves ProxySQL paused (the stop follows): the failure line
    says so and names the statement and the admin address; ProxySQL still refuses new clients."""
    frontend_user(proxysql, "app", "app-pw")
    c = client(proxysql, "app", "app-pw")
    try:
        r = check(proxysql, "--drain", "--timeout", str(drain_deadline(proxysql)))
        assert r.rc == 1, r
        assert r.text.splitlines()[-1].endswith(
            "; ProxySQL stays paused (new connections refused): to serve again, run PROXYSQL RESUME on the "
            f"admin interface 127.0.0.1:{proxysql.admin_port} (or drain with --resume-on-failure)"), r
        assert refused(proxysql, "app", "app-pw")
        r = check(proxysql, "--drain", "--timeout", "1", "--json")     # already paused: the same words
        assert r.rc == 1 and '"reason":"clients_left"' in r.text and "ProxySQL stays paused" in r.text, r
        assert refused(proxysql, "app", "app-pw")
    finally:
        c.close()
        proxysql.query("PROXYSQL RESUME")


def test_drain_resume_on_failure(proxysql):
    """--resume-on-failure: the drain ends at its deadline, then PROXYSQL RESUME on a fresh
    connection; ProxySQL accepts clients again and the line says so."""
    frontend_user(proxysql, "app", "app-pw")
    c = client(proxysql, "app", "app-pw")
    t = drain_deadline(proxysql)
    try:
        r = check(proxysql, "--drain", "--timeout", str(t), "--resume-on-failure")
        assert r.rc == 1, r
        assert "not drained: 1 client(s) still connected at the deadline (--timeout %.1fs)" % t in r.text, r
        assert r.text.splitlines()[-1].endswith(
            "; resumed: PROXYSQL RESUME sent, ProxySQL accepts new connections again (--resume-on-failure)"), r
        assert t - 0.11 <= r.wall <= t + 1 + pc.SLACK, r
        client(proxysql, "app", "app-pw").close()                   # serving again
        c.ping(reconnect=False)
    finally:
        c.close()


def test_drain_unanswered_pause(proxysql):
    """A deadline shorter than PAUSE's answer (2 s on the double, 2 to 4 s on a real 2.7.1): PAUSE was
    sent and may still take effect. Without the option the line says ProxySQL may be paused; with
    it, RESUME is retried until the late pause is undone, and ProxySQL serves."""
    frontend_user(proxysql, "app", "app-pw")
    r = check(proxysql, "--drain", "--timeout", "0.5")
    assert r.rc == 1 and r.text.startswith("not drained: timeout after 0.5s waiting for the query"), r
    assert ("; ProxySQL may be paused (PROXYSQL PAUSE got no answer): to serve again, run PROXYSQL RESUME on "
            f"the admin interface 127.0.0.1:{proxysql.admin_port}") in r.text, r
    time.sleep(4)                                   # the pause takes effect late
    assert refused(proxysql, "app", "app-pw")
    proxysql.query("PROXYSQL RESUME")
    r = check(proxysql, "--drain", "--timeout", "0.5", "--resume-on-failure")
    assert r.rc == 1 and r.text.startswith("not drained: timeout after 0.5s waiting for the query"), r
    assert r.text.rstrip().endswith(
        "; resumed: PROXYSQL RESUME sent, ProxySQL accepts new connections again (--resume-on-failure)"), r
    assert r.wall <= 0.5 + 5 + pc.SLACK, r
    time.sleep(0.5)
    client(proxysql, "app", "app-pw").close()


def test_drain_usage_and_admin_down(proxysql):
    r = check(proxysql, "--drain", "--drain-delay", "3", "--timeout", "2")
    assert r.rc == 2 and r.err == b"proxysql-check: --drain-delay (3.0s) must be shorter than --timeout (2.0s)\n", r
    r = check(proxysql, "--drain", "--liveness")
    assert r.rc == 2 and b"exactly one of --liveness, --readiness and --drain" in r.err, r
    port = proxysql.admin_port
    proxysql.stop()
    for extra in ((), ("--resume-on-failure",)):      # never paused: nothing said about a pause
        r = check(proxysql, "--drain", "--timeout", "2", *extra)
        assert r.rc == 1 and r.text.startswith(f"not drained: connection refused (127.0.0.1:{port})"), r
        assert "paus" not in r.text and "RESUME" not in r.text, r
    r = check(proxysql, "--liveness", "--resume-on-failure")
    assert r.rc == 2 and r.err == b"proxysql-check: --resume-on-failure goes with --drain\n", r
