"""Tests of the integration harness itself (servers.py + conftest.py).

They check that the servers are what docs/testing.md promises: a 3-node Galera
cluster that is Synced/Primary on 127.0.0.1-3, each state transition producing the
wsrep status values a health check must tell apart, a replicating GTID pair whose
lag / stopped / broken states look as documented, secrets that stay in files, and
cleanup that leaves no mariadbd behind.
"""

from __future__ import annotations

import os
import signal
import socket
import stat
import subprocess
import sys
import textwrap
import time

import pymysql
import pytest

import servers

HERE = os.path.dirname(os.path.abspath(__file__))


# -- helpers ---------------------------------------------------------------------
def connect_tcp(ip, port, creds, timeout=5):
    """Connect like a probe does: password read from the secret file."""
    with open(creds.password_file) as f:
        password = f.read()
    return pymysql.connect(host=ip, port=port, user=creds.user, password=password,
                           connect_timeout=timeout, read_timeout=timeout,
                           write_timeout=timeout, autocommit=True)


def query(conn, sql):
    with conn.cursor() as cur:
        cur.execute(sql)
        return cur.fetchall()


def status_over_tcp(node, creds):
    conn = connect_tcp(node.ip, node.port, creds)
    try:
        return dict(query(conn, "SHOW GLOBAL STATUS LIKE 'wsrep_%'"))
    finally:
        conn.close()


def listening(pid):
    """Local addresses (ip, port) that process ``pid`` listens on (TCP)."""
    out = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True,
                         timeout=10).stdout
    addrs = []
    for line in out.splitlines():
        if f"pid={pid}," in line:
            local = line.split()[3]
            ip, port = local.rsplit(":", 1)
            addrs.append((ip.strip("[]"), int(port)))
    return addrs


def refused(ip, port):
    try:
        socket.create_connection((ip, port), timeout=2).close()
    except ConnectionRefusedError:
        return True
    return False


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait(what, predicate, timeout=30):
    return servers.wait_for(what, predicate, timeout, interval=0.25)


# -- Galera: healthy ---------------------------------------------------------------
def test_cluster_is_three_synced_primary_nodes(galera, mysql_creds):
    assert len(galera) == 3
    uuids = set()
    for i, node in enumerate(galera, start=1):
        s = status_over_tcp(node, mysql_creds)
        assert s["wsrep_local_state"] == "4"
        assert s["wsrep_local_state_comment"] == "Synced"
        assert s["wsrep_cluster_status"] == "Primary"
        assert s["wsrep_cluster_size"] == "3"
        assert s["wsrep_ready"] == "ON"
        assert s["wsrep_connected"] == "ON"
        uuids.add(s["wsrep_cluster_state_uuid"])
        assert node.ip == f"127.0.0.{i}" and node.port == 3310 + i
        assert node.sql("SELECT @@bind_address, @@port")[0] == (node.ip, node.port)
        assert node.sql("SELECT @@wsrep_sst_method")[0][0] == "rsync"
        assert node.sql("SELECT @@performance_schema")[0][0] == 0
        assert len(node.socket) < 108
    assert len(uuids) == 1


def test_every_server_listens_on_its_loopback_address_only(galera, async_pair):
    for node in galera:
        addrs = listening(node.pid)
        assert addrs, f"{node.name} listens nowhere?"
        assert all(ip == node.ip for ip, _ in addrs), addrs
        ports = {p for _, p in addrs}
        assert {node.port, node.gcomm_port} <= ports, addrs
    for s in (async_pair.primary, async_pair.replica):
        assert {a for a in listening(s.pid)} == {("127.0.0.1", s.port)}


def test_secret_files_and_client_cnf(mysql_creds, clustercheck_creds, sidekick_workspace):
    ws = sidekick_workspace
    for creds in (mysql_creds, clustercheck_creds):
        for path in (creds.password_file, creds.defaults_file):
            mode = stat.S_IMODE(os.stat(path).st_mode)
            assert mode == 0o600, (path, oct(mode))
        with open(creds.password_file) as f:
            text = f.read()
        assert text == creds.password and "\n" not in text and len(text) >= 16
        with open(creds.defaults_file) as f:
            cnf = f.read()
        assert cnf == f"[client]\nuser={creds.user}\npassword={creds.password}\n"
    assert os.path.basename(mysql_creds.password_file) == "monitor"
    assert os.path.relpath(mysql_creds.password_file, ws.base) == "secrets/monitor"
    assert stat.S_IMODE(os.stat(ws.client_cnf).st_mode) == 0o600
    assert mysql_creds.password not in repr(mysql_creds)
    assert mysql_creds.password not in str(mysql_creds)
    assert len(ws.base) < 30


def test_no_password_on_any_command_line(galera, async_pair, sidekick_workspace):
    pws = [c.password.encode() for c in sidekick_workspace.creds.values()]
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read()
        except OSError:
            continue
        for pw in pws:
            assert pw not in cmd, f"password on the command line of pid {entry}"
    for s in servers.all_servers():
        if s.running:
            with open(f"/proc/{s.pid}/environ", "rb") as f:
                env = f.read()
            assert not any(pw in env for pw in pws)
            assert b"MYSQL_PWD" not in env


def test_monitor_user_via_defaults_file_and_socket(galera, mysql_creds, clustercheck_creds):
    # The mariadb client, password only in the option file.
    out = subprocess.run(
        ["mariadb", f"--defaults-extra-file={mysql_creds.defaults_file}",
         "-h", "127.0.0.2", "-P", "3312", "-N", "-B",
         "-e", "SHOW GLOBAL STATUS LIKE 'wsrep_cluster_size'"],
        capture_output=True, text=True, timeout=20)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["wsrep_cluster_size", "3"]
    # @localhost over the unix socket.
    conn = pymysql.connect(unix_socket=galera[1].socket, user=clustercheck_creds.user,
                           password=clustercheck_creds.password, connect_timeout=5)
    try:
        assert query(conn, "SELECT CURRENT_USER()")[0][0] == "clustercheckuser@localhost"
        assert dict(query(conn, "SHOW GLOBAL STATUS LIKE 'wsrep_ready'"))["wsrep_ready"] == "ON"
    finally:
        conn.close()
    # From every node's address (the users were replicated by Galera).
    for node in galera:
        conn = connect_tcp(node.ip, node.port, clustercheck_creds)
        conn.close()


# -- Galera: transitions ---------------------------------------------------------------
def test_desync_gives_donor_desynced_and_writes_work(healthy_galera):
    node = healthy_galera[2]
    node.desync(True)
    s = node.status()
    assert (s["wsrep_local_state"], s["wsrep_local_state_comment"]) == ("2", "Donor/Desynced")
    assert s["wsrep_cluster_status"] == "Primary" and s["wsrep_ready"] == "ON"
    node.sql(f"CREATE TABLE IF NOT EXISTS {servers.HARNESS_DB}.t (id INT PRIMARY KEY)")
    node.sql(f"REPLACE INTO {servers.HARNESS_DB}.t VALUES (1)")
    assert healthy_galera[1].value(f"SELECT COUNT(*) FROM {servers.HARNESS_DB}.t") == 1
    healthy_galera.heal()
    assert node.status()["wsrep_local_state"] == "4"
    assert node.value("SELECT @@wsrep_desync") == 0


def test_read_only_leaves_wsrep_unchanged_and_refuses_writes(healthy_galera):
    node = healthy_galera[3]
    node.set_read_only(True)
    s = node.status()
    assert (s["wsrep_local_state"], s["wsrep_cluster_status"], s["wsrep_ready"]) == \
        ("4", "Primary", "ON")
    assert node.value("SELECT @@read_only") == 1
    db = servers.HARNESS_DB
    node.sql(f"CREATE TABLE IF NOT EXISTS {db}.ro (id INT PRIMARY KEY)")  # root may
    pw = "w" + os.urandom(8).hex()
    node.sql("CREATE USER IF NOT EXISTS 'sk_writer'@'localhost' IDENTIFIED BY %s", (pw,))
    node.sql(f"GRANT INSERT ON {db}.* TO 'sk_writer'@'localhost'")
    try:
        conn = pymysql.connect(unix_socket=node.socket, user="sk_writer", password=pw,
                               connect_timeout=5, autocommit=True)
        with pytest.raises(pymysql.err.OperationalError) as exc:
            query(conn, f"INSERT INTO {db}.ro VALUES (1)")
        conn.close()
        assert exc.value.args[0] == 1290
    finally:
        node.sql("DROP USER IF EXISTS 'sk_writer'@'localhost'")
    healthy_galera.heal()
    assert node.value("SELECT @@read_only") == 0


def test_isolate_gives_non_primary(healthy_galera, mysql_creds):
    node, other = healthy_galera[3], healthy_galera[1]
    t0 = time.monotonic()
    node.isolate()
    took = time.monotonic() - t0
    s = node.status()
    assert s["wsrep_cluster_status"] == "non-Primary"
    assert s["wsrep_local_state"] == "0" and s["wsrep_ready"] == "OFF"
    conn = connect_tcp(node.ip, node.port, mysql_creds)
    try:
        assert query(conn, "SELECT 1")[0][0] == 1
        with pytest.raises(pymysql.err.MySQLError) as exc:
            query(conn, "SELECT COUNT(*) FROM mysql.db")
        assert exc.value.args[0] == 1047
    finally:
        conn.close()
    wait("node1 to see size 2", lambda: other.status()["wsrep_cluster_size"] == "2")
    assert other.status()["wsrep_cluster_status"] == "Primary"
    node.unisolate()
    assert node.is_synced()
    print(f"isolate took {took:.1f}s")
    assert took < 20


def test_sigstop_accepts_tcp_but_never_greets(healthy_galera, mysql_creds):
    node = healthy_galera[2]
    node.sigstop()
    try:
        sock = socket.create_connection((node.ip, node.port), timeout=2)
        sock.settimeout(1.0)
        with pytest.raises(socket.timeout):
            sock.recv(1)
        sock.close()
        t0 = time.monotonic()
        with pytest.raises(pymysql.err.OperationalError) as exc:
            connect_tcp(node.ip, node.port, mysql_creds, timeout=1)
        assert exc.value.args[0] == 2013
        assert time.monotonic() - t0 < 3
    finally:
        node.sigcont(wait=True)
    healthy_galera.heal()


def test_stop_and_start(healthy_galera):
    node, other = healthy_galera[2], healthy_galera[1]
    pid = node.pid
    node.stop()
    assert not node.running and node.pid == pid
    assert refused(node.ip, node.port)
    wait("size 2 after SIGTERM", lambda: other.status()["wsrep_cluster_size"] == "2", 10)
    node.start()
    assert node.is_synced() and node.pid != pid
    healthy_galera.wait_healthy(30)


def test_kill_and_start(healthy_galera):
    node, other = healthy_galera[3], healthy_galera[1]
    node.kill()
    assert refused(node.ip, node.port)
    # SIGKILL: the others only notice after the evs timeouts (~10 s).
    wait("size 2 after SIGKILL", lambda: other.status()["wsrep_cluster_size"] == "2", 40)
    node.start(timeout=90)
    healthy_galera.wait_healthy(30)


def test_held_sst_joiner_refuses_and_donor_is_desynced(healthy_galera, mysql_creds):
    joiner = healthy_galera[3]
    with healthy_galera.held_sst(joiner) as held:
        assert held.joiner is joiner and held.donor is not joiner
        time.sleep(1)                               # it stays that way
        assert joiner.running
        assert refused(joiner.ip, joiner.port)
        with pytest.raises(pymysql.err.OperationalError) as exc:
            connect_tcp(joiner.ip, joiner.port, mysql_creds, timeout=2)
        assert exc.value.args[0] == 2003
        s = status_over_tcp(held.donor, mysql_creds)
        assert (s["wsrep_local_state"], s["wsrep_local_state_comment"]) == \
            ("2", "Donor/Desynced")
        assert s["wsrep_cluster_status"] == "Primary" and s["wsrep_ready"] == "ON"
        assert s["wsrep_cluster_size"] == "3"
    assert joiner.is_synced() and held.donor.is_synced()
    healthy_galera.wait_healthy(30)


def test_heal_repairs_many_things_at_once(healthy_galera):
    g = healthy_galera
    g[1].desync(True)
    g[2].set_read_only(True)
    g[3].stop()
    assert g.problems()
    t0 = time.monotonic()
    g.heal()
    assert g.problems() == []
    assert time.monotonic() - t0 < 60


def test_heal_rebootstraps_when_every_node_is_down(healthy_galera):
    g = healthy_galera
    g.stop()
    assert not any(n.running for n in g)
    g.heal()
    assert g.problems() == []


# -- async pair ---------------------------------------------------------------------
def test_async_replica_replicates(async_pair, mysql_creds):
    p, r = async_pair.primary, async_pair.replica
    assert (p.ip, p.port, r.ip, r.port) == ("127.0.0.1", 3321, "127.0.0.1", 3322)
    assert r.value("SELECT @@read_only") == 1 and p.value("SELECT @@read_only") == 0
    db = servers.HARNESS_DB
    p.sql(f"CREATE TABLE IF NOT EXISTS {db}.rep (id INT PRIMARY KEY, v VARCHAR(20))")
    p.sql(f"REPLACE INTO {db}.rep VALUES (1, 'hello')")
    async_pair.wait_caught_up()
    assert r.value(f"SELECT v FROM {db}.rep WHERE id=1") == "hello"
    # The monitor user can read replica status over TCP.
    conn = connect_tcp(r.ip, r.port, mysql_creds)
    try:
        with conn.cursor(pymysql.cursors.DictCursor) as cur:
            cur.execute("SHOW REPLICA STATUS")
            st = cur.fetchone()
    finally:
        conn.close()
    assert st["Slave_IO_Running"] == "Yes" and st["Slave_SQL_Running"] == "Yes"
    assert st["Seconds_Behind_Master"] == 0
    assert st["Using_Gtid"] == "Slave_Pos"
    assert st["Master_Port"] == 3321


def test_lag_grows_while_held(healthy_async_pair):
    pair = healthy_async_pair
    lag = pair.lag(min_seconds=2)
    assert lag >= 2
    time.sleep(1.5)
    later = pair.seconds_behind()
    assert later > lag
    st = pair.replica_status()
    assert st["Slave_IO_Running"] == "Yes" and st["Slave_SQL_Running"] == "Yes"
    pair.unlag()
    assert pair.seconds_behind() == 0


def test_stopped_sql_thread_has_null_lag(healthy_async_pair):
    pair = healthy_async_pair
    pair.stop_sql_thread()
    st = pair.replica_status()
    assert st["Slave_SQL_Running"] == "No" and st["Slave_IO_Running"] == "Yes"
    assert st["Seconds_Behind_Master"] is None
    pair.start_sql_thread()
    pair.wait_caught_up()


def test_broken_sql_thread(healthy_async_pair):
    pair = healthy_async_pair
    st = pair.break_sql()
    assert st["Slave_SQL_Running"] == "No"
    assert st["Last_SQL_Errno"] == 1062
    assert st["Seconds_Behind_Master"] is None
    pair.heal()
    assert pair.seconds_behind() == 0


def test_primary_down_io_connecting(healthy_async_pair):
    pair = healthy_async_pair
    pair.stop_primary()
    st = wait("IO thread Connecting with 2003",
              lambda: (lambda s: s if s["Slave_IO_Running"] == "Connecting"
                       and s["Last_IO_Errno"] == 2003 else None)(pair.replica_status()))
    assert st["Slave_SQL_Running"] == "Yes"
    pair.start_primary()
    pair.heal()
    pair.write()
    pair.wait_caught_up()


# -- cleanup paths -------------------------------------------------------------------
CHILD = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, {here!r})
    {setup}
    s = servers.MariaDB(ws, "p1", "127.0.0.1", {port})
    s.init_from_template()
    s.start()
    print(ws.base, s.pid, flush=True)
    time.sleep(120)
""")


def _run_child(setup, port):
    code = CHILD.format(here=HERE, setup=setup, port=port)
    proc = subprocess.Popen([sys.executable if sys.executable.startswith("/usr/bin/")
                             else "/usr/bin/python3", "-c", code],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline().split()
    if len(line) != 2:
        proc.kill()
        raise AssertionError(f"child failed: {proc.stderr.read()}")
    return proc, line[0], int(line[1])


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _gone(base, pid):
    return not _alive(pid) and not os.path.exists(base) and not servers._procs_under(base)


def test_watchdog_cleans_up_after_sigkill():
    proc, base, pid = _run_child("import servers\nws = servers.Workspace()", free_port())
    assert os.path.exists(f"/proc/{pid}")
    proc.kill()
    proc.wait(10)
    wait("the watchdog to kill mariadbd and remove BASE", lambda: _gone(base, pid), 20)


def test_sigterm_handler_cleans_up():
    setup = ("import servers, conftest\nlab = conftest.Lab()\nws = lab.workspace()")
    proc, base, pid = _run_child(setup, free_port())
    proc.send_signal(signal.SIGTERM)
    rc = proc.wait(20)
    assert rc == -signal.SIGTERM
    wait("SIGTERM cleanup to kill mariadbd and remove BASE", lambda: _gone(base, pid), 20)


LEAKY_TEST = '''
import os, subprocess, sys
def test_leaves_a_process_behind():
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", os.path.abspath(__file__)],
                     start_new_session=True)
'''


def test_a_process_that_outlives_the_suite_fails_the_run(tmp_path):
    """A nested run of this suite's conftest whose one test leaves a process behind exits 1, names
    the process, and leaves nothing running."""
    here = os.path.dirname(os.path.abspath(__file__))
    leaky = os.path.join(here, f"test_zz_leaky_{os.getpid()}.py")
    with open(leaky, "w") as f:
        f.write(LEAKY_TEST)
    try:
        run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", leaky],
                             capture_output=True, text=True, timeout=60, cwd=here)
    finally:
        os.unlink(leaky)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "1 passed" in run.stdout
    assert "processes that outlived the suite" in run.stdout
    assert f"time.sleep(120) {leaky}" in run.stdout
    assert subprocess.run(["pgrep", "-f", f"time.sleep\\(120\\) {leaky}"]).returncode == 1
