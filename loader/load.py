"""`load_model`: a `.safetensors` checkpoint into an NNX model, never loading random weights in silence."""

from __future__ import annotations

import os
from typing import Any

from loader.keys import KeyMap
from loader.materialize import fill_skipped, stream_steps
from loader.phases import BUILD, NULL_PROBE, Probe
from loader.plan import plan_load
from loader.report import LoadReport
from loader.source import CheckpointSource
from loader.target import resolve_target


def stream_load(
    target: Any,
    path: str | os.PathLike,
    probe: Probe = NULL_PROBE,
    *,
    strict: bool = False,
    key_map: KeyMap | None = None,
    cast_on_device: bool = False,
) -> tuple[Any, LoadReport]:
    """Build (abstractly, for a builder) then stream tensors one at a time with `pread`.

    The plan is made from headers before any tensor is read, so `strict=True` refuses a
    mismatched checkpoint before touching the model.
    """
    with CheckpointSource(path) as source:
        with probe.phase(BUILD):
            model, abstract = resolve_target(target)
        plan = plan_load(model, source, key_map=key_map)
        plan.report.raise_or_warn(strict=strict)
        stream_steps(plan, source.read, probe, cast_on_device=cast_on_device)
        fill_skipped(plan, abstract=abstract)
    if plan.report.shape_mismatches and strict:  # a transform's shape, only known after the read
        plan.report.raise_or_warn(strict=True)
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

        return strategies.get(strategy).load(target, path, NULL_PROBE, strict=strict, key_map=key_map)
    return stream_load(target, path, strict=strict, key_map=key_map)
