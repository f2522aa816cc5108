"""A layout's shard files as the slice reader sees them: a header, and byte runs read into a buffer.

`SliceFile` is what `loader.sharded.slices.SliceReader` reads through; `LocalSliceFile` is a local
file (`os.preadv`), `loader.sharded.remote.RemoteSliceFile` a remote one (checked range requests,
planned over every read the load will make: `loader.sharded.read_plan`).
A `loader.sharded.layout.LayoutSource` opens its files as one or the other.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Protocol

import numpy as np

from loader.format import Header, read_header
from loader.format.source import pread_exact
from loader.sharded.read_plan import PlanFigures, Run


class SliceFile(Protocol):
    """One open shard file: its header, and reads of byte runs into a host buffer."""

    header: Header

    def plan(self, reads: list[list[Run]], max_over_read: float | None = None) -> None:
        """Every read the load will make of this file (each a list of runs, as `read_runs` will
        get it), told ahead so that the file can plan how to read them all, reading at most
        `max_over_read` times their bytes where given (a lower bound than the file's own)."""
        ...

    def plan_figures(self, reads: list[list[Run]]) -> PlanFigures:
        """The requests (or reads) and bytes `reads` would take, planned as `plan` would plan
        them, without planning or reading anything (what `share="auto"` weighs)."""
        ...

    def read_runs(self, raw: np.ndarray, runs: list[Run], *, what: str) -> None:
        """Fill the uint8 array `raw`: `raw[a : a + n]` from the file's bytes at `offset`, for
        each run `(a, offset, n)`; `what` (the slice) is named in errors."""
        ...

    def close(self) -> None: ...


class LocalSliceFile:
    """A local shard file, its header validated (`read_header`), runs read with `os.preadv`."""

    def __init__(self, path: Path) -> None:
        self.header = read_header(path)
        self._path = path
        self._fd = os.open(path, os.O_RDONLY)

    def plan(self, reads: list[list[Run]], max_over_read: float | None = None) -> None:
        return None  # a local run is one `preadv`: nothing to gain from reading through gaps

    def plan_figures(self, reads: list[list[Run]]) -> PlanFigures:
        lengths = [n for runs in reads for _, _, n in runs if n]  # one `preadv` per run
        return PlanFigures(len(lengths), sum(lengths), sum(lengths))

    def read_runs(self, raw: np.ndarray, runs: list[Run], *, what: str) -> None:
        where = f"{self._path}: {what}"
        for a, offset, n in runs:
            pread_exact(self._fd, raw[a : a + n], offset, where=where)

    def close(self) -> None:
        os.close(self._fd)
