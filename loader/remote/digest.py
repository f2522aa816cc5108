"""A remote file's sha256, computed from the bytes a load receives anyway, in file order.

A load's reader threads get a file's ranges out of order. `FileDigest.feed` hashes a range as
soon as every byte before it has been hashed; a range that arrives early is kept (a copy) until
its turn, within `hold_bytes`. A range that would pass that bound waits for the gap before the
held ones where a reader has it in flight, and otherwise fetches it itself (`fill`, a chunk at a
time: the pipeline reads small tensors after the large ones around them, so a few KiB at a
time), so the hash moves on and the held bytes stay bounded; `finish` fetches what no read asked
for. `refetched` counts both.

Bytes are hashed from the copy the load uses: of a header request's bytes only the header's own
(the tensor bytes it also received are hashed when their own read delivers them to the model). A
range received again after its bytes were hashed (a load that reads a byte twice) is counted in
`received_twice`, not hashed again. So the check costs CPU for hashing (one sha256 stream: about
1.3 GB/s on the development VM, so it can set the time on a fast link), at most `hold_bytes` of
host RAM, and requests again only for gaps.

`parse_digest` reads what a user gives (`digest="sha256:<64 hex>"`); the Hub's LFS files carry
their sha256 in their metadata (`X-Linked-Etag`), which `loader.remote.source` passes here.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Callable

import numpy as np

from loader.errors import RemoteError

_SHA256 = re.compile(r"^sha256:([0-9a-f]{64})$")
#: Early ranges of one file kept for hashing, at most: what 16 requests of 8 MiB hold in flight.
DEFAULT_HOLD_BYTES = 128 << 20
#: A gap nobody asked for is fetched at most this much at a time.
GAP_CHUNK_BYTES = 8 << 20
#: A gap a reader has in flight is waited for at most this long, then fetched.
GAP_WAIT_S = 30.0


def parse_digest(value: str, *, where: str) -> str:
    """The 64 hex digits of `sha256:<hex>` (lower-cased), or a one-line `RemoteError`."""
    text = value.strip().lower() if isinstance(value, str) else ""
    found = _SHA256.match(text)
    if found is None:
        raise RemoteError(
            f"{where}: digest={value!r} is not a sha256 digest; give 'sha256:' and its 64 hex "
            "digits (`sha256sum model.safetensors` prints them)"
        )
    return found[1]


class FileDigest:
    """The sha256 of one file of `size` bytes, fed by ranges in any order (module docstring).

    The reader says which ranges it has asked for (`expect`, `settle`): a gap that one of them
    will fill is waited for; a gap nobody has asked for yet is fetched (`fill`).
    """

    def __init__(self, expected: str, size: int, *, hold_bytes: int = DEFAULT_HOLD_BYTES) -> None:
        self.expected, self.size, self.hold_bytes = expected, size, hold_bytes
        self._hash = hashlib.sha256()
        self._next = 0  # every byte before it is hashed
        self._held: dict[int, np.ndarray] = {}  # start -> early bytes
        self._held_bytes = 0
        self._asked: dict[int, int] = {}  # start -> end of the ranges in flight
        self._lock = threading.Condition()
        self.refetched = 0  # bytes fetched again: gaps nobody asked for, by `fill` and `finish`
        self.received_twice = 0  # bytes received after they were hashed (not hashed again)

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
            self._asked.pop(start, None)
            self._lock.notify_all()

    def feed(
        self,
        start: int,
        data: np.ndarray | memoryview,
        fill: Callable[[int, int], np.ndarray] | None = None,
    ) -> None:
        """Bytes `[start, start + len(data))` of the file, as received. Where the held ranges
        are full, the gap before them is waited for (a reader has it in flight) or fetched with
        `fill(a, b)` (nobody asked for it); without `fill` the range is dropped (`finish`
        fetches it)."""
        flat = np.frombuffer(data, np.uint8) if isinstance(data, memoryview) else data.reshape(-1)
        end = start + flat.nbytes
        waited = 0.0
        while True:
            with self._lock:
                if start < self._next:
                    self.received_twice += min(end, self._next) - start
                if end <= self._next or flat.nbytes == 0:
                    return
                if start <= self._next:
                    self._hash_in_turn(start, flat)
                    return
                fits = self._held_bytes + flat.nbytes <= self.hold_bytes
                if fits and start not in self._held:
                    self._held[start] = flat.copy()
                    self._held_bytes += flat.nbytes
                if fits or fill is None:
                    return
                if self._in_flight(self._next) and waited < GAP_WAIT_S:
                    self._lock.wait(0.5)  # the gap's reader is on its way
                    waited += 0.5
                    continue
                later = [a for a in self._asked if a > self._next]
                gap = self._next, min([start, self._next + GAP_CHUNK_BYTES, *self._held, *later])
                self._asked[gap[0]] = gap[1]
            try:
                piece = fill(*gap)  # outside the lock: the other readers go on
            finally:
                self.settle(gap[0])
            self._hash_refetched(gap[0], piece)

    def _hash_refetched(self, start: int, piece: np.ndarray) -> None:
        """Bytes fetched again for the hash alone (a gap, or the rest at the end), counted."""
        with self._lock:
            self.refetched += piece.nbytes
            if start <= self._next < start + piece.nbytes:
                self._hash_in_turn(start, piece)

    def _in_flight(self, at: int) -> bool:
        return any(a <= at < b for a, b in self._asked.items())

    def _hash_in_turn(self, start: int, flat: np.ndarray) -> None:
        """Hash `flat` from `_next` on, then the held ranges now in turn (the lock held)."""
        self._hash.update(flat[self._next - start :].data)
        self._next = start + flat.nbytes
        while True:
            ready = [s for s in self._held if s <= self._next]
            if not ready:
                break
            for s in ready:
                data = self._held.pop(s)
                self._held_bytes -= data.nbytes
                if s + data.nbytes > self._next:
                    self._hash.update(data[self._next - s :].data)
                    self._next = s + data.nbytes
        self._lock.notify_all()

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
