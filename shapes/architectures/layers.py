"""What the ports share: attention over heads, an RMS norm as Hugging Face computes it, and the
check that a key map names exactly the model's own state paths.

Attention takes `(batch, tokens, heads, head_dim)` projections (each projection is an
`nnx.LinearGeneral` whose kernel is `(in, heads, head_dim)`, filled through `loader.Transpose` /
`loader.Reshape` from a torch `(out, in)` weight), repeats grouped key/value heads, and takes the
softmax in float32 as the Hugging Face models do, casting back to the compute dtype.
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from loader.placement.leaves import iter_variables
from loader.planning.keys import key_of
from shapes.errors import ShapesError


def attention(
    q: jax.Array, k: jax.Array, v: jax.Array, *, causal: bool, keep: jax.Array | None = None
) -> jax.Array:
    """Scaled dot-product attention: q `(B, T, H, D)`, k and v `(B, S, KV, D)`, KV dividing H;
    `keep` `(B, S)`, if given, is False for the keys not to attend to (padding)."""
    groups = q.shape[2] // k.shape[2]
    if groups > 1:
        k, v = jnp.repeat(k, groups, axis=2), jnp.repeat(v, groups, axis=2)
    scores = jnp.einsum("bqhd,bkhd->bhqk", q, k) / jnp.asarray(math.sqrt(q.shape[-1]), q.dtype)
    if causal:
        t, s = q.shape[1], k.shape[1]
        mask = jnp.tril(jnp.ones((t, s), bool), k=s - t)
        scores = jnp.where(mask, scores, jnp.finfo(scores.dtype).min)
    if keep is not None:
        scores = jnp.where(keep[:, None, None, :], scores, jnp.finfo(scores.dtype).min)
    probs = jax.nn.softmax(scores.astype(jnp.float32), axis=-1).astype(q.dtype)
    return jnp.einsum("bhqk,bkhd->bqhd", probs, v)


class RMSNorm(nnx.Module):
    """`x / rms(x) * weight`, computed in float32 and cast back before the weight (as HF Llama)."""

    def __init__(self, dim: int, *, eps: float, param_dtype: Any) -> None:
        self.weight = nnx.Param(jnp.ones((dim,), param_dtype))
        self.eps = eps

    def __call__(self, x: jax.Array) -> jax.Array:
        h = x.astype(jnp.float32)
        h = h * jax.lax.rsqrt(jnp.mean(h * h, axis=-1, keepdims=True) + self.eps)
        return self.weight[...] * h.astype(x.dtype)


def model_keys(model: nnx.Module) -> list[str]:
    """The model's state paths as file keys (shared variables once, as `nnx.state` names them)."""
    return [key_of(path) for path, _ in iter_variables(model)]


def checked(key_map: dict[str, object], model: nnx.Module, arch: str) -> dict[str, object]:
    """`key_map` if it names exactly the model's state paths; `ShapesError` naming the first gap."""
    keys = model_keys(model)
    missing = [k for k in keys if k not in key_map]
    extra = sorted(set(key_map) - set(keys))
    if missing or extra:
        what = f"no entry for {missing[0]!r}" if missing else f"an entry for {extra[0]!r}"
        raise ShapesError(
            f"{arch} port: its key map has {what}, which is not the model's own state path "
            f"({len(missing)} missing, {len(extra)} extra); fix the port's key map"
        )
    return key_map
