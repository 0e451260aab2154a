"""Start and stop a Consul for tests: the double (tests/fakes/consul_kv.py) or,
when CONSUL_BIN is set, the real binary.

    from fakes.consul import Consul          # with tests/ on sys.path

    with Consul() as c:                      # or c = Consul(); c.start() ... c.close()
        c.put("a/b", b"v")
        r = c.get("a/", recurse=True)
        r.status, r.header("X-Consul-Index"), r.json()
        c.fault("fail", count=2, code=503)   # double only; skips the test on real Consul

    with Consul(servers=3) as c:             # three servers over one state (the double only)
        c.session_create(server=2)           # through server 2: bound to its node
        c.restart_server(2, down=1.0)        # server 2 away for a second

The real binary runs as a single non-dev server (bootstrap_expect = 1, a data
dir of its own, raft_multiplier = 1) rather than with -dev: -dev keeps data
only in memory (no restart with data) and pretty-prints every JSON answer,
which production servers do not. All ports are ephemeral and loopback only.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid

from fakes.process import ServerProcess, free_port  # noqa: F401 (free_port: for tests)

HERE = os.path.dirname(os.path.abspath(__file__))
DOUBLE = os.path.join(HERE, "consul_kv.py")
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable


class Response:
    """An HTTP answer: status, headers (case-insensitive), body bytes."""

    def __init__(self, status, headers, body):
        self.status, self.headers, self.body = status, headers, body

    def header(self, name, default=None):
        return self.headers.get(name, default)

    @property
    def index(self):
        v = self.headers.get("X-Consul-Index")
        return int(v) if v is not None else None

    @property
    def text(self):
        return self.body.decode("utf-8", "replace")

    def json(self):
        return json.loads(self.body.decode("utf-8"))

    def __repr__(self):
        return "<Response %d %r>" % (self.status, self.body[:200])


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


_OPENER = urllib.request.build_opener(_NoRedirect)


def encode_params(params):
    """True -> bare flag (?recurse), None/False -> omitted, else name=value."""
    parts = []
    for k, v in (params or {}).items():
        if v is None or v is False:
            continue
        if v is True:
            parts.append(urllib.parse.quote(k))
        else:
            parts.append("%s=%s" % (urllib.parse.quote(k), urllib.parse.quote(str(v), safe="")))
    return "&".join(parts)


class Consul(ServerProcess):
    """One Consul HTTP endpoint on 127.0.0.1: the double or the real thing."""

    what = "consul"

    def __init__(self, *, dc="dc1", node="consul-test", acl_master_token=None,
                 session_ttl_min=None, binary=None, use_double=False, workdir=None,
                 extra_args=(), servers=1, client_agent=False):
        """binary: the consul executable (default $CONSUL_BIN; unset = the
        double). use_double=True always runs the double, e.g. to test it.
        servers > 1: that many servers sharing one state, each with its own address and node
        (<node>-1..N); client_agent: /v1/agent/self says a client agent (both the double only)."""
        if use_double:
            binary = None
        elif binary is None:
            binary = os.environ.get("CONSUL_BIN") or None
        self.binary = binary
        self.dc, self.node = dc, node
        self.acl_master_token = acl_master_token
        self.session_ttl_min = session_ttl_min
        self.extra_args = list(extra_args)
        self._own_workdir = workdir is None
        self.workdir = workdir or tempfile.mkdtemp(prefix="consul-test-")
        self.datadir = os.path.join(self.workdir, "data")
        self.servers, self.client_agent = servers, client_agent
        self.port = None
        self.ports = []             # one per server; ports[0] == port
        self._ports = None
        self._accessors = {}
        super().__init__()

    # -- identity ------------------------------------------------------------

    @property
    def is_fake(self):
        return self.binary is None

    @property
    def addr(self):
        return "127.0.0.1:%d" % self.port

    @property
    def url(self):
        return "http://" + self.addr

    @property
    def addrs(self):
        """Every server's HTTP address (the double with servers > 1), server 1 first."""
        return ["127.0.0.1:%d" % p for p in self.ports] or [self.addr]

    @property
    def log_path(self):
        return os.path.join(self.workdir, "consul.log")

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.close()

    # -- lifecycle -----------------------------------------------------------

    def start(self, timeout=60.0):
        """Start (same port as before on a restart) and wait until it serves."""
        os.makedirs(self.datadir, exist_ok=True)
        self._log = open(self.log_path, "ab")
        if self.is_fake:
            self._start_fake(timeout)
        else:
            if self.servers > 1 or self.client_agent:
                import pytest
                pytest.skip("several servers or a client agent: the Consul double only (CONSUL_BIN is set)")
            self._start_real(timeout)
        return self

    def _start_fake(self, timeout):
        port_file = os.path.join(self.workdir, "port")
        if os.path.exists(port_file):
            os.unlink(port_file)
        if self.ports:                              # a restart: the same addresses again
            listen = [x for p in self.ports for x in ("--listen", "127.0.0.1:%d" % p)]
        elif self.port and self.servers == 1:       # an address chosen before anything listens there
            listen = ["--listen", "127.0.0.1:%d" % self.port]
        else:
            listen = ["--listen", "127.0.0.1:0", "--servers", str(self.servers)]
        cmd = [PYTHON, DOUBLE] + listen + ["--port-file", port_file, "--datadir", self.datadir,
                                           "--dc", self.dc, "--node", self.node]
        if self.client_agent:
            cmd += ["--client-agent"]
        if self.acl_master_token:
            cmd += ["--acl-master-token", self.acl_master_token]
        if self.session_ttl_min:
            cmd += ["--session-ttl-min", self.session_ttl_min]
        cmd += self.extra_args
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=self._log, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while not os.path.exists(port_file):
            self._check_alive()
            if time.monotonic() > deadline:
                self.kill()
                raise RuntimeError("Consul double did not start in %.0fs; log: %s" % (timeout, self.log_path))
            time.sleep(0.01)
        with open(port_file, encoding="utf-8") as f:
            self.ports = [int(line.rsplit(":", 1)[1]) for line in f.read().split()]
        self.port = self.ports[0]

    def _consul_version(self):
        out = subprocess.run([self.binary, "version"], capture_output=True, text=True, timeout=30).stdout
        m = re.search(r"Consul v(\d+)\.(\d+)", out)
        return (int(m.group(1)), int(m.group(2))) if m else (1, 0)

    def _start_real(self, timeout):
        if self._ports is None:
            self.port = self.port or free_port()
            self._ports = {"http": self.port, "dns": -1, "grpc": -1, "serf_lan": free_port(),
                           "serf_wan": free_port(), "server": free_port()}
            if self._consul_version() >= (1, 14):
                self._ports["grpc_tls"] = -1
        config = {
            "datacenter": self.dc, "node_name": self.node, "data_dir": self.datadir,
            "server": True, "bootstrap_expect": 1,
            "bind_addr": "127.0.0.1", "advertise_addr": "127.0.0.1", "client_addr": "127.0.0.1",
            "ports": self._ports, "performance": {"raft_multiplier": 1},
            "log_level": "warn", "disable_update_check": True,
        }
        if self.session_ttl_min:
            config["session_ttl_min"] = self.session_ttl_min
        if self.acl_master_token:
            key = "initial_management" if self._consul_version() >= (1, 11) else "master"
            config["acl"] = {"enabled": True, "default_policy": "deny",
                             "tokens": {key: self.acl_master_token}}
        cfg = os.path.join(self.workdir, "consul.json")
        with open(cfg, "w", encoding="utf-8") as f:
            json.dump(config, f)
        cmd = [self.binary, "agent", "-config-file", cfg] + self.extra_args
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=self._log, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        # Ready = a leader is known and a KV read is served.
        while True:
            self._check_alive()
            try:
                if self.request("GET", "/v1/status/leader", timeout=2).json() and \
                        self.request("GET", "/v1/kv/", params={"keys": True},
                                     token=self.acl_master_token, timeout=2).status == 200:
                    return
            except (OSError, ValueError):
                pass
            if time.monotonic() > deadline:
                self.kill()
                raise RuntimeError("consul did not elect a leader in %.0fs; log: %s" % (timeout, self.log_path))
            time.sleep(0.1)

    def restart(self, keep_data=True, timeout=60.0):
        """Stop and start again on the same address, with or without the data."""
        self.stop()
        if not keep_data:
            shutil.rmtree(self.datadir, ignore_errors=True)
        return self.start(timeout)

    def close(self):
        self.stop()
        if self._own_workdir and not os.environ.get("CONSUL_TEST_KEEP"):
            shutil.rmtree(self.workdir, ignore_errors=True)

    # -- HTTP ------------------------------------------------------------------

    def request(self, method, path, *, params=None, body=None, headers=None, token=None,
                timeout=30.0, server=None):
        """One HTTP request (to server n, 1-based, of several); never raises for an HTTP status,
        only for I/O."""
        url = ("http://" + self.addrs[server - 1] if server else self.url) + path
        q = encode_params(params)
        if q:
            url += ("&" if "?" in url else "?") + q
        if isinstance(body, str):
            body = body.encode()
        if body is None and method in ("PUT", "POST"):
            body = b""
        hdrs = dict(headers or {})
        if token:
            hdrs["X-Consul-Token"] = token
        req = urllib.request.Request(url, data=body, method=method, headers=hdrs)
        try:
            with _OPENER.open(req, timeout=timeout) as r:
                return Response(r.status, r.headers, r.read())
        except urllib.error.HTTPError as e:
            with e:
                return Response(e.code, e.headers, e.read())

    @staticmethod
    def key_path(key):
        return "/v1/kv/" + urllib.parse.quote(key, safe="/")

    def get(self, key, token=None, timeout=30.0, **params):
        return self.request("GET", self.key_path(key), params=params, token=token, timeout=timeout)

    def put(self, key, value=b"", token=None, **params):
        return self.request("PUT", self.key_path(key), params=params, body=value, token=token)

    def delete(self, key, token=None, **params):
        return self.request("DELETE", self.key_path(key), params=params, token=token)

    def value(self, key, token=None):
        """The raw value of key, or None when the key does not exist."""
        r = self.get(key, token=token, raw=True)
        return r.body if r.status == 200 else None

    def txn(self, ops, token=None, **params):
        return self.request("PUT", "/v1/txn", params=params, body=json.dumps(ops), token=token)

    def session_create(self, token=None, server=None, **fields):
        r = self.request("PUT", "/v1/session/create", body=json.dumps(fields), token=token, server=server)
        if r.status != 200:
            raise RuntimeError("session create failed: %r" % r)
        return r.json()["ID"]

    # -- fault hooks and ACL tokens --------------------------------------------

    def fault(self, name, method="POST", **params):
        """Call a /_fake/<name> hook of the double; skip the test on real Consul."""
        if not self.is_fake:
            import pytest
            pytest.skip("fault hook /_fake/%s needs the Consul double (CONSUL_BIN is set)" % name)
        r = self.request(method, "/_fake/" + name, params=params)
        if r.status != 200:
            raise RuntimeError("fault hook %s failed: %r" % (name, r))
        return r.json()

    def create_token(self, rules):
        """A token with rules [(resource, prefix, policy), ...]; returns its secret.

        resource is key|session|agent|node, policy read|write|deny. The double
        takes them through /_fake/acl, real Consul through its ACL API.
        """
        if self.is_fake:
            secret = str(uuid.uuid4())
            for resource, prefix, policy in rules:
                self.fault("acl", token=secret, prefix=prefix, policy=policy, resource=resource)
            return secret
        hcl = "\n".join('%s_prefix %s { policy = "%s" }' % (res, json.dumps(prefix), pol)
                        for res, prefix, pol in rules)
        r = self.request("PUT", "/v1/acl/policy", token=self.acl_master_token,
                         body=json.dumps({"Name": "test-" + uuid.uuid4().hex, "Rules": hcl}))
        if r.status != 200:
            raise RuntimeError("ACL policy create failed: %r" % r)
        r = self.request("PUT", "/v1/acl/token", token=self.acl_master_token,
                         body=json.dumps({"Policies": [{"ID": r.json()["ID"]}]}))
        if r.status != 200:
            raise RuntimeError("ACL token create failed: %r" % r)
        self._accessors[r.json()["SecretID"]] = r.json()["AccessorID"]
        return r.json()["SecretID"]

    def revoke_token(self, secret):
        if self.is_fake:
            self.fault("acl", method="DELETE", token=secret)
            return
        r = self.request("DELETE", "/v1/acl/token/" + self._accessors.pop(secret),
                         token=self.acl_master_token)
        if r.status != 200:
            raise RuntimeError("ACL token delete failed: %r" % r)

    # -- several servers -------------------------------------------------------------

    def restart_server(self, n, down=1.0):
        """Restart server n of the double: refused for `down` seconds, its node's serfHealth
        critical meanwhile (its sessions invalidated), then back."""
        return self.fault("restart-server", n=n, down=down)

    # -- ACL login ---------------------------------------------------------------------

    def login_method(self, name, bearers, max_token_ttl=None):
        """An auth method of type kubernetes: bearers maps a JWT to what the TokenReview and the
        binding rules make of it, {"service_account": SA, "rules": [(rule, name, policy), ...]}
        (a role with that policy) or {"service_account": SA, "service_identity": NAME}, or no
        grant at all. The double only: a real kubernetes auth method needs a Kubernetes API to
        review the JWTs."""
        if not self.is_fake:
            import pytest
            pytest.skip("a kubernetes auth method needs a Kubernetes API server: the Consul double only")
        body = {"name": name, "type": "kubernetes", "bearers": bearers}
        if max_token_ttl:
            body["max_token_ttl"] = max_token_ttl
        r = self.request("PUT", "/_fake/auth-method", body=json.dumps(body))
        if r.status != 200:
            raise RuntimeError("auth method setup failed: %r" % r)
        return r.json()

    def login(self, method, bearer, meta=None, server=None):
        """POST /v1/acl/login; the Response (its json() is the token on success)."""
        body = {"AuthMethod": method, "BearerToken": bearer}
        if meta:
            body["Meta"] = meta
        return self.request("POST", "/v1/acl/login", body=json.dumps(body), server=server)

    def logout(self, secret, server=None):
        return self.request("POST", "/v1/acl/logout", token=secret, server=server)
