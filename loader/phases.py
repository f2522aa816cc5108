"""The probe interface a strategy reports its phases through (the bench implements it).

A strategy wraps each part of its work in `probe.phase(NAME)`, NAME one of `loader.vocabulary`'s
phases (re-exported here). Outside the bench the probe is `NULL_PROBE`, which does nothing. A
streaming strategy that interleaves reading, casting and transferring tensor by tensor reports one
`stream` phase and accumulates the time of each sub-step with `probe.add_time(SUBSTEP, seconds)`.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Protocol, runtime_checkable

from loader.vocabulary import ASSEMBLE, BUILD, CAST, DEQUANTIZE, PHASES, READ, STREAM, TRANSFER

__all__ = [
    "ASSEMBLE",
    "BUILD",
    "CAST",
    "DEQUANTIZE",
    "NULL_PROBE",
    "PHASES",
    "READ",
    "STREAM",
    "TRANSFER",
    "NullProbe",
    "Probe",
    "substep",
]


@runtime_checkable
class Probe(Protocol):
    """What a strategy may call. The bench's probe measures RSS and time per phase."""

    def phase(self, name: str) -> contextlib.AbstractContextManager[None]: ...

    def add_time(self, substep: str, seconds: float) -> None: ...


class NullProbe:
    """A probe that measures nothing: the default outside the bench."""

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        yield

    def add_time(self, substep: str, seconds: float) -> None:
        return None


NULL_PROBE = NullProbe()


@contextlib.contextmanager
def substep(probe: Probe, name: str) -> Iterator[None]:
    """Time a sub-step of a `stream` phase and add it to the probe's accumulated time for `name`."""
    start = time.perf_counter()
    try:
        yield
    finally:
        probe.add_time(name, time.perf_counter() - start)
