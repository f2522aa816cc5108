"""Peer strategies (kind `peer`: runai-model-streamer, fastsafetensors, InstantTensor, orbax's
safetensors layout, the zoos' mmap-and-put) end with the same model.

Parametrised over the registry's peers. Each runs where its requirements import (`make peers`)
and its platform is present (InstantTensor: a CUDA device), and is skipped, naming what is missing
and how to install it, where they are not. The model is poisoned first, and every tensor is checked
against the synthetic checkpoint's digests.
"""

from __future__ import annotations

import jax
import numpy as np
import pytest

import loader
import shapes
from loader import strategies
from loader.placement.leaves import iter_variables
from loader.sharded.rule import AXIS
from loader.vocabulary import PEER

#: the peers that load any model (a peer with `MODELS`, tunix, is tested on its own model in
#: tests/unit/test_zoo.py)
PEERS = [n for n, e in strategies.catalog().items() if e.kind == PEER and not e.models]


def _peer_or_skip(name: str):
    info = strategies.get(name)
    reason = info.unavailable_reason()
    if reason is not None:
        pytest.skip(f"{name} {reason}")
    return info


def _spec() -> shapes.ShapeSpec:
    """HF-export-like names and dtypes: F32 and BF16 weights, an I64 buffer, a dotted nesting."""
    f = "model.safetensors"
    tensors = [
        shapes.TensorSpec("model.embed_tokens.weight", "BF16", (64, 16), f),
        shapes.TensorSpec("model.layers.0.mlp.up_proj.weight", "BF16", (48, 16), f),
        shapes.TensorSpec("model.layers.0.input_layernorm.weight", "F32", (16,), f),
        shapes.TensorSpec("model.layers.1.mlp.up_proj.weight", "BF16", (48, 16), f),
        shapes.TensorSpec("model.layers.1.input_layernorm.weight", "F32", (16,), f),
        shapes.TensorSpec("model.position_ids", "I64", (1, 32), f),
        shapes.TensorSpec("lm_head.weight", "F32", (64, 16), f),
    ]
    return shapes.ShapeSpec("test", None, (f,), tuple(tensors), metadata={"format": "pt"})


#: the peers built on loadbench's own dependencies (jax, numpy, orbax): available everywhere
JAX_PEERS = {"orbax-safetensors", "mmap-put"}


def test_peers_are_registered_with_their_install_hint():
    assert {"runai", "fastsafetensors", "instanttensor", *JAX_PEERS} <= set(PEERS)
    assert strategies.get("tunix").install_hint == "make zoo"  # a JAX zoo's own loader
    for name in set(PEERS) - JAX_PEERS:  # the PyTorch world's loaders
        info = strategies.get(name)
        assert info.requires and "torch" in info.requires
        assert info.install_hint == "make peers"
    for name in JAX_PEERS:
        assert strategies.get(name).requires == ()
        assert strategies.get(name).available()


@pytest.mark.parametrize("devices", [1, 8])
@pytest.mark.parametrize("name", PEERS)
def test_peer_loads_bit_exactly_into_a_poisoned_model(tmp_path, poison, name, devices):
    info = _peer_or_skip(name)
    spec = _spec()
    ckpt = shapes.synthesize(spec, tmp_path)
    mesh = jax.make_mesh((devices,), (AXIS,), devices=jax.devices()[:devices])
    with jax.set_mesh(mesh):
        model = shapes.model_builder(spec, seed=5)()
        poison(model)
        model, report = info.load(model, ckpt, strict=False)
    assert set(report.loaded) == {t.name for t in spec.tensors}
    checked = 0
    for path, var in iter_variables(model):
        shapes.verify_tensor(ckpt, ".".join(map(str, path)), np.asarray(var.get_value()))
        checked += 1
    assert checked == len(spec.tensors)


@pytest.mark.parametrize("name", PEERS)
def test_peer_refuses_a_mismatch_before_reading(tmp_path, name):
    info = _peer_or_skip(name)
    spec = _spec()
    wrong = shapes.ShapeSpec(spec.source, None, spec.files, spec.tensors[:-1])
    ckpt = shapes.synthesize(wrong, tmp_path)
    with pytest.raises(loader.MismatchError) as err:
        info.load(shapes.model_builder(spec), ckpt, strict=True)
    assert err.value.report.missing == ["lm_head.weight"]


def test_instanttensor_is_a_cuda_only_peer_listed_with_its_reason(monkeypatch):
    import dataclasses

    info = strategies.get("instanttensor")
    assert info.platforms == ("cuda",)
    # installed or not (the peers extra), a CPU-only run has no device for it
    info = dataclasses.replace(info, requires=())
    monkeypatch.setenv("JAX_PLATFORMS", "cpu")  # a CPU-only run, whatever this host has
    reason = info.unavailable_reason()
    assert reason is not None and "cuda device" in reason
    assert not info.available()
    with pytest.raises(strategies.StrategyError, match="instanttensor.*cuda"):
        info.load(shapes.model_builder(_spec()), "unused.safetensors")


def test_a_tensor_dlpack_cannot_carry_is_refused_with_its_name_and_dtype():
    """torch cannot export float8 through DLPack: the peer's row names the tensor and its dtype
    instead of a traceback (a fake tensor: no torch needed)."""
    from types import SimpleNamespace

    from loader.errors import CheckpointError
    from loader.strategies._peer import PeerStream

    class Float8Tensor:
        dtype = "torch.float8_e4m3fn"

        def detach(self):
            raise RuntimeError("float8 types are not supported by dlpack")

    def open_peer(files, wanted):
        return iter([("layer.weight", Float8Tensor())]), lambda: None

    source = SimpleNamespace(files=["m.safetensors"], path="m.safetensors")
    read = PeerStream(open_peer, "fakepeer")._reader(source, {"layer.weight"})
    with pytest.raises(CheckpointError, match=r"fakepeer yields tensor 'layer.weight' as torch"):
        read("layer.weight")
