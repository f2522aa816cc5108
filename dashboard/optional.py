"""Optional, jax-free imports from the rest of loadbench (shapes, the sharding rule).

The dashboard must never import jax. A module from another package is imported only after a child
interpreter has checked that importing it leaves `jax` out of `sys.modules`; otherwise the feature
that needs it is skipped with a note saying why.
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
_PROBE = (
    "import sys, importlib\n"
    "try:\n    importlib.import_module(sys.argv[1])\n"
    "except Exception as e:\n    print(f'{type(e).__name__}: {e}'); sys.exit(2)\n"
    "sys.exit(3 if 'jax' in sys.modules else 0)\n"
)


@functools.cache
def why_unavailable(module: str) -> str | None:
    """Why `module` cannot be used by the dashboard (None when it imports without jax).

    Args:
        module: a dotted module name, e.g. `loader.sharded.rule`.

    Returns:
        None if importable jax-free, else a one-line reason.
    """
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")])
    )
    try:
        proc = subprocess.run(
            [sys.executable, "-c", _PROBE, module],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
            cwd=REPO_ROOT,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"could not check {module} ({e})"
    if proc.returncode == 3:
        return f"importing {module} imports jax, which the dashboard never does"
    if proc.returncode != 0:
        detail = (proc.stdout.strip() or proc.stderr.strip()).splitlines()[-1:] or ["no output"]
        return f"{module} is not importable ({detail[0]})"
    return None
