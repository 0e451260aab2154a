"""healthcheck (the MariaDB image's healthcheck.sh, with a deadline) against the real Galera cluster
and async pair: every test in every state of the probe state table, argument order and the final
implicit connect, option-file precedence, --su-mysql as root, unknown options, one connection per
run, and the upstream script side by side (HEALTHCHECK_SH, see test_differential_*).

The expected answers are data: healthcheck_cases.py (the same table docs/probes.md shows).

Run: make all && /usr/bin/python3 -m pytest -q tests/integration/test_healthcheck.py
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import pwd
import re
import shutil
import socket
import subprocess
import tempfile
import time
import types

import pytest

import healthcheck_cases as hcc
import probes_cases as pc
from test_clustercheck_http import listeners  # noqa: F401 (a fixture)

HC = os.path.join(pc.BIN, "healthcheck")
UPSTREAM = os.environ.get("HEALTHCHECK_SH", "")
NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


@pytest.fixture(scope="module", autouse=True)
def _secrets(mysql_creds):
    pc.register_secret(mysql_creds.password)


def write_cnf(path, node, creds, password=None, group="client", extra=""):
    """A [client] option file for `node`: its socket and port, the monitor account."""
    with open(path, "w") as f:
        f.write(f"[{group}]\nsocket={node.socket}\nport={node.port}\nuser={creds.user}\n"
                f"password={creds.password if password is None else password}\n{extra}")
    os.chmod(path, 0o600)
    return str(path)


def hc(args, env=None, timeout=30):
    return pc.run([HC, *args], env=env, timeout=timeout)


def check_cases(state, node, creds, tmp_path):
    """Run every row of `state` against `node`; return the rows that misbehaved."""
    cnf = write_cnf(tmp_path / "node.cnf", node, creds)
    bad = write_cnf(tmp_path / "bad.cnf", node, creds, password=pc.WRONG_PASSWORD)
    problems = []
    for row in hcc.STATES[state]:
        args = [a.format(cnf=cnf, bad=bad, datadir=node.datadir, cell=tmp_path) for a in row.args]
        rc, stderr = row.rc, row.stderr
        if rc is None:                  # --innodb_buffer_pool_loaded: what this server says
            status = node.value("SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS "
                                "WHERE VARIABLE_NAME='Innodb_buffer_pool_load_status'")
            rc, stderr = (0, []) if "load completed" in status else (1, [hcc.failed(
                "innodb_buffer_pool_loaded", "Innodb_buffer_pool_load_status=" + status.replace("…", ""))])
        r = hc(args, env=row.env)
        lines = r.errtext.splitlines()
        want = [hcc.line_regex(w, ip=node.ip, port=node.port, socket=node.socket) for w in stderr]
        ok = r.rc == rc and len(lines) == len(want) and all(w.fullmatch(l) for w, l in zip(want, lines))
        if row.within is not None and not (row.within <= r.wall <= row.within + pc.SLACK):
            ok = False
        if not ok:
            problems.append(f"{row}\n{r}")
    return problems


def assert_state(state, node, creds, tmp_path):
    problems = check_cases(state, node, creds, tmp_path)
    assert not problems, f"state {state!r}: {len(problems)} row(s) misbehaved:\n\n" + "\n\n".join(problems)


# -- Galera states ---------------------------------------------------------------------------
def test_healthy(healthy_galera, mysql_creds, tmp_path):
    node = healthy_galera[2]
    assert_state("healthy", node, mysql_creds, tmp_path)


def test_desynced(healthy_galera, mysql_creds, tmp_path):
    node = healthy_galera[2]
    node.desync()
    try:
        assert_state("desynced", node, mysql_creds, tmp_path)
    finally:
        node.desync(False)


def test_isolated_non_primary(healthy_galera, mysql_creds, tmp_path):
    node = healthy_galera[3]
    node.isolate()
    try:
        assert_state("isolated", node, mysql_creds, tmp_path)
    finally:
        node.unisolate(wait=False)


def test_sigstopped(healthy_galera, mysql_creds, tmp_path):
    node = healthy_galera[2]
    node.sigstop()
    try:
        assert_state("sigstopped", node, mysql_creds, tmp_path)
    finally:
        node.sigcont()


def test_stopped(healthy_galera, mysql_creds, tmp_path):
    node = healthy_galera[3]
    node.stop()
    assert_state("stopped", node, mysql_creds, tmp_path)


def test_read_only(healthy_galera, mysql_creds, tmp_path):
    node = healthy_galera[2]
    node.set_read_only(True)
    try:
        assert_state("read-only", node, mysql_creds, tmp_path)
    finally:
        node.set_read_only(False)


def test_joiner_during_sst(healthy_galera, mysql_creds, tmp_path):
    with healthy_galera.held_sst(healthy_galera[3]) as held:
        assert_state("joiner", held.joiner, mysql_creds, tmp_path)
        assert_state("desynced", held.donor, mysql_creds, tmp_path)


def test_wrong_password(healthy_galera, mysql_creds, tmp_path):
    # Node 1 listens on 127.0.0.1: the connect test's TCP fallback reaches it and is denied,
    # which counts as connected. Node 2 is on 127.0.0.2: the fallback finds nothing on localhost.
    assert_state("wrong-password", healthy_galera[1], mysql_creds, tmp_path)
    assert_state("wrong-password-no-tcp", healthy_galera[2], mysql_creds, tmp_path)


# -- async replica states --------------------------------------------------------------------
def test_replica_healthy_and_not_a_replica(healthy_async_pair, mysql_creds, tmp_path):
    assert_state("replica-healthy", healthy_async_pair.replica, mysql_creds, tmp_path)
    assert_state("not-a-replica", healthy_async_pair.primary, mysql_creds, tmp_path)


def test_replica_lagging(healthy_async_pair, mysql_creds, tmp_path):
    with healthy_async_pair.lagging(3):
        assert_state("replica-lagging", healthy_async_pair.replica, mysql_creds, tmp_path)


def test_replica_sql_stopped(healthy_async_pair, mysql_creds, tmp_path):
    pair = healthy_async_pair
    pair.stop_sql_thread()
    try:
        assert_state("replica-sql-stopped", pair.replica, mysql_creds, tmp_path)
    finally:
        pair.start_sql_thread()


def test_replica_io_stopped(healthy_async_pair, mysql_creds, tmp_path):
    pair = healthy_async_pair
    pair.replica.sql("STOP SLAVE IO_THREAD")
    try:
        assert_state("replica-io-stopped", pair.replica, mysql_creds, tmp_path)
    finally:
        pair.replica.sql("START SLAVE IO_THREAD")


def test_replica_primary_down_io_connecting(healthy_async_pair, mysql_creds, tmp_path):
    pair = healthy_async_pair
    pair.stop_primary()
    try:
        pair.replica.wait("Slave_IO_Running=Connecting",
                          lambda: pair.replica_status().get("Slave_IO_Running") == "Connecting", 30)
        assert_state("replica-io-connecting", pair.replica, mysql_creds, tmp_path)
    finally:
        pair.heal()


def test_replica_delayed(healthy_async_pair, mysql_creds, tmp_path):
    pair = healthy_async_pair
    r = pair.replica
    r.sql("STOP SLAVE")
    r.sql("CHANGE MASTER TO MASTER_DELAY=60")
    r.sql("START SLAVE")
    try:
        pair.write()
        r.wait("SQL_Remaining_Delay to be set",
               lambda: pair.replica_status().get("SQL_Remaining_Delay") is not None, 30)
        assert_state("replica-delayed", r, mysql_creds, tmp_path)
    finally:
        r.sql("STOP SLAVE")
        r.sql("CHANGE MASTER TO MASTER_DELAY=0")
        r.sql("START SLAVE")
        pair.heal()


def test_replica_multi_source_named_connection(healthy_async_pair, mysql_creds, tmp_path):
    r = healthy_async_pair.replica
    # A second, never started source: its threads are No, the default connection is healthy.
    r.sql("CHANGE MASTER 'src2' TO MASTER_HOST='127.0.0.1', MASTER_PORT=9, MASTER_USER='nobody'")
    try:
        assert_state("replica-multi-source", r, mysql_creds, tmp_path)
    finally:
        r.sql("RESET SLAVE 'src2' ALL")


# -- argument walk ---------------------------------------------------------------------------
def test_argument_order_and_the_final_connect(healthy_galera, mysql_creds, tmp_path):
    node = healthy_galera[2]
    assert_state("arguments", node, mysql_creds, tmp_path)
    cnf = write_cnf(tmp_path / "n.cnf", node, mysql_creds)

    def tests_run(*args):
        r = hc(["--json", f"--defaults-file={cnf}", *args])
        return r.rc, [(t["test"], t["ok"]) for t in json.loads(r.out)["tests"]]

    # No connect asked for: the run ends with one. Asked for: not again.
    assert tests_run("--innodb_initialized") == (0, [("innodb_initialized", True), ("connect", True)])
    assert tests_run("--connect", "--galera_ready") == (0, [("connect", True), ("galera_ready", True)])
    assert tests_run("--no-connect", "--galera_ready") == (0, [("galera_ready", True)])
    # A failed test ends the run: nothing after it is looked at.
    node.desync()
    try:
        assert tests_run("--galera_online", "--frobnicate") == (1, [("galera_online", False)])
    finally:
        node.desync(False)


def test_no_arguments_and_unknown_options(tmp_path):
    for args, err in [([], "At least one argument required"),
                      (["--frobnicate"], "healthcheck unknown option or test 'frobnicate'"),
                      (["connect"], "Unknown healthcheck option connect"),
                      (["--connect=1"], "healthcheck unknown option or test 'connect=1'"),
                      (["--no-connect", "--datadir"], "healthcheck: --datadir needs a value (the last argument)"),
                      (["--timeout", "soon", "--connect"],
                       "healthcheck: --timeout: 'soon' is not a number from 0.05 to 3600")]:
        r = hc(args)
        assert (r.rc, r.errtext, r.out) == (1, err + "\n", b""), r
    for args in (["--help"], ["--version"]):
        r = hc(args)
        assert r.rc == 0 and r.out and not r.err, r


def test_mariadbupgrade_lock(tmp_path):
    info = tmp_path / "mariadb_upgrade_info"
    info.write_text("10.11.19-MariaDB\n")
    r = hc(["--no-connect", f"--datadir={tmp_path}", "--mariadbupgrade"])
    assert r.rc == 0 and not r.err, r
    with open(info) as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        r = hc(["--no-connect", "--datadir", str(tmp_path), "--mariadbupgrade"])
    assert r.rc == 1, r
    assert r.errtext == f"healthcheck mariadbupgrade failed: {info} is locked: mariadb-upgrade is running\n", r


def test_one_connection_per_run(healthy_galera, mysql_creds, tmp_path):
    node = healthy_galera[2]
    cnf = write_cnf(tmp_path / "n.cnf", node, mysql_creds)

    def connections():
        return int(node.value("SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS "
                              "WHERE VARIABLE_NAME='Connections'"))
    a = connections()
    b = connections()
    r = hc([f"--defaults-file={cnf}", "--connect", "--innodb_initialized", "--innodb_buffer_pool_loaded",
            "--galera_ready", "--galera_online", "--replication", "--replication_io", "--replication"])
    c = connections()
    assert r.rc in (0, 1), r
    assert c - b == (b - a) + 1, f"healthcheck opened {c - b - (b - a)} connections"


# -- option files ----------------------------------------------------------------------------
def test_option_file_precedence(healthy_galera, mysql_creds, tmp_path):
    node = healthy_galera[2]
    home = tmp_path / "home"
    home.mkdir()
    bad = write_cnf(tmp_path / "bad.cnf", node, mysql_creds, password=pc.WRONG_PASSWORD)
    good = write_cnf(tmp_path / "good.cnf", node, mysql_creds)
    write_cnf(home / ".my.cnf", node, mysql_creds, group="mariadb-client")
    env = {"HOME": str(home)}
    t = ["--innodb_initialized"]
    # ~/.my.cnf is read after the extra file: its password wins.
    assert hc([f"--defaults-extra-file={bad}", *t], env=env).rc == 0
    # --defaults-file is the only file read: ~/.my.cnf does not rescue it.
    assert hc([f"--defaults-file={bad}", *t], env=env).rc == 1
    # --no-defaults: no file at all (the default socket does not exist here).
    assert hc([f"--defaults-file={good}", "--no-defaults", *t], env=env).rc == 1
    # ... and a later --defaults-file turns files on again.
    assert hc(["--no-defaults", f"--defaults-file={good}", *t], env=env).rc == 0
    # The group suffix: [client_sk] overrides [client].
    suffixed = write_cnf(tmp_path / "suffix.cnf", node, mysql_creds, password=pc.WRONG_PASSWORD,
                         extra=f"[client_sk]\npassword={mysql_creds.password}\n")
    assert hc([f"--defaults-file={suffixed}", *t]).rc == 1
    assert hc([f"--defaults-file={suffixed}", "--defaults-group-suffix=_sk", *t]).rc == 0
    # A missing required file fails every test, with the reason.
    r = hc([f"--defaults-file={tmp_path}/absent.cnf", *t])
    assert r.rc == 1 and "absent.cnf" in r.errtext, r
    # $datadir/.my-healthcheck.cnf is the default extra file (HEALTHCHECK_DATADIR moves the datadir).
    dd = tmp_path / "datadir"
    dd.mkdir()
    write_cnf(dd / ".my-healthcheck.cnf", node, mysql_creds, group="mariadb-client")
    env = {"HOME": str(home / "none"), "HEALTHCHECK_DATADIR": str(dd)}
    assert hc(t, env=env).rc == 0
    assert hc(["--no-defaults", *t], env=env).rc == 1


# -- --su ------------------------------------------------------------------------------------
def test_su_mysql_as_root(healthy_galera, mysql_creds, tmp_path):
    node = healthy_galera[2]
    d = tempfile.mkdtemp(prefix="sk-hc-")
    try:
        os.chmod(d, 0o755)
        cnf = write_cnf(os.path.join(d, "my.cnf"), node, mysql_creds)
        mysql = pwd.getpwnam("mysql")
        os.chown(cnf, mysql.pw_uid, mysql.pw_gid)
        r = hc(["--su-mysql", f"--defaults-file={cnf}", "--connect", "--innodb_initialized", "--json"])
        assert r.rc == 0 and not r.err, r
        assert [t["test"] for t in json.loads(r.out)["tests"]] == ["su", "connect", "innodb_initialized"]
        r = hc(["--su", "mysql", f"--defaults-file={cnf}", "--mariadbupgrade"])
        assert r.rc == 0, r
        # Settings before --su are forgotten, as by the script's exec.
        r = hc([f"--defaults-file={cnf}", "--su=mysql", "--innodb_initialized"])
        assert r.rc == 1 and r.errtext.startswith("healthcheck innodb_initialized failed: "), r
        os.chmod(cnf, 0o600)
        os.chown(cnf, 0, 0)
        r = hc(["--su-mysql", f"--defaults-file={cnf}", "--innodb_initialized"])
        assert r.rc == 1 and "Permission denied" in r.errtext, r
    finally:
        shutil.rmtree(d, ignore_errors=True)
    for args, err in [(["--su=nosuchuser-4711", "--connect"], "healthcheck: --su nosuchuser-4711: unknown user"),
                      (["--su-mysql"], "At least one argument required")]:
        r = hc(args)
        assert (r.rc, r.errtext) == (1, err + "\n"), r
    r = pc.run([*NOBODY, HC, "--su-mysql", "--connect"])
    assert (r.rc, r.errtext) == (1, "healthcheck: --su mysql: only root can change user\n"), r


# -- the upstream script, side by side -------------------------------------------------------
def upstream_or_skip():
    if not UPSTREAM:
        pytest.skip("HEALTHCHECK_SH is not set (the path of MariaDB/mariadb-docker's healthcheck.sh)")
    if not os.path.isfile(UPSTREAM):
        pytest.skip(f"HEALTHCHECK_SH={UPSTREAM}: no such file")
    if not shutil.which("mariadb"):
        pytest.skip("the upstream script needs the mariadb client (Debian: mariadb-client)")
    return UPSTREAM


def differ(rows, node, creds, tmp_path):
    script = upstream_or_skip()
    cnf = write_cnf(tmp_path / "node.cnf", node, creds)
    bad = write_cnf(tmp_path / "bad.cnf", node, creds, password=pc.WRONG_PASSWORD)
    out = []
    for args in rows:
        args = [a.format(cnf=cnf, bad=bad, datadir=node.datadir, cell=tmp_path) for a in args]
        ours = hc(args)
        theirs = pc.run(["bash", script, *args], timeout=60)
        if ours.rc != theirs.rc:
            out.append(f"{args}: ours {ours.rc}, healthcheck.sh {theirs.rc}\n{ours}\n{theirs}")
    return out


def test_differential_without_a_server(tmp_path):
    script = upstream_or_skip()
    problems = []
    for args in hcc.DIFFERENTIAL_NO_SERVER:
        ours, theirs = hc(args), pc.run(["bash", script, *args])
        # The script's own notices (Forcing ..., Unknown ...) are the same lines; ours add a reason.
        if ours.rc != theirs.rc or not set(theirs.errtext.splitlines()) <= set(ours.errtext.splitlines()) | {
                l for l in theirs.errtext.splitlines() if "bad array subscript" in l}:
            problems.append(f"{args}:\n{ours}\n{theirs}")
    assert not problems, "\n\n".join(problems)


def test_differential_galera(healthy_galera, mysql_creds, tmp_path):
    node = healthy_galera[2]
    problems = differ(hcc.DIFFERENTIAL, node, mysql_creds, tmp_path)
    node.desync()
    try:
        problems += differ(hcc.DIFFERENTIAL_GALERA, node, mysql_creds, tmp_path)
    finally:
        node.desync(False)
    problems += differ(hcc.DIFFERENTIAL_WRONG_PASSWORD, healthy_galera[1], mysql_creds, tmp_path)
    assert not problems, "\n\n".join(problems)


def test_differential_replica(healthy_async_pair, mysql_creds, tmp_path):
    pair = healthy_async_pair
    problems = differ(hcc.DIFFERENTIAL_REPLICA, pair.replica, mysql_creds, tmp_path)
    problems += differ(hcc.DIFFERENTIAL_REPLICA, pair.primary, mysql_creds, tmp_path)
    pair.stop_sql_thread()
    try:
        problems += differ(hcc.DIFFERENTIAL_REPLICA, pair.replica, mysql_creds, tmp_path)
    finally:
        pair.start_sql_thread()
    pair.replica.sql("STOP SLAVE IO_THREAD")
    try:
        problems += differ(hcc.DIFFERENTIAL_REPLICA, pair.replica, mysql_creds, tmp_path)
    finally:
        pair.replica.sql("START SLAVE IO_THREAD")
    with pair.lagging(3):
        problems += differ(hcc.DIFFERENTIAL_REPLICA, pair.replica, mysql_creds, tmp_path)
    assert not problems, "\n\n".join(problems)


def test_differential_isolated(healthy_galera, mysql_creds, tmp_path):
    node = healthy_galera[3]
    node.isolate()
    try:
        problems = differ(hcc.DIFFERENTIAL_GALERA, node, mysql_creds, tmp_path)
    finally:
        node.unisolate(wait=False)
    assert not problems, "\n\n".join(problems)


def test_differential_stopped(healthy_galera, mysql_creds, tmp_path):
    node = healthy_galera[3]
    node.stop()
    assert not (p := differ(hcc.DIFFERENTIAL, node, mysql_creds, tmp_path)), "\n\n".join(p)


def test_docs_table_matches_the_data():
    with open(pc.DOC) as f:
        doc = f.read()
    assert hcc.markdown() in doc, ("docs/probes.md is out of date: regenerate its healthcheck table with "
                                   "/usr/bin/python3 tests/integration/healthcheck_cases.py --markdown")


# -- over HTTP: clustercheck --listen --------------------------------------------------------
def get(ln, path):
    """GET `path` from the listener `ln` (anything with a .port) on a new connection:
    (status, body, seconds)."""
    t0 = time.monotonic()
    with socket.create_connection(("127.0.0.1", ln.port), timeout=10) as s:
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
        raw = b""
        while chunk := s.recv(65536):
            raw += chunk
    head, _, body = raw.partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), body.decode(), time.monotonic() - t0


@pytest.fixture
def http_listeners(listeners, tmp_path):
    """clustercheck --listen (test_clustercheck_http's fixture) with its files in tmp_path."""
    def make(node, *extra, env=None):
        return listeners(node, "--datadir", str(tmp_path), "--recovery-file", str(tmp_path / "recovery-case"),
                         *extra, env=env)
    return make


def connections(node):
    return int(node.value("SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS "
                          "WHERE VARIABLE_NAME='Connections'"))


def test_http_liveness_readiness_healthcheck(healthy_galera, http_listeners, tmp_path):
    node = healthy_galera[2]
    ln = http_listeners(node)
    ready = "ready: wsrep_local_state=4 (Synced), wsrep_cluster_status=Primary\n"
    assert get(ln, "/liveness")[:2] == (200, "alive: wsrep_cluster_status=Primary\n")
    c0 = connections(node)
    assert get(ln, "/readiness")[:2] == (200, ready)
    assert get(ln, "/healthcheck?connect&innodb_initialized")[:2] == (200, "healthy: connect, innodb_initialized\n")
    assert get(ln, "/healthcheck?galera_online&galera_ready")[:2] == (
        200, "healthy: galera_online, galera_ready, connect\n")
    assert get(ln, "/healthcheck?replication_io&replication")[:2] == (
        200, "healthy: replication, connect\n")
    assert get(ln, "/healthcheck?mariadbupgrade&no-connect")[:2] == (200, "healthy: mariadbupgrade\n")
    assert get(ln, "/")[0] == 200
    # Every path used the one persistent connection (the +1 is the connection reading the counter).
    assert connections(node) - c0 == 1
    assert get(ln, "/healthcheck?frobnicate")[:2] == (503, "healthcheck unknown option or test 'frobnicate'\n")
    assert get(ln, "/healthcheck")[:2] == (503, "At least one argument required\n")
    status, body = get(ln, "/healthcheck?connect&password=s3cr3t-over-http")[:2]
    assert status == 503 and "s3cr3t" not in body and "password is not taken" in body, (status, body)
    assert get(ln, "/healthcheck?datadir=/etc&mariadbupgrade")[:2] == (
        400, "healthcheck: 'datadir=/etc' is not accepted over HTTP\n")
    assert get(ln, "/nope")[0] == 404
    (tmp_path / "recovery-case").write_text("")
    assert get(ln, "/readiness")[:2] == (200, "ready: recovery or sleep-forever file present\n")
    (tmp_path / "recovery-case").unlink()

    node.desync()
    try:
        assert get(ln, "/healthcheck?connect&galera_online&innodb_initialized")[:2] == (
            503, "healthcheck galera_online failed: wsrep_local_state=2 (Donor/Desynced)\n")
        assert get(ln, "/readiness")[:2] == (
            200, "ready: wsrep_local_state=2 (Donor/Desynced), wsrep_cluster_status=Primary\n")
        assert get(ln, "/liveness")[0] == 200
        assert get(ln, "/")[0] == 503
    finally:
        node.desync(False)
    ln.stop()

    ln = http_listeners(node, env={"AVAILABLE_WHEN_DONOR": "0"})
    node.desync()
    try:
        assert get(ln, "/readiness")[:2] == (
            503, "not ready: wsrep_local_state=2 (Donor/Desynced), donor not allowed\n")
    finally:
        node.desync(False)
    ln.stop()


def test_http_sigstopped_within_the_deadline(healthy_galera, http_listeners):
    node = healthy_galera[2]
    ln = http_listeners(node)
    assert get(ln, "/liveness")[0] == 200
    node.sigstop()
    try:
        for path, body in [("/liveness", "not alive: timeout after 1.0s waiting for the query"),
                           ("/readiness", "not ready: timeout after 1.0s "),
                           ("/healthcheck?connect", "healthcheck connect failed: socket: timeout after 1.0s ")]:
            status, text, wall = get(ln, path)
            assert status == 503 and text.startswith(body), (path, status, text)
            assert wall <= 1.0 + 0.1 + 0.05, f"{path} took {wall:.3f}s"
    finally:
        node.sigcont()
    node.wait_ready() if hasattr(node, "wait_ready") else None
    wait = time.monotonic() + 30
    while get(ln, "/liveness")[0] != 200:
        assert time.monotonic() < wait, "the listener did not recover after SIGCONT"
        time.sleep(0.2)
    ln.stop()


# -- packaging: the static build, the Kubernetes and compose examples ------------------------
STATIC = os.environ.get("SIDEKICK_STATIC_BIN", os.path.join(pc.ROOT, "bin", "static"))
GALERA_SET = os.path.join(pc.ROOT, "k8s", "mariadb-galera")
COMPOSE = os.path.join(pc.ROOT, "containers", "healthcheck", "compose.yaml")


def static_or_skip():
    if not os.path.exists(os.path.join(STATIC, "healthcheck")):
        pytest.skip(f"no static healthcheck in {STATIC} (make static)")
    return os.path.join(STATIC, "healthcheck")


def healthcheck_cnf(datadir, node, creds):
    """What the mariadb entrypoint writes: $datadir/.my-healthcheck.cnf, [mariadb-client]."""
    os.makedirs(datadir, exist_ok=True)
    return write_cnf(os.path.join(datadir, ".my-healthcheck.cnf"), node, creds, group="mariadb-client")


def test_static_healthcheck_in_an_empty_root(healthy_galera, mysql_creds, tmp_path):
    import test_static as ts
    path = static_or_skip()
    headers = subprocess.run(["readelf", "-lW", path], capture_output=True, text=True, check=True).stdout
    assert "INTERP" not in headers and "DYNAMIC" not in headers, headers
    node = healthy_galera[1]                 # 127.0.0.1: the connect test's TCP fallback reaches it
    root = ts.Root(tmp_path / "root")
    root.add_binary("healthcheck")
    root.write("/my.cnf", f"[client]\nport={node.port}\nuser={mysql_creds.user}\npassword={mysql_creds.password}\n")
    r = root.run("/healthcheck", "--defaults-file=/my.cnf", "--connect", "--json")
    assert r.returncode == 0, ts.show(r)
    [t] = json.loads(r.stdout)["tests"]      # no socket in the root: TCP to localhost answered
    assert t["test"] == "connect" and t["ok"], t
    assert t["reason"].startswith("socket: connection refused (/run/mysqld/mysqld.sock): "), t
    r = root.run("/healthcheck", "--frobnicate")
    assert (r.returncode, r.stderr) == (1, "healthcheck unknown option or test 'frobnicate'\n"), ts.show(r)


def manifest_docs(path):
    import test_k8s as tk
    with open(path) as f:
        return tk.yaml_load_all(f.read())


def test_galera_manifests_validate():
    import test_k8s as tk
    files = sorted(os.path.join(GALERA_SET, f) for f in os.listdir(GALERA_SET))
    r = tk.run_validator(*files)
    assert r.returncode == 0, r.stdout + r.stderr
    yamllint = shutil.which("yamllint")
    assert yamllint, "yamllint not installed (make deps)"
    r = subprocess.run([yamllint, "-s", "-c", os.path.join(pc.ROOT, "tests", "k8s", "yamllint.yaml"), *files, COMPOSE],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def statefulset(path):
    [sts] = [d for d in manifest_docs(path) if d["kind"] == "StatefulSet"]
    return sts["spec"]["template"]["spec"]


def test_galera_exec_probes_run(healthy_galera, mysql_creds, tmp_path):
    """The exec probes exactly as written, /opt/sidekick mapped to the static build and the
    datadir (where .my-healthcheck.cnf is) to a directory of the test's."""
    static_or_skip()
    spec = statefulset(os.path.join(GALERA_SET, "statefulset.yaml"))
    [init] = spec["initContainers"]
    assert init["image"] == "sidekick-probes" and init["args"] == ["/opt/sidekick"]
    [db] = [c for c in spec["containers"] if c["name"] == "mariadb"]
    node = healthy_galera[2]
    env = {"HEALTHCHECK_DATADIR": str(tmp_path / "datadir"), **secret_env(db["env"], tmp_path, mysql_creds)}
    # The datadir's .my-healthcheck.cnf as an SST leaves it: another node's password.
    write_cnf(healthcheck_cnf(tmp_path / "datadir", node, mysql_creds), node, mysql_creds,
              password=pc.WRONG_PASSWORD, group="mariadb-client")
    for kind in ("startupProbe", "livenessProbe", "readinessProbe"):
        probe = db[kind]
        argv = [a.replace("/opt/sidekick", STATIC) for a in probe["exec"]["command"]]
        r = pc.run(argv, env=env)
        assert r.rc == 0 and r.wall < probe["timeoutSeconds"], (kind, str(r))
    node.sigstop()
    try:
        for kind in ("livenessProbe", "readinessProbe"):
            probe = db[kind]
            r = pc.run([a.replace("/opt/sidekick", STATIC) for a in probe["exec"]["command"]], env=env)
            assert r.rc == 1 and r.wall < probe["timeoutSeconds"], (kind, str(r))
    finally:
        node.sigcont()


def secret_env(container_env, tmp_path, creds):
    """The HEALTHCHECK_* variables of a manifest, the Secret's file mapped to one of the test's."""
    pw = tmp_path / "healthcheck-password"
    pw.write_text(creds.password)
    pw.chmod(0o600)
    env = {e["name"]: e["value"] for e in container_env if e["name"].startswith("HEALTHCHECK_")}
    assert env["HEALTHCHECK_USER"] == "probe" and env["HEALTHCHECK_PASSWORD_FILE"].startswith("/run/secrets/"), env
    env["HEALTHCHECK_USER"] = creds.user
    env["HEALTHCHECK_PASSWORD_FILE"] = str(pw)
    return env


def test_galera_httpget_probes_answer(healthy_galera, mysql_creds, tmp_path):
    """The sidecar's command as written (the socket, the secret and the port mapped), then each
    httpGet probe's path against it."""
    spec = statefulset(os.path.join(GALERA_SET, "statefulset-httpget.yaml"))
    [side] = [c for c in spec["containers"] if c["name"] == "probes-http"]
    [db] = [c for c in spec["containers"] if c["name"] == "mariadb"]
    node = healthy_galera[2]
    pw = tmp_path / "healthcheck-password"
    pw.write_text(mysql_creds.password)
    pw.chmod(0o600)
    mapping = {"/probes/clustercheck": os.path.join(pc.BIN, "clustercheck"), "9200": "127.0.0.1:0",
               "/run/mysqld/mysqld.sock": node.socket, "probe": mysql_creds.user,
               "/run/secrets/probe/healthcheck-password": str(pw)}
    argv = [mapping.get(a, a) for a in side["command"] + side["args"]]
    log = open(tmp_path / "sidecar.log", "wb")
    proc = subprocess.Popen(argv, stdout=log, stderr=log, stdin=subprocess.DEVNULL, env=pc.clean_env())
    try:
        deadline = time.monotonic() + 10
        while not (m := re.search(rb'port (\d+)\)', (tmp_path / "sidecar.log").read_bytes())):
            assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "sidecar.log").read_text()
            time.sleep(0.02)
        sidecar = types.SimpleNamespace(port=int(m.group(1)))
        for kind in ("startupProbe", "livenessProbe", "readinessProbe"):
            probe = db[kind]["httpGet"]
            assert probe["port"] == 9200
            status, body, wall = get(sidecar, probe["path"])
            assert status == 200 and wall < db[kind]["timeoutSeconds"], (kind, status, body)
    finally:
        proc.terminate()
        proc.wait(5)
        log.close()


def test_compose_healthcheck_runs(healthy_galera, mysql_creds, tmp_path):
    static_or_skip()
    [compose] = manifest_docs(COMPOSE)
    hc_test = compose["services"]["mariadb"]["healthcheck"]
    assert hc_test["test"][0] == "CMD"
    assert "sidekick:/opt/sidekick:ro" in compose["services"]["mariadb"]["volumes"]
    assert compose["services"]["install-probes"]["command"] == ["/opt/sidekick"]
    mariadb = compose["services"]["mariadb"]
    assert mariadb["secrets"] == ["probe-password"] and "probe-password" in compose["secrets"]
    node = healthy_galera[2]
    write_cnf(healthcheck_cnf(tmp_path / "datadir", node, mysql_creds), node, mysql_creds,
              password=pc.WRONG_PASSWORD, group="mariadb-client")
    container_env = [{"name": k, "value": v} for k, v in mariadb["environment"].items()]
    r = pc.run([a.replace("/opt/sidekick", STATIC) for a in hc_test["test"][1:]],
               env={"HEALTHCHECK_DATADIR": str(tmp_path / "datadir"),
                    **secret_env(container_env, tmp_path, mysql_creds)})
    assert r.rc == 0 and r.wall < float(hc_test["timeout"].rstrip("s")), r
