"""`FileDigest`: a file's sha256 from ranges fed in any order, within its hold, gaps filled."""

from __future__ import annotations

import hashlib
import threading

import numpy as np
import pytest

from loader.errors import RemoteError
from loader.remote.digest import FileDigest, parse_digest

DATA = np.random.default_rng(0).integers(0, 256, 1 << 16, dtype=np.uint8)
EXPECTED = hashlib.sha256(DATA.tobytes()).hexdigest()


def _chunks(step: int) -> list[tuple[int, np.ndarray]]:
    return [(a, DATA[a : a + step]) for a in range(0, DATA.nbytes, step)]


def test_ranges_in_reverse_order_within_the_hold_hash_to_the_file():
    digest = FileDigest(EXPECTED, DATA.nbytes, hold_bytes=DATA.nbytes)
    for start, piece in reversed(_chunks(4096)):
        digest.feed(start, piece)
    assert digest.complete and digest.finish(lambda a, b: DATA[a:b], 4096)
    assert digest.refetched == 0


def test_a_flipped_byte_fails():
    bad = DATA.copy()
    bad[1000] ^= 1
    digest = FileDigest(EXPECTED, DATA.nbytes)
    digest.feed(0, bad)
    assert not digest.finish(lambda a, b: DATA[a:b], 4096)


def test_past_the_hold_the_gap_nobody_asked_for_is_fetched_not_the_whole_file():
    """The pipeline reads small tensors after the large ones around them: the hold fills, and
    the missing few bytes are fetched (counted), never the rest of the file again."""
    fetched: list[tuple[int, int]] = []

    def fill(a: int, b: int) -> np.ndarray:
        fetched.append((a, b))
        return DATA[a:b]

    digest = FileDigest(EXPECTED, DATA.nbytes, hold_bytes=8192)
    chunks = _chunks(4096)
    for start, piece in chunks[1:]:  # the first 4 KiB come last
        digest.feed(start, piece, fill)
    digest.feed(*chunks[0], fill)
    assert digest.finish(lambda a, b: DATA[a:b], 4096)
    assert fetched and sum(b - a for a, b in fetched) == digest.refetched <= 4096 * 2


def test_a_gap_in_flight_is_waited_for_not_fetched():
    digest = FileDigest(EXPECTED, DATA.nbytes, hold_bytes=4096)
    chunks = _chunks(4096)
    digest.expect(0, 4096)  # a reader has the first range in flight
    digest.feed(*chunks[1])  # held
    later = threading.Timer(0.2, lambda: (digest.feed(*chunks[0]), digest.settle(0)))
    later.start()
    digest.feed(*chunks[2], fill=lambda a, b: pytest.fail("fetched a gap in flight"))
    later.join()
    for start, piece in chunks[3:]:
        digest.feed(start, piece)
    assert digest.finish(lambda a, b: DATA[a:b], 4096) and digest.refetched == 0


def test_a_digest_is_sha256_and_64_hex_digits():
    assert parse_digest("SHA256:" + "A" * 64, where="x") == "a" * 64
    with pytest.raises(RemoteError, match="not a sha256 digest"):
        parse_digest("sha256:abc", where="x")


def test_an_early_range_behind_a_request_in_flight_waits_in_its_own_buffer():
    """A load's reader (it passes `fill`) whose range comes back while the range before it is
    still in flight waits, and its bytes are hashed from its own buffer when their turn comes:
    nothing is copied, nothing fetched."""
    digest = FileDigest(EXPECTED, DATA.nbytes)
    chunks = _chunks(4096)
    digest.expect(0, 4096)  # another reader has the first range in flight
    hashed = threading.Event()

    def early_reader() -> None:
        digest.feed(*chunks[1], fill=lambda a, b: pytest.fail("fetched a gap in flight"))
        hashed.set()

    reader = threading.Thread(target=early_reader)
    reader.start()
    assert not hashed.wait(0.2)  # waiting for the range before it
    digest.feed(*chunks[0])
    digest.settle(0)
    reader.join(5)
    assert hashed.is_set()
    for start, piece in chunks[2:]:
        digest.feed(start, piece)
    assert digest.finish(lambda a, b: DATA[a:b], 4096)
    assert digest.held_peak == 0 and digest.refetched == 0


def test_a_range_behind_a_gap_nobody_has_asked_for_is_held_not_waited_for():
    """One reader reading a large tensor chunk by chunk has asked for its first chunk only: a
    range after its later chunks does not wait for them (they are not on their way yet); it is
    held, a copy, and the reader goes on."""
    digest = FileDigest(EXPECTED, DATA.nbytes)
    chunks = _chunks(4096)
    digest.expect(0, 4096)
    digest.feed(*chunks[2], fill=lambda a, b: pytest.fail("fetched a gap within the hold"))
    assert digest.held_peak == 4096
    for start, piece in [chunks[0], chunks[1], *chunks[3:]]:
        digest.feed(start, piece)
    assert digest.finish(lambda a, b: DATA[a:b], 4096) and digest.refetched == 0
