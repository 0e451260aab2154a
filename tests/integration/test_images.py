"""The container images of `make images` (containers/build-images.sh: buildah from a local
debootstrapped Debian base, --pull=never), inspected and run with podman on the host network:

* both: user 65532, the entrypoint is the binary, no shell (the whole file list is known), small;
* sidekick-probes: every probe answers against the test Galera cluster from inside the image,
  and the default entrypoint installs the probes into a mounted volume as an init container does;
* sidekick-sync: with a read-only root filesystem, proxysql-sync is PID 1, syncs the Consul double
  into the ProxySQL double, logs to stdout, serves /readyz, and exits 0 within a second of SIGTERM.

Run: make static images && /usr/bin/python3 -m pytest -q tests/integration/test_images.py
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import tarfile
import time
import urllib.error
import urllib.request
from datetime import datetime

import pytest

from fakes.consul import Consul
from fakes.proxysql import ProxySQL
from probe_names import probe_names

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
IMAGES_DIR = os.environ.get("IMAGES_DIR", os.path.join(REPO, "build", "images"))
PROBES_IMAGE = "localhost/sidekick-probes:latest"
SYNC_IMAGE = "localhost/sidekick-sync:latest"
PROBES = probe_names() + ["healthcheck.sh"]  # dist/probes.list, and healthcheck under the MariaDB image's name
ADMIN_PASSWORD = "adm-" + os.urandom(6).hex()

# The flags that work on these machines (shared/reference/environment.md): a private store,
# runc with cgroupfs, lower ulimits; networks: host (or none) only.
PODMAN = ["podman", "--root", os.path.join(IMAGES_DIR, "storage"), "--runroot", os.path.join(IMAGES_DIR, "run"),
          "--storage-driver", "overlay", "--runtime", "runc", "--cgroup-manager", "cgroupfs"]
RUN = ["run", "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1000:1000"]

pytestmark = pytest.mark.skipif(shutil.which("podman") is None or shutil.which("buildah") is None,
                                reason="podman/buildah not installed (make deps)")


def podman(*args, timeout=120, check=True):
    r = subprocess.run(PODMAN + list(args), capture_output=True, text=True, timeout=timeout)
    if check:
        assert r.returncode == 0, "podman %s: %s%s" % (" ".join(args), r.stdout, r.stderr)
    return r


@pytest.fixture(scope="module", autouse=True)
def images():
    """Build (or, when `make images` ran, reuse from the layer cache) both images."""
    r = subprocess.run([os.path.join(REPO, "containers", "build-images.sh")], capture_output=True, text=True,
                       timeout=1800, env=dict(os.environ, IMAGES_DIR=IMAGES_DIR))
    assert r.returncode == 0, r.stdout + r.stderr


def inspect(image):
    return json.loads(podman("image", "inspect", image).stdout)[0]


def files_of(image, tmp_path, contents=False):
    """Every path in the image's filesystem: its tar member (mode, owner, size), or its bytes."""
    cid = podman("create", image).stdout.strip()
    try:
        tar = tmp_path / "fs.tar"
        podman("export", "-o", str(tar), cid)
        with tarfile.open(tar) as t:
            members = {m.name.lstrip("./"): m for m in t.getmembers() if m.name.lstrip("./")}
            if contents:
                return {n: t.extractfile(m).read() for n, m in members.items() if m.isfile()}
            return members
    finally:
        podman("rm", "-f", cid)
        os.remove(tmp_path / "fs.tar")


@pytest.mark.parametrize("image,entrypoint,limit_mb", [(PROBES_IMAGE, ["/copy-probes"], 25),
                                                       (SYNC_IMAGE, ["/proxysql-sync"], 6)])
def test_image_config(image, entrypoint, limit_mb):
    info = inspect(image)
    cfg = info["Config"]
    assert cfg.get("User") == "65532:65532", cfg
    assert cfg.get("Entrypoint") == entrypoint, cfg
    assert not cfg.get("Cmd"), cfg                      # nothing that needs a shell
    assert info["Size"] < limit_mb * 1024 * 1024, "%s is %.1f MB" % (image, info["Size"] / 1048576)
    print("%s: %.1f MB" % (image, info["Size"] / 1048576))


def test_probes_image_files(tmp_path):
    files = files_of(PROBES_IMAGE, tmp_path)
    regular = sorted(n for n, m in files.items() if m.isfile())
    assert regular == ["copy-probes"] + sorted("probes/" + p for p in PROBES), regular
    assert not any(n in files for n in ("bin/sh", "bin/bash", "bin/busybox", "usr/bin/env"))
    for p in PROBES:
        assert files["probes/" + p].mode & 0o111, p


def test_sync_image_files(tmp_path):
    files = files_of(SYNC_IMAGE, tmp_path)
    regular = sorted(n for n, m in files.items() if m.isfile())
    assert regular == ["etc/ssl/certs/ca-certificates.crt", "proxysql-sync"], regular
    assert files["etc/ssl/certs/ca-certificates.crt"].size > 100000


# -- sidekick-probes ------------------------------------------------------------------------------
def test_probes_answer_from_the_image(tmp_path, healthy_galera, mysql_creds, clustercheck_creds):
    node = healthy_galera[2]
    secrets = {}
    for name, creds in (("monitor", mysql_creds), ("clustercheckuser", clustercheck_creds)):
        with open(creds.password_file) as f:
            p = tmp_path / name
            p.write_text(f.read())
        os.chown(p, 65532, 65532)
        p.chmod(0o400)
        secrets[name] = str(p)
    vols = ["-v", "%s:/run/secrets/monitor:ro" % secrets["monitor"],
            "-v", "%s:/run/secrets/clustercheckuser:ro" % secrets["clustercheckuser"]]
    conn = ["--host", node.ip, "--port", str(node.port), "--timeout", "5"]
    cases = {
        "liveness-check": conn + ["--password-file", "/run/secrets/monitor"],
        "readiness-check": conn + ["--password-file", "/run/secrets/monitor"],
        "clustercheck": conn + ["--password-file", "/run/secrets/clustercheckuser"],
        "haproxy-check": ["--port", str(node.port), "--password-file", "/run/secrets/monitor", "--timeout", "5",
                          "127.0.0.1", "3306", node.ip, str(node.port)],
    }
    for probe, args in cases.items():
        r = podman(*RUN, "--rm", "--network=host", "--read-only", *vols, "--entrypoint", "/probes/" + probe,
                   PROBES_IMAGE, *args, check=False)
        assert r.returncode == 0, (probe, r.stdout, r.stderr)
    # healthcheck as in the MariaDB image: the server's socket where the client looks for it, an
    # option file with the account (the entrypoint's .my-healthcheck.cnf).
    cnf = tmp_path / "hc.cnf"
    cnf.write_text("[mariadb-client]\nuser=%s\npassword=%s\nport=%d\n"
                   % (mysql_creds.user, mysql_creds.password, node.port))
    os.chown(cnf, 65532, 65532)
    cnf.chmod(0o400)
    for name in ("healthcheck", "healthcheck.sh"):
        r = podman(*RUN, "--rm", "--network=host", "--read-only", "-v", "%s:/run/mysqld/mysqld.sock" % node.socket,
                   "-v", "%s:/var/lib/mysql/.my-healthcheck.cnf:ro" % cnf, "--entrypoint", "/probes/" + name,
                   PROBES_IMAGE, "--connect", "--innodb_initialized", "--galera_online", check=False)
        assert r.returncode == 0, (name, r.stdout, r.stderr)
    r = podman(*RUN, "--rm", "--network=host", "--entrypoint", "/probes/clustercheck", *vols, PROBES_IMAGE,
               *conn, "--password-file", "/run/secrets/clustercheckuser")
    assert r.stdout.startswith("HTTP/1.1 200 OK"), r.stdout
    # A check that fails says so from inside the image too.
    r = podman(*RUN, "--rm", "--network=host", "--entrypoint", "/probes/readiness-check", PROBES_IMAGE,
               "--host", node.ip, "--port", "1", "--timeout", "1", check=False)
    assert r.returncode == 1, r.stdout + r.stderr


def test_probes_image_as_init_container(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chown(shared, 65532, 65532)
    # What a Kubernetes init container does: the image's entrypoint, the volume as its argument.
    r = podman(*RUN, "--rm", "--network=none", "--read-only", "-v", "%s:/var/lib/mysql" % shared, PROBES_IMAGE,
               "/var/lib/mysql")
    assert sorted(os.listdir(shared)) == sorted(PROBES), r.stdout
    image_files = files_of(PROBES_IMAGE, tmp_path, contents=True)
    for p in PROBES:
        assert (shared / p).read_bytes() == image_files["probes/" + p], p
        assert os.stat(shared / p).st_uid == 65532 and os.stat(shared / p).st_mode & 0o777 == 0o755
    r = subprocess.run([str(shared / "readiness-check"), "--version"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    # Without a destination: usage error, exit 2.
    r = podman(*RUN, "--rm", "--network=none", PROBES_IMAGE, check=False)
    assert r.returncode == 2, r.stdout + r.stderr


# -- sidekick-sync --------------------------------------------------------------------------------
def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def consul():
    c = Consul()
    c.start()
    yield c
    c.close()


@pytest.fixture
def px():
    p = ProxySQL(admin_password=ADMIN_PASSWORD)
    p.start()
    yield p
    p.close()


def servers(px):
    return sorted(tuple(str(v) for v in r) for r in px.query(
        "SELECT hostgroup_id, hostname, port FROM runtime_mysql_servers"))


@pytest.mark.fault
def test_sync_container(tmp_path, consul, px):
    """PID 1 of its container (user 65532, read-only root): syncs, then exits 0 within 1 s of SIGTERM."""
    health = free_port()
    (tmp_path / "admin-password").write_text(ADMIN_PASSWORD)
    os.chown(tmp_path / "admin-password", 65532, 65532)
    (tmp_path / "admin-password").chmod(0o400)
    (tmp_path / "proxysql-sync.conf").write_text("""
consul-addr = "%s";
region = "eu";
health-listen = "127.0.0.1:%d";
quiescence-min = 0.05;
clusters = ( { alias = "shop"; writer_hostgroup = 10; reader_hostgroup = 11; } );
targets = ( { name = "px1"; address = "%s"; user = "%s"; password_file = "/run/secrets/admin-password"; } );
""" % (consul.addr, health, px.admin_addr, px.admin_user))
    consul.put("mysql/master/shop", b"db1:3306")
    consul.put("mysql/master/shop/hostname", b"db1")
    consul.put("mysql/master/shop/port", b"3306")
    consul.put("mysql/replica/shop/eu/db2:3306", b"db2:3306")
    name = "sk-sync-test-" + os.urandom(4).hex()
    podman(*RUN, "-d", "--name", name, "--network=host", "--read-only",
           "-v", "%s:/etc/sidekick/proxysql-sync.conf:ro" % (tmp_path / "proxysql-sync.conf"),
           "-v", "%s:/run/secrets/admin-password:ro" % (tmp_path / "admin-password"), SYNC_IMAGE)
    try:
        deadline = time.monotonic() + 20
        while servers(px) != [("10", "db1", "3306"), ("11", "db2", "3306")]:
            state = json.loads(podman("inspect", name).stdout)[0]["State"]
            assert time.monotonic() < deadline and state["Running"], (state, podman("logs", name).stdout)
            time.sleep(0.1)
        # Runtime shows the rows at the LOAD; /readyz turns 200 once the agent has verified them.
        while True:
            try:
                with urllib.request.urlopen("http://127.0.0.1:%d/readyz" % health, timeout=5) as r:
                    assert r.status == 200
                    break
            except urllib.error.HTTPError as e:
                assert e.code == 503 and time.monotonic() < deadline, (e.code, podman("logs", name).stdout)
                time.sleep(0.05)
        # PID 1 of its PID namespace is proxysql-sync itself, running as 65532.
        state = json.loads(podman("inspect", name).stdout)[0]["State"]
        with open("/proc/%d/status" % state["Pid"]) as f:
            status = dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)
        assert status["NSpid"].split()[-1] == "1", status["NSpid"]
        assert status["Uid"].split()[0] == "65532", status["Uid"]
        with open("/proc/%d/cmdline" % state["Pid"], "rb") as f:
            assert f.read().split(b"\0")[0] == b"/proxysql-sync"
        # Logs go to stdout (podman logs keeps the streams apart).
        logs = podman("logs", name)
        assert "applied" in logs.stdout and logs.stderr.strip() == "", (logs.stdout, logs.stderr)
        assert ADMIN_PASSWORD not in logs.stdout
        # SIGTERM as PID 1: exit 0 within a second.
        t0 = datetime.now().astimezone()
        podman("kill", "--signal", "TERM", name)
        podman("wait", name, timeout=30)
        state = json.loads(podman("inspect", name).stdout)[0]["State"]
        assert state["ExitCode"] == 0, (state, podman("logs", name).stdout)
        finished = datetime.fromisoformat(_iso(state["FinishedAt"]))
        assert (finished - t0).total_seconds() < 1.0, (t0, state["FinishedAt"])
    finally:
        podman("rm", "-f", name, check=False)


def _iso(ts):
    """podman's '2026-11-29T22:40:01.123456789Z' as an ISO string Python reads (microseconds)."""
    m = re.match(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)$", ts)
    assert m, ts
    return "%s.%s%s" % (m.group(1), (m.group(2) or "0").ljust(6, "0")[:6], "+00:00" if m.group(3) == "Z" else m.group(3))
