"""Test set-up: 8 simulated CPU devices (set before jax is imported), and small shared fixtures."""

from __future__ import annotations

import os

os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"
).strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault(
    "LOADBENCH_HOME", os.path.join(os.path.dirname(__file__), "..", ".cache", "test-home")
)

import pytest  # noqa: E402


def poison_model(model, value: float = 7.0) -> None:
    """Overwrite every float leaf of `model` with `value`, so a loader that does nothing fails."""
    import jax.numpy as jnp
    from flax import nnx

    for _, node in nnx.iter_graph(model):
        if isinstance(node, nnx.Variable):
            v = node.get_value()
            if hasattr(v, "dtype") and jnp.issubdtype(v.dtype, jnp.floating):
                node.set_value(jnp.full_like(v, value))


@pytest.fixture
def poison():
    """The poisoning function: `poison(model)` before loading into it."""
    return poison_model
