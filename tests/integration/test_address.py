"""`localhost` with a port of its own means TCP to the loopback address at that port, not the unix
socket (which ignores the port and TLS); a bare `localhost` keeps the mysql client's socket rule.
The address decision itself is table-tested in tests/unit/test_db.c (db_route).
"""

import os

import probes_cases as pc
from test_sync import Agent, consul, px, put_topology, synced, wait_until, workdir  # noqa: F401

PROBE = os.path.join(pc.BIN, "proxysql-check")


def test_proxysql_check_localhost_with_port_is_tcp(px, tmp_path):
    pw = tmp_path / "pw"
    pw.write_text(px.admin_password)
    os.chmod(pw, 0o600)
    pc.register_secret(px.admin_password)
    base = [PROBE, "--liveness", "--defaults-extra-file", "", "--password-file", str(pw), "--host", "localhost"]
    r = pc.run(base + ["--port", str(px.admin_port)])
    assert r.rc == 0, r
    # Without --port: the unix socket, as for the mysql client (there is none here).
    r = pc.run(base + ["--socket", str(tmp_path / "no.sock")])
    assert r.rc == 1 and "no.sock" in r.text + r.errtext, r


def test_sync_target_localhost_with_port_is_tcp(consul, px, workdir):
    put_topology(consul)
    agent = Agent(consul, [px], workdir)
    agent.text = agent.text.replace('address = "%s"' % px.admin_addr, 'address = "localhost:%s"' % px.admin_port)
    agent.write_config()
    agent.start()
    try:
        wait_until("synced through localhost:PORT", lambda: synced(px))
    finally:
        agent.stop()
