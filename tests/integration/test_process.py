"""Process-wide duties. clustercheck --listen and --register as PID 1 of a PID namespace of their
own, as the probes image runs them: every orphan reparented to them is reaped (proxysql-sync's own
case is in test_sync_faults.py). Every binary that holds a password or a token is not dumpable and
has a core size limit of 0: no core file, and no other process of its user reads its memory or
environment. No MySQL is needed: the listener checks only when asked, the registrar's checks fail
and it keeps going, a probe waits on a socket that never answers. Run as root:
/usr/bin/python3 -m pytest -q tests/integration/test_process.py
"""
import os
import signal
import socket
import subprocess
import time

import pytest

import pid1
from fakes.consul import Consul, free_port
from probe_names import PROBES

BIN = os.environ.get("SIDEKICK_BIN", os.path.join(os.path.dirname(__file__), "..", "..", "bin"))
CLUSTERCHECK = os.path.join(BIN, "clustercheck")


def reaps_orphans(cmd, tmp_path):
    pid1.need_namespaces()
    log = str(tmp_path / "pid1.log")
    outer, inner = pid1.start_pid1(cmd, log, "clustercheck")
    try:
        for _ in range(2):
            pid1.make_orphans(inner, 6)
            assert pid1.wait_no_children(inner, 5), "zombies left: %r" % pid1.zombies(inner)
        assert outer.poll() is None, "exited"
        assert pid1.stop(outer, inner, signal.SIGTERM) == 0
    finally:
        if outer.poll() is None:
            outer.kill()
            outer.wait(5)
        with open(log, errors="replace") as f:
            print(f.read())


def test_listen_as_pid1_reaps_orphans(tmp_path):
    reaps_orphans([CLUSTERCHECK, "--listen", "127.0.0.1:%d" % free_port(), "--host", "127.0.0.1",
                   "--port", str(free_port()), "--user", "nobody", "--defaults-extra-file", "",
                   "--timeout", "1"], tmp_path)


def test_register_as_pid1_reaps_orphans(tmp_path):
    consul = Consul()
    consul.start()
    try:
        reaps_orphans([CLUSTERCHECK, "--register", "--host", "127.0.0.1", "--port", str(free_port()),
                       "--user", "nobody", "--defaults-extra-file", "", "--consul-addr", consul.addr,
                       "--consul-prefix", "pid1-test", "--interval", "0.5", "--session-ttl", "10",
                       "--timeout", "1"], tmp_path)
    finally:
        consul.close()


NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


def assert_not_dumpable(pid):
    """Run as nobody, `pid` is not dumpable: /proc/PID/status is root's and nobody (its own user)
    cannot read its environment; its core size limit is 0, soft and hard."""
    with open("/proc/%d/status" % pid) as f:
        uid = [line.split()[1] for line in f if line.startswith("Uid:")][0]
    assert uid == "65534", uid
    assert os.stat("/proc/%d/status" % pid).st_uid == 0, "dumpable: /proc/PID/status belongs to its user"
    r = subprocess.run(NOBODY + ["cat", "/proc/%d/environ" % pid], capture_output=True, text=True, timeout=10)
    assert r.returncode != 0 and "Permission denied" in r.stderr, (r.returncode, r.stderr)
    with open("/proc/%d/limits" % pid) as f:
        core = [line.split()[4:6] for line in f if line.startswith("Max core file size")][0]
    assert core == ["0", "0"], core


def while_running(cmd, check):
    """Start `cmd` as nobody, wait until it runs its own binary, call check(pid), then stop it."""
    p = subprocess.Popen(NOBODY + cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        end = time.monotonic() + 5
        while time.monotonic() < end and p.poll() is None:
            if os.readlink("/proc/%d/exe" % p.pid) == os.path.realpath(cmd[0]):
                break
            time.sleep(0.01)
        time.sleep(0.2)                     # past main()'s first lines
        assert p.poll() is None, p.stdout.read()
        check(p.pid)
    finally:
        p.kill()
        p.wait(5)


@pytest.fixture
def silent_server():
    """A port that accepts TCP and never says a word: a probe waits there for its deadline."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(16)
    yield s.getsockname()[1]
    s.close()


def test_sync_agent_is_not_dumpable():
    while_running([os.path.join(BIN, "proxysql-sync"), "--admin-addr", "127.0.0.1:%d" % free_port(),
                   "--consul-addr", "127.0.0.1:%d" % free_port(), "--master-prefix", "", "--replica-prefix", "",
                   "--users-prefix", "u"], assert_not_dumpable)


def test_listener_is_not_dumpable():
    while_running([CLUSTERCHECK, "--listen", "127.0.0.1:%d" % free_port(), "--host", "127.0.0.1",
                   "--port", str(free_port()), "--user", "nobody", "--defaults-extra-file", ""],
                  assert_not_dumpable)


@pytest.mark.parametrize("probe", PROBES)
def test_probes_are_not_dumpable(probe, silent_server):
    cnf = "/tmp/sk-process-test-%d.cnf" % os.getpid()   # readable by nobody
    with open(cnf, "w") as f:
        f.write("[client]\nsocket=/nonexistent/mysqld.sock\nport=%d\n" % silent_server)
    os.chmod(cnf, 0o644)
    args = {
        "liveness-check": ["--host", "127.0.0.1", "--port", str(silent_server), "--timeout", "3"],
        "readiness-check": ["--host", "127.0.0.1", "--port", str(silent_server), "--timeout", "3"],
        "clustercheck": ["--host", "127.0.0.1", "--port", str(silent_server), "--timeout", "3"],
        "haproxy-check": ["--timeout", "3", "--port", str(silent_server), "127.0.0.1", "3306", "127.0.0.1"],
        "proxysql-check": ["--liveness", "--host", "127.0.0.1", "--port", str(silent_server), "--timeout", "3"],
        "healthcheck": ["--no-defaults", "--defaults-extra-file=" + cnf, "--timeout=3", "--connect"],
    }[probe]
    try:
        while_running([os.path.join(BIN, probe)] + args, assert_not_dumpable)
    finally:
        os.unlink(cnf)
