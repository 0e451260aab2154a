"""SST evidence only from this mysqld's own processes, on the real Galera cluster.

Any local user can run a process named ``mysqld`` whose cwd is a datadir they can enter, with a
child ``wsrep_sst_rsync --role joiner --datadir DATADIR``. Here ``nobody`` does (a shell script
named mysqld, started with setpriv; the datadir gets o+x for the test so that nobody can enter
it, and its mode is restored). Such a process is never evidence: it does not make a dead node
alive, it does not hide the real joiner's mysqld (the fake, started first, has the lower pid and
comes first in /proc), and a probe running as mysql, which cannot read the fake's cwd, does not
take it for a mysqld it cannot see (which would keep a stale ``sst_in_progress`` alive). Only
processes of root, the probe's user or the datadir's owner (mysqld's user) count.

Run: make all && SIDEKICK_BIN=$PWD/bin /usr/bin/python3 -m pytest -q tests/integration/test_sst_owner.py
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import time

import pytest

import probes_cases as pc
from servers import wait_for

NOBODY = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
LIVENESS = os.path.join(pc.BIN, "liveness-check")
HEALTHCHECK = os.path.join(pc.BIN, "healthcheck")

FAKE_MYSQLD = """#!/bin/sh
# A process named mysqld (its comm is this script's name), run by another user: its cwd is the
# datadir ($1), re-entered every 0.2 s (the datadir may be re-created), and with $2 = joiner a
# joiner SST script of that datadir under it.
if [ "$2" = joiner ]; then
    "$(dirname "$0")/wsrep_sst_rsync" --role joiner --address 127.0.0.1:4444 --datadir "$1/" --parent $$ &
fi
while :; do cd "$1" 2>/dev/null; sleep 0.2; done
"""
FAKE_SST = "#!/bin/sh\nwhile :; do sleep 1; done\n"


@pytest.fixture(scope="module", autouse=True)
def _secrets(mysql_creds):
    pc.register_secret(mysql_creds.password)


@pytest.fixture
def fake_bin():
    """The fake mysqld and SST scripts, in a directory nobody can read."""
    d = tempfile.mkdtemp(prefix="sk-fake-")
    os.chmod(d, 0o755)
    for name, text in (("mysqld", FAKE_MYSQLD), ("wsrep_sst_rsync", FAKE_SST)):
        with open(os.path.join(d, name), "w") as f:
            f.write(text)
        os.chmod(os.path.join(d, name), 0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@contextlib.contextmanager
def open_to_others(*dirs):
    """o+x on each directory (nobody may chdir into the datadir), each mode restored on exit."""
    saved = []
    try:
        for d in dirs:
            mode = stat.S_IMODE(os.stat(d).st_mode)
            saved.append((d, mode))
            os.chmod(d, mode | 0o001)
        yield
    finally:
        for d, mode in reversed(saved):
            with contextlib.suppress(FileNotFoundError):
                os.chmod(d, mode)


def _cwd(pid):
    with contextlib.suppress(OSError):
        return os.readlink(f"/proc/{pid}/cwd")
    return None


def _children(pid):
    with contextlib.suppress(OSError):
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(x) for x in f.read().split()]
    return []


@contextlib.contextmanager
def fake_mysqld(fake_bin, datadir, joiner):
    """Start the fake as nobody in its own process group; yield it (a Popen); kill the whole group
    on every path."""
    p = subprocess.Popen([*NOBODY, os.path.join(fake_bin, "mysqld"), datadir, "joiner" if joiner else "none"],
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True)
    try:
        wait_for("the fake to run as nobody", lambda: _owner(p.pid) == 65534, 10, 0.05)
        if joiner:
            wait_for("the fake's joiner script", lambda: _children(p.pid), 10, 0.05)
        yield p
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p.pid, signal.SIGKILL)
        p.wait(timeout=10)


def _owner(pid):
    with contextlib.suppress(OSError):
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("Uid:"):
                    return int(line.split()[1])
    return None


def wait_in(p, datadir):
    wait_for(f"the fake in {datadir}", lambda: _cwd(p.pid) == os.path.realpath(datadir), 10, 0.05)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stale(path, datadir):
    """An sst_in_progress of the datadir's owner, 400 s old."""
    with open(path, "w"):
        pass
    os.chown(path, os.stat(datadir).st_uid, os.stat(datadir).st_gid)
    old = time.time() - 400
    os.utime(path, (old, old))


def alive(node, *args, who=(), creds=None):
    argv = [*who, LIVENESS, "--host", node.ip, "--port", str(node.port), "--defaults-extra-file", "",
            "--datadir", node.datadir, "--recovery-file", "/nonexistent/recovery-case", "--timeout", "2",
            "--json", *args]
    if creds:
        argv += ["--user", creds.user, "--password-file", creds.password_file]
    r = pc.run(argv)
    lines = r.out.decode().splitlines()
    assert len(lines) == 1, r
    return r.rc, json.loads(lines[0])


@pytest.mark.fault
def test_another_users_mysqld_is_no_evidence_for_a_dead_node(healthy_galera, mysql_creds, fake_bin, tmp_path):
    """With the node stopped, nobody's mysqld with a joiner child in the datadir keeps nothing alive (liveness-check and healthcheck --alive-during-sst, a stale sst_in_progress neither), and the line names it."""
    node = healthy_galera[3]
    node.stop()
    sst_file = os.path.join(node.datadir, "sst_in_progress")
    try:
        with open_to_others(node.dir, node.datadir), fake_mysqld(fake_bin, node.datadir, joiner=True) as fake:
            wait_in(fake, node.datadir)
            # 1. A dead node is not alive on another user's "joiner".
            rc, v = alive(node, creds=mysql_creds)
            assert rc == 1 and v["reason"] == "connection refused", v
            assert "receiving an SST" not in v["message"], v
            cnf = tmp_path / "none.cnf"
            cnf.write_text(f"[client]\nsocket=/nonexistent/sock\nport={node.port}\n")
            r = pc.run([HEALTHCHECK, "--no-defaults", f"--defaults-extra-file={cnf}", "--datadir", node.datadir,
                        "--alive-during-sst", "--connect", "--json"])
            assert r.rc == 1, r

            # A stale sst_in_progress (mysql's, 400 s old): ignored, and the line names the fake.
            stale(sst_file, node.datadir)
            rc, v = alive(node)
            assert rc == 1 and v["message"].startswith("not alive: connection refused"), v
            assert "; sst_in_progress ignored: 40" in v["message"], v
            assert (f"no mysqld process has its cwd in {os.path.realpath(node.datadir)}; mysqld pid "
                    f"{fake.pid} of uid 65534 passed over: not root, the probe's user or the datadir's owner") in v["message"], v
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(sst_file)
        healthy_galera.heal()


@pytest.mark.fault
def test_another_users_mysqld_does_not_hide_the_real_joiner(healthy_galera, mysql_creds, fake_bin):
    """nobody's mysqld in the joiner's datadir, first in /proc (a lower pid), is passed over: the real joiner's mysqld and its SST script keep the joiner alive."""
    cluster = healthy_galera
    joiner = cluster[3]
    # Started before the joiner's mysqld: the lower pid, met first in /proc. It enters the datadir
    # once the datadir is re-created and open to others.
    with fake_mysqld(fake_bin, joiner.datadir, joiner=False) as fake:
        with cluster.held_sst(joiner) as held:
            assert held.joiner is joiner and fake.pid < joiner.pid, (fake.pid, joiner.pid)
            with open_to_others(joiner.dir, joiner.datadir):
                wait_in(fake, joiner.datadir)
                # An SST method that writes neither file (wsrep_sst.pid would name the real mysqld):
                # mysqld is found by its cwd.
                for name in ("wsrep_sst.pid", "sst_in_progress"):
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(os.path.join(joiner.datadir, name))
                for _ in range(3):
                    rc, v = alive(joiner, creds=mysql_creds)
                    assert rc == 0 and v["reason"] == "sst", v
                    assert f"under mysqld pid {joiner.pid} (found by its cwd in /proc)" in v["message"], v


@pytest.mark.fault
def test_a_probe_run_as_the_datadir_owner_is_not_fooled_by_mysqlds_it_cannot_read(healthy_galera, fake_bin):
    """A probe running as the datadir's owner cannot read another user's mysqld's cwd: that mysqld is passed over, not taken for an unseen mysqld of the datadir, so a stale sst_in_progress no longer keeps a dead node alive."""
    # The harness's mysqlds are started by root (--user=mysql): not dumpable, so even a probe
    # running as mysql cannot read their cwd. The datadir's owner is therefore a stand-in,
    # daemon, with no mysqld running: the three real Galera mysqlds (mysql's) and the fake
    # (nobody's) are all another user's, and all unreadable to the probe.
    assert all(n.running for n in healthy_galera)
    base = tempfile.mkdtemp(prefix="sk-owner-")
    data = os.path.join(base, "data")
    try:
        os.chmod(base, 0o755)
        os.mkdir(data, 0o751)                          # o+x: the fake may enter it
        os.chown(data, 1, 1)
        stale(os.path.join(data, "sst_in_progress"), data)
        with fake_mysqld(fake_bin, data, joiner=True) as fake:
            wait_in(fake, data)
            argv = ["setpriv", "--reuid=daemon", "--regid=daemon", "--clear-groups", LIVENESS, "--host",
                    "127.0.0.1", "--port", str(free_port()), "--defaults-extra-file", "", "--datadir", data,
                    "--recovery-file", "/nonexistent/recovery-case", "--timeout", "2", "--json"]
            r = pc.run(argv)
            v = json.loads(r.out)
            assert r.rc == 1 and v["message"].startswith("not alive: connection refused"), v
            assert "; sst_in_progress ignored: 40" in v["message"], v
            assert f"no mysqld process has its cwd in {data}; mysqld pid " in v["message"], v
            assert "cannot be read" not in v["message"], v
    finally:
        shutil.rmtree(base, ignore_errors=True)
