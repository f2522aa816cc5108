"""`CheckpointSource.read`: a tensor in a fresh page-aligned buffer, which JAX's CPU backend adopts
as the device buffer rather than copying (issue 53: `builder` and `hostcast` held the copy of
gpt2's largest tensor beside its host array, 1.38x the checkpoint)."""

from __future__ import annotations

import mmap

import jax
import numpy as np
import pytest
from safetensors.numpy import save_file

import loader
from loader.format.source import CheckpointSource


@pytest.fixture
def checkpoint(tmp_path):
    rng = np.random.default_rng(0)
    tensors = {
        "small": rng.standard_normal(3).astype(np.float32),  # an odd offset for what follows
        "big": rng.standard_normal((64, 1000)).astype(np.float32),
        "empty": np.zeros((0, 4), np.float16),
        "scalar": np.array(7, np.int64),
    }
    save_file(tensors, str(tmp_path / "model.safetensors"))
    return tmp_path / "model.safetensors", tensors


def test_a_read_tensor_is_page_aligned_and_the_cpu_backend_adopts_it(checkpoint):
    path, tensors = checkpoint
    with CheckpointSource(path) as source:
        for key, want in tensors.items():
            got = source.read(key)
            assert got.dtype == want.dtype and got.shape == want.shape, key
            assert got.tobytes() == want.tobytes(), key
        big = source.read("big")
    assert big.ctypes.data % mmap.PAGESIZE == 0 and big.flags.writeable
    on_cpu = jax.device_put(big, jax.devices("cpu")[0])
    assert on_cpu.unsafe_buffer_pointer() == big.ctypes.data  # adopted, not copied


def test_builder_loads_the_file_exactly(checkpoint, poison):
    from flax import nnx

    path, tensors = checkpoint

    class Holder(nnx.Module):
        def __init__(self) -> None:
            self.small = nnx.Param(np.ones(3, np.float32))
            self.big = nnx.Param(np.ones((64, 1000), np.float32))

    target = Holder()
    poison(target)
    with pytest.warns(Warning, match="unexpected"):  # the two tensors the model leaves out
        model, report = loader.load_model(target, path, strategy="builder")
    assert np.array_equal(np.asarray(model.big.get_value()), tensors["big"])
    assert np.array_equal(np.asarray(model.small.get_value()), tensors["small"])
    assert sorted(report.unexpected) == ["empty", "scalar"]
