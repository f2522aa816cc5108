"""One process of the remote `sharded` test (run by tests/integration/test_multiprocess_remote.py).

`python mp_remote_worker.py WORKDIR CHECKPOINT URL...` under `tests.multiprocess.launch`: for each
URL, loads a model sharded over every process's devices with the `sharded` strategy into a
poisoned instance (every float leaf 7.0), checks each addressable shard bit-exactly against the
local copy of the checkpoint, and records what it received (`LoadReport.remote`) beside its
share: the bytes of its distinct index ranges, counted here from the shards themselves, and its
read plan. Then the
same URL loaded whole by `pipelined` into a model on this process's devices only: what a process
that reads the whole file receives. Writes `WORKDIR/p<i>.json`; any failed check exits non-zero.
"""

from __future__ import annotations

import json
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
from safetensors.numpy import load_file  # noqa: E402

import loader  # noqa: E402
from loader import strategies  # noqa: E402
from loader.format.atomic import atomic_write_text  # noqa: E402
from loader.placement.leaves import iter_variables  # noqa: E402

CONCURRENCY = 4


class Net(nnx.Module):
    """Kernels sharded by rows and by columns over the global devices; biases replicated."""

    def __init__(self, rngs: nnx.Rngs) -> None:
        def init(spec):
            return nnx.with_partitioning(nnx.initializers.lecun_normal(), spec)

        self.fc1 = nnx.Linear(512, 256, kernel_init=init(("data", None)), rngs=rngs)  # 512 KiB
        self.fc2 = nnx.Linear(32, 512, kernel_init=init((None, "data")), rngs=rngs)  # 64 KiB


def key(path) -> str:
    return ".".join(map(str, path))


def poisoned(mesh) -> Net:
    """An instance sharded over `mesh` with every float leaf 7.0 (a no-op load leaves 7.0)."""
    return poisoned_instance(Net, mesh)


def verify(model: Net, expected: dict[str, np.ndarray]) -> int:
    """Every addressable shard equals the file's values; the bytes of the distinct ranges."""
    share = 0
    for path, var in iter_variables(model):
        value = var.get_value()
        assert not value.is_fully_addressable, f"{key(path)}: not a global array"
        want = expected[key(path)]
        seen = set()
        for shard in value.addressable_shards:
            got = np.asarray(shard.data)
            assert got.tobytes() == want[shard.index].tobytes(), f"{key(path)} {shard.index}"
            spans = tuple(s.indices(d)[:2] for s, d in zip(shard.index, value.shape))
            if spans not in seen:
                seen.add(spans)
                share += got.nbytes
    return share


def stats(report) -> dict:
    r = report.remote
    assert r is not None, "a remote load without LoadReport.remote"
    keys = ("requests", "bytes_requested", "bytes_received", "header_bytes", "retries")
    plan = ("max_over_read", "planned_requests", "planned_bytes", "needed_bytes")
    return {k: getattr(r, k) for k in (*keys, *plan)} | {"concurrency": r.concurrency}


def main(checkpoint: Path, urls: list[str]) -> dict:
    mesh = jax.make_mesh((jax.device_count(),), ("data",))
    expected = load_file(str(checkpoint))
    out = {}
    for url in urls:
        model, report = strategies.get("sharded").load(  # each its own ranges: `share` tests
            poisoned(mesh), url, strict=True, concurrency=CONCURRENCY, share="regions"
        )  # bytes mode (tests/integration/test_multiprocess_share.py)
        assert report.ok, report.problems()
        share = verify(model, expected)
        assert report.share_bytes == share, (report.share_bytes, share)
        local = jax.sharding.Mesh(np.array(jax.local_devices()), ("data",))
        _, whole = loader.load_model(poisoned(local), url, strategy="pipelined", strict=True)
        out[url] = {"share": share, "sharded": stats(report), "whole": stats(whole)}
    return out


if __name__ == "__main__":
    try:
        work = Path(sys.argv[1]).resolve()
        res = main(Path(sys.argv[2]), sys.argv[3:])
        atomic_write_text(work / f"p{ME}.json", json.dumps(res, indent=1))
        print(f"process {ME}: ok")
        # the coordinator lives in process 0: it must not exit while another still loads
        multihost_utils.sync_global_devices("mp-remote-done")
    except BaseException:
        traceback.print_exc()
        finish(False)
    finish(True)
