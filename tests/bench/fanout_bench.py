#!/usr/bin/python3
"""proxysql-sync fan-out: many agents watching the same prefixes of one Consul (the double).

N agents (default 50, 100, 200) of bin/proxysql-sync watch mysql/master/ and mysql/replica/ of one
Consul double with blocking queries; agent i applies to ProxySQL double i mod P (default P = 4).
For one KV change (a replica's weight) it measures, over --changes changes:

  * re-armed: time from the PUT until each agent's next blocking query at the change's index
    reaches the Consul double (its request log): the agent has read the answer, with no poller in
    between; p50, p99, max over every agent and change;
  * seen: time from the PUT until each agent's /metrics shows the change's X-Consul-Index
    (proxysql_sync_consul_index{prefix="mysql/replica/"}), taken when that agent's answer arrives;
  * applied: time until every ProxySQL double serves the new weight (runtime_mysql_servers, polled
    on a thread of its own);
  * Consul requests per change (from the double's request log: blocking queries re-armed at the
    change's index), admin LOADs per change per ProxySQL (agents sharing a target each apply what
    they see), agent CPU per change (all agents' threads, less an idle window of the same length) -
    these over --quiet-changes rounds of a few changes, without /metrics polling;
  * idle Consul requests per second per agent (/_fake/counters), with blocking waits of --wait s;
  * memory: agents' RSS and PSS (shared library pages counted once), the Consul double's RSS.

The ProxySQL doubles run at nice 19 (--proxysql-nice): every agent reads its target after every
change, which costs the Python doubles more CPU than the agents and the Consul double together, and
at nice 0 they would take the cores the measured path needs; their CPU per change is shown.

With CONSUL_BIN (and PROXYSQL_BIN) set, the real servers run instead of the doubles; what only a
double's request or statement log tells (re-armed, requests per change, idle requests, LOADs) is
then n/a, and seen/applied/CPU are measured as usual.

Prints one Markdown table; asserts nothing. Loopback only; every process is stopped at the end.

    /usr/bin/python3 tests/bench/fanout_bench.py [--agents 50,100,200] [--changes 5] [--wait 5]
"""

import argparse
import os
import re
import selectors
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(HERE)
sys.path[:0] = [TESTS, HERE]

from fakes.consul import Consul, free_port  # noqa: E402
from fakes.proxysql import ProxySQL  # noqa: E402
from sync_bench import TICK, cpu_ticks, pct, proc_status  # noqa: E402

BIN = os.environ.get("SIDEKICK_BIN", os.path.join(os.path.dirname(TESTS), "bin"))
REPLICA_KEY = "mysql/replica/shop/eu/db2:3306"
INDEX_RE = re.compile(rb'proxysql_sync_consul_index\{prefix="mysql/replica/"\} (\d+)')


def cpu_seconds(pid):
    """CPU time of a process's live threads in seconds, to the nanosecond (schedstat; clock ticks
    of 10 ms are too coarse for the fraction of a millisecond an agent spends on one change)."""
    total = 0
    try:
        for tid in os.listdir("/proc/%d/task" % pid):       # schedstat is per thread
            with open("/proc/%d/task/%s/schedstat" % (pid, tid)) as f:
                total += int(f.read().split()[0])
    except OSError:
        return cpu_ticks(pid) / TICK
    return total / 1e9


def renice(pid, nice):
    """Lower every thread of pid to `nice` (Linux keeps a nice value per thread; threads created
    later inherit their creator's)."""
    if nice:
        for tid in os.listdir("/proc/%d/task" % pid):
            os.setpriority(os.PRIO_PROCESS, int(tid), nice)


def pss_kib(pid):
    """Proportional set size: shared pages divided among the processes that map them."""
    try:
        with open("/proc/%d/smaps_rollup" % pid) as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def fetch_all(ports, path=b"/metrics", timeout=5.0, times=None):
    """GET path from every port at once (one thread, non-blocking sockets): {port: body}; the
    monotonic time each answer ended at goes to times[port]."""
    sel = selectors.DefaultSelector()
    bufs, out = {}, {}
    request = b"GET " + path + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    for port in ports:
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex(("127.0.0.1", port))
        sel.register(s, selectors.EVENT_WRITE, port)
        bufs[port] = []
    end = time.monotonic() + timeout
    while sel.get_map() and time.monotonic() < end:
        for key, ev in sel.select(0.5):
            s, port = key.fileobj, key.data
            try:
                if ev & selectors.EVENT_WRITE:
                    s.sendall(request)
                    sel.modify(s, selectors.EVENT_READ, port)
                    continue
                chunk = s.recv(65536)
            except OSError:
                chunk = b""
            if chunk:
                bufs[port].append(chunk)
                continue
            sel.unregister(s)
            s.close()
            out[port] = b"".join(bufs[port])
            if times is not None:
                times[port] = time.monotonic()
    for key in list(sel.get_map().values()):
        key.fileobj.close()
    return out


class Fleet:
    """N agents, a Consul double, P ProxySQL doubles, in one work directory."""

    def __init__(self, n, n_px, wait, consistency, work, px_nice=0):
        self.n, self.work, self.px_nice = n, work, px_nice
        # CONSUL_BIN / PROXYSQL_BIN: real servers. What only the doubles can tell (their request
        # log, their statement log) is then shown as n/a.
        self.real_consul = bool(os.environ.get("CONSUL_BIN"))
        self.consul = Consul(use_double=not self.real_consul, workdir=os.path.join(work, "consul"))
        self.pxs = [ProxySQL(admin_password="bench-" + os.urandom(4).hex(),
                             workdir=os.path.join(work, "px%d" % i)) for i in range(n_px)]
        self.wait, self.consistency = wait, consistency
        self.agents, self.ports = [], []

    def start(self, spread):
        """Start everything; the agents spread evenly over `spread` seconds (agents that start
        together re-arm their blocking queries together, in waves, until Consul's wait/16 jitter
        has spread them: a real fleet does not start in one instant)."""
        self.consul.start()
        for px in self.pxs:
            px.start()
            if px.is_fake:
                renice(px.proc.pid, self.px_nice)
        self.consul.put("mysql/master/shop", b"db1:3306")
        self.consul.put(REPLICA_KEY, b'{"weight": 1}')
        self.consul.put("mysql/replica/shop/eu/db3:3306", b"")
        t0 = time.monotonic()
        for i in range(self.n):
            time.sleep(max(0.0, t0 + i * spread / self.n - time.monotonic()))
            self.agents.append(self._start_agent(i))

    def _start_agent(self, i):
        px = self.pxs[i % len(self.pxs)]
        d = os.path.join(self.work, "agent%03d" % i)
        os.makedirs(d)
        with open(os.path.join(d, "pw"), "w") as f:
            f.write(px.admin_password)
        port = free_port()
        self.ports.append(port)
        with open(os.path.join(d, "sync.cfg"), "w") as f:
            f.write('consul-addr = "%s"\nregion = "eu"\nhealth-listen = "127.0.0.1:%d"\nwait = %g\n'
                    'consistency = "%s"\nquiescence-min = 0.0\nquiescence-max = 0.0\nadmin-timeout = 30.0\n'
                    'clusters = ( { alias = "shop"; writer_hostgroup = 10; reader_hostgroup = 11; } );\n'
                    'targets = ( { name = "px%d"; address = "%s"; user = "admin"; password_file = "%s"; } );\n'
                    % (self.consul.addr, port, self.wait, self.consistency, i % len(self.pxs), px.admin_addr,
                       os.path.join(d, "pw")))
        log = open(os.path.join(d, "agent.log"), "ab")
        env = {k: v for k, v in os.environ.items() if not k.startswith("CONSUL_")}
        p = subprocess.Popen([os.path.join(BIN, "proxysql-sync"), "-c", os.path.join(d, "sync.cfg")],
                             stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
        log.close()
        return p

    def all_ready(self, timeout):
        pending = set(self.ports)
        end = time.monotonic() + timeout
        while pending and time.monotonic() < end:
            got = fetch_all(pending, b"/readyz")
            pending -= {p for p, body in got.items() if body.startswith(b"HTTP/1.1 200")}
            time.sleep(0.2)
        return not pending

    def counters(self, reset=False):
        if self.real_consul:
            return None
        r = self.consul.request("DELETE" if reset else "GET", "/_fake/counters")
        return r.json()["total"]

    def clear_requests(self):
        if not self.real_consul:
            self.consul.request("DELETE", "/_fake/requests")

    def loads(self):
        """LOAD MYSQL SERVERS TO RUNTIME statements per ProxySQL since the last clear (doubles)."""
        if not all(px.is_fake for px in self.pxs):
            return None
        return statistics.mean(
            sum(1 for s in px.statements() if s["sql"].upper().startswith("LOAD MYSQL SERVERS TO RUNTIME"))
            for px in self.pxs)

    def clear_loads(self):
        for px in self.pxs:
            if px.is_fake:
                px.clear_statements()

    def change_requests(self, since, until, new_index):
        """API requests a change caused: the blocking queries re-armed at the change's index
        and reads without an index (a watch starting over), after `since` (epoch seconds).
        Re-arms at an older index are blocking waits that timed out: idle traffic."""
        if self.real_consul:
            return None
        n = 0
        for rec in self.consul.request("GET", "/_fake/requests").json():
            if not since <= rec["time"] < until or not rec["path"].startswith("/v1/kv/"):
                continue
            idx = rec["query"].get("index")
            if idx is None or int(idx[0]) >= new_index:
                n += 1
        return n

    def rearm_times(self, since, new_index):
        """Seconds from `since` (epoch) to each agent's first blocking query on mysql/replica/ at the
        change's index: the agent has read the answer and asks for the next one. Measured in the
        double as each request arrives, so no poller stands between the agent and the figure; one
        per agent (the first n re-arms: each agent re-arms once per change)."""
        if self.real_consul:
            return []
        t = sorted(rec["time"] - since for rec in self.consul.request("GET", "/_fake/requests").json()
                   if rec["path"] == "/v1/kv/mysql/replica/" and rec["time"] >= since
                   and int(rec["query"].get("index", ["0"])[0]) >= new_index)
        return t[:self.n]

    def agent_cpu(self):
        return sum(cpu_seconds(p.pid) for p in self.agents)

    def proxysql_cpu(self):
        return sum(cpu_seconds(px.proc.pid) for px in self.pxs)

    def wait_weight(self, cursors, want, t_put, end):
        """Seconds from t_put until every ProxySQL double serves weight `want`, None at `end`."""
        pending = set(range(len(cursors)))
        while pending and time.monotonic() < end:
            for i in list(pending):
                cursors[i].execute("SELECT weight FROM runtime_mysql_servers WHERE hostname='db2'")
                rows = cursors[i].fetchall()
                if rows and rows[0][0] == want:
                    pending.discard(i)
            if pending:
                time.sleep(0.005)
        return time.monotonic() - t_put if not pending else None

    def stop(self):
        for p in self.agents:
            if p.poll() is None:
                p.terminate()
        for p in self.agents:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(5)
        for px in self.pxs:
            px.close()
        self.consul.close()


def put_weight(consul, w):
    consul.put(REPLICA_KEY, ('{"weight": %d}' % w).encode())
    return consul.get(REPLICA_KEY).index


def run(n, a):
    work = tempfile.mkdtemp(prefix="fanout-bench-")
    fleet = Fleet(n, a.proxysqls, a.wait, a.consistency, work, a.proxysql_nice)
    row = {"agents": n}
    try:
        fleet.start(a.wait if a.spread_start else 0.0)
        t0 = time.monotonic()
        if not fleet.all_ready(120):
            raise SystemExit("fan-out %d: not every agent became ready in 120 s (logs in %s)" % (n, work))
        row["start"] = time.monotonic() - t0
        conns = [px.connect() for px in fleet.pxs]
        cursors = [c.cursor() for c in conns]
        time.sleep(a.wait + 1)          # every agent's first blocking query has come back once

        # -- idle: requests and CPU over a window longer than the blocking wait ------------------
        fleet.counters(reset=True)
        c0, k0, t0 = fleet.agent_cpu(), cpu_seconds(fleet.consul.proc.pid), time.monotonic()
        time.sleep(a.idle)
        dt = time.monotonic() - t0
        idle_req = fleet.counters()
        idle_rate = idle_req / dt if idle_req is not None else None
        idle_cpu_rate = (fleet.agent_cpu() - c0) / dt
        consul_idle_cpu = (cpu_seconds(fleet.consul.proc.pid) - k0) / dt
        row["idle_req_per_agent_s"] = idle_rate / n if idle_rate is not None else None

        # -- latency: seen by every agent, applied on every ProxySQL -----------------------------
        seen, applied, rearmed = [], [], []
        weight = 1
        for _ in range(a.changes):
            weight += 1
            fleet.clear_requests()
            wall_put = time.time()
            t_put = time.monotonic()
            idx = put_weight(fleet.consul, weight)
            pending, want = set(fleet.ports), str(weight)
            end = t_put + 30
            # The ProxySQL doubles are polled on a thread of their own: at a low nice value they
            # answer late, and the sweep over the agents must not wait for them.
            done = []
            px_poll = threading.Thread(target=lambda *args: done.append(fleet.wait_weight(*args)),
                                       args=(cursors, want, t_put, end))
            px_poll.start()
            while pending and time.monotonic() < end:
                at = {}
                for port, body in fetch_all(pending, times=at).items():
                    m = INDEX_RE.search(body)
                    if m and int(m.group(1)) >= idx:
                        seen.append(at[port] - t_put)
                        pending.discard(port)
            px_poll.join()
            if pending or done[0] is None:
                raise SystemExit("fan-out %d: change %d: %d agents, %s ProxySQL not there after 30 s"
                                 % (n, weight, len(pending), "some" if done[0] is None else "no"))
            applied.append(done[0])
            rearmed.extend(fleet.rearm_times(wall_put, idx))
            time.sleep(0.3)
        row["seen"] = seen
        row["rearmed"] = rearmed
        row["applied"] = applied

        # -- per change, without polling: Consul requests, LOADs, CPU ------------------------------
        # Rounds of an idle window and a window of B changes, the same length and shorter than the
        # blocking wait (so no query re-armed in it times out in it); per change = (change window
        # - idle window) / B, the median over the rounds. Changes are spaced by 1.5 x the slowest
        # propagation seen above, so each agent sees each of them.
        spacing = max(0.3, 1.5 * max(seen))
        burst = max(2, int(0.8 * a.wait / spacing))
        window = burst * spacing
        reqs, loads, cpus, kcpus, pcpus = [], [], [], [], []
        for _ in range(a.quiet_changes):
            c0, k0, p0 = fleet.agent_cpu(), cpu_seconds(fleet.consul.proc.pid), fleet.proxysql_cpu()
            time.sleep(window)
            idle_agents, idle_consul = fleet.agent_cpu() - c0, cpu_seconds(fleet.consul.proc.pid) - k0
            idle_px = fleet.proxysql_cpu() - p0
            fleet.clear_loads()
            fleet.clear_requests()
            since = time.time()
            c0, k0, p0 = fleet.agent_cpu(), cpu_seconds(fleet.consul.proc.pid), fleet.proxysql_cpu()
            t0 = time.monotonic()
            first = None
            for k in range(burst):
                weight += 1
                idx = put_weight(fleet.consul, weight)
                first = first or idx
                time.sleep(max(0.0, t0 + (k + 1) * spacing - time.monotonic()))
            cpus.append((fleet.agent_cpu() - c0 - idle_agents) / burst)
            kcpus.append((cpu_seconds(fleet.consul.proc.pid) - k0 - idle_consul) / burst)
            pcpus.append((fleet.proxysql_cpu() - p0 - idle_px) / burst)
            got = fleet.change_requests(since, time.time(), first)
            reqs.append(got / burst - 2 if got is not None else None)   # less put_weight: PUT, GET
            got = fleet.loads()
            loads.append(got / burst if got is not None else None)
        row["req_per_change"] = median_or_none(reqs)
        row["loads_per_change"] = median_or_none(loads)
        row["cpu_per_change"] = statistics.median(cpus)
        row["consul_cpu_per_change"] = statistics.median(kcpus)
        row["proxysql_cpu_per_change"] = statistics.median(pcpus)
        row["burst"] = (burst, spacing)
        row["idle_cpu_per_agent"] = idle_cpu_rate / n
        row["consul_idle_cpu"] = consul_idle_cpu
        rss = [proc_status(p.pid, "VmRSS") for p in fleet.agents]
        row["rss_median"] = statistics.median(rss)
        row["pss_total"] = sum(pss_kib(p.pid) for p in fleet.agents)
        row["consul_rss"] = proc_status(fleet.consul.proc.pid, "VmRSS")
        row["consul_threads"] = proc_status(fleet.consul.proc.pid, "Threads")
        for c in conns:
            c.close()
    finally:
        fleet.stop()
        shutil.rmtree(work, ignore_errors=True)
    return row


def median_or_none(values):
    return None if None in values else statistics.median(values)


def opt(fmt, v):
    """A figure, or n/a where only a double can tell (real Consul or ProxySQL)."""
    return "n/a" if v is None else fmt % v


def ms(v):
    return "%.0f" % (v * 1000) if v >= 0.1 else "%.1f" % (v * 1000)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--agents", default="50,100,200", help="fleet sizes, comma-separated (default 50,100,200)")
    ap.add_argument("--proxysqls", type=int, default=4, help="ProxySQL doubles the agents share (default 4)")
    ap.add_argument("--changes", type=int, default=5, help="KV changes timed per fleet (default 5)")
    ap.add_argument("--quiet-changes", type=int, default=3,
                    help="rounds of changes counted (requests, CPU) without polling (default 3)")
    ap.add_argument("--wait", type=float, default=5, help="the agents' blocking wait in seconds (default 5)")
    ap.add_argument("--idle", type=float, default=12, help="idle window in seconds (default 12)")
    ap.add_argument("--consistency", default="default", choices=("default", "stale"))
    ap.add_argument("--proxysql-nice", type=int, default=19,
                    help="nice value of the ProxySQL doubles (default 19: the admin reads of N agents, "
                         "slow in Python, take the CPU only when the agents and Consul leave it; 0 = off)")
    ap.add_argument("--start-together", dest="spread_start", action="store_false",
                    help="start every agent at once (default: spread over one blocking wait)")
    a = ap.parse_args()
    rows = [run(int(n), a) for n in a.agents.split(",")]

    print("\nproxysql-sync fan-out (one Consul double, %d ProxySQL doubles at nice %d, blocking wait %gs, "
          "consistency %s, quiescence off, agents started %s)\n"
          % (a.proxysqls, a.proxysql_nice, a.wait, a.consistency,
             "over %gs" % a.wait if a.spread_start else "together"))
    print("| agents | %s | re-armed p50 / p99 / max ms | seen p50 / p99 / max ms | all ProxySQL applied p50 / max ms "
          "| Consul requests per change | LOADs per change per ProxySQL | agent CPU per change "
          "| Consul double CPU per change | ProxySQL doubles CPU per change | idle Consul req/s per agent | idle agent CPU | agent RSS median "
          "| agents' PSS total | Consul double RSS (threads) |"
          % ("last start to all ready" if a.spread_start else "start to all ready"))
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        s, q = r["seen"], r["rearmed"]
        print("| %d | %.1f s | %s | %s / %s / %s | %s / %s | %s | %s | %.2f ms (%.1f us per agent) | %.1f ms | %.0f ms "
              "| %s | %.1f us/s per agent | %.1f MiB | %.0f MiB | %.0f MiB (%d) |" % (
                  r["agents"], r["start"],
                  "%s / %s / %s" % (ms(statistics.median(q)), ms(pct(q, 99)), ms(max(q))) if q else "n/a",
                  ms(statistics.median(s)), ms(pct(s, 99)), ms(max(s)),
                  ms(statistics.median(r["applied"])), ms(max(r["applied"])), opt("%.0f", r["req_per_change"]),
                  opt("%.1f", r["loads_per_change"]), r["cpu_per_change"] * 1000, r["cpu_per_change"] * 1e6 / r["agents"],
                  r["consul_cpu_per_change"] * 1000, r["proxysql_cpu_per_change"] * 1000,
                  opt("%.3f", r["idle_req_per_agent_s"]), 1e6 * r["idle_cpu_per_agent"],
                  r["rss_median"] / 1024, r["pss_total"] / 1024, r["consul_rss"] / 1024, r["consul_threads"]))
    print("\nre-armed: PUT to the agent's next blocking query at the change's index, as the Consul double "
          "logs its arrival (the agent has read and parsed the answer; no poller involved); "
          "seen: PUT to the agent's /metrics showing the new index (all agents polled at once, one sweep "
          "every few ms); applied: until every ProxySQL double serves the new weight. Requests, LOADs and CPU "
          "per change: medians of %d rounds, each a window of a few changes (spaced by 1.5 x the slowest "
          "propagation) less an idle window of the same length, without polling; requests: the blocking "
          "queries re-armed at a change's index (and reads without an index), not waits that timed out; CPU: "
          "schedstat of every agent thread, all agents together. The doubles are Python: "
          "the Consul double answers the fleet's blocking queries one at a time (one GIL), so 'seen' grows "
          "with N mostly on its side. %d changes timed per row." % (a.quiet_changes, a.changes))


if __name__ == "__main__":
    main()
