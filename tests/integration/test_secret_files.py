"""Secret files (password files, Consul token files, MySQL option files, proxysql-sync's config):
one that another user could have written is refused, exit 2 with one line naming it; one that
other users can read is used with one warning; one in a Kubernetes Secret volume (root-owned 0644
behind the kubelet's `..data` links) is used silently. Against the ProxySQL admin double and the
Consul double: no Galera needed.

Run: make all && /usr/bin/python3 -m pytest -q tests/integration/test_secret_files.py
"""

import os
import secrets
import subprocess

import pytest

import probes_cases as pc
from fakes.proxysql import ProxySQL
from test_sync import Agent, consul  # noqa: F401 (a fixture)

PROBES = ("liveness-check", "readiness-check", "haproxy-check", "clustercheck", "healthcheck", "proxysql-check")
MODE_ARGS = {"proxysql-check": ["--liveness"]}


def usage_exit(name):
    """A configuration error's exit code: 2, but 1 for healthcheck (Docker reserves 2)."""
    return 1 if name == "healthcheck" else 2
NOBODY = 65534


@pytest.fixture
def proxysql():
    password = "adm-" + secrets.token_hex(8)
    pc.register_secret(password)
    p = ProxySQL(admin_password=password)
    p.start()
    try:
        yield p
    finally:
        p.close()


def plain_file(tmp_path, text, mode, name="secret"):
    path = tmp_path / name
    path.write_text(text)
    os.chmod(path, mode)
    return str(path)


def k8s_secret(tmp_path, text, name="password"):
    """A Kubernetes Secret volume as the kubelet's atomic writer lays it out: `name ->
    ..data/name`, `..data -> ..2024_01_01_00_00_00.123`, the file root-owned 0644 (defaultMode)."""
    vol = tmp_path / "secret-volume"
    stamp = vol / "..2024_01_01_00_00_00.123"
    stamp.mkdir(parents=True)
    (stamp / name).write_text(text)
    os.chmod(stamp / name, 0o644)
    os.symlink("..2024_01_01_00_00_00.123", vol / "..data")
    os.symlink("..data/" + name, vol / name)
    return str(vol / name)


def probe(name, *args, env=None):
    return pc.run([os.path.join(pc.BIN, name), "--host", "127.0.0.1", "--port", "1", "--defaults-extra-file", "",
                   *MODE_ARGS.get(name, []), *args], env=env)


def one_line(r):
    lines = r.err.decode().strip().splitlines()
    assert len(lines) == 1, r
    return lines[0]


@pytest.mark.parametrize("name", PROBES)
@pytest.mark.parametrize("mode", [0o666, 0o622, 0o646])
def test_probe_refuses_a_password_file_others_can_write(tmp_path, name, mode):
    """Exit 2 and one line naming the file, before any connection (port 1: nothing listens)."""
    path = plain_file(tmp_path, "pw-" + secrets.token_hex(4), mode)
    r = probe(name, "--password-file", path)
    assert r.rc == usage_exit(name), r
    line = one_line(r)
    assert path in line and "refused" in line and "can write it" in line, line


@pytest.mark.parametrize("name", PROBES)
def test_probe_refuses_another_users_password_file(tmp_path, name):
    """A 0600 file owned by another user (nobody) is refused, naming the file and the owner."""
    path = plain_file(tmp_path, "pw-" + secrets.token_hex(4), 0o600)
    os.chown(path, NOBODY, NOBODY)
    r = probe(name, "--password-file", path)
    assert r.rc == usage_exit(name), r
    line = one_line(r)
    assert path in line and "owned by uid %d" % NOBODY in line, line


@pytest.mark.parametrize("name", ("liveness-check", "readiness-check", "clustercheck", "haproxy-check"))
def test_probe_refuses_an_option_file_others_can_write(tmp_path, name):
    """A MySQL option file that others can write could redirect host=: refused like a password file."""
    path = plain_file(tmp_path, "[client]\nuser=monitor\npassword=pw-x\nhost=10.9.9.9\n", 0o666, "my.cnf")
    r = pc.run([os.path.join(pc.BIN, name), "--host", "127.0.0.1", "--port", "1", "--defaults-extra-file", path])
    assert r.rc == 2, r
    line = one_line(r)
    assert path in line and "refused" in line, line


def test_healthcheck_refuses_an_option_file_others_can_write(tmp_path):
    path = plain_file(tmp_path, "[client]\nuser=monitor\npassword=pw-x\n", 0o666, "my.cnf")
    r = pc.run([os.path.join(pc.BIN, "healthcheck"), "--no-defaults", "--defaults-extra-file=" + path, "--connect"])
    assert r.rc != 0, r
    assert path in r.out.decode() + r.err.decode() and "refused" in r.out.decode() + r.err.decode(), r


def admin_args(p, password_file):
    return [os.path.join(pc.BIN, "proxysql-check"), "--liveness", "--host", "127.0.0.1", "--port",
            str(p.admin_port), "--user", p.admin_user, "--password-file", password_file, "--defaults-extra-file", ""]


def test_probe_k8s_secret_volume_works_silently(proxysql, tmp_path):
    """A root-owned 0644 file behind `..data` links (a Secret volume's default): used, no warning."""
    r = pc.run(admin_args(proxysql, k8s_secret(tmp_path, proxysql.admin_password + "\n")))
    assert (r.rc, r.err) == (0, b""), r


def test_probe_world_readable_plain_file_works_with_a_warning(proxysql, tmp_path):
    """A plain 0644 file: used, with one warning naming it and the mode."""
    path = plain_file(tmp_path, proxysql.admin_password + "\n", 0o644)
    r = pc.run(admin_args(proxysql, path))
    assert r.rc == 0, r
    line = one_line(r)
    assert "warn" in line and path in line and "other users can read it (mode 0644" in line, line


def test_probe_private_file_works_silently(proxysql, tmp_path):
    path = plain_file(tmp_path, proxysql.admin_password + "\n", 0o600)
    r = pc.run(admin_args(proxysql, path))
    assert (r.rc, r.err) == (0, b""), r


# -- proxysql-sync and clustercheck --register ------------------------------------------------------

def check_config(agent):
    r = agent.run("--check-config")
    return r.returncode, (r.stdout + r.stderr).strip().splitlines()


def test_sync_refuses_an_admin_password_file_others_can_write(consul, proxysql, tmp_path):
    """proxysql-sync exits 2 with one line naming the target's password_file."""
    agent = Agent(consul, [proxysql], str(tmp_path))
    pwfile = os.path.join(str(tmp_path), "admin-pw-0")
    os.chmod(pwfile, 0o666)
    rc, lines = check_config(agent)
    assert rc == 2 and len(lines) == 1, lines
    assert pwfile in lines[0] and "refused: other users can write it" in lines[0], lines
    r = agent.run("--once")
    assert r.returncode == 2 and pwfile in r.stdout + r.stderr, r


def test_sync_refuses_a_token_file_others_can_write(consul, proxysql, tmp_path):
    token = plain_file(tmp_path, "tok-" + secrets.token_hex(8), 0o646, "token")
    agent = Agent(consul, [proxysql], str(tmp_path), extra='consul-token-file = "%s"\n' % token)
    rc, lines = check_config(agent)
    assert rc == 2 and len(lines) == 1, lines
    assert token in lines[0] and "consul-token-file" in lines[0] and "refused" in lines[0], lines


def test_sync_refuses_a_config_file_others_can_write(consul, proxysql, tmp_path):
    agent = Agent(consul, [proxysql], str(tmp_path))
    os.chmod(agent.cfg, 0o666)
    rc, lines = check_config(agent)
    assert rc == 2 and len(lines) == 1, lines
    assert agent.cfg in lines[0] and "refused" in lines[0], lines


def test_sync_k8s_secret_volume_silent_plain_0644_warns(consul, proxysql, tmp_path):
    """The admin password from a Secret volume layout: configuration ok, no warning; the same
    password in a plain 0644 file: ok with one warning naming it."""
    agent = Agent(consul, [proxysql], str(tmp_path))
    pwfile = os.path.join(str(tmp_path), "admin-pw-0")
    secret = k8s_secret(tmp_path, proxysql.admin_password)
    with open(agent.cfg) as f:
        text = f.read()
    agent.text = agent.text.replace(pwfile, secret)
    agent.write_config()
    rc, lines = check_config(agent)
    assert rc == 0 and len(lines) == 1 and "configuration ok" in lines[0], lines
    os.chmod(pwfile, 0o644)
    agent.text = text
    agent.write_config()
    rc, lines = check_config(agent)
    assert rc == 0 and len(lines) == 2, lines
    assert any(pwfile in x and "other users can read it (mode 0644" in x for x in lines), lines


def test_register_refuses_a_token_file_others_can_write(consul, tmp_path):
    """clustercheck --register: exit 2 with one line naming the token file."""
    token = plain_file(tmp_path, "tok-" + secrets.token_hex(8), 0o666, "token")
    r = subprocess.run([os.path.join(pc.BIN, "clustercheck"), "--register", "--once", "--host", "127.0.0.1",
                        "--port", "1", "--consul-addr", consul.addr, "--consul-prefix", "p", "--consul-token-file",
                        token, "--session-file", str(tmp_path / "session"), "--timeout", "2"],
                       capture_output=True, text=True, timeout=30,
                       env={k: v for k, v in os.environ.items() if not k.startswith("CONSUL_")})
    assert r.returncode == 2, r
    lines = (r.stdout + r.stderr).strip().splitlines()
    assert len(lines) == 1 and token in lines[0] and "refused" in lines[0], lines


def test_clustercheck_one_shot_warns_into_its_log_file_only(tmp_path):
    """Under xinetd stderr is the client's socket: a world-readable password file's warning never
    reaches stdout or stderr (the HTTP answer stays byte for byte); it goes to --log-file."""
    path = plain_file(tmp_path, "pw-" + secrets.token_hex(4), 0o644)
    argv = [os.path.join(pc.BIN, "clustercheck"), "--host", "127.0.0.1", "--port", "1", "--defaults-extra-file", "",
            "--password-file", path]
    r = pc.run(argv)
    assert r.rc == 1 and r.out.startswith(b"HTTP/1.1 503"), r
    assert r.err == b"" and b"other users can read" not in r.out, r
    log = tmp_path / "cc.log"
    r = pc.run(argv + ["--log-file", str(log)])
    assert r.rc == 1 and r.err == b"", r
    assert "%s: other users can read it (mode 0644" % path in log.read_text()


def test_probe_refuses_a_file_a_foreign_group_can_write(tmp_path):
    """0660 root:nogroup: a group the probe is not in can write it: refused; 0660 root:root (the
    probe's own group, as a Kubernetes fsGroup is the pod's) is used."""
    path = plain_file(tmp_path, "pw-" + secrets.token_hex(4), 0o660)
    os.chown(path, 0, NOBODY)
    r = probe("liveness-check", "--password-file", path)
    assert r.rc == 2, r
    line = one_line(r)
    assert path in line and "group %d can write it" % NOBODY in line, line
    os.chown(path, 0, os.getegid())
    r = probe("liveness-check", "--password-file", path)
    assert r.rc == 1 and r.err == b"", r
