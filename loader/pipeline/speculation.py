"""Speculative reads: whole tensors read before the plan is known, while the model is built.

Each reader thread claims the next tensor in file order and reads it whole into an aligned buffer
of the file's dtype, as long as its bytes fit in the budget (until the plan is known they may not
become the model's own). Speculation stops at the first tensor that does not fit, or when the plan
is known (`stop`). With `strict=True` no tensor is read before the plan check: the threads only
allocate and prefault the buffers. A failed read is kept and raised only if the tensor is used.

Where the byte source takes its bytes in file order (`ByteSource.in_file_order`: a URL whose
sha256 is checked as they arrive), a tensor is read in pieces of one request (`max_piece_bytes`,
the load's `Sizing.max_part_bytes`), each claimed in file order by whichever thread is free, so
the threads' requests in flight are the next ones of the file (not a tensor each, read chunk by
chunk, the later ones held until the first is in). A tensor begun is read to its end even after
`stop`; it counts once every piece is in.

Why the cap is the budget (and not a looser rule): bytes read into a file-dtype buffer that is
later adopted were never beyond the model's own, so speculating past the budget and accounting
afterwards would be allowed when the model keeps the file's dtype; but before the build ends the
model's dtypes are unknown, and for a cast (fp32 file -> bf16 model) every speculative byte is in
flight until cast. And a looser cap buys nothing: reading is CPU-bound on the CPUs the build does
not use, and the build ends before much is read, so a bigger head start only moves the same work
earlier (measured with and without the cap: docs/results.md, "The speculation cap"). Hence the
plain rule: stop at the first tensor that does not fit.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from loader.budget import ByteBudget
from loader.format import TensorInfo
from loader.format.buffers import aligned, prefault
from loader.pipeline.regions import Bytes


@dataclass
class Speculated:
    """A tensor's buffer in the file's dtype; `filled` unless only prefaulted (strict)."""

    info: TensorInfo
    buffer: np.ndarray
    filled: bool


@dataclass(eq=False)
class _Reading:
    """A tensor claimed for a speculative read: its buffer, the byte ranges of it still to
    claim, and how many claimed ones are not read yet."""

    info: TensorInfo
    buffer: np.ndarray
    unclaimed: list[tuple[int, int]]
    reading: int = 0
    error: BaseException | None = None


class Speculation:
    """The speculative reads of one load, shared by the reader threads.

    Args:
        order: the tensors, in the order to read them (`loader.format.file_order.file_order`).
        budget: the load's budget; each buffer holds its bytes until adopted or released.
        strict: allocate and prefault only; read nothing.
        max_piece_bytes: the most one read takes of a tensor (the module docstring: one
            request, where the source takes its bytes in file order); a tensor whole if inf.
    """

    def __init__(
        self,
        order: list[TensorInfo],
        budget: ByteBudget,
        *,
        strict: bool,
        max_piece_bytes: float = math.inf,
    ) -> None:
        self._order = order
        self._next = 0
        self._budget = budget
        self._strict = strict
        self._piece_bytes = math.inf if strict else max_piece_bytes
        self._current: _Reading | None = None  # the tensor whose pieces are being claimed
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._finished = threading.Semaphore(0)
        self.buffers: dict[str, Speculated] = {}
        self.errors: dict[str, BaseException] = {}
        self.bytes = 0

    def _claim(self) -> tuple[_Reading, int, int] | None:
        """The next piece to read: of the tensor begun (even after `stop`), else of the next
        tensor whose bytes fit in the budget (none once stopped)."""
        with self._lock:
            current = self._current
            if current is None or not current.unclaimed:
                current = self._current = self._begin_next()
                if current is None:
                    return None
            start, end = current.unclaimed.pop(0)
            current.reading += 1
            return current, start, end

    def _begin_next(self) -> _Reading | None:
        """The next tensor in order, its budget taken (the lock held); None where none is left,
        the budget is full or the plan is known."""
        if self._next >= len(self._order) or self._stopped.is_set():
            return None
        info = self._order[self._next]
        if not self._budget.try_acquire(info.nbytes):
            self._next = len(self._order)  # the budget is full: stop here
            return None
        self._next += 1
        step = max(1, int(min(info.nbytes, self._piece_bytes)))
        pieces = [(a, min(info.nbytes, a + step)) for a in range(0, info.nbytes, step)]
        return _Reading(info, aligned(info.shape, info.np_dtype), pieces or [(0, 0)])

    def run(self, file_bytes: Callable[[TensorInfo], Bytes]) -> None:
        """Read tensors until none is left, the budget is full or the plan is known (per thread)."""
        try:
            while (claimed := self._claim()) is not None:
                self._read(*claimed, file_bytes)
        finally:
            self._finished.release()

    def _read(
        self, reading: _Reading, start: int, end: int, file_bytes: Callable[[TensorInfo], Bytes]
    ) -> None:
        """Read one piece of a tensor; the last piece in makes it a speculative buffer (or, if
        any piece failed, an error kept for `fill`)."""
        info, raw = reading.info, reading.buffer.reshape(-1).view(np.uint8)
        try:
            prefault(raw[start:end])
            if not self._strict and end > start:
                file_bytes(info).read(start, raw[start:end])
        except BaseException as exc:  # noqa: BLE001 - raised in fill if the tensor is used
            with self._lock:
                reading.error = reading.error or exc
        with self._lock:
            reading.reading -= 1
            if reading.unclaimed or reading.reading:
                return  # other pieces still to come
            if reading.error is not None:
                self.errors[info.name] = reading.error
            else:
                self.buffers[info.name] = Speculated(info, reading.buffer, filled=not self._strict)
                self.bytes += info.nbytes
        if reading.error is not None:
            self._budget.release(info.nbytes)

    def stop(self, threads: int = 0) -> None:
        """Claim nothing more; then wait until `threads` threads have left `run`."""
        self._stopped.set()
        for _ in range(threads):
            self._finished.acquire()

    def filled(self) -> set[str]:
        """The tensors read whole before the plan (not only prefaulted, as with `strict`)."""
        return {name for name, spec in self.buffers.items() if spec.filled}

    def take(self, name: str) -> Speculated | None:
        """The tensor's speculative buffer (its budget still held), if one was read."""
        return self.buffers.pop(name, None)

    def clear(self) -> None:
        self.buffers.clear()
