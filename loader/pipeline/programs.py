"""The device programs of one staged load, compiled ahead, in the background, once per shape.

On an accelerator a leaf's bytes reach the device by `jax.device_put`, which runs no program. A
program is needed only where the device must do work on what arrived: a shard larger than one
chunk is assembled from its chunks (an allocation, then in-place updates of that buffer), a leaf
a port transposes is transposed there, and a leaf whose file dtype differs from the model's is
converted there (`loader.pipeline.ring_job.cast_shapes`). Each such program is compiled
once per shape, never per chunk (`loader.pipeline.ring_chunks.even_chunks` cuts a shard into
chunks of one shape), and ahead of time: `DevicePrograms` compiles on a few background threads as
soon as the jobs are made, while the readers already move leaves that need no program, so a
compile (about 0.07 to 0.6 s on a TPU, each) overlaps the transfers instead of standing before
them. `compiled` counts the programs a load compiled (`LoadReport.device_programs`); a test holds
it to the shapes that need one.

An update's start offsets are device scalars, put once per load and offset (`offsets`), when the
programs are asked for: a NumPy scalar is a host transfer at every call, and on a TPU v5e host a
call with NumPy offsets waited behind the chunks in flight (docs/results.md, "Tenth session").
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AbstractContextManager
from typing import Any

import jax
import numpy as np
from jax.sharding import SingleDeviceSharding

from loader.host import busy_cpus

#: Compiling threads at most (`compile_threads`): an XLA compile releases the GIL, and a few run
#: side by side on a host with CPUs to spare; more would take CPUs from the reads.
COMPILE_THREADS = 4


def compile_threads(cpus: float) -> int:
    """The threads compiling a staged load's device programs on `cpus` usable CPUs: up to
    `COMPILE_THREADS`, leaving one CPU to the thread that sends the chunks, and at least one. On
    the 2-CPU development VM a staged tinyllama-1.1b load (two programs) took 1.43-1.82 s with one
    against 1.64-2.34 s with two (11 interleaved pairs, median ratio 0.93; docs/results.md
    "Eleventh session"); a TPU v5e host's 13 CPUs keep four: there llama3-8b took 1.81-1.91 s
    with four, 1.82-1.88 s with two and 1.95-2.05 s with one, whose slower compiles left chunks
    waiting on the device (its peak 1.05x the model against 1.000x; "Twelfth session")."""
    return max(1, min(COMPILE_THREADS, busy_cpus(cpus) - 1))


Shape = tuple[int, ...]


@contextlib.contextmanager
def no_mesh() -> Iterator[None]:
    """Outside any `jax.set_mesh` context: the programs run on one device, not the model's mesh
    (where this jax has no `set_mesh(None)`, as it is)."""
    try:
        context: AbstractContextManager[object] = jax.set_mesh(None)
        context.__enter__()
    except Exception:  # noqa: BLE001 - an older or newer jax without it: no mesh to leave
        yield
        return
    try:
        yield
    finally:
        context.__exit__(None, None, None)


def _spec(shape: Shape, dtype: np.dtype, device: object) -> jax.ShapeDtypeStruct:
    return jax.ShapeDtypeStruct(shape, dtype, sharding=SingleDeviceSharding(device))


def _allocation(shape: Shape, dtype: np.dtype, device: object) -> Any:
    """A program that makes a shard's buffer on its device (owned by XLA, so updates may donate
    it)."""
    sharding = SingleDeviceSharding(device)
    return jax.jit(lambda: jax.numpy.zeros(shape, dtype), out_shardings=sharding).lower().compile()


def _update(
    shard: Shape, chunk: Shape, dtype: np.dtype, device: object, perm: Shape, sent: np.dtype
) -> Any:
    """`buffer` (donated: updated in place) with `chunk` at `starts`, transposed by `perm` first
    (on the device) if given and converted from `sent` (the file's dtype, as the chunk arrived)
    into the buffer's `dtype`; and a token (one element of the chunk) ready once it has run."""

    def update(buffer: Any, part: Any, starts: tuple[Any, ...]) -> tuple[Any, Any]:
        token = part[(0,) * part.ndim]
        placed = jax.numpy.transpose(part, perm) if perm else part
        return jax.lax.dynamic_update_slice(buffer, placed.astype(dtype), starts), token

    index = jax.ShapeDtypeStruct((), np.int32, sharding=SingleDeviceSharding(device))
    starts = tuple(index for _ in shard)
    specs = (_spec(shard, dtype, device), _spec(chunk, sent, device), starts)
    return jax.jit(update, donate_argnums=0).lower(*specs).compile()


def _arrange(shape: Shape, sent: np.dtype, dtype: np.dtype, device: object, perm: Shape) -> Any:
    """A whole chunk (of `shape`, as it arrived in `sent`) transposed by `perm` into its leaf's
    layout and converted into the leaf's `dtype` (the chunk's buffer is freed after)."""

    def arrange(x: Any) -> Any:
        return (jax.numpy.transpose(x, perm) if perm else x).astype(dtype)

    return jax.jit(arrange).lower(_spec(shape, sent, device)).compile()


#: Every program compiled in this process, by what it does and its shapes: a second load of the
#: same shapes compiles nothing.
_COMPILED: dict[tuple[object, ...], Future[Any]] = {}
_COMPILED_LOCK = threading.Lock()


class DevicePrograms:
    """The programs of one load, each compiled once per process, on background threads, as soon
    as asked.

    `allocation`, `update` and `arrange` return at once with a `Future` of the compiled program;
    its `result()` waits for the compile (a reader thread that needs a program not compiled yet
    waits for it, and only it). `close()` waits for every compile this load started.
    """

    def __init__(self, threads: int = COMPILE_THREADS) -> None:
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="loader-compile")
        self.compiled = 0  # programs this load compiled (not found compiled already)
        self._offsets: dict[tuple[Shape, str], tuple[Any, ...]] = {}
        self.offset_bytes: dict[str, int] = {}  # per device: the offsets put there, in bytes
        self._offsets_lock = threading.Lock()

    def _get(self, key: tuple[object, ...], make: Callable[[], Any]) -> Future[Any]:
        with _COMPILED_LOCK:
            known = _COMPILED.get(key)
            if (
                known is not None
                and not known.cancelled()
                and not (known.done() and known.exception() is not None)
            ):
                return known

            def compile_now() -> Any:
                with no_mesh():
                    return make()

            self.compiled += 1
            _COMPILED[key] = future = self._pool.submit(compile_now)
            return future

    def allocation(self, shape: Shape, dtype: np.dtype, device: object) -> Future[Any]:
        key = ("allocation", shape, dtype.str, str(device))
        return self._get(key, lambda: _allocation(shape, dtype, device))

    def update(
        self,
        shard: Shape,
        chunk: Shape,
        dtype: np.dtype,
        device: object,
        perm: Shape = (),
        sent: np.dtype | None = None,
    ) -> Future[Any]:
        """Chunks of `chunk`'s shape (arrived in `sent`, default `dtype`) into a shard's buffer."""
        sent = np.dtype(dtype if sent is None else sent)
        key = ("update", shard, chunk, dtype.str, str(device), perm, sent.str)
        return self._get(key, lambda: _update(shard, chunk, dtype, device, perm, sent))

    def arrange(
        self, shape: Shape, sent: np.dtype, dtype: np.dtype, device: object, perm: Shape
    ) -> Future[Any]:
        """A whole shard that arrived in `sent`, transposed by `perm` and converted to `dtype`."""
        key = ("arrange", shape, np.dtype(sent).str, np.dtype(dtype).str, str(device), perm)
        return self._get(key, lambda: _arrange(shape, sent, dtype, device, perm))

    def offsets(self, starts: Shape, device: object) -> tuple[Any, ...]:
        """`starts` (an update's offsets into its shard) as int32 scalars on `device`: put there
        the first time this load asks (`put_offsets`), the same arrays after."""
        key = (starts, str(device))
        with self._offsets_lock:
            known = self._offsets.get(key)
        if known is None:
            self.put_offsets([starts], device)
            with self._offsets_lock:
                known = self._offsets[key]
        return known

    def put_offsets(self, all_starts: list[Shape], device: object) -> None:
        """Put on `device` the offsets of `all_starts` it lacks, with one `jax.device_put` (each
        call is a few milliseconds on a TPU host, so a leaf's chunks go together)."""
        with self._offsets_lock:
            known = self._offsets
            new = list(dict.fromkeys(s for s in all_starts if (s, str(device)) not in known))
        if not new:
            return
        scalars = [np.int32(start) for starts in new for start in starts]
        arrays = iter(jax.device_put(scalars, device))
        with self._offsets_lock:
            for starts in new:
                put = tuple(next(arrays) for _ in starts)
                self._offsets.setdefault((starts, str(device)), put)
            nbytes = len(scalars) * np.dtype(np.int32).itemsize
            self.offset_bytes[str(device)] = self.offset_bytes.get(str(device), 0) + nbytes

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
        with self._offsets_lock:
            self._offsets.clear()
