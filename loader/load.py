"""`load_model`: a `.safetensors` checkpoint into an NNX model, never loading random weights in silence."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from loader.format.source import CheckpointSource
from loader.keys import KeyMap
from loader.materialize import Caster, Reader, fill_skipped, stream_steps
from loader.phases import BUILD, NULL_PROBE, Probe
from loader.plan import LoadPlan, plan_load
from loader.report import LoadReport
from loader.target import build_instance, resolve_target


def stream_load(
    target: Any,
    path: str | os.PathLike,
    probe: Probe = NULL_PROBE,
    *,
    strict: bool = False,
    key_map: KeyMap | None = None,
    cast_on_device: bool = False,
    random_init: bool = False,
    reader: Callable[[CheckpointSource], Reader] | None = None,
    caster: Caster | None = None,
    assembler: Callable[[CheckpointSource], Any] | None = None,
    adjust_plan: Callable[[LoadPlan, CheckpointSource], None] | None = None,
) -> tuple[Any, LoadReport]:
    """Build (abstractly for a builder, unless `random_init`) then stream tensors with `pread`.

    The plan is made from headers before any tensor is read, so `strict=True` refuses a
    mismatched checkpoint before touching the model.
    """
    with CheckpointSource(path) as source:
        with probe.phase(BUILD):
            model, abstract = (
                (build_instance(target), False) if random_init else resolve_target(target)
            )
        plan = plan_load(model, source, key_map=key_map)
        if adjust_plan:
            adjust_plan(plan, source)
        plan.report.raise_or_warn(strict=strict)
        checked = len(plan.report.shape_mismatches)
        read = reader(source) if reader else source.read
        extra = {"caster": caster} if caster else {}
        slices = assembler(source) if assembler else None
        try:
            assemble = slices.assemble if slices else None
            stream_steps(
                plan, read, probe, cast_on_device=cast_on_device, assemble=assemble, **extra
            )
        finally:
            if slices:
                slices.close()
        fill_skipped(plan, abstract=abstract)
    late = plan.report.shape_mismatches[checked:]  # a transform's output, known only after the read
    if late:
        LoadReport(path=plan.report.path, shape_mismatches=late).raise_or_warn(strict=strict)
    return model, plan.report


def load_model(
    target: Any,
    path: str | os.PathLike,
    *,
    strict: bool = False,
    key_map: KeyMap | None = None,
    strategy: str | None = None,
) -> tuple[Any, LoadReport]:
    """Load a checkpoint into an NNX model.

    Args:
        target: an `nnx.Module` instance (filled in place), or a zero-argument builder, built
            abstractly (`nnx.eval_shape` semantics) so that no random model ever exists.
        path: a `.safetensors` file, or a folder of shards (with or without an index).
        strict: raise `loader.CheckpointError` listing every mismatch instead of warning.
        key_map: model key -> file key (or (file key, transform)), or a callable doing the same.
        strategy: a registered strategy name (`loader.strategies.names()`); default: stream
            with `pread`, casting on the host.

    Returns:
        (model, LoadReport). Each problem in the report was also warned about (or raised).

    Example:
        >>> model, report = loader.load_model(lambda: MLP(rngs=nnx.Rngs(0)), "mlp.safetensors")
    """
    if strategy is not None:
        from loader import strategies

        return strategies.get(strategy).load(
            target, path, NULL_PROBE, strict=strict, key_map=key_map
        )
    return stream_load(target, path, strict=strict, key_map=key_map)
