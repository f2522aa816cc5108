"""A read plan per process: a remote file's share read in few large requests, not a range per row.

The sharding rule splits a tensor on its largest divisible axis, often the columns: a process's
column block is then one contiguous run per row of the file, and read run by run it costs one
range request per row (tens of thousands for a model, each a server lookup and a round trip).
The planner reads through the gaps between a read's runs instead, so neighbouring runs become one
span, within a byte budget:

- `closed_gaps`: over every read a process will make of one file, the gaps between neighbouring
  runs are read through smallest first (page-sized gaps first, then the other processes' columns),
  as long as the bytes read stay within `max_over_read` times the bytes needed. Each gap read
  through saves one request; smallest first saves the most requests for the bytes. A gap between
  two reads (two tensors, or two ranges of one) is never read through, so a request serves one
  read and the share is still read tensor by tensor.
- `plan_requests`: one read's runs, with those gaps read through, cut into requests of at most
  `request_bytes` each (`request_bytes_for`: the reader's chunk times `max_over_read`, so a request
  carries about one chunk of needed bytes), each trimmed to the needed bytes at its ends. Every
  request names where its needed bytes go (`Request.copies`); the reader copies those out of the
  answer as it arrives and drops the rest, so host memory holds the share plus the requests in
  flight.

`loader.sharded.remote.RemoteSliceFile` plans a file when the slice reader tells it every read
ahead (`SliceFile.plan`), then reads each read by `plan_requests`, `concurrency` requests at a
time (so at most `concurrency * request_bytes` bytes of answers in flight); `LoadReport.remote`
reports the plan (`RemoteStats.planned_requests`, `planned_bytes`, `needed_bytes`, `over_read`).
A local file is not planned: a run there is one `preadv`, which costs no round trip.
"""

from __future__ import annotations

from collections.abc import Iterable, Set
from dataclasses import dataclass

from loader.errors import RemoteError

#: One contiguous run of a box: (offset in the output's bytes, offset in the file, length).
ByteRun = tuple[int, int, int]
#: The name `loader.sharded.files` and `loader.sharded.remote` still import (branch stores55
#: rewrites both); `loader.pipeline.order.Run` is another thing: drop this once they say ByteRun.
Run = ByteRun
#: A byte copied out of a request's answer: (offset in the output's bytes, offset in the answer,
#: length).
Copy = tuple[int, int, int]


@dataclass(frozen=True)
class Request:
    """One range request of a plan: the file's bytes `[start, end)`, and where the needed ones go.

    Example:
        >>> Request(100, 140, ((0, 0, 16), (16, 24, 16))).read_bytes
        40
    """

    start: int
    end: int
    copies: tuple[Copy, ...]

    @property
    def read_bytes(self) -> int:
        return self.end - self.start

    @property
    def needed_bytes(self) -> int:
        return sum(n for _, _, n in self.copies)


@dataclass(frozen=True)
class PlanFigures:
    """What a plan reads: requests, bytes read (gaps included) and bytes needed.

    Example:
        >>> PlanFigures(requests=2, read_bytes=150, needed_bytes=100).over_read
        1.5
    """

    requests: int = 0
    read_bytes: int = 0
    needed_bytes: int = 0

    @property
    def over_read(self) -> float:
        """Bytes read over bytes needed (1.0: nothing but the share)."""
        return self.read_bytes / self.needed_bytes if self.needed_bytes else 1.0

    def __add__(self, other: PlanFigures) -> PlanFigures:
        return PlanFigures(
            self.requests + other.requests,
            self.read_bytes + other.read_bytes,
            self.needed_bytes + other.needed_bytes,
        )

    @classmethod
    def of(cls, requests: Iterable[Request]) -> PlanFigures:
        requests = list(requests)
        return cls(
            len(requests),
            sum(r.read_bytes for r in requests),
            sum(r.needed_bytes for r in requests),
        )


def check_request_bytes(request_bytes: int) -> int:
    if not isinstance(request_bytes, int) or request_bytes < 1:
        raise RemoteError(f"request_bytes={request_bytes!r}: give a whole number of bytes, >= 1")
    return request_bytes


def request_bytes_for(chunk_bytes: int, max_over_read: float) -> int:
    """The longest request of a plan: `chunk_bytes` of needed bytes at the most over-read allowed
    (a request of only needed bytes is `chunk_bytes * max_over_read` long too: fewer requests).

    Example:
        >>> request_bytes_for(8 << 20, 1.5) == 12 << 20
        True
    """
    return max(1, int(chunk_bytes * max_over_read))


def _ordered(runs: Iterable[ByteRun]) -> list[ByteRun]:
    return sorted((r for r in runs if r[2] > 0), key=lambda r: r[1])


def closed_gaps(reads: Iterable[Iterable[ByteRun]], max_over_read: float) -> frozenset[int]:
    """The gaps to read through, as the file offsets where they begin (the end of the run before
    each), for a process that will make `reads` (each the runs of one read) of one file: smallest
    first, while the bytes read stay within `max_over_read` times the bytes needed.

    Example:
        >>> rows = [(0, 0, 10), (10, 20, 10), (20, 40, 10)]  # 10 bytes needed of each 20
        >>> sorted(closed_gaps([rows], 1.5))  # 30 needed, 15 to spare: one gap of 10
        [10]
        >>> sorted(closed_gaps([rows], 2.0))
        [10, 30]
    """
    gaps: list[tuple[int, int]] = []  # (length, file offset where it begins)
    needed = 0
    for read in reads:
        runs = _ordered(read)
        needed += sum(n for _, _, n in runs)
        gaps += [(b[1] - (a[1] + a[2]), a[1] + a[2]) for a, b in zip(runs, runs[1:])]
    spare = max_over_read * needed - needed
    closed = []
    for length, at in sorted(gaps):
        if length > spare:
            break
        spare -= length
        closed.append(at)
    return frozenset(closed)


def plan_requests(runs: Iterable[ByteRun], closed: Set[int], request_bytes: int) -> list[Request]:
    """The requests of one read: its runs (`(offset in the output, offset in the file, length)`)
    joined where the gap after a run is in `closed`, then cut into requests of at most
    `request_bytes`, each starting and ending on a needed byte.

    Example:
        >>> plan_requests([(0, 0, 10), (10, 20, 10)], {10}, 64)
        [Request(start=0, end=30, copies=((0, 0, 10), (10, 20, 10)))]
        >>> [(r.start, r.end) for r in plan_requests([(0, 0, 10), (10, 20, 10)], set(), 64)]
        [(0, 10), (20, 30)]
        >>> [(r.start, r.end) for r in plan_requests([(0, 0, 25)], set(), 10)]
        [(0, 10), (10, 20), (20, 25)]
    """
    check_request_bytes(request_bytes)
    requests: list[Request] = []
    start: int | None = None
    copies: list[Copy] = []
    end = 0

    def close() -> None:
        nonlocal start, copies
        if start is not None:
            requests.append(Request(start, end, tuple(copies)))
        start, copies = None, []

    for a, at, n in _ordered(runs):
        if start is not None and end not in closed:
            close()  # the gap before this run is not read through: a new span
        while n > 0:
            if start is None:
                start = at
            take = min(n, start + request_bytes - at)
            if take <= 0:  # this request is full: the next one starts at this run
                close()
                continue
            copies.append((a, at - start, take))
            end = at + take
            a, at, n = a + take, at + take, n - take
    close()
    return requests
