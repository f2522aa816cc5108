"""GPT-2 in NNX, with the key map from Hugging Face's GPT-2 checkpoints (presets gpt2, tiny-gpt2).

HF's GPT-2 uses `Conv1D` layers, whose weights are already `(in, out)`, like an NNX kernel. q, k
and v are fused in one `c_attn` tensor `(d, 3d)`: each projection takes its third of the last
axis (`loader.Slice(1, ...)`, then `loader.Reshape` to `(d, heads, head_dim)`); `c_proj` becomes
`(heads, head_dim, d)` by a Reshape alone. The LM head is tied to `wte` (`nnx.Embed.attend`), so
the model has one embedding leaf and HF's `lm_head.weight` (not stored by `save_pretrained`) has
no leaf to fill. Checkpoints of `GPT2Model` have no `transformer.` prefix, and older ones store
the causal mask `h.N.attn.bias` `[1, 1, n_positions, n_positions]`: the config says both
(`prefix`, `mask_buffer`; `config_for` reads them from the file's keys).

    >>> config = Config.from_hf(PRESET_CONFIGS["tiny-gpt2"])
    >>> model, report = loader.load_model(lambda: GPT2(config, rngs=nnx.Rngs(0)),
    ...     "model.safetensors", key_map=key_map(config), strict=True)
    >>> logits = model(jnp.zeros((1, 8), jnp.int32))   # (1, 8, vocab)
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from loader.transforms import Reshape, Slice
from shapes.architectures.layers import attention

PRESET_CONFIGS = {  # the Hub's config.json values that the shapes do not say
    "gpt2": {"n_layer": 12, "n_embd": 768, "n_head": 12, "n_positions": 1024, "vocab_size": 50257},
    "tiny-gpt2": {"n_layer": 5, "n_embd": 32, "n_head": 4, "n_positions": 512, "vocab_size": 1000},
}
#: File keys of GPT-2 checkpoints that the port does not need (`load_model(ignore_unexpected=)`):
#: the LM head, tied to `wte` (stored by some exports, e.g. an untied save or a converted `.bin`),
#: and older transformers' `masked_bias` buffer (a constant -1e4 per layer).
IGNORE_UNEXPECTED: tuple[str, ...] = ("lm_head.weight", "*.attn.masked_bias")
IGNORE_MISSING: tuple[str, ...] = ()


@dataclass(frozen=True)
class Config:
    vocab_size: int
    n_positions: int
    n_embd: int
    n_layer: int
    n_head: int
    n_inner: int
    layer_norm_epsilon: float = 1e-5
    prefix: str = "transformer."  # `GPT2LMHeadModel.save_pretrained`; "" for `GPT2Model`
    mask_buffer: bool = False  # the file stores h.N.attn.bias (the causal mask)

    @classmethod
    def from_hf(cls, hf: dict) -> Config:
        """From a Hugging Face `config.json` (as a dict)."""
        d = int(hf["n_embd"])
        return cls(
            int(hf["vocab_size"]),
            int(hf["n_positions"]),
            d,
            int(hf["n_layer"]),
            int(hf["n_head"]),
            int(hf.get("n_inner") or 4 * d),
            float(hf.get("layer_norm_epsilon", 1e-5)),
        )

    @property
    def head_dim(self) -> int:
        return self.n_embd // self.n_head


def config_for(hf: dict, file_keys: Iterable[str]) -> Config:
    """The config of a checkpoint: `hf` (config.json) plus what the file's keys say."""
    keys = set(file_keys)
    prefix = "transformer." if any(k.startswith("transformer.") for k in keys) else ""
    mask = f"{prefix}h.0.attn.bias" in keys
    return replace(Config.from_hf(hf), prefix=prefix, mask_buffer=mask)


class Buffer(nnx.Variable):
    """A non-trainable tensor stored in the checkpoint (GPT-2's causal mask)."""


class Attention(nnx.Module):
    def __init__(self, c: Config, dtype: Any, rngs: nnx.Rngs) -> None:
        d, heads = c.n_embd, (c.n_head, c.head_dim)
        kw: dict[str, Any] = {"dtype": dtype, "param_dtype": dtype, "rngs": rngs}
        self.q = nnx.LinearGeneral(d, heads, **kw)
        self.k = nnx.LinearGeneral(d, heads, **kw)
        self.v = nnx.LinearGeneral(d, heads, **kw)
        self.c_proj = nnx.LinearGeneral(heads, d, axis=(-2, -1), **kw)
        if c.mask_buffer:
            n = c.n_positions
            self.bias = Buffer(jnp.tril(jnp.ones((1, 1, n, n), dtype)))

    def __call__(self, x: jax.Array) -> jax.Array:
        return self.c_proj(attention(self.q(x), self.k(x), self.v(x), causal=True))


class Block(nnx.Module):
    def __init__(self, c: Config, dtype: Any, rngs: nnx.Rngs) -> None:
        kw: dict[str, Any] = {"dtype": dtype, "param_dtype": dtype, "rngs": rngs}
        self.ln_1 = nnx.LayerNorm(c.n_embd, epsilon=c.layer_norm_epsilon, **kw)
        self.attn = Attention(c, dtype, rngs)
        self.ln_2 = nnx.LayerNorm(c.n_embd, epsilon=c.layer_norm_epsilon, **kw)
        self.mlp = nnx.Dict(
            c_fc=nnx.Linear(c.n_embd, c.n_inner, **kw), c_proj=nnx.Linear(c.n_inner, c.n_embd, **kw)
        )

    def __call__(self, x: jax.Array) -> jax.Array:
        x = x + self.attn(self.ln_1(x))
        h = jax.nn.gelu(self.mlp["c_fc"](self.ln_2(x)), approximate=True)  # HF's gelu_new
        return x + self.mlp["c_proj"](h)


class GPT2(nnx.Module):
    """GPT-2 with its LM head tied to the token embedding; `model(ids)` gives logits."""

    def __init__(self, c: Config, *, dtype: Any = jnp.float32, rngs: nnx.Rngs) -> None:
        kw: dict[str, Any] = {"dtype": dtype, "param_dtype": dtype, "rngs": rngs}
        self.wte = nnx.Embed(c.vocab_size, c.n_embd, **kw)
        self.wpe = nnx.Embed(c.n_positions, c.n_embd, **kw)
        self.h = nnx.List([Block(c, dtype, rngs) for _ in range(c.n_layer)])
        self.ln_f = nnx.LayerNorm(c.n_embd, epsilon=c.layer_norm_epsilon, **kw)

    def __call__(self, ids: jax.Array) -> jax.Array:
        x = self.wte(ids) + self.wpe(jnp.arange(ids.shape[-1]))
        for block in self.h:
            x = block(x)
        return self.wte.attend(self.ln_f(x))


MODEL = GPT2


def key_map(c: Config) -> dict[str, object]:
    """Model state path -> HF key (and transform), for every leaf of `GPT2(c)`."""
    p, d, heads = c.prefix, c.n_embd, (c.n_head, c.head_dim)
    out: dict[str, object] = {"wte.embedding": f"{p}wte.weight", "wpe.embedding": f"{p}wpe.weight"}
    out |= {"ln_f.scale": f"{p}ln_f.weight", "ln_f.bias": f"{p}ln_f.bias"}
    for i in range(c.n_layer):
        m, f = f"h.{i}.", f"{p}h.{i}."
        for ln in ("ln_1", "ln_2"):
            out |= {f"{m}{ln}.scale": f"{f}{ln}.weight", f"{m}{ln}.bias": f"{f}{ln}.bias"}
        for j, name in enumerate("qkv"):
            part = Slice(1, j * d, (j + 1) * d)
            out[f"{m}attn.{name}.kernel"] = (f"{f}attn.c_attn.weight", (part, Reshape((d, *heads))))
            part = Slice(0, j * d, (j + 1) * d)
            out[f"{m}attn.{name}.bias"] = (f"{f}attn.c_attn.bias", (part, Reshape(heads)))
        out[f"{m}attn.c_proj.kernel"] = (f"{f}attn.c_proj.weight", Reshape((*heads, d)))
        out[f"{m}attn.c_proj.bias"] = f"{f}attn.c_proj.bias"
        if c.mask_buffer:
            out[f"{m}attn.bias"] = f"{f}attn.bias"
        for layer in ("c_fc", "c_proj"):  # Conv1D: (in, out) already
            out[f"{m}mlp.{layer}.kernel"] = f"{f}mlp.{layer}.weight"
            out[f"{m}mlp.{layer}.bias"] = f"{f}mlp.{layer}.bias"
    return out


def example_input(c: Config, tokens: int = 128) -> jax.ShapeDtypeStruct:
    """The forward's declared input: batch 1 x `tokens` token ids."""
    return jax.ShapeDtypeStruct((1, min(tokens, c.n_positions)), jnp.int32)
