#!/usr/bin/python3
"""`make demo`: the probes and the sync agent at work on a local MariaDB Galera cluster.

It brings up a real 3-node Galera cluster on loopback (the test harness), Consul and
ProxySQL (the real binaries when `consul` / `proxysql` are on PATH, else the project's
test doubles), `clustercheck --register` for every node and `proxysql-sync`, then:

  1. shows what every probe says about every node, while nodes change state;
  2. shows ProxySQL's runtime_mysql_servers follow the cluster: a node stops, orchestrator
     (played by this script) moves the master key, the node comes back.

Everything listens on loopback and is stopped at the end (Ctrl-C is fine).
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "integration")]

import servers  # noqa: E402

BIN = os.environ.get("SIDEKICK_BIN", os.path.join(os.path.dirname(HERE), "bin"))
WRITER_HG, READER_HG = 10, 11
PREFIX = "mysql/replica/demo/local"


def say(text=""):
    print(text, flush=True)


def title(text):
    say()
    say("== " + text)


def table(header, rows):
    widths = [max(len(str(r[i])) for r in [header] + rows) for i in range(len(header))]
    line = "  ".join("%-*s" % (w, h) for w, h in zip(widths, header))
    say("  " + line)
    say("  " + "  ".join("-" * w for w in widths))
    for r in rows:
        say("  " + "  ".join("%-*s" % (w, c) for w, c in zip(widths, r)))


def probe(name, node, creds, *extra):
    args = [os.path.join(BIN, name), "--host", node.ip, "--port", str(node.port), "--user", creds.user,
            "--password-file", creds.password_file, "--timeout", "1", "--json"] + list(extra)
    if name == "clustercheck":
        args += ["--defaults-extra-file", ""]
    t0 = time.monotonic()
    r = subprocess.run(args, capture_output=True, text=True, timeout=10)
    ms = (time.monotonic() - t0) * 1000
    try:
        v = json.loads(r.stdout.strip().splitlines()[-1])
        reason = textwrap.shorten(v["message"].split(": ", 1)[-1], 76, placeholder=" ...")  # whole words
        return "%s (%d ms) %s" % ("UP  " if v["up"] else "DOWN", ms, reason)
    except (ValueError, IndexError, KeyError):
        return "exit %d %s" % (r.returncode, (r.stdout + r.stderr).strip()[:60])


def probe_table(cluster, creds):
    rows = []
    for i in (1, 2, 3):
        n = cluster[i]
        rows.append(["node%d %s:%d" % (i, n.ip, n.port),
                     probe("readiness-check", n, creds),
                     probe("liveness-check", n, creds)])
    table(["node", "readiness-check", "liveness-check"], rows)


def proxysql_table(px, note=""):
    rows = px.query("SELECT hostgroup_id, hostname, port, status FROM runtime_mysql_servers "
                    "ORDER BY hostgroup_id, hostname, port")
    named = [[{str(WRITER_HG): "writer", str(READER_HG): "reader"}.get(str(r[0]), "") + " (%s)" % r[0],
              r[1], r[2], r[3]] for r in rows]
    say("  ProxySQL runtime_mysql_servers%s:" % note)
    table(["hostgroup", "hostname", "port", "status"], named or [["(empty)", "", "", ""]])


def wait_for(what, pred, timeout=30.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            if pred():
                return True
        except Exception:
            pass
        time.sleep(0.1)
    say("  (still waiting for %s after %.0f s)" % (what, timeout))
    return False


def main():
    if shutil.which("consul"):
        os.environ.setdefault("CONSUL_BIN", shutil.which("consul"))
    if shutil.which("proxysql"):
        os.environ.setdefault("PROXYSQL_BIN", shutil.which("proxysql"))
    from fakes.consul import Consul
    from fakes.proxysql import ProxySQL

    procs, cleanup = [], []
    work = tempfile.mkdtemp(prefix="sidekick-demo-")
    lock = servers.ServerLock()
    lock.acquire()
    cleanup.append(lock.release)
    ws = servers.Workspace()
    cleanup.append(ws.destroy)
    try:
        title("Starting a 3-node MariaDB Galera cluster on 127.0.0.1-3 (ports 3311-3313)")
        t0 = time.monotonic()
        cluster = servers.GaleraCluster(ws)
        cleanup.insert(0, cluster.stop)
        cluster.start()
        say("  all nodes Synced in %.1f s" % (time.monotonic() - t0))
        creds = ws.creds["monitor"]

        title("What the probes say (one process each, --timeout 1, password from a file)")
        probe_table(cluster, creds)

        title("node2 desynced (donor), node3 cut off from the others (non-Primary)")
        # node3 first: the view change that isolating it causes would end node2's desync
        cluster[3].isolate()
        cluster[2].desync(True)
        wait_for("node2 Donor/Desynced", lambda: cluster[2].status().get("wsrep_local_state") == "2")
        probe_table(cluster, creds)
        say("  readiness allows a donor by default (AVAILABLE_WHEN_DONOR=1); liveness restarts only a non-Primary node")

        title("node1's mysqld frozen with SIGSTOP: every probe still answers within its deadline")
        cluster[1].sigstop()
        probe_table(cluster, creds)
        cluster[1].sigcont()
        cluster[2].desync(False)
        cluster[3].unisolate()
        say("  healing the cluster ...")
        cluster.heal()
        probe_table(cluster, creds)

        title("Consul (%s) and ProxySQL (%s) on loopback" % (
            "real" if os.environ.get("CONSUL_BIN") else "test double",
            "real" if os.environ.get("PROXYSQL_BIN") else "test double"))
        consul = Consul()
        consul.start()
        cleanup.insert(0, consul.close)
        px = ProxySQL(admin_password="demo-" + os.urandom(4).hex())
        px.start()
        cleanup.insert(0, px.close)
        say("  consul %s, proxysql admin %s" % (consul.addr, px.admin_addr))

        title("orchestrator's master key -> node1; clustercheck --register on every node")
        consul.put("mysql/master/demo", b"127.0.0.1:3311")
        consul.put("mysql/master/demo/hostname", b"127.0.0.1")
        consul.put("mysql/master/demo/port", b"3311")
        for i in (1, 2, 3):
            n = cluster[i]
            log = open(os.path.join(work, "register-%d.log" % i), "ab")
            p = subprocess.Popen([os.path.join(BIN, "clustercheck"), "--register", "--host", n.ip, "--port",
                                  str(n.port), "--user", creds.user, "--password-file", creds.password_file,
                                  "--defaults-extra-file", "", "--consul-addr", consul.addr,
                                  "--consul-prefix", PREFIX, "--interval", "1", "--session-ttl", "10",
                                  "--timeout", "0.8"], stdout=log, stderr=subprocess.STDOUT)
            procs.append(p)
        pwfile = os.path.join(work, "admin-password")
        with open(pwfile, "w") as f:
            f.write(px.admin_password)
        os.chmod(pwfile, 0o600)
        cfg = os.path.join(work, "proxysql-sync.cfg")
        with open(cfg, "w") as f:
            f.write('consul-addr = "%s"\nregion = "local"\nhealth-listen = "127.0.0.1:0"\n'
                    'quiescence-min = 0.2\ndrain-timeout = 5.0\n'
                    'clusters = ( { alias = "demo"; writer_hostgroup = %d; reader_hostgroup = %d; } );\n'
                    'targets = ( { name = "proxysql"; address = "%s"; user = "%s"; password_file = "%s"; } );\n'
                    % (consul.addr, WRITER_HG, READER_HG, px.admin_addr, px.admin_user, pwfile))
        agent_log = os.path.join(work, "proxysql-sync.log")
        procs.append(subprocess.Popen([os.path.join(BIN, "proxysql-sync"), "-c", cfg],
                                      stdout=open(agent_log, "ab"), stderr=subprocess.STDOUT))
        say("  proxysql-sync started (log: %s)" % agent_log)

        def readers():
            return {r[1] for r in px.query("SELECT hostgroup_id, hostname FROM runtime_mysql_servers")
                    if str(r[0]) == str(READER_HG)}

        def writer():
            return {r[1] for r in px.query("SELECT hostgroup_id, hostname, status FROM runtime_mysql_servers")
                    if str(r[0]) == str(WRITER_HG) and r[2] == "ONLINE"}

        def explain():
            r = consul.get(PREFIX + "/", recurse="")
            say("  keys under %s: %s" % (PREFIX, sorted(e["Key"] for e in r.json()) if r.status == 200 else "none"))
            for i in (1, 2, 3):
                with open(os.path.join(work, "register-%d.log" % i), errors="replace") as f:
                    for line in f.read().splitlines()[-3:]:
                        say("  register node%d: %s" % (i, line))

        t0 = time.monotonic()
        if not wait_for("the first sync", lambda: len(readers()) == 3 and writer() == {"127.0.0.1"}):
            explain()
        proxysql_table(px, " after the first sync (%.1f s)" % (time.monotonic() - t0))

        title("node3 stops: its key disappears, the reader is drained and removed")
        t0 = time.monotonic()
        cluster[3].stop()
        if not wait_for("node3 gone from the readers", lambda: "127.0.0.3" not in readers()):
            explain()
        proxysql_table(px, " %.1f s later" % (time.monotonic() - t0))

        title("failover: orchestrator writes the new master (node2) key by key")
        t0 = time.monotonic()
        consul.put("mysql/master/demo", b"127.0.0.2:3312")
        time.sleep(0.5)
        proxysql_table(px, " with only the main key written: held, the writer stays")
        consul.put("mysql/master/demo/hostname", b"127.0.0.2")
        consul.put("mysql/master/demo/port", b"3312")
        wait_for("the new writer", lambda: writer() == {"127.0.0.2"})
        proxysql_table(px, " %.1f s after the failover began" % (time.monotonic() - t0))

        title("node3 comes back: it rejoins Galera, registers again, and ProxySQL routes to it")
        t0 = time.monotonic()
        cluster[3].start()
        if not wait_for("node3 back in the readers", lambda: "127.0.0.3" in readers(), timeout=60):
            explain()
        proxysql_table(px, " %.1f s later" % (time.monotonic() - t0))

        title("proxysql-sync's log (secrets never appear)")
        with open(agent_log) as f:
            for line in f.read().splitlines()[-12:]:
                say("  " + line)
        say()
        say("Demo done. Everything it started is being stopped.")
        return 0
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                p.kill()
        for fn in cleanup:
            try:
                fn()
            except Exception as e:  # keep stopping the rest
                say("cleanup: %s" % e)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
