"""pytest glue for the integration suite: real MariaDB servers as session fixtures.

Fixtures (see docs/testing.md):

* ``galera`` (session) - a started :class:`servers.GaleraCluster` (3 nodes).
* ``healthy_galera`` (function) - the same cluster after ``galera.heal()``; use it in
  every test that changes a node's state.
* ``async_pair`` (session) / ``healthy_async_pair`` (function) - a started
  :class:`servers.AsyncPair` (GTID primary 3321, replica 3322).
* ``mysql_creds`` (session) - :class:`servers.Creds` of the ``monitor`` user:
  ``user``, ``password``, ``password_file``, ``defaults_file``.
  ``clustercheck_creds`` is the same for ``clustercheckuser``. These do not start
  any server.
* ``sidekick_workspace`` (session) - the :class:`servers.Workspace` (``.base``).

Servers start lazily, the first time a test asks for them. When the collected
tests need both the cluster and the async pair, the second starts in a background
thread while the first is still coming up.

Cleanup: session fixture finalizers, ``pytest_sessionfinish``, ``atexit`` and
SIGTERM/SIGHUP handlers all stop the servers; a watchdog process (see servers.py)
does it if pytest itself is killed. ``SIDEKICK_KEEP_SERVERS=1`` leaves them running
and prints how to connect and how to stop them.

On a failing test the lines each server wrote to its error log during that test are
attached to the report ("mariadbd gN error log" sections).
"""

from __future__ import annotations

import atexit
import concurrent.futures
import os
import signal
import sys
import threading
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(HERE)
for _p in (TESTS, HERE):            # `import servers` and `from fakes.x import Y`
    if _p not in sys.path:
        sys.path.insert(0, _p)

import leftovers  # noqa: E402
from fakes import process  # noqa: E402
import servers  # noqa: E402

GALERA_FIXTURES = {"galera", "healthy_galera"}
ASYNC_FIXTURES = {"async_pair", "healthy_async_pair"}
START_TIMEOUT = float(os.environ.get("SIDEKICK_START_TIMEOUT", "240"))
LOCK_TIMEOUT = float(os.environ.get("SIDEKICK_LOCK_TIMEOUT", "900"))


def _keep_requested():
    return os.environ.get("SIDEKICK_KEEP_SERVERS", "") not in ("", "0", "no", "false")


class Lab:
    """Everything server-related of one pytest session, created on first use."""

    def __init__(self):
        self.ws: servers.Workspace | None = None
        self.lock = servers.ServerLock()
        self.pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=2, thread_name_prefix="sk-start")
        self.futures: dict[str, concurrent.futures.Future] = {}
        self.started: dict[str, float] = {}      # name -> seconds to start
        self.t0: float | None = None
        self.galera_obj = None
        self.pair_obj = None
        self.closed = False
        self.summary: list[str] = []
        self._mutex = threading.RLock()
        self._old_handlers = {}

    # -- lazy creation -----------------------------------------------------------
    def workspace(self):
        with self._mutex:
            if self.closed:
                raise servers.HarnessError("the test session's servers were shut down")
            if self.ws is None:
                self.ws = servers.Workspace()
                self._install_cleanup()
            return self.ws

    def _install_cleanup(self):
        atexit.register(self.shutdown)
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in (signal.SIGTERM, signal.SIGHUP):
            try:
                self._old_handlers[sig] = signal.signal(sig, self._on_signal)
            except (ValueError, OSError):
                pass

    def _on_signal(self, signum, frame):
        # Stop the servers, then die of the same signal as we would have.
        self.shutdown()
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    def _claim_ports(self, ports):
        """Take the machine-wide lock, then make sure the fixed ports are free."""
        self.lock.acquire(timeout=LOCK_TIMEOUT)
        busy = []

        def free():
            busy[:] = servers.ports_in_use(ports)
            return not busy
        try:
            servers.wait_for("the harness ports to be free", free, 15, interval=0.5)
        except servers.HarnessError:
            raise servers.HarnessError(
                f"ports {busy} are in use: servers kept by an earlier run "
                "(SIDEKICK_KEEP_SERVERS) or started by hand? Stop them with "
                f"'{servers.PYTHON} {servers.__file__} stop /tmp/sk-XXXXXXXX' "
                "(the kept run printed its directory)") from None

    def _start(self, name, ports, make):
        def job():
            t = time.monotonic()
            self._claim_ports(ports)
            if time.monotonic() - t > 1:
                self.started[name + " waited for the port lock"] = time.monotonic() - t
            t = time.monotonic()
            obj = make(self.workspace())
            self.started[name] = time.monotonic() - t
            self.started[name + " ready at"] = time.monotonic() - self.t0
            return obj
        with self._mutex:
            if name not in self.futures:
                self.workspace()
                if self.t0 is None:
                    self.t0 = time.monotonic()
                self.futures[name] = self.pool.submit(job)
            return self.futures[name]

    def galera_future(self):
        def make(ws):
            self.galera_obj = servers.GaleraCluster(ws)
            return self.galera_obj.start()
        return self._start("galera", servers.galera_ports(), make)

    def async_future(self):
        def make(ws):
            self.pair_obj = servers.AsyncPair(ws)
            return self.pair_obj.start()
        return self._start("async pair", servers.async_ports(), make)

    @staticmethod
    def result(future, what):
        try:
            return future.result(timeout=START_TIMEOUT)
        except concurrent.futures.TimeoutError:
            raise servers.HarnessError(f"{what} did not start within "
                                       f"{START_TIMEOUT:.0f}s") from None

    # -- shutdown ----------------------------------------------------------------
    def shutdown(self):
        with self._mutex:
            if self.closed:
                return
            self.closed = True
        ws = self.ws
        if ws is not None:
            ws.closed = True
            if _keep_requested():
                ws.keep_servers()
                self.summary.append("SIDEKICK_KEEP_SERVERS is set: servers left running")
                self.summary.append(servers.connection_help(
                    ws, self.galera_obj, self.pair_obj))
            else:
                servers.kill_everything_under(ws.base)
        self.pool.shutdown(wait=False, cancel_futures=True)
        if ws is not None and not ws.keep:
            # A start thread may be between two steps: let it notice the
            # shutdown (bounded), then sweep again and remove the directory.
            deadline = time.monotonic() + 30
            for f in self.futures.values():
                try:
                    f.exception(timeout=max(0.1, deadline - time.monotonic()))
                except BaseException:  # noqa: BLE001 - cancelled or still running
                    pass
            ws.destroy()
        self.lock.release()


_LAB: Lab | None = None


def _lab():
    global _LAB
    if _LAB is None:
        _LAB = Lab()
    return _LAB


def _session_wants(session, names):
    return any(names & set(getattr(item, "fixturenames", ())) for item in session.items)


# -- fixtures --------------------------------------------------------------------
@pytest.fixture(scope="session")
def sidekick_lab():
    lab = _lab()
    yield lab
    lab.shutdown()


@pytest.fixture(scope="session")
def sidekick_workspace(sidekick_lab):
    return sidekick_lab.workspace()


@pytest.fixture(scope="session")
def mysql_creds(sidekick_workspace):
    """The monitor user (user, password, password_file, defaults_file)."""
    return sidekick_workspace.creds["monitor"]


@pytest.fixture(scope="session")
def clustercheck_creds(sidekick_workspace):
    return sidekick_workspace.creds["clustercheckuser"]


@pytest.fixture(scope="session")
def galera(request, sidekick_lab):
    """A running 3-node Galera cluster (session-wide; heal before changing it)."""
    fut = sidekick_lab.galera_future()
    if _session_wants(request.session, ASYNC_FIXTURES):
        sidekick_lab.async_future()          # start it alongside
    return sidekick_lab.result(fut, "the Galera cluster")


@pytest.fixture
def healthy_galera(galera):
    """The cluster, healed: all Synced/Primary, read_only OFF, desync OFF."""
    galera.heal()
    return galera


@pytest.fixture(scope="session")
def async_pair(request, sidekick_lab):
    """A running GTID primary/replica pair (session-wide)."""
    fut = sidekick_lab.async_future()
    if _session_wants(request.session, GALERA_FIXTURES):
        sidekick_lab.galera_future()
    return sidekick_lab.result(fut, "the async pair")


@pytest.fixture
def healthy_async_pair(async_pair):
    """The pair, healed: IO/SQL running, lag 0, replica read_only ON."""
    async_pair.heal()
    return async_pair


# -- hooks -----------------------------------------------------------------------
def pytest_addoption(parser):
    parser.addoption("--proxysql-double-version", choices=("2.7", "3.0"), default=None,
                     help="which ProxySQL admin interface the ProxySQL double plays (default: "
                          "$PROXYSQL_DOUBLE_VERSION, else 2.7, as recorded); ignored with PROXYSQL_BIN")


def pytest_configure(config):
    config.addinivalue_line("markers", "fault: a row of the fault matrix in docs/faults.md, whose expected "
                            "outcome is the first line of the test's docstring")
    version = config.getoption("--proxysql-double-version")
    if version:
        os.environ["PROXYSQL_DOUBLE_VERSION"] = version     # read by every double this run starts


def _sanitized_elsewhere():
    """The entries of tests/sanitized.list: (tests run under ASan, tests of theirs that are not)."""
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "sanitized.list")
    run, out = [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line.startswith("-"):
                out.append(line[1:])
            elif line:
                run.append(line)
    return run, out


def _listed(nodeid, entries):
    return any(nodeid == e or nodeid.startswith(e + "::") or nodeid.startswith(e + "[") for e in entries)


def pytest_collection_modifyitems(config, items):
    """make test: the tests that tests/sanitize.sh runs against ASan binaries run there only."""
    if os.environ.get("SIDEKICK_SANITIZED_ELSEWHERE") != "1":
        return
    run, out = _sanitized_elsewhere()
    gone = [it for it in items if _listed(it.nodeid, run) and not _listed(it.nodeid, out)]
    if gone:
        config.hook.pytest_deselected(items=gone)
        items[:] = [it for it in items if it not in gone]


_LOG_OFFSETS = pytest.StashKey[dict]()


def _key(server):
    return f"{server.base}/{server.name}"


@pytest.hookimpl(tryfirst=True)
@pytest.fixture(autouse=True)
def _stop_tracked_processes():
    """After every test (its own fixtures first): end the processes it started with
    fakes.process.track() and did not stop, whatever path it left by (skip, failure, error)."""
    yield
    process.stop_tracked()


def pytest_runtest_setup(item):
    item.stash[_LOG_OFFSETS] = {_key(s): s.log_size() for s in servers.all_servers()}


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item):
    # Servers may have started during setup: a failure in the test body shows
    # only what the servers logged while the body ran.
    item.stash[_LOG_OFFSETS] = {_key(s): s.log_size() for s in servers.all_servers()}


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if not report.failed:
        return
    offsets = item.stash.get(_LOG_OFFSETS, {})
    for s in servers.all_servers():
        text = s.log_since(offsets.get(_key(s), 0), max_lines=60)
        if text.strip():
            state = f"pid {s.pid}" if s.running else "not running"
            report.sections.append(
                (f"mariadbd {s.name} error log during this test ({state}, "
                 f"{s.error_log})", text))


_SESSION_START = time.time()
_LEFTOVERS = []


def pytest_sessionfinish(session, exitstatus):
    base = None
    if _LAB is not None:
        base = _LAB.ws.base if _LAB.ws is not None else None
        _LAB.shutdown()
    if _keep_requested() or hasattr(session.config, "workerinput"):
        return
    _LEFTOVERS[:] = leftovers.reap(_SESSION_START, [base and base + "/"])
    if _LEFTOVERS:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter):
    if _LEFTOVERS:
        terminalreporter.section("processes that outlived the suite (killed; the run fails)", red=True)
        for pid, cmd in _LEFTOVERS:
            terminalreporter.write_line(f"pid {pid}: {cmd[:300]}")
    lab = _LAB
    if lab is None or (not lab.started and not lab.summary):
        return
    tr = terminalreporter
    tr.section("sidekick test servers")
    if lab.ws is not None and lab.ws.timings.get("install-db"):
        tr.write_line(f"mariadb-install-db (template): {lab.ws.timings['install-db']:.1f}s")
    for name, secs in lab.started.items():
        tr.write_line(f"{name}: {secs:.1f}s")
    if lab.galera_obj is not None:
        for k, v in lab.galera_obj.timings.items():
            tr.write_line(f"galera {k}: {v:.1f}s")
    for line in lab.summary:
        tr.write_line(line)
