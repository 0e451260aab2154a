"""Liveness and readiness while a Galera node receives a state transfer, on the real cluster.

A joiner whose SST is held (servers.GaleraCluster.hold_sst: the donor side waits before an rsync
SST) is alive through the whole transfer whether or not ``sst_in_progress`` exists, because its
mysqld runs a joiner SST script; a donor's SST script, or another node's, never counts. A stale
``sst_in_progress`` (mysqld stopped or killed) keeps a node alive only for ``--sst-file-grace``,
or always with ``--trust-sst-file``. readiness-check stays not ready until the joiner is Synced.

Run: make all && /usr/bin/python3 -m pytest -q tests/integration/test_sst.py
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import time

import pytest

import probes_cases as pc
from servers import wait_for

LIVENESS = os.path.join(pc.BIN, "liveness-check")
READINESS = os.path.join(pc.BIN, "readiness-check")
CLUSTERCHECK = os.path.join(pc.BIN, "clustercheck")


@pytest.fixture(scope="module", autouse=True)
def _secrets(mysql_creds):
    pc.register_secret(mysql_creds.password)


def probe(binary, node, creds, *args, datadir=None, port=None):
    """One probe run against `node` (its datadir unless told), as JSON: (exit code, verdict)."""
    argv = [binary, "--host", node.ip, "--port", str(port or node.port), "--user", creds.user,
            "--password-file", creds.password_file, "--defaults-extra-file", "",
            "--datadir", datadir or node.datadir, "--recovery-file", "/nonexistent/recovery-case",
            "--timeout", "2", "--json", *args]
    r = pc.run(argv)
    lines = r.out.decode().splitlines()
    assert len(lines) == 1, (argv, r.out, r.err)
    return r.rc, json.loads(lines[0])


def alive(node, creds, *args, **kw):
    return probe(LIVENESS, node, creds, *args, **kw)


def ready(node, creds, *args, **kw):
    return probe(READINESS, node, creds, *args, **kw)


def sst_file(node):
    return os.path.join(node.datadir, "sst_in_progress")


def assert_joiner_alive(node, creds, with_file, *args):
    rc, v = alive(node, creds, *args)
    assert rc == 0 and v["reason"] == "sst", v
    # The evidence is this joiner's own mysqld and its own script.
    assert f"under mysqld pid {node.pid} " in v["message"], v
    assert "--role joiner" in v["message"], v
    assert ("sst_in_progress present" in v["message"]) == with_file, v


@pytest.mark.fault
def test_joiner_alive_through_a_slow_sst_with_and_without_the_file(healthy_galera, mysql_creds):
    """Alive on every probe, with the file or without it, by its own mysqld's joiner SST process; not ready; a donor's SST or another node's never keeps a node alive."""
    cluster = healthy_galera
    with cluster.held_sst(cluster[3]) as held:
        joiner, donor = held.joiner, held.donor
        others = [n for n in cluster if n is not joiner and n is not donor]

        # With the file: alive, and the reason names the joiner's SST process.
        assert os.path.exists(sst_file(joiner))
        for _ in range(3):
            assert_joiner_alive(joiner, mysql_creds, True)
            rc, v = ready(joiner, mysql_creds)
            assert rc == 1 and v["message"].startswith("not ready: connection refused"), v

        # Without it (an SST method that writes none): still alive, by the process alone, even
        # with no grace for files at all.
        os.unlink(sst_file(joiner))
        for _ in range(3):
            assert not os.path.exists(sst_file(joiner))
            assert_joiner_alive(joiner, mysql_creds, False)
            assert_joiner_alive(joiner, mysql_creds, False, "--sst-file-grace", "0")
            rc, v = ready(joiner, mysql_creds)
            assert rc == 1 and v["message"].startswith("not ready: connection refused"), v

        # The donor answers: alive by SQL. Its own SST script is a donor's: when its mysqld does
        # not answer (port 1 refuses), the donor script keeps nothing alive.
        rc, v = alive(donor, mysql_creds)
        assert rc == 0 and v["reason"] == "ok", v
        rc, v = alive(donor, mysql_creds, port=1)
        assert rc == 1 and v["reason"] == "connection refused", v
        # Another node's datadir on the same host: the joiner's SST is not its evidence either.
        for n in others:
            rc, v = alive(n, mysql_creds, port=1)
            assert rc == 1 and v["reason"] == "connection refused", v

        # The same through clustercheck --listen's /liveness.
        rc, v = probe_listen_liveness(joiner, mysql_creds)
        assert rc == 200 and v.startswith("alive: receiving an SST: "), v

    # Released (held_sst waited until Synced): alive and ready by SQL.
    rc, v = alive(joiner, mysql_creds)
    assert rc == 0 and v["reason"] == "ok", v
    rc, v = ready(joiner, mysql_creds)
    assert rc == 0 and v["message"].startswith("ready: wsrep_local_state=4 (Synced)"), v


@pytest.mark.fault
def test_liveness_and_readiness_while_the_transfer_runs_to_the_end(healthy_galera, mysql_creds):
    """Alive at every probe while its joiner SST process runs, with no sst_in_progress at all; not ready until Synced, then ready."""
    cluster = healthy_galera
    joiner = cluster[3]
    held = cluster.hold_sst(joiner)
    try:
        os.unlink(sst_file(joiner))            # no file at all: the process is the only evidence
        assert_joiner_alive(joiner, mysql_creds, False)
        cluster.release_sst()
        seen, deadline = [], time.monotonic() + 90
        while time.monotonic() < deadline:
            t = time.monotonic()
            rc_l, lv = alive(joiner, mysql_creds)
            rc_r, rv = ready(joiner, mysql_creds)
            seen.append((t, rc_l, lv["reason"], rc_r, rv["reason"], lv["message"]))
            if lv["reason"] == "sst":
                assert rc_l == 0 and rc_r == 1, (lv, rv)
            if rc_r == 0:
                assert rv["message"].startswith("ready: wsrep_local_state=4 (Synced)"), rv
                assert rc_l == 0 and lv["reason"] == "ok", lv
                break
            time.sleep(0.2)
        else:
            pytest.fail(f"the joiner never became ready: {seen[-5:]}")
        assert seen[0][1:5] == (0, "sst", 1, "connection refused"), seen[0]
        # Once the SST script has exited mysqld still loads what it received before it listens:
        # that moment (when there is one) has no evidence of life and is not alive. It comes only
        # after the last SST verdict, and is short.
        last_sst = max(i for i, s in enumerate(seen) if s[2] == "sst")
        gap = [s for s in seen[last_sst + 1:] if s[1] != 0]
        assert all(s[1] == 0 for s in seen[:last_sst + 1]), seen
        span = (gap[-1][0] - gap[0][0]) if gap else 0.0
        print(f"probes through the transfer: {len(seen)}, 'sst' {last_sst + 1}, not alive after the SST: "
              f"{len(gap)} over {span:.1f}s: {[s[5] for s in gap]}")
        assert span < 5.0, gap
        held.donor.wait_synced()
    finally:
        cluster.release_sst()
        cluster.heal()


def probe_listen_liveness(node, creds):
    """GET /liveness from a clustercheck --listen on a free loopback port."""
    import socket
    import subprocess

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    argv = [CLUSTERCHECK, "--listen", f"127.0.0.1:{port}", "--host", node.ip, "--port", str(node.port),
            "--user", creds.user, "--password-file", creds.password_file, "--defaults-extra-file", "",
            "--datadir", node.datadir, "--recovery-file", "/nonexistent/recovery-case", "--timeout", "2"]
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, env=pc.clean_env())
    try:
        def get():
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=5) as c:
                    c.sendall(b"GET /liveness HTTP/1.0\r\n\r\n")
                    data = b""
                    while chunk := c.recv(4096):
                        data += chunk
                    return data
            except OSError:
                return None
        data = wait_for("clustercheck --listen to answer", get, 10)
        head, _, body = data.partition(b"\r\n\r\n")
        return int(head.split()[1]), body.decode().strip()
    finally:
        p.terminate()
        p.wait(timeout=10)


@pytest.mark.fault
@pytest.mark.parametrize("how", ["stopped", "killed"])
def test_stale_sst_file_masks_a_dead_mysqld_only_for_the_grace_period(healthy_galera, mysql_creds, how):
    """Alive while the file is younger than --sst-file-grace or with --trust-sst-file; after the grace period not alive, and the message says the file was ignored and why."""
    node = healthy_galera[3]
    extra = []
    if how == "stopped":
        node.stop()
    else:
        node.kill()                              # SIGKILL: its pid file stays, naming a dead pid
        assert os.path.exists(node.pid_file)
        extra = ["--pid-file", node.pid_file]
    path = sst_file(node)
    try:
        with open(path, "w"):
            pass
        old = time.time() - 400
        os.utime(path, (old, old))
        # Older than the grace period (300 s by default) and no mysqld: ignored, and the message
        # says why.
        for args in ((), ("--sst-file-grace", "300", *extra)):
            rc, v = alive(node, mysql_creds, *args)
            assert rc == 1 and v["reason"] == "connection refused", v
            assert re.search(r"; sst_in_progress ignored: 40\ds old \(--sst-file-grace 300s\) and no mysqld runs ",
                             v["message"]), v
            if "--pid-file" in args:
                assert f"pid file {node.pid_file} names pid" in v["message"], v
        # Fresh: inside the grace period the file still means alive (an SST just began).
        os.utime(path)
        rc, v = alive(node, mysql_creds, "--sst-file-grace", "300", *extra)
        assert rc == 0 and v["reason"] == "bypass", v
        assert re.search(r"sst_in_progress present \([01]s old, under --sst-file-grace 300s\)$", v["message"]), v
        os.utime(path, (old, old))
        # The operator script's rule on request: the file alone keeps the node alive.
        rc, v = alive(node, mysql_creds, "--trust-sst-file", *extra)
        assert rc == 0 and v["message"].endswith("sst_in_progress present (--trust-sst-file)"), v
    finally:
        os.unlink(path)
        if how == "killed":
            # The others evict it after evs.inactive_timeout; heal() restarts it then.
            healthy_galera[1].wait_status("the killed node evicted (size 2)",
                                          lambda s: s.get("wsrep_cluster_size") == "2", 60)
        healthy_galera.heal()


# -- healthcheck: alive during an SST on request; credentials that outlive the datadir -----------
HEALTHCHECK = os.path.join(pc.BIN, "healthcheck")


def healthcheck(*args, env=None):
    r = pc.run([HEALTHCHECK, *args, "--json"], env=env)
    out = r.out.decode().splitlines()
    return r.rc, json.loads(out[-1]) if out else None, r.errtext


@pytest.mark.fault
def test_healthcheck_alive_during_sst(healthy_galera, mysql_creds, tmp_path):
    """Fails as healthcheck.sh does by default; with --alive-during-sst passes on the joiner's SST process, and a donor's SST keeps nothing alive."""
    cnf = tmp_path / "joiner.cnf"
    with healthy_galera.held_sst(healthy_galera[3]) as held:
        joiner = held.joiner
        cnf.write_text(f"[client]\nsocket={joiner.socket}\nport={joiner.port}\nuser={mysql_creds.user}\n")
        base = ["--no-defaults", f"--defaults-extra-file={cnf}", "--datadir", joiner.datadir]
        # healthcheck.sh's rule: no answer, not healthy.
        rc, v, err = healthcheck(*base, "--connect")
        assert rc == 1 and not v["tests"][0]["ok"], (v, err)
        # As a liveness probe: the joiner's SST keeps it alive, file or no file.
        for remove in (False, True):
            if remove:
                os.unlink(sst_file(joiner))
            rc, v, err = healthcheck(*base, "--alive-during-sst", "--connect")
            assert rc == 0, (v, err)
            reason = v["tests"][0]["reason"]
            assert reason.startswith("alive: receiving an SST: ") and f"mysqld pid {joiner.pid} " in reason, v
        # The donor's SST is no evidence for the donor's datadir when nothing answers.
        donor = held.donor
        cnf.write_text("[client]\nsocket=/nonexistent/sock\nport=1\n")
        rc, v, err = healthcheck(*base[:2], "--datadir", donor.datadir, "--alive-during-sst", "--connect")
        assert rc == 1, (v, err)


@pytest.mark.fault
def test_healthcheck_credentials_outside_the_datadir(healthy_galera, mysql_creds, tmp_path):
    """With the cnf stale or gone, a user and password from a Secret file or the environment still log in.

    An SST replaces the datadir and its .my-healthcheck.cnf (another node's password) or leaves
    none."""
    node = healthy_galera[2]
    datadir = tmp_path / "datadir"
    datadir.mkdir()
    replaced = datadir / ".my-healthcheck.cnf"
    replaced.write_text(f"[mariadb-client]\nsocket={node.socket}\nport={node.port}\nuser={mysql_creds.user}\n"
                        f"password={pc.WRONG_PASSWORD}\n")
    env = {"HEALTHCHECK_DATADIR": str(datadir)}
    rc, v, err = healthcheck("--connect", "--galera_online", env=env)
    assert rc == 1 and "Access denied" in err, (v, err)
    # From the environment (a Secret as a file, the user by name): over the datadir's file.
    secret = {"HEALTHCHECK_USER": mysql_creds.user, "HEALTHCHECK_PASSWORD_FILE": mysql_creds.password_file}
    rc, v, err = healthcheck("--connect", "--galera_online", env={**env, **secret})
    assert rc == 0, (v, err)
    rc, v, err = healthcheck("--connect", "--galera_online",
                             env={**env, "HEALTHCHECK_USER": mysql_creds.user,
                                  "HEALTHCHECK_PASSWORD": mysql_creds.password})
    assert rc == 0, (v, err)
    # The same from options.
    rc, v, err = healthcheck("--user", mysql_creds.user, "--password-file", mysql_creds.password_file,
                             "--connect", "--galera_online", env=env)
    assert rc == 0, (v, err)
    # The cnf gone altogether (only the socket from an option file); as nobody, so that no
    # unix_socket login of root's can pass for the secret's.
    replaced.unlink()
    with tempfile.NamedTemporaryFile("w", dir="/tmp", prefix="sk-sock-", suffix=".cnf") as sock_cnf:
        sock_cnf.write(f"[client]\nsocket={node.socket}\n")
        sock_cnf.flush()
        os.chmod(sock_cnf.name, 0o644)
        args = ["--su", "nobody", f"--defaults-extra-file={sock_cnf.name}", "--connect", "--galera_online"]
        rc, v, err = healthcheck(*args, env=env)
        assert rc == 1 and "Access denied" in err, (v, err)
        rc, v, err = healthcheck(*args, env={**env, **secret})
        assert rc == 0, (v, err)
    # A password file that cannot be read is an error (exit 1, as healthcheck's bad arguments).
    rc, v, err = healthcheck("--password-file", str(tmp_path / "absent"), "--connect", env=env)
    assert rc == 1 and err.startswith("healthcheck: password file "), (v, err)


# -- option files as the mariadb client reads them; --help names the server -----------------------
def test_dev_null_option_files_read_no_options(healthy_galera, mysql_creds):
    node = healthy_galera[2]
    for binary in (LIVENESS, READINESS):
        r = pc.run([binary, "--host", node.ip, "--port", str(node.port), "--user", mysql_creds.user,
                    "--password-file", mysql_creds.password_file, "--defaults-extra-file", "/dev/null",
                    "--datadir", "/nonexistent", "--recovery-file", "/nonexistent/recovery-case"])
        assert r.rc == 0, r
    r = pc.run([CLUSTERCHECK, "--host", node.ip, "--port", str(node.port), "--user", mysql_creds.user,
                "--password-file", mysql_creds.password_file, "--defaults-extra-file", "/dev/null"])
    assert r.rc == 0, r
    # healthcheck: /dev/null as the only option file, the socket from the environment; root logs
    # in through unix_socket, as the mariadb client would.
    rc, v, err = healthcheck("--defaults-file", "/dev/null", "--connect", "--galera_online",
                             env={"MYSQL_UNIX_PORT": node.socket, "HEALTHCHECK_DATADIR": "/nonexistent"})
    assert rc == 0, (v, err)
    # /dev/null as the extra file: nothing from it, then ~/.my.cnf as ever.
    with tempfile.TemporaryDirectory() as home:
        with open(os.path.join(home, ".my.cnf"), "w") as f:
            f.write(f"[client]\nsocket={node.socket}\n")
        rc, v, err = healthcheck("--defaults-extra-file", "/dev/null", "--connect", "--galera_online",
                                 env={"HOME": home, "HEALTHCHECK_DATADIR": "/nonexistent"})
        assert rc == 0, (v, err)


def test_help_names_what_each_binary_connects_to():
    want = {
        "liveness-check": "TCP port of mysqld.",
        "readiness-check": "TCP port of mysqld.",
        "clustercheck": "TCP port of mysqld.",
        "haproxy-check": "TCP port of mysqld.",
        "proxysql-check": "TCP port of ProxySQL's admin interface.",
        "healthcheck": "It connects to mariadbd through the unix",
        "proxysql-sync": "ProxySQL admin",
    }
    for binary, text in want.items():
        r = pc.run([os.path.join(pc.BIN, binary), "--help"])
        assert r.rc == 0 and text in r.out.decode(), (binary, r.out.decode()[:2000])
    r = pc.run([os.path.join(pc.BIN, "proxysql-check"), "--help"])
    assert "mysqld" not in r.out.decode(), r.out.decode()
