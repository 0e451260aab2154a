"""What the Consul and ProxySQL fixtures share: one server process, its log file, and how it
stops (SIGTERM, then SIGKILL), crashes (SIGKILL) and pauses (SIGSTOP)."""

import signal
import socket
import subprocess


_TRACKED = []


def track(proc):
    """Remember a Popen that a test starts by hand (an agent, a probe in --listen mode): whatever
    path the test leaves by, stop_tracked() ends it at the test's teardown. Returns proc."""
    _TRACKED.append(proc)
    return proc


def stop_tracked(timeout=5.0):
    """SIGTERM (SIGCONT first) every tracked process still running, SIGKILL after `timeout`
    seconds; forget them all. Returns the argv of those that were still running."""
    left = [p for p in _TRACKED if p.poll() is None]
    _TRACKED.clear()
    for p in left:
        p.send_signal(signal.SIGCONT)
        p.send_signal(signal.SIGTERM)
    for p in left:
        try:
            p.wait(timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout)
    return [p.args for p in left]


def free_port():
    """An ephemeral loopback port that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerProcess:
    """Base of a fixture class: the subclass starts `self.proc` (a Popen) writing to `self._log`
    (open on `self.log_path`) and names itself in `what` for error messages."""

    what = "server"
    stop_timeout = 10.0

    def __init__(self):
        self.proc = None
        self.returncode = None
        self._log = None

    @property
    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def _check_alive(self):
        if self.proc is not None and self.proc.poll() is not None:
            with open(self.log_path, "rb") as f:
                tail = f.read()[-2000:].decode("utf-8", "replace")
            raise RuntimeError("%s exited with %s:\n%s" % (self.what, self.proc.returncode, tail))

    def stop(self, timeout=None):
        """SIGTERM (SIGCONT first, in case it was paused), then SIGKILL after timeout seconds."""
        if self.proc is None:
            return
        timeout = self.stop_timeout if timeout is None else timeout
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout)
        self._reap()

    def kill(self):
        """SIGKILL: a crash, no goodbye."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self._reap()

    def pause(self):
        """SIGSTOP: the port accepts TCP but nothing answers (deadline tests)."""
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self):
        self.proc.send_signal(signal.SIGCONT)

    def _reap(self):
        self.returncode = self.proc.returncode
        self.proc = None
        if self._log:
            self._log.close()
            self._log = None
