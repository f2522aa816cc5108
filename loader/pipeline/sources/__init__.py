"""Byte sources: where a `pipelined` load's tensor bytes come from, chosen once when it starts.

`ByteSource` is the one interface the engine, the jobs, `order`, `fused` and the staging ring read
bytes through; they never ask which kind of source they hold. A source is the checkpoint the load
plans from (the `loader.planning.plan.Source` it also is) and owns everything that depends on
where its bytes live:

- its reader threads (a local file: by the CPUs and whether the files are cached; a URL: one per
  range request in flight) and what one reader holds in flight (a URL: one answer);
- its requests: a tensor's bytes (`tensor_bytes`, a `loader.pipeline.regions.Bytes`), and runs of
  neighbouring tensors read at once (`read_run`);
- whether a row several devices hold is read once for all of them (`shares_rows`: where each byte
  read again is a request over a link) or per device (a page-cache hit);
- whether each file's bytes must come in file order (`in_file_order`: a remote file whose sha256
  is checked as its bytes arrive), so the load reads them so, a request at a time;
- the page cache (a local file: the read-ahead hint, and which tensors to drop once read);
- its statistics (`remote_stats`: a URL's requests and bytes, for `LoadReport.remote`).

The kinds, one module each: `local` (`LocalFiles`: a file or a folder of shards), `remote`
(`RemoteFiles`: a URL over HTTP, S3 or the Hub), `memory` (`MemoryCheckpoint`: a checkpoint held
in memory, for tests). A new kind of source is one new module; the `pipelined` strategy opens the
local or the remote one (`Recipe.open_source` / `open_remote`), and a test passes its own.

Lifecycle: opened (headers read, files opened) by the load sequence; asked for `reader_threads`
and `request_bytes` once, when `loader.pipeline.sizing.Sizing` is built; told to `begin` before
any reader starts; read from on the reader threads; told the plan once it is known
(`plan_reads`); closed by the sequence after the engine has joined its threads.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import numpy as np

from loader.format import TensorInfo
from loader.pipeline.regions import Bytes
from loader.planning.plan import Source


class ByteSource(Source, Protocol):
    """Where a load's tensor bytes come from (see the module docstring).

    Example:
        >>> with LocalFiles("model.safetensors") as source:  # loader.pipeline.sources.local
        ...     threads = source.reader_threads(256 << 20, staged=False)
        ...     source.begin(source.request_bytes(256 << 20, threads))
        ...     source.tensor_bytes("layers.0.kernel").read(0, out)
    """

    def info(self, key: str) -> TensorInfo:
        """The tensor's record, with its byte offsets in its file."""
        ...

    @property
    def total_bytes(self) -> int:
        """The tensor bytes of every shard file."""
        ...

    @property
    def shares_rows(self) -> bool:
        """Rows that several devices (or several leaves cut from one tensor) hold are read once
        for all of them: each byte read again would cost a request again."""
        ...

    @property
    def in_file_order(self) -> bool:
        """Each file's bytes are taken in file order as they arrive (a remote file whose sha256
        is checked on the way, `loader.remote.digest`, which holds or fetches again what comes
        after a gap): the load reads each file's work in offset order, a request at a time
        (`Sizing.max_part_bytes`), so that the hash waits only for requests in flight and
        nothing is fetched twice."""
        ...

    def reader_threads(self, budget_bytes: int, *, staged: bool) -> int:
        """The reader threads this source wants when `threads=` is not given (`staged`: the load
        goes through the staging ring, whose slots are sized for this count)."""
        ...

    def request_bytes(self, budget_bytes: int, threads: int) -> int:
        """The bytes one reader holds in flight beyond its scratch (a URL: one answer, at most
        what the budget leaves each of `threads`); 0 where a read lands in place."""
        ...

    def begin(self, request_bytes: int) -> None:
        """Start reading (before any reader thread starts), with requests of `request_bytes`."""
        ...

    def tensor_bytes(self, key: str) -> Bytes:
        """The stored bytes of tensor `key`, read by offset from its start."""
        ...

    def read_run(self, keys: list[str], views: list[np.ndarray]) -> None:
        """Fill the uint8 arrays `views` with the bytes of `keys`: tensors that follow each other
        in one file (`loader.pipeline.order.coalesce`), read at once."""
        ...

    def plan_reads(self, keys: set[str], read: set[str], host_bytes: Callable[[], int]) -> None:
        """The plan is known: it reads the tensors `keys`, of which `read` were read before it;
        `host_bytes()` is what the model will hold in host memory. Called once."""
        ...
