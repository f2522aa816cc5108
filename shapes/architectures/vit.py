"""ViT in NNX, with the key map from Hugging Face's `ViTForImageClassification` (preset `vit-base`).

The patch embedding is a torch `Conv2d`, stored OIHW; `nnx.Conv` keeps HWIO
(`loader.Transpose((2, 3, 1, 0))`). The query, key and value `nn.Linear` weights `(out, in)`
become `(d, heads, head_dim)` kernels (a Transpose, then a Reshape), the attention output
`(heads, head_dim, d)`; the MLP and the classifier are `nnx.Linear` kernels (a Transpose). The
model takes images NHWC (`(1, 224, 224, 3)`), where HF takes NCHW.

    >>> config = Config.from_hf(PRESET_CONFIGS["vit-base"])
    >>> model, report = loader.load_model(lambda: ViT(config, rngs=nnx.Rngs(0)),
    ...     "model.safetensors", key_map=key_map(config), strict=True)
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from loader.transforms import Reshape, Transpose
from shapes.architectures.layers import attention

PRESET_CONFIGS = {  # google/vit-base-patch16-224's config.json
    "vit-base": {
        "hidden_size": 768,
        "num_hidden_layers": 12,
        "num_attention_heads": 12,
        "intermediate_size": 3072,
        "image_size": 224,
        "patch_size": 16,
        "num_channels": 3,
        "layer_norm_eps": 1e-12,
        "num_labels": 1000,
    }
}

#: File keys of ViT checkpoints that the classifier port does not need (`load_model(
#: ignore_unexpected=)`): the pooler head that `ViTModel(add_pooling_layer=True)` saves (the
#: classifier reads the [CLS] token, not the pooler).
IGNORE_UNEXPECTED: tuple[str, ...] = ("vit.pooler.*",)
IGNORE_MISSING: tuple[str, ...] = ()
T = Transpose((1, 0))


@dataclass(frozen=True)
class Config:
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    intermediate_size: int
    image_size: int
    patch_size: int
    num_channels: int
    num_labels: int
    layer_norm_eps: float = 1e-12

    @classmethod
    def from_hf(cls, hf: dict) -> Config:
        """From a Hugging Face `config.json` (as a dict)."""
        labels = hf.get("num_labels") or len(hf.get("id2label") or {}) or 2
        return cls(
            int(hf["hidden_size"]),
            int(hf["num_hidden_layers"]),
            int(hf["num_attention_heads"]),
            int(hf["intermediate_size"]),
            int(hf["image_size"]),
            int(hf["patch_size"]),
            int(hf.get("num_channels", 3)),
            int(labels),
            float(hf.get("layer_norm_eps", 1e-12)),
        )

    @property
    def heads(self) -> tuple[int, int]:
        return self.num_attention_heads, self.hidden_size // self.num_attention_heads


class SelfAttention(nnx.Module):
    def __init__(self, c: Config, kw: dict[str, Any]) -> None:
        self.query = nnx.LinearGeneral(c.hidden_size, c.heads, **kw)
        self.key = nnx.LinearGeneral(c.hidden_size, c.heads, **kw)
        self.value = nnx.LinearGeneral(c.hidden_size, c.heads, **kw)


class Layer(nnx.Module):
    def __init__(self, c: Config, kw: dict[str, Any]) -> None:
        d = c.hidden_size
        self.layernorm_before = nnx.LayerNorm(d, epsilon=c.layer_norm_eps, **kw)
        self.attention = nnx.Dict(
            attention=SelfAttention(c, kw),
            output=nnx.Dict(dense=nnx.LinearGeneral(c.heads, d, axis=(-2, -1), **kw)),
        )
        self.layernorm_after = nnx.LayerNorm(d, epsilon=c.layer_norm_eps, **kw)
        self.intermediate = nnx.Dict(dense=nnx.Linear(d, c.intermediate_size, **kw))
        self.output = nnx.Dict(dense=nnx.Linear(c.intermediate_size, d, **kw))

    def __call__(self, x: jax.Array) -> jax.Array:
        a: Any = self.attention["attention"]
        h = self.layernorm_before(x)
        mixed = attention(a.query(h), a.key(h), a.value(h), causal=False)
        output: Any = self.attention["output"]
        x = x + output["dense"](mixed)
        h = jax.nn.gelu(self.intermediate["dense"](self.layernorm_after(x)), approximate=False)
        return x + self.output["dense"](h)


class Embeddings(nnx.Module):
    def __init__(self, c: Config, kw: dict[str, Any]) -> None:
        d, p, n = c.hidden_size, c.patch_size, (c.image_size // c.patch_size) ** 2
        dtype = kw["param_dtype"]
        self.cls_token = nnx.Param(jnp.zeros((1, 1, d), dtype))
        self.position_embeddings = nnx.Param(jnp.zeros((1, n + 1, d), dtype))
        conv = nnx.Conv(c.num_channels, d, (p, p), strides=(p, p), padding="VALID", **kw)
        self.patch_embeddings = nnx.Dict(projection=conv)

    def __call__(self, images: jax.Array) -> jax.Array:
        x = self.patch_embeddings["projection"](images)
        x = x.reshape(x.shape[0], -1, x.shape[-1])
        cls = jnp.broadcast_to(self.cls_token[...], (x.shape[0], 1, x.shape[-1]))
        return jnp.concatenate([cls, x], axis=1) + self.position_embeddings[...]


class Encoder(nnx.Module):
    def __init__(self, c: Config, kw: dict[str, Any]) -> None:
        self.embeddings = Embeddings(c, kw)
        self.encoder = nnx.Dict(layer=nnx.List([Layer(c, kw) for _ in range(c.num_hidden_layers)]))
        self.layernorm = nnx.LayerNorm(c.hidden_size, epsilon=c.layer_norm_eps, **kw)


class ViT(nnx.Module):
    """A ViT image classifier; `model(images)` (NHWC) gives class logits."""

    def __init__(self, c: Config, *, dtype: Any = jnp.float32, rngs: nnx.Rngs) -> None:
        kw: dict[str, Any] = {"dtype": dtype, "param_dtype": dtype, "rngs": rngs}
        self.vit = Encoder(c, kw)
        self.classifier = nnx.Linear(c.hidden_size, c.num_labels, **kw)

    def __call__(self, images: jax.Array) -> jax.Array:
        x = self.vit.embeddings(images)
        for layer in self.vit.encoder["layer"]:
            x = layer(x)
        return self.classifier(self.vit.layernorm(x)[:, 0])


MODEL = ViT


def config_for(hf: dict, file_keys: Iterable[str] = ()) -> Config:
    """The config of a checkpoint: its `config.json` (the keys say nothing more here)."""
    return Config.from_hf(hf)


def key_map(c: Config) -> dict[str, object]:
    """Model state path -> HF key (and transform), for every leaf of `ViT(c)`."""
    d, heads = c.hidden_size, c.heads
    e = "vit.embeddings."
    out: dict[str, object] = {f"{e}cls_token": f"{e}cls_token"}
    out[f"{e}position_embeddings"] = f"{e}position_embeddings"
    proj = f"{e}patch_embeddings.projection."
    out |= {
        f"{proj}kernel": (f"{proj}weight", Transpose((2, 3, 1, 0))),
        f"{proj}bias": f"{proj}bias",
    }
    out |= {
        "vit.layernorm.scale": "vit.layernorm.weight",
        "vit.layernorm.bias": "vit.layernorm.bias",
    }
    out |= {"classifier.kernel": ("classifier.weight", T), "classifier.bias": "classifier.bias"}
    for i in range(c.num_hidden_layers):
        m = f"vit.encoder.layer.{i}."
        for ln in ("layernorm_before", "layernorm_after"):
            out |= {f"{m}{ln}.scale": f"{m}{ln}.weight", f"{m}{ln}.bias": f"{m}{ln}.bias"}
        for name in ("query", "key", "value"):
            a = f"{m}attention.attention.{name}."
            out[f"{a}kernel"] = (f"{a}weight", (T, Reshape((d, *heads))))
            out[f"{a}bias"] = (f"{a}bias", Reshape(heads))
        o = f"{m}attention.output.dense."
        out |= {f"{o}kernel": (f"{o}weight", (T, Reshape((*heads, d)))), f"{o}bias": f"{o}bias"}
        for dense in ("intermediate.dense.", "output.dense."):
            out |= {
                f"{m}{dense}kernel": (f"{m}{dense}weight", T),
                f"{m}{dense}bias": f"{m}{dense}bias",
            }
    return out


def example_input(c: Config) -> jax.ShapeDtypeStruct:
    """The forward's declared input: one NHWC image."""
    return jax.ShapeDtypeStruct((1, c.image_size, c.image_size, c.num_channels), jnp.float32)
