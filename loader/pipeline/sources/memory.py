"""`MemoryCheckpoint`: a `.safetensors` checkpoint held in memory, as a byte source for tests.

The bytes of a whole checkpoint file (what `safetensors.numpy.save` returns, or a file's
`read_bytes()`), its header validated as any file's (`loader.format.parse_header`), and its
tensors read by copying from that buffer: a load through the pipelined engine with no file, no
disk and no server. The knobs a test wants to turn are arguments: the reader threads, whether
rows are read once for all the devices that hold them (`shares_rows`, as a URL's are), and whether
the bytes are read in file order (`in_file_order`, as a digest-checked URL's are), so the paths a
remote load takes run without a link.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from loader.format import parse_header
from loader.format.header import header_length
from loader.format.source import ShardHeaders
from loader.pipeline.regions import MemoryBytes


class MemoryCheckpoint(ShardHeaders[str]):
    """A checkpoint file's bytes in memory, as a `loader.pipeline.sources.ByteSource`.

    Args:
        data: the whole `.safetensors` file.
        name: what errors and the report call it.
        threads: the reader threads it asks for.
        shares_rows: read a row several devices hold once for all of them (as over a URL).
        in_file_order: read each file's work in offset order (as a digest-checked URL's).

    Example:
        >>> blob = safetensors.numpy.save({"w": np.ones((4, 4), np.float32)})
        >>> recipe = Recipe(lambda: Pipeline(), open_source=lambda _: MemoryCheckpoint(blob))
        >>> model, report = run_load(recipe, builder, "memory.safetensors")  # loader.sequence
    """

    def __init__(
        self,
        data: bytes,
        *,
        name: str = "memory.safetensors",
        threads: int = 2,
        shares_rows: bool = False,
        in_file_order: bool = False,
    ) -> None:
        super().__init__()
        self.path = name
        self.files = [name]
        self.threads, self.shares_rows = threads, shares_rows
        self.in_file_order = in_file_order
        self._raw = np.frombuffer(data, np.uint8)
        n = header_length(data[:8], source=name, file_size=len(data))
        header = parse_header(data[8 : 8 + n], source=name, data_size=len(data) - 8 - n)
        self.add_header(name, header, shown=name)

    def file_of(self, key: str) -> str:
        return self._where[key]

    def remote_stats(self) -> None:
        return None

    def finish_reads(self) -> None:
        return None

    def reader_threads(self, budget_bytes: int, *, staged: bool) -> int:
        return self.threads

    def request_bytes(self, budget_bytes: int, threads: int) -> int:
        return 0

    def begin(self, request_bytes: int) -> None:
        return None

    def tensor_bytes(self, key: str) -> MemoryBytes:
        start = self.file_offset(key)
        data = MemoryBytes(self._raw[start : start + self.info(key).nbytes])
        data.shares_rows = self.shares_rows
        return data

    def read_run(self, keys: list[str], views: list[np.ndarray]) -> None:
        for key, view in zip(keys, views):
            self.tensor_bytes(key).read(0, view.reshape(-1))

    def plan_reads(self, keys: set[str], read: set[str], host_bytes: Callable[[], int]) -> None:
        return None

    def close(self) -> None:
        return None

    def __enter__(self) -> MemoryCheckpoint:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
