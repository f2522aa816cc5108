"""`loader.sharded.slices.ReadAhead`: the planned reads, in order, at most the budget ahead (a
`loader.budget.ByteBudget`, as the pipelined engine counts its bytes in flight)."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import numpy as np

from loader.budget import ByteBudget
from loader.sharded.layout import Region
from loader.sharded.reads import PlannedRead
from loader.sharded.slices import ReadAhead


class CountingReader:
    """A `RegionReader` that records what it was told, what was read, and on which thread."""

    def __init__(self) -> None:
        self.reads: list[str] = []
        self.threads: set[str] = set()
        self.planned: list[PlannedRead] = []

    def plan(self, reads: Sequence[PlannedRead], max_over_read: float | None = None) -> None:
        self.planned += reads

    def read_region(self, key: str, region: Region) -> np.ndarray:
        self.reads.append(key)
        self.threads.add(threading.current_thread().name)
        return np.full(4, len(self.reads), np.uint8)


def settled(reader: CountingReader, count: int) -> list[str]:
    """The reads once `count` have been made (or after a second), then a moment more."""
    deadline = time.monotonic() + 1
    while len(reader.reads) < count and time.monotonic() < deadline:
        time.sleep(0.005)
    time.sleep(0.05)  # a read beyond the budget would show by now
    return list(reader.reads)


REGION: Region = ((0, 4),)


def reads(*sized: tuple[str, int]) -> list[PlannedRead]:
    return [PlannedRead(key, REGION, size) for key, size in sized]


def test_reads_start_in_order_at_most_the_budget_ahead() -> None:
    reader = CountingReader()
    ahead = ReadAhead(reader, ByteBudget(250), workers=1)
    ahead.plan(reads(*((f"t{i}", 100) for i in range(5))))
    try:
        assert [r.key for r in reader.planned] == [f"t{i}" for i in range(5)]  # told the reader
        assert settled(reader, 2) == ["t0", "t1"]
        assert ahead.read_region("t0", REGION)[0] == 1
        assert settled(reader, 3) == ["t0", "t1", "t2"]
        for i in range(1, 5):
            ahead.read_region(f"t{i}", REGION)
        assert reader.reads == [f"t{i}" for i in range(5)]
        assert threading.current_thread().name not in reader.threads  # read on its threads
        ahead.read_region("other", REGION)  # not expected: read at once, on the caller's thread
        assert reader.reads[-1] == "other" and threading.current_thread().name in reader.threads
    finally:
        ahead.close()


def test_a_block_larger_than_the_budget_is_still_read() -> None:
    reader = CountingReader()
    ahead = ReadAhead(reader, ByteBudget(10))
    ahead.plan(reads(("big", 1000), ("next", 1000)))
    try:
        assert settled(reader, 1) == ["big"]
        ahead.read_region("big", REGION)
        assert settled(reader, 2) == ["big", "next"]
    finally:
        ahead.close()


def test_a_read_asked_for_before_its_turn_is_read_once() -> None:
    reader = CountingReader()
    ahead = ReadAhead(reader, ByteBudget(1), workers=1)
    ahead.plan(reads(("a", 1), ("b", 1), ("c", 1)))
    try:
        assert settled(reader, 1) == ["a"]
        ahead.read_region("c", REGION)  # not started yet: read now, and not again
        ahead.read_region("a", REGION)
        ahead.read_region("b", REGION)
        assert sorted(settled(reader, 3)) == ["a", "b", "c"]
    finally:
        ahead.close()


def test_several_reads_are_in_progress_at_once() -> None:
    started, release = threading.Barrier(3, timeout=5), threading.Event()

    class Waiting(CountingReader):
        def read_region(self, key: str, region: Region) -> np.ndarray:
            started.wait()  # breaks (and fails the test) unless three reads run together
            release.wait(5)
            return super().read_region(key, region)

    reader = Waiting()
    ahead = ReadAhead(reader, ByteBudget(1000), workers=2)
    ahead.plan(reads(*((f"t{i}", 1) for i in range(2))))
    try:
        started.wait()
        release.set()
        assert [ahead.read_region(f"t{i}", REGION)[0] > 0 for i in range(2)] == [True, True]
    finally:
        release.set()
        ahead.close()


def test_the_bytes_held_ahead_stay_within_the_budget() -> None:
    """The budget's high-water mark (`LoadReport.inflight_peak_bytes`) is what was held ahead:
    within the budget however many reads are planned, and the whole budget when it is the
    bound (so a read-ahead that ignored it would show here)."""
    reader = CountingReader()
    budget = ByteBudget(350)
    ahead = ReadAhead(reader, budget, workers=2)
    ahead.plan(reads(*((f"t{i}", 100) for i in range(8))))
    try:
        assert settled(reader, 3) == ["t0", "t1", "t2"]
        assert budget.high_water_bytes == 300
        for i in range(8):
            ahead.read_region(f"t{i}", REGION)
        assert reader.reads == [f"t{i}" for i in range(8)]
    finally:
        ahead.close()
    assert budget.high_water_bytes == 300 and budget.in_flight_bytes == 0
