"""The static binaries of `make static` (bin/static/) in an empty root: a chroot holding only the
binary, /etc/hosts (and /etc/resolv.conf for the DNS test), the secret files a test needs, and
nothing else: no libc, no NSS modules, no openssl.cnf, no CA bundle.

Each binary answers for real there: the probes against the test Galera cluster (found through
/etc/hosts, and once through a DNS server on loopback), clustercheck --listen over HTTP,
proxysql-check against the ProxySQL double, proxysql-sync --once from the Consul double to the
ProxySQL double, copy-probes filling a directory. A login through the client_ed25519 plugin
shows the auth plugins are built in (a static binary cannot dlopen one).

Run: make static && /usr/bin/python3 -m pytest -q tests/integration/test_static.py
"""

from __future__ import annotations

import filecmp
import os
import shutil
import socket
import struct
import subprocess
import threading
import time
import urllib.request

import pytest

from fakes.consul import Consul
from fakes.proxysql import ProxySQL
from probe_names import PROBES

HERE = os.path.dirname(os.path.abspath(__file__))
STATIC = os.environ.get("SIDEKICK_STATIC_BIN", os.path.join(HERE, "..", "..", "bin", "static"))
PROGRAMS = PROBES + ["proxysql-sync", "copy-probes"]
# An unknown option's exit code: 2, but 1 for healthcheck, as MariaDB's healthcheck.sh answers it.
USAGE_EXIT = {"healthcheck": 1}
CHROOT = shutil.which("chroot") or "/usr/sbin/chroot"

pytestmark = pytest.mark.skipif(
    not all(os.path.exists(os.path.join(STATIC, p)) for p in PROGRAMS),
    reason="no static binaries in %s (make static)" % STATIC)


class Root:
    """An empty root directory for chroot: add files, then run a binary inside it."""

    def __init__(self, path, hosts=None):
        self.path = str(path)
        os.makedirs(os.path.join(self.path, "etc"), exist_ok=True)
        lines = ["127.0.0.1 localhost"] + ["%s %s" % (ip, name) for name, ip in (hosts or {}).items()]
        self.write("/etc/hosts", "\n".join(lines) + "\n")

    def write(self, name, text, mode=0o600):
        p = os.path.join(self.path, name.lstrip("/"))
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w") as f:
            f.write(text)
        os.chmod(p, mode)
        return name

    def add_binary(self, prog, dest=None):
        dest = dest or "/" + prog
        shutil.copy2(os.path.join(STATIC, prog), os.path.join(self.path, dest.lstrip("/")))
        return dest

    def argv(self, args):
        return [CHROOT, self.path] + list(args)

    def run(self, *args, env=None, timeout=20):
        """Run args in the root with an empty environment; stdout/stderr as str, bytes kept
        (no newline translation: clustercheck's \\r\\n matter)."""
        r = subprocess.run(self.argv(args), capture_output=True, timeout=timeout, env=env or {})
        r.stdout, r.stderr = r.stdout.decode(errors="replace"), r.stderr.decode(errors="replace")
        return r

    def listing(self):
        out = []
        for d, _, files in os.walk(self.path):
            out += [os.path.relpath(os.path.join(d, f), self.path) for f in files]
        return sorted(out)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def show(r):
    return "exit %s\nstdout: %s\nstderr: %s" % (r.returncode, r.stdout, r.stderr)


# -- a DNS server on loopback ---------------------------------------------------------------
class FakeDNS:
    """Answers A queries for a few names over UDP on ADDR:53; AAAA gets an empty answer,
    other names NXDOMAIN. Enough for a stub resolver (musl's sends A and AAAA in parallel)."""

    def __init__(self, addr, records):
        self.addr = addr
        self.records = {k.lower().rstrip("."): v for k, v in records.items()}
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((addr, 53))
        self.sock.settimeout(0.2)
        self.queries = []
        self.stopped = False
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while not self.stopped:
            try:
                data, peer = self.sock.recvfrom(512)
            except socket.timeout:
                continue
            except OSError:
                return
            reply = self._answer(data)
            if reply:
                self.sock.sendto(reply, peer)

    def _answer(self, data):
        if len(data) < 12:
            return None
        qid, _flags, qdcount = struct.unpack(">HHH", data[:6])
        if qdcount != 1:
            return None
        labels, i = [], 12
        while i < len(data) and data[i] != 0:
            n = data[i]
            labels.append(data[i + 1:i + 1 + n].decode("ascii", "replace"))
            i += 1 + n
        qtype, _qclass = struct.unpack(">HH", data[i + 1:i + 5])
        question = data[12:i + 5]
        name = ".".join(labels).lower()
        self.queries.append((name, qtype))
        ip = self.records.get(name)
        if ip is None:
            return struct.pack(">HHHHHH", qid, 0x8183, 1, 0, 0, 0) + question
        if qtype != 1:
            return struct.pack(">HHHHHH", qid, 0x8180, 1, 0, 0, 0) + question
        answer = struct.pack(">HHHIH", 0xC00C, 1, 1, 60, 4) + socket.inet_aton(ip)
        return struct.pack(">HHHHHH", qid, 0x8180, 1, 1, 0, 0) + question + answer

    def close(self):
        self.stopped = True
        self.sock.close()
        self.thread.join(2)


# -- the binaries themselves ----------------------------------------------------------------
@pytest.mark.parametrize("prog", PROGRAMS)
def test_fully_static_and_runs_alone(prog, tmp_path):
    path = os.path.join(STATIC, prog)
    headers = subprocess.run(["readelf", "-lW", path], capture_output=True, text=True, check=True).stdout
    assert "INTERP" not in headers and "DYNAMIC" not in headers, headers
    root = Root(tmp_path)
    os.remove(os.path.join(root.path, "etc", "hosts"))
    root.add_binary(prog)
    r = root.run("/" + prog, "--version")
    assert r.returncode == 0 and r.stdout.startswith(prog + " (sidekick) "), show(r)
    r = root.run("/" + prog, "--no-such-option")
    assert r.returncode == USAGE_EXIT.get(prog, 2), show(r)


def test_auth_plugins_built_in():
    """caching_sha2_password and sha256_password have no server in this suite (MariaDB has
    neither): check that the client plugins are linked in; client_ed25519 logs in for real below."""
    for prog in PROBES + ["proxysql-sync"]:
        with open(os.path.join(STATIC, prog), "rb") as f:
            data = f.read()
        for plugin in (b"caching_sha2_password", b"sha256_password", b"client_ed25519"):
            assert plugin in data, "%s: auth plugin %s missing" % (prog, plugin.decode())


# -- probes against the Galera cluster --------------------------------------------------------
@pytest.fixture
def probe_root(tmp_path, galera, mysql_creds, clustercheck_creds):
    hosts = {"galera-%d.sidekick.test" % i: galera[i].ip for i in (1, 2, 3)}
    root = Root(tmp_path / "root", hosts)
    for prog in PROBES:
        root.add_binary(prog)
    with open(mysql_creds.password_file) as f:
        root.write("/secrets/monitor", f.read())
    with open(clustercheck_creds.password_file) as f:
        root.write("/secrets/clustercheckuser", f.read())
    return root


def test_probes_resolve_etc_hosts(probe_root, healthy_galera):
    node = healthy_galera[1]
    conn = ["--host", "galera-1.sidekick.test", "--port", str(node.port), "--timeout", "5"]
    r = probe_root.run("/liveness-check", *conn, "--password-file", "/secrets/monitor")
    assert r.returncode == 0 and r.stdout.startswith("alive"), show(r)
    r = probe_root.run("/readiness-check", *conn, "--password-file", "/secrets/monitor")
    assert r.returncode == 0 and r.stdout.startswith("ready"), show(r)
    r = probe_root.run("/clustercheck", *conn, "--password-file", "/secrets/clustercheckuser")
    assert r.returncode == 0 and r.stdout.startswith("HTTP/1.1 200 OK\r\n"), show(r)
    assert r.stdout.endswith("Percona XtraDB Cluster Node is synced.\r\n"), show(r)
    r = probe_root.run("/haproxy-check", "--port", str(node.port), "--password-file", "/secrets/monitor",
                       "--timeout", "5", "127.0.0.1", "3306", "galera-1.sidekick.test", str(node.port))
    assert r.returncode == 0, show(r)
    # The same probe, told to check a node that is not Synced, says so: the verdict is real.
    r = probe_root.run("/readiness-check", "--host", "galera-1.sidekick.test", "--port", "1",
                       "--timeout", "1", "--password-file", "/secrets/monitor")
    assert r.returncode == 1, show(r)


def test_probe_resolves_through_dns(probe_root, healthy_galera):
    node = healthy_galera[2]
    addr = "127.53.%d.%d" % tuple(os.urandom(2))      # port 53 is fixed: an address of our own
    dns = FakeDNS(addr, {"db.dns.sidekick.test": node.ip})
    try:
        probe_root.write("/etc/resolv.conf", "nameserver %s\noptions timeout:1 attempts:2\n" % addr, 0o644)
        r = probe_root.run("/readiness-check", "--host", "db.dns.sidekick.test", "--port", str(node.port),
                           "--timeout", "5", "--password-file", "/secrets/monitor")
        assert r.returncode == 0 and r.stdout.startswith("ready"), show(r)
        assert ("db.dns.sidekick.test", 1) in dns.queries, dns.queries
        r = probe_root.run("/readiness-check", "--host", "missing.dns.sidekick.test", "--port", str(node.port),
                           "--timeout", "3", "--password-file", "/secrets/monitor")
        assert r.returncode == 1 and "missing.dns.sidekick.test" in r.stdout + r.stderr, show(r)
    finally:
        dns.close()


def test_clustercheck_listen_in_empty_root(probe_root, healthy_galera):
    node = healthy_galera[3]
    port = free_port()
    proc = subprocess.Popen(probe_root.argv([
        "/clustercheck", "--listen", "127.0.0.1:%d" % port, "--host", "galera-3.sidekick.test",
        "--port", str(node.port), "--password-file", "/secrets/clustercheckuser", "--timeout", "5"]),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env={})
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                with urllib.request.urlopen("http://127.0.0.1:%d/" % port, timeout=5) as resp:
                    status, body = resp.status, resp.read().decode()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise
                time.sleep(0.1)
        assert status == 200 and body == "Percona XtraDB Cluster Node is synced.\r\n"
    finally:
        proc.terminate()
        out = proc.communicate(timeout=5)[0]
    assert proc.returncode == 0, out


def test_ed25519_login(tmp_path, async_pair):
    """A user of the ed25519 plugin logs in from the empty root: client_ed25519 is built in.
    Made on the async primary with sql_log_bin=0, so the replica and Galera never see it."""
    primary = async_pair.primary
    password = "ed-" + os.urandom(8).hex()
    conn = primary.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("SET SESSION sql_log_bin=0")
            cur.execute("SELECT COUNT(*) FROM information_schema.PLUGINS WHERE PLUGIN_NAME='ed25519'")
            if cur.fetchone()[0] == 0:
                cur.execute("INSTALL SONAME 'auth_ed25519'")
            cur.execute("CREATE OR REPLACE USER 'sk_ed'@'127.0.0.1' IDENTIFIED VIA ed25519 "
                        "USING PASSWORD(%s)", (password,))
            cur.execute("GRANT PROCESS, REPLICATION CLIENT, SLAVE MONITOR ON *.* TO 'sk_ed'@'127.0.0.1'")
    finally:
        conn.close()
    root = Root(tmp_path / "root")
    root.add_binary("readiness-check")
    root.write("/secret", password)
    root.write("/wrong", "not-" + password)
    base = ["/readiness-check", "--replica", "--host", "127.0.0.1", "--port", str(primary.port),
            "--user", "sk_ed", "--timeout", "5"]
    try:
        ok = root.run(*base, "--password-file", "/secret")
        bad = root.run(*base, "--password-file", "/wrong")
    finally:
        conn = primary.connect()
        try:
            with conn.cursor() as cur:
                cur.execute("SET SESSION sql_log_bin=0")
                cur.execute("DROP USER IF EXISTS 'sk_ed'@'127.0.0.1'")
        finally:
            conn.close()
    # A primary is no replica: "not ready" after a successful login, not an auth failure.
    assert "access denied" not in (ok.stdout + ok.stderr).lower(), show(ok)
    assert "plugin" not in (ok.stdout + ok.stderr).lower(), show(ok)
    assert ok.returncode in (0, 1) and ok.stdout.startswith(("ready", "not ready")), show(ok)
    assert bad.returncode == 1 and "(1045)" in bad.stdout, show(bad)


# -- proxysql-check and proxysql-sync against the doubles ----------------------------------
ADMIN_PASSWORD = "adm-" + os.urandom(6).hex()


@pytest.fixture
def px():
    p = ProxySQL(admin_password=ADMIN_PASSWORD)
    p.start()
    yield p
    p.close()


@pytest.fixture
def consul():
    c = Consul()
    c.start()
    yield c
    c.close()


def test_proxysql_check_in_empty_root(tmp_path, px):
    root = Root(tmp_path / "root", {"proxysql.sidekick.test": "127.0.0.1"})
    root.add_binary("proxysql-check")
    root.write("/admin-password", ADMIN_PASSWORD)
    conn = ["--host", "proxysql.sidekick.test", "--port", str(px.admin_port), "--user", px.admin_user,
            "--password-file", "/admin-password", "--timeout", "3"]
    r = root.run("/proxysql-check", "--liveness", *conn)
    assert r.returncode == 0, show(r)
    r = root.run("/proxysql-check", "--readiness", "--writer-hostgroup", "10", *conn)
    assert r.returncode == 1, show(r)      # nothing in hostgroup 10 yet
    px.query("INSERT INTO mysql_servers (hostgroup_id, hostname, port) VALUES (10, 'db1', 3306)")
    px.query("LOAD MYSQL SERVERS TO RUNTIME")
    r = root.run("/proxysql-check", "--readiness", "--writer-hostgroup", "10", *conn)
    assert r.returncode == 0, show(r)


def test_proxysql_sync_once_in_empty_root(tmp_path, consul, px):
    root = Root(tmp_path / "root", {"consul.sidekick.test": "127.0.0.1", "proxysql.sidekick.test": "127.0.0.1"})
    root.add_binary("proxysql-sync")
    root.write("/admin-password", ADMIN_PASSWORD)
    os.makedirs(os.path.join(root.path, "tmp"))
    root.write("/sync.cfg", """
consul-addr = "consul.sidekick.test:%d";
region = "eu";
health-listen = "";
lock-file = "/tmp/sync.lock";
quiescence-min = 0.0;
clusters = ( { alias = "shop"; writer_hostgroup = 10; reader_hostgroup = 11; } );
targets = ( { name = "px1"; address = "proxysql.sidekick.test:%d"; user = "%s";
              password_file = "/admin-password";
              allow_plaintext_password = true; } );  # a name is not known to be loopback
""" % (consul.port, px.admin_port, px.admin_user))
    consul.put("mysql/master/shop", b"db1:3306")
    consul.put("mysql/master/shop/hostname", b"db1")
    consul.put("mysql/master/shop/port", b"3306")
    consul.put("mysql/replica/shop/eu/db2:3306", b"db2:3306")
    r = root.run("/proxysql-sync", "-c", "/sync.cfg", "--once", timeout=30)
    assert r.returncode == 0, show(r)
    rows = sorted(tuple(str(v) for v in x) for x in px.query(
        "SELECT hostgroup_id, hostname, port FROM runtime_mysql_servers"))
    assert rows == [("10", "db1", "3306"), ("11", "db2", "3306")], (rows, show(r))


# -- copy-probes --------------------------------------------------------------------------------
def test_copy_probes_in_empty_root(tmp_path):
    root = Root(tmp_path / "root")
    root.add_binary("copy-probes")
    os.makedirs(os.path.join(root.path, "probes"))
    for prog in ("liveness-check", "readiness-check"):
        root.add_binary(prog, "/probes/" + prog)
    dest = os.path.join(root.path, "shared")
    os.makedirs(dest)
    os.chown(dest, 65532, 65532)
    # As an init container would run it: non-root, umask 077, into a volume it owns.
    r = subprocess.run([CHROOT, "--userspec=65532:65532", root.path, "/copy-probes", "/shared"],
                       capture_output=True, text=True, timeout=20, env={}, preexec_fn=lambda: os.umask(0o077))
    assert r.returncode == 0, show(r)
    assert sorted(os.listdir(dest)) == ["liveness-check", "readiness-check"]
    for prog in ("liveness-check", "readiness-check"):
        p = os.path.join(dest, prog)
        assert filecmp.cmp(p, os.path.join(STATIC, prog), shallow=False)
        assert os.stat(p).st_mode & 0o777 == 0o755
    # The copies run, and a second run replaces them in place.
    r = root.run("/shared/readiness-check", "--version")
    assert r.returncode == 0, show(r)
    r = subprocess.run([CHROOT, "--userspec=65532:65532", root.path, "/copy-probes", "/shared"],
                       capture_output=True, text=True, timeout=20, env={})
    assert r.returncode == 0 and sorted(os.listdir(dest)) == ["liveness-check", "readiness-check"], show(r)
    # Errors: usage 2; an unwritable or missing destination 1, naming it.
    assert root.run("/copy-probes").returncode == 2
    r = subprocess.run([CHROOT, "--userspec=65532:65532", root.path, "/copy-probes", "/etc"],
                       capture_output=True, text=True, timeout=20, env={})
    assert r.returncode == 1 and "/etc/" in r.stderr, show(r)
    r = root.run("/copy-probes", "--from", "/nonexistent", "/shared")
    assert r.returncode == 1 and "/nonexistent" in r.stderr, show(r)
    # Nothing else was written into the root: no temporary file left behind.
    assert root.listing() == sorted(["copy-probes", "etc/hosts", "probes/liveness-check", "probes/readiness-check",
                                     "shared/liveness-check", "shared/readiness-check"]), root.listing()
