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

from loader.format.dtypes import PACKED, storage_bytes, storage_dtype


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
        """The bytes it takes in a file (a packed dtype's elements share bytes)."""
        nbytes = storage_bytes(self.dtype, self.shape)
        assert nbytes is not None, f"{self.name}: {self.dtype} {self.shape} is not whole bytes"
        return nbytes

    @property
    def np_dtype(self) -> np.dtype:
        """The numpy dtype its bytes are read as: its own, or uint8 for a packed one (F4, F6)."""
        return storage_dtype(self.dtype)

    @property
    def packed(self) -> bool:
        """Whether its elements are packed below a byte each (F4, F6_E2M3, F6_E3M2)."""
        return self.dtype in PACKED

    @property
    def storage_shape(self) -> tuple[int, ...]:
        """The shape its bytes read into as `np_dtype`: its own, or (bytes,) for a packed one."""
        return (self.nbytes,) if self.packed else self.shape


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
