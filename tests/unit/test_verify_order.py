"""The bench's leaves checked side by side (`bench.child.verify.checked_in_order`): the answer one
thread gives, whichever check ends first, within its byte bound."""

from __future__ import annotations

import threading
import time

import pytest

import shapes
from bench.child import verify


def test_every_item_is_checked_once():
    seen: list[int] = []
    lock = threading.Lock()

    def check(item: int) -> None:
        with lock:
            seen.append(item)

    assert verify.checked_in_order(range(50), check, lambda _: 1) == (50, None)
    assert sorted(seen) == list(range(50))


def test_the_first_failure_in_order_is_reported_not_the_first_to_finish(monkeypatch):
    monkeypatch.setattr(verify, "CHECK_THREADS", 4)
    monkeypatch.setattr(verify.os, "cpu_count", lambda: 4)

    def check(item: int) -> None:
        if item == 2:
            time.sleep(0.2)  # fails last, but comes first
            raise shapes.VerificationError("item 2 is wrong")
        if item == 5:
            raise shapes.VerificationError("item 5 is wrong")

    checked, error = verify.checked_in_order(range(8), check, lambda _: 1)
    assert (checked, str(error)) == (2, "item 2 is wrong")


def test_items_beyond_the_byte_bound_wait_for_the_oldest(monkeypatch):
    monkeypatch.setattr(verify, "CHECK_AHEAD_BYTES", 10)
    monkeypatch.setattr(verify, "CHECK_THREADS", 4)
    monkeypatch.setattr(verify.os, "cpu_count", lambda: 4)
    running, most = 0, 0
    lock = threading.Lock()

    def check(item: int) -> None:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        time.sleep(0.02)
        with lock:
            running -= 1

    assert verify.checked_in_order(range(12), check, lambda _: 4) == (12, None)
    assert most == 2  # two items of 4 bytes fit 10; a third waits for the oldest

    # an item larger than the bound alone still runs
    assert verify.checked_in_order([0], check, lambda _: 100) == (1, None)


def test_an_error_that_is_not_a_verification_error_is_raised():
    def check(item: int) -> None:
        raise RuntimeError(f"bug at {item}")

    with pytest.raises(RuntimeError, match="bug at 0"):
        verify.checked_in_order(range(3), check, lambda _: 1)
