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

Quantized checkpoints (compressed-tensors, as llm-compressor writes them) load through the same
map: `key_map(config, quant="fp8")` dequantizes each projection's F8_E4M3 `weight` by its
per-channel `weight_scale` (`loader.Dequantize`), `quant="int4"` unpacks its pack-quantized
`weight_packed` / `weight_scale` / `weight_shape` in groups of 128 (`loader.Unpack`), into the
model's float dtype (on the device for `pipelined`). `Llama(config, fp8_mlp=True)` keeps the MLP
quantized instead: its projections are `FP8Linear`s, whose F8_E4M3 weight and float32 scale are
leaves of their own, loaded as stored (`key_map(config, quant="fp8", fp8_mlp=True)`).
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

from loader.transforms import Dequantize, Reshape, Transpose, Unpack
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
    "tiny-llama-fp8": {  # llama3-8b's layout at test size (the preset's provenance)
        "vocab_size": 512,
        "hidden_size": 256,
        "intermediate_size": 512,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "rms_norm_eps": 1e-5,
        "rope_theta": 500000.0,
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
# the quantized presets' config.json is their base model's (RedHatAI's FP8 and w4a16 exports of
# Llama-3.1-8B-Instruct); their quantization_config is the file's layout, read from its tensors
PRESET_CONFIGS["llama3-8b-fp8"] = PRESET_CONFIGS["llama3-8b-int4"] = PRESET_CONFIGS["llama3-8b"]
PRESET_CONFIGS["tiny-llama-int4"] = PRESET_CONFIGS["tiny-llama-fp8"]

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


class FP8Linear(nnx.Module):
    """A projection kept as compressed-tensors stores it: an F8_E4M3 `weight` `(out, in)` and a
    float32 per-channel `weight_scale` `(out, 1)`, dequantized in the forward."""

    def __init__(self, d_in: int, d_out: int, dtype: Any) -> None:
        self.weight = nnx.Param(jnp.zeros((d_out, d_in), jnp.float8_e4m3fn))
        self.weight_scale = nnx.Param(jnp.ones((d_out, 1), jnp.float32))
        self.dtype = dtype

    def __call__(self, x: jax.Array) -> jax.Array:
        w = (self.weight.get_value().astype(jnp.float32) * self.weight_scale.get_value()).astype(
            self.dtype
        )
        return x @ w.T


class Layer(nnx.Module):
    def __init__(self, c: Config, dtype: Any, rngs: nnx.Rngs, fp8_mlp: bool = False) -> None:
        kw: dict[str, Any] = {"use_bias": False, "dtype": dtype, "param_dtype": dtype, "rngs": rngs}
        d, i = c.hidden_size, c.intermediate_size
        self.input_layernorm = RMSNorm(d, eps=c.rms_norm_eps, param_dtype=dtype)
        self.self_attn = Attention(c, dtype, rngs)
        self.post_attention_layernorm = RMSNorm(d, eps=c.rms_norm_eps, param_dtype=dtype)
        projections: dict[str, nnx.Module]
        if fp8_mlp:
            projections = {
                "gate_proj": FP8Linear(d, i, dtype),
                "up_proj": FP8Linear(d, i, dtype),
                "down_proj": FP8Linear(i, d, dtype),
            }
        else:
            projections = {
                "gate_proj": nnx.Linear(d, i, **kw),
                "up_proj": nnx.Linear(d, i, **kw),
                "down_proj": nnx.Linear(i, d, **kw),
            }
        self.mlp = nnx.Dict(projections)

    def __call__(self, x: jax.Array) -> jax.Array:
        x = x + self.self_attn(self.input_layernorm(x))
        h = self.post_attention_layernorm(x)
        gated = jax.nn.silu(self.mlp["gate_proj"](h)) * self.mlp["up_proj"](h)
        return x + self.mlp["down_proj"](gated)


class Body(nnx.Module):
    def __init__(self, c: Config, dtype: Any, rngs: nnx.Rngs, fp8_mlp: bool = False) -> None:
        self.embed_tokens = nnx.Embed(
            c.vocab_size, c.hidden_size, dtype=dtype, param_dtype=dtype, rngs=rngs
        )
        self.layers = nnx.List([Layer(c, dtype, rngs, fp8_mlp) for _ in range(c.num_hidden_layers)])
        self.norm = RMSNorm(c.hidden_size, eps=c.rms_norm_eps, param_dtype=dtype)


class Llama(nnx.Module):
    """A Llama decoder with its LM head; `model(ids)` gives logits.

    `BODY` builds the decoder and `run_layers` runs its layers: `llama_scanned.ScannedLlama`
    changes both (layers stacked by `nnx.vmap`, run by `nnx.scan`) and keeps the rest.
    """

    BODY: Callable[..., Any] = Body

    def __init__(
        self, c: Config, *, dtype: Any = jnp.float32, rngs: nnx.Rngs, fp8_mlp: bool = False
    ) -> None:
        # (a BODY other than `Body`, the scanned one, has no fp8_mlp: it is not passed unasked)
        self.model = self.BODY(c, dtype, rngs, fp8_mlp) if fp8_mlp else self.BODY(c, dtype, rngs)
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


#: The quantized checkpoint layouts `key_map` takes (compressed-tensors' names).
QUANT = ("fp8", "int4")


def _projection(prefix: str, shape: tuple[int, int], quant: str | None) -> object:
    """What a projection `(out, in)` is read from: its `weight`, or its quantized layout."""
    if quant is None:
        return f"{prefix}.weight"
    if quant == "fp8":
        return Dequantize.compressed_tensors(prefix)
    if quant == "int4":
        return Unpack.compressed_tensors(prefix, shape=shape, group_size=128)
    raise ValueError(f"quant={quant!r}: expected None or one of {QUANT}")


def key_map(c: Config, quant: str | None = None, fp8_mlp: bool = False) -> dict[str, object]:
    """Model state path -> HF key (and transform), for every leaf of `Llama(c)`.

    `quant` ("fp8", "int4"): the projections are read from compressed-tensors' quantized layout
    and dequantized into the model's dtype; with `fp8_mlp` (and `quant="fp8"`) the MLP's weights
    and scales load as stored into `Llama(c, fp8_mlp=True)`'s `FP8Linear` leaves.
    """
    if fp8_mlp and quant != "fp8":
        raise ValueError("fp8_mlp=True keeps an FP8 checkpoint's MLP: give quant='fp8'")
    d, dh, inter = c.hidden_size, c.head_dim, c.intermediate_size
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
            weight = _projection(f"{m}self_attn.{name}", (math.prod(shape), d), quant)
            out[f"{m}self_attn.{name}.kernel"] = (weight, (T, Reshape((d, *shape))))
        weight = _projection(f"{m}self_attn.o_proj", (d, math.prod(heads)), quant)
        out[f"{m}self_attn.o_proj.kernel"] = (weight, (T, Reshape((*heads, d))))
        for name, shape in (
            ("gate_proj", (inter, d)),
            ("up_proj", (inter, d)),
            ("down_proj", (d, inter)),
        ):
            p = f"{m}mlp.{name}"
            if fp8_mlp:
                out[f"{p}.weight"] = f"{p}.weight"
                out[f"{p}.weight_scale"] = f"{p}.weight_scale"
            else:
                out[f"{p}.kernel"] = (_projection(p, shape, quant), T)
    return out


def example_input(c: Config, tokens: int = 128) -> jax.ShapeDtypeStruct:
    """The forward's declared input: batch 1 x `tokens` token ids."""
    return jax.ShapeDtypeStruct((1, tokens), jnp.int32)
