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


def bench_agent(binary, load, consul, px, requests, clients, work):
    """Rows (path, clients, httpload results, agent CPU us per request) and (VmRSS, VmHWM) KiB."""
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
        if agent.poll() is not None:
            raise SystemExit("health bench: %s exited during the load (status %s)" % (binary, agent.returncode))
        return rows, rss
    finally:
        if agent.poll() is None:
            agent.terminate()
            agent.wait(10)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=3000, help="requests per path and client count (default 3000)")
    ap.add_argument("--clients", default="1,4", help="concurrent clients, comma-separated (default 1,4)")
    a = ap.parse_args()
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
            results.append((name, *bench_agent(binary, load, consul, px, a.requests, clients, work)))
    finally:
        px.close()
        consul.close()
        shutil.rmtree(work, ignore_errors=True)

    print("## proxysql-sync health port (%d requests per row, a new TCP connection each; "
          "Consul and ProxySQL doubles)\n" % a.requests)
    print("| build | path | clients | requests/s | p50 ms | p99 ms | max ms | non-200 | errors | bytes | "
          "agent CPU per request |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name, rows, _ in results:
        for path, conc, r, cpu_us in rows:
            print("| %s | %s | %d | %s | %.2f | %.2f | %.2f | %s | %s | %s | %.0f us |" % (
                name, path, conc, r["rps"], float(r["p50"]), float(r["p99"]), float(r["max"]), r["non200"],
                r["errors"], r["bytes"], cpu_us))
    print("\nbytes: mean response size, headers included. Agent RSS after the load: " + "; ".join(
        "%s %.1f MB (peak %.1f MB)" % (name, rss[0] / 1024, rss[1] / 1024) for name, _, rss in results) + ".")


if __name__ == "__main__":
    main()
