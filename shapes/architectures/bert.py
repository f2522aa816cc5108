"""BERT in NNX (an encoder, as sentence-embedding models use it), with the key map from Hugging
Face's `BertModel` checkpoints (and the `bert.`-prefixed ones of `BertForMaskedLM` and kin).

The embeddings add word, position and token-type `nnx.Embed` tables, then a LayerNorm. Each layer's
query, key and value `nn.Linear` weights `(out, in)` become `(d, heads, head_dim)` kernels
(`loader.Transpose((1, 0))` then `loader.Reshape`), the attention output `(heads, head_dim, d)`;
the feed-forward and the pooler are `nnx.Linear` kernels (a Transpose). The pooler (a dense layer
and tanh over the first token) is built when the checkpoint holds it (`config_for` reads the
file's keys, as it reads the prefix and the LayerNorms' names: old files say `gamma` / `beta`).

What a file may hold that the port does not need is declared in `IGNORE_UNEXPECTED`: the
`embeddings.position_ids` buffer (persisted by transformers before 4.31, so in many
sentence-embedding checkpoints on the Hub; the port computes the positions) and a pre-training
head (`cls.*`). BERT has no shape preset: it is not in `ARCHITECTURES` (no `port_for`).

    >>> config = config_for(json.load(open("config.json")), file_keys)
    >>> model, report = loader.load_model(lambda: Bert(config, rngs=nnx.Rngs(0)),
    ...     "model.safetensors", key_map=key_map(config), strict=True, casts="allow",
    ...     ignore_unexpected=declared_for(IGNORE_UNEXPECTED, file_keys))
    >>> model(ids)["last_hidden_state"]   # (batch, tokens, hidden)

(`shapes.architectures.declared_for` keeps the patterns that match this file: a strict load
refuses a pattern that matches nothing, and a checkpoint saved by a recent transformers has no
`position_ids`.)
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from loader.transforms import Reshape, Transpose
from shapes.architectures.layers import attention
from shapes.errors import ShapesError

PRESET_CONFIGS: dict[str, dict] = {}  # no shape preset ports BERT (yet)
#: file keys a BERT checkpoint may hold that the port does not need
IGNORE_UNEXPECTED: tuple[str, ...] = ("*embeddings.position_ids", "cls.*")
#: model paths a BERT checkpoint does not hold (none: every leaf is loaded)
IGNORE_MISSING: tuple[str, ...] = ()
#: HF's `hidden_act` names -> the activation (`gelu` is the exact, erf one)
ACTIVATIONS = {
    "gelu": lambda x: jax.nn.gelu(x, approximate=False),
    "gelu_new": lambda x: jax.nn.gelu(x, approximate=True),
    "gelu_pytorch_tanh": lambda x: jax.nn.gelu(x, approximate=True),
    "relu": jax.nn.relu,
}
T = Transpose((1, 0))


@dataclass(frozen=True)
class Config:
    vocab_size: int
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    intermediate_size: int
    max_position_embeddings: int
    type_vocab_size: int = 2
    layer_norm_eps: float = 1e-12
    hidden_act: str = "gelu"
    prefix: str = ""  # "bert." in the files of BertForMaskedLM, BertForPreTraining, ...
    pooler: bool = True  # the file holds `pooler.dense.*`
    norm_names: tuple[str, str] = ("weight", "bias")  # ("gamma", "beta") in old files

    @classmethod
    def from_hf(cls, hf: dict) -> Config:
        """From a Hugging Face `config.json` (as a dict)."""
        act = str(hf.get("hidden_act", "gelu"))
        if act not in ACTIVATIONS:
            raise ShapesError(
                f"bert port: hidden_act {act!r} is not ported; it knows {', '.join(ACTIVATIONS)}"
            )
        return cls(
            int(hf["vocab_size"]),
            int(hf["hidden_size"]),
            int(hf["num_hidden_layers"]),
            int(hf["num_attention_heads"]),
            int(hf["intermediate_size"]),
            int(hf["max_position_embeddings"]),
            int(hf.get("type_vocab_size", 2)),
            float(hf.get("layer_norm_eps", 1e-12)),
            act,
        )

    @property
    def heads(self) -> tuple[int, int]:
        return self.num_attention_heads, self.hidden_size // self.num_attention_heads


def config_for(hf: dict, file_keys: Iterable[str] = ()) -> Config:
    """The config of a checkpoint: `hf` (config.json) plus what the file's keys say (the prefix,
    whether it holds the pooler, the LayerNorms' names)."""
    keys = set(file_keys)
    prefix = "bert." if any(k.startswith("bert.") for k in keys) else ""
    old_names = f"{prefix}embeddings.LayerNorm.gamma" in keys
    return replace(
        Config.from_hf(hf),
        prefix=prefix,
        pooler=not keys or f"{prefix}pooler.dense.weight" in keys,
        norm_names=("gamma", "beta") if old_names else ("weight", "bias"),
    )


class SelfAttention(nnx.Module):
    def __init__(self, c: Config, kw: dict[str, Any]) -> None:
        self.query = nnx.LinearGeneral(c.hidden_size, c.heads, **kw)
        self.key = nnx.LinearGeneral(c.hidden_size, c.heads, **kw)
        self.value = nnx.LinearGeneral(c.hidden_size, c.heads, **kw)

    def __call__(self, x: jax.Array, keep: jax.Array | None) -> jax.Array:
        return attention(self.query(x), self.key(x), self.value(x), causal=False, keep=keep)


class Layer(nnx.Module):
    """One encoder layer: post-LayerNorm attention, then the post-LayerNorm feed-forward."""

    def __init__(self, c: Config, kw: dict[str, Any]) -> None:
        d, eps = c.hidden_size, c.layer_norm_eps
        self.act = ACTIVATIONS[c.hidden_act]
        output = nnx.Dict(
            dense=nnx.LinearGeneral(c.heads, d, axis=(-2, -1), **kw),
            LayerNorm=nnx.LayerNorm(d, epsilon=eps, **kw),
        )
        self.attention = nnx.Dict({"self": SelfAttention(c, kw), "output": output})
        self.intermediate = nnx.Dict(dense=nnx.Linear(d, c.intermediate_size, **kw))
        self.output = nnx.Dict(
            dense=nnx.Linear(c.intermediate_size, d, **kw),
            LayerNorm=nnx.LayerNorm(d, epsilon=eps, **kw),
        )

    def __call__(self, x: jax.Array, keep: jax.Array | None) -> jax.Array:
        a: Any = self.attention["output"]
        x = a["LayerNorm"](x + a["dense"](self.attention["self"](x, keep)))
        h = self.act(self.intermediate["dense"](x))
        return self.output["LayerNorm"](x + self.output["dense"](h))


class Embeddings(nnx.Module):
    def __init__(self, c: Config, kw: dict[str, Any]) -> None:
        d = c.hidden_size
        self.word_embeddings = nnx.Embed(c.vocab_size, d, **kw)
        self.position_embeddings = nnx.Embed(c.max_position_embeddings, d, **kw)
        self.token_type_embeddings = nnx.Embed(c.type_vocab_size, d, **kw)
        self.LayerNorm = nnx.LayerNorm(d, epsilon=c.layer_norm_eps, **kw)

    def __call__(self, ids: jax.Array, token_type_ids: jax.Array) -> jax.Array:
        x = self.word_embeddings(ids) + self.token_type_embeddings(token_type_ids)
        return self.LayerNorm(x + self.position_embeddings(jnp.arange(ids.shape[-1])))


class Bert(nnx.Module):
    """A BERT encoder; `model(input_ids)` gives `{"last_hidden_state", "pooler_output"}` (the
    latter when the config has the pooler), as transformers' `BertModel` names its outputs."""

    def __init__(self, c: Config, *, dtype: Any = jnp.float32, rngs: nnx.Rngs) -> None:
        kw: dict[str, Any] = {"dtype": dtype, "param_dtype": dtype, "rngs": rngs}
        self.embeddings = Embeddings(c, kw)
        self.encoder = nnx.Dict(layer=nnx.List([Layer(c, kw) for _ in range(c.num_hidden_layers)]))
        if c.pooler:
            self.pooler = nnx.Dict(dense=nnx.Linear(c.hidden_size, c.hidden_size, **kw))

    def __call__(
        self,
        input_ids: jax.Array,
        token_type_ids: jax.Array | None = None,
        attention_mask: jax.Array | None = None,
    ) -> dict[str, jax.Array]:
        """The inputs as transformers names them; `attention_mask` is 1 for the tokens to attend
        to and 0 for padding."""
        types = jnp.zeros_like(input_ids) if token_type_ids is None else token_type_ids
        keep = None if attention_mask is None else attention_mask.astype(bool)
        x = self.embeddings(input_ids, types)
        for layer in self.encoder["layer"]:
            x = layer(x, keep)
        out = {"last_hidden_state": x}
        if hasattr(self, "pooler"):
            out["pooler_output"] = jnp.tanh(self.pooler["dense"](x[:, 0]))
        return out


MODEL = Bert


def key_map(c: Config) -> dict[str, object]:
    """Model state path -> HF key (and transform), for every leaf of `Bert(c)`."""
    p, d, heads = c.prefix, c.hidden_size, c.heads
    scale, bias = c.norm_names

    def norm(name: str) -> dict[str, object]:
        return {f"{name}.scale": f"{p}{name}.{scale}", f"{name}.bias": f"{p}{name}.{bias}"}

    def linear(name: str, kernel: object = T, bias: object = None) -> dict[str, object]:
        b = f"{p}{name}.bias"
        return {
            f"{name}.kernel": (f"{p}{name}.weight", kernel),
            f"{name}.bias": b if bias is None else (b, bias),
        }

    e = "embeddings."
    out = norm(f"{e}LayerNorm")
    for table in ("word_embeddings", "position_embeddings", "token_type_embeddings"):
        out[f"{e}{table}.embedding"] = f"{p}{e}{table}.weight"
    for i in range(c.num_hidden_layers):
        m = f"encoder.layer.{i}."
        for name in ("query", "key", "value"):
            out |= linear(f"{m}attention.self.{name}", (T, Reshape((d, *heads))), Reshape(heads))
        out |= linear(f"{m}attention.output.dense", (T, Reshape((*heads, d))))
        out |= norm(f"{m}attention.output.LayerNorm")
        out |= linear(f"{m}intermediate.dense") | linear(f"{m}output.dense")
        out |= norm(f"{m}output.LayerNorm")
    if c.pooler:
        out |= linear("pooler.dense")
    return out


def example_input(c: Config, tokens: int = 128) -> jax.ShapeDtypeStruct:
    """The forward's declared input: batch 1 x `tokens` token ids."""
    return jax.ShapeDtypeStruct((1, min(tokens, c.max_position_embeddings)), jnp.int32)
