"""Hostile HTTP clients for the health-port tests and benchmark: many connections from other
loopback addresses (127.0.0.2, 127.0.0.3, ...), each trickling one byte of a never-ending request
at an interval and reopened as soon as the server closes it; and a prober on 127.0.0.1 that asks
one path on a new connection at an interval and records every answer and its latency.

Both run on one thread each, are bounded in connections and time, and stop by themselves.
"""

from __future__ import annotations

import errno
import selectors
import socket
import threading
import time

REQUEST_HEAD = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Trickle: "


class Background:
    """A loop on a thread of its own for a `with` block: _run() until stop() or its duration."""

    duration = 20.0
    grace = 5.0

    def __init__(self):
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self.stop()

    def wait(self):
        """Until its duration is over."""
        self._thread.join(self.duration + self.grace)

    def stop(self):
        self._stop.set()
        self.wait()

    def _run(self):
        raise NotImplementedError


class Trickler(Background):
    """`conns` connections to 127.0.0.1:`port`, spread over `addrs` source addresses, one byte
    every `interval` seconds each, for at most `duration` seconds (or until stop())."""

    def __init__(self, port, conns=300, addrs=30, interval=2.0, duration=20.0, first_addr=2):
        assert conns <= 1000 and duration <= 20.0 and 1 <= addrs <= 250
        self.port = port
        self.sources = ["127.0.0.%d" % (first_addr + i % addrs) for i in range(conns)]
        self.interval = interval
        self.duration = duration
        self.opened = 0            # connections that sent their first byte
        self.refused = 0           # closed or reset by the server within 0.2 s, before any byte went
        self.closed = []           # lifetimes (s) of connections the server closed after they trickled
        self.open_now = 0
        self.max_open = 0
        super().__init__()

    def _open(self, sel, slot, now):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        try:
            s.bind((self.sources[slot], 0))
            rc = s.connect_ex(("127.0.0.1", self.port))
        except OSError:
            s.close()
            return None
        if rc not in (0, errno.EINPROGRESS):
            s.close()
            self.refused += 1
            return None
        # [socket, slot, opened at, bytes sent, next send at]
        st = [s, slot, now, 0, now + self.interval * (slot % 10) / 10]
        sel.register(s, selectors.EVENT_READ, st)
        return st

    def _close(self, sel, st, now, by_server):
        sel.unregister(st[0])
        st[0].close()
        if by_server:
            if st[3] == 0 and now - st[2] < 0.2:
                self.refused += 1
            else:
                self.closed.append(now - st[2])

    def _run(self):
        sel = selectors.DefaultSelector()
        start = time.monotonic()
        live = {}
        down = {slot: start for slot in range(len(self.sources))}   # slot -> reopen at
        try:
            while not self._stop.is_set() and time.monotonic() - start < self.duration:
                now = time.monotonic()
                for slot in [k for k, at in down.items() if at <= now][:100]:
                    del down[slot]
                    st = self._open(sel, slot, now)
                    if st:
                        live[slot] = st
                    else:
                        down[slot] = now + 0.05
                for key, _ in sel.select(0.05):
                    st = key.data
                    try:
                        data = st[0].recv(4096)
                    except OSError:
                        data = b""
                    if not data:                    # closed (or reset) by the server
                        self._close(sel, st, time.monotonic(), True)
                        del live[st[1]]
                        down[st[1]] = time.monotonic() + 0.05
                now = time.monotonic()
                for st in list(live.values()):
                    if st[4] > now:
                        continue
                    stream = REQUEST_HEAD + b"a" * 1000
                    try:
                        st[0].send(stream[st[3] % len(stream):st[3] % len(stream) + 1])
                        if st[3] == 0:
                            self.opened += 1
                        st[3] += 1
                        st[4] = now + self.interval
                    except OSError:
                        self._close(sel, st, now, True)
                        del live[st[1]]
                        down[st[1]] = now + 0.05
                self.open_now = len(live)
                self.max_open = max(self.max_open, len(live))
        finally:
            for st in live.values():
                sel.unregister(st[0])
                st[0].close()
            sel.close()
            self.open_now = 0


class Prober(Background):
    """GET `path` from 127.0.0.1 on a new connection every `interval` seconds, for at most
    `duration` seconds; records (status or None, seconds, error text)."""

    def __init__(self, port, path, interval=0.1, duration=20.0, timeout=2.0):
        assert duration <= 20.0
        self.port = port
        self.path = path
        self.interval = interval
        self.duration = duration
        self.timeout = timeout
        self.grace = timeout + 5
        self.results = []
        super().__init__()

    def probe(self):
        t0 = time.monotonic()
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=self.timeout,
                                          source_address=("127.0.0.1", 0)) as s:
                s.sendall(b"GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n" % self.path.encode())
                data = b""
                while b"\r\n" not in data:
                    chunk = s.recv(4096)
                    if not chunk:
                        break
                    data += chunk
            took = time.monotonic() - t0
            if not data.startswith(b"HTTP/1.1 "):
                return None, took, "no answer (%r)" % data[:60]
            return int(data[9:12]), took, ""
        except OSError as e:
            return None, time.monotonic() - t0, str(e)

    def _run(self):
        start = time.monotonic()
        while not self._stop.is_set() and time.monotonic() - start < self.duration:
            t0 = time.monotonic()
            self.results.append(self.probe())
            self._stop.wait(max(0.0, self.interval - (time.monotonic() - t0)))


def percentile(values, p):
    """The p-th percentile (nearest rank) of values; None when empty."""
    if not values:
        return None
    v = sorted(values)
    return v[min(len(v) - 1, max(0, int(round(p / 100.0 * len(v) + 0.5)) - 1))]


def count_kept(port, addr, n, wait=0.5):
    """Open n connections to 127.0.0.1:port from `addr` at once, each sending one byte; return how
    many the server still holds open `wait` seconds later."""
    assert n <= 200
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            socks.append(s)
            s.settimeout(2)
            s.bind((addr, 0))
            try:
                s.connect(("127.0.0.1", port))
                s.send(b"G")
            except OSError:
                pass
        time.sleep(wait)
        kept = 0
        for s in socks:
            s.setblocking(False)
            try:
                if s.recv(1) == b"":
                    continue            # closed by the server
            except BlockingIOError:
                kept += 1               # nothing to read and not closed: still open
            except OSError:
                continue                # reset or never connected
        return kept
    finally:
        for s in socks:
            s.close()


def hostile_run(port, path, conns=300, addrs=30, interval=1.0, duration=10.0, probe_every=0.1):
    """Probe `path` from 127.0.0.1 every `probe_every` s while `conns` connections from `addrs`
    other loopback addresses trickle one byte every `interval` s; returns (Trickler, Prober) once
    `duration` is over."""
    with Trickler(port, conns=conns, addrs=addrs, interval=interval, duration=duration) as t:
        deadline = time.monotonic() + 5
        while t.max_open < conns * 0.9 and time.monotonic() < deadline:
            time.sleep(0.05)            # the hostile connections are open before the first probe
        with Prober(port, path, interval=probe_every, duration=duration - 1) as p:
            p.wait()
    return t, p


def assert_not_starved(t, p, request_timeout, bound=1.0):
    """Every probe answered 200 within `bound` s while most of the hostile connections were open,
    and the server closed each trickling connection about `request_timeout` s after it opened."""
    lat = [r[1] for r in p.results]
    bad = [r for r in p.results if r[0] != 200]
    assert len(p.results) >= 20, "only %d probes ran" % len(p.results)
    assert t.max_open >= 0.9 * len(t.sources), "only %d hostile connections were open at once" % t.max_open
    assert not bad, "%d of %d probes failed, first: %r (hostile: %d open at most, %d refused)" % (
        len(bad), len(p.results), bad[0], t.max_open, t.refused)
    assert max(lat) <= bound, "a probe took %.3f s (p50 %.3f s)" % (max(lat), percentile(lat, 50))
    assert t.closed, "no trickling connection was closed by the server (deadline %.1f s)" % request_timeout
    assert max(t.closed) <= request_timeout + 1.0, "a trickling connection stayed open %.2f s" % max(t.closed)
