"""A zoo's own model loaded through ours: tunix's `Llama3` (google-tunix, `make zoo`), once with
tunix's own loader (strategy `tunix`) and once with `load_model` and the key map built from
tunix's own mapping (`bench.child.zoo`), leaf for leaf the same bits, and each the file's tensor
through tunix's transposes and reshapes. Skipped where tunix is not installed."""

from __future__ import annotations

import importlib.util

import flax
import jax.numpy as jnp
import numpy as np
import pytest

import loader
import shapes
from bench.child import zoo
from bench.child.models import verify_mapped
from loader import strategies
from loader.leaves import iter_variables

# never imported at collection: tunix's import would change flax's config for every other test
pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("tunix") is None, reason="google-tunix is not installed (make zoo)"
)

LAYERS, D, FF, HEADS, KV, HEAD_DIM, VOCAB = 2, 16, 24, 4, 2, 4, 40


def _spec() -> shapes.ShapeSpec:
    f, t = "model.safetensors", shapes.TensorSpec
    tensors = [t("lm_head.weight", "BF16", (VOCAB, D), f), t("model.norm.weight", "BF16", (D,), f)]
    tensors.append(t("model.embed_tokens.weight", "BF16", (VOCAB, D), f))
    for i in range(LAYERS):
        m = f"model.layers.{i}."
        tensors += [
            t(m + "input_layernorm.weight", "BF16", (D,), f),
            t(m + "post_attention_layernorm.weight", "BF16", (D,), f),
            t(m + "mlp.gate_proj.weight", "BF16", (FF, D), f),
            t(m + "mlp.up_proj.weight", "BF16", (FF, D), f),
            t(m + "mlp.down_proj.weight", "BF16", (D, FF), f),
            t(m + "self_attn.q_proj.weight", "BF16", (HEADS * HEAD_DIM, D), f),
            t(m + "self_attn.k_proj.weight", "BF16", (KV * HEAD_DIM, D), f),
            t(m + "self_attn.v_proj.weight", "BF16", (KV * HEAD_DIM, D), f),
            t(m + "self_attn.o_proj.weight", "BF16", (D, HEADS * HEAD_DIM), f),
        ]
    tensors.sort(key=lambda x: x.name)
    return shapes.ShapeSpec("tiny-llama3", None, (f,), tuple(tensors), metadata={"format": "pt"})


def _target() -> tuple[zoo.ZooBuilder, dict]:
    llama3, llama3_params = zoo.tunix_llama3()
    config = llama3.ModelConfig(
        num_layers=LAYERS,
        vocab_size=VOCAB,
        embed_dim=D,
        hidden_dim=FF,
        num_heads=HEADS,
        head_dim=HEAD_DIM,
        num_kv_heads=KV,
        rope_theta=10_000,
        norm_eps=1e-5,
    )
    mapping = llama3_params._get_key_and_transform_mapping
    builder = zoo.ZooBuilder(llama3.Llama3, config, mapping, jnp.bfloat16)
    return builder, zoo.key_map([t.name for t in _spec().tensors], mapping(config))


def _leaves(model) -> dict[str, np.ndarray]:
    return {".".join(map(str, p)): np.asarray(v.get_value()) for p, v in iter_variables(model)}


def test_tunix_loader_and_ours_give_the_same_bits(tmp_path):
    ckpt = shapes.synthesize(_spec(), tmp_path)
    builder, key_map = _target()
    assert len(key_map) == len(_spec().tensors)  # tunix's mapping names every file key
    theirs, their_report = strategies.get("tunix").load(builder, ckpt, key_map=key_map)
    ours, report = loader.load_model(builder, ckpt, key_map=key_map, strict=True)
    assert report.ok and their_report.ok
    mine, tunix = _leaves(ours), _leaves(theirs)
    assert set(mine) == set(tunix) and set(key_map) <= set(mine)
    for key in key_map:
        assert mine[key].dtype == tunix[key].dtype == jnp.bfloat16
        assert mine[key].tobytes() == tunix[key].tobytes(), key
        assert np.any(mine[key] != 0), key  # synthetic values, not a zero fill
    for model in (ours, theirs):
        checked, error = verify_mapped(model, str(ckpt), key_map)
        assert error is None and checked == len(key_map)


@pytest.mark.parametrize("name", ["pipelined", "mmap-put", "orbax-safetensors"])
def test_our_strategies_and_the_peers_load_the_zoo_model_bit_exactly(tmp_path, name):
    ckpt = shapes.synthesize(_spec(), tmp_path)
    builder, key_map = _target()
    model, report = strategies.get(name).load(builder, ckpt, key_map=key_map, strict=True)
    checked, error = verify_mapped(model, str(ckpt), key_map)
    assert error is None and checked == len(key_map)


def test_importing_tunix_leaves_flax_config_as_it_was(tmp_path):
    before = flax.config.flax_always_shard_variable
    zoo.tunix_llama3()
    builder, key_map = _target()
    strategies.get("tunix").load(builder, shapes.synthesize(_spec(), tmp_path), key_map=key_map)
    assert flax.config.flax_always_shard_variable == before


def test_the_tunix_strategy_refuses_a_plain_builder_in_one_line(tmp_path):
    ckpt = shapes.synthesize(_spec(), tmp_path)
    with pytest.raises(loader.CheckpointError, match="tunix's own model classes"):
        strategies.get("tunix").load(shapes.model_builder(_spec()), ckpt)
