"""Tensors in the order their bytes lie: by offset within each file, the files taken in turn.

Reading a file front to back keeps each reader sequential (the kernel's read-ahead helps); taking
the files of a sharded checkpoint in turn reads them side by side. The pipeline's queue
(`loader.pipeline.order`) and the local byte source's page-cache read-ahead
(`loader.pipeline.sources.local`) both order by it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from loader.format.records import TensorInfo

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
