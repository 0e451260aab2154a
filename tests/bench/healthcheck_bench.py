#!/usr/bin/python3
"""healthcheck benchmark: prints tables, asserts nothing (not a timed test).

    make all static && HEALTHCHECK_SH=/path/to/healthcheck.sh /usr/bin/python3 tests/bench/healthcheck_bench.py \
        [--runs 200] [--probes 500]

1. `healthcheck --connect --innodb_initialized` (the dynamic build, and the static one when
   bin/static has it) against `bash healthcheck.sh --connect --innodb_initialized` (the MariaDB
   image's script, from HEALTHCHECK_SH; it needs bash and the mariadb client): N runs of each,
   interleaved, the same option file for all: median/p90 wall time, CPU (user + system of the
   process tree), peak RSS (GNU time %M), programs executed and processes created (strace -f).
2. A kubelet-like loop: --probes probes one after the other, each either an exec of healthcheck
   (a new process and a new mysqld connection each time) or an httpGet of
   /healthcheck?connect&innodb_initialized on one `clustercheck --listen` (a new TCP connection per
   request, as the kubelet does; one persistent mysqld connection): CPU per probe of the probing
   side (the exec'd processes, or the listener), mysqld's CPU per probe, processes started and
   mysqld connections opened per probe. The kubelet's and the container runtime's own cost of an
   exec (runc, a new namespace entry) is not in these figures: it comes on top for exec probes.

The target is a 1-node MariaDB Galera started here on free loopback ports
(tests/integration/servers.py), stopped at the end. Needs: strace, GNU time (/usr/bin/time).
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import probes as pb  # noqa: E402  (the helpers of the probe benchmark, and servers)

servers = pb.servers
BIN = pb.BIN
ENV = pb.ENV
UPSTREAM = os.environ.get("HEALTHCHECK_SH", "")
TESTS = ["--connect", "--innodb_initialized"]


def proc_cpu_s(pid):
    """user + system seconds of a running process (and its waited-for children), /proc/PID/stat."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def mysqld_connections(node):
    return int(node.value("SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS "
                          "WHERE VARIABLE_NAME='Connections'"))


def write_cnf(path, node, creds):
    with open(path, "w") as f:
        f.write(f"[client]\nsocket={node.socket}\nport={node.port}\nuser={creds.user}\npassword={creds.password}\n")
    os.chmod(path, 0o600)
    return path


def bench_exec(node, cnf, runs, tmp):
    args = [f"--defaults-extra-file={cnf}", *TESTS]
    subjects = [("healthcheck (dynamic)", [os.path.join(BIN, "healthcheck"), *args])]
    if os.path.exists(os.path.join(BIN, "static", "healthcheck")):
        subjects.append(("healthcheck (static, musl)", [os.path.join(BIN, "static", "healthcheck"), *args]))
    if UPSTREAM and os.path.isfile(UPSTREAM) and shutil.which("mariadb"):
        subjects.append(("healthcheck.sh (bash + mariadb)", ["/bin/bash", UPSTREAM, *args]))
    else:
        print("healthcheck.sh: not measured (set HEALTHCHECK_SH to the script's path; it needs the mariadb "
              "client)\n")
    for name, argv in subjects:
        _, rc, _ = pb.wall_once(argv, ENV)
        if rc != 0:
            sys.exit(f"bench: {name} says the node is not healthy (exit {rc}): {argv}")
    walls = {name: [] for name, _ in subjects}
    cpus = {name: [] for name, _ in subjects}
    for _ in range(3):
        for _, argv in subjects:
            pb.wall_once(argv, ENV)
    for _ in range(runs):
        for name, argv in subjects:
            w, _, c = pb.wall_once(argv, ENV)
            walls[name].append(w * 1000)
            cpus[name].append(c * 1000)
    rows = []
    for name, argv in subjects:
        rss = statistics.median(pb.peak_rss_kb(argv, ENV, tmp) for _ in range(max(5, runs // 10))) / 1024
        execs, procs = pb.process_counts(argv, ENV, tmp)
        w = walls[name]
        rows.append((name, statistics.median(w), pb.pctl(w, 0.90), statistics.mean(cpus[name]), rss, execs, procs))
    return rows


def http_get(port, path):
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
        raw = b""
        while chunk := s.recv(65536):
            raw += chunk
    return int(raw.split(b" ", 2)[1])


def start_listener(node, ws, tmp):
    mon = ws.creds["monitor"]
    log = open(os.path.join(tmp, "listen.log"), "wb")
    p = subprocess.Popen([os.path.join(BIN, "clustercheck"), "--listen", "127.0.0.1:0", "--socket", node.socket,
                          "--user", mon.user, "--password-file", mon.password_file, "--defaults-extra-file", "",
                          "--timeout", "2"], stdout=log, stderr=log, stdin=subprocess.DEVNULL, env=ENV)
    deadline = time.monotonic() + 10
    while True:
        with open(log.name, "rb") as f:
            text = f.read()
        if b"(port " in text:
            return p, int(text.split(b"(port ", 1)[1].split(b")", 1)[0]), log
        if p.poll() is not None or time.monotonic() > deadline:
            sys.exit("bench: clustercheck --listen did not start")
        time.sleep(0.02)


def bench_loop(node, ws, cnf, probes):
    """(name, probing-side CPU ms/probe, mysqld CPU ms/probe, processes/probe, connections/probe, wall ms/probe)."""
    mysqld = node.pid
    rows = []
    argv = [os.path.join(BIN, "static", "healthcheck")]
    if not os.path.exists(argv[0]):
        argv = [os.path.join(BIN, "healthcheck")]
    argv += [f"--defaults-extra-file={cnf}", *TESTS]
    c0, m0, k0, t0 = pb._children_cpu(), proc_cpu_s(mysqld), mysqld_connections(node), time.monotonic()
    for _ in range(probes):
        if subprocess.call(argv, env=ENV, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL) != 0:
            sys.exit("bench: an exec probe failed")
    c1, m1, k1, t1 = pb._children_cpu(), proc_cpu_s(mysqld), mysqld_connections(node), time.monotonic()
    rows.append((f"exec `{os.path.relpath(argv[0], pb.ROOT)} --connect --innodb_initialized`",
                 (c1 - c0) * 1000 / probes, (m1 - m0) * 1000 / probes, 1.0, (k1 - k0 - 1) / probes,
                 (t1 - t0) * 1000 / probes))

    p, port, log = start_listener(node, ws, tempfile.gettempdir())
    try:
        path = "/healthcheck?connect&innodb_initialized"
        if http_get(port, path) != 200:
            sys.exit("bench: the listener says the node is not healthy")
        c0, m0, k0, t0 = proc_cpu_s(p.pid), proc_cpu_s(mysqld), mysqld_connections(node), time.monotonic()
        for _ in range(probes):
            if http_get(port, path) != 200:
                sys.exit("bench: an httpGet probe failed")
        c1, m1, k1, t1 = proc_cpu_s(p.pid), proc_cpu_s(mysqld), mysqld_connections(node), time.monotonic()
    finally:
        p.terminate()
        p.wait(10)
        log.close()
    rows.append((f"httpGet `{path}` (clustercheck --listen)", (c1 - c0) * 1000 / probes, (m1 - m0) * 1000 / probes,
                 0.0, (k1 - k0 - 1) / probes, (t1 - t0) * 1000 / probes))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=200, help="runs per subject (default 200)")
    ap.add_argument("--probes", type=int, default=500, help="probes per row of the kubelet-like loop (default 500)")
    args = ap.parse_args()
    for tool in ("strace", "/usr/bin/time"):
        if not shutil.which(tool):
            sys.exit(f"bench: {tool} is missing (tests/deps.sh)")
    tmp = tempfile.mkdtemp(prefix="sk-hcbench-")
    ws = servers.Workspace()
    try:
        t0 = time.monotonic()
        node = pb.start_galera_node(ws)
        cnf = write_cnf(os.path.join(tmp, "client.cnf"), node, ws.creds["monitor"])
        print(f"target: 1-node MariaDB Galera {node.value('SELECT VERSION()')} on {node.socket} "
              f"(started in {time.monotonic() - t0:.1f}s); {os.cpu_count()} CPUs, "
              f"load average {os.getloadavg()[0]:.2f}\n")

        rows = bench_exec(node, cnf, args.runs, tmp)
        print(f"## healthcheck vs healthcheck.sh, `--connect --innodb_initialized` ({args.runs} runs each, "
              "interleaved)\n")
        print("| subject | median ms | p90 ms | CPU ms | peak RSS MB | programs run | processes |")
        print("|---|---|---|---|---|---|---|")
        for name, med, p90, cpu, rss, execs, procs in rows:
            print(f"| {name} | {med:.2f} | {p90:.2f} | {cpu:.2f} | {rss:.1f} | {execs} | {procs} |")
        script = [r for r in rows if r[0].startswith("healthcheck.sh")]
        for ours in [r for r in rows if not r[0].startswith("healthcheck.sh")] if script else []:
            s = script[0]
            print(f"| **ratio healthcheck.sh / {ours[0]}** | **{s[1] / ours[1]:.1f}x** | {s[2] / ours[2]:.1f}x | "
                  f"{s[3] / ours[3]:.1f}x | **{s[4] / ours[4]:.1f}x** | {s[5]} vs {ours[5]} | {s[6]} vs {ours[6]} |")
        print("\nCPU: user + system of the process tree, mean per run; peak RSS: the largest single process "
              "(GNU time %M, median); programs run: successful execve; processes: the first plus every "
              "fork/vfork/non-thread clone (strace -f).\n")

        lrows = bench_loop(node, ws, cnf, args.probes)
        print(f"## kubelet-like loop: {args.probes} probes one after the other, exec vs httpGet\n")
        print("| probe | CPU ms per probe (prober) | mysqld CPU ms per probe | processes per probe | "
              "mysqld connections per probe | wall ms per probe |")
        print("|---|---|---|---|---|---|")
        for name, cpu, mcpu, procs, conns, wall in lrows:
            print(f"| {name} | {cpu:.3f} | {mcpu:.3f} | {procs:g} | {conns:.2f} | {wall:.2f} |")
        e, h = lrows

        def ratio(a, b):
            return f"{a / b:.1f}x" if b > 0 else "n/a (0 ticks)"
        print(f"| **ratio exec / httpGet** | **{ratio(e[1], h[1])}** | {ratio(e[2], h[2])} | {e[3]:g} vs 0 | "
              f"{e[4]:.2f} vs {h[4]:.2f} | {ratio(e[5], h[5])} |")
        print("\nprober CPU: the exec'd processes (RUSAGE_CHILDREN), or the listener's /proc/PID/stat; "
              "the kubelet's and the runtime's exec cost is not included. mysqld connections: its Connections "
              "counter (the benchmark's own reading excluded).")
    finally:
        ws.destroy()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
