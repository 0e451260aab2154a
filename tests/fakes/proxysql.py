"""Start and stop a ProxySQL admin interface for tests: the double
(tests/fakes/proxysql_admin.py) or, when PROXYSQL_BIN is set, the real binary.

    from fakes.proxysql import ProxySQL      # with tests/ on sys.path

    with ProxySQL() as p:                    # or p = ProxySQL(); p.start() ... p.close()
        conn = p.connect()                   # PyMySQL connection as admin
        p.query("SELECT * FROM runtime_mysql_servers")
        p.host, p.admin_port, p.admin_user, p.admin_password
        p.restart()                          # SIGTERM, start again on the same port, same datadir
        p.control("hang", count=1, seconds=0)   # test hooks: double only, skip on a real one
        p.statements()                       # every statement the double received

    proxysql = proxysql_fixture()            # in a test module: a pytest fixture

The real binary runs in the foreground on loopback with a temporary datadir and a
generated proxysql.cnf (admin_credentials, admin mysql_ifaces, mysql interfaces
on another free loopback port), with --initial on its first start only, and is
stopped with SIGTERM. Its admin port stays the same across restarts, like the
double's.
"""

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

from fakes.process import ServerProcess, free_port  # noqa: F401 (free_port: for tests)

HERE = os.path.dirname(os.path.abspath(__file__))
DOUBLE = os.path.join(HERE, "proxysql_admin.py")
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable


class ProxySQL(ServerProcess):
    """One ProxySQL admin interface on 127.0.0.1: the double or the real thing."""

    what = "proxysql"
    stop_timeout = 30.0

    def __init__(self, *, admin_user="admin", admin_password="admin", binary=None, workdir=None,
                 monitor_shun_after=None, extra_args=(), admin_credentials=None, stats_credentials=None,
                 cluster_username=None, cluster_password=None, monitor_username=None, monitor_password=None,
                 variables=(), proxysql_servers=(), admin_port=None):
        """admin_credentials defaults to admin_user:admin_password (the login connect() uses);
        the other settings are written to the config of a fresh datadir, like proxysql.cnf:
        variables is a list of (name, value) with full names ('mysql-monitor_ping_interval'),
        proxysql_servers a list of (hostname, port, weight, comment) rows (ProxySQL Cluster peers);
        admin_port fixes the admin port (peers must know it before they start)."""
        self.binary = binary if binary is not None else os.environ.get("PROXYSQL_BIN") or None
        self.admin_user, self.admin_password = admin_user, admin_password
        self.admin_credentials = admin_credentials or "%s:%s" % (admin_user, admin_password)
        self.config = [(name, value) for name, value in (
            ("admin-stats_credentials", stats_credentials), ("admin-cluster_username", cluster_username),
            ("admin-cluster_password", cluster_password), ("mysql-monitor_username", monitor_username),
            ("mysql-monitor_password", monitor_password)) if value is not None] + list(variables)
        self.monitor_shun_after = monitor_shun_after
        self.extra_args = list(extra_args)
        self._own_workdir = workdir is None
        self.workdir = workdir or tempfile.mkdtemp(prefix="proxysql-test-")
        self.datadir = os.path.join(self.workdir, "data")
        self.host = "127.0.0.1"
        self.proxysql_servers = list(proxysql_servers)
        self.admin_port = admin_port
        self.control_port = None
        self.mysql_port = None          # the MySQL port (mysql-interfaces), kept across restarts
        self.started_once = False
        super().__init__()

    # -- identity ------------------------------------------------------------

    @property
    def is_fake(self):
        return self.binary is None

    @property
    def admin_addr(self):
        return "%s:%d" % (self.host, self.admin_port)

    @property
    def log_path(self):
        return os.path.join(self.workdir, "proxysql.log")

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.close()

    # -- lifecycle -----------------------------------------------------------

    def start(self, initial=None, timeout=60.0):
        """Start and wait until the admin port serves. The first start is --initial."""
        if initial is None:
            initial = not self.started_once
        os.makedirs(self.datadir, exist_ok=True)
        self._log = open(self.log_path, "ab")
        self.returncode = None
        if self.is_fake:
            self._start_fake(initial, timeout)
        else:
            self._start_real(initial, timeout)
        self.started_once = True
        return self

    def _start_fake(self, initial, timeout):
        port_file = os.path.join(self.workdir, "ports")
        if os.path.exists(port_file):
            os.unlink(port_file)
        cmd = [PYTHON, DOUBLE, "--listen", "127.0.0.1:%d" % (self.admin_port or 0),
               "--control", "127.0.0.1:%d" % (self.control_port or 0), "--port-file", port_file,
               "--mysql-listen", "127.0.0.1:%d" % (self.mysql_port or 0),
               "--datadir", self.datadir,
               "--admin-credentials", self.admin_credentials]
        for name, value in self.config:
            cmd += ["--variable", "%s=%s" % (name, value)]
        for host, port, weight, comment in self.proxysql_servers:
            cmd += ["--proxysql-server", "%s:%d:%d:%s" % (host, port, weight, comment)]
        if initial:
            cmd.append("--initial")
        if self.monitor_shun_after is not None:
            cmd += ["--monitor-shun-after", str(self.monitor_shun_after)]
        cmd += self.extra_args
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=self._log, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while not os.path.exists(port_file):
            self._check_alive()
            if time.monotonic() > deadline:
                self.kill()
                raise RuntimeError("ProxySQL double did not start in %.0fs; log: %s" % (timeout, self.log_path))
            time.sleep(0.005)
        with open(port_file, encoding="utf-8") as f:
            line = f.read()
        self.admin_port = int(re.search(r"admin=[^ ]*:(\d+)", line).group(1))
        self.control_port = int(re.search(r"control=[^ ]*:(\d+)", line).group(1))
        self.mysql_port = int(re.search(r"mysql=[^ ]*:(\d+)", line).group(1))

    def _start_real(self, initial, timeout):
        if self.admin_port is None:
            self.admin_port = free_port()
        if self.mysql_port is None:
            self.mysql_port = free_port()
        cnf = os.path.join(self.workdir, "proxysql.cnf")
        admin = [("admin_credentials", self.admin_credentials)]
        admin += [(n[6:], v) for n, v in self.config if n.startswith("admin-")]
        admin.append(("mysql_ifaces", "127.0.0.1:%d" % self.admin_port))
        mysql = [("interfaces", "127.0.0.1:%d" % self.mysql_port)]
        mysql += [(n[6:], v) for n, v in self.config if n.startswith("mysql-")]

        def section(items):
            return "".join('\t%s="%s"\n' % (n, str(v).replace("\\", "\\\\").replace('"', '\\"'))
                           for n, v in items)

        with open(cnf, "w", encoding="utf-8") as f:
            f.write('datadir="%s"\n\nadmin_variables=\n{\n%s}\n\nmysql_variables=\n{\n%s}\n'
                    % (self.datadir, section(admin), section(mysql)))
            pgsql = [(n[6:], v) for n, v in self.config if n.startswith("pgsql-")]
            if pgsql:       # ProxySQL 3: proxysql.cnf's pgsql_variables section
                f.write("\npgsql_variables=\n{\n%s}\n" % section(pgsql))
            if self.proxysql_servers:
                f.write("\nproxysql_servers =\n(\n%s\n)\n" % ",\n".join(
                    '\t{ hostname="%s" port=%d weight=%d comment="%s" }' % row for row in self.proxysql_servers))
        cmd = [self.binary, "-f", "-D", self.datadir, "-c", cnf]
        if initial:
            cmd.append("--initial")
        cmd += self.extra_args
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=self._log, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while True:
            self._check_alive()
            if self._admin_answers():
                return
            if time.monotonic() > deadline:
                self.kill()
                raise RuntimeError("proxysql admin did not answer in %.0fs; log: %s" % (timeout, self.log_path))
            time.sleep(0.1)

    def _admin_answers(self):
        """True once a login as admin works (or, without PyMySQL, a greeting arrives)."""
        try:
            import pymysql
        except ImportError:
            try:
                with socket.create_connection((self.host, self.admin_port), timeout=2) as s:
                    return len(s.recv(4)) == 4
            except OSError:
                return False
        try:
            self.connect(connect_timeout=2).close()
            return True
        except pymysql.err.MySQLError:
            return False

    def restart(self, initial=False, timeout=60.0, **options):
        """Stop (SIGTERM) and start again on the same ports with the same datadir.

        Without initial the disk database is kept: memory and runtime come back
        from disk, unsaved changes are lost.  options: monitor_shun_after (double)."""
        self.stop()
        if "monitor_shun_after" in options:
            self.monitor_shun_after = options.pop("monitor_shun_after")
        if options:
            raise TypeError("unknown restart options: %s" % ", ".join(options))
        return self.start(initial=initial, timeout=timeout)

    def close(self):
        self.stop()
        if self._own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    # -- clients -------------------------------------------------------------

    def connect(self, user=None, password=None, **kwargs):
        """A PyMySQL connection to the admin port (autocommit untouched, values as text)."""
        import pymysql
        args = dict(host=self.host, port=self.admin_port, user=user or self.admin_user,
                    password=self.admin_password if password is None else password,
                    autocommit=None, conv={}, connect_timeout=10)
        args.update(kwargs)
        return pymysql.connect(**args)

    def query(self, sql, user=None, password=None):
        """Run one statement on a fresh connection; rows (tuples of str) or the affected count."""
        conn = self.connect(user, password)
        try:
            with conn.cursor() as cur:
                n = cur.execute(sql)
                return list(cur.fetchall()) if cur.description else n
        finally:
            conn.close()

    # -- test hooks (double only) --------------------------------------------------

    def control(self, path, method=None, **params):
        """Call the double's control API (see docs/proxysql-double.md) and return its JSON.

        A real ProxySQL has no such hooks: the calling test is skipped."""
        if not self.is_fake:
            try:
                import pytest
            except ImportError:
                raise NotImplementedError("control hooks need the ProxySQL double (PROXYSQL_BIN is set)")
            pytest.skip("control hook /%s needs the ProxySQL double (PROXYSQL_BIN is set)" % path.strip("/"))
        path = "/" + path.strip("/")
        if method is None:
            method = "GET" if path in ("/statements", "/state", "/health") else "POST"
        url = "http://127.0.0.1:%d%s" % (self.control_port, path)
        if params:
            url += "?" + urllib.parse.urlencode(params)
        req = urllib.request.Request(url, method=method, data=b"" if method != "GET" else None)
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as e:
            body = e.read().decode("utf-8", "replace")
            raise RuntimeError("control %s %s: HTTP %d %s" % (method, path, e.code, body)) from None

    def statements(self):
        """Every statement received so far: dicts with seq, conn, user, time, sql."""
        return self.control("statements", "GET")["statements"]

    def clear_statements(self):
        return self.control("statements", "DELETE")


def proxysql_fixture(scope="function", **kwargs):
    """A pytest fixture yielding a started ProxySQL (double, or real with PROXYSQL_BIN).

        proxysql = proxysql_fixture()                 # module level in a test file
        def test_x(proxysql): proxysql.query("SELECT 1")
    """
    import pytest

    @pytest.fixture(scope=scope)
    def _proxysql():
        p = ProxySQL(**kwargs)
        p.start()
        try:
            yield p
        finally:
            p.close()

    return _proxysql
