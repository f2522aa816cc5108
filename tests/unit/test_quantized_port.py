"""The Llama port of a quantized preset (`bench run --model port` on `tiny-llama-fp8` / `-int4`):
built in bfloat16, its key map reading each projection through the file's layout, loaded into a
poisoned model and checked by the bench's verifier against the layout's numpy dequantization;
a model left unloaded, or a leaf off by one bit, fails that check."""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp
import numpy as np
import pytest

import shapes
from bench.child.models import verify_mapped
from loader import load_model
from loader.transforms import Dequantize, Unpack, as_quantized
from shapes.architectures import port_names, scanned_port_names
from shapes.architectures.port import port_for, quant_layout
from shapes.errors import ShapesError
from tests.conftest import poison_model

LAYOUTS = {"tiny-llama-fp8": ("fp8", Dequantize), "tiny-llama-int4": ("int4", Unpack)}


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_the_port_reads_the_files_layout_into_a_bfloat16_model(name):
    layout, transform = LAYOUTS[name]
    spec = shapes.load_spec(name)
    assert quant_layout(spec) == layout
    assert quant_layout(shapes.load_spec("llama3-8b")) is None
    port = port_for(spec)
    model = port.builder()
    assert {str(leaf.dtype) for leaf in _leaves(model)} == {"bfloat16"}
    entry = port.key_map["model.layers.1.mlp.down_proj.kernel"]
    quantized = as_quantized(entry)
    assert isinstance(quantized, transform)
    assert name in port_names() and name not in scanned_port_names()


@pytest.mark.parametrize("strategy", ["pipelined", "pread"])
@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_a_load_verifies_and_a_model_left_unloaded_does_not(name, strategy, tmp_path):
    path = shapes.synthesize(name, tmp_path, seed=4)
    port = port_for(name)
    unloaded = port.builder()
    poison_model(unloaded)
    checked, error = verify_mapped(unloaded, str(path), port.key_map)
    assert error is not None and "differs from its file tensor" in error, error
    model = port.builder()
    poison_model(model)
    model, _ = load_model(model, path, key_map=port.key_map, strategy=strategy, strict=True)
    assert verify_mapped(model, str(path), port.key_map) == (len(port.key_map), None)


def test_a_leaf_one_bit_off_its_dequantization_fails_verification(tmp_path):
    path = shapes.synthesize("tiny-llama-int4", tmp_path, seed=4)
    port = port_for("tiny-llama-int4")
    model, _ = load_model(port.builder(), path, key_map=port.key_map, strict=True)
    kernel = model.model.layers[0].mlp.up_proj.kernel
    bits = np.asarray(kernel.get_value()).view(np.uint16).copy()
    bits[3, 5] ^= 1
    kernel.set_value(jnp.asarray(bits.view(jnp.bfloat16)))
    _, error = verify_mapped(model, str(path), port.key_map)
    assert error is not None and "up_proj.kernel" in error


def test_a_mix_of_layouts_is_refused_by_name():
    fp8, int4 = shapes.load_spec("tiny-llama-fp8"), shapes.load_spec("tiny-llama-int4")
    packed = [t for t in int4.tensors if t.name.endswith(".weight_packed")][:1]
    mixed = dataclasses.replace(fp8, tensors=(*fp8.tensors, *packed))
    with pytest.raises(ShapesError, match="one layout a checkpoint"):
        quant_layout(mixed)


def _leaves(model):
    from flax import nnx

    return [v.get_value() for _, v in nnx.to_flat_state(nnx.state(model))]
