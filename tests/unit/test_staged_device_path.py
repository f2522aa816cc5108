"""The staged path as an accelerator runs it, checked on the CPU backend with staging forced:

- each chunk's transfer starts as soon as its own bytes are ready (mapped, or filled in a slot),
  never after the reader has gone on to the next chunk;
- no device program is compiled per tensor shape: leaves that fit one chunk compile nothing, and
  a shard assembled from chunks compiles one allocation and one update per shape
  (`loader.pipeline.programs`), counted by jax's own compile events;
- the device-fit check runs before any byte is read, and names both figures;
- the chunks of leaves assembled on the device travel before a tail of plain chunks, and land
  before it (the device's peak stays at the model, the host's where it was);
- a chunk whose programs are still compiling waits on its device, where the device has room for
  its shard beside it, while the sender goes on; an update's offsets are device arrays, put once.
"""

from __future__ import annotations

import mmap
import os
import re
import threading
import types
from concurrent.futures import Future

import jax
import numpy as np
import pytest

import loader
import shapes
from loader.budget import ByteBudget
from loader.errors import DeviceOutOfMemoryError
from loader.pipeline import (
    device_shards,
    engine,
    file_pages,
    mapped_send,
    programs,
    ring,
    ring_job,
    sizing,
)
from loader.pipeline.jobs import MappedPart
from loader.pipeline.regions import full_region
from loader.pipeline.ring_chunks import DevicePiece, contiguous_bytes, even_chunks
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


def transposed(spec: shapes.ShapeSpec) -> tuple[shapes.ShapeSpec, dict[str, object]]:
    """A port of `spec`: each 2-D leaf the transpose of its file tensor (key_map), the model's
    shapes flipped to match; other leaves as stored."""
    flip = loader.Transpose((1, 0))
    key_map = {f"{t.name}.t": (t.name, flip) for t in spec.tensors if len(t.shape) == 2}
    leaves = [
        (f"{t.name}.t", t.dtype, t.shape[::-1]) if len(t.shape) == 2 else (t.name, t.dtype, t.shape)
        for t in spec.tensors
    ]
    return spec_of(*leaves), key_map


def test_transposed_leaves_are_transposed_by_their_transfer_without_programs(
    tmp_path, poison, fresh_programs
):
    """A port's transposed leaves go as strided views of the file's pages: nothing compiled for
    the ones that fit a chunk, and only the plain assembly (an allocation and one update per
    shape, no transpose) for the ones larger than a chunk."""
    for spec, oversize in ((MANY_SHAPES, 0), (OVERSIZE, 2)):
        path = shapes.synthesize(spec, tmp_path / f"shapes-{oversize}")
        port, key_map = transposed(spec)
        model = poisoned(port, poison)
        with Compiles() as compiles:
            model, report = load(port, path, poison, model=model, key_map=key_map)
        leaves = {
            ".".join(map(str, k)): np.asarray(v.get_value()) for k, v in iter_variables(model)
        }
        for key, (name, _) in key_map.items():
            shapes.verify_tensor(path, name, leaves[key].T)
        assert set(report.transfer_transposed) == set(key_map) and not report.device_transposed
        # OVERSIZE: (1000, 64) twice and (64, 900) flipped: two shapes, an allocation and an update
        assert report.device_programs == compiles.count == 2 * oversize


@pytest.mark.parametrize(
    ("port", "transposed_chunk"), [(False, None), (True, None), (True, 24 << 10)]
)
def test_the_programs_a_load_compiles_are_asked_for_before_the_build_ends(
    tmp_path, poison, fresh_programs, monkeypatch, port, transposed_chunk
):
    """On one device (an accelerator's usual case) the programs of the tensors larger than a
    chunk compile while the model is built: as stored, or, for a port's key_map transposes, in
    the transposed layout the chunks arrive in (the stored layout's would go unused), cut as a
    transposing transfer's chunks are (`TRANSPOSED_CHUNK_BYTES`, here below a mapped chunk)."""
    monkeypatch.setattr(ring_job.jax, "local_devices", lambda: jax.devices()[:1])
    if transposed_chunk is not None:
        monkeypatch.setattr(ring_job, "TRANSPOSED_CHUNK_BYTES", transposed_chunk)
    path = shapes.synthesize(OVERSIZE, tmp_path)
    spec, key_map = transposed(OVERSIZE) if port else (OVERSIZE, None)
    asked_by_then: list[set[object]] = []

    def built(model) -> None:
        asked_by_then.append(set(programs._COMPILED))

    model = poisoned(spec, poison)
    kw = {"key_map": key_map} if port else {}
    model, report = load(spec, path, poison, model=model, on_built=built, **kw)
    assert report.device_programs == 4 and asked_by_then
    assert asked_by_then[0] == set(programs._COMPILED)  # nothing asked for after the build
    leaves = {".".join(map(str, k)): np.asarray(v.get_value()) for k, v in iter_variables(model)}
    for key, (name, _) in (key_map or {}).items():
        shapes.verify_tensor(path, name, leaves[key].T)


def test_compiling_threads_leave_a_cpu_to_the_sender(tmp_path, poison, monkeypatch):
    """Up to four compiling threads, one fewer than the CPUs the load may use, at least one: on
    two CPUs two compiling threads slowed a staged load's sender (docs/results.md). The count is
    one of the load's sizes (`Sizing.compile_threads`), and its programs compile on that many."""
    cpus = (1, 1.5, 2, 3, 5, 13)
    assert [programs.compile_threads(c) for c in cpus] == [1, 1, 1, 2, 4, 4]
    monkeypatch.setattr(sizing, "usable_cpus", lambda: 2.0)
    made: list[int] = []
    real_init = programs.DevicePrograms.__init__

    def init(self, threads=programs.COMPILE_THREADS):
        made.append(threads)
        real_init(self, threads)

    monkeypatch.setattr(programs.DevicePrograms, "__init__", init)
    path = shapes.synthesize(OVERSIZE, tmp_path)
    model, report = load(OVERSIZE, path, poison)
    verify(model, path)
    assert report.device_programs and made == [1]


def test_the_rows_a_last_chunk_sends_again_are_reported(tmp_path, poison):
    """Chunks of one shape: 1001 rows of 256 bytes in 56 KiB chunks go as five of 201 rows, the
    last overlapping the one before by four rows, which the device receives twice; beside them,
    the five chunks' offsets into the shard (two int32 each), put once."""
    spec = spec_of(("a.weight", "F32", (1001, 64)))
    path = shapes.synthesize(spec, tmp_path)
    model, report = load(spec, path, poison)
    verify(model, path)
    device = str(jax.devices()[0])
    beyond = 4 * 64 * 4 + 5 * 2 * 4
    assert report.device_resent_bytes == {device: beyond}
    received, expected = report.device_received_bytes, report.device_expected_bytes
    assert received[device] == expected[device] + beyond


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


def test_contiguous_bytes_says_which_regions_are_one_run_of_bytes():
    """Every box of a (3, 4, 5) tensor against numpy: one run where its elements are consecutive
    (a part of one row counts; it was sent through the ring before)."""
    shape = (3, 4, 5)
    flat = np.arange(60).reshape(shape)
    runs = [[slice(i, j) for i in range(n) for j in range(i + 1, n + 1)] for n in shape]
    for a in runs[0]:
        for b in runs[1]:
            for c in runs[2]:
                consecutive = bool(np.all(np.diff(flat[a, b, c].ravel()) == 1))
                assert contiguous_bytes((a, b, c), shape) == consecutive, (a, b, c)


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
        real_fill, real_mapped = ring_job.fill_region, local.FileBytes.mapped
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
        monkeypatch.setattr(local.FileBytes, "mapped", mapped)
        monkeypatch.setattr(ring.RingSender, "send", send)

    def add(self, kind: str) -> None:
        with self.lock:
            self.by_thread.setdefault(threading.get_ident(), []).append(kind)


def runs(seq: list[str]) -> list[tuple[int, int]]:
    """The sequence as (chunks made ready, chunks sent) runs: "rrssrs" -> [(2, 2), (1, 1)]."""
    text = "".join(k[0] for k in seq)
    groups = re.findall(r"(r*)(s*)", text)
    return [(len(r), len(s)) for r, s in groups if r or s]


@pytest.mark.parametrize("dtype", [None, "bfloat16"])  # mapped chunks; slot chunks (a cast)
def test_a_chunk_is_sent_before_its_reader_reads_the_next(tmp_path, poison, monkeypatch, dtype):
    """A chunk read into a slot is sent before its thread reads the next; mapped chunks (nothing
    to read: a view of the file's pages) go a batch at a time, each batch sent before the next is
    mapped."""
    path = shapes.synthesize(OVERSIZE, tmp_path)
    events = Events(monkeypatch)
    model, _ = load(OVERSIZE, path, poison, dtype=dtype)
    if dtype is None:
        verify(model, path)
    sequences = list(events.by_thread.values())
    assert sum(s.count("send") for s in sequences) > 2 * THREADS  # many chunks
    most = 1 if dtype is not None else mapped_send.BATCH_CHUNKS
    for seq in sequences:
        # every chunk made ready is sent in its own run, before the thread makes any other ready
        assert all(r == s and 0 < r <= most for r, s in runs(seq)), seq


def test_the_event_check_sees_a_reader_that_reads_ahead_of_its_sends(monkeypatch):
    """Meta: a sequence where a second chunk is read before the first is sent fails the rule."""
    assert runs(["ready", "ready", "send", "send"]) == [(2, 2)]  # > 1: fails for slot chunks
    assert runs(["ready", "ready", "send", "ready", "send", "send"]) == [(2, 1), (1, 2)]


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

    def admit(flight, nbytes, cap=None):
        seen.append(flight.device_cap)
        return real(flight, nbytes, cap)

    monkeypatch.setattr(ring.MappedFlight, "admit", admit)
    model, _ = load(OVERSIZE, path, poison)
    verify(model, path)
    assert seen and all(cap == 32 << 10 for cap in seen)  # half of the room the model leaves


@pytest.mark.parametrize("why", ["dontneed", "unmappable"])
def test_a_file_that_is_not_mapped_goes_through_the_ring(tmp_path, poison, request, why):
    """Pages to drop from the page cache once read (`cache_policy="dontneed"`), or a file system
    that refuses `mmap`: the chunks are read into ring slots instead, bit-exact."""
    path = shapes.synthesize(OVERSIZE, tmp_path)
    kw = {}
    if why == "dontneed":
        kw["cache_policy"] = "dontneed"
    else:
        request.getfixturevalue("unmappable_files")
    model, report = load(OVERSIZE, path, poison, **kw)
    verify(model, path)
    assert report.staging_memory == "pageable"


def test_a_window_of_the_file_is_mapped_for_many_chunks_sent_by_one_thread(
    tmp_path, poison, monkeypatch
):
    """Mapped chunks are views of a window of their file mapped once for all the chunks in it
    (an `mmap` per chunk cost as much as the chunk's transfer inside gVisor), and one thread
    starts all their transfers, in file order (the window is reused): with nothing to read, the
    main thread (two threads trading the interpreter's lock made each put twice as slow)."""
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
    real_launched = ring.MappedFlight.launched_many
    monkeypatch.setattr(
        ring.MappedFlight,
        "launched_many",
        lambda self, started: sent.extend(started) or real_launched(self, started),
    )
    model, report = load(OVERSIZE, path, poison)
    verify(model, path)
    assert report.staging_memory == "mapped"
    assert len(sent) > 4 * len(maps) > 0  # the file (< one window) is mapped once or so
    assert senders == {"MainThread"}


def test_with_every_part_mapped_no_reader_thread_starts(tmp_path, poison, monkeypatch):
    """Nothing to read (every chunk goes from mapped pages): no reader thread is started (each
    costs a thread's start inside a sandbox); the leaf of one shard on one device is that shard,
    handed over as it is (no `make_array_from_single_device_arrays` per leaf)."""
    path = shapes.synthesize(OVERSIZE, tmp_path)
    started: list[str] = []
    real_start = threading.Thread.start

    def start(self):
        started.append(self.name)
        real_start(self)

    assembled = []
    real_assemble = jax.make_array_from_single_device_arrays
    monkeypatch.setattr(threading.Thread, "start", start)
    monkeypatch.setattr(
        jax,
        "make_array_from_single_device_arrays",
        lambda *a, **k: assembled.append(a[0]) or real_assemble(*a, **k),
    )
    model, report = load(OVERSIZE, path, poison)
    verify(model, path)
    assert report.staging_memory == "mapped"
    assert [name for name in started if re.fullmatch(r"loader-pipeline-\d+", name)] == []
    assert assembled == []


#: Stored in two dtypes: into a bfloat16 model the BF16 leaves go from mapped pages, the F32 ones
#: are read into slots and cast.
MIXED = spec_of(
    ("a.weight", "BF16", (1000, 64)),
    ("b.weight", "F32", (1000, 64)),
    ("c.weight", "BF16", (64, 900)),
    ("d.bias", "F32", (64,)),
)


def test_beside_reader_threads_one_sender_thread_starts_the_mapped_transfers(
    tmp_path, poison, monkeypatch
):
    """A load whose other parts are read (casts): its mapped chunks are sent by one thread of
    their own, never the main thread (it finishes jobs meanwhile) nor a reader."""
    path = shapes.synthesize(MIXED, tmp_path)
    mapped_by, slots_by = set(), set()
    real_map, real_slot = ring_job.RingJob.map_chunk, ring_job.RingJob._send_slot

    def map_chunk(self, *a, **k):
        mapped_by.add(threading.current_thread().name)
        return real_map(self, *a, **k)

    def through_slot(self, *a, **k):
        slots_by.add(threading.current_thread().name)
        return real_slot(self, *a, **k)

    monkeypatch.setattr(ring_job.RingJob, "map_chunk", map_chunk)
    monkeypatch.setattr(ring_job.RingJob, "_send_slot", through_slot)
    model, report = load(MIXED, path, poison, dtype="bfloat16")
    verify(model, path)
    assert mapped_by == {"loader-pipeline-mapped"}
    assert slots_by and "loader-pipeline-mapped" not in slots_by and "MainThread" not in slots_by
    assert report.staging_memory == "pageable"  # the ring was used, for the casts


def test_on_an_accelerator_a_batch_of_mapped_chunks_is_one_device_put(
    tmp_path, poison, monkeypatch
):
    """Where device memory is not the host's, the mapped chunks of a batch start with one
    `jax.device_put` of the list (a put's Python cost paid once per batch), bit-exact."""
    path = shapes.synthesize(MANY_SHAPES, tmp_path)
    monkeypatch.setattr(ring, "host_memory", lambda device: False)
    calls: list[int] = []
    real_put = jax.device_put

    def put(x, *a, **k):
        calls.append(len(x) if isinstance(x, list) else 1)
        return real_put(x, *a, **k)

    monkeypatch.setattr(ring.jax, "device_put", put)
    model, report = load(MANY_SHAPES, path, poison)
    verify(model, path)
    assert report.staging_memory == "mapped"
    assert sum(calls) == len(MANY_SHAPES.tensors) and len(calls) < sum(calls) / 2, calls


def test_batches_hold_at_most_their_bytes_and_chunks(monkeypatch):
    monkeypatch.setattr(mapped_send, "BATCH_CHUNKS", 3)
    parts = [MappedPart(None, None, None, 0, n) for n in (10, 10, 10, 10, 50, 5, 5)]  # type: ignore[arg-type]
    got = [[p.nbytes for p in b] for b in mapped_send.batches(parts, limit_bytes=30)]
    assert got == [[10, 10, 10], [10], [50], [5, 5]]  # a part larger than the limit goes alone


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


class SecondLook:
    """A transfer that is not ready when first asked and ready from then on (a DMA that completes
    just after it is started), so what folds it is the next look, not the send itself."""

    def __init__(self, chunk: np.ndarray, device: object) -> None:
        self.array = jax.device_put(np.array(chunk), device)
        self.looked = False

    def is_ready(self) -> bool:
        ready, self.looked = self.looked, True
        return ready

    def block_until_ready(self) -> SecondLook:
        return self

    def result(self) -> jax.Array:
        return self.array


def test_arrived_chunks_go_into_their_shards_while_later_batches_are_sent(
    tmp_path, poison, monkeypatch, fresh_programs
):
    """With every part mapped, the main thread sends all batches before it finishes a leaf; the
    chunks that completed meanwhile are folded into their shards after each batch, so the device
    holds the shards and the chunks in flight, not a last chunk of every tensor sent so far (a
    llama3-8b load at budget=128MiB ran out of device memory that way)."""
    path = shapes.synthesize(OVERSIZE, tmp_path)
    monkeypatch.setattr(ring, "pageable_transfer", SecondLook)
    jobs: dict[object, None] = {}
    last_batch: list[object] = []
    pending_at_finish: list[set[str]] = []
    real_send, real_finish = mapped_send.send_batch, engine.Pipeline._finish

    def send_batch(batch, sender):
        jobs.update(dict.fromkeys(part.job for part in batch))
        last_batch[:] = [part.job for part in batch]
        return real_send(batch, sender)

    def finish(self, job, plan):
        if not pending_at_finish:
            held = {j.step.leaf.key for j in jobs if any(p.pending for p in j.pieces)}
            pending_at_finish.append({".".join(map(str, k)) for k in held})
        return real_finish(self, job, plan)

    monkeypatch.setattr(engine, "send_batch", send_batch)
    monkeypatch.setattr(engine.Pipeline, "_finish", finish)
    model, report = load(OVERSIZE, path, poison)
    verify(model, path)
    assert report.device_programs  # shards assembled from chunks
    last = {".".join(map(str, j.step.leaf.key)) for j in last_batch}
    assert pending_at_finish and pending_at_finish[0] <= last, (pending_at_finish, last)


def test_a_batch_that_runs_out_of_device_memory_names_its_tensors(tmp_path, poison, monkeypatch):
    """One `jax.device_put` of a batch failing for device memory: one error naming the batch's
    first and last tensors, the device and its free memory; every loader thread joined, and the
    batch's bytes given back to the budget (admitted, never in flight)."""
    path = shapes.synthesize(MANY_SHAPES, tmp_path)
    monkeypatch.setattr(ring, "host_memory", lambda device: False)
    flights: list[ring.MappedFlight] = []
    real_init = ring.MappedFlight.__init__

    def init(self, *a, **k):
        flights.append(self)
        real_init(self, *a, **k)

    monkeypatch.setattr(ring.MappedFlight, "__init__", init)

    def full(x, *a, **k):
        raise RuntimeError("RESOURCE_EXHAUSTED: Out of memory while trying to allocate 4096 bytes")

    monkeypatch.setattr(ring.jax, "device_put", full)
    with pytest.raises(DeviceOutOfMemoryError) as caught:
        load(MANY_SHAPES, path, poison)
    text = str(caught.value)
    assert "tensor 'l0.weight'" in text and " to " in text and "ran out of memory" in text, text
    assert [t for t in threading.enumerate() if t.name.startswith("loader-pipeline")] == []
    [flight] = flights
    assert flight.budget.in_flight_bytes == flight.budget.reserved_bytes


#: OVERSIZE's assembled leaves beside twelve plain ones (51 KiB each, one chunk: 600 KiB).
ASSEMBLED_AND_PLAIN = spec_of(
    *((t.name, t.dtype, t.shape) for t in OVERSIZE.tensors),
    *((f"p{i}.weight", "F32", (200, 64)) for i in range(12)),
)


def test_assembled_chunks_travel_before_a_tail_of_plain_ones(tmp_path, poison, monkeypatch):
    """A chunk of a leaf assembled on its device holds device memory beyond the model until its
    update has run: those chunks go after the first plain ones (their programs compile
    meanwhile) but before the last plain ones, at least twice the budget of them, so that they
    travel while the device still lacks more of the model than they hold (sent last, they were
    llama3-8b's peak of 1.018x the model on a TPU)."""
    path = shapes.synthesize(ASSEMBLED_AND_PLAIN, tmp_path)
    sent: list[tuple[bool, int]] = []  # (assembled, device bytes) of each chunk, in send order
    real_send = mapped_send.send_batch

    def send_batch(batch, sender):
        sent.extend((p.job.needs_programs, p.nbytes) for p in batch)
        return real_send(batch, sender)

    monkeypatch.setattr(engine, "send_batch", send_batch)
    model, report = load(ASSEMBLED_AND_PLAIN, path, poison)
    verify(model, path)
    last_assembled = max(i for i, (assembled, _) in enumerate(sent) if assembled)
    after = sent[last_assembled + 1 :]
    assert not any(assembled for assembled, _ in after)
    assert sum(nbytes for _, nbytes in after) >= 2 * BUDGET
    first_assembled = min(i for i, (assembled, _) in enumerate(sent) if assembled)
    assert first_assembled > 0  # plain ones first, while the programs compile


def test_programs_before_tail_keeps_each_group_in_order():
    """The parts that wait for a program go after the plain ones except the last plain ones of
    at least `tail_bytes`; with fewer plain bytes than that, before every plain part, but never
    before the parts of jobs that hold budgeted bytes."""

    def part(name: str, assembled: bool, nbytes: int, holds: bool = False) -> object:
        job = types.SimpleNamespace(holds_budget=holds, shard_bytes=0)
        return types.SimpleNamespace(
            name=name, assembled=assembled, device_bytes=nbytes, jobs=(job,)
        )

    work = [part("h0", False, 0, holds=True), part("p0", False, 4), part("a0", True, 8)]
    work += [part("p1", False, 4), part("p2", False, 2), part("a1", True, 8), part("p3", False, 3)]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ring_job, "waits_for_program", lambda w: w.assembled)
        names = lambda tail: [w.name for w in ring_job.programs_before_tail(work, tail)]  # noqa: E731
        assert names(0) == ["h0", "p0", "p1", "p2", "p3", "a0", "a1"]
        assert names(5) == ["h0", "p0", "p1", "a0", "a1", "p2", "p3"]  # 2 + 3 bytes last
        # a part holding budget stays first whatever the tail (a wait for budget must end)
        assert names(100) == ["h0", "a0", "a1", "p0", "p1", "p2", "p3"]


def test_shards_too_large_to_fold_late_go_last_among_the_assembled():
    """A shard larger than `defer_bytes` is folded as its chunks land, compiled or not: its
    parts go after the other assembled ones (in order within each), giving its programs time."""

    def part(name: str, shard: int) -> object:
        job = types.SimpleNamespace(holds_budget=False)
        return types.SimpleNamespace(name=name, shard=shard, device_bytes=1, jobs=(job,))

    work = [part("big0", 9), part("a0", 4), part("big1", 9), part("a1", 4), part("p0", 0)]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ring_job, "waits_for_program", lambda w: w.shard > 0)
        mp.setattr(ring_job, "shard_bytes", lambda w: w.shard)
        names = lambda defer: [  # noqa: E731
            w.name for w in ring_job.programs_before_tail(work, 0, defer)
        ]
        assert names(4) == ["p0", "a0", "a1", "big0", "big1"]
        assert names(0) == ["p0", "big0", "a0", "big1", "a1"]  # none folds late: as queued
        assert names(9) == ["p0", "big0", "a0", "big1", "a1"]


class LaterPrograms:
    """`DevicePrograms` whose compiles end when the test says (`compile_all`)."""

    def __init__(self) -> None:
        self.real = programs.DevicePrograms()
        self.futures: dict[tuple[object, ...], tuple[Future, Future]] = {}

    def _later(self, key: tuple[object, ...], real: Future) -> Future:
        later, _ = self.futures.setdefault(key, (Future(), real))
        return later

    def allocation(self, *args):
        return self._later(("allocation", *map(str, args)), self.real.allocation(*args))

    def update(self, *args, **kw):
        key = ("update", *map(str, args), *map(str, kw.values()))
        return self._later(key, self.real.update(*args, **kw))

    def offsets(self, starts, device):
        return self.real.offsets(starts, device)

    def compile_all(self) -> None:
        for later, real in self.futures.values():
            if not later.done():
                later.set_result(real.result())


def test_a_chunk_waits_on_its_device_for_its_programs_only_where_its_shard_fits_beside_it(
    fresh_programs,
):
    """`fold` leaves an arrived chunk pending while its programs compile where the device has
    room for the shard beside it (`defer_bytes`), and waits for them where it has not; either way
    the shard ends bit-exact."""
    device = jax.devices()[0]
    values = np.arange(8 * 4, dtype=np.float32).reshape(8, 4)
    piece = DevicePiece(device, full_region((8, 4)), np.dtype(np.float32))
    shard = values.nbytes
    later = LaterPrograms()
    top, bottom = full_region((4, 4)), (slice(4, 8), slice(0, 4))
    piece.pending.append((jax.device_put(values[:4], device), top, False))
    unblock = threading.Timer(5, later.compile_all)  # a fold that waits fails, after 5 s
    unblock.start()
    assert device_shards.fold(piece, "w", later, ready_only=True, defer_bytes=shard) is None
    unblock.cancel()
    assert len(piece.pending) == 1 and piece.array is None  # left on the device, not waited for

    piece.pending.append((jax.device_put(values[4:], device), bottom, False))
    threading.Timer(0.2, later.compile_all).start()
    token = device_shards.fold(piece, "w", later, ready_only=True, defer_bytes=shard - 1)
    assert token is not None and piece.pending == []  # too large to wait: folded once compiled
    np.testing.assert_array_equal(np.asarray(piece.array), values)
    later.real.close()


def test_a_whole_shard_is_its_array_at_once_and_a_part_waits_until_it_has_landed(monkeypatch):
    """`fold` takes a device array that is its whole shard as it is, landed or not (no second
    look after each batch); a chunk of a larger shard stays pending until its transfer has landed
    (its update then reads landed bytes)."""
    device = jax.devices()[0]
    values = np.arange(8 * 4, dtype=np.float32).reshape(8, 4)
    monkeypatch.setattr(device_shards, "_is_ready", lambda handle: False)  # nothing landed yet
    compiler = programs.DevicePrograms(1)  # asked for nothing here: neither case needs a program
    whole = DevicePiece(device, full_region((8, 4)), np.dtype(np.float32))
    sent = jax.device_put(values, device)
    whole.pending.append((sent, full_region((8, 4)), True))
    assert device_shards.fold(whole, "w", compiler, ready_only=True) is None
    assert whole.pending == [] and whole.array is sent

    part = DevicePiece(device, full_region((8, 4)), np.dtype(np.float32))
    part.pending.append((jax.device_put(values[:4], device), full_region((4, 4)), True))
    device_shards.fold(part, "w", compiler, ready_only=True)
    assert len(part.pending) == 1 and part.array is None
    assert compiler.compiled == 0
    compiler.close()


class _Transfer:
    def __init__(self, ready: bool) -> None:
        self.ready = ready

    def is_ready(self) -> bool:
        return self.ready

    def block_until_ready(self) -> _Transfer:
        return self


def test_a_batch_lands_the_oldest_transfers_that_completed_and_gives_their_budget_back():
    """`MappedFlight.launched_many` lands, in the order they started, the transfers that have
    completed, up to the first that has not (later ones wait behind it), and gives their bytes
    of the budget back at once; `drain` lands the rest."""
    budget = ByteBudget(1000)
    flight = ring.MappedFlight(budget)
    flight.admit(100)
    first, second, third = _Transfer(True), _Transfer(False), _Transfer(True)
    flight.launched_many([(first, 30, "view"), (second, 30, "view"), (third, 40, "view")])
    assert budget.in_flight_bytes == 70  # the first landed; the third waits behind the second
    second.ready = True
    flight.launched_many([])
    assert budget.in_flight_bytes == 0
    flight.admit(50)
    flight.launched_many([(_Transfer(False), 50, "view")])
    flight.drain()
    assert budget.in_flight_bytes == 0


def test_the_sender_goes_on_while_the_programs_of_assembled_chunks_compile(
    tmp_path, poison, monkeypatch, fresh_programs
):
    """Where its device has room (`RingSender.defer_bytes`), an assembled chunk whose programs
    have not compiled waits there and the sender sends on: here the allocations compile only
    once the plain tail's first batch is sent (a sender that waited for them would never send it,
    and they would compile at the timeout instead). On a TPU v5e host llama3-8b's sender waited
    0.4 s for its first allocation's compile."""
    path = shapes.synthesize(ASSEMBLED_AND_PLAIN, tmp_path)
    real_fit, real_send = ring.RingSender.fit, mapped_send.send_batch
    real_allocation = programs._allocation
    tail_sent, compiled_after_tail = threading.Event(), []

    def fit(self, need):
        real_fit(self, need)
        self.defer_bytes = 1 << 30  # a device with room for any of these shards beside them

    def send_batch(batch, sender):
        seconds = real_send(batch, sender)
        if not any(p.job.needs_programs for p in batch) and sent_assembled:
            tail_sent.set()
        sent_assembled.extend(p for p in batch if p.job.needs_programs)
        return seconds

    def allocation(*args):
        compiled_after_tail.append(tail_sent.wait(timeout=10))
        return real_allocation(*args)

    sent_assembled: list[object] = []
    monkeypatch.setattr(ring.RingSender, "fit", fit)
    monkeypatch.setattr(engine, "send_batch", send_batch)
    monkeypatch.setattr(programs, "_allocation", allocation)
    model, report = load(ASSEMBLED_AND_PLAIN, path, poison)
    verify(model, path)
    assert report.device_programs == 4 and sent_assembled
    assert compiled_after_tail and all(compiled_after_tail), compiled_after_tail


def test_an_updates_offsets_are_device_arrays_put_once(tmp_path, poison, monkeypatch):
    """A NumPy offset is a host transfer at every call (on a TPU host each update then waited
    behind the chunks in flight): the offsets go to the device once per load and value."""
    path = shapes.synthesize(OVERSIZE, tmp_path)
    seen: dict[tuple[int, ...], set[tuple[int, ...]]] = {}
    real = device_shards.run_update

    def run_update(program, buffer, chunk, starts):
        assert all(isinstance(s, jax.Array) for s in starts), starts
        seen.setdefault(tuple(int(s) for s in starts), set()).add(tuple(map(id, starts)))
        return real(program, buffer, chunk, starts)

    monkeypatch.setattr(device_shards, "run_update", run_update)
    model, _ = load(OVERSIZE, path, poison)
    verify(model, path)
    assert len(seen) > 2 and all(len(arrays) == 1 for arrays in seen.values()), seen


def test_the_read_ahead_hint_is_given_before_programs_start_compiling(
    tmp_path, poison, monkeypatch, fresh_programs
):
    """The source's `begin` (a `posix_fadvise` per file) comes before the compile threads: beside
    them its system calls waited for the interpreter's lock (0.09 s against 0.005 s)."""
    path = shapes.synthesize(OVERSIZE, tmp_path)
    calls: list[str] = []
    real_begin, real_warm = local.LocalFiles.begin, engine.warm_programs

    def begin(self, request_bytes):
        calls.append("begin")
        return real_begin(self, request_bytes)

    def warm(*args, **kwargs):
        calls.append("warm_programs")
        return real_warm(*args, **kwargs)

    monkeypatch.setattr(local.LocalFiles, "begin", begin)
    monkeypatch.setattr(engine, "warm_programs", warm)
    model, _ = load(OVERSIZE, path, poison)
    verify(model, path)
    assert calls == ["begin", "warm_programs"]


def test_the_assembled_transfers_land_before_the_plain_tail(tmp_path, poison, monkeypatch):
    """Every transfer in flight lands before the tail's first batch (a tail overlapping the last
    assembled transfers raised llama3-8b's host peak on a TPU by 0.1 GiB), and only there."""
    path = shapes.synthesize(ASSEMBLED_AND_PLAIN, tmp_path)
    events: list[str] = []
    real_send, real_drain = mapped_send.send_batch, ring.MappedFlight.drain

    def send_batch(batch, sender):
        events.append("A" if any(p.job.needs_programs for p in batch) else "P")
        return real_send(batch, sender)

    def drain(self):
        events.append("land")
        return real_drain(self)

    monkeypatch.setattr(engine, "send_batch", send_batch)
    monkeypatch.setattr(ring.MappedFlight, "drain", drain)
    model, _ = load(ASSEMBLED_AND_PLAIN, path, poison)
    verify(model, path)
    sends = "".join(events).removesuffix("land")  # (the sender lands what is left when it closes)
    assert re.fullmatch(r"P+A+landP+", sends), sends
