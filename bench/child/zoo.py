"""`bench run --model zoo`: a JAX model zoo's own model class, tunix's `Llama3` (google-tunix),
loaded through its own loader (strategy `tunix`) or through ours with a key map built from
tunix's own mapping.

`target(spec, seed)` gives (a `ZooBuilder`, the key map). The builder builds `Llama3` with the
`ModelConfig` the preset's `config.json` gives (`shapes.architectures.llama.PRESET_CONFIGS`:
`llama3-8b`, `tinyllama-1.1b`), its float parameters declared in the file's dtype: tunix's classes
declare float32 and tunix's loader puts the file's bf16 arrays in as they are (it casts only when
asked), so the model holds what tunix's own load gives and a bit-exact comparison is possible.
The key map runs every file key through tunix's regex mapping (`torch_key_to_jax_key`): its
`(permute, reshape)` rule becomes `loader.Transpose` then `loader.Reshape`. Worker side: imports
jax, flax and tunix (`make zoo`); tunix's modules are imported and its model built inside
`loader.strategies.tunix.tunix_flax`, so flax's config is as tunix needs it there and unchanged
for everything else.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from bench.errors import BenchError

ZOO_PRESETS = ("llama3-8b", "tinyllama-1.1b")  # llama-shaped presets with a config.json here


def tunix_llama3() -> tuple[ModuleType, ModuleType]:
    """tunix's `llama3.model` and `llama3.params` modules, flax's global config left as it was."""
    from loader.strategies.tunix import tunix_flax

    with tunix_flax():
        from tunix.models.llama3 import model, params
    return model, params


def zoo_config(preset: str) -> Any:
    """tunix's `Llama3` `ModelConfig` of a llama-shaped preset, from its `config.json`."""
    from shapes.architectures.llama import PRESET_CONFIGS

    llama3, _ = tunix_llama3()

    if preset not in ZOO_PRESETS:
        raise BenchError(
            f"--model zoo: shape set {preset!r} has no tunix model here; "
            f"those that have one: {', '.join(ZOO_PRESETS)}"
        )
    hf: Any = PRESET_CONFIGS[preset]  # a config.json: values of assorted types
    heads = int(hf["num_attention_heads"])
    return llama3.ModelConfig(
        num_layers=int(hf["num_hidden_layers"]),
        vocab_size=int(hf["vocab_size"]),
        embed_dim=int(hf["hidden_size"]),
        hidden_dim=int(hf["intermediate_size"]),
        num_heads=heads,
        head_dim=int(hf["hidden_size"]) // heads,
        num_kv_heads=int(hf["num_key_value_heads"]),
        rope_theta=int(hf["rope_theta"]),
        norm_eps=float(hf["rms_norm_eps"]),
        weight_tying=bool(hf["tie_word_embeddings"]),
    )


@dataclass(frozen=True)
class ZooBuilder:
    """A builder of tunix's model that says how tunix would load it (`loader.strategies.tunix`'s
    `ZooTarget`): its class, config and tunix's key mapping."""

    model_class: type
    config: Any
    key_mapping: Callable[[Any], Mapping[str, Any]]
    dtype: Any
    seed: int = 0

    def __call__(self) -> Any:
        """The model, its float leaves in `dtype` (the file's); cheap under `nnx.eval_shape`."""
        import jax.numpy as jnp
        from flax import nnx

        from loader.leaves import iter_variables
        from loader.strategies.tunix import tunix_flax

        with tunix_flax():
            model = self.model_class(self.config, rngs=nnx.Rngs(params=self.seed))
        for _, var in iter_variables(model):
            value = var.get_value()
            if jnp.issubdtype(value.dtype, jnp.floating):
                var.set_value(value.astype(self.dtype))
        return model


def key_map(file_keys: list[str], mapping: Mapping[str, Any]) -> dict[str, Any]:
    """Model key -> (file key, transforms) for every file key tunix's `mapping` names."""
    from tunix.utils.torch_utils import torch_key_to_jax_key

    from loader.transforms import Reshape, Transpose

    out: dict[str, Any] = {}
    for file_key in file_keys:
        try:
            model_key, rule = torch_key_to_jax_key(mapping, file_key)
        except ValueError:
            continue  # tunix skips it too (and logs it)
        permute, reshape = rule if rule is not None else (None, None)
        steps = ([Transpose(tuple(permute))] if permute else []) + (
            [Reshape(tuple(reshape))] if reshape else []
        )
        out[model_key] = (file_key, tuple(steps)) if steps else file_key
    return out


def target(spec: Any, seed: int = 0) -> tuple[ZooBuilder, dict[str, Any]]:
    """(tunix's `Llama3` builder for the preset, the key map from tunix's own mapping)."""
    import jax.numpy as jnp

    from loader.format import numpy_dtype

    llama3, params = tunix_llama3()

    config = zoo_config(spec.name or "")
    mapping = params._get_key_and_transform_mapping  # tunix's own, as its loader uses it
    floats = [t.dtype for t in spec.tensors if t.dtype in ("BF16", "F16", "F32")]
    dtype = jnp.dtype(numpy_dtype(max(set(floats), key=floats.count))) if floats else jnp.float32
    builder = ZooBuilder(llama3.Llama3, config, mapping, dtype, seed)
    return builder, key_map([t.name for t in spec.tensors], mapping(config))
