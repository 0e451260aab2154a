"""Real MariaDB servers on loopback for sidekick's integration tests.

This module starts and stops real ``mariadbd`` processes so the probes and the sync
agent are tested against the real thing, not a double:

* :class:`GaleraCluster` - three MariaDB Galera nodes (:class:`GaleraNode`); node *i*
  binds everything to ``127.0.0.i`` so a node can be partitioned by address later.

  ====  ==========  =====  ===========  ====  =========
  node  address     SQL    gcomm (IST)  SST   directory
  ====  ==========  =====  ===========  ====  =========
  1     127.0.0.1   3311   4567 (4568)  4444  BASE/g1
  2     127.0.0.2   3312   4577 (4578)  4454  BASE/g2
  3     127.0.0.3   3313   4587 (4588)  4464  BASE/g3
  ====  ==========  =====  ===========  ====  =========

* :class:`AsyncPair` - a plain GTID primary (127.0.0.1:3321, ``BASE/a1``) and a
  read-only replica (127.0.0.1:3322, ``BASE/a2``).

* :class:`MariaDB` - one plain server; the base class of both kinds of node.

Everything lives under one short temporary directory ``BASE`` (``/tmp/sk-XXXXXXXX``,
mode 0755 so user ``mysql`` can traverse it), described by a :class:`Workspace`:

* ``BASE/secrets/<user>`` - generated password, no trailing newline, mode 0600 (the
  shape of a Kubernetes secret file); ``BASE/secrets/<user>.cnf`` - ``[client]``
  option file with ``user=`` and ``password=`` (mode 0600). ``BASE/client.cnf`` is
  the monitor user's option file. Users: ``monitor``, ``clustercheckuser`` (both
  ``@localhost`` and ``@'127.0.0.%'``) and, on the async pair, ``repl``.
* ``BASE/template`` - one ``mariadb-install-db`` run, copied for every server that
  needs an initialised datadir (Galera node 1, both async servers).
* ``BASE/bin/wsrep_sst_skhold`` - an SST method that lets a test hold a state
  transfer (see :meth:`GaleraCluster.hold_sst`).

Passwords never appear on any command line: servers get no passwords at all, SQL
runs in-process with PyMySQL (root over the unix socket, authenticated by the
``unix_socket`` plugin), and clients started by tests read the files above.

Processes: each ``mariadbd`` is started as root in a new session (``setsid``, via
``Popen(start_new_session=True)``) with ``--user=mysql`` and ``--defaults-file``
pointing at ``BASE/<name>/my.cnf`` (no system option file is read). Its error log is
``BASE/<name>/error.log``. A watchdog process (``servers.py _watchdog BASE``) kills
everything under BASE if the Python process that started it dies for any reason,
including SIGKILL. ``servers.py stop BASE`` does the same by hand.

Every wait is bounded and raises :class:`HarnessError` naming what it waited for,
followed by the tail of the relevant error log.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import os
import secrets as _secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

import pymysql

MARIADBD = "/usr/sbin/mariadbd"
INSTALL_DB = "/usr/bin/mariadb-install-db"
GALERA_PROVIDER = "/usr/lib/galera/libgalera_smm.so"
RSYNC_SST = "/usr/bin/wsrep_sst_rsync"
PYTHON = "/usr/bin/python3"
LOCK_FILE = "/tmp/sidekick-test-servers.lock"
CLUSTER_NAME = "sidekick_test"

GALERA_SQL_PORT = 3310      # + i
GALERA_GCOMM_PORT = 4567    # + 10 * (i - 1); IST = gcomm + 1
GALERA_SST_PORT = 4444      # + 10 * (i - 1)
ASYNC_PRIMARY_PORT = 3321
ASYNC_REPLICA_PORT = 3322

MONITOR_GRANTS = "PROCESS, REPLICATION CLIENT, REPLICA MONITOR, SELECT"
HARNESS_DB = "sk_harness"

# Settings shared by every server (kept small: 2 cores, several servers at once).
COMMON_OPTIONS = [
    "skip-name-resolve",
    "performance_schema=OFF",
    "innodb_buffer_pool_size=32M",
    "innodb_log_file_size=16M",
    "innodb_log_buffer_size=4M",
    "innodb_flush_log_at_trx_commit=2",
    "key_buffer_size=1M",
    "aria_pagecache_buffer_size=8M",
    "max_connections=100",
    "character_set_server=utf8mb4",
    "collation_server=utf8mb4_general_ci",
]

_REGISTRY: list = []          # every MariaDB object created in this process
_REGISTRY_LOCK = threading.Lock()


class HarnessError(RuntimeError):
    """A server did not start, stop or reach a state within its time bound."""


def wait_for(what, predicate, timeout, interval=0.2, details=None):
    """Poll ``predicate()`` until it returns a true value; return that value.

    Exceptions from the predicate count as "not yet" (the last one is reported).
    After ``timeout`` seconds raise :class:`HarnessError` saying ``what`` was awaited,
    with the text of ``details()`` (e.g. a log tail) appended when given.
    """
    deadline = time.monotonic() + timeout
    last = None
    while True:
        try:
            result = predicate()
            if result:
                return result
        except HarnessError:
            raise
        except Exception as exc:  # noqa: BLE001 - reported below
            last = exc
        if time.monotonic() >= deadline:
            msg = f"timed out after {timeout:.0f}s waiting for {what}"
            if last is not None:
                msg += f" (last error: {type(last).__name__}: {last})"
            if details is not None:
                msg += "\n" + details()
            raise HarnessError(msg)
        time.sleep(interval)


def _mysql_uid_gid():
    import pwd
    pw = pwd.getpwnam("mysql")
    return pw.pw_uid, pw.pw_gid


def _write_secret(path, text):
    """Create ``path`` with mode 0600 (never world-readable, not even briefly)."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)


def _procs_under(base):
    """PIDs of processes whose command line mentions ``base/`` (ours only)."""
    needle = (base.rstrip("/") + "/").encode()
    me = os.getpid()
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read()
        except OSError:
            continue
        if needle in cmd and b"_watchdog" not in cmd:
            pids.append(int(entry))
    return pids


def kill_everything_under(base, timeout=10.0):
    """SIGKILL every process started for ``base`` and wait until they are gone."""
    for pid in _procs_under(base):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + timeout
    while _procs_under(base) and time.monotonic() < deadline:
        time.sleep(0.05)
    # Reap our own children (no zombies left behind).
    with _REGISTRY_LOCK:
        servers = list(_REGISTRY)
    for s in servers:
        if s.proc is not None and s.base == base:
            with contextlib.suppress(Exception):
                s.proc.wait(timeout=1)
    return not _procs_under(base)


@dataclasses.dataclass(frozen=True)
class Creds:
    """A MySQL account whose password lives in files (never shown by repr)."""

    user: str
    password: str = dataclasses.field(repr=False)
    password_file: str = ""
    defaults_file: str = ""

    def __str__(self):
        return f"Creds(user={self.user!r}, password_file={self.password_file!r})"


class Workspace:
    """The temporary directory, generated secrets and helper files of one run."""

    USERS = ("monitor", "clustercheckuser", "repl")

    def __init__(self, keep=False):
        self.keep = keep
        self.closed = False     # set at shutdown: no new server may start
        self.base = tempfile.mkdtemp(prefix="sk-", dir="/tmp")
        os.chmod(self.base, 0o755)
        self.secrets_dir = os.path.join(self.base, "secrets")
        os.mkdir(self.secrets_dir, 0o700)
        self.bin_dir = os.path.join(self.base, "bin")
        os.mkdir(self.bin_dir, 0o755)
        self.template = os.path.join(self.base, "template")
        self._template_lock = threading.Lock()
        self.timings: dict[str, float] = {}
        self.creds = {u: self._make_creds(u) for u in self.USERS}
        shutil.copyfile(self.creds["monitor"].defaults_file,
                        os.path.join(self.base, "client.cnf"))
        os.chmod(os.path.join(self.base, "client.cnf"), 0o600)
        # SST hold control (see GaleraCluster.hold_sst); the directory belongs to
        # mysql because the SST script runs as mysql and writes the "held" marker.
        sst_dir = os.path.join(self.base, "sst")
        os.mkdir(sst_dir, 0o755)
        os.chown(sst_dir, *_mysql_uid_gid())
        self.hold_file = os.path.join(sst_dir, "hold")
        self.held_file = os.path.join(sst_dir, "held")
        self._write_sst_wrapper()
        self._watchdog = None
        self._start_watchdog()

    # -- secrets -------------------------------------------------------------
    def _make_creds(self, user):
        password = _secrets.token_urlsafe(18)
        pw_file = os.path.join(self.secrets_dir, user)
        cnf_file = os.path.join(self.secrets_dir, user + ".cnf")
        _write_secret(pw_file, password)
        _write_secret(cnf_file, f"[client]\nuser={user}\npassword={password}\n")
        return Creds(user, password, pw_file, cnf_file)

    @property
    def client_cnf(self):
        return os.path.join(self.base, "client.cnf")

    # -- helpers -------------------------------------------------------------
    def _write_sst_wrapper(self):
        path = os.path.join(self.bin_dir, "wsrep_sst_skhold")
        with open(path, "w") as f:
            f.write(f"""#!/bin/sh
# SST method "skhold" of the sidekick test harness: rsync SST that a test can hold.
# While {self.hold_file} exists the DONOR side waits (at most 600 s) before running
# the real rsync SST, so the donor stays Donor/Desynced and the joiner stays in SST.
role=; prev=
for a in "$@"; do [ "$prev" = "--role" ] && role=$a; prev=$a; done
if [ "$role" = donor ] && [ -e '{self.hold_file}' ]; then
    echo "$$" > '{self.held_file}'
    i=0
    while [ -e '{self.hold_file}' ] && [ $i -lt 6000 ]; do sleep 0.1; i=$((i+1)); done
    rm -f '{self.held_file}'
fi
exec {RSYNC_SST} "$@"
""")
        os.chmod(path, 0o755)

    def _start_watchdog(self):
        """A separate process that cleans up BASE when this process dies."""
        self._watchdog = subprocess.Popen(
            [PYTHON, os.path.abspath(__file__), "_watchdog", self.base],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, start_new_session=True)

    def ensure_template(self):
        """Run mariadb-install-db once; later callers reuse the result."""
        with self._template_lock:
            if os.path.isdir(os.path.join(self.template, "mysql")):
                return self.template
            t0 = time.monotonic()
            log = os.path.join(self.base, "install-db.log")
            with open(log, "w") as out:
                rc = subprocess.call(
                    [INSTALL_DB, "--no-defaults", "--user=mysql",
                     f"--datadir={self.template}",
                     "--auth-root-authentication-method=socket", "--skip-test-db",
                     "--skip-name-resolve", "--innodb-buffer-pool-size=32M",
                     "--innodb-log-file-size=16M", "--performance-schema=OFF"],
                    stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                    timeout=120)
            if rc != 0:
                with open(log) as f:
                    tail = "".join(f.readlines()[-30:])
                raise HarnessError(f"mariadb-install-db failed (rc={rc}):\n{tail}")
            self.timings["install-db"] = time.monotonic() - t0
            return self.template

    def env(self):
        """Environment for mariadbd: our bin dir on PATH, no inherited secrets."""
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("MYSQL", "MARIADB"))}
        env["PATH"] = self.bin_dir + ":/usr/sbin:/usr/bin:/sbin:/bin"
        env["LANG"] = "C"
        env.pop("LC_ALL", None)
        return env

    def keep_servers(self):
        """Leave servers and BASE in place when this process exits."""
        self.keep = True
        with open(os.path.join(self.base, "KEEP"), "w") as f:
            f.write("servers left running on purpose\n")

    def destroy(self):
        """Kill every server of this workspace and remove BASE (unless kept)."""
        self.closed = True
        if self.keep:
            return
        kill_everything_under(self.base)
        shutil.rmtree(self.base, ignore_errors=True)
        if self._watchdog is not None:
            with contextlib.suppress(Exception):
                self._watchdog.stdin.close()
                self._watchdog.wait(timeout=5)


# ---------------------------------------------------------------------------
class MariaDB:
    """One mariadbd process with its own directory ``BASE/<name>``.

    ``options`` are extra ``[mariadbd]`` lines for its option file. SQL goes
    through :meth:`sql` as root over the unix socket.
    """

    ready_timeout = 60.0

    def __init__(self, ws: Workspace, name, ip, port, options=(), server_id=1, netns=None):
        self.ws = ws
        self.netns = netns                  # a network namespace to run in (`ip netns exec`)
        self.base = ws.base
        self.name = name
        self.ip = ip
        self.port = port
        self.server_id = server_id
        self.dir = os.path.join(ws.base, name)
        self.datadir = os.path.join(self.dir, "data")
        self.socket = os.path.join(self.dir, "sock")
        self.error_log = os.path.join(self.dir, "error.log")
        self.stdout_log = os.path.join(self.dir, "stdout.log")
        self.cnf = os.path.join(self.dir, "my.cnf")
        self.pid_file = os.path.join(self.dir, "mariadbd.pid")
        self.options = list(options)
        self.proc: subprocess.Popen | None = None
        self.sigstopped = False
        uid, gid = _mysql_uid_gid()
        os.makedirs(self.dir, exist_ok=True)
        os.chown(self.dir, uid, gid)
        os.chmod(self.dir, 0o755)
        self.write_cnf()
        with _REGISTRY_LOCK:
            _REGISTRY.append(self)

    def __repr__(self):
        return f"<{type(self).__name__} {self.name} {self.ip}:{self.port} pid={self.pid}>"

    # -- files -----------------------------------------------------------------
    def cnf_lines(self):
        return [
            f"datadir={self.datadir}",
            f"socket={self.socket}",
            f"pid-file={self.pid_file}",
            f"log-error={self.error_log}",
            f"bind-address={self.ip}",
            f"port={self.port}",
            f"server_id={self.server_id}",
            *COMMON_OPTIONS,
            *self.options,
        ]

    def write_cnf(self):
        with open(self.cnf, "w") as f:
            f.write(f"# {self.name}: written by tests/integration/servers.py\n")
            f.write("[mariadbd]\n" + "\n".join(self.cnf_lines()) + "\n")

    def init_from_template(self):
        """Give this server a copy of the freshly installed template datadir."""
        src = self.ws.ensure_template()
        if os.path.exists(self.datadir):
            shutil.rmtree(self.datadir)
        subprocess.check_call(["cp", "-a", src, self.datadir])

    def wipe_datadir(self):
        """Leave an empty datadir owned by mysql (a Galera joiner then needs SST)."""
        if os.path.exists(self.datadir):
            shutil.rmtree(self.datadir)
        os.mkdir(self.datadir, 0o750)
        uid, gid = _mysql_uid_gid()
        os.chown(self.datadir, uid, gid)

    # -- logs ------------------------------------------------------------------
    def log_size(self):
        try:
            return os.path.getsize(self.error_log)
        except OSError:
            return 0

    def log_since(self, offset=0, max_lines=80):
        """Error-log lines written after byte ``offset`` (the last ``max_lines``)."""
        try:
            with open(self.error_log, "rb") as f:
                f.seek(offset)
                data = f.read()
        except OSError:
            return ""
        lines = data.decode(errors="replace").splitlines()
        if len(lines) > max_lines:
            lines = [f"... ({len(lines) - max_lines} earlier lines omitted)"] + lines[-max_lines:]
        return "\n".join(lines)

    def log_tail(self, lines=40):
        text = self.log_since(0, lines)
        try:
            with open(self.stdout_log, errors="replace") as f:
                extra = f.read().strip()
        except OSError:
            extra = ""
        out = f"--- {self.name} {self.error_log} (tail) ---\n{text}"
        if extra:
            out += f"\n--- {self.name} stdout/stderr ---\n{extra[-2000:]}"
        return out

    # -- process -----------------------------------------------------------------
    @property
    def pid(self):
        return self.proc.pid if self.proc is not None else None

    @property
    def running(self):
        """True while our mariadbd process exists (stopped by SIGSTOP counts)."""
        return self.proc is not None and self.proc.poll() is None

    def spawn(self, *extra_args):
        """Start mariadbd (returns at once). Use :meth:`start` to also wait."""
        if self.ws.closed:
            raise HarnessError(f"not starting {self.name}: the workspace is shut down")
        if self.running:
            raise HarnessError(f"{self.name} is already running (pid {self.pid})")
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.socket)
        args = [MARIADBD, f"--defaults-file={self.cnf}", "--user=mysql", *extra_args]
        if self.netns:
            args = ["ip", "netns", "exec", self.netns, *args]    # execs mariadbd: same pid
        out = open(self.stdout_log, "ab")
        try:
            # start_new_session=True is setsid(): the server is not in pytest's
            # process group, so a terminal's Ctrl-C reaches only pytest, which
            # then stops the servers itself.
            self.proc = subprocess.Popen(
                args, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                env=self.ws.env(), start_new_session=True, cwd=self.dir)
        finally:
            out.close()
        self.sigstopped = False
        return self.proc

    def start(self, *extra_args, wait=True, timeout=None):
        self.spawn(*extra_args)
        if wait:
            self.wait_ready(timeout)
        return self

    def is_ready(self):
        return self.sql("SELECT 1")[0][0] == 1

    def wait_ready(self, timeout=None):
        return self.wait(f"{self.name} to accept SQL on {self.socket}",
                         self.is_ready, timeout or self.ready_timeout)

    def wait(self, what, predicate, timeout, interval=0.2):
        """Bounded wait that fails early (with the log) if the process exits."""
        def check():
            if self.ws.closed:
                raise HarnessError(f"workspace shut down while waiting for {what}")
            if not self.running:
                rc = self.proc.returncode if self.proc is not None else None
                raise HarnessError(f"{self.name} exited (rc={rc}) while waiting for "
                                   f"{what}\n{self.log_tail()}")
            return predicate()
        return wait_for(what, check, timeout, interval, details=self.log_tail)

    def stop(self, timeout=60.0):
        """SIGTERM (a clean shutdown) and wait for the process to exit."""
        if not self.running:
            return
        if self.sigstopped:
            self.sigcont()
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise HarnessError(f"{self.name} did not exit within {timeout:.0f}s of "
                               f"SIGTERM\n{self.log_tail()}") from None

    def kill(self, timeout=10.0):
        """SIGKILL the server's whole process group and reap it."""
        if not self.running:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise HarnessError(f"{self.name} survived SIGKILL for {timeout}s") from None
        self.sigstopped = False

    def sigstop(self):
        """Freeze mysqld: TCP connects still succeed, no greeting is ever sent.

        Returns once every thread of it is stopped: kill() returns before a thread running on
        another core has been stopped, and such a thread could still answer a query."""
        self.proc.send_signal(signal.SIGSTOP)
        self.sigstopped = True
        task_dir = "/proc/%d/task" % self.proc.pid
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                states = []
                for tid in os.listdir(task_dir):
                    with open(os.path.join(task_dir, tid, "stat")) as f:
                        states.append(f.read().rsplit(")", 1)[1].split()[0])
            except OSError:
                return                       # gone: nothing left to answer
            if states and all(st in ("T", "t") for st in states):
                return
            time.sleep(0.005)

    def sigcont(self):
        if self.running:
            self.proc.send_signal(signal.SIGCONT)
        self.sigstopped = False

    # -- SQL -------------------------------------------------------------------
    def connect(self, timeout=10, **kwargs):
        """A PyMySQL connection as root over the unix socket (autocommit on)."""
        return pymysql.connect(unix_socket=self.socket, user="root",
                               connect_timeout=timeout, read_timeout=timeout,
                               write_timeout=timeout, autocommit=True, **kwargs)

    def sql(self, query, args=None, timeout=10):
        """Run one statement as root; return all rows (tuples)."""
        conn = self.connect(timeout)
        try:
            with conn.cursor() as cur:
                cur.execute(query, args)
                return cur.fetchall()
        finally:
            conn.close()

    def value(self, query, args=None, timeout=10):
        rows = self.sql(query, args, timeout)
        return rows[0][0] if rows else None

    def variables(self, like):
        return dict(self.sql("SHOW GLOBAL VARIABLES LIKE %s", (like,)))

    def set_read_only(self, on=True):
        self.sql(f"SET GLOBAL read_only={'ON' if on else 'OFF'}")

    def create_users(self, creds, grants=MONITOR_GRANTS):
        """Create the harness users (monitor, clustercheckuser) on this server."""
        for c in creds:
            for host in ("localhost", "127.0.0.%"):
                self.sql("CREATE USER IF NOT EXISTS %s@%s IDENTIFIED BY %s",
                         (c.user, host, c.password))
                self.sql(f"GRANT {grants} ON *.* TO %s@%s", (c.user, host))


def single_node_galera(ws, name, ip, sql_port, gcomm_port, cluster_name, netns=None):
    """A 1-node Galera cluster (bootstrapped, Synced) with the harness users; not registered
    with a GaleraCluster. Ports are the caller's (free ones, or fixed ones inside `netns`)."""
    provider = ";".join([f"base_host={ip}", f"base_port={gcomm_port}",
                         f"gmcast.listen_addr=tcp://{ip}:{gcomm_port}",
                         f"ist.recv_addr={ip}:{gcomm_port + 1}", "gcache.size=32M"])
    opts = ["binlog_format=ROW", "innodb_autoinc_lock_mode=2", "wsrep_on=ON",
            f"wsrep_provider={GALERA_PROVIDER}", f"wsrep_cluster_name={cluster_name}",
            f"wsrep_cluster_address=gcomm://{ip}:{gcomm_port}", f"wsrep_node_address={ip}:{gcomm_port}",
            f'wsrep_provider_options="{provider}"', "wsrep_sst_method=rsync"]
    node = MariaDB(ws, name, ip, sql_port, opts, server_id=1, netns=netns)
    node.init_from_template()
    node.start("--wsrep-new-cluster", timeout=90)
    node.create_users([ws.creds["monitor"], ws.creds["clustercheckuser"]])
    wait_for(f"{name} to be Synced", lambda: dict(
        node.sql("SHOW GLOBAL STATUS LIKE 'wsrep_local_state'")).get("wsrep_local_state") == "4", 60)
    return node


# ---------------------------------------------------------------------------
class GaleraNode(MariaDB):
    """One Galera node; see the module docstring for addresses and ports.

    The wsrep status values each method produces are listed in docs/testing.md.
    """

    def __init__(self, ws, index, size=3):
        self.index = index
        ip = f"127.0.0.{index}"
        self.gcomm_port = GALERA_GCOMM_PORT + 10 * (index - 1)
        self.ist_port = self.gcomm_port + 1
        self.sst_port = GALERA_SST_PORT + 10 * (index - 1)
        peers = ",".join(f"127.0.0.{j}:{GALERA_GCOMM_PORT + 10 * (j - 1)}"
                         for j in range(1, size + 1))
        provider_options = ";".join([
            f"base_host={ip}", f"base_port={self.gcomm_port}",
            f"gmcast.listen_addr=tcp://{ip}:{self.gcomm_port}",
            f"ist.recv_addr={ip}:{self.ist_port}",
            "gcache.size=32M",
            "evs.suspect_timeout=PT5S", "evs.inactive_timeout=PT10S",
        ])
        options = [
            "binlog_format=ROW",
            "innodb_autoinc_lock_mode=2",
            "default_storage_engine=InnoDB",
            "wsrep_on=ON",
            f"wsrep_provider={GALERA_PROVIDER}",
            f"wsrep_cluster_name={CLUSTER_NAME}",
            f"wsrep_cluster_address=gcomm://{peers}",
            f"wsrep_node_name=node{index}",
            f"wsrep_node_address={ip}:{self.gcomm_port}",
            f"wsrep_node_incoming_address={ip}:{GALERA_SQL_PORT + index}",
            f'wsrep_provider_options="{provider_options}"',
            "wsrep_sst_method=rsync",
            f"wsrep_sst_receive_address={ip}:{self.sst_port}",
            "wsrep_sst_auth=mysql:",
            "wsrep_slave_threads=1",
        ]
        self.isolated = False
        super().__init__(ws, f"g{index}", ip, GALERA_SQL_PORT + index, options,
                         server_id=index)

    # -- state -------------------------------------------------------------------
    def status(self):
        """``SHOW GLOBAL STATUS LIKE 'wsrep_%'`` as a dict of strings."""
        return dict(self.sql("SHOW GLOBAL STATUS LIKE 'wsrep_%'", timeout=5))

    def is_synced(self):
        s = self.status()
        return (s.get("wsrep_local_state") == "4"
                and s.get("wsrep_cluster_status") == "Primary"
                and s.get("wsrep_ready") == "ON")

    def wait_synced(self, timeout=60.0):
        """Wait for wsrep_local_state=4 (Synced), Primary, ready ON."""
        return self.wait(f"{self.name} to be Synced/Primary (wsrep_local_state=4)",
                         self.is_synced, timeout, interval=0.25)

    def wait_status(self, what, predicate, timeout=30.0):
        """Wait until ``predicate(status_dict)`` is true."""
        return self.wait(f"{self.name}: {what}", lambda: predicate(self.status()),
                         timeout, interval=0.25)

    # -- transitions -------------------------------------------------------------
    def start(self, *extra_args, wait=True, timeout=None, bootstrap=False):
        """Start (bootstrap=True: ``--wsrep-new-cluster``); wait until Synced."""
        if bootstrap:
            extra_args = ("--wsrep-new-cluster", *extra_args)
        self.spawn(*extra_args)
        self.isolated = False
        if wait:
            self.wait_synced(timeout or self.ready_timeout)
        return self

    def desync(self, on=True, timeout=30.0):
        """``SET GLOBAL wsrep_desync``: state 2 Donor/Desynced, still Primary.

        ``desync(False)`` waits until the node is Synced (4) again. The provider refuses the
        change for a moment at times (error 1396, "Operation 'desync' failed"; seen once in a CI
        run right after a neighbour's SIGSTOP/SIGCONT): that is retried until ``timeout``.
        """
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.sql(f"SET GLOBAL wsrep_desync={'ON' if on else 'OFF'}")
                break
            except pymysql.err.OperationalError as e:
                if e.args[0] != 1396 or time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        if on:
            self.wait_status("wsrep_local_state=2 after desync",
                             lambda s: s.get("wsrep_local_state") == "2", timeout)
        else:
            self.wait_synced(timeout)

    def set_read_only(self, on=True, timeout=30.0):
        """``SET GLOBAL read_only``; waits until the wsrep state is back to Synced.

        On MariaDB 10.11 with Galera, setting read_only=ON briefly desyncs and
        pauses the provider (Donor/Desynced -> Joined -> Synced within ~0.1 s), so
        the status is only "unchanged" once that blip is over.
        """
        was_synced = self.status().get("wsrep_local_state") == "4"
        super().set_read_only(on)
        if was_synced:
            self.wait_synced(timeout)

    def isolate(self, timeout=30.0):
        """gmcast.isolate=1; wait until this node reports non-Primary (5-7 s)."""
        self.sql("SET GLOBAL wsrep_provider_options='gmcast.isolate=1'")
        self.isolated = True
        self.wait_status("non-Primary after gmcast.isolate=1",
                         lambda s: s.get("wsrep_cluster_status") == "non-Primary",
                         timeout)

    def unisolate(self, wait=True, timeout=60.0):
        """gmcast.isolate=0; wait until Synced/Primary again."""
        self.sql("SET GLOBAL wsrep_provider_options='gmcast.isolate=0'")
        self.isolated = False
        if wait:
            self.wait_synced(timeout)

    # A node frozen for about evs.suspect_timeout (5 s) or more may be evicted by its peers a
    # moment after it is thawed (their view change was under way), and then it drops to
    # non-Primary and rejoins: its status reads healthy until then. Until evs.inactive_timeout
    # (10 s) and a margin have passed since the SIGCONT, the cluster is not called healthy.
    SETTLE_AFTER_STOP_S, SETTLE_S = 4.0, 12.0

    def sigstop(self):
        super().sigstop()
        self.stopped_at = time.monotonic()

    def sigcont(self, wait=False, timeout=60.0):
        """SIGCONT; with wait=True also wait until Synced (it rejoins by itself)."""
        was_stopped = self.sigstopped
        super().sigcont()
        if was_stopped and time.monotonic() - getattr(self, "stopped_at", 0) >= self.SETTLE_AFTER_STOP_S:
            self.settle_until = time.monotonic() + self.SETTLE_S
        if wait:
            self.wait_synced(timeout)


# ---------------------------------------------------------------------------
@dataclasses.dataclass
class HeldSST:
    joiner: GaleraNode
    donor: GaleraNode


class GaleraCluster:
    """Three :class:`GaleraNode` objects; ``cluster[1]`` is node 1 (1-based)."""

    def __init__(self, ws: Workspace, size=3):
        self.ws = ws
        self.nodes = [GaleraNode(ws, i, size) for i in range(1, size + 1)]
        self.timings: dict[str, float] = {}
        self._held: HeldSST | None = None

    def __getitem__(self, index):
        return self.nodes[index - 1]

    def __iter__(self):
        return iter(self.nodes)

    def __len__(self):
        return len(self.nodes)

    @property
    def monitor(self):
        return self.ws.creds["monitor"]

    def start(self, timeout=60.0):
        """Bootstrap node 1, create the users, then let the others SST in."""
        t0 = time.monotonic()
        first = self.nodes[0]
        first.init_from_template()
        first.start(bootstrap=True, timeout=timeout)
        first.create_users([self.ws.creds["monitor"], self.ws.creds["clustercheckuser"]])
        first.sql(f"CREATE DATABASE IF NOT EXISTS {HARNESS_DB}")
        self.timings["bootstrap"] = time.monotonic() - t0
        for n in self.nodes[1:]:
            n.wipe_datadir()
        self._join(self.nodes[1:], timeout)
        for n in self.nodes[1:]:
            n.wait_synced(timeout)
        self.wait_healthy(timeout)
        self.timings["start"] = time.monotonic() - t0
        return self

    def _join(self, joiners, timeout=60.0):
        """Start ``joiners`` one after the other.

        Each one is spawned once the previous one is a member of the Primary
        component (its state transfer may still run). Two nodes joining at the
        same instant make the group membership churn for 7-8 s; one at a time
        costs nothing since a donor serves one SST at a time anyway.
        """
        for n in joiners:
            ref = next((m for m in self._primary_nodes(
                [m for m in self.nodes if m.running and m is not n])), None)
            before = int(ref.status()["wsrep_cluster_size"]) if ref else 0
            n.spawn()
            if ref is None:
                continue
            n.wait(f"{n.name} to enter the Primary component (size > {before} "
                   f"on {ref.name})",
                   lambda: int(ref.status()["wsrep_cluster_size"]) > before,
                   timeout, interval=0.1)
            if n is joiners[-1]:
                continue
            # Let its state transfer get going before the next view change:
            # wait (briefly, not an error) for a donor or for the node itself.
            with contextlib.suppress(HarnessError):
                wait_for(f"{n.name}'s state transfer to begin",
                         lambda: any(m.status().get("wsrep_local_state") == "2"
                                     for m in self.nodes
                                     if m.running and m is not n) or n.is_synced(),
                         5.0, interval=0.1)

    # -- health ----------------------------------------------------------------
    def problems(self):
        """What is not healthy right now (empty list = healthy)."""
        out = []
        size = str(len(self.nodes))
        for n in self.nodes:
            if not n.running:
                out.append(f"{n.name} not running")
                continue
            if n.sigstopped:
                out.append(f"{n.name} SIGSTOPped")
                continue
            if time.monotonic() < getattr(n, "settle_until", 0):
                out.append(f"{n.name} thawed after a long SIGSTOP: its peers may still evict it")
                continue
            try:
                s = n.status()
                ro, desync = n.sql("SELECT @@read_only, @@wsrep_desync", timeout=5)[0]
            except Exception as exc:  # noqa: BLE001
                out.append(f"{n.name} not answering SQL ({exc})")
                continue
            want = {"wsrep_local_state": "4", "wsrep_cluster_status": "Primary",
                    "wsrep_ready": "ON", "wsrep_cluster_size": size,
                    "wsrep_connected": "ON"}
            for k, v in want.items():
                if s.get(k) != v:
                    out.append(f"{n.name} {k}={s.get(k)} (want {v})")
            if ro:
                out.append(f"{n.name} read_only=ON")
            if desync:
                out.append(f"{n.name} wsrep_desync=ON")
        return out

    def wait_healthy(self, timeout=60.0):
        last = []

        def healthy():
            last[:] = self.problems()
            return not last
        wait_for("the Galera cluster to be healthy (all Synced, Primary, size "
                 f"{len(self.nodes)}, read_only OFF, desync OFF)", healthy, timeout,
                 interval=0.25,
                 details=lambda: "problems: " + "; ".join(last) + "\n"
                 + "\n".join(n.log_tail(20) for n in self.nodes))

    def heal(self, timeout=150.0):
        """Bring every node back to Synced/Primary/read_only OFF/desync OFF.

        Fast (one status round) when the cluster is already healthy. Otherwise:
        release a held SST, SIGCONT frozen nodes, lift gmcast.isolate, restore a
        Primary component (pc.bootstrap on the most advanced running node, or
        re-bootstrap from the most advanced stopped node when none runs), start
        stopped nodes (IST/SST), then clear desync and read_only everywhere.
        """
        settle = max(getattr(n, "settle_until", 0) for n in self.nodes) - time.monotonic()
        if settle > 0:
            time.sleep(settle)             # a thawed node's eviction, if any, has happened by then
        if not self.problems():
            return
        t0 = time.monotonic()
        deadline = t0 + timeout

        def left():
            return max(5.0, deadline - time.monotonic())

        self.release_sst()
        for n in self.nodes:
            if n.running and n.sigstopped:
                n.sigcont()
        for n in self.nodes:
            if n.running and n.isolated:
                with contextlib.suppress(Exception):
                    n.unisolate(wait=False)
        running = [n for n in self.nodes if n.running]
        if running:
            self._ensure_primary(running, min(left(), 40.0))
        else:
            self._rebootstrap(left())
        self._join([n for n in self.nodes if not n.running], min(left(), 60.0))
        for n in self.nodes:
            try:
                n.wait_ready(min(left(), 90.0))
                self._clear_flags(n)
                n.wait_synced(min(left(), 60.0))
            except HarnessError:
                # Last resort for this node: a fresh SST from an empty datadir.
                n.kill()
                n.wipe_datadir()
                n.start(timeout=min(left(), 90.0))
                self._clear_flags(n)
        self.wait_healthy(left())
        self.timings["last_heal"] = time.monotonic() - t0

    @staticmethod
    def _clear_flags(node, timeout=30.0):
        """desync OFF, read_only OFF (retried: a node that just finished IST may
        drop a connection or two while it initialises)."""
        def clear():
            ro, desync = node.sql("SELECT @@read_only, @@wsrep_desync")[0]
            if desync:
                node.sql("SET GLOBAL wsrep_desync=OFF")
            if ro:
                node.sql("SET GLOBAL read_only=OFF")
            return True
        node.wait(f"{node.name} to accept SET GLOBAL wsrep_desync/read_only=OFF",
                  clear, timeout, interval=0.3)

    def _primary_nodes(self, nodes):
        out = []
        for n in nodes:
            with contextlib.suppress(Exception):
                if n.status().get("wsrep_cluster_status") == "Primary":
                    out.append(n)
        return out

    def _ensure_primary(self, running, timeout):
        """Wait for a Primary component among running nodes; force one if none."""
        try:
            wait_for("a running node to be in the Primary component",
                     lambda: self._primary_nodes(running), min(timeout, 25.0),
                     interval=0.5)
            return
        except HarnessError:
            pass
        best, best_seqno = None, -2
        for n in running:
            with contextlib.suppress(Exception):
                seqno = int(n.status().get("wsrep_last_committed", "-1"))
                if seqno > best_seqno:
                    best, best_seqno = n, seqno
        if best is None:
            raise HarnessError("no running Galera node answers SQL\n"
                               + "\n".join(n.log_tail(20) for n in running))
        best.sql("SET GLOBAL wsrep_provider_options='pc.bootstrap=YES'")
        best.wait_synced(timeout)

    def _grastate(self, node):
        state = {}
        with contextlib.suppress(OSError):
            with open(os.path.join(node.datadir, "grastate.dat")) as f:
                for line in f:
                    if ":" in line and not line.startswith("#"):
                        k, v = line.split(":", 1)
                        state[k.strip()] = v.strip()
        return state

    def _rebootstrap(self, timeout):
        """All nodes down: bootstrap from the most advanced saved state."""
        def seqno(n):
            with contextlib.suppress(ValueError):
                return int(self._grastate(n).get("seqno", "-1"))
            return -1
        candidates = [n for n in self.nodes
                      if os.path.exists(os.path.join(n.datadir, "grastate.dat"))]
        if not candidates:
            raise HarnessError("every Galera node is down and none has a grastate.dat")
        best = max(candidates, key=seqno)
        path = os.path.join(best.datadir, "grastate.dat")
        with open(path) as f:
            text = f.read()
        with open(path, "w") as f:
            f.write(text.replace("safe_to_bootstrap: 0", "safe_to_bootstrap: 1"))
        best.start(bootstrap=True, timeout=timeout)

    # -- joiner / donor during SST ---------------------------------------------
    def hold_sst(self, joiner: GaleraNode, timeout=60.0) -> HeldSST:
        """Put ``joiner`` into a state transfer that does not finish.

        The joiner is stopped if running, its datadir emptied (so it needs a full
        SST) and it is started with ``--wsrep_sst_method=skhold``. The donor side
        of that method waits while ``BASE/sst/hold`` exists. Returns once a donor
        reports ``Donor/Desynced`` and is waiting: the joiner's SQL port refuses
        connections, the donor is state 2 and still Primary. Call
        :meth:`release_sst` (or use :meth:`held_sst` as a context manager).
        """
        if self._held is not None:
            raise HarnessError("an SST is already held")
        joiner.stop()
        joiner.wipe_datadir()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.ws.held_file)
        with open(self.ws.hold_file, "w") as f:
            f.write(joiner.name + "\n")
        joiner.spawn("--wsrep_sst_method=skhold")

        def donor():
            if not os.path.exists(self.ws.held_file):
                return None
            for n in self.nodes:
                if n is joiner or not n.running:
                    continue
                with contextlib.suppress(Exception):
                    if n.status().get("wsrep_local_state_comment") == "Donor/Desynced":
                        return n
            return None
        found = joiner.wait(f"a donor to start holding {joiner.name}'s SST", donor,
                            timeout, interval=0.2)
        self._held = HeldSST(joiner=joiner, donor=found)
        return self._held

    def release_sst(self, wait=False, timeout=60.0):
        """Let a held SST finish; with wait=True wait until the joiner is Synced."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.ws.hold_file)
        held, self._held = self._held, None
        if held is not None and wait:
            held.joiner.wait_synced(timeout)
            held.donor.wait_synced(timeout)

    @contextlib.contextmanager
    def held_sst(self, joiner: GaleraNode, timeout=60.0):
        held = self.hold_sst(joiner, timeout)
        try:
            yield held
        except BaseException:
            self.release_sst(wait=False)     # the next heal() waits for it
            raise
        self.release_sst(wait=True, timeout=timeout)

    # -- shutdown --------------------------------------------------------------
    def stop(self, timeout=60.0):
        """Stop every node with SIGTERM (in parallel) and wait."""
        self.release_sst()
        for n in self.nodes:
            if n.running:
                if n.sigstopped:
                    n.sigcont()
                n.proc.send_signal(signal.SIGTERM)
        for n in self.nodes:
            n.stop(timeout)

    def kill(self):
        for n in self.nodes:
            n.kill()


# ---------------------------------------------------------------------------
class AsyncPair:
    """A GTID primary (127.0.0.1:3321) and a read-only replica (:3322)."""

    def __init__(self, ws: Workspace):
        self.ws = ws
        common = ["binlog_format=ROW", "log_bin=binlog", "log_slave_updates=ON",
                  "gtid_domain_id=0", "relay_log=relay"]
        self.primary = MariaDB(ws, "a1", "127.0.0.1", ASYNC_PRIMARY_PORT,
                               common, server_id=21)
        self.replica = MariaDB(ws, "a2", "127.0.0.1", ASYNC_REPLICA_PORT,
                               common + ["read_only=ON"], server_id=22)
        self.timings: dict[str, float] = {}
        self._lag_conn = None
        self._broken_ids: list[int] = []
        self._next_broken_id = 1000         # never reused: a healed row stays on both servers

    @property
    def repl(self):
        return self.ws.creds["repl"]

    def start(self, timeout=60.0):
        t0 = time.monotonic()
        for s in (self.primary, self.replica):
            s.init_from_template()
            s.spawn()
        self.primary.wait_ready(timeout)
        p = self.primary
        p.create_users([self.ws.creds["monitor"], self.ws.creds["clustercheckuser"]])
        p.sql("CREATE USER IF NOT EXISTS %s@'127.0.0.%%' IDENTIFIED BY %s",
              (self.repl.user, self.repl.password))
        p.sql("GRANT REPLICATION SLAVE ON *.* TO %s@'127.0.0.%%'", (self.repl.user,))
        p.sql(f"CREATE DATABASE IF NOT EXISTS {HARNESS_DB}")
        p.sql(f"CREATE TABLE IF NOT EXISTS {HARNESS_DB}.lag "
              "(id INT PRIMARY KEY, v INT NOT NULL) ENGINE=InnoDB")
        p.sql(f"INSERT IGNORE INTO {HARNESS_DB}.lag VALUES (1, 0)")
        p.sql(f"CREATE TABLE IF NOT EXISTS {HARNESS_DB}.brk "
              "(id INT PRIMARY KEY) ENGINE=InnoDB")
        self.replica.wait_ready(timeout)
        self._configure_replica()
        self.wait_caught_up(timeout)
        self.timings["start"] = time.monotonic() - t0
        return self

    def _configure_replica(self):
        r = self.replica
        r.sql("STOP SLAVE")
        r.sql("CHANGE MASTER TO MASTER_HOST=%s, MASTER_PORT=%s, MASTER_USER=%s, "
              "MASTER_PASSWORD=%s, MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=1",
              (self.primary.ip, self.primary.port, self.repl.user, self.repl.password))
        r.sql("START SLAVE")

    # -- status ----------------------------------------------------------------
    def replica_status(self):
        """``SHOW REPLICA STATUS`` as a dict (values as the server returns them)."""
        conn = self.replica.connect(5)
        try:
            with conn.cursor(pymysql.cursors.DictCursor) as cur:
                cur.execute("SHOW REPLICA STATUS")
                row = cur.fetchone()
                return dict(row) if row else {}
        finally:
            conn.close()

    def seconds_behind(self):
        return self.replica_status().get("Seconds_Behind_Master")

    def wait_caught_up(self, timeout=30.0):
        """Both threads running, lag 0, replica applied the primary's GTID position."""
        def caught_up():
            pos = self.primary.value("SELECT @@gtid_binlog_pos")
            ok = self.replica.value("SELECT MASTER_GTID_WAIT(%s, 1)", (pos,), timeout=5)
            s = self.replica_status()
            return (ok == 0 and s.get("Slave_IO_Running") == "Yes"
                    and s.get("Slave_SQL_Running") == "Yes"
                    and s.get("Seconds_Behind_Master") == 0)
        return self.replica.wait("the replica to catch up with the primary "
                                 "(IO/SQL Yes, Seconds_Behind_Master 0)",
                                 caught_up, timeout, interval=0.2)

    def write(self):
        """One replicated write on the primary."""
        self.primary.sql(f"UPDATE {HARNESS_DB}.lag SET v=v+1 WHERE id=1")

    # -- transitions -------------------------------------------------------------
    def lag(self, min_seconds=1, timeout=None):
        """Make the replica lag; return once Seconds_Behind_Master >= min_seconds.

        A root connection on the replica holds a row lock (SELECT ... FOR UPDATE)
        that the next replicated UPDATE needs, then the primary writes: the SQL
        thread waits, and Seconds_Behind_Master grows by 1 per second until
        :meth:`unlag` (InnoDB lock wait timeout 50 s, then the SQL thread retries
        the transaction, so the lag keeps growing).
        """
        if self._lag_conn is None:
            conn = self.replica.connect(10)
            conn.autocommit(False)
            with conn.cursor() as cur:
                cur.execute("BEGIN")
                cur.execute(f"SELECT v FROM {HARNESS_DB}.lag WHERE id=1 FOR UPDATE")
            self._lag_conn = conn
            self.write()

        def lagging():
            sbm = self.seconds_behind()
            return sbm if sbm is not None and sbm >= min_seconds else None
        return self.replica.wait(f"Seconds_Behind_Master >= {min_seconds}", lagging,
                                 timeout or min_seconds + 30, interval=0.2)

    def unlag(self, wait=True, timeout=30.0):
        conn, self._lag_conn = self._lag_conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.rollback()
            with contextlib.suppress(Exception):
                conn.close()
        if wait:
            self.wait_caught_up(timeout)

    @contextlib.contextmanager
    def lagging(self, min_seconds=1):
        try:
            yield self.lag(min_seconds)
        finally:
            self.unlag()

    def stop_sql_thread(self):
        """STOP SLAVE SQL_THREAD: Slave_SQL_Running No, Seconds_Behind_Master NULL."""
        self.replica.sql("STOP SLAVE SQL_THREAD")

    def start_sql_thread(self):
        self.replica.sql("START SLAVE SQL_THREAD")

    def break_sql(self, timeout=30.0):
        """Make the SQL thread fail with a duplicate key (Last_SQL_Errno 1062)."""
        row_id = self._next_broken_id
        self._next_broken_id += 1
        self._broken_ids.append(row_id)
        conn = self.replica.connect()
        try:
            with conn.cursor() as cur:
                cur.execute("SET SESSION sql_log_bin=0")
                cur.execute(f"INSERT INTO {HARNESS_DB}.brk VALUES (%s)", (row_id,))
        finally:
            conn.close()
        self.primary.sql(f"INSERT INTO {HARNESS_DB}.brk VALUES (%s)", (row_id,))
        return self.replica.wait(
            "the replica SQL thread to stop with an error",
            lambda: (lambda s: s if s.get("Slave_SQL_Running") == "No"
                     and s.get("Last_SQL_Errno") else None)(self.replica_status()),
            timeout)

    def stop_primary(self, timeout=60.0):
        """SIGTERM the primary: the replica's IO thread goes Connecting (2003)."""
        self.primary.stop(timeout)

    def start_primary(self, timeout=60.0):
        self.primary.start(timeout=timeout)

    def heal(self, timeout=90.0):
        """Back to: both running, IO/SQL Yes, lag 0, replica read_only ON."""
        self.unlag(wait=False)
        for s in (self.primary, self.replica):
            if s.running and s.sigstopped:
                s.sigcont()
            if not s.running:
                s.start(timeout=timeout)
        r = self.replica
        st = self.replica_status()
        if st.get("Slave_SQL_Running") != "Yes" and st.get("Last_SQL_Errno"):
            r.sql("STOP SLAVE")
            conn = r.connect()
            try:
                with conn.cursor() as cur:
                    cur.execute("SET SESSION sql_log_bin=0")
                    for row_id in self._broken_ids:
                        cur.execute(f"DELETE FROM {HARNESS_DB}.brk WHERE id=%s", (row_id,))
            finally:
                conn.close()
            self._broken_ids.clear()
        if not st:
            self._configure_replica()
        else:
            r.sql("START SLAVE")
        if not self.replica.value("SELECT @@read_only"):
            r.set_read_only(True)
        if self.primary.value("SELECT @@read_only"):
            self.primary.set_read_only(False)
        try:
            self.wait_caught_up(min(timeout, 30.0))
        except HarnessError:
            # Unknown SQL error: skip offending events one by one (bounded).
            for _ in range(10):
                st = self.replica_status()
                if not st.get("Last_SQL_Errno"):
                    break
                r.sql("STOP SLAVE")
                r.sql("SET GLOBAL sql_slave_skip_counter=1")
                r.sql("START SLAVE")
                time.sleep(0.5)
            self.wait_caught_up(timeout)

    def stop(self, timeout=60.0):
        self.unlag(wait=False)
        for s in (self.replica, self.primary):
            s.stop(timeout)


# ---------------------------------------------------------------------------
def ports_in_use(ports):
    """(ip, port) pairs from ``ports`` that something on this machine listens on."""
    busy = []
    for ip, port in ports:
        s = socket.socket()
        try:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind((ip, port))
        except OSError:
            busy.append((ip, port))
        finally:
            s.close()
    return busy


def galera_ports(size=3):
    out = []
    for i in range(1, size + 1):
        ip = f"127.0.0.{i}"
        g = GALERA_GCOMM_PORT + 10 * (i - 1)
        out += [(ip, GALERA_SQL_PORT + i), (ip, g), (ip, g + 1),
                (ip, GALERA_SST_PORT + 10 * (i - 1))]
    return out


def async_ports():
    return [("127.0.0.1", ASYNC_PRIMARY_PORT), ("127.0.0.1", ASYNC_REPLICA_PORT)]


class ServerLock:
    """Machine-wide lock: one test run at a time owns the fixed 33xx/44xx/45xx ports."""

    def __init__(self, path=LOCK_FILE):
        self.path = path
        self.fd = None
        self._thread_lock = threading.Lock()   # flock() is per open file, not per process

    def acquire(self, timeout=900.0):
        with self._thread_lock:
            self._acquire(timeout)

    def _acquire(self, timeout):
        if self.fd is not None:
            return
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        deadline = time.monotonic() + timeout
        warned = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    os.close(fd)
                    raise HarnessError(f"another test run holds {self.path} (waited "
                                       f"{timeout:.0f}s for its servers to stop)")
                if not warned:
                    print(f"servers.py: waiting for another test run to release "
                          f"{self.path}", file=sys.stderr)
                    warned = True
                time.sleep(0.5)
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self.fd = fd

    def release(self):
        with self._thread_lock:
            if self.fd is not None:
                with contextlib.suppress(OSError):
                    fcntl.flock(self.fd, fcntl.LOCK_UN)
                    os.close(self.fd)
                self.fd = None


def all_servers():
    with _REGISTRY_LOCK:
        return list(_REGISTRY)


def connection_help(ws, galera=None, pair=None):
    """Human text: how to reach the servers of ``ws`` (no passwords in it)."""
    lines = [f"servers of this run live in {ws.base}",
             f"monitor user option file: {ws.client_cnf}"]
    for s in (list(galera or []) + ([pair.primary, pair.replica] if pair else [])):
        if s.running:
            lines.append(f"  {s.name} pid {s.pid}: mariadb --defaults-extra-file="
                         f"{ws.client_cnf} -h {s.ip} -P {s.port}   |   root: mariadb "
                         f"-u root -S {s.socket}   (log {s.error_log})")
    lines.append(f"stop them: {PYTHON} {os.path.abspath(__file__)} stop {ws.base}")
    return "\n".join(lines)


def _watchdog(base):
    """Block until our parent closes the pipe (or dies), then clean BASE up."""
    with contextlib.suppress(Exception):
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
    with contextlib.suppress(Exception):
        sys.stdin.buffer.read()
    if os.path.exists(os.path.join(base, "KEEP")):
        return 0
    for pid in _procs_under(base):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while _procs_under(base) and time.monotonic() < deadline:
        time.sleep(0.1)
    shutil.rmtree(base, ignore_errors=True)
    return 0


def _main(argv):
    """CLI: ``up [galera|async|both]``, ``stop BASE``, ``_watchdog BASE``."""
    if len(argv) >= 2 and argv[0] == "_watchdog":
        return _watchdog(argv[1])
    if len(argv) >= 2 and argv[0] == "stop":
        base = os.path.realpath(argv[1])
        if not base.startswith("/tmp/sk-"):
            print(f"refusing: {base} is not a harness directory", file=sys.stderr)
            return 2
        ok = kill_everything_under(base)
        shutil.rmtree(base, ignore_errors=True)
        print(f"stopped servers of {base}" if ok else f"some processes of {base} remain")
        return 0 if ok else 1
    if argv and argv[0] == "up":
        what = argv[1] if len(argv) > 1 else "both"
        lock = ServerLock()
        lock.acquire(timeout=5)
        ws = Workspace()
        galera = pair = None
        try:
            if what in ("galera", "both"):
                galera = GaleraCluster(ws).start()
            if what in ("async", "both"):
                pair = AsyncPair(ws).start()
        except BaseException:
            ws.destroy()
            raise
        ws.keep_servers()
        print(connection_help(ws, galera, pair))
        return 0
    print(_main.__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
