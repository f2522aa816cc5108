"""Shared body of the phase-by-phase strategies (`eager`, `mmap`): each phase over every tensor.

Unlike streaming, every tensor goes through one phase before any goes through the next, which is
what a naive load does and why it peaks at several copies of the checkpoint.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np

from loader.format.source import CheckpointSource
from loader.keys import KeyMap
from loader.materialize import apply_transform, assign, host_cast, to_device
from loader.phases import ASSEMBLE, BUILD, CAST, READ, TRANSFER, Probe
from loader.plan import LoadPlan, Step, plan_load
from loader.report import LoadReport
from loader.target import build_instance

ReadAll = Callable[[CheckpointSource, LoadPlan], dict[str, np.ndarray]]
Transfer = Callable[[Step, np.ndarray], Any]


def phased_load(
    target: Any,
    path: str | os.PathLike,
    probe: Probe,
    read_all: ReadAll,
    *,
    strict: bool,
    key_map: KeyMap | None,
    transfer: Transfer = to_device,
) -> tuple[Any, LoadReport]:
    """Random init, then read all, cast all, transfer all, and assemble all."""
    with CheckpointSource(path) as source:
        with probe.phase(BUILD):
            model = build_instance(target)
        plan = plan_load(model, source, key_map=key_map)
        plan.report.raise_or_warn(strict=strict)
        with probe.phase(READ):
            hosts = read_all(source, plan)
        with probe.phase(CAST):
            ready = []
            for step in plan.steps:
                host = apply_transform(step, hosts[step.file_key], plan)
                if host is not None:
                    ready.append((step, host_cast(step.leaf, host)))
        with probe.phase(TRANSFER):
            values = [(step, transfer(step, host)) for step, host in ready]
            del ready, hosts
        with probe.phase(ASSEMBLE):
            for step, value in values:
                assign(step.leaf, value)
                plan.report.loaded.append(step.leaf.key)
            del values
    return model, plan.report
