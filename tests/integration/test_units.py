"""Bare-metal files (dist/) as `make install` puts them: every systemd unit passes
`systemd-analyze verify` without one complaint and keeps a low `systemd-analyze security`
exposure; and every command line they hold (ExecStart=, the xinetd server + server_args, the
cron lines, the example agent configuration) really runs: against the test Galera cluster, the
Consul double and the ProxySQL double, with only the paths of /etc and /var moved into a
temporary directory. No systemd is booted and nothing is enabled.

Run: make && /usr/bin/python3 -m pytest -q tests/integration/test_units.py
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import time
import urllib.request

import pytest

from fakes.consul import Consul
from fakes.proxysql import ProxySQL

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
SYSTEMD_ANALYZE = shutil.which("systemd-analyze")
ADMIN_PASSWORD = "adm-" + os.urandom(6).hex()
UNITS = ["clustercheck.socket", "clustercheck@.service", "clustercheck-http.service",
         "clustercheck-register.service", "proxysql-sync.service"]
DROP_IN = "proxysql.service.d/sidekick-drain.conf"     # for the ProxySQL package's proxysql.service


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """`make install` into a fresh prefix (the paths inside the units point there)."""
    prefix = str(tmp_path_factory.mktemp("prefix"))
    r = subprocess.run(["make", "-s", "--no-print-directory", "-C", REPO, "install", "PREFIX=" + prefix],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    return prefix


def unit_path(installed, unit):
    return os.path.join(installed, "lib", "systemd", "system", unit)


def example(installed, name):
    return os.path.join(installed, "share", "doc", "sidekick", "examples", name)


def unit_values(path, key):
    """Values of KEY= in a unit file, continuation lines joined."""
    with open(path) as f:
        text = f.read().replace("\\\n", " ")
    return [m.group(1).strip() for m in re.finditer(r"^%s=(.*)$" % re.escape(key), text, re.M)]


def test_make_install_puts_everything(installed):
    for unit in UNITS + [DROP_IN]:
        assert os.path.isfile(unit_path(installed, unit)), unit
    for name in ("xinetd-mysqlchk", "cron-sidekick", "proxysql-sync.conf"):
        assert os.path.isfile(example(installed, name)), name
    for unit in UNITS + [DROP_IN]:
        with open(unit_path(installed, unit)) as f:
            text = f.read()
        assert "@BINDIR@" not in text and "@DOCDIR@" not in text, unit
        for cmd in unit_values(unit_path(installed, unit), "ExecStart") + unit_values(unit_path(installed, unit),
                                                                                      "ExecStop"):
            binary = cmd.lstrip("-@:+!").split()[0]
            assert binary == os.path.join(installed, "bin", os.path.basename(binary)), cmd
            assert os.access(binary, os.X_OK), cmd


# -- systemd-analyze ----------------------------------------------------------------------------
needs_systemd = pytest.mark.skipif(SYSTEMD_ANALYZE is None, reason="systemd-analyze not installed")


@needs_systemd
def test_verify_catches_a_typo(tmp_path):
    """The check below means something: a misspelt key is reported (on stderr, exit status 0)."""
    bad = tmp_path / "typo.service"
    bad.write_text("[Service]\nExecStrat=/bin/true\nExecStart=/bin/true\n")
    r = subprocess.run([SYSTEMD_ANALYZE, "verify", str(bad)], capture_output=True, text=True, timeout=60)
    assert "Unknown key" in r.stdout + r.stderr


@needs_systemd
@pytest.mark.parametrize("unit", UNITS)
def test_systemd_analyze_verify(installed, unit):
    r = subprocess.run([SYSTEMD_ANALYZE, "verify", unit_path(installed, unit)], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0 and (r.stdout + r.stderr).strip() == "", r.stdout + r.stderr


@needs_systemd
def test_drain_drop_in_verifies_with_a_proxysql_unit(installed, tmp_path):
    """The drop-in beside a proxysql.service shaped like the package's (Type=forking, User=proxysql):
    systemd-analyze verify finds nothing to say about the pair."""
    unit = tmp_path / "proxysql.service"
    unit.write_text("[Unit]\nDescription=ProxySQL\n[Service]\nType=forking\nExecStart=/bin/true\n"
                    "PIDFile=/run/proxysql.pid\n[Install]\nWantedBy=multi-user.target\n")
    shutil.copytree(os.path.dirname(unit_path(installed, DROP_IN)), tmp_path / "proxysql.service.d")
    r = subprocess.run([SYSTEMD_ANALYZE, "verify", str(unit)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and (r.stdout + r.stderr).strip() == "", r.stdout + r.stderr


@needs_systemd
@pytest.mark.parametrize("unit,limit", [("clustercheck@.service", 2.5), ("clustercheck-http.service", 2.5),
                                        ("clustercheck-register.service", 2.5), ("proxysql-sync.service", 1.5)])
def test_systemd_analyze_security(installed, unit, limit):
    r = subprocess.run([SYSTEMD_ANALYZE, "security", "--offline=yes", "--no-pager", unit_path(installed, unit)],
                       capture_output=True, text=True, timeout=60)
    m = re.search(r"Overall exposure level for \S+: ([0-9.]+)", r.stdout)
    assert m, r.stdout + r.stderr
    assert float(m.group(1)) <= limit, "%s exposure %s > %s" % (unit, m.group(1), limit)


# -- the command lines, for real -------------------------------------------------------------------
@pytest.fixture
def etc(tmp_path, galera, clustercheck_creds):
    """A stand-in for /etc/sidekick, /var/tmp and /var/log: the files the units and cron lines read."""
    d = tmp_path / "etc"
    d.mkdir()
    node = galera[1]
    with open(clustercheck_creds.password_file) as f:
        password = f.read()
    cnf = d / "clustercheck.cnf"
    cnf.write_text("[client]\nuser=%s\npassword=%s\nhost=%s\nport=%d\n"
                   % (clustercheck_creds.user, password, node.ip, node.port))
    cnf.chmod(0o600)
    (d / "proxysql-admin.password").write_text(ADMIN_PASSWORD)
    (d / "proxysql-admin.password").chmod(0o600)
    return d


def moved(text, etc, extra=()):
    """Command text with /etc/sidekick, the credentials directory and /var paths moved to etc."""
    for old, new in [("%d/", str(etc) + "/"), ("/run/credentials/proxysql-sync.service/proxysql-admin",
                                                str(etc / "proxysql-admin.password")),
                     ("/etc/sidekick/", str(etc) + "/"), ("/var/tmp/", str(etc) + "/"),
                     ("/var/log/", str(etc) + "/"), ("/run/", str(etc) + "/")] + list(extra):
        text = text.replace(old, new)
    return text


def test_clustercheck_socket_service_command(installed, etc, healthy_galera):
    """clustercheck@.service's ExecStart with the connection as stdin and stdout (Accept=yes)."""
    [cmd] = unit_values(unit_path(installed, "clustercheck@.service"), "ExecStart")
    argv = shlex.split(moved(cmd.lstrip("-"), etc))
    a, b = socket.socketpair()
    with a, b:
        p = subprocess.run(argv, stdin=b, stdout=b, stderr=subprocess.PIPE, timeout=20, env={})
        b.shutdown(socket.SHUT_WR)
        a.settimeout(5)
        data = b""
        while True:
            chunk = a.recv(4096)
            if not chunk:
                break
            data += chunk
    assert p.returncode == 0, (data, p.stderr)
    assert data.startswith(b"HTTP/1.1 200 OK\r\n") and data.endswith(b"Node is synced.\r\n"), data


def test_clustercheck_http_service_command(installed, etc, healthy_galera):
    [cmd] = unit_values(unit_path(installed, "clustercheck-http.service"), "ExecStart")
    port = free_port()
    assert "--listen 9200" in cmd
    argv = shlex.split(moved(cmd, etc).replace("--listen 9200", "--listen 127.0.0.1:%d" % port))
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env={})
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                with urllib.request.urlopen("http://127.0.0.1:%d/" % port, timeout=5) as resp:
                    assert resp.status == 200
                    break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise
                time.sleep(0.1)
    finally:
        proc.send_signal(signal.SIGTERM)
        out = proc.communicate(timeout=5)[0]
    assert proc.returncode == 0, out


def test_xinetd_entry_command(installed, etc, healthy_galera):
    with open(example(installed, "xinetd-mysqlchk")) as f:
        text = f.read()
    server = re.search(r"^\s*server\s*=\s*(\S+)", text, re.M).group(1)
    args = re.search(r"^\s*server_args\s*=\s*(.*)$", text, re.M).group(1)
    assert os.access(server, os.X_OK), server
    assert "password" not in args.replace("password-file", ""), "no password on the xinetd command line"
    r = subprocess.run([server] + shlex.split(moved(args, etc)), capture_output=True, timeout=20, env={})
    assert r.returncode == 0 and r.stdout.startswith(b"HTTP/1.1 200 OK\r\n"), r


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


def agent_config(installed, etc, consul, px):
    """The example proxysql-sync.conf, pointed at the doubles."""
    with open(example(installed, "proxysql-sync.conf")) as f:
        text = f.read()
    assert 'consul-addr = "127.0.0.1:8500"' in text and '"127.0.0.1:6032"' in text
    text = text.replace('"127.0.0.1:8500"', '"%s"' % consul.addr).replace('"127.0.0.1:6032"', '"%s"' % px.admin_addr)
    text = text.replace('user = "admin"', 'user = "%s"' % px.admin_user)
    text = text.replace('"127.0.0.1:9901"', '"127.0.0.1:%d"' % free_port())
    (etc / "proxysql-sync.conf").write_text(moved(text, etc))


def put_topology(consul):
    consul.put("mysql/master/shop", b"db1:3306")
    consul.put("mysql/master/shop/hostname", b"db1")
    consul.put("mysql/master/shop/port", b"3306")
    consul.put("mysql/replica/shop/eu/db2:3306", b"db2:3306")


def servers(px):
    return sorted(tuple(str(v) for v in r) for r in px.query(
        "SELECT hostgroup_id, hostname, port FROM runtime_mysql_servers"))


def test_proxysql_sync_service_command(installed, etc, consul, px):
    agent_config(installed, etc, consul, px)
    put_topology(consul)
    [cmd] = unit_values(unit_path(installed, "proxysql-sync.service"), "ExecStart")
    log = open(etc / "agent.log", "wb")
    proc = subprocess.Popen(shlex.split(moved(cmd, etc)), stdout=log, stderr=subprocess.STDOUT, env={})
    log.close()
    try:
        deadline = time.monotonic() + 15
        while servers(px) != [("10", "db1", "3306"), ("11", "db2", "3306")]:
            assert time.monotonic() < deadline and proc.poll() is None, (etc / "agent.log").read_text()
            time.sleep(0.1)
    finally:
        proc.send_signal(signal.SIGTERM)      # what systemctl stop sends
        proc.wait(timeout=5)
    assert proc.returncode == 0, (etc / "agent.log").read_text()
    assert ADMIN_PASSWORD not in (etc / "agent.log").read_text()


def test_proxysql_drain_drop_in_command(installed, etc, px):
    """The drop-in's ExecStop against a ProxySQL (double or real) with one client connected: the
    client is still served after the pause, new ones are refused, and the stop step exits 0 once
    the client has gone."""
    import pymysql
    [cmd] = unit_values(unit_path(installed, DROP_IN), "ExecStop")
    argv = shlex.split(moved(cmd.lstrip("-").replace("%d/proxysql-admin", str(etc / "proxysql-admin.password")), etc))
    argv += ["--port", str(px.admin_port)]
    px.query("INSERT INTO mysql_users (username, password, default_hostgroup) VALUES ('app', 'app-pw', 10)")
    px.query("LOAD MYSQL USERS TO RUNTIME")
    c = pymysql.connect(host=px.host, port=px.mysql_port, user="app", password="app-pw")
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={}, text=True)
    try:
        time.sleep(0.5)
        c.ping(reconnect=False)
        with pytest.raises(pymysql.err.OperationalError):
            pymysql.connect(host=px.host, port=px.mysql_port, user="app", password="app-pw", connect_timeout=1)
        assert proc.poll() is None
        c.close()
        out, err = proc.communicate(timeout=5)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0 and "drained: no client connected" in out, (out, err)


def cron_lines(installed):
    with open(example(installed, "cron-sidekick")) as f:
        lines = [ln.strip() for ln in f if ln.strip() and not ln.lstrip().startswith("#")]
    return [ln for ln in lines if not re.match(r"^[A-Z_]+=", ln)]


def run_cron_line(line, etc, env):
    fields = line.split(None, 6)
    assert len(fields) == 7 and fields[5] == "root", line     # /etc/cron.d format: 5 times, user, command
    return subprocess.run(["/bin/sh", "-c", moved(fields[6], etc)], capture_output=True, text=True,
                          timeout=60, env=env)


def test_cron_clustercheck_register_once(installed, etc, consul, healthy_galera):
    [line] = [ln for ln in cron_lines(installed) if "clustercheck --register" in ln]
    assert "--once" in line
    env = {"PATH": "/usr/bin:/bin", "CONSUL_HTTP_ADDR": consul.addr}
    r = run_cron_line(line, etc, env)
    log = (etc / "sidekick-register.log").read_text() if (etc / "sidekick-register.log").exists() else ""
    assert r.returncode == 0, log + r.stdout + r.stderr
    node = healthy_galera[1]
    key = "mysql/replica/shop/eu/%s:%d" % (node.ip, node.port)
    resp = consul.get(key)
    assert resp.status == 200, (resp, log)
    assert (etc / "clustercheck.session").exists()
    # A second run (the next minute) renews the same session and keeps the key.
    r = run_cron_line(line, etc, env)
    assert r.returncode == 0 and consul.get(key).status == 200


def test_cron_proxysql_sync_once(installed, etc, consul, px):
    agent_config(installed, etc, consul, px)
    put_topology(consul)
    [line] = [ln for ln in cron_lines(installed) if "proxysql-sync --once" in ln]
    r = run_cron_line(line, etc, {"PATH": "/usr/bin:/bin"})
    log = (etc / "proxysql-sync.log").read_text()
    assert r.returncode == 0, log + r.stdout + r.stderr
    assert servers(px) == [("10", "db1", "3306"), ("11", "db2", "3306")], log
    assert ADMIN_PASSWORD not in log
