"""`share=` of the `sharded` strategy: the block arithmetic, `auto`'s rule, the refusal of a bad
value before any read, and one process's loads in every mode (bit-exact, at the target sharding).

The cross-process exchange itself is tested as 2 and 4 processes in
tests/integration/test_multiprocess_share.py.
"""

from __future__ import annotations

import jax
import numpy as np
import pytest
from flax import nnx
from jax.sharding import NamedSharding, PartitionSpec
from safetensors.numpy import save_file

import loader
from loader.errors import CheckpointError
from loader.sharded.blocks import reshard_program, source_mesh, source_sharding
from loader.sharded.share import (
    ProcessFigures,
    Share,
    ShareStats,
    check_share,
    choose,
    exchanged_elements,
    leading_block,
    request_bound,
)
from loader.vocabulary import SHARE_CHOICES


@pytest.mark.parametrize("value", ["Bytes", "", 1, "rows"])
def test_a_bad_share_is_refused_in_one_line_naming_the_choices(value):
    with pytest.raises(CheckpointError) as err:
        check_share(value)
    message = str(err.value)
    assert "\n" not in message and message.startswith(f"share={value!r}")
    assert all(repr(choice) in message for choice in SHARE_CHOICES)


def test_share_defaults_to_auto_and_takes_its_values():
    assert check_share(None) is Share.AUTO
    assert [check_share(c) for c in SHARE_CHOICES] == [Share.REGIONS, Share.BYTES, Share.AUTO]


def test_a_bad_share_is_refused_before_any_request(tmp_path):
    """A URL nobody serves: the refusal is the option's, not a failed connection."""
    model = nnx.Linear(4, 4, rngs=nnx.Rngs(0))
    for path in (str(tmp_path / "absent.safetensors"), "http://127.0.0.1:9/m.safetensors"):
        with pytest.raises(CheckpointError, match=r"^share='columns': give one of"):
            loader.load_model(model, path, strategy="sharded", share="columns")


@pytest.mark.parametrize(
    ("shape", "processes", "index", "block"),
    [
        ((8, 3), 4, 0, ((0, 2), (0, 3))),
        ((8, 3), 4, 3, ((6, 8), (0, 3))),
        ((8,), 2, 1, ((4, 8),)),
        ((6, 3), 4, 1, ((2, 4), (0, 3))),  # ceil(6 / 4) = 2 rows each
        ((6, 3), 4, 2, ((4, 6), (0, 3))),
        ((6, 3), 4, 3, ((6, 6), (0, 3))),  # none left: the last process reads nothing
        ((0, 3), 2, 0, None),
        ((), 2, 0, None),
    ],
)
def test_leading_block_is_the_process_rows(shape, processes, index, block):
    assert leading_block(shape, processes, index) == block


@pytest.mark.parametrize(("rows", "processes"), [(12, 4), (13, 4), (3, 4), (50257, 2), (1, 2)])
def test_the_blocks_of_every_process_tile_the_tensor_in_order(rows, processes):
    shape = (rows, 5, 2)
    blocks = [leading_block(shape, processes, p) for p in range(processes)]
    assert all(b is not None and b[1:] == ((0, 5), (0, 2)) for b in blocks)
    spans = [b[0] for b in blocks if b]
    assert spans[0][0] == 0 and spans[-1][1] == rows
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:]))
    assert max(b - a for a, b in spans) == -(-rows // processes)


def test_exchanged_counts_each_distinct_region_once_and_only_outside_the_block():
    block = ((0, 4), (0, 8))  # rows 0-3 of an 8 x 8 tensor
    columns = [((0, 8), (0, 2)), ((0, 8), (2, 4))]
    assert exchanged_elements(columns, block) == 2 * 4 * 2  # the lower half of each column block
    assert exchanged_elements(columns * 2, block) == 16  # a region on two devices: once
    assert exchanged_elements([((0, 4), (0, 8))], block) == 0  # its own rows
    assert exchanged_elements([((4, 8), (0, 8))], block) == 32  # another's rows


def test_request_bound_is_the_share_in_8_mib_requests_plus_the_tensors_plus_10():
    assert request_bound(0, 0) == 10
    assert request_bound(80 << 20, 5) == 25


def figures(requests: int, regions: int, bytes_: int, tensors: int = 3) -> ProcessFigures:
    return ProcessFigures(requests, regions, tensors, bytes_)


def test_auto_reads_by_regions_in_one_process_or_from_a_local_file():
    many = [figures(10_000, 1 << 20, 1 << 19)] * 2
    assert choose(processes=1, remote=True, figures=many[:1])[0] is Share.REGIONS
    mode, reason = choose(processes=2, remote=False, figures=many)
    assert mode is Share.REGIONS and "local file" in reason


def test_auto_reads_by_bytes_where_any_process_would_exceed_its_request_bound():
    within = figures(13, 1 << 20, 1 << 20)  # bound: 1/8 + 3 + 10 = 13.125
    over = figures(14, 1 << 20, 1 << 20)
    assert choose(processes=2, remote=True, figures=[within, within])[0] is Share.REGIONS
    mode, reason = choose(processes=2, remote=True, figures=[within, over])
    assert mode is Share.BYTES and "process 1" in reason and "14 requests" in reason


def test_auto_reads_by_bytes_where_regions_would_read_replicas_in_every_process():
    """Replicated tensors read whole by each process: more than 1.05x what bytes reads."""
    assert choose(processes=2, remote=True, figures=[figures(4, 105, 100)] * 2)[0] is Share.REGIONS
    mode, reason = choose(processes=2, remote=True, figures=[figures(4, 106, 100)] * 2)
    assert mode is Share.BYTES and "106 bytes" in reason


def test_auto_counts_the_gaps_the_regions_read_plan_reads_through():
    """Within the request bound, but the plan reads 1.19x the bytes-mode share through gaps."""
    planned = ProcessFigures(7, 1000, 3, 1000, regions_read_bytes=1190)
    mode, reason = choose(processes=2, remote=True, figures=[planned] * 2)
    assert mode is Share.BYTES and "receive 1190 bytes" in reason
    tight = ProcessFigures(7, 1000, 3, 1000, regions_read_bytes=1040)
    assert choose(processes=2, remote=True, figures=[tight] * 2)[0] is Share.REGIONS


def test_share_stats_say_the_mode_the_reason_and_the_bytes_exchanged():
    stats = ShareStats(Share.AUTO, Share.BYTES, "auto: why", 3, 2, 1, 4096)
    assert str(stats) == (
        "share=bytes (asked auto; auto: why): 3 tensors as blocks resharded, 2 by regions, "
        "1 whole; 4096 bytes exchanged"
    )


def test_the_source_mesh_is_process_by_local_device_and_splits_rows_where_they_divide():
    mesh = jax.make_mesh((8,), ("data",))
    source = source_mesh(NamedSharding(mesh, PartitionSpec()))
    assert source is not None and source.devices.shape == (1, 8)
    assert source_sharding(source, 16).spec == PartitionSpec(("processes", "local"))
    assert source_sharding(source, 4).spec == PartitionSpec("processes")


def test_the_compiled_reshard_drops_the_padding_and_moves_bits_exactly():
    """5 rows padded to 8 (what a block of rows the devices do not divide becomes), resharded
    to columns: the program cuts the padding and changes no bit (-0.0, a NaN's payload)."""
    mesh = jax.make_mesh((8,), ("data",))
    target = NamedSharding(mesh, PartitionSpec(None, "data"))
    source_of = source_mesh(target)
    assert source_of is not None
    source = source_sharding(source_of, 8)
    want = np.arange(5 * 16, dtype=np.float32).reshape(5, 16)
    want[0, 0] = -0.0
    want.view(np.uint32)[1, 1] = 0x7FC0_1234
    padded = np.zeros((8, 16), np.float32)
    padded[:5] = want
    program = reshard_program((8, 16), 5, np.dtype(np.float32), source, target)
    assert program is not None  # all-to-all / collective-permute, no arithmetic
    got = program(jax.device_put(padded, source))
    assert got.shape == (5, 16) and got.sharding == target
    assert np.asarray(got).tobytes() == want.tobytes()


class Mixed(nnx.Module):
    """Columns split, rows split, replicated, and a scalar."""

    def __init__(self, rngs: nnx.Rngs) -> None:
        part = nnx.with_partitioning
        init = nnx.initializers.lecun_normal()
        self.cols = nnx.Linear(8, 16, kernel_init=part(init, (None, "data")), rngs=rngs)
        self.rows = nnx.Linear(16, 4, kernel_init=part(init, ("data", None)), rngs=rngs)
        self.count = nnx.Variable(5)


@pytest.mark.parametrize("share", SHARE_CHOICES)
def test_one_process_loads_every_mode_bit_exact_at_the_target_sharding(tmp_path, poison, share):
    """In one process every device's part is its own: bytes mode exchanges nothing and reads
    by regions, with the reason in the report."""
    mesh = jax.make_mesh((8,), ("data",))
    rng = np.random.default_rng(0)
    with jax.set_mesh(mesh):
        source = Mixed(nnx.Rngs(0))
    saved = {
        ".".join(map(str, p)): np.asarray(v.get_value())
        for p, v in nnx.iter_graph(source)
        if isinstance(v, nnx.Param)
    }
    saved = {k: rng.standard_normal(v.shape).astype(np.float32) for k, v in saved.items()}
    saved["cols.kernel"].reshape(-1)[0] = -0.0
    save_file(saved | {"count": np.array(9, np.int64)}, str(tmp_path / "m.safetensors"))
    with jax.set_mesh(mesh):
        target = Mixed(nnx.Rngs(1))
    poison(target)
    shardings = {
        path: var.get_value().sharding
        for path, var in nnx.iter_graph(target)
        if isinstance(var, nnx.Param)
    }
    model, report = loader.load_model(
        target, tmp_path / "m.safetensors", strategy="sharded", strict=True, share=share
    )
    for path, var in nnx.iter_graph(model):
        if isinstance(var, nnx.Param):
            got = var.get_value()
            assert got.sharding == shardings[path], path
            assert np.asarray(got).tobytes() == saved[".".join(map(str, path))].tobytes(), path
    assert model.count.get_value() == 9
    stats = report.share
    assert stats is not None and stats.asked is Share(share)
    assert stats.mode is (Share.BYTES if share == "bytes" else Share.REGIONS)
    assert (stats.block_tensors, stats.region_tensors, stats.whole_tensors) == (0, 4, 1)
    assert stats.exchanged_bytes == 0 and stats.reason
    assert report.share_bytes == sum(a.nbytes for a in saved.values()) + 8
