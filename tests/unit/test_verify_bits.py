"""The bench's bit-exact comparison (`bench.child.verify.same_bits`): chunked, cast, strided."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from bench.child import verify


@pytest.fixture
def small_chunks(monkeypatch):
    monkeypatch.setattr(verify, "COMPARE_CHUNK_BYTES", 64)  # 4 rows of the 4-byte (4, 4) arrays


def test_equal_arrays_compare_equal_across_chunks(small_chunks):
    a = np.arange(64, dtype=np.float32).reshape(16, 4)
    assert verify.same_bits(a, a.copy())


def test_a_difference_in_the_last_chunk_is_found(small_chunks):
    a = np.arange(64, dtype=np.float32).reshape(16, 4)
    b = a.copy()
    b[-1, -1] += 1
    assert not verify.same_bits(a, b)


def test_bits_decide_not_values():
    nan = np.array([np.nan, 0.0], np.float32)
    assert verify.same_bits(nan, nan.copy())  # NaN == NaN by its bits
    assert not verify.same_bits(np.array([0.0], np.float32), np.array([-0.0], np.float32))


def test_a_strided_view_and_a_cast_compare_by_the_cast_values(small_chunks):
    src = np.linspace(-3, 3, 96, dtype=np.float32).reshape(8, 12)
    got = np.ascontiguousarray(src.T).astype(ml_dtypes.bfloat16)
    assert verify.same_bits(got, src.T)
    assert not verify.same_bits(got, src.T[::-1])


def test_shapes_scalars_and_empty():
    assert not verify.same_bits(np.zeros((2, 3)), np.zeros((3, 2)))
    assert verify.same_bits(np.array(1.5), np.array(1.5))
    assert verify.same_bits(np.zeros((0, 4)), np.zeros((0, 4)))


def test_a_transposed_view_is_compared_in_tiles_that_each_see_their_difference(monkeypatch):
    monkeypatch.setattr(verify, "TILE", 4)
    blocks = []
    real = verify._same_block
    monkeypatch.setattr(verify, "_same_block", lambda a, b: blocks.append(a.shape) or real(a, b))
    src = np.arange(3 * 10 * 9, dtype=np.float32).reshape(3, 10, 9)
    want = src.transpose(0, 2, 1)  # a port's transposed weights, stacked
    got = np.ascontiguousarray(want)
    assert verify.same_bits(got, want)
    assert len(blocks) == 3 * 3 * 3 and max(blocks) == (4, 4)  # 9x10 in 4x4 tiles, 3 layers
    for where in [(0, 0, 0), (2, 8, 9), (1, 4, 5)]:  # first, last and a middle tile
        bad = got.copy()
        bad[where] += 1
        assert not verify.same_bits(bad, want), where


@pytest.mark.parametrize(
    ("file_shape", "leaf_shape"),
    [((12, 8), (8, 3, 4)), ((8, 12), (3, 4, 8))],  # a q/k/v kernel split by heads; an o kernel
)
def test_a_split_transposed_kernel_is_tiled_as_the_matrix_it_was(
    monkeypatch, file_shape, leaf_shape
):
    """A port's attention kernel (the file's matrix transposed, then an axis split by heads) is
    compared in tiles of that matrix, not in one small tile per leading index."""
    monkeypatch.setattr(verify, "TILE", 4)
    blocks = []
    real = verify._same_block
    monkeypatch.setattr(verify, "_same_block", lambda a, b: blocks.append(a.shape) or real(a, b))
    src = np.arange(96, dtype=np.float32).reshape(file_shape)
    want = np.reshape(src.T, leaf_shape)
    assert not want.flags.c_contiguous and np.shares_memory(want, src)  # a view, as a port's
    got = np.ascontiguousarray(want)
    assert verify.same_bits(got, want)
    assert len(blocks) == 2 * 3 and set(blocks) == {(4, 4)}  # the 8x12 matrix in 4x4 tiles
    for where in np.ndindex(*leaf_shape):
        bad = got.copy()
        bad[where] += 1
        assert not verify.same_bits(bad, want), where
