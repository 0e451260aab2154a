#!/usr/bin/python3
"""Run every benchmark in one go and write one Markdown report (what `make bench` runs).

    make all && /usr/bin/python3 tests/bench/report.py [--out build/bench/report.md] [sizes...]

Runs, one after the other, on loopback:

1. tests/bench/probes.py: each probe against the bash + mariadb baseline, interleaved, then
   clustercheck --listen under a bounded load (a 1-node Galera started on free ports);
   tests/bench/healthcheck_bench.py: healthcheck against the MariaDB image's healthcheck.sh
   (HEALTHCHECK_SH; left out of the table when unset), and exec vs httpGet probes in a
   kubelet-like loop;
2. tests/bench/health_bench.py: proxysql-sync's /healthz, /readyz and /metrics under a
   bounded load, then /healthz and clustercheck --listen's /liveness while 300 connections from
   other loopback addresses trickle, and again while 16 x 32 kept-alive connections hold every
   slot (a 1-node Galera started for it);
3. tests/bench/sync_bench.py: proxysql-sync against the Consul and ProxySQL doubles (again with
   the static build when bin/static/ has it);
   tests/bench/scale_bench.py: proxysql-sync at 12k / 25k / 52k / 100k keys (initial sync, one
   change, agent CPU, peak RSS, /healthz during the first sync) and back-to-back changes with a
   few dozen keys;
4. tests/bench/cluster_bench.py: cluster-mode = single-writer on a 3-node ProxySQL Cluster of
   doubles: a KV change to every node (p50, p99) and the takeover after the writer's agent stops.
5. tests/bench/fanout_bench.py: 50, 100 and 200 agents on one Consul double (a short run: 5 s
   blocking waits, 3 timed changes and 2 counted rounds per fleet, about 1.5 min).
6. tests/bench/patroni_failover.py: 10 kill-based failovers of a real 3-member Patroni cluster of
   PostgreSQL 15 on the Consul double, to the new leader key and to the new writer in the ProxySQL
   double's runtime_pgsql_servers (about 3 min; needs patroni python3-consul postgresql-15).

Each prints Markdown; this script puts the outputs under one header with the machine's facts
(cores, load average at the start, kernel, date), writes the report and prints it. It
asserts nothing about timing: the figures are ratios and distributions from one run. It exits
non-zero when a benchmark fails to run at all (a probe errors, the agent never syncs), after
writing what the others measured.

SIDEKICK_BIN names the binaries' directory (default bin/); bin/static/ is measured too when
`make static` built it.
"""

import argparse
import datetime
import os
import platform
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable


def machine_facts(bin_dir):
    model = ""
    try:
        with open("/proc/cpuinfo") as f:
            model = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), "")
    except OSError:
        pass
    load = os.getloadavg()
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip() or "unknown"
    if subprocess.run(["git", "-C", ROOT, "diff", "--quiet", "HEAD"], capture_output=True).returncode == 1:
        commit += " with uncommitted changes"
    static = os.path.join(bin_dir, "static")
    built = "present" if os.path.exists(os.path.join(static, "readiness-check")) else "absent (`make static`)"
    return ("Machine: %d cores%s; load average at start %.2f %.2f %.2f (1, 5, 15 min); Linux %s; %s. "
            "Commit %s; binaries from %s, static musl build %s."
            % (os.cpu_count() or 0, " (%s)" % model if model else "", *load, platform.release(),
               datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), commit,
               os.path.relpath(bin_dir, ROOT), built))


def run_section(argv, env):
    """(exit status, stdout, last stderr lines, seconds); stderr also goes to ours as it comes."""
    t0 = time.monotonic()
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                         text=True, env=env, cwd=ROOT)
    tail = []

    def tee():
        for line in p.stderr:
            sys.stderr.write(line)
            tail.append(line)
            del tail[:-20]
    t = threading.Thread(target=tee, daemon=True)
    t.start()
    out = p.stdout.read()
    rc = p.wait()
    t.join(5)
    return rc, out, "".join(tail), time.monotonic() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "bench", "report.md"),
                    help="report file (default build/bench/report.md)")
    ap.add_argument("--runs", type=int, default=200, help="runs per probe (default 200)")
    ap.add_argument("--requests", type=int, default=10000,
                    help="requests per clustercheck --listen row (default 10000)")
    ap.add_argument("--health-requests", type=int, default=5000,
                    help="requests per health-port row (default 5000)")
    ap.add_argument("--changes", type=int, default=300, help="KV changes for the sync latency (default 300)")
    ap.add_argument("--users", type=int, default=10000, help="users in the initial sync (default 10000)")
    ap.add_argument("--servers", type=int, default=2000, help="servers in the initial sync (default 2000)")
    ap.add_argument("--initial-runs", type=int, default=3, help="initial syncs, each against a fresh ProxySQL "
                    "(default 3)")
    ap.add_argument("--scale", default="12000,25000,52000,100000",
                    help="key counts of the scale table (default 12000,25000,52000,100000)")
    ap.add_argument("--cluster-changes", type=int, default=100,
                    help="KV changes timed on the 3-node single-writer cluster (default 100)")
    ap.add_argument("--fanout", default="50,100,200", help="fan-out fleet sizes (default 50,100,200)")
    ap.add_argument("--fanout-changes", type=int, default=3, help="KV changes timed per fleet (default 3)")
    ap.add_argument("--patroni-failovers", type=int, default=10,
                    help="kill-based Patroni failovers timed (default 10)")
    a = ap.parse_args()

    bin_dir = os.path.abspath(os.environ.get("SIDEKICK_BIN", os.path.join(ROOT, "bin")))
    env = dict(os.environ, SIDEKICK_BIN=bin_dir)
    facts = machine_facts(bin_dir)
    sync_argv = [PYTHON, os.path.join(HERE, "sync_bench.py"), "--changes", str(a.changes), "--users", str(a.users),
                 "--servers", str(a.servers), "--initial-runs", str(a.initial_runs)]
    sections = [
        ("Probes and clustercheck --listen",
         [PYTHON, os.path.join(HERE, "probes.py"), "--runs", str(a.runs), "--requests", str(a.requests)], env),
        ("healthcheck vs healthcheck.sh, exec vs httpGet",
         [PYTHON, os.path.join(HERE, "healthcheck_bench.py"), "--runs", str(a.runs)], env),
        ("proxysql-sync health port",
         [PYTHON, os.path.join(HERE, "health_bench.py"), "--requests", str(a.health_requests)], env),
        ("proxysql-sync: Consul KV -> ProxySQL", sync_argv, env),
        ("proxysql-sync at scale",
         [PYTHON, os.path.join(HERE, "scale_bench.py"), "--sizes", a.scale, "--changes", str(a.changes)], env),
    ]
    static_dir = os.path.join(bin_dir, "static")
    if os.path.exists(os.path.join(static_dir, "proxysql-sync")):
        sections.append(("proxysql-sync: Consul KV -> ProxySQL (static, musl)", sync_argv,
                         dict(env, SIDEKICK_BIN=static_dir)))
    sections.append(("proxysql-sync single-writer on a ProxySQL Cluster",
                     [PYTHON, os.path.join(HERE, "cluster_bench.py"), "--changes", str(a.cluster_changes)], env))
    sections.append(("proxysql-sync fan-out: many agents, one Consul",
                     [PYTHON, os.path.join(HERE, "fanout_bench.py"), "--agents", a.fanout,
                      "--changes", str(a.fanout_changes), "--quiet-changes", "2", "--idle", "8"], env))
    sections.append(("proxysql-sync and a Patroni failover (PostgreSQL)",
                     [PYTHON, os.path.join(HERE, "patroni_failover.py"), "--failovers", str(a.patroni_failovers)],
                     env))
    t_start = time.monotonic()
    parts, failed = [], []
    for title, argv, section_env in sections:
        print("bench: %s ..." % title, file=sys.stderr, flush=True)
        rc, out, err_tail, secs = run_section(argv, section_env)
        body = out.strip()
        if not body.startswith("## "):   # a heading of ours; the script's own become subsections
            body = "\n".join("#" + ln if ln.startswith("## ") else ln for ln in body.splitlines())
            body = "## %s\n\n%s" % (title, body) if body else "## %s" % title
        if rc != 0:
            failed.append(title)
            body += "\n\n**Did not run to the end** (`%s` exited with status %d):\n\n```\n%s```" % (
                " ".join(os.path.relpath(x, ROOT) if x.startswith(ROOT) else x for x in argv[1:]), rc,
                err_tail or "(no message)\n")
        parts.append("%s\n\n_%s: %.0f s._" % (body, os.path.basename(argv[1]), secs))
        print("bench: %s: %s in %.0f s" % (title, "done" if rc == 0 else "FAILED (status %d)" % rc, secs),
              file=sys.stderr, flush=True)

    report = "\n\n".join([
        "# sidekick benchmarks",
        facts,
        "Produced by `make bench` (tests/bench/report.py) in %.0f s: every benchmark on loopback in one run, "
        "the probes interleaved with their shell baseline. The figures are ratios and distributions "
        "from this run, not promises; nothing here is asserted." % (time.monotonic() - t_start),
        *parts,
    ]) + "\n"
    if failed:
        report += "\n**Failed to run:** %s.\n" % ", ".join(failed)
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "w") as f:
        f.write(report)
    sys.stdout.write(report)
    shown = os.path.relpath(os.path.abspath(a.out))
    print("\nbench: report written to %s" % (shown if not shown.startswith("..") else os.path.abspath(a.out)),
          file=sys.stderr)
    if failed:
        sys.exit("bench: failed to run: %s" % ", ".join(failed))


if __name__ == "__main__":
    main()
