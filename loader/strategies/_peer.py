"""Shared body of the peer strategies (`runai`, `fastsafetensors`, `instanttensor`): another
project's reader, its tensors handed to jax through DLPack, then the same cast, placement and
report as ours.

A peer is opened over the checkpoint's files in `fill` (after the plan check, so `strict=True`
refuses a mismatch before the peer reads a byte) and asked only for the planned tensors. Each
torch tensor it yields becomes a jax array with `jax.dlpack.from_dlpack` (no copy on the CPU
backend where the buffer is aligned; jax keeps the torch storage alive), and then goes through
`loader.stream.Stream` like any of our reads, so the model ends filled exactly as ours do. A tensor
the peer yields before it is asked for is held until it is (peers read in file order; the plan
mostly asks in that order too).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from loader.errors import CheckpointError
from loader.phases import Probe
from loader.planning.plan import LoadPlan
from loader.remote import FileSource
from loader.stream import Stream

#: files (paths, or a remote source's URLs: `runai-s3`), wanted tensor names -> (an iterator of
#: (name, torch tensor), a close function)
OpenPeer = Callable[[list[str], set[str]], tuple[Iterator[tuple[str, Any]], Callable[[], None]]]


def host_view_cast(array: Any, dtype: Any) -> np.ndarray:
    """Cast on the host: the jax array seen as numpy (no copy on CPU), cast by numpy.

    (jax's own `astype` would run on the array's device, outside the leaf's mesh.)
    """
    return np.asarray(array).astype(dtype)


def to_jax(tensor: Any) -> Any:
    """A peer's torch tensor as a jax array, through DLPack.

    A 64-bit tensor jax cannot hold (x64 off: jax would convert it on a device outside the leaf's
    mesh) goes to numpy through DLPack instead (from a GPU peer, through host memory first: such
    tensors are buffers of a few elements), and is cast on the host like any other read.
    """
    import jax

    tensor = tensor.detach().contiguous()
    x64 = jax.config.jax_enable_x64  # type: ignore[attr-defined]  # jax sets flags at run time
    if tensor.element_size() == 8 and not x64:
        return np.from_dlpack(tensor.cpu())
    return jax.dlpack.from_dlpack(tensor)


@dataclass
class PeerStream:
    """An `Executor` (see `loader.sequence`) reading through a peer loader.

    Attributes:
        open_peer: opens the peer over the files, asked for the planned tensors only.
        name: the peer's name, for errors.
        on_device: the peer yields device tensors (a GPU loader): they are cast on the device,
            never brought back to the host for it.
    """

    open_peer: OpenPeer
    name: str
    on_device: bool = False
    _close: Callable[[], None] | None = field(default=None, init=False, repr=False)

    def start(self, source: FileSource, probe: Probe) -> None:
        pass  # nothing is read before the plan is checked

    def _reader(self, source: FileSource, wanted: set[str]) -> Callable[[str], Any]:
        held: dict[str, Any] = {}
        stream: Iterator[tuple[str, Any]] | None = None

        def read(key: str) -> Any:
            nonlocal stream
            if stream is None:  # opened on the first read, so it is timed as reading
                stream, self._close = self.open_peer([str(f) for f in source.files], wanted)
            while key not in held:
                try:
                    name, tensor = next(stream)
                except StopIteration:
                    raise CheckpointError(
                        f"{source.path}: {self.name} finished without yielding tensor {key!r}"
                    ) from None
                held[name] = tensor
            tensor = held.pop(key)
            try:
                return to_jax(tensor)
            except (BufferError, RuntimeError, TypeError) as exc:  # a dtype DLPack cannot carry
                raise CheckpointError(
                    f"{source.path}: {self.name} yields tensor {key!r} as torch "
                    f"{getattr(tensor, 'dtype', '?')}, which does not cross DLPack into jax "
                    f"({exc}); load this checkpoint with a strategy that reads it itself"
                ) from None

        return read

    def fill(self, plan: LoadPlan, source: FileSource, probe: Probe) -> None:
        wanted = {step.file_key for step in plan.steps}
        stream = Stream(
            reader=lambda _: self._reader(source, wanted),
            caster=host_view_cast,
            cast_on_device=self.on_device,
        )
        stream.start(source, probe)
        stream.fill(plan, source, probe)

    def close(self) -> None:
        if self._close is not None:
            self._close()
            self._close = None
