#!/usr/bin/python3
"""Kill-based failovers of a real Patroni 3.0.2 cluster of PostgreSQL 15 (three members, ttl 10,
loop_wait 2, retry_timeout 3; tests/integration/patroni.py) over the Consul double, with
proxysql-sync writing pgsql_servers of the ProxySQL double in its 3.0 mode: for each failover, the
time from the SIGKILL of the leader (its Patroni and its PostgreSQL) to Patroni's new leader key in
Consul, and to the new leader in hostgroup 20 of runtime_pgsql_servers.

    make all && /usr/bin/python3 tests/bench/patroni_failover.py [--failovers 10] [--no-agent]

--no-agent measures Patroni alone (the Consul column). Needs the Debian packages patroni
python3-consul postgresql-15 (make deps) and, as root, the user postgres. Prints Markdown; asserts
nothing about timing. Loopback only, every wait bounded.
"""

import argparse
import contextlib
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(HERE)
sys.path[:0] = [TESTS, os.path.join(TESTS, "integration")]

from fakes.consul import Consul  # noqa: E402
from fakes.proxysql import ProxySQL  # noqa: E402
import patroni  # noqa: E402
import test_sync  # noqa: E402
import test_sync_patroni as tsp  # noqa: E402


def wait(what, pred, timeout, agent=None):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if agent is not None and agent.proc.poll() is not None:
            raise SystemExit("patroni_failover: the agent exited with %s while waiting for %s:\n%s"
                             % (agent.proc.returncode, what, agent.logs()[-2000:]))
        try:
            if pred():
                return
        except Exception:           # noqa: BLE001 - a server between two states
            pass
        time.sleep(0.05)
    raise SystemExit("patroni_failover: timed out after %.0f s waiting for %s%s"
                     % (timeout, what, "\nagent log:\n" + agent.logs()[-2000:] if agent else ""))


def pct(values, q):
    s = sorted(values)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


def one_failover(pg, px, agent):
    """Kill the leader: (old, new, seconds to Consul, seconds to ProxySQL or None, samples with
    hostgroup 20 empty, seconds to the old leader key's deletion or None)."""
    if agent is not None:
        wait("runtime_pgsql_servers to match the cluster", lambda: tsp.synced(px, pg), 30, agent)
    old = pg.leader_name()
    with contextlib.ExitStack() as stack:
        watch = stack.enter_context(pg.watch_leader())
        sampler = stack.enter_context(tsp.PgsqlSampler(px)) if agent is not None else None
        killed = pg.kill(old)
        new, _ = pg.wait_leader(other_than=old, since=killed, timeout=pg.ttl + 30)
        to_consul = watch.wait(new, killed, 10)
        gone = watch.first(None, killed)        # the key deleted with the session (None: not seen empty)
        if sampler is None:
            return old, new, to_consul, None, 0, gone
        port = pg[new].pg_port
        wait("hostgroup 20 to serve %s" % new, lambda: sampler.first_writer(port, killed) is not None,
             pg.ttl + 30, agent)
    return old, new, to_consul, sampler.first_writer(port, killed), len(sampler.writerless()), gone


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--failovers", type=int, default=10)
    ap.add_argument("--no-agent", action="store_true", help="Patroni and Consul only, no proxysql-sync")
    a = ap.parse_args()
    why = patroni.missing()
    if why:
        raise SystemExit("patroni_failover: " + why)
    work = tempfile.mkdtemp(prefix="patroni-bench-")
    consul = Consul(session_ttl_min="1s").start()
    pg = px = agent = None
    rows = []
    try:
        t0 = time.monotonic()
        pg = patroni.Cluster(consul).start()
        started = time.monotonic() - t0
        if not a.no_agent:
            px = ProxySQL(admin_password=test_sync.ADMIN_PASSWORD)
            if px.is_fake:
                px.extra_args += ["--proxysql-version", "3.0"]
            px.start()
            test_sync.put_topology(consul)
            agent = test_sync.Agent(consul, [px], work, extra=tsp.PATRONI_CONFIG).start()
        for i in range(a.failovers):
            pg.heal()
            rows.append(one_failover(pg, px, agent))
            print("patroni_failover: %d/%d %s -> %s: Consul %.2f s, ProxySQL %s" % (
                i + 1, a.failovers, rows[-1][0], rows[-1][1], rows[-1][2],
                "%.2f s" % rows[-1][3] if rows[-1][3] is not None else "-"), file=sys.stderr, flush=True)
    finally:
        if agent is not None:
            agent.stop()
        if px is not None:
            px.close()
        if pg is not None:
            pg.close()
        consul.close()
        test_sync.subprocess.run(["rm", "-rf", work])

    to_consul = [r[2] for r in rows]
    to_px = [r[3] for r in rows if r[3] is not None]
    print("## Patroni failover: SIGKILL of the leader to the new writer\n")
    print("3-member Patroni 3.0.2 cluster of PostgreSQL 15 on the Consul double (started in %.1f s); ttl %d, "
          "loop_wait %d, retry_timeout %d: Patroni's session TTL is ttl / 2 and Consul invalidates at twice "
          "the TTL after its last renewal (every loop_wait), so the old key goes about ttl - (0 .. loop_wait) s "
          "after the kill. %s; %d failovers, each "
          "after the killed member rejoined. Leader key read every 20 ms, runtime_pgsql_servers every 100 ms.\n"
          % (started, pg.ttl, pg.loop_wait, pg.retry_timeout,
             "No agent (--no-agent)" if a.no_agent else "proxysql-sync (quiescence-min 0.05 s, max 1 s) "
             "writing the ProxySQL double in 3.0 mode", len(rows)))
    print("| from the kill to | p50 s | max s |")
    print("|---|---|---|")
    gone = [r[5] for r in rows if r[5] is not None]
    if gone:
        print("| the old leader key deleted (its session invalidated) | %.2f | %.2f |" % (pct(gone, .5), max(gone)))
    print("| Patroni's new leader key in Consul | %.2f | %.2f |" % (pct(to_consul, .5), max(to_consul)))
    if to_px:
        print("| the new writer in runtime_pgsql_servers hostgroup 20 | %.2f | %.2f |" % (pct(to_px, .5), max(to_px)))
        gap = [r[3] - r[2] for r in rows if r[3] is not None]
        print("| (the agent's part: writer after the leader key) | %.2f | %.2f |" % (pct(gap, .5), max(gap)))
        print("\nSamples with hostgroup 20 empty during the failovers: %d." % sum(r[4] for r in rows))
    print("\n| # | old | new | old key gone s | new key s | new writer s |")
    print("|---|---|---|---|---|---|")
    for i, r in enumerate(rows, 1):
        print("| %d | %s | %s | %s | %.2f | %s |" % (i, r[0], r[1], "%.2f" % r[5] if r[5] is not None else "-", r[2],
                                                  "%.2f" % r[3] if r[3] is not None else "-"))


if __name__ == "__main__":
    main()
