#!/usr/bin/python3
"""`make demo-postgres`: proxysql-sync's PostgreSQL side following a Patroni failover.

It starts a real three-member Patroni cluster of real PostgreSQL 15 servers on loopback (Debian's
patroni and postgresql-15; tests/integration/patroni.py), Consul and ProxySQL 3 (the real binaries
with CONSUL_BIN / PROXYSQL_BIN, else the project's test doubles, ProxySQL's in its 3.0 mode), and
proxysql-sync with one `patroni` entry and `pgsql-users-prefix`, then:

  1. shows pgsql_servers as the agent wrote it from Patroni's keys, and pgsql_users with a SCRAM
     secret taken from PostgreSQL's own pg_authid (no clear password in Consul);
  2. kills the leader's Patroni and PostgreSQL (SIGKILL) and shows, with times from the kill, when
     Patroni's leader key went, when a new leader took it and when ProxySQL's runtime had the new
     writer, sampling the writer hostgroup every 50 ms: it is never empty;
  3. starts the killed member again (it rejoins as a replica, a reader again) and hands the leader
     role back with `patronictl switchover`.

Each step says which parts are real. Everything listens on 127.0.0.1 and stops at the end.
"""

import json
import os
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "integration")]

import patroni  # noqa: E402
from fakes.consul import Consul  # noqa: E402
from fakes.proxysql import ProxySQL  # noqa: E402
from demo import say, table, title  # noqa: E402  (the MySQL demo's printing)
from test_sync import Agent  # noqa: E402

WRITER_HG, READER_HG = "20", "21"
CONFIG = """consul-addr = "%(consul)s"
health-listen = "127.0.0.1:%(health)d"
lock-file = "%(workdir)s/sync.lock"
quiescence-min = 0.05
patroni = ( { scope = "pgdemo"; namespace = "service"; writer_hostgroup = 20; reader_hostgroup = 21; } );
pgsql-users-prefix = "pgsql/users"
targets = ( { name = "proxysql"; address = "%(admin)s"; user = "%(user)s"; password_file = "%(pwfile)s"; } );
"""

def servers(px):
    return sorted(tuple(r) for r in px.query(
        "SELECT hostgroup_id, hostname, port, status, comment FROM runtime_pgsql_servers"))


def writers(px):
    return [r for r in servers(px) if r[0] == WRITER_HG and r[3] == "ONLINE"]


def wait(what, pred, timeout):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            if pred():
                return
        except Exception:
            pass
        time.sleep(0.05)
    raise SystemExit("demo: waited %.0f s for %s" % (timeout, what))


def psql(cluster, member, sql):
    """One statement as postgres on `member`, over TCP with the superuser's password."""
    env = dict(os.environ, PGPASSWORD=cluster.superuser_password)
    cmd = [os.path.join(patroni.PG_BIN, "psql"), "-h", "127.0.0.1", "-p", str(member.pg_port), "-U", "postgres",
           "-d", "postgres", "-Atc", sql]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=30, env=env)
    if r.returncode != 0:
        raise SystemExit("demo: psql on %s: %s" % (member.name, r.stderr.strip()))
    return r.stdout.strip()


class Sampler:
    """The writer hostgroup of runtime_pgsql_servers every 50 ms: (time, online writers)."""

    def __init__(self, px):
        self.px, self.samples, self.stop = px, [], threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        conn = None
        while not self.stop.is_set():
            try:
                conn = conn or self.px.connect(connect_timeout=1, read_timeout=2)
                with conn.cursor() as cur:
                    cur.execute("SELECT hostname, port FROM runtime_pgsql_servers WHERE hostgroup_id = %s "
                                "AND status = 'ONLINE'" % WRITER_HG)
                    self.samples.append((time.monotonic(), sorted(cur.fetchall())))
            except Exception:
                conn = None
            self.stop.wait(0.05)


def step_first_sync(cluster, consul, px, agent):
    title("1. Patroni's keys in Consul become pgsql_servers; a SCRAM secret becomes pgsql_users")
    leader = cluster.leader()
    say("  Patroni (real) wrote service/pgdemo/leader = %s and a members/<name> entry per member."
        % leader.name)
    psql(cluster, leader, "CREATE ROLE app LOGIN PASSWORD 'demo-%s'" % os.urandom(8).hex())
    secret = psql(cluster, leader, "SELECT rolpassword FROM pg_authid WHERE rolname = 'app'")
    consul.put("pgsql/users/app", json.dumps({"password": secret, "default_hostgroup": 20, "frontend": 1,
                                              "backend": 0, "comment": "secret from pg_authid"}).encode())
    say("  pgsql/users/app holds PostgreSQL's own SCRAM secret for app: %s..." % secret[:40])
    say("  (a frontend-only user: ProxySQL verifies clients with the secret; its logins to PostgreSQL")
    say("  need the clear password, kept off Consul: docs/postgresql.md)")
    wait("the first sync", lambda: len(servers(px)) == 3 and px.query(
        "SELECT COUNT(*) FROM runtime_pgsql_users")[0][0] == "1" and agent.ready(), 30)
    table(["hostgroup", "host", "port", "status", "comment"], servers(px))
    rows = px.query("SELECT username, substr(password, 1, 24), default_hostgroup, frontend, backend "
                    "FROM runtime_pgsql_users ORDER BY backend")
    table(["username", "password", "hostgroup", "frontend", "backend"], [tuple(r) for r in rows])
    say("  /readyz: %s" % agent.http("/readyz")[1].strip())


def step_failover(cluster, px):
    title("2. Kill the leader (SIGKILL of its Patroni and PostgreSQL): a real Patroni failover")
    sampler = Sampler(px)
    sampler.thread.start()
    old = cluster.leader_name()
    with cluster.watch_leader() as watch:
        killed_at = cluster.kill(old)
        say("  killed %s at t=0" % old)
        wait("a new leader", lambda: cluster.leader_name() not in (None, old), 60)
        new = cluster[cluster.leader_name()]
        wait("the new writer in ProxySQL", lambda: writers(px) and writers(px)[0][2] == str(new.pg_port), 30)
        written = time.monotonic() - killed_at
        gone = watch.first(None, killed_at)
        taken = watch.wait(new.name, killed_at, 10)
    time.sleep(0.5)
    sampler.stop.set()
    sampler.thread.join(5)
    if gone is not None:
        say("  t=%5.2f s  Patroni's leader key deleted (%s's session expired)" % (gone, old))
    say("  t=%5.2f s  %s took the leader key" % (taken, new.name))
    say("  t=%5.2f s  ProxySQL's runtime_pgsql_servers has 127.0.0.1:%d in hostgroup 20" % (written, new.pg_port))
    empty = [s for s in sampler.samples if not s[1]]
    say("  writer hostgroup sampled %d times every 50 ms: empty in %d of them" % (len(sampler.samples),
                                                                                  len(empty)))
    table(["hostgroup", "host", "port", "status", "comment"], servers(px))
    return old


def step_back(cluster, px, old):
    title("3. %s restarts and rejoins as a replica; patronictl switchover hands it the leader role" % old)
    cluster.heal()
    wait("%s back as a reader" % old, lambda: any(r[0] == READER_HG and r[2] == str(cluster[old].pg_port)
                                                  and r[3] == "ONLINE" for r in servers(px)), 60)
    took = cluster.switchover(old)
    wait("%s the writer" % old, lambda: writers(px) and writers(px)[0][2] == str(cluster[old].pg_port), 30)
    say("  switchover to %s: leader key moved in %.1f s; ProxySQL followed" % (old, took))
    wait("the old leader back as a reader", lambda: len([r for r in servers(px) if r[3] == "ONLINE"]) == 3, 60)
    table(["hostgroup", "host", "port", "status", "comment"], servers(px))


def main():
    why = patroni.missing()
    if why:
        raise SystemExit("demo-postgres: %s" % why)
    say("What runs here:")
    say("  PostgreSQL 15 and Patroni 3.0.2: real (Debian's packages), 3 members on 127.0.0.1")
    consul = Consul(session_ttl_min="1s")
    px = ProxySQL()
    if px.is_fake:
        px.extra_args += ["--proxysql-version", "3.0"]
    say("  Consul: %s" % ("the real binary (CONSUL_BIN)" if not consul.is_fake else
                          "the project's Consul double (set CONSUL_BIN for a real Consul)"))
    say("  ProxySQL: %s" % ("the real binary (PROXYSQL_BIN; it must be 3.0 or later)" if not px.is_fake else
                            "the project's ProxySQL double in its 3.0 mode (set PROXYSQL_BIN for a real one)"))
    say("  proxysql-sync: this checkout's bin/proxysql-sync")
    workdir = tempfile.mkdtemp(prefix="demo-postgres-")
    consul.start()
    cluster = agent = None
    try:
        px.start()
        title("Starting the Patroni cluster (initdb, basebackups)")
        cluster = patroni.Cluster(consul).start()
        say("  healthy in %.1f s: leader %s" % (cluster.timings["start"], cluster.leader_name()))
        agent = Agent(consul, [px], workdir)
        agent.text = CONFIG % {"consul": consul.addr, "health": agent.health_port, "workdir": workdir,
                               "admin": px.admin_addr, "user": px.admin_user,
                               "pwfile": os.path.join(workdir, "admin-pw-0")}
        agent.write_config()
        title("proxysql-sync's whole configuration (only the PostgreSQL side)")
        for line in agent.text.strip().splitlines():
            say("  " + line)
        agent.start()
        step_first_sync(cluster, consul, px, agent)
        old = step_failover(cluster, px)
        step_back(cluster, px, old)
        title("Done: every process stops now")
    except SystemExit:
        if agent:
            say("proxysql-sync's last lines:\n" + "\n".join(agent.logs().splitlines()[-15:]))
        raise
    finally:
        if agent:
            agent.stop()
        if cluster:
            cluster.close()
        px.close()
        consul.close()
        subprocess.run(["rm", "-rf", workdir])


if __name__ == "__main__":
    main()
