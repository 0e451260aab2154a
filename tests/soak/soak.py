#!/usr/bin/python3
"""Soak and valgrind runs of proxysql-sync against the Consul and ProxySQL doubles.

    /usr/bin/python3 tests/soak/soak.py                      # make soak: 3000 KV changes, 200 restarts
    /usr/bin/python3 tests/soak/soak.py --changes 300 --restarts 20
    /usr/bin/python3 tests/soak/soak.py --valgrind           # make valgrind: the agent and probes under memcheck

Soak: one agent, one Consul double, one ProxySQL double on loopback. The script makes KV changes
of every kind the agent handles (replicas added, removed and re-weighted, users added, removed and
given new passwords, orchestrator failovers written key by key, rejected hostile entries) and
restarts ProxySQL every so often (alternately with an empty config and from its disk database).
Every --every changes it waits until ProxySQL's runtime matches the KV state, then samples the
agent's RSS (/proc/PID/status VmRSS), open descriptors (/proc/PID/fd) and threads, and prints a
table. It fails when the agent exits, a convergence takes longer than --converge-timeout, or after
the warm-up (the first --warmup fraction of samples) RSS grows more than --rss-slack-kb over the
warm-up's highest sample or the descriptor count more than --fd-slack over the warm-up's highest.
The whole run stops at --max-seconds (what was sampled so far is judged). --scrape S also reads
/metrics and /readyz every S seconds throughout (make test-tsan: the health thread against the
others).

Valgrind: the same agent under `valgrind --leak-check=full --errors-for-leak-kinds=definite,indirect
--error-exitcode=99` for --changes (default 200) changes and --restarts (default 4) ProxySQL
restarts, stopped with SIGTERM; then the probes under the same valgrind: proxysql-check against
the ProxySQL double, each MySQL probe against a closed port, clustercheck --listen answering a few
requests, usage errors. Every run must end with 0 errors and no definite or indirect leak.

Binaries: $SIDEKICK_BIN (default bin/). Exit status 0 when every check held.
"""

import argparse
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests"))

from fakes.consul import Consul  # noqa: E402
from fakes.proxysql import ProxySQL  # noqa: E402

BIN = os.environ.get("SIDEKICK_BIN", os.path.join(ROOT, "bin"))
ADMIN_PASSWORD = "adm-" + os.urandom(6).hex()

# Reports that are not ours: still-reachable and "possible" leaks are not counted (only definite
# and indirect ones are), so only real errors inside system libraries would need an entry here.
VALGRIND_SUPPRESSIONS = """
{
   libmicrohttpd-epoll-uninitialised-padding
   Memcheck:Param
   epoll_ctl(event)
   fun:epoll_ctl
   obj:*libmicrohttpd.so*
}
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def log(msg):
    print(msg, flush=True)


class Agent:
    def __init__(self, workdir, consul, px, wrapper=(), extra=""):
        self.workdir = workdir
        self.health_port = free_port()
        self.cfg = os.path.join(workdir, "sync.cfg")
        self.log = os.path.join(workdir, "agent.log")
        pwfile = os.path.join(workdir, "admin-pw")
        with open(pwfile, "w") as f:
            f.write(px.admin_password)
        os.chmod(pwfile, 0o600)
        with open(self.cfg, "w") as f:
            f.write("""
consul-addr = "%s"
region = "eu"
users-prefix = "proxysql/users"
health-listen = "127.0.0.1:%d"
quiescence-min = 0.02
quiescence-max = 0.5
drain-timeout = 30.0
resync-interval = 2.0
wait = 30.0
clusters = ( { alias = "shop"; writer_hostgroup = 10; reader_hostgroup = 11; } );
targets = ( { name = "px1"; address = "%s"; user = "%s"; password_file = "%s"; } );
%s
""" % (consul.addr, self.health_port, px.admin_addr, px.admin_user, pwfile, extra))
        env = {k: v for k, v in os.environ.items() if not k.startswith("CONSUL_")}
        out = open(self.log, "ab")
        self.proc = subprocess.Popen(list(wrapper) + [os.path.join(BIN, "proxysql-sync"), "-c", self.cfg],
                                     stdout=out, stderr=subprocess.STDOUT, env=env)
        out.close()

    def alive(self):
        return self.proc.poll() is None

    def metrics(self, path="/metrics"):
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d%s" % (self.health_port, path), timeout=10) as r:
                return r.read().decode()
        except (OSError, urllib.error.URLError):
            return ""

    def scrape(self, interval, stop):
        """/metrics and /readyz every `interval` seconds until `stop` is set: the health thread
        reads what the other threads write while they work (make test-tsan)."""
        while not stop.wait(interval):
            self.metrics()
            self.metrics("/readyz")

    def sample(self):
        pid = self.proc.pid
        with open("/proc/%d/status" % pid) as f:
            status = f.read()
        rss = int(re.search(r"VmRSS:\s+(\d+)", status).group(1))
        threads = int(re.search(r"Threads:\s+(\d+)", status).group(1))
        fds = len(os.listdir("/proc/%d/fd" % pid))
        return rss, fds, threads

    def stop(self, timeout):
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
                return None
        return self.proc.returncode

    def tail(self, n=30):
        with open(self.log, errors="replace") as f:
            return "".join(f.readlines()[-n:])


class World:
    """What KV says, and so what ProxySQL's runtime must become."""

    REPLICAS = ["db%02d" % i for i in range(1, 31)]
    USERS = ["app%02d" % i for i in range(1, 11)]

    def __init__(self, consul, rng):
        self.consul = consul
        self.rng = rng
        self.writer = "db00"
        self.replicas = {}               # name -> weight
        self.users = {}                  # name -> password
        self.hostile = 0
        self.changes = 0

    def setup(self):
        self.write_master(self.writer)
        for name in self.REPLICAS[:15]:
            self.put_replica(name, 1)
        for name in self.USERS[:5]:
            self.put_user(name)

    def write_master(self, host):
        # orchestrator's order: the main key, then its children
        self.consul.put("mysql/master/shop", ("%s:3306" % host).encode())
        self.consul.put("mysql/master/shop/hostname", host.encode())
        self.consul.put("mysql/master/shop/port", b"3306")
        self.writer = host

    def put_replica(self, name, weight):
        self.consul.put("mysql/replica/shop/eu/%s:3306" % name, json.dumps({"weight": weight}).encode())
        self.replicas[name] = weight

    def put_user(self, name):
        pw = "pw-" + os.urandom(8).hex()
        self.consul.put("proxysql/users/" + name, json.dumps({"password": pw, "default_hostgroup": 10}).encode())
        self.users[name] = pw

    def change(self):
        """One KV change of a kind picked at random (bounded sizes: no guard-rail shrink)."""
        self.changes += 1
        kind = self.rng.randrange(10)
        absent = [r for r in self.REPLICAS if r not in self.replicas]
        if kind <= 2 and absent and len(self.replicas) < 25:
            self.put_replica(self.rng.choice(absent), 1)
        elif kind <= 4 and len(self.replicas) > 10:
            name = self.rng.choice(sorted(self.replicas))
            self.consul.delete("mysql/replica/shop/eu/%s:3306" % name)
            del self.replicas[name]
        elif kind == 5 and self.replicas:
            self.put_replica(self.rng.choice(sorted(self.replicas)), self.rng.randrange(1, 100))
        elif kind == 6:
            absent_users = [u for u in self.USERS if u not in self.users]
            if absent_users and (len(self.users) < 4 or self.rng.random() < 0.5):
                self.put_user(self.rng.choice(absent_users))
            elif len(self.users) > 3:
                name = self.rng.choice(sorted(self.users))
                self.consul.delete("proxysql/users/" + name)
                del self.users[name]
            else:
                self.put_user(self.rng.choice(sorted(self.users)))
        elif kind == 7 and self.users:
            self.put_user(self.rng.choice(sorted(self.users)))   # a new password
        elif kind == 8:
            # a failover to a host that is not a replica
            self.write_master("db%02d" % (31 + self.rng.randrange(5)) if self.writer == "db00" else "db00")
        else:
            # hostile entries: rejected with a log line, the rest still applies
            self.hostile += 1
            key = "mysql/replica/shop/eu/evil%d'; DELETE FROM mysql_servers; --" % (self.hostile % 7)
            if self.hostile % 2:
                self.consul.put(key, b"x")
            else:
                self.consul.delete(key)

    def expected_servers(self):
        want = {("10", self.writer, "3306")}
        want |= {("11", r, "3306") for r in self.replicas}
        return want


def runtime_state(px):
    servers = {(r[0], r[1], r[2]) for r in px.query(
        "SELECT hostgroup_id, hostname, port, status FROM runtime_mysql_servers") if r[3] == "ONLINE"}
    other = [r for r in px.query("SELECT hostgroup_id, hostname, port, status FROM runtime_mysql_servers")
             if r[3] != "ONLINE"]
    # main.* keeps the password as written (runtime may show a hash); runtime must have the names
    users = {}
    for r in px.query("SELECT username, password FROM main.mysql_users"):
        users.setdefault(r[0], set()).add(r[1])
    if {r[0] for r in px.query("SELECT username FROM runtime_mysql_users")} != set(users):
        users["(runtime differs)"] = set()
    return servers, other, users


def converged(world, px):
    try:
        servers, other, users = runtime_state(px)
    except Exception:
        return False
    return (servers == world.expected_servers() and not other
            and users == {u: {pw} for u, pw in world.users.items()})


def wait_converged(world, px, agent, timeout):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if not agent.alive():
            return False
        if converged(world, px):
            return True
        time.sleep(0.05)
    return False


def applies(agent):
    m = re.search(r'proxysql_sync_applies_total\{target="px1"\} (\d+)', agent.metrics())
    return int(m.group(1)) if m else -1


def soak(args):
    rng = random.Random(args.seed)
    workdir = tempfile.mkdtemp(prefix="sk-soak-")
    consul = Consul()
    consul.start()
    px = ProxySQL(admin_password=ADMIN_PASSWORD)
    px.start()
    world = World(consul, rng)
    world.setup()
    wrapper = ()
    vlog = None
    if args.valgrind:
        vlog = os.path.join(workdir, "valgrind-agent.log")
        wrapper = valgrind_cmd(workdir, vlog)
    agent = Agent(workdir, consul, px, wrapper)
    scraping = threading.Event()
    if args.scrape:
        threading.Thread(target=agent.scrape, args=(args.scrape, scraping), daemon=True).start()
    started = time.monotonic()
    samples = []
    failures = []
    restarts = 0
    every = max(1, args.every)
    restart_every = max(1, args.changes // args.restarts) if args.restarts else 0
    header = "%6s %8s %8s %8s %9s %5s %7s %8s" % ("sample", "changes", "restarts", "applies", "rss_kib", "fds",
                                                   "threads", "elapsed")
    try:
        if not wait_converged(world, px, agent, args.converge_timeout * (5 if args.valgrind else 1)):
            failures.append("the first sync did not converge")
            raise StopIteration
        log(header)
        while world.changes < args.changes:
            if time.monotonic() - started > args.max_seconds:
                log("time bound of %ds reached after %d changes" % (args.max_seconds, world.changes))
                break
            world.change()
            if restart_every and world.changes % restart_every == 0 and restarts < args.restarts:
                # alternately: config lost (--initial), and back from the disk database
                px.restart(initial=restarts % 2 == 0)
                restarts += 1
            if args.pace:
                time.sleep(args.pace)
            if world.changes % every == 0 or world.changes == args.changes:
                if not wait_converged(world, px, agent, args.converge_timeout):
                    if not agent.alive():
                        failures.append("the agent exited (code %s)" % agent.proc.returncode)
                    else:
                        failures.append("no convergence within %ss after %d changes" %
                                        (args.converge_timeout, world.changes))
                    break
                rss, fds, threads = agent.sample()
                samples.append((world.changes, restarts, applies(agent), rss, fds, threads,
                                time.monotonic() - started))
                log("%6d %8d %8d %8d %9d %5d %7d %7.1fs" % ((len(samples),) + samples[-1][:6] + (samples[-1][6],)))
    except StopIteration:
        pass
    finally:
        scraping.set()
        rc = agent.stop(60 if args.valgrind else 10)
        if rc not in (0,):
            failures.append("agent exit code %r after SIGTERM" % rc)
        px.close()
        consul.close()
    if failures:
        log(agent.tail())

    if samples and not args.valgrind:
        warm = max(1, int(len(samples) * args.warmup))
        base_rss = max(s[3] for s in samples[:warm])
        base_fds = max(s[4] for s in samples[:warm])
        after = samples[warm:] or samples[-1:]
        peak_rss = max(s[3] for s in after)
        peak_fds = max(s[4] for s in after)
        log("after warm-up (%d samples): RSS %d -> peak %d KiB (%+d, slack %d), fds %d -> peak %d (slack %d)"
            % (warm, base_rss, peak_rss, peak_rss - base_rss, args.rss_slack_kb, base_fds, peak_fds, args.fd_slack))
        if peak_rss - base_rss > args.rss_slack_kb:
            failures.append("RSS grew by %d KiB after warm-up" % (peak_rss - base_rss))
        if peak_fds - base_fds > args.fd_slack:
            failures.append("open descriptors grew by %d after warm-up" % (peak_fds - base_fds))
    log("%d changes, %d ProxySQL restarts, %d samples in %.0fs"
        % (world.changes, restarts, len(samples), time.monotonic() - started))
    if args.valgrind:
        problems, summary = judge_valgrind("proxysql-sync", vlog)
        log("valgrind proxysql-sync (%d changes, %d applies, %d restarts, SIGTERM): %s"
            % (world.changes, samples[-1][2] if samples else -1, restarts, summary))
        failures += problems
    if not failures:
        subprocess.run(["rm", "-rf", workdir])
    return failures


# -- valgrind ---------------------------------------------------------------------------------

def valgrind_cmd(workdir, logfile):
    supp = os.path.join(workdir, "valgrind.supp")
    with open(supp, "w") as f:
        f.write(VALGRIND_SUPPRESSIONS)
    return ["valgrind", "--leak-check=full", "--errors-for-leak-kinds=definite,indirect",
            "--show-leak-kinds=definite,indirect", "--error-exitcode=99", "--track-fds=no",
            "--suppressions=" + supp, "--log-file=" + logfile]


def valgrind_summary(text):
    """'0 errors, definitely 0, indirectly 0' from a memcheck log (a --quiet log says only problems)."""
    m = re.search(r"ERROR SUMMARY: (\d+) errors", text)
    d = re.search(r"definitely lost: ([\d,]+) bytes", text)
    i = re.search(r"indirectly lost: ([\d,]+) bytes", text)
    return "%s errors, definitely lost %s, indirectly lost %s bytes" % (
        m.group(1) if m else "0", d.group(1) if d else "0", i.group(1) if i else "0")


def judge_valgrind(what, logfile):
    with open(logfile, errors="replace") as f:
        text = f.read()
    problems = []
    m = re.search(r"ERROR SUMMARY: (\d+) errors", text)
    if m and int(m.group(1)) != 0:
        problems.append("%s: valgrind counted %s errors (%s)" % (what, m.group(1), logfile))
    for kind in ("definitely", "indirectly"):
        m = re.search(kind + r" lost: ([\d,]+) bytes", text)
        if m and m.group(1) != "0":
            problems.append("%s: %s lost %s bytes (%s)" % (what, kind, m.group(1), logfile))
    if "ERROR SUMMARY" not in text:
        problems.append("%s: no valgrind summary in %s" % (what, logfile))
    if problems:
        print(text[-6000:])
    return problems, valgrind_summary(text)


def valgrind_probes(args):
    """Each probe under memcheck, on the paths that need no MySQL server."""
    workdir = tempfile.mkdtemp(prefix="sk-valgrind-")
    failures = []
    runs = 0
    pwfile = os.path.join(workdir, "pw")
    with open(pwfile, "w") as f:
        f.write(ADMIN_PASSWORD)
    closed = str(free_port())

    def run(name, argv, want_rc, stdin=None, env=None):
        nonlocal runs
        runs += 1
        vlog = os.path.join(workdir, "valgrind-%d-%s.log" % (runs, name))
        cmd = valgrind_cmd(workdir, vlog) + [os.path.join(BIN, name)] + argv
        r = subprocess.run(cmd, capture_output=True, timeout=120, stdin=stdin, env=env)
        problems, summary = judge_valgrind("%s %s" % (name, " ".join(argv)), vlog)
        if r.returncode == 99:
            problems.append("%s: valgrind exit 99" % name)
        elif r.returncode not in want_rc:
            problems.append("%s %s: exit %d, wanted %s: %s" % (name, " ".join(argv), r.returncode, want_rc,
                                                                r.stdout[-300:] + r.stderr[-300:]))
        log("  %-15s %-44s exit %d  %s%s" % (name, " ".join(argv)[:44], r.returncode, summary,
                                              "" if not problems else "  FAIL: " + "; ".join(problems)))
        failures.extend(problems)

    px = ProxySQL(admin_password=ADMIN_PASSWORD)
    px.start()
    try:
        px.query("INSERT INTO mysql_servers (hostgroup_id, hostname, port) VALUES (10, '127.0.0.1', 3306)")
        px.query("LOAD MYSQL SERVERS TO RUNTIME")
        admin = ["--host", "127.0.0.1", "--port", str(px.admin_port), "--user", px.admin_user,
                 "--password-file", pwfile, "--defaults-extra-file", ""]
        run("proxysql-check", ["--liveness"] + admin, (0,))
        run("proxysql-check", ["--readiness", "--writer-hostgroup", "10"] + admin, (0, 1))
        run("proxysql-check", ["--liveness", "--host", "127.0.0.1", "--port", closed, "--password-file", pwfile,
                               "--timeout", "1", "--defaults-extra-file", ""], (1,))
    finally:
        px.close()
    for probe in ("liveness-check", "readiness-check", "clustercheck"):
        run(probe, ["--host", "127.0.0.1", "--port", closed, "--password-file", pwfile, "--timeout", "1",
                    "--defaults-extra-file", ""], (1,))
        run(probe, ["--no-such-option"], (2,))
        run(probe, ["--help"], (0,))
    run("haproxy-check", ["--password-file", pwfile, "--timeout", "1", "--defaults-extra-file", "",
                          "--env-secret-dir", workdir, "127.0.0.1", closed, "127.0.0.1", closed], (1,))
    run("readiness-check", ["--replica", "--host", "127.0.0.1", "--port", closed, "--password-file", pwfile,
                            "--timeout", "1", "--defaults-extra-file", ""], (1,))
    run("proxysql-sync", ["--check-config", "--admin-addr", "127.0.0.1:6032", "--master-prefix", "",
                          "--replica-prefix", "", "--users-prefix", "proxysql/users"], (0,))
    run("proxysql-sync", ["--admin-addr", "[::1"], (2,))

    # clustercheck --listen: a few requests (503: no mysqld), then SIGTERM
    port = free_port()
    vlog = os.path.join(workdir, "valgrind-listen.log")
    cmd = valgrind_cmd(workdir, vlog) + [os.path.join(BIN, "clustercheck"), "--listen", "127.0.0.1:%d" % port,
                                         "--host", "127.0.0.1", "--port", closed, "--password-file", pwfile,
                                         "--timeout", "1", "--defaults-extra-file", ""]
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    codes = []
    end = time.monotonic() + 60
    while len(codes) < 5 and time.monotonic() < end:
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d/" % port, timeout=10) as r:
                codes.append(r.status)
        except urllib.error.HTTPError as e:
            codes.append(e.code)
        except OSError:
            time.sleep(0.2)
    p.send_signal(signal.SIGTERM)
    try:
        rc = p.wait(60)
    except subprocess.TimeoutExpired:
        p.kill()
        rc = p.wait()
    problems, summary = judge_valgrind("clustercheck --listen", vlog)
    if rc != 0 or codes != [503] * 5:
        problems.append("clustercheck --listen: exit %s, answers %s" % (rc, codes))
    log("  %-15s %-44s exit %d  %s%s" % ("clustercheck", "--listen, 5 requests, SIGTERM", rc, summary,
                                          "" if not problems else "  FAIL: " + "; ".join(problems)))
    failures.extend(problems)
    if not failures:
        subprocess.run(["rm", "-rf", workdir])
    return failures


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--valgrind", action="store_true", help="run the agent and the probes under valgrind")
    ap.add_argument("--changes", type=int, help="KV changes (default 3000; 200 with --valgrind)")
    ap.add_argument("--restarts", type=int, help="ProxySQL restarts (default 200; 4 with --valgrind)")
    ap.add_argument("--every", type=int, help="changes between samples (default 50; 20 with --valgrind)")
    ap.add_argument("--pace", type=float, help="seconds between changes (default 0.03; 0.1 with --valgrind)")
    ap.add_argument("--max-seconds", type=int, default=570, help="stop the run after this long (default 570)")
    ap.add_argument("--converge-timeout", type=float, help="seconds for ProxySQL to match KV (default 30; 120 "
                    "with --valgrind)")
    ap.add_argument("--warmup", type=float, default=0.2, help="fraction of samples that is warm-up (default 0.2)")
    ap.add_argument("--rss-slack-kb", type=int, default=2048, help="RSS growth allowed after warm-up (KiB)")
    ap.add_argument("--fd-slack", type=int, default=2, help="descriptor growth allowed after warm-up")
    ap.add_argument("--seed", type=int, default=1, help="random seed for the change sequence")
    ap.add_argument("--scrape", type=float, default=0, help="scrape /metrics and /readyz every this many seconds "
                    "while the run lasts (default 0: only to sample)")
    args = ap.parse_args()
    if args.changes is None:
        args.changes = 200 if args.valgrind else 3000
    if args.restarts is None:
        args.restarts = 4 if args.valgrind else 200
    if args.every is None:
        args.every = 20 if args.valgrind else 50
    if args.pace is None:
        args.pace = 0.1 if args.valgrind else 0.03
    if args.converge_timeout is None:
        args.converge_timeout = 120 if args.valgrind else 30
    if not os.path.exists(os.path.join(BIN, "proxysql-sync")):
        sys.exit("soak: %s/proxysql-sync not built (make)" % BIN)

    mode = "valgrind" if args.valgrind else "soak"
    log("%s: %d changes, %d ProxySQL restarts, binaries %s" % (mode, args.changes, args.restarts, BIN))
    failures = soak(args)
    if args.valgrind:
        log("valgrind: probes")
        failures += valgrind_probes(args)
    for f in failures:
        log("FAIL: " + f)
    log("%s: %s" % (mode, "ok" if not failures else "%d failure(s)" % len(failures)))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
