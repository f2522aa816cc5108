"""The streaming executor: read, cast, transfer and assign one tensor at a time.

The host holds one tensor (two while it is cast) at any moment, whatever the checkpoint's size.
The work is one `stream` phase, with `read` / `cast` / `transfer` sub-step times. What differs
between the streaming strategies is passed in: how a tensor is read (`reader`), how it is cast on
the host (`caster`), or whether the device casts it after the transfer (`cast_on_device`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from loader.phases import CAST, READ, STREAM, TRANSFER, Probe, substep
from loader.placement.materialize import (
    Caster,
    apply_transform,
    assign,
    astype,
    host_cast,
    to_device,
)
from loader.planning.plan import LoadPlan
from loader.remote import FileSource

Reader = Callable[[str], np.ndarray]  # file key -> host array


def safetensors_reader(source: FileSource) -> Reader:
    """safetensors' own `pread` backend, a fresh host buffer per tensor."""
    return source.read


@dataclass
class Stream:
    """An `Executor` (see `loader.sequence`) that streams tensor by tensor.

    Attributes:
        reader: makes the per-tensor reader from the opened source (in `start`).
        caster: the host cast (to the dtype the leaf is stored as).
        cast_on_device: transfer in the file's dtype and cast on the device instead.
    """

    reader: Callable[[FileSource], Reader] = safetensors_reader
    caster: Caster = astype
    cast_on_device: bool = False
    _read: Reader | None = field(default=None, init=False, repr=False)

    def start(self, source: FileSource, probe: Probe) -> None:
        self._read = self.reader(source)

    def fill(self, plan: LoadPlan, source: FileSource, probe: Probe) -> None:
        assert self._read is not None, "Stream.fill before Stream.start"
        with probe.phase(STREAM):
            for step in plan.steps:
                with substep(probe, READ):
                    host = self._read(step.file_key)
                transformed = apply_transform(step, host, plan)
                if transformed is None:
                    continue
                host = transformed
                if not self.cast_on_device:
                    with substep(probe, CAST):
                        host = host_cast(step.leaf, host, self.caster)
                with substep(probe, TRANSFER):
                    value = to_device(step, host, cast_on_device=self.cast_on_device)
                assign(step.leaf, value)
                plan.report.loaded.append(step.leaf.key)
                del host, value

    def close(self) -> None:
        self._read = None
