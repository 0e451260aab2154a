"""Alert rules and the Grafana dashboard for proxysql-sync: dist/prometheus/proxysql-sync.rules.yml,
k8s/monitoring/ (the same rules as a PrometheusRule, the dashboard as a ConfigMap) and
dist/grafana/proxysql-sync-dashboard.json (a link to k8s/monitoring's copy).

* `promtool check rules` passes on the rules file and on the PrometheusRule's groups, which equal
  the rules file's (regenerate the manifest with `/usr/bin/python3 tests/integration/test_alerts.py
  --write`);
* `promtool test rules tests/alerts/proxysql-sync.rules.test.yml`: every alert fires when it should,
  not before, and clears;
* every dashboard query is PromQL that promtool accepts (each becomes a recording rule of a
  generated rules file, Grafana's $__rate_interval replaced by 5m);
* every metric the rules and the dashboard read is one the agent exports (written in sync/*.c), and the
  running agent's /metrics passes `promtool check metrics`;
* k8s/monitoring renders with `kubectl kustomize` and passes yamllint.

Run: /usr/bin/python3 -m pytest -q tests/integration/test_alerts.py
"""

import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request

import pytest
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
RULES = os.path.join(REPO, "dist", "prometheus", "proxysql-sync.rules.yml")
RULES_TEST = os.path.join(REPO, "tests", "alerts", "proxysql-sync.rules.test.yml")
MONITORING = os.path.join(REPO, "k8s", "monitoring")
PROMETHEUS_RULE = os.path.join(MONITORING, "prometheusrule.yaml")
DASHBOARD = os.path.join(MONITORING, "proxysql-sync-dashboard.json")
DIST_DASHBOARD = os.path.join(REPO, "dist", "grafana", "proxysql-sync-dashboard.json")
SYNC_DIR = os.path.join(REPO, "sync")
BIN = os.environ.get("SIDEKICK_BIN", os.path.join(REPO, "bin"))
PROMTOOL = shutil.which("promtool")

sys.path.insert(0, os.path.join(REPO, "tests"))

pytestmark = pytest.mark.skipif(PROMTOOL is None, reason="promtool not installed (Debian package prometheus)")

MANIFEST_HEAD = """\
# Generated from dist/prometheus/proxysql-sync.rules.yml by
# `/usr/bin/python3 tests/integration/test_alerts.py --write`: edit that file, then regenerate.
"""


class IndentedDumper(yaml.SafeDumper):
    """Block sequences indented under their key, as yamllint's default wants."""

    def increase_indent(self, flow=False, indentless=False):
        return super().increase_indent(flow, False)


def prometheus_rule():
    """The PrometheusRule manifest for the rules file's groups."""
    with open(RULES) as f:
        groups = yaml.safe_load(f)["groups"]
    doc = {"apiVersion": "monitoring.coreos.com/v1", "kind": "PrometheusRule",
           "metadata": {"name": "proxysql-sync", "labels": {"role": "alert-rules"}},
           "spec": {"groups": groups}}
    return MANIFEST_HEAD + yaml.dump(doc, Dumper=IndentedDumper, sort_keys=False, width=100, allow_unicode=True)


def promtool(*args, **kwargs):
    return subprocess.run([PROMTOOL, *args], capture_output=True, text=True, timeout=60, **kwargs)


def dashboard_exprs():
    with open(DASHBOARD) as f:
        dash = json.load(f)
    out = []
    for p in dash["panels"]:
        for t in p.get("targets", []):
            out.append((p["title"], t["expr"]))
    for v in dash["templating"]["list"]:
        if v["type"] == "query":
            m = re.fullmatch(r"label_values\((.*), *\w+\)", v["definition"])
            out.append(("variable " + v["name"], m.group(1) if m else v["definition"]))
    return out


def grafana_to_promql(expr):
    """Grafana's interval variables as a duration; $var inside strings stays (valid PromQL)."""
    return re.sub(r"\$__(rate_)?interval|\$__range", "5m", expr)


def metric_names(expr):
    names = set(re.findall(r"\b(proxysql_sync_[a-z_]+)", expr))
    return {re.sub(r"_(bucket|sum|count)$", "", n) if "duration_seconds" in n else n for n in names}


def exported_metrics():
    src = ""
    for name in sorted(os.listdir(SYNC_DIR)):
        if name.endswith(".c"):
            with open(os.path.join(SYNC_DIR, name)) as f:
                src += f.read()
    # a name before its labels, its value, or a format's end; or quoted whole (the per-target table)
    return set(re.findall(r"(proxysql_sync_[a-z_]+?)(?:_bucket|_sum|_count)?(?=[{ \\\"])", src))


def test_rules_file_passes_promtool_check():
    r = promtool("check", "rules", RULES)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SUCCESS: 6 rules found" in r.stdout


def test_rules_unit_tests():
    """promtool test rules: each alert quiet before its `for`, firing with its labels and
    annotations after it, clearing when the condition ends."""
    r = promtool("test", "rules", RULES_TEST, cwd=os.path.dirname(RULES_TEST))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SUCCESS" in r.stdout


def test_every_alert_has_a_unit_test():
    with open(RULES) as f:
        alerts = {r["alert"] for g in yaml.safe_load(f)["groups"] for r in g["rules"]}
    with open(RULES_TEST) as f:
        tested = {t["alertname"] for case in yaml.safe_load(f)["tests"] for t in case["alert_rule_test"]}
    assert alerts == tested


def test_prometheus_rule_manifest_is_the_rules_file(tmp_path):
    with open(PROMETHEUS_RULE) as f:
        assert f.read() == prometheus_rule(), "regenerate: /usr/bin/python3 tests/integration/test_alerts.py --write"
    with open(PROMETHEUS_RULE) as f:
        spec = yaml.safe_load(f)["spec"]
    path = tmp_path / "from-manifest.yml"
    path.write_text(yaml.safe_dump(spec))
    r = promtool("check", "rules", str(path))
    assert r.returncode == 0, r.stdout + r.stderr


def test_dashboard_queries_are_promql(tmp_path):
    exprs = dashboard_exprs()
    assert len(exprs) >= 15
    rules = {"groups": [{"name": "dashboard", "rules": [
        {"record": "dashboard:query_%d" % i, "expr": grafana_to_promql(e)} for i, (_, e) in enumerate(exprs)]}]}
    path = tmp_path / "dashboard-queries.yml"
    path.write_text(yaml.safe_dump(rules))
    r = promtool("check", "rules", str(path))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SUCCESS: %d rules found" % len(exprs) in r.stdout


def test_dashboard_shape():
    """Grafana dashboard JSON: unique panel ids, a Prometheus datasource variable every query
    uses, grid positions inside 24 columns, the dist/ copy the same file."""
    with open(DASHBOARD) as f:
        dash = json.load(f)
    assert dash["uid"] == "proxysql-sync" and dash["schemaVersion"] >= 36
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))
    for p in dash["panels"]:
        g = p["gridPos"]
        assert 0 <= g["x"] and g["x"] + g["w"] <= 24, p["title"]
        if p["type"] != "row":
            assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, p["title"]
            assert p["targets"], p["title"]
    assert os.path.realpath(DIST_DASHBOARD) == os.path.realpath(DASHBOARD)


def test_rules_and_dashboard_read_only_exported_metrics():
    exported = exported_metrics()
    assert {"proxysql_sync_target_in_sync", "proxysql_sync_consul_up", "proxysql_sync_guard_blocks_total",
            "proxysql_sync_rejected_entries", "proxysql_sync_apply_duration_seconds"} <= exported
    with open(RULES) as f:
        used = set().union(*(metric_names(r["expr"]) for g in yaml.safe_load(f)["groups"] for r in g["rules"]))
    for _, e in dashboard_exprs():
        used |= metric_names(e)
    assert used - exported == set()


def test_monitoring_kustomization_renders_and_lints(tmp_path):
    kubectl = shutil.which("kubectl")
    if not kubectl:
        pytest.skip("kubectl not installed")
    r = subprocess.run([kubectl, "kustomize", MONITORING], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    docs = list(yaml.safe_load_all(r.stdout))
    kinds = sorted((d["kind"], d["metadata"]["name"]) for d in docs)
    assert kinds == [("ConfigMap", "proxysql-sync-dashboard"), ("PrometheusRule", "proxysql-sync")]
    cm = [d for d in docs if d["kind"] == "ConfigMap"][0]
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    with open(DASHBOARD) as f:
        assert json.loads(cm["data"]["proxysql-sync-dashboard.json"]) == json.load(f)
    # The ConfigMap through the manifests' offline schema check (test_k8s.py); the PrometheusRule is a
    # CRD the bundled schemas do not have: promtool checks its rules instead (above).
    validator = os.path.join(REPO, "tests", "k8s", "validate.mjs")
    if os.path.isdir(os.path.join(REPO, "tests", "k8s", "node_modules", "kubernetes-models")):
        path = tmp_path / "configmap.yaml"
        path.write_text(yaml.safe_dump(cm))
        r = subprocess.run(["node", validator, str(path)], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
    lint = shutil.which("yamllint")
    if lint:
        cfg = os.path.join(REPO, "tests", "k8s", "yamllint.yaml")
        r = subprocess.run([lint, "-s", "-c", cfg, MONITORING, RULES, RULES_TEST], capture_output=True, text=True,
                           timeout=60)
        assert r.returncode == 0, r.stdout + r.stderr


def agent_metrics(tmp_path, target="px", replica_prefix=None):
    """The /metrics of an agent against the Consul and ProxySQL doubles, once its target is in it."""
    agent_bin = os.path.join(BIN, "proxysql-sync")
    if not os.path.exists(agent_bin):
        pytest.skip("bin/proxysql-sync not built")
    from fakes.consul import Consul, free_port
    from fakes.proxysql import ProxySQL
    with Consul() as consul, ProxySQL(admin_password="pw-" + os.urandom(4).hex()) as px:
        consul.put("mysql/master/shop", b"db1:3306")
        (tmp_path / "pw").write_text(px.admin_password)
        (tmp_path / "pw").chmod(0o600)
        port = free_port()
        extra = ""
        if replica_prefix is not None:
            consul.put(replica_prefix + "/shop/db2", b"db2:3306")
            extra = 'replica-prefix = "%s"\n' % replica_prefix.replace("\\", "\\\\").replace('"', '\\"')
        (tmp_path / "sync.cfg").write_text(
            'consul-addr = "%s"\nregion = "eu"\nhealth-listen = "127.0.0.1:%d"\n%s'
            'clusters = ( { alias = "shop"; writer_hostgroup = 10; reader_hostgroup = 11; } );\n'
            'targets = ( { name = "%s"; address = "%s"; user = "admin"; password_file = "%s"; } );\n'
            % (consul.addr, port, extra, target.replace("\\", "\\\\").replace('"', '\\"'), px.admin_addr,
               tmp_path / "pw"))
        agent = subprocess.Popen([agent_bin, "-c", str(tmp_path / "sync.cfg")], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
        try:
            body = None
            for _ in range(100):
                try:
                    body = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=2).read()
                    if re.search(rb"\nproxysql_sync_target_in_sync\{.*\} 1\n", body):
                        break
                except OSError:
                    pass
                time.sleep(0.1)
            assert body, "no /metrics"
            return body.decode()
        finally:
            agent.terminate()
            assert agent.wait(10) == 0


def assert_promtool_check_metrics(body):
    r = promtool("check", "metrics", input=body)
    # Every lint finding is a failure (every metric has its # HELP and # TYPE lines); a parse
    # error is one too.
    problems = [ln for ln in (r.stdout + r.stderr).splitlines() if ln.strip()]
    assert r.returncode == 0 and problems == [], r.stdout + r.stderr


def label_values(body, label):
    """Every value of `label` in the exposition text, unescaped as the format says."""
    out = set()
    for m in re.finditer(r'[{,]%s="((?:[^"\\\n]|\\.)*)"' % label, body):
        out.add(re.sub(r"\\(.)", lambda e: "\n" if e.group(1) == "n" else e.group(1), m.group(1)))
    return out


def test_agent_metrics_pass_promtool_check_metrics(tmp_path):
    """The agent's /metrics (against the Consul and ProxySQL doubles) is valid exposition format."""
    assert_promtool_check_metrics(agent_metrics(tmp_path))


def test_label_values_from_configuration_are_escaped(tmp_path):
    """A target named px"1 and a prefix holding a quote and a backslash: /metrics still passes
    promtool, and each label value reads back as configured."""
    prefix = 'mysql/re"pl\\ica'
    body = agent_metrics(tmp_path, target='px"1', replica_prefix=prefix)
    assert_promtool_check_metrics(body)
    assert label_values(body, "target") - {""} == {'px"1'}
    assert prefix + "/" in label_values(body, "prefix")
    assert "proxysql_sync_target_in_sync{target=\"px\\\"1\"} 1\n" in body


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        with open(PROMETHEUS_RULE, "w") as f:
            f.write(prometheus_rule())
        print("wrote %s" % os.path.relpath(PROMETHEUS_RULE, REPO))
    else:
        sys.exit("usage: test_alerts.py --write   (regenerates %s)" % os.path.relpath(PROMETHEUS_RULE, REPO))
