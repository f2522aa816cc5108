"""Llama with scanned layers: one leaf per parameter, the layers stacked on a leading axis.

The layers of `shapes.architectures.llama` built once under `nnx.vmap` (as MaxText's
`scan_layers` and bonsai hold them) and run with `nnx.scan`, so `model.layers.mlp.up_proj.kernel`
is `(L, d, intermediate)` where Hugging Face's file holds `L` tensors
`model.layers.{i}.mlp.up_proj.weight` `(intermediate, d)`. The key map fills each stacked leaf
through `loader.Stack`, with the unscanned port's per-layer transform (a Transpose, and a
Reshape for the attention heads) applied to each layer: `pipelined` reads every layer straight
into its slice of the stacked leaf, so the port costs no more memory than the unscanned one.

    >>> config = Config.from_hf(json.load(open("config.json")))
    >>> model, report = loader.load_model(lambda: ScannedLlama(config, rngs=nnx.Rngs(0)),
    ...     "model.safetensors", key_map=key_map(config), strict=True)
"""

from __future__ import annotations

from typing import Any

import jax
from flax import nnx

from loader.transforms import Stack
from shapes.architectures import llama
from shapes.architectures.layers import RMSNorm
from shapes.architectures.llama import Config, Layer

PRESET_CONFIGS = llama.PRESET_CONFIGS
config_for = llama.config_for
example_input = llama.example_input


class ScannedBody(nnx.Module):
    def __init__(self, c: Config, dtype: Any, rngs: nnx.Rngs) -> None:
        self.embed_tokens = nnx.Embed(
            c.vocab_size, c.hidden_size, dtype=dtype, param_dtype=dtype, rngs=rngs
        )

        @nnx.split_rngs(splits=c.num_hidden_layers)
        @nnx.vmap(in_axes=(0,), out_axes=0)
        def layers(r: nnx.Rngs) -> Layer:
            return Layer(c, dtype, r)

        self.layers = layers(rngs)
        self.norm = RMSNorm(c.hidden_size, eps=c.rms_norm_eps, param_dtype=dtype)


class ScannedLlama(llama.Llama):
    """`llama.Llama` with its layers stacked (`nnx.vmap`) and run by `nnx.scan`."""

    BODY = ScannedBody

    def run_layers(self, x: jax.Array) -> jax.Array:
        @nnx.scan(in_axes=(nnx.Carry, 0), out_axes=nnx.Carry)
        def run(x: jax.Array, layer: Layer) -> jax.Array:
            return layer(x)

        out: jax.Array = run(x, self.model.layers)
        return out


MODEL = ScannedLlama


def key_map(c: Config) -> dict[str, object]:
    """Model state path -> HF key, or a `loader.Stack` of the per-layer HF keys, for every leaf.

    Each stacked entry is the unscanned port's entries for layers 0..L-1 (`llama.key_map`): their
    file keys in layer order, stacked along axis 0, each through that port's own transform.
    """
    flat = llama.key_map(c)
    out: dict[str, object] = {}
    first = "model.layers.0."
    for key, entry in flat.items():
        if not key.startswith("model.layers."):
            out[key] = entry
            continue
        if not key.startswith(first):
            continue
        name = key[len(first) :]
        per_layer = [flat[f"model.layers.{i}.{name}"] for i in range(c.num_hidden_layers)]
        keys = [e if isinstance(e, str) else e[0] for e in per_layer]  # type: ignore[index]
        transform = per_layer[0][1] if isinstance(per_layer[0], tuple) else None
        out[f"model.layers.{name}"] = Stack(keys, axis=0, transform=transform)
    return out
