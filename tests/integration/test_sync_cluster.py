"""proxysql-sync beside the two ProxySQL features that rewrite what it writes: ProxySQL Cluster (a
member pulls mysql_servers / mysql_users from its peers) and the monitor (mysql_*_hostgroups rows
move servers between hostgroups in runtime). Each test starts its own Consul, ProxySQL (double, or
real with PROXYSQL_BIN) and agent on loopback.
"""

import time

import pytest

from test_sync import (Agent, consul, first_sync, memory_servers, put_topology, px,  # noqa: F401
                       runtime_servers, stop_and_check, synced, wait_until, workdir, writes)
from test_sync_safety import metric


def make_member(px, peer_port=16999):
    """List a peer in proxysql_servers and load it: the target is then a ProxySQL Cluster member
    (runtime_proxysql_servers non-empty) pulling with the default diffs_before_sync = 3. The peer
    does not exist; nothing is pulled, which is all these tests need."""
    px.query("INSERT INTO proxysql_servers (hostname, port, weight, comment) VALUES ('127.0.0.1', %d, 0, 'peer')"
             % peer_port)
    px.query("LOAD PROXYSQL SERVERS TO RUNTIME")


def runtime_variable(px, name):
    rows = px.query("SELECT variable_value FROM runtime_global_variables WHERE variable_name='%s'" % name)
    return rows[0][0] if rows else None


def test_cluster_member_that_pulls_is_refused(consul, px, workdir):
    """cluster-mode = refuse (the default): a target whose cluster pulls mysql_servers and mysql_users
    gets nothing written; /readyz 503 says "cluster" and names the setting; metric and log."""
    make_member(px)
    put_topology(consul)
    px.clear_statements()
    agent = Agent(consul, [px], workdir).start()
    try:
        wait_until("the refusal", lambda: metric(agent, "proxysql_sync_target_refused", target="px1",
                                                 table="mysql_servers", reason="cluster") == 1)
        assert metric(agent, "proxysql_sync_target_refused", target="px1", table="mysql_users",
                      reason="cluster") == 1
        assert metric(agent, "proxysql_sync_cluster_peers", target="px1") == 1
        assert metric(agent, "proxysql_sync_cluster_diffs_before_sync", target="px1", table="mysql_servers") == 3
        wait_until("/readyz naming the cluster", lambda: "ProxySQL Cluster" in agent.http("/readyz")[1])
        status, body = agent.http("/readyz")
        assert status == 503 and "cluster-mode" in body, body
        time.sleep(1)
        assert memory_servers(px) == [] and writes(px) == []
        assert len([x for x in agent.logs().splitlines() if "pulls mysql_" in x]) == 1, agent.logs()
    finally:
        stop_and_check(agent)


def test_cluster_member_with_disable_pull_is_managed(consul, px, workdir):
    """cluster-mode = disable-pull: the agent sets the pull of each managed table to 0 (LOAD and SAVE
    ADMIN VARIABLES), logs it, then manages the target like a standalone one; a target override wins."""
    make_member(px)
    put_topology(consul)
    agent = Agent(consul, [px], workdir)
    agent.text = agent.text.replace('password_file = "', 'cluster_mode = "disable-pull"; password_file = "')
    agent.write_config()
    agent.start()
    try:
        first_sync(px, agent)
        for table in ("mysql_servers", "mysql_users"):
            assert runtime_variable(px, "admin-cluster_%s_diffs_before_sync" % table) == "0"
        assert runtime_variable(px, "admin-cluster_mysql_query_rules_diffs_before_sync") == "3"   # not ours
        disk = px.query("SELECT variable_value FROM disk.global_variables "
                        "WHERE variable_name='admin-cluster_mysql_servers_diffs_before_sync'")
        assert disk and disk[0][0] == "0", disk
        assert "no longer pulls mysql_servers from its peers" in agent.logs()
        assert metric(agent, "proxysql_sync_target_refused", target="px1", table="mysql_servers",
                      reason="cluster") == 0
    finally:
        stop_and_check(agent)


def test_kv_roles_beside_a_replication_hostgroup_are_refused(consul, px, workdir):
    """roles = "kv" (the default) and a mysql_replication_hostgroups row over the cluster's
    hostgroups: the cluster is not written there; /readyz 503 names the row and the setting."""
    px.query("INSERT INTO mysql_replication_hostgroups (writer_hostgroup, reader_hostgroup) VALUES (10, 11)")
    px.query("LOAD MYSQL SERVERS TO RUNTIME")
    put_topology(consul)
    agent = Agent(consul, [px], workdir).start()
    try:
        wait_until("the refusal", lambda: metric(agent, "proxysql_sync_target_refused", target="px1",
                                                 table="mysql_servers", reason="monitor") == 1)
        wait_until("/readyz naming the row", lambda: "mysql_replication_hostgroups" in agent.http("/readyz")[1])
        status, body = agent.http("/readyz")
        assert status == 503 and "roles" in body, body
        assert metric(agent, "proxysql_sync_monitor_hostgroup_rows", target="px1") == 1
        time.sleep(1)
        assert memory_servers(px) == []
        # the users are not the monitor's: they still apply
        assert len(px.query("SELECT username FROM main.mysql_users")) == 2
    finally:
        stop_and_check(agent)


def test_monitor_roles_write_every_member_into_the_writer_hostgroup(consul, px, workdir):
    """roles = "monitor": the master and the replicas of the configured regions go into the writer
    hostgroup once, never into the reader hostgroup; the monitor's moves in runtime cause no write."""
    px.query("INSERT INTO mysql_replication_hostgroups (writer_hostgroup, reader_hostgroup) VALUES (10, 11)")
    px.query("LOAD MYSQL SERVERS TO RUNTIME")
    put_topology(consul, users=False)
    agent = Agent(consul, [px], workdir, extra="resync-interval = 1.0\n")
    agent.text = agent.text.replace('reader_hostgroup = 11; }', 'reader_hostgroup = 11; roles = "monitor"; }')
    agent.write_config()
    agent.start()
    try:
        wait_until("the members", lambda: memory_servers(px) == [
            ("10", "db1", "3306", "ONLINE"), ("10", "db2", "3306", "ONLINE"), ("10", "db3", "3306", "ONLINE")])
        wait_until("/readyz", agent.ready)
        px.clear_statements()
        time.sleep(2.5)                     # resyncs find nothing to do
        assert writes(px) == []
        consul.delete("mysql/replica/shop/eu/db3:3306")
        wait_until("db3 drained", lambda: ("10", "db3", "3306", "ONLINE") not in memory_servers(px))
    finally:
        stop_and_check(agent)


def test_monitor_roles_without_a_monitor_row_are_refused(consul, px, workdir):
    """roles = "monitor" on a target with no monitor row for the writer hostgroup: refused, with the reason."""
    put_topology(consul, users=False)
    agent = Agent(consul, [px], workdir)
    agent.text = agent.text.replace('reader_hostgroup = 11; }', 'reader_hostgroup = 11; roles = "monitor"; }')
    agent.write_config()
    agent.start()
    try:
        wait_until("the refusal", lambda: "no monitor hostgroup row" in agent.http("/readyz")[1])
        assert memory_servers(px) == []
    finally:
        stop_and_check(agent)


@pytest.mark.parametrize("bad, want", [
    ('roles = "auto";', "roles: 'auto' is not kv or monitor"),
    ('roles = "monitor"; writer_is_reader = true;', "writer_is_reader with roles"),
])
def test_bad_roles_are_refused_by_check_config(consul, px, workdir, bad, want):
    agent = Agent(consul, [px], workdir)
    agent.text = agent.text.replace('reader_hostgroup = 11; }', 'reader_hostgroup = 11; %s }' % bad)
    agent.write_config()
    r = agent.run("--check-config")
    assert r.returncode == 2 and want in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


# ---- single-writer ---------------------------------------------------------------------------

SINGLE_WRITER = ('cluster-mode = "single-writer"\ncluster-lock-ttl = 2.0\ncluster-lock-delay = 1.0\n'
                 'admin-timeout = 1.0\ncluster-converge-timeout = 3.0\ncluster-leader-grace = 3.0\n')


@pytest.fixture
def fast_consul():
    from fakes.consul import Consul
    c = Consul(session_ttl_min="1s")
    c.start()
    yield c
    c.close()


def proxysql_doubles(n):
    """n started ProxySQLs (doubles, or real with PROXYSQL_BIN) with the suite's admin password."""
    from fakes.proxysql import ProxySQL
    from test_sync import ADMIN_PASSWORD
    return [ProxySQL(admin_password=ADMIN_PASSWORD).start() for _ in range(n)]


def agents_for(consul, pxs, workdir, extra):
    """One started agent per ProxySQL, each in a directory of its own."""
    import os
    agents = []
    for i, p in enumerate(pxs):
        d = os.path.join(workdir, "a%d" % i)
        os.makedirs(d)
        agents.append(Agent(consul, [p], d, extra=extra(p) if callable(extra) else extra).start())
    return agents


def stop_all(agents, pxs):
    for a in agents:
        a.stop()
        print(a.logs())
    for p in pxs:
        p.close()


def writer_of(agents):
    return [a for a in agents if metric(a, "proxysql_sync_cluster_writer") == 1]


def elected(agents, pxs):
    """Once one agent of two is the writer: (writer, the other, the writer's ProxySQL, the other's)."""
    wait_until("one writer", lambda: len(writer_of(agents)) == 1, timeout=15)
    w = writer_of(agents)[0]
    f = agents[1 - agents.index(w)]
    return w, f, pxs[agents.index(w)], pxs[agents.index(f)]


def test_single_writer_elects_one_agent_and_hands_over(fast_consul, workdir):
    """single-writer: of two agents exactly one holds cluster-lock-key and writes, to its own target;
    the other writes nothing (its target does not converge here: there is no cluster to carry the
    change, so it turns not ready after cluster-converge-timeout). The writer stopped (SIGTERM:
    released) or killed (its session expires): the other takes over and writes, and a KV change
    after that reaches its target."""
    consul = fast_consul
    pxs = proxysql_doubles(2)
    agents = []
    try:
        put_topology(consul, users=False)
        agents = agents_for(consul, pxs, workdir, SINGLE_WRITER)
        wait_until("one writer", lambda: len(writer_of(agents)) == 1, timeout=15)
        time.sleep(2)
        assert len(writer_of(agents)) == 1
        w = writer_of(agents)[0]
        f = agents[1 - agents.index(w)]
        wp, fp = pxs[agents.index(w)], pxs[agents.index(f)]
        wait_until("the writer's target synced", lambda: synced(wp))
        assert memory_servers(fp) == []
        wait_until("the follower not ready after cluster-converge-timeout",
                   lambda: "cluster-converge-timeout" in f.http("/readyz")[1], timeout=10)
        # SIGTERM: the lock is released at once
        stop_and_check(w)
        t0 = time.monotonic()
        wait_until("the other takes over", lambda: metric(f, "proxysql_sync_cluster_writer") == 1, timeout=10)
        print("takeover after SIGTERM: %.2f s" % (time.monotonic() - t0))
        wait_until("the new writer's target synced", lambda: synced(fp))
        wait_until("/readyz", f.ready)
        # SIGKILL of the new writer: its session lapses (TTL), then lock-delay; the first takes over
        w.start()
        time.sleep(1.5)
        assert writer_of([w]) == []
        f.proc.kill()
        f.proc.wait(5)
        t0 = time.monotonic()
        wait_until("takeover after a kill", lambda: metric(w, "proxysql_sync_cluster_writer") == 1, timeout=20)
        print("takeover after SIGKILL: %.2f s (TTL 2 s, lock-delay 1 s)" % (time.monotonic() - t0))
        consul.put("mysql/replica/shop/eu/db5:3306", b"")
        wait_until("the change on the writer's target",
                   lambda: ("11", "db5", "3306", "ONLINE") in runtime_servers(wp))
    finally:
        stop_all(agents, pxs)


def test_single_writer_gives_the_lock_up_when_its_proxysql_is_gone(fast_consul, workdir):
    """A writer whose own ProxySQL has been unreachable longer than cluster-leader-grace releases the
    lock: one dead ProxySQL never freezes the whole cluster's config."""
    consul = fast_consul
    pxs = proxysql_doubles(2)
    agents = []
    try:
        put_topology(consul, users=False)
        agents = agents_for(consul, pxs, workdir, SINGLE_WRITER)
        w, other, wp, _ = elected(agents, pxs)
        wp.stop()
        wait_until("the lock given up", lambda: "cluster-leader-grace" in w.logs(), timeout=15)
        wait_until("the other writes", lambda: metric(other, "proxysql_sync_cluster_writer") == 1, timeout=10)
        wait_until("its target synced", lambda: synced(pxs[agents.index(other)]))
    finally:
        stop_all(agents, pxs)


# ---- the fleet: proxysql_servers from announcements ------------------------------------------

def peers(px):
    return sorted((r[0], int(r[1])) for r in px.query("SELECT hostname, port FROM main.proxysql_servers"))


def fleet_lifecycle(consul, workdir, announce, started, after_stop, forget_own):
    """Three agents announce their ProxySQL (`announce(px)`: its config lines) and keep
    proxysql_servers equal to the fleet. Checked: the fleet on every node (then `started(pxs)`);
    no PROXYSQL SERVERS statement while it is still; node 3 stopped with SIGTERM leaves at once
    (`after_stop(px)` checks Consul's side) and the others drop it; node 2 killed is dropped once
    its TTL (2 s) has passed; node 1's announcement removed behind its agent's back
    (`forget_own(px)`) leaves node 1 with itself, in memory and runtime."""
    pxs = proxysql_doubles(3)
    agents = []
    me = lambda p: [("127.0.0.1", p.admin_port)]  # noqa: E731
    try:
        put_topology(consul, users=False)
        agents = agents_for(consul, pxs, workdir, lambda p: announce(p) + (
            'announce-address = "127.0.0.1:%d"\nannounce-ttl = 2.0\n'
            'cluster-mode = "disable-pull"\nresync-interval = 1.0\n' % p.admin_port))
        fleet = sorted(me(p)[0] for p in pxs)
        for p in pxs:
            wait_until("the fleet on every node", lambda p=p: peers(p) == fleet, timeout=15)
        started(pxs)
        for p in pxs:
            p.clear_statements()
        time.sleep(2.5)                       # several renewals or check passes (a third of the TTL)
        for p in pxs:
            assert not [x for x in writes(p) if "PROXYSQL SERVERS" in x], writes(p)
        stop_and_check(agents[2])
        after_stop(pxs[2])
        for p in pxs[:2]:
            wait_until("node 3 dropped", lambda p=p: peers(p) == sorted(me(pxs[0]) + me(pxs[1])), timeout=15)
        agents[1].proc.kill()
        agents[1].proc.wait(5)
        killed_at = time.monotonic()
        wait_until("node 2 dropped", lambda: peers(pxs[0]) == me(pxs[0]), timeout=20)
        assert time.monotonic() - killed_at > 1.0
        forget_own(pxs[0])
        time.sleep(2)
        assert peers(pxs[0]) == me(pxs[0])
        rt = sorted((r[0], int(r[1])) for r in pxs[0].query("SELECT hostname, port FROM runtime_proxysql_servers"))
        assert rt == me(pxs[0])
        return agents
    finally:
        stop_all(agents, pxs)


def test_proxysql_servers_follow_the_announced_fleet(fast_consul, workdir):
    """announce-prefix: each agent's key is held by a TTL session; SIGTERM deletes it, a killed
    agent's session expires and takes it; a node never drops itself; LOAD and SAVE PROXYSQL
    SERVERS only when the fleet changed (fleet_lifecycle)."""
    consul = fast_consul

    def gone(p):
        assert consul.get("proxysql/fleet/127.0.0.1_%d" % p.admin_port).status == 404

    fleet_lifecycle(consul, workdir, lambda p: 'announce-prefix = "proxysql/fleet"\n', lambda pxs: None, gone,
                    lambda p: consul.delete("proxysql/fleet/127.0.0.1_%d" % p.admin_port))


def fleet_service(consul):
    """The passing instances of service proxysql: {(address, port): (weight, comment)} from Meta."""
    r = consul.request("GET", "/v1/health/service/proxysql", params={"passing": "1"})
    return {(e["Service"]["Address"], e["Service"]["Port"]): (e["Service"]["Meta"].get("weight"),
                                                             e["Service"]["Meta"].get("comment"))
            for e in r.json()}


def test_proxysql_servers_follow_the_announced_service(fast_consul, workdir):
    """announce-service: each agent registers its ProxySQL with the Consul agent as an instance of
    service proxysql (TTL check, weight and comment in Service.Meta); SIGTERM deregisters it; a
    killed agent's check turns critical after its TTL and the instance leaves the passing set; an
    instance deregistered behind the agent's back is registered again (fleet_lifecycle)."""
    consul = fast_consul
    logs = []

    def started(pxs):
        assert len(fleet_service(consul)) == 3
        assert fleet_service(consul)[("127.0.0.1", pxs[1].admin_port)] == (
            str(pxs[1].admin_port % 7), "pod %d" % pxs[1].admin_port)
        row = pxs[0].query("SELECT weight, comment FROM runtime_proxysql_servers WHERE port=%d" % pxs[2].admin_port)
        assert row == [(str(pxs[2].admin_port % 7), "pod %d" % pxs[2].admin_port)], row

    def gone(p):
        assert ("127.0.0.1", p.admin_port) not in fleet_service(consul)
        catalog = consul.request("GET", "/v1/catalog/service/proxysql").json()
        assert not [e for e in catalog if e["ServicePort"] == p.admin_port], catalog

    def forget(p):
        [sid] = [e["ServiceID"] for e in consul.request("GET", "/v1/catalog/service/proxysql").json()
                 if e["ServicePort"] == p.admin_port]
        assert consul.request("PUT", "/v1/agent/service/deregister/" + sid).status == 200
        wait_until("registered again", lambda: ("127.0.0.1", p.admin_port) in fleet_service(consul), timeout=10)

    # The Consul here is one server that stands for each pod's local agent: consul-agent says so
    # (auto would find a server, and announce-service needs a local agent).
    agents = fleet_lifecycle(consul, workdir, lambda p: (
        'announce-service = "proxysql"\nannounce-weight = %d\nannounce-comment = "pod %d"\n'
        'consul-agent = "local"\n' % (p.admin_port % 7, p.admin_port)), started, gone, forget)
    assert "registering again" in agents[0].logs()


def test_announce_service_refusals(workdir):
    """--check-config: announce-service beside announce-prefix, a bad service name, and
    announce-address with neither, each one line and exit 2."""
    import subprocess
    from test_sync import BIN
    base = ["--consul-addr", "127.0.0.1:1", "--admin-addr", "127.0.0.1:6032", "--check-config",
            "--master-prefix", "", "--replica-prefix", "", "--users-prefix", "u/"]
    for extra, want in ((["--announce-service", "proxysql", "--announce-prefix", "f/"], "both set"),
                        (["--announce-service", "a/b"], "is not a Consul service name"),
                        (["--announce-address", "127.0.0.1:6032"], "needs an announce-prefix or an announce-service")):
        r = subprocess.run([BIN + "/proxysql-sync"] + base + extra, capture_output=True, text=True, timeout=10)
        assert r.returncode == 2 and want in r.stderr and len(r.stderr.strip().splitlines()) == 1, (extra, r.stderr)
    r = subprocess.run([BIN + "/proxysql-sync"] + base + ["--announce-service", "proxysql", "--announce-address",
                                                        "127.0.0.1:6032"], capture_output=True, text=True, timeout=10)
    assert r.returncode == 0, r.stderr


# ---- a real two-node ProxySQL Cluster (the doubles pull from each other as ProxySQL does) -----

def two_node_cluster():
    import sys
    import os
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "bench"))
    from cluster_bench import make_cluster
    pxs = proxysql_doubles(2)
    make_cluster(pxs)
    return pxs


def test_disable_pull_on_a_two_node_cluster(fast_consul, workdir):
    """disable-pull with an agent per node: both converge; a change LOADed by hand on one node does not
    reach the other (its pull of mysql_servers is off) and that node's agent takes it back."""
    consul = fast_consul
    pxs = two_node_cluster()
    agents = []
    try:
        put_topology(consul, users=False)
        agents = agents_for(consul, pxs, workdir, 'cluster-mode = "disable-pull"\nresync-interval = 1.0\n')
        for p in pxs:
            wait_until("both converge", lambda p=p: synced(p), timeout=15)
        for p in pxs:
            assert runtime_variable_of(p, "admin-cluster_mysql_servers_diffs_before_sync") == "0"
        pxs[0].query("UPDATE mysql_servers SET weight=77 WHERE hostname='db2'")
        pxs[0].query("LOAD MYSQL SERVERS TO RUNTIME")
        time.sleep(1.5)                       # well past 3 checks of 200 ms
        weights = [p.query("SELECT weight FROM runtime_mysql_servers WHERE hostname='db2'")[0][0] for p in pxs]
        assert weights[1] == "1", weights     # not pulled
        wait_until("taken back on node 1", lambda: pxs[0].query(
            "SELECT weight FROM runtime_mysql_servers WHERE hostname='db2'")[0][0] == "1", timeout=10)
    finally:
        stop_all(agents, pxs)


def runtime_variable_of(px, name):
    rows = px.query("SELECT variable_value FROM runtime_global_variables WHERE variable_name='%s'" % name)
    return rows[0][0] if rows else None


def test_single_writer_on_a_two_node_cluster(fast_consul, workdir):
    """single-writer on a real two-node cluster: exactly one agent applies, the cluster carries the
    change, both agents are ready; after the writer's agent stops the other applies and a KV change
    reaches both nodes."""
    consul = fast_consul
    pxs = two_node_cluster()
    agents = []
    try:
        put_topology(consul, users=False)
        agents = agents_for(consul, pxs, workdir, SINGLE_WRITER)
        for p in pxs:
            wait_until("both nodes", lambda p=p: synced(p), timeout=20)
        for a in agents:
            wait_until("both ready", a.ready, timeout=10)
        assert len(writer_of(agents)) == 1
        w = writer_of(agents)[0]
        f = agents[1 - agents.index(w)]
        assert "applied" not in f.logs(), f.logs()          # the follower wrote nothing
        stop_and_check(w)
        wait_until("the other takes over", lambda: metric(f, "proxysql_sync_cluster_writer") == 1, timeout=10)
        consul.put("mysql/replica/shop/eu/db5:3306", b"")
        for p in pxs:
            wait_until("db5 on both nodes", lambda p=p: ("11", "db5", "3306", "ONLINE") in runtime_servers(p),
                       timeout=20)
    finally:
        stop_all(agents, pxs)


def test_monitor_roles_leave_the_read_only_monitor_alone(galera, mysql_creds, consul, workdir):
    """roles = "monitor" beside ProxySQL's read_only monitor on a real Galera node: the member is
    written into the writer hostgroup only; SET GLOBAL read_only=ON makes the monitor move it to the
    reader hostgroup in runtime, and the agent sends no write and no LOAD for as long as we watch."""
    from fakes.proxysql import ProxySQL
    from test_sync import ADMIN_PASSWORD
    node = galera[1]
    galera.heal()
    p = ProxySQL(admin_password=ADMIN_PASSWORD, monitor_username=mysql_creds.user,
                 monitor_password=mysql_creds.password, monitor_shun_after=30.0,
                 variables=[("mysql-monitor_read_only_interval", "500")])
    p.start()
    agent = None
    try:
        p.query("INSERT INTO mysql_replication_hostgroups (writer_hostgroup, reader_hostgroup) VALUES (10, 11)")
        p.query("LOAD MYSQL SERVERS TO RUNTIME")
        addr = "%s:%d" % (node.ip, node.port)
        consul.put("mysql/master/shop", addr.encode())
        consul.put("mysql/master/shop/hostname", node.ip.encode())
        consul.put("mysql/master/shop/port", str(node.port).encode())
        agent = Agent(consul, [p], workdir, extra="resync-interval = 1.0\n")
        agent.text = agent.text.replace('reader_hostgroup = 11; }', 'reader_hostgroup = 11; roles = "monitor"; }')
        agent.write_config()
        agent.start()
        me = (node.ip, str(node.port))
        wait_until("the member in the writer hostgroup", lambda: [r[:3] for r in memory_servers(p)] == [
            ("10",) + me])
        wait_until("/readyz", agent.ready)
        p.clear_statements()
        node.set_read_only(True)
        wait_until("the monitor's move", lambda: ("11",) + me in [r[:3] for r in runtime_servers(p)], timeout=10)
        time.sleep(3.5)                      # three resyncs
        assert ("11",) + me in [r[:3] for r in runtime_servers(p)]
        assert [r[:3] for r in memory_servers(p)] == [("10",) + me]
        assert writes(p) == [], writes(p)
    finally:
        node.set_read_only(False)
        if agent:
            stop_and_check(agent)
        p.close()
        galera.heal()


def test_refuse_on_a_two_node_cluster(fast_consul, workdir):
    """cluster-mode = refuse (the default) with an agent per node of a real two-node cluster: neither
    writes mysql_servers or mysql_users; both say so in /readyz."""
    consul = fast_consul
    pxs = two_node_cluster()
    agents = []
    try:
        put_topology(consul)
        for p in pxs:
            p.clear_statements()
        agents = agents_for(consul, pxs, workdir, "")
        for a in agents:
            wait_until("the refusal", lambda a=a: "ProxySQL Cluster" in a.http("/readyz")[1], timeout=10)
        time.sleep(1)
        for p in pxs:
            assert memory_servers(p) == []
            assert not [x for x in writes(p) if "mysql_servers" in x or "mysql_users" in x], writes(p)
    finally:
        stop_all(agents, pxs)


def test_single_writer_follower_equal_to_the_pulled_copy(fast_consul, workdir):
    """A users pull stores what the peer loaded with NULL as '' (ProxySQL_Admin::__add_active_users
    builds the resultset a peer fetches that way): the writer's agent writes default_schema NULL
    (KV gives no schema), its follower's node holds ''. The follower still counts as in sync (ready,
    writing nothing), and when it takes over it writes nothing, since nothing changed."""
    consul = fast_consul
    pxs = two_node_cluster()
    agents = []
    try:
        put_topology(consul, users=True)
        agents = agents_for(consul, pxs, workdir, SINGLE_WRITER)
        w, f, wp, fp = elected(agents, pxs)
        schema = "SELECT username, default_schema FROM main.mysql_users ORDER BY username"
        wait_until("the writer's users", lambda: len(wp.query(schema)) == 2, timeout=20)
        assert [r[1] for r in wp.query(schema)] == [None, None]
        wait_until("the users pulled", lambda: [r[1] for r in fp.query(schema)] == ["", ""], timeout=20)
        wait_until("the follower ready", f.ready, timeout=10)
        assert "applied" not in f.logs(), f.logs()
        fp.clear_statements()
        stop_and_check(w)
        wait_until("the other takes over", lambda: metric(f, "proxysql_sync_cluster_writer") == 1, timeout=10)
        time.sleep(2.0)                       # a reconcile or two as the writer
        assert not [x for x in writes(fp) if "mysql_servers" in x.lower() or "mysql_users" in x.lower()
                    or "MYSQL" in x], writes(fp)
        assert [r[1] for r in fp.query(schema)] == ["", ""]
    finally:
        stop_all(agents, pxs)
