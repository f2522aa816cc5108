"""Speculative reads: whole tensors read before the plan is known, while the model is built.

Each reader thread claims the next tensor in file order and reads it whole into an aligned buffer
of the file's dtype, as long as its bytes fit in the budget (until the plan is known they may not
become the model's own). Speculation stops at the first tensor that does not fit, or when the plan
is known (`stop`). With `strict=True` no tensor is read before the plan check: the threads only
allocate and prefault the buffers. A failed read is kept and raised only if the tensor is used.

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

import threading
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from loader.format import TensorInfo
from loader.format.buffers import aligned, prefault
from loader.pipeline.budget import ByteBudget
from loader.pipeline.regions import Bytes


@dataclass
class Speculated:
    """A tensor's buffer in the file's dtype; `filled` unless only prefaulted (strict)."""

    info: TensorInfo
    buffer: np.ndarray
    filled: bool


class Speculation:
    """The speculative reads of one load, shared by the reader threads.

    Args:
        order: the tensors, in the order to read them (`loader.pipeline.order.file_order`).
        budget: the load's budget; each buffer holds its bytes until adopted or released.
        strict: allocate and prefault only; read nothing.
    """

    def __init__(self, order: list[TensorInfo], budget: ByteBudget, *, strict: bool) -> None:
        self._order = order
        self._next = 0
        self._budget = budget
        self._strict = strict
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._finished = threading.Semaphore(0)
        self.buffers: dict[str, Speculated] = {}
        self.errors: dict[str, BaseException] = {}
        self.bytes = 0

    def _claim(self) -> TensorInfo | None:
        with self._lock:
            if self._next >= len(self._order) or self._stopped.is_set():
                return None
            info = self._order[self._next]
            if not self._budget.try_acquire(info.nbytes):
                self._next = len(self._order)  # the budget is full: stop here
                return None
            self._next += 1
            return info

    def run(self, file_bytes: Callable[[TensorInfo], Bytes]) -> None:
        """Read tensors until none is left, the budget is full or the plan is known (per thread)."""
        try:
            while (info := self._claim()) is not None:
                self._read(info, file_bytes)
        finally:
            self._finished.release()

    def _read(self, info: TensorInfo, file_bytes: Callable[[TensorInfo], Bytes]) -> None:
        buffer = aligned(info.shape, info.np_dtype)
        try:
            prefault(buffer)
            if not self._strict and info.nbytes:
                file_bytes(info).read(0, buffer.reshape(-1).view(np.uint8))
        except BaseException as exc:  # noqa: BLE001 - raised in fill if the tensor is used
            self._budget.release(info.nbytes)
            with self._lock:
                self.errors[info.name] = exc
            return
        with self._lock:
            self.buffers[info.name] = Speculated(info, buffer, filled=not self._strict)
            self.bytes += info.nbytes

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
