"""The allocator's term of a peak: glibc's retained heap, measured, and fitted per small byte."""

from __future__ import annotations

import pytest

from bench.analysis.advice import advise, details, sentences
from bench.analysis.fit import fit, shape_medians
from bench.analysis.recommend import TargetCheckpoint, recommend
from bench.machine.allocator import MMAP_THRESHOLD_MAX, heap_free_bytes, small_tensor_bytes
from bench.records.results import read_results
from bench.records.writer import ResultsWriter
from tests.records import total_row

MiB = 1 << 20
BASE = 200 * MiB
H = 0.125  # retained heap bytes per small-tensor byte, in the hand-made rows


def test_only_tensors_under_the_threshold_count_as_small():
    sizes = [MMAP_THRESHOLD_MAX - 1, MMAP_THRESHOLD_MAX, MMAP_THRESHOLD_MAX + 1, 10]
    assert small_tensor_bytes(sizes) == MMAP_THRESHOLD_MAX - 1 + 10
    assert small_tensor_bytes([]) == 0


def test_holes_left_in_the_heap_are_measured():
    """Blocks under glibc's initial mmap threshold (128 KiB) come from the heap; freeing every
    other one leaves holes the heap cannot trim, and `fordblks` grows by about their bytes."""
    if heap_free_bytes() is None:
        pytest.skip("no glibc mallinfo2 here")
    blocks = [bytearray(64 << 10) for _ in range(1024)]  # 64 MiB, interleaved
    before = heap_free_bytes()
    del blocks[::2]  # 32 MiB of holes between live blocks
    after = heap_free_bytes()
    assert after is not None and before is not None and after - before >= 30 * MiB
    del blocks


def _row(shapes: str, ckpt: int, small: int, retained: int | None, i: int):
    """A hostcast-like run: the model, the heap it left (H per small byte), 10 MiB of the rest."""
    return total_row(
        shapes=shapes,
        strategy="hostcast",
        repeat=i,
        checkpoint_bytes=ckpt,
        largest_tensor_bytes=64 * MiB,
        tensors=100,
        baseline_rss_bytes=BASE,
        peak_rss_bytes=int(BASE + ckpt + H * small + 10 * MiB),
        wall_s=1.0,
        small_tensor_bytes=small,
        heap_retained_bytes=retained,
    )


def _results(tmp_path, retained: bool = True):
    """Two shape sets with their small tensors 70% and 72% of their bytes (like sa3 and gpt2)."""
    sets = [("gpt2", 500 * MiB, 360 * MiB), ("sa3", 2000 * MiB, 1400 * MiB)]
    rows = [
        _row(name, ckpt, small, int(H * small) if retained else None, i)
        for name, ckpt, small in sets
        for i in range(2)
    ]
    with ResultsWriter(tmp_path / "m" / "r.jsonl") as w:
        w.write_many(rows)
    return read_results(tmp_path)


def test_the_fit_charges_the_retained_heap_per_small_byte(tmp_path):
    """A target with few small bytes (31%, like sa3-medium) gets its own share of holes: the
    per-checkpoint-byte fit alone would charge it 70% of its bytes' worth."""
    rows = _results(tmp_path).phases
    model = fit(rows, 9000 * MiB)
    assert model.peak_bytes_per_small_tensor_byte == pytest.approx(H, rel=1e-6)
    assert model.peak_bytes_per_checkpoint_byte == pytest.approx(1.0, rel=1e-6)
    assert model.peak_constant_bytes == pytest.approx(10 * MiB, rel=1e-3)
    target = TargetCheckpoint(9000 * MiB, 64 * MiB, 1000, small_tensor_bytes=2800 * MiB)
    (s,) = recommend(read_results(tmp_path), target, 64 << 30).strategies
    assert s.predicted_peak_bytes == pytest.approx(BASE + 9000 * MiB + H * 2800 * MiB + 10 * MiB)
    adv = advise(read_results(tmp_path), target, 64 << 30, None, shapes="t", folder="f")
    said = details(adv)  # a fit's detail: in --json, never in the plain-words notes
    assert any(x.startswith("Peaks of hostcast include the holes") for x in said), said
    assert not any("glibc" in x for x in sentences(adv))


def test_without_the_measurement_or_the_target_s_small_bytes_there_is_no_heap_term(tmp_path):
    rows = _results(tmp_path / "old", retained=False).phases
    assert fit(rows, 9000 * MiB).peak_bytes_per_small_tensor_byte == 0.0
    rows = _results(tmp_path / "new").phases
    unknown = fit(rows, 9000 * MiB, heap=False)
    assert unknown.peak_bytes_per_small_tensor_byte == 0.0
    assert unknown.peak_bytes_per_checkpoint_byte > 1.08  # the holes, charged per checkpoint byte


def test_medians_read_files_older_than_the_fields(tmp_path):
    rows = _results(tmp_path).phases.drop(columns=["small_tensor_bytes", "heap_retained_bytes"])
    medians = shape_medians(rows)
    assert medians["small"].isna().all() and medians["retained"].isna().all()
    assert fit(rows, 9000 * MiB).peak_bytes_per_small_tensor_byte == 0.0


def test_a_heap_that_keeps_next_to_nothing_adds_no_term(tmp_path):
    """pipelined's and zerocopy's own mappings leave ~0.01% in the heap: no term, no sentence."""
    rows = _results(tmp_path).phases
    rows["heap_retained_bytes"] = rows["small_tensor_bytes"] // 1000
    assert fit(rows, 9000 * MiB).peak_bytes_per_small_tensor_byte == 0.0
