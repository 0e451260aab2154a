"""proxysql-sync and clustercheck --register logging in to Consul with an auth method
(consul-login-method), against the Consul double's ACL login: the first request logs in, the token
is renewed before it expires, a revoked token leads to a new login (with the bearer token file read
again: kubelet rotates it), the token is destroyed at exit, and neither the bearer token nor the
SecretID appears in any output. Needs the double's control API (skipped with CONSUL_BIN)."""

import json
import os
import time
import uuid

import pytest

from fakes.consul import Consul
from test_sync import (Agent, first_sync, put_topology, px, runtime_servers, stop_and_check,  # noqa: F401
                       wait_until, workdir)
from test_sync_safety import metric

# What the agent's KV watches and nothing else need (docs/consul-acl.md has the full policies).
READ_RULES = [["key_prefix", "mysql/", "read"], ["key_prefix", "proxysql/", "read"]]


@pytest.fixture(autouse=True)
def _not_real_consul():
    if os.environ.get("CONSUL_BIN"):
        pytest.skip("the auth method is set up through the double's control API")


@pytest.fixture
def consul():
    """ACLs on; the test's own writes (no token) act with the management token."""
    master = "root-" + uuid.uuid4().hex
    c = Consul(use_double=True, acl_master_token=master, extra_args=["--acl-default-token", master])
    c.start()
    yield c
    c.close()


def auth_method(consul, bearers, max_token_ttl=None):
    body = {"name": "k8s", "bearers": {jwt: {"service_account": "proxysql-sync", "rules": READ_RULES}
                                       for jwt in bearers}}
    if max_token_ttl:
        body["max_token_ttl"] = max_token_ttl
    r = consul.request("PUT", "/_fake/auth-method", body=json.dumps(body).encode())
    assert r.status == 200, r.text


def counts(consul):
    r = consul.request("GET", "/_fake/auth-method")
    assert r.status == 200, r.text
    return r.json()["counts"]


def login_tokens(consul):
    """The secrets of the tokens minted by login that Consul holds now."""
    r = consul.request("GET", "/_fake/acl", params={"auth_method": "k8s"})
    assert r.status == 200, r.text
    return r.json()["tokens"]


def bearer_file(workdir, jwt):
    path = os.path.join(workdir, "sa-token")
    tmp = path + ".new"
    with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
        f.write(jwt + "\n")
    os.rename(tmp, path)  # as kubelet swaps its ..data link: a reader sees one whole token
    return path


def login_config(path, meta="pod=proxysql-0"):
    return ('wait = 2.0\nconsul-login-method = "k8s"\nconsul-login-bearer-token-file = "%s"\n'
            'consul-login-meta = "%s"\n' % (path, meta))


def assert_no_secret(text, secrets):
    for s in secrets:
        assert s not in text, "a secret in the output: %s..." % s[:6]


def test_login_revoked_token_rotated_bearer_and_logout(consul, px, workdir):
    """The first request logs in; the agent syncs with the login's token alone. The token is revoked
    and the bearer token rotated (the old one no longer accepted): the next request answers 403 "ACL
    not found", the agent logs in again with the file read anew, and a KV change made meanwhile
    applies. At exit the token is destroyed. No JWT or SecretID in the log or /metrics."""
    jwt_a, jwt_b = "jwt-a-" + uuid.uuid4().hex, "jwt-b-" + uuid.uuid4().hex
    auth_method(consul, [jwt_a])
    put_topology(consul, users=False)
    path = bearer_file(workdir, jwt_a)
    agent = Agent(consul, [px], workdir, extra=login_config(path)).start()
    first_sync(px, agent)
    assert counts(consul)["logins"] == 1
    first = login_tokens(consul)
    assert len(first) == 1
    assert metric(agent, "proxysql_sync_consul_logins_total", result="ok") == 1

    auth_method(consul, [jwt_b])  # kubelet rotated the service-account token
    bearer_file(workdir, jwt_b)
    r = consul.request("DELETE", "/_fake/acl", params={"auth_method": "k8s"})
    assert r.status == 200, r.text
    consul.put("mysql/replica/shop/eu/db6:3306", b"")
    wait_until("db6 through a new login", lambda: ("11", "db6", "3306", "ONLINE") in runtime_servers(px),
               timeout=20)
    assert counts(consul)["logins"] == 2
    second = login_tokens(consul)
    assert len(second) == 1 and second != first
    assert "no longer knows the login's token" in agent.logs()
    assert "a login is in progress" not in agent.logs()  # the other threads waited for the first login
    status, text = agent.http("/metrics")
    assert status == 200
    assert_no_secret(text, [jwt_a, jwt_b] + first + second)

    logs = stop_and_check(agent)
    assert counts(consul)["logouts"] == 1
    assert login_tokens(consul) == []
    assert "logged in with auth method k8s" in logs
    assert_no_secret(logs, [jwt_a, jwt_b] + first + second)


def test_token_renewed_before_it_expires(consul, px, workdir):
    """A token that lives 8 s is replaced by a new login before it ends (from 3 s on: at least 5 s
    before the end, with requests at most 2 s apart), so no request ever meets an expired token: no
    "ACL not found", the watches stay up."""
    jwt = "jwt-" + uuid.uuid4().hex
    auth_method(consul, [jwt], max_token_ttl="8s")
    put_topology(consul, users=False)
    agent = Agent(consul, [px], workdir, extra=login_config(bearer_file(workdir, jwt))).start()
    first_sync(px, agent)
    t0 = time.monotonic()
    downs = 0
    while time.monotonic() - t0 < 12:
        downs += metric(agent, "proxysql_sync_consul_up", prefix="mysql/master/") != 1
        time.sleep(0.2)
    assert counts(consul)["logins"] >= 3, counts(consul)  # at start, then every 3 to 5 s
    assert downs == 0
    logs = stop_and_check(agent)
    assert "no longer knows" not in logs
    assert "expires in 8 s" in logs


def test_login_refused_keeps_the_state_and_backs_off(consul, px, workdir):
    """A bearer token the auth method does not accept: the agent says why, once a backoff, applies
    nothing and is not ready; it recovers when the token is accepted."""
    jwt = "jwt-" + uuid.uuid4().hex
    auth_method(consul, ["someone-else"])
    put_topology(consul, users=False)
    agent = Agent(consul, [px], workdir, extra=login_config(bearer_file(workdir, jwt))).start()
    try:
        wait_until("the refused login logged", lambda: "login with auth method k8s failed" in agent.logs())
        time.sleep(3)
        failures = counts(consul)["login_failures"]
        assert 1 <= failures <= 3, failures  # 1 s, 2 s: a backoff, not one per request
        assert agent.http("/readyz")[0] == 503
        assert runtime_servers(px) == []
        auth_method(consul, [jwt])
        first_sync(px, agent)
    finally:
        logs = stop_and_check(agent)
    assert jwt not in logs


def test_check_config_refuses_bad_login_meta(consul, px, workdir):
    """consul-login-meta is checked at --check-config: one line naming the setting, exit 2."""
    agent = Agent(consul, [px], workdir, extra=login_config("/nonexistent", meta="pod"))
    r = agent.run("--check-config")
    assert r.returncode == 2
    assert "sync.cfg:" in r.stderr and "consul-login-meta: 'pod' is not key=value" in r.stderr, r.stderr


def test_announce_service_registers_again_after_a_new_login(px, workdir):
    """announce-service through a local client agent, with a login token: the agent keeps the token
    a service was registered with (for its sync to the catalog), so once that token is revoked and a
    new login made, the instance is registered again with the new token and stays passing."""
    master = "root-" + uuid.uuid4().hex
    c = Consul(use_double=True, acl_master_token=master, client_agent=True,
               extra_args=["--acl-default-token", master])
    c.start()
    try:
        jwt = "jwt-" + uuid.uuid4().hex
        rules = READ_RULES + [["service_prefix", "proxysql", "write"], ["node_prefix", "", "read"]]
        r = c.request("PUT", "/_fake/auth-method", body=json.dumps(
            {"name": "k8s", "bearers": {jwt: {"service_account": "proxysql-sync", "rules": rules}}}).encode())
        assert r.status == 200, r.text
        put_topology(c, users=False)
        extra = login_config(bearer_file(workdir, jwt)) + (
            'consul-agent = "local"\nannounce-service = "proxysql"\nannounce-address = "%s"\nannounce-ttl = 3\n'
            'proxysql-servers = false\n'
            % px.admin_addr)
        agent = Agent(c, [px], workdir, extra=extra).start()
        first_sync(px, agent)

        def registrations():
            return [q for q in c.request("GET", "/_fake/requests").json()
                    if q.get("method") == "PUT" and q.get("path") == "/v1/agent/service/register"]

        def passing():
            return c.request("GET", "/v1/health/service/proxysql", params={"passing": "1"}).json()

        wait_until("the instance passing", passing)
        assert len(registrations()) == 1
        assert c.request("DELETE", "/_fake/acl", params={"auth_method": "k8s"}).status == 200
        wait_until("registered again", lambda: len(registrations()) == 2, timeout=15)
        assert counts(c)["logins"] == 2
        wait_until("the instance passing again", passing)
        logs = stop_and_check(agent)
        assert "registered again with the new login token" in logs
        assert jwt not in logs
    finally:
        c.close()
