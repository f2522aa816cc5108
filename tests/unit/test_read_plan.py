"""The read planner (`loader.sharded.read_plan`): gaps read through smallest first within the
over-read bound, requests capped, every needed byte copied to its place exactly once.

A plan is checked by carrying it out against a byte string standing for the file: the output must
equal the runs read one by one, the bytes read must stay within `max_over_read` times those needed,
and no request may be longer than its cap. A column block (one run per row) must take few requests,
and the same block without gaps read through (`max_over_read=1`) one per row.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import loader
from loader.errors import RemoteError
from loader.options import DEFAULT_MAX_OVER_READ, Sharing
from loader.sharded.read_plan import (
    ByteRun,
    PlanFigures,
    Request,
    closed_gaps,
    plan_requests,
    request_bytes_for,
)
from loader.sharded.slices import box_runs

CHUNK = 8 << 20


def carry_out(file: bytes, runs: list[ByteRun], requests: list[Request]) -> np.ndarray:
    """The output the requests fill, each answer the file's bytes `[start, end)`."""
    out = np.full(sum(n for _, _, n in runs), 0xEE, np.uint8)
    covered = np.zeros(out.size, np.int32)
    for r in requests:
        answer = np.frombuffer(file[r.start : r.end], np.uint8)
        for a, at, n in r.copies:
            out[a : a + n] = answer[at : at + n]
            covered[a : a + n] += 1
    assert (covered == 1).all(), "a needed byte copied twice or never"
    return out


def direct(file: bytes, runs: list[ByteRun]) -> np.ndarray:
    out = np.empty(sum(n for _, _, n in runs), np.uint8)
    for a, at, n in runs:
        out[a : a + n] = np.frombuffer(file[at : at + n], np.uint8)
    return out


def column_block(rows: int, cols: int, processes: int, index: int = 0, offset: int = 64):
    """The runs of process `index`'s column block of an f32 (rows, cols) tensor at `offset`."""
    width = cols // processes
    return box_runs(offset, (rows, cols), ((0, rows), (index * width, (index + 1) * width)), 4)


def plan(reads: list[list[ByteRun]], max_over_read: float, request_bytes: int):
    closed = closed_gaps(reads, max_over_read)
    return [plan_requests(runs, closed, request_bytes) for runs in reads]


def test_neighbouring_runs_merge_and_the_gaps_are_dropped():
    runs = [(0, 100, 10), (10, 120, 10), (20, 130, 5)]  # gaps of 10 and 0 bytes
    requests = plan_requests(runs, closed_gaps([runs], 2.0), 1 << 20)
    assert [(r.start, r.end) for r in requests] == [(100, 135)]
    assert requests[0].copies == ((0, 0, 10), (10, 20, 10), (20, 30, 5))
    file = bytes(range(256))
    np.testing.assert_array_equal(carry_out(file, runs, requests), direct(file, runs))


def test_smallest_gaps_are_read_through_first_within_the_bound():
    # 4 runs of 100 bytes, gaps of 300, 10 and 50: 400 needed, 1.2x leaves 80 to spare
    runs = [(0, 0, 100), (100, 400, 100), (200, 510, 100), (300, 660, 100)]
    assert closed_gaps([runs], 1.2) == {500, 610}  # the 10 and the 50 (60 <= 80), not the 300
    assert closed_gaps([runs], 1.0) == set()
    assert closed_gaps([runs], 1.75) == {500, 610}  # 300 to spare: 60 used, 240 < 300
    assert closed_gaps([runs], 2.0) == {100, 500, 610}  # 400 to spare: every gap
    requests = plan_requests(runs, closed_gaps([runs], 1.2), 1 << 20)
    assert [(r.start, r.end) for r in requests] == [(0, 100), (400, 760)]


def test_a_gap_between_two_reads_is_never_read_through():
    first, second = [(0, 0, 10)], [(0, 12, 10)]
    assert closed_gaps([first, second], 10.0) == set()
    assert [len(p) for p in plan([first, second], 10.0, 1 << 20)] == [1, 1]


def test_requests_are_capped_and_trimmed_to_needed_bytes():
    runs = [(0, 0, 25)]
    assert [(r.start, r.end) for r in plan_requests(runs, set(), 10)] == [
        (0, 10),
        (10, 20),
        (20, 25),
    ]
    # runs of 6 bytes every 10: a cap of 16 holds two runs and the gap between them
    rows = [(6 * i, 10 * i, 6) for i in range(5)]
    requests = plan_requests(rows, closed_gaps([rows], 2.0), 16)
    assert [(r.start, r.end) for r in requests] == [(0, 16), (20, 36), (40, 46)]
    assert all(r.read_bytes <= 16 for r in requests)
    with pytest.raises(RemoteError, match="request_bytes=0"):
        plan_requests(rows, set(), 0)


@pytest.mark.parametrize("seed", range(20))
def test_random_plans_are_exact_bounded_and_capped(seed):
    rng = np.random.default_rng(seed)
    file = rng.integers(0, 256, 1 << 20, dtype=np.uint8).tobytes()
    reads, at = [], 0
    for _ in range(int(rng.integers(1, 6))):  # disjoint reads in file order, runs inside each
        runs, a = [], 0
        for _ in range(int(rng.integers(1, 40))):
            at += int(rng.choice([0, 1, 7, 64, 300, 2000]))
            n = int(rng.integers(1, 500))
            runs.append((a, at, n))
            a, at = a + n, at + n
        reads.append(runs)
        at += int(rng.integers(1, 3000))
    max_over_read = float(rng.choice([1.0, 1.1, 1.5, 3.0]))
    cap = int(rng.choice([64, 1000, 1 << 20]))
    planned = plan(reads, max_over_read, cap)
    for runs, requests in zip(reads, planned):
        np.testing.assert_array_equal(carry_out(file, runs, requests), direct(file, runs))
        assert all(r.read_bytes <= cap for r in requests)
    figures = sum((PlanFigures.of(r) for r in planned), PlanFigures())
    assert figures.needed_bytes == sum(n for runs in reads for _, _, n in runs)
    assert figures.read_bytes <= max_over_read * figures.needed_bytes
    if max_over_read == 1.0:  # only zero-byte gaps read through: exactly the share
        assert figures.read_bytes == figures.needed_bytes


def target(share: int, tensors: int) -> float:
    """The issue's bound on requests per process: its share / 8 MiB + its tensors + 10."""
    return share / CHUNK + tensors + 10


def test_a_column_block_is_a_few_requests_not_one_per_row():
    """A (4096, 4096) f32 kernel split by columns over 2 processes (one 8 KiB run per row) and
    a (4096, 4096) one split by rows (64 MiB: one run), as process 0 reads them: the row block's
    bytes pay for reading through every gap of the column block within 1.5x."""
    columns = column_block(4096, 4096, 2)
    rows = [(0, 64 + 4096 * 4096 * 4, 2048 * 4096 * 4)]
    share = sum(n for _, _, n in columns + rows)
    request_bytes = request_bytes_for(CHUNK, DEFAULT_MAX_OVER_READ)
    planned = plan([columns, rows], DEFAULT_MAX_OVER_READ, request_bytes)
    figures = sum((PlanFigures.of(r) for r in planned), PlanFigures())
    assert figures.requests <= target(share, tensors=2), figures
    assert figures.over_read <= DEFAULT_MAX_OVER_READ
    # the planner switched off: a request per row, far beyond the bound
    off = plan([columns, rows], 1.0, CHUNK)
    assert sum(map(len, off)) >= 4096 > target(share, tensors=2)


def test_a_column_block_alone_needs_its_span_ratio():
    """Alone, a column block over 2 processes is read whole only when 2x is allowed; at 1.5x
    every other gap is read through (half the requests)."""
    columns = column_block(1024, 512, 2)
    share = sum(n for _, _, n in columns)
    for ratio, most in ((2.0, 1), (1.5, 1024 // 2 + 1)):
        (requests,) = plan([columns], ratio, request_bytes_for(CHUNK, ratio))
        assert len(requests) <= most, (ratio, len(requests))
        assert sum(r.read_bytes for r in requests) <= ratio * share


def test_request_bytes_follow_the_bound():
    assert request_bytes_for(CHUNK, 1.0) == CHUNK
    assert request_bytes_for(CHUNK, 1.5) == CHUNK * 3 // 2
    assert math.isclose(PlanFigures(1, 150, 100).over_read, 1.5)
    assert PlanFigures().over_read == 1.0


@pytest.mark.parametrize("bad", [0.5, 0, -1, "1.5", True, float("nan"), float("inf")])
def test_a_bad_max_over_read_is_refused_in_one_line(bad):
    with pytest.raises(RemoteError, match=r"^max_over_read=.*: give a ratio .* >= 1") as caught:
        Sharing(max_over_read=bad)
    assert "\n" not in str(caught.value)


def test_max_over_read_is_a_sharded_option_for_a_url_only(tmp_path):
    assert Sharing().value("max_over_read") == DEFAULT_MAX_OVER_READ == 1.5
    assert Sharing(max_over_read=2).max_over_read == 2.0
    with pytest.raises(loader.CheckpointError, match="max_over_read= applies to a remote"):
        loader.load_model(
            lambda: None, tmp_path / "m.safetensors", strategy="sharded", max_over_read=2.0
        )
    with pytest.raises(loader.strategies.StrategyError, match="no option 'max_over_read'"):
        loader.load_model(lambda: None, tmp_path / "m.safetensors", max_over_read=2.0)
