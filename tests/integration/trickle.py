"""Hostile HTTP clients for the health-port tests and benchmark: many connections from other
loopback addresses (127.0.0.2, 127.0.0.3, ...), each trickling one byte of a never-ending request
at an interval and reopened as soon as the server closes it, or each sending a whole request at an
interval over a kept-alive connection (the flood); and a prober (on 127.0.0.1, or an address of
its own) that asks one path on a new connection at an interval and records every answer and its
latency.

Each runs on one thread, are bounded in connections and time, and stop by themselves.
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


class Clients(Background):
    """Connections from `sources` (one a slot) to 127.0.0.1:`port`, each reopened `reopen_after`
    s after the server closes it, for at most `duration` s. A connection's state is a list
    [socket, slot, next send at, opened at, bytes sent]; a subclass says what it sends (_send)
    and what it makes of what it reads (_got)."""

    reopen_after = 0.05
    tick = 0.05

    def __init__(self, port, sources, interval, duration):
        self.port = port
        self.sources = sources
        self.interval = interval
        self.duration = duration
        self.open_now = 0
        self.max_open = 0
        super().__init__()

    def _refused(self):
        """A connect failed at once."""

    def _first_send(self, slot, again):
        """Seconds from connect to the first send on `slot`; `again` when it was opened before."""
        return self.interval * (slot % 10) / 10

    def _open(self, sel, slot, now, again):
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
            self._refused()
            return None
        st = [s, slot, now + self._first_send(slot, again), now, 0]
        sel.register(s, selectors.EVENT_READ, st)
        return st

    def _read(self, st):
        """What came on st's connection; b"" when the server closed it."""
        try:
            return st[0].recv(65536)
        except BlockingIOError:
            return None
        except OSError:
            return b""

    def _run(self):
        sel = selectors.DefaultSelector()
        start = time.monotonic()
        live = {}
        down = {slot: start for slot in range(len(self.sources))}   # slot -> reopen at
        opened = set()

        def drop(st, now):                                          # closed by the server
            sel.unregister(st[0])
            st[0].close()
            del live[st[1]]
            down[st[1]] = now + self.reopen_after
            self._closed(st, now)
        try:
            while not self._stop.is_set() and time.monotonic() - start < self.duration:
                now = time.monotonic()
                for slot in [k for k, at in down.items() if at <= now][:100]:
                    del down[slot]
                    st = self._open(sel, slot, now, slot in opened)
                    opened.add(slot)
                    if st:
                        live[slot] = st
                    else:
                        down[slot] = now + 0.05
                for key, _ in sel.select(self.tick):
                    data = self._read(key.data)
                    if data is not None and not self._got(key.data, data):
                        drop(key.data, time.monotonic())
                now = time.monotonic()
                for st in [st for st in live.values() if st[2] <= now]:
                    if not self._send(st, now):
                        drop(st, now)
                self.open_now = len(live)
                self.max_open = max(self.max_open, len(live))
        finally:
            for st in live.values():
                sel.unregister(st[0])
                st[0].close()
            sel.close()
            self.open_now = 0


class Trickler(Clients):
    """`conns` connections to 127.0.0.1:`port`, spread over `addrs` source addresses, one byte
    every `interval` seconds each, for at most `duration` seconds (or until stop())."""

    def __init__(self, port, conns=300, addrs=30, interval=2.0, duration=20.0, first_addr=2):
        assert conns <= 1000 and duration <= 20.0 and 1 <= addrs <= 250
        self.opened = 0            # connections that sent their first byte
        self.refused = 0           # closed or reset by the server within 0.2 s, before any byte went
        self.closed = []           # lifetimes (s) of connections the server closed after they trickled
        super().__init__(port, ["127.0.0.%d" % (first_addr + i % addrs) for i in range(conns)], interval, duration)

    def _refused(self):
        self.refused += 1

    def _got(self, st, data):
        return bool(data)

    def _closed(self, st, now):
        if st[4] == 0 and now - st[3] < 0.2:
            self.refused += 1
        else:
            self.closed.append(now - st[3])

    def _send(self, st, now):
        stream = REQUEST_HEAD + b"a" * 1000
        try:
            st[0].send(stream[st[4] % len(stream):st[4] % len(stream) + 1])
        except OSError:
            return False
        if st[4] == 0:
            self.opened += 1
        st[4] += 1
        st[2] = now + self.interval
        return True


class KeepAliveFlood(Clients):
    """`per_addr` keep-alive connections from each of `addrs` loopback addresses (127.0.0.2, ...)
    to 127.0.0.1:`port`, each sending a whole `path` request every `interval` seconds and reading
    its answers, each reopened at once when the server closes it; for at most `duration` s."""

    reopen_after = 0.0
    tick = 0.02

    def __init__(self, port, path="/healthz", addrs=16, per_addr=32, interval=1.0, duration=10.0, first_addr=2):
        assert addrs * per_addr <= 1000 and duration <= 20.0 and 1 <= addrs <= 250
        self.request = b"GET %s HTTP/1.1\r\nHost: x\r\n\r\n" % path.encode()
        self.answers = 0           # answers read (status lines)
        self.closed = 0            # connections the server closed
        sources = ["127.0.0.%d" % (first_addr + i % addrs) for i in range(addrs * per_addr)]
        super().__init__(port, sources, interval, duration)

    def _first_send(self, slot, again):
        """A whole second after a reconnect; at first spread over the first second."""
        return self.interval if again else self.interval * (slot % 10 + 1) / 10

    def _got(self, st, data):
        self.answers += data.count(b"HTTP/1.1 ")
        return bool(data)

    def _closed(self, st, now):
        self.closed += 1

    def _send(self, st, now):
        try:
            st[0].send(self.request)
        except BlockingIOError:
            st[2] = now + 0.01                  # still connecting
            return True
        except OSError:
            return False
        st[2] = now + self.interval
        return True


class Prober(Background):
    """GET `path` from `source` (127.0.0.1) on a new connection every `interval` seconds, for at
    most `duration` seconds; records (status or None, seconds, error text)."""

    def __init__(self, port, path, interval=0.1, duration=20.0, timeout=2.0, source="127.0.0.1"):
        assert duration <= 20.0
        self.port = port
        self.source = source
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
                                          source_address=(self.source, 0)) as s:
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


def flood_run(port, path, flood_path="/healthz", addrs=16, per_addr=32, interval=1.0, duration=6.0,
              probe_every=0.1, source="127.0.0.100", timeout=2.0):
    """Probe `path` from `source` (an address of its own) every `probe_every` s while `addrs` x
    `per_addr` keep-alive connections from other loopback addresses each send a whole
    `flood_path` request every `interval` s; returns (KeepAliveFlood, Prober) once `duration` is
    over. The probes start once the flood has all its connections open."""
    with KeepAliveFlood(port, flood_path, addrs=addrs, per_addr=per_addr, interval=interval, duration=duration) as f:
        deadline = time.monotonic() + 5
        while f.max_open < addrs * per_addr and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(interval)            # every connection has had an answer: all are kept alive
        with Prober(port, path, interval=probe_every, duration=duration - interval - 1.5, timeout=timeout,
                    source=source) as p:
            p.wait()
    return f, p


def assert_answered_during_flood(f, p, bound):
    """Every probe answered 200 within `bound` s while every flood connection was open."""
    lat = [r[1] for r in p.results]
    bad = [r for r in p.results if r[0] != 200]
    assert not bad, "%d of %d probes failed, first: %r (flood: %d answers, %d closed by the server)" % (
        len(bad), len(p.results), bad[0], f.answers, f.closed)
    assert len(p.results) >= 10, "only %d probes ran" % len(p.results)
    assert f.max_open == len(f.sources), "only %d flood connections were open at once" % f.max_open
    assert f.answers >= len(f.sources), "the flood had only %d answers" % f.answers
    assert max(lat) <= bound, "a probe took %.3f s (p50 %.3f s)" % (max(lat), percentile(lat, 50))
