"""The way back: a model's leaves as the tensors of the file its key map was declared from.

`save_model(model, path, key_map=..., reference=...)` writes the source layout (the file a load
with the same `key_map` reads): each leaf goes back through the inverse of its declared
transforms (`Chain.invert`: Transposes undone, Reshapes undone, Slices put back in their block
of one fused tensor; `Stack.unstack`: a stacked leaf's layers back to their own tensors), and the
leaves that share one file tensor must tile it exactly.

Everything is planned here, from the model's shapes and the reference's header, before a byte is
written: an opaque callable in the key map (it has no inverse), a leaf whose shape its transform
cannot give, parts that overlap or leave a gap, a key the reference does not hold, or a
reference tensor neither written nor declared ignored: each is one `CheckpointError` naming the
key, and no file is touched. With a `reference` (the file the port was loaded from), the stored
shapes come from its header and the tensors the port ignores (`ignore_unexpected`) are copied
from it byte for byte, so a fine-tuned port is written back whole.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from loader.errors import CheckpointError
from loader.format.records import TensorInfo
from loader.format.source import CheckpointSource
from loader.planning.keys import (
    KeyMap,
    Path,
    key_of,
    path_str,
    resolve_file_key,
    resolve_quantized,
    resolve_stack,
)
from loader.planning.policy import DEFAULT_POLICY, LoadPolicy
from loader.transforms import Chain, Part, Region, Stack, TransformError, tile_check


@dataclass(frozen=True)
class SavedLeaf:
    """One leaf of the model as it will be stored: its path, value, dtype name and shape; or one
    layer of a stacked leaf (`index` into the value, `shape` the layer's)."""

    path: Path
    value: Any
    dtype: str
    shape: tuple[int, ...]
    index: tuple[slice | int, ...] | None = None

    @property
    def where(self) -> str:
        layer = "" if self.index is None else f" (layer {self.index[-1]})"
        return f"{path_str(self.path)}{layer}"

    def stored_value(self) -> Any:
        """The value to store: the leaf's, or its layer (sliced on its device, not on the host)."""
        return self.value if self.index is None else self.value[self.index]


@dataclass(frozen=True)
class Piece:
    """One leaf's share of a file tensor: the leaf, its transforms and the block it fills."""

    leaf: SavedLeaf
    chain: Chain | None
    region: Region

    def place(self, host: np.ndarray, shape: tuple[int, ...]) -> Part:
        """The leaf's host copy taken back to its block of the file tensor of `shape`."""
        if self.chain is None:
            return Part.whole(host)
        return self.chain.invert(Part.whole(host), shape)


@dataclass(frozen=True)
class SourceTensor:
    """One tensor of the file to write: from the model's pieces, or copied from the reference."""

    key: str
    dtype: str
    shape: tuple[int, ...]
    pieces: tuple[Piece, ...] = ()
    copied: TensorInfo | None = None


def _chain_of(model_key: str, transform: object) -> Chain | None:
    if transform is None or isinstance(transform, Chain):
        return transform
    raise CheckpointError(
        f"save_model: key_map entry for {model_key!r} has an opaque transform ({transform!r}), "
        "which has no inverse; declare it with loader.Transpose / Reshape / Slice to save it back"
    )


Mapped = tuple[SavedLeaf, Chain | None]


def _stored_shape(key: str, mapped: list[Mapped], ref: TensorInfo | None) -> tuple[int, ...]:
    """The file tensor's shape: the reference's, or what a leaf's transforms say alone."""
    if ref is not None:
        return ref.shape
    for leaf, chain in mapped:
        stored = leaf.shape if chain is None else chain.in_shape(leaf.shape)
        if stored is not None:
            return stored
    leaf, chain = mapped[0]
    raise CheckpointError(
        f"save_model: file key {key!r} (from {leaf.where} through {chain}) needs its "
        "stored shape, which a Reshape or a Slice does not say; pass reference= (the file the "
        "model was loaded from) so its header gives it"
    )


def _piece(leaf: SavedLeaf, chain: Chain | None, key: str, stored: tuple[int, ...]) -> Piece:
    """The block of the stored tensor `key` that `leaf` fills, checked from shapes alone."""
    if chain is None:
        if leaf.shape != stored:
            raise CheckpointError(
                f"save_model: {leaf.where} has shape {leaf.shape}, but file key {key!r} is {stored}"
            )
        return Piece(leaf, None, Part.of_shape(stored).region)
    try:
        return Piece(leaf, chain, chain.invert(Part.of_shape(leaf.shape), stored).region)
    except TransformError as exc:
        raise CheckpointError(
            f"save_model: {leaf.where} cannot go back to file key {key!r} {stored}: {exc}"
        ) from None


def _tensor(key: str, mapped: list[Mapped], ref: TensorInfo | None) -> SourceTensor:
    """The file tensor `key` from its leaves: they tile it exactly, in one dtype."""
    stored = _stored_shape(key, mapped, ref)
    pieces = tuple(_piece(leaf, chain, key, stored) for leaf, chain in mapped)
    names = ", ".join(p.leaf.where for p in pieces)
    problem = tile_check(stored, [p.region for p in pieces])
    if problem:
        raise CheckpointError(
            f"save_model: file key {key!r} {stored} from {names}: {problem}; every value must "
            "come from exactly one leaf (check the key map's Slices)"
        )
    dtypes = sorted({leaf.dtype for leaf, _ in mapped})
    if len(dtypes) > 1:
        raise CheckpointError(
            f"save_model: file key {key!r} from {names}: the leaves differ in dtype "
            f"({', '.join(dtypes)}); one tensor has one dtype"
        )
    return SourceTensor(key, dtypes[0], stored, pieces)


def _by_file_key(
    leaves: Sequence[SavedLeaf], key_map: KeyMap | None, file_keys: set[str], policy: LoadPolicy
) -> dict[str, list[Mapped]]:
    grouped: dict[str, list[Mapped]] = {}
    for leaf in leaves:
        model_key = key_of(leaf.path)
        if policy.ignores_missing(model_key):
            continue
        quantized = resolve_quantized(model_key, key_map)
        if quantized is not None:
            raise CheckpointError(
                f"save_model: {leaf.where}: its key_map entry {quantized} dequantizes on load, "
                "and save_model does not quantize: save without that key_map (the float "
                "layout), or keep the layer quantized in the model to write it as stored"
            )
        stack = resolve_stack(model_key, key_map)
        if stack is not None:
            for file_key, layer in _unstacked(leaf, stack):
                grouped.setdefault(file_key, []).append((layer, stack.transform))
            continue
        file_key, transform = resolve_file_key(model_key, file_keys, key_map)
        grouped.setdefault(file_key, []).append((leaf, _chain_of(model_key, transform)))
    return grouped


def _unstacked(leaf: SavedLeaf, stack: Stack) -> list[tuple[str, SavedLeaf]]:
    """A stacked leaf's layers, each with its file key (`Stack.unstack`, the Stack's inverse)."""
    try:
        layers = stack.unstack(leaf.shape)
    except TransformError as exc:
        raise CheckpointError(f"save_model: {leaf.where}: {exc}") from None
    axis = stack.leaf_axis(len(leaf.shape) - 1)
    shape = leaf.shape[:axis] + leaf.shape[axis + 1 :]
    return [(key, replace(leaf, shape=shape, index=index)) for key, index in layers]


def plan_writeback(
    leaves: Sequence[SavedLeaf],
    key_map: KeyMap | None,
    reference: CheckpointSource | None,
    policy: LoadPolicy = DEFAULT_POLICY,
) -> list[SourceTensor]:
    """Every tensor of the source layout, in key order; `CheckpointError` before any write.

    Args:
        leaves: every leaf of the model, as it will be stored.
        key_map: the key map the load used (declared transforms only).
        reference: the file the model was loaded from (its header, and the ignored tensors).
        policy: the load's declared ignores: the reference keys it ignored (`ignore_unexpected`)
            are copied from the reference; the model paths it ignored (`ignore_missing`) are
            left out.

    Example:
        >>> tensors = plan_writeback(leaves, gpt2.key_map(config), CheckpointSource(path))
    """
    ref_keys = set(reference.keys()) if reference is not None else set()
    grouped = _by_file_key(leaves, key_map, ref_keys, policy)
    if reference is None:
        return sorted((_tensor(k, m, None) for k, m in grouped.items()), key=lambda t: t.key)
    stray = sorted(set(grouped) - ref_keys)
    if stray:
        raise CheckpointError(
            f"save_model: {len(stray)} file key(s) are not in the reference {reference.path}, "
            f"first {stray[0]!r} (from {grouped[stray[0]][0][0].where}); check the "
            "key map, or leave the leaf out with ignore_missing="
        )
    out = [_tensor(k, m, reference.info(k)) for k, m in grouped.items()]
    for key in sorted(ref_keys - set(grouped)):
        if not policy.ignores_unexpected(key):
            raise CheckpointError(
                f"save_model: reference tensor {key!r} ({reference.path}) is neither written from "
                "the model nor declared ignored; pass the load's ignore_unexpected= (the ignored "
                "tensors are copied from the reference)"
            )
        info = reference.info(key)
        out.append(SourceTensor(key, info.dtype, info.shape, copied=info))
    return sorted(out, key=lambda t: t.key)


def copy_bytes(reference: CheckpointSource, info: TensorInfo) -> np.ndarray:
    """A reference tensor's stored bytes (any dtype), read as they are."""
    raw = np.empty(info.nbytes, np.uint8)
    reference.read_into(info.name, raw)
    return raw
