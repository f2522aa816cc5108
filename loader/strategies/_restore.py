"""The executor of the strategies that hand orbax every planned tensor in one call: `orbax` (its
own converted tree) and `orbax-safetensors` (the `.safetensors` file itself).

`Restore(restore)` asks `restore(source, abstract)` once for a flat dict of planned file keys,
each a `jax.ShapeDtypeStruct` with the leaf's sharding (phase `read`): orbax reads each process's
own ranges and places them. A leaf orbax cannot produce as it is stored (a Python scalar, a leaf
whose `key_map` transform runs on the host) is asked whole, unsharded, and goes through the core's
transform, cast and placement instead (`cast`); the arrays are then put into the model (`assemble`).

`ask_model_dtype`: a floating tensor is asked in the model's dtype, so orbax casts it while it
places it (what a user handing orbax the model's abstract state gets); otherwise in the file's
dtype, cast here on the device. An integer tensor is always asked in the file's dtype (its
narrowing is checked value by value here, which orbax's cast does not do). With `read_host`, a
tensor of a dtype jax would narrow on placement (64-bit with x64 off, where orbax's assembly would
truncate it in silence) is not asked of orbax but read by `read_host(source, key)` and narrowed
value-checked by the core, like a zero-size tensor.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jax
import numpy as np

from loader.format import numpy_dtype
from loader.materialize import apply_transform, assign, host_cast, to_device
from loader.phases import ASSEMBLE, CAST, READ, Probe
from loader.planning import LoadPlan, Source, Step

#: (the source, {file key: abstract array}) -> {file key: restored array}
Restorer = Callable[[Any, dict[str, jax.ShapeDtypeStruct]], dict[str, Any]]
#: (the source, a file key) -> that tensor as a host array
HostReader = Callable[[Any, str], np.ndarray]


def whole(step: Step) -> bool:
    """Restored as a host array (then transformed/placed by the core) rather than onto devices."""
    return step.leaf.kind == "scalar" or step.transform is not None


def _asked_dtype(step: Step, file_dtype: np.dtype, ask_model_dtype: bool) -> np.dtype:
    """The dtype orbax is asked for: the model's for a floating tensor placed as it is (with
    `ask_model_dtype`), else the file's."""
    leaf = step.leaf
    floating = np.issubdtype(file_dtype, np.floating) or file_dtype.kind == "V"  # ml_dtypes
    if ask_model_dtype and leaf.kind == "array" and not whole(step) and floating:
        model_dtype: np.dtype = np.dtype(leaf.dtype)
        return model_dtype
    return file_dtype


def narrowed_by_jax(dtype: np.dtype) -> bool:
    """Whether jax would hold a `dtype` array in another dtype (64-bit types with x64 off)."""
    return bool(jax.dtypes.canonicalize_dtype(dtype) != dtype)


def abstract_tree(
    plan: LoadPlan, source: Source, *, ask_model_dtype: bool, skip_narrowed: bool = False
) -> dict[str, jax.ShapeDtypeStruct]:
    """The flat abstract dict orbax restores: every planned, non-empty file key, with its shape,
    the dtype asked (`_asked_dtype`) and the leaf's sharding (none for a leaf restored `whole`);
    with `skip_narrowed`, not a tensor jax would narrow (`narrowed_by_jax`)."""
    abstract = {}
    for step in plan.steps:
        info = source.info(step.file_key)
        if not info.numel or (skip_narrowed and narrowed_by_jax(numpy_dtype(info.dtype))):
            continue
        dtype = _asked_dtype(step, numpy_dtype(info.dtype), ask_model_dtype)
        sharding = None if whole(step) else step.sharding
        abstract[step.file_key] = jax.ShapeDtypeStruct(info.shape, dtype, sharding=sharding)
    return abstract


def _value(
    step: Step, restored: Any, plan: LoadPlan, source: Source, read_host: HostReader | None
) -> Any:
    """The leaf's value from its restored array (None: a transform's shape was wrong)."""
    leaf = step.leaf
    if restored is None:  # not asked of orbax: a zero-size tensor, or one jax would narrow
        info = source.info(step.file_key)
        if info.numel and read_host is not None:
            restored = read_host(source, step.file_key)
        else:
            restored = np.empty(info.shape, numpy_dtype(info.dtype))
    if whole(step) or isinstance(restored, np.ndarray):
        host = apply_transform(step, restored, plan)
        return None if host is None else to_device(step, host_cast(leaf, host))
    if leaf.kind == "prng":
        return jax.random.wrap_key_data(restored, impl=leaf.dtype._impl)
    return restored if restored.dtype == leaf.dtype else restored.astype(leaf.dtype)


@dataclass
class Restore:
    """An `Executor` (see `loader.sequence`): one orbax call for every planned key (`read`),
    then casts on the device and host transforms (`cast`), then the arrays put into the model
    (`assemble`)."""

    restore: Restorer
    ask_model_dtype: bool = False
    read_host: HostReader | None = None

    def start(self, source: Source, probe: Probe) -> None:
        return None

    def fill(self, plan: LoadPlan, source: Source, probe: Probe) -> None:
        with probe.phase(READ):
            abstract = abstract_tree(
                plan,
                source,
                ask_model_dtype=self.ask_model_dtype,
                skip_narrowed=self.read_host is not None,
            )
            restored = self.restore(source, abstract) if abstract else {}
            del abstract
        with probe.phase(CAST):
            uses = Counter(step.file_key for step in plan.steps)  # a Slice shares a tensor
            values = []
            for step in plan.steps:
                uses[step.file_key] -= 1
                last = not uses[step.file_key]
                array = restored.pop(step.file_key, None) if last else restored.get(step.file_key)
                values.append((step, _value(step, array, plan, source, self.read_host)))
        del restored
        with probe.phase(ASSEMBLE):
            for step, value in values:
                if value is not None:
                    assign(step.leaf, value)
                    plan.report.loaded.append(step.leaf.key)
            del values

    def close(self) -> None:
        return None
