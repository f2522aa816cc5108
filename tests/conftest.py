"""Test set-up: 8 simulated CPU devices (set before jax is imported), small shared fixtures, and
the `tpu` marker: a test marked `@pytest.mark.tpu` needs the chip and is skipped unless jax's
default backend is a TPU (on a TPU host: `JAX_PLATFORMS=tpu python -m pytest -m tpu tests`, one
process, since one program at a time may hold the chip)."""

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

TPU_MARKER = "tpu"


def default_backend() -> str:
    """jax's default backend here (`cpu` unless JAX_PLATFORMS names an accelerator)."""
    import jax

    return jax.default_backend()


def pytest_collection_modifyitems(config, items) -> None:
    """Skip the `tpu`-marked tests unless jax's default backend is a TPU (asked only when one was
    collected: the backend starts once, in this process)."""
    marked = [item for item in items if item.get_closest_marker(TPU_MARKER) is not None]
    if not marked:
        return
    backend = default_backend()
    if backend == "tpu":
        return
    skip = pytest.mark.skip(
        reason=f"needs a TPU: jax's default backend is {backend} (on a TPU host: "
        "JAX_PLATFORMS=tpu python -m pytest -m tpu tests)"
    )
    for item in marked:
        item.add_marker(skip)


def poison_model(model, value: float = 7.0) -> None:
    """Overwrite every float leaf of `model` with `value`, so a loader that does nothing fails."""
    import jax.numpy as jnp
    from flax import nnx

    for _, node in nnx.iter_graph(model):
        if isinstance(node, nnx.Variable):
            v = node.get_value()
            if hasattr(v, "dtype") and jnp.issubdtype(v.dtype, jnp.floating):
                node.set_value(jnp.full_like(v, value))


#: the modules `make ports` runs: ports checked against torch's float32 forward
PORT_CHECK_MODULES = {"test_ports", "test_hf_layouts", "test_writeback", "test_source_check"}


@pytest.fixture(autouse=True)
def _port_checks_at_float32_matmul(request):
    """On a TPU backend, the ports' checks against torch run their forwards at "highest" matmul
    precision: the chip's default float32 matmul is one bfloat16 pass, about three digits, and
    would call a correct port wrong (what `compare_to_transformers` itself does, per call)."""
    owner = getattr(request.node, "module", None)
    module = owner.__name__.rsplit(".", 1)[-1] if owner is not None else ""
    if module not in PORT_CHECK_MODULES or default_backend() != "tpu":
        yield
        return
    import jax

    with jax.default_matmul_precision("highest"):
        yield


@pytest.fixture
def poison():
    """The poisoning function: `poison(model)` before loading into it."""
    return poison_model


@pytest.fixture
def unmappable_files(monkeypatch):
    """A file system that refuses `mmap` of a checkpoint's pages (the file pages' own `mmap` only:
    host buffers map anonymous memory too)."""
    import mmap
    import types

    from loader.pipeline import file_pages

    def refuse(*a, **k):
        raise OSError("mmap not supported here")

    unmappable = types.SimpleNamespace(
        ALLOCATIONGRANULARITY=mmap.ALLOCATIONGRANULARITY, PROT_READ=mmap.PROT_READ, mmap=refuse
    )
    monkeypatch.setattr(file_pages, "mmap", unmappable)
