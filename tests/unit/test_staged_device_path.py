"""The staged path as an accelerator runs it, checked on the CPU backend with staging forced:

- each chunk's transfer starts as soon as its own bytes are ready (mapped, or filled in a slot),
  never after the reader has gone on to the next chunk;
- no device program is compiled per tensor shape: leaves that fit one chunk compile nothing, and
  a shard assembled from chunks compiles one allocation and one update per shape
  (`loader.pipeline.programs`), counted by jax's own compile events;
- the device-fit check runs before any byte is read, and names both figures.
"""

from __future__ import annotations

import mmap
import os
import threading
import types

import jax
import numpy as np
import pytest

import loader
import shapes
from loader.errors import DeviceOutOfMemoryError
from loader.pipeline import device_shards, file_pages, programs, ring, ring_job
from loader.pipeline.ring_chunks import even_chunks
from loader.pipeline.sources import local
from loader.placement.leaves import iter_variables

F = "model.safetensors"


def spec_of(*tensors: tuple[str, str, tuple[int, ...]]) -> shapes.ShapeSpec:
    return shapes.ShapeSpec(
        "t", "", (F,), tuple(shapes.TensorSpec(n, d, s, F) for n, d, s in tensors)
    )


#: Twelve leaves of twelve shapes, each far under a mapped chunk.
MANY_SHAPES = spec_of(*((f"l{i}.weight", "F32", (8 + i, 24 + 2 * i)) for i in range(12)))
#: Two leaves of one shape and one of another, each larger than a chunk at BUDGET.
OVERSIZE = spec_of(
    ("a.weight", "F32", (1000, 64)),
    ("b.weight", "F32", (1000, 64)),
    ("c.weight", "F32", (64, 900)),
    ("d.bias", "F32", (64,)),
)
BUDGET = 256 << 10  # with 2 threads: mapped chunks of 56 KiB, so 250 KiB leaves go in chunks
THREADS = 2


def poisoned(spec, poison, dtype=None):
    model = shapes.model_builder(spec, dtype=dtype)()
    poison(model)
    return model


def load(spec, path, poison, dtype=None, model=None, **kw):
    model = model if model is not None else poisoned(spec, poison, dtype)
    return loader.load_model(
        model, path, staging=True, budget=BUDGET, threads=THREADS, casts="allow", **kw
    )


def verify(model, path) -> None:
    for key, var in iter_variables(model):
        shapes.verify_tensor(path, ".".join(map(str, key)), np.asarray(var.get_value()))


class Compiles:
    """Counts XLA backend compiles (jax's own event) while active."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, event: str, duration: float, **kwargs: object) -> None:
        if event == jax._src.dispatch.BACKEND_COMPILE_EVENT:
            self.count += 1

    def __enter__(self) -> Compiles:
        jax.monitoring.register_event_duration_secs_listener(self)
        return self

    def __exit__(self, *exc: object) -> None:
        jax.monitoring.unregister_event_duration_listener(self)


@pytest.fixture
def fresh_programs(monkeypatch):
    """No program compiled by an earlier test counts as already there."""
    monkeypatch.setattr(programs, "_COMPILED", {})


def test_leaves_of_many_shapes_compile_no_program(tmp_path, poison, fresh_programs):
    path = shapes.synthesize(MANY_SHAPES, tmp_path)
    model = poisoned(MANY_SHAPES, poison)  # (building and poisoning compile: not counted)
    with Compiles() as compiles:
        model, report = load(MANY_SHAPES, path, poison, model=model)
    verify(model, path)
    assert report.staging_memory == "mapped"  # every chunk straight from the file's pages
    assert report.device_programs == 0 and compiles.count == 0


def test_an_assembled_shard_compiles_once_per_shape(tmp_path, poison, fresh_programs):
    path = shapes.synthesize(OVERSIZE, tmp_path)
    model = poisoned(OVERSIZE, poison)
    with Compiles() as compiles:
        model, report = load(OVERSIZE, path, poison, model=model)
    verify(model, path)
    # two shapes larger than a chunk (a and b share one): an allocation and one update each
    assert report.device_programs == 4
    assert compiles.count == 4
    model = poisoned(OVERSIZE, poison)
    with Compiles() as again:  # a second load of the same shapes compiles nothing
        model, report = load(OVERSIZE, path, poison, model=model)
    verify(model, path)
    assert again.count == 0 and report.device_programs == 0


def test_chunks_of_an_assembled_shard_have_one_shape():
    region = (slice(0, 1000), slice(0, 64))
    chunks = even_chunks(region, 4, 56 << 10)
    assert len({(c[0].stop - c[0].start) for c in chunks}) == 1
    covered = np.zeros(1000, bool)
    for c in chunks:
        covered[c[0]] = True
    assert covered.all() and chunks[-1][0].stop == 1000
    overlap = sum(c[0].stop - c[0].start for c in chunks) - 1000
    assert 0 <= overlap < len(chunks)  # balanced: under one row a chunk is sent twice


class Events:
    """Per reader thread, what it did in order: a chunk's bytes ready ("ready"), its transfer
    started ("send")."""

    def __init__(self, monkeypatch) -> None:
        self.by_thread: dict[int, list[str]] = {}
        self.lock = threading.Lock()
        real_fill, real_mapped = ring_job.fill_region, ring_job.mapped_range
        real_send = ring.RingSender.send

        def fill(*a, **kw):
            real_fill(*a, **kw)
            self.add("ready")

        def mapped(*a, **kw):
            out = real_mapped(*a, **kw)
            self.add("ready")
            return out

        def send(sender, *a, **kw):
            self.add("send")
            return real_send(sender, *a, **kw)

        monkeypatch.setattr(ring_job, "fill_region", fill)
        monkeypatch.setattr(ring_job, "mapped_range", mapped)
        monkeypatch.setattr(ring.RingSender, "send", send)

    def add(self, kind: str) -> None:
        with self.lock:
            self.by_thread.setdefault(threading.get_ident(), []).append(kind)


@pytest.mark.parametrize("dtype", [None, "bfloat16"])  # mapped chunks; slot chunks (a cast)
def test_a_chunk_is_sent_before_its_reader_reads_the_next(tmp_path, poison, monkeypatch, dtype):
    path = shapes.synthesize(OVERSIZE, tmp_path)
    events = Events(monkeypatch)
    model, _ = load(OVERSIZE, path, poison, dtype=dtype)
    if dtype is None:
        verify(model, path)
    sequences = list(events.by_thread.values())
    assert sum(s.count("send") for s in sequences) > 2 * THREADS  # many chunks
    for seq in sequences:
        # every chunk ready is sent next, on the same thread, before any other read
        assert "".join(k[0] for k in seq) == "rs" * (len(seq) // 2), seq


def test_the_event_check_sees_a_reader_that_reads_ahead_of_its_sends(monkeypatch):
    """Meta: a sequence where a second chunk is read before the first is sent fails the rule."""
    seq = ["ready", "ready", "send", "send"]
    assert "".join(k[0] for k in seq) != "rs" * (len(seq) // 2)


def test_a_model_larger_than_the_device_is_refused_before_any_read(tmp_path, poison, monkeypatch):
    path = shapes.synthesize(OVERSIZE, tmp_path)
    reads = []
    monkeypatch.setattr(local.FileBytes, "read", lambda self, *a: reads.append(a))
    monkeypatch.setattr(local.FileBytes, "mapped", lambda self, *a: reads.append(a))
    monkeypatch.setattr(device_shards, "free_bytes", lambda device: 100_000)
    monkeypatch.setattr(device_shards, "_memory_stats", lambda d: {"bytes_limit": 200_000})
    with pytest.raises(DeviceOutOfMemoryError) as caught:
        load(OVERSIZE, path, poison)
    text = str(caught.value)
    want = 2 * 1000 * 64 * 4 + 64 * 900 * 4 + 64 * 4
    assert f"needs {want} bytes" in text and "100000 bytes" in text and "free of 200000" in text
    assert reads == []  # nothing read


def test_little_device_room_makes_mapped_chunks_smaller(tmp_path, poison, monkeypatch):
    path = shapes.synthesize(OVERSIZE, tmp_path)
    model_bytes = 2 * 1000 * 64 * 4 + 64 * 900 * 4 + 64 * 4
    monkeypatch.setattr(device_shards, "free_bytes", lambda device: model_bytes + (64 << 10))
    seen: list[int] = []
    real = ring.MappedFlight.admit

    def admit(flight, nbytes):
        seen.append(flight.device_cap)
        return real(flight, nbytes)

    monkeypatch.setattr(ring.MappedFlight, "admit", admit)
    model, _ = load(OVERSIZE, path, poison)
    verify(model, path)
    assert seen and all(cap == 32 << 10 for cap in seen)  # half of the room the model leaves


@pytest.mark.parametrize("why", ["dontneed", "unmappable"])
def test_a_file_that_is_not_mapped_goes_through_the_ring(tmp_path, poison, monkeypatch, why):
    """Pages to drop from the page cache once read (`cache_policy="dontneed"`), or a file system
    that refuses `mmap`: the chunks are read into ring slots instead, bit-exact."""
    path = shapes.synthesize(OVERSIZE, tmp_path)
    kw = {}
    if why == "dontneed":
        kw["cache_policy"] = "dontneed"
    else:

        def refuse(*a, **k):
            raise OSError("mmap not supported here")

        # the file pages' own `mmap` only (host buffers map anonymous memory too)
        unmappable = types.SimpleNamespace(
            ALLOCATIONGRANULARITY=mmap.ALLOCATIONGRANULARITY, PROT_READ=mmap.PROT_READ, mmap=refuse
        )
        monkeypatch.setattr(file_pages, "mmap", unmappable)
    model, report = load(OVERSIZE, path, poison, **kw)
    verify(model, path)
    assert report.staging_memory == "pageable"


def test_a_window_of_the_file_is_mapped_for_many_chunks_sent_by_one_thread(
    tmp_path, poison, monkeypatch
):
    """Mapped chunks are views of a window of their file mapped once for all the chunks in it
    (an `mmap` per chunk cost as much as the chunk's transfer inside gVisor), and one thread
    starts all their transfers, in file order (the window is reused)."""
    path = shapes.synthesize(OVERSIZE, tmp_path)
    maps, senders = [], set()
    real_map, real_send = mmap.mmap, ring.RingSender.send

    def counted_map(*a, **k):
        maps.append(a)
        return real_map(*a, **k)

    def send(self, *a, **k):
        senders.add(threading.current_thread().name)
        return real_send(self, *a, **k)

    counting = types.SimpleNamespace(**{k: getattr(mmap, k) for k in dir(mmap)})
    counting.mmap = counted_map  # the file pages' own `mmap` only (host buffers map memory too)
    monkeypatch.setattr(file_pages, "mmap", counting)
    monkeypatch.setattr(ring.RingSender, "send", send)
    sent = []
    real_launched = ring.MappedFlight.launched
    monkeypatch.setattr(
        ring.MappedFlight, "launched", lambda self, *a: sent.append(a) or real_launched(self, *a)
    )
    model, report = load(OVERSIZE, path, poison)
    verify(model, path)
    assert report.staging_memory == "mapped"
    assert len(sent) > 4 * len(maps) > 0  # the file (< one window) is mapped once or so
    assert senders == {"loader-pipeline-mapped"}


def test_a_window_is_unmapped_with_its_last_view(tmp_path, monkeypatch):
    """The host holds the views in flight plus one window: a window whose views are gone is
    unmapped (its pages leave the process; only `munmap` does that inside gVisor)."""
    monkeypatch.setattr(file_pages, "WINDOW_BYTES", 8 << 20)
    size = 64 << 20
    path = tmp_path / "blob"
    path.write_bytes(np.random.default_rng(0).integers(0, 255, size, dtype=np.uint8).tobytes())

    def rss() -> int:
        with open("/proc/self/status", encoding="ascii") as status:
            return next(int(line.split()[1]) << 10 for line in status if line.startswith("VmRSS"))

    fd = os.open(path, os.O_RDONLY)
    try:
        pages = file_pages.FilePages(fd, size)
        before, high, step = rss(), 0, 1 << 20
        held = []
        for at in range(0, size, step):
            held.append(pages.view(at, step))
            assert int(held[-1][::4096].sum()) > 0  # touch its pages
            held = held[-4:]  # four chunks in flight
            high = max(high, rss() - before)
        pages.close()
    finally:
        os.close(fd)
    assert high < 24 << 20  # in flight and one window, never the 64 MiB file
