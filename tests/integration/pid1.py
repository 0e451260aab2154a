"""A binary as PID 1 of a PID namespace of its own, as a container runs it, and orphans for it to reap.

    outer, inner = start_pid1(cmd, log)     # unshare --pid --fork --mount-proc --kill-child cmd
    make_orphans(inner, 6)                  # their parent exits first: PID 1 inherits them
    assert wait_no_children(inner, 5), zombies(inner)
"""

import os
import shutil
import subprocess
import sys
import time

import pytest

# Forks n children (every other one ends at once, a zombie, the others after 0.3 s) and exits
# without waiting for any: all of them are reparented to the namespace's PID 1.
ORPHANS = """
import os, sys, time
for i in range(int(sys.argv[1])):
    if os.fork() == 0:
        if i % 2:
            time.sleep(0.3)
        os._exit(0)
time.sleep(0.1)
os._exit(0)
"""


def need_namespaces():
    if shutil.which("unshare") is None or shutil.which("nsenter") is None or os.geteuid() != 0:
        pytest.skip("needs root, unshare(1) and nsenter(1) for a PID namespace")


def children(pid):
    """(pid, state) of every process whose parent is `pid`."""
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/stat" % d) as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                out.append((int(d), fields[0]))
    return out


def zombies(pid):
    return [c for c, state in children(pid) if state == "Z"]


def start_pid1(cmd, log, name):
    """Start `cmd` as PID 1 of a new PID namespace; returns (unshare's Popen, the pid of `name`)."""
    out = open(log, "ab")
    outer = subprocess.Popen(["unshare", "--pid", "--fork", "--mount-proc", "--kill-child"] + cmd,
                             stdout=out, stderr=subprocess.STDOUT)
    out.close()
    end = time.monotonic() + 5
    while time.monotonic() < end:
        for pid, _ in children(outer.pid):
            try:
                with open("/proc/%d/comm" % pid) as f:
                    comm = f.read().strip()
                with open("/proc/%d/status" % pid) as f:
                    ns = [line.split()[1:] for line in f if line.startswith("NSpid:")][0]
            except OSError:
                continue
            if comm == name[:15] and ns[-1] == "1":
                return outer, pid
        time.sleep(0.01)
    outer.kill()
    outer.wait(5)
    pytest.fail("%s did not start as PID 1" % name)


def make_orphans(inner, n):
    """n processes in `inner`'s PID namespace whose parent exits without waiting for them."""
    r = subprocess.run(["nsenter", "--target", str(inner), "--pid", "--", sys.executable, "-c", ORPHANS, str(n)],
                       capture_output=True, text=True, timeout=20)
    assert r.returncode == 0, r.stderr


def wait_no_children(pid, timeout):
    """True once `pid` has no child left (none running, no zombie); False after `timeout` seconds."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if not children(pid):
            return True
        time.sleep(0.05)
    return False


def stop(outer, inner, sig, timeout=10):
    os.kill(inner, sig)
    try:
        return outer.wait(timeout)
    except subprocess.TimeoutExpired:
        outer.kill()
        outer.wait(5)
        pytest.fail("PID 1 ignored signal %d" % sig)
