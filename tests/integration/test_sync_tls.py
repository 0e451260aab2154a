"""proxysql-sync's admin connections over TLS (a target's tls, tls_ca, tls_cert, tls_key, tls_verify,
like the probes' --tls*), and the refusal to send a password in clear text to a target that is not
loopback. The ProxySQL double accepts TLS on its admin port with a certificate made here (a real
ProxySQL makes its own in its datadir); every statement it logs says whether it came over TLS.
"""

import os
import re
import subprocess

import pytest

from test_sync import (Agent, consul, put_topology, px, stop_and_check, synced, wait_until,  # noqa: F401
                       workdir)


def make_ca_and_server(d):
    """A CA and a server certificate for 127.0.0.1 signed by it; returns (ca, cert, key) paths."""
    def run(*argv):
        subprocess.run(argv, check=True, capture_output=True, timeout=60)
    ca_key, ca, key, csr, cert = (os.path.join(d, n) for n in ("ca.key", "ca.pem", "server.key", "server.csr",
                                                               "server.pem"))
    run("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", ca_key, "-out", ca, "-days", "2",
        "-subj", "/CN=test CA")
    run("openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", csr, "-subj", "/CN=127.0.0.1")
    ext = os.path.join(d, "ext.cnf")
    with open(ext, "w") as f:
        f.write("subjectAltName=IP:127.0.0.1\n")
    run("openssl", "x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial", "-out", cert,
        "-days", "2", "-extfile", ext)
    return ca, cert, key


@pytest.fixture
def tls_px(tmp_path):
    from fakes.proxysql import ProxySQL
    from test_sync import ADMIN_PASSWORD
    ca, cert, key = make_ca_and_server(str(tmp_path))
    p = ProxySQL(admin_password=ADMIN_PASSWORD, extra_args=["--tls-cert", cert, "--tls-key", key])
    if not p.is_fake:
        pytest.skip("the double's TLS certificate is made here; a real ProxySQL makes its own")
    p.start()
    p.ca = ca
    yield p
    p.close()


def with_target_settings(agent, settings):
    """Add settings to the (first) targets entry."""
    agent.text = re.sub(r'(password_file = "[^"]*";) }', r'\1 %s }' % settings, agent.text, count=1)
    agent.write_config()


def test_admin_over_tls_with_verification(consul, tls_px, workdir, tmp_path):
    """tls = true, tls_ca, tls_verify: every statement reaches the admin over TLS and the target
    converges; the same target with a CA that did not sign its certificate is never written."""
    put_topology(consul)
    agent = Agent(consul, [tls_px], workdir)
    with_target_settings(agent, 'tls = true; tls_ca = "%s"; tls_verify = true;' % tls_px.ca)
    agent.start()
    try:
        wait_until("synced over TLS", lambda: synced(tls_px))
        stmts = tls_px.statements()
        # the agent's connections: those that wrote (this test's own reads come without TLS)
        agents = {s["conn"] for s in stmts if s["sql"].startswith(("INSERT", "LOAD", "SAVE"))}
        mine = [s for s in stmts if s["conn"] in agents]
        assert any("INSERT INTO mysql_users" in s["sql"] for s in mine)
        assert all(s["tls"] for s in mine), [s for s in mine if not s["tls"]][:3]
    finally:
        stop_and_check(agent)
    os.makedirs(tmp_path / "other")
    os.makedirs(os.path.join(workdir, "b"))
    other_ca, _, _ = make_ca_and_server(str(tmp_path / "other"))
    tls_px.clear_statements()
    agent = Agent(consul, [tls_px], os.path.join(workdir, "b"))
    with_target_settings(agent, 'tls = true; tls_ca = "%s"; tls_verify = true;' % other_ca)
    agent.start()
    try:
        wait_until("the verification failure logged", lambda: "certificate" in agent.logs().lower()
                   or "ssl" in agent.logs().lower(), timeout=15)
        assert not [s for s in tls_px.statements() if s["user"] == tls_px.admin_user]
    finally:
        agent.stop()


def test_plaintext_password_to_a_remote_target_is_refused(consul, px, workdir):
    """--check-config: a password for a target that is not loopback, without TLS, is refused (exit 2,
    one line naming the settings); allow_plaintext_password or tls accepts it; loopback needs neither."""
    agent = Agent(consul, [px], workdir)
    agent.text = agent.text.replace('address = "%s"' % px.admin_addr, 'address = "10.0.0.5:6032"')
    agent.write_config()
    r = agent.run("--check-config")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "would cross the network in clear text to 10.0.0.5" in r.stderr and "tls = true" in r.stderr, r.stderr
    for settings in ("allow_plaintext_password = true;", "tls = true;"):
        with_target_settings(agent, settings)
        r = agent.run("--check-config")
        assert r.returncode == 0, (settings, r.stderr)
        agent.text = agent.text.replace(" " + settings, "")
    agent.text = agent.text.replace('address = "10.0.0.5:6032"', 'address = "%s"' % px.admin_addr)
    agent.write_config()
    pw = os.path.join(workdir, "admin-pw-0")
    r = agent.run("--check-config", "--admin-addr", "192.0.2.7:6032", "--admin-password-file", pw)
    assert r.returncode == 2 and "--admin-tls" in r.stderr, r.stderr
    r = agent.run("--check-config", "--admin-addr", "192.0.2.7:6032", "--admin-password-file", pw, "--admin-tls")
    assert r.returncode == 0, r.stderr
    r = agent.run("--check-config", "--admin-addr", "127.0.0.2:6032", "--admin-password-file", pw)
    assert r.returncode == 0, r.stderr


@pytest.mark.fault
def test_tls_verifies_by_default(consul, tls_px, workdir, monkeypatch):
    """Refused with the certificate's fault in the log, nothing written; the same CA in the system's store syncs.

    tls = true alone verifies the certificate against the system's CA store: the double's, signed
    by a CA the system does not know, is refused; the same CA in the store (SSL_CERT_FILE, which
    OpenSSL's default store honours) is accepted."""
    put_topology(consul)
    agent = Agent(consul, [tls_px], workdir)
    with_target_settings(agent, "tls = true;")
    assert agent.run("--check-config").returncode == 0
    agent.start()
    try:
        wait_until("the verification failure logged",
                   lambda: "target px1: cannot connect" in agent.logs() and "certificate" in agent.logs(),
                   timeout=15)
        assert not [s for s in tls_px.statements() if s["user"] == tls_px.admin_user]
        assert "tls_verify = false" not in agent.logs()
    finally:
        agent.stop()
    monkeypatch.setenv("SSL_CERT_FILE", tls_px.ca)
    os.makedirs(os.path.join(workdir, "b"))
    agent = Agent(consul, [tls_px], os.path.join(workdir, "b"))
    with_target_settings(agent, "tls = true;")
    agent.start()
    try:
        wait_until("synced with the system's CA store", lambda: synced(tls_px))
    finally:
        stop_and_check(agent)


def test_tls_verify_false_is_loud(consul, tls_px, workdir):
    """tls_verify = false connects to any certificate, and says so: in --check-config's output and
    in the log at each connection made, naming the target."""
    warning = ("target px1: TLS without certificate verification (tls_verify = false): whoever answers %s "
               "reads the admin password" % tls_px.admin_addr)
    put_topology(consul)
    agent = Agent(consul, [tls_px], workdir)
    with_target_settings(agent, "tls = true; tls_verify = false;")
    r = agent.run("--check-config")
    assert r.returncode == 0 and warning in r.stdout + r.stderr, r
    agent.start()
    try:
        wait_until("synced without verification", lambda: synced(tls_px))
        logs = agent.logs()
        assert logs.count(warning) == 2, logs     # the start's configuration check, then one connection
    finally:
        stop_and_check(agent)
    r = agent.run("--check-config", "--admin-addr", tls_px.admin_addr, "--admin-tls", "--admin-tls-verify=0")
    assert r.returncode == 0, r
    assert "target %s: TLS without certificate verification" % tls_px.admin_addr in r.stdout + r.stderr, r
    r = agent.run("--check-config", "--admin-addr", "127.0.0.1:6032", "--admin-tls-verify=0")
    assert r.returncode == 2 and "need tls = true" in r.stderr, r


def test_probe_tls_verifies_by_default(tls_px, tmp_path):
    """proxysql-check --tls: the certificate is verified unless --tls-verify=0, which warns."""
    import probes_cases as pc
    pw = tmp_path / "pw"
    pw.write_text(tls_px.admin_password)
    os.chmod(pw, 0o600)
    pc.register_secret(tls_px.admin_password)
    argv = [os.path.join(pc.BIN, "proxysql-check"), "--liveness", "--host", "127.0.0.1", "--port",
            str(tls_px.admin_port), "--defaults-extra-file", "", "--password-file", str(pw), "--tls"]
    r = pc.run(argv)
    assert r.rc == 1 and "certificate" in r.text, r
    r = pc.run(argv + ["--tls-ca", tls_px.ca])
    assert r.rc == 0 and "warning" not in r.errtext, r
    r = pc.run(argv + ["--tls-verify=0"])
    assert r.rc == 0, r
    assert ("warning: TLS to 127.0.0.1:%s without certificate verification (--tls-verify=0)"
            % tls_px.admin_port) in r.errtext, r
