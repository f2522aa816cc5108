"""The real `loadbench` command line, for tests that run it as a subprocess, as a user would."""

from __future__ import annotations

import sys

LOADBENCH = (sys.executable, "-m", "bench.cli")


def loadbench(*args: str) -> list[str]:
    """`loadbench ARGS...` as an argv list for `subprocess`, run by this interpreter."""
    return [*LOADBENCH, *args]
