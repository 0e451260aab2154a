"""The Debian packages of `make deb` (dist/deb/build.sh) installed the README's way into a throwaway
root: the debootstrapped bookworm tree that `make images` keeps (build/images/bookworm.tar) is
unpacked into a temporary directory, and inside it (chroot) apt installs both packages from their
files, fetching their Depends from the Debian mirror of the root's sources.list. Then:

* files, owners and modes: the binaries, the units with their paths filled in, the xinetd entry
  (off), the configuration root:proxysql-sync 0640 and readable by that user only, the ProxySQL
  drain drop-in shipped inactive; the conffiles dpkg records; no database server, ProxySQL or
  systemd pulled in;
* the system user proxysql-sync (no login, no home) and each binary's --version inside the root;
* clustercheck takes the place of another package's (a stand-in for Percona XtraDB Cluster's
  script and socket units, installed first): those are diverted to NAME.distrib, and put back
  when sidekick-probes is removed;
* a reinstall keeps an edited conffile and its mode, and does not add a second user;
* `dpkg -r` leaves only the conffiles, `dpkg -P` removes them and /etc/sidekick (the system user
  stays: docs/packages.md);
* no maintainer script starts, stops, enables or disables anything: fake systemctl, invoke-rc.d,
  deb-systemd-invoke, service... first on PATH record every call, and the only one allowed is
  `systemctl --system daemon-reload` (systemd rereads its unit files).

And lintian reports no error on either package, and `tests/deps.sh build` (make build-deps)
installs no server and stops no service. Needs root (chroot) and the Debian mirror; about
15 s. Run: make deb images && /usr/bin/python3 -m pytest -q tests/integration/test_packages.py
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import stat
import subprocess
import tempfile

import pytest
from probe_names import PROBES

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
DEB_DIR = os.environ.get("SIDEKICK_DEB_DIR", os.path.join(REPO, "build", "deb"))
IMAGES_DIR = os.environ.get("IMAGES_DIR", os.path.join(REPO, "build", "images"))
ROOTFS_TAR = os.path.join(IMAGES_DIR, "bookworm.tar")
# apt's lists and downloaded packages, kept between runs so a re-run fetches almost nothing.
APT_CACHE = os.path.join(REPO, "build", "deb-test-cache")
VERSION = open(os.path.join(REPO, "VERSION")).read().strip()
CHROOT = shutil.which("chroot") or "/usr/sbin/chroot"
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

PROBE_UNITS = ["clustercheck.socket", "clustercheck@.service", "clustercheck-http.service",
               "clustercheck-register.service"]
CONF = "etc/sidekick/proxysql-sync.conf"
DROP_IN = "usr/share/proxysql-sync/proxysql.service.d/sidekick-drain.conf"
# What a maintainer script could use to start, stop, enable or disable a service.
SERVICE_TOOLS = ["systemctl", "invoke-rc.d", "deb-systemd-invoke", "deb-systemd-helper", "service", "update-rc.d"]
# What Percona XtraDB Cluster's server package ships under clustercheck's names (a stand-in).
DIVERTED = ["/usr/bin/clustercheck", "/lib/systemd/system/clustercheck.socket",
            "/lib/systemd/system/clustercheck@.service"]
SERVERS = re.compile(r"^(mariadb-server.*|mysql-server.*|percona-.*|galera-.*|proxysql|proxysql2|"
                     r"systemd|systemd-sysv)$")


def debs():
    return sorted(glob.glob(os.path.join(DEB_DIR, "*_%s_*.deb" % VERSION)))


def skip_unless_built(need_root_tree=True):
    if len(debs()) != 2:
        pytest.skip("no packages in %s (make deb)" % DEB_DIR)
    if need_root_tree and os.geteuid() != 0:
        pytest.skip("chroot and dpkg in a root need root")
    if need_root_tree and not os.path.exists(ROOTFS_TAR):
        pytest.skip("no %s (make images)" % ROOTFS_TAR)


class Root:
    """A throwaway Debian root unpacked from the images' debootstrap tree."""

    def __init__(self, path):
        self.path = path

    def p(self, rel):
        return os.path.join(self.path, rel.lstrip("/"))

    def run(self, *argv, user=None, check=True, timeout=300):
        cmd = [CHROOT] + (["--userspec=%s" % user] if user else []) + [self.path, "/usr/bin/env", "-i",
                                                                        "PATH=" + PATH, "LC_ALL=C.UTF-8",
                                                                        "DEBIAN_FRONTEND=noninteractive"]
        r = subprocess.run(cmd + list(argv), capture_output=True, text=True, timeout=timeout)
        if check:
            assert r.returncode == 0, "%s: exit %d\n%s%s" % (" ".join(argv), r.returncode, r.stdout, r.stderr)
        return r

    def calls(self):
        try:
            with open(self.p("/var/log/service-calls")) as f:
                return f.read().splitlines()
        except FileNotFoundError:
            return []

    def packages(self):
        out = self.run("dpkg-query", "-W", "-f", "${Package} ${db:Status-Abbrev}\n").stdout
        return {line.split()[0]: line.split()[1] for line in out.splitlines() if line.strip()}


def stand_in_package(workdir):
    """A package that owns clustercheck's files, as Percona's server package does: its script and
    socket units."""
    pkg = os.path.join(workdir, "pxc-stand-in")
    os.makedirs(os.path.join(pkg, "DEBIAN"))
    with open(os.path.join(pkg, "DEBIAN", "control"), "w") as f:
        f.write("Package: pxc-stand-in\nVersion: 1\nArchitecture: all\nMaintainer: tests <t@example.org>\n"
                "Description: owns clustercheck's files as Percona's server package does\n")
    for path in DIVERTED:
        os.makedirs(os.path.dirname(pkg + path), exist_ok=True)
        with open(pkg + path, "w") as f:
            f.write("#!/bin/sh\n# the stand-in's clustercheck\n" if path.endswith("clustercheck")
                    else "# the stand-in's %s\n" % os.path.basename(path))
        os.chmod(pkg + path, 0o755 if path.endswith("clustercheck") else 0o644)
    out = os.path.join(workdir, "pxc-stand-in_1_all.deb")
    subprocess.run(["dpkg-deb", "--root-owner-group", "--build", pkg, out], check=True, capture_output=True,
                   timeout=60)
    return out


def fake_service_tools(root):
    """Record-only stand-ins for every service tool, first on PATH (/usr/local/sbin)."""
    sbin = root.p("/usr/local/sbin")
    os.makedirs(sbin, exist_ok=True)
    for tool in SERVICE_TOOLS:
        with open(os.path.join(sbin, tool), "w") as f:
            f.write('#!/bin/sh\necho "%s $*" >>/var/log/service-calls\nexit 0\n' % tool)
        os.chmod(os.path.join(sbin, tool), 0o755)


@pytest.fixture(scope="module")
def root():
    """The root with both packages installed by apt from their files (as the README says)."""
    skip_unless_built()
    path = tempfile.mkdtemp(prefix="sidekick-debroot-")
    r = Root(path)
    try:
        subprocess.run(["tar", "-C", path, "-xf", ROOTFS_TAR], check=True, timeout=300)
        fake_service_tools(r)
        # As on a host running systemd: the scripts' `[ -d /run/systemd/system ]` holds.
        os.makedirs(r.p("/run/systemd/system"), exist_ok=True)
        shutil.copy("/etc/resolv.conf", r.p("/etc/resolv.conf"))
        for sub in ("lists", "archives"):
            if os.path.isdir(os.path.join(APT_CACHE, sub)):
                dest = r.p("/var/lib/apt/lists" if sub == "lists" else "/var/cache/apt/archives")
                shutil.copytree(os.path.join(APT_CACHE, sub), dest, dirs_exist_ok=True)
        os.makedirs(r.p("/tmp/debs"), exist_ok=True)
        for d in debs():
            shutil.copy(d, r.p("/tmp/debs"))
        stand_in_package(r.p("/tmp"))  # built into the root's /tmp
        r.run("dpkg", "-i", "/tmp/pxc-stand-in_1_all.deb")
        r.before = r.packages()
        r.run("apt-get", "-q", "-o", "Acquire::Languages=none", "-o", "Acquire::Retries=3", "update")
        r.run("apt-get", "install", "-y", "-q", "--no-install-recommends",
              *["/tmp/debs/" + os.path.basename(d) for d in debs()])
        # Keep what apt fetched for the next run.
        shutil.copytree(r.p("/var/lib/apt/lists"), os.path.join(APT_CACHE, "lists"), dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("lock", "partial"))
        shutil.copytree(r.p("/var/cache/apt/archives"), os.path.join(APT_CACHE, "archives"), dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("lock", "partial"))
        yield r
    finally:
        shutil.rmtree(path, ignore_errors=True)


def mode_owner(path):
    st = os.lstat(path)
    return stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid


def gid_of(root, group):
    return int(root.run("getent", "group", group).stdout.split(":")[2])


def test_installed_files(root):
    for b in PROBES + ["proxysql-sync"]:
        path = root.p("/usr/bin/" + b)
        assert os.path.isfile(path) and not os.path.islink(path), b
        assert mode_owner(path) == (0o755, 0, 0), b
        assert mode_owner(root.p("/usr/share/man/man1/%s.1.gz" % b)) == (0o644, 0, 0), b
    for unit in PROBE_UNITS + ["proxysql-sync.service"]:
        path = root.p("/lib/systemd/system/" + unit)
        assert mode_owner(path) == (0o644, 0, 0), unit
        text = open(path).read()
        assert "@BINDIR@" not in text and "@DOCDIR@" not in text, unit + ": a placeholder left"
    assert "ExecStart=/usr/bin/proxysql-sync --config /etc/sidekick/proxysql-sync.conf" in \
        open(root.p("/lib/systemd/system/proxysql-sync.service")).read()
    # xinetd serves an entry at its next reload: the package's is off until the administrator says.
    assert re.search(r"^\s*disable\s*=\s*yes\s*$", open(root.p("/etc/xinetd.d/mysqlchk")).read(), re.M)
    assert "server          = /usr/bin/clustercheck" in open(root.p("/etc/xinetd.d/mysqlchk")).read()
    # The configuration: root:proxysql-sync 0640; the drain drop-in only where systemd does not look.
    assert mode_owner(root.p(CONF)) == (0o640, 0, gid_of(root, "proxysql-sync"))
    assert os.path.isfile(root.p(DROP_IN))
    for d in ("/lib/systemd/system/proxysql.service.d", "/usr/lib/systemd/system/proxysql.service.d",
              "/etc/systemd/system/proxysql.service.d"):
        assert not os.path.exists(root.p(d)), d
    assert not glob.glob(root.p("/etc/cron.d/*sidekick*")), "a cron file would run at once"
    assert os.path.isfile(root.p("/usr/share/doc/proxysql-sync/examples/cron-sidekick"))
    assert os.path.isfile(root.p("/usr/share/doc/sidekick-probes/copyright"))


def test_clustercheck_diverts_another_packages(root):
    """Another package's clustercheck and its socket units (Percona's) are diverted, not refused:
    dpkg installs sidekick-probes' files in their place and keeps theirs as NAME.distrib."""
    assert open(root.p("/usr/bin/clustercheck"), "rb").read(4) == b"\x7fELF"
    assert "the stand-in's clustercheck" in open(root.p("/usr/bin/clustercheck.distrib")).read()
    assert "the stand-in's" not in open(root.p("/lib/systemd/system/clustercheck.socket")).read()
    listed = root.run("dpkg-divert", "--list").stdout
    for path in DIVERTED:
        assert "diversion of %s to %s.distrib by sidekick-probes" % (path, path) in listed, listed
        assert os.path.exists(root.p(path + ".distrib")), path


def test_conffiles(root):
    def conffiles(pkg):
        with open(root.p("/var/lib/dpkg/info/%s.conffiles" % pkg)) as f:
            return f.read().split()
    assert conffiles("proxysql-sync") == ["/" + CONF]
    assert conffiles("sidekick-probes") == ["/etc/xinetd.d/mysqlchk"]


def test_no_server_pulled_in(root):
    new = set(root.packages()) - set(root.before)
    assert {"sidekick-probes", "proxysql-sync"} <= new
    assert not [p for p in new if SERVERS.match(p)], sorted(new)
    assert not os.path.exists(root.p("/bin/systemctl")) and not os.path.exists(root.p("/usr/bin/systemctl"))


def test_system_user(root):
    name, _, uid, gid, _, home, shell = root.run("getent", "passwd", "proxysql-sync").stdout.strip().split(":")
    assert int(uid) < 1000 and int(gid) == gid_of(root, "proxysql-sync")
    assert home == "/nonexistent" and not os.path.exists(root.p(home))
    assert shell == "/usr/sbin/nologin"


def test_config_readable_by_the_agent_only(root):
    # As proxysql-sync the file is read (the check then stops at the admin password, a credential
    # systemd provides); as another user it is not.
    agent = root.run("/usr/bin/proxysql-sync", "--check-config", "--config", "/" + CONF,
                     user="proxysql-sync:proxysql-sync", check=False)
    assert "Permission denied" not in agent.stderr and "password_file" in agent.stderr, agent.stderr
    other = root.run("/usr/bin/proxysql-sync", "--check-config", "--config", "/" + CONF,
                     user="nobody:nogroup", check=False)
    assert other.returncode == 2 and "Permission denied" in other.stderr, other.stderr


def test_versions(root):
    for b in PROBES + ["proxysql-sync"]:
        out = root.run("/usr/bin/" + b, "--version").stdout
        assert VERSION in out, (b, out)


def test_reinstall_keeps_edited_conffile(root):
    with open(root.p(CONF), "a") as f:
        f.write("# edited by the administrator\n")
    root.run("dpkg", "-i", *["/tmp/debs/" + os.path.basename(d) for d in debs()])
    assert "# edited by the administrator" in open(root.p(CONF)).read()
    assert mode_owner(root.p(CONF)) == (0o640, 0, gid_of(root, "proxysql-sync"))
    passwd = open(root.p("/etc/passwd")).read()
    assert len(re.findall(r"^proxysql-sync:", passwd, re.M)) == 1


def test_remove_then_purge(root):
    root.run("dpkg", "-r", "proxysql-sync", "sidekick-probes")
    for b in PROBES + ["proxysql-sync"]:
        assert b == "clustercheck" or not os.path.exists(root.p("/usr/bin/" + b)), b
    for unit in PROBE_UNITS + ["proxysql-sync.service"]:
        assert unit in ("clustercheck.socket", "clustercheck@.service") or \
            not os.path.exists(root.p("/lib/systemd/system/" + unit)), unit
    # The stand-in's files are back in their places, no diversion left.
    assert "the stand-in's clustercheck" in open(root.p("/usr/bin/clustercheck")).read()
    assert "the stand-in's" in open(root.p("/lib/systemd/system/clustercheck.socket")).read()
    assert "sidekick-probes" not in root.run("dpkg-divert", "--list").stdout
    for path in DIVERTED:
        assert not os.path.exists(root.p(path + ".distrib")), path
    assert not os.path.exists(root.p(DROP_IN))
    assert os.path.exists(root.p(CONF)) and os.path.exists(root.p("/etc/xinetd.d/mysqlchk"))
    assert root.packages()["proxysql-sync"] == "rc"

    root.run("dpkg", "-P", "proxysql-sync", "sidekick-probes")
    assert not os.path.exists(root.p("/etc/sidekick"))
    assert not os.path.exists(root.p("/etc/xinetd.d/mysqlchk"))
    assert "proxysql-sync" not in root.packages() and "sidekick-probes" not in root.packages()
    # The system user stays on purge (docs/packages.md).
    assert root.run("getent", "passwd", "proxysql-sync", check=False).returncode == 0


def test_no_service_started_stopped_enabled_or_disabled(root):
    # After test_remove_then_purge: install, reinstall, remove and purge have all run. systemd may
    # reload its unit files (so it sees the package's units, then forgets them); nothing else.
    calls = root.calls()
    assert calls and set(calls) == {"systemctl --system daemon-reload"}, calls


@pytest.mark.skipif(shutil.which("lintian") is None, reason="lintian not installed (make deps)")
def test_lintian_no_error():
    skip_unless_built(need_root_tree=False)
    r = subprocess.run(["lintian", "--fail-on", "error"]
                       + debs(), capture_output=True, text=True, timeout=300)
    errors = [line for line in r.stdout.splitlines() if line.startswith("E:")]
    assert r.returncode == 0 and not errors, r.stdout + r.stderr


def test_build_deps_are_no_test_set_up():
    """`tests/deps.sh build` (make build-deps) installs no server or test tool and touches no service."""
    text = open(os.path.join(REPO, "tests", "deps.sh")).read()
    build = re.search(r'^build_packages="(.*?)"', text, re.S | re.M).group(1).split()
    assert build and not [p for p in build if SERVERS.match(p) or p in (
        "prometheus", "podman", "buildah", "valgrind", "clang", "npm", "lintian", "mariadb-client")], build
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if "systemctl disable" in line:     # only inside an `if [ -n "$want_test" ] ...; then`
            assert "want_test" in lines[i - 1] and lines[i - 1].startswith("if "), line
