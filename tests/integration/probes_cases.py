"""The probes' expected behaviour in every server state, as data, and the helpers that run them.

Each state of reference/environment.md (healthy, desynced, isolated, SIGSTOPped, stopped,
read-only, joiner/donor during SST, replica lagging...) lists *cells*: one probe run with
its settings, the exit code it must return and the one line it must print. The tests in
test_probes.py put the servers into a state and run its cells; docs/probes.md shows the
same table (``/usr/bin/python3 tests/integration/probes_cases.py --markdown`` prints it,
and a test fails when the two disagree).

Message templates: ``{ip}``, ``{port}``, ``{cell}`` (the cell's private directory) and
``{datadir}`` are filled in; ``<N>`` matches a number and ``…`` any text. Clustercheck
one-shot cells name a response file under tests/data/http/ instead (``http:synced``).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BIN = os.environ.get("SIDEKICK_BIN", os.path.join(ROOT, "bin"))
HTTP_DATA = os.path.join(ROOT, "tests", "data", "http")
DOC = os.path.join(ROOT, "docs", "probes.md")

BINARIES = {
    "liveness": "liveness-check",
    "readiness": "readiness-check",
    "replica": "readiness-check",      # readiness-check --replica
    "haproxy": "haproxy-check",
    "clustercheck": "clustercheck",
    "proxysql": "proxysql-check",
}
WRONG_PASSWORD = "not-the-password-4711"
BACKEND = "galera-nodes"
# The deadline rule: a probe returns within its deadline + this (DESIGN.md principle 1).
SLACK = 0.100


@dataclasses.dataclass
class Cell:
    """One probe run: settings, expected exit code and output."""

    probe: str
    rc: int
    expect: str                          # template, "http:<name>", or "" for no output
    args: tuple = ()
    env: dict = dataclasses.field(default_factory=dict)
    files: dict = dataclasses.field(default_factory=dict)   # relative path -> bytes/str
    auth: str = "good"                   # good | wrong-password | unknown-user
    deadline: float | None = None        # expected deadline: wall in [d, d + SLACK]
    stream: str = "stdout"               # where the line goes
    json: bool = False                   # compare the "message" of the JSON object

    @property
    def binary(self):
        return BINARIES[self.probe]

    def settings(self):
        """Human description of what differs from the defaults (for the docs)."""
        parts = [" ".join(self.args)] if self.args else []
        parts += [f"{k}={v}" for k, v in self.env.items()]
        for k, v in self.files.items():
            if v == "10MB":
                parts.append(f"{k}: 10 MB")
            elif v in ("", b""):
                parts.append(f"{k} exists")
            elif len(v) > 40:
                parts.append(f"{k}: {len(v)} bytes")
            else:
                parts.append(f"{k}: " + (repr(v)[1:] if isinstance(v, bytes) else repr(v)))
        if self.auth != "good":
            parts.append(self.auth)
        return parts


@dataclasses.dataclass
class State:
    title: str
    how: str
    cells: list


def C(probe, rc, expect, *args, **kw):
    return Cell(probe, rc, expect, tuple(args), **kw)


ALIVE = "alive: wsrep_cluster_status=Primary"
READY_SYNCED = "ready: wsrep_local_state=4 (Synced), wsrep_cluster_status=Primary"
READY_DONOR = "ready: wsrep_local_state=2 (Donor/Desynced), wsrep_cluster_status=Primary"
NOT_READY_DONOR = "not ready: wsrep_local_state=2 (Donor/Desynced), donor not allowed"
HA_OK = "PXC node {ip} for backend %s is ok" % BACKEND
HA_NOT_OK = "PXC node {ip} for backend %s is not ok: " % BACKEND
REFUSED = "connection refused ({ip}:{port}): …"
STARTING = "MySQL is starting up, not killing it..."
TIMEOUT_CONNECTING = "timeout after 1.0s connecting ({ip}:{port}, --timeout)"
TIMEOUT_QUERY = "timeout after 1.0s waiting for the query ({ip}:{port}, --timeout)"
TOO_MANY = "server error ({ip}:{port}): Too many connections (1040)"
NUL_STARTUP = b"\0\0\0\0startup"

def refused(why):
    """The four probes against a server that turns the connection down at once."""
    return [C("liveness", 1, "not alive: " + why), C("readiness", 1, "not ready: " + why),
            C("haproxy", 1, HA_NOT_OK + why), C("clustercheck", 1, "http:not-synced")]


def timed_out(why):
    """The four probes with a 1 s deadline against a server that stops answering at some step."""
    return [
        C("liveness", 1, "not alive: " + why, "--timeout", "1", deadline=1.0),
        C("readiness", 1, "not ready: " + why, "--timeout", "1", deadline=1.0),
        C("haproxy", 1, HA_NOT_OK + why.replace("--timeout", "--timeout or HA_CONNECTION_TIMEOUT"),
          files={"envsecret/HA_CONNECTION_TIMEOUT": "1"}, deadline=1.0),
        C("clustercheck", 1, "http:not-synced", "--timeout", "1", deadline=1.0),
    ]


STATES = {
    "healthy": State("healthy", "all three nodes Synced, Primary", [
        C("liveness", 0, ALIVE),
        C("liveness", 0, ALIVE, env={"LIVENESS_CHECK_TIMEOUT": "1"}),
        C("readiness", 0, READY_SYNCED),
        C("readiness", 0, READY_SYNCED, env={"READINESS_CHECK_TIMEOUT": "1"}),
        C("readiness", 0, READY_SYNCED, "--require-writable"),
        C("readiness", 1, "not ready: read_only=OFF, read-only required", "--require-read-only"),
        C("readiness", 0, READY_SYNCED, "--json", json=True),
        C("haproxy", 0, HA_OK),
        C("haproxy", 0, "", files={"envsecret/VERBOSE": "0"}),
        C("haproxy", 0, "PXC node {ip} for backend galera-admin-nodes is ok",
          env={"HAPROXY_PROXY_NAME": "galera-admin-nodes"}),
        C("clustercheck", 0, "http:synced"),
        C("clustercheck", 1, "http:disabled", files={"clustercheck.disabled": ""}),
        C("clustercheck", 0, "synced: " + READY_SYNCED[7:], "--json", json=True),
    ]),
    "donor-allowed": State(
        "desynced, donor allowed", "`SET GLOBAL wsrep_desync=ON`: 2 Donor/Desynced, Primary", [
            C("liveness", 0, ALIVE),
            C("readiness", 0, READY_DONOR),
            C("readiness", 0, READY_DONOR, env={"AVAILABLE_WHEN_DONOR": "1"}),
            C("haproxy", 0, HA_OK, files={"envsecret/OK_IF_DONOR": "1", "AVAILABLE_NODES": "3"}),
            C("haproxy", 0, HA_OK, "--ok-if-donor", files={"AVAILABLE_NODES": "3"}),
            C("haproxy", 0, HA_OK, files={"AVAILABLE_NODES": "1"}),       # the last node
            C("clustercheck", 0, "http:synced", env={"AVAILABLE_WHEN_DONOR": "1"}),
        ]),
    "donor-denied": State(
        "desynced, donor not allowed", "`SET GLOBAL wsrep_desync=ON`: 2 Donor/Desynced, Primary", [
            C("readiness", 1, NOT_READY_DONOR, env={"AVAILABLE_WHEN_DONOR": "0"}),
            C("readiness", 1, NOT_READY_DONOR, "--available-when-donor=0"),
            C("haproxy", 1, HA_NOT_OK + "wsrep_local_state=2 (Donor/Desynced), donor not allowed",
              files={"AVAILABLE_NODES": "3"}),
            C("clustercheck", 1, "http:not-synced"),
            C("clustercheck", 1, "http:not-synced", env={"AVAILABLE_WHEN_DONOR": "0"}),
            C("clustercheck", 1, "not synced: " + NOT_READY_DONOR[11:], "--json", json=True),
        ]),
    "isolated": State(
        "isolated, non-Primary", "`gmcast.isolate=1`: 0 Initialized, non-Primary, wsrep_ready OFF", [
            C("liveness", 1, "not alive: wsrep_cluster_status=non-Primary"),
            C("liveness", 0, STARTING, env={"MYSQL_STATE_FILE": "{cell}/mysql.state"},
              files={"mysql.state": NUL_STARTUP}),
            C("readiness", 1, "not ready: wsrep_cluster_status=non-Primary"),
            C("haproxy", 1, HA_NOT_OK + "wsrep_cluster_status=non-Primary"),
            C("clustercheck", 1, "http:not-synced"),
            C("clustercheck", 1, "http:not-synced", env={"AVAILABLE_WHEN_DONOR": "1"}),
        ]),
    "sigstopped": State(
        "mysqld SIGSTOPped", "`kill -STOP`: TCP connects, no greeting ever", [
            C("liveness", 1, "not alive: timeout after 1.0s connecting ({ip}:{port}, --timeout)",
              "--timeout", "1", deadline=1.0),
            C("liveness", 1, "not alive: timeout after 0.8s connecting ({ip}:{port}, "
              "LIVENESS_CHECK_TIMEOUT)", env={"LIVENESS_CHECK_TIMEOUT": "1"}, deadline=0.8),
            C("liveness", 0, STARTING, "--timeout", "1", env={"MYSQL_STATE_FILE": "{cell}/mysql.state"},
              files={"mysql.state": NUL_STARTUP}, deadline=1.0),
            C("readiness", 1, "not ready: timeout after 1.0s connecting ({ip}:{port}, --timeout)",
              "--timeout", "1", deadline=1.0),
            C("readiness", 1, "not ready: timeout after 0.3s connecting ({ip}:{port}, --timeout)",
              "--timeout", "0.3", deadline=0.3),
            C("readiness", 1, "not ready: timeout after 0.8s connecting ({ip}:{port}, "
              "READINESS_CHECK_TIMEOUT)", env={"READINESS_CHECK_TIMEOUT": "1"}, deadline=0.8),
            C("haproxy", 1, HA_NOT_OK + "timeout after 1.0s connecting ({ip}:{port}, --timeout or "
              "HA_CONNECTION_TIMEOUT)", files={"envsecret/HA_CONNECTION_TIMEOUT": "1"}, deadline=1.0),
            C("clustercheck", 1, "http:not-synced", "--timeout", "1", deadline=1.0),
        ]),
    "stopped": State("stopped", "SIGTERM: the port refuses (2002/2003)", [
        C("liveness", 1, "not alive: " + REFUSED),
        C("liveness", 1, "not alive: " + REFUSED, env={"MYSQL_STATE_FILE": "{cell}/mysql.state"},
          files={"mysql.state": "ready"}),
        C("liveness", 0, STARTING, env={"MYSQL_STATE_FILE": "{cell}/mysql.state"},
          files={"mysql.state": NUL_STARTUP}),
        C("readiness", 1, "not ready: " + REFUSED),
        C("haproxy", 1, HA_NOT_OK + REFUSED),
        C("clustercheck", 1, "http:not-synced"),
    ]),
    # The faults below are made on a 1-node Galera in a network namespace of the test's own
    # (test_probes.py, netns_node), so iptables rules touch nothing else; it listens on 3306.
    "killed": State("mysqld killed", "`kill -KILL`: the port refuses at once", refused(REFUSED)),
    "packets-dropped": State(
        "packets to the port dropped", "`iptables -I INPUT -p tcp --dport 3306 -j DROP`: every SYN "
        "vanishes", timed_out(TIMEOUT_CONNECTING)),
    "replies-dropped": State(
        "replies dropped after the login", "`iptables -I OUTPUT -p tcp --sport 3306 -m connbytes "
        "--connbytes 400: --connbytes-dir reply --connbytes-mode bytes -j DROP`: the handshake "
        "completes, the answer to the query never arrives", timed_out(TIMEOUT_QUERY)),
    "long-lock": State(
        "slow to answer: a long lock", "`SET GLOBAL init_connect='DO GET_LOCK(...)'` on a lock "
        "another session holds: every login waits", timed_out(TIMEOUT_QUERY)),
    "too-many-connections": State(
        "refusing: too many connections", "`SET GLOBAL max_connections=10` (its minimum), 10 "
        "connections held", refused(TOO_MANY)),
    "read-only": State("read-only", "`SET GLOBAL read_only=ON`: wsrep unchanged", [
        C("liveness", 0, ALIVE),
        C("readiness", 0, READY_SYNCED),
        C("readiness", 1, "not ready: read_only=ON", "--require-writable"),
        C("readiness", 0, READY_SYNCED, "--require-read-only"),
        C("haproxy", 0, HA_OK),
        C("clustercheck", 0, "http:synced"),
        C("clustercheck", 1, "http:read-only", env={"AVAILABLE_WHEN_READONLY": "0"}),
        C("clustercheck", 1, "http:read-only", "--available-when-readonly=0"),
    ]),
    "joiner": State("joiner during SST", "held rsync SST: the joiner's port refuses, "
                    "`sst_in_progress` in its datadir", [
        C("liveness", 1, "not alive: " + REFUSED),
        C("liveness", 0, "alive: receiving an SST: wsrep_sst_rsync --role joiner (pid <N>, running …) under "
          "mysqld pid <N> (the --parent of wsrep_sst_rsync in {datadir}/wsrep_sst.pid); sst_in_progress present",
          "--datadir", "{datadir}"),
        C("readiness", 1, "not ready: " + REFUSED, "--datadir", "{datadir}"),
        C("haproxy", 1, HA_NOT_OK + REFUSED),
        C("clustercheck", 1, "http:not-synced"),
    ]),
    "donor": State("donor during SST", "the donor of that held SST: 2 Donor/Desynced, Primary", [
        C("liveness", 0, ALIVE),
        C("readiness", 0, READY_DONOR),
        C("readiness", 1, NOT_READY_DONOR, env={"AVAILABLE_WHEN_DONOR": "0"}),
        C("haproxy", 1, HA_NOT_OK + "wsrep_local_state=2 (Donor/Desynced), donor not allowed",
          files={"AVAILABLE_NODES": "3"}),
        C("clustercheck", 1, "http:not-synced"),
        C("clustercheck", 0, "http:synced", env={"AVAILABLE_WHEN_DONOR": "1"}),
    ]),
    "defaults-file-absent": State(
        "DEFAULTS_EXTRA_FILE names no file", "healthy node; the scripts' `[ -r ]` test skips such a "
        "file", [
            C("liveness", 0, ALIVE, env={"DEFAULTS_EXTRA_FILE": "{cell}/absent.cnf"}),
            C("readiness", 0, READY_SYNCED, env={"DEFAULTS_EXTRA_FILE": "{cell}/absent.cnf"}),
            C("clustercheck", 0, "http:synced", env={"DEFAULTS_EXTRA_FILE": "{cell}/absent.cnf"}),
        ]),
    "replica-healthy": State("replica healthy", "async GTID replica: IO/SQL Yes, lag 0, read_only ON", [
        C("replica", 0, "ready: IO and SQL threads running, lag 0s"),
        C("replica", 0, "ready: IO and SQL threads running, lag 0s", "--max-lag", "5"),
        C("replica", 0, "ready: IO and SQL threads running, lag 0s", "--require-read-only"),
        C("replica", 1, "not ready: read_only=ON, writable required", "--require-writable"),
    ]),
    "replica-primary": State("primary checked as a replica", "the async primary (no replication)", [
        C("replica", 1, "not ready: not a replica (SHOW REPLICA STATUS is empty)"),
        C("readiness", 1, "not ready: wsrep_cluster_status=Disconnected"),
    ]),
    "replica-lagging": State("replica lagging", "apply blocked by a row lock: lag grows 1/s", [
        C("replica", 1, "not ready: lag <N>s > max 1s", "--max-lag", "1"),
        C("replica", 0, "ready: IO and SQL threads running, lag <N>s"),
        C("replica", 0, "ready: IO and SQL threads running, lag <N>s", "--max-lag", "3600"),
    ]),
    "replica-sql-stopped": State("replica SQL thread stopped", "`STOP SLAVE SQL_THREAD`: lag NULL", [
        C("replica", 1, "not ready: SQL thread No"),
        C("replica", 1, "not ready: SQL thread No", "--max-lag", "3600"),
    ]),
    "replica-sql-error": State("replica SQL thread failed", "duplicate key: Last_SQL_Errno 1062", [
        C("replica", 1, "not ready: SQL thread No, Last_SQL_Errno=1062"),
    ]),
    "replica-primary-down": State("replica, primary down", "primary SIGTERMed: IO thread Connecting", [
        C("replica", 1, "not ready: IO thread Connecting, Last_IO_Errno=2003"),
    ]),
    "replica-sigstopped": State("replica SIGSTOPped", "`kill -STOP` the replica's mysqld", [
        C("replica", 1, "not ready: timeout after 1.0s connecting ({ip}:{port}, --timeout)",
          "--timeout", "1", deadline=1.0),
    ]),
    "bypass": State("bypass files", "nothing listens on the port (any connection would fail)", [
        C("liveness", 0, "alive: recovery file present", files={"recovery-case": ""}),
        C("liveness", 0, "alive: {cell}/datadir/sleep-forever present",
          files={"datadir/sleep-forever": ""}),
        C("liveness", 0, "alive: {cell}/datadir/sst_in_progress present (<N>s old, under --sst-file-grace 300s)",
          files={"datadir/sst_in_progress": ""}),
        C("liveness", 0, "alive: {cell}/datadir/sst_in_progress present (--trust-sst-file)", "--trust-sst-file",
          files={"datadir/sst_in_progress": ""}),
        C("liveness", 0, "alive: {cell}/datadir/wsrep_recovery_verbose.log present",
          files={"datadir/wsrep_recovery_verbose.log": ""}),
        C("liveness", 0, STARTING, env={"MYSQL_STATE_FILE": "{cell}/mysql.state"},
          files={"mysql.state": NUL_STARTUP}),
        C("liveness", 0, STARTING, env={"MYSQL_STATE_FILE": "{cell}/mysql.state"},
          files={"mysql.state": "startup\n"}),
        C("liveness", 1, "not alive: " + REFUSED, env={"MYSQL_STATE_FILE": "{cell}/mysql.state"},
          files={"mysql.state": b"\0\0ready"}),
        C("readiness", 0, "ready: recovery or sleep-forever file present", files={"recovery-case": ""}),
        C("readiness", 0, "ready: recovery or sleep-forever file present",
          files={"datadir/sleep-forever": ""}),
        C("readiness", 1, "not ready: " + REFUSED, files={"datadir/sst_in_progress": ""}),
        C("readiness", 1, "not ready: " + REFUSED, env={"MYSQL_STATE_FILE": "{cell}/mysql.state"},
          files={"mysql.state": NUL_STARTUP}),
        C("haproxy", 1, HA_NOT_OK + REFUSED, files={"recovery-case": ""}),
        C("clustercheck", 1, "http:disabled", files={"clustercheck.disabled": ""}),
    ]),
    "credentials": State("wrong credentials", "healthy node, bad password or user", [
        C("liveness", 1, "not alive: access denied ({ip}:{port}): Access denied for user "
          "'monitor'@'…' (using password: YES) (1045)", auth="wrong-password"),
        C("readiness", 1, "not ready: access denied ({ip}:{port}): Access denied for user "
          "'monitor'@'…' (using password: YES) (1045)", auth="wrong-password"),
        C("readiness", 1, "not ready: access denied ({ip}:{port}): Access denied for user "
          "'nosuchuser'@'…' (1698)", auth="unknown-user"),
        C("readiness", 1, "not ready: access denied ({ip}:{port}): Access denied for user "
          "'monitor'@'…' (using password: NO) (1045)", auth="no-password"),
        C("liveness", 1, "not alive: access denied ({ip}:{port}): Access denied for user "
          "'nosuchuser'@'…' (1698)", env={"MYSQL_USERNAME": "nosuchuser"}),
        C("haproxy", 1, HA_NOT_OK + "access denied ({ip}:{port}): Access denied for user "
          "'monitor'@'…' (using password: YES) (1045)", auth="wrong-password"),
        C("clustercheck", 1, "http:not-synced", auth="wrong-password"),
        C("clustercheck", 1, "not synced: access denied ({ip}:{port}): Access denied for user "
          "'clustercheckuser'@'…' (using password: YES) (1045)", "--json", auth="wrong-password",
          json=True),
    ]),
    "unknown-host": State("unknown host", "`--host nosuchhost.invalid`, run in an empty network namespace: "
                          "no name server answers, the lookup fails at once", [
        C("liveness", 1, "not alive: unknown host (nosuchhost.invalid:{port}): unknown host "
          "'nosuchhost.invalid': …", "--host", "nosuchhost.invalid"),
        C("readiness", 1, "not ready: unknown host (nosuchhost.invalid:{port}): unknown host "
          "'nosuchhost.invalid': …", "--host", "nosuchhost.invalid"),
        C("haproxy", 1, HA_NOT_OK.replace("{ip}", "nosuchhost.invalid") + "unknown host "
          "(nosuchhost.invalid:{port}): unknown host 'nosuchhost.invalid': …",
          "--host", "nosuchhost.invalid"),
        C("clustercheck", 1, "http:not-synced", "--host", "nosuchhost.invalid"),
    ]),
    "hostile": State("hostile input", "no server needed: exit 2, one line on stderr, nothing on stdout", [
        C("liveness", 2, "liveness-check: env LIVENESS_CHECK_TIMEOUT: 'abc' is not a whole number …",
          env={"LIVENESS_CHECK_TIMEOUT": "abc"}, stream="stderr"),
        C("liveness", 2, "liveness-check: env LIVENESS_CHECK_TIMEOUT: '0' is not a whole number …",
          env={"LIVENESS_CHECK_TIMEOUT": "0"}, stream="stderr"),
        C("readiness", 2, "readiness-check: env READINESS_CHECK_TIMEOUT: '-5' is not a whole number …",
          env={"READINESS_CHECK_TIMEOUT": "-5"}, stream="stderr"),
        C("readiness", 2, "readiness-check: env READINESS_CHECK_TIMEOUT: '99999999999999999999' "
          "is not a whole number …", env={"READINESS_CHECK_TIMEOUT": "99999999999999999999"},
          stream="stderr"),
        C("readiness", 2, "readiness-check: env AVAILABLE_WHEN_DONOR: 'maybe' is not a boolean …",
          env={"AVAILABLE_WHEN_DONOR": "maybe"}, stream="stderr"),
        C("readiness", 2, "readiness-check: --timeout: 'abc' is not a number …", "--timeout", "abc",
          stream="stderr"),
        C("readiness", 2, "readiness-check: --timeout: '0' is not a number …", "--timeout", "0",
          stream="stderr"),
        C("readiness", 2, "readiness-check: unknown option '--frobnicate' (see --help)",
          "--frobnicate", stream="stderr"),
        C("readiness", 2, "readiness-check: --password is not accepted on the command line …",
          "--password", "xyz", stream="stderr"),
        C("readiness", 2, "readiness-check: defaults-extra-file {cell}/big.cnf: …",
          env={"DEFAULTS_EXTRA_FILE": "{cell}/big.cnf"}, files={"big.cnf": "10MB"}, stream="stderr"),
        C("readiness", 2, "readiness-check: password file {cell}/pw: …", "--password-file",
          "{cell}/pw", files={"pw": "x" * 5000}, stream="stderr"),
        C("readiness", 2, "readiness-check: password file {cell}/missing: …", "--password-file",
          "{cell}/missing", stream="stderr"),
        C("liveness", 2, "liveness-check: unknown option '--frobnicate' (see --help)", "--frobnicate",
          stream="stderr"),
        C("liveness", 2, "liveness-check: defaults-extra-file {cell}/big.cnf: …",
          "--defaults-extra-file", "{cell}/big.cnf", files={"big.cnf": "10MB"}, stream="stderr"),
        C("haproxy", 2, "haproxy-check: unknown option '--frobnicate' (see --help)", "--frobnicate",
          stream="stderr"),
        C("haproxy", 2, "haproxy-check: {cell}/envsecret/HA_CONNECTION_TIMEOUT: 'abc' is not a "
          "number from 0.05 to 3600", files={"envsecret/HA_CONNECTION_TIMEOUT": "abc"}, stream="stderr"),
        C("haproxy", 2, "haproxy-check: {cell}/envsecret/OK_IF_DONOR: 'perhaps' is not 0 or 1",
          files={"envsecret/OK_IF_DONOR": "perhaps"}, stream="stderr"),
        C("haproxy", 2, "haproxy-check: {cell}/AVAILABLE_NODES: 'many' is not a node count",
          files={"AVAILABLE_NODES": "many"}, stream="stderr"),
        C("haproxy", 2, "haproxy-check: defaults-extra-file {cell}/big.cnf: …",
          "--defaults-extra-file", "{cell}/big.cnf", files={"big.cnf": "10MB"}, stream="stderr"),
        C("clustercheck", 2, "clustercheck: unknown option '--frobnicate' (see --help)", "--frobnicate",
          stream="stderr"),
        C("clustercheck", 2, "clustercheck: env AVAILABLE_WHEN_READONLY: '2' is not a boolean …",
          env={"AVAILABLE_WHEN_READONLY": "2"}, stream="stderr"),
        C("clustercheck", 2, "clustercheck: defaults-extra-file {cell}/big.cnf: …",
          "--defaults-extra-file", "{cell}/big.cnf", files={"big.cnf": "10MB"}, stream="stderr"),
        C("replica", 2, "readiness-check: --max-lag: 'soon' is not a whole number …", "--max-lag", "soon",
          stream="stderr"),
    ]),
}

# States whose cells run against a port where nothing listens.
NO_SERVER_STATES = ("bypass", "hostile")


# -- secrets ---------------------------------------------------------------------------------
SECRETS: set = set()           # passwords the tests know; never in argv nor output
OUTPUTS: list = []             # (argv, stdout, stderr) of every probe run in this session


def register_secret(password):
    if password:
        SECRETS.add(password)


def assert_no_secret(text, where):
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    for s in SECRETS:
        assert s not in text, f"a test password appears in {where}"


# -- running probes --------------------------------------------------------------------------
@dataclasses.dataclass
class Result:
    argv: list
    rc: int
    out: bytes
    err: bytes
    wall: float

    @property
    def text(self):
        return self.out.decode("utf-8", "replace")

    @property
    def errtext(self):
        return self.err.decode("utf-8", "replace")

    def __str__(self):
        return (f"$ {' '.join(self.argv)}\nexit {self.rc} after {self.wall:.3f}s\n"
                f"stdout: {self.out!r}\nstderr: {self.err!r}")


def clean_env(extra=None):
    """No inherited MYSQL_*/MONITOR_*/AVAILABLE_* or k8s variables: each test says what it sets."""
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C"}
    env.update(extra or {})
    return env


# Runs inside a network namespace and times the probe alone (entering the namespace is not
# the probe's time).
_NETNS_RUNNER = r"""
import json, subprocess, sys, time
argv, env = json.loads(sys.stdin.read())
t = time.monotonic()
p = subprocess.run(argv, capture_output=True, stdin=subprocess.DEVNULL, env=env, timeout=30)
wall = time.monotonic() - t
print(json.dumps({"rc": p.returncode, "out": p.stdout.decode("latin-1"), "err": p.stderr.decode("latin-1"),
                  "wall": wall}))
"""


def run_in_netns(netns, argv, env=None):
    """Run a probe inside network namespace `netns` (what `ip netns exec` gives it)."""
    argv = [str(a) for a in argv]
    for a in argv:
        assert_no_secret(a, f"argv of {argv[0]}")
    # The environment may hold a password: it goes through a pipe, not the runner's argv.
    p = subprocess.run(["ip", "netns", "exec", netns, sys.executable, "-c", _NETNS_RUNNER],
                       input=json.dumps([argv, clean_env(env)]).encode(), capture_output=True, timeout=60)
    if p.returncode != 0:
        raise AssertionError(f"ip netns exec {netns} failed: {p.stderr.decode(errors='replace')}")
    d = json.loads(p.stdout)
    out, err = d["out"].encode("latin-1"), d["err"].encode("latin-1")
    OUTPUTS.append((argv, out, err))
    return Result(argv, d["rc"], out, err, d["wall"])


def run(argv, env=None, timeout=30, stdin=subprocess.DEVNULL, preexec_fn=None, record=True):
    """Run a probe; wall time is measured around the process only (spawn to exit)."""
    argv = [str(a) for a in argv]
    for a in argv:
        assert_no_secret(a, f"argv of {argv[0]}")
    t0 = time.monotonic()
    p = subprocess.Popen(argv, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env=clean_env(env), preexec_fn=preexec_fn)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        raise AssertionError(f"{argv} did not exit within {timeout}s: {out!r} {err!r}") from None
    wall = time.monotonic() - t0
    if record:
        OUTPUTS.append((argv, out, err))
    return Result(argv, p.returncode, out, err, wall)


def template_regex(template, **values):
    """Compile a message template: {name} filled in, <N> a number, … any text."""
    text = template
    for k, v in values.items():
        text = text.replace("{" + k + "}", str(v))
    pattern = re.escape(text).replace(re.escape("<N>"), r"\d+").replace(re.escape("…"), ".*")
    return re.compile(pattern, re.S)


def http_expected(name):
    with open(os.path.join(HTTP_DATA, f"clustercheck-{name}.bytes"), "rb") as f:
        return f.read()


def _write_files(cell_dir, files):
    for rel, content in files.items():
        path = os.path.join(cell_dir, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if content == "10MB":
            with open(path, "wb") as f:
                f.write(b"[client]\nuser=monitor\n" + b"# padding padding padding\n" * (400 * 1024))
            continue
        with open(path, "wb") as f:
            f.write(content.encode() if isinstance(content, str) else content)


class Target:
    """Where cells connect and with which accounts."""

    def __init__(self, ip, port, monitor, clustercheck, datadir="", netns=None):
        self.ip, self.port, self.datadir, self.netns = ip, port, datadir, netns
        self.monitor, self.clustercheck = monitor, clustercheck


def cell_argv_env(cell, target, cell_dir):
    """Build the argv and environment of one cell."""
    fill = {"ip": target.ip, "port": target.port, "cell": cell_dir, "datadir": target.datadir}

    def sub(s):
        for k, v in fill.items():
            s = s.replace("{" + k + "}", str(v))
        return s

    extra = [sub(a) for a in cell.args]
    env = {k: sub(v) for k, v in cell.env.items()}
    given = {a.split("=")[0] for a in extra if a.startswith("--")}
    mon, cc = target.monitor, target.clustercheck
    wrong_pw = os.path.join(cell_dir, "wrong-password")
    with open(wrong_pw, "w") as f:
        f.write(WRONG_PASSWORD)
    os.chmod(wrong_pw, 0o600)
    argv = [os.path.join(BIN, cell.binary)]
    if cell.probe == "replica":
        argv.append("--replica")
    if cell.probe != "haproxy" and "--host" not in given:
        argv += ["--host", target.ip]
    argv += ["--port", str(target.port)]
    if cell.probe in ("liveness", "readiness", "replica"):
        for opt, val in (("--datadir", "datadir"), ("--recovery-file", "recovery-case")):
            if opt not in given:
                argv += [opt, os.path.join(cell_dir, val)]
    # Accounts: liveness reads MONITOR_PASSWORD (the operator's fallback), readiness a secret
    # file, haproxy-check a [client] option file, clustercheck its own user's secret file.
    if cell.probe == "liveness":
        if "--defaults-extra-file" not in given and "DEFAULTS_EXTRA_FILE" not in env:
            argv += ["--defaults-extra-file", ""]
        if cell.auth == "good":
            env.setdefault("MONITOR_PASSWORD", mon.password)
        elif cell.auth == "wrong-password":
            env["MONITOR_PASSWORD"] = WRONG_PASSWORD
    elif cell.probe in ("readiness", "replica"):
        if "--defaults-extra-file" not in given and "DEFAULTS_EXTRA_FILE" not in env:
            argv += ["--defaults-extra-file", ""]
        if "--password-file" not in given and cell.auth != "no-password":
            argv += ["--password-file", mon.password_file if cell.auth in ("good", "unknown-user")
                     else wrong_pw]
        if cell.auth == "unknown-user":
            argv += ["--user", "nosuchuser"]
    elif cell.probe == "haproxy":
        cnf = mon.defaults_file
        if cell.auth == "wrong-password":
            cnf = os.path.join(cell_dir, "wrong.cnf")
            with open(cnf, "w") as f:
                f.write(f"[client]\nuser={mon.user}\npassword={WRONG_PASSWORD}\n")
            os.chmod(cnf, 0o600)
        if "--defaults-extra-file" not in given:
            argv += ["--defaults-extra-file", cnf]
        argv += ["--env-secret-dir", os.path.join(cell_dir, "envsecret"),
                 "--available-nodes-file", os.path.join(cell_dir, "AVAILABLE_NODES")]
        if "HAPROXY_PROXY_NAME" not in env:
            argv += ["--backend", BACKEND]
    elif cell.probe == "clustercheck":
        if "--defaults-extra-file" not in given and "DEFAULTS_EXTRA_FILE" not in env:
            argv += ["--defaults-extra-file", ""]
        argv += ["--user", cc.user,
                 "--password-file", cc.password_file if cell.auth == "good" else wrong_pw,
                 "--disabled-file", os.path.join(cell_dir, "clustercheck.disabled"),
                 "--log-file", os.path.join(cell_dir, "clustercheck.log")]
    argv += extra
    if cell.probe == "haproxy":
        # HAProxy's external-check argv: <proxy_addr> <proxy_port> <server_addr> <server_port>
        argv += ["127.0.0.1", "3306", target.ip, "3306"]
    return argv, env


def check_cell(cell, target, cell_dir):
    """Run one cell; return a list of mismatch descriptions (empty when it behaved)."""
    os.makedirs(cell_dir, exist_ok=True)
    _write_files(cell_dir, cell.files)
    argv, env = cell_argv_env(cell, target, cell_dir)
    r = run_in_netns(target.netns, argv, env) if target.netns else run(argv, env=env)
    problems = []
    if r.rc != cell.rc:
        problems.append(f"exit {r.rc}, expected {cell.rc}")
    fill = {"ip": target.ip, "port": target.port, "cell": cell_dir, "datadir": target.datadir}
    if cell.stream == "stderr":
        lines = r.errtext.splitlines()
        if r.out:
            problems.append("stdout not empty")
        if len(lines) != 1:
            problems.append(f"{len(lines)} lines on stderr, expected exactly one")
        elif not template_regex(cell.expect, **fill).fullmatch(lines[0]):
            problems.append(f"stderr {lines[0]!r} does not match {cell.expect!r}")
    elif cell.expect.startswith("http:"):
        want = http_expected(cell.expect[5:])
        if r.out != want:
            problems.append(f"stdout {r.out!r} is not tests/data/http/clustercheck-"
                            f"{cell.expect[5:]}.bytes {want!r}")
        if r.err:
            problems.append(f"stderr not empty: {r.err!r}")
    elif cell.probe == "haproxy":
        problems += _check_haproxy(cell, r, fill)
    else:
        lines = r.text.splitlines()
        if r.err:
            problems.append(f"stderr not empty: {r.err!r}")
        if cell.json:
            try:
                obj = json.loads(r.text)
            except ValueError:
                obj = None
            if not isinstance(obj, dict) or len(lines) != 1:
                problems.append(f"stdout is not one JSON object: {r.text!r}")
            else:
                if obj.get("up") is not (cell.rc == 0):
                    problems.append(f"JSON up={obj.get('up')!r}")
                if not template_regex(cell.expect, **fill).fullmatch(str(obj.get("message"))):
                    problems.append(f"JSON message {obj.get('message')!r} does not match "
                                    f"{cell.expect!r}")
        elif cell.expect == "" and r.out:
            problems.append(f"expected no output, got {r.text!r}")
        elif cell.expect and (len(lines) != 1
                              or not template_regex(cell.expect, **fill).fullmatch(lines[0])):
            problems.append(f"stdout {r.text!r} does not match {cell.expect!r}")
    if cell.deadline is not None:
        if r.wall > cell.deadline + SLACK:
            problems.append(f"took {r.wall:.3f}s: deadline {cell.deadline}s + {SLACK * 1000:.0f} ms "
                            "not held")
        if r.wall < cell.deadline - 0.02:
            problems.append(f"took {r.wall:.3f}s: gave up before its deadline {cell.deadline}s")
    return [f"{cell.binary} [{', '.join(cell.settings()) or 'defaults'}]: {p}\n{r}" for p in problems]


def _check_haproxy(cell, r, fill):
    problems = []
    if r.err:
        problems.append(f"stderr not empty: {r.err!r}")
    lines = r.text.splitlines()
    if cell.expect == "":
        return problems + ([f"expected no output, got {r.text!r}"] if lines else [])
    objs = []
    for line in lines:
        try:
            objs.append(json.loads(line))
        except ValueError:
            problems.append(f"not a JSON line: {line!r}")
    if len(objs) != 2:
        return problems + [f"{len(objs)} JSON lines, expected 2 (values, verdict)"]
    for o in objs:
        if set(o) != {"time", "backend_source_ip", "backend_source_port", "message"}:
            problems.append(f"JSON keys {sorted(o)}")
    if not objs[0]["message"].startswith("The following values are used for PXC node "):
        problems.append(f"first line {objs[0]['message']!r}")
    if not template_regex(cell.expect, **fill).fullmatch(objs[1]["message"]):
        problems.append(f"verdict {objs[1]['message']!r} does not match {cell.expect!r}")
    if not re.fullmatch(r"\d\d/[A-Z][a-z]{2}/\d{4}:\d\d:\d\d:\d\d\.\d{3}", objs[1]["time"]):
        problems.append(f"time {objs[1]['time']!r} is not %d/%b/%Y:%H:%M:%S.%3N")
    return problems


def check_state(state_id, target, tmp_dir):
    """Run every cell of a state; return all mismatches (the caller asserts it is empty)."""
    problems = []
    for i, cell in enumerate(STATES[state_id].cells):
        problems += check_cell(cell, target, os.path.join(str(tmp_dir), f"{state_id}-{i}"))
    return problems


# -- the table for docs/probes.md ------------------------------------------------------------
def _md(text):
    return text.replace("|", "\\|")


def markdown():
    """The state x probe table as Markdown (docs/probes.md embeds it verbatim)."""
    out = ["| state | how it is produced | probe | settings | exit | output |",
           "|---|---|---|---|---|---|"]
    for sid, st in STATES.items():
        first = True
        for cell in st.cells:
            probe = cell.binary + (" --replica" if cell.probe == "replica" else "")
            settings = ", ".join(f"`{_md(x)}`" for x in cell.settings())
            if cell.expect.startswith("http:"):
                want = http_expected(cell.expect[5:]).split(b"\r\n")[0].decode()
                output = f"`{want}` + `clustercheck-{cell.expect[5:]}.bytes`"
            elif cell.expect == "":
                output = "(nothing)"
            else:
                output = f"`{_md(cell.expect)}`" + (" (JSON message)" if cell.json else "")
                if cell.stream == "stderr":
                    output += " on stderr"
            if cell.deadline is not None:
                output += f", within {cell.deadline:g} s + 100 ms"
            out.append(f"| {st.title if first else ''} | {_md(st.how) if first else ''} | {probe} | "
                       f"{settings} | {cell.rc} | {output} |")
            first = False
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    if sys.argv[1:] == ["--markdown"]:
        sys.stdout.write(markdown())
    else:
        print("usage: probes_cases.py --markdown", file=sys.stderr)
        sys.exit(2)
