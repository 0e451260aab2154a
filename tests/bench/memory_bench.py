#!/usr/bin/python3
"""proxysql-sync memory benchmark: peak RSS (VmHWM) by number of keys and under a hostile answer.

Prints a table; asserts nothing (figures depend on the build and the allocator). Against the
Consul and ProxySQL test doubles on loopback (or real servers with CONSUL_BIN / PROXYSQL_BIN):

  * for each size, a fresh Consul, ProxySQL and agent: U users + S servers written, the agent
    started, its peak RSS read once the initial sync is applied and verified; RSS per key is
    (peak - peak of the empty run) / keys;
  * a hostile answer: the agent synced on a few keys, then Consul answers a listing of B bytes of
    valid JSON (an unknown field holding an array of zeros, /_fake/pad); the agent must refuse it,
    keep its state, and its peak RSS is read after the refusal (double only).

    /usr/bin/python3 tests/bench/memory_bench.py [--sizes 0:0,12500:500,25000:1000,50000:2000] \\
        [--hostile-bytes 16000000,64000000]
"""

import argparse
import base64
import contextlib
import json
import os
import re
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]

from fakes.consul import Consul  # noqa: E402
from fakes.proxysql import ProxySQL  # noqa: E402
from sync_bench import proc_status, start_agent, wait_for  # noqa: E402


def keys_for(users, servers):
    pairs = [("bench/users/user%05d" % i, json.dumps({"password": "*%040X" % i, "default_hostgroup": 10}).encode())
             for i in range(users)]
    pairs += [("bench/servers/%d/srv%05d:3306" % (100 + i % 20, i), b"") for i in range(servers)]
    return pairs


REAL_CONSUL = bool(os.environ.get("CONSUL_BIN"))
TXN_OPS = 64 if REAL_CONSUL else 2048     # the double takes big transactions (--txn-max-ops): fast setup


def new_consul():
    return Consul() if REAL_CONSUL else Consul(extra_args=["--txn-max-ops", str(TXN_OPS)])


def txn_put(consul, pairs):
    for i in range(0, len(pairs), TXN_OPS):
        ops = [{"KV": {"Verb": "set", "Key": k, "Value": base64.b64encode(v).decode()}}
               for k, v in pairs[i:i + TXN_OPS]]
        r = consul.txn(ops)
        if r.status != 200:
            raise SystemExit("txn failed: %r" % r)


def log_text(path):
    with open(path, errors="replace") as f:
        return f.read()


@contextlib.contextmanager
def lab(pairs):
    """A fresh Consul holding `pairs` (and a master key), a fresh ProxySQL, and a function that
    starts the agent against them; everything stopped afterwards."""
    work = tempfile.mkdtemp(prefix="mem-bench-")
    consul, px = new_consul(), ProxySQL(admin_password="bench-" + os.urandom(4).hex())
    consul.start()
    px.start()
    agents = []

    def start():
        agents.append(start_agent(work, consul, px))
        return agents[-1]
    try:
        consul.put("mysql/master/shop", b"db1:3306")
        txn_put(consul, pairs)
        yield consul, start
    finally:
        for agent, _ in agents:
            if agent.poll() is None:
                agent.terminate()
                agent.wait(10)
        px.close()
        consul.close()
        shutil.rmtree(work, ignore_errors=True)


def synced(log, users, servers):
    """The agent found its target in the desired state with every user and server (and the master)."""
    pat = re.compile(r"in the desired state \((\d+) servers, (\d+) users\)")
    return any(int(m.group(1)) > servers and int(m.group(2)) >= users for m in pat.finditer(log_text(log)))


def one_size(users, servers):
    """Peak RSS in KiB of an agent that synced users + servers (plus one master key)."""
    with lab(keys_for(users, servers)) as (consul, start):
        agent, log = start()
        if not wait_for(lambda: synced(log, users, servers), 600, 0.05):
            raise SystemExit("the initial sync of %d users + %d servers did not finish; see %s" % (users, servers, log))
        return proc_status(agent.pid, "VmHWM")


def hostile(nbytes):
    """(peak RSS KiB before, after the hostile answer, the agent's log line about it)."""
    with lab(keys_for(10, 2)) as (consul, start):
        agent, log = start()
        if not wait_for(lambda: synced(log, 10, 2), 60, 0.05):
            raise SystemExit("the first sync did not happen; see %s" % log)
        before = proc_status(agent.pid, "VmHWM")
        consul.fault("pad", bytes=nbytes, count=1000, path="/v1/kv/bench/users")
        consul.put("bench/users/another", json.dumps({"password": "x"}).encode())
        # Refused (a line about the prefix) or taken whole (the new user applied).
        line = wait_for(lambda: re.search(r".*(consul: bench/users|users \+1 ).*", log_text(log)), 300, 0.05)
        peak = proc_status(agent.pid, "VmHWM") if agent.poll() is None else -1
        return before, peak, line.group(0) if line else "(no line logged; agent %s)" % (
            "alive" if agent.poll() is None else "exited %s" % agent.returncode)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="0:0,12500:500,25000:1000,50000:2000",
                    help="users:servers pairs, comma separated (the first should be 0:0, the base)")
    ap.add_argument("--hostile-bytes", default="16000000",
                    help="sizes of the hostile answers, comma separated (empty: none)")
    a = ap.parse_args()
    rows, base = [], None
    for spec in a.sizes.split(","):
        users, servers = (int(x) for x in spec.split(":"))
        peak = one_size(users, servers)
        keys = users + servers
        if base is None:
            base = peak
        per_key = "%.0f B" % ((peak - base) * 1024.0 / keys) if keys else "(base)"
        rows.append(("%d users + %d servers" % (users, servers), "%d" % keys, "%.1f MiB" % (peak / 1024.0), per_key))
    hostile_rows = []
    for spec in filter(None, a.hostile_bytes.split(",")):
        before, peak, line = hostile(int(spec))
        hostile_rows.append(("hostile answer of %d bytes" % int(spec), "%.1f MiB" % (before / 1024.0),
                             "%.1f MiB" % (peak / 1024.0) if peak >= 0 else "agent died", line[-160:]))
    print("\nproxysql-sync peak RSS (VmHWM), Consul %s, ProxySQL %s, binary %s\n" % (
        "real" if os.environ.get("CONSUL_BIN") else "double", "real" if os.environ.get("PROXYSQL_BIN") else "double",
        os.environ.get("SIDEKICK_BIN", "bin")))
    print("| keys in Consul | keys | peak RSS | RSS per key |")
    print("|---|---:|---:|---:|")
    for r in rows:
        print("| %s | %s | %s | %s |" % r)
    if hostile_rows:
        print("\n| answer | peak RSS before | peak RSS after | the agent's line |")
        print("|---|---:|---:|---|")
        for r in hostile_rows:
            print("| %s | %s | %s | %s |" % r)


if __name__ == "__main__":
    main()
