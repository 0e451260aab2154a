#!/usr/bin/python3
"""`make demo`: the probes and the sync agent at work on a local MariaDB Galera cluster.

It brings up a real 3-node Galera cluster on loopback (the test harness), Consul and
ProxySQL (the real binaries when `consul` / `proxysql` are on PATH, else the project's
test doubles), `clustercheck --register` for every node and `proxysql-sync`, then:

  1. shows what every probe says about every node, while nodes change state;
  2. shows ProxySQL's runtime_mysql_servers and runtime_mysql_users follow Consul: the users
     from KV, a node that stops, orchestrator (played by this script) moving the master key
     while an application writes through ProxySQL's MySQL port, the node coming back;
  3. stops ProxySQL and starts it empty (no datadir): servers and users are back from Consul;
  4. drains ProxySQL as a pod's preStop would, with a client still connected.

Each step says what runs: the real servers (MariaDB, and Consul / ProxySQL when their binaries
are found) or the project's test doubles.

Everything listens on loopback and is stopped at the end (Ctrl-C is fine).
"""

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
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


def users_table(px, note=""):
    rows = px.query("SELECT username, default_hostgroup, frontend, backend, comment FROM runtime_mysql_users "
                    "ORDER BY username, frontend")
    say("  ProxySQL runtime_mysql_users%s:" % note)
    table(["username", "default_hostgroup", "frontend", "backend", "comment"],
          [list(r) for r in rows] or [["(empty)", "", "", "", ""]])
    if rows:
        say("  (ProxySQL's runtime keeps each user twice: frontend = 1, how clients log in to ProxySQL;")
        say("   backend = 1, how ProxySQL logs in to MariaDB. Its main table has one row.)")


@contextlib.contextmanager
def ticking(what, every=5.0):
    """Print `what` and the seconds so far every `every` seconds while the block runs."""
    done = threading.Event()
    t0 = time.monotonic()

    def tick():
        while not done.wait(every):
            say("%s: %.0f s" % (what, time.monotonic() - t0))
    t = threading.Thread(target=tick, daemon=True)
    t.start()
    try:
        yield
    finally:
        done.set()
        t.join()


APP_USER, APP_PASSWORD = "app", "app-" + os.urandom(4).hex()


def app_write(px):
    """One application connection through ProxySQL's MySQL port: a row written, and which node
    took it."""
    import pymysql
    c = pymysql.connect(host=px.host, port=px.mysql_port, user=APP_USER, password=APP_PASSWORD,
                        connect_timeout=5, autocommit=True)
    try:
        with c.cursor() as cur:
            cur.execute("INSERT INTO demo.writes (port) VALUES (@@port)")
            cur.execute("SELECT @@port")
            port = int(cur.fetchone()[0])
        return "node%d (port %d)" % (port - 3310, port)
    finally:
        c.close()


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

    demo_t0 = time.monotonic()
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
        with ticking("  ... the cluster is starting (node1 bootstraps, node2 and node3 join by SST)"):
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

        px_what = "real" if os.environ.get("PROXYSQL_BIN") else "test double"
        title("Consul (%s) and ProxySQL (%s) on loopback" % (
            "real" if os.environ.get("CONSUL_BIN") else "test double", px_what))
        consul = Consul()
        consul.start()
        cleanup.insert(0, consul.close)
        px = ProxySQL(admin_password="demo-" + os.urandom(4).hex())
        px.start()
        cleanup.insert(0, px.close)
        say("  consul %s, proxysql admin %s, MySQL port %s:%d" % (consul.addr, px.admin_addr, px.host,
                                                                  px.mysql_port))
        # the application's account on the (real) Galera cluster, and its user in Consul KV
        cluster[1].sql("CREATE DATABASE IF NOT EXISTS demo")
        cluster[1].sql("CREATE TABLE IF NOT EXISTS demo.writes (id INT AUTO_INCREMENT PRIMARY KEY, port INT)")
        cluster[1].sql("CREATE USER IF NOT EXISTS %s@'127.0.0.%%' IDENTIFIED BY %s", (APP_USER, APP_PASSWORD))
        cluster[1].sql("GRANT ALL ON demo.* TO %s@'127.0.0.%%'", (APP_USER,))
        consul.put("proxysql/users/" + APP_USER, json.dumps({"password": APP_PASSWORD,
                                                             "default_hostgroup": WRITER_HG}).encode())

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
                    'quiescence-min = 0.2\ndrain-timeout = 5.0\nusers-prefix = "proxysql/users"\n'
                    'clusters = ( { alias = "demo"; writer_hostgroup = %d; reader_hostgroup = %d; } );\n'
                    'targets = ( { name = "proxysql"; address = "%s"; user = "%s"; password_file = "%s"; } );\n'
                    % (consul.addr, WRITER_HG, READER_HG, px.admin_addr, px.admin_user, pwfile))
        agent_log = os.path.join(work, "proxysql-sync.log")
        procs.append(subprocess.Popen([os.path.join(BIN, "proxysql-sync"), "-c", cfg],
                                      stdout=open(agent_log, "ab"), stderr=subprocess.STDOUT))
        say("  proxysql-sync started (its log is shown at the end)")

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
        wait_for("the application's user", lambda: px.query("SELECT COUNT(*) FROM runtime_mysql_users")[0][0] != "0")
        users_table(px, " (from Consul KV proxysql/users/)")
        say("  the application (a PyMySQL client, through ProxySQL %s's MySQL port) writes: it lands on %s"
            % (px_what, app_write(px)))

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
        say("  the application's next write lands on %s" % app_write(px))

        title("node3 comes back: it rejoins Galera, registers again, and ProxySQL routes to it")
        t0 = time.monotonic()
        cluster[3].start()
        if not wait_for("node3 back in the readers", lambda: "127.0.0.3" in readers(), timeout=60):
            explain()
        proxysql_table(px, " %.1f s later" % (time.monotonic() - t0))

        title("ProxySQL (%s) stopped and started empty (no datadir): Consul has it all" % px_what)
        px.stop()
        t0 = time.monotonic()
        px.start(initial=True)
        started = time.monotonic() - t0
        say("  ProxySQL answers again after %.1f s, with no servers and no users" % started)
        t1 = time.monotonic()
        wait_for("servers and users back", lambda: len(readers()) == 3 and writer() == {"127.0.0.2"}
                 and px.query("SELECT COUNT(*) FROM runtime_mysql_users")[0][0] != "0")
        proxysql_table(px, " %.1f s after it answered (proxysql-sync reconnects and applies)"
                       % (time.monotonic() - t1))
        users_table(px)

        title("Draining ProxySQL (%s) before a stop: proxysql-check --drain, a pod's preStop" % px_what)
        import pymysql
        client = pymysql.connect(host=px.host, port=px.mysql_port, user=APP_USER, password=APP_PASSWORD,
                                 autocommit=True)
        drain = subprocess.Popen([os.path.join(BIN, "proxysql-check"), "--drain", "--drain-delay", "0.5",
                                  "--timeout", "10", "--port", str(px.admin_port), "--user", px.admin_user,
                                  "--password-file", pwfile, "--defaults-extra-file", ""],
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        say("  a client is connected; the drain keeps serving 0.5 s, then PROXYSQL PAUSE")
        time.sleep(1.5)
        with client.cursor() as cur:
            cur.execute("INSERT INTO demo.writes (port) VALUES (@@port)")
        try:
            pymysql.connect(host=px.host, port=px.mysql_port, user=APP_USER, password=APP_PASSWORD,
                            connect_timeout=2).close()
            say("  a new connection was accepted (unexpected)")
        except pymysql.err.OperationalError as e:
            say("  the open connection still writes; a new one is refused: %s" % e.args[1])
        client.close()
        t0 = time.monotonic()
        out = drain.communicate(timeout=15)[0]
        say("  the client left; the drain exited %d %.0f ms later:" % (drain.returncode,
                                                                   (time.monotonic() - t0) * 1000))
        for line in out.splitlines():
            say("    " + line)

        title("proxysql-sync's log (secrets never appear)")
        with open(agent_log) as f:
            for line in f.read().splitlines()[-12:]:
                say("  " + line)
        say()
        say("Demo done in %.0f s. Everything it started is being stopped." % (time.monotonic() - demo_t0))
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
