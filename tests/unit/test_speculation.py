"""Speculative reads (`loader.pipeline.speculation`): whole tensors, or a request at a time.

Where the byte source takes its bytes in file order (a digest-checked URL), each tensor is read in
pieces of at most `max_piece_bytes`, claimed in file order, so the readers' requests in flight are
the next ones of the file; a tensor begun is read to its end even after `stop`. Every buffer is
compared with the bytes it was read from.
"""

from __future__ import annotations

import numpy as np

from loader.budget import ByteBudget
from loader.format import TensorInfo
from loader.pipeline.regions import Bytes
from loader.pipeline.speculation import Speculation

SIZES = (5000, 64, 3000)  # bytes of three uint8 tensors, one after the other in the file
DATA = np.random.default_rng(0).integers(0, 256, sum(SIZES), dtype=np.uint8)


def infos() -> list[TensorInfo]:
    out, begin = [], 0
    for i, size in enumerate(SIZES):
        out.append(TensorInfo(f"t{i}", "U8", (size,), begin, begin + size))
        begin += size
    return out


class RecordedBytes:
    """A tensor's bytes in `DATA`, each read recorded as (file offset, bytes)."""

    shares_rows = False

    def __init__(self, info: TensorInfo, reads: list[tuple[int, int]]) -> None:
        self.info, self.reads = info, reads

    def read(self, offset: int, out: np.ndarray) -> None:
        self.reads.append((self.info.begin + offset, out.nbytes))
        out[...] = DATA[self.info.begin + offset : self.info.begin + offset + out.nbytes]


def test_a_tensor_is_read_a_piece_at_a_time_in_file_order():
    reads: list[tuple[int, int]] = []
    budget = ByteBudget(1 << 20)
    spec = Speculation(infos(), budget, strict=False, max_piece_bytes=1024)

    def file_bytes(info: TensorInfo) -> Bytes:
        return RecordedBytes(info, reads)

    spec.run(file_bytes)  # one reader: the reads come in the order they are claimed
    assert all(n <= 1024 for _, n in reads)
    assert [at for at, _ in reads] == list(np.cumsum([0] + [n for _, n in reads])[:-1])
    assert sum(n for _, n in reads) == DATA.nbytes
    for info in infos():
        buffer = spec.buffers[info.name]
        assert buffer.filled
        np.testing.assert_array_equal(buffer.buffer, DATA[info.begin : info.end])
    assert spec.bytes == DATA.nbytes == budget.in_flight_bytes


def test_a_tensor_begun_is_read_to_its_end_after_stop():
    """The plan comes (`stop`) after the first piece of the first tensor: its other pieces are
    still read, so its buffer is whole; no other tensor is begun, nor its budget taken."""
    reads: list[tuple[int, int]] = []
    budget = ByteBudget(1 << 20)
    spec = Speculation(infos(), budget, strict=False, max_piece_bytes=1024)

    def file_bytes(info: TensorInfo) -> Bytes:
        if not reads:
            spec.stop()
        return RecordedBytes(info, reads)

    spec.run(file_bytes)
    first = infos()[0]
    assert sum(n for _, n in reads) == first.nbytes and len(reads) == 5
    assert list(spec.buffers) == [first.name]
    np.testing.assert_array_equal(spec.buffers[first.name].buffer, DATA[: first.nbytes])
    assert budget.in_flight_bytes == first.nbytes
