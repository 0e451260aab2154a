"""consul-agent (auto, local, none): what answers at consul-addr decides what the announce and
cluster-lock sessions are bound to and whether announce-service may register; stale answers past
max-stale are read again from the leader; a 403 names the rule the token lacks. Needs the Consul
double's options (--client-agent, /_fake/lag, /_fake/acl): skipped with CONSUL_BIN."""

import os
import time
import subprocess
import uuid

import pytest

from fakes.consul import Consul
from test_sync import (BIN, Agent, first_sync, put_topology, px, runtime_servers, stop_and_check,  # noqa: F401
                       wait_until, workdir)
from test_sync_safety import metric

if os.environ.get("CONSUL_BIN"):
    pytest.skip("these tests set the Consul double's options", allow_module_level=True)

# One agent that announces itself under a KV prefix and holds the single-writer lock: both
# sessions show what consul-agent decided.
SESSIONS = ('cluster-mode = "single-writer"\ncluster-lock-ttl = 2.0\ncluster-lock-delay = 1.0\n'
            'admin-timeout = 1.0\nannounce-prefix = "proxysql/fleet"\nannounce-ttl = 2.0\n'
            'announce-address = "127.0.0.1:%d"\n')


def double(*args, **kw):
    c = Consul(use_double=True, session_ttl_min="1s", extra_args=list(args), **kw)
    c.start()
    return c


def sessions(consul, token=None):
    """{name: NodeChecks} of every session, as /v1/session/info tells it (none: [], whether the answer
    says null, as Consul does for an empty list, or [])."""
    out = {}
    for s in consul.request("GET", "/v1/session/list", token=token).json():
        [info] = consul.request("GET", "/v1/session/info/" + s["ID"], token=token).json()
        out[info["Name"]] = info.get("NodeChecks") or []
    return out


def both_sessions(consul, token=None):
    got = sessions(consul, token)
    lock = [v for k, v in got.items() if k.startswith("proxysql-sync ") and k != "proxysql-sync announce"]
    return (got["proxysql-sync announce"], lock[0]) if "proxysql-sync announce" in got and lock else None


def lines(agent, text):
    return [line for line in agent.logs().splitlines() if text in line]


@pytest.mark.parametrize("client, checks, said", [
    (False, [], "consul: no local agent at http://127.0.0.1:%d: Consul servers answer directly (sessions bound "
                "to their TTL only)"),
    (True, ["serfHealth"], "consul: local agent at http://127.0.0.1:%d: a Consul client agent answers (sessions "
                           "also end with its node's health, serfHealth)"),
], ids=["servers", "client-agent"])
def test_auto_binds_sessions_to_what_answers(px, workdir, client, checks, said):
    """consul-agent = auto: GET /v1/agent/self at the first contact says a server (sessions with
    NodeChecks [], so a server's restart ends none) or a client agent (Consul's default node health
    check, serfHealth); one line says which, once, for both threads that asked."""
    c = double(*(["--client-agent"] if client else []))
    try:
        put_topology(c, users=False)
        agent = Agent(c, [px], workdir, extra=SESSIONS % px.admin_port).start()
        first_sync(px, agent)
        wait_until("both sessions", lambda: both_sessions(c) is not None)
        assert both_sessions(c) == (checks, checks), sessions(c)
        assert lines(agent, "local agent at") == [l for l in lines(agent, said % c.port)], agent.logs()
        assert len(lines(agent, said % c.port)) == 1, agent.logs()
        stop_and_check(agent)
    finally:
        c.close()


@pytest.mark.parametrize("setting, checks, said", [
    ("none", [], "consul: no local agent at http://127.0.0.1:%d: consul-agent = none (sessions bound to their "
                 "TTL only)"),
    ("local", ["serfHealth"], "consul: local agent at http://127.0.0.1:%d: consul-agent = local (sessions also "
                              "end with its node's health, serfHealth)"),
])
def test_set_mode_wins_over_what_answers(px, workdir, setting, checks, said):
    """consul-agent = none or local is taken as said, whatever /v1/agent/self would answer (a
    client agent here): the sessions follow the setting, and /v1/agent/self is never asked."""
    c = double("--client-agent")
    try:
        put_topology(c, users=False)
        c.fault("counters", method="DELETE")
        agent = Agent(c, [px], workdir, extra=SESSIONS % px.admin_port + 'consul-agent = "%s"\n' % setting).start()
        first_sync(px, agent)
        wait_until("both sessions", lambda: both_sessions(c) is not None)
        assert both_sessions(c) == (checks, checks), sessions(c)
        assert len(lines(agent, said % c.port)) == 1, agent.logs()
        assert "/v1/agent/self" not in c.fault("counters", method="GET")["by_endpoint"]
        stop_and_check(agent)
    finally:
        c.close()


def token_file(workdir, token):
    path = os.path.join(workdir, "consul-token")
    with open(path, "w") as f:
        f.write(token + "\n")
    os.chmod(path, 0o600)
    return path


def test_a_token_without_agent_read(px, workdir):
    """auto with a token that may not read /v1/agent/self (403): taken as Consul servers, saying so
    in one line; the sessions are bound to their TTL only. A token that lacks session write then
    gets one line per thread naming the endpoint and the rule it needs; no token is ever logged."""
    master = "root-" + uuid.uuid4().hex
    c = double(acl_master_token=master)
    try:
        c.put = lambda key, value=b"", token=master, **params: Consul.put(c, key, value, token=token, **params)
        put_topology(c, users=False)
        keys = [("key", "mysql/", "read"), ("key", "proxysql/", "write"), ("key", "proxysql-sync/", "write")]
        token = c.create_token(keys + [("session", "", "write")])
        path = token_file(workdir, token)
        agent = Agent(c, [px], workdir, extra=SESSIONS % px.admin_port + 'consul-token-file = "%s"\n' % path)
        agent.start()
        first_sync(px, agent)
        wait_until("both sessions", lambda: both_sessions(c, master) is not None)
        assert both_sessions(c, master) == ([], []), sessions(c, master)
        said = lines(agent, "consul: no local agent at")
        assert len(said) == 1 and 'the token may not read GET /v1/agent/self (agent_prefix "" read)' in said[0], \
            agent.logs()
        stop_and_check(agent)

        weak = c.create_token(keys + [("agent", "", "read")])
        token_file(workdir, weak)
        agent.start()
        want = 'PUT /v1/session/create denied: the token needs session_prefix "" write (see docs/consul-acl.md)'
        wait_until("the 403 lines", lambda: len(lines(agent, want)) >= 2, timeout=15)
        assert lines(agent, "announce proxysql/fleet/127.0.0.1_%d: %s (retrying)" % (px.admin_port, want))
        assert lines(agent, "cluster lock proxysql-sync/cluster-lock: %s (retrying)" % want)
        assert token not in agent.logs() and weak not in agent.logs() and master not in agent.logs()
        stop_and_check(agent)
    finally:
        c.close()


ANNOUNCE_SERVICE = ('announce-service = "proxysql"\nannounce-address = "127.0.0.1:%d"\nannounce-ttl = 2.0\n'
                    'proxysql-servers = false\n')


def test_announce_service_refused_with_no_agent(workdir, tmp_path):
    """announce-service registers through /v1/agent/ (agent-local): with consul-agent = "none" the
    configuration is refused, exit 2 and one line naming the file, the line and the remedy, both
    by --check-config and at start."""
    cfg = tmp_path / "sync.cfg"
    cfg.write_text('consul-addr = "127.0.0.1:1";\nadmin-addr = "127.0.0.1:6032";\nmaster-prefix = "";\n'
                   'replica-prefix = "";\nusers-prefix = "u/";\nconsul-agent = "none";\n'
                   'announce-service = "proxysql";\nannounce-address = "127.0.0.1:6032";\n')
    want = ('proxysql-sync: %s:7: announce-service: needs a local Consul agent (consul-agent = "none"): use '
            'announce-prefix, the KV announcement, when talking to Consul servers\n' % cfg)
    for args in (["--check-config"], []):
        r = subprocess.run([BIN + "/proxysql-sync", "-c", str(cfg)] + args, capture_output=True, text=True,
                           timeout=10)
        assert (r.returncode, r.stderr) == (2, want), (args, r.stdout, r.stderr)


def test_announce_service_with_servers_found_at_run_time(px, workdir):
    """auto finds Consul servers and announce-service is set: nothing is registered, one error line
    names the remedy, and /readyz says why (503) while the rest of the agent works."""
    c = double()
    try:
        put_topology(c, users=False)
        agent = Agent(c, [px], workdir, extra=ANNOUNCE_SERVICE % px.admin_port).start()
        wait_until("the first sync", lambda: len(runtime_servers(px)) == 3)
        want = "use announce-prefix, the KV announcement, when talking to Consul servers"
        wait_until("the error line", lambda: lines(agent, "announce: announce-service proxysql needs a local "
                                                          "Consul agent, and none answers at"), timeout=10)
        assert len(lines(agent, want)) == 1, agent.logs()
        wait_until("/readyz says why", lambda: want in agent.http("/readyz")[1])
        assert agent.http("/readyz")[0] == 503
        assert c.request("GET", "/v1/catalog/service/proxysql").json() == []
        stop_and_check(agent)
    finally:
        c.close()


def test_stale_answers_past_max_stale_are_read_again(px, workdir):
    """consistency = stale: an answer from a server further behind the leader than max-stale is read
    again at once with the default consistency (the leader's) and believed; one line per episode,
    counted in proxysql_sync_consul_stale_rereads_total; the stale reads are taken again when fresh."""
    c = double()
    try:
        put_topology(c, users=False)
        agent = Agent(c, [px], workdir, extra='consistency = "stale"\nmax-stale = 1.0\nwait = 2.0\n').start()
        first_sync(px, agent)
        c.fault("lag", ms=5000)
        c.put("mysql/replica/shop/eu/db5:3306", b"db5:3306")
        wait_until("db5 from the leader's answer", lambda: ("11", "db5", "3306", "ONLINE") in runtime_servers(px))
        assert metric(agent, "proxysql_sync_consul_stale_rereads_total") >= 1
        c.put("mysql/replica/shop/eu/db6:3306", b"db6:3306")
        wait_until("db6 too", lambda: ("11", "db6", "3306", "ONLINE") in runtime_servers(px))
        said = lines(agent, "consul: mysql/replica/: the server that answered was 5000 ms behind the leader")
        assert len(said) == 1 and "reading again from the leader" in said[0], agent.logs()
        c.fault("lag", ms=0)
        c.put("mysql/replica/shop/eu/db7:3306", b"db7:3306")
        wait_until("db7", lambda: ("11", "db7", "3306", "ONLINE") in runtime_servers(px))
        wait_until("the end of the episode", lambda: lines(agent, "consul: mysql/replica/: stale answers within "
                                                                  "max-stale again"))
        assert not lines(agent, "too far behind the leader")
        stop_and_check(agent)
    finally:
        c.close()


LOCK = ('cluster-mode = "single-writer"\ncluster-lock-ttl = 2.0\ncluster-lock-delay = 1.0\nadmin-timeout = 1.0\n'
        'consul-agent = "none"\n')


def test_the_holder_stops_writing_before_its_session_can_end(px, workdir):
    """Fencing without node health: renews that fail (500) leave the session to its TTL only, which
    Consul may end from a TTL after the last renew it received. The holder stops writing (the writer
    metric, which is what a target asks before each apply) within a TTL of its last renew, and says
    so, while its session is still alive; once the renews work again it writes again."""
    c = double()
    try:
        put_topology(c, users=False)
        agent = Agent(c, [px], workdir, extra=LOCK).start()
        wait_until("the writer", lambda: metric(agent, "proxysql_sync_cluster_writer") == 1)
        [sid] = [s["ID"] for s in c.request("GET", "/v1/session/list").json()]
        t0 = time.monotonic()
        c.fault("fail", count=100000, code=500, path="/v1/session/renew")
        wait_until("no longer the writer", lambda: metric(agent, "proxysql_sync_cluster_writer") == 0, timeout=5)
        elapsed = time.monotonic() - t0
        assert elapsed <= 2.0 + 0.3, elapsed       # a TTL since the last renew, at most (plus polling)
        assert c.request("GET", "/v1/session/info/" + sid).json(), "the session ended before the holder stopped"
        wait_until("the line", lambda: lines(agent, "no longer the writer"), timeout=5)
        c.fault("fail", count=0)
        wait_until("the writer again", lambda: metric(agent, "proxysql_sync_cluster_writer") == 1, timeout=10)
        stop_and_check(agent)
    finally:
        c.close()
