"""proxysql-sync against what a real ProxySQL does to it: its own logins, rejected values, outages of
any length, hand edits of memory, runtime and disk, interrupted applies, rows others staged, and the
hostgroup guard. Consul (double, or real with CONSUL_BIN) -> the agent -> ProxySQL's admin (double,
or real with PROXYSQL_BIN; tests that need a hook of the double skip there, with the reason).
"""

import base64
import json
import os
import re
import signal
import time

import pytest

from test_sync import (USER_PASSWORD, Agent, assert_check_config_refuses, consul,  # noqa: F401
                       first_sync, memory_servers, put_topology, px, runtime_servers, stop_and_check, synced,
                       TOPOLOGY, wait_until, workdir, writes)

RESYNC = "resync-interval = 1.0\n"


def metric(agent, name, **labels):
    """The value of one series of /metrics, or None."""
    status, text = agent.http("/metrics")
    assert status == 200, text
    want = ",".join('%s="%s"' % kv for kv in sorted(labels.items()))
    for line in text.splitlines():
        m = re.match(r"^(\w+)(?:\{(.*)\})? (\S+)$", line)
        if m and m.group(1) == name:
            got = ",".join(sorted((m.group(2) or "").split(","))) if m.group(2) else ""
            if got == want:
                return float(m.group(3))
    return None


def main_users(px):
    return {r[0]: r for r in px.query(
        "SELECT username, password, default_hostgroup, comment, frontend, backend FROM main.mysql_users")}


def checksum(px, what):
    return px.query("CHECKSUM %s" % what)[0][1]


def runtime_weights(px):
    return {(r[0], r[1]): r[2] for r in px.query("SELECT hostgroup_id, hostname, weight FROM runtime_mysql_servers")}


# ---- 1. the identity guard ---------------------------------------------------------------

def test_kv_users_named_like_proxysql_logins_are_never_written(consul, px, workdir):
    """A second admin credential, a stats credential, the cluster user and the monitor user (read from
    global_variables at connect) are refused as KV users: never written, logged, counted; the
    other users apply, and every admin login keeps working."""
    px.query("SET admin-admin_credentials='%s:%s;ops:opspw'" % (px.admin_user, px.admin_password))
    px.query("SET admin-stats_credentials='stats:stats;observer:obspw'")
    px.query("SET admin-cluster_username='cluster1'")
    px.query("SET mysql-monitor_username='monitor'")
    px.query("LOAD ADMIN VARIABLES TO RUNTIME")
    px.query("LOAD MYSQL VARIABLES TO RUNTIME")
    put_topology(consul)
    protected = ["ops", "stats", "observer", "cluster1", "monitor", px.admin_user]
    for name in protected:
        consul.put("proxysql/users/" + name, json.dumps({"password": "pw-" + name}).encode())
    agent = Agent(consul, [px], workdir).start()
    try:
        first_sync(px, agent)
        users = main_users(px)
        assert {"app", "report"} <= set(users), users
        assert not set(protected) & set(users), users
        assert metric(agent, "proxysql_sync_protected_users", target="px1") == len(protected)
        assert metric(agent, "proxysql_sync_rejected_entries") >= len(protected)
        assert "named like a login of ProxySQL itself" in agent.logs()
        # the logins still work: ProxySQL was never given a row that would refuse them
        px.connect(user="ops", password="opspw").close()
        px.connect(user="observer", password="obspw").close()
        px.connect().close()
    finally:
        logs = stop_and_check(agent)
    assert "opspw" not in logs and "obspw" not in logs, "a credential reached the log"


FACT_READS = ("global_variables", "_hostgroups", "runtime_proxysql_servers")


def test_a_server_change_reads_no_facts_while_their_checksums_vouch(consul, px, workdir):
    """Once a sync is verified, a server change reads neither the identity variables nor the monitor
    hostgroup tables: runtime_checksums_values says nobody loaded them since. A user change reads the
    identity again (names staged in memory are protected too, and no checksum covers memory)."""
    if not px.is_fake:
        pytest.skip("needs the ProxySQL double's statement log")
    put_topology(consul)
    agent = Agent(consul, [px], workdir).start()
    try:
        first_sync(px, agent)
        time.sleep(0.5)
        px.clear_statements()
        consul.put("mysql/replica/shop/eu/db2:3306", json.dumps({"weight": 5}).encode())
        wait_until("db2 at weight 5", lambda: runtime_weights(px).get(("11", "db2")) == "5")
        wait_until("the SAVE that follows within save-delay", lambda: "SAVE MYSQL SERVERS TO DISK" in writes(px))
        sent = [s["sql"] for s in px.statements()]
        assert "LOAD MYSQL SERVERS TO RUNTIME" in sent, sent
        assert not [q for q in sent if any(f in q for f in FACT_READS)], sent
        px.clear_statements()
        consul.put("proxysql/users/report", json.dumps({"password": USER_PASSWORD, "default_hostgroup": 10}).encode())
        wait_until("report moved to hostgroup 10", lambda: main_users(px)["report"][2] == "10")
        sent = [s["sql"] for s in px.statements()]
        assert [q for q in sent if "global_variables" in q], sent
    finally:
        stop_and_check(agent)


def _stage_credential(px):
    px.query("SET admin-admin_credentials='%s:%s;ops:opspw'" % (px.admin_user, px.admin_password))


def _load_monitor_row(px):
    px.query("INSERT INTO mysql_replication_hostgroups (writer_hostgroup, reader_hostgroup) VALUES (10, 11)")
    px.query("LOAD MYSQL SERVERS TO RUNTIME")


def _load_peer(px):
    px.query("INSERT INTO proxysql_servers (hostname, port, weight, comment) VALUES ('127.0.0.1', 16999, 0, 'peer')")
    px.query("LOAD PROXYSQL SERVERS TO RUNTIME")


@pytest.mark.parametrize("edit", ["staged_credential", "monitor_row", "peer"])
def test_facts_changed_between_changes_hold_at_the_next_change(consul, px, workdir, edit):
    """A login staged in memory, a monitor hostgroup row or a ProxySQL Cluster peer loaded after a
    verified sync: the next KV change is planned with it, as after a full read (the hot path's
    vouchers moved, or the plan writes users and reads the identity again)."""
    put_topology(consul)
    agent = Agent(consul, [px], workdir).start()
    try:
        first_sync(px, agent)
        time.sleep(0.5)
        {"staged_credential": _stage_credential, "monitor_row": _load_monitor_row, "peer": _load_peer}[edit](px)
        weights = runtime_weights(px)
        if edit == "staged_credential":
            consul.put("proxysql/users/ops", json.dumps({"password": "pw-ops"}).encode())
            consul.put("mysql/replica/shop/eu/db2:3306", json.dumps({"weight": 5}).encode())
            wait_until("db2 at weight 5", lambda: runtime_weights(px).get(("11", "db2")) == "5")
            assert "ops" not in main_users(px)
            wait_until("ops refused", lambda: metric(agent, "proxysql_sync_protected_users", target="px1") == 1)
            return
        consul.put("mysql/replica/shop/eu/db2:3306", json.dumps({"weight": 5}).encode())
        reason = "monitor" if edit == "monitor_row" else "cluster"
        wait_until("the refusal", lambda: metric(agent, "proxysql_sync_target_refused", target="px1",
                                                 table="mysql_servers", reason=reason) == 1)
        time.sleep(1)
        assert runtime_weights(px) == weights, "written after the facts changed"
    finally:
        stop_and_check(agent)


# ---- 2. rejected means kept ----------------------------------------------------------------

def test_invalid_values_keep_what_proxysql_has(consul, px, workdir):
    """A user gaining an unknown field, a replica whose weight turns invalid and a master key that
    turns unreadable change nothing in ProxySQL, also across an agent restart; a key that
    disappears is removed as before."""
    put_topology(consul)
    consul.put("mysql/replica/shop/eu/db2:3306", json.dumps({"weight": 7}).encode())
    agent = Agent(consul, [px], workdir, extra=RESYNC).start()
    first_sync(px, agent)
    users_before = main_users(px)
    servers_before = memory_servers(px)
    weights_before = runtime_weights(px)
    consul.put("proxysql/users/app", json.dumps(
        {"password": USER_PASSWORD, "default_hostgroup": 10, "attributes": "{}"}).encode())
    consul.put("mysql/replica/shop/eu/db2:3306", json.dumps({"weight": "heavy"}).encode())
    consul.put("mysql/master/shop", b"db1:99999")
    wait_until("three rejections", lambda: metric(agent, "proxysql_sync_rejected_entries") == 3)
    time.sleep(2.5)                          # two resyncs
    assert main_users(px) == users_before
    assert memory_servers(px) == servers_before
    assert runtime_weights(px) == weights_before
    assert stop_and_check(agent)
    agent.start()                            # a fresh agent: keeps what the target has
    wait_until("the restarted agent's rejections", lambda: metric(agent, "proxysql_sync_rejected_entries") == 3)
    time.sleep(2.5)
    assert main_users(px) == users_before and memory_servers(px) == servers_before
    consul.delete("proxysql/users/app")
    consul.delete("mysql/replica/shop/eu/db2:3306")
    wait_until("the deleted user gone", lambda: "app" not in main_users(px))
    wait_until("the deleted replica drained or gone",
               lambda: ("11", "db2", "3306", "ONLINE") not in memory_servers(px))
    stop_and_check(agent)


# ---- 3. reconnect at once -------------------------------------------------------------------

@pytest.mark.fault
def test_proxysql_down_40s_then_back_empty_gets_its_config_within_1s(consul, px, workdir):
    """Retried every 200-300 ms however long it was away: config back within 1 s of the admin answering.

    A refused connection is a ProxySQL that is down or restarting; the backoff never grows for it."""
    put_topology(consul)
    agent = Agent(consul, [px], workdir).start()
    try:
        first_sync(px, agent)
        px.stop()
        time.sleep(40)
        px.start(initial=True)               # returns once the admin answers
        answered = time.monotonic()
        wait_until("the config back", lambda: synced(px), timeout=5, interval=0.02)
        took = time.monotonic() - answered
        print("config back %.3f s after the admin answered" % took)
        assert took <= 1.0, "config back %.2f s after the admin answered" % took
    finally:
        stop_and_check(agent)


# ---- 4. in sync, judged from ProxySQL itself -----------------------------------------------

@pytest.mark.fault
def test_hand_edits_of_runtime_and_disk_are_repaired(consul, px, workdir):
    """Each repaired within one resync-interval (a LOAD, a SAVE), judged from ProxySQL; /readyz 200 only then.

    Someone LOADs a change by hand and puts memory back (servers and users), or SAVEs another
    state to disk."""
    put_topology(consul)
    agent = Agent(consul, [px], workdir, extra=RESYNC).start()
    try:
        first_sync(px, agent)
        # runtime: weight 50 loaded by hand, memory put back
        px.query("UPDATE mysql_servers SET weight=50 WHERE hostname='db2'")
        px.query("LOAD MYSQL SERVERS TO RUNTIME")
        px.query("UPDATE mysql_servers SET weight=1 WHERE hostname='db2'")
        wait_until("runtime repaired", lambda: runtime_weights(px)[("11", "db2")] == "1", timeout=5)
        # users: another password loaded by hand, memory put back
        px.query("UPDATE mysql_users SET password='hand' WHERE username='app'")
        px.query("LOAD MYSQL USERS TO RUNTIME")
        px.query("UPDATE mysql_users SET password='%s' WHERE username='app'" % USER_PASSWORD)
        wait_until("runtime users repaired", lambda: {r[0] for r in px.query(
            "SELECT password FROM runtime_mysql_users WHERE username='app'")} == {USER_PASSWORD}, timeout=5)
        # disk: another state saved, memory put back
        px.query("UPDATE mysql_servers SET weight=60 WHERE hostname='db3'")
        px.query("SAVE MYSQL SERVERS TO DISK")
        px.query("UPDATE mysql_servers SET weight=1 WHERE hostname='db3'")
        wait_until("disk repaired", lambda: checksum(px, "DISK MYSQL SERVERS") == checksum(
            px, "MEMORY MYSQL SERVERS"), timeout=5)
        wait_until("/readyz", agent.ready, timeout=5)
        assert metric(agent, "proxysql_sync_owed_total", target="px1", kind="load") >= 2
        assert metric(agent, "proxysql_sync_owed_total", target="px1", kind="save") >= 1
        assert metric(agent, "proxysql_sync_target_in_sync", target="px1") == 1
    finally:
        stop_and_check(agent)


def test_reconnect_and_quiet_resyncs_send_no_load(consul, px, workdir):
    """A resync that finds nothing and a reconnect send no LOAD (each would put SHUNNED servers back
    ONLINE and undo the monitor's moves)."""
    put_topology(consul)
    agent = Agent(consul, [px], workdir, extra=RESYNC).start()
    try:
        first_sync(px, agent)
        px.clear_statements()
        time.sleep(2.5)                      # two resyncs
        px.restart()                         # from disk: the same state, a new connection
        time.sleep(2.5)
        assert writes(px) == []
    finally:
        stop_and_check(agent)


@pytest.mark.parametrize("how", ["sigterm", "dropped"])
@pytest.mark.fault
def test_apply_interrupted_between_dml_and_load_is_repaired(consul, px, workdir, how):
    """Memory is left ahead of runtime; the next run or reconnect sees it and sends the LOAD alone.

    An apply stopped after its DML and before its LOAD: SIGTERM, or the connection dropped."""
    put_topology(consul, users=False)
    agent = Agent(consul, [px], workdir, extra=RESYNC + "admin-timeout = 30.0\n").start()
    first_sync(px, agent)
    px.clear_statements()
    px.control("latency", ms=300)
    consul.put("mysql/replica/shop/eu/db5:3306", b"")
    wait_until("the INSERT", lambda: any("db5" in x for x in writes(px)), timeout=20, interval=0.02)
    if how == "sigterm":
        agent.proc.send_signal(signal.SIGTERM)
        agent.proc.wait(5)
    else:
        px.control("drop", count=1)          # the next statement, the LOAD, loses its connection
        # (no SQL of ours before the agent's LOAD, or ours would be the one dropped)
        # statement 2 of 2 (UPDATE, LOAD; the SAVE follows within save-delay)
        wait_until("the LOAD dropped", lambda: "statement 2 of 2 failed" in agent.logs(), timeout=10)
    px.control("latency", ms=0)
    if how == "sigterm":
        assert ("11", "db5", "3306", "ONLINE") in memory_servers(px)
        assert ("11", "db5", "3306", "ONLINE") not in runtime_servers(px)
        agent.start()
    wait_until("runtime repaired", lambda: ("11", "db5", "3306", "ONLINE") in runtime_servers(px), timeout=5)
    wait_until("/readyz", agent.ready)
    # repaired by a LOAD: the row was not staged a second time
    assert len([x for x in writes(px) if x.startswith("INSERT") and "db5" in x]) == 1, writes(px)
    assert "LOAD MYSQL SERVERS TO RUNTIME" in writes(px)
    stop_and_check(agent)


def test_once_reports_a_runtime_behind_memory_and_repairs_it(consul, px, workdir):
    """--once says "in sync" only when memory = runtime = disk: a LOAD lost before the run is sent."""
    put_topology(consul, users=False)
    agent = Agent(consul, [px], workdir)
    assert agent.run("--once").returncode == 0
    px.query("UPDATE mysql_servers SET weight=50 WHERE hostname='db2'")
    px.query("LOAD MYSQL SERVERS TO RUNTIME")
    px.query("UPDATE mysql_servers SET weight=1 WHERE hostname='db2'")
    dry = agent.run("--dry-run")
    assert "LOAD MYSQL SERVERS TO RUNTIME" in dry.stdout, dry.stdout
    r = agent.run("--once")
    assert r.returncode == 0, r.stdout + r.stderr
    assert runtime_weights(px)[("11", "db2")] == "1"


# ---- 5. someone else's staged edits --------------------------------------------------------

@pytest.mark.parametrize("mode", ["publish", "hold"])
@pytest.mark.fault
def test_rows_staged_by_someone_else(consul, px, workdir, mode):
    """Counted and logged; publish: the agent's LOAD carries them; hold: no LOAD of the table, /readyz 503 with the reason.

    A row staged in a hostgroup the agent does not own, before an apply of the agent's; with hold
    nothing of mysql_servers is loaded until whoever staged it loads or removes it."""
    put_topology(consul, users=False)
    agent = Agent(consul, [px], workdir, extra=RESYNC + 'foreign-edits = "%s"\n' % mode).start()
    try:
        first_sync(px, agent)
        px.query("INSERT INTO mysql_servers (hostgroup_id, hostname, port) VALUES (99, 'hand1', 3306)")
        consul.put("mysql/replica/shop/eu/db5:3306", b"")
        wait_until("counted", lambda: metric(agent, "proxysql_sync_foreign_staged_rows_total", target="px1",
                                             table="mysql_servers") == 1)
        if mode == "publish":
            wait_until("db5 and hand1 live", lambda: {("11", "db5", "3306", "ONLINE"), ("99", "hand1", "3306", "ONLINE")}
                       <= set(runtime_servers(px)))
            wait_until("/readyz", agent.ready)
        else:
            time.sleep(2.5)
            assert ("11", "db5", "3306", "ONLINE") not in runtime_servers(px)
            status, body = agent.http("/readyz")
            assert status == 503 and "held" in body and "foreign-edits" in body, body
            assert "staged in memory by someone else" in agent.logs()
            px.query("DELETE FROM mysql_servers WHERE hostgroup_id=99")
            wait_until("db5 live once the row is gone", lambda: ("11", "db5", "3306", "ONLINE") in runtime_servers(px))
            wait_until("/readyz", agent.ready)
            assert ("99", "hand1", "3306", "ONLINE") not in runtime_servers(px)
    finally:
        stop_and_check(agent)


# ---- 6. the guard per hostgroup ------------------------------------------------------------

def shop_and_blog_agent(consul, px, workdir):
    """An agent for two clusters: shop (hostgroups 10 and 11) and blog (20 and 21)."""
    extra = ('clusters = ( { alias = "shop"; writer_hostgroup = 10; reader_hostgroup = 11; },\n'
             '             { alias = "blog"; writer_hostgroup = 20; reader_hostgroup = 21; } );\n')
    agent = Agent(consul, [px], workdir, extra=extra)
    agent.text = agent.text.replace(
        'clusters = ( { alias = "shop"; writer_hostgroup = 10; reader_hostgroup = 11; } );\n', "")
    agent.write_config()
    return agent


def test_one_cluster_losing_all_readers_is_confirmed_first(consul, px, workdir):
    """Cluster shop loses both readers while the replica prefix keeps 8 of its 10 keys (under
    shrink-fraction): hostgroup 11 empties only after `confirmations` further reads."""
    put_topology(consul, users=False)
    consul.put("mysql/master/blog", b"b1:3306")
    for i in range(8):
        consul.put("mysql/replica/blog/eu/b%d:3306" % (i + 2), b"")
    agent = shop_and_blog_agent(consul, px, workdir)
    agent.start()
    try:
        wait_until("the first sync", lambda: len(runtime_servers(px)) == 12)
        consul.delete("mysql/replica/shop/eu/db2:3306")
        consul.delete("mysql/replica/shop/eu/db3:3306")
        wait_until("the guard", lambda: "hostgroup 11 would go from 2 to 0 servers" in agent.logs())
        assert "mysql/replica/ went from" not in agent.logs()        # the prefix guard saw nothing
        assert {("11", "db2", "3306", "ONLINE"), ("11", "db3", "3306", "ONLINE")} <= set(runtime_servers(px))
        wait_until("confirmed", lambda: "hostgroup 11 from 2 to 0 servers confirmed" in agent.logs())
        wait_until("readers drained", lambda: not [r for r in runtime_servers(px)
                                                   if r[0] == "11" and r[3] == "ONLINE"])
        assert metric(agent, "proxysql_sync_guard_blocks_total", guard="hostgroup_shrink") >= 1
    finally:
        stop_and_check(agent)


@pytest.mark.fault
def test_guard_counts_once_when_the_hot_path_reads_in_full(consul, px, workdir):
    """The writer guard's warning is logged once and `proxysql_sync_writer_guard_total` counts 1, though the change was planned twice (from the known rows, then from a full read).

    A change after a verified sync plans from the rows kept at the verify; when a checksum says
    someone else changed the table, the agent reads it in full and plans again. The writer guard
    that change meets is recorded once, not once per plan."""
    put_topology(consul, users=False)
    for k, v in (("mysql/master/blog", b"b1:3306"), ("mysql/master/blog/hostname", b"b1"),
                 ("mysql/master/blog/port", b"3306")):
        consul.put(k, v)                    # shop's three keys of six: no prefix confirmation
    agent = shop_and_blog_agent(consul, px, workdir)
    agent.start()
    try:
        want = sorted(TOPOLOGY + [("20", "b1", "3306", "ONLINE")])
        wait_until("the first sync", lambda: runtime_servers(px) == want)
        wait_until("/readyz", agent.ready)
        time.sleep(0.5)
        px.query("UPDATE mysql_servers SET weight = 77 WHERE hostname = 'db3'")   # memory's checksum moves
        # one index: shop loses its writer (the guard keeps it) and db2 changes weight (a plan)
        r = consul.txn([{"KV": {"Verb": "delete", "Key": k}} for k in
                        ("mysql/master/shop", "mysql/master/shop/hostname", "mysql/master/shop/port")]
                       + [{"KV": {"Verb": "set", "Key": "mysql/replica/shop/eu/db2:3306",
                                  "Value": base64.b64encode(json.dumps({"weight": 5}).encode()).decode()}}])
        assert r.status == 200, r
        wait_until("db2 at 5 and db3 back at 1 in runtime", lambda: sorted(tuple(row) for row in px.query(
            "SELECT hostname, weight FROM runtime_mysql_servers WHERE hostgroup_id = 11"))
            == [("db2", "5"), ("db3", "1")])
        wait_until("/readyz", agent.ready)
        time.sleep(0.5)
        assert ("10", "db1", "3306", "ONLINE") in runtime_servers(px)
        assert agent.logs().count("writer hostgroup(s) would be empty") == 1, agent.logs()
        assert metric(agent, "proxysql_sync_writer_guard_total", target="px1") == 1
    finally:
        stop_and_check(agent)


def test_first_snapshot_is_compared_with_what_the_target_has(consul, px, workdir):
    """At start (and with --once) there is no earlier snapshot: ProxySQL's own rows are the baseline.
    KV with one reader of the four ProxySQL has is confirmed before three are drained."""
    for h in ("db2", "db3", "db4", "db5"):
        px.query("INSERT INTO mysql_servers (hostgroup_id, hostname, port) VALUES (11, '%s', 3306)" % h)
    px.query("INSERT INTO mysql_servers (hostgroup_id, hostname, port) VALUES (10, 'db1', 3306)")
    px.query("LOAD MYSQL SERVERS TO RUNTIME")
    put_topology(consul, replicas=("db2",), users=False)
    agent = Agent(consul, [px], workdir)
    r = agent.run("--once")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "hostgroup 11 would go from 4 to 1 servers" in r.stdout
    assert "confirmed by 3 reads" in r.stdout
    assert [x for x in runtime_servers(px) if x[0] == "11" and x[3] == "ONLINE"] == [("11", "db2", "3306", "ONLINE")]


# ---- 7. users the agent does not own -------------------------------------------------------

@pytest.mark.parametrize("adopt", [False, True])
def test_hand_made_user_of_the_same_name(consul, px, workdir, adopt):
    """A user made by hand is never modified or deleted: a KV user of that name is reported, not
    applied, unless adopt-users = true."""
    px.query("INSERT INTO mysql_users (username, password, default_hostgroup, comment) "
             "VALUES ('app', 'handpw', 10, 'made by hand')")
    px.query("LOAD MYSQL USERS TO RUNTIME")
    put_topology(consul)
    agent = Agent(consul, [px], workdir, extra="adopt-users = %s\n" % ("true" if adopt else "false")).start()
    try:
        first_sync(px, agent)
        users = main_users(px)
        assert "report" in users
        if adopt:
            assert users["app"][1] == USER_PASSWORD and users["app"][3] == "proxysql-sync"
        else:
            assert users["app"][1] == "handpw" and users["app"][3] == "made by hand"
            assert metric(agent, "proxysql_sync_user_conflicts", target="px1") == 1
            assert "collide with users the agent does not own" in agent.logs()
            consul.delete("proxysql/users/app")
            time.sleep(1.5)
            assert main_users(px)["app"][1] == "handpw"
    finally:
        stop_and_check(agent)


# ---- 8. --check-config refuses destructive setups ------------------------------------------

def test_check_config_refuses_destructive_setups(workdir):
    base = 'admin-addr = "127.0.0.1:6032"\nregion = "eu"\n'
    cases = {
        base + 'clusters = ( { alias = "a"; writer_hostgroup = 1; reader_hostgroup = 2;\n'
               '  remote_readers = ( { region = "us"; hostgroup = 1; } ); } );\n': "remote_readers hostgroup 1",
        base + 'clusters = ( { alias = "a"; writer_hostgroup = 1; reader_hostgroup = 2; },\n'
               '  { alias = "b"; writer_hostgroup = 3; reader_hostgroup = 4;\n'
               '    remote_readers = ( { region = "us"; hostgroup = 2; } ); } );\n': "is also a hostgroup of a",
        base + 'servers-prefix = "s"\nmanaged-hostgroups = "7"\n'
               'clusters = ( { alias = "a"; writer_hostgroup = 1; reader_hostgroup = 2;\n'
               '  remote_readers = ( { region = "us"; hostgroup = 7; } ); } );\n': "managed-hostgroups",
        'admin-addr = "127.0.0.1:6032"\n'
        'clusters = ( { alias = "a"; writer_hostgroup = 1; reader_hostgroup = 2; } );\n': "region is empty",
        base + 'servers-prefix = "s"\nmanaged-hostgroups = "%s"\n' % ",".join(str(i) for i in range(300)) +
        'clusters = ( { alias = "a"; writer_hostgroup = 1000; } );\n': "at most 256",
    }
    assert_check_config_refuses(os.path.join(workdir, "bad.cfg"), cases)


# ---- 9. backoff on answers not believed, reloads that never block /healthz ----------------

@pytest.mark.fault
def test_no_leader_answers_back_off(consul, px, workdir):
    """Retried with a growing backoff like errors, not 4-8 times a second; nothing applied meanwhile."""
    if not consul.is_fake:
        pytest.skip("needs the Consul double's fault hooks (CONSUL_BIN is set)")
    put_topology(consul, users=False)
    agent = Agent(consul, [px], workdir, extra="wait = 1.0\n").start()
    try:
        wait_until("the first sync", lambda: synced(px))
        px.clear_statements()
        consul.fault("leader", known=0, reads="ok")
        time.sleep(1)
        consul.fault("requests", method="DELETE")
        time.sleep(8)
        reads = [r for r in consul.fault("requests", method="GET") if "/v1/kv/" in r.get("path", "")]
        # three prefixes; without backoff: 3 x 8 s x 4..8 = 96..192 reads
        assert len(reads) <= 3 * 8, len(reads)
        assert writes(px) == []
        consul.fault("leader", known=1)
        consul.put("mysql/replica/shop/eu/db7:3306", b"")
        wait_until("db7 once a leader is known", lambda: ("11", "db7", "3306", "ONLINE") in runtime_servers(px),
                   timeout=40)
    finally:
        stop_and_check(agent)


@pytest.mark.fault
def test_reload_never_blocks_healthz(consul, px, workdir):
    """/healthz keeps answering at once, /readyz 503 "reloading"; ready again once the admin answers."""
    put_topology(consul, users=False)
    agent = Agent(consul, [px], workdir, extra="admin-timeout = 4.0\n" + RESYNC).start()
    try:
        first_sync(px, agent)
        px.control("hang", count=1000, seconds=0)
        time.sleep(1.5)                      # a resync is now stuck on the admin
        agent.proc.send_signal(signal.SIGHUP)
        time.sleep(0.3)
        t0 = time.monotonic()
        status, body = agent.http("/healthz")
        assert status == 200 and time.monotonic() - t0 < 0.5
        status, body = agent.http("/readyz")
        assert status == 503 and "reloading" in body, body
        px.control("release")
        px.control("reset")
        wait_until("/readyz after the reload", agent.ready, timeout=15)
    finally:
        px.control("reset")
        stop_and_check(agent)
