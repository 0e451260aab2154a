#!/usr/bin/python3
"""proxysql-check --drain against the ProxySQL double (or a real ProxySQL with PROXYSQL_BIN): how
soon the drain exits after the last client leaves, and how often it polls the client count.

Each run: N idle clients on the MySQL port, the drain started (--drain-delay 0, --timeout 10), the
clients closed one by one at random moments after the pause; the delay from the last close to the
drain's exit is measured (spawn, PAUSE and polls included once). With the double, its statement log
gives the polls of Client_Connections_connected and the shortest gap between two of them.

    make all && /usr/bin/python3 tests/bench/drain_bench.py [--runs 20] [--clients 3]

Prints a Markdown table. Loopback only, bounded: every wait has a timeout.
"""

import argparse
import os
import random
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(HERE)
sys.path[:0] = [TESTS]

from fakes.proxysql import ProxySQL  # noqa: E402

BIN = os.environ.get("SIDEKICK_BIN", os.path.join(TESTS, "..", "bin"))


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q / 100.0 * (len(xs) - 1))))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--clients", type=int, default=3)
    a = ap.parse_args()
    import pymysql
    p = ProxySQL(admin_password="bench-admin", monitor_shun_after=0).start()
    pw = os.path.join(p.workdir, "admin-password")
    with open(pw, "w") as f:
        f.write("bench-admin")
    delays, rates, gaps = [], [], []
    try:
        p.query("INSERT INTO mysql_users (username, password, default_hostgroup) VALUES ('app', 'app-pw', 10)")
        p.query("LOAD MYSQL USERS TO RUNTIME")
        for _ in range(a.runs):
            clients = [pymysql.connect(host=p.host, port=p.mysql_port, user="app", password="app-pw")
                       for _ in range(a.clients)]
            if p.is_fake:
                p.clear_statements()
            t0 = time.monotonic()
            proc = subprocess.Popen([os.path.join(BIN, "proxysql-check"), "--drain", "--timeout", "10",
                                     "--port", str(p.admin_port), "--defaults-extra-file", "", "--password-file", pw],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            time.sleep(0.2)
            for c in clients:
                time.sleep(random.uniform(0.05, 0.4))
                c.close()
            last = time.monotonic()
            out, err = proc.communicate(timeout=15)
            ended = time.monotonic()
            if proc.returncode != 0:
                sys.exit("drain failed: %s %s" % (out, err))
            delays.append((ended - last) * 1000)
            if p.is_fake:
                polls = [s["time"] for s in p.statements() if "Client_Connections_connected" in s["sql"]]
                rates.append(len(polls) / (ended - t0))
                gaps += [(b - a2) * 1000 for a2, b in zip(polls, polls[1:])]
            p.query("PROXYSQL RESUME")
    finally:
        p.close()
    print("### proxysql-check --drain: exit after the last client leaves (%d runs, %d clients, %s)\n"
          % (a.runs, a.clients, "double" if p.is_fake else "real ProxySQL"))
    print("| measure | median | p90 | max |")
    print("|---|---|---|---|")
    print("| exit after the last client left, ms (process exit seen by the caller) | %.0f | %.0f | %.0f |"
          % (statistics.median(delays), pct(delays, 90), max(delays)))
    if rates:
        print("| polls of Client_Connections_connected per second | %.1f | %.1f | %.1f |"
              % (statistics.median(rates), pct(rates, 90), max(rates)))
        print("| gap between two polls, ms (shortest: %.0f) | %.0f | %.0f | %.0f |"
              % (min(gaps), statistics.median(gaps), pct(gaps, 90), max(gaps)))


if __name__ == "__main__":
    main()
