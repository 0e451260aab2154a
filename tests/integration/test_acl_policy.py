"""The ACL policy reader (acl_policy.py) on made-up policies, and every policy of docs/consul-acl.md:
it parses and names only the resources its section says. Pure Python: no server is started.

Run: /usr/bin/python3 -m pytest -q tests/integration/test_acl_policy.py
"""

import os

import pytest

import acl_policy

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DOC = os.path.join(REPO, "docs", "consul-acl.md")


# -- the reader --------------------------------------------------------------------------------
def test_prefix_and_exact_rules_with_comments():
    rules = acl_policy.parse("""
# the watched prefixes
key_prefix "mysql/master/" { policy = "read" }
key "proxysql-sync/cluster-lock" {
  policy = "write"   // exact
}
/* sessions
   on every node */
session_prefix "" { policy = "write" }
service "mysql" { policy = "read" }
node_prefix "" { policy = "deny" }
agent_prefix "proxysql-" { policy = "read" }
""")
    assert [(r.resource, r.name, r.policy, r.exact) for r in rules] == [
        ("key", "mysql/master/", "read", False), ("key", "proxysql-sync/cluster-lock", "write", True),
        ("session", "", "write", False), ("service", "mysql", "read", True), ("node", "", "deny", False),
        ("agent", "proxysql-", "read", False)]
    assert acl_policy.by_resource(rules) == {
        "key": {"mysql/master/": "read", "proxysql-sync/cluster-lock": "write"}, "session": {"": "write"},
        "service": {"mysql": "read"}, "node": {"": "deny"}, "agent": {"proxysql-": "read"}}
    assert acl_policy.fake_rules(rules)[:2] == [("key", "mysql/master/", "read"),
                                                ("key", "proxysql-sync/cluster-lock", "write")]


def test_escapes_and_list():
    [r] = acl_policy.parse('key_prefix "a\\"b\\\\c/" { policy = "list" }')
    assert (r.name, r.policy) == ('a"b\\c/', "list")
    assert acl_policy.fake_rules([r]) == [("key", 'a"b\\c/', "read")]    # the double has no list level


def test_empty_policy():
    assert acl_policy.parse("# nothing\n") == []
    assert acl_policy.by_resource([]) == {}


@pytest.mark.parametrize("text,why", [
    ('keys_prefix "a/" { policy = "read" }', "unknown rule 'keys_prefix'"),
    ('query_prefix "" { policy = "read" }', "unknown rule 'query_prefix'"),
    ('operator = "read"', "unknown rule 'operator'"),
    ('key_prefix "a/" { policy = "admin" }', "policy 'admin'"),
    ('session_prefix "" { policy = "list" }', "policy 'list'"),
    ('key_prefix "a/" { intentions = "read" }', "unknown field 'intentions'"),
    ('key_prefix "a/" { policy = "read"', "unexpected end"),
    ('key_prefix mysql { policy = "read" }', "line 1: expected string, found 'mysql'"),
    ('key_prefix "a/" { policy = read }', "expected string, found 'read'"),
    ('key_prefix "a/" { policy = "read" }\nkey_prefix "a/" { policy = "write" }',
     "line 2: key_prefix 'a/' given twice"),
    ('key_prefix "a/" { policy = "read" } ;', "unexpected ';'"),
    ('key_prefix "a\\q" { policy = "read" }', "unsupported escape"),
])
def test_refused(text, why):
    with pytest.raises(ValueError) as e:
        acl_policy.parse(text)
    assert why in str(e.value), str(e.value)


def test_exact_and_prefix_on_one_name_must_agree():
    same = acl_policy.parse('key "a" { policy = "read" }\nkey_prefix "a" { policy = "read" }')
    assert acl_policy.by_resource(same) == {"key": {"a": "read"}}
    differ = acl_policy.parse('key "a" { policy = "write" }\nkey_prefix "a" { policy = "read" }')
    with pytest.raises(ValueError, match="disagree"):
        acl_policy.by_resource(differ)


def test_policies_from_markdown():
    md = ("text\n<!-- policy: one -->\n```hcl\nkey_prefix \"a/\" { policy = \"read\" }\n```\n"
          "```hcl\nnot a policy block: no marker\n```\n"
          "<!-- policy: two -->\n```hcl\nsession_prefix \"\" {\n  policy = \"write\"\n}\n```\n")
    assert acl_policy.policies(md) == {"one": 'key_prefix "a/" { policy = "read" }\n',
                                       "two": 'session_prefix "" {\n  policy = "write"\n}\n'}
    with pytest.raises(ValueError, match="given twice"):
        acl_policy.policies(md + "<!-- policy: one -->\n```hcl\n```\n")


# -- the documented policies -------------------------------------------------------------------
# What each section of docs/consul-acl.md grants: {resource: {name: policy}}.
EXPECTED = {
    "proxysql-sync-kv": {"key": {"mysql/master/": "read", "mysql/replica/": "read", "proxysql/users/": "read"}},
    "proxysql-sync-services": {"service": {"mysql": "read"}, "node": {"": "read"}},
    "proxysql-sync-patroni": {"key": {"service/pgdemo/": "read", "proxysql/pgsql-users/": "read"}},
    "proxysql-sync-announce-kv": {"key": {"proxysql/fleet/": "write"}},
    "proxysql-sync-cluster-lock": {"key": {"proxysql-sync/cluster-lock": "write"}},
    "proxysql-sync-announce-service": {"service": {"proxysql": "write"}, "node": {"": "read"}},
    "proxysql-sync-agent-detect": {"agent": {"proxysql-": "read"}},
    "clustercheck-register": {"key": {"mysql/replica/shop/eu-west/": "write"}},
    "sessions-pod-agent": {"session": {"proxysql-": "write"}},
    "sessions-consul-k8s": {"session": {"consul-server-": "write"}},
    "sessions-any-node": {"session": {"": "write"}},
}
# Rules that are exact on purpose (one key, one service), the others being prefixes.
EXACT = {("proxysql-sync-services", "service", "mysql"), ("proxysql-sync-cluster-lock", "key",
                                                           "proxysql-sync/cluster-lock"),
         ("proxysql-sync-announce-service", "service", "proxysql")}


@pytest.fixture(scope="module")
def documented():
    with open(DOC, encoding="utf-8") as f:
        return acl_policy.policies(f.read())


def test_every_documented_policy_is_known(documented):
    assert sorted(documented) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_documented_policy(documented, name):
    rules = acl_policy.parse(documented[name])
    assert acl_policy.by_resource(rules) == EXPECTED[name]
    for r in rules:
        assert r.exact == ((name, r.resource, r.name) in EXACT), (name, r)
        # A key prefix ends with "/", so it never reaches a sibling prefix (mysql/replica-old/).
        if r.resource == "key" and not r.exact:
            assert r.name.endswith("/"), (name, r)


def test_no_policy_writes_what_it_only_watches(documented):
    """The KV watch and services sources read; only the announce, lock and register policies write
    keys, and only sessions policies touch sessions."""
    for name, text in documented.items():
        for r in acl_policy.parse(text):
            if r.policy == "write" and r.resource == "key":
                assert name in ("proxysql-sync-announce-kv", "proxysql-sync-cluster-lock", "clustercheck-register")
            if r.resource == "session":
                assert name.startswith("sessions-"), name
