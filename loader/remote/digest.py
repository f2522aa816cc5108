"""A remote file's sha256, computed from the bytes a load receives anyway, in file order.

A load's reader threads get a file's ranges out of order. `FileDigest.feed` hashes a range as
soon as every byte before it has been hashed; a range that arrives early is kept (a copy) until
its turn, within `hold_bytes`; one that would pass that bound is dropped and fetched again at
the end (`finish`), as are the bytes no tensor read asked for. Bytes are hashed from the copy the
load uses: of a header request's bytes only the header's own (the tensor bytes it also received
are hashed when their own read delivers them to the model). A range received again after its
bytes were hashed (a load that reads a byte twice) is counted in `received_twice`, not hashed
again. So the check costs CPU for hashing (hashlib releases the GIL), at most
`hold_bytes` of host RAM, and a request again only for what could not be held.

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
#: Early ranges of one file kept for hashing, at most (a range beyond it is fetched again).
DEFAULT_HOLD_BYTES = 64 << 20


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
    """The sha256 of one file of `size` bytes, fed by ranges in any order (module docstring)."""

    def __init__(self, expected: str, size: int, *, hold_bytes: int = DEFAULT_HOLD_BYTES) -> None:
        self.expected, self.size, self.hold_bytes = expected, size, hold_bytes
        self._hash = hashlib.sha256()
        self._next = 0  # every byte before it is hashed
        self._held: dict[int, np.ndarray] = {}  # start -> early bytes
        self._held_bytes = 0
        self._lock = threading.Lock()
        self.refetched = 0  # bytes fetched again by `finish`
        self.received_twice = 0  # bytes received after they were hashed (not hashed again)

    @property
    def complete(self) -> bool:
        return self._next >= self.size

    def feed(self, start: int, data: np.ndarray | memoryview) -> None:
        """Bytes `[start, start + len(data))` of the file, as received."""
        flat = np.frombuffer(data, np.uint8) if isinstance(data, memoryview) else data.reshape(-1)
        end = start + flat.nbytes
        with self._lock:
            if start < self._next:
                self.received_twice += min(end, self._next) - start
            if end <= self._next or flat.nbytes == 0:
                return
            if start <= self._next:
                self._hash.update(flat[self._next - start :].data)
                self._next = end
                self._drain()
            elif start not in self._held and self._held_bytes + flat.nbytes <= self.hold_bytes:
                self._held[start] = flat.copy()
                self._held_bytes += flat.nbytes

    def _drain(self) -> None:
        """Hash the held ranges that are now in turn (the lock held)."""
        while True:
            ready = [s for s in self._held if s <= self._next]
            if not ready:
                return
            for s in ready:
                data = self._held.pop(s)
                self._held_bytes -= data.nbytes
                if s + data.nbytes > self._next:
                    self._hash.update(data[self._next - s :].data)
                    self._next = s + data.nbytes

    def finish(self, fetch: Callable[[int, int], np.ndarray], chunk: int) -> bool:
        """Hash the rest of the file (`fetch(start, end)` for what was never received or not
        held), then whether the file's sha256 is the expected one."""
        while not self.complete:
            with self._lock:
                at = self._next
                later = [s for s in self._held if s > at]
                stop = min([self.size, at + chunk, *later])
            data = fetch(at, stop)
            self.refetched += stop - at
            self.feed(at, data)
        return self._hash.hexdigest() == self.expected

    @property
    def actual(self) -> str:
        return self._hash.hexdigest()
