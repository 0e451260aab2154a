#!/usr/bin/python3
"""proxysql-sync health port benchmark: prints a table; asserts nothing about timing.

    make all && /usr/bin/python3 tests/bench/health_bench.py [--requests 3000] [--clients 1,4]

The agent (bin/proxysql-sync, and bin/static/proxysql-sync when `make static` built it) syncs
a small KV tree (a writer, 8 replicas, 50 users) from the Consul double to the ProxySQL double
(tests/fakes/) on loopback, with `health-listen` on a free loopback port. Once /readyz says
200, tests/bench/httpload.c sends a bounded number of requests to /healthz, /readyz and
/metrics, a new TCP connection each (as a kubelet or Prometheus without keep-alive), at each
client count: requests/s, p50/p99/max latency, non-200 answers, response size, and the agent's
CPU time per request (/proc/PID/stat over the row). Then the agent's RSS (VmRSS, VmHWM).

Then the hostile run (--trickle N, 0 to skip): N connections from 30 other loopback addresses
(127.0.0.2 ...) each trickle one byte of a never-ending request every 2 s and reconnect when the
server closes them (tests/integration/trickle.py), while a prober on 127.0.0.1 asks /healthz of
the agent, then /liveness of `clustercheck --listen` against a 1-node MariaDB Galera started here
(tests/integration/servers.py; --no-liveness skips it), on a new connection every 50 ms for
--trickle-seconds: answered/failed, p50/p99/max latency, the most hostile connections open at
once, how long the server let a trickling connection live, and the server's RSS at the end.
Both servers run with their default limits. The goal: every probe answered, p99 <= 250 ms.

Then the flood (--flood-seconds S, 0 to skip): 16 addresses (127.0.0.2-127.0.0.17) x 32 kept-alive
connections, every slot of the default 512, each send a whole request every second and reconnect
when closed (tests/integration/trickle.py), while a prober on an address of its own
(127.0.0.100) asks /healthz of the agent, then /liveness of `clustercheck --listen` (whose flood
asks a path that runs no check; every clustercheck answer closes its connection), on a new
connection every 50 ms: answered/failed, p50/p99/max latency, the flood's answers, and the
connections the server closed (evicted to make room, or answered with Connection: close). Same
goal.

Exits non-zero when the agent never becomes ready or the load generator cannot run.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(HERE)
ROOT = os.path.dirname(TESTS)
sys.path[:0] = [TESTS, HERE]

from fakes.consul import Consul  # noqa: E402
from fakes.process import free_port  # noqa: E402
from fakes.proxysql import ProxySQL  # noqa: E402
from sync_bench import cpu_ticks, proc_status  # noqa: E402
import probes as pb  # noqa: E402  (a 1-node Galera and clustercheck --listen; puts tests/integration on the path)
import trickle  # noqa: E402

BIN = os.environ.get("SIDEKICK_BIN", os.path.join(ROOT, "bin"))
TICK = os.sysconf("SC_CLK_TCK")
PATHS = ("/healthz", "/readyz", "/metrics")


def http_status(port, path):
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=2) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except OSError:
        return None


def seed(consul):
    consul.put("mysql/master/shop", b"db1:3306")
    for i in range(2, 10):
        consul.put("mysql/replica/shop/eu/db%d:3306" % i, json.dumps({"weight": i}).encode())
    for i in range(50):
        consul.put("bench/users/user%02d" % i,
                   json.dumps({"password": "*%040X" % i, "default_hostgroup": 10}).encode())


def start_agent(binary, workdir, consul, px, port):
    pw = os.path.join(workdir, "pw")
    with open(pw, "w") as f:
        f.write(px.admin_password)
    os.chmod(pw, 0o600)
    cfg = os.path.join(workdir, "sync.cfg")
    with open(cfg, "w") as f:
        f.write('consul-addr = "%s"\nregion = "eu"\nhealth-listen = "127.0.0.1:%d"\n'
                'quiescence-min = 0.0\nquiescence-max = 0.0\nusers-prefix = "bench/users"\n'
                'clusters = ( { alias = "shop"; writer_hostgroup = 10; reader_hostgroup = 11; } );\n'
                'targets = ( { name = "px"; address = "%s"; user = "%s"; password_file = "%s"; } );\n'
                % (consul.addr, port, px.admin_addr, px.admin_user, pw))
    log = os.path.join(workdir, "agent.log")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CONSUL_", "PROXYSQL_SYNC_"))}
    with open(log, "ab") as out:
        p = subprocess.Popen([binary, "-c", cfg], stdout=out, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL, env=env)
    return p, log


def probe_row(server, pid, path, p, **extra):
    """A row's probe figures from Prober `p` (latencies in ms), the server's RSS, and `extra`."""
    lat = [r[1] * 1000 for r in p.results]
    fails = [r for r in p.results if r[0] != 200]
    return dict({"server": server, "path": path, "probes": len(p.results), "ok": len(p.results) - len(fails),
                 "failed": len(fails), "first_failure": fails[0] if fails else None,
                 "p50": trickle.percentile(lat, 50), "p99": trickle.percentile(lat, 99), "max": max(lat),
                 "rss": proc_status(pid, "VmRSS"), "hwm": proc_status(pid, "VmHWM")}, **extra)


def hostile_row(server, pid, port, path, conns, secs):
    """One row of the hostile run: `path` probed from 127.0.0.1 while `conns` connections trickle."""
    t, p = trickle.hostile_run(port, path, conns=conns, addrs=30, interval=2.0, duration=secs, probe_every=0.05)
    return probe_row(server, pid, path, p, conns=conns, max_open=t.max_open, closed=len(t.closed),
                     lifetime=max(t.closed) if t.closed else None)


def flood_row(server, pid, port, path, flood_path, secs):
    """One row of the flood: `path` probed from 127.0.0.100 while 16 x 32 kept-alive connections ask
    `flood_path` every second."""
    f, p = trickle.flood_run(port, path, flood_path=flood_path, addrs=16, per_addr=32, interval=1.0, duration=secs,
                             probe_every=0.05)
    return probe_row(server, pid, path, p, max_open=f.max_open, answers=f.answers, closed=f.closed)


def bench_liveness(conns, secs, flood_secs, tmp):
    """The hostile and flood rows of clustercheck --listen /liveness (None when not asked for),
    against a 1-node Galera started here."""
    ws = pb.servers.Workspace()
    try:
        node = pb.start_galera_node(ws)
        p, port, log = pb.start_listener(node, ws, tmp, "--max-connections", "512")  # its default
        try:
            hostile = hostile_row("clustercheck --listen", p.pid, port, "/liveness", conns, secs) if conns else None
            flood = flood_row("clustercheck --listen", p.pid, port, "/liveness", "/flood", flood_secs) \
                if flood_secs else None
            return hostile, flood
        finally:
            p.terminate()
            p.wait(10)
            log.close()
    finally:
        ws.destroy()


def bench_agent(binary, load, consul, px, requests, clients, work, trickle_conns=0, trickle_secs=0, flood_secs=0):
    """Rows (path, clients, httpload results, agent CPU us per request), (VmRSS, VmHWM) KiB, the
    hostile row (None when trickle_conns is 0) and the flood row (None when flood_secs is 0)."""
    port = free_port()
    agent, log = start_agent(binary, work, consul, px, port)
    try:
        end = time.monotonic() + 30
        while http_status(port, "/readyz") != 200:
            if agent.poll() is not None or time.monotonic() > end:
                with open(log) as f:
                    tail = "".join(f.readlines()[-15:])
                raise SystemExit("health bench: %s never became ready (/readyz 200) in 30 s; its log:\n%s"
                                 % (binary, tail))
            time.sleep(0.05)
        subprocess.run([load, "127.0.0.1", str(port), "200", "1", "30", "/healthz"], capture_output=True,
                       check=True)
        rows = []
        for path in PATHS:
            for conc in clients:
                c0 = cpu_ticks(agent.pid)
                out = subprocess.run([load, "127.0.0.1", str(port), str(requests), str(conc), "120", path],
                                     capture_output=True, text=True, check=True).stdout
                dc = cpu_ticks(agent.pid) - c0
                r = dict(kv.split("=") for kv in out.split())
                if int(r["ok"]) == 0:
                    raise SystemExit("health bench: no request to %s answered 200: %s" % (path, out.strip()))
                rows.append((path, conc, r, dc / TICK * 1e6 / max(1, int(r["requests"]))))
        rss = (proc_status(agent.pid, "VmRSS"), proc_status(agent.pid, "VmHWM"))
        hostile = hostile_row("proxysql-sync", agent.pid, port, "/healthz", trickle_conns, trickle_secs) \
            if trickle_conns else None
        flood = flood_row("proxysql-sync", agent.pid, port, "/healthz", "/healthz", flood_secs) if flood_secs else None
        if agent.poll() is not None:
            raise SystemExit("health bench: %s exited during the load (status %s)" % (binary, agent.returncode))
        return rows, rss, hostile, flood
    finally:
        if agent.poll() is None:
            agent.terminate()
            agent.wait(10)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=3000, help="requests per path and client count (default 3000)")
    ap.add_argument("--clients", default="1,4", help="concurrent clients, comma-separated (default 1,4)")
    ap.add_argument("--trickle", type=int, default=300,
                    help="hostile trickling connections in the hostile run (default 300, at most 1000; 0 skips it)")
    ap.add_argument("--trickle-seconds", type=float, default=15.0, help="length of each hostile row (default 15, at most 20)")
    ap.add_argument("--flood-seconds", type=float, default=12.0,
                    help="length of each keep-alive flood row (default 12, at most 20; 0 skips the flood)")
    ap.add_argument("--no-liveness", action="store_true", help="no clustercheck --listen row (no Galera node started)")
    a = ap.parse_args()
    if not 0 <= a.trickle <= 1000 or not 2 <= a.trickle_seconds <= 20:
        ap.error("--trickle must be 0 to 1000 and --trickle-seconds 2 to 20")
    if a.flood_seconds and not 5 <= a.flood_seconds <= 20:
        ap.error("--flood-seconds must be 0, or 5 to 20")
    clients = [int(c) for c in a.clients.split(",")]
    builds = [("dynamic", os.path.join(BIN, "proxysql-sync"))]
    if os.path.exists(os.path.join(BIN, "static", "proxysql-sync")):
        builds.append(("static, musl", os.path.join(BIN, "static", "proxysql-sync")))
    work = tempfile.mkdtemp(prefix="sk-health-bench-")
    load = os.path.join(work, "httpload")
    subprocess.run(["gcc", "-O2", "-pthread", "-o", load, os.path.join(HERE, "httpload.c")], check=True)
    consul, px = Consul(), ProxySQL(admin_password="bench-" + os.urandom(4).hex())
    consul.start()
    px.start()
    results = []
    try:
        seed(consul)
        for name, binary in builds:
            results.append((name, *bench_agent(binary, load, consul, px, a.requests, clients, work, a.trickle,
                                               a.trickle_seconds, a.flood_seconds)))
        hostile = [(name, h) for name, _, _, h, _ in results if h]
        flood = [(name, f) for name, _, _, _, f in results if f]
        if (a.trickle or a.flood_seconds) and not a.no_liveness:
            h, f = bench_liveness(a.trickle, a.trickle_seconds, a.flood_seconds, work)
            hostile += [("dynamic", h)] if h else []
            flood += [("dynamic", f)] if f else []
    finally:
        px.close()
        consul.close()
        shutil.rmtree(work, ignore_errors=True)

    print("## proxysql-sync health port (%d requests per row, a new TCP connection each; "
          "Consul and ProxySQL doubles)\n" % a.requests)
    print("| build | path | clients | requests/s | p50 ms | p99 ms | max ms | non-200 | errors | bytes | "
          "agent CPU per request |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name, rows, _, _, _ in results:
        for path, conc, r, cpu_us in rows:
            print("| %s | %s | %d | %s | %.2f | %.2f | %.2f | %s | %s | %s | %.0f us |" % (
                name, path, conc, r["rps"], float(r["p50"]), float(r["p99"]), float(r["max"]), r["non200"],
                r["errors"], r["bytes"], cpu_us))
    print("\nbytes: mean response size, headers included. Agent RSS after the load: " + "; ".join(
        "%s %.1f MB (peak %.1f MB)" % (name, rss[0] / 1024, rss[1] / 1024) for name, _, rss, _, _ in results) + ".")
    print_hostile(a, hostile)
    print_flood(a, flood)


def print_probe_table(title, source, rows, extra_heads, extra_cells, note):
    """A Markdown table of probe rows [(build, row)]: the probe figures, extra_cells(row) under
    extra_heads, the server's RSS; then each build's first failed probe and `note`."""
    if not rows:
        return
    heads = ["build", "server", "path (from %s)" % source, "probes", "answered 200", "failed", "p50 ms", "p99 ms",
             "max ms"] + extra_heads + ["RSS MB (peak)"]
    print("\n## %s\n" % title)
    print("| " + " | ".join(heads) + " |")
    print("|" + "---|" * len(heads))
    for name, r in rows:
        cells = [name, r["server"], r["path"], "%d" % r["probes"], "%d" % r["ok"], "%d" % r["failed"],
                 "%.2f" % r["p50"], "%.2f" % r["p99"], "%.2f" % r["max"]] + extra_cells(r) + \
            ["%.1f (%.1f)" % (r["rss"] / 1024, r["hwm"] / 1024)]
        print("| " + " | ".join(cells) + " |")
    for name, r in rows:
        if r["first_failure"]:
            print("\n%s %s: first failed probe: %r" % (name, r["server"], r["first_failure"]))
    print("\n" + note)


def print_hostile(a, hostile):
    print_probe_table(
        "Health ports under %d trickling connections from 30 other loopback addresses (%.0f s a row)"
        % (a.trickle, a.trickle_seconds), "127.0.0.1", hostile,
        ["hostile open at most", "hostile closed", "longest hostile life s"],
        lambda h: ["%d" % h["max_open"], "%d" % h["closed"],
                   "%.2f" % h["lifetime"] if h["lifetime"] is not None else "-"],
        "Each trickling connection sends a byte every 2 s and is reopened at once when closed; the "
        "servers run with their defaults (request deadline 5 s, 32 connections per address, 512 in all). "
        "Hostile open: connections the clients had open at once, as the clients see them (one waiting in "
        "the listen queue counts); closed: those the server closed after their first byte. "
        "Goal: every probe answered, p99 <= 250 ms.")


def print_flood(a, flood):
    print_probe_table(
        "Health ports under a keep-alive flood: 16 addresses x 32 connections, each a whole request a second "
        "(%.0f s a row)" % a.flood_seconds, "127.0.0.100", flood,
        ["flood open at most", "flood answers", "flood connections closed"],
        lambda f: ["%d" % f["max_open"], "%d" % f["answers"], "%d" % f["closed"]],
        "Every slot of the default 512 is taken by the flood (32 per address, the per-address limit); a probe "
        "takes the place of the connection that has waited longest for its next request. The agent's flood "
        "asks /healthz over kept-alive connections; clustercheck's asks a path that runs no check, and every "
        "clustercheck answer closes its connection. Goal: every probe answered, p99 <= 250 ms.")


if __name__ == "__main__":
    main()
