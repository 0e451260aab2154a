"""proxysql-sync's fault matrix: Consul, ProxySQL and the process itself failing in the ways
docs/faults.md lists, one test per row (marked `fault`; the row's expected outcome is the test
docstring's first line, and test_fault_matrix_doc keeps the two equal).

The Consul double's and the ProxySQL double's fault hooks make the faults; tests that need a
hook skip against real servers (CONSUL_BIN, PROXYSQL_BIN). ProxySQL-side tests sample
runtime_mysql_servers every 20 ms while the fault lasts and assert that the writer hostgroup
was never empty. Some process tests need root (a tmpfs mount, an unprivileged user, a PID
namespace), which is how the suite runs.

Run: make all && /usr/bin/python3 -m pytest -q tests/integration/test_sync_faults.py
"""

import ast
import os
import random
import re
import shutil
import signal
import stat
import sqlite3
import subprocess
import threading
import time
import uuid

import pytest

import pid1
import trickle
from fakes.consul import Consul
from test_sync import (ADMIN_PASSWORD, SYNC, TOPOLOGY, Agent, RuntimeSampler, consul, first_sync,  # noqa: F401
                       free_port, put_topology, px, runtime_servers, synced, wait_until, workdir, writes)

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
FAULTS_DOC = os.path.join(REPO, "docs", "faults.md")
NOBODY = 65534
PREFIXES = ("mysql/master/", "mysql/replica/", "proxysql/users/")


def lines_with(agent, needle):
    return [x for x in agent.logs().splitlines() if needle in x]


def metric(agent, name):
    """The value of one metric line (name with its labels, exactly as exported), or None."""
    status, body = agent.http("/metrics")
    for line in body.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    return None


def finish(agent, expect_rc=0):
    """Stop the agent (SIGTERM), print its log for pytest, check the exit code and no secret logged."""
    rc = agent.stop()
    logs = agent.logs()
    print(logs)
    assert ADMIN_PASSWORD not in logs, "a password reached the agent's log"
    assert rc == expect_rc, "agent exit code %r" % rc
    return logs


def need_fake(*servers):
    for s in servers:
        if not s.is_fake:
            pytest.skip("needs the doubles' fault hooks (CONSUL_BIN or PROXYSQL_BIN is set)")


# ---- Consul ------------------------------------------------------------------------------------

@pytest.mark.fault
def test_consul_down_at_start(px, workdir):
    """Starts, logs once per prefix, /readyz 503, never exits; syncs once Consul comes up."""
    c = Consul()
    c.port = free_port()                    # the address is known before anything listens there
    agent = Agent(c, [px], workdir, extra="wait = 1.0\n").start()
    try:
        time.sleep(3)
        assert agent.proc.poll() is None, "the agent exited while Consul was down"
        assert agent.http("/healthz")[0] == 200
        status, why = agent.http("/readyz")
        assert status == 503 and "not read yet" in why, (status, why)
        for prefix in PREFIXES:             # one line per prefix, not one per retry
            assert len(lines_with(agent, "consul: %s:" % prefix)) == 1, agent.logs()
        assert "keeping the last good state" not in agent.logs(), "there is no good state yet"
        assert writes(px) == []
        c.start()
        put_topology(c)
        wait_until("the first sync once Consul is up", lambda: synced(px), timeout=20)
        wait_until("/readyz", agent.ready, timeout=10)
        for prefix in PREFIXES:
            assert len(lines_with(agent, "consul: %s: reachable again" % prefix)) == 1, agent.logs()
    finally:
        finish(agent)
        c.close()


@pytest.mark.fault
def test_consul_slow_answers(consul, px, workdir):
    """Answers 1.5 s late (within the 3 s margin of a read's deadline): no error, /readyz stays 200, changes apply."""
    need_fake(consul)
    put_topology(consul, users=False)
    agent = Agent(consul, [px], workdir, extra="wait = 1.0\n").start()
    try:
        first_sync(px, agent)
        consul.fault("slow", ms=1500)
        t0 = time.monotonic()
        consul.put("mysql/replica/shop/eu/db4:3306", b"")
        ready = []
        wait_until("db4 through slow answers", lambda: ready.append(agent.ready()) or
                   ("11", "db4", "3306", "ONLINE") in runtime_servers(px), timeout=20, interval=0.2)
        assert time.monotonic() - t0 >= 1.5, "the change came faster than the answers"
        time.sleep(3)                       # a few more slow blocking reads
        ready.append(agent.ready())
        assert all(ready), "/readyz turned 503 with slow answers"
        assert metric(agent, 'proxysql_sync_errors_total{stage="consul",target=""}') == 0, agent.logs()
        consul.fault("slow", ms=0)
    finally:
        finish(agent)


def acl_consul():
    master = "root-" + uuid.uuid4().hex
    c = Consul(acl_master_token=master)
    need_fake(c)
    c.start()
    token = c.create_token([("key", "mysql/", "read"), ("key", "proxysql/", "read")])
    # every write of this test carries the management token
    c.put = lambda key, value=b"", token=master, **params: Consul.put(c, key, value, token=token, **params)
    return c, token


def acl_agent(c, token, px, workdir):
    tokfile = os.path.join(workdir, "consul-token")
    with open(tokfile, "w") as f:
        f.write(token + "\n")
    os.chmod(tokfile, 0o600)
    put_topology(c, users=False)
    agent = Agent(c, [px], workdir, extra='wait = 1.0\nconsul-token-file = "%s"\n' % tokfile).start()
    first_sync(px, agent)
    return agent


@pytest.mark.fault
def test_consul_token_revoked(px, workdir):
    """403 logged once per prefix, naming the request and that Consul does not know the token (`GET /v1/kv/<prefix>?recurse denied: Consul does not know the token (ACL not found: unknown, revoked or expired)`; a token that lacks a rule gets `... denied: the token needs key_prefix "<prefix>" read` instead), never the token; last good config kept, /readyz 503; recovers when the token works again."""  # noqa: E501
    c, token = acl_consul()
    agent = None
    try:
        agent = acl_agent(c, token, px, workdir)
        px.clear_statements()
        c.revoke_token(token)
        # The reads in flight were allowed when they started; the next ones get 403.
        # One line per prefix naming the endpoint and that Consul no longer knows the token.
        denied = ("consul: %s: GET /v1/kv/%s?recurse denied: Consul does not know the token (ACL not found: "
                  "unknown, revoked or expired)")
        wait_until("403 for every prefix", lambda: all(lines_with(agent, denied % (p, p)) for p in PREFIXES),
                   timeout=10)
        c.put("mysql/replica/shop/eu/db4:3306", b"")    # a change the agent cannot read
        time.sleep(2.5)                     # retries with backoff
        status, why = agent.http("/readyz")
        assert status == 503 and "ACL not found" in why, (status, why)
        for prefix in PREFIXES:
            assert len(lines_with(agent, denied % (prefix, prefix))) == 1, agent.logs()
        assert token not in agent.logs()
        assert synced(px) and writes(px) == [], "the last good config was not kept"
        assert agent.proc.poll() is None
        # The same token works again (recreated with its rules): the agent recovers by itself.
        c.fault("acl", token=token, prefix="mysql/", policy="read")
        c.fault("acl", token=token, prefix="proxysql/", policy="read")
        wait_until("db4 once the token works again",
                   lambda: ("11", "db4", "3306", "ONLINE") in runtime_servers(px), timeout=30)
        wait_until("/readyz again", agent.ready, timeout=10)
        assert token not in agent.logs()
    finally:
        if agent:
            finish(agent)
        c.close()


@pytest.mark.fault
def test_consul_token_loses_read(px, workdir):
    """Answers filtered by ACLs are not believed: the readers stay; applies again once the token reads everything."""
    c, token = acl_consul()
    agent = None
    try:
        agent = acl_agent(c, token, px, workdir)
        px.clear_statements()
        # The token's policy loses key:read on the replicas: Consul answers 404 with
        # X-Consul-Results-Filtered-By-ACLs: true, which looks like an emptied prefix.
        c.fault("acl", token=token, prefix="mysql/replica/", policy="deny")
        wait_until("the filtered answer logged", lambda: "filtered by ACLs" in agent.logs(), timeout=10)
        c.put("mysql/replica/shop/eu/db4:3306", b"")    # a change the agent cannot read
        time.sleep(2.5)                     # longer than `confirmations` reads of an emptied prefix
        assert synced(px) and writes(px) == [], runtime_servers(px)
        assert len(lines_with(agent, "filtered by ACLs")) == 1, agent.logs()
        status, why = agent.http("/readyz")
        assert status == 503 and "filtered by ACLs" in why, (status, why)
        c.fault("acl", token=token, prefix="mysql/replica/", policy="read")
        wait_until("db4 once the token reads the replicas again",
                   lambda: ("11", "db4", "3306", "ONLINE") in runtime_servers(px), timeout=30)
        wait_until("/readyz again", agent.ready, timeout=10)
    finally:
        if agent:
            finish(agent)
        c.close()


# ---- ProxySQL ----------------------------------------------------------------------------------

def seed_disk(px, rows):
    """Give ProxySQL a configuration of its own in memory, runtime and disk (as a previous run left it)."""
    for hg, host in rows:
        px.query("INSERT INTO mysql_servers (hostgroup_id, hostname, port) VALUES (%d, '%s', 3306)" % (hg, host))
    px.query("LOAD MYSQL SERVERS TO RUNTIME")
    px.query("SAVE MYSQL SERVERS TO DISK")


@pytest.mark.fault
def test_proxysql_admin_down_at_start(consul, px, workdir):
    """Logged once, /readyz 503, never exits; converges once the admin comes up with its old config from disk."""
    seed_disk(px, [(10, "db9"), (11, "db2")])
    px.stop()
    put_topology(consul, users=False)
    agent = Agent(consul, [px], workdir).start()
    try:
        time.sleep(2.5)
        assert agent.proc.poll() is None
        status, why = agent.http("/readyz")
        assert status == 503 and "px1: unreachable" in why, (status, why)
        assert len(lines_with(agent, "target px1: cannot connect")) == 1, agent.logs()
        with RuntimeSampler(px) as rs:
            px.start(initial=False)         # memory and runtime from disk: writer db9
            wait_until("the desired state (db9 drained and gone)", lambda: synced(px), timeout=20)
            wait_until("/readyz", agent.ready, timeout=10)
        rs.assert_writer_never_empty()
    finally:
        finish(agent)


@pytest.mark.fault
def test_proxysql_killed_mid_apply(consul, px, workdir):
    """Back from disk with the whole old state, never a half-applied one, then converges to the new."""
    need_fake(px)
    put_topology(consul, users=False)
    agent = Agent(consul, [px], workdir).start()
    try:
        wait_until("the first sync", lambda: synced(px))
        before = runtime_servers(px)
        want = sorted([("10", "db4", "3306", "ONLINE"), ("11", "db2", "3306", "ONLINE"),
                       ("11", "db3", "3306", "ONLINE")])
        with RuntimeSampler(px) as rs:
            time.sleep(0.3)
            px.control("latency", ms=300)   # every statement takes 0.3 s: the apply takes seconds
            consul.put("mysql/master/shop", b"db4:3306")
            consul.put("mysql/master/shop/hostname", b"db4")
            wait_until("the apply to start", lambda: any("db4" in x for x in writes(px)), timeout=10)
            px.kill()                       # SIGKILL in the middle of the staging
            t0 = time.monotonic()
            db = sqlite3.connect("file:%s?mode=ro" % os.path.join(px.datadir, "proxysql.db"), uri=True)
            try:
                disk = sorted((str(hg), h, str(p), st.upper()) for hg, h, p, st in db.execute(
                    "SELECT hostgroup_id, hostname, port, status FROM mysql_servers"))
            finally:
                db.close()
            assert disk == before, "the disk does not hold the whole old state: %r" % disk
            px.start(initial=False)         # from disk; the latency hook is gone with the process
            wait_until("the new writer, the old one drained and gone", lambda: runtime_servers(px) == want,
                       timeout=20)
        rs.assert_writer_never_empty()
        after = rs.since(t0)
        assert after, "no runtime sample after the restart"
        allowed = (before, want, sorted(want + [("10", "db1", "3306", "OFFLINE_SOFT")]))
        assert all(rows in allowed for rows in after), [r for r in after if r not in allowed][:3]
        assert agent.proc.poll() is None
    finally:
        finish(agent)


@pytest.mark.fault
def test_proxysql_restarted_from_disk(consul, px, workdir):
    """Unsaved edits are lost, the disk's stale config comes back; re-applied within 5 s of the restart."""
    put_topology(consul, users=False)
    agent = Agent(consul, [px], workdir).start()
    try:
        wait_until("the first sync", lambda: synced(px))
        with RuntimeSampler(px) as rs:
            time.sleep(0.3)
            # By hand: the readers removed from memory and saved to disk without a LOAD, and a
            # weight changed in memory only (lost on restart).
            px.query("DELETE FROM mysql_servers WHERE hostgroup_id = 11")
            px.query("SAVE MYSQL SERVERS TO DISK")
            px.query("UPDATE mysql_servers SET weight = 7 WHERE hostgroup_id = 10")
            px.restart(initial=False)       # SIGTERM, then memory and runtime from disk
            t0 = time.monotonic()
            wait_until("the readers re-applied", lambda: synced(px), timeout=10)
            assert time.monotonic() - t0 < 5
            time.sleep(0.3)
        rs.assert_writer_never_empty()
        assert px.query("SELECT weight FROM disk.mysql_servers WHERE hostgroup_id = 10") == [("1",)]
        assert agent.proc.poll() is None
    finally:
        finish(agent)


@pytest.mark.fault
def test_proxysql_rejects_a_statement(consul, px, workdir):
    """Nothing is loaded, the error is logged and counted (`stage="apply"`); converges once the statement passes."""
    need_fake(px)
    put_topology(consul, users=False)
    agent = Agent(consul, [px], workdir).start()
    try:
        wait_until("the first sync", lambda: synced(px))
        applied_metric = 'proxysql_sync_errors_total{stage="apply",target="px1"}'
        assert metric(agent, applied_metric) == 0
        with RuntimeSampler(px) as rs:
            time.sleep(0.3)
            px.control("fail", count=1000, code=1045, message="ProxySQL Admin Error: disk I/O error", match="db4")
            consul.put("mysql/replica/shop/eu/db4:3306", b"")
            wait_until("two failed applies", lambda: (metric(agent, applied_metric) or 0) >= 2, timeout=20)
            failing_until = time.monotonic()
            assert synced(px), "runtime changed while the statement failed"
            assert "failed: ProxySQL Admin Error: disk I/O error" in agent.logs()
            assert re.search(r"target px1: statement \d+ of \d+ failed: .*INSERT INTO mysql_servers.*db4", agent.logs())
            px.control("reset")             # the statement passes again
            wait_until("db4 once the statement passes", lambda: ("11", "db4", "3306", "ONLINE") in runtime_servers(px),
                       timeout=20)
        rs.assert_writer_never_empty()
        early = [rows for at, rows in rs.samples if at <= failing_until]
        assert early and all(rows == sorted(TOPOLOGY) for rows in early), "half applied while failing"
        assert agent.proc.poll() is None
    finally:
        finish(agent)


@pytest.mark.fault
def test_proxysql_save_to_disk_fails(consul, px, workdir):
    """The runtime has the change; the SAVE is retried without waiting for another change, so a restart from disk keeps it."""
    need_fake(px)
    put_topology(consul, users=False)
    agent = Agent(consul, [px], workdir).start()
    try:
        wait_until("the first sync", lambda: synced(px))
        with RuntimeSampler(px) as rs:
            px.control("fail", count=1, code=1045, message="ProxySQL Admin Error: disk I/O error",
                       match="SAVE MYSQL SERVERS TO DISK")
            consul.put("mysql/replica/shop/eu/db4:3306", b"")
            want = sorted(TOPOLOGY + [("11", "db4", "3306", "ONLINE")])
            wait_until("db4 in the runtime", lambda: runtime_servers(px) == want, timeout=20)
            wait_until("the SAVE done again", lambda: ("11", "db4", "3306") in [
                tuple(r) for r in px.query("SELECT hostgroup_id, hostname, port FROM disk.mysql_servers")],
                timeout=20)
            assert re.search(r"target px1: statement \d+ of \d+ failed: ProxySQL Admin Error: disk I/O error \(1045\): "
                             r"SAVE MYSQL SERVERS TO DISK", agent.logs()), agent.logs()
            px.restart(initial=False)       # from disk
            wait_until("the runtime back from disk", lambda: runtime_servers(px) == want, timeout=20)
        rs.assert_writer_never_empty()
        assert [w for w in writes(px) if "db4" in w] == [], "db4 was written again after the restart"
    finally:
        finish(agent)


# ---- the process -------------------------------------------------------------------------------

def signals_taken(pid):
    """True once `pid` blocks SIGTERM, SIGINT and SIGHUP (to sigwait() them): from then on none is lost.

    Before that a process cannot take a signal: the dynamic build spends tens of milliseconds
    loading its shared libraries before main() runs (the static one about one), and the kernel
    drops a signal with no handler sent to a PID 1. Any thread will do: the main thread shows
    them unblocked while it sits in sigwait()."""
    want = (1 << (signal.SIGTERM - 1)) | (1 << (signal.SIGINT - 1)) | (1 << (signal.SIGHUP - 1))
    for tid in os.listdir("/proc/%d/task" % pid):
        with open("/proc/%d/task/%s/status" % (pid, tid)) as f:
            blocked = int([line.split()[1] for line in f if line.startswith("SigBlk:")][0], 16)
        if blocked & want == want:
            return True
    return False


def set_readers(consul, readers):
    """Replace every replica key in one transaction: each KV index holds one whole reader set."""
    ops = [{"KV": {"Verb": "delete-tree", "Key": "mysql/replica/shop/eu/"}}]
    ops += [{"KV": {"Verb": "set", "Key": "mysql/replica/shop/eu/%s:3306" % h, "Value": ""}} for h in readers]
    r = consul.txn(ops)
    assert r.status == 200, r


@pytest.mark.fault
def test_signals_at_random_points(consul, px, workdir):
    """SIGHUP never stops it, SIGTERM/SIGINT exit 0 within 1.5 s, wherever they land; runtime never half applied."""
    need_fake(px)
    seed = int(os.environ.get("SIDEKICK_FAULT_SEED", "1130"))
    rnd = random.Random(seed)
    print("seed %d (SIDEKICK_FAULT_SEED)" % seed)
    hosts = ["db%d" % i for i in range(20, 26)]
    seen = [frozenset(hosts[:3])]           # every reader set KV has held (3 of 6: no shrink guard)
    put_topology(consul, replicas=hosts[:3], users=False)
    agent = Agent(consul, [px], workdir, extra="wait = 1.0\n")
    agent.text = agent.text.replace("drain-timeout = 30.0", "drain-timeout = 0")    # removed readers go at once
    agent.write_config()
    px.control("latency", ms=15)            # applies take a while, so signals land inside them
    stop = threading.Event()

    def stream():
        while not stop.wait(rnd_stream.uniform(0.03, 0.2)):
            readers = frozenset(rnd_stream.sample(hosts, 3))
            seen.append(readers)            # recorded before it can reach ProxySQL
            set_readers(consul, sorted(readers))
    rnd_stream = random.Random(seed + 1)
    streamer = threading.Thread(target=stream, daemon=True)
    try:
        with RuntimeSampler(px) as rs:
            rs.expect_empty_restart()           # a fresh ProxySQL: empty until the first apply
            streamer.start()
            try:
                for rnd_no in range(3):
                    agent.start()
                    wait_until("the signals taken", lambda: signals_taken(agent.proc.pid), interval=0.001)
                    for i in range(5):
                        # the very first one at once, while the agent is still starting up
                        time.sleep(0 if rnd_no == i == 0 else rnd.uniform(0, 0.4))
                        agent.proc.send_signal(signal.SIGHUP)
                        assert agent.proc.poll() is None, "exited on SIGHUP %d of round %d" % (i + 1, rnd_no + 1)
                    time.sleep(rnd.uniform(0, 0.4))
                    sig = rnd.choice((signal.SIGTERM, signal.SIGINT))
                    t0 = time.monotonic()
                    agent.proc.send_signal(sig)
                    rc = agent.proc.wait(10)
                    took = time.monotonic() - t0
                    assert rc == 0, "exit code %r after %s" % (rc, sig.name)
                    assert took < 1.5, "%s took %.2f s" % (sig.name, took)
            finally:
                stop.set()
                streamer.join(10)
            # A last agent converges to the last state KV holds.
            px.control("latency", ms=0)
            agent.start()
            wait_until("the last reader set",
                       lambda: {r[1] for r in runtime_servers(px) if r[0] == "11"} == seen[-1], timeout=20)
            time.sleep(0.2)
    finally:
        logs = finish(agent)
    # SIGHUPs that come during a reload are one pending signal (POSIX does not queue them): one
    # more reload, not one each. Every round reloads at least once.
    assert 3 <= logs.count("reloading the configuration") <= 15, logs
    rs.assert_writer_never_empty(min_samples=50)
    first = next(i for i, (at, rows) in enumerate(rs.samples) if rows)     # a fresh ProxySQL starts empty
    for at, rows in rs.samples[first:]:
        readers = frozenset(r[1] for r in rows if r[0] == "11")
        assert readers in seen, "runtime held a reader set KV never had (half applied): %r" % rows
        assert [r[:2] for r in rows if r[0] == "10"] == [("10", "db1")], rows


def nspid(pid):
    with open("/proc/%d/status" % pid) as f:
        return [line.split()[1:] for line in f if line.startswith("NSpid:")][0]


@pytest.mark.fault
def test_pid1_in_a_pid_namespace(consul, px, workdir):
    """As PID 1 (no default signal actions): SIGTERM during startup, SIGHUP, SIGINT honoured; exit 0 within 1.5 s."""
    if shutil.which("unshare") is None or os.geteuid() != 0:
        pytest.skip("needs root and unshare(1) for a PID namespace")
    put_topology(consul, users=False)
    agent = Agent(consul, [px], workdir)
    # --mount-proc: a /proc of its own, as in a container (LeakSanitizer finds its threads there)
    cmd = ["unshare", "--pid", "--fork", "--mount-proc", "--kill-child", SYNC, "-c", agent.cfg]

    def start():
        out = open(agent.log, "ab")
        outer = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
        out.close()
        inner = wait_until("proxysql-sync as PID 1", lambda: [p for p, _ in pid1.children(outer.pid)
                                                               if open("/proc/%d/comm" % p).read().strip()
                                                               == "proxysql-sync"], timeout=5, interval=0.001)[0]
        assert nspid(inner)[-1] == "1", nspid(inner)
        return outer, inner

    def stop(outer, inner, sig):
        t0 = time.monotonic()
        os.kill(inner, sig)                 # from the parent namespace, as a container runtime does
        try:
            rc = outer.wait(10)
        except subprocess.TimeoutExpired:
            outer.kill()
            outer.wait(5)
            pytest.fail("PID 1 ignored %s" % sig.name)
        return rc, time.monotonic() - t0

    try:
        # SIGTERM while it is still starting up, as soon as it can take one
        outer, inner = start()
        wait_until("the signals taken", lambda: signals_taken(inner), interval=0.001)
        rc, took = stop(outer, inner, signal.SIGTERM)
        assert rc == 0 and took < 1.5, (rc, took, agent.logs())
        # A whole run: sync, reload, SIGINT
        outer, inner = start()
        wait_until("the first sync", lambda: synced(px))
        os.kill(inner, signal.SIGHUP)
        wait_until("the reload", lambda: "reloading the configuration" in agent.logs())
        consul.put("mysql/replica/shop/eu/db4:3306", b"")
        wait_until("a change after the reload", lambda: ("11", "db4", "3306", "ONLINE") in runtime_servers(px))
        rc, took = stop(outer, inner, signal.SIGINT)
        assert rc == 0 and took < 1.5, (rc, took, agent.logs())
    finally:
        print(agent.logs())
        assert ADMIN_PASSWORD not in agent.logs()


@pytest.mark.fault
def test_pid1_reaps_orphans(consul, px, workdir):
    """As PID 1 it reaps every orphan reparented to it (kubectl exec leftovers): no zombie stays; still syncs."""
    pid1.need_namespaces()
    put_topology(consul, users=False)
    agent = Agent(consul, [px], workdir)
    outer, inner = pid1.start_pid1([SYNC, "-c", agent.cfg], agent.log, "proxysql-sync")
    try:
        wait_until("the first sync", lambda: synced(px))
        pid1.make_orphans(inner, 6)
        assert pid1.wait_no_children(inner, 5), "zombies left: %r" % pid1.zombies(inner)
        pid1.make_orphans(inner, 6)         # again, while it works
        consul.put("mysql/replica/shop/eu/db4:3306", b"")
        wait_until("a change", lambda: ("11", "db4", "3306", "ONLINE") in runtime_servers(px))
        assert pid1.wait_no_children(inner, 5), "zombies left: %r" % pid1.zombies(inner)
        assert pid1.stop(outer, inner, signal.SIGTERM) == 0
    finally:
        if outer.poll() is None:
            outer.kill()
            outer.wait(5)
        print(agent.logs())


@pytest.fixture
def full_tmpfs(workdir):
    """A tmpfs with no free inode and no free block: nothing can be created or grow there."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mnt = os.path.join(workdir, "full")
    os.mkdir(mnt)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8k,nr_inodes=3,mode=0777", "tmpfs", mnt],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip("cannot mount a tmpfs here: %s" % r.stderr.strip())
    try:
        with open(os.path.join(mnt, "sync.lock"), "w"):
            pass                            # a lock file left by an earlier run
        with open(os.path.join(mnt, "filler"), "wb") as f:
            try:
                f.write(b"x" * 65536)
            except OSError:
                pass                        # ENOSPC: the blocks are full
        with pytest.raises(OSError):
            open(os.path.join(mnt, "one-more"), "w").close()
        yield mnt
    finally:
        subprocess.run(["umount", "-l", mnt])


@pytest.mark.fault
def test_lock_file_planted_by_another_user(consul, px, workdir):
    """A planted symbolic link, FIFO or other user's file: `--once` exits 1 with one line, follows no link, creates nothing."""
    if os.geteuid() != 0:
        pytest.skip("chown to another user needs root")
    put_topology(consul, users=False)
    agent = Agent(consul, [px], workdir)
    lock = os.path.join(workdir, "sync.lock")
    victim = os.path.join(workdir, "victim")

    def once(why):
        r = agent.run("--once", timeout=10)
        out = (r.stdout + r.stderr).strip().splitlines()
        assert r.returncode == 1 and len(out) == 1 and why in out[0], (why, r.returncode, out)
        assert "lock file %s: " % lock in out[0]

    os.symlink(victim, lock)                # dangling: following it would create the victim
    once("a symbolic link, not followed")
    assert not os.path.exists(victim)
    os.unlink(lock)
    os.mkfifo(lock)
    once("not a regular file")
    os.unlink(lock)
    with open(lock, "w"):
        pass
    os.chown(lock, 65534, 65534)            # pre-created by another local user
    once("belongs to uid 65534, not to this user (uid 0)")
    os.unlink(lock)
    assert agent.run("--once", timeout=30).returncode == 0
    # The default: under $XDG_RUNTIME_DIR when it is set.
    agent.text = agent.text.replace('lock-file = "%s/sync.lock"' % workdir, "")
    agent.write_config()
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONSUL_")}
    env["XDG_RUNTIME_DIR"] = workdir
    r = subprocess.run([SYNC, "-c", agent.cfg, "--once"], capture_output=True, text=True, timeout=30, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    st = os.lstat(os.path.join(workdir, "proxysql-sync.lock"))
    assert st.st_uid == 0 and st.st_mode & 0o777 == 0o600, st


def as_user(uid, argv):
    """argv run as `uid` (its own group, no other): a local user other than root."""
    return ["setpriv", "--reuid=%d" % uid, "--regid=%d" % uid, "--clear-groups"] + list(argv)


def plant(*argv):
    """Run argv as nobody: another local user preparing a trap."""
    subprocess.run(as_user(65534, argv), check=True)


@pytest.mark.fault
def test_default_lock_file_cannot_be_planted(consul, px, workdir):
    """A lock file planted at the former default blocks nothing: `--once` runs (exit 0) under its own 0700 directory; a directory planted there instead is named with `--lock-file` (exit 1), never used.

    The default lock file sits where no other user can write. The test's user (no $XDG_RUNTIME_DIR,
    /run not writable) falls back to /tmp/proxysql-sync-UID/, made 0700; another user (nobody)
    creates /tmp/proxysql-sync-UID.lock first (the former default), then the directory itself."""
    if os.geteuid() != 0:
        pytest.skip("running as other users needs root")
    uid = 40000 + random.randrange(10000)       # this test's own user, which can write neither /run nor /tmp's files
    private = "/tmp/proxysql-sync-%d" % uid
    former = "/tmp/proxysql-sync-%d.lock" % uid
    put_topology(consul, users=False)
    agent = Agent(consul, [px], workdir)
    agent.text = agent.text.replace('lock-file = "%s/sync.lock"' % workdir, "")
    agent.write_config()
    for root, dirs, files in os.walk(workdir):
        for name in [root] + [os.path.join(root, f) for f in files]:
            os.chown(name, uid, uid)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONSUL_") and k != "XDG_RUNTIME_DIR"}

    def once():
        return subprocess.run(as_user(uid, [SYNC, "-c", agent.cfg, "--once"]), capture_output=True, text=True,
                              timeout=30, env=env)
    try:
        plant("touch", former)
        r = once()
        assert r.returncode == 0, r.stdout + r.stderr
        assert former not in r.stdout + r.stderr
        st = os.lstat(private)
        assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (uid, 0o700), st
        st = os.lstat(private + "/proxysql-sync.lock")
        assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (uid, 0o600), st
        assert once().returncode == 0                   # the next run takes the same lock
        shutil.rmtree(private)
        plant("mkdir", "-m", "0777", private)           # the directory itself, made first
        r = once()
        out = (r.stdout + r.stderr).strip().splitlines()
        assert r.returncode == 1 and len(out) == 1, (r.returncode, out)
        assert ("lock file: %s: belongs to uid 65534, not to this user (uid %d); give a path in a directory only "
                "this user can write (--lock-file)" % (private, uid)) in out[0], out
        assert os.listdir(private) == []
    finally:
        for path in (former, private):
            subprocess.run(["rm", "-rf", path])


def test_root_without_a_writable_run_is_not_blocked_by_a_planted_lock(consul, px, workdir):
    """Root whose /run is read-only (a read-only root filesystem; here a mount namespace) and who
    has no $XDG_RUNTIME_DIR: another user's /tmp/proxysql-sync-0.lock (the former default, which
    made every such cron run exit 1) blocks nothing; the lock goes to /tmp/proxysql-sync-0/ (0700)."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare(1) for a mount namespace")
    put_topology(consul, users=False)
    agent = Agent(consul, [px], workdir)
    agent.text = agent.text.replace('lock-file = "%s/sync.lock"' % workdir, "")
    agent.write_config()
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONSUL_") and k != "XDG_RUNTIME_DIR"}
    former, private = "/tmp/proxysql-sync-0.lock", "/tmp/proxysql-sync-0"
    try:
        plant("touch", former)
        r = subprocess.run(["unshare", "-m", "sh", "-c", 'mount -t tmpfs -o ro tmpfs /run && exec "$@"', "sh",
                            SYNC, "-c", agent.cfg, "--once"], capture_output=True, text=True, timeout=30, env=env)
        assert r.returncode == 0, r.stdout + r.stderr
        st = os.lstat(private + "/proxysql-sync.lock")
        assert (st.st_uid, stat.S_IMODE(os.lstat(private).st_mode)) == (0, 0o700), st
        assert os.lstat(former).st_uid == 65534             # left alone
    finally:
        for path in (former, private):
            subprocess.run(["rm", "-rf", path])


@pytest.mark.fault
def test_lock_file_on_a_full_disk(consul, px, workdir, full_tmpfs):
    """`--once` exits 1 at once with one line naming the lock file; an existing lock file still works (exit 0)."""
    put_topology(consul, users=False)
    agent = Agent(consul, [px], workdir)
    agent.text = agent.text.replace('lock-file = "%s/sync.lock"' % workdir, 'lock-file = "%s/new.lock"' % full_tmpfs)
    agent.write_config()
    t0 = time.monotonic()
    r = agent.run("--once", timeout=10)
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    assert time.monotonic() - t0 < 5
    out = (r.stdout + r.stderr).strip().splitlines()
    assert len(out) == 1, out
    assert "lock file %s/new.lock: No space left on device (--lock-file)" % full_tmpfs in out[0], out
    assert writes(px) == []
    # flock() needs no space: a lock file that is already there keeps working
    agent.text = agent.text.replace("%s/new.lock" % full_tmpfs, "%s/sync.lock" % full_tmpfs)
    agent.write_config()
    r = agent.run("--once", timeout=30)
    assert r.returncode == 0, r.stdout + r.stderr
    assert synced(px)


def as_nobody(path, mode=0o600):
    os.chown(path, NOBODY, NOBODY)
    os.chmod(path, mode)


@pytest.mark.fault
def test_unreadable_config_and_secret_files(consul, px, workdir):
    """Exit 2 with one line naming the file; on SIGHUP the running configuration is kept."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv(1) to run the agent as an unprivileged user")
    nobody = ["setpriv", "--reuid=%d" % NOBODY, "--regid=%d" % NOBODY, "--clear-groups"]
    os.chmod(workdir, 0o755)
    token = os.path.join(workdir, "consul-token")
    with open(token, "w") as f:
        f.write("anything\n")
    put_topology(consul, users=False)
    agent = Agent(consul, [px], workdir)
    for name in ("sync.cfg", "admin-pw-0", "consul-token"):
        as_nobody(os.path.join(workdir, name))

    def check(extra, unreadable, what):
        """`unreadable` is made root-only; the agent (as nobody) must name it in one line and exit 2."""
        agent.write_config(extra)
        as_nobody(agent.cfg)
        os.chown(unreadable, 0, 0)
        os.chmod(unreadable, 0o600)
        try:
            for mode in ([], ["--check-config"], ["--once"]):
                r = subprocess.run(nobody + [SYNC, "-c", agent.cfg] + mode, capture_output=True, text=True,
                                   timeout=10)
                out = (r.stdout + r.stderr).strip().splitlines()
                assert r.returncode == 2, (what, mode, r.returncode, out)
                assert len(out) == 1 and "%s: Permission denied" % unreadable in out[0] and what in out[0], \
                    (what, mode, out)
        finally:
            as_nobody(unreadable)

    check("", agent.cfg, "config file")
    check("", os.path.join(workdir, "admin-pw-0"), "password_file")
    check('consul-token-file = "%s"\n' % token, token, "consul-token-file")
    # A directory where a file belongs
    r = subprocess.run(nobody + [SYNC, "-c", workdir, "--check-config"], capture_output=True, text=True, timeout=10)
    assert r.returncode == 2 and r.stderr.strip() == "proxysql-sync: config file %s: not a regular file" % workdir, \
        r.stderr

    # Running as nobody: a SIGHUP while a file is unreadable keeps the running configuration.
    agent.write_config()
    as_nobody(agent.cfg)
    out = open(agent.log, "ab")
    agent.proc = subprocess.Popen(nobody + [SYNC, "-c", agent.cfg], stdout=out, stderr=subprocess.STDOUT)
    out.close()
    try:
        wait_until("the first sync", lambda: synced(px))
        for path, extra in ((agent.cfg, ""), (os.path.join(workdir, "admin-pw-0"), ""),
                            (token, 'consul-token-file = "%s"\n' % token)):
            agent.write_config(extra)
            as_nobody(agent.cfg)
            os.chown(path, 0, 0)
            os.chmod(path, 0o600)
            agent.proc.send_signal(signal.SIGHUP)
            wait_until("the failed reload of %s logged" % path,
                       lambda: len(lines_with(agent, "%s: Permission denied" % path)) == 1)
            as_nobody(path)
            assert agent.proc.poll() is None, "the agent exited on a reload with %s unreadable" % path
        assert len(lines_with(agent, "reload failed, keeping the running configuration")) == 3, agent.logs()
        consul.put("mysql/replica/shop/eu/db4:3306", b"")
        wait_until("a change under the kept configuration",
                   lambda: ("11", "db4", "3306", "ONLINE") in runtime_servers(px))
    finally:
        finish(agent)


# ---- the matrix itself ---------------------------------------------------------------------------

def fault_tests(path):
    """{name: docstring first line} of the functions in `path` marked @pytest.mark.fault."""
    with open(path) as f:
        tree = ast.parse(f.read(), path)
    found = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and any(ast.unparse(d) == "pytest.mark.fault"
                                                     for d in node.decorator_list):
            doc = ast.get_docstring(node) or ""
            found[node.name] = doc.splitlines()[0].strip() if doc else ""
    return found


@pytest.mark.fault
def test_health_port_under_trickling_clients(consul, px, workdir):
    """/healthz from 127.0.0.1 always answered within 1 s; each trickling connection closed at `health-request-timeout`; one address holds at most `health-max-connections-per-ip`."""
    put_topology(consul)
    agent = Agent(consul, [px], workdir, extra="health-request-timeout = 2.0\n").start()
    try:
        wait_until("/readyz", agent.ready)
        t, p = trickle.hostile_run(agent.health_port, "/healthz", conns=300, addrs=30, interval=1.0, duration=10.0)
        trickle.assert_not_starved(t, p, request_timeout=2.0, bound=1.0)
        assert trickle.count_kept(agent.health_port, "127.0.0.99", 40) == 32   # the default per address
        assert agent.http("/healthz") == (200, "ok\n")
        assert agent.proc.poll() is None
    finally:
        finish(agent)


@pytest.mark.fault
def test_health_port_under_a_keep_alive_flood(consul, px, workdir):
    """/healthz from 127.0.0.100 always answered within 1 s while 16 addresses x 32 kept-alive connections, each asking /healthz every second, hold all 512 slots."""
    put_topology(consul)
    agent = Agent(consul, [px], workdir).start()
    try:
        wait_until("/readyz", agent.ready)
        f, p = trickle.flood_run(agent.health_port, "/healthz", addrs=16, per_addr=32, interval=1.0, duration=6.0)
        trickle.assert_answered_during_flood(f, p, bound=1.0)
        assert f.closed >= len(p.results)           # each probe took the slot of a kept-alive connection
        assert agent.http("/healthz") == (200, "ok\n")
        assert agent.proc.poll() is None
    finally:
        finish(agent)


def test_fault_matrix_doc():
    """Every row of docs/faults.md names a fault test whose docstring states the row's outcome, and the
    other way round: every test marked `fault` has exactly one row."""
    with open(FAULTS_DOC) as f:
        doc = f.read()
    rows, section = [], None
    for line in doc.splitlines():
        if line.startswith("## "):
            section = line[3:].strip()
        if not line.startswith("|") or re.match(r"^\|[-| :]+\|$", line) or line.startswith("| fault |"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        assert len(cells) == 4, "a row needs 4 cells (fault | how | expected | test): %r" % line
        rows.append((section, cells))
    assert {s for s, _ in rows} == {"Consul", "ProxySQL", "Galera state transfer", "Other users on the host",
                                    "The process", "Hostile clients on the health ports",
                                    "Whoever answers the admin port"}, \
        {s for s, _ in rows}
    assert "docs/probes.md" in doc or "(probes.md)" in doc, "the MySQL side's table is linked"

    marked = {}
    for name in sorted(os.listdir(HERE)):
        if name.startswith("test_") and name.endswith(".py"):
            for fn, first in fault_tests(os.path.join(HERE, name)).items():
                marked["tests/integration/%s::%s" % (name, fn)] = first
    assert len(marked) >= 20, marked

    named = {}
    for section, (fault, how, expected, test) in rows:
        m = re.fullmatch(r"`?(tests/integration/test_\w+\.py::test_\w+)`?", test)
        assert m, "the test cell must be `tests/integration/FILE.py::FUNCTION`: %r" % test
        ref = m.group(1)
        assert os.path.exists(os.path.join(REPO, ref.split("::")[0])), ref
        assert ref in marked, "%s (row '%s') is not a test marked @pytest.mark.fault" % (ref, fault)
        named.setdefault(ref, []).append(fault)
        assert expected == marked[ref], "row '%s': the expected outcome and %s's docstring differ:\n  doc:  %s\n" \
            "  test: %s" % (fault, ref, expected, marked[ref])
        assert fault and how, "row for %s has an empty cell" % ref
    assert not [r for r in named if len(named[r]) > 1], {r: f for r, f in named.items() if len(f) > 1}
    missing = sorted(set(marked) - set(named))
    assert not missing, "fault tests without a row in docs/faults.md: %s" % missing
