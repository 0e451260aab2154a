"""Configurations shown in the docs are configurations the agent accepts: each is taken from its
page, its file paths pointed at files made here, and run through `proxysql-sync --check-config`.

Run: make all && SIDEKICK_BIN=$PWD/bin /usr/bin/python3 -m pytest -q tests/integration/test_docs_examples.py
"""

import os
import re
import subprocess

from test_sync import SYNC

DOCS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs")


def block_after(page, first_line):
    """The fenced block of docs/<page> whose first line is first_line, without that line."""
    with open(os.path.join(DOCS, page), encoding="utf-8") as f:
        text = f.read()
    m = re.search(r"^```[a-z]*\n" + re.escape(first_line) + r"\n(.*?)^```$", text, re.MULTILINE | re.DOTALL)
    assert m, "no block starting with %r in docs/%s" % (first_line, page)
    return m.group(1)


def test_from_consul_template_after(tmp_path):
    """docs/from-consul-template.md's proxysql-sync configuration (the "after" of its example)."""
    text = block_after("from-consul-template.md", "# /etc/sidekick/proxysql-sync.conf")
    for path in re.findall(r'"(/etc/sidekick/[^"]+)"', text):
        local = tmp_path / os.path.basename(path)
        local.write_text("x")
        local.chmod(0o600)
        text = text.replace(path, str(local))
    cfg = tmp_path / "proxysql-sync.conf"
    cfg.write_text(text)
    r = subprocess.run([SYNC, "-c", str(cfg), "--check-config"], capture_output=True, text=True, timeout=30, env={})
    assert r.returncode == 0, r.stdout + r.stderr
    assert "1 cluster(s)" in r.stdout + r.stderr
