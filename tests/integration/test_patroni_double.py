"""Real Patroni 3.0.2 and PostgreSQL 15 against the project's Consul double alone (no agent): what
Patroni writes under service/<scope>/ (docs and /work/shared/reference/consul-facts.md), a failover
after the leader crashes, and a switchover to a named member.

One 3-node cluster for the module (tests/integration/patroni.py): ttl 10, loop_wait 2,
retry_timeout 3, so a crashed leader's session ends 2 x 5 s after its last renewal. The module
takes about 35 s; Patroni missing fails it (make deps installs patroni python3-consul postgresql-15).
"""

import json
import re
import subprocess
import time

import leftovers
import patroni

pg_consul, pg_cluster, healthy_pg = patroni.fixtures()

CONN_URL = re.compile(r"^postgres://127\.0\.0\.1:(\d+)/postgres$")


def test_bootstrap_writes_leader_members_and_config(pg_consul, pg_cluster):
    pg = pg_cluster
    print("cluster of 3 started in %.1f s" % pg.timings["start"])
    leader = pg.leader_name()
    assert leader in ("n1", "n2", "n3")

    # The leader key holds the member's name and a session: TTL ttl/2 (Consul expires at 2 x TTL;
    # Patroni sends "5.0s" and Consul keeps the string as sent), delete behaviour, bound to no check.
    entry = pg_consul.get(pg.prefix + "leader").json()[0]
    assert entry.get("Session"), entry
    info = pg_consul.request("GET", "/v1/session/info/" + entry["Session"]).json()[0]
    assert re.fullmatch(r"5(\.0+)?s", info["TTL"]) and info["Behavior"] == "delete", info
    assert not info.get("NodeChecks") and not info.get("Checks"), info

    members = pg.members_kv()
    assert sorted(members) == ["n1", "n2", "n3"]
    for name, m in members.items():
        port = int(CONN_URL.match(m["conn_url"]).group(1))
        assert port == pg[name].pg_port, m
        assert m["api_url"] == "http://127.0.0.1:%d/patroni" % pg[name].api_port, m
        assert m["state"] == "running", m
        assert m["role"] == ("master" if name == leader else "replica"), m
        assert isinstance(m["xlog_location"], int) and m["xlog_location"] > 0, m
        assert m["timeline"] == 1, m
        # Every member key is held by that member's session too.
        assert pg_consul.get(pg.prefix + "members/" + name).json()[0].get("Session"), name
    assert pg.leader_port() == pg[leader].pg_port

    assert re.fullmatch(r"\d+", pg.kv("initialize")), pg.kv("initialize")
    config = json.loads(pg.kv("config"))
    assert (config["ttl"], config["loop_wait"], config["retry_timeout"]) == (10, 2, 3), config
    # The leader writes the status key in its HA loop (every loop_wait = 2 s), not at bootstrap: a
    # cluster this fresh may not have it yet.
    status = pg.wait("the status key", lambda: pg.kv("status"), timeout=10)
    assert isinstance(json.loads(status)["optime"], int)

    # Patroni's REST API agrees with Consul.
    assert pg[leader].api("/leader")[0] == 200
    for name in ("n1", "n2", "n3"):
        if name != leader:
            assert pg[name].api("/leader")[0] == 503 and pg[name].api("/replica")[0] == 200
    roles = {m["name"]: m["role"] for m in pg[leader].api("/cluster")[1]["members"]}
    assert roles == {n: ("leader" if n == leader else "replica") for n in ("n1", "n2", "n3")}, roles


def test_kill_the_leader_moves_the_leader_key(healthy_pg):
    """SIGKILL of the leader's Patroni and PostgreSQL: its session ends 2 x TTL after its last
    renewal (<= ttl = 10 s after the kill), a replica takes the leader key and promotes."""
    pg = healthy_pg
    old, killed_at = pg.kill_leader()
    new, took = pg.wait_leader(other_than=old, since=killed_at, timeout=pg.ttl + 10)
    print("failover after a kill: %s -> %s in %.2f s (ttl %d, loop_wait %d)" % (old, new, took, pg.ttl,
                                                                                 pg.loop_wait))
    assert took <= pg.ttl + 5, "failover took %.2f s, more than ttl + 5 s" % took
    # The dead member's key went with its session; the new leader says master.
    pg.wait("members/%s to go and %s to say master" % (old, new),
            lambda: old not in pg.members_kv() and pg.members_kv().get(new, {}).get("role") == "master",
            timeout=pg.ttl)
    assert pg[new].api("/primary")[0] == 200
    # The crashed member comes back as a replica of the new leader.
    pg.heal()
    assert pg.leader_name() == new
    assert pg.members_kv()[old]["role"] == "replica"


def test_switchover_to_a_named_candidate(healthy_pg):
    pg = healthy_pg
    old = pg.leader_name()
    candidate = sorted(m.name for m in pg if m.name != old)[-1]
    with pg.watch_leader() as watch:
        t0 = time.monotonic()
        took = pg.switchover(candidate)
        moved = watch.wait(candidate, t0, 10)
    print("patronictl switchover %s -> %s: leader key moved after %.2f s, patronictl returned after %.2f s"
          % (old, candidate, moved, took))
    assert pg.leader_name() == candidate
    pg.wait_healthy()
    members = pg.members_kv()
    assert members[candidate]["role"] == "master" and members[old]["role"] == "replica", members
    assert pg.leader_port() == pg[candidate].pg_port


def test_processes_working_in_a_marked_directory_count_as_the_suites(tmp_path):
    """PostgreSQL's backends name no directory on their command line (`postgres: pgdemo:
    checkpointer`) but work in their data directory: the session-end check and kill_all() find a
    process by its working directory under a marked one."""
    since = time.time()
    work = tmp_path / "data"
    work.mkdir()
    proc = subprocess.Popen(["sleep", "60"], cwd=str(work))
    try:
        assert proc.pid not in [pid for pid, _ in leftovers.find(since)]
        leftovers.mark(str(tmp_path) + "/")
        assert proc.pid in [pid for pid, _ in leftovers.find(since)]
        assert patroni.kill_all(str(tmp_path))
        assert proc.wait(5) == -9
    finally:
        proc.kill()
        proc.wait()
        leftovers.unmark(str(tmp_path) + "/")
