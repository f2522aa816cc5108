"""`loader.sharded.ahead.ReadAhead`: the planned reads, in order, at most the budget ahead."""

from __future__ import annotations

import threading
import time

import numpy as np

from loader.sharded.ahead import ReadAhead


class CountingReader:
    """A slice reader's `read_region` that records what was read, and on which thread."""

    def __init__(self) -> None:
        self.reads: list[str] = []
        self.threads: set[str] = set()

    def read_region(self, key: str, region: object) -> np.ndarray:
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


REGION = ((0, 4),)


def test_reads_start_in_order_at_most_the_budget_ahead() -> None:
    reader = CountingReader()
    ahead = ReadAhead(reader, budget=250, workers=1)  # type: ignore[arg-type]
    ahead.expect([(f"t{i}", REGION, 100) for i in range(5)])
    try:
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
    ahead = ReadAhead(reader, budget=10)  # type: ignore[arg-type]
    ahead.expect([("big", REGION, 1000), ("next", REGION, 1000)])
    try:
        assert settled(reader, 1) == ["big"]
        ahead.read_region("big", REGION)
        assert settled(reader, 2) == ["big", "next"]
    finally:
        ahead.close()


def test_a_read_asked_for_before_its_turn_is_read_once() -> None:
    reader = CountingReader()
    ahead = ReadAhead(reader, budget=1, workers=1)  # type: ignore[arg-type]
    ahead.expect([("a", REGION, 1), ("b", REGION, 1), ("c", REGION, 1)])
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
        def read_region(self, key: str, region: object) -> np.ndarray:
            started.wait()  # breaks (and fails the test) unless three reads run together
            release.wait(5)
            return super().read_region(key, region)

    reader = Waiting()
    ahead = ReadAhead(reader, budget=1000, workers=2)  # type: ignore[arg-type]
    ahead.expect([(f"t{i}", REGION, 1) for i in range(2)])
    try:
        started.wait()
        release.set()
        assert [ahead.read_region(f"t{i}", REGION)[0] > 0 for i in range(2)] == [True, True]
    finally:
        release.set()
        ahead.close()
