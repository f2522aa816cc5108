"""A remote file's sha256, computed from the bytes a load receives anyway, in file order.

A load's reader threads get a file's ranges out of order. `FileDigest.feed` hashes a range as
soon as every byte before it has been hashed. One thread hashes at a time, outside the lock (the
thread whose range is in turn, which then goes on with every range that has come in turn behind
it), so the other readers keep receiving while it hashes. A range that arrives early:

- waits in its reader's own buffer, not copied, while every byte before it that is not hashed
  yet is on its way (asked for by a reader, `expect`; being hashed; or early itself), and is
  hashed there when its turn comes; the reader goes on once it is (a load's reader, which
  passes `fill`; a wait ends after `GAP_WAIT_S` at most);
- otherwise (a gap no reader has asked for yet) is kept, a copy, until its turn, within
  `hold_bytes`; a range that would pass that bound fetches the gap before it itself (`fill`, a
  chunk at a time), so the hash moves on and the held bytes stay bounded. `finish` fetches what
  no read asked for. `refetched` counts both; `held_peak` is the most held at once.

The `pipelined` engine reads a digest-checked file in file order, a request at a time
(`loader.pipeline.order.by_offset` and `loader.pipeline.speculation`, asked for by
`ByteSource.in_file_order`): what arrives early then waits only for the requests in flight
before it, and no gap is fetched; a copy is made only where a reader has taken the request
before it but not yet sent it. Other readers (a transposed view read through, `hostcast`'s
tensors in the plan's order, a process reading its share of a file) may still leave gaps; the
hold and the gap fetches keep those correct and bounded.

Bytes are hashed from the copy the load uses: of a header request's bytes only the header's own
(the tensor bytes it also received are hashed when their own read delivers them to the model). A
range received again after its bytes were hashed (a load that reads a byte twice) is counted in
`received_twice`, not hashed again. So the check costs CPU for hashing (one sha256 stream, which
can set the time on a fast link: docs/results.md), at most `hold_bytes` of host RAM, and
requests again only for gaps.

`loader.options.parse_digest` reads what a user gives (`digest="sha256:<64 hex>"`); the Hub's
LFS files carry their sha256 in their metadata (`X-Linked-Etag`), which `loader.remote.source`
passes here.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from loader.options import parse_digest

__all__ = ["FileDigest", "parse_digest"]

#: Early ranges of one file kept for hashing, at most: what 16 requests of 8 MiB hold in flight.
DEFAULT_HOLD_BYTES = 128 << 20
#: A gap nobody asked for is fetched at most this much at a time.
GAP_CHUNK_BYTES = 8 << 20
#: A gap a reader has in flight is waited for at most this long, then fetched.
GAP_WAIT_S = 30.0
#: A waiting reader looks again at least this often (a request in flight may fail, unannounced).
_RECHECK_S = 0.5


@dataclass(frozen=True)
class _Waiting:
    """An early range left in its reader's own buffer while the reader waits (`wake` is set once
    its bytes are hashed, or when the gap before it may no longer be coming)."""

    data: np.ndarray
    wake: threading.Event


class FileDigest:
    """The sha256 of one file of `size` bytes, fed by ranges in any order (module docstring).

    The reader says which ranges it has asked for (`expect`, `settle`): a gap that one of them
    will fill is waited for; a gap nobody has asked for yet is fetched (`fill`).

    Example:
        >>> digest = FileDigest(expected_hex, size)
        >>> digest.feed(0, first_bytes)  # then every other range, in any order
        >>> digest.finish(fetch, 8 << 20)
        True
    """

    def __init__(self, expected: str, size: int, *, hold_bytes: int = DEFAULT_HOLD_BYTES) -> None:
        self.expected, self.size, self.hold_bytes = expected, size, hold_bytes
        self._hash = hashlib.sha256()
        self._next = 0  # every byte before it is hashed
        self._hashing_to: int | None = None  # a thread hashes `[_next, _hashing_to)`, unlocked
        self._held: dict[int, np.ndarray] = {}  # start -> early bytes, copied
        self._held_bytes = 0
        self._waiting: dict[int, _Waiting] = {}  # start -> early bytes its reader waits with
        self._asked: dict[int, int] = {}  # start -> end of the ranges in flight
        self._lock = threading.Lock()
        self.refetched = 0  # bytes fetched again: gaps nobody asked for, by `fill` and `finish`
        self.received_twice = 0  # bytes received after they were hashed (not hashed again)
        self.held_peak = 0  # the most early bytes copied and held at once

    @property
    def complete(self) -> bool:
        return self._next >= self.size

    def expect(self, start: int, end: int) -> None:
        """A reader has asked for `[start, end)` (its bytes come through `feed`)."""
        with self._lock:
            self._asked[start] = max(end, self._asked.get(start, end))

    def settle(self, start: int) -> None:
        """The range asked for at `start` has been fed, or failed."""
        with self._lock:
            end = self._asked.pop(start, start)
            if end > self._next:  # settled unhashed (failed, or held): each waiter looks again
                self._wake_all()

    def feed(
        self,
        start: int,
        data: np.ndarray | memoryview,
        fill: Callable[[int, int], np.ndarray] | None = None,
    ) -> None:
        """Bytes `[start, start + len(data))` of the file, as received, hashed in their turn.

        In turn: hashed here (or, while another thread hashes, by that one: this waits). Early:
        with `fill` (a load's reader), this waits while every byte before it is on its way, and
        its bytes are hashed in place; otherwise they are held (a copy), and where the held
        ranges are full, the gap before them is fetched with `fill(a, b)` (without `fill` the
        range is dropped: `finish` fetches it)."""
        flat = np.frombuffer(data, np.uint8) if isinstance(data, memoryview) else data.reshape(-1)
        end = start + flat.nbytes
        with self._lock:
            if start < self._next:
                self.received_twice += min(end, self._next) - start
        if flat.nbytes == 0:
            return
        waiting = _Waiting(flat, threading.Event())
        deadline = time.monotonic() + GAP_WAIT_S
        while True:
            gap: tuple[int, int] | None = None
            with self._lock:
                if end <= self._next:
                    return  # hashed: here, or by the thread that had the turn
                in_turn = start <= self._next
                if in_turn and self._hashing_to is None:
                    self._hashing_to = end  # this thread's turn: hashed below, outside the lock
                    self._waiting.pop(start, None)
                    break
                coming = fill is not None and self._coming(start) and time.monotonic() < deadline
                wait = in_turn or coming
                if wait:
                    self._waiting.setdefault(start, waiting)
                    waiting.wake.clear()
                else:  # the gap is nobody's: hold a copy, or fetch the gap
                    if self._waiting.get(start) is waiting:
                        del self._waiting[start]
                    gap = self._hold_or_gap(start, flat, fill)
            if wait:
                waiting.wake.wait(_RECHECK_S)
                continue
            if gap is None or fill is None:
                return  # held, or dropped
            try:  # outside the lock: the other readers go on; the gap stays asked until hashed
                self._hash_refetched(gap[0], fill(*gap))
            finally:
                self.settle(gap[0])
        self._hash_from(start, flat)

    def _hold_or_gap(
        self,
        start: int,
        flat: np.ndarray,
        fill: Callable[[int, int], np.ndarray] | None,
    ) -> tuple[int, int] | None:
        """An early range whose gap is nobody's (the lock held): kept if it fits (None), dropped
        without `fill` (None), else the gap before the held ones to fetch, marked as asked."""
        fits = self._held_bytes + flat.nbytes <= self.hold_bytes
        if fits and start not in self._held:
            self._held[start] = flat.copy()
            self._held_bytes += flat.nbytes
            self.held_peak = max(self.held_peak, self._held_bytes)
        if fits or fill is None:
            return None
        later = [a for a in self._asked if a > self._next]
        gap = self._next, min([start, self._next + GAP_CHUNK_BYTES, *self._held, *later])
        self._asked[gap[0]] = gap[1]
        return gap

    def _hash_refetched(self, start: int, piece: np.ndarray) -> None:
        """Bytes fetched again for the hash alone (a gap, or the rest at the end), counted, then
        hashed in their turn."""
        with self._lock:
            self.refetched += piece.nbytes
        self.feed(start, piece)

    def _coming(self, start: int) -> bool:
        """Whether every byte before `start` not yet hashed is on its way (the lock held): in
        flight, being hashed, or early and waiting; then a range at `start` waits only for
        those (a gap still to be asked for, a later chunk of a read under way, is not)."""
        spans = sorted(
            [
                *self._asked.items(),
                *((s, s + w.data.nbytes) for s, w in self._waiting.items()),
                *((s, s + d.nbytes) for s, d in self._held.items()),
            ]
        )
        reached = self._next if self._hashing_to is None else self._hashing_to
        for a, b in spans:
            if a > reached:
                break
            reached = max(reached, b)
        return reached >= start

    def _hash_from(self, start: int, flat: np.ndarray) -> None:
        """Hash `flat` from `_next` on, then every early range now in turn, outside the lock;
        this thread holds the turn (`_hashing_to`) until no range is left in turn."""
        done: threading.Event | None = None  # the wake of the waiting range being hashed
        try:
            while True:
                self._hash.update(flat[self._next - start :].data)  # only this thread moves it
                with self._lock:
                    self._next = start + flat.nbytes
                    if done is not None:
                        done.set()
                    turn = self._take_in_turn()
                    if turn is None:
                        self._hashing_to = None
                        self._wake_all()  # the gap after: each waiting reader looks again
                        return
                    start, flat, done = turn
                    self._hashing_to = start + flat.nbytes
        except BaseException:
            with self._lock:
                self._hashing_to = None
                self._wake_all()
            raise

    def _take_in_turn(self) -> tuple[int, np.ndarray, threading.Event | None] | None:
        """The next early range in turn (the lock held): a held copy, or a waiting reader's
        bytes (with its wake); those wholly hashed already are let go."""
        for s in [s for s in self._held if s <= self._next]:
            data = self._held.pop(s)
            self._held_bytes -= data.nbytes
            if s + data.nbytes > self._next:
                return s, data, None
        for s in [s for s in self._waiting if s <= self._next]:
            waiting = self._waiting.pop(s)
            if s + waiting.data.nbytes > self._next:
                return s, waiting.data, waiting.wake
            waiting.wake.set()
        return None

    def _wake_all(self) -> None:
        for waiting in self._waiting.values():
            waiting.wake.set()

    def finish(self, fetch: Callable[[int, int], np.ndarray], chunk: int) -> bool:
        """Hash the rest of the file (`fetch(start, end)` for what was never received or not
        held), then whether the file's sha256 is the expected one."""
        while not self.complete:
            with self._lock:
                at = self._next
                later = [s for s in self._held if s > at]
                stop = min([self.size, at + chunk, *later])
            self._hash_refetched(at, fetch(at, stop))
        return self._hash.hexdigest() == self.expected

    @property
    def actual(self) -> str:
        return self._hash.hexdigest()
