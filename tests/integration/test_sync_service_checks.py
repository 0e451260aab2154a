"""proxysql-sync routing by health that Consul measures itself: each node of the real MariaDB Galera
cluster is a Consul service whose HTTP check is that node's `clustercheck --listen`, registered
through /v1/agent/service/register as a user would (lower-case keys, as python-consul sends them).
The Consul agent (the double, or real Consul with CONSUL_BIN) runs the checks; nothing moves a
check's status by hand. A desynced node (wsrep_desync=ON: Donor/Desynced, so clustercheck answers
503) leaves its hostgroup in ProxySQL (the double, or real with PROXYSQL_BIN); resynced, it returns.

Run: make all && SIDEKICK_BIN=$PWD/bin /usr/bin/python3 -m pytest -q tests/integration/test_sync_service_checks.py
"""

import json
import os
import re
import subprocess
import time

from fakes.process import track
from test_sync import BIN, consul, px, stop_and_check, wait_until, workdir  # noqa: F401
from test_sync_services import served, services_only_agent

CHECK_INTERVAL = "1s"


def start_clustercheck(node, creds, workdir):
    """`clustercheck --listen 127.0.0.1:0` for one node (tracked: it ends with the test at the
    latest); returns its HTTP port once it listens."""
    log = os.path.join(workdir, "clustercheck-%s.log" % node.name)
    argv = [os.path.join(BIN, "clustercheck"), "--listen", "127.0.0.1:0", "--host", node.ip,
            "--port", str(node.port), "--user", creds.user, "--password-file", creds.password_file,
            "--defaults-extra-file", "", "--disabled-file", os.path.join(workdir, "clustercheck.disabled"),
            "--timeout", "1"]
    with open(log, "wb") as out:
        proc = track(subprocess.Popen(argv, stdout=out, stderr=out, stdin=subprocess.DEVNULL,
                                      env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C"}))

    def port():
        assert proc.poll() is None, "clustercheck --listen exited: %s" % open(log).read()
        m = re.search(r"listening on \S+ \(port (\d+)\)", open(log).read())
        return int(m.group(1)) if m else None
    return wait_until("clustercheck --listen for %s" % node.name, port)


def register_node(consul, node, check_port, role):
    """The node as an instance of service mysql, its check the node's clustercheck listener."""
    body = {"name": "mysql", "id": "mysql-%s" % node.name, "address": node.ip, "port": node.port,
            "tags": ["galera", role],
            "check": {"http": "http://127.0.0.1:%d/" % check_port, "interval": CHECK_INTERVAL,
                      "timeout": "1s", "DeregisterCriticalServiceAfter": "30m"}}
    r = consul.request("PUT", "/v1/agent/service/register", body=json.dumps(body))
    assert r.status == 200, r


def passing(consul, tag):
    r = consul.request("GET", "/v1/health/service/mysql", params={"passing": True, "tag": tag})
    assert r.status == 200, r
    return sorted(x["Service"]["ID"] for x in r.json())


def test_desynced_node_leaves_its_hostgroup_and_returns(healthy_galera, clustercheck_creds, consul, px, workdir):
    """g1 (tag primary) serves hostgroup 10, g2 and g3 (tag replica) hostgroup 11, all through
    their own HTTP checks. g2 desynced: its check turns critical, it leaves hostgroup 11 while g3
    stays; resynced, it comes back. The same for the writer g1 and hostgroup 10 (a services entry
    without role = "writer" may empty its hostgroup)."""
    g1, g2, g3 = healthy_galera[1], healthy_galera[2], healthy_galera[3]
    for node, role in ((g1, "primary"), (g2, "replica"), (g3, "replica")):
        register_node(consul, node, start_clustercheck(node, clustercheck_creds, workdir), role)
    addr = lambda n: (n.ip, str(n.port))  # noqa: E731
    wait_until("every check passing", lambda: passing(consul, "galera") == ["mysql-g1", "mysql-g2", "mysql-g3"],
               timeout=15)
    agent = services_only_agent(consul, px, workdir, "")
    try:
        wait_until("writer and readers", lambda: served(px, 10) == [addr(g1)]
                   and served(px, 11) == sorted([addr(g2), addr(g3)]), timeout=20)
        # (node, its hostgroup, who stays there, the other hostgroup and what it keeps meanwhile)
        for node, hostgroup, others, hg2, kept in ((g2, 11, [addr(g3)], 10, [addr(g1)]),
                                                   (g1, 10, [], 11, sorted([addr(g2), addr(g3)]))):
            t0 = time.monotonic()
            node.desync(True)
            wait_until("%s's check critical" % node.name, lambda: "mysql-" + node.name not in passing(consul, "galera"),
                       timeout=15)
            wait_until("%s out of hostgroup %d" % (node.name, hostgroup), lambda: served(px, hostgroup) == others,
                       timeout=30)
            print("%s left hostgroup %d %.1fs after the desync" % (node.name, hostgroup, time.monotonic() - t0))
            assert served(px, hg2) == kept
            node.desync(False)
            wait_until("%s back in hostgroup %d" % (node.name, hostgroup),
                       lambda: served(px, hostgroup) == sorted(others + [addr(node)]), timeout=30)
        [row] = [x for x in consul.request("GET", "/v1/health/service/mysql").json()
                 if x["Service"]["ID"] == "mysql-g2"]
        [chk] = [c for c in row["Checks"] if c["ServiceID"] == "mysql-g2"]
        assert chk["Status"] == "passing" and chk["Type"] == "http", chk
        assert chk["Output"].startswith("HTTP GET http://127.0.0.1:") and " 200 OK Output: " in chk["Output"], chk
    finally:
        for node in (g1, g2):
            try:
                node.desync(False)
            except Exception as e:          # the next test's healthy_galera heals it anyway
                print("resync %s: %s" % (node.name, e))
        stop_and_check(agent)
