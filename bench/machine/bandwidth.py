"""The probe's copy passes: file -> fresh private memory (warm and cold), first touch, memcpy.

One pass reads a whole probe file into one fresh private anonymous mapping, as the loader does:
`threads` threads take disjoint 32 MiB chunks in turn, each chunk populated for writing
(`loader.format.buffers.populate_for_write`, which the loader's prefault uses too) just before
its `os.preadv` (both release the GIL, so the threads run in parallel). Where the kernel refuses
`MADV_POPULATE_WRITE` (older kernels, gVisor: EINVAL), each chunk's pages are touched instead, one
byte written per page by the thread that then reads into it (`prefault` says which was used:
`POPULATE` or `TOUCH`, and `prefault_method()` what this process has used). A warm pass reads from
the page cache; a cold pass first evicts the file (`posix_fadvise(DONTNEED)`) and reads it with
`O_DIRECT` where the filesystem allows (no page cache at all), else buffered; on a slow disk only
the part of it one thread reads in about `COLD_PASS_S`. Never imports jax.
"""

from __future__ import annotations

import ctypes
import itertools
import mmap
import os
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from loader.format.buffers import host_buffer, populate_for_write

CHUNK = 32 << 20
DIRECT, BUFFERED = "O_DIRECT", "fadvise"  # how a cold pass keeps the page cache out
COLD_PASS_S = 1.5  # a cold pass reads about this long at one thread's speed (the file at most)


POPULATE, TOUCH = "populate", "touch"  # how fresh pages are faulted in before a read
READ_CHUNK = 8 << 20  # a reused-buffer read's chunk (per thread)


@dataclass
class _Prefault:
    """What this process has used to fault fresh pages in: None until a first prefault;
    `refused` the kernel's reason once `MADV_POPULATE_WRITE` was refused (then always TOUCH)."""

    method: str | None = None
    refused: str | None = None


_PREFAULT = _Prefault()


def touch_pages(array: np.ndarray) -> None:
    """Fault in the pages under `array` (a C-contiguous view) by writing one byte per page (the
    first page-aligned byte of each, and the array's first byte). numpy's strided fill releases
    the GIL, so threads touching disjoint views run in parallel."""
    if array.nbytes == 0:
        return
    flat = array.reshape(-1).view(np.uint8)
    start = array.__array_interface__["data"][0]
    first = -start % mmap.PAGESIZE
    flat[:1] = 0  # the first (maybe partial) page
    flat[first :: mmap.PAGESIZE] = 0


def prefault(array: np.ndarray) -> str:
    """Fault in the pages under `array` for writing: `MADV_POPULATE_WRITE` (the loader's way),
    or, where the kernel refuses it, one byte written per page. Returns the method used
    (`POPULATE` or `TOUCH`). The array's contents are undefined afterwards (it is about to be
    read into)."""
    if _PREFAULT.refused is None:
        if populate_for_write(array):
            _PREFAULT.method = _PREFAULT.method or POPULATE
            return POPULATE
        errno = ctypes.get_errno()
        why = os.strerror(errno) if errno else "no madvise in this libc"
        _PREFAULT.refused = f"madvise(MADV_POPULATE_WRITE) refused ({why})"
    touch_pages(array)
    _PREFAULT.method = TOUCH
    return TOUCH


def prefault_method() -> str | None:
    """How this process has faulted fresh pages in so far: `POPULATE`, `TOUCH` (the kernel
    refused populating at least once), or None (no prefault yet)."""
    return _PREFAULT.method


def prefault_note() -> str | None:
    """Why pages are touched rather than populated here (None: populating works, or untried)."""
    if _PREFAULT.refused is None:
        return None
    return f"{_PREFAULT.refused}: fresh pages touched one byte per page instead"


def reset_prefault() -> None:
    """Forget what was used (tests; a process that wants to try populating again)."""
    _PREFAULT.method = _PREFAULT.refused = None


def write_probe_file(path: Path, nbytes: int) -> None:
    """`nbytes` of incompressible bytes at `path` (one random `CHUNK`, written again and again:
    generating every byte cost 9 of 12 s for 2 GiB in gVisor), flushed to the disk (removed if
    that fails)."""
    block = np.random.default_rng(0).bytes(min(CHUNK, nbytes))
    try:
        with open(path, "wb") as fh:
            for start in range(0, nbytes, CHUNK):
                fh.write(block[: min(CHUNK, nbytes - start)])
            fh.flush()
            os.fsync(fh.fileno())
    except BaseException:
        path.unlink(missing_ok=True)
        raise


def _copy_into(fd: int, dest: np.ndarray, threads: int) -> None:
    """`threads` threads pread disjoint chunks of `fd` into `dest`, each prefaulted first."""
    counter = itertools.count()  # next() on it is atomic under the GIL
    size, errors = dest.nbytes, []
    view = memoryview(dest.data)

    def work() -> None:
        try:
            while (start := next(counter) * CHUNK) < size:
                piece = dest[start : start + CHUNK]
                prefault(piece)
                done = 0
                while done < piece.nbytes:
                    got = os.preadv(fd, [view[start + done : start + piece.nbytes]], start + done)
                    if got <= 0:
                        raise OSError(f"short read at byte {start + done} of {size}")
                    done += got
        except BaseException as exc:  # re-raised in the caller's thread
            errors.append(exc)

    pool = [threading.Thread(target=work) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    if errors:
        raise errors[0]


def copy_pass(
    path: Path, threads: int, *, direct: bool = False, nbytes: int | None = None
) -> float:
    """Seconds to read all of `path` (or its first `nbytes`) into a fresh private mapping with
    `threads` threads."""
    size = path.stat().st_size if nbytes is None else nbytes
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECT if direct else 0))
    try:
        start = time.perf_counter()
        dest = host_buffer((size,), np.dtype(np.uint8))
        _copy_into(fd, dest, threads)
        return time.perf_counter() - start
    finally:
        os.close(fd)


def reused_read_pass(
    path: Path, threads: int, chunk: int = READ_CHUNK, *, nbytes: int | None = None
) -> float:
    """Seconds to read all of `path` (or its first `nbytes`) with `threads` threads, each into
    one buffer of `chunk` bytes of its own, touched before the clock starts and reused for every
    chunk it reads: the page cache's read speed with no fresh memory to fault in (what a loader
    that stages through reused buffers, e.g. onto a device, is bound by)."""
    size = path.stat().st_size if nbytes is None else nbytes
    buffers = [np.ones(chunk, np.uint8) for _ in range(threads)]  # faulted in here
    counter = itertools.count()
    errors: list[BaseException] = []
    fd = os.open(path, os.O_RDONLY)

    def work(buf: np.ndarray) -> None:
        view = memoryview(buf.data)
        try:
            while (start := next(counter) * chunk) < size:
                want = min(chunk, size - start)
                done = 0
                while done < want:
                    got = os.preadv(fd, [view[done:want]], start + done)
                    if got <= 0:
                        raise OSError(f"short read at byte {start + done} of {size}")
                    done += got
        except BaseException as exc:  # re-raised in the caller's thread
            errors.append(exc)

    try:
        pool = [threading.Thread(target=work, args=(b,)) for b in buffers]
        begin = time.perf_counter()
        for t in pool:
            t.start()
        for t in pool:
            t.join()
        seconds = time.perf_counter() - begin
    finally:
        os.close(fd)
    if errors:
        raise errors[0]
    return seconds


def warm_reused_read(path: Path, counts: list[int], repeats: int) -> dict[int, float]:
    """Warm read bandwidth into reused, already-touched buffers by thread count (the file is
    cached first)."""
    reused_read_pass(path, max(counts))
    return rates(path.stat().st_size, lambda n: reused_read_pass(path, n), counts, repeats)


def copy_cpu(path: Path, threads: int, repeats: int) -> float:
    """Median CPU-seconds (user + system of every thread) per byte of a warm pass with `threads`
    threads: what moving a cached byte into fresh memory costs in C (faults and copies)."""
    size = path.stat().st_size
    spent = []
    for _ in range(repeats):
        start = time.process_time()
        copy_pass(path, threads)
        spent.append(time.process_time() - start)
    return statistics.median(spent) / size


def evict(path: Path) -> None:
    """Drop `path`'s pages from the page cache (it must have been flushed)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def direct_works(path: Path) -> bool:
    """Whether this filesystem serves an aligned `O_DIRECT` read of `path`."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    except OSError:
        return False
    try:
        buf = mmap.mmap(-1, mmap.PAGESIZE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        return os.preadv(fd, [buf], 0) > 0
    except OSError:
        return False
    finally:
        os.close(fd)


def rates(
    size: int, seconds_of: Callable[[int], float], counts: list[int], repeats: int
) -> dict[int, float]:
    """thread count -> median bytes/s over `repeats` passes, the thread counts interleaved."""
    seconds: dict[int, list[float]] = {n: [] for n in counts}
    for _ in range(repeats):
        for n in counts:
            seconds[n].append(seconds_of(n))
    return {n: size / statistics.median(s) for n, s in seconds.items()}


def warm_copy(path: Path, counts: list[int], repeats: int) -> dict[int, float]:
    """Warm copy bandwidth by thread count (the file read once first, so it is cached)."""
    copy_pass(path, max(counts))
    return rates(path.stat().st_size, lambda n: copy_pass(path, n), counts, repeats)


def cold_bytes(path: Path, direct: bool, pass_s: float) -> int:
    """How much of `path` one cold pass reads: what the disk serves in about `pass_s` seconds by
    one thread's first cold read of a 4-chunk prefix (whole chunks, at least 4, at most the file),
    so a slow or capped disk keeps the probe short."""
    size = path.stat().st_size
    prefix = min(size, 4 * CHUNK)
    evict(path)
    speed = prefix / copy_pass(path, 1, direct=direct, nbytes=prefix)
    chunks = max(4, int(speed * pass_s) // CHUNK)
    return min(size, chunks * CHUNK)


def cold_read(
    path: Path, counts: list[int], repeats: int, pass_s: float = COLD_PASS_S
) -> tuple[dict[int, float], str, int]:
    """Cold read bandwidth by thread count, how the cache was kept out (DIRECT, BUFFERED), and
    the bytes each pass read (the first `cold_bytes` of the file)."""
    direct = direct_works(path)
    nbytes = cold_bytes(path, direct, pass_s)

    def one(n: int) -> float:
        evict(path)
        return copy_pass(path, n, direct=direct, nbytes=nbytes)

    return rates(nbytes, one, counts, repeats), DIRECT if direct else BUFFERED, nbytes


def first_touch(nbytes: int, repeats: int) -> float:
    """Bytes/s at which the kernel hands out zeroed pages of a fresh mapping (one thread)."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        prefault(host_buffer((nbytes,), np.dtype(np.uint8)))
        times.append(time.perf_counter() - start)
    return nbytes / statistics.median(times)


def first_touch_by_size(sizes: list[int], repeats: int) -> dict[int, float]:
    """Size -> first-touch bytes/s of one mapping that large. The rate can fall with the size:
    a virtual machine whose host backs guest memory lazily serves recently freed pages fast and
    the rest at the host's page-fault speed, so a load larger than any recent allocation pays
    more per byte than a small probe shows. The first size is timed `repeats` times, larger ones
    once (several GiB each: seconds apiece where pages are touched one by one, as in gVisor)."""
    return {n: first_touch(n, repeats if i == 0 else 1) for i, n in enumerate(sizes)}


def single_core(repeats: int, n: int = 1_000_000) -> float:
    """Loop steps/s of one Python thread (`sum` over a generator): the core's speed at the
    interpreter work a model build does, which scales the CPU terms of a prediction."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        sum(i & 7 for i in range(n))
        times.append(time.perf_counter() - start)
    return n / statistics.median(times)


def memcpy(nbytes: int, repeats: int) -> float:
    """Bytes/s of one thread copying between two already-faulted buffers."""
    src, dst = np.ones(nbytes, np.uint8), np.ones(nbytes, np.uint8)  # both faulted in
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        np.copyto(dst, src)
        times.append(time.perf_counter() - start)
    return nbytes / statistics.median(times)
