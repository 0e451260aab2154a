"""No binary gives its password to whatever answers the port: each of the seven that log in runs,
with its password from its usual source, against tests/fakes/authtrap.py, a server that asks for
an authentication method that reveals the password (in the greeting, or by an AuthSwitchRequest:
mysql_clear_password, dialog, sha256_password and caching_sha2_password with the trap's own RSA
key). Nothing of the password arrives (no substring of 4 characters or more, clear or decrypted),
and the binary's usual output names the method it refused.

One mode is a server that is not hostile: MySQL 8's greeting names caching_sha2_password, and an
account of mysql_native_password logs in after a switch to it, as before (the trap then answers
every query with an error).
"""

from __future__ import annotations

import os
import secrets
import time

import pytest

import probes_cases as pc
from fakes.authtrap import MODES, AuthTrap
from servers import Creds

SYNC = os.path.join(pc.BIN, "proxysql-sync")
# Capitals and signs: what a client sends besides (user name, connection attributes such as
# "_client_name", "Linux", "x86_64", a pid) has no four of them in a row.
ALPHABET = "ABCDEFGHJKMNPQRSTVWXYZ#%+=@"


def make_password():
    """Random enough that no 4-character piece of it is in a greeting, user name or attribute."""
    return "".join(secrets.choice(ALPHABET) for _ in range(24))


@pytest.fixture
def creds(tmp_path):
    password = make_password()
    pc.register_secret(password)
    pw = tmp_path / "password"
    pw.write_text(password + "\n")
    cnf = tmp_path / "client.cnf"
    cnf.write_text(f"[client]\nuser=monitor\npassword={password}\n")
    for f in (pw, cnf):
        os.chmod(f, 0o600)
    return Creds("monitor", password, str(pw), str(cnf))


def pieces(password, n=4):
    return {password[i:i + n] for i in range(len(password) - n + 1)}


def assert_nothing_revealed(trap, password, who):
    got = trap.received() + trap.revealed()
    assert trap.connections > 0, f"{who} never connected to the trap"
    leaked = sorted(p for p in pieces(password) if p.encode() in got)
    assert not leaked, f"{who} sent {len(leaked)} pieces of its password to a {trap.mode} server"


def refusal(method):
    return f"server asked for authentication method '{method}': refused, it would reveal the password"


def probe_run(probe, trap, creds, cell):
    """One of the MySQL probes, its account set up the way probes_cases does for real servers."""
    target = pc.Target(trap.host, trap.port, creds, creds)
    argv, env = pc.cell_argv_env(pc.C(probe, 1, ""), target, str(cell))
    r = pc.run(argv, env=env)
    log = cell / "clustercheck.log"
    return r, r.text + r.errtext + (log.read_text() if log.exists() else "")


def healthcheck_run(trap, creds, cell):
    cnf = cell / "hc.cnf"
    cnf.write_text(f"[client]\nsocket={trap.socket}\nport={trap.port}\nuser={creds.user}\n"
                   f"password={creds.password}\n")
    os.chmod(cnf, 0o600)
    r = pc.run([os.path.join(pc.BIN, "healthcheck"), f"--defaults-file={cnf}", "--connect"])
    return r, r.text + r.errtext


def proxysql_check_run(trap, creds, cell):
    r = pc.run([os.path.join(pc.BIN, "proxysql-check"), "--host", trap.host, "--port", str(trap.port),
                "--defaults-extra-file", "", "--password-file", creds.password_file, "--liveness"])
    return r, r.text + r.errtext


PROBES = ["liveness", "readiness", "haproxy", "clustercheck"]
MYSQL8 = "greeting:caching_sha2_password"


def assert_outcome(trap, mode, out):
    """Refused, naming the method; or, from MySQL 8's greeting, logged in as mysql_native_password."""
    if mode == MYSQL8:
        assert trap.native_logins >= 1 and "authentication method refused" not in out, out
        return
    assert refusal(mode.split(":", 1)[1]) in out, out
    assert "(allowed without verified TLS: mysql_native_password, client_ed25519" in out, out


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("binary", PROBES + ["healthcheck", "proxysql-check"])
def test_probe_reveals_nothing(binary, mode, creds, tmp_path):
    cell = tmp_path / "cell"
    cell.mkdir()
    with AuthTrap(mode, socket_path=str(tmp_path / "trap.sock"), password=creds.password) as trap:
        if binary in PROBES:
            r, out = probe_run(binary, trap, creds, cell)
        elif binary == "healthcheck":
            r, out = healthcheck_run(trap, creds, cell)
        else:
            r, out = proxysql_check_run(trap, creds, cell)
        assert_nothing_revealed(trap, creds.password, binary)
        assert r.rc == 1, r
        assert_outcome(trap, mode, out)


@pytest.mark.fault
@pytest.mark.parametrize("mode", MODES)
def test_proxysql_sync_reveals_nothing(mode, creds, tmp_path):
    """No piece of the admin password arrives, in clear or decrypted; the log names the refused method.

    The agent keeps retrying, as with any target it cannot reach."""
    from fakes.consul import Consul
    from test_sync import Agent
    consul = Consul()
    consul.start()
    try:
        with AuthTrap(mode, password=creds.password) as trap:
            class Target:
                admin_addr = f"{trap.host}:{trap.port}"
                admin_user = "admin"
                admin_password = creds.password
            agent = Agent(consul, [Target], str(tmp_path)).start()
            try:
                deadline = time.monotonic() + 15
                while time.monotonic() < deadline and "authentication method" not in agent.logs() \
                        and not trap.native_logins:
                    time.sleep(0.1)
            finally:
                agent.stop()
            assert_nothing_revealed(trap, creds.password, "proxysql-sync")
            logs = agent.logs()
            assert_outcome(trap, mode, logs)
        pc.assert_no_secret(logs, "the agent's log")
    finally:
        consul.close()
