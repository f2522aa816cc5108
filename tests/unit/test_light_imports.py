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
    "loader.host",
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


def test_public_names_resolve_without_jax():
    """`import loader` then every public name, as the issue promises (`loader.strategies` too)."""
    code = (
        "import sys, loader\n"
        "missing = [n for n in loader.__all__ if n not in ('load_model', 'save_model', 'plan', "
        "'save_sharded', 'load_sharded', 'convert_to_sharded') and not hasattr(loader, n)]\n"
        "print(missing, loader.strategies.get('floor').name, 'jax' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[] floor False"
