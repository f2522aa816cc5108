"""Llama-3 in NNX, with the key map from Hugging Face's `LlamaForCausalLM` (presets `llama3-8b`,
`tinyllama-1.1b`; `llama_scanned` is its scanned-layer variant).

Every projection in HF is a torch `nn.Linear`, stored `(out, in)`. The attention projections
become `nnx.LinearGeneral` kernels `(d, heads, head_dim)` (q, k, v: `loader.Transpose((1, 0))`
then `loader.Reshape`) and `(heads, head_dim, d)` (o); the MLP and the LM head are `nnx.Linear`
kernels `(in, out)` (a Transpose). Grouped-query attention repeats the key/value heads; rotary
embeddings follow HF's `rotate_half` layout, with Llama 3's frequency scaling when the config
has it. With `tie_word_embeddings` the LM head is the embedding (`nnx.Embed.attend`): one leaf.

    >>> config = Config.from_hf(json.load(open("config.json")))
    >>> model, report = loader.load_model(lambda: Llama(config, rngs=nnx.Rngs(0)),
    ...     "model.safetensors", key_map=key_map(config), strict=True)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from loader.transforms import Reshape, Transpose
from shapes.architectures.layers import RMSNorm, attention

PRESET_CONFIGS = {  # meta-llama/Llama-3.1-8B-Instruct's config.json
    "llama3-8b": {
        "vocab_size": 128256,
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "rms_norm_eps": 1e-5,
        "rope_theta": 500000.0,
        "rope_scaling": {
            "rope_type": "llama3",
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8192,
        },
        "tie_word_embeddings": False,
    },
    "tinyllama-1.1b": {  # TinyLlama/TinyLlama-1.1B-Chat-v1.0's config.json
        "vocab_size": 32000,
        "hidden_size": 2048,
        "intermediate_size": 5632,
        "num_hidden_layers": 22,
        "num_attention_heads": 32,
        "num_key_value_heads": 4,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "tie_word_embeddings": False,
    },
}

#: File keys of Llama checkpoints that the port does not need (`load_model(ignore_unexpected=)`):
#: the rotary inverse frequencies, computed from the config (older transformers saved them as
#: `model.layers.N.self_attn.rotary_emb.inv_freq`, later ones as `model.rotary_emb.inv_freq`).
IGNORE_UNEXPECTED: tuple[str, ...] = ("*rotary_emb.inv_freq",)
IGNORE_MISSING: tuple[str, ...] = ()
T = Transpose((1, 0))


@dataclass(frozen=True)
class Config:
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    rms_norm_eps: float = 1e-5
    rope_theta: float = 10000.0
    rope_scaling: tuple[tuple[str, float], ...] = ()  # HF's dict, as sorted items
    tie_word_embeddings: bool = False

    @classmethod
    def from_hf(cls, hf: dict) -> Config:
        """From a Hugging Face `config.json` (as a dict)."""
        d, heads = int(hf["hidden_size"]), int(hf["num_attention_heads"])
        scaling = hf.get("rope_scaling") or hf.get("rope_parameters") or {}  # v4 | v5 name
        theta = hf.get("rope_theta") or scaling.get("rope_theta")
        return cls(
            int(hf["vocab_size"]),
            d,
            int(hf["intermediate_size"]),
            int(hf["num_hidden_layers"]),
            heads,
            int(hf.get("num_key_value_heads") or heads),
            int(hf.get("head_dim") or d // heads),
            float(hf.get("rms_norm_eps", 1e-5)),
            float(theta or 10000.0),
            _llama3_scaling(scaling),
            bool(hf.get("tie_word_embeddings", False)),
        )


def _llama3_scaling(scaling: dict) -> tuple[tuple[str, float], ...]:
    if scaling.get("rope_type", scaling.get("type")) != "llama3":
        return ()
    keep = ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings")
    return tuple((k, float(scaling[k])) for k in keep)


def inverse_frequencies(c: Config) -> np.ndarray:
    """RoPE's inverse frequencies, with Llama 3's scaling of the long wavelengths if configured."""
    inv = 1.0 / (c.rope_theta ** (np.arange(0, c.head_dim, 2, dtype=np.float64) / c.head_dim))
    if not c.rope_scaling:
        return inv.astype(np.float32)
    s = dict(c.rope_scaling)
    factor, low, high = (
        float(s["factor"]),
        float(s["low_freq_factor"]),
        float(s["high_freq_factor"]),
    )
    old = float(s["original_max_position_embeddings"])
    wavelen = 2 * math.pi / inv
    scaled = np.where(wavelen > old / low, inv / factor, inv)
    smooth = (old / wavelen - low) / (high - low)
    mid = (1 - smooth) * scaled / factor + smooth * scaled
    medium = (wavelen >= old / high) & (wavelen <= old / low)
    return np.where(medium, mid, scaled).astype(np.float32)


def rope(x: jax.Array, inv: jax.Array) -> jax.Array:
    """Rotary embedding of `x` `(B, T, H, D)` at positions 0..T-1 (HF's `rotate_half` layout)."""
    freqs = jnp.arange(x.shape[1], dtype=jnp.float32)[:, None] * inv[None, :]
    emb = jnp.concatenate([freqs, freqs], axis=-1)[None, :, None, :]
    cos, sin = jnp.cos(emb).astype(x.dtype), jnp.sin(emb).astype(x.dtype)
    half = x.shape[-1] // 2
    rotated = jnp.concatenate([-x[..., half:], x[..., :half]], axis=-1)
    return x * cos + rotated * sin


class Attention(nnx.Module):
    def __init__(self, c: Config, dtype: Any, rngs: nnx.Rngs) -> None:
        kw: dict[str, Any] = {"use_bias": False, "dtype": dtype, "param_dtype": dtype, "rngs": rngs}
        d, dh = c.hidden_size, c.head_dim
        self.q_proj = nnx.LinearGeneral(d, (c.num_attention_heads, dh), **kw)
        self.k_proj = nnx.LinearGeneral(d, (c.num_key_value_heads, dh), **kw)
        self.v_proj = nnx.LinearGeneral(d, (c.num_key_value_heads, dh), **kw)
        self.o_proj = nnx.LinearGeneral((c.num_attention_heads, dh), d, axis=(-2, -1), **kw)
        self.config = c  # static: the RoPE frequencies are a constant, not state

    def __call__(self, x: jax.Array) -> jax.Array:
        inv = jnp.asarray(inverse_frequencies(self.config))
        q, k = rope(self.q_proj(x), inv), rope(self.k_proj(x), inv)
        return self.o_proj(attention(q, k, self.v_proj(x), causal=True))


class Layer(nnx.Module):
    def __init__(self, c: Config, dtype: Any, rngs: nnx.Rngs) -> None:
        kw: dict[str, Any] = {"use_bias": False, "dtype": dtype, "param_dtype": dtype, "rngs": rngs}
        d, i = c.hidden_size, c.intermediate_size
        self.input_layernorm = RMSNorm(d, eps=c.rms_norm_eps, param_dtype=dtype)
        self.self_attn = Attention(c, dtype, rngs)
        self.post_attention_layernorm = RMSNorm(d, eps=c.rms_norm_eps, param_dtype=dtype)
        self.mlp = nnx.Dict(
            gate_proj=nnx.Linear(d, i, **kw),
            up_proj=nnx.Linear(d, i, **kw),
            down_proj=nnx.Linear(i, d, **kw),
        )

    def __call__(self, x: jax.Array) -> jax.Array:
        x = x + self.self_attn(self.input_layernorm(x))
        h = self.post_attention_layernorm(x)
        gated = jax.nn.silu(self.mlp["gate_proj"](h)) * self.mlp["up_proj"](h)
        return x + self.mlp["down_proj"](gated)


class Body(nnx.Module):
    def __init__(self, c: Config, dtype: Any, rngs: nnx.Rngs) -> None:
        self.embed_tokens = nnx.Embed(
            c.vocab_size, c.hidden_size, dtype=dtype, param_dtype=dtype, rngs=rngs
        )
        self.layers = nnx.List([Layer(c, dtype, rngs) for _ in range(c.num_hidden_layers)])
        self.norm = RMSNorm(c.hidden_size, eps=c.rms_norm_eps, param_dtype=dtype)


class Llama(nnx.Module):
    """A Llama decoder with its LM head; `model(ids)` gives logits.

    `BODY` builds the decoder and `run_layers` runs its layers: `llama_scanned.ScannedLlama`
    changes both (layers stacked by `nnx.vmap`, run by `nnx.scan`) and keeps the rest.
    """

    BODY: Callable[[Config, Any, nnx.Rngs], Any] = Body

    def __init__(self, c: Config, *, dtype: Any = jnp.float32, rngs: nnx.Rngs) -> None:
        self.model = self.BODY(c, dtype, rngs)
        if not c.tie_word_embeddings:
            kw: dict[str, Any] = {
                "use_bias": False,
                "dtype": dtype,
                "param_dtype": dtype,
                "rngs": rngs,
            }
            self.lm_head = nnx.Linear(c.hidden_size, c.vocab_size, **kw)

    def run_layers(self, x: jax.Array) -> jax.Array:
        for layer in self.model.layers:
            x = layer(x)
        return x

    def __call__(self, ids: jax.Array) -> jax.Array:
        x = self.run_layers(self.model.embed_tokens(ids))
        x = self.model.norm(x)
        if hasattr(self, "lm_head"):
            return self.lm_head(x)
        return self.model.embed_tokens.attend(x)


MODEL = Llama


def config_for(hf: dict, file_keys: Iterable[str] = ()) -> Config:
    """The config of a checkpoint: its `config.json` (the keys say nothing more here)."""
    return Config.from_hf(hf)


def key_map(c: Config) -> dict[str, object]:
    """Model state path -> HF key (and transform), for every leaf of `Llama(c)`."""
    d, dh = c.hidden_size, c.head_dim
    heads, kv = (c.num_attention_heads, dh), (c.num_key_value_heads, dh)
    out: dict[str, object] = {"model.embed_tokens.embedding": "model.embed_tokens.weight"}
    out["model.norm.weight"] = "model.norm.weight"
    if not c.tie_word_embeddings:
        out["lm_head.kernel"] = ("lm_head.weight", T)
    for i in range(c.num_hidden_layers):
        m = f"model.layers.{i}."
        for norm in ("input_layernorm", "post_attention_layernorm"):
            out[f"{m}{norm}.weight"] = f"{m}{norm}.weight"
        for name, shape in (("q_proj", heads), ("k_proj", kv), ("v_proj", kv)):
            out[f"{m}self_attn.{name}.kernel"] = (
                f"{m}self_attn.{name}.weight",
                (T, Reshape((d, *shape))),
            )
        out[f"{m}self_attn.o_proj.kernel"] = (
            f"{m}self_attn.o_proj.weight",
            (T, Reshape((*heads, d))),
        )
        for name in ("gate_proj", "up_proj", "down_proj"):
            out[f"{m}mlp.{name}.kernel"] = (f"{m}mlp.{name}.weight", T)
    return out


def example_input(c: Config, tokens: int = 128) -> jax.ShapeDtypeStruct:
    """The forward's declared input: batch 1 x `tokens` token ids."""
    return jax.ShapeDtypeStruct((1, tokens), jnp.int32)
