"""proxysql-check against the ProxySQL admin double (or a real ProxySQL with PROXYSQL_BIN):
--liveness when the admin answers, is down or hangs; --readiness with ONLINE servers in the
writer hostgroup(s) loaded through the admin interface, and with proxysql-sync's /readyz.

Run: make all && /usr/bin/python3 -m pytest -q tests/integration/test_proxysql_check.py
"""

from __future__ import annotations

import http.server
import os
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
