"""Real Patroni 3.0 clusters of PostgreSQL 15 on loopback, with Consul (the project's double, or
the real binary with CONSUL_BIN) as their DCS.

    from fakes.consul import Consul
    import patroni

    with Consul(session_ttl_min="1s") as consul, patroni.Cluster(consul) as pg:
        pg.wait_healthy()                    # a leader and size-1 running replicas
        pg.leader_name(), pg.leader_port()   # from Consul's service/<scope>/leader
        pg.kill("n1")                        # SIGKILL its Patroni and its PostgreSQL: a crash
        pg.wait_leader(other_than="n1")      # (name, seconds it took)
        pg.switchover("n3")                  # patronictl switchover --candidate n3 --force
        pg.heal()                            # start what was killed, wait until healthy

Members are ``n1`` .. ``nN``, each with a free PostgreSQL port and a free REST API port on
127.0.0.1, and a directory ``BASE/nI`` (``patroni.json``, ``patroni.log``, ``data/``, the unix
socket). ``BASE`` is a short directory ``/tmp/sk-pg-XXXXXXXX`` (mode 0755), not pytest's tmp_path:
PostgreSQL runs as user ``postgres`` when the tests run as root, and ``postgres`` can traverse
neither ``/tmp/pytest-of-root`` (0700) nor a socket path as long as pytest's.

PostgreSQL refuses to run as root (initdb and postgres exit at once), so as root every Patroni
process, and with it PostgreSQL, runs as ``postgres`` (Debian's postgresql-common creates it)
through Popen's user/group/extra_groups, no shell, no sudo; ``BASE/nI`` belongs to it. A non-root
run keeps its own user. ``patronictl`` runs as the caller: it only talks to Consul and the REST API.

Timings default to ttl 10, loop_wait 2, retry_timeout 3 (Patroni documents loop_wait +
2 x retry_timeout <= ttl; 3.0.2's validator only checks that they are integers). Patroni asks
Consul for a session TTL of ttl / 2 (Consul invalidates at 2 x TTL), 5 s here, under real Consul's
default session_ttl_min of 10 s: start the Consul with ``session_ttl_min="1s"`` (the double and
real Consul both take it).

Passwords are generated, live only in the members' config files (mode 0600) and ``.pgpass``,
never on a command line.

Cleanup: ``close()`` (also ``with`` and atexit) SIGKILLs every process of every member and
removes BASE. A member's processes are Patroni (its command line names its config file under
BASE) and every PostgreSQL process (their working directory is the data directory; the
postmaster's command line names it too). A watchdog process (``patroni.py _watchdog BASE``, in its
own session) does the same if the Python process that started the cluster dies, SIGKILL included,
and ``leftovers.mark(BASE)`` makes the suite's session-end check count them as the suite's.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import json
import os
import pwd
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(HERE)
for _p in (TESTS, HERE):
    if _p not in sys.path:
        sys.path.insert(0, _p)

import leftovers  # noqa: E402
from fakes.process import free_port  # noqa: E402

PATRONI = "/usr/bin/patroni"
PATRONICTL = "/usr/bin/patronictl"
PG_BIN = "/usr/lib/postgresql/15/bin"
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
RUN_AS_ROOT = "postgres"        # the user PostgreSQL runs as when the tests run as root


class PatroniError(RuntimeError):
    """A Patroni cluster did not reach the state a call waited for (message names it, then logs)."""


def missing():
    """What is missing to run Patroni clusters here, as a message naming the packages, or None."""
    gone = [p for p in (PATRONI, PATRONICTL, os.path.join(PG_BIN, "postgres"), os.path.join(PG_BIN, "initdb"))
            if not os.access(p, os.X_OK)]
    try:
        import consul  # noqa: F401  (python3-consul: Patroni's Consul DCS)
    except ImportError:
        gone.append("python module consul")
    if os.geteuid() == 0:
        try:
            pwd.getpwnam(RUN_AS_ROOT)
        except KeyError:
            gone.append("user %s (PostgreSQL refuses to run as root)" % RUN_AS_ROOT)
    if not gone:
        return None
    return ("Patroni + PostgreSQL 15 missing: %s; install the Debian packages patroni python3-consul "
            "postgresql-15 (make deps)" % ", ".join(gone))


def require():
    """Fail the calling test (never skip it) when Patroni or PostgreSQL 15 is not installed."""
    why = missing()
    if why:
        import pytest
        pytest.fail(why, pytrace=False)


def _pids_of(root):
    """PIDs of the processes that belong to directory `root`: its path is on their command line,
    or their working directory is in it (every PostgreSQL process works in its data directory)."""
    root = root.rstrip("/") + "/"
    me, found = os.getpid(), []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        pid = int(entry)
        try:
            with open("/proc/%d/cmdline" % pid, "rb") as f:
                cmd = f.read()
        except OSError:
            continue
        if b"_watchdog" in cmd:
            continue
        try:
            cwd = os.readlink("/proc/%d/cwd" % pid) + "/"
        except OSError:
            cwd = ""
        if root.encode() in cmd or cwd.startswith(root):
            found.append(pid)
    return found


def kill_all(root, timeout=10.0):
    """SIGKILL every process of `root` (see _pids_of) until none is left or `timeout` passes.
    True when none is left."""
    deadline = time.monotonic() + timeout
    while True:
        pids = _pids_of(root)
        if not pids:
            return True
        if time.monotonic() > deadline:
            return False
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.05)


def _http_json(url, timeout=2.0, method="GET", body=None):
    """(status, parsed JSON or None) of one request; (0, None) when nothing answers."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            status, text = r.status, r.read()
    except urllib.error.HTTPError as e:
        with e:
            status, text = e.code, e.read()
    except (OSError, ValueError):
        return 0, None
    try:
        return status, json.loads(text)
    except ValueError:
        return status, None


class Member:
    """One Patroni + PostgreSQL node: ``name``, ``pg_port``, ``api_port``, ``dir``."""

    def __init__(self, cluster, name):
        self.cluster, self.name = cluster, name
        self.dir = os.path.join(cluster.base, name)
        self.data_dir = os.path.join(self.dir, "data")
        self.config_path = os.path.join(self.dir, "patroni.json")
        self.log_path = os.path.join(self.dir, "patroni.log")
        self.pg_port, self.api_port = free_port(), free_port()
        self.proc = None

    def __repr__(self):
        return "<Member %s pg=%d api=%d>" % (self.name, self.pg_port, self.api_port)

    @property
    def addr(self):
        return "127.0.0.1:%d" % self.pg_port

    @property
    def api_url(self):
        return "http://127.0.0.1:%d" % self.api_port

    @property
    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def config(self):
        c = self.cluster
        return {
            "scope": c.scope,
            "namespace": "/%s/" % c.namespace,
            "name": self.name,
            "log": {"level": "INFO"},
            "restapi": {"listen": "127.0.0.1:%d" % self.api_port,
                        "connect_address": "127.0.0.1:%d" % self.api_port},
            "consul": {"host": c.consul.addr, "checks": [], "register_service": c.register_service},
            "bootstrap": {
                "dcs": {
                    "ttl": c.ttl, "loop_wait": c.loop_wait, "retry_timeout": c.retry_timeout,
                    "maximum_lag_on_failover": 16 * 1024 * 1024,
                    "postgresql": {
                        "use_pg_rewind": True,
                        "use_slots": True,
                        "parameters": {
                            "max_wal_senders": 8, "max_replication_slots": 8,
                            "wal_level": "replica", "hot_standby": "on", "wal_keep_size": "64MB",
                            "wal_log_hints": "on",
                        },
                    },
                },
                # A throwaway cluster: no fsync anywhere. A SIGKILL loses nothing that the
                # page cache holds; only a machine crash would.
                "initdb": [{"encoding": "UTF8"}, {"locale": "C"}, "no-sync"],
            },
            "postgresql": {
                "listen": "127.0.0.1:%d" % self.pg_port,
                "connect_address": "127.0.0.1:%d" % self.pg_port,
                "data_dir": self.data_dir,
                "bin_dir": PG_BIN,
                "pgpass": os.path.join(self.dir, ".pgpass"),
                "authentication": {
                    "superuser": {"username": "postgres", "password": c.superuser_password},
                    "replication": {"username": "replicator", "password": c.replication_password},
                },
                "parameters": {
                    "unix_socket_directories": self.dir,
                    "shared_buffers": "16MB",
                    "fsync": "off", "synchronous_commit": "off", "full_page_writes": "on",
                    "logging_collector": "off",
                },
                "basebackup": [{"checkpoint": "fast"}],
                "pg_hba": [
                    "local all all trust",
                    "host replication replicator 127.0.0.1/32 scram-sha-256",
                    "host all all 127.0.0.1/32 scram-sha-256",
                ],
                "remove_data_directory_on_rewind_failure": True,
                "remove_data_directory_on_diverged_timelines": True,
            },
            "watchdog": {"mode": "off"},
            "tags": {"nofailover": False, "noloadbalance": False, "clonefrom": False, "nosync": False},
        }

    def write_config(self):
        os.makedirs(self.dir, mode=0o700, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.config_path)
        fd = os.open(self.config_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(self.config(), f, indent=1)      # YAML reads JSON
        self.cluster.own(self.dir)
        self.cluster.own(self.config_path)

    def start(self):
        """Start this member's Patroni (which starts PostgreSQL); returns at once."""
        if self.running:
            return self
        if not os.path.exists(self.config_path):
            self.write_config()
        log = open(self.log_path, "ab")
        try:
            self.proc = subprocess.Popen([PATRONI, self.config_path], stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT, cwd=self.dir, env=self.cluster.env(self),
                                         start_new_session=True, **self.cluster.user_args())
        finally:
            log.close()
        return self

    def kill(self, timeout=10.0):
        """A crash: SIGKILL this member's Patroni and every PostgreSQL process of it at once."""
        if not kill_all(self.dir, timeout):
            raise PatroniError("%s: processes still alive %.0f s after SIGKILL: %s"
                               % (self.name, timeout, _pids_of(self.dir)))
        if self.proc is not None:
            self.proc.wait(timeout)
            self.proc = None

    def api(self, path, timeout=2.0):
        """(status, JSON) of GET <path> on this member's REST API; (0, None) when it does not answer."""
        return _http_json(self.api_url + path, timeout)

    def log_tail(self, lines=30):
        try:
            with open(self.log_path, "rb") as f:
                f.seek(max(0, os.path.getsize(self.log_path) - 16384))
                text = f.read().decode("utf-8", "replace")
        except OSError:
            return "(no log at %s)" % self.log_path
        return "\n".join(text.splitlines()[-lines:])


class Cluster:
    """An N-member Patroni cluster (``n1``..``nN``) of PostgreSQL 15 over `consul`, a started
    fakes.consul.Consul (its session_ttl_min must allow ttl / 2)."""

    def __init__(self, consul, size=3, scope="pgdemo", namespace="service", ttl=10, loop_wait=2,
                 retry_timeout=3, register_service=False):
        why = missing()
        if why:
            raise PatroniError(why)
        if loop_wait + 2 * retry_timeout > ttl:
            raise ValueError("Patroni wants loop_wait + 2 x retry_timeout <= ttl (%d + 2 x %d > %d)"
                             % (loop_wait, retry_timeout, ttl))
        self.consul, self.size, self.scope, self.namespace = consul, size, scope, namespace
        self.ttl, self.loop_wait, self.retry_timeout = ttl, loop_wait, retry_timeout
        self.register_service = register_service
        self.superuser_password = secrets.token_urlsafe(18)
        self.replication_password = secrets.token_urlsafe(18)
        self.uid = self.gid = None
        if os.geteuid() == 0:
            pw = pwd.getpwnam(RUN_AS_ROOT)
            self.uid, self.gid = pw.pw_uid, pw.pw_gid
        self.base = tempfile.mkdtemp(prefix="sk-pg-", dir="/tmp")
        os.chmod(self.base, 0o755)
        leftovers.mark(self.base + "/")
        self._watchdog = subprocess.Popen([PYTHON, os.path.abspath(__file__), "_watchdog", self.base],
                                          stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                          stderr=subprocess.DEVNULL, start_new_session=True)
        self.members = [Member(self, "n%d" % i) for i in range(1, size + 1)]
        self.closed = False
        self.timings = {}
        atexit.register(self._close_quietly)    # a cluster left open (the session-end check reports it)

    # -- identity --------------------------------------------------------------------
    def __getitem__(self, name):
        for m in self.members:
            if m.name == name:
                return m
        raise KeyError(name)

    def __iter__(self):
        return iter(self.members)

    @property
    def prefix(self):
        """The Consul KV prefix Patroni writes under: <namespace>/<scope>/."""
        return "%s/%s/" % (self.namespace, self.scope)

    def own(self, path):
        if self.uid is not None:
            os.chown(path, self.uid, self.gid)

    def user_args(self):
        if self.uid is None:
            return {}
        return {"user": self.uid, "group": self.gid, "extra_groups": []}

    def env(self, member):
        env = {"PATH": "%s:/usr/sbin:/usr/bin:/sbin:/bin" % PG_BIN, "LANG": "C.UTF-8",
               "HOME": member.dir, "PGPASSFILE": os.path.join(member.dir, ".pgpass")}
        return env

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.close()

    # -- lifecycle -------------------------------------------------------------------
    def start(self, timeout=120.0):
        """Start every member at once and wait until the cluster is healthy."""
        t0 = time.monotonic()
        try:
            for m in self.members:
                m.write_config()
                m.start()
            self.wait_healthy(timeout)
        except BaseException:
            self.close()
            raise
        self.timings["start"] = time.monotonic() - t0
        return self

    def close(self):
        """SIGKILL everything of every member, remove BASE, end the watchdog. Idempotent."""
        if self.closed:
            return
        self.closed = True
        ok = kill_all(self.base)
        for m in self.members:
            if m.proc is not None:
                with contextlib.suppress(Exception):
                    m.proc.wait(5)
                m.proc = None
        shutil.rmtree(self.base, ignore_errors=True)
        with contextlib.suppress(Exception):
            self._watchdog.stdin.close()
            self._watchdog.wait(5)
        if not ok:
            raise PatroniError("processes of %s still alive after SIGKILL: %s" % (self.base, _pids_of(self.base)))

    def _close_quietly(self):
        with contextlib.suppress(Exception):
            self.close()

    # -- observing ---------------------------------------------------------------------
    def kv(self, key):
        """The value of <namespace>/<scope>/<key> in Consul as text, or None."""
        v = self.consul.value(self.prefix + key)
        return None if v is None else v.decode("utf-8", "replace")

    def leader_name(self):
        """The name in Consul's leader key, or None while nobody holds it."""
        return self.kv("leader") or None

    def leader(self):
        name = self.leader_name()
        return self[name] if name else None

    def leader_port(self):
        """The PostgreSQL port of the member in the leader key (None while nobody holds it)."""
        m = self.leader()
        return m.pg_port if m else None

    def members_kv(self):
        """{name: member JSON} of every members/<name> key in Consul."""
        r = self.consul.get(self.prefix + "members/", recurse=True)
        if r.status != 200:
            return {}
        out = {}
        for e in r.json():
            name = e["Key"].rsplit("/", 1)[1]
            with contextlib.suppress(ValueError, TypeError):
                out[name] = json.loads(base64.b64decode(e["Value"] or ""))
        return out

    def replicas(self):
        """Names of the members whose Consul key says a running replica."""
        return sorted(n for n, d in self.members_kv().items()
                      if d.get("role") == "replica" and d.get("state") == "running")

    def problems(self):
        """What keeps the cluster from being healthy: one leader in Consul, running as primary and
        answering 200 on its REST /primary, and size-1 running replicas that stream from it."""
        out = []
        leader = self.leader_name()
        kv = self.members_kv()
        if not leader:
            return ["no leader key"]
        d = kv.get(leader, {})
        if d.get("role") not in ("master", "primary") or d.get("state") != "running":
            out.append("leader %s: members key says role=%s state=%s" % (leader, d.get("role"), d.get("state")))
        status, _ = self[leader].api("/primary")
        if status != 200:
            out.append("leader %s: REST /primary answers %s" % (leader, status))
        want = sorted(m.name for m in self.members if m.name != leader)
        running = self.replicas()
        if running != want:
            out.append("running replicas %s, want %s" % (running, want))
        status, cl = self[leader].api("/cluster")
        if status == 200 and cl:
            lag = {m.get("name"): m.get("lag") for m in cl.get("members", []) if m.get("name") != leader}
            behind = {n: v for n, v in lag.items() if not isinstance(v, int) or v > 1024 * 1024}
            if behind:
                out.append("replicas not streaming (REST /cluster lag): %s" % behind)
        else:
            out.append("leader %s: REST /cluster answers %s" % (leader, status))
        return out

    def wait(self, what, predicate, timeout, interval=0.1):
        """Poll until predicate() is true; its value. Raises PatroniError naming `what`."""
        deadline = time.monotonic() + timeout
        last = None
        while True:
            try:
                last = predicate()
                if last:
                    return last
            except (OSError, ValueError, KeyError) as e:
                last = e
            if time.monotonic() > deadline:
                raise PatroniError("timed out after %.0f s waiting for %s (last: %r)\n%s"
                                   % (timeout, what, last, self.logs()))
            self._check_members()
            time.sleep(interval)

    def _check_members(self):
        for m in self.members:
            if m.proc is not None and m.proc.poll() is not None:
                rc = m.proc.returncode
                m.proc = None
                raise PatroniError("patroni %s exited with %s:\n%s" % (m.name, rc, m.log_tail(40)))

    def wait_healthy(self, timeout=90.0):
        """Until problems() is empty; the leader's name."""
        last = []

        def healthy():
            last[:] = self.problems()
            return not last and self.leader_name()
        try:
            return self.wait("a healthy cluster (a leader and %d running replicas)" % (self.size - 1),
                             healthy, timeout, interval=0.2)
        except PatroniError as e:
            raise PatroniError("%s\nproblems: %s" % (e, last)) from None

    def wait_leader(self, other_than=None, name=None, since=None, timeout=None):
        """Until Consul's leader key names a member (not `other_than`; `name` if given): (its name,
        seconds since `since`, default the call). The default timeout is ttl + 20 s."""
        t0 = time.monotonic() if since is None else since
        timeout = self.ttl + 20 if timeout is None else timeout

        def moved():
            n = self.leader_name()
            if n and n != other_than and (name is None or n == name):
                return n
            return None
        got = self.wait("the leader key to name %s" % (name or ("a member other than %s" % other_than)),
                        moved, timeout, interval=0.02)
        return got, time.monotonic() - t0

    def watch_leader(self, interval=0.02):
        """A LeaderWatch of this cluster (use it in a with block)."""
        return LeaderWatch(self, interval)

    def logs(self, lines=15):
        return "\n".join("--- %s (%s) ---\n%s" % (m.name, m.log_path, m.log_tail(lines)) for m in self.members)

    # -- faults ----------------------------------------------------------------------
    def kill(self, name):
        """SIGKILL member `name`'s Patroni and PostgreSQL (a crash); time.monotonic() of the kill."""
        t = time.monotonic()
        self[name].kill()
        return t

    def kill_leader(self):
        """Kill the current leader; (its name, time.monotonic() of the kill)."""
        name = self.leader_name()
        if not name:
            raise PatroniError("no leader to kill\n" + self.logs())
        return name, self.kill(name)

    def switchover(self, candidate, timeout=60.0):
        """``patronictl switchover --candidate <candidate> --force``; waits until `candidate` holds
        the leader key. Returns seconds from the call to that."""
        leader = self.leader_name()
        t0 = time.monotonic()
        cmd = [PATRONICTL, "-c", self.members[0].config_path, "switchover", self.scope,
               "--leader", leader or "", "--candidate", candidate, "--force"]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL,
                           env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": self.base})
        # patronictl exits 0 when the REST API refuses ("Switchover failed, details: 503, ...").
        if r.returncode != 0 or "failed" in r.stdout.lower():
            raise PatroniError("patronictl switchover to %s: exit %d\n%s%s\n%s"
                               % (candidate, r.returncode, r.stdout, r.stderr, self.logs()))
        self.wait_leader(name=candidate, since=t0, timeout=timeout)
        return time.monotonic() - t0

    def heal(self, timeout=90.0):
        """Start every member that is not running and wait until the cluster is healthy."""
        for m in self.members:
            if not m.running:
                m.start()
        return self.wait_healthy(timeout)


def fixtures(scope="module", **cluster_args):
    """pytest fixtures (consul, cluster, healthy) for a test module:

        pg_consul, pg_cluster, healthy_pg = patroni.fixtures()

    `pg_consul` a started Consul (double, or CONSUL_BIN) with session_ttl_min 1 s; `pg_cluster` a
    started Cluster over it (cluster_args go to Cluster), both of `scope`; `healthy_pg` (per test)
    the cluster after heal(): use it in every test that kills or switches over. A missing Patroni
    or PostgreSQL fails the test with the packages to install; it is never skipped."""
    import pytest
    from fakes.consul import Consul

    @pytest.fixture(scope=scope)
    def pg_consul():
        require()
        c = Consul(session_ttl_min="1s")
        c.start()
        try:
            yield c
        finally:
            c.close()

    @pytest.fixture(scope=scope)
    def pg_cluster(pg_consul):
        cluster = Cluster(pg_consul, **cluster_args)
        try:
            yield cluster.start()
        finally:
            cluster.close()

    @pytest.fixture
    def healthy_pg(pg_cluster):
        pg_cluster.heal()
        return pg_cluster

    return pg_consul, pg_cluster, healthy_pg


class LeaderWatch:
    """Reads Consul's leader key every `interval` seconds in a thread while a fault runs and keeps
    each change as (time.monotonic() of the read that saw it, name or None):

        with pg.watch_leader() as watch:
            t = pg.kill("n1")
            ...
        watch.wait("n2", since=t, timeout=30)   # seconds from t to the first read naming n2
    """

    def __init__(self, cluster, interval=0.02):
        import threading
        self.cluster, self.interval = cluster, interval
        self.changes = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="leader-watch", daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(10)

    def _run(self):
        last = object()
        while not self._stop.is_set():
            t = time.monotonic()
            try:
                name = self.cluster.leader_name()
            except OSError:
                name = last             # Consul did not answer: no news
            if name != last:
                self.changes.append((t, name))
                last = name
            self._stop.wait(self.interval)

    def first(self, name, since):
        """Seconds from `since` to the first read at or after it that saw the key change to `name`,
        or None."""
        for t, n in self.changes:
            if t >= since and n == name:
                return t - since
        return None

    def wait(self, name, since, timeout):
        """first(name, since) once this watch has seen it (bounded by `timeout` seconds)."""
        deadline = time.monotonic() + timeout
        while self.first(name, since) is None:
            if time.monotonic() > deadline:
                raise PatroniError("the leader watch did not see %s within %.0f s (changes: %r)"
                                   % (name, timeout, self.changes))
            time.sleep(self.interval)
        return self.first(name, since)


def _watchdog(base):
    """Block until the parent closes the pipe (or dies), then kill everything of BASE, remove it."""
    with contextlib.suppress(Exception):
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
    with contextlib.suppress(Exception):
        sys.stdin.buffer.read()
    if not os.path.isdir(base):
        return 0
    kill_all(base)
    shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "_watchdog":
        sys.exit(_watchdog(sys.argv[2]))
    print("usage: patroni.py _watchdog BASE (started by patroni.Cluster)", file=sys.stderr)
    sys.exit(2)
