#!/usr/bin/python3
"""proxysql-sync benchmark: prints a table; asserts nothing (figures depend on the machine).

Against the Consul and ProxySQL test doubles on loopback (or real servers with CONSUL_BIN /
PROXYSQL_BIN), with quiescence off:

  * KV change -> ProxySQL runtime latency over N attribute changes (p50, p90, p99, max);
  * initial sync of U users and S servers (time until runtime_mysql_users/servers hold them);
  * wake-ups without a change to the desired state: admin writes they cause (want 0);
  * idle CPU over a few seconds, and RSS (VmRSS, VmHWM) after the big sync.

Note: the doubles are Python; against them the agent's own share is the smaller part of
each latency (see the "agent apply" column, taken from the agent's log).

A real ProxySQL has no statement log (the double's control API): there the wake-up row
counts LOADs from runtime_checksums_values versions and edits from CHECKSUM MEMORY/DISK,
and says so (--no-control measures that way against the double too).

    /usr/bin/python3 tests/bench/sync_bench.py [--changes 300] [--users 10000] [--servers 2000] [--no-control]
"""

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(HERE)
sys.path[:0] = [TESTS]

from fakes.consul import Consul  # noqa: E402
from fakes.proxysql import ProxySQL  # noqa: E402

BIN = os.environ.get("SIDEKICK_BIN", os.path.join(os.path.dirname(TESTS), "bin"))
TICK = os.sysconf("SC_CLK_TCK")


def pct(values, p):
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100.0 * (len(s) - 1))))]


def proc_status(pid, field):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def cpu_ticks(pid):
    with open("/proc/%d/stat" % pid) as f:
        parts = f.read().rsplit(")", 1)[1].split()
    return int(parts[11]) + int(parts[12])


def txn_put(consul, pairs):
    import base64
    for i in range(0, len(pairs), 64):
        ops = [{"KV": {"Verb": "set", "Key": k, "Value": base64.b64encode(v).decode()}} for k, v in pairs[i:i + 64]]
        r = consul.txn(ops)
        if r.status != 200:
            raise SystemExit("txn failed: %r" % r)


def start_agent(workdir, consul, px, extra="", health="", admin_timeout=60.0):
    """proxysql-sync on the bench's config (health: its health-listen, "" for none); (process, log)."""
    pw = os.path.join(workdir, "pw")
    with open(pw, "w") as f:
        f.write(px.admin_password)
    cfg = os.path.join(workdir, "sync.cfg")
    with open(cfg, "w") as f:
        f.write('consul-addr = "%s"\nregion = "eu"\nhealth-listen = "%s"\nquiescence-min = 0.0\nquiescence-max = 0.0\nadmin-timeout = %.1f\n'
                'users-prefix = "bench/users"\nservers-prefix = "bench/servers"\nmanaged-hostgroups = "%s"\n'
                'clusters = ( { alias = "shop"; writer_hostgroup = 10; reader_hostgroup = 11; } );\n'
                'targets = ( { name = "px"; address = "%s"; user = "admin"; password_file = "%s"; } );\n%s'
                % (consul.addr, health, admin_timeout, ",".join(str(h) for h in range(100, 120)), px.admin_addr, pw, extra))
    log = os.path.join(workdir, "agent.log")
    p = subprocess.Popen([os.path.join(BIN, "proxysql-sync"), "-c", cfg], stdout=open(log, "ab"),
                         stderr=subprocess.STDOUT)
    return p, log


def config_state(cur):
    """What admin writes leave behind without a statement log: the LOAD counts (runtime checksum
    versions) and the memory and disk checksums of servers and users."""
    cur.execute("SELECT name, version FROM runtime_checksums_values WHERE name IN ('mysql_servers', 'mysql_users')")
    state = {name: int(version) for name, version in cur.fetchall()}
    for what in ("MEMORY MYSQL SERVERS", "MEMORY MYSQL USERS", "DISK MYSQL SERVERS", "DISK MYSQL USERS"):
        cur.execute("CHECKSUM " + what)
        state[what] = cur.fetchall()[0][1]
    return state


def writes_seen(before, after):
    """(LOADs, names of the memory/disk tables whose checksum changed) between two config_state()s."""
    loads = max(after[n] - before[n] for n in ("mysql_servers", "mysql_users"))
    return loads, [k.lower() for k in before if not isinstance(before[k], int) and before[k] != after[k]]


def wait_for(pred, timeout, interval=0.001):
    """pred()'s first true value, or None after timeout seconds."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        time.sleep(interval)
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--changes", type=int, default=300)
    ap.add_argument("--users", type=int, default=10000)
    ap.add_argument("--servers", type=int, default=2000)
    ap.add_argument("--initial-runs", type=int, default=5)
    ap.add_argument("--no-control", action="store_true",
                    help="measure as against a real ProxySQL: without the double's statement log")
    a = ap.parse_args()
    rows = []
    work = tempfile.mkdtemp(prefix="sync-bench-")
    consul, px = Consul(), ProxySQL(admin_password="bench-" + os.urandom(4).hex())
    consul.start()
    px.start()
    agent = None
    control = px.is_fake and not a.no_control     # the statement log exists on the double only
    try:
        import pymysql
        conn = px.connect()
        cur = conn.cursor()

        def weight_of(host):
            cur.execute("SELECT weight FROM runtime_mysql_servers WHERE hostname='%s'" % host)
            r = cur.fetchall()
            return r[0][0] if r else None

        # -- 1. change -> runtime latency -------------------------------------------------
        consul.put("mysql/master/shop", b"db1:3306")
        consul.put("mysql/replica/shop/eu/db2:3306", json.dumps({"weight": 1}).encode())
        agent, log = start_agent(work, consul, px)
        if not wait_for(lambda: weight_of("db2") == "1", 30, 0.05):
            raise SystemExit("first sync did not happen; see %s" % log)
        lat = []
        for i in range(2, a.changes + 2):
            t0 = time.monotonic()
            consul.put("mysql/replica/shop/eu/db2:3306", json.dumps({"weight": i}).encode())
            if not wait_for(lambda: weight_of("db2") == str(i), 10):
                raise SystemExit("change %d not applied in 10 s" % i)
            lat.append((time.monotonic() - t0) * 1000)
        with open(log) as f:
            applies = [float(m) for m in re.findall(r"applied \d+ statement\(s\) in ([0-9.]+) ms", f.read())]
        rows.append(("KV change -> runtime (%d changes)" % len(lat),
                     "p50 %.1f ms, p90 %.1f ms, p99 %.1f ms, max %.1f ms" % (
                         statistics.median(lat), pct(lat, 90), pct(lat, 99), max(lat)),
                     "agent apply: p50 %.1f ms, p99 %.1f ms" % (statistics.median(applies[1:]), pct(applies[1:], 99))))

        # -- 2. wake-ups without a change to the desired state ------------------------------
        if control:
            px.clear_statements()
        else:
            before = config_state(cur)
        for i in range(50):   # keys of another cluster under a watched prefix: new index, same desired state
            consul.put("mysql/replica/other/eu/x%d:3306" % i, b"")
        time.sleep(1.0)
        if control:
            w = [s["sql"] for s in px.statements()
                 if s["sql"].split()[0].upper() in ("INSERT", "UPDATE", "DELETE", "LOAD", "SAVE", "REPLACE")]
            rows.append(("wake-ups without a desired change (50)", "%d admin writes" % len(w), "want 0"))
        else:
            loads, changed = writes_seen(before, config_state(cur))
            rows.append(("wake-ups without a desired change (50)",
                         "%d LOADs, %s" % (loads, "changed: " + ", ".join(changed) if changed else "no table changed"),
                         "want 0; no statement log without the double's control API: LOADs counted from "
                         "runtime_checksums_values, edits seen only when they change CHECKSUM MEMORY/DISK"))

        # -- 3. idle CPU ---------------------------------------------------------------------
        t0, c0 = time.monotonic(), cpu_ticks(agent.pid)
        time.sleep(5)
        dt, dc = time.monotonic() - t0, cpu_ticks(agent.pid) - c0
        rows.append(("idle CPU (5 s, 2 ProxySQL pings/s)", "%.2f%% of one core" % (100.0 * dc / TICK / dt),
                     "%d ticks of %d" % (dc, TICK)))
        rows.append(("RSS after the latency run", "%d KiB (peak %d KiB)" % (
            proc_status(agent.pid, "VmRSS"), proc_status(agent.pid, "VmHWM")), ""))
        agent.terminate()
        agent.wait(5)

        # -- 4. initial sync of many users and servers -----------------------------------
        # Repeated: each run starts a ProxySQL with an empty config and a new agent, which
        # reads the whole KV snapshot, connects and applies everything (verify included).
        pairs = [("bench/users/user%05d" % i, json.dumps({"password": "*%040X" % i, "default_hostgroup": 10}).encode())
                 for i in range(a.users)]
        pairs += [("bench/servers/%d/srv%05d:3306" % (100 + i % 20, i), b"") for i in range(a.servers)]
        txn_put(consul, pairs)
        walls, applies, cpus = [], [], []
        for run in range(a.initial_runs):
            px.restart(initial=True)
            os.unlink(log)
            t0 = time.monotonic()
            agent, log = start_agent(work, consul, px)

            # Done when the agent logs its big apply (verify included); polling runtime_* instead
            # would make the double regenerate 20,000 rows under its global lock each time.
            def big_apply_logged():
                with open(log) as f:
                    for m in re.finditer(r"applied (\d+) statement\(s\) in ([0-9.]+) ms: servers \+(\d+) .*"
                                         r"users \+(\d+) ", f.read()):
                        if int(m.group(3)) >= a.servers and int(m.group(4)) >= a.users:
                            return m
                return None
            m = wait_for(big_apply_logged, 300, 0.005)
            walls.append(time.monotonic() - t0)
            if not m:
                raise SystemExit("initial sync %d did not finish in 300 s; see %s" % (run + 1, log))
            applies.append(float(m.group(2)) / 1000)
            statements = int(m.group(1))
            cpus.append(cpu_ticks(agent.pid) / TICK)
            conn = px.connect()
            cur = conn.cursor()
            cur.execute("SELECT COUNT(*) FROM runtime_mysql_servers")
            ns = int(cur.fetchall()[0][0])
            cur.execute("SELECT COUNT(*) FROM runtime_mysql_users")
            nu = int(cur.fetchall()[0][0])
            conn.close()
            if ns < a.servers + 2 or nu < 2 * a.users:   # users: a frontend and a backend row each
                raise SystemExit("initial sync %d incomplete: %d servers, %d user rows" % (run + 1, ns, nu))
            if os.environ.get("BENCH_VERBOSE"):
                with open(log) as f:
                    print(f.read())
            if run + 1 < a.initial_runs:
                agent.terminate()
                agent.wait(5)
        rows.append(("initial sync: %d users + %d servers (%d runs)" % (a.users, a.servers, a.initial_runs),
                     "median %.2f s, max %.2f s from start to applied and verified" % (
                         statistics.median(walls), max(walls)),
                     "of which apply + verify (%d statements): median %.2f s; agent CPU median %.2f s"
                     % (statements, statistics.median(applies), statistics.median(cpus))))
        rows.append(("RSS after the big sync", "%d KiB (peak %d KiB)" % (
            proc_status(agent.pid, "VmRSS"), proc_status(agent.pid, "VmHWM")), ""))
    finally:
        if agent and agent.poll() is None:
            agent.terminate()
            agent.wait(5)
        px.close()
        consul.close()
        shutil.rmtree(work, ignore_errors=True)

    w1 = max(len(r[0]) for r in rows)
    w2 = max(len(r[1]) for r in rows)
    print("\nproxysql-sync benchmark (Consul %s, ProxySQL %s, quiescence off, %s)\n" % (
        "real" if os.environ.get("CONSUL_BIN") else "double", "real" if os.environ.get("PROXYSQL_BIN") else "double",
        "admin writes from the double's statement log" if control else
        "no statement log: admin writes measured from checksums and versions"))
    print("| %-*s | %-*s | %s |" % (w1, "measure", w2, "result", "notes"))
    print("|%s|%s|---|" % ("-" * (w1 + 2), "-" * (w2 + 2)))
    for r in rows:
        print("| %-*s | %-*s | %s |" % (w1, r[0], w2, r[1], r[2]))


if __name__ == "__main__":
    main()
