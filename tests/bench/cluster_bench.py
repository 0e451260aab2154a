#!/usr/bin/python3
"""cluster-mode = single-writer on a 3-node ProxySQL Cluster of doubles (or real ProxySQL with
PROXYSQL_BIN): how long a KV change takes to reach every node (the writer's agent applies to its
node, the cluster carries it to the others), and how long a takeover takes after the writer's agent
is killed.

    make all && /usr/bin/python3 tests/bench/cluster_bench.py [--changes 100] [--nodes 3]

Prints Markdown tables. Loopback only, bounded: every wait has a timeout.
"""

import argparse
import json
import os
import signal
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(HERE)
sys.path[:0] = [TESTS, os.path.join(TESTS, "integration")]

from fakes.consul import Consul  # noqa: E402
from fakes.proxysql import ProxySQL  # noqa: E402
import test_sync  # noqa: E402

CLUSTER_USER, CLUSTER_PW = "cluster1", "clusterpw"


def wait(what, pred, timeout):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            if pred():
                return True
        except Exception:
            pass
        time.sleep(0.005)
    raise SystemExit("cluster_bench: timed out waiting for %s" % what)


def make_cluster(pxs):
    """Every node lists every node in proxysql_servers and logs in to its peers as cluster1."""
    for p in pxs:
        p.query("SET admin-admin_credentials='%s:%s;%s:%s'" % (p.admin_user, p.admin_password, CLUSTER_USER,
                                                                  CLUSTER_PW))
        p.query("SET admin-cluster_username='%s'" % CLUSTER_USER)
        p.query("SET admin-cluster_password='%s'" % CLUSTER_PW)
        p.query("SET admin-cluster_check_interval_ms=200")
        p.query("LOAD ADMIN VARIABLES TO RUNTIME")
        for q in pxs:
            p.query("INSERT INTO proxysql_servers (hostname, port, weight, comment) VALUES ('127.0.0.1', %d, 0, "
                    "'node')" % q.admin_port)
        p.query("LOAD PROXYSQL SERVERS TO RUNTIME")


SINGLE_WRITER = ('cluster-mode = "single-writer"\ncluster-lock-ttl = 3.0\ncluster-lock-delay = 1.0\n'
                 'admin-timeout = 1.0\ncluster-converge-timeout = 10.0\n')


def start_single_writer(consul, nodes, work, users):
    """n ProxySQLs joined as a cluster, the topology in KV (users or not) and one single-writer agent
    per node, every node synced; returns (pxs, agents), also filled into the lists given."""
    pxs = [ProxySQL(admin_password="bench-" + os.urandom(4).hex()).start() for _ in range(nodes)]
    make_cluster(pxs)
    test_sync.put_topology(consul, users=users)
    agents = []
    for i, p in enumerate(pxs):
        d = os.path.join(work, "agent%d" % i)
        os.makedirs(d)
        agents.append(test_sync.Agent(consul, [p], d, extra=SINGLE_WRITER).start())
    wait("every node synced", lambda: all(test_sync.synced(p) for p in pxs), 60)
    return pxs, agents


def stop_all(agents, pxs, consul):
    for ag in agents:
        ag.stop()
    for p in pxs:
        p.close()
    consul.close()


def weight_of(p, host):
    rows = p.query("SELECT weight FROM runtime_mysql_servers WHERE hostname='%s'" % host)
    return rows[0][0] if rows else None


def is_writer(agent):
    status, text = agent.http("/metrics")
    return status == 200 and "\nproxysql_sync_cluster_writer 1\n" in "\n" + text


def pct(values, q):
    s = sorted(values)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--changes", type=int, default=100)
    ap.add_argument("--nodes", type=int, default=3)
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="cluster-bench-")
    consul = Consul(session_ttl_min="1s")
    consul.start()
    pxs, agents = [], []
    try:
        pxs, agents = start_single_writer(consul, a.nodes, work, users=False)

        lat = []
        for i in range(a.changes):
            w = str(2 + i % 50)
            t0 = time.monotonic()
            consul.put("mysql/replica/shop/eu/db2:3306", json.dumps({"weight": int(w)}).encode())
            wait("change %d on every node" % i, lambda: all(weight_of(p, "db2") == w for p in pxs), 30)
            lat.append((time.monotonic() - t0) * 1000)
            time.sleep(0.05)
        print("## single-writer: a KV change reaching every node of a %d-node ProxySQL Cluster\n" % a.nodes)
        print("%s, %d changes, one agent per node; the elected agent applies to its node, the cluster's "
              "pull (`cluster_check_interval_ms` 200, `diffs_before_sync` 3) carries it.\n"
              % ("real ProxySQL" if os.environ.get("PROXYSQL_BIN") else "ProxySQL doubles", a.changes))
        print("| p50 ms | p90 ms | p99 ms | max ms | mean ms |")
        print("|---|---|---|---|---|")
        print("| %.0f | %.0f | %.0f | %.0f | %.0f |\n" % (pct(lat, .5), pct(lat, .9), pct(lat, .99), max(lat),
                                                       statistics.mean(lat)))

        rows = []
        for how, sig in (("SIGTERM (lock released)", signal.SIGTERM), ("SIGKILL (session expires)", signal.SIGKILL)):
            writer = [ag for ag in agents if ag.proc and ag.proc.poll() is None and is_writer(ag)]
            if not writer:
                raise SystemExit("cluster_bench: no writer")
            writer = writer[0]
            t0 = time.monotonic()
            writer.proc.send_signal(sig)
            writer.proc.wait(10)
            others = [ag for ag in agents if ag is not writer and ag.proc.poll() is None]
            wait("a new writer", lambda: any(is_writer(ag) for ag in others), 60)
            took = time.monotonic() - t0
            consul.put("mysql/replica/shop/eu/db9:3306", b"" if how.startswith("SIGTERM") else b"{}")
            live = [pxs[agents.index(ag)] for ag in others]
            wait("the change after the takeover", lambda: all(
                any(r[1] == "db9" for r in test_sync.runtime_servers(p)) for p in live), 60)
            rows.append((how, took * 1000, (time.monotonic() - t0) * 1000))
            consul.delete("mysql/replica/shop/eu/db9:3306")
            time.sleep(1)
            writer.start()
            time.sleep(1)
        print("## single-writer: takeover after the writer's agent stops\n")
        print("Session TTL 3 s, lock-delay 1 s; Consul invalidates a TTL session between one and two TTLs.\n")
        print("| how | a new writer after ms | the next change on every live node after ms |")
        print("|---|---|---|")
        for how, took, change in rows:
            print("| %s | %.0f | %.0f |" % (how, took, change))
    finally:
        stop_all(agents, pxs, consul)


if __name__ == "__main__":
    main()
