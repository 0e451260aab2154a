"""proxysql-sync under exactly the ACL policies of docs/consul-acl.md: a token holding the
documented rules syncs, and the same token without one of them is refused where that rule is
needed, with a log line naming what was refused (the prefix of a watch, the endpoint of a write),
the last good state kept.

The Consul here answers as a server with no client agent would (its node is consul-server-0),
so sessions are made on that node and the sessions-consul-k8s policy is the one that fits. With the
double, exact rules (`key "..."`, `service "..."`) are given as prefix rules on the same name
(tests/integration/acl_policy.py), as Consul.create_token does for a real Consul too.

Run: make all && SIDEKICK_BIN=$PWD/bin /usr/bin/python3 -m pytest -q tests/integration/test_consul_acl_policy.py
"""

import base64
import json
import os
import time
import uuid

import pytest

import acl_policy
from fakes.consul import Consul
from test_sync import (Agent, USER_PASSWORD, first_sync, put_topology, px, runtime_servers,  # noqa: F401
                       runtime_users, stop_and_check, synced, wait_until, workdir, writes)

DOC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs", "consul-acl.md")
SERVER_NODE = "consul-server-0"
PREFIXES = ["mysql/master/", "mysql/replica/", "proxysql/users/"]


def documented(*names):
    """The rules of the named policies of docs/consul-acl.md, in order."""
    with open(DOC, encoding="utf-8") as f:
        texts = acl_policy.policies(f.read())
    return [r for n in names for r in acl_policy.parse(texts[n])]


@pytest.fixture
def acl():
    """A Consul with ACLs on (default deny) whose node is a server's; test writes carry the
    management token."""
    master = "root-" + uuid.uuid4().hex
    c = Consul(node=SERVER_NODE, acl_master_token=master)
    c.start()
    c.master = master
    c.put = lambda key, value=b"", token=master, **params: Consul.put(c, key, value, token=token, **params)
    yield c
    c.close()


def token_file(workdir, consul, rules, name="consul-token"):
    path = os.path.join(workdir, name)
    with open(path, "w") as f:
        f.write(consul.create_token(acl_policy.fake_rules(rules)) + "\n")
    os.chmod(path, 0o600)
    return path


def start(consul, px, workdir, rules, extra=""):
    d = os.path.join(workdir, "agent-%s" % uuid.uuid4().hex[:8])
    os.makedirs(d)
    tok = token_file(d, consul, rules)
    return Agent(consul, [px], d, extra='wait = 1.0\nconsul-token-file = "%s"\n%s' % (tok, extra)).start()


def test_kv_watch_policy_is_enough(acl, px, workdir):
    """proxysql-sync-kv alone: servers and users synced, every prefix read, nothing refused."""
    put_topology(acl)
    agent = start(acl, px, workdir, documented("proxysql-sync-kv"))
    try:
        first_sync(px, agent)
        assert {r[0] for r in runtime_users(px)} == {"app", "report"}
        logs = agent.logs()
        assert "403" not in logs and "filtered by ACLs" not in logs, logs
    finally:
        stop_and_check(agent)


@pytest.mark.parametrize("missing", PREFIXES)
def test_kv_watch_policy_without_one_rule(acl, px, workdir, missing):
    """The policy less the rule of one prefix: that prefix's answers are filtered, logged once as such
    under the prefix's name, /readyz names the prefix, and nothing is applied (no prefix is believed partial)."""
    put_topology(acl)
    rules = [r for r in documented("proxysql-sync-kv") if r.name != missing]
    assert len(rules) == len(PREFIXES) - 1
    agent = start(acl, px, workdir, rules)
    try:
        wait_until("the refused prefix logged", lambda: "consul: %s: answer filtered by ACLs" % missing in agent.logs(),
                   timeout=15)
        time.sleep(1.5)                     # retries with backoff
        status, why = agent.http("/readyz")
        # Before a prefix's first good read /readyz names it as "not read yet"; the reason is in the log.
        assert status == 503 and missing in why, (status, why)
        assert writes(px) == [] and runtime_servers(px) == [], "applied without every prefix"
        assert len([ln for ln in agent.logs().splitlines() if "filtered by ACLs" in ln]) == 1, agent.logs()
        for other in PREFIXES:
            assert other == missing or ("consul: %s: answer filtered" % other) not in agent.logs()
    finally:
        stop_and_check(agent)


# A node that lists peers in proxysql_servers is in a ProxySQL Cluster: each agent turns the pull off.
ANNOUNCE = 'announce-prefix = "proxysql/fleet"\nannounce-address = "127.0.0.1:%d"\ncluster-mode = "disable-pull"\n'


def test_announce_policies_without_a_client_agent(acl, px, workdir):
    """proxysql-sync-kv + proxysql-sync-announce-kv + sessions-consul-k8s: the announce key is
    written under a session made on the server's node, and proxysql_servers follows the fleet."""
    put_topology(acl, users=False)
    rules = documented("proxysql-sync-kv", "proxysql-sync-announce-kv", "sessions-consul-k8s")
    agent = start(acl, px, workdir, rules, ANNOUNCE % px.admin_port)
    key = "proxysql/fleet/127.0.0.1_%d" % px.admin_port
    try:
        first_sync(px, agent)
        entry = wait_until("the announce key", lambda: (lambda r: r.status == 200 and r.json()[0])(
            acl.get(key, token=acl.master)), timeout=15)
        assert json.loads(base64.b64decode(entry["Value"]))["port"] == px.admin_port
        info = acl.request("GET", "/v1/session/info/" + entry["Session"], token=acl.master).json()
        assert info[0]["Node"] == SERVER_NODE, info
        wait_until("proxysql_servers", lambda: [tuple(r) for r in px.query(
            "SELECT hostname, port FROM main.proxysql_servers")] == [("127.0.0.1", str(px.admin_port))], timeout=15)
        assert "403" not in agent.logs(), agent.logs()
    finally:
        stop_and_check(agent)
    assert acl.get(key, token=acl.master).status == 404, "the key outlived the agent"


def test_announce_with_the_session_rule_of_another_shape(acl, px, workdir):
    """The pod-agent session rule (session_prefix "proxysql-") does not cover a server's node: the
    session create is refused, the line names the endpoint and the rule's resource, the key is never
    written, and the servers still sync (the watch needs no session)."""
    put_topology(acl, users=False)
    rules = documented("proxysql-sync-kv", "proxysql-sync-announce-kv", "sessions-pod-agent")
    agent = start(acl, px, workdir, rules, ANNOUNCE % px.admin_port)
    try:
        wait_until("the servers", lambda: synced(px), timeout=15)
        line = wait_until("the refused session", lambda: [ln for ln in agent.logs().splitlines()
                                                          if "PUT /v1/session/create denied" in ln], timeout=15)
        assert 'the token needs session_prefix "" write' in line[0], line
        assert acl.get("proxysql/fleet/127.0.0.1_%d" % px.admin_port, token=acl.master).status == 404
    finally:
        stop_and_check(agent)


def test_cluster_lock_policy(acl, px, workdir):
    """proxysql-sync-kv + proxysql-sync-cluster-lock + sessions-consul-k8s: the one agent of a
    single-writer ProxySQL Cluster takes the lock key; without the lock rule the acquire is refused
    and named."""
    put_topology(acl, users=False)
    single = 'cluster-mode = "single-writer"\ncluster-lock-ttl = 10.0\n'
    rules = documented("proxysql-sync-kv", "proxysql-sync-cluster-lock", "sessions-consul-k8s")
    agent = start(acl, px, workdir, rules, single)
    try:
        wait_until("the lock taken", lambda: "this agent is the writer" in agent.logs(), timeout=15)
        r = acl.get("proxysql-sync/cluster-lock", token=acl.master)
        assert r.status == 200 and r.json()[0].get("Session"), r
    finally:
        stop_and_check(agent)
    rules = documented("proxysql-sync-kv", "sessions-consul-k8s")
    agent = start(acl, px, workdir, rules, single)
    try:
        wait_until("the refused acquire", lambda: ('PUT /v1/kv/proxysql-sync/cluster-lock denied: the token needs key_prefix '
                                                     '"proxysql-sync/cluster-lock" write') in agent.logs(),
                   timeout=15)
        assert "this agent is the writer" not in agent.logs()
    finally:
        stop_and_check(agent)


SERVICES = 'services = ( { name = "mysql"; tags = ["replica"]; hostgroup = 31; } );\n'


def register_mysql(consul, sid, addr):
    body = {"ID": sid, "Name": "mysql", "Address": addr, "Port": 3306, "Tags": ["replica"],
            "Check": {"CheckID": "chk-" + sid, "Name": "mysql " + sid, "TTL": "3600s", "Status": "passing"}}
    r = consul.request("PUT", "/v1/agent/service/register", body=json.dumps(body), token=consul.master)
    assert r.status == 200, r


@pytest.mark.parametrize("missing", [None, "service", "node"])
def test_services_policy(acl, px, workdir, missing):
    """proxysql-sync-kv + proxysql-sync-services: the passing instances fill their hostgroup. Without
    the service rule, or without the node rule (a health answer lists nodes too), the answer is
    filtered, logged as such, and the hostgroup stays empty."""
    put_topology(acl, users=False)
    register_mysql(acl, "r1", "10.0.0.1")
    register_mysql(acl, "r2", "10.0.0.2")
    rules = [r for r in documented("proxysql-sync-kv", "proxysql-sync-services") if r.resource != missing]
    agent = start(acl, px, workdir, rules, SERVICES)
    served = lambda: sorted(r[1] for r in runtime_servers(px) if r[0] == "31")  # noqa: E731
    try:
        if missing is None:
            wait_until("the instances", lambda: served() == ["10.0.0.1", "10.0.0.2"], timeout=15)
            assert "filtered by ACLs" not in agent.logs(), agent.logs()
        else:
            line = wait_until("the filtered answer", lambda: [ln for ln in agent.logs().splitlines()
                                                              if "answer filtered by ACLs" in ln], timeout=15)
            assert "mysql" in line[0], line
            time.sleep(1)
            assert served() == [], runtime_servers(px)
    finally:
        stop_and_check(agent)
