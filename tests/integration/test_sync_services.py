"""proxysql-sync with health-checked Consul services as a source: /v1/health/service/<name>?passing
with tags and filters, mapped to a hostgroup, mixed with KV, under every guard. Consul (double, or
real with CONSUL_BIN: services are registered through the agent API) -> the agent -> ProxySQL
(double, or real with PROXYSQL_BIN).
"""

import json
import re
import time

from test_sync import (Agent, consul, memory_servers, put_topology, px, runtime_servers,  # noqa: F401
                       stop_and_check, wait_until, workdir)
from test_sync_safety import metric


def register(consul, sid, addr, port=3306, name="mysql", tags=("replica",), meta=None, weights=None,
             status="passing"):
    body = {"ID": sid, "Name": name, "Address": addr, "Port": port, "Tags": list(tags), "Meta": meta or {},
            "Check": {"CheckID": "chk-" + sid, "Name": "mysql " + sid, "TTL": "3600s", "Status": status}}
    if weights:
        body["Weights"] = weights
    r = consul.request("PUT", "/v1/agent/service/register", body=json.dumps(body))
    assert r.status == 200, r


def check(consul, sid, state):
    r = consul.request("PUT", "/v1/agent/check/%s/chk-%s" % (state, sid))
    assert r.status == 200, r


def served(px, hg):
    return sorted((r[1], r[2]) for r in runtime_servers(px) if r[0] == str(hg) and r[3] == "ONLINE")


SERVICES = 'services = ( { name = "mysql"; tags = ["replica"]; hostgroup = 31; meta_prefix = "proxysql_"; weights = true; } );\n'


def test_passing_instances_fill_a_hostgroup_and_a_critical_check_drains(consul, px, workdir):
    """Instances whose checks all pass, with the tag, go into the hostgroup (Service.Address, its port,
    Weights.Passing and Service.Meta attributes); one whose check turns critical drains out and
    comes back when it passes; other tags and services stay out."""
    put_topology(consul, users=False)
    register(consul, "r1", "10.0.0.1", weights={"Passing": 7, "Warning": 1}, meta={"proxysql_max_connections": "50"})
    register(consul, "r2", "10.0.0.2", 3307)
    register(consul, "r3", "10.0.0.3")
    register(consul, "p1", "10.0.0.9", tags=("primary",))
    register(consul, "x1", "10.0.0.8", name="other")
    agent = Agent(consul, [px], workdir, extra=SERVICES)
    agent.text = agent.text.replace("drain-timeout = 30.0", "drain-timeout = 0.0")
    agent.write_config()
    agent.start()
    try:
        wait_until("the instances", lambda: served(px, 31) == [("10.0.0.1", "3306"), ("10.0.0.2", "3307"),
                                                              ("10.0.0.3", "3306")])
        row = px.query("SELECT weight, max_connections FROM main.mysql_servers WHERE hostname='10.0.0.1'")
        assert row == [("7", "50")], row
        check(consul, "r2", "fail")
        wait_until("r2 gone", lambda: served(px, 31) == [("10.0.0.1", "3306"), ("10.0.0.3", "3306")])
        check(consul, "r2", "pass")
        wait_until("r2 back", lambda: ("10.0.0.2", "3307") in served(px, 31))
        assert metric(agent, "proxysql_sync_consul_up", prefix="service mysql [replica]") == 1
    finally:
        stop_and_check(agent)


def test_filter_and_a_bad_meta_value(consul, px, workdir):
    """Consul's filter expression selects instances; a Service.Meta attribute that is not a number
    is rejected alone, and what the target has for that instance is kept."""
    put_topology(consul, users=False)
    register(consul, "r1", "10.0.0.1", meta={"rack": "a"})
    register(consul, "r2", "10.0.0.2", meta={"rack": "b"})
    extra = ('services = ( { name = "mysql"; tags = ["replica"]; hostgroup = 31; meta_prefix = "proxysql_";\n'
             '  filter = "Service.Meta.rack == a"; } );\n')
    agent = Agent(consul, [px], workdir, extra=extra).start()
    try:
        wait_until("the filtered instance", lambda: served(px, 31) == [("10.0.0.1", "3306")])
        register(consul, "r1", "10.0.0.1", meta={"rack": "a", "proxysql_weight": "heavy"})
        wait_until("the rejection", lambda: metric(agent, "proxysql_sync_rejected_entries") == 1)
        time.sleep(1)
        assert served(px, 31) == [("10.0.0.1", "3306")]
    finally:
        stop_and_check(agent)


def test_writer_service_empty_keeps_the_writer_and_readers_need_confirmations(consul, px, workdir):
    """A cluster's writer_service and reader_service: the writer hostgroup is never emptied when the
    writer service has no passing instance; every reader failing at once is confirmed first."""
    register(consul, "w1", "10.0.1.1", tags=("primary",))
    for i in (1, 2, 3):
        register(consul, "rr%d" % i, "10.0.1.%d" % (10 + i))
    agent = Agent(consul, [px], workdir, extra="master-prefix = \"\"\nreplica-prefix = \"\"\n")
    agent.text = agent.text.replace(
        'reader_hostgroup = 11; }',
        'reader_hostgroup = 11;\n writer_service = { name = "mysql"; tags = ["primary"]; };\n'
        ' reader_service = { name = "mysql"; tags = ["replica"]; }; }')
    agent.write_config()
    agent.start()
    try:
        wait_until("writer and readers", lambda: served(px, 10) == [("10.0.1.1", "3306")] and len(served(px, 11)) == 3)
        check(consul, "w1", "fail")
        time.sleep(1.5)
        assert served(px, 10) == [("10.0.1.1", "3306")]
        assert "writer hostgroup(s) would be empty" in agent.logs()
        for i in (1, 2, 3):
            check(consul, "rr%d" % i, "fail")
        # the checks fail one by one: the agent may see 3 -> 2 first (one drain), then 2 -> 0
        wait_until("the guard", lambda: re.search(r"service mysql \[replica\] went from \d+ to 0 keys|"
                                                  r"hostgroup 11 would go from \d+ to 0", agent.logs()))
        wait_until("readers drained after confirmations", lambda: served(px, 11) == [], timeout=20)
    finally:
        stop_and_check(agent)


def test_mixed_kv_and_services(consul, px, workdir):
    """KV (orchestrator's master key) for the writer, a service for a hostgroup of its own, KV users."""
    put_topology(consul)
    register(consul, "r1", "10.0.0.1")
    agent = Agent(consul, [px], workdir, extra=SERVICES).start()
    try:
        wait_until("both sources", lambda: ("10", "db1", "3306", "ONLINE") in runtime_servers(px)
                   and served(px, 31) == [("10.0.0.1", "3306")])
        wait_until("/readyz", agent.ready)
        assert len(px.query("SELECT username FROM main.mysql_users")) == 2
    finally:
        stop_and_check(agent)


def test_one_source_per_hostgroup(consul, px, workdir):
    """--check-config refuses a hostgroup with two sources (a service and a cluster, two services)."""
    for extra, want in (
            ('services = ( { name = "mysql"; hostgroup = 11; } );\n', "one source per hostgroup"),
            ('services = ( { name = "a"; hostgroup = 40; }, { name = "b"; hostgroup = 40; } );\n', "share hostgroup 40"),
            ('services = ( { name = "a/b"; hostgroup = 40; } );\n', "not a Consul service name"),
            ('services = ( { name = "a"; } );\n', "hostgroup: is missing")):
        agent = Agent(consul, [px], workdir, extra=extra)
        r = agent.run("--check-config")
        assert r.returncode == 2 and want in r.stderr and len(r.stderr.strip().splitlines()) == 1, (extra, r.stderr)


def test_consul_service_definition_examples():
    """dist/consul/mysql-service.json and its Kubernetes ConfigMap hold the same definition: an HTTP
    check on clustercheck --listen (port 9200, as statefulset-httpget.yaml runs it), and the meta
    keys the services example of docs/proxysql-sync.md maps."""
    import os
    import yaml
    root = os.path.join(os.path.dirname(__file__), "..", "..")
    with open(os.path.join(root, "dist", "consul", "mysql-service.json")) as f:
        plain = json.load(f)
    with open(os.path.join(root, "k8s", "mariadb-galera", "consul-service.yaml")) as f:
        cm = yaml.safe_load(f)
    in_cm = json.loads(cm["data"]["mysql-service.json"])
    for d in (plain, in_cm):
        svc = d["service"]
        assert svc["name"] == "mysql" and svc["port"] == 3306
        [chk] = svc["checks"]
        assert chk["http"] == "http://127.0.0.1:9200/" and chk["timeout"] < chk["interval"]
        assert all(k.startswith("proxysql_") for k in svc["meta"])
    with open(os.path.join(root, "k8s", "mariadb-galera", "statefulset-httpget.yaml")) as f:
        assert '"--listen", "9200"' in f.read()


ROLE_SERVICES = ('services = ( { name = "mysql"; tags = ["primary"]; hostgroup = 10; %s},\n'
                 '              { name = "mysql"; tags = ["replica"]; hostgroup = 11; } );\n')


def services_only_agent(consul, px, workdir, role):
    """A started agent whose hostgroups 10 and 11 come from the services list alone (no cluster, no
    KV), draining at once."""
    agent = Agent(consul, [px], workdir, extra='master-prefix = ""\nreplica-prefix = ""\n' + ROLE_SERVICES % role)
    agent.text = agent.text.replace('clusters = ( { alias = "shop"; writer_hostgroup = 10; reader_hostgroup = 11; } );',
                                    '').replace("drain-timeout = 30.0", "drain-timeout = 0.0")
    agent.write_config()
    return agent.start()


def test_service_with_the_writer_role_keeps_its_hostgroup(consul, px, workdir):
    """A services entry with role = "writer": its primary's check turning critical leaves hostgroup 10
    as it is (the never-empty rule of a cluster's writer hostgroup), while a reader still drains;
    the same entry without the role empties hostgroup 10."""
    register(consul, "p1", "10.0.2.1", tags=("primary",))
    register(consul, "r1", "10.0.2.11")
    register(consul, "r2", "10.0.2.12")
    agent = services_only_agent(consul, px, workdir, 'role = "writer"; ')
    try:
        wait_until("writer and readers", lambda: served(px, 10) == [("10.0.2.1", "3306")] and len(served(px, 11)) == 2)
        check(consul, "p1", "fail")
        check(consul, "r2", "fail")
        wait_until("r2 drained", lambda: served(px, 11) == [("10.0.2.11", "3306")])
        time.sleep(1.0)
        assert served(px, 10) == [("10.0.2.1", "3306")]
        assert "writer hostgroup(s) would be empty" in agent.logs()
    finally:
        stop_and_check(agent)
    check(consul, "p1", "pass")
    agent = services_only_agent(consul, px, workdir, '')
    try:
        wait_until("the writer back", lambda: served(px, 10) == [("10.0.2.1", "3306")])
        check(consul, "p1", "fail")
        wait_until("hostgroup 10 emptied without the role", lambda: served(px, 10) == [], timeout=20)
    finally:
        stop_and_check(agent)


def test_check_config_warns_of_a_writer_hostgroup_service_without_the_role(consul, px, workdir):
    """--check-config: a services entry on a cluster's writer hostgroup (beside that cluster's
    writer_service) without role = "writer" is a warning, not an error; role = "writer" silences it,
    and a role other than writer or reader is refused."""
    base = 'master-prefix = ""\nreplica-prefix = ""\n'
    cluster = ('clusters = ( { alias = "shop"; writer_hostgroup = 10; reader_hostgroup = 11; '
               'writer_service = { name = "mysql"; tags = ["primary"]; }; } );')
    for role, warned in (('', True), ('role = "writer"; ', False)):
        agent = Agent(consul, [px], workdir, extra=base + 'services = ( { name = "mysql-extra"; hostgroup = 10; %s} );\n'
                      % role)
        agent.text = agent.text.replace(
            'clusters = ( { alias = "shop"; writer_hostgroup = 10; reader_hostgroup = 11; } );', cluster)
        agent.write_config()
        r = agent.run("--check-config")
        assert r.returncode == 0, r.stderr
        line = "service mysql-extra: hostgroup 10 is cluster shop's writer hostgroup but the service has no role"
        assert (line in r.stdout) == warned, r.stdout
    agent = Agent(consul, [px], workdir, extra=base + 'services = ( { name = "a"; hostgroup = 40; role = "boss"; } );\n')
    r = agent.run("--check-config")
    assert r.returncode == 2 and 'role: must be "writer" or "reader"' in r.stderr, r.stderr


def test_once_reads_a_service_source(consul, px, workdir):
    """--once reads a service source through the health endpoint as the running agent does (it once
    read it as a KV prefix named by its label, and found nothing), and with consistency = stale an
    answer past max-stale is read again from the leader (the double's /_fake/lag)."""
    put_topology(consul, users=False)
    register(consul, "r1", "10.0.0.1")
    register(consul, "r2", "10.0.0.2", 3307)
    agent = Agent(consul, [px], workdir, extra=SERVICES + 'consistency = "stale"\nmax-stale = 1.0\n')
    r = agent.run("--once")
    assert r.returncode == 0, r.stdout + r.stderr
    assert served(px, 31) == [("10.0.0.1", "3306"), ("10.0.0.2", "3307")]
    if consul.is_fake:
        register(consul, "r3", "10.0.0.3")
        consul.fault("lag", ms=4000)
        try:
            r = agent.run("--once")
        finally:
            consul.fault("lag", ms=0)
        assert r.returncode == 0, r.stdout + r.stderr
        assert "consul: service mysql [replica]: the server that answered was 4000 ms behind the leader" in r.stdout
        assert ("10.0.0.3", "3306") in served(px, 31)
