"""`port_for(preset)`: a preset's real architecture, its config, builder, key map and input.

The config comes from the preset's `config.json` values (the architecture's `PRESET_CONFIGS`)
and the checkpoint's keys (GPT-2's prefix and stored mask); the model is built in the
checkpoint's float dtype unless `dtype` says otherwise. The key map is checked against the
abstract model's own state paths (a tied embedding is one leaf, named as `nnx.state` names it).
The architecture's declared ignores (`IGNORE_UNEXPECTED` / `IGNORE_MISSING`, glob patterns for
every checkpoint of the family) are carried as far as they concern this preset: an
`ignore_unexpected` pattern that matches none of the preset's keys is left out (a strict load
reports a pattern that matches nothing).

A preset in a quantized layout (compressed-tensors FP8 or pack-quantized int4) is built in the
float dtype of its unquantized tensors (bfloat16 for Llama's) and its key map reads each weight
through its layout (`key_map(config, quant=)`, `loader.Dequantize` / `loader.Unpack`), so the
load dequantizes; the layout is read from the file's tensors (`quant_layout`).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from loader.format import DTYPES
from loader.target.abstract import abstract_build
from shapes.architectures import (
    ARCHITECTURES,
    SCANNED,
    declared_for,
    port_names,
    scanned_port_names,
)
from shapes.architectures.layers import checked
from shapes.catalog import load_spec
from shapes.content import FLOAT_DTYPES, effective_dtype, normalize_dtype
from shapes.errors import ShapesError
from shapes.quantized import Role, role
from shapes.spec import ShapeSpec


@dataclass(frozen=True)
class Port:
    """A preset's real model: what `load_model` and a compiled forward need."""

    preset: str
    architecture: str
    config: Any
    builder: Callable[[], nnx.Module]
    key_map: dict[str, object]
    example_input: jax.ShapeDtypeStruct
    ignore_unexpected: tuple[str, ...] = ()  # for `load_model(ignore_unexpected=)`
    ignore_missing: tuple[str, ...] = ()  # for `load_model(ignore_missing=)`


def architecture(preset: str, *, scanned: bool = False) -> ModuleType:
    """The architecture module of `preset` (its scanned variant's with `scanned=True`);
    `ShapesError` listing the presets that have one."""
    names = scanned_port_names() if scanned else port_names()
    if preset not in names:
        what = "a scanned-layer architecture" if scanned else "a real architecture"
        raise ShapesError(
            f"shape set {preset!r} has no {what}; those that have one: {', '.join(names)}"
        )
    arch = ARCHITECTURES[preset]
    return importlib.import_module(f"shapes.architectures.{SCANNED[arch] if scanned else arch}")


#: the quantized layout of a weight's role -> the `quant=` of an architecture's `key_map`
LAYOUT_OF = {Role.FP8_WEIGHT: "fp8", Role.PACKED: "int4"}


def _roles(spec: ShapeSpec) -> dict[str, Role | None]:
    names = {t.name for t in spec.tensors}
    return {t.name: role(t.name, t.dtype, names.__contains__) for t in spec.tensors}


def quant_layout(spec: ShapeSpec) -> str | None:
    """The quantized layout of a shape set's weights (`key_map(config, quant=)`): "fp8", "int4",
    or None for a plain checkpoint; `ShapesError` for a mix or a layout no port reads.

    Example:
        >>> quant_layout(load_spec("tiny-llama-int4"))
        'int4'
    """
    roles = {r for r in _roles(spec).values() if r is not None}
    layouts = {LAYOUT_OF[r] for r in roles if r in LAYOUT_OF}
    others = {r for r in roles if r in (Role.FP4_BLOCKS, Role.INPUT_SCALE)}
    if len(layouts) > 1 or others:
        found = ", ".join(sorted(r.value for r in roles))
        raise ShapesError(
            f"shape set {spec.name!r} holds {found}: the ports read compressed-tensors FP8 "
            "(weight + weight_scale) or pack-quantized int4, one layout a checkpoint"
        )
    return layouts.pop() if layouts else None


def _float_dtype(spec: ShapeSpec) -> str:
    """The checkpoint's float dtype: its plain tensors' most common (not a quantized layout's)."""
    roles = _roles(spec)
    floats = [t.dtype for t in spec.tensors if t.dtype in FLOAT_DTYPES and roles[t.name] is None]
    return max(set(floats), key=floats.count) if floats else "F32"


def port_for(
    spec: ShapeSpec | str, *, dtype: Any = None, seed: int = 0, scanned: bool = False
) -> Port:
    """The port of a preset (a name, or its `ShapeSpec`), built in `dtype` (default: the file's).

    With `scanned=True`, the architecture's scanned-layer variant (layers stacked into one leaf
    per parameter, filled through `loader.Stack`).
    """
    spec = load_spec(spec)
    preset = spec.name or ""
    module = architecture(preset, scanned=scanned)
    config = module.config_for(module.PRESET_CONFIGS[preset], [t.name for t in spec.tensors])
    name = effective_dtype(_float_dtype(spec), None if dtype is None else normalize_dtype(dtype))
    model_dtype = jnp.dtype(DTYPES[name])

    def build() -> nnx.Module:
        return module.MODEL(config, dtype=model_dtype, rngs=nnx.Rngs(seed))

    arch = module.__name__.rsplit(".", 1)[-1]
    quant = quant_layout(spec)
    raw_map = module.key_map(config) if quant is None else module.key_map(config, quant=quant)
    key_map = checked(raw_map, abstract_build(build), arch)
    ignore_unexpected = declared_for(module.IGNORE_UNEXPECTED, (t.name for t in spec.tensors))
    return Port(
        preset,
        arch,
        config,
        build,
        key_map,
        module.example_input(config),
        ignore_unexpected,
        tuple(module.IGNORE_MISSING),
    )
