"""Bypass files count only from a trusted owner, on the real Galera cluster.

``/tmp/recovery-case``, ``sleep-forever``, ``sst_in_progress``, ``wsrep_recovery_verbose.log``,
mysqld's state file and clustercheck's disabled file change a verdict by being there. Each is
honoured only when it (and every symbolic link on the way) belongs to root, the probe's own user
or the datadir's owner (mysqld's user). Another user's file, here created by ``nobody`` in a
world-writable directory as any local user could, counts as absent and the verdict line names it:
``PATH ignored: owned by uid 65534, not root or uid 0``. Root's file, and the mysql user's when
the probe runs as mysql (``kubectl exec`` in a PXC pod), keep working as before.

Run: make all && SIDEKICK_BIN=$PWD/bin /usr/bin/python3 -m pytest -q tests/integration/test_bypass_owner.py
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import socket
import subprocess
import tempfile

import pytest

import probes_cases as pc
from servers import wait_for

NOBODY = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
AS_MYSQL = ["setpriv", "--reuid=mysql", "--regid=mysql", "--clear-groups"]
LIVENESS = os.path.join(pc.BIN, "liveness-check")
READINESS = os.path.join(pc.BIN, "readiness-check")
CLUSTERCHECK = os.path.join(pc.BIN, "clustercheck")
HEALTHCHECK = os.path.join(pc.BIN, "healthcheck")
NOBODY_UID = 65534


@pytest.fixture(scope="module", autouse=True)
def _secrets(mysql_creds):
    pc.register_secret(mysql_creds.password)


@pytest.fixture
def shared():
    """A world-writable sticky directory like /tmp, with a datadir in it that anyone may write
    (a careless mode, the only way another user gets a file into a datadir)."""
    d = tempfile.mkdtemp(prefix="sk-bypass-")
    os.chmod(d, 0o1777)
    os.mkdir(os.path.join(d, "data"))
    os.chmod(os.path.join(d, "data"), 0o1777)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def create(path, who=(), text=""):
    """Create `path` as user `who` (a setpriv prefix; () for root)."""
    subprocess.run([*who, "sh", "-c", 'printf "%s" "$2" > "$1"', "sh", path, text], check=True)
    assert os.path.exists(path)


def ignored(path, owner=NOBODY_UID, euid=0, datadir=None):
    """The line a probe running as `euid` gives for `path` owned by `owner`."""
    dd = os.stat(datadir).st_uid if datadir else None
    if dd is None or dd in (euid, 0):
        return f"{path} ignored: owned by uid {owner}, not root or uid {euid}"
    return f"{path} ignored: owned by uid {owner}, not root, uid {euid} or the datadir's owner uid {dd}"


def probe(binary, host, port, creds, datadir, recovery_file, *args, who=(), env=None):
    """One run as JSON: (exit code, verdict). `creds` None: no password (the probe runs as a user
    who cannot read the secret, against a port where nothing listens)."""
    argv = [*who, binary, "--host", host, "--port", str(port), "--defaults-extra-file", "",
            "--datadir", datadir, "--recovery-file", recovery_file, "--timeout", "2", "--json", *args]
    if creds:
        argv[len(who) + 1:len(who) + 1] = ["--user", creds.user, "--password-file", creds.password_file]
    r = pc.run(argv, env=env)
    lines = r.out.decode().splitlines()
    assert len(lines) == 1, r
    return r.rc, json.loads(lines[0])


@pytest.mark.fault
@pytest.mark.parametrize("binary", [LIVENESS, READINESS])
def test_recovery_file_of_another_user_is_ignored(healthy_galera, mysql_creds, shared, binary):
    """nobody's /tmp/recovery-case (or its symbolic link to root's file) is absent, and named; root's keeps the node up."""
    node = healthy_galera[1]
    rc_file = os.path.join(shared, "recovery-case")
    word = "alive" if binary == LIVENESS else "ready"
    down = free_port()
    line = ignored(rc_file, datadir=node.datadir)

    create(rc_file, NOBODY)
    # The node answers: its own verdict, and the line names the file that was not honoured.
    rc, v = probe(binary, node.ip, node.port, mysql_creds, node.datadir, rc_file)
    assert rc == 0 and v["reason"] == "ok" and v["message"].endswith("; " + line), v
    assert "recovery" not in v["message"].split(";")[0], v
    # Nothing answers: down, as if the file were absent.
    rc, v = probe(binary, "127.0.0.1", down, mysql_creds, node.datadir, rc_file)
    assert rc == 1 and v["message"].startswith(f"not {word}: connection refused"), v
    assert v["message"].endswith("; " + line), v

    # A symbolic link of nobody's to a file of root's is nobody's.
    os.unlink(rc_file)
    subprocess.run([*NOBODY, "ln", "-s", "/etc/hostname", rc_file], check=True)
    rc, v = probe(binary, "127.0.0.1", down, mysql_creds, node.datadir, rc_file)
    assert rc == 1 and v["message"].endswith("; " + line), v

    # Root's file: the bypass as ever.
    os.unlink(rc_file)
    create(rc_file)
    rc, v = probe(binary, "127.0.0.1", down, mysql_creds, node.datadir, rc_file)
    assert rc == 0 and v["reason"] == "bypass", v
    assert v["message"] == ("alive: recovery file present" if binary == LIVENESS
                            else "ready: recovery or sleep-forever file present"), v


@pytest.mark.fault
def test_datadir_files_of_another_user_are_ignored(healthy_galera, mysql_creds, shared):
    """In a datadir others may write, nobody's sleep-forever, sst_in_progress and wsrep_recovery_verbose.log are absent and named; the datadir owner's count."""
    node = healthy_galera[1]
    data = os.path.join(shared, "data")
    down = free_port()
    none = os.path.join(shared, "no-recovery-case")
    for name in ("sleep-forever", "sst_in_progress", "wsrep_recovery_verbose.log"):
        path = os.path.join(data, name)
        create(path, NOBODY)
        try:
            rc, v = probe(LIVENESS, "127.0.0.1", down, mysql_creds, data, none)
            assert rc == 1 and v["message"].startswith("not alive: connection refused"), v
            assert v["message"].endswith("; " + ignored(path)), v
            if name == "sleep-forever":
                rc, v = probe(READINESS, "127.0.0.1", down, mysql_creds, data, none)
                assert rc == 1 and v["message"].endswith("; " + ignored(path)), v
            # Against the real node: its verdict, and the line.
            rc, v = probe(LIVENESS, node.ip, node.port, mysql_creds, data, none)
            assert rc == 0 and v["reason"] == "ok" and v["message"].endswith("; " + ignored(path)), v
        finally:
            os.unlink(path)

    # The datadir's owner (mysql, who runs mysqld and writes sst_in_progress itself) is trusted:
    # the probe runs as root here.
    path = os.path.join(node.datadir, "sleep-forever")
    try:
        create(path, AS_MYSQL)
        rc, v = probe(LIVENESS, "127.0.0.1", down, mysql_creds, node.datadir, none)
        assert rc == 0 and v["message"] == f"alive: {node.datadir}/sleep-forever present", v
        rc, v = probe(READINESS, "127.0.0.1", down, mysql_creds, node.datadir, none)
        assert rc == 0 and v["message"] == "ready: recovery or sleep-forever file present", v
    finally:
        os.unlink(path)


@pytest.mark.fault
def test_state_file_of_another_user_is_ignored(mysql_creds, shared):
    """nobody's MYSQL_STATE_FILE saying startup keeps nothing alive; root's does."""
    state = os.path.join(shared, "mysql.state")
    data = os.path.join(shared, "data")
    down = free_port()
    env = {"MYSQL_STATE_FILE": state}
    create(state, NOBODY, "startup\n")
    rc, v = probe(LIVENESS, "127.0.0.1", down, mysql_creds, data, "/nonexistent", env=env)
    assert rc == 1 and v["message"].startswith("not alive: connection refused"), v
    assert v["message"].endswith("; " + ignored(state)), v
    os.unlink(state)
    create(state, (), "startup\n")
    rc, v = probe(LIVENESS, "127.0.0.1", down, mysql_creds, data, "/nonexistent", env=env)
    assert rc == 0 and v["message"] == "MySQL is starting up, not killing it...", v


@pytest.mark.fault
def test_the_probe_users_own_file_counts(shared):
    """A probe run as mysql (kubectl exec in a PXC pod) honours mysql's recovery file, not nobody's."""
    rc_file = os.path.join(shared, "recovery-case")
    data = os.path.join(shared, "data")          # root's: only root and mysql (the probe) are trusted
    down = free_port()
    mysql_uid = int(subprocess.check_output(["id", "-u", "mysql"]))
    for binary, up in ((LIVENESS, "alive: recovery file present"),
                       (READINESS, "ready: recovery or sleep-forever file present")):
        create(rc_file, AS_MYSQL)
        rc, v = probe(binary, "127.0.0.1", down, None, data, rc_file, who=AS_MYSQL)
        assert rc == 0 and v["message"] == up, v
        os.unlink(rc_file)
        create(rc_file, NOBODY)
        rc, v = probe(binary, "127.0.0.1", down, None, data, rc_file, who=AS_MYSQL)
        assert rc == 1 and v["message"].endswith("; " + ignored(rc_file, euid=mysql_uid)), v
        os.unlink(rc_file)


def clustercheck_argv(node, creds, disabled, *args):
    return [CLUSTERCHECK, "--host", node.ip, "--port", str(node.port), "--user", creds.user,
            "--password-file", creds.password_file, "--defaults-extra-file", "",
            "--disabled-file", disabled, "--timeout", "2", *args]


@pytest.mark.fault
def test_clustercheck_disabled_file_of_another_user_is_ignored(healthy_galera, clustercheck_creds, shared):
    """nobody's clustercheck.disabled takes no synced node out (200, and the line names it); root's does (503)."""
    node = healthy_galera[1]
    disabled = os.path.join(shared, "clustercheck.disabled")
    data = ["--datadir", os.path.join(shared, "data")]     # root's: root and the probe's user trusted
    line = ignored(disabled)
    create(disabled, NOBODY)
    r = pc.run(clustercheck_argv(node, clustercheck_creds, disabled, *data))
    assert r.rc == 0 and r.out == pc.http_expected("synced"), r
    r = pc.run(clustercheck_argv(node, clustercheck_creds, disabled, *data, "--json"))
    v = json.loads(r.out)
    assert r.rc == 0 and v["up"] and v["message"].endswith("; " + line), v
    os.unlink(disabled)
    create(disabled)
    r = pc.run(clustercheck_argv(node, clustercheck_creds, disabled, *data))
    assert r.rc == 1 and r.out == pc.http_expected("disabled"), r


def http_get(port, path):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        c.request("GET", path)
        r = c.getresponse()
        return r.status, r.read().decode().strip()
    finally:
        c.close()


@pytest.mark.fault
def test_clustercheck_listen_ignores_another_users_files(healthy_galera, clustercheck_creds, shared):
    """clustercheck --listen: nobody's disabled file leaves / at 200, and /liveness and /readiness give the node's own verdict naming nobody's recovery file; root's files work."""
    node = healthy_galera[1]
    disabled = os.path.join(shared, "clustercheck.disabled")
    rc_file = os.path.join(shared, "recovery-case")
    data = os.path.join(shared, "data")
    port = free_port()
    argv = clustercheck_argv(node, clustercheck_creds, disabled, "--listen", f"127.0.0.1:{port}",
                             "--datadir", data, "--recovery-file", rc_file, "--cache-ms", "0")
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         env=pc.clean_env())
    try:
        wait_for("clustercheck --listen", lambda: _answers(port), 10)
        create(disabled, NOBODY)
        create(rc_file, NOBODY)
        assert http_get(port, "/")[0] == 200
        # /liveness and /readiness ask this (healthy) node: up, and the line names the file.
        for path, word in (("/liveness", "alive"), ("/readiness", "ready")):
            status, body = http_get(port, path)
            assert status == 200 and body.startswith(word + ": ") and body.endswith("; " + ignored(rc_file)), body
        os.unlink(disabled)
        os.unlink(rc_file)
        create(disabled)
        create(rc_file)
        assert http_get(port, "/")[0] == 503
        assert http_get(port, "/liveness") == (200, "alive: recovery file present")
        assert http_get(port, "/readiness") == (200, "ready: recovery or sleep-forever file present")
    finally:
        p.terminate()
        p.wait(timeout=10)


def _answers(port):
    try:
        return http_get(port, "/healthz")
    except OSError:
        return None


@pytest.mark.fault
def test_clustercheck_listen_dead_server_with_another_users_recovery_file(clustercheck_creds, shared):
    """With nothing answering, nobody's recovery file does not make /liveness or /readiness 200."""
    rc_file = os.path.join(shared, "recovery-case")
    port = free_port()
    argv = [CLUSTERCHECK, "--host", "127.0.0.1", "--port", str(free_port()), "--user", clustercheck_creds.user,
            "--password-file", clustercheck_creds.password_file, "--defaults-extra-file", "",
            "--disabled-file", os.path.join(shared, "none"), "--timeout", "2", "--listen", f"127.0.0.1:{port}",
            "--datadir", os.path.join(shared, "data"), "--recovery-file", rc_file]
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         env=pc.clean_env())
    try:
        wait_for("clustercheck --listen", lambda: _answers(port), 10)
        create(rc_file, NOBODY)
        for path, word in (("/liveness", "alive"), ("/readiness", "ready")):
            status, body = http_get(port, path)
            assert status == 503 and body.startswith(f"not {word}: connection refused"), body
            assert body.endswith("; " + ignored(rc_file)), body
    finally:
        p.terminate()
        p.wait(timeout=10)


@pytest.mark.fault
def test_healthcheck_alive_during_sst_ignores_another_users_sleep_forever(shared, tmp_path):
    """healthcheck --alive-during-sst: nobody's sleep-forever keeps a dead server failing, named in the line; root's passes."""
    data = os.path.join(shared, "data")
    path = os.path.join(data, "sleep-forever")
    cnf = tmp_path / "none.cnf"
    cnf.write_text(f"[client]\nsocket=/nonexistent/sock\nport={free_port()}\n")
    argv = [HEALTHCHECK, "--no-defaults", f"--defaults-extra-file={cnf}", "--datadir", data,
            "--alive-during-sst", "--connect", "--json"]
    create(path, NOBODY)
    r = pc.run(argv)
    v = json.loads(r.out.decode().splitlines()[-1])
    assert r.rc == 1 and v["tests"][0]["reason"].endswith("; " + ignored(path)), (v, r.errtext)
    os.unlink(path)
    create(path)
    r = pc.run(argv)
    v = json.loads(r.out.decode().splitlines()[-1])
    assert r.rc == 0 and v["tests"][0]["reason"].startswith(f"alive: {data}/sleep-forever present"), (v, r.errtext)
