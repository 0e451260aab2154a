"""clustercheck --listen against a real Galera node: the classic bytes over HTTP, many clients at
once, clients that never send a request, a SIGSTOPped mysqld, and --cache-ms.

The status line and body must equal tests/data/http/clustercheck-*.bytes; the header *set*
must equal theirs (libmicrohttpd writes Connection before Content-Type, see docs/probes.md).

Run: make all && /usr/bin/python3 -m pytest -q tests/integration/test_clustercheck_http.py
"""

from __future__ import annotations

import concurrent.futures
import os
import re
import signal
import socket
import subprocess
import threading
import time

import pytest

import probes_cases as pc
import trickle

TIMEOUT = 1.0          # --timeout of the listeners below


@pytest.fixture(scope="module", autouse=True)
def _secrets(mysql_creds, clustercheck_creds):
    pc.register_secret(mysql_creds.password)
    pc.register_secret(clustercheck_creds.password)


class Listener:
    """One `clustercheck --listen 127.0.0.1:0` process; its log in a file."""

    def __init__(self, node, creds, tmp_path, *extra, env=None):
        self.tmp = tmp_path
        self.disabled = tmp_path / "clustercheck.disabled"
        self.log_path = tmp_path / f"listen-{os.getpid()}-{time.monotonic_ns()}.log"
        self.argv = [os.path.join(pc.BIN, "clustercheck"), "--listen", "127.0.0.1:0",
                     "--host", node.ip, "--port", str(node.port), "--user", creds.user,
                     "--password-file", creds.password_file, "--defaults-extra-file", "",
                     "--disabled-file", str(self.disabled), "--timeout", str(TIMEOUT), *extra]
        for a in self.argv:
            pc.assert_no_secret(a, "clustercheck --listen argv")
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(self.argv, stdout=self._log, stderr=self._log,
                                     stdin=subprocess.DEVNULL, env=pc.clean_env(env))
        deadline = time.monotonic() + 10
        while True:
            m = re.search(r"listening on \S+ \(port (\d+)\)", self.log)
            if m:
                self.port = int(m.group(1))
                break
            assert self.proc.poll() is None, f"clustercheck --listen exited:\n{self.log}"
            assert time.monotonic() < deadline, f"clustercheck --listen did not start:\n{self.log}"
            time.sleep(0.02)

    @property
    def log(self):
        return self.log_path.read_bytes().decode("utf-8", "replace")

    def request(self, raw=b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", timeout=10.0):
        """Send one request on a new connection; return (response bytes, seconds until EOF)."""
        t0 = time.monotonic()
        with socket.create_connection(("127.0.0.1", self.port), timeout=timeout) as s:
            s.sendall(raw)
            data = b""
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    return data, time.monotonic() - t0
                data += chunk

    def stop(self):
        """SIGTERM; it must exit 0 within 2 s."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                rc = self.proc.wait(2)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
                raise AssertionError(f"clustercheck --listen ignored SIGTERM for 2s:\n{self.log}")
            assert rc == 0, f"clustercheck --listen exited {rc}:\n{self.log}"
        self._log.close()
        pc.OUTPUTS.append((self.argv, self.log_path.read_bytes(), b""))


@pytest.fixture
def listeners(clustercheck_creds, tmp_path):
    made = []

    def make(node, *extra, env=None):
        ln = Listener(node, clustercheck_creds, tmp_path, *extra, env=env)
        made.append(ln)
        return ln
    yield make
    for ln in made:
        if ln.proc.poll() is None:
            ln.proc.kill()
            ln.proc.wait(5)
        print(f"---- {' '.join(ln.argv)}\n{ln.log}")


def parse(raw):
    """(status line, sorted header lines, body) of an HTTP/1.1 response."""
    head, sep, body = raw.partition(b"\r\n\r\n")
    assert sep, f"no end of headers in {raw!r}"
    lines = head.split(b"\r\n")
    return lines[0], sorted(lines[1:]), body


def expected(name):
    return parse(pc.http_expected(name))


def assert_answer(raw, name):
    status, headers, body = parse(raw)
    want_status, want_headers, want_body = expected(name)
    assert status == want_status, raw
    assert body == want_body, raw
    assert headers == want_headers, f"header set {headers} != {want_headers} (clustercheck-{name}.bytes)"


# -- exact answers ---------------------------------------------------------------------------
def test_listen_answers_match_the_data_files(healthy_galera, listeners):
    node = healthy_galera[2]
    ln = listeners(node, env={"AVAILABLE_WHEN_READONLY": "0"})
    raw, _ = ln.request()
    assert_answer(raw, "synced")
    # libmicrohttpd's order; the one-shot mode keeps the classic order.
    assert raw.split(b"\r\n")[1:4] == [b"Connection: close", b"Content-Type: text/plain",
                                       b"Content-Length: 40"], raw
    for req in (b"GET /?x=1 HTTP/1.1\r\nHost: a\r\n\r\n", b"GET / HTTP/1.0\r\n\r\n",
                b"OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n", b"OPTIONS / HTTP/1.0\r\n\r\n"):
        raw, _ = ln.request(req)
        assert_answer(raw, "synced")
    # Other paths than /, /liveness, /readiness and /healthcheck are not found.
    raw, _ = ln.request(b"GET /anything?x=1 HTTP/1.1\r\nHost: a\r\n\r\n")
    assert raw.startswith(b"HTTP/1.1 404 "), raw

    ln.disabled.write_text("")
    assert_answer(ln.request()[0], "disabled")
    ln.disabled.unlink()
    assert_answer(ln.request()[0], "synced")

    node.desync()
    try:
        assert_answer(ln.request()[0], "not-synced")
    finally:
        node.desync(False)
    assert_answer(ln.request()[0], "synced")

    node.set_read_only(True)
    try:
        assert_answer(ln.request()[0], "read-only")
    finally:
        node.set_read_only(False)
    assert_answer(ln.request()[0], "synced")
    ln.stop()
    assert "node synced -> not synced" in ln.log
    assert "node synced -> read-only" in ln.log


# -- /readiness and readiness-check: one verdict for the same flags ---------------------------
def _readiness_check(node, creds, tmp_path, *flags):
    """readiness-check's line and exit code on `node` with `flags`."""
    r = pc.run([os.path.join(pc.BIN, "readiness-check"), "--host", node.ip, "--port", node.port,
                "--user", creds.user, "--password-file", creds.password_file, "--defaults-extra-file", "",
                "--datadir", tmp_path, "--recovery-file", tmp_path / "recovery-case", *flags])
    return r.rc, r.text.strip()


def _readiness_http(ln):
    """/readiness's verdict as readiness-check's: exit code (200: 0, 503: 1) and the body's line."""
    raw, _ = ln.request(b"GET /readiness HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    status, _, body = parse(raw)
    assert status in (b"HTTP/1.1 200 OK", b"HTTP/1.1 503 Service Unavailable"), raw
    return (0 if b" 200 " in status else 1), body.decode().strip()


def _same_readiness(node, creds, tmp_path, flags, want_rc, want_line, env=None):
    """readiness-check FLAGS and clustercheck --listen --readiness-FLAGS's /readiness agree."""
    ln = Listener(node, creds, tmp_path, "--datadir", str(tmp_path), "--recovery-file",
                  str(tmp_path / "recovery-case"), *[f.replace("--", "--readiness-", 1) if f.startswith("--")
                                                     else f for f in flags], env=env)
    try:
        got = _readiness_http(ln)
    finally:
        ln.stop()
    assert _readiness_check(node, creds, tmp_path, *flags) == got == (want_rc, want_line), (flags, got, ln.log)


# The behaviour change of issue 19: /readiness applies every rule readiness-check applies.
def test_listen_readiness_same_verdict_as_readiness_check(healthy_galera, mysql_creds, tmp_path):
    node = healthy_galera[2]
    ready = "ready: wsrep_local_state=4 (Synced), wsrep_cluster_status=Primary"
    donor = "wsrep_local_state=2 (Donor/Desynced)"
    cases = [((), 0, ready),
             (("--require-writable",), 0, ready),
             (("--require-read-only",), 1, "not ready: read_only=OFF, read-only required")]
    for flags, rc, line in cases:
        _same_readiness(node, mysql_creds, tmp_path, flags, rc, line)
    node.set_read_only(True)
    try:
        _same_readiness(node, mysql_creds, tmp_path, ("--require-read-only",), 0, ready)
        _same_readiness(node, mysql_creds, tmp_path, ("--require-writable",), 1, "not ready: read_only=ON")
    finally:
        node.set_read_only(False)
    node.desync()
    try:
        _same_readiness(node, mysql_creds, tmp_path, (), 0, f"ready: {donor}, wsrep_cluster_status=Primary")
        _same_readiness(node, mysql_creds, tmp_path, ("--available-when-donor=0",), 1,
                        f"not ready: {donor}, donor not allowed")
    finally:
        node.desync(False)


def test_listen_readiness_replica_same_verdict_as_readiness_check(healthy_async_pair, mysql_creds, tmp_path):
    pair = healthy_async_pair
    ok = "ready: IO and SQL threads running, lag 0s"
    for flags, rc, line in [(("--replica",), 0, ok),
                            (("--replica", "--max-lag", "5"), 0, ok),
                            (("--replica", "--require-read-only"), 0, ok),
                            (("--replica", "--require-writable"), 1, "not ready: read_only=ON, writable required")]:
        _same_readiness(pair.replica, mysql_creds, tmp_path, flags, rc, line)
    _same_readiness(pair.primary, mysql_creds, tmp_path, ("--replica",), 1,
                    "not ready: not a replica (SHOW REPLICA STATUS is empty)")


# -- many clients ----------------------------------------------------------------------------
def _hammer(ln, threads, per_thread):
    """threads x per_thread requests at once; returns {response or error: count}."""
    counts: dict = {}
    lock = threading.Lock()

    def worker():
        for _ in range(per_thread):
            try:
                raw, _ = ln.request(timeout=10)
                key = raw
            except OSError as exc:
                key = f"error: {exc}"
            with lock:
                counts[key] = counts.get(key, 0) + 1
    with concurrent.futures.ThreadPoolExecutor(threads) as ex:
        for f in [ex.submit(worker) for _ in range(threads)]:
            f.result()
    return counts


def _assert_all_synced(counts, total):
    good = sum(n for k, n in counts.items() if isinstance(k, bytes) and parse(k) == expected("synced"))
    assert good == total, f"{good}/{total} correct; answers: " + "; ".join(
        f"{n} x {k[:200]!r}" for k, n in counts.items())


# Requests that arrive while another request's check is in flight wait for that check (on a
# condition variable with a monotonic deadline); they must get its answer, not a 503. A short
# cache makes such waits frequent at every expiry.
def test_listen_concurrent_clients_all_correct(healthy_galera, listeners):
    ln = listeners(healthy_galera[2], "--max-connections-per-ip", "64")     # 50 clients on 127.0.0.1
    _assert_all_synced(_hammer(ln, 50, 20), 1000)
    ln.stop()


def test_listen_concurrent_clients_with_cache(healthy_galera, listeners):
    ln = listeners(healthy_galera[2], "--cache-ms", "50", "--max-connections-per-ip", "64")
    _assert_all_synced(_hammer(ln, 50, 20), 1000)
    ln.stop()


def test_listen_idle_clients_do_not_block_others(healthy_galera, listeners):
    ln = listeners(healthy_galera[1], "--idle-timeout", "2")
    idle = []
    try:
        for i in range(25):
            s = socket.create_connection(("127.0.0.1", ln.port), timeout=10)
            if i >= 20:
                s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n")          # a request that never ends
            idle.append(s)
        time.sleep(0.2)
        for _ in range(3):
            raw, secs = ln.request()
            assert_answer(raw, "synced")
            assert secs <= TIMEOUT + pc.SLACK, f"a request took {secs:.3f}s behind 25 idle clients"
        # The idle ones are closed after --idle-timeout, without an answer.
        t0 = time.monotonic()
        for s in idle:
            s.settimeout(max(0.1, 2 + 3 - (time.monotonic() - t0)))
            try:
                data = s.recv(65536)
            except socket.timeout:
                raise AssertionError("an idle client was not disconnected within --idle-timeout + 3s")
            except ConnectionResetError:
                data = b""
            assert data == b"" or data.startswith(b"HTTP/1.1 "), data
    finally:
        for s in idle:
            s.close()
    raw, _ = ln.request()
    assert_answer(raw, "synced")
    ln.stop()


@pytest.mark.fault
def test_listen_trickling_clients_starve_nobody(healthy_galera, listeners):
    """/liveness from 127.0.0.1 always answered within `--timeout` + 100 ms; each trickling connection closed at `--request-timeout`; one address holds at most `--max-connections-per-ip`."""
    # 300 connections from 30 other loopback addresses trickle a byte a second and reconnect
    # when closed; the deadline is not the idle timeout, which every byte restarts.
    ln = listeners(healthy_galera[1], "--request-timeout", "2")
    t, p = trickle.hostile_run(ln.port, "/liveness", conns=300, addrs=30, interval=1.0, duration=10.0)
    trickle.assert_not_starved(t, p, request_timeout=2.0, bound=TIMEOUT + pc.SLACK)
    assert trickle.count_kept(ln.port, "127.0.0.99", 40) == 32          # the default per address
    raw, _ = ln.request()
    assert_answer(raw, "synced")
    ln.stop()


@pytest.mark.fault
def test_listen_answers_a_new_address_under_a_flood(healthy_galera, listeners):
    """/liveness from 127.0.0.100 always answered within `--timeout` + 100 ms while 16 addresses x 32 connections, each sending a whole request every second, hold all 512 slots."""
    # Every answer of clustercheck closes its connection, so each flood connection holds its slot
    # for the second before its request, then reconnects at once. The flood asks a path that
    # runs no check (404): it holds slots without queueing behind the one connection to mysqld.
    ln = listeners(healthy_galera[1])
    f, p = trickle.flood_run(ln.port, "/liveness", flood_path="/flood", addrs=16, per_addr=32, interval=1.0,
                             duration=6.0)
    trickle.assert_answered_during_flood(f, p, bound=TIMEOUT + pc.SLACK)
    raw, _ = ln.request()
    assert_answer(raw, "synced")
    ln.stop()


def test_listen_refuses_limits_it_cannot_keep(tmp_path):
    """Out-of-range limits, and a hard descriptor limit below --max-connections: exit 2, one line."""
    base = [os.path.join(pc.BIN, "clustercheck"), "--listen", "127.0.0.1:0", "--host", "127.0.0.1", "--port", "9",
            "--defaults-extra-file", "", "--log-file", str(tmp_path / "log")]
    for extra, want in ((["--request-timeout", "0"], "--request-timeout"),
                        (["--max-connections-per-ip", "0"], "--max-connections-per-ip"),
                        (["--max-connections", "10001"], "--max-connections")):
        r = subprocess.run(base + extra, capture_output=True, text=True, timeout=10, env=pc.clean_env(None))
        assert r.returncode == 2 and want in r.stderr and len(r.stderr.strip().splitlines()) == 1, (extra, r)
    r = subprocess.run(["prlimit", "--nofile=256:256", "--"] + base + ["--max-connections", "1024"],
                       capture_output=True, text=True, timeout=10, env=pc.clean_env(None))
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1, r
    assert "1024 connections need 1216 descriptors, the hard limit is 256" in lines[0], lines


# -- a hung mysqld ---------------------------------------------------------------------------
def test_listen_sigstopped_mysqld_answers_503_in_time_and_recovers(healthy_galera, listeners):
    node = healthy_galera[3]
    ln = listeners(node)
    assert_answer(ln.request()[0], "synced")          # the persistent connection is up
    node.sigstop()
    try:
        for _ in range(3):
            raw, secs = ln.request()
            assert_answer(raw, "not-synced")
            assert secs <= TIMEOUT + pc.SLACK, f"answered after {secs:.3f}s (--timeout {TIMEOUT})"
        # Requests arriving while a check hangs: each within its own deadline.
        results = []

        def one(delay):
            time.sleep(delay)
            results.append(ln.request())
        threads = [threading.Thread(target=one, args=(i * 0.1,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert len(results) == 8
        for raw, secs in results:
            assert_answer(raw, "not-synced")
            assert secs <= TIMEOUT + pc.SLACK, f"a concurrent request took {secs:.3f}s"
        # SIGTERM while a check hangs: still a prompt, clean exit is not required here; the
        # listener keeps serving below.
    finally:
        node.sigcont()
    node.wait_synced(60)
    deadline = time.monotonic() + 15
    while True:
        raw, _ = ln.request()
        if parse(raw)[0] == b"HTTP/1.1 200 OK":
            break
        assert time.monotonic() < deadline, f"no 200 within 15s after the node was Synced again: {raw!r}"
        time.sleep(0.2)
    assert_answer(raw, "synced")
    ln.stop()
    assert "timeout after 1.0s" in ln.log


def test_listen_stops_promptly_while_a_check_hangs(healthy_galera, listeners):
    node = healthy_galera[3]
    ln = listeners(node, "--timeout", "5")
    assert_answer(ln.request()[0], "synced")
    node.sigstop()
    answers = []
    try:
        t = threading.Thread(target=lambda: answers.append(ln.request(timeout=10)), daemon=True)
        t.start()
        time.sleep(0.3)
        t0 = time.monotonic()
        ln.proc.send_signal(signal.SIGTERM)
        rc = ln.proc.wait(10)
        elapsed = time.monotonic() - t0
        t.join(5)
    finally:
        node.sigcont()
    assert rc == 0, ln.log
    # The hung check gives up at the signal (not at its 5 s deadline) and its client gets 503.
    print(f"SIGTERM with a hung check: exit after {elapsed:.3f}s")
    assert elapsed <= 1.0, f"SIGTERM took {elapsed:.2f}s with a hung check (--timeout 5)"
    assert len(answers) == 1, "the client of the hung check got no answer"
    assert_answer(answers[0][0], "not-synced")


# -- --cache-ms ------------------------------------------------------------------------------
def _counters(node):
    """(Com_show_status, Connections) in one root connection that runs no SHOW STATUS itself."""
    rows = dict(node.sql("SELECT VARIABLE_NAME, VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS "
                         "WHERE VARIABLE_NAME IN ('COM_SHOW_STATUS', 'CONNECTIONS')"))
    return int(rows["COM_SHOW_STATUS"]), int(rows["CONNECTIONS"])


def test_listen_without_cache_checks_every_request_on_one_connection(healthy_galera, listeners):
    node = healthy_galera[1]
    ln = listeners(node)
    assert_answer(ln.request()[0], "synced")           # connected
    q0, c0 = _counters(node)
    for _ in range(20):
        assert_answer(ln.request()[0], "synced")
    q1, c1 = _counters(node)
    assert q1 - q0 == 20, f"{q1 - q0} status queries for 20 requests without --cache-ms"
    # c1 counts the connection that read it.
    assert c1 - c0 - 1 == 0, f"{c1 - c0 - 1} new mysqld connections for 20 requests (expected 0)"
    ln.stop()


def test_listen_cache_ms_reuses_results(healthy_galera, listeners):
    node = healthy_galera[1]
    cache_ms = 2000
    ln = listeners(node, "--cache-ms", str(cache_ms))
    assert_answer(ln.request()[0], "synced")
    q0 = _counters(node)[0]
    t0 = time.monotonic()
    for _ in range(40):
        assert_answer(ln.request()[0], "synced")
    elapsed = time.monotonic() - t0
    q1 = _counters(node)[0]
    allowed = int(elapsed * 1000 // cache_ms) + 1
    assert q1 - q0 <= allowed, (f"{q1 - q0} status queries for 40 requests in {elapsed:.2f}s with "
                                f"--cache-ms {cache_ms} (at most {allowed})")
    # A change shows within the cache period (plus a check).
    node.desync()
    try:
        t0 = time.monotonic()
        while parse(ln.request()[0])[0] == b"HTTP/1.1 200 OK":
            assert time.monotonic() - t0 <= cache_ms / 1000 + TIMEOUT + 0.5, \
                "still 200 after the cache period"
            time.sleep(0.05)
        assert_answer(ln.request()[0], "not-synced")
    finally:
        node.desync(False)
    ln.stop()


def test_no_password_in_listener_logs():
    for argv, out, err in pc.OUTPUTS:
        pc.assert_no_secret(out, f"output of {argv}")
        pc.assert_no_secret(err, f"stderr of {argv}")


def test_one_shot_tells_a_person_the_reason(tmp_path):
    """--verbose also prints the reason line on stderr; stdout keeps the script's bytes, and without
    it (stdout not a terminal: xinetd's socket) stderr stays empty and the reason goes to --log-file."""
    log = tmp_path / "log"
    base = [os.path.join(pc.BIN, "clustercheck"), "--host", "127.0.0.1", "--port", "1", "--timeout", "1",
            "--defaults-extra-file", "", "--log-file", str(log)]
    with open(os.path.join(pc.ROOT, "tests", "data", "http", "clustercheck-not-synced.bytes"), "rb") as f:
        want = f.read()
    reason = "not synced: connection refused (127.0.0.1:1)"
    quiet = subprocess.run(base, capture_output=True, timeout=10, stdin=subprocess.DEVNULL)
    assert quiet.returncode == 1 and quiet.stdout == want and quiet.stderr == b""
    assert reason in log.read_text()
    told = subprocess.run(base + ["--verbose"], capture_output=True, timeout=10, stdin=subprocess.DEVNULL)
    assert told.returncode == 1 and told.stdout == want
    assert told.stderr.decode().startswith("clustercheck: " + reason) and told.stderr.count(b"\n") == 1
