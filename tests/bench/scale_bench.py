#!/usr/bin/python3
"""proxysql-sync at scale: prints a table; asserts nothing (figures depend on the machine).

For each size (keys = users + servers, one server key per 25 user keys: 52,000 keys are 50,000
users and 2,000 servers), a fresh Consul and ProxySQL (the doubles, or real servers with
CONSUL_BIN / PROXYSQL_BIN) and a new agent with quiescence off:

  * initial sync: from the agent's start to its log line of the big apply (verified);
  * /healthz during that first sync, polled every 50 ms from another thread (p50, p99, max; a
    probe that takes more than 1 s counts as missed);
  * one change: a server's weight, from the KV write until runtime_mysql_servers shows it; and
    one user's default_hostgroup (or --user-changes of them, each after the SAVE pass that follows
    the one before), from the KV write until the agent logs its verified apply;
  * the agent's CPU (utime + stime) for the initial sync and for the two changes, and its peak
    RSS (VmHWM) after the first sync, after the server change and over the whole run;
  * the floor, from a plain client on the same ProxySQL right after: the user change's UPDATE +
    LOAD MYSQL USERS TO RUNTIME, reading all of runtime_mysql_users, SAVE MYSQL USERS TO DISK and
    the checksums the agent reads (median of 3), with the agent's apply as a ratio of the first;

and, first, back-to-back changes with a few dozen keys (30 users, 6 servers): each server weight
change written as soon as the one before shows in runtime_mysql_servers (p50, p99, max).

The doubles are Python and do the SQL in SQLite: against them the time to runtime is mostly the
double's. The agent's CPU is its own.

    /usr/bin/python3 tests/bench/scale_bench.py [--sizes 12000,25000,52000,100000] [--changes 60]
        [--save-delay SECONDS] [--user-changes N]
"""

import argparse
import contextlib
import http.client
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(HERE)
sys.path[:0] = [TESTS, HERE]

from fakes.consul import Consul  # noqa: E402
from fakes.proxysql import ProxySQL  # noqa: E402
from probes import free_ports  # noqa: E402
from sync_bench import TICK, cpu_ticks, pct, proc_status, start_agent, txn_put, wait_for  # noqa: E402


def weight_of(cur, host):
    cur.execute("SELECT weight FROM runtime_mysql_servers WHERE hostname='%s'" % host)
    r = cur.fetchall()
    return str(r[0][0]) if r else None


def keys(users, servers):
    """users user keys and servers server keys (spread over hostgroups 100-119)."""
    pairs = [("bench/users/user%06d" % i, json.dumps({"password": "*%040X" % i, "default_hostgroup": 100}).encode())
             for i in range(users)]
    return pairs + [("bench/servers/%d/srv%06d:3306" % (100 + i % 20, i), b"") for i in range(servers)]


@contextlib.contextmanager
def fresh_servers():
    """A new Consul and ProxySQL (doubles or real), and room for the agent; all stopped after."""
    consul, px = Consul(), ProxySQL(admin_password="bench-" + os.urandom(4).hex())
    consul.start()
    px.start()
    run = {"agent": None}
    try:
        yield consul, px, run
    finally:
        if run["agent"] and run["agent"].poll() is None:
            run["agent"].terminate()
            run["agent"].wait(10)
        px.close()
        consul.close()


class HealthPoller(threading.Thread):
    """GET /healthz every 50 ms until stopped; keeps each latency (ms), 1 s timeout."""

    def __init__(self, port):
        super().__init__(daemon=True)
        self.port, self.lat, self.missed, self.stopping = port, [], 0, threading.Event()

    def run(self):
        while not self.stopping.is_set():
            t0 = time.monotonic()
            try:
                c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=1.0)
                c.request("GET", "/healthz")
                c.getresponse().read()
                c.close()
                self.lat.append((time.monotonic() - t0) * 1000)
            except OSError:
                if time.monotonic() - t0 >= 0.99:
                    self.missed += 1
                    self.lat.append(1000.0)
            self.stopping.wait(0.05)


def applied_lines(log):
    """(statements, ms, servers added, servers changed, users added, users changed) of each of the
    agent's apply lines ("applied 3 statements in 4.2 ms: 1 server added, 2 users changed")."""
    def count(words, what):
        m = re.search(r"(\d+) %ss? %s" % what, words)
        return m.group(1) if m else "0"
    with open(log) as f:
        return [(n, ms, count(w, ("server", "added")), count(w, ("server", "changed")),
                 count(w, ("user", "added")), count(w, ("user", "changed")))
                for n, ms, w in re.findall(r"applied (\d+) statements? in ([0-9.]+) ms: (.*)", f.read())]


def one_size(n, work, user_changes_n=1):
    servers = max(1, n // 26)
    users = n - servers
    row = {"keys": n, "users": users, "servers": servers}
    with fresh_servers() as (consul, px, run):
        txn_put(consul, keys(users, servers))
        health = free_ports(1)[0]
        poller = HealthPoller(health)
        t0 = time.monotonic()
        # A users listing is about 215 bytes of answer a key here: past about 78,000 users the
        # default max-response-bytes (16 MiB) refuses it, as docs/proxysql-sync.md says.
        agent, log = start_agent(work, consul, px, health="127.0.0.1:%d" % health, admin_timeout=600.0,
                                 extra="max-response-bytes = %d;\n" % (64 << 20))
        run["agent"] = agent
        poller.start()

        def big_apply():
            if agent.poll() is not None:
                raise SystemExit("the agent exited (status %s); see %s" % (agent.returncode, log))
            return next((m for m in applied_lines(log) if int(m[2]) >= servers and int(m[4]) >= users), None)
        m = wait_for(big_apply, 1800, 0.01)
        row["initial_s"] = time.monotonic() - t0
        poller.stopping.set()
        poller.join(5)
        if not m:
            raise SystemExit("initial sync of %d keys did not finish; see %s" % (n, log))
        row["initial_apply_s"] = float(m[1]) / 1000
        row["initial_cpu_s"] = cpu_ticks(agent.pid) / TICK
        row["healthz"] = poller.lat
        row["healthz_missed"] = poller.missed
        row["rss_initial_kib"] = proc_status(agent.pid, "VmHWM")
        conn = px.connect()
        cur = conn.cursor()
        time.sleep(1.0)   # the agent idle again
        c0 = cpu_ticks(agent.pid)
        t0 = time.monotonic()
        consul.put("bench/servers/100/srv000000:3306", json.dumps({"weight": 7}).encode())
        ok = wait_for(lambda: weight_of(cur, "srv000000") == "7", 120, 0.002)
        row["server_change_ms"] = (time.monotonic() - t0) * 1000 if ok else None
        time.sleep(0.5)   # the server change verified
        row["rss_server_kib"] = proc_status(agent.pid, "VmHWM")
        row.update(user_changes(consul, log, user_changes_n))
        row["change_cpu_ms"] = (cpu_ticks(agent.pid) - c0) * 1000.0 / TICK
        row["peak_rss_kib"] = proc_status(agent.pid, "VmHWM")
        row["floor"] = floor(cur, 100 + user_changes_n)
        conn.close()
    return row


def user_changes(consul, log, n):
    """`n` changes of one user's default_hostgroup, each written once the SAVE pass after the one
    before (save-delay) is over: each change from the KV write to the agent's logged apply, the
    agent's apply as it logs it, and the SAVE pass's (which checks memory's users checksum)."""
    out = {"user_change_all": [], "user_apply_all": [], "save_pass_all": []}
    for i in range(n):
        before = len(applied_lines(log))
        t0 = time.monotonic()
        consul.put("bench/users/user000000", json.dumps({"password": "*%040X" % 0, "default_hostgroup": 101 + i}).encode())
        if not wait_for(lambda: len(applied_lines(log)) > before, 120, 0.002):
            break
        out["user_change_all"].append((time.monotonic() - t0) * 1000)
        out["user_apply_all"].append(float(applied_lines(log)[before][1]))
        if wait_for(lambda: len(applied_lines(log)) > before + 1, 10, 0.01):
            out["save_pass_all"].append(float(applied_lines(log)[before + 1][1]))
        time.sleep(0.3)
    med = lambda v: statistics.median(v) if v else None  # noqa: E731
    out["user_change_ms"], out["user_apply_ms"] = med(out["user_change_all"]), med(out["user_apply_all"])
    return out


def timed(cur, *statements):
    """Milliseconds for the statements, each sent and its answer read in full."""
    t0 = time.monotonic()
    for q in statements:
        cur.execute(q)
        cur.fetchall()
    return (time.monotonic() - t0) * 1000


def floor(cur, hostgroup, rounds=3):
    """What a plain client pays on the same ProxySQL in the same run, median of `rounds`: the
    user change's own statements (the UPDATE writes the value the agent wrote last: nothing
    moves), reading all runtime users, the users' SAVE, and the checksums the agent reads."""
    user = "user000000"
    cases = {
        "update_load": ("UPDATE mysql_users SET default_hostgroup=%d WHERE username='%s'" % (hostgroup - 1, user),
                        "LOAD MYSQL USERS TO RUNTIME"),
        "read_runtime_users": ("SELECT * FROM runtime_mysql_users",),
        "save_users": ("SAVE MYSQL USERS TO DISK",),
        "checksum_memory_users": ("CHECKSUM MEMORY MYSQL USERS",),
        "runtime_checksums": ("SELECT name, checksum FROM runtime_checksums_values",),
    }
    return {k: statistics.median(timed(cur, *q) for _ in range(rounds)) for k, q in cases.items()}


def back_to_back(changes, work, extra=""):
    """Latencies (ms) of `changes` weight changes to runtime, each written once the one before
    shows, with 36 keys; and the agent's logged apply times."""
    with fresh_servers() as (consul, px, run):
        txn_put(consul, keys(30, 6))
        run["agent"], log = start_agent(work, consul, px, extra=extra)
        conn = px.connect()
        cur = conn.cursor()
        if not wait_for(lambda: weight_of(cur, "srv000000") == "1", 60, 0.05):
            raise SystemExit("back-to-back: the first sync did not happen; see %s" % log)
        time.sleep(1.0)
        lat = []
        for i in range(2, changes + 2):
            t0 = time.monotonic()
            consul.put("bench/servers/100/srv000000:3306", json.dumps({"weight": i}).encode())
            if not wait_for(lambda: weight_of(cur, "srv000000") == str(i), 30, 0.0005):
                raise SystemExit("back-to-back: change %d not in runtime within 30 s; see %s" % (i, log))
            lat.append((time.monotonic() - t0) * 1000)
        conn.close()
        return lat, [float(m[1]) for m in applied_lines(log)][1:]


def fmt_ms(v):
    return "n/a" if v is None else "%.0f ms" % v


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="12000,25000,52000,100000")
    ap.add_argument("--changes", type=int, default=60, help="back-to-back changes with a few dozen keys")
    ap.add_argument("--save-delay", type=float, default=None,
                    help="the agent's save-delay for the back-to-back changes (default: the agent's own)")
    ap.add_argument("--user-changes", type=int, default=1,
                    help="user changes at each size, each after the SAVE pass of the one before (p50 and max shown)")
    a = ap.parse_args()
    rows = []
    lat = applies = None
    if a.changes > 0:
        work = tempfile.mkdtemp(prefix="scale-bench-")
        try:
            print("scale: %d back-to-back changes ..." % a.changes, file=sys.stderr, flush=True)
            lat, applies = back_to_back(a.changes, work, "" if a.save_delay is None
                                        else "save-delay = %.3f;\n" % a.save_delay)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    for n in [int(x) for x in a.sizes.split(",") if x]:
        work = tempfile.mkdtemp(prefix="scale-bench-")
        try:
            print("scale: %d keys ..." % n, file=sys.stderr, flush=True)
            rows.append(one_size(n, work, max(1, a.user_changes)))
            print("scale: %d keys: %r" % (n, {k: v for k, v in rows[-1].items() if k != "healthz" and not k.endswith("_all")}),
                  file=sys.stderr, flush=True)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    print("\nproxysql-sync at scale (Consul %s, ProxySQL %s, quiescence off; the agent's CPU is its own)\n" % (
        "real" if os.environ.get("CONSUL_BIN") else "double", "real" if os.environ.get("PROXYSQL_BIN") else "double"))
    if lat:
        print("Back-to-back KV changes, 36 keys%s: %d changes to runtime p50 %.1f ms, p99 %.1f ms, max %.1f ms "
              "(the agent's apply as it logs it, read + plan + statements + verify: p50 %.1f ms, p99 %.1f ms).\n"
              % ("" if a.save_delay is None else ", save-delay %g" % a.save_delay, len(lat), statistics.median(lat), pct(lat, 99), max(lat),
                 statistics.median(applies) if applies else 0, pct(applies, 99) if applies else 0))
    print("| keys (users + servers) | initial sync | of which apply + verify | agent CPU, initial | "
          "/healthz during it: p50 / p99 / max (missed) | one server change to runtime | one user change "
          "applied (agent's apply) | agent CPU, both changes | peak RSS: after the first sync / after the server "
          "change / whole run |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        h = r["healthz"] or [0.0]
        print("| %d (%d + %d) | %.2f s | %.2f s | %.2f s | %.1f / %.1f / %.1f ms (%d of %d) | %s | %s (%s) | %.0f ms | "
              "%.1f / %.1f / %.1f MiB |" % (
                  r["keys"], r["users"], r["servers"], r["initial_s"], r["initial_apply_s"], r["initial_cpu_s"],
                  statistics.median(h), pct(h, 99), max(h), r["healthz_missed"], len(r["healthz"]),
                  fmt_ms(r["server_change_ms"]), fmt_ms(r["user_change_ms"]), fmt_ms(r["user_apply_ms"]),
                  r["change_cpu_ms"], r["rss_initial_kib"] / 1024.0, r["rss_server_kib"] / 1024.0,
                  r["peak_rss_kib"] / 1024.0))
    print("\nThe floor: a plain client on the same ProxySQL in the same run (median of 3), beside the "
          "agent's user changes (%d at each size: p50, max)\n" % max(1, a.user_changes))
    print("| keys | user change, end to end | the agent's apply | its SAVE pass | floor: UPDATE + LOAD MYSQL USERS "
          "TO RUNTIME | agent's apply / floor: p50, max | read all runtime_mysql_users | SAVE MYSQL USERS TO DISK | "
          "CHECKSUM MEMORY MYSQL USERS | runtime_checksums_values |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        f = r["floor"]
        spread = lambda v: "%s, %s" % (fmt_ms(statistics.median(v)), fmt_ms(max(v))) if v else "n/a"  # noqa: E731
        ratio = ("%.2fx, %.2fx" % (r["user_apply_ms"] / f["update_load"], max(r["user_apply_all"]) / f["update_load"])
                 if r["user_apply_all"] else "n/a")
        print("| %d | %s | %s | %s | %.0f ms | %s | %.0f ms | %.0f ms | %.1f ms | %.1f ms |" % (
            r["keys"], spread(r["user_change_all"]), spread(r["user_apply_all"]), spread(r["save_pass_all"]),
            f["update_load"], ratio, f["read_runtime_users"], f["save_users"], f["checksum_memory_users"],
            f["runtime_checksums"]))
    if len(rows) > 1:
        base = rows[0]
        print("\nPer key, against the smallest size: initial agent CPU %s." % ", ".join(
            "%dk %.2fx" % (r["keys"] // 1000, (r["initial_cpu_s"] / r["keys"]) / (base["initial_cpu_s"] / base["keys"]))
            for r in rows))


if __name__ == "__main__":
    main()
