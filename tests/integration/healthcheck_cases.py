"""What healthcheck answers in each server state: the data test_healthcheck.py asserts, row by row.

A row: the arguments ({cnf}: a --defaults-file with the node's socket, port and the monitor
account; {bad}: the same with a wrong password; {datadir}: the node's datadir), the exit code,
every line of stderr ({socket}, {port}, {ip} of the node; <N> a number; … any text), optionally the
environment and a deadline the wall time must keep (D to D + 100 ms). An exit code of None (shown
as "0 or 1") is for --innodb_buffer_pool_loaded on a running server: 0 when the server's
Innodb_buffer_pool_load_status says "load completed", else 1 with that status as the reason (a
node that joined by SST has no ib_buffer_pool file to load until it has been restarted once).

`/usr/bin/python3 tests/integration/healthcheck_cases.py --markdown` prints the table.
"""

from __future__ import annotations

import dataclasses
import re
import sys


@dataclasses.dataclass(frozen=True)
class Row:
    args: tuple
    rc: int
    stderr: tuple = ()
    env: dict | None = None
    within: float | None = None

    def __str__(self):
        env = " ".join(f"{k}={v}" for k, v in (self.env or {}).items())
        return f"{env + ' ' if env else ''}healthcheck {' '.join(self.args)} -> {self.rc} {list(self.stderr)}"


def R(rc, *args, stderr=(), env=None, within=None):
    return Row(tuple(args), rc, tuple(stderr), env, within)


D = "--defaults-file={cnf}"
B = "--defaults-file={bad}"
FORCING_SBM = "Forcing --replication_io=1, seconds_behind_master requires IO thread to be running"
FORCING_SRD = "Forcing --replication_io=1, sql_remaining_delay requires IO thread to be running"
CLEAR_NAME = ("Option --replication_all incompatible with specified source --replication_name, "
              "clearing replication_name")
CLEAR_ALL = "Option --replication_name incompatible with --replication_all, clearing replication_all"
PASSWORD_ARGV = ("healthcheck: a password is not taken on the command line (every process can read it "
                 "there): use --password-file or HEALTHCHECK_PASSWORD_FILE")
REFUSED_SOCKET = "connection refused ({socket}): …"


def failed(test, why):
    return f"healthcheck {test} failed: {why}"


POOL = R(None, D, "--innodb_buffer_pool_loaded")
# A MariaDB server without a Galera provider still shows wsrep_cluster_status and wsrep_ready.
NOT_GALERA = "wsrep_local_state=(missing) (unknown)"


STATES = {
    "healthy": [
        R(0, D, "--connect", "--innodb_initialized"),
        R(0, D, "--connect"),
        R(0, D, "--innodb_initialized"),
        R(0, D, "--galera_online"),
        R(0, D, "--galera_ready"),
        R(0, D, "--connect", "--galera_online", "--galera_ready", "--innodb_initialized"),
        R(0, D, "--replication"),
        R(0, D, "--replication_io", "--replication_sql", "--replication"),
        R(0, D, "--datadir={datadir}", "--mariadbupgrade"),
        R(0, D, "--json", "--connect"),
        R(0, D, "--timeout", "1", "--connect", "--innodb_initialized"),
        R(0, D, "--connect", env={"HEALTHCHECK_TIMEOUT": "1"}),
        POOL,
    ],
    "desynced": [
        R(1, D, "--galera_online", stderr=[failed("galera_online", "wsrep_local_state=2 (Donor/Desynced)")]),
        R(0, D, "--galera_ready"),
        R(0, D, "--connect", "--innodb_initialized"),
        R(1, D, "--connect", "--galera_online", "--innodb_initialized",
          stderr=[failed("galera_online", "wsrep_local_state=2 (Donor/Desynced)")]),
        R(0, D, "--replication_io", "--replication"),
        R(0, D, "--datadir={datadir}", "--mariadbupgrade"),
        POOL,
    ],
    "isolated": [
        R(1, D, "--galera_online", stderr=[failed("galera_online", "wsrep_local_state=0 (Initialized)")]),
        R(1, D, "--galera_ready", stderr=[failed("galera_ready", "wsrep_ready=OFF")]),
        R(0, D, "--connect", "--innodb_initialized"),
        R(0, D, "--replication_io", "--replication"),
        R(0, D, "--datadir={datadir}", "--mariadbupgrade"),
        POOL,
    ],
    "sigstopped": [
        R(1, D, "--timeout", "1", "--connect",
          stderr=[failed("connect", "socket: timeout after 1.0s connecting ({socket}, --timeout); "
                                    "TCP to localhost: …")], within=1.0),
        R(1, D, "--timeout=1", "--innodb_initialized",
          stderr=[failed("innodb_initialized", "timeout after 1.0s connecting ({socket}, --timeout)")],
          within=1.0),
        R(1, D, "--galera_online",
          stderr=[failed("galera_online", "timeout after 0.5s connecting ({socket}, HEALTHCHECK_TIMEOUT)")],
          env={"HEALTHCHECK_TIMEOUT": "0.5"}, within=0.5),
        R(1, D, "--connect", "--innodb_initialized",
          stderr=[failed("connect", "socket: timeout after 3.0s connecting ({socket}, --timeout); "
                                    "TCP to localhost: …")], within=3.0),
        R(1, D, "--timeout", "0.5", "--galera_ready",
          stderr=[failed("galera_ready", "timeout after 0.5s connecting ({socket}, --timeout)")], within=0.5),
        R(1, D, "--timeout", "0.5", "--innodb_buffer_pool_loaded",
          stderr=[failed("innodb_buffer_pool_loaded", "timeout after 0.5s connecting ({socket}, --timeout)")],
          within=0.5),
        R(1, D, "--timeout", "0.5", "--replication",
          stderr=[failed("replication", "timeout after 0.5s connecting ({socket}, --timeout)")], within=0.5),
        R(1, D, "--timeout", "0.5", "--datadir={datadir}", "--mariadbupgrade",
          stderr=[failed("connect", "socket: timeout after 0.5s connecting ({socket}, --timeout); "
                                    "TCP to localhost: …")], within=0.5),
        R(0, D, "--timeout", "0.5", "--no-connect", "--datadir={datadir}", "--mariadbupgrade"),
    ],
    "stopped": [
        R(1, D, "--connect", stderr=[failed("connect", "socket: " + REFUSED_SOCKET + "; TCP to localhost: "
                                            "connection refused (localhost:{port}): …")]),
        R(1, D, "--innodb_initialized", stderr=[failed("innodb_initialized", REFUSED_SOCKET)]),
        R(1, D, "--galera_ready", stderr=[failed("galera_ready", REFUSED_SOCKET)]),
        R(1, D, "--galera_online", stderr=[failed("galera_online", REFUSED_SOCKET)]),
        R(1, D, "--innodb_buffer_pool_loaded", stderr=[failed("innodb_buffer_pool_loaded", REFUSED_SOCKET)]),
        R(1, D, "--replication", stderr=[failed("replication", REFUSED_SOCKET)]),
        R(1, D, "--datadir={datadir}", "--mariadbupgrade", stderr=[failed("connect", "…")]),
        R(0, D, "--no-connect", "--datadir={datadir}", "--mariadbupgrade"),
    ],
    "read-only": [
        R(0, D, "--connect", "--galera_online", "--galera_ready", "--innodb_initialized"),
        R(0, D, "--replication_io", "--replication_sql", "--replication", "--datadir={datadir}", "--mariadbupgrade"),
        POOL,
    ],
    "joiner": [
        R(1, D, "--connect", stderr=[failed("connect", "…")]),
        R(1, D, "--innodb_initialized", stderr=[failed("innodb_initialized", "…")]),
        R(1, D, "--innodb_buffer_pool_loaded", stderr=[failed("innodb_buffer_pool_loaded", "…")]),
        R(1, D, "--galera_online", stderr=[failed("galera_online", "…")]),
        R(1, D, "--galera_ready", stderr=[failed("galera_ready", "…")]),
        R(1, D, "--replication", stderr=[failed("replication", "…")]),
        R(0, D, "--no-connect", "--datadir={datadir}", "--mariadbupgrade"),
    ],
    "wrong-password": [
        R(0, B, "--connect"),
        R(1, B, "--innodb_initialized",
          stderr=[failed("innodb_initialized", "access denied ({socket}): Access denied for user 'monitor'@"
                                               "'localhost' (using password: YES) (1045)")]),
        R(1, B, "--connect", "--galera_ready", stderr=[failed("galera_ready", "access denied ({socket}): …")]),
        R(1, B, "--galera_online", stderr=[failed("galera_online", "access denied ({socket}): …")]),
        R(1, B, "--innodb_buffer_pool_loaded",
          stderr=[failed("innodb_buffer_pool_loaded", "access denied ({socket}): …")]),
        R(1, B, "--replication", stderr=[failed("replication", "access denied ({socket}): …")]),
        R(0, B, "--no-connect", "--datadir={datadir}", "--mariadbupgrade"),
    ],
    "wrong-password-no-tcp": [
        R(1, B, "--connect", stderr=[failed("connect", "socket: access denied ({socket}): …; TCP to localhost: "
                                            "connection refused (localhost:{port}): …")]),
    ],
    "replica-healthy": [
        R(0, D, "--replication"),
        R(0, D, "--replication_io", "--replication_sql", "--replication_seconds_behind_master=10", "--replication"),
        R(0, D, "--replication_seconds_behind_master", "10", "--replication", stderr=[FORCING_SBM]),
        R(0, D, "--replication_sql_remaining_delay=5", "--replication", stderr=[FORCING_SRD]),
        R(0, D, "--replication_all", "--replication_io", "--replication_sql", "--replication"),
        R(1, D, "--replication_name=nosuch", "--replication",
          stderr=[failed("replication", "server error ({socket}): … (1617)")]),
        R(0, D, "--connect", "--innodb_initialized", "--datadir={datadir}", "--mariadbupgrade"),
        R(1, D, "--galera_online", stderr=[failed("galera_online", NOT_GALERA)]),
        R(1, D, "--galera_ready", stderr=[failed("galera_ready", "wsrep_ready=OFF")]),
        POOL,
    ],
    "not-a-replica": [
        R(0, D, "--replication_io", "--replication_sql", "--replication_seconds_behind_master=0", "--replication"),
        R(0, D, "--replication_all", "--replication_io", "--replication"),
        R(0, D, "--connect", "--innodb_initialized", "--datadir={datadir}", "--mariadbupgrade"),
        R(1, D, "--galera_online", stderr=[failed("galera_online", NOT_GALERA)]),
        POOL,
    ],
    "replica-lagging": [
        R(1, D, "--replication_seconds_behind_master=1", "--replication",
          stderr=[FORCING_SBM, failed("replication", "Seconds_Behind_Master=<N> > 1")]),
        R(0, D, "--replication_seconds_behind_master=100000", "--replication", stderr=[FORCING_SBM]),
        R(0, D, "--replication_io", "--replication_sql", "--replication"),
    ],
    "replica-sql-stopped": [
        R(1, D, "--replication_sql", "--replication", stderr=[failed("replication", "Slave_SQL_Running=No")]),
        R(0, D, "--replication_io", "--replication"),
        R(1, D, "--replication_io", "--replication_seconds_behind_master=100", "--replication",
          stderr=[failed("replication", "Seconds_Behind_Master=NULL")]),
        R(0, D, "--replication"),
    ],
    "replica-io-stopped": [
        R(1, D, "--replication_io", "--replication", stderr=[failed("replication", "Slave_IO_Running=No")]),
        R(0, D, "--replication_sql", "--replication"),
        R(1, D, "--replication_sql_remaining_delay=100", "--replication",
          stderr=[FORCING_SRD, failed("replication", "Slave_IO_Running=No")]),
    ],
    "replica-io-connecting": [
        # The script fails only on "No": an IO thread that is Connecting passes --replication_io.
        R(0, D, "--replication_io", "--replication"),
        R(0, D, "--replication_sql", "--replication"),
    ],
    "replica-delayed": [
        R(1, D, "--replication_sql_remaining_delay=5", "--replication",
          stderr=[FORCING_SRD, failed("replication", "SQL_Remaining_Delay=<N> > 5")]),
        R(0, D, "--replication_sql_remaining_delay=1000", "--replication", stderr=[FORCING_SRD]),
        R(0, D, "--replication_io", "--replication_sql", "--replication"),
    ],
    "replica-multi-source": [
        R(0, D, "--replication_io", "--replication_sql", "--replication"),
        R(0, D, "--replication_name=src2", "--replication"),
        R(1, D, "--replication_name", "src2", "--replication_io", "--replication",
          stderr=[failed("replication", "Slave_IO_Running=No")]),
        R(1, D, "--replication_all", "--replication_sql", "--replication",
          stderr=[failed("replication", "connection 'src2': Slave_SQL_Running=No")]),
        R(1, D, "--replication_name=src2", "--replication_all", "--replication_io", "--replication",
          stderr=[CLEAR_NAME, failed("replication", "connection 'src2': Slave_IO_Running=No")]),
        R(0, D, "--replication_all", "--replication_name=", "--replication_io", "--replication",
          stderr=[CLEAR_ALL]),
    ],
    "arguments": [
        R(1, D, "--innodb_initialized", "--frobnicate", stderr=["healthcheck unknown option or test 'frobnicate'"]),
        R(1, D, "--frobnicate", "--innodb_initialized", stderr=["healthcheck unknown option or test 'frobnicate'"]),
        R(1, D, "--connect", "extra", stderr=["Unknown healthcheck option extra"]),
        # A password on the command line is refused and never echoed.
        R(1, D, "--connect", "--password=s3cr3t-on-argv", stderr=[PASSWORD_ARGV]),
        R(1, D, "--password", "s3cr3t-on-argv", "--connect", stderr=[PASSWORD_ARGV]),
        R(0, D, "--", "--connect"),
        R(1, D, "--replication_io", stderr=["healthcheck: --replication_io needs a value (the last argument)"]),
        R(1, "--connect", D, stderr=["healthcheck warning: --defaults-file=… has no test after it and changes "
                                     "nothing (an option applies to the tests that follow it, as in healthcheck.sh)",
                                     failed("connect", "socket: connection refused (/run/mysqld/mysqld.sock): …")]),
        R(1, "--no-connect", "--no-defaults", "--innodb_initialized",
          stderr=[failed("innodb_initialized", "connection refused (/run/mysqld/mysqld.sock): …")]),
    ],
}

# Argument lists run with ours and the upstream script side by side; the exit codes must agree.
DIFFERENTIAL = [
    (), ("--no-connect",), (D, "--connect"), (D, "--connect", "--innodb_initialized"), (D, "--innodb_initialized"),
    (D, "--innodb_buffer_pool_loaded"), (D, "--galera_online"), (D, "--galera_ready"), (D, "--replication"),
    (D, "--no-connect", "--datadir={datadir}", "--mariadbupgrade"), (D, "--datadir={datadir}", "--mariadbupgrade"),
    (D, "--frobnicate"), (D, "foo"), (D, "--", "--connect"), (D, "--replication_io"), (D, "--datadir"),
    (D, "--connect", "--frobnicate"), ("--connect", D), ("--no-connect", "--no-defaults", "--innodb_initialized"),
]
# Without a server (nothing connects: --no-connect first); the script's `set -e` ends a run whose
# last option lacks its value.
DIFFERENTIAL_NO_SERVER = [
    ("--no-connect", "--replication_io"), ("--no-connect", "--datadir"), ("--no-connect", "--su"),
    ("--no-connect", "--defaults-file"), ("--no-connect", "--"), ("--no-connect", "--no-defaults"),
    ("--no-connect", "--replication_io=1"), ("--no-connect", "-x"),
    ("--no-connect", "--replication_seconds_behind_master", "--no-connect"),
    ("--no-connect", "--defaults-file", "--no-connect"), ("--no-connect", "--replication_"),
    ("--no-connect", "--datadir=/nonexistent", "--mariadbupgrade"), ("--no-connect", "--replication_all", "x"),
]
DIFFERENTIAL_GALERA = [
    (D, "--galera_online"), (D, "--galera_ready"), (D, "--connect", "--galera_online", "--frobnicate"),
]
DIFFERENTIAL_WRONG_PASSWORD = [
    (B, "--connect"), (B, "--innodb_initialized"), (B, "--no-connect", "--galera_ready"),
]
DIFFERENTIAL_REPLICA = [
    (D, "--replication"), (D, "--replication_io", "--replication_sql", "--replication"),
    (D, "--replication_sql", "--replication"), (D, "--replication_seconds_behind_master=0", "--replication"),
    (D, "--replication_seconds_behind_master", "100", "--replication"),
    (D, "--replication_sql_remaining_delay=1", "--replication"), (D, "--replication_all", "--replication_sql",
                                                                   "--replication"),
    (D, "--replication_name=nosuch", "--replication"), (D, "--replication_io", "--replication"),
    (D, "--replication_seconds_behind_master=1", "--replication"),
    (D, "--replication_sql_remaining_delay", "100", "--replication_sql", "--replication"),
]


def line_regex(template, **values):
    """One stderr line: {name} filled in, <N> a number, … any text."""
    text = template
    for k, v in values.items():
        text = text.replace("{" + k + "}", str(v))
    return re.compile(re.escape(text).replace("<N>", r"-?\d+").replace("…", ".*"))


def markdown():
    out = ["| state | arguments | environment | exit | stderr |", "|---|---|---|---|---|"]
    for state, rows in STATES.items():
        for i, row in enumerate(rows):
            env = ", ".join(f"`{k}={v}`" for k, v in (row.env or {}).items())
            err = "<br>".join(f"`{e}`" for e in row.stderr) or "(nothing)"
            if row.within is not None:
                err += f", within {row.within:g} s + 100 ms"
            rc = "0 or 1" if row.rc is None else row.rc
            if row.rc is None:
                err = "(nothing), or `healthcheck innodb_buffer_pool_loaded failed: Innodb_buffer_pool_load_status=…`"
            out.append(f"| {state if i == 0 else ''} | `{' '.join(row.args)}` | {env} | {rc} | {err} |")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    if sys.argv[1:] == ["--markdown"]:
        sys.stdout.write(markdown())
    else:
        sys.exit("usage: healthcheck_cases.py --markdown")
