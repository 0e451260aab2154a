"""proxysql-sync's Consul client: proxies chosen as Consul's own Go client chooses them (never for
loopback, NO_PROXY honoured), and answers past max-response-bytes refused with the last good state
kept, one log line and a metric. Runs against the double or a real Consul (CONSUL_BIN)."""

import base64
import http.client
import http.server
import json
import os
import re
import socket
import subprocess
import threading
import time
import types
import urllib.parse

import pytest

from test_sync import (SYNC, Agent, first_sync, free_port, put_topology, px, runtime_servers, stop_and_check,  # noqa: F401
                       synced, wait_until, workdir, writes, consul)
from test_sync_safety import metric

TOKEN = "proxy-test-token-5f1c0e"
NAME = "consul.proxy-test.invalid"       # not loopback, not localhost, resolvable by no DNS (RFC 6761)


class RecordingProxy:
    """A forward HTTP proxy on 127.0.0.1 (a thread): it records every request (the request line and
    whether X-Consul-Token came along) and forwards absolute-URI requests to `upstream`, whatever
    host they name, so that a Consul address given by a name reaches the double without DNS."""

    def __init__(self, upstream):
        self.upstream = upstream
        self.requests = []
        self.lock = threading.Lock()
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def forward(self):
                with proxy.lock:
                    proxy.requests.append({"line": self.requestline,
                                           "token": self.headers.get("X-Consul-Token") is not None,
                                           "auth": self.headers.get("Proxy-Authorization")})
                url = urllib.parse.urlsplit(self.path)
                if not url.scheme:        # not a proxy request: nothing to forward to
                    self.send_response(400)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                conn = http.client.HTTPConnection(*proxy.upstream, timeout=60)
                headers = {k: v for k, v in self.headers.items()
                           if k.lower() not in ("proxy-connection", "connection", "host")}
                conn.request(self.command, url.path + ("?" + url.query if url.query else ""), body=body,
                             headers=headers)
                r = conn.getresponse()
                data = r.read()
                self.send_response(r.status)
                for k, v in r.getheaders():
                    if k.lower() not in ("content-length", "transfer-encoding", "connection"):
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                conn.close()

            do_GET = do_PUT = do_DELETE = do_POST = forward

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.1},
                                       daemon=True)

    @property
    def url(self):
        return "http://127.0.0.1:%d" % self.server.server_address[1]

    def seen(self):
        with self.lock:
            return list(self.requests)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


class Relay:
    """A TCP relay (a thread) from (host, port) to `upstream`: Consul's double listens on
    127.0.0.1 only, so a relay lets an address such as [::1] or 127.0.0.2 reach it directly. It
    records whether a request carrying the token passed through it: proof that the client went
    straight to that address, token and all, rather than through a proxy."""

    def __init__(self, host, upstream):
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((host, 0))
        self.sock.listen(16)
        self.sock.settimeout(0.1)
        self.port = self.sock.getsockname()[1]
        self.upstream = upstream
        self.data = b""
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.thread = threading.Thread(target=self.serve, daemon=True)

    def pipe(self, src, dst, record):
        try:
            while True:
                chunk = src.recv(65536)
                if not chunk:
                    break
                if record:
                    with self.lock:
                        self.data += chunk
                dst.sendall(chunk)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def serve(self):
        while not self.done.is_set():
            try:
                client, _ = self.sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            client.settimeout(None)
            up = socket.create_connection(self.upstream)
            threading.Thread(target=self.pipe, args=(client, up, True), daemon=True).start()
            threading.Thread(target=self.pipe, args=(up, client, False), daemon=True).start()

    def token_seen(self):
        with self.lock:
            return ("X-Consul-Token: %s" % TOKEN).encode() in self.data

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.done.set()
        self.thread.join(5)
        self.sock.close()


# Spellings of this machine that libcurl connects to as loopback, each with the address a relay
# listens on for it (None: Consul's double itself, on 127.0.0.1). "localhost." is answered by
# newer libcurl and by resolvers such as systemd-resolved, not by every machine's: there the
# direct attempt may fail to resolve, and the proxy must see nothing all the same.
LOOPBACK_SPELLINGS = [
    ("127.1", None), ("127.0.1", None), ("0x7f000001", None), ("2130706433", None), ("0177.0.0.1", None),
    ("0.0.0.0", None), ("LOCALHOST", None), ("[::ffff:127.0.0.1]", None), ("127.0.0.2", "127.0.0.2"),
    ("[::1]", "::1"), ("[0:0:0:0:0:0:0:1]", "::1"), ("localhost.", "maybe"),
]


def loopback_consul(consul, relay_host):
    """The port a client reaches Consul's double on for `relay_host` (None or "maybe": the
    double's own), and the relay (or None) whose token_seen proves the direct path."""
    if relay_host in (None, "maybe"):
        return consul_port(consul), None
    relay = Relay(relay_host, ("127.0.0.1", consul_port(consul)))
    return relay.port, relay


def went_direct(r, relay_host, relay):
    """A one-shot run's output (a CompletedProcess) shows a direct connection that worked, or,
    for a spelling this machine may not resolve ("maybe"), a direct name lookup that failed."""
    out = r.stdout + r.stderr
    assert TOKEN not in out and "through the proxy" not in out, out
    if relay:
        assert relay.token_seen(), "the token did not reach the relay directly"
    if relay_host == "maybe" and "Could not resolve host" in out:
        return False
    return True


@pytest.fixture
def started():
    """Agents to stop at teardown, whatever the test's outcome."""
    agents = []
    yield agents
    for a in agents:
        a.stop()


def consul_port(consul):
    return int(consul.addr.rsplit(":", 1)[1])


class ProxyAgent(Agent):
    """An agent whose environment (only its own: the test's HTTP clients stay direct) names the
    proxy in every variable libcurl or Go would read, with NO_PROXY when given."""

    def __init__(self, consul, px, workdir, proxy, no_proxy=None, addr=None):
        where = types.SimpleNamespace(addr=addr or consul.addr)
        super().__init__(where, [px], workdir, extra=token_file(workdir))
        self.proxy_env = {"http_proxy": proxy.url, "HTTP_PROXY": proxy.url, "ALL_PROXY": proxy.url,
                          "all_proxy": proxy.url}
        if no_proxy is not None:
            self.proxy_env["NO_PROXY"] = no_proxy

    def start(self):
        return self.with_proxy_env(super().start)

    def run(self, *args, timeout=30):
        return self.with_proxy_env(lambda: super(ProxyAgent, self).run(*args, timeout=timeout))

    def with_proxy_env(self, fn):
        saved = dict(os.environ)
        try:
            for name in ("https_proxy", "HTTPS_PROXY", "no_proxy", "NO_PROXY"):
                os.environ.pop(name, None)
            os.environ.update(self.proxy_env)
            return fn()
        finally:
            os.environ.clear()
            os.environ.update(saved)


def token_file(workdir):
    path = os.path.join(workdir, "consul-token")
    with open(path, "w") as f:
        f.write(TOKEN)
    os.chmod(path, 0o600)
    return 'consul-token-file = "%s"\n' % path


@pytest.mark.fault
def test_loopback_consul_never_through_a_proxy(consul, px, workdir, started):
    """Consul on loopback is reached directly: the proxy sees no request (so never the token); the agent syncs.

    http_proxy, HTTP_PROXY and ALL_PROXY (libcurl's catch-all) all name the proxy."""
    put_topology(consul)
    with RecordingProxy(("127.0.0.1", consul_port(consul))) as proxy:
        agent = ProxyAgent(consul, px, workdir, proxy).start()
        started.append(agent)
        first_sync(px, agent)
        consul.put("mysql/replica/shop/eu/db7:3306", b"")
        wait_until("db7", lambda: ("11", "db7", "3306", "ONLINE") in runtime_servers(px))
        assert proxy.seen() == []
        logs = stop_and_check(agent)
        assert TOKEN not in logs


@pytest.mark.parametrize("host,relay_host", LOOPBACK_SPELLINGS, ids=[h for h, _ in LOOPBACK_SPELLINGS])
def test_every_spelling_of_loopback_goes_direct(consul, px, workdir, host, relay_host):
    """127.1, localhost., 0.0.0.0, [::1], 0x7f000001... are this machine as libcurl connects to
    them: proxysql-sync --once reaches Consul directly (token and all) and syncs; the proxy named by
    every proxy variable sees nothing, so never the token."""
    put_topology(consul)
    port, relay = loopback_consul(consul, relay_host)
    with RecordingProxy(("127.0.0.1", consul_port(consul))) as proxy:
        agent = ProxyAgent(consul, px, workdir, proxy, addr="%s:%d" % (host, port))
        if relay:
            with relay:
                r = agent.run("--once")
        else:
            r = agent.run("--once")
        assert proxy.seen() == []
        if went_direct(r, relay_host, relay):
            assert r.returncode == 0, r.stdout + r.stderr
            assert synced(px)


def test_named_consul_through_the_proxy(consul, px, workdir, started):
    """Consul by a name that is neither localhost nor a loopback address: its requests go through
    HTTP_PROXY (as absolute URIs naming the host), and the agent syncs through it."""
    put_topology(consul)
    with RecordingProxy(("127.0.0.1", consul_port(consul))) as proxy:
        agent = ProxyAgent(consul, px, workdir, proxy, addr="%s:%d" % (NAME, consul_port(consul))).start()
        started.append(agent)
        first_sync(px, agent)
        seen = proxy.seen()
        assert seen and all(("http://%s:%d/v1/" % (NAME, consul_port(consul))) in r["line"] for r in seen), seen
        stop_and_check(agent)


def test_a_dead_proxy_is_named_in_the_log(consul, px, workdir, started):
    """Consul by a name, HTTP_PROXY naming a port nobody listens on: the agent logs that the
    request failed through the proxy (and how to go direct), and is not ready."""
    dead = types.SimpleNamespace(url="http://127.0.0.1:%d" % free_port())
    agent = ProxyAgent(consul, px, workdir, dead, addr="%s:%d" % (NAME, consul_port(consul))).start()
    started.append(agent)
    wait_until("the failure through the proxy", lambda: "through the proxy %s of HTTP_PROXY or HTTPS_PROXY"
               % dead.url in agent.logs(), timeout=30)
    assert not agent.ready()
    stop_and_check(agent)


def test_no_proxy_for_the_name_goes_direct(consul, px, workdir, started):
    """The same name with NO_PROXY holding its parent domain: the agent goes direct (here: a name no
    DNS resolves, so it logs that and is never ready) and the proxy sees nothing."""
    put_topology(consul)
    with RecordingProxy(("127.0.0.1", consul_port(consul))) as proxy:
        agent = ProxyAgent(consul, px, workdir, proxy, no_proxy="example.org, proxy-test.invalid",
                           addr="%s:%d" % (NAME, consul_port(consul))).start()
        started.append(agent)
        wait_until("the failed name lookup", lambda: re.search(r"resolve|Could not", agent.logs()), timeout=30)
        assert not agent.ready()
        assert proxy.seen() == []
        stop_and_check(agent)


PROXY_CREDENTIAL_PIECES = ("alice", "S3c", "r3t")


def all_outputs(consul, px, workdir, proxy_url):
    """Every way the Consul clients may show a proxy URL, run with HTTP_PROXY (and the other proxy
    variables) set to `proxy_url` and Consul by a name (so the proxy is used): proxysql-sync's
    --check-config, --dry-run and --once, clustercheck --register --once, and proxysql-check
    --sync-readyz. Returns {what: (exit code, output)}."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONSUL_") and "proxy" not in k.lower()}
    env.update({name: proxy_url for name in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "ALL_PROXY",
                                             "all_proxy")})
    addr = "%s:%d" % (NAME, consul_port(consul))
    agent = Agent(types.SimpleNamespace(addr=addr), [px], workdir, extra=token_file(workdir))
    out = {}
    for args in (["--check-config"], ["--dry-run"], ["--once"]):
        r = subprocess.run([SYNC, "-c", agent.cfg] + args, capture_output=True, text=True, timeout=60, env=env)
        out["proxysql-sync " + args[0]] = (r.returncode, r.stdout + r.stderr)
    bindir = os.path.dirname(SYNC)
    r = subprocess.run([os.path.join(bindir, "clustercheck"), "--register", "--once", "--host", "127.0.0.1",
                        "--port", "1", "--consul-addr", addr, "--consul-prefix", "p", "--session-file",
                        os.path.join(workdir, "cc-session"), "--timeout", "2"],
                       capture_output=True, text=True, timeout=30, env=env)
    out["clustercheck --register"] = (r.returncode, r.stdout + r.stderr)
    conn = px.connect()      # an ONLINE writer, so that the probe goes on to ask --sync-readyz
    with conn.cursor() as cur:
        cur.execute("INSERT INTO mysql_servers (hostgroup_id, hostname, port) VALUES (10, 'dbx', 3306)")
        cur.execute("LOAD MYSQL SERVERS TO RUNTIME")
    conn.close()
    host, port = px.admin_addr.rsplit(":", 1)
    r = subprocess.run([os.path.join(bindir, "proxysql-check"), "--readiness", "-w", "10", "--host", host,
                        "--port", port, "--user", px.admin_user, "--password-file",
                        os.path.join(workdir, "admin-pw-0"), "--defaults-extra-file", "", "--sync-readyz",
                        "http://%s:9/readyz" % NAME], capture_output=True, text=True, timeout=30, env=env)
    out["proxysql-check --sync-readyz"] = (r.returncode, r.stdout + r.stderr)
    return out


def assert_no_credential(out):
    for what, (rc, text) in out.items():
        for piece in PROXY_CREDENTIAL_PIECES:
            assert piece not in text, "%s (exit %d) shows %r: %s" % (what, rc, piece, text)


@pytest.mark.parametrize("userinfo", ["alice:S3c/r3t", "alice:S3c?r3t", "alice:S3c#r3t"])
def test_a_malformed_proxy_url_is_refused_unquoted(consul, px, workdir, userinfo):
    """A proxy URL whose password holds an unencoded '/', '?' or '#' (libcurl would refuse it
    quoting it whole): every client refuses it with a fixed line naming the variable and quoting
    nothing of the value: proxysql-sync exits 2 (--check-config included)."""
    out = all_outputs(consul, px, workdir, "http://%s@127.0.0.1:%d" % (userinfo, free_port()))
    assert_no_credential(out)
    for what in ("proxysql-sync --check-config", "proxysql-sync --dry-run", "proxysql-sync --once"):
        rc, text = out[what]
        assert rc == 2 and "HTTP_PROXY (or http_proxy): not a proxy URL" in text, (what, rc, text)
        assert len(text.strip().splitlines()) == 1, (what, text)
    assert "not a proxy URL" in out["clustercheck --register"][1], out
    assert "not a proxy URL" in out["proxysql-check --sync-readyz"][1], out


@pytest.mark.parametrize("value", ["http://alice:S3c@r3tPw@127.0.0.1:%d", "alice:S3c@r3tPw@127.0.0.1:%d",
                                   "http://alice:S3c%%40r3tPw@127.0.0.1:%d"])
def test_no_proxy_credential_in_any_output(consul, px, workdir, value):
    """A password holding '@' (as Go splits it: at the last '@'), through a proxy nobody listens
    on: every client's failure names the proxy as http://***@127.0.0.1:PORT and nothing of the
    user or password shows, in any output."""
    out = all_outputs(consul, px, workdir, value % free_port())
    assert_no_credential(out)
    rc, text = out["proxysql-sync --once"]
    assert rc == 1 and re.search(r"through the proxy http://\*\*\*@127\.0\.0\.1:\d+ ", text), text
    assert out["proxysql-sync --check-config"][0] == 0, out


def test_a_password_with_at_reaches_the_proxy_whole(consul, px, workdir, started):
    """HTTP_PROXY='http://alice:S3c@r3tPw@proxy' (Go takes it; libcurl alone would refuse it): the
    agent syncs through the proxy, which receives the user and the whole password; the log and
    /metrics show neither."""
    put_topology(consul)
    with RecordingProxy(("127.0.0.1", consul_port(consul))) as proxy:
        value = proxy.url.replace("http://", "http://alice:S3c@r3tPw@")
        agent = ProxyAgent(consul, px, workdir, types.SimpleNamespace(url=value),
                           addr="%s:%d" % (NAME, consul_port(consul))).start()
        started.append(agent)
        first_sync(px, agent)
        auths = {r["auth"] for r in proxy.seen()}
        assert auths == {"Basic " + base64.b64encode(b"alice:S3c@r3tPw").decode()}, auths
        metrics = agent.http("/metrics")[1]
        logs = stop_and_check(agent)
        for piece in PROXY_CREDENTIAL_PIECES:
            assert piece not in logs + metrics


@pytest.mark.fault
def test_answer_past_the_cap_keeps_the_last_good_state(consul, px, workdir, started):
    """Refused as it arrives: nothing applied, one line however many retries, counted, /readyz 503; recovers.

    max-response-bytes = 4096 and the users prefix grows past it in one transaction. The refusals
    are counted in proxysql_sync_consul_too_large_total{prefix}; /readyz says why (503, as for any
    failed read). Back under the cap, the agent reads and applies again."""
    put_topology(consul)
    agent = Agent(consul, [px], workdir, extra="max-response-bytes = 4096\nwait = 1.0\n").start()
    started.append(agent)
    first_sync(px, agent)
    px.clear_statements()
    value = base64.b64encode(json.dumps({"password": "x" * 100, "default_hostgroup": 10,
                                         "comment": "y" * 60}).encode()).decode()
    r = consul.txn([{"KV": {"Verb": "set", "Key": "proxysql/users/big%02d" % i, "Value": value}}
                    for i in range(24)])       # one write: no state between under and over the cap
    assert r.status == 200, r
    wait_until("two refusals", lambda: (metric(agent, "proxysql_sync_consul_too_large_total",
                                               prefix="proxysql/users/") or 0) >= 2, timeout=30)
    time.sleep(1.5)
    logs = agent.logs()
    lines = [ln for ln in logs.splitlines() if "answer larger than 4096 bytes" in ln]
    assert len(lines) == 1, logs
    assert "max-response-bytes" in lines[0] and "keeping the last good state" in lines[0]
    assert writes(px) == [] and synced(px)
    status, why = agent.http("/readyz")
    assert status == 503 and "answer larger than 4096 bytes" in why, why
    assert metric(agent, "proxysql_sync_consul_up", prefix="proxysql/users/") == 0
    consul.delete("proxysql/users/big", recurse="")
    consul.put("mysql/replica/shop/eu/db8:3306", b"")
    wait_until("db8 once back under the cap", lambda: ("11", "db8", "3306", "ONLINE") in runtime_servers(px),
               timeout=30)
    wait_until("the users prefix read again", lambda: metric(
        agent, "proxysql_sync_consul_up", prefix="proxysql/users/") == 1, timeout=40)
    wait_until("/readyz again", agent.ready)
    stop_and_check(agent)


@pytest.mark.fault
def test_hostile_answer_bounded_memory(consul, px, workdir, started):
    """Refused with one line, last good state kept, agent peak RSS under 64 MiB.

    Consul answers the users listing with 16,000,000 bytes of valid JSON (an unknown field holding
    an array of eight million zeros, /_fake/pad). Parsed whole, such an answer took gigabytes."""
    if not consul.is_fake:
        pytest.skip("needs the double's /_fake/pad")
    put_topology(consul)
    agent = Agent(consul, [px], workdir, extra="wait = 1.0\n").start()
    started.append(agent)
    first_sync(px, agent)
    px.clear_statements()
    consul.fault("pad", bytes=16000000, count=1000, path="/v1/kv/proxysql/users")
    consul.put("proxysql/users/another", json.dumps({"password": "x", "default_hostgroup": 10}).encode())
    wait_until("the refusal", lambda: "JSON values" in agent.logs(), timeout=60)
    with open("/proc/%d/status" % agent.proc.pid) as f:
        hwm = int(re.search(r"VmHWM:\s+(\d+) kB", f.read()).group(1))
    assert hwm < 64 * 1024, "peak RSS %d KiB" % hwm
    assert writes(px) == [] and synced(px)
    lines = [ln for ln in agent.logs().splitlines() if "JSON values" in ln]
    assert len(lines) == 1 and "keeping the last good state" in lines[0], lines
    stop_and_check(agent)
