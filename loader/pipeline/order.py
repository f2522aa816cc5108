"""The order of work: tensors and parts in file-offset order within each file, files in turn.

Reading in file order keeps each reader sequential (the kernel's read-ahead helps); taking the
files of a sharded checkpoint in turn reads them concurrently.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from loader.format import TensorInfo
from loader.pipeline.jobs import LeafJob, Part, split_parts

T = TypeVar("T")


def round_robin(lists: list[list[T]]) -> list[T]:
    """The first item of each list, then the second of each, and so on."""
    out: list[T] = []
    for i in range(max((len(x) for x in lists), default=0)):
        out += [x[i] for x in lists if i < len(x)]
    return out


def file_order(infos: list[TensorInfo], file_of: Callable[[str], object]) -> list[TensorInfo]:
    """Tensors in file-offset order within each file, files taken in turn."""
    by_file: dict[str, list[TensorInfo]] = {}
    for info in infos:
        by_file.setdefault(str(file_of(info.name)), []).append(info)
    return round_robin([sorted(v, key=lambda i: i.begin) for v in by_file.values()])


def part_order(jobs: list[LeafJob]) -> list[Part]:
    """Parts in file order, files in turn; parts of jobs holding budgeted bytes first.

    Putting those first means a thread that waits for budget (a staging buffer) only ever waits
    for parts already taken by another thread, so the waits always end.
    """
    holding = [p for job in jobs if job.pending and job.counted_bytes for p in split_parts(job)]
    by_file: dict[str, list[Part]] = {}
    for job in jobs:
        if job.pending and not job.counted_bytes:
            by_file.setdefault(job.source_file, []).extend(split_parts(job))
    return holding + round_robin(list(by_file.values()))
