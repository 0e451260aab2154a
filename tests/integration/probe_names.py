"""probe_names.py: the probe binaries' names, read from dist/probes.list, the one list the Makefile
(PROBES), the probes image and the tests share."""
import os

LIST = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "dist", "probes.list")


def probe_names():
    """The names in dist/probes.list, in its order (comments and blank lines left out)."""
    with open(LIST) as f:
        return [name for name in (line.split("#", 1)[0].strip() for line in f) if name]


PROBES = probe_names()
