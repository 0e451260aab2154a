"""clustercheck --register against a real Galera node and Consul (the double, or the real
binary with CONSUL_BIN): the key exists exactly while the node is healthy, is bound to a
session that dies with the process, and secrets stay out of argv and logs.

Run: make all && /usr/bin/python3 -m pytest -q tests/integration/test_register.py
"""

import base64
import os
import re
import signal
import stat
import subprocess
import time
import uuid

import pytest

from fakes.consul import Consul, free_port
from fakes.process import track
from test_sync_faults import as_user, plant
from test_sync_consul_client import LOOPBACK_SPELLINGS, TOKEN, RecordingProxy, loopback_consul, went_direct

BIN = os.environ.get("SIDEKICK_BIN", os.path.join(os.path.dirname(__file__), "..", "..", "bin"))
CLUSTERCHECK = os.path.join(BIN, "clustercheck")
TTL = 10            # the smallest TTL Consul accepts
INTERVAL = "0.5"


def wait_for(what, predicate, timeout=15.0, interval=0.1):
    deadline = time.monotonic() + timeout
    while True:
        v = predicate()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError("timed out after %.0fs waiting for %s" % (timeout, what))
        time.sleep(interval)


class Registrar:
    """One clustercheck --register process with its output in a file."""

    def __init__(self, tmp_path, node, creds, consul_addr, prefix, *extra, env=None):
        self.log_path = tmp_path / ("clustercheck-%s.log" % uuid.uuid4().hex[:6])
        self.node = node
        self.prefix = prefix
        self.key = "%s/%s:%d" % (prefix, node.ip, node.port)
        self.cmd = [CLUSTERCHECK, "--register", "--host", node.ip, "--port", str(node.port),
                    "--user", creds.user, "--password-file", creds.password_file,
                    "--defaults-extra-file", "", "--consul-addr", consul_addr,
                    "--consul-prefix", prefix, "--interval", INTERVAL, "--session-ttl", str(TTL),
                    "--timeout", "2", *extra]
        self.env = dict(os.environ, **(env or {}))
        for k in [k for k in self.env if k.startswith("CONSUL_") and k not in (env or {})]:
            del self.env[k]
        self.proc = None

    def start(self):
        self._out = open(self.log_path, "ab")
        self.proc = track(subprocess.Popen(self.cmd, stdout=self._out, stderr=subprocess.STDOUT,
                                           stdin=subprocess.DEVNULL, env=self.env))
        return self

    def run_once(self, *extra, timeout=30):
        with open(self.log_path, "ab") as out:
            return subprocess.run(self.cmd + ["--once", *extra], stdout=out, stderr=subprocess.STDOUT,
                                  stdin=subprocess.DEVNULL, env=self.env, timeout=timeout).returncode

    @property
    def output(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def lines(self, needle):
        return [line for line in self.output.splitlines() if needle in line]

    def terminate(self, sig=signal.SIGTERM):
        """Send sig; return (exit code, seconds it took)."""
        t = time.monotonic()
        self.proc.send_signal(sig)
        rc = self.proc.wait(10)
        return rc, time.monotonic() - t

    def close(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        if self.proc is not None:
            self._out.close()


@pytest.fixture
def consul():
    with Consul() as c:
        yield c


@pytest.fixture
def prefix():
    return "mysql/replica/c%s/eu-west" % uuid.uuid4().hex[:8]


@pytest.fixture
def registrars():
    """Make Registrars; kill leftovers and print their output (pytest shows it on failure)."""
    made = []

    def make(*args, **kwargs):
        r = Registrar(*args, **kwargs)
        made.append(r)
        return r
    yield make
    for r in made:
        r.close()
        if os.path.exists(r.log_path):
            print("---- %s\n%s" % (" ".join(r.cmd), r.output))


def kv_entry(consul, key, token=None):
    """The KV entry (dict with Value decoded) or None."""
    r = consul.get(key, token=token)
    if r.status == 404:
        return None
    assert r.status == 200, r
    e = r.json()[0]
    e["Value"] = base64.b64decode(e["Value"] or "")
    return e


def sessions(consul, token=None):
    r = consul.request("GET", "/v1/session/list", token=token)
    assert r.status == 200, r
    return r.json()


def expire_sessions(consul):
    """End every session now (the double's hook), or wait the up to 2 x TTL real Consul takes."""
    if consul.is_fake:
        consul.fault("expire_sessions")
        return 5.0
    return 2 * TTL + 10.0


# ---------------------------------------------------------------------------
# Configuration errors (no servers needed)
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("args,env,message", [
    (["--once"], {}, "--once goes with --register"),
    (["--register"], {}, "--register needs --consul-prefix"),
    (["--register", "--consul-prefix", "a//b"], {}, "consul-prefix 'a//b'"),
    (["--register", "--consul-prefix", "a/../b"], {}, "consul-prefix 'a/../b'"),
    (["--register", "--consul-prefix", "p", "--advertise", "host"], {}, "expected HOST:PORT"),
    (["--register", "--consul-prefix", "p", "--advertise", "a/b:3306"], {}, "expected HOST:PORT"),
    (["--register", "--consul-prefix", "p", "--advertise", "h:99999"], {}, "expected HOST:PORT"),
    (["--register", "--consul-prefix", "p", "--interval", "8"], {}, "more than half of --session-ttl"),
    (["--register", "--consul-prefix", "p", "--listen", "0"], {}, "separate modes"),
    (["--register", "--consul-prefix", "p"], {"CONSUL_HTTP_SSL": "maybe"}, "CONSUL_HTTP_SSL: not a boolean"),
    (["--register", "--consul-prefix", "p"], {"CONSUL_CLIENT_CERT": "/c.pem"}, "CONSUL_CLIENT_KEY"),
    (["--register", "--consul-prefix", "p", "--consul-addr", "ftp://x"], {}, "unknown scheme"),
    (["--register", "--consul-prefix", "p", "--consul-token-file", "/nonexistent/t"], {},
     "consul token file /nonexistent/t"),
])
def test_configuration_errors_exit_2(args, env, message):
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("CONSUL_")}
    full_env.update(env)
    p = subprocess.run([CLUSTERCHECK, "--host", "127.0.0.1", "--port", "1", *args], capture_output=True,
                       text=True, env=full_env, timeout=10)
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert message in p.stderr, p.stderr


def test_once_consul_down_exits_1(tmp_path, prefix):
    port = free_port()
    p = subprocess.run([CLUSTERCHECK, "--register", "--once", "--host", "127.0.0.1", "--port", "1",
                        "--consul-addr", "127.0.0.1:%d" % port, "--consul-prefix", prefix,
                        "--session-file", str(tmp_path / "state"), "--timeout", "1"],
                       capture_output=True, text=True, timeout=10)
    # The node is down too: the round must still reach Consul (to delete any leftover key).
    assert p.returncode == 1, p.stderr
    assert "consul http://127.0.0.1:%d" % port in p.stderr


def register_once(consul, prefix, tmp_path, *args, env=None):
    """One --register --once round for a node that is down (nothing listens on port 1)."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("CONSUL_")}
    full_env.update(env or {})
    return subprocess.run([CLUSTERCHECK, "--register", "--once", "--host", "127.0.0.1", "--port", "1",
                           "--consul-addr", consul.addr, "--consul-prefix", prefix, "--session-file",
                           str(tmp_path / "session"), "--timeout", "1", *args],
                          capture_output=True, text=True, env=full_env, timeout=20)


AGENT_SAID = [
    ([], False, "consul: no local agent at http://%s: Consul servers answer directly"),
    ([], True, "consul: local agent at http://%s: a Consul client agent answers"),
    (["--consul-agent", "none"], True, "consul: no local agent at http://%s: --consul-agent none"),
    (["--consul-agent", "local"], False, "consul: local agent at http://%s: --consul-agent local"),
]


@pytest.mark.parametrize("args,client,said", AGENT_SAID, ids=["auto-servers", "auto-client", "none", "local"])
def test_once_says_what_answers_at_consul_addr(prefix, tmp_path, args, client, said):
    """--consul-agent: auto asks GET /v1/agent/self once and says in one line whether a client agent
    or Consul servers answer; none and local are taken as given. The session stays bound to its TTL
    only in every case (docs/register.md)."""
    if os.environ.get("CONSUL_BIN"):
        pytest.skip("needs the Consul double's --client-agent")
    with Consul(use_double=True, extra_args=["--client-agent"] if client else []) as c:
        p = register_once(c, prefix, tmp_path, *args)
        assert p.returncode == 0, p.stderr
        want = (said % c.addr) + " (the session is bound to its TTL only)"
        assert [line for line in p.stderr.splitlines() if "local agent at" in line][0].endswith(want), p.stderr


def test_once_names_the_rule_a_token_lacks(prefix, tmp_path):
    """A token that may only read the prefix: auto takes the 403 of /v1/agent/self as Consul servers,
    saying so, and deleting the down node's leftover key fails with one line naming the endpoint and
    the rule the token needs; the token is not in the output."""
    if os.environ.get("CONSUL_BIN"):
        pytest.skip("needs the Consul double's /_fake/acl")
    master = "root-" + uuid.uuid4().hex
    with Consul(use_double=True, acl_master_token=master) as c:
        token = c.create_token([("key", prefix, "read")])
        key = "%s/127.0.0.1:1" % prefix
        c.put(key, b"leftover", token=master)
        p = register_once(c, prefix, tmp_path, env={"CONSUL_HTTP_TOKEN": token})
        assert p.returncode == 1, p.stderr
        assert 'the token may not read GET /v1/agent/self (agent_prefix "" read)' in p.stderr, p.stderr
        assert ('consul http://%s: DELETE /v1/kv/%s denied: the token needs key_prefix "%s" write '
                "(see docs/consul-acl.md)" % (c.addr, key, key)) in p.stderr, p.stderr
        assert token not in p.stderr and token not in p.stdout


@pytest.mark.parametrize("host,relay_host", LOOPBACK_SPELLINGS, ids=[h for h, _ in LOOPBACK_SPELLINGS])
def test_once_every_spelling_of_loopback_goes_direct(consul, prefix, tmp_path, host, relay_host):
    """--register --once with Consul spelt 127.1, localhost., 0.0.0.0, [::1], 0x7f000001...: the
    round reaches Consul directly, token and all (it deletes the down node's leftover key), and the
    proxy named by every proxy variable sees nothing."""
    key = "%s/127.0.0.1:1" % prefix
    consul.put(key, b"leftover")
    token = tmp_path / "token"
    token.write_text(TOKEN)
    token.chmod(0o600)
    port, relay = loopback_consul(consul, relay_host)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONSUL_") and "proxy" not in k.lower()}
    with RecordingProxy(("127.0.0.1", int(consul.addr.rsplit(":", 1)[1]))) as proxy:
        env.update({name: proxy.url for name in ("http_proxy", "HTTP_PROXY", "ALL_PROXY", "all_proxy")})
        cmd = [CLUSTERCHECK, "--register", "--once", "--host", "127.0.0.1", "--port", "1",
               "--consul-addr", "%s:%d" % (host, port), "--consul-prefix", prefix, "--consul-token-file",
               str(token), "--session-file", str(tmp_path / "session"), "--timeout", "2"]
        if relay:
            with relay:
                p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=20)
        else:
            p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=20)
        assert proxy.seen() == []
        if went_direct(p, relay_host, relay):
            assert p.returncode == 0, p.stderr
            assert kv_entry(consul, key) is None, p.stderr


# ---------------------------------------------------------------------------
# The loop against a real Galera node
# ---------------------------------------------------------------------------

def test_once_never_through_a_proxy_for_a_loopback_consul(healthy_galera, clustercheck_creds, consul, prefix,
                                                          registrars, tmp_path):
    """http_proxy, HTTP_PROXY and ALL_PROXY name a proxy and Consul is on loopback: --register --once
    talks to it directly (the proxy sees no request, so never the token) and registers."""
    from test_sync_consul_client import RecordingProxy
    host, port = consul.addr.rsplit(":", 1)
    with RecordingProxy((host, int(port))) as proxy:
        env = {name: proxy.url for name in ("http_proxy", "HTTP_PROXY", "ALL_PROXY", "all_proxy")}
        r = registrars(tmp_path, healthy_galera[1], clustercheck_creds, consul.addr, prefix, "--session-file",
                       str(tmp_path / "state"), env=env)
        assert r.run_once() == 0, r.output
        assert kv_entry(consul, r.key) is not None
        assert proxy.seen() == []


def test_registers_while_healthy_and_sigterm_cleans_up(healthy_galera, clustercheck_creds, consul, prefix,
                                                      registrars, tmp_path):
    node = healthy_galera[1]
    r = registrars(tmp_path, node, clustercheck_creds, consul.addr, prefix).start()
    e = wait_for("the key", lambda: kv_entry(consul, r.key))
    assert e["Value"] == ("%s:%d" % (node.ip, node.port)).encode()
    assert e["Session"], e
    (s,) = sessions(consul)
    assert s["ID"] == e["Session"]
    assert s["Behavior"] == "delete" and s["TTL"] == "%ds" % TTL and s["LockDelay"] == 0, s

    # Steady state: quiet logs, and no rewrite of the key (its ModifyIndex stays).
    time.sleep(2)
    assert kv_entry(consul, r.key)["ModifyIndex"] == e["ModifyIndex"]
    assert len(r.lines(": registered ")) == 1, r.output
    assert len(r.lines("node synced")) == 1, r.output

    rc, took = r.terminate(signal.SIGTERM)
    assert rc == 0, r.output
    assert took < 1.0, took
    assert kv_entry(consul, r.key) is None
    assert sessions(consul) == []
    assert "deregistered %s (stopping)" % r.key in r.output


def test_sigint_while_mysqld_hangs_exits_within_a_second(healthy_galera, clustercheck_creds, consul, prefix,
                                                        registrars, tmp_path):
    node = healthy_galera[1]
    r = registrars(tmp_path, node, clustercheck_creds, consul.addr, prefix).start()
    wait_for("the key", lambda: kv_entry(consul, r.key))
    node.sigstop()
    try:
        time.sleep(1.0)   # a check is now stuck on the stopped mysqld
        rc, took = r.terminate(signal.SIGINT)
    finally:
        node.sigcont(wait=True)
    assert rc == 0, r.output
    assert took < 1.0, took
    assert kv_entry(consul, r.key) is None


@pytest.mark.parametrize("state", ["desync", "read_only"])
def test_unhealthy_node_is_deregistered_and_comes_back(healthy_galera, clustercheck_creds, consul, prefix,
                                                       registrars, tmp_path, state):
    node = healthy_galera[1]
    r = registrars(tmp_path, node, clustercheck_creds, consul.addr, prefix, "--available-when-donor=0",
                   env={"AVAILABLE_WHEN_READONLY": "0"}).start()
    first = wait_for("the key", lambda: kv_entry(consul, r.key))
    try:
        if state == "desync":
            node.desync(True)
        else:
            node.set_read_only(True)
        wait_for("the key to go", lambda: kv_entry(consul, r.key) is None)
        time.sleep(1.5)   # several rounds while unhealthy: one log line, not one per poll
        assert r.proc.poll() is None
        assert len(r.lines("deregistered %s" % r.key)) == 1, r.output
        assert len(r.lines("node synced -> ")) == 1, r.output
        assert sessions(consul), "the session is not destroyed on the way down"
    finally:
        if state == "desync":
            node.desync(False)
        else:
            node.set_read_only(False)
    back = wait_for("the key to come back", lambda: kv_entry(consul, r.key))
    assert back["Session"] == first["Session"], "the same session is reused"
    wait_for("the second 'registered' line", lambda: len(r.lines(": registered %s" % r.key)) == 2, timeout=5)
    rc, _ = r.terminate()
    assert rc == 0


def test_sigkill_key_goes_with_the_session(healthy_galera, clustercheck_creds, consul, prefix, registrars,
                                           tmp_path):
    node = healthy_galera[1]
    r = registrars(tmp_path, node, clustercheck_creds, consul.addr, prefix).start()
    wait_for("the key", lambda: kv_entry(consul, r.key))
    rc, _ = r.terminate(signal.SIGKILL)
    assert rc == -signal.SIGKILL
    assert kv_entry(consul, r.key) is not None, "the session outlives the process for up to 2 x TTL"
    wait_for("the key to expire with the session", lambda: kv_entry(consul, r.key) is None,
             timeout=expire_sessions(consul))


@pytest.mark.fault
def test_session_expiry_while_running(healthy_galera, clustercheck_creds, consul, prefix, registrars, tmp_path):
    """The key goes with its session; a new session and the key again within a few intervals, without exiting."""
    node = healthy_galera[1]
    r = registrars(tmp_path, node, clustercheck_creds, consul.addr, prefix).start()
    first = wait_for("the key", lambda: kv_entry(consul, r.key))
    consul.fault("expire_sessions")          # as Consul does when the TTL passes unrenewed
    again = wait_for("the key under a new session", lambda: (lambda e: e if e and e["Session"] != first["Session"]
                                                            else None)(kv_entry(consul, r.key)), timeout=5)
    assert [s["ID"] for s in sessions(consul)] == [again["Session"]]
    assert r.proc.poll() is None
    assert len(r.lines("session %s is gone (expired or destroyed)" % first["Session"])) == 1, r.output
    rc, took = r.terminate()
    assert rc == 0 and took < 1.0


def test_consul_down_at_start_and_wiped_later(healthy_galera, clustercheck_creds, prefix, registrars, tmp_path):
    node = healthy_galera[1]
    c = Consul()
    c.port = free_port()        # the address is known before anything listens there
    try:
        r = registrars(tmp_path, node, clustercheck_creds, c.addr, prefix).start()
        time.sleep(3)
        assert r.proc.poll() is None, r.output
        assert len(r.lines("warn clustercheck: consul http://%s" % c.addr)) == 1, r.output  # not one per retry
        c.start()
        e = wait_for("the key once Consul is up", lambda: kv_entry(c, r.key), timeout=20)
        wait_for("one 'working again' line", lambda: len(r.lines("working again")) == 1, timeout=5)

        # Consul loses everything (a wiped server): a new session, the key again.
        c.restart(keep_data=False)
        e2 = wait_for("the key after a wipe", lambda: kv_entry(c, r.key), timeout=20)
        assert e2["Session"] != e["Session"]
        assert r.proc.poll() is None
        rc, took = r.terminate()
        assert rc == 0 and took < 1.0
        assert kv_entry(c, r.key) is None
    finally:
        c.close()


def test_once_reuses_its_session(healthy_galera, clustercheck_creds, consul, prefix, registrars, tmp_path):
    node = healthy_galera[1]
    state = tmp_path / "clustercheck.session"
    r = registrars(tmp_path, node, clustercheck_creds, consul.addr, prefix, "--session-file", str(state))
    assert r.run_once() == 0, r.output
    e = kv_entry(consul, r.key)
    assert e is not None
    assert state.read_text() == e["Session"] + "\n"
    assert stat.S_IMODE(state.stat().st_mode) == 0o600
    assert r.run_once() == 0, r.output
    assert r.run_once() == 0, r.output
    assert [s["ID"] for s in sessions(consul)] == [e["Session"]], "one session, renewed, not three"
    assert kv_entry(consul, r.key)["Session"] == e["Session"]

    # Unhealthy: the round removes the key and still succeeds.
    node.desync(True)
    try:
        assert r.run_once("--available-when-donor=0") == 0, r.output
        assert kv_entry(consul, r.key) is None
        assert r.run_once("--available-when-donor=0") == 0, r.output
    finally:
        node.desync(False)
    assert r.run_once() == 0, r.output
    assert kv_entry(consul, r.key)["Session"] == e["Session"]

    # The session expired between two cron runs: a new one, and the file follows.
    wait_for("the key to go", lambda: kv_entry(consul, r.key) is None, timeout=expire_sessions(consul))
    assert r.run_once() == 0, r.output
    e2 = kv_entry(consul, r.key)
    assert e2["Session"] != e["Session"]
    assert state.read_text() == e2["Session"] + "\n"
    assert len(sessions(consul)) == 1


@pytest.fixture
def request_cleanup():
    """Directories to remove (as root) after the test."""
    paths = []
    yield paths
    for p in paths:
        subprocess.run(["rm", "-rf", str(p)])


def test_once_never_writes_mysqlds_state_file(healthy_galera, clustercheck_creds, consul, prefix, registrars,
                                              tmp_path):
    """MYSQL_STATE_FILE (set in PXC pods) is mysqld's state file: --register --once keeps its session
    in its own file ($XDG_RUNTIME_DIR/clustercheck.session here) and never writes mysqld's. The
    session file's former name, --state-file on the command line, still works, with a line."""
    state = tmp_path / "mysql.state"
    state.write_text("ready\n")
    xdg = tmp_path / "xdg"
    xdg.mkdir(mode=0o700)
    r = registrars(tmp_path, healthy_galera[1], clustercheck_creds, consul.addr, prefix,
                   env={"MYSQL_STATE_FILE": str(state), "XDG_RUNTIME_DIR": str(xdg)})
    assert r.run_once() == 0, r.output
    assert r.run_once() == 0, r.output
    assert state.read_text() == "ready\n"
    session = kv_entry(consul, r.key)["Session"]
    assert (xdg / "clustercheck.session").read_text() == session + "\n"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("mysql.state")) == ["mysql.state"]
    legacy = tmp_path / "legacy.session"          # a cron line written for the former name
    legacy.write_text(session + "\n")
    legacy.chmod(0o600)
    assert r.run_once("--state-file", str(legacy)) == 0, r.output
    assert len(r.lines("--state-file %s taken as --session-file, its former name: use --session-file" % legacy)) == 1
    assert kv_entry(consul, r.key)["Session"] == session and legacy.read_text() == session + "\n"
    assert state.read_text() == "ready\n"


@pytest.mark.parametrize("kind", ["file", "symlink"])
def test_once_ignores_a_planted_session_file(healthy_galera, clustercheck_creds, consul, prefix, registrars,
                                             tmp_path, kind, request_cleanup):
    """A session file in a directory anyone can write (like /var/tmp), made first by another user:
    holding that user's session ID, or a symbolic link to a file of ours. It is ignored with a line,
    a new session of our own holds the key, and the file is replaced (never followed) by ours."""
    import pathlib
    import tempfile
    shared = pathlib.Path(tempfile.mkdtemp(prefix="shared-", dir="/tmp"))
    shared.chmod(0o1777)
    request_cleanup.append(shared)
    victim = tmp_path / "victim"
    victim.write_text("keep\n")
    path = shared / "clustercheck.session"
    theirs = consul.session_create(Name="not ours", TTL="60s")
    if kind == "file":
        plant("sh", "-c", 'echo %s > "$1"' % theirs, "sh", str(path))
        why = "belongs to uid 65534, not to this user (uid 0)"
    else:
        plant("ln", "-s", str(victim), str(path))
        why = "a symbolic link, not followed"
    r = registrars(tmp_path, healthy_galera[1], clustercheck_creds, consul.addr, prefix, "--session-file", str(path))
    assert r.run_once() == 0, r.output
    assert len(r.lines("session file %s: %s: ignored, a new session is made (--session-file)" % (path, why))) == 1, \
        r.output
    ours = kv_entry(consul, r.key)["Session"]
    assert ours != theirs
    st = os.lstat(path)
    assert stat.S_ISREG(st.st_mode) and st.st_uid == 0 and stat.S_IMODE(st.st_mode) == 0o600, st
    assert path.read_text() == ours + "\n"
    assert victim.read_text() == "keep\n"
    assert r.run_once() == 0, r.output                  # ours from now on: reused, no new line
    assert kv_entry(consul, r.key)["Session"] == ours
    assert len(r.lines("ignored, a new session is made")) == 1, r.output


def test_once_default_session_file_of_an_unprivileged_user(healthy_galera, clustercheck_creds, consul, prefix,
                                                           registrars, tmp_path):
    """Without $XDG_RUNTIME_DIR, a user who cannot write /run keeps the session in
    /tmp/clustercheck-UID/ (made 0700); when another user made that directory first, the run
    refuses it with a line naming --session-file (exit 2) and writes nothing there."""
    uid = 40000 + int(uuid.uuid4().int % 10000)
    private = "/tmp/clustercheck-%d" % uid
    pw = "/tmp/clustercheck-pw-%d" % uid
    with open(clustercheck_creds.password_file) as f, open(pw, "w") as out:
        out.write(f.read())
    os.chown(pw, uid, uid)
    os.chmod(pw, 0o600)
    r = registrars(tmp_path, healthy_galera[1], clustercheck_creds, consul.addr, prefix)
    r.cmd = as_user(uid, [pw if a == clustercheck_creds.password_file else a for a in r.cmd])
    r.env.pop("XDG_RUNTIME_DIR", None)
    try:
        plant("mkdir", "-m", "0777", private)
        assert r.run_once() == 2, r.output
        assert len(r.lines("session file: %s: belongs to uid 65534, not to this user (uid %d) (--session-file)"
                           % (private, uid))) == 1, r.output
        assert os.listdir(private) == [] and sessions(consul) == []
        os.rmdir(private)
        assert r.run_once() == 0, r.output
        st = os.lstat(private)
        assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (uid, 0o700), st
        with open(private + "/clustercheck.session") as f:
            assert f.read() == kv_entry(consul, r.key)["Session"] + "\n"
    finally:
        subprocess.run(["rm", "-rf", private, pw])


def test_secrets_stay_out_of_argv_and_logs(healthy_galera, clustercheck_creds, prefix, registrars, tmp_path):
    node = healthy_galera[1]
    master = "root-" + uuid.uuid4().hex
    with Consul(acl_master_token=master) as c:
        token = c.create_token([("key", prefix, "write"), ("session", "", "write")])
        token_file = tmp_path / "consul-token"
        token_file.write_text(token + "\n")
        token_file.chmod(0o600)
        r = registrars(tmp_path, node, clustercheck_creds, c.addr, prefix, "--consul-token-file", str(token_file),
                       "--log-level", "debug").start()
        wait_for("the key", lambda: kv_entry(c, r.key, token=master))
        with open("/proc/%d/cmdline" % r.proc.pid, "rb") as f:
            argv = f.read().decode("utf-8", "replace")
        with open("/proc/%d/environ" % r.proc.pid, "rb") as f:
            environ = f.read().decode("utf-8", "replace")
        assert token not in argv and clustercheck_creds.password not in argv, argv
        assert token not in environ

        # A token without rights on another prefix: errors are logged, the token is not.
        other = Registrar(tmp_path, node, clustercheck_creds, c.addr, "forbidden/prefix",
                          "--log-level", "debug", env={"CONSUL_HTTP_TOKEN": token})
        assert other.run_once("--session-file", str(tmp_path / "state2")) == 1, other.output
        # One line naming the endpoint and the rule the token lacks.
        assert re.search(r'(GET|PUT) /v1/kv/forbidden/prefix/\S+ denied: the token needs key_prefix '
                         r'"forbidden/prefix/[^"]+" (read|write) \(see docs/consul-acl.md\)', other.output), other.output

        rc, _ = r.terminate()
        assert rc == 0
        assert kv_entry(c, r.key, token=master) is None
        for text in (r.output, other.output):
            assert token not in text
            assert clustercheck_creds.password not in text


@pytest.mark.fault
def test_once_with_its_session_file_on_a_full_disk(healthy_galera, clustercheck_creds, consul, prefix, registrars,
                                                 tmp_path):
    """Exit 1 with one line naming the file; no session or key left behind; the next run with room registers.

    The session ID cannot be saved, so the next run could not reuse the session: it is destroyed."""
    full = tmp_path / "full"
    full.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k,mode=0755", "tmpfs", str(full)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")
    try:
        filler = full / "filler"
        with open(filler, "wb", buffering=0) as f:
            try:
                while True:
                    f.write(b"x" * 4096)
            except OSError:
                pass
        node = healthy_galera[1]
        state = full / "clustercheck.session"
        reg = registrars(tmp_path, node, clustercheck_creds, consul.addr, prefix, "--session-file", str(state))
        assert reg.run_once() == 1, reg.output
        assert re.search(re.escape(f"session file {state}.") + r"\d+\.tmp: No space left on device \(--session-file\)",
                         reg.output), reg.output
        assert kv_entry(consul, reg.key) is None
        assert sessions(consul) == [], "a session was left behind"
        assert sorted(p.name for p in full.iterdir()) == ["filler"], "a file was left on the full disk"
        filler.unlink()
        assert reg.run_once() == 0, reg.output
        assert state.read_text() == kv_entry(consul, reg.key)["Session"] + "\n"
    finally:
        subprocess.run(["umount", "-l", str(full)])


def test_key_without_port_for_a_consul_that_refuses_colons(healthy_galera, clustercheck_creds, prefix, registrars,
                                                           tmp_path):
    """Consul 1.21.5 refuses ':' in keys (500 invalid key name): the error says to use --key-without-port,
    which registers <prefix>/<host> = host:port (the form proxysql-sync's replica layout also reads)."""
    if os.environ.get("CONSUL_BIN"):
        pytest.skip("needs the double's --kv-key-validation 1.21.5 (a real Consul has its own rules)")
    node = healthy_galera[1]
    with Consul(extra_args=["--kv-key-validation", "1.21.5"]) as c:
        r = registrars(tmp_path, node, clustercheck_creds, c.addr, prefix, "--session-file", str(tmp_path / "s"))
        assert r.run_once() == 1, r.output
        assert "invalid key name" in r.output and "use --key-without-port" in r.output, r.output
        assert r.run_once("--key-without-port") == 0, r.output
        e = kv_entry(c, "%s/%s" % (prefix, node.ip))
        assert e is not None and e["Value"] == ("%s:%d" % (node.ip, node.port)).encode(), e


def test_session_survives_a_failing_serf_check(healthy_galera, clustercheck_creds, consul, prefix, registrars,
                                               tmp_path):
    """The session has no serfHealth check: the node's Consul agent restarting (serfHealth critical for a
    while) does not end it, so the keys of every node it serves are not deleted at once."""
    if not consul.is_fake:
        pytest.skip("needs the double's /_fake/check hook")
    node = healthy_galera[1]
    r = registrars(tmp_path, node, clustercheck_creds, consul.addr, prefix).start()
    wait_for("the key", lambda: kv_entry(consul, r.key) is not None)
    consul.fault("check", node=consul.node, id="serfHealth", status="critical")
    time.sleep(1)
    assert kv_entry(consul, r.key) is not None, "the key went with the serfHealth check"
    consul.fault("check", node=consul.node, id="serfHealth", status="passing")


def test_logs_in_with_an_auth_method_and_out(healthy_galera, clustercheck_creds, prefix, registrars, tmp_path):
    """--consul-login-method: --once logs in with the bearer token file (no static token), registers
    with the token Consul handed out and logs out at exit; so does a running registrar at SIGTERM.
    Neither the JWT nor a SecretID appears in the output."""
    node = healthy_galera[1]
    master, jwt = "root-" + uuid.uuid4().hex, "jwt-" + uuid.uuid4().hex
    with Consul(acl_master_token=master) as c:
        c.login_method("k8s", {jwt: {"service_account": "galera", "rules": [("key_prefix", prefix, "write"),
                                                                               ("session_prefix", "", "write")]}})
        bearer = tmp_path / "sa-token"
        bearer.write_text(jwt + "\n")
        bearer.chmod(0o600)
        login = ("--consul-login-method", "k8s", "--consul-login-bearer-token-file", str(bearer),
                 "--consul-login-meta", "pod=galera-1", "--log-level", "debug")
        once = Registrar(tmp_path, node, clustercheck_creds, c.addr, prefix, *login)
        assert once.run_once("--session-file", str(tmp_path / "session")) == 0, once.output
        assert kv_entry(c, once.key, token=master) is not None
        counts = c.request("GET", "/_fake/auth-method").json()["counts"]
        assert (counts["logins"], counts["logouts"]) == (1, 1), counts

        r = registrars(tmp_path, node, clustercheck_creds, c.addr, prefix, *login).start()
        wait_for("a login token in use", lambda: c.request(
            "GET", "/_fake/acl", params={"auth_method": "k8s"}).json()["tokens"])
        secrets = c.request("GET", "/_fake/acl", params={"auth_method": "k8s"}).json()["tokens"]
        rc, _ = r.terminate()
        assert rc == 0
        counts = c.request("GET", "/_fake/auth-method").json()["counts"]
        assert (counts["logins"], counts["logouts"]) == (2, 2), counts
        for text in (once.output, r.output):
            assert "logged in with auth method k8s" in text, text
            assert jwt not in text
            for s in secrets:
                assert s not in text
