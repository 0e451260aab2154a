#!/usr/bin/python3
"""A load-balanced front for tests: one loopback port forwarding to N backends, round robin
(stdlib only). It stands for the one address of a set of servers, a Kubernetes Service before
the Consul servers for instance.

  per connection (default)  each new TCP connection goes to the next backend that accepts it
                            (kube-proxy's way: a connection stays on one server)
  --per-request             each HTTP/1.1 request goes to the next backend, whatever connection
                            it came on (the worst case: any request may land on any server)

A backend that refuses the connection is skipped (the next one is tried, each at most once per
pick); when none accepts, the client's connection is closed. A backend that closes a connection
in the middle of an answer closes the client's too, as a reset would. Connections are bounded
(--max-connections; beyond it new ones wait in the listen backlog), and so are buffers: a request
head of more than 64 KiB or a body of more than 16 MiB closes the connection. SIGTERM or SIGINT: the listener and every connection are
closed and it exits 0 at once.

Run:  /usr/bin/python3 tests/fakes/lbfront.py --listen 127.0.0.1:0 --backend 127.0.0.1:8500 \\
          --backend 127.0.0.1:8501 [--backends-file FILE] [--per-request] [--port-file FILE]
"""

import argparse
import ipaddress
import itertools
import os
import re
import select
import signal
import socket
import sys
import threading

CHUNK = 64 * 1024
MAX_HEAD = 64 * 1024
MAX_BODY = 16 * 1024 * 1024         # a request body held in memory before it is sent on
CONNECT_TIMEOUT = 2.0


def parse_addr(text, what):
    m = re.fullmatch(r"\[?([^\]]*?)\]?:(\d+)", text.strip())
    if not m:
        raise ValueError("%s wants HOST:PORT, got %r" % (what, text))
    host = "127.0.0.1" if m.group(1) == "localhost" else m.group(1)
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        raise ValueError("%s must be a loopback IP address, got %r" % (what, host))
    if not ip.is_loopback:
        raise ValueError("refusing non-loopback address %s (%s)" % (host, what))
    return host, int(m.group(2))


def read_backends_file(path):
    """`http=HOST:PORT` lines (the Consul double's --port-file) or bare HOST:PORT lines."""
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line:
                out.append(parse_addr(line.split("=", 1)[-1], "--backends-file"))
    return out


class Front:
    def __init__(self, listen, backends, per_request=False, max_connections=256, verbose=False):
        if not backends:
            raise ValueError("no backend")
        self.backends, self.per_request, self.verbose = backends, per_request, verbose
        self.rr = itertools.count()
        self.rr_lock = threading.Lock()
        self.slots = threading.BoundedSemaphore(max_connections)
        self.socks = set()              # every open socket, closed at stop
        self.lock = threading.Lock()
        self.stopping = False
        family = socket.AF_INET6 if ":" in listen[0] else socket.AF_INET
        self.listener = socket.socket(family, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(listen)
        self.listener.listen(128)
        self.addr = self.listener.getsockname()[:2]
        self.picks = {b: 0 for b in backends}       # connections made to each backend

    # -- sockets ---------------------------------------------------------------

    def track(self, sock):
        with self.lock:
            if self.stopping:
                sock.close()
                raise OSError("stopping")
            self.socks.add(sock)
        return sock

    def forget(self, sock):
        with self.lock:
            self.socks.discard(sock)
        try:
            sock.close()
        except OSError:
            pass

    def connect_next(self):
        """A connection to the next backend that accepts one, or None when none does."""
        with self.rr_lock:
            start = next(self.rr)
        for i in range(len(self.backends)):
            b = self.backends[(start + i) % len(self.backends)]
            try:
                s = socket.create_connection(b, timeout=CONNECT_TIMEOUT)
            except OSError:
                continue
            s.settimeout(None)
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self.rr_lock:
                self.picks[b] += 1
            try:
                return self.track(s)
            except OSError:
                return None
        return None

    # -- serving ---------------------------------------------------------------

    def serve(self):
        while not self.stopping:
            self.slots.acquire()
            try:
                client, _ = self.listener.accept()
            except OSError:
                self.slots.release()
                return
            try:
                self.track(client)
            except OSError:
                self.slots.release()
                return
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=self.connection, args=(client,), daemon=True).start()

    def connection(self, client):
        try:
            if self.per_request:
                self.relay_requests(client)
            else:
                self.relay_bytes(client)
        except OSError:
            pass
        finally:
            self.forget(client)
            self.slots.release()

    def relay_bytes(self, client):
        """Per connection: bytes both ways until either side closes."""
        backend = self.connect_next()
        if backend is None:
            return
        try:
            pair = {client: backend, backend: client}
            while True:
                ready, _, _ = select.select(list(pair), [], [])
                for s in ready:
                    data = s.recv(CHUNK)
                    if not data:
                        return
                    pair[s].sendall(data)
        finally:
            self.forget(backend)

    def relay_requests(self, client):
        """Per request: read one request from the client, send it on a new connection to the next
        backend, relay the answer, repeat while both sides keep the connection."""
        reader = Reader(client)
        while True:
            head = reader.head()
            if head is None:
                return
            lines = head.split(b"\r\n")
            headers = [ln for ln in lines[1:] if ln]
            if any(ln.lower().startswith(b"expect:") and b"100-continue" in ln.lower() for ln in headers):
                # Answer the interim response here (as many proxies do) and drop the header.
                client.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
                headers = [ln for ln in headers if not ln.lower().startswith(b"expect:")]
            body = reader.body(headers)
            if body is None:
                return
            backend = self.connect_next()
            if backend is None:
                return                  # nothing accepts: the client sees its connection closed
            try:
                backend.sendall(b"\r\n".join([lines[0]] + headers) + b"\r\n\r\n" + body)
                keep = relay_answer(Reader(backend), client, lines[0].split(b" ")[0] == b"HEAD")
            finally:
                self.forget(backend)
            if not keep or wants_close(headers):
                return

    def stop(self):
        with self.lock:
            self.stopping = True
            socks = list(self.socks)
        try:
            self.listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.listener.close()
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def wants_close(headers):
    return any(h.lower().replace(b" ", b"") == b"connection:close" for h in headers)


class Reader:
    """Buffered reads of HTTP/1.1 framing from a socket, with bounded buffers."""

    def __init__(self, sock):
        self.sock, self.buf = sock, b""

    def fill(self):
        data = self.sock.recv(CHUNK)
        if not data:
            return False
        self.buf += data
        return True

    def head(self):
        """The head up to (without) the blank line, or None at EOF or when too large."""
        while b"\r\n\r\n" not in self.buf:
            if len(self.buf) > MAX_HEAD or not self.fill():
                return None
        head, _, self.buf = self.buf.partition(b"\r\n\r\n")
        return head

    def exactly(self, n):
        while len(self.buf) < n:
            if not self.fill():
                return None
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def line(self):
        while b"\r\n" not in self.buf:
            if len(self.buf) > MAX_HEAD or not self.fill():
                return None
        out, _, self.buf = self.buf.partition(b"\r\n")
        return out

    def chunked(self, sink):
        """Pass a chunked body to sink(bytes) as it comes; False at a premature EOF."""
        while True:
            size_line = self.line()
            if size_line is None:
                return False
            sink(size_line + b"\r\n")
            size = int(size_line.split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while True:
                    trailer = self.line()
                    if trailer is None:
                        return False
                    sink(trailer + b"\r\n")
                    if trailer == b"":
                        return True
            while size > 0:
                part = self.exactly(min(size, CHUNK))
                if part is None:
                    return False
                sink(part)
                size -= len(part)
            crlf = self.exactly(2)
            if crlf is None:
                return False
            sink(crlf)

    def body(self, headers):
        """A request body (Content-Length or chunked, kept as sent), or None at EOF."""
        length, chunked = header_framing(headers)
        if chunked:
            parts = []
            return b"".join(parts) if self.chunked(parts.append) else None
        if length > MAX_BODY:
            return None
        if length:
            return self.exactly(length)
        return b""


def header_framing(headers):
    length, chunked = 0, False
    for h in headers:
        name, _, value = h.partition(b":")
        name = name.strip().lower()
        if name == b"content-length":
            length = int(value.strip())
        elif name == b"transfer-encoding" and b"chunked" in value.lower():
            chunked = True
    return length, chunked


def relay_answer(backend, client, head_request):
    """Relay one answer (interim 1xx ones first); True when the connection may carry another."""
    while True:
        head = backend.head()
        if head is None:
            raise OSError("the backend closed the connection before answering")
        lines = head.split(b"\r\n")
        status = int(lines[0].split(b" ")[1])
        client.sendall(head + b"\r\n\r\n")
        if 100 <= status < 200:
            continue
        headers = lines[1:]
        if head_request or status in (204, 304):
            return not wants_close(headers)
        length, chunked = header_framing(headers)
        if chunked:
            if not backend.chunked(client.sendall):
                raise OSError("the backend closed the connection in the middle of an answer")
        elif any(h.lower().startswith(b"content-length:") for h in headers):
            left = length
            while left > 0:
                part = backend.exactly(min(left, CHUNK))
                if part is None:
                    raise OSError("the backend closed the connection in the middle of an answer")
                client.sendall(part)
                left -= len(part)
        else:                           # until the backend closes
            if backend.buf:
                client.sendall(backend.buf)
            while True:
                data = backend.sock.recv(CHUNK)
                if not data:
                    return False
                client.sendall(data)
        return not wants_close(headers)


def main(argv=None):
    p = argparse.ArgumentParser(description="a round-robin TCP/HTTP front for loopback backends")
    p.add_argument("--listen", default="127.0.0.1:0", help="HOST:PORT (loopback only; port 0 = any)")
    p.add_argument("--backend", action="append", default=[], help="HOST:PORT of a backend (repeat)")
    p.add_argument("--backends-file", help="backends, one per line (http=HOST:PORT or HOST:PORT)")
    p.add_argument("--per-request", action="store_true",
                   help="send each HTTP request to the next backend (default: each connection)")
    p.add_argument("--max-connections", type=int, default=256, help="client connections at once (default 256)")
    p.add_argument("--port-file", help='write "http=HOST:PORT" here once listening')
    p.add_argument("--verbose", action="store_true")
    args = p.parse_args(argv)
    try:
        listen = parse_addr(args.listen, "--listen")
        backends = [parse_addr(b, "--backend") for b in args.backend]
        if args.backends_file:
            backends += read_backends_file(args.backends_file)
        front = Front(listen, backends, args.per_request, args.max_connections, args.verbose)
    except (ValueError, OSError) as e:
        print("lbfront: %s" % e, file=sys.stderr)
        return 2
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    threading.Thread(target=front.serve, name="accept", daemon=True).start()
    host, port = front.addr
    line = "http=%s:%d" % (host if ":" not in host else "[%s]" % host, port)
    if args.port_file:
        tmp = "%s.tmp.%d" % (args.port_file, os.getpid())
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(line + "\n")
        os.replace(tmp, args.port_file)
    print(line, flush=True)
    while not stop.wait(0.2):  # short waits: see proxysql_admin.py's main (a SIGTERM another thread got)
        pass
    front.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
