"""The tensor records every layer shares: what a tensor is, and where a file holds its bytes.

- `TensorMeta`: a tensor without its bytes (key, safetensors dtype name, shape), with the sizes
  that follow from those. `shapes.TensorSpec` adds the checkpoint file it belongs to;
  `loader.sharded.layout.TensorLayout` adds the slices that tile it.
- `TensorInfo`: a `TensorMeta` read from a safetensors header, plus its byte offsets in the data
  section. `Header`: every `TensorInfo` of one file, its metadata and where its data starts.

`loader.format.header` is the one place that makes `TensorInfo` / `Header` from file bytes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from loader.format.dtypes import DTYPES


@dataclass(frozen=True)
class TensorMeta:
    """One tensor, no data: its key, safetensors dtype name (`F32`, `BF16`, ...) and shape."""

    name: str
    dtype: str
    shape: tuple[int, ...]

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.numel * DTYPES[self.dtype].itemsize

    @property
    def np_dtype(self) -> np.dtype:
        return DTYPES[self.dtype]


@dataclass(frozen=True)
class TensorInfo(TensorMeta):
    """One tensor's header entry. `begin`/`end` are byte offsets into the data section.

    The header reader proves `end - begin == nbytes` before it makes one.
    """

    begin: int
    end: int


@dataclass(frozen=True)
class Header:
    """A validated header. `data_start` is the file offset of the data section."""

    source: str
    tensors: dict[str, TensorInfo]
    metadata: dict[str, str] = field(default_factory=dict)
    data_start: int = 0
    header_bytes: int = 0

    @property
    def data_bytes(self) -> int:
        return sum(t.nbytes for t in self.tensors.values())

    def file_offset(self, name: str) -> int:
        return self.data_start + self.tensors[name].begin
