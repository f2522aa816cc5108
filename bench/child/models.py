"""The model a child loads the checkpoint into (`bench run --model`), and how it is verified.

- `spec`: the mirror model (`shapes.model_builder`): state paths are the file's keys; verified
  against the synthetic checkpoint's digests (`bench.child.verify.verify_model`).
- `port`: the shape set's real architecture (`shapes.architectures.port.port_for`) with its key
  map from Hugging Face's names and layouts; `port-scanned`: its scanned-layer variant, each
  stacked leaf filled from the per-layer tensors through `loader.Stack`.
- `transposed`: the mirror model with every 2-D tensor stored transposed in the model, read
  through `loader.Transpose((1, 0))`: what a port of torch `nn.Linear` weights does to every byte.
- `zoo`: a model zoo's own class (tunix's `Llama3`, `bench.child.zoo`), through a key map built
  from tunix's own mapping; strategy `tunix` loads it with tunix's own loader.
- `MODULE:NAME`: the user's own model factory, with its `--key-map MODULE:NAME` if given,
  imported here in the child (`bench.user_model`).

A port or transposed model is verified leaf by leaf: the file tensor (its mapped pages, outside the
measured phases), through the key map's transform (a quantized layout's tensors dequantized by its
numpy path, `Quantized.host`), cast to the leaf's dtype, bit for bit, a few leaves side by side
(`bench.child.verify.checked_in_order`). A user's model is planned again against the file once
loaded (`loader.plan`'s matching, headers only): a path the file lacks, a key nothing asks for, a
shape or dtype the key map gets wrong makes it `wrong`, naming them; else every leaf the plan
fills is checked the same way, whether the key map named it or not.
Worker side: imports jax and flax.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np

from bench import user_model
from bench.records.wire import ChildTask
from bench.vocabulary import PORT_SCANNED, PORTS, TRANSPOSED, ZOO

Builder = Callable[[], Any]


def transposed_spec(spec):
    """`spec` with every 2-D tensor's shape swapped (what the model holds)."""
    tensors = tuple(
        dataclasses.replace(t, shape=t.shape[::-1]) if len(t.shape) == 2 else t
        for t in spec.tensors
    )
    return dataclasses.replace(spec, tensors=tensors)


def target(task: ChildTask, spec) -> tuple[Builder, dict[str, Any] | None, Any]:
    """(builder, key_map, port or None) of the task's model."""
    import shapes
    from loader.transforms import Transpose

    dtype = task.model_dtype or task.dtype
    if user_model.is_named(task.model):
        named = None if task.key_map is None else user_model.resolve(task.key_map, "--key-map")
        return user_model.builder(task.model), named, None
    if task.model in PORTS:
        from shapes.architectures.port import port_for

        port = port_for(spec, dtype=dtype, seed=task.seed, scanned=task.model == PORT_SCANNED)
        return port.builder, port.key_map, port
    if task.model == ZOO:
        from bench.child import zoo

        builder, zoo_key_map = zoo.target(spec, task.seed)
        return builder, zoo_key_map, None
    if task.model == TRANSPOSED:
        flip = Transpose((1, 0))
        key_map: dict[str, Any] = {
            t.name: (t.name, flip) for t in spec.tensors if len(t.shape) == 2
        }
        return (
            shapes.model_builder(transposed_spec(spec), dtype=dtype, seed=task.seed),
            key_map,
            None,
        )
    return shapes.model_builder(spec, dtype=dtype, seed=task.seed), None, None


def _check(key: str, array, want: np.ndarray) -> None:
    import shapes
    from bench.child.verify import same_bits

    if tuple(array.shape) != want.shape:
        raise shapes.VerificationError(
            f"leaf {key!r}: shape {tuple(array.shape)}, expected {want.shape}"
        )
    shards = getattr(array, "addressable_shards", None)  # none here: another process's to check
    for shard in [None] if shards is None else shards:
        got = np.asarray(array if shard is None else shard.data)
        part = want if shard is None else want[shard.index]
        if not same_bits(got, part):
            raise shapes.VerificationError(
                f"leaf {key!r} differs from its file tensor through the key map; the loader "
                "placed wrong data"
            )


def _file_tensor(source, key: str) -> np.ndarray:
    """A file tensor as a read-only view of its mapped pages (the page cache's own: a read into
    fresh memory cost a TPU v5e host 1 s a GB, most of a port's check there)."""
    info = source.info(key)
    if info.nbytes == 0:
        return np.empty(info.shape, info.np_dtype)
    return np.memmap(
        source.file_of(key), info.np_dtype, "r", source.file_offset(key), tuple(info.shape)
    )


def _expected(source, key: str, entry: Any, dtype: Any) -> np.ndarray:
    """The leaf `entry` makes of the file: a tensor through its transform, a Stack's layers
    stacked, or a quantized layout's tensors dequantized into the leaf's `dtype` by the layout's
    numpy path (`Quantized.host`, the reference the device program is checked against), all with
    numpy outside the measured phases."""
    from loader.transforms import as_chain, as_quantized, as_stack

    stack = as_stack(entry)
    if stack is not None:
        return stack([_file_tensor(source, k) for k in stack.keys])
    quantized = as_quantized(entry)
    if quantized is not None:
        tensors = {r: _file_tensor(source, k) for r, k in quantized.keys.items()}
        return quantized.host(tensors, np.dtype(dtype))
    file_key, raw = entry if isinstance(entry, tuple) else (entry, None)
    transform: Any = as_chain(raw, key)
    host = _file_tensor(source, file_key)
    return host if transform is None else np.asarray(transform(host))


def _check_leaf(source, key: str, array: Any, entry: Any) -> None:
    _check(key, array, _expected(source, key, entry, array.dtype))


def verify_mapped(model, checkpoint: str, key_map: dict[str, Any]) -> tuple[int, str | None]:
    """Check every key-mapped leaf against its file tensor. Returns (checked, first error)."""
    from bench.child.verify import checked_in_order, flat_leaves, leaf_nbytes
    from loader.format.source import CheckpointSource

    leaves = flat_leaves(model)
    missing = [k for k in key_map if k not in leaves]
    if missing:
        return 0, f"{len(missing)} key-mapped leaves not in the loaded model, e.g. {missing[:3]}"
    with CheckpointSource(checkpoint) as source:
        checked, error = checked_in_order(
            list(key_map),
            lambda key: _check_leaf(source, key, leaves[key], key_map[key]),
            lambda key: leaf_nbytes(leaves[key]),
        )
    return checked, None if error is None else str(error)


def verify_planned(model, checkpoint: str, key_map: Any) -> tuple[int, str | None]:
    """A user's model (`--model MODULE:NAME`), once loaded: the load planned again against the
    file's headers; its problems, by name, where it has any (a strict load would have raised);
    else every leaf the plan fills checked against its file tensor (`verify_mapped`). Returns
    (leaves checked, first error or None).

    Example:
        >>> verify_planned(model, "model.safetensors", {"dense.kernel": "w"})
        (2, None)
    """
    from loader.format.source import CheckpointSource
    from loader.planning.match import plan_load

    if model is None:
        return 0, "the strategy returned no model (only reference strategies may)"
    with CheckpointSource(checkpoint) as source:
        planned = plan_load(model, source, key_map=key_map)
    problems = planned.report.problems()
    if problems:
        return 0, f"{len(problems)} problem(s) in the load: {user_model.problems_text(problems)}"
    filled: dict[str, Any] = {s.leaf.key: (s.file_key, s.transform) for s in planned.steps}
    filled |= {s.leaf.key: s.stack for s in planned.stacked}
    return verify_mapped(model, checkpoint, filled)
