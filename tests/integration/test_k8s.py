"""k8s/: every overlay renders with `kubectl kustomize`, passes the Kubernetes schemas offline
(kubernetes-models, plus a strict walk that fails on unknown field names: tests/k8s/validate.mjs)
and yamllint; the pod keeps its security promises; and every exec probe in the rendered
manifests really runs, with its exact command and environment, against what it checks:

* the ProxySQL pod's probes, in a private network namespace laid out like the pod's localhost:
  the ProxySQL admin double on 127.0.0.1:6032, the Consul double on 127.0.0.1:8500 and the real
  proxysql-sync with the overlay's ConfigMap and the Deployment's args and env on :9901 (the
  overlays with a Consul agent in the pod; consul-k8s, whose agent reaches the servers over HTTPS
  and logs in, is checked for its wiring: its address, CA, login token and configuration agree);
* the PXC operator snippet's probes (the operator execs them with no arguments and the CR's
  timeoutSeconds in the environment) against the test Galera cluster.

Only the volume mount paths are mapped to local files (bin/static for the probes volume, a temp
file for each secret). So a manifest can never call a flag a binary doesn't have.

Run: make static && make deps && /usr/bin/python3 -m pytest -q tests/integration/test_k8s.py
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
K8S = os.path.join(REPO, "k8s")
VALIDATOR = os.path.join(REPO, "tests", "k8s", "validate.mjs")
STATIC = os.environ.get("SIDEKICK_STATIC_BIN", os.path.join(REPO, "bin", "static"))
FAKES = os.path.join(REPO, "tests", "fakes")
PY = "/usr/bin/python3"
OVERLAYS = sorted(os.listdir(os.path.join(K8S, "overlays")))
# Overlays whose pod has no Consul agent: proxysql-sync talks to the consul-k8s servers itself
# (docs/deploy.md). The others keep the base's agent container.
AGENTLESS = ["consul-k8s"]
WITH_AGENT = [o for o in OVERLAYS if o not in AGENTLESS]
KUBECTL = shutil.which("kubectl")
ADMIN_PASSWORD = "adm-" + os.urandom(6).hex()

sys.path.insert(0, os.path.join(REPO, "tests"))


def yaml_load_all(text):
    """YAML documents as Python objects, through node's yaml package (no PyYAML needed)."""
    script = ("import YAML from 'yaml'; let s=''; process.stdin.on('data', d => s += d);"
              "process.stdin.on('end', () => console.log(JSON.stringify("
              "YAML.parseAllDocuments(s).map(d => d.toJSON()).filter(Boolean))));")
    r = subprocess.run(["node", "--input-type=module", "-e", script], input=text, capture_output=True,
                       text=True, cwd=os.path.dirname(VALIDATOR), timeout=60)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def render(target):
    assert KUBECTL, "kubectl not installed"
    r = subprocess.run([KUBECTL, "kustomize", target], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    d = tmp_path_factory.mktemp("rendered")
    out = {}
    for name in OVERLAYS:
        text = render(os.path.join(K8S, "overlays", name))
        path = d / (name + ".yaml")
        path.write_text(text)
        out[name] = (str(path), yaml_load_all(text))
    return out


def kinds(docs, kind):
    return [d for d in docs if d.get("kind") == kind]


def pod_specs(docs):
    return [d["spec"]["template"]["spec"] for d in docs
            if d.get("kind") in ("Deployment", "StatefulSet", "DaemonSet")]


def containers(spec):
    return spec.get("initContainers", []) + spec.get("containers", [])


# -- render, schemas, lint ---------------------------------------------------------------------
def test_base_and_overlays_render():
    render(os.path.join(K8S, "base"))
    assert OVERLAYS, "no overlay"
    for name in OVERLAYS:
        render(os.path.join(K8S, "overlays", name))


def run_validator(*files):
    assert os.path.isdir(os.path.join(os.path.dirname(VALIDATOR), "node_modules", "kubernetes-models")), \
        "npm packages missing in tests/k8s (make deps)"
    return subprocess.run(["node", VALIDATOR] + list(files), capture_output=True, text=True, timeout=120)


def test_schemas_strict(rendered):
    files = [p for p, _ in rendered.values()] + [os.path.join(K8S, "pxc-operator", "cr-probes.yaml"),
                                                 os.path.join(K8S, "mariadb-galera", "networkpolicy.yaml")]
    r = run_validator(*files)
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.parametrize("old,new,expect", [
    ("readOnlyRootFilesystem:", "readOnlyRootFileSystem:", 'unknown field "readOnlyRootFileSystem"'),
    ("timeoutSeconds: 2", "timeoutSeconds: two", "must be integer"),
    ("maxUnavailable: 1", "maxUnavailabel: 1", 'unknown field "maxUnavailabel"'),
    ("  minReplicas: 2", "  minReplica: 2", 'unknown field "minReplica"'),
])
def test_validator_catches_mistakes(rendered, tmp_path, old, new, expect):
    path, _ = rendered[OVERLAYS[0]]
    with open(path) as f:
        text = f.read()
    assert old in text
    bad = tmp_path / "bad.yaml"
    bad.write_text(text.replace(old, new, 1))
    r = run_validator(str(bad))
    assert r.returncode == 1 and expect in r.stdout, r.stdout + r.stderr


def test_yamllint():
    yamllint = shutil.which("yamllint")
    assert yamllint, "yamllint not installed (make deps)"
    r = subprocess.run([yamllint, "-s", "-c", os.path.join(REPO, "tests", "k8s", "yamllint.yaml"), K8S],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr


# -- what the manifests promise -------------------------------------------------------------------
def test_security_context_and_resources(rendered):
    for name, (_, docs) in rendered.items():
        specs = pod_specs(docs)
        assert specs, name
        for spec in specs:
            psc = spec["securityContext"]
            assert psc["runAsNonRoot"] is True and psc["runAsUser"] != 0, name
            assert psc["seccompProfile"]["type"] == "RuntimeDefault", name
            assert spec.get("automountServiceAccountToken") is False, name
            for c in containers(spec):
                sc = c["securityContext"]
                where = "%s: %s" % (name, c["name"])
                assert sc["allowPrivilegeEscalation"] is False, where
                assert sc["readOnlyRootFilesystem"] is True, where
                assert sc["capabilities"]["drop"] == ["ALL"] and "add" not in sc["capabilities"], where
                assert c["resources"]["requests"] and c["resources"]["limits"], where
                assert not sc.get("privileged"), where


def test_pod_shape(rendered):
    for name, (_, docs) in rendered.items():
        [dep] = kinds(docs, "Deployment")
        spec = dep["spec"]["template"]["spec"]
        names = [c["name"] for c in spec["containers"]]
        if name in AGENTLESS:
            # The patch that deletes the agent moves proxysql-sync first; kubectl's default stays ProxySQL.
            assert sorted(names) == ["proxysql", "proxysql-sync"], names
            annotations = dep["spec"]["template"]["metadata"]["annotations"]
            assert annotations["kubectl.kubernetes.io/default-container"] == "proxysql"
        else:
            assert names == ["proxysql", "consul", "proxysql-sync"], names
        images = {c["name"]: c["image"] for c in containers(spec)}
        assert images["proxysql"].startswith("proxysql/proxysql:")
        assert name in AGENTLESS or images["consul"].startswith("hashicorp/consul:")
        [sync] = [c for c in spec["containers"] if c["name"] == "proxysql-sync"]
        assert sync["livenessProbe"]["httpGet"]["path"] == "/healthz"
        assert sync["readinessProbe"]["httpGet"]["path"] == "/readyz"
        for c in [c for c in spec["containers"] if c["name"] == "proxysql"]:
            for probe in ("livenessProbe", "readinessProbe"):
                assert c[probe]["exec"]["command"][0].endswith("/proxysql-check"), (name, probe)
            drain = c["lifecycle"]["preStop"]["exec"]["command"]
            assert drain[0].endswith("/proxysql-check") and "--drain" in drain, drain
            assert spec["terminationGracePeriodSeconds"] > float(drain[drain.index("--timeout") + 1]), drain
        # Secrets are referenced, never inlined.
        assert not kinds(docs, "Secret"), name
        secrets = {v["secret"]["secretName"] for v in spec["volumes"] if "secret" in v}
        assert secrets == ({"proxysql-admin", "consul-ca-cert"} if name in AGENTLESS
                           else {"proxysql-admin", "consul-agent"}), secrets
        # The other objects, aimed at the Deployment.
        [svc], [pdb], [hpa] = kinds(docs, "Service"), kinds(docs, "PodDisruptionBudget"), \
            kinds(docs, "HorizontalPodAutoscaler")
        labels = dep["spec"]["template"]["metadata"]["labels"]
        for sel in (svc["spec"]["selector"], pdb["spec"]["selector"]["matchLabels"]):
            assert sel.items() <= labels.items(), (sel, labels)
        assert hpa["spec"]["scaleTargetRef"]["name"] == dep["metadata"]["name"]
        assert "replicas" not in dep["spec"], "the HPA owns the replica count"
        assert {c["metadata"]["name"].rsplit("-", 1)[0] for c in kinds(docs, "ConfigMap")} == \
            {"proxysql-config", "proxysql-sync-config"}


def policy_ports(policy):
    """{(port, protocol): [the rule's `from`, or None for any source]} of a NetworkPolicy's ingress."""
    out = {}
    for rule in policy["spec"]["ingress"]:
        for p in rule["ports"]:
            out.setdefault((p["port"], p.get("protocol", "TCP")), []).append(rule.get("from"))
    return out


def test_network_policies_guard_the_health_ports(rendered):
    """Port 9901 (proxysql-sync) is open to Prometheus alone, port 9200 (clustercheck --listen) to no
    other pod; every other port a container binds on the pod's address stays reachable."""
    for name, (_, docs) in rendered.items():
        [dep], [pol] = kinds(docs, "Deployment"), kinds(docs, "NetworkPolicy")
        spec = dep["spec"]["template"]["spec"]
        assert pol["spec"]["podSelector"]["matchLabels"].items() <= dep["spec"]["template"]["metadata"]["labels"].items()
        assert pol["spec"]["policyTypes"] == ["Ingress"], name
        ports = policy_ports(pol)
        [health] = ports[("sync-http", "TCP")]
        assert health and all("podSelector" in f for f in health), (name, health)
        named = {p["name"] for c in spec["containers"] for p in c.get("ports", [])}
        assert named == {"mysql", "sync-http"}, named
        assert ports[("mysql", "TCP")] == [None], name
        if name in AGENTLESS:
            assert not [k for k in ports if k[0] == 8301], "no agent, no gossip port: %r" % ports
        else:
            assert ports[(8301, "TCP")] == [None] and ports[(8301, "UDP")] == [None], "Consul gossip"
        # proxysql-sync really listens on the named port.
        [sync] = [c for c in spec["containers"] if c["name"] == "proxysql-sync"]
        env = {e["name"]: e.get("value") for e in sync["env"]}
        assert env["PROXYSQL_SYNC_HEALTH_LISTEN"].endswith(":%d" % sync["ports"][0]["containerPort"])
    [pol] = yaml_load_all(open(os.path.join(K8S, "mariadb-galera", "networkpolicy.yaml")).read())
    [sts] = kinds(yaml_load_all(open(os.path.join(K8S, "mariadb-galera", "statefulset-httpget.yaml")).read()),
                  "StatefulSet")
    spec = sts["spec"]["template"]["spec"]
    assert pol["spec"]["podSelector"]["matchLabels"].items() <= sts["spec"]["template"]["metadata"]["labels"].items()
    ports = policy_ports(pol)
    bound = {(p["name"], p["containerPort"]) for c in spec["containers"] for p in c.get("ports", [])}
    assert ("probes", 9200) in bound
    assert not [k for k in ports if k[0] in ("probes", 9200)], "port 9200 must have no ingress rule"
    for pname, _ in bound - {("probes", 9200)}:
        assert (pname, "TCP") in ports and all(ports[(pname, "TCP")]), pname


def sync_config(docs):
    [cm] = [c for c in kinds(docs, "ConfigMap") if c["metadata"]["name"].startswith("proxysql-sync-config")]
    return cm["data"]["proxysql-sync.conf"]


def test_overlays_differ_in_region_and_readers(rendered):
    """The region overlays (one deployment shape) each set their own region and readers."""
    seen = {}
    for name, (_, docs) in rendered.items():
        if name in AGENTLESS:
            continue
        text = sync_config(docs)
        region = [ln for ln in text.splitlines() if ln.startswith("region")]
        readers = [ln for ln in text.splitlines() if "reader_hostgroup" in ln]
        seen[name] = (tuple(region), tuple(readers))
    assert len(set(seen.values())) == len(seen), seen


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_overlay_agent_config_is_valid(rendered, tmp_path, overlay):
    _, docs = rendered[overlay]
    text = sync_config(docs)
    cfg = tmp_path / "proxysql-sync.conf"
    cfg.write_text(text.replace("/etc/proxysql-admin/admin-password", str(tmp_path / "pw"))
                   .replace("/var/run/secrets/consul/token", str(tmp_path / "jwt")))
    for name in ("pw", "jwt"):
        (tmp_path / name).write_text("x")
        (tmp_path / name).chmod(0o600)
    r = subprocess.run([os.path.join(STATIC, "proxysql-sync"), "--config", str(cfg), "--check-config"],
                       capture_output=True, text=True, timeout=30, env={})
    assert r.returncode == 0, r.stdout + r.stderr


def test_consul_k8s_overlay_wiring(rendered):
    """No agent: the servers' HTTPS address, the CA file from the install's Secret, the servers'
    certificate name, and a projected service-account token (an audience, an expiry) where the
    configuration's consul-login-bearer-token-file says; consul-agent = "none"; no consul-addr in the
    file (it would override CONSUL_HTTP_ADDR); the service account the binding rule selects."""
    _, docs = rendered["consul-k8s"]
    [dep] = kinds(docs, "Deployment")
    spec = dep["spec"]["template"]["spec"]
    [sync] = [c for c in spec["containers"] if c["name"] == "proxysql-sync"]
    env = {e["name"]: e.get("value") for e in sync["env"]}
    assert env["CONSUL_HTTP_ADDR"] == "https://consul-server.consul.svc:8501", env
    assert env["CONSUL_TLS_SERVER_NAME"] == "server.dc1.consul", env
    assert "CONSUL_HTTP_TOKEN_FILE" not in env and "CONSUL_HTTP_TOKEN" not in env, env
    mounts = {m["mountPath"]: m["name"] for m in sync["volumeMounts"]}
    volumes = {v["name"]: v for v in spec["volumes"]}

    def volume_of(path):
        [(mount, vol)] = [(m, n) for m, n in mounts.items() if path.startswith(m.rstrip("/") + "/")]
        return volumes[vol], path[len(mount.rstrip("/")) + 1:]

    ca, item = volume_of(env["CONSUL_CACERT"])
    assert ca["secret"]["secretName"] == "consul-ca-cert"
    assert {"key": "tls.crt", "path": item} in ca["secret"]["items"], ca
    text = sync_config(docs)
    conf = dict(ln.split(" = ", 1) for ln in text.splitlines() if " = " in ln and not ln.startswith(("#", " ")))
    assert conf["consul-agent"] == '"none";', conf
    assert conf["consul-login-method"] == '"proxysql-k8s";', conf
    assert "consul-addr" not in conf, "consul-addr in the file would win over CONSUL_HTTP_ADDR"
    jwt, path = volume_of(conf["consul-login-bearer-token-file"].strip('";'))
    [source] = jwt["projected"]["sources"]
    token = source["serviceAccountToken"]
    assert token["path"] == path and token["audience"] and token["expirationSeconds"] >= 600, token
    [sa] = kinds(docs, "ServiceAccount")
    assert spec["serviceAccountName"] == sa["metadata"]["name"] == "proxysql"
    assert sa["automountServiceAccountToken"] is False and spec["automountServiceAccountToken"] is False
    assert not [v for v in spec["volumes"] if v["name"] in ("consul-agent", "consul-data")], spec["volumes"]


# -- every exec probe, for real ----------------------------------------------------------------
class NetNS:
    """A network namespace of our own with loopback up: the pod's shared localhost."""

    def __init__(self):
        self.holder = subprocess.Popen(["unshare", "--net", "sleep", "600"])
        self.path = "/proc/%d/ns/net" % self.holder.pid
        deadline = time.monotonic() + 5
        while os.readlink(self.path) == os.readlink("/proc/self/ns/net"):
            assert time.monotonic() < deadline, "unshare --net did not take"
            time.sleep(0.01)
        subprocess.run(self.argv(["ip", "link", "set", "lo", "up"]), check=True, timeout=10)
        self.procs = []

    def argv(self, args):
        return ["nsenter", "--net=" + self.path] + list(args)

    def run(self, args, **kw):
        return subprocess.run(self.argv(args), capture_output=True, text=True, **kw)

    def start(self, args, log, env=None):
        out = open(log, "ab")
        p = subprocess.Popen(self.argv(args), stdout=out, stderr=subprocess.STDOUT, env=env,
                             start_new_session=True)
        out.close()
        self.procs.append(p)
        return p

    def http(self, url, method="GET", body=None):
        """(status, body) of one request made inside the namespace."""
        code = ("import sys, urllib.request, urllib.error\n"
                "req = urllib.request.Request(sys.argv[1], data=sys.argv[3].encode() if sys.argv[3] else None,"
                " method=sys.argv[2])\n"
                "try:\n"
                "    r = urllib.request.urlopen(req, timeout=5); print(r.status); print(r.read().decode())\n"
                "except urllib.error.HTTPError as e:\n"
                "    print(e.code); print(e.read().decode())\n"
                "except OSError as e:\n"
                "    print(0); print(e)\n")
        r = self.run([PY, "-c", code, url, method, body or ""], timeout=20)
        status, _, text = r.stdout.partition("\n")
        return int(status or 0), text

    def close(self):
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(5)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait(5)
        self.holder.kill()
        self.holder.wait(5)


def wait_for(what, predicate, timeout=20.0):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(0.1)
    pytest.fail("timed out waiting for %s (last: %r)" % (what, last))


def exec_probes(spec):
    for c in containers(spec):
        for kind in ("startupProbe", "livenessProbe", "readinessProbe"):
            probe = c.get(kind)
            if probe and "exec" in probe:
                yield c, kind, probe


def mapped(value, mounts):
    for src, dst in mounts.items():
        if value == src or value.startswith(src.rstrip("/") + "/"):
            return dst + value[len(src):]
    return value


@pytest.mark.parametrize("overlay", WITH_AGENT)
def test_exec_probes_of_the_proxysql_pod(rendered, tmp_path, overlay):
    _, docs = rendered[overlay]
    [dep] = kinds(docs, "Deployment")
    spec = dep["spec"]["template"]["spec"]
    sync = [c for c in spec["containers"] if c["name"] == "proxysql-sync"][0]
    (tmp_path / "admin-password").write_text(ADMIN_PASSWORD)
    (tmp_path / "consul-token").write_text("anonymous")
    (tmp_path / "admin-password").chmod(0o600)
    (tmp_path / "consul-token").chmod(0o600)
    (tmp_path / "sync").mkdir()
    (tmp_path / "sync" / "proxysql-sync.conf").write_text(sync_config(docs))
    # Where each volume is mounted, as local paths.
    mounts = {"/opt/sidekick": STATIC, "/etc/proxysql-admin/admin-password": str(tmp_path / "admin-password"),
              "/etc/consul-agent/token": str(tmp_path / "consul-token"),
              "/etc/sidekick": str(tmp_path / "sync")}
    conf = (tmp_path / "sync" / "proxysql-sync.conf")
    conf.write_text(conf.read_text().replace("/etc/proxysql-admin/admin-password", str(tmp_path / "admin-password")))
    ns = NetNS()
    try:
        (tmp_path / "px").mkdir()
        ns.start([PY, os.path.join(FAKES, "proxysql_admin.py"), "--listen", "127.0.0.1:6032", "--datadir",
                  str(tmp_path / "px"), "--initial", "--admin-credentials", "admin:" + ADMIN_PASSWORD],
                 tmp_path / "proxysql.log")
        ns.start([PY, os.path.join(FAKES, "consul_kv.py"), "--listen", "127.0.0.1:8500"], tmp_path / "consul.log")
        wait_for("the Consul double", lambda: ns.http("http://127.0.0.1:8500/v1/status/leader")[0] == 200)
        region = [ln.split('"')[1] for ln in sync_config(docs).splitlines() if ln.startswith("region")][0]
        for key, value in [("mysql/master/shop", "db1:3306"), ("mysql/master/shop/hostname", "db1"),
                           ("mysql/master/shop/port", "3306"),
                           ("mysql/replica/shop/%s/db2:3306" % region, "db2:3306")]:
            assert ns.http("http://127.0.0.1:8500/v1/kv/" + key, "PUT", value)[0] == 200
        # The probes before the agent has applied anything: alive, not ready.
        results = {}
        for c, kind, probe in exec_probes(spec):
            argv = [mapped(a, mounts) for a in probe["exec"]["command"]]
            r = ns.run(argv, timeout=probe.get("timeoutSeconds", 1) + 5, env={})
            results[(c["name"], kind)] = r
        assert results, "no exec probe in %s" % overlay
        assert results[("proxysql", "livenessProbe")].returncode == 0, results[("proxysql", "livenessProbe")]
        assert results[("proxysql", "readinessProbe")].returncode == 1, results[("proxysql", "readinessProbe")]
        # The agent as the Deployment runs it: its args, its env, the overlay's ConfigMap.
        env = {e["name"]: mapped(e["value"], mounts) for e in sync.get("env", []) if "value" in e}
        args = [mapped(a, mounts) for a in sync.get("args", [])]
        ns.start([os.path.join(STATIC, "proxysql-sync")] + args, tmp_path / "agent.log", env=env)
        port = sync["readinessProbe"]["httpGet"]["port"]
        port = {p["name"]: p["containerPort"] for p in sync["ports"]}.get(port, port)
        wait_for("proxysql-sync /readyz", lambda: ns.http("http://127.0.0.1:%s/readyz" % port)[0] == 200)
        assert ns.http("http://127.0.0.1:%s%s" % (port, sync["livenessProbe"]["httpGet"]["path"]))[0] == 200
        # Now every exec probe passes, within its timeoutSeconds.
        for c, kind, probe in exec_probes(spec):
            argv = [mapped(a, mounts) for a in probe["exec"]["command"]]
            t0 = time.monotonic()
            r = ns.run(argv, timeout=probe.get("timeoutSeconds", 1) + 5, env={})
            took = time.monotonic() - t0
            assert r.returncode == 0, (c["name"], kind, argv, r.stdout, r.stderr,
                                       (tmp_path / "agent.log").read_text())
            assert took < probe.get("timeoutSeconds", 1), (c["name"], kind, took)
        # The preStop drain, as the kubelet runs it: serves for its delay, pauses, no client: exit 0.
        px = [c for c in spec["containers"] if c["name"] == "proxysql"][0]
        argv = [mapped(a, mounts) for a in px["lifecycle"]["preStop"]["exec"]["command"]]
        r = ns.run(argv, timeout=spec["terminationGracePeriodSeconds"], env={})
        assert r.returncode == 0 and "drained: no client connected" in r.stdout, (argv, r.stdout, r.stderr)
    finally:
        ns.close()


def test_exec_probes_of_the_pxc_operator_snippet(tmp_path, healthy_galera, mysql_creds):
    """The operator execs /var/lib/mysql/{liveness,readiness}-check.sh with no arguments and sets
    LIVENESS_CHECK_TIMEOUT / READINESS_CHECK_TIMEOUT to the CR's timeoutSeconds and MONITOR_PASSWORD;
    the init image installs the static probes under those names."""
    with open(os.path.join(K8S, "pxc-operator", "cr-probes.yaml")) as f:
        [cr] = yaml_load_all(f.read())
    pxc = cr["spec"]["pxc"]
    node = healthy_galera[1]
    cnf = tmp_path / "my.cnf"          # stands in for the node's own address and admin port 33062
    cnf.write_text("[client]\nhost=%s\nport=%d\n" % (node.ip, node.port))
    with open(mysql_creds.password_file) as f:
        password = f.read()
    datadir = tmp_path / "mysql"
    datadir.mkdir()
    for script, binary, var, key in [("liveness-check.sh", "liveness-check", "LIVENESS_CHECK_TIMEOUT", "livenessProbes"),
                                     ("readiness-check.sh", "readiness-check", "READINESS_CHECK_TIMEOUT", "readinessProbes")]:
        shutil.copy2(os.path.join(STATIC, binary), datadir / script)
        timeout = pxc[key]["timeoutSeconds"]
        assert isinstance(timeout, int) and timeout >= 1, (key, timeout)
        env = {var: str(timeout), "MONITOR_PASSWORD": password, "DEFAULTS_EXTRA_FILE": str(cnf)}
        t0 = time.monotonic()
        r = subprocess.run([str(datadir / script)], capture_output=True, text=True, env=env, timeout=timeout + 5)
        assert r.returncode == 0, (script, r.stdout, r.stderr)
        assert time.monotonic() - t0 < timeout
    # The init image puts the binaries where the operator's entrypoint takes them from.
    with open(os.path.join(REPO, "containers", "pxc-init", "Dockerfile")) as f:
        text = f.read()
    assert "COPY --from=probes /probes/liveness-check /liveness-check.sh" in text
    assert "COPY --from=probes /probes/readiness-check /readiness-check.sh" in text
