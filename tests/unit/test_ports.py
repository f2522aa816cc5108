"""The ports checked against the source framework: a tiny HF model built in torch from a config
(random init, no download), saved as HF saves it, loaded into a poisoned NNX model with the port's
key map and strict=True; logits on a fixed input match torch's. Skipped without `transformers`
(`make ports` installs the `ports` extra).
"""

from __future__ import annotations

import json

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

FP32_TOLERANCE = 1e-5
IDS = np.random.default_rng(0).integers(0, 97, (1, 16))
IMAGE = np.random.default_rng(0).standard_normal((1, 32, 32, 3)).astype(np.float32)


def _gpt2():
    cfg = transformers.GPT2Config(vocab_size=97, n_positions=32, n_embd=32, n_layer=2, n_head=4)
    return transformers.GPT2LMHeadModel(cfg), gpt2, IDS


def _llama():
    scaling = {
        "rope_type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8,
    }
    cfg = transformers.LlamaConfig(
        vocab_size=97,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        rope_theta=500000.0,
        rope_scaling=scaling,
        tie_word_embeddings=False,
    )
    return transformers.LlamaForCausalLM(cfg), llama, IDS


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
    return transformers.ViTForImageClassification(cfg), vit, IMAGE


ARCHS = {"gpt2": _gpt2, "llama": _llama, "vit": _vit}


def _torch_logits(hf, x: np.ndarray) -> np.ndarray:
    with torch.no_grad():
        t = torch.tensor(x)
        out = hf(t.permute(0, 3, 1, 2).to(hf.dtype)) if t.dtype == torch.float32 else hf(t)
    return out.logits.float().numpy()


def _saved(name: str, tmp_path, dtype=None):
    """(HF model, port module, input, checkpoint folder); the model's weights made non-trivial."""
    torch.manual_seed(0)
    hf, port, x = ARCHS[name]()
    with torch.no_grad():  # HF's init is tiny (std 0.02): give every weight a visible spread
        for p in hf.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    hf = hf.eval() if dtype is None else hf.to(dtype).eval()
    hf.save_pretrained(tmp_path)
    return hf, port, x, tmp_path


def _config(port, folder):
    return port.config_for(json.loads((folder / "config.json").read_text()), _keys(folder))


def _load(port, folder, *, dtype=jnp.float32, key_map=None, strategy=None):
    config = _config(port, folder)
    target = port.MODEL(config, dtype=dtype, rngs=nnx.Rngs(1))
    poison_model(target)
    key_map = port.key_map(config) if key_map is None else key_map(config)
    return loader.load_model(
        target, folder / "model.safetensors", strict=True, key_map=key_map, strategy=strategy
    )


def _keys(folder) -> list[str]:
    with safe_open(str(folder / "model.safetensors"), "np") as f:
        return list(f.keys())


@pytest.mark.parametrize("strategy", ["pipelined", "hostcast"])
@pytest.mark.parametrize("name", sorted(ARCHS))
def test_port_matches_torch_in_fp32_and_covers_the_checkpoint(name, strategy, tmp_path):
    hf, port, x, folder = _saved(name, tmp_path)
    model, report = _load(port, folder, strategy=strategy)
    key_map = port.key_map(_config(port, folder))
    assert sorted(report.loaded) == sorted(key_map)
    used = {v if isinstance(v, str) else v[0] for v in key_map.values()}
    assert used == set(_keys(folder)) and report.unexpected == []  # every tensor lands somewhere
    got = np.asarray(model(jnp.asarray(x)))
    delta = float(np.max(np.abs(got - _torch_logits(hf, x))))
    print(f"{name} fp32 max |delta| = {delta:.3g}")
    assert delta <= FP32_TOLERANCE


@pytest.mark.parametrize("name", sorted(ARCHS))
def test_port_in_bf16_keeps_the_dtype_and_stays_within_its_rounding(name, tmp_path):
    """bf16 file, bf16 model: no further from torch's fp32 logits than torch's own bf16 run (x2)."""
    hf, port, x, folder = _saved(name, tmp_path, dtype=torch.bfloat16)
    model, report = _load(port, folder, dtype=jnp.bfloat16)
    assert report.ok and report.casts == []
    out = model(jnp.asarray(x))
    assert out.dtype == jnp.bfloat16
    exact = _torch_logits(hf.float(), x)  # the same bf16 weights, computed in fp32
    hf_bf16 = _torch_logits(hf.to(torch.bfloat16), x)
    ours = float(np.max(np.abs(np.asarray(out, np.float32) - exact)))
    theirs = float(np.max(np.abs(hf_bf16 - exact)))
    print(f"{name} bf16 max |delta| = {ours:.3g} (torch bf16: {theirs:.3g})")
    assert ours <= 2 * theirs + 1e-2 * float(np.max(np.abs(exact)))


def test_a_wrong_layout_is_caught_by_the_logits(tmp_path):
    """Without its transpose a square q projection loads (shapes agree), but the logits differ."""
    hf, port, x, folder = _saved("llama", tmp_path)

    def untransposed(config):
        km = port.key_map(config)
        for key, entry in km.items():
            if key.endswith("self_attn.q_proj.kernel"):
                km[key] = (entry[0], entry[1][1:])  # Reshape only: (out, in) read as (in, out)
        return km

    model, _ = _load(port, folder, key_map=untransposed)
    delta = float(np.max(np.abs(np.asarray(model(jnp.asarray(x))) - _torch_logits(hf, x))))
    assert delta > 100 * FP32_TOLERANCE
