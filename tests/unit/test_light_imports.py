"""The jax-free parts stay jax-free: the runner, the dashboard and `shapes` metadata use them."""

from __future__ import annotations

import subprocess
import sys

import pytest

JAX_FREE = [
    "loader",
    "loader.errors",
    "loader.vocabulary",
    "loader.format",
    "loader.format.atomic",
    "loader.sharded",
    "loader.sharded.rule",
    "loader.strategies",
]


@pytest.mark.parametrize("module", JAX_FREE)
def test_module_does_not_import_jax(module):
    code = (
        f"import sys, {module}\n"
        "import loader.strategies as s; s.catalog()\n"
        "print('jax' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False", f"importing {module} imported jax"
