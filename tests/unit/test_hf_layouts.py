"""Real Hugging Face layouts ported strictly in one call: declared ignores, casts="allow", 32-bit.

Each tiny model is built by transformers from a config (no download) and saved with
`save_pretrained`, carrying what real checkpoints on the Hub carry beside the port's weights:
GPT-2's stored LM head (tied to `wte`) and older transformers' `attn.masked_bias` buffers, Llama's
persistent rotary `inv_freq` buffers (model-level and per layer, as older saves wrote them), and
ViT's pooler head. Each loads into a poisoned NNX port with `strict=True`, the architecture's own
`IGNORE_UNEXPECTED`, `casts="allow"` and jax in its default 32-bit mode, with warnings as errors,
and matches torch. Skipped without `transformers` (the `ports` extra).
"""

from __future__ import annotations

import json
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from safetensors import safe_open

import loader
from shapes.architectures import gpt2, llama, vit
from tests.conftest import poison_model

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from test_ports import FP32_TOLERANCE, IDS, IMAGE, _torch_logits  # noqa: E402 - after the skips


def _gpt2():
    """GPT2LMHeadModel whose head is stored (untied in torch, equal to wte) + masked_bias."""
    cfg = transformers.GPT2Config(
        vocab_size=97, n_positions=32, n_embd=32, n_layer=2, n_head=4, tie_word_embeddings=False
    )
    hf = transformers.GPT2LMHeadModel(cfg)
    for block in hf.transformer.h:  # transformers < 4.30 saved this constant per layer
        block.attn.register_buffer("masked_bias", torch.tensor(-1e4), persistent=True)
    return hf, gpt2, IDS, ("lm_head.weight", "transformer.h.0.attn.masked_bias")


def _tie_gpt2_head(hf) -> None:
    with torch.no_grad():
        hf.lm_head.weight.copy_(hf.transformer.wte.weight)


def _llama():
    cfg = transformers.LlamaConfig(
        vocab_size=97,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        tie_word_embeddings=False,
    )
    hf = transformers.LlamaForCausalLM(cfg)
    rotary = hf.model.rotary_emb
    rotary.register_buffer("inv_freq", rotary.inv_freq.clone(), persistent=True)
    for layer in hf.model.layers:  # transformers < 4.38 kept one rotary module per layer
        layer.self_attn.rotary_emb = torch.nn.Module()
        layer.self_attn.rotary_emb.register_buffer("inv_freq", rotary.inv_freq.clone())
    extras = ("model.rotary_emb.inv_freq", "model.layers.1.self_attn.rotary_emb.inv_freq")
    return hf, llama, IDS, extras


def _vit():
    cfg = transformers.ViTConfig(
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        image_size=32,
        patch_size=8,
        num_labels=10,
    )
    hf = transformers.ViTForImageClassification(cfg)
    hf.vit = transformers.ViTModel(cfg, add_pooling_layer=True)  # the pooler head is saved too
    return hf, vit, IMAGE, ("vit.pooler.dense.weight", "vit.pooler.dense.bias")


ARCHS = {"gpt2": _gpt2, "llama": _llama, "vit": _vit}


def _saved(name: str, folder):
    torch.manual_seed(0)
    hf, port, x, extras = ARCHS[name]()
    with torch.no_grad():  # HF's init is tiny (std 0.02): give every weight a visible spread
        for p in hf.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    if name == "gpt2":
        _tie_gpt2_head(hf)
    hf.eval().save_pretrained(folder)
    with safe_open(str(folder / "model.safetensors"), "np") as f:
        keys = list(f.keys())
    assert set(extras) <= set(keys), "the layout must carry its extras"
    config = port.config_for(json.loads((folder / "config.json").read_text()), keys)
    return hf, port, x, config


def _strict_load(port, config, folder, *, dtype=jnp.float32, strategy=None):
    target = port.MODEL(config, dtype=dtype, rngs=nnx.Rngs(1))
    poison_model(target)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # one call, no warning at all
        return loader.load_model(
            target,
            folder / "model.safetensors",
            strict=True,
            key_map=port.key_map(config),
            ignore_unexpected=port.IGNORE_UNEXPECTED,
            ignore_missing=port.IGNORE_MISSING,
            casts="allow",
            strategy=strategy,
        )


@pytest.mark.parametrize("strategy", ["pipelined", "eager"])
@pytest.mark.parametrize("name", sorted(ARCHS))
def test_a_real_layout_ports_strictly_in_one_call_in_32_bit_jax(name, strategy, tmp_path):
    assert not jax.config.jax_enable_x64  # type: ignore[attr-defined]
    hf, port, x, config = _saved(name, tmp_path)
    model, report = _strict_load(port, config, tmp_path, strategy=strategy)
    assert report.ok and report.unexpected == [] and report.missing == []
    assert set(ARCHS[name]()[3]) <= set(report.ignored)
    delta = float(np.max(np.abs(np.asarray(model(jnp.asarray(x))) - _torch_logits(hf, x))))
    print(f"{name} ({strategy}) strict, declared ignores, fp32 max |delta| = {delta:.3g}")
    assert delta <= FP32_TOLERANCE


@pytest.mark.parametrize("name", sorted(ARCHS))
def test_without_the_declared_ignores_the_strict_load_names_the_extras(name, tmp_path):
    _, port, _, config = _saved(name, tmp_path)
    with pytest.raises(loader.MismatchError) as caught:
        loader.load_model(
            lambda: port.MODEL(config, rngs=nnx.Rngs(0)),
            tmp_path / "model.safetensors",
            strict=True,
            key_map=port.key_map(config),
        )
    for extra in ARCHS[name]()[3]:
        assert f"{extra}: in the checkpoint but not in the model" in str(caught.value)


def test_a_bf16_port_of_an_fp32_file_lists_its_casts_without_a_warning(tmp_path):
    hf, port, x, config = _saved("gpt2", tmp_path)
    model, report = _strict_load(port, config, tmp_path, dtype=jnp.bfloat16)
    assert report.ok and len(report.casts) == len(report.loaded)
    assert {(c.file_dtype, c.model_dtype, c.expected) for c in report.casts} == {
        ("F32", "BF16", True)
    }
    out = np.asarray(model(jnp.asarray(x)), np.float32)
    assert np.max(np.abs(out - _torch_logits(hf, x))) < 0.1 * np.max(np.abs(out))


def test_the_same_cast_under_the_default_policy_is_reported(tmp_path):
    _, port, _, config = _saved("vit", tmp_path)
    with pytest.raises(loader.MismatchError, match=r"(?s)F32 to model dtype BF16.*casts='allow'"):
        loader.load_model(
            lambda: port.MODEL(config, dtype=jnp.bfloat16, rngs=nnx.Rngs(0)),
            tmp_path / "model.safetensors",
            strict=True,
            key_map=port.key_map(config),
            ignore_unexpected=port.IGNORE_UNEXPECTED,
        )


def test_plan_lists_every_leaf_of_a_real_layout_without_reading_a_tensor(tmp_path):
    _, port, _, config = _saved("llama", tmp_path)
    key_map = port.key_map(config)
    table = loader.plan(
        lambda: port.MODEL(config, rngs=nnx.Rngs(0)),
        tmp_path / "model.safetensors",
        key_map=key_map,
        ignore_unexpected=port.IGNORE_UNEXPECTED,
    )
    rows = {e.path: e for e in table.entries if e.path}
    assert set(rows) == set(key_map)
    q = rows["model.layers.0.self_attn.q_proj.kernel"]
    assert (q.file_key, q.verdict) == ("model.layers.0.self_attn.q_proj.weight", "transform")
    assert "Transpose((1, 0)) then Reshape((32, 4, 8))" in str(table)
    assert table.counts() == {"load": 6, "transform": 15, "ignored": 3}
