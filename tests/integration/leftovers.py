"""The session-end check that no process started by the suite outlives it.

A process counts as the suite's when it started after the session did and either runs a
file of this checkout (the binaries under test, a double in tests/fakes/), a real server
named by ``PROXYSQL_BIN`` / ``CONSUL_BIN``, or names the lab's workspace (``/tmp/sk-XXXXXXXX``)
or a directory given to :func:`mark` on its command line, or works in one (PostgreSQL's processes
name no directory but work in their data directory). pytest itself and its ancestors never count,
nor do zombies (they end with their parent). Survivors are reported, killed, and fail the
run, so a fixture that forgets a process on some path is caught where it happens.
"""

from __future__ import annotations

import os
import signal
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_TICKS = os.sysconf("SC_CLK_TCK")
_MARKED = []


def mark(directory):
    """Count the processes that name `directory` on their command line or work in it as the
    suite's from now on (a fixture's own temporary directory, e.g. a Patroni cluster's)."""
    if directory not in _MARKED:
        _MARKED.append(directory)


def unmark(directory):
    """Undo mark(directory)."""
    if directory in _MARKED:
        _MARKED.remove(directory)


def _boot_time():
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("btime "):
                return int(line.split()[1])
    return 0


def _stat(pid):
    """(state, start time in seconds since the epoch) of pid, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            text = f.read()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()
    return fields[0], _boot_time() + int(fields[19]) / _TICKS


def _ancestors():
    pids, pid = set(), os.getpid()
    while pid > 1:
        pids.add(pid)
        try:
            with open(f"/proc/{pid}/stat") as f:
                text = f.read()
        except OSError:
            break
        pid = int(text[text.rindex(")") + 2:].split()[1])
    return pids


def _cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def _exe(pid):
    try:
        return os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return ""


def _cwd(pid):
    try:
        return os.readlink(f"/proc/{pid}/cwd") + "/"
    except OSError:
        return ""


def _ours(exe, cmd, marks):
    return any(m and (exe.startswith(m) or m in cmd) for m in marks)


def find(since, extra_marks=()):
    """[(pid, command line)] of the suite's processes still alive that started at or after
    `since` (time.time() at the session's start)."""
    marks = [REPO + "/"] + [m for m in extra_marks if m]
    dirs = [m.rstrip("/") + "/" for m in list(extra_marks) + _MARKED if m]
    marks += _MARKED
    for var in ("PROXYSQL_BIN", "CONSUL_BIN"):
        if os.environ.get(var):
            marks.append(os.path.realpath(os.environ[var]))
    skip = _ancestors()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) in skip:
            continue
        pid = int(name)
        st = _stat(pid)
        if st is None or st[0] == "Z" or st[1] + 1 < since:
            continue
        cmd = _cmdline(pid)
        if cmd and (_ours(_exe(pid), cmd, marks) or any(_cwd(pid).startswith(d) for d in dirs)):
            found.append((pid, cmd))
    return found


def reap(since, extra_marks=(), grace=5.0):
    """Wait up to `grace` seconds for the suite's processes to end, then SIGKILL the rest.
    Returns what was still alive after the wait, as find() lists it."""
    end = time.monotonic() + grace
    left = find(since, extra_marks)
    while left and time.monotonic() < end:
        time.sleep(0.2)
        left = find(since, extra_marks)
    for pid, _ in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    return left
