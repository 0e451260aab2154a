"""Numbers in config files are read as written, in every binary that reads one.

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
