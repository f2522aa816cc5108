"""The `pipelined` engine's levers (issue 21): coalesced small reads, reader threads sized from the
CPUs and the page cache (`threads=`), and `cache_policy="dontneed"`.

Every load is checked bit-exact against the synthetic checkpoint (`shapes.verify_tensor`) into a
freshly initialised (random) model, so a lever that skips or misplaces a tensor fails.
"""

from __future__ import annotations

import os
import threading

import numpy as np
import pytest

import loader
import shapes
from loader import strategies
from loader.format.source import CheckpointSource
from loader.options import Reading
from loader.pipeline import cache_fit, engine
from loader.pipeline.order import ALIGN
from loader.pipeline.sources import local
from loader.pipeline.sources.local import LocalFiles
from loader.placement.leaves import iter_variables
from tests.unit.page_cache import cached, evicted

N_SMALL = 40
SPEC = shapes.ShapeSpec(
    "levers",
    "",
    ("model.safetensors",),
    (
        shapes.TensorSpec("big.weight", "F32", (600, 512), "model.safetensors"),  # > SMALL_BYTES
        *(
            # sizes that are not multiples of 64 bytes: the arena must realign each view
            shapes.TensorSpec(f"s{i:02d}.bias", "F32", (100 + 3 * i,), "model.safetensors")
            for i in range(N_SMALL)
        ),
    ),
)


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    path = shapes.synthesize(SPEC, tmp_path_factory.mktemp("levers"))
    return path / "model.safetensors" if path.is_dir() else path


def pipelined(target, path, **kw):
    return strategies.get("pipelined").load(target, path, **kw)


def verify(model, ckpt) -> dict[str, np.ndarray]:
    values = {}
    for path, var in iter_variables(model):
        key = ".".join(map(str, path))
        values[key] = var.get_value()
        shapes.verify_tensor(ckpt, key, np.asarray(values[key]))
    assert len(values) == len(SPEC.tensors)
    return values


def reader_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("loader-pipeline")]


@pytest.fixture
def seen(monkeypatch):
    """The stats of every pipeline closed during the test."""
    stats: list[engine.PipelineStats] = []
    real = engine.Pipeline.close

    def close(self):
        real(self)
        stats.append(self.stats)

    monkeypatch.setattr(engine.Pipeline, "close", close)
    return stats


# -- coalescing -----------------------------------------------------------------------------------
def test_adjacent_small_tensors_are_read_at_once_into_one_arena_the_device_adopts(
    ckpt, monkeypatch, seen
):
    calls = []
    real = os.preadv
    monkeypatch.setattr(os, "preadv", lambda *a: calls.append(a) or real(*a))
    model, _ = pipelined(shapes.model_builder(SPEC), ckpt, strict=True)  # strict: no speculation
    values = verify(model, ckpt)
    assert seen[-1].coalesced == N_SMALL
    assert len(calls) < N_SMALL  # one scattered read for the run, not one per tensor
    small = [values[f"s{i:02d}.bias"] for i in range(N_SMALL)]
    starts = [a.unsafe_buffer_pointer() for a in small]
    assert all(p % ALIGN == 0 for p in starts)
    span = max(p + a.nbytes for p, a in zip(starts, small)) - min(starts)
    # adopted in place: the leaves are views of one arena (separate buffers are pages apart)
    assert span <= sum(-(-a.nbytes // ALIGN) * ALIGN for a in small)


def test_a_default_load_with_speculation_is_still_exact(ckpt, seen):
    verify(pipelined(shapes.model_builder(SPEC), ckpt, budget=64 << 10)[0], ckpt)
    assert seen[-1].coalesced > 0


def test_a_run_cut_short_names_the_tensor_it_stops_in_and_leaves_no_thread(ckpt, tmp_path):
    bad = tmp_path / "model.safetensors"
    bad.write_bytes(ckpt.read_bytes())
    cut = bad.stat().st_size - 1000
    with CheckpointSource(bad) as source:
        hit = [
            k
            for k in source.keys()
            if source.file_offset(k) <= cut < source.file_offset(k) + source.info(k).nbytes
        ]
    assert hit and hit[0].startswith("s")
    build = shapes.model_builder(SPEC)

    def truncating_builder():
        os.truncate(bad, cut)
        return build()

    pattern = rf"model\.safetensors: tensor '{hit[0]}'.*truncated"
    with pytest.raises(loader.CheckpointError, match=pattern):
        pipelined(truncating_builder, bad, strict=True)
    assert reader_threads() == []


# -- reader threads -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("cpus", "cold", "want"),
    [(1, False, 1), (0.5, False, 1), (2, False, 2), (64, False, 8), (1, True, 2), (2, True, 4)],
)
def test_reader_threads_follow_the_cpus_and_the_cache(cpus, cold, want):
    assert local.reader_threads(cpus, cold=cold) == want


def test_threads_override_and_a_one_cpu_host_gets_one_reader(ckpt, monkeypatch, seen):
    verify(loader.load_model(shapes.model_builder(SPEC), ckpt, threads=3)[0], ckpt)
    assert seen[-1].threads == 3
    monkeypatch.setattr(local, "usable_cpus", lambda *a: 1.0)
    ckpt.read_bytes()  # cached: a warm load, one reader on one CPU
    verify(loader.load_model(shapes.model_builder(SPEC), ckpt)[0], ckpt)
    assert seen[-1].threads == 1


def test_a_cold_file_gets_more_readers(ckpt, monkeypatch, seen):
    if not evicted(ckpt):
        pytest.skip("this filesystem keeps the file cached when evicted")
    monkeypatch.setattr(local, "usable_cpus", lambda *a: 2.0)
    verify(pipelined(shapes.model_builder(SPEC), ckpt)[0], ckpt)
    assert seen[-1].threads == 4


def test_the_readers_are_counted_before_the_read_ahead_hint_caches_a_small_file(
    ckpt, monkeypatch, seen
):
    # Linux may read a file smaller than its read-ahead window whole for the hint: here the hint
    # caches it at once, so a count taken after it would see a warm file and keep 2 readers.
    def read_ahead_whole(fds, policy, file_bytes):
        for fd in fds:
            os.pread(fd, os.fstat(fd).st_size, 0)

    if not evicted(ckpt):
        pytest.skip("this filesystem keeps the file cached when evicted")
    monkeypatch.setattr(local, "usable_cpus", lambda *a: 2.0)
    monkeypatch.setattr(cache_fit, "read_ahead", read_ahead_whole)
    verify(pipelined(shapes.model_builder(SPEC), ckpt)[0], ckpt)
    assert seen[-1].threads == 4  # counted on the cold file
    assert cached(ckpt) > 0.9  # (the hint did cache it)


@pytest.mark.parametrize("bad", [0, -1, 2.5])
def test_bad_threads_are_refused_in_one_line(ckpt, bad):
    with pytest.raises(loader.CheckpointError, match=r"threads="):
        pipelined(shapes.model_builder(SPEC), ckpt, threads=bad)


# -- cache policy ---------------------------------------------------------------------------------
def test_dontneed_leaves_a_cold_file_uncached_and_keep_leaves_it_cached(ckpt, monkeypatch):
    if not evicted(ckpt):
        pytest.skip("this filesystem keeps the file cached when evicted")
    during = []  # cached once every tensor is read, before `close` drops what read-ahead left
    real = engine.Pipeline._report_times
    monkeypatch.setattr(
        engine.Pipeline,
        "_report_times",
        lambda self, *a: during.append(cached(ckpt)) or real(self, *a),
    )
    model, _ = pipelined(shapes.model_builder(SPEC), ckpt, cache_policy="dontneed")
    assert during[-1] < 0.5  # dropped behind each read, not only at the end
    assert cached(ckpt) < 0.2
    verify(model, ckpt)  # (reads the file again, through safetensors)
    assert evicted(ckpt)
    pipelined(shapes.model_builder(SPEC), ckpt, cache_policy="keep")
    assert cached(ckpt) > 0.8


def test_an_unknown_cache_policy_is_refused_in_one_line(ckpt):
    with pytest.raises(loader.CheckpointError, match=r"cache_policy='lru'.*'keep', 'dontneed'"):
        pipelined(shapes.model_builder(SPEC), ckpt, cache_policy="lru")


def test_a_readers_scratch_is_a_share_of_a_small_checkpoint():
    """Two 8 MiB scratches were 3% of GPT-2: the scratch follows the checkpoint's size."""
    from loader.pipeline.sizing import MAX_SCRATCH_BYTES, MIN_SCRATCH_BYTES, scratch_bytes

    budget, gpt2 = 256 << 20, 523_000_000
    assert scratch_bytes(budget, 2) == MAX_SCRATCH_BYTES
    assert scratch_bytes(budget, 2, gpt2) * 2 <= gpt2 / 200
    assert scratch_bytes(budget, 2, 10_000) == MIN_SCRATCH_BYTES
    assert scratch_bytes(budget, 2, 16 << 30) == MAX_SCRATCH_BYTES
    assert scratch_bytes(1 << 20, 2, 16 << 30) == (1 << 20) // 8  # the budget still bounds it


def test_the_engine_sizes_its_scratch_from_the_checkpoint(ckpt):
    from loader.phases import NULL_PROBE
    from loader.pipeline.sizing import scratch_bytes

    pipeline = engine.Pipeline(Reading(threads=2))
    with LocalFiles(ckpt) as source:
        try:
            pipeline.start(source, NULL_PROBE)
            want = scratch_bytes(pipeline.budget.limit_bytes, 2, source.total_bytes)
            scratch = pipeline.sizing.scratch_bytes
            assert scratch == want < scratch_bytes(pipeline.budget.limit_bytes, 2)
            assert pipeline.budget.reserved_bytes == 2 * want
        finally:
            pipeline.close()
