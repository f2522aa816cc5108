"""Reads start before the build, on several threads, into buffers the device adopts; casts in chunks.

The reads need only the header, so reader threads start at once while the model is built
abstractly, and each leaf gets its buffer when both are ready (`loader.pipeline`). With
`strict=True` nothing is read before the plan check passes: during the build the threads only
allocate and prefault buffers. Host bytes in flight beyond the model's own stay within `budget`
(default `loader.pipeline.DEFAULT_BUDGET_BYTES`, 256 MiB); the high-water mark is reported in
`LoadReport.inflight_peak_bytes`.
"""

from __future__ import annotations

import os
from typing import Any

from loader.format.source import CheckpointSource
from loader.keys import KeyMap
from loader.materialize import fill_skipped
from loader.phases import BUILD, NULL_PROBE, Probe
from loader.pipeline import Pipeline
from loader.plan import plan_load
from loader.report import LoadReport
from loader.target import resolve_target


def load(
    target: Any,
    path: str | os.PathLike,
    probe: Probe = NULL_PROBE,
    *,
    strict: bool = False,
    key_map: KeyMap | None = None,
    budget: int | None = None,
) -> tuple[Any, LoadReport]:
    """Build `target` abstractly while reader threads fill host buffers; then place every leaf."""
    with CheckpointSource(path) as source:
        pipeline = Pipeline(budget=budget, strict=strict)
        try:
            pipeline.start(source, probe)
            with probe.phase(BUILD):
                model, abstract = resolve_target(target)
            plan = plan_load(model, source, key_map=key_map)
            plan.report.raise_or_warn(strict=strict)
            checked = len(plan.report.shape_mismatches)
            pipeline.fill(plan, source, probe)
        finally:
            pipeline.close()
        plan.report.inflight_peak_bytes = pipeline.stats.inflight_peak_bytes
        fill_skipped(plan, abstract=abstract)
    late = plan.report.shape_mismatches[checked:]  # a transform's output, known only after the read
    if late:
        LoadReport(path=plan.report.path, shape_mismatches=late).raise_or_warn(strict=strict)
    return model, plan.report
