"""proxysql-sync's Consul client: proxies chosen as Consul's own Go client chooses them (never for
loopback, NO_PROXY honoured), and answers past max-response-bytes refused with the last good state
kept, one log line and a metric. Runs against the double or a real Consul (CONSUL_BIN)."""

import base64
import http.client
import http.server
import json
import os
import re
import threading
import time
import types
import urllib.parse

import pytest

from test_sync import (Agent, first_sync, free_port, put_topology, px, runtime_servers, stop_and_check,  # noqa: F401
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
                                           "token": self.headers.get("X-Consul-Token") is not None})
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
        saved = dict(os.environ)
        try:
            for name in ("https_proxy", "HTTPS_PROXY", "no_proxy", "NO_PROXY"):
                os.environ.pop(name, None)
            os.environ.update(self.proxy_env)
            return super().start()
        finally:
            os.environ.clear()
            os.environ.update(saved)


def token_file(workdir):
    path = os.path.join(workdir, "consul-token")
    with open(path, "w") as f:
        f.write(TOKEN)
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
    wait_until("the failure through the proxy", lambda: "through the proxy of HTTP_PROXY or HTTPS_PROXY"
               in agent.logs(), timeout=30)
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
