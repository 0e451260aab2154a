"""liveness-check, readiness-check, haproxy-check and clustercheck (one-shot) against a real
MariaDB Galera cluster and a real async GTID pair: every state of reference/environment.md,
with the exit code and the one-line message each probe must give (the table lives in
probes_cases.py and docs/probes.md), deadlines measured on the wall clock, one connection and
no child process per run, hostile input, secrets kept out of argv and output, and clustercheck
behind a real socket (xinetd style and systemd-socket-activate).

Run: make all && /usr/bin/python3 -m pytest -q tests/integration/test_probes.py
"""

from __future__ import annotations

import contextlib
import os
import pty
import re
import secrets
import shutil
import socket
import subprocess
import tempfile
import threading
import time

import pytest

import probes_cases as pc
import servers

NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


@pytest.fixture(scope="module", autouse=True)
def _secrets(mysql_creds, clustercheck_creds):
    pc.register_secret(mysql_creds.password)
    pc.register_secret(clustercheck_creds.password)


def target(node, mysql_creds, clustercheck_creds):
    return pc.Target(node.ip, node.port, mysql_creds, clustercheck_creds, node.datadir)


def assert_state(state_id, tgt, tmp_path):
    problems = pc.check_state(state_id, tgt, tmp_path)
    assert not problems, (f"state {state_id!r}: {len(problems)} cell(s) misbehaved:\n\n"
                          + "\n\n".join(problems))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(what, predicate, timeout=30.0, interval=0.2):
    deadline = time.monotonic() + timeout
    while True:
        v = predicate()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


# -- Galera states ---------------------------------------------------------------------------
def test_healthy(healthy_galera, mysql_creds, clustercheck_creds, tmp_path):
    assert_state("healthy", target(healthy_galera[2], mysql_creds, clustercheck_creds), tmp_path)


def test_desynced(healthy_galera, mysql_creds, clustercheck_creds, tmp_path):
    node = healthy_galera[2]
    node.desync()
    try:
        tgt = target(node, mysql_creds, clustercheck_creds)
        assert_state("donor-allowed", tgt, tmp_path)
        assert_state("donor-denied", tgt, tmp_path)
    finally:
        node.desync(False)


def test_isolated_non_primary(healthy_galera, mysql_creds, clustercheck_creds, tmp_path):
    node = healthy_galera[3]
    node.isolate()
    try:
        assert_state("isolated", target(node, mysql_creds, clustercheck_creds), tmp_path)
    finally:
        node.unisolate(wait=False)


def test_sigstopped(healthy_galera, mysql_creds, clustercheck_creds, tmp_path):
    node = healthy_galera[2]
    node.sigstop()
    try:
        assert_state("sigstopped", target(node, mysql_creds, clustercheck_creds), tmp_path)
    finally:
        node.sigcont()


def test_stopped(healthy_galera, mysql_creds, clustercheck_creds, tmp_path):
    node = healthy_galera[3]
    node.stop()
    assert_state("stopped", target(node, mysql_creds, clustercheck_creds), tmp_path)


def test_read_only(healthy_galera, mysql_creds, clustercheck_creds, tmp_path):
    node = healthy_galera[2]
    node.set_read_only(True)
    try:
        assert_state("read-only", target(node, mysql_creds, clustercheck_creds), tmp_path)
    finally:
        node.set_read_only(False)


def test_joiner_and_donor_during_sst(healthy_galera, mysql_creds, clustercheck_creds, tmp_path):
    with healthy_galera.held_sst(healthy_galera[3]) as held:
        assert os.path.exists(os.path.join(held.joiner.datadir, "sst_in_progress"))
        assert_state("joiner", target(held.joiner, mysql_creds, clustercheck_creds), tmp_path)
        assert_state("donor", target(held.donor, mysql_creds, clustercheck_creds), tmp_path)


# The scripts skip an option file they cannot read ([ -r ]); only --defaults-extra-file on the
# command line insists on one.
def test_defaults_extra_file_from_the_environment_is_optional(healthy_galera, mysql_creds,
                                                             clustercheck_creds, tmp_path):
    assert_state("defaults-file-absent", target(healthy_galera[2], mysql_creds, clustercheck_creds),
                 tmp_path)


# -- async replica states --------------------------------------------------------------------
def test_replica_healthy(healthy_async_pair, mysql_creds, clustercheck_creds, tmp_path):
    pair = healthy_async_pair
    assert_state("replica-healthy", target(pair.replica, mysql_creds, clustercheck_creds), tmp_path)
    assert_state("replica-primary", target(pair.primary, mysql_creds, clustercheck_creds), tmp_path)


def test_replica_lagging(healthy_async_pair, mysql_creds, clustercheck_creds, tmp_path):
    with healthy_async_pair.lagging(3):
        assert_state("replica-lagging", target(healthy_async_pair.replica, mysql_creds,
                                               clustercheck_creds), tmp_path)


def test_replica_sql_thread_stopped(healthy_async_pair, mysql_creds, clustercheck_creds, tmp_path):
    pair = healthy_async_pair
    pair.stop_sql_thread()
    try:
        assert_state("replica-sql-stopped", target(pair.replica, mysql_creds, clustercheck_creds),
                     tmp_path)
    finally:
        pair.start_sql_thread()


def test_replica_sql_thread_failed(healthy_async_pair, mysql_creds, clustercheck_creds, tmp_path):
    pair = healthy_async_pair
    pair.break_sql()
    try:
        assert_state("replica-sql-error", target(pair.replica, mysql_creds, clustercheck_creds),
                     tmp_path)
    finally:
        pair.heal()


def test_replica_primary_down(healthy_async_pair, mysql_creds, clustercheck_creds, tmp_path):
    pair = healthy_async_pair
    pair.stop_primary()
    try:
        wait_for("the replica IO thread to say Connecting (2003)",
                 lambda: (lambda s: s.get("Slave_IO_Running") == "Connecting"
                          and s.get("Last_IO_Errno") == 2003)(pair.replica_status()))
        assert_state("replica-primary-down", target(pair.replica, mysql_creds, clustercheck_creds),
                     tmp_path)
    finally:
        pair.heal()


def test_replica_sigstopped(healthy_async_pair, mysql_creds, clustercheck_creds, tmp_path):
    pair = healthy_async_pair
    pair.replica.sigstop()
    try:
        assert_state("replica-sigstopped", target(pair.replica, mysql_creds, clustercheck_creds),
                     tmp_path)
    finally:
        pair.replica.sigcont()


# -- no server needed ------------------------------------------------------------------------
def nowhere(mysql_creds, clustercheck_creds):
    """A loopback port where nothing listens: any connection attempt is refused."""
    return pc.Target("127.0.0.1", free_port(), mysql_creds, clustercheck_creds)


def test_bypass_files(mysql_creds, clustercheck_creds, tmp_path):
    assert_state("bypass", nowhere(mysql_creds, clustercheck_creds), tmp_path)


def test_wrong_credentials(healthy_galera, mysql_creds, clustercheck_creds, tmp_path):
    assert_state("credentials", target(healthy_galera[1], mysql_creds, clustercheck_creds), tmp_path)


def test_unknown_host(mysql_creds, clustercheck_creds, tmp_path):
    """Inside an empty network namespace no name server is reachable, so the lookup fails at once
    and no query leaves the machine (the host's resolver may be slow or absent)."""
    ns = f"sk-nodns-{os.getpid()}"
    r = subprocess.run(["ip", "netns", "add", ns], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot create a network namespace here: {r.stderr.strip()}")
    try:
        subprocess.run(["ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up"], check=True)
        tgt = nowhere(mysql_creds, clustercheck_creds)
        tgt.netns = ns
        assert_state("unknown-host", tgt, tmp_path)
    finally:
        subprocess.run(["ip", "netns", "del", ns])


def test_hostile_input(mysql_creds, clustercheck_creds, tmp_path):
    assert_state("hostile", nowhere(mysql_creds, clustercheck_creds), tmp_path)


def test_ten_megabyte_defaults_file_is_refused_quickly(tmp_path):
    big = tmp_path / "big.cnf"
    with open(big, "wb") as f:
        f.write(b"[client]\n" + b"#" * (10 * 1024 * 1024) + b"\n")
    for name in ("liveness-check", "readiness-check", "clustercheck"):
        r = pc.run([os.path.join(pc.BIN, name), "--defaults-extra-file", big, "--host", "127.0.0.1",
                    "--port", free_port()])
        assert r.rc == 2, r
        assert r.out == b"", r
        assert r.errtext.count("\n") == 1 and "too large" in r.errtext and str(big) in r.errtext, r
        assert r.wall < 1.0, r


@pytest.fixture
def world_dir():
    """A directory user nobody can enter (pytest's tmp_path is 0700 root)."""
    d = tempfile.mkdtemp(prefix="sk-probes-")
    os.chmod(d, 0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.mark.parametrize("probe", ["liveness-check", "readiness-check", "haproxy-check", "clustercheck",
                                   "proxysql-check"])
def test_unreadable_password_file_as_nobody(probe, world_dir):
    pw = os.path.join(world_dir, "monitor")
    with open(pw, "w") as f:
        f.write("secret-nobody-cannot-read")
    os.chmod(pw, 0o000)
    argv = [*NOBODY, os.path.join(pc.BIN, probe), "--password-file", pw, "--defaults-extra-file", "",
            "--host", "127.0.0.1", "--port", free_port()]
    if probe == "haproxy-check":
        argv += ["127.0.0.1", "3306", "127.0.0.1", "3306"]
    if probe == "proxysql-check":
        argv.append("--liveness")
    r = pc.run(argv)
    assert r.rc == 2, r
    assert r.out == b"", r
    lines = r.errtext.splitlines()
    assert len(lines) == 1 and lines[0] == f"{probe}: password file {pw}: Permission denied", r
    assert "secret-nobody" not in r.errtext


@pytest.mark.parametrize("probe", ["liveness-check", "readiness-check", "haproxy-check", "clustercheck",
                                   "proxysql-check"])
def test_unknown_options_help_and_version(probe):
    exe = os.path.join(pc.BIN, probe)
    for bad in (["--frobnicate"], ["--timeout"], ["--port", "70000"], ["-Z"]):
        r = pc.run([exe, *bad])
        assert r.rc == 2, r
        assert r.out == b"", r
        assert len(r.errtext.splitlines()) == 1 and r.errtext.startswith(probe + ": "), r
    r = pc.run([exe, "--help"])
    assert r.rc == 0 and r.text.startswith("Usage: " + probe) and r.err == b"", r
    if probe == "haproxy-check":
        # check_pxc.sh's words kept on stdout are explained where a first user looks.
        assert "SERVER_PORT is accepted and ignored" in r.text, r
        assert "node count (AVAILABLE_NODES),\nnot how many are up" in r.text, r
    r = pc.run([exe, "--version"])
    assert r.rc == 0 and re.fullmatch(re.escape(probe) + r" \(sidekick\) \S+\n", r.text), r


def test_readiness_exclusive_requirements_and_proxysql_modes():
    r = pc.run([os.path.join(pc.BIN, "readiness-check"), "--require-read-only", "--require-writable"])
    assert r.rc == 2 and r.out == b"" and len(r.errtext.splitlines()) == 1, r
    r = pc.run([os.path.join(pc.BIN, "proxysql-check")])
    assert r.rc == 2 and r.out == b"" and "--liveness" in r.errtext, r
    r = pc.run([os.path.join(pc.BIN, "proxysql-check"), "--readiness", "--writer-hostgroup", "ten"])
    assert r.rc == 2 and r.out == b"" and "'ten'" in r.errtext, r
    r = pc.run([os.path.join(pc.BIN, "haproxy-check")])
    assert r.rc == 2 and r.out == b"" and "no server address" in r.errtext, r
    r = pc.run([os.path.join(pc.BIN, "clustercheck"), "a", "b", "c", "d", "e", "f", "g"])
    assert r.rc == 2 and r.out == b"" and len(r.errtext.splitlines()) == 1, r


# -- deadlines when the network misbehaves ---------------------------------------------------
def test_deadline_when_the_listen_queue_is_full(mysql_creds):
    """A server that never accepts: its listen queue is full, the connection never completes."""
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(0)
    port = ls.getsockname()[1]
    fillers = []
    for _ in range(3):
        s = socket.socket()
        s.setblocking(False)
        with contextlib.suppress(BlockingIOError):
            s.connect(("127.0.0.1", port))
        fillers.append(s)
    try:
        for probe, word in (("liveness-check", "not alive"), ("readiness-check", "not ready")):
            r = pc.run([os.path.join(pc.BIN, probe), "--host", "127.0.0.1", "--port", port,
                        "--defaults-extra-file", "", "--password-file", mysql_creds.password_file,
                        "--timeout", "1"])
            assert r.rc == 1, r
            assert r.text == f"{word}: timeout after 1.0s connecting (127.0.0.1:{port}, --timeout)\n", r
            assert 0.98 <= r.wall <= 1.0 + pc.SLACK, r
    finally:
        for s in fillers:
            s.close()
        ls.close()


# Runs inside a private mount namespace and measures the probe alone (creating the namespace
# costs 50-80 ms, which is not the probe's time).
_NS_RUNNER = r"""
import json, subprocess, sys, time
argv = json.loads(sys.argv[1])
t = time.monotonic()
p = subprocess.run(argv, capture_output=True, stdin=subprocess.DEVNULL, env={"PATH": "/usr/bin:/bin"})
wall = time.monotonic() - t
print(json.dumps({"rc": p.returncode, "out": p.stdout.decode(), "err": p.stderr.decode(), "wall": wall}))
"""


def run_with_resolv_conf(argv, resolv):
    """Run argv where /etc/resolv.conf is `resolv` (a private mount namespace); None if impossible."""
    import json
    argv = [str(a) for a in argv]
    for a in argv:
        pc.assert_no_secret(a, "argv")
    p = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                        'mount --bind "$0" /etc/resolv.conf && exec /usr/bin/python3 -c "$1" "$2"',
                        str(resolv), _NS_RUNNER, json.dumps(argv)],
                       capture_output=True, stdin=subprocess.DEVNULL, env=pc.clean_env(), timeout=60)
    if p.returncode != 0:
        return None
    d = json.loads(p.stdout)
    pc.OUTPUTS.append((argv, d["out"].encode(), d["err"].encode()))
    return pc.Result(argv, d["rc"], d["out"].encode(), d["err"].encode(), d["wall"])


def test_deadline_when_dns_never_answers(mysql_creds, tmp_path):
    """A name server on loopback that swallows queries: resolution is bounded by the deadline."""
    dns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        dns.bind(("127.0.0.77", 53))
    except OSError as exc:
        pytest.skip(f"cannot bind a fake name server on 127.0.0.77:53: {exc}")
    resolv = tmp_path / "resolv.conf"
    resolv.write_text("nameserver 127.0.0.77\noptions timeout:5 attempts:2\n")
    try:
        for probe, word in (("liveness-check", "not alive"), ("readiness-check", "not ready")):
            r = run_with_resolv_conf([os.path.join(pc.BIN, probe), "--host", "db.example.test", "--port", "3306",
                        "--defaults-extra-file", "", "--password-file", mysql_creds.password_file,
                        "--timeout", "1"], str(resolv))
            if r is None:
                pytest.skip("no private mount namespace here (unshare/mount refused)")
            assert r.rc == 1, r
            assert r.text == (f"{word}: timeout after 1.0s resolving host 'db.example.test' "
                              "(db.example.test:3306, --timeout)\n"), r
            assert 0.98 <= r.wall <= 1.0 + pc.SLACK, r
        dns.settimeout(0.5)
        assert dns.recv(512), "the probe never asked the name server"
    finally:
        dns.close()


# -- faults on a server of the test's own, in a network namespace -----------------------------
NETNS_PORT = 3306


@pytest.fixture(scope="module")
def netns_node(sidekick_workspace):
    """A 1-node Galera inside a network namespace made for it (`ip netns add`): iptables rules
    there touch nothing else on the machine. It listens on 127.0.0.1:3306 of that namespace;
    the harness reaches it as root over its unix socket, the probes from inside the namespace."""
    if not shutil.which("iptables"):
        pytest.fail("iptables is not installed (tests/deps.sh installs it)")
    ns = f"sk-probes-{os.getpid()}"
    r = subprocess.run(["ip", "netns", "add", ns], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot create a network namespace here: {r.stderr.strip()}")
    node = None
    try:
        subprocess.run(["ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up"], check=True)
        node = servers.single_node_galera(sidekick_workspace, "nsf", "127.0.0.1", NETNS_PORT, 4567,
                                          "sidekick_faults", netns=ns)
        yield node
    finally:
        if node is not None:
            node.kill()
        subprocess.run(["ip", "netns", "del", ns])


def _iptables(node, *rule):
    subprocess.run(["ip", "netns", "exec", node.netns, "iptables", "-w", *rule], check=True,
                   capture_output=True)


def _restart_single_node(node):
    """Start the 1-node cluster again, bootstrapping it even after a crash."""
    state = os.path.join(node.datadir, "grastate.dat")
    if os.path.exists(state):
        with open(state) as f:
            text = f.read()
        with open(state, "w") as f:
            f.write(re.sub(r"safe_to_bootstrap: *0", "safe_to_bootstrap: 1", text))
    node.start("--wsrep-new-cluster", timeout=90)
    wait_for("the namespace's node to be Synced", lambda: dict(
        node.sql("SHOW GLOBAL STATUS LIKE 'wsrep_local_state'")).get("wsrep_local_state") == "4", 60)


def netns_target(node, mysql_creds, clustercheck_creds):
    return pc.Target(node.ip, node.port, mysql_creds, clustercheck_creds, node.datadir, netns=node.netns)


def test_packets_dropped(netns_node, mysql_creds, clustercheck_creds, tmp_path):
    _iptables(netns_node, "-I", "INPUT", "-p", "tcp", "--dport", str(NETNS_PORT), "-j", "DROP")
    try:
        assert_state("packets-dropped", netns_target(netns_node, mysql_creds, clustercheck_creds), tmp_path)
    finally:
        _iptables(netns_node, "-F")


def test_replies_dropped_after_the_login(netns_node, mysql_creds, clustercheck_creds, tmp_path):
    _iptables(netns_node, "-I", "OUTPUT", "-p", "tcp", "--sport", str(NETNS_PORT), "-m", "connbytes",
              "--connbytes", "400:", "--connbytes-dir", "reply", "--connbytes-mode", "bytes", "-j", "DROP")
    try:
        assert_state("replies-dropped", netns_target(netns_node, mysql_creds, clustercheck_creds), tmp_path)
    finally:
        _iptables(netns_node, "-F")


def test_slow_to_answer_behind_a_long_lock(netns_node, mysql_creds, clustercheck_creds, tmp_path):
    holder = netns_node.connect()
    try:
        with holder.cursor() as cur:
            cur.execute("SELECT GET_LOCK('sk_probe_block', 0)")
            assert cur.fetchall()[0][0] == 1
        # init_connect runs for every login without SUPER (the probes' accounts).
        netns_node.sql("SET GLOBAL init_connect='DO GET_LOCK(\"sk_probe_block\", 5)'")
        assert_state("long-lock", netns_target(netns_node, mysql_creds, clustercheck_creds), tmp_path)
    finally:
        netns_node.sql("SET GLOBAL init_connect=''")
        holder.close()


def test_too_many_connections(netns_node, mysql_creds, clustercheck_creds, tmp_path):
    import pymysql
    netns_node.sql("SET GLOBAL max_connections=10")     # MariaDB's minimum
    held = []
    try:
        with pytest.raises(pymysql.err.OperationalError, match="Too many connections"):
            for _ in range(11):
                held.append(pymysql.connect(unix_socket=netns_node.socket, user=mysql_creds.user,
                                            password=mysql_creds.password, connect_timeout=5))
        assert len(held) == 10
        assert_state("too-many-connections", netns_target(netns_node, mysql_creds, clustercheck_creds),
                     tmp_path)
    finally:
        for c in held:
            c.close()
        netns_node.sql("SET GLOBAL max_connections=100")   # root: SUPER has a connection of its own


def test_killed(netns_node, mysql_creds, clustercheck_creds, tmp_path):
    netns_node.kill()
    try:
        assert_state("killed", netns_target(netns_node, mysql_creds, clustercheck_creds), tmp_path)
    finally:
        _restart_single_node(netns_node)


VERDICT = re.compile(r"(alive: |not alive: |ready: |not ready: ).+\n")


def test_restarting(netns_node, mysql_creds, tmp_path):
    """Probes run back to back while mysqld shuts down and starts again: each answers 0 or 1
    with one verdict line within its deadline + 100 ms, and 0 once the node is Synced again."""
    tgt = netns_target(netns_node, mysql_creds, None)
    runs, done = [], threading.Event()

    def restart():
        try:
            netns_node.stop()
            _restart_single_node(netns_node)
        finally:
            done.set()

    t = threading.Thread(target=restart)
    t.start()
    try:
        for i in range(400):                       # bounded; a restart takes a few seconds
            probe = ("liveness", "readiness")[i % 2]
            cell = pc.Cell(probe, 0, "", ("--timeout", "1"))
            cell_dir = tmp_path / f"r{i}"
            cell_dir.mkdir()
            argv, env = pc.cell_argv_env(cell, tgt, str(cell_dir))
            r = pc.run_in_netns(tgt.netns, argv, env)
            runs.append((done.is_set(), r))
            if done.is_set() and len([x for x in runs[-4:] if x[0] and x[1].rc == 0]) == 4:
                break
    finally:
        t.join(120)
    assert done.is_set(), "the node did not restart"
    for _, r in runs:
        assert r.rc in (0, 1) and not r.err and VERDICT.fullmatch(r.text), r
        assert r.wall <= 1.0 + pc.SLACK, r
    assert any(r.rc == 1 for _, r in runs), "no probe run saw the node down"
    assert all(r.rc == 0 for _, r in runs[-4:]), runs[-4:]
    seen = sorted({re.sub(r"\d+", "N", r.text.strip()) for _, r in runs})
    print(f"{len(runs)} runs during the restart; verdicts seen:\n  " + "\n  ".join(seen))


# -- one connection, no child process --------------------------------------------------------
def _strace(argv, env, out_file):
    return pc.run(["strace", "-f", "-qq", "-o", out_file, "-e",
                   "trace=execve,fork,vfork,clone,clone3,connect", *argv], env=env)


def _connections(node):
    return int(node.sql("SHOW GLOBAL STATUS LIKE 'Connections'")[0][1])


def test_one_connection_and_no_child_process(healthy_galera, healthy_async_pair, mysql_creds,
                                             clustercheck_creds, tmp_path):
    if not shutil.which("strace"):
        pytest.skip("strace is not installed (tests/deps.sh)")
    node, replica = healthy_galera[2], healthy_async_pair.replica
    cases = [("liveness", node), ("readiness", node), ("haproxy", node), ("clustercheck", node),
             ("replica", replica)]
    for i, (probe, srv) in enumerate(cases):
        cell = pc.Cell(probe, 0, "")
        cell_dir = tmp_path / f"c{i}"
        cell_dir.mkdir()
        argv, env = pc.cell_argv_env(cell, target(srv, mysql_creds, clustercheck_creds), str(cell_dir))
        trace = str(tmp_path / f"strace-{i}.txt")
        before = _connections(srv)
        r = _strace(argv, env, trace)
        after = _connections(srv)
        assert r.rc == 0, r
        # `after` counts our own second status connection too.
        assert after - before - 1 == 1, f"{probe}: mysqld counted {after - before - 1} connections\n{r}"
        with open(trace) as f:
            lines = f.read().splitlines()
        execs = [ln for ln in lines if " execve(" in ln]
        forks = [ln for ln in lines if re.search(r" (fork|vfork)\(", ln)
                 or (re.search(r" clone3?\(", ln) and "CLONE_THREAD" not in ln)]
        connects = [ln for ln in lines if f"sin_port=htons({srv.port})" in ln and " connect(" in ln]
        assert len(execs) == 1, f"{probe} executed other programs:\n" + "\n".join(execs)
        assert not forks, f"{probe} created processes:\n" + "\n".join(forks)
        assert len(connects) == 1, f"{probe} connected {len(connects)} times:\n" + "\n".join(connects)


def test_no_child_process_left_when_mysqld_hangs(healthy_galera, mysql_creds, clustercheck_creds,
                                                 tmp_path):
    if not shutil.which("strace"):
        pytest.skip("strace is not installed (tests/deps.sh)")
    node = healthy_galera[1]
    node.sigstop()
    try:
        for i, probe in enumerate(("liveness", "readiness", "haproxy", "clustercheck")):
            cell = pc.Cell(probe, 1, "", ("--timeout", "0.5"))
            cell_dir = tmp_path / f"c{i}"
            cell_dir.mkdir()
            argv, env = pc.cell_argv_env(cell, target(node, mysql_creds, clustercheck_creds),
                                         str(cell_dir))
            trace = str(tmp_path / f"strace-{i}.txt")
            r = _strace(argv, env, trace)
            assert r.rc == 1, r
            with open(trace) as f:
                text = f.read()
            assert text.count(" execve(") == 1, text
            assert not re.search(r" (fork|vfork)\(", text), text
            assert all("CLONE_THREAD" in ln for ln in text.splitlines() if re.search(r" clone3?\(", ln)), text
    finally:
        node.sigcont()


# -- clustercheck: the classic positional form and real sockets ------------------------------
@pytest.fixture
def argv_account(healthy_galera):
    """A throwaway account for the positional form, whose password is meant for argv."""
    node = healthy_galera[1]
    user, password = "cc_argv", "argv-" + secrets.token_hex(8)
    node.sql("CREATE USER IF NOT EXISTS %s@'127.0.0.%%' IDENTIFIED BY %s", (user, password))
    yield node, user, password
    node.sql("DROP USER IF EXISTS %s@'127.0.0.%%'", (user,))


def _positional(node, user, password, donor, log, readonly, cnf):
    with open(cnf, "w") as f:
        f.write(f"[client]\nhost={node.ip}\nport={node.port}\n")
    return [os.path.join(pc.BIN, "clustercheck"), "--disabled-file", os.path.join(os.path.dirname(cnf),
            "disabled"), user, password, donor, log, readonly, cnf]


def test_clustercheck_positional_xinetd_form(healthy_galera, argv_account, tmp_path):
    node, user, password = argv_account
    log, cnf = str(tmp_path / "cc.log"), str(tmp_path / "cc.cnf")
    synced, not_synced = pc.http_expected("synced"), pc.http_expected("not-synced")

    r = pc.run(_positional(node, user, password, "1", log, "0", cnf))
    assert (r.rc, r.out, r.err) == (0, synced, b""), r
    with open(log) as f:
        text = f.read()
    assert "clustercheck: warning: a password on the command line is visible" in text
    assert "synced: wsrep_local_state=4 (Synced), wsrep_cluster_status=Primary" in text
    assert password not in text

    node.desync()
    try:
        r = pc.run(_positional(node, user, password, "1", log, "0", cnf))
        assert (r.rc, r.out, r.err) == (0, synced, b""), r            # donor allowed (arg 3)
        r = pc.run(_positional(node, user, password, "0", log, "0", cnf))
        assert (r.rc, r.out, r.err) == (1, not_synced, b""), r
        r = pc.run(_positional(node, user, password, "", log, "", cnf))
        assert (r.rc, r.out, r.err) == (1, not_synced, b""), r        # empty = default 0
    finally:
        node.desync(False)
    node.set_read_only(True)
    try:
        r = pc.run(_positional(node, user, password, "0", log, "0", cnf))
        assert (r.rc, r.out, r.err) == (1, pc.http_expected("read-only"), b""), r
        r = pc.run(_positional(node, user, password, "0", log, "1", cnf))
        assert (r.rc, r.out, r.err) == (0, synced, b""), r
    finally:
        node.set_read_only(False)

    # On a terminal the warning shows on stderr too; never the password.
    master, slave = pty.openpty()
    try:
        p = subprocess.run(_positional(node, user, password, "1", "/dev/null", "0", cnf),
                           stdout=subprocess.PIPE, stderr=slave, stdin=subprocess.DEVNULL,
                           env=pc.clean_env(), timeout=30)
        os.close(slave)
        slave = None
        seen = b""
        with contextlib.suppress(OSError):
            while True:
                chunk = os.read(master, 4096)
                if not chunk:
                    break
                seen += chunk
    finally:
        if slave is not None:
            os.close(slave)
        os.close(master)
    assert p.returncode == 0 and p.stdout == synced
    assert b"warning: a password on the command line is visible" in seen
    assert password.encode() not in seen


def test_clustercheck_positional_defaults_file_may_be_absent(healthy_galera, argv_account, tmp_path):
    node, user, password = argv_account
    argv = _positional(node, user, password, "0", str(tmp_path / "cc.log"), "1", str(tmp_path / "cc.cnf"))
    argv[-1] = str(tmp_path / "absent.cnf")
    argv[1:1] = ["--host", node.ip, "--port", str(node.port)]
    r = pc.run(argv)
    assert (r.rc, r.out, r.err) == (0, pc.http_expected("synced"), b""), r


class InetdServer:
    """What xinetd does: accept, exec clustercheck with the socket as fds 0, 1 and 2."""

    def __init__(self, argv, env):
        self.argv, self.env = argv, env
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.rcs = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                p = subprocess.Popen(self.argv, stdin=conn, stdout=conn, stderr=conn, env=self.env)
            self.rcs.append(p.wait(30))

    def close(self):
        self.sock.close()


def http_fetch(port, request=b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", timeout=10.0, delay=0.0):
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        if delay:
            time.sleep(delay)
        if request:
            s.sendall(request)
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                return data
            data += chunk


def test_clustercheck_behind_an_inetd_socket(healthy_galera, argv_account, tmp_path):
    node, user, password = argv_account
    argv = _positional(node, user, password, "0", str(tmp_path / "cc.log"), "1", str(tmp_path / "cc.cnf"))
    srv = InetdServer(argv, pc.clean_env())
    synced = pc.http_expected("synced")
    try:
        assert http_fetch(srv.port) == synced                          # HAProxy httpchk
        assert http_fetch(srv.port, request=None) == synced           # a client that sends nothing
        assert http_fetch(srv.port, request=b"GET / HTTP/1.0\r\n\r\n", delay=0.05) == synced
        node.desync()
        try:
            assert http_fetch(srv.port) == pc.http_expected("not-synced")
        finally:
            node.desync(False)
        wait_for("4 clustercheck runs", lambda: len(srv.rcs) >= 4, 10, 0.05)
        assert srv.rcs[:4] == [0, 0, 0, 1]
    finally:
        srv.close()


def test_clustercheck_under_systemd_socket_activate(healthy_galera, mysql_creds, clustercheck_creds,
                                                   tmp_path):
    ssa = shutil.which("systemd-socket-activate")
    if not ssa:
        pytest.skip("systemd-socket-activate is not installed")
    node = healthy_galera[1]
    cell = pc.Cell("clustercheck", 0, "")
    argv, env = pc.cell_argv_env(cell, target(node, mysql_creds, clustercheck_creds), str(tmp_path))
    port = free_port()
    log = open(tmp_path / "ssa.log", "wb")
    p = subprocess.Popen([ssa, "-l", f"127.0.0.1:{port}", "--accept", "--inetd", *argv],
                         stdout=log, stderr=log, stdin=subprocess.DEVNULL, env=pc.clean_env(env))
    try:
        wait_for("systemd-socket-activate to listen",
                 lambda: b"Listening on" in (tmp_path / "ssa.log").read_bytes(), 10, 0.05)
        assert http_fetch(port) == pc.http_expected("synced")
        assert http_fetch(port, request=None) == pc.http_expected("synced")
    finally:
        p.terminate()
        p.wait(10)
        log.close()


# -- the table in the docs, and secrets ------------------------------------------------------
def test_docs_table_matches_the_cases():
    with open(pc.DOC) as f:
        doc = f.read()
    assert pc.markdown() in doc, ("docs/probes.md is out of date: regenerate its table with "
                                  "/usr/bin/python3 tests/integration/probes_cases.py --markdown")


def test_no_password_in_any_output(healthy_galera, mysql_creds, clustercheck_creds, tmp_path):
    """Failures that name the account (access denied, JSON) and everything run so far."""
    node = healthy_galera[1]
    tgt = target(node, mysql_creds, clustercheck_creds)
    for i, (probe, extra) in enumerate([("liveness", ("--json", "--user", "nobody-here")),
                                        ("readiness", ("--json", "--user", "nobody-here")),
                                        ("readiness", ("--replica",)),
                                        ("haproxy", ("--user", "nobody-here")),
                                        ("clustercheck", ("--json", "--user", "nobody-here"))]):
        cell = pc.Cell(probe, 1, "", extra)
        d = tmp_path / f"c{i}"
        d.mkdir()
        argv, env = pc.cell_argv_env(cell, tgt, str(d))
        r = pc.run(argv, env=env)
        assert r.rc == 1, r
    assert len(pc.OUTPUTS) >= 5
    for argv, out, err in pc.OUTPUTS:
        pc.assert_no_secret(out, f"stdout of {argv}")
        pc.assert_no_secret(err, f"stderr of {argv}")
    for path in tmp_path.rglob("clustercheck.log"):
        pc.assert_no_secret(path.read_text(), str(path))
