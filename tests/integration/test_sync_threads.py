"""proxysql-sync when a thread cannot start: the agent stops the threads it had started, says which
one failed and exits 2, at once.

pthread_create is made to fail at its Nth call by a small LD_PRELOAD library built here (cc); the
agent makes no other thread before its own (no health-listen, IP addresses only), so the Nth call is
the Nth thread of agent_start: the watchers (one per prefix), the coordinator, the targets.
Not run under the sanitizers (their runtimes must come first in the library list).

Run: SIDEKICK_BIN=$PWD/bin /usr/bin/python3 -m pytest -q tests/integration/test_sync_threads.py
"""

import os
import shutil
import subprocess
import time

import pytest

from test_sync import SYNC, Agent, consul, px, put_topology, synced, wait_until, workdir  # noqa: F401

SHIM = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

/* pthread_create fails (EAGAIN) at call number SK_FAIL_THREAD, counted from 1. */
int pthread_create(pthread_t *t, const pthread_attr_t *a, void *(*fn)(void *), void *arg)
{
	static atomic_long calls;
	int (*real)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
	const char *at = getenv("SK_FAIL_THREAD");

	if (at && atomic_fetch_add(&calls, 1) + 1 == strtol(at, NULL, 10))
		return EAGAIN;
	*(void **)&real = dlsym(RTLD_NEXT, "pthread_create");
	return real(t, a, fn, arg);
}
"""


def sanitized(path):
    out = subprocess.run(["nm", "-D", path], capture_output=True, text=True).stdout
    return "__asan_init" in out or "__tsan_init" in out


@pytest.fixture
def shim(tmp_path):
    cc = shutil.which("cc")
    if cc is None:
        pytest.fail("no C compiler to build the pthread_create shim")
    if sanitized(SYNC):
        pytest.skip("a sanitizer's runtime must come first: LD_PRELOAD is refused")
    src = tmp_path / "shim.c"
    src.write_text(SHIM)
    lib = tmp_path / "shim.so"
    subprocess.run([cc, "-shared", "-fPIC", "-O1", "-o", str(lib), str(src), "-ldl"], check=True)
    return str(lib)


@pytest.mark.fault
def test_a_thread_that_cannot_start_stops_the_agent_cleanly(consul, px, workdir, shim):  # noqa: F811
    """Exit 2 at once with one line naming the thread; the threads already started are stopped and joined first.

    Each watcher, the coordinator and each target in turn; then, one call further, a normal run."""
    put_topology(consul)
    a = Agent(consul, [px, px], workdir)  # two targets on one ProxySQL: the second thread of a kind
    text = a.text.replace('health-listen = "127.0.0.1:%d"\n' % a.health_port, 'health-listen = ""\n')
    assert text != a.text
    a.text = text
    a.write_config()
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONSUL_")}
    env["LD_PRELOAD"] = shim
    nwatches = 3  # mysql/master, mysql/replica, proxysql/users
    # The reaper of orphans first (PID 1 duties), then the agent's threads.
    expect = ["reaper"] + ["watcher"] * nwatches + ["coordinator", "target", "target"]
    for n, kind in enumerate(expect, 1):
        env["SK_FAIL_THREAD"] = str(n)
        t0 = time.monotonic()
        r = subprocess.run([SYNC, "-c", a.cfg], capture_output=True, text=True, timeout=20, env=env)
        took = time.monotonic() - t0
        out = r.stdout + r.stderr
        assert r.returncode == 2, (n, out)
        want = ("cannot start the thread that reaps children" if kind == "reaper" else
                "cannot start a %s thread" % kind) + ": Resource temporarily unavailable"
        assert want in out, (n, out)
        assert took < 5, "call %d: %.1f s to stop the threads already started" % (n, took)
    # One call further, every thread started: the agent runs and syncs as usual.
    env["SK_FAIL_THREAD"] = str(len(expect) + 1)
    a.proc = subprocess.Popen([SYNC, "-c", a.cfg], stdout=open(a.log, "ab"), stderr=subprocess.STDOUT, env=env)
    try:
        wait_until("the first sync", lambda: synced(px))
    finally:
        assert a.stop() == 0, a.logs()
