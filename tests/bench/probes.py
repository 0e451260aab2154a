#!/usr/bin/python3
"""Probe benchmark: prints tables, asserts nothing (not a timed test).

    make all && /usr/bin/python3 tests/bench/probes.py [--runs 200] [--requests 20000]

1. readiness-check against an equivalent bash + mariadb-client probe
   (tests/bench/readiness-check-baseline.sh, the PXC operator script's structure): N runs of
   each, interleaved, on loopback: median/p90/p99 wall time, CPU time (user + system of the
   process tree), peak RSS (GNU time %M: the largest process of the run), programs executed and processes created (strace -f), ratios.
   liveness-check, haproxy-check and clustercheck one-shot are measured the same way, and the
   static (musl) readiness-check and clustercheck from `make static` when bin/static/ has them.
2. clustercheck --listen: a bounded number of requests from tests/bench/httpload.c (a new TCP
   connection per request, as HAProxy's httpchk), with and without --cache-ms, at 1 and 4
   concurrent clients: checks/s, p50/p99 latency, and the status queries mysqld ran.

3. With --sst RUNS (this section alone): liveness-check's wall time with and without a state
   transfer, on a 2-node Galera of tests/integration/servers.py (its fixed ports, under the
   test servers' lock) whose second node is held in an SST: the joiner with and without
   sst_in_progress, a Synced node found through its pid file (--pid-file) and through the pass
   over /proc (no pid file in its datadir), a datadir no mysqld runs in (the whole pass), each
   also with 1000 extra sleeping processes on the host; and how many /proc files one run reads.

The target is a 1-node MariaDB Galera (bootstrap) started here on free loopback ports with
tests/integration/servers.py, and stopped at the end. Needs: gcc, strace, GNU time
(/usr/bin/time), mariadb-client, and the servers' packages (see tests/deps.sh).
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
import servers  # noqa: E402

BIN = os.environ.get("SIDEKICK_BIN", os.path.join(ROOT, "bin"))
BASELINE = os.path.join(HERE, "readiness-check-baseline.sh")
ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C"}


def free_ports(n, ip="127.0.0.1"):
    """n distinct free ports (each followed by a free port too: gcomm + IST)."""
    socks, ports = [], []
    while len(ports) < n:
        s = socket.socket()
        s.bind((ip, 0))
        p = s.getsockname()[1]
        t = socket.socket()
        try:
            t.bind((ip, p + 1))
        except OSError:
            s.close()
            t.close()
            continue
        socks += [s, t]
        ports.append(p)
    for s in socks:
        s.close()
    return ports


def start_galera_node(ws):
    """A 1-node Galera cluster (bootstrap) on free loopback ports, Synced."""
    sql, gcomm = free_ports(2)
    return servers.single_node_galera(ws, "bench", "127.0.0.1", sql, gcomm, "sidekick_bench")


def pctl(values, p):
    v = sorted(values)
    return v[min(len(v) - 1, int(round(p * (len(v) - 1))))]


def _children_cpu():
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def wall_once(argv, env):
    """(wall seconds, exit code, CPU seconds of the process tree: user + system)."""
    c0 = _children_cpu()
    t0 = time.monotonic()
    rc = subprocess.call(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    return time.monotonic() - t0, rc, _children_cpu() - c0


def peak_rss_kb(argv, env, tmp):
    out = os.path.join(tmp, "time.out")
    subprocess.call(["/usr/bin/time", "-f", "%M", "-o", out, *argv], env=env, stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(out) as f:
        return int(f.read().split()[-1])


def process_counts(argv, env, tmp):
    """(programs executed, processes created including the first) under strace -f."""
    out = os.path.join(tmp, "strace.out")
    subprocess.call(["strace", "-f", "-qq", "-o", out, "-e", "trace=execve,fork,vfork,clone,clone3", *argv],
                    env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(out) as f:
        lines = f.read().splitlines()
    # With -f a call may be split: "execve(... <unfinished ...>" then "<... execve resumed>) = 0".
    execs = sum(1 for ln in lines if re.search(r"(execve\(|<\.\.\. execve resumed>).*= 0$", ln.rstrip()))
    forks = sum(1 for ln in lines if re.search(r" (fork|vfork)\(", ln)
                or (re.search(r" clone3?\(", ln) and "CLONE_THREAD" not in ln))
    return execs, forks + 1


def bench_probes(node, ws, runs, tmp):
    mon, cc = ws.creds["monitor"], ws.creds["clustercheckuser"]
    conn = ["--host", node.ip, "--port", str(node.port), "--defaults-extra-file", ""]
    subjects = [
        ("readiness-check", [os.path.join(BIN, "readiness-check"), *conn, "--password-file",
                             mon.password_file], ENV),
        ("readiness-check-baseline.sh (bash + mariadb)", ["/bin/bash", BASELINE],
         dict(ENV, BENCH_HOST=node.ip, BENCH_PORT=str(node.port), BENCH_SECRET=mon.password_file,
              DEFAULTS_EXTRA_FILE="/nonexistent")),
        ("liveness-check", [os.path.join(BIN, "liveness-check"), *conn, "--password-file",
                            mon.password_file], ENV),
        ("haproxy-check", [os.path.join(BIN, "haproxy-check"), *conn, "--password-file", mon.password_file,
                           "--env-secret-dir", tmp, "--available-nodes-file", "/nonexistent",
                           "127.0.0.1", "3306", node.ip, "3306"], ENV),
        ("clustercheck (one-shot)", [os.path.join(BIN, "clustercheck"), *conn, "--password-file",
                                     cc.password_file, "--disabled-file", "/nonexistent"], ENV),
    ]
    static = os.path.join(BIN, "static")            # `make static` (musl), when built
    if os.path.exists(os.path.join(static, "readiness-check")):
        subjects.append(("readiness-check (static, musl)", [os.path.join(static, "readiness-check"), *conn,
                                                            "--password-file", mon.password_file], ENV))
    if os.path.exists(os.path.join(static, "clustercheck")):
        subjects.append(("clustercheck one-shot (static, musl)", [os.path.join(static, "clustercheck"), *conn,
                                                                  "--password-file", cc.password_file,
                                                                  "--disabled-file", "/nonexistent"], ENV))
    for name, argv, env in subjects:
        _, rc, _ = wall_once(argv, env)
        if rc != 0:
            sys.exit(f"bench: {name} says the node is not healthy (exit {rc}): {argv}")
    walls = {name: [] for name, _, _ in subjects}
    cpus = {name: [] for name, _, _ in subjects}
    for _ in range(3):                              # warm-up: page cache, server
        for name, argv, env in subjects:
            wall_once(argv, env)
    for _ in range(runs):                           # interleaved, so load hits all alike
        for name, argv, env in subjects:
            w, _, c = wall_once(argv, env)
            walls[name].append(w * 1000)
            cpus[name].append(c * 1000)
    rss_runs = max(5, runs // 10)
    rows = []
    for name, argv, env in subjects:
        rss = statistics.median(peak_rss_kb(argv, env, tmp) for _ in range(rss_runs)) / 1024
        execs, procs = process_counts(argv, env, tmp)
        w = walls[name]
        rows.append((name, statistics.median(w), pctl(w, 0.90), pctl(w, 0.99), statistics.mean(cpus[name]),
                     rss, execs, procs))
    return rows


def start_listener(node, ws, tmp, *extra):
    cc = ws.creds["clustercheckuser"]
    log = open(os.path.join(tmp, "listen.log"), "wb")
    p = subprocess.Popen([os.path.join(BIN, "clustercheck"), "--listen", "127.0.0.1:0", "--host", node.ip,
                          "--port", str(node.port), "--user", cc.user, "--password-file", cc.password_file,
                          "--defaults-extra-file", "", "--disabled-file", "/nonexistent", "--timeout", "2",
                          "--max-connections", "1000", *extra],
                         stdout=log, stderr=log, stdin=subprocess.DEVNULL, env=ENV)
    deadline = time.monotonic() + 10
    while True:
        with open(log.name, "rb") as f:
            m = re.search(rb"\(port (\d+)\)", f.read())
        if m:
            return p, int(m.group(1)), log
        if p.poll() is not None or time.monotonic() > deadline:
            sys.exit("bench: clustercheck --listen did not start")
        time.sleep(0.02)


def status_queries(node):
    return int(node.value("SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS "
                          "WHERE VARIABLE_NAME='COM_SHOW_STATUS'"))


def bench_listen(node, ws, requests, tmp, load):
    rows = []
    for cache in (0, 1000):
        for conc in (1, 4):
            extra = ("--cache-ms", str(cache)) if cache else ()
            p, port, log = start_listener(node, ws, tmp, *extra)
            try:
                subprocess.run([load, "127.0.0.1", str(port), "200", "1"], capture_output=True, check=True)
                q0 = status_queries(node)
                out = subprocess.run([load, "127.0.0.1", str(port), str(requests), str(conc), "120"],
                                     capture_output=True, text=True, check=True).stdout
                q1 = status_queries(node)
            finally:
                p.terminate()
                p.wait(10)
                log.close()
            r = dict(kv.split("=") for kv in out.split())
            rows.append((cache, conc, int(r["requests"]), int(r["ok"]), int(r["non200"]), int(r["errors"]),
                         float(r["rps"]), float(r["p50"]), float(r["p99"]), float(r["max"]), q1 - q0))
    return rows


def bench_sst(runs):
    """liveness-check with and without an SST: rows (case, extra processes, median, p90, max ms, /proc reads)."""
    lock = servers.ServerLock()
    lock.acquire(timeout=900)
    ws = servers.Workspace()
    rows, sleepers = [], []
    try:
        cluster = servers.GaleraCluster(ws, size=2).start()
        synced, joiner = cluster[1], cluster[2]
        mon = ws.creds["monitor"]

        def argv(node, *extra):
            return [os.path.join(BIN, "liveness-check"), "--host", node.ip, "--port", str(node.port),
                    "--defaults-extra-file", "", "--password-file", mon.password_file, "--datadir", node.datadir,
                    "--recovery-file", "/nonexistent", "--timeout", "2", *extra]

        def timed(a):
            walls = []
            for _ in range(runs):
                w, rc, _ = wall_once(a, ENV)
                if rc != 0:
                    sys.exit(f"bench: liveness-check said not alive: {a}")
                walls.append(w * 1000)
            return statistics.median(walls), pctl(walls, 0.90), max(walls)

        def proc_reads(a):
            """Files under /proc the probe opened or whose link it read, once under strace."""
            out = os.path.join(ws.base, "strace.out")
            subprocess.call(["strace", "-qq", "-o", out, "-e", "trace=open,openat,readlink,readlinkat", *a],
                            env=ENV, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            with open(out) as f:
                return sum(1 for ln in f if '"/proc/' in ln)

        def with_and_without_sleepers(cases):
            for extra in (0, 1000):
                while len(sleepers) < extra:
                    sleepers.append(subprocess.Popen(["sleep", "600"], stdin=subprocess.DEVNULL))
                for name, a, prepare in cases:
                    prepare()
                    rows.append((name, extra, *timed(a), proc_reads(a)))
            while sleepers:
                p = sleepers.pop()
                p.kill()
                p.wait()

        sst_file = os.path.join(joiner.datadir, "sst_in_progress")

        def file_present(on):
            def prepare():
                here, away = (sst_file, sst_file + ".away") if on else (sst_file + ".away", sst_file)
                if os.path.exists(away):
                    os.rename(away, here)
            return prepare
        empty = os.path.join(ws.base, "empty-datadir")
        os.mkdir(empty)
        no_mysqld = argv(synced)
        no_mysqld[no_mysqld.index("--datadir") + 1] = empty
        with_and_without_sleepers([
            ("Synced node, no SST: mysqld by --pid-file", argv(synced, "--pid-file", synced.pid_file), lambda: None),
            ("Synced node, no SST: mysqld by the pass over /proc", argv(synced), lambda: None),
            ("no mysqld in the datadir: the whole pass over /proc", no_mysqld, lambda: None)])
        cluster.hold_sst(joiner)
        with_and_without_sleepers([
            ("joiner in SST, sst_in_progress present", argv(joiner), file_present(True)),
            ("joiner in SST, no sst_in_progress", argv(joiner), file_present(False))])
        file_present(True)()
        cluster.release_sst(wait=True)
    finally:
        for p in sleepers:
            p.kill()
            p.wait()
        ws.destroy()
        lock.release()
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=200, help="runs per probe (default 200)")
    ap.add_argument("--requests", type=int, default=20000, help="HTTP requests per load run (default 20000)")
    ap.add_argument("--sst", type=int, metavar="RUNS", help="only the SST section, RUNS runs per row")
    args = ap.parse_args()
    if args.sst:
        nproc = sum(1 for d in os.listdir("/proc") if d.isdigit())
        rows = bench_sst(args.sst)
        print(f"## liveness-check with and without a state transfer ({args.sst} runs per row; "
              f"{nproc} processes on the host before; wall = spawn to exit)\n")
        print("| case | extra processes | median ms | p90 ms | max ms | /proc files read |")
        print("|---|---|---|---|---|---|")
        for name, extra, med, p90, mx, reads in rows:
            print(f"| {name} | {extra} | {med:.2f} | {p90:.2f} | {mx:.2f} | {reads} |")
        print("\n/proc files read: opened or readlink'ed under /proc by one run (strace); extra processes: "
              "sleeping processes the bench started on the host for the row.")
        return
    for tool in ("gcc", "strace", "/usr/bin/time", "mariadb"):
        if not shutil.which(tool):
            sys.exit(f"bench: {tool} is missing (tests/deps.sh)")
    tmp = tempfile.mkdtemp(prefix="sk-bench-")
    load = os.path.join(tmp, "httpload")
    subprocess.run(["gcc", "-O2", "-pthread", "-o", load, os.path.join(HERE, "httpload.c")], check=True)
    ws = servers.Workspace()
    try:
        t0 = time.monotonic()
        node = start_galera_node(ws)
        version = node.value("SELECT VERSION()")
        print(f"target: 1-node MariaDB Galera {version} on {node.ip}:{node.port} "
              f"(started in {time.monotonic() - t0:.1f}s); {os.cpu_count()} CPUs, "
              f"load average {os.getloadavg()[0]:.2f}\n")

        rows = bench_probes(node, ws, args.runs, tmp)
        print(f"## one check per process ({args.runs} runs each, interleaved; wall = spawn to exit)\n")
        print("| probe | median ms | p90 ms | p99 ms | CPU ms | peak RSS MB | programs run | processes |")
        print("|---|---|---|---|---|---|---|---|")
        for name, med, p90, p99, cpu, rss, execs, procs in rows:
            print(f"| {name} | {med:.2f} | {p90:.2f} | {p99:.2f} | {cpu:.2f} | {rss:.1f} | {execs} | {procs} |")
        b = rows[1]
        for c in [r for r in rows if r[0].startswith("readiness-check") and r is not b]:
            print(f"| **ratio baseline / {c[0]}** | **{b[1] / c[1]:.1f}x** | {b[2] / c[2]:.1f}x | "
                  f"{b[3] / c[3]:.1f}x | {b[4] / c[4]:.1f}x | **{b[5] / c[5]:.1f}x** | {b[6]} vs {c[6]} | "
                  f"{b[7]} vs {c[7]} |")
        print("\nCPU ms: user + system time of the whole process tree, mean per run; "
              "peak RSS: GNU time %M, the largest single process of the run (median of "
              f"{max(5, args.runs // 10)} runs); programs run: successful execve; processes: "
              "the first plus every fork/vfork/non-thread clone (strace -f).\n")

        lrows = bench_listen(node, ws, args.requests, tmp, load)
        print(f"## clustercheck --listen ({args.requests} requests per row, a new TCP connection each, "
              "--timeout 2)\n")
        print("| --cache-ms | clients | requests | 200 | non-200 | errors | checks/s | p50 ms | p99 ms | "
              "max ms | status queries |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        for cache, conc, n, ok, non200, err, rps, p50, p99, mx, q in lrows:
            print(f"| {cache} | {conc} | {n} | {ok} | {non200} | {err} | {rps:.0f} | {p50:.2f} | {p99:.2f} | "
                  f"{mx:.2f} | {q} |")
        print("\nstatus queries: SHOW STATUS statements mysqld ran during the row (Com_show_status).")
    finally:
        ws.destroy()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
