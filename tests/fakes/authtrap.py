"""A MySQL server that only wants the password: what a local user who binds mysqld's or ProxySQL's
port while it is down would run. It speaks the handshake (protocol 10), then asks for an
authentication method that reveals the password, records every byte each client sends, and
answers "Access denied".

    from fakes.authtrap import AuthTrap      # with tests/ on sys.path

    with AuthTrap("switch:mysql_clear_password") as trap:   # TCP on 127.0.0.1:trap.port
        ... run a client against 127.0.0.1:trap.port (or trap.socket, a unix socket) ...
        trap.received()      # bytes: everything the clients sent, all connections
        trap.revealed()      # bytes: what RSA-encrypted answers decrypt to (the trap's own key)
        trap.connections     # how many clients connected

Modes:
    greeting:mysql_clear_password   the greeting itself names the method (a client that answers for
                                    another one is then asked to switch to it)
    switch:mysql_clear_password     AuthSwitchRequest after the client's first answer
    switch:dialog                   ... to dialog, with a "Password: " question
    switch:sha256_password          ... to sha256_password; answers a public-key request with its own
    switch:caching_sha2_password    ... to caching_sha2_password, then "full authentication required"
    greeting:caching_sha2_password  MySQL 8's default greeting: a client that answers for
                                    caching_sha2_password is asked for full authentication (RSA, its own
                                    key); one that answers for mysql_native_password with no data is
                                    switched to it, as MySQL 8 does for an account of that method, and
                                    logs in when it proves `password` (trap.native_logins counts them);
                                    every query then gets an error

Run alone: python3 tests/fakes/authtrap.py MODE PORT [SOCKET] (prints what arrives).
"""

from __future__ import annotations

import os
import socket
import struct
import sys
import threading

SCRAMBLE = b"0123456789abcdefghij"        # 20 bytes, as every method uses
CAPS = (0x00000001 | 0x00000004 | 0x00000008 | 0x00000200 | 0x00002000 | 0x00008000 | 0x00020000
        | 0x00080000 | 0x00100000 | 0x00200000)   # long password, flags, db, 4.1, transactions,
                                                  # secure conn, multi results, plugin auth,
                                                  # connect attrs, lenenc auth data (no TLS)
MODES = ("greeting:mysql_clear_password", "switch:mysql_clear_password", "switch:dialog",
         "switch:sha256_password", "switch:caching_sha2_password", "greeting:caching_sha2_password")


def packet(seq, payload):
    return struct.pack("<I", len(payload))[:3] + bytes([seq & 0xff]) + payload


def greeting(plugin):
    return (b"\x0a" + b"5.7.99-authtrap\0" + struct.pack("<I", 7) + SCRAMBLE[:8] + b"\0"
            + struct.pack("<H", CAPS & 0xffff) + b"\x21" + struct.pack("<H", 2)
            + struct.pack("<H", CAPS >> 16) + bytes([len(SCRAMBLE) + 1]) + b"\0" * 10
            + SCRAMBLE[8:] + b"\0" + plugin.encode() + b"\0")


def access_denied():
    return b"\xff" + struct.pack("<H", 1045) + b"#28000" + b"Access denied (authtrap)"


def no_queries():
    return b"\xff" + struct.pack("<H", 1105) + b"#HY000" + b"authtrap answers no queries"


def native_scramble(password, salt):
    import hashlib
    h1 = hashlib.sha1(password.encode()).digest()
    h2 = hashlib.sha1(h1).digest()
    h3 = hashlib.sha1(salt + h2).digest()
    return bytes(a ^ b for a, b in zip(h1, h3))


def response_plugin(payload):
    """(auth data, plugin name) of a HandshakeResponse41 (lenenc auth data, as libmariadb sends)."""
    flags = struct.unpack("<I", payload[:4])[0]
    pos = payload.index(b"\0", 32) + 1              # after the user name
    n = payload[pos]
    if n == 0xfc:
        n, pos = struct.unpack("<H", payload[pos + 1:pos + 3])[0], pos + 3
    else:
        pos += 1
    auth, pos = payload[pos:pos + n], pos + n
    if flags & 0x8:                                  # a database name
        pos = payload.index(b"\0", pos) + 1
    end = payload.find(b"\0", pos)
    return auth, payload[pos:end if end >= 0 else len(payload)].decode(errors="replace")


class AuthTrap:
    def __init__(self, mode, port=0, socket_path=None, password=None):
        if mode not in MODES:
            raise ValueError("mode must be one of " + ", ".join(MODES))
        self.kind, self.plugin = mode.split(":", 1)
        self.mode = mode
        self._lock = threading.Lock()
        self._received = bytearray()
        self._revealed = bytearray()
        self.connections = 0
        self.native_logins = 0
        self.password = password
        self._stop = threading.Event()
        self._key = None
        if self.plugin in ("sha256_password", "caching_sha2_password"):
            from cryptography.hazmat.primitives.asymmetric import rsa
            self._key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self._listeners = []
        tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        tcp.bind(("127.0.0.1", port))
        tcp.listen(16)
        self._listeners.append(tcp)
        self.host, self.port = "127.0.0.1", tcp.getsockname()[1]
        self.socket = socket_path
        if socket_path:
            if os.path.exists(socket_path):
                os.unlink(socket_path)
            unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            unix.bind(socket_path)
            unix.listen(16)
            self._listeners.append(unix)
        self._threads = [threading.Thread(target=self._accept, args=(s,), daemon=True) for s in self._listeners]
        for t in self._threads:
            t.start()

    # -- what arrived ---------------------------------------------------------------------------
    def received(self):
        with self._lock:
            return bytes(self._received)

    def revealed(self):
        with self._lock:
            return bytes(self._revealed)

    # -- the server -----------------------------------------------------------------------------
    def _accept(self, lsock):
        lsock.settimeout(0.2)
        while not self._stop.is_set():
            try:
                conn, _ = lsock.accept()
            except (socket.timeout, OSError):
                continue
            with self._lock:
                self.connections += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _read(self, conn):
        """One packet (seq, payload), recording its bytes; None at EOF."""
        head = self._exact(conn, 4)
        if head is None:
            return None
        n = head[0] | head[1] << 8 | head[2] << 16
        body = self._exact(conn, n) if n else b""
        if body is None:
            return None
        return head[3], body

    def _exact(self, conn, n):
        buf = b""
        while len(buf) < n:
            try:
                chunk = conn.recv(n - len(buf))
            except OSError:
                chunk = b""
            if not chunk:
                return None
            with self._lock:
                self._received += chunk
            buf += chunk
        return buf

    def _serve(self, conn):
        conn.settimeout(10)
        try:
            self._dialogue(conn)
            self._drain(conn)
        finally:
            conn.close()

    def _drain(self, conn):
        """Whatever else the client sends is recorded too, until it closes."""
        while self._read(conn) is not None:
            pass

    def _dialogue(self, conn):
        first = "mysql_native_password" if self.kind == "switch" else self.plugin
        conn.sendall(packet(0, greeting(first)))
        got = self._read(conn)
        if got is None:
            return
        seq = got[0] + 1
        if self.mode == "greeting:caching_sha2_password":
            auth, plugin = response_plugin(got[1])
            if plugin == "mysql_native_password":
                self._native(conn, seq, auth)
                return
            if len(auth) != 32:
                return
            seq = self._rsa(conn, seq, b"")
        elif self.kind == "switch" or response_plugin(got[1])[1] != self.plugin:
            # A client that answered for another method is asked to switch, as a server does.
            data = {"mysql_clear_password": b"", "dialog": b"\x04Password: "}.get(self.plugin, SCRAMBLE + b"\0")
            conn.sendall(packet(seq, b"\xfe" + self.plugin.encode() + b"\0" + data))
            got = self._read(conn)
            if got is None:
                return
            seq = got[0] + 1
            if self.plugin in ("sha256_password", "caching_sha2_password"):
                seq = self._rsa(conn, seq, got[1])
        if seq is not None:
            conn.sendall(packet(seq, access_denied()))

    def _native(self, conn, seq, auth):
        """MySQL 8 with an account of mysql_native_password: switch to it unless already proven."""
        if not auth:
            conn.sendall(packet(seq, b"\xfe" + b"mysql_native_password\0" + SCRAMBLE + b"\0"))
            got = self._read(conn)
            if got is None:
                return
            seq, auth = got[0] + 1, got[1]
        if self.password is None or auth != native_scramble(self.password, SCRAMBLE):
            conn.sendall(packet(seq, access_denied()))
            return
        with self._lock:
            self.native_logins += 1
        conn.sendall(packet(seq, b"\x00\x00\x00\x02\x00\x00\x00"))
        while True:
            got = self._read(conn)
            if got is None or got[1][:1] == b"\x01":    # COM_QUIT
                return
            conn.sendall(packet(1, no_queries()))

    def _rsa(self, conn, seq, answer):
        """Full authentication: hand out the trap's public key, decrypt what comes back."""
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import padding
        if self.plugin == "caching_sha2_password":
            conn.sendall(packet(seq, b"\x01\x04"))          # perform full authentication
            got = self._read(conn)
            if got is None:
                return None
            seq, answer = got[0] + 1, got[1]
        if answer not in (b"\x01", b"\x02"):                # not a public key request
            return seq
        pem = self._key.public_key().public_bytes(serialization.Encoding.PEM,
                                                  serialization.PublicFormat.SubjectPublicKeyInfo)
        conn.sendall(packet(seq, b"\x01" + pem))
        got = self._read(conn)
        if got is None:
            return None
        try:
            plain = self._key.decrypt(got[1], padding.OAEP(mgf=padding.MGF1(hashes.SHA1()),
                                                           algorithm=hashes.SHA1(), label=None))
            plain = bytes(b ^ SCRAMBLE[i % len(SCRAMBLE)] for i, b in enumerate(plain))
            with self._lock:
                self._revealed += plain
        except ValueError:
            pass
        return got[0] + 1

    def close(self):
        self._stop.set()
        for t in self._threads:
            t.join(timeout=2)
        for s in self._listeners:
            s.close()
        if self.socket and os.path.exists(self.socket):
            os.unlink(self.socket)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    trap = AuthTrap(sys.argv[1], int(sys.argv[2]), sys.argv[3] if len(sys.argv) > 3 else None)
    print("authtrap %s on %s:%d" % (trap.mode, trap.host, trap.port), flush=True)
    seen = 0
    try:
        while True:
            threading.Event().wait(1)
            got = trap.received()
            if len(got) > seen:
                print(repr(got[seen:]), repr(trap.revealed()), flush=True)
                seen = len(got)
    except KeyboardInterrupt:
        trap.close()
