"""proxysql-sync's PostgreSQL side end to end: a real Patroni 3.0.2 cluster of PostgreSQL 15
(tests/integration/patroni.py) writes service/pgdemo/ into the Consul double, the agent turns it
into pgsql_servers (and a KV prefix into pgsql_users) of the ProxySQL double in its 3.0 mode.

The configuration under test:

    patroni = ( { scope = "pgdemo"; namespace = "service"; writer_hostgroup = 20; reader_hostgroup = 21; } );
    pgsql-users-prefix = "pgsql/users";

beside the MySQL side of test_sync.py's agent (cluster "shop", hostgroups 10/11), which must go on
as before. One Patroni cluster for the module; the agent, its targets and their doubles per test.
"""

import base64
import hashlib
import hmac
import json
import os
import time

import pytest

import patroni
from fakes.proxysql import ProxySQL
from test_sync import (ADMIN_PASSWORD, TOPOLOGY, USER_PASSWORD, Agent, RuntimeSampler,  # noqa: F401
                       put_topology, runtime_servers, workdir, writes)

pg_consul, pg_cluster, healthy_pg = patroni.fixtures()

WRITER_HG, READER_HG = "20", "21"
PGSQL_USERS_PREFIX = "pgsql/users"
PATRONI_CONFIG = """
pgsql-users-prefix = "%s";
patroni = ( { scope = "pgdemo"; namespace = "service"; writer_hostgroup = %s; reader_hostgroup = %s; } );
""" % (PGSQL_USERS_PREFIX, WRITER_HG, READER_HG)
SAMPLE_INTERVAL = 0.1
MARGIN = 5.0                        # seconds past ttl + quiescence-max for the agent's answer


def proxysql(version):
    """The ProxySQL double playing `version` (2.7: no pgsql tables); a real one with PROXYSQL_BIN
    plays whatever it is, so only 3.0 is asked of it."""
    p = ProxySQL(admin_password=ADMIN_PASSWORD)
    if p.is_fake:
        p.extra_args += ["--proxysql-version", version]
    elif version != "3.0":
        pytest.skip("a ProxySQL %s target needs the double (PROXYSQL_BIN is set)" % version)
    p.start()
    if not p.is_fake and not p.query("SELECT @@version")[0][0].startswith("3."):
        real = p.query("SELECT @@version")[0][0]
        p.close()
        pytest.skip("the PostgreSQL side needs ProxySQL 3; PROXYSQL_BIN is %s" % real)
    return p


@pytest.fixture
def px3():
    p = proxysql("3.0")
    yield p
    p.close()


@pytest.fixture
def px27():
    p = proxysql("2.7")
    yield p
    p.close()


@pytest.fixture
def make_agent(pg_consul, workdir):
    """make_agent(targets) -> a started Agent with the MySQL cluster "shop" and the patroni entry."""
    made = []

    def make(targets):
        put_topology(pg_consul)
        a = Agent(pg_consul, targets, workdir, extra=PATRONI_CONFIG)
        made.append(a)
        return a.start()
    yield make
    for a in made:
        rc = a.stop()
        logs = a.logs()
        print(logs)                         # shown by pytest when the test fails
        assert ADMIN_PASSWORD not in logs and USER_PASSWORD not in logs, "a password reached the agent's log"
        assert rc in (0, None), "agent exit code %r" % rc


def wait_for(agent, what, predicate, timeout=30.0, interval=0.05):
    """Poll predicate() until true (its value); fail naming `what`, at once if the agent exited."""
    end = time.monotonic() + timeout
    last = None
    while time.monotonic() < end:
        if agent.proc.poll() is not None:
            pytest.fail("the agent exited with %s while waiting for %s:\n%s"
                        % (agent.proc.returncode, what, agent.logs()[-3000:]))
        try:
            last = predicate()
            if last:
                return last
        except Exception as e:              # noqa: BLE001 - a server between two states
            last = e
        time.sleep(interval)
    pytest.fail("timed out after %.0f s waiting for %s (last: %r)\nagent log:\n%s"
                % (timeout, what, last, agent.logs()[-3000:]))


def pgsql_servers(px):
    """{hostgroup: sorted [(host, port, status)]} of runtime_pgsql_servers."""
    out = {}
    for hg, host, port, status in px.query("SELECT hostgroup_id, hostname, port, status FROM runtime_pgsql_servers"):
        out.setdefault(hg, []).append((host, port, status))
    return {hg: sorted(rows) for hg, rows in out.items()}


def expected(pg, leader=None):
    """runtime_pgsql_servers of the cluster as Consul says it is: the leader in 20, the running
    replicas in 21."""
    leader = leader or pg.leader_name()
    want = {WRITER_HG: [("127.0.0.1", str(pg[leader].pg_port), "ONLINE")]}
    replicas = [("127.0.0.1", str(pg[n].pg_port), "ONLINE") for n in pg.replicas() if n != leader]
    if replicas:
        want[READER_HG] = sorted(replicas)
    return want


class PgsqlSampler(RuntimeSampler):
    """test_sync's RuntimeSampler on runtime_pgsql_servers every SAMPLE_INTERVAL (samples: the time
    the query was sent, sorted (hostgroup, host, port, status) rows), with the writer's questions."""

    def __init__(self, px):
        super().__init__(px, interval=SAMPLE_INTERVAL, table="runtime_pgsql_servers")

    def writerless(self):
        return super().writerless(WRITER_HG)

    def first_writer(self, port, since):
        """Seconds from `since` to the first sample whose hostgroup 20 serves 127.0.0.1:<port>."""
        for t, rows in self.samples:
            if t >= since and ("127.0.0.1", str(port)) in [(r[1], r[2]) for r in self.serving(rows, WRITER_HG)]:
                return t - since
        return None


def synced(px, pg):
    return pgsql_servers(px) == expected(pg)


def first_sync(agent, px, pg):
    wait_for(agent, "runtime_pgsql_servers to show the Patroni cluster", lambda: synced(px, pg))
    wait_for(agent, "runtime_mysql_servers to show cluster shop", lambda: runtime_servers(px) == sorted(TOPOLOGY))
    wait_for(agent, "/readyz 200", agent.ready)


def no_mysql_server_writes(px):
    """The statements the double got that wrote MySQL servers (a LOAD MYSQL SERVERS counts)."""
    return [s for s in writes(px) if "MYSQL SERVERS" in s.upper() or "MYSQL_SERVERS" in s.upper()]


def failover_through_the_agent(agent, px, pg, move):
    """Run move(old leader) (a kill or a switchover; it returns time.monotonic() when it began)
    while sampling runtime_pgsql_servers and Consul's leader key, then wait for the agent to serve
    the new leader. Returns (old, new, seconds to Consul's leader key, seconds to hostgroup 20),
    both from move()'s start."""
    first_sync(agent, px, pg)
    old = pg.leader_name()
    px.clear_statements()
    with PgsqlSampler(px) as sampler, pg.watch_leader() as watch:
        began = move(old)
        new, _ = pg.wait_leader(other_than=old, since=began)
        to_consul = watch.wait(new, began, 10)
        port = pg[new].pg_port
        wait_for(agent, "hostgroup 20 to serve the new leader %s (127.0.0.1:%d)" % (new, port),
                 lambda: sampler.first_writer(port, began) is not None, timeout=pg.ttl + 1.0 + MARGIN + 10)
        time.sleep(3 * SAMPLE_INTERVAL)
    to_proxysql = sampler.first_writer(port, began)
    assert len(sampler.samples) >= 10, "only %d samples" % len(sampler.samples)
    bad = sampler.writerless()
    assert not bad, "hostgroup 20 empty in %d of %d samples, first at +%.2f s: %r" % (
        len(bad), len(sampler.samples), bad[0][0] - began, bad[0][1])
    assert no_mysql_server_writes(px) == [], "mysql_servers written during a PostgreSQL failover"
    assert runtime_servers(px) == sorted(TOPOLOGY)
    return old, new, to_consul, to_proxysql


# ---- servers ----------------------------------------------------------------------------------

def test_leader_in_20_replicas_in_21(pg_cluster, px3, make_agent):
    pg = pg_cluster
    agent = make_agent([px3])
    first_sync(agent, px3, pg)
    rows = pgsql_servers(px3)
    assert rows[WRITER_HG] == [("127.0.0.1", str(pg.leader_port()), "ONLINE")]
    assert len(rows[READER_HG]) == 2, rows
    assert set(rows) == {WRITER_HG, READER_HG}, rows
    # The MySQL side is the same as without PostgreSQL, and the pgsql tables stay out of it.
    assert runtime_servers(px3) == sorted(TOPOLOGY)
    assert not [r for r in px3.query("SELECT hostgroup_id FROM runtime_mysql_servers")
                if r[0] in (WRITER_HG, READER_HG)]


def test_kill_the_leader_writer_never_empty(healthy_pg, px3, make_agent):
    """SIGKILL of the leader: hostgroup 20 keeps a server at every sample (every 100 ms), and the
    new leader is served within ttl + quiescence-max + 5 s of the kill."""
    pg = healthy_pg
    agent = make_agent([px3])
    old, new, to_consul, to_px = failover_through_the_agent(agent, px3, pg, lambda old: pg.kill(old))
    print("kill %s: leader key -> %s after %.2f s, hostgroup 20 -> %s after %.2f s (agent: +%.2f s)"
          % (old, new, to_consul, new, to_px, to_px - to_consul))
    assert to_px <= pg.ttl + 1.0 + MARGIN, "the new writer took %.2f s to reach ProxySQL" % to_px
    # The crashed member rejoins as a replica: it comes back in 21.
    pg.heal()
    wait_for(agent, "the old leader back in hostgroup 21", lambda: synced(px3, pg))
    assert pgsql_servers(px3)[WRITER_HG] == [("127.0.0.1", str(pg[new].pg_port), "ONLINE")]


def test_switchover_writer_never_empty(healthy_pg, px3, make_agent):
    pg = healthy_pg
    agent = make_agent([px3])

    def switch(old):
        t = time.monotonic()
        pg.switchover(sorted(m.name for m in pg if m.name != old)[0])
        return t
    old, new, to_consul, to_px = failover_through_the_agent(agent, px3, pg, switch)
    print("switchover %s -> %s: leader key after %.2f s, hostgroup 20 after %.2f s (agent: +%.2f s)"
          % (old, new, to_consul, to_px, to_px - to_consul))
    assert to_px <= to_consul + 1.0 + MARGIN
    pg.wait_healthy()
    wait_for(agent, "the old leader in hostgroup 21", lambda: synced(px3, pg))


# ---- users ----------------------------------------------------------------------------------------

def scram_secret(password, iterations=4096):
    """A PostgreSQL SCRAM-SHA-256 verifier of `password` (RFC 5802/7677, as PostgreSQL stores it)."""
    salt = os.urandom(16)
    salted = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, iterations)
    client_key = hmac.new(salted, b"Client Key", "sha256").digest()
    server_key = hmac.new(salted, b"Server Key", "sha256").digest()
    b64 = lambda b: base64.b64encode(b).decode()        # noqa: E731
    return "SCRAM-SHA-256$%d:%s$%s:%s" % (iterations, b64(salt), b64(hashlib.sha256(client_key).digest()),
                                           b64(server_key))


def test_pgsql_users_prefix_to_runtime_pgsql_users(pg_consul, pg_cluster, px3, make_agent):
    secret = scram_secret(USER_PASSWORD)
    pg_consul.put(PGSQL_USERS_PREFIX + "/app", json.dumps({"password": secret, "default_hostgroup": 20}).encode())
    try:
        agent = make_agent([px3])
        first_sync(agent, px3, pg_cluster)

        def users():
            return sorted(tuple(r) for r in px3.query(
                "SELECT username, password, frontend, backend, default_hostgroup FROM runtime_pgsql_users"))
        want = [("app", secret, "0", "1", "20"), ("app", secret, "1", "0", "20")]
        wait_for(agent, "app in runtime_pgsql_users", lambda: users() == want)
        # The MySQL users are put_topology's (an "app" among them, in hostgroup 10): the PostgreSQL
        # one did not reach mysql_users.
        mysql_users = sorted(r[0] for r in px3.query("SELECT DISTINCT username FROM runtime_mysql_users"))
        assert mysql_users == ["app", "report"]     # put_topology's: their own hostgroups, not 20
        assert not [r for r in px3.query("SELECT default_hostgroup FROM runtime_mysql_users") if r[0] == "20"]
    finally:
        pg_consul.delete(PGSQL_USERS_PREFIX + "/app")


# ---- a target without pgsql tables ---------------------------------------------------------------

def test_a_2_7_target_refuses_pgsql_and_still_syncs_mysql(pg_cluster, px3, px27, make_agent):
    """px2 is a ProxySQL 2.7 (no pgsql_servers): /readyz and the log say so, naming pgsql and the
    target; its MySQL side syncs; px1 (3.0) gets both."""
    agent = make_agent([px3, px27])
    wait_for(agent, "px1's runtime_pgsql_servers", lambda: synced(px3, pg_cluster))
    for px in (px3, px27):
        wait_for(agent, "runtime_mysql_servers of %s" % px.admin_addr, lambda: runtime_servers(px) == sorted(TOPOLOGY))

    def refused():
        status, body = agent.http("/readyz")
        return status == 503 and "pgsql" in body.lower() and ("px2" in body or px27.admin_addr in body) and body
    body = wait_for(agent, "/readyz 503 naming pgsql and px2", refused)
    print("/readyz: %s" % body.strip())
    lines = [ln for ln in agent.logs().splitlines()
             if "pgsql" in ln.lower() and ("px2" in ln or px27.admin_addr in ln)]
    assert lines, "no log line names pgsql and px2:\n%s" % agent.logs()[-3000:]
    print("log: %s" % lines[0])
    assert not [s for s in px27.statements() if "PGSQL" in s["sql"].upper() and s["sql"].lstrip().upper()
                .startswith(("INSERT", "DELETE", "LOAD", "SAVE"))], "pgsql statements sent to a 2.7 target"
