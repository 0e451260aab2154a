#!/usr/bin/python3
"""cluster-mode = single-writer on a 2-node ProxySQL Cluster of doubles (or real ProxySQL with
PROXYSQL_BIN), users included (the writer's agent writes default_schema NULL, the pull stores ''):
after each KV change, how long the follower's agent takes to find its node equal to its desired
state again, counted from the writer's apply (its "applied" log line) to the follower's "the
cluster carried the writer's state here" line. A follower that never saw its node behind (the pull
landed before it looked) counts 0. The follower looks again every 500 ms while behind.

    make all && /usr/bin/python3 tests/bench/follower_bench.py [--changes 50]

Prints a Markdown table. Loopback only, bounded: every wait has a timeout.
"""

import argparse
import datetime
import json
import os
import re
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(HERE)
sys.path[:0] = [HERE, TESTS, os.path.join(TESTS, "integration")]

from cluster_bench import pct, start_single_writer, stop_all, wait, weight_of  # noqa: E402
from fakes.consul import Consul  # noqa: E402


def stamps(text, pattern):
    """Unix times of the log lines matching pattern (timestamps are UTC, ms)."""
    out = []
    for line in text.splitlines():
        if re.search(pattern, line):
            ts = datetime.datetime.strptime(line.split()[0], "%Y-%m-%dT%H:%M:%S.%fZ")
            out.append(ts.replace(tzinfo=datetime.timezone.utc).timestamp())
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--changes", type=int, default=50)
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="follower-bench-")
    consul = Consul(session_ttl_min="1s")
    consul.start()
    pxs, agents = [], []
    try:
        pxs, agents = start_single_writer(consul, 2, work, users=True)
        wait("both agents ready", lambda: all(ag.ready() for ag in agents), 60)
        writer = [ag for ag in agents if "this agent is the writer" in ag.logs()][0]
        follower = agents[1 - agents.index(writer)]
        lat, zero = [], 0
        for i in range(a.changes):
            w = str(2 + i % 50)
            applied_before = len(stamps(writer.logs(), r"applied \d+ statement"))
            carried_before = len(stamps(follower.logs(), r"carried the writer's state"))
            consul.put("mysql/replica/shop/eu/db2:3306", json.dumps({"weight": int(w)}).encode())
            wait("change %d on both nodes" % i, lambda: all(weight_of(p, "db2") == w for p in pxs), 30)
            wait("the writer's apply", lambda: len(stamps(writer.logs(), r"applied \d+ statement")) > applied_before,
                 10)
            t_applied = stamps(writer.logs(), r"applied \d+ statement")[applied_before]
            end = time.monotonic() + 2.0          # four follower looks
            while time.monotonic() < end and len(stamps(follower.logs(), r"carried the writer's state")) \
                    <= carried_before:
                time.sleep(0.02)
            carried = stamps(follower.logs(), r"carried the writer's state")
            if len(carried) > carried_before:
                lat.append(max(0.0, carried[carried_before] - t_applied) * 1000)
            else:
                lat.append(0.0)
                zero += 1
            assert follower.ready(), "the follower is not ready after change %d" % i
        print("## single-writer: the follower in sync again after the writer's apply\n")
        print("%s, 2 nodes (`cluster_check_interval_ms` 200, `diffs_before_sync` 3), servers and users (the "
              "pull stores NULL as ''), %d changes; %d of them the follower never saw behind (counted 0). "
              "The follower stayed ready throughout.\n"
              % ("real ProxySQL" if os.environ.get("PROXYSQL_BIN") else "ProxySQL doubles", a.changes, zero))
        print("| p50 ms | p90 ms | p99 ms | max ms | mean ms |")
        print("|---|---|---|---|---|")
        print("| %.0f | %.0f | %.0f | %.0f | %.0f |" % (pct(lat, .5), pct(lat, .9), pct(lat, .99), max(lat),
                                                     statistics.mean(lat)))
    finally:
        stop_all(agents, pxs, consul)


if __name__ == "__main__":
    main()
