"""The phase-by-phase executor of `eager` and `mmap`: each phase over every tensor.

Unlike streaming, every tensor goes through one phase before any goes through the next, which is
what a naive load does and why it peaks at several copies of the checkpoint.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from loader.format.source import CheckpointSource
from loader.phases import ASSEMBLE, CAST, READ, TRANSFER, Probe
from loader.placement.materialize import apply_transform, assign, host_cast, to_device
from loader.planning.plan import LoadPlan, Step

ReadAll = Callable[[CheckpointSource, LoadPlan], dict[str, np.ndarray]]
Transfer = Callable[[Step, np.ndarray], Any]


@dataclass
class Phased:
    """An `Executor` (see `loader.sequence`): read all, cast all, transfer all, assemble all."""

    read_all: ReadAll
    transfer: Transfer = to_device

    def start(self, source: CheckpointSource, probe: Probe) -> None:
        return None

    def fill(self, plan: LoadPlan, source: CheckpointSource, probe: Probe) -> None:
        with probe.phase(READ):
            hosts = self.read_all(source, plan)
        with probe.phase(CAST):
            ready = []
            for step in plan.steps:
                host = apply_transform(step, hosts[step.file_key], plan)
                if host is not None:
                    ready.append((step, host_cast(step.leaf, host)))
        with probe.phase(TRANSFER):
            values = [(step, self.transfer(step, host)) for step, host in ready]
            del ready, hosts
        with probe.phase(ASSEMBLE):
            for step, value in values:
                assign(step.leaf, value)
                plan.report.loaded.append(step.leaf.key)
            del values

    def close(self) -> None:
        return None
