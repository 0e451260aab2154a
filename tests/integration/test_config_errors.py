"""Config errors: numbers read as written, and one shape for every error (FILE:LINE: setting: problem).

Debian's libconfig (1.5) wraps an integer past 32 bits silently (4294967306 reads as 10, a port
of 4294970592 as 3296) and reads 1e400 as infinity: each binary refuses such a number with exit 2
and one line naming the file, the line, the setting and the number as written.
"""

import os
import subprocess

import pytest

BIN = os.environ.get("SIDEKICK_BIN", os.path.join(os.path.dirname(__file__), "..", "..", "bin"))
PROBES = ["liveness-check", "readiness-check", "clustercheck", "haproxy-check", "proxysql-check"]


def run(argv, cfg):
    return subprocess.run([os.path.join(BIN, argv[0]), *argv[1:], "--config", cfg], capture_output=True,
                          text=True, timeout=10, stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("probe", PROBES)
def test_a_probe_refuses_a_port_that_wraps(probe, tmp_path):
    cfg = tmp_path / "probe.cfg"
    cfg.write_text("# the node\ntimeout = 2;\nport = 4294970592;\n")
    r = run([probe], str(cfg))
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert r.stdout == ""
    assert r.stderr == (f"{probe}: {cfg}:3: port: 4294970592 is out of range "
                        "(a number is -2147483648..2147483647, or 64-bit with an L suffix)\n")


@pytest.mark.parametrize("text, line, want", [
    ('clusters = ( { alias = "shop";\n  writer_hostgroup = 4294967306; reader_hostgroup = 11; } );\n', 2,
     "writer_hostgroup: 4294967306 is out of range"),
    ("quiescence-max = 1e400;\n", 1, "quiescence-max: 1e400 is out of range (not a finite number)"),
    ("health-max-connections = 99999999999;\n", 1, "health-max-connections: 99999999999 is out of range"),
    ("admin-timeout = 2147483648;\n", 1, "admin-timeout: 2147483648 is out of range"),
])
def test_the_agent_refuses_a_number_that_wraps(text, line, want, tmp_path):
    cfg = tmp_path / "sync.cfg"
    cfg.write_text('consul-addr = "127.0.0.1:8500";\n' + text)
    r = run(["proxysql-sync", "--check-config"], str(cfg))
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert r.stderr.startswith(f"proxysql-sync: {cfg}:{line + 1}: {want}"), r.stderr
    assert len(r.stderr.splitlines()) == 1 and "configuration ok" not in r.stdout


# One shape for every config error: FILE:LINE: setting: problem (the file and line where the
# file gave it; a whole-config check names the list entry's line).
SHAPES = [
    ('consul-adr = "x";\n', "{f}:1: consul-adr: unknown setting"),
    ('clusters = (\n { alias = "shop";\n writer_hostgroup = 1;\n bogus = 1; }\n);\n',
     "{f}:4: bogus: unknown setting"),
    ('clusters = (\n { alias = "shop"; writer_hostgroup = "x"; } );\n',
     "{f}:2: writer_hostgroup: must be a whole number"),
    ('clusters = (\n { alias = "shop";\n writer_hostgroup = 2147483647L;\n reader_hostgroup = -1; } );\n',
     "{f}:4: reader_hostgroup: -1 is out of range (0..2147483647)"),
    ('clusters = ( { writer_hostgroup = 1; } );\n', "{f}:1: alias: is missing"),
    ('targets = (\n { name = "a";\n address = "127.0.0.1:6032";\n password_file = "/nonexistent/pw"; } );\n',
     "{f}:4: password_file: /nonexistent/pw: No such file or directory (target a)"),
    ('region = "eu";\nadmin-addr = "127.0.0.1:6032";\nclusters = (\n { alias = "shop";\n writer_hostgroup = 1;\n'
     ' reader_hostgroup = 1; }\n);\n', "{f}:4: clusters: cluster shop: reader_hostgroup equals writer_hostgroup"),
    ('region = "eu";\nadmin-addr = "127.0.0.1:6032";\nclusters = ( { alias = "a"; writer_hostgroup = 1; },\n'
     ' { alias = "b"; writer_hostgroup = 1; } );\n', "{f}:4: clusters: clusters a and b share a hostgroup"),
    ('region = "eu";\nadmin-addr = 127.0.0.1:6032;\n',
     "{f}:2: syntax error (libconfig expects name = value; with a value that is a number, true or false, a "
     '"quoted string", a list ( ... ) or a group { ... })'),
    ('services = ( 1 );\n', "{f}:1: services: a service is a group { name = ...; }"),
    ('listing = ( 1 );\n', "{f}:1: listing: unknown setting (lists: clusters, patroni, targets, services)"),
    ('admin-addr = "127.0.0.1:6032";\npatroni = (\n { writer_hostgroup = 20; } );\n', "{f}:3: scope: is missing"),
    ('admin-addr = "127.0.0.1:6032";\npatroni = (\n { scope = "pg";\n writer_hostgroup = 20;\n'
     ' reader_hostgroup = 20; } );\n', "{f}:3: patroni: cluster pg: reader_hostgroup equals writer_hostgroup"),
    ('admin-addr = "127.0.0.1:6032";\npatroni = ( { scope = "pg"; writer_hostgroup = 20; },\n'
     ' { scope = "pg"; namespace = "/service/"; writer_hostgroup = 30; } );\n',
     "{f}:3: patroni: cluster pg is listed twice"),
    ('admin-addr = "127.0.0.1:6032";\npatroni = ( { scope = "a"; writer_hostgroup = 20; },\n'
     ' { scope = "b"; writer_hostgroup = 30; reader_hostgroup = 20; } );\n',
     "{f}:3: patroni: clusters a and b share a hostgroup"),
    ('patroni = ( { scope = "a/b"; writer_hostgroup = 20; } );\n',
     "{f}:1: scope: 'a/b' must be a non-empty KV path segment"),
    ('patroni = ( { scope = "a";\n writer_hostgroup = 20;\n max_lag_bytes = -1; } );\n',
     "{f}:3: max_lag_bytes: must be 0 or more"),
    ('patroni = ( { scope = "a";\n writer_hostgroup = 20;\n roles = "auto"; } );\n',
     "{f}:3: roles: 'auto' is not kv or monitor"),
]


@pytest.mark.parametrize("text, want", SHAPES, ids=[w.split(": ", 1)[1][:40] for _, w in SHAPES])
def test_the_agent_names_file_line_and_setting(text, want, tmp_path):
    cfg = tmp_path / "sync.cfg"
    cfg.write_text(text)
    r = run(["proxysql-sync", "--check-config"], str(cfg))
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert r.stderr == "proxysql-sync: " + want.replace("{f}", str(cfg)) + "\n"


def test_clustercheck_listen_is_a_usage_error():
    """A bad --listen is one line and exit 2 like any other bad option, not a timestamped log line."""
    r = subprocess.run([os.path.join(BIN, "clustercheck"), "--listen", "abc"], capture_output=True, text=True,
                       timeout=10, stdin=subprocess.DEVNULL)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr == "clustercheck: --listen: 'abc': port is not a number from 0 to 65535\n"


def test_one_config_path_everywhere():
    """The agent's config file is /etc/sidekick/proxysql-sync.conf in every doc, unit, cron line,
    image and manifest (an /etc path ending in proxysql-sync.cfg or .conf names no other)."""
    import re
    root = os.path.join(os.path.dirname(__file__), "..", "..")
    listed = subprocess.run(["git", "-C", root, "ls-files", "README.md", "docs", "dist", "k8s", "containers",
                             "sync", "tests/demo.py"], capture_output=True, text=True, check=True).stdout.split()
    pattern = re.compile(r"/etc/[\w./-]*proxysql-sync\.(?:cfg|conf)\b")
    seen = {}
    for name in listed:
        with open(os.path.join(root, name), errors="replace") as f:
            for path in pattern.findall(f.read()):
                seen.setdefault(path, []).append(name)
    assert set(seen) == {"/etc/sidekick/proxysql-sync.conf"}, seen
