"""Match a model's leaves to a checkpoint's keys, from headers alone, and report every mismatch.

The walk is driven by the model: each expected leaf is looked up by its own key (integer list
indices as strings; the `/`-joined form of older tools accepted; `key_map` renames and transforms).
File keys that no leaf asked for are reported as unexpected, unless a declared pattern ignores
them (`loader.planning.policy`); a cast is judged on the dtype the transform gives
(`loader.placement.casts`).
Missing and unexpected names come with the closest existing name (difflib), and a key_map entry
that names no model path is reported. Every strategy plans through here, so mismatches are
reported identically whichever strategy runs.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Sequence
from functools import partial

import jax
import numpy as np
from jax.sharding import Sharding

from loader.errors import CheckpointError
from loader.format import TensorMeta, dtype_name, numpy_dtype
from loader.format.dtypes import refuse_packed
from loader.placement.casts import cast_kind
from loader.placement.leaves import META_PRNG, META_SHARDINGS, Leaf, LeafKind, model_leaves
from loader.placement.place import concrete_sharding, describe_sharding
from loader.planning.keys import (
    KeyMap,
    Lookup,
    Transform,
    look_up,
    resolve_quantized,
    resolve_stack,
)
from loader.planning.plan import LoadPlan, PlanEntry, QuantGroup, Source, Stacked, Step
from loader.planning.policy import DEFAULT_POLICY, LoadPolicy
from loader.planning.quantized import check_quantized, host_sharding, part_leaves
from loader.planning.stacking import check_stack, layer_leaves
from loader.report import (
    LEFT_AT_INIT,
    LEFT_AT_ZEROS,
    CastKind,
    DtypeCast,
    LoadReport,
    MissingKey,
    ShapeMismatch,
    ShardingChange,
    UnexpectedKey,
    UnmatchedIgnore,
    UnusedEntry,
)
from loader.transforms import Chain, Stack, TransformError
from loader.transforms.quant import Quantized
from loader.vocabulary import (
    ALLOW,
    CAST_VERDICT,
    DTYPE_MISMATCH,
    IGNORED,
    LOAD,
    MISSING,
    SHAPE_MISMATCH,
    TRANSFORM,
    UNEXPECTED,
)


def _stored(
    shape: tuple[int, ...], dtype: np.dtype, transform: Transform | None
) -> tuple[tuple[int, ...], np.dtype] | None:
    """The shape and dtype after `transform`, found without data; None if it cannot be traced.

    A declared chain keeps the dtype. An opaque callable is traced with 64-bit types on, so an
    I64 tensor stays int64 and a callable returning int32 is judged as int32 (jax's 32-bit mode
    would turn every int64 into int32 before the callable saw it).
    """
    if transform is None:
        return shape, dtype
    if isinstance(transform, Chain):
        return transform.out_shape(shape), dtype  # TransformError: cannot apply (the caller's)
    try:
        # a lambda, not `transform` itself: jax.eval_shape(np.transpose, ...) crashed the process
        # when repeated (jax 0.10.2)
        with jax.enable_x64(True):
            out = jax.eval_shape(lambda x: transform(x), jax.ShapeDtypeStruct(shape, dtype))
        return tuple(out.shape), np.dtype(out.dtype)
    except Exception:  # a numpy-only transform: checked after the read instead
        return None


def _transform_name(transform: object) -> str:
    if transform is None:
        return ""
    if isinstance(transform, Chain):
        return str(transform)
    return getattr(transform, "__qualname__", None) or type(transform).__name__


def _check_leaf(
    leaf: Leaf,
    lookup: Lookup,
    source: Source,
    plan: LoadPlan,
    saved_impls: dict[str, str],
    policy: LoadPolicy,
) -> bool:
    """Check one leaf against its file tensor, append its entry; False: not to be read."""
    report, file_key, transform = plan.report, lookup.file_key, lookup.transform
    info = source.info(file_key)
    _refuse_packed(leaf, info)
    want_shape, want_dtype = leaf.stored_shape_dtype()
    try:
        got = _stored(info.shape, info.np_dtype, transform)
    except TransformError as exc:
        got, result = ((), info.np_dtype), f"an error ({exc})"
    else:
        result = "" if got is None else str(got[0])
    entry = partial(
        PlanEntry,
        leaf.key,
        want_shape,
        _dtype_str(want_dtype),
        file_key,
        info.shape,
        info.dtype,
        _transform_name(transform),
    )
    if got is not None and got[0] != want_shape:
        named = str(transform) if isinstance(transform, Chain) else ""
        report.shape_mismatches.append(
            ShapeMismatch(
                leaf.key, file_key, want_shape, info.shape, named, result if named else ""
            )
        )
        plan.entries.append(entry(SHAPE_MISMATCH, f"gives {got[0]}" if transform else ""))
        return False
    out_dtype = info.np_dtype if got is None else got[1]
    cast = None
    if leaf.kind is LeafKind.ARRAY and out_dtype != want_dtype:
        cast = _judged_cast(leaf.key, out_dtype, want_dtype, policy)
    if leaf.kind is LeafKind.PRNG:
        saved_impl = saved_impls.get(file_key)
        model_impl = str(leaf.dtype._impl.name)
        if info.np_dtype != want_dtype or (saved_impl and saved_impl != model_impl):
            cast = DtypeCast(
                leaf.key,
                f"key<{saved_impl}> data {info.dtype}",
                f"key<{model_impl}>",
                CastKind.KEY,
            )
    if cast is not None:
        report.casts.append(cast)
        verdict = CAST_VERDICT if cast.expected else DTYPE_MISMATCH
        plan.entries.append(entry(verdict, f"{cast.file_dtype} -> {cast.model_dtype}"))
    else:
        plan.entries.append(entry(TRANSFORM if transform is not None else LOAD))
    return True


def _refuse_packed(leaf: Leaf, info: TensorMeta) -> None:
    """A packed F4 / F6 tensor cannot be a leaf as stored: refused by name, before any read."""
    if info.packed:
        raise CheckpointError(f"{leaf.where}: {refuse_packed(info.dtype, f'tensor {info.name!r}')}")


def _judged_cast(path: str, got: np.dtype, want: np.dtype, policy: LoadPolicy) -> DtypeCast:
    """The cast from `got` (what the transform gives) to the model's `want`, judged: an integer
    cast is exact (values checked on the read), a float one expected under `casts="allow"`."""
    kind = cast_kind(got, want)
    allowed = kind is CastKind.FLOAT and policy.casts == ALLOW
    return DtypeCast(
        path, dtype_name(got), dtype_name(want), kind, kind is CastKind.INTEGER or allowed
    )


def _dtype_str(dtype: object) -> str:
    try:
        return dtype_name(np.dtype(dtype))  # type: ignore[call-overload]
    except (TypeError, KeyError, ValueError):
        return str(dtype)


def _sharding_change(
    leaf: Leaf, placed: Sharding, saved: dict[str, str], report: LoadReport
) -> None:
    before = saved.get(leaf.key)
    after = describe_sharding(placed)
    if before is not None and before != after:
        report.sharding_changes.append(ShardingChange(leaf.key, before, after))


def _claim(users: dict[str, tuple[str, bool]], leaf: Leaf, file_key: str, t: object) -> None:
    """Record that `leaf` reads `file_key`; two leaves may share a tensor only through Slices."""
    sliced = isinstance(t, Chain) and t.slices
    other = users.setdefault(file_key, (leaf.key, sliced))
    if other[0] != leaf.key and not (sliced and other[1]):
        raise CheckpointError(
            f"key_map sends both {other[0]!r} and {leaf.key!r} to file key {file_key!r}; leaves "
            "can share one tensor only through loader.Slice (each taking its own part)"
        )


def _note_transform(report: LoadReport, leaf: Leaf, transform: object) -> None:
    if isinstance(transform, Chain):
        report.transformed.append(leaf.key)
    elif transform is not None:
        report.staged.append(leaf.key)


def _plan_stack(
    plan: LoadPlan,
    leaf: Leaf,
    stack: Stack,
    source: Source,
    used: dict[str, tuple[str, bool]],
    saved_shardings: dict[str, str],
    policy: LoadPolicy,
) -> None:
    """A stacked leaf: checked from the headers, then one step per layer
    (`loader.planning.stacking`)."""
    for key in stack.keys:
        if key in source:
            _claim(used, leaf, key, stack.transform)
            _refuse_packed(leaf, source.info(key))
    shape, dtype = leaf.stored_shape_dtype()
    first = stack.keys[0] if stack.keys else ""
    info = source.info(first) if first in source else None
    entry = partial(
        PlanEntry,
        leaf.key,
        shape,
        _dtype_str(dtype),
        f"{first} .. {stack.keys[-1]}" if len(stack.keys) > 1 else first,
        () if info is None else info.shape,
        "" if info is None else info.dtype,
        str(stack),
    )
    report, casts = plan.report, len(plan.report.casts)
    if not check_stack(leaf, stack, source, report):
        _turned_down(plan, leaf, entry, policy, "")
        return
    if len(report.casts) > casts:  # judge the stack's cast by the policy, as any other
        cast = report.casts.pop()
        want = np.dtype(leaf.dtype)
        report.casts.append(_judged_cast(leaf.key, numpy_dtype(cast.file_dtype), want, policy))
    note = f"{len(stack.keys)} file tensors stacked"
    plan.entries.append(entry(TRANSFORM, note))
    sharding = concrete_sharding(leaf.sharding, leaf.where)
    _sharding_change(leaf, sharding, saved_shardings, plan.report)
    group = Stacked(leaf, stack, sharding)
    host = jax.sharding.SingleDeviceSharding(jax.local_devices(backend="cpu")[0])
    for (part, layer), key in zip(layer_leaves(group), stack.keys):
        plan.steps.append(Step(part, key, stack.transform, host, layer))
    plan.stacked.append(group)
    plan.report.stacked.append(leaf.key)


def _turned_down(
    plan: LoadPlan, leaf: Leaf, entry: partial[PlanEntry], policy: LoadPolicy, why: str
) -> None:
    """A leaf of several file tensors its checks turned down: missing (none of its keys is in
    the file; or ignored, where a pattern says so), else a shape mismatch (`why`)."""
    report = plan.report
    plan.skipped.append(leaf)
    if report.missing[-1:] != [leaf.key]:
        plan.entries.append(entry(SHAPE_MISMATCH, why))
        return
    pattern = policy.ignores_missing(leaf.key)
    if pattern is not None:
        report.missing.pop()
        report.ignored.append(leaf.key)
    plan.entries.append(entry(MISSING if pattern is None else IGNORED))


def _plan_quantized(
    plan: LoadPlan,
    leaf: Leaf,
    q: Quantized,
    source: Source,
    used: dict[str, tuple[str, bool]],
    policy: LoadPolicy,
) -> None:
    """A leaf made from a quantized layout: checked from the headers, then one step per file
    tensor it reads (`loader.planning.quantized`)."""
    for key in q.file_keys:
        if key in source:
            _claim(used, leaf, key, None)
    shape, dtype = leaf.stored_shape_dtype()
    first = q.file_keys[0]
    info = source.info(first) if first in source else None
    entry = partial(
        PlanEntry,
        leaf.key,
        shape,
        _dtype_str(dtype),
        " + ".join(q.file_keys),
        () if info is None else info.shape,
        "" if info is None else info.dtype,
        str(q),
    )
    report = plan.report
    if not check_quantized(leaf, q, source, report):
        mismatches = report.shape_mismatches
        _turned_down(plan, leaf, entry, policy, mismatches[-1].result if mismatches else "")
        return
    infos = {role: source.info(key) for role, key in q.keys.items()}
    group = QuantGroup(leaf, q, concrete_sharding(leaf.sharding, leaf.where), infos)
    leaf_bytes = leaf.stored_shape_dtype()[1].itemsize * int(np.prod(shape))
    note = f"{q.layout}: moves {group.file_bytes} B for a {leaf_bytes} B leaf"
    plan.entries.append(entry(TRANSFORM, note))
    host = host_sharding(group)
    for key, part in part_leaves(group, host):
        plan.steps.append(Step(part, key, None, host))
    plan.quantized.append(group)
    report.dequantized.append(leaf.key)


def _plan_many(  # noqa: PLR0913  the planner's state, passed through
    plan: LoadPlan,
    leaf: Leaf,
    source: Source,
    key_map: KeyMap | None,
    used: dict[str, tuple[str, bool]],
    lookups: dict[str, Lookup],
    saved_shardings: dict[str, str],
    policy: LoadPolicy,
) -> bool:
    """Plan a leaf made from several file tensors (a quantized layout, a Stack); False: it is
    not one."""
    quantized = resolve_quantized(leaf.key, key_map)
    stack = resolve_stack(leaf.key, key_map) if quantized is None else None
    if quantized is not None:
        _plan_quantized(plan, leaf, quantized, source, used, policy)
        first, entry = quantized.file_keys[0], f"{leaf.key!r} -> {quantized}"
    elif stack is not None:
        _plan_stack(plan, leaf, stack, source, used, saved_shardings, policy)
        first = stack.keys[0] if stack.keys else leaf.key
        entry = f"{leaf.key!r} -> {stack}"
    else:
        return False
    if plan.report.missing[-1:] == [leaf.key]:
        lookups[leaf.key] = Lookup(first, None, entry)
    return True


_DIGITS = re.compile(r"\d+")
#: flax's leaf names and PyTorch's for the same tensor: a skeleton ends in PyTorch's
_LEAF_NAMES = {"kernel": "weight", "scale": "weight", "embedding": "weight"}


def _skeleton(name: str, *, leaf_names: bool) -> str:
    """`name`, each digit run as `#`; with `leaf_names`, a flax leaf name as PyTorch's
    (`kernel` -> `weight`)."""
    stem, dot, leaf = _DIGITS.sub("#", name).rpartition(".")
    return f"{stem}{dot}{_LEAF_NAMES.get(leaf, leaf) if leaf_names else leaf}"


def _numbers(name: str) -> tuple[str, ...]:
    return tuple(_DIGITS.findall(name))


class ClosestNames:
    """The closest of `candidates` to each name asked, cheap for thousands of names.

    difflib over every pair is quadratic in the names (a 12-layer encoder's first load, 200
    mismatches against 200 names, already takes seconds). Names are compared by their skeleton
    first (each digit run read as `#`; where none is close, flax's `kernel`, `scale` and
    `embedding` also read as `weight`): a model has a few dozen skeletons however many layers, so
    difflib runs over skeletons only, once per skeleton asked. The answer is the candidate of the
    closest skeleton with the same numbers (the same layer), else difflib's pick among that
    skeleton's candidates; "" where no skeleton is close.

    Example:
        >>> ClosestNames(["encoder.layer.3.attention.query.weight"])("layer.3.query.kernel")
        'encoder.layer.3.attention.query.weight'
        >>> ClosestNames(["h.0.attn.c_attn.weight", "h.1.attn.c_attn.weight"])("h.1.attn.c_attn")
        'h.1.attn.c_attn.weight'
    """

    def __init__(self, candidates: Sequence[str]) -> None:
        self._by_skeleton: dict[tuple[bool, str], dict[tuple[str, ...], str]] = {}
        for name in candidates:
            for leaf_names in (False, True):
                key = (leaf_names, _skeleton(name, leaf_names=leaf_names))
                self._by_skeleton.setdefault(key, {}).setdefault(_numbers(name), name)
        self._skeletons = {
            flag: [s for f, s in self._by_skeleton if f == flag] for flag in (False, True)
        }
        self._closest_skeleton: dict[tuple[bool, str], str] = {}

    def _closest(self, name: str, leaf_names: bool) -> str:
        key = (leaf_names, _skeleton(name, leaf_names=leaf_names))
        if key not in self._closest_skeleton:
            found = difflib.get_close_matches(key[1], self._skeletons[leaf_names], n=1)
            self._closest_skeleton[key] = found[0] if found else ""
        return self._closest_skeleton[key]

    def __call__(self, name: str) -> str:
        leaf_names = not self._closest(name, False)
        closest = self._closest(name, leaf_names)
        if not closest:
            return ""
        group = self._by_skeleton[(leaf_names, closest)]
        same_numbers = group.get(_numbers(name))
        if same_numbers is not None:
            return same_numbers
        found = difflib.get_close_matches(name, list(group.values()), n=1, cutoff=0.0)
        return found[0]


def _diagnose(
    plan: LoadPlan,
    lookups: dict[str, Lookup],
    file_keys: set[str],
    model_keys: list[str],
    key_map: KeyMap | None,
) -> None:
    """The closest existing names for the missing and unexpected ones, and the key_map entries
    that name no model path."""
    report = plan.report
    spare = ClosestNames(sorted(report.unexpected) or sorted(file_keys))
    for path in report.missing:
        lookup = lookups.get(path, Lookup(path))
        closest = spare(lookup.file_key)
        report.missing_keys.append(MissingKey(path, lookup.file_key, lookup.entry, closest))
    wanted = ClosestNames(
        [lookups[p].file_key for p in report.missing if p in lookups] or model_keys
    )
    for file_key in report.unexpected:
        report.unexpected_keys.append(UnexpectedKey(file_key, wanted(file_key)))
    if key_map is None or callable(key_map):
        return
    paths, model_names = set(model_keys), ClosestNames(model_keys)
    for model_key, mapped in key_map.items():
        if model_key not in paths:
            target = mapped[0] if isinstance(mapped, tuple) else mapped
            report.unused_key_map.append(
                UnusedEntry(model_key, str(target), model_names(model_key))
            )


def _unexpected(plan: LoadPlan, source: Source, unused: list[str], policy: LoadPolicy) -> None:
    """Unused file keys: ignored where a declared pattern matches, unexpected otherwise."""
    matched: set[str] = set()
    for file_key in unused:
        pattern = policy.ignores_unexpected(file_key)
        info = source.info(file_key)
        row = partial(PlanEntry, "", (), "", file_key, info.shape, info.dtype, "")
        if pattern is None:
            plan.report.unexpected.append(file_key)
            plan.entries.append(row(UNEXPECTED))
        else:
            matched.add(pattern)
            plan.report.ignored.append(file_key)
            plan.entries.append(row(IGNORED, f"ignore_unexpected={pattern!r}"))
    for pattern in policy.ignore_unexpected:
        if pattern not in matched:
            plan.report.unmatched_ignores.append(UnmatchedIgnore("ignore_unexpected", pattern))


def plan_load(
    model: object,
    source: Source,
    *,
    key_map: KeyMap | None = None,
    policy: LoadPolicy = DEFAULT_POLICY,
    abstract: bool = False,
) -> LoadPlan:
    """Plan a load of `source` into `model` (a module, possibly abstract) from headers only.

    Args:
        model: the built model (abstract or not).
        source: the checkpoint's keys and headers.
        key_map: model key -> file key (and transform), or a callable (see `loader.planning.keys`).
        policy: the declared ignores and cast policy (`loader.planning.policy.LoadPolicy`).
        abstract: the model is abstract: what is not loaded is left at zeros (the report says so).
    """
    metadata = source.metadata
    saved_shardings = json.loads(metadata.get(META_SHARDINGS, "{}"))
    saved_impls = json.loads(metadata.get(META_PRNG, "{}"))
    plan = LoadPlan(report=LoadReport(path=str(source.path)))
    plan.report.left_at = LEFT_AT_ZEROS if abstract else LEFT_AT_INIT
    file_keys = set(source.keys())
    used: dict[str, tuple[str, bool]] = {}
    lookups: dict[str, Lookup] = {}
    ignored_missing: set[str] = set()
    leaves = model_leaves(model, metadata)
    for leaf in leaves:
        if _plan_many(plan, leaf, source, key_map, used, lookups, saved_shardings, policy):
            continue
        lookup = look_up(leaf.key, file_keys, key_map)
        file_key, transform = lookup.file_key, lookup.transform
        if file_key not in file_keys:
            pattern = policy.ignores_missing(leaf.key)
            row = partial(
                PlanEntry,
                leaf.key,
                leaf.stored_shape_dtype()[0],
                _dtype_str(leaf.stored_shape_dtype()[1]),
                file_key,
                (),
                "",
                _transform_name(transform),
            )
            if pattern is None:
                plan.report.missing.append(leaf.key)
                lookups[leaf.key] = lookup
                plan.entries.append(row(MISSING))
            else:
                ignored_missing.add(pattern)
                plan.report.ignored.append(leaf.key)
                plan.entries.append(
                    row(IGNORED, f"ignore_missing={pattern!r}; {plan.report.left_at}")
                )
            plan.skipped.append(leaf)
            continue
        _claim(used, leaf, file_key, transform)
        if not _check_leaf(leaf, lookup, source, plan, saved_impls, policy):
            plan.skipped.append(leaf)
            continue
        sharding = leaf.concrete_sharding()
        if sharding is not None:
            _sharding_change(leaf, sharding, saved_shardings, plan.report)
        plan.steps.append(Step(leaf, file_key, transform, sharding))
        _note_transform(plan.report, leaf, transform)
    plan.report.unmatched_ignores += [
        UnmatchedIgnore("ignore_missing", p)
        for p in policy.ignore_missing
        if p not in ignored_missing
    ]
    _unexpected(plan, source, sorted(file_keys - set(used)), policy)
    _diagnose(plan, lookups, file_keys, [leaf.key for leaf in leaves], key_map)
    plan.steps.sort(key=lambda s: (str(source.file_of(s.file_key)), source.file_offset(s.file_key)))
    return plan
