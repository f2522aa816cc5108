"""One process of the 2-process JAX peers test (tests/integration/test_multiprocess_peers.py).

`python mp_peers_worker.py CHECKPOINT OUT` under `tests.multiprocess.launch`: loads the checkpoint
(written by the test, random values) into an abstract model sharded over the 8 global devices with
`orbax-safetensors` and `mmap-put` (a no-op load would leave zeros), and checks each addressable
shard bit-exactly against the file; then `orbax-safetensors` again into a plain model that
declares no sharding, which it must place with `sharded`'s rule (each process its own shards,
not a replica of the whole). Writes `OUT/p<i>.json`; any failed check exits non-zero.
"""

from __future__ import annotations

import json
import sys
import traceback
from pathlib import Path

from tests.multiprocess import finish, initialize

ME, COUNT = initialize()

import jax  # noqa: E402
import numpy as np  # noqa: E402
from flax import nnx  # noqa: E402
from safetensors.numpy import load_file  # noqa: E402

from loader import strategies  # noqa: E402
from loader.placement.leaves import iter_variables  # noqa: E402

AXIS = "data"


class Net(nnx.Module):
    def __init__(self, rngs: nnx.Rngs):
        rows = nnx.with_partitioning(nnx.initializers.lecun_normal(), (AXIS, None))
        cols = nnx.with_partitioning(nnx.initializers.lecun_normal(), (None, AXIS))
        self.fc1 = nnx.Linear(16, 24, kernel_init=rows, rngs=rngs)
        self.fc2 = nnx.Linear(24, 8, kernel_init=cols, rngs=rngs)


class PlainNet(nnx.Module):
    """`Net` declaring no sharding: a loader places it with the rule, or replicates it."""

    def __init__(self, rngs: nnx.Rngs):
        self.fc1 = nnx.Linear(16, 24, rngs=rngs)
        self.fc2 = nnx.Linear(24, 8, rngs=rngs)


def check(name: str, checkpoint: str, net: type[nnx.Module] = Net) -> dict:
    mesh = jax.make_mesh((jax.device_count(),), (AXIS,))
    want = load_file(checkpoint)
    with jax.set_mesh(mesh):
        model, report = strategies.get(name).load(lambda: net(nnx.Rngs(0)), checkpoint, strict=True)
    shards = held = 0
    for path, var in iter_variables(model):
        key, value = ".".join(map(str, path)), var.get_value()
        assert not value.is_fully_addressable, f"{name} {key}: not a global array"
        for shard in value.addressable_shards:
            got = np.asarray(shard.data)
            assert got.tobytes() == want[key][shard.index].tobytes(), f"{name} {key} differs"
            shards += 1
            held += got.nbytes
    return {"loaded": sorted(report.loaded), "shards": shards, "held_bytes": held}


def main(checkpoint: str, out: Path) -> None:
    found = {name: check(name, checkpoint) for name in ("orbax-safetensors", "mmap-put")}
    found["orbax-safetensors plain"] = check("orbax-safetensors", checkpoint, PlainNet)
    (out / f"p{ME}.json").write_text(json.dumps(found))


if __name__ == "__main__":
    try:
        main(sys.argv[1], Path(sys.argv[2]))
    except BaseException:  # noqa: BLE001 - any failure is this process's exit status
        traceback.print_exc()
        finish(False)
    finish(True)
