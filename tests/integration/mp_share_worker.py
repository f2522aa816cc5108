"""One process of the `share=` test (run by tests/integration/test_multiprocess_share.py).

`python mp_share_worker.py WORKDIR CHECKPOINT URL` under `tests.multiprocess.launch`: loads the
checkpoint from the local file and from the URL with the `sharded` strategy in every mode
(`share="regions"`, `"bytes"`, `"auto"`), each into a model poisoned first (every float leaf
7.0), and checks, in this process: every addressable shard bit-exactly against the file (whose
values include -0.0 and a NaN with a payload, which arithmetic would change), and every leaf's
sharding equal to the model's target sharding (a load that skipped the resharding would leave
the blocks' sharding). It records what the load reported beside figures worked out here, apart
from the loader: the bytes this process should read in each mode (`expected_read`), and the
bytes its devices hold that lie outside the rows it read (`expected_exchanged`). A local read is
counted where the slice reader preads. Writes `WORKDIR/p<i>.json`; a failed check exits non-zero.
"""

from __future__ import annotations

import json
import math
import sys
import traceback
from pathlib import Path

from tests.multiprocess import finish, initialize
from tests.multiprocess import poisoned as poisoned_instance

ME, COUNT = initialize()

import jax  # noqa: E402
import numpy as np  # noqa: E402
from flax import nnx  # noqa: E402
from jax.experimental import multihost_utils  # noqa: E402
from jax.sharding import NamedSharding  # noqa: E402
from safetensors.numpy import load_file  # noqa: E402

import loader.sharded.files as files  # noqa: E402
from loader import strategies  # noqa: E402
from loader.format.atomic import atomic_write_text  # noqa: E402
from loader.placement.leaves import iter_variables  # noqa: E402

MODES = ("regions", "bytes", "auto")


class Net(nnx.Module):
    """A kernel split by columns over every device (exchanged in bytes mode), one split by rows
    (each process's rows its own already), one whose 3 rows 2 and 4 processes do not divide
    (the last process reads fewer rows, or none), and replicated biases (every process receives
    what the others read)."""

    def __init__(self, rngs: nnx.Rngs) -> None:
        def init(spec):
            return nnx.with_partitioning(nnx.initializers.lecun_normal(), spec)

        self.cols = nnx.Linear(32, 64, kernel_init=init((None, "data")), rngs=rngs)
        self.rows = nnx.Linear(64, 16, kernel_init=init(("data", None)), rngs=rngs)
        self.odd = nnx.Linear(3, 16, kernel_init=init((None, "data")), use_bias=False, rngs=rngs)


def key(path) -> str:
    return ".".join(map(str, path))


def poisoned(mesh) -> Net:
    """An instance sharded over `mesh` with every float leaf 7.0 (a no-op load leaves 7.0)."""
    return poisoned_instance(Net, mesh)


def targets(mesh) -> dict[str, NamedSharding]:
    """Each leaf's target sharding: the model's partitioning over `mesh`."""
    model = poisoned(mesh)
    return {key(p): v.get_value().sharding for p, v in iter_variables(model)}


def spans(index, shape) -> tuple:
    return tuple(s.indices(d)[:2] for s, d in zip(index, shape))


def own_rows(shape: tuple[int, ...], process: int) -> tuple[int, int]:
    """The rows process `process` reads in bytes mode: ceil(rows / processes) each, in order,
    the last ones fewer or none."""
    n = -(-shape[0] // COUNT)
    return min(process * n, shape[0]), min((process + 1) * n, shape[0])


def outside(region: tuple, rows: tuple[int, int]) -> int:
    """Elements of `region` outside the rows `rows` (all axes after the first whole)."""
    (a, b), rest = region[0], region[1:]
    inside = max(0, min(b, rows[1]) - max(a, rows[0]))
    return ((b - a) - inside) * math.prod(hi - lo for lo, hi in rest)


def is_block(shape, sharding) -> bool:
    """Read as a block in bytes mode: some process's devices hold rows it does not read."""
    for device, index in sharding.devices_indices_map(shape).items():
        rows = own_rows(shape, device.process_index)
        if outside(spans(index, shape), rows):
            return True
    return False


def expected(mesh, mode: str) -> tuple[int, int, int]:
    """(bytes read, bytes exchanged, tensors as blocks) for this process in `mode`."""
    read = exchanged = blocks = 0
    for name, sharding in targets(mesh).items():
        shape = SHAPES[name]
        mine = {spans(i, shape) for i in sharding.addressable_devices_indices_map(shape).values()}
        if mode == "bytes" and is_block(shape, sharding):
            rows = own_rows(shape, ME)
            read += (rows[1] - rows[0]) * math.prod(shape[1:]) * 4
            exchanged += sum(outside(r, rows) for r in mine) * 4
            blocks += 1
        else:
            read += sum(math.prod(b - a for a, b in r) for r in mine) * 4
    return read, exchanged, blocks


def check(model: Net, want: dict[str, np.ndarray], mesh) -> None:
    """Bit-exact shards, and each leaf's sharding the target's."""
    goal = targets(mesh)
    for path, var in iter_variables(model):
        value = var.get_value()
        name = key(path)
        assert value.sharding == goal[name], f"{name}: {value.sharding} != target {goal[name]}"
        for shard in value.addressable_shards:
            got = np.asarray(shard.data)
            assert got.tobytes() == want[name][shard.index].tobytes(), f"{name} {shard.index}"


PREADS = {"bytes": 0}
_pread = files.pread_exact


def counting_pread(fd, buf, offset, *, where):
    PREADS["bytes"] += len(buf)
    return _pread(fd, buf, offset, where=where)


files.pread_exact = counting_pread  # what `LocalSliceFile` reads with
SHAPES: dict[str, tuple[int, ...]] = {}


def main(checkpoint: Path, url: str) -> dict:
    mesh = jax.make_mesh((jax.device_count(),), ("data",))
    want = load_file(str(checkpoint))
    SHAPES.update({k: v.shape for k, v in want.items()})
    out: dict = {}
    for source in (str(checkpoint), url):
        for mode in MODES:
            PREADS["bytes"] = 0
            local = source == str(checkpoint)
            options = {"share": mode} | ({} if local else {"concurrency": 4})
            model, report = strategies.get("sharded").load(
                poisoned(mesh), source, strict=True, **options
            )
            assert report.ok, report.problems()
            check(model, want, mesh)
            share = report.share
            chosen = share.mode.value
            read, exchanged, blocks = expected(mesh, chosen)
            remote = report.remote
            out[f"{'file' if local else 'http'} {mode}"] = {
                "asked": share.asked.value,
                "mode": chosen,
                "reason": share.reason,
                "block_tensors": share.block_tensors,
                "region_tensors": share.region_tensors,
                "whole_tensors": share.whole_tensors,
                "exchanged_bytes": share.exchanged_bytes,
                "share_bytes": report.share_bytes,
                "preads": PREADS["bytes"],
                "expected_read": read,
                "expected_exchanged": exchanged,
                "expected_blocks": blocks,
                "tensors": len(report.loaded),
                **(
                    {}
                    if remote is None
                    else {
                        "requests": remote.requests,
                        "planned_requests": remote.planned_requests,
                        "planned_bytes": remote.planned_bytes,
                        "bytes_received": remote.bytes_received,
                        "header_bytes": remote.header_bytes,
                    }
                ),
            }
    return out


if __name__ == "__main__":
    try:
        work = Path(sys.argv[1]).resolve()
        res = main(Path(sys.argv[2]), sys.argv[3])
        atomic_write_text(work / f"p{ME}.json", json.dumps(res, indent=1))
        print(f"process {ME}: ok")
        multihost_utils.sync_global_devices("mp-share-done")
    except BaseException:
        traceback.print_exc()
        finish(False)
    finish(True)
