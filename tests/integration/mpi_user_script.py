"""A user's own script under `mpirun -n N`: join the launcher's run, `load_model` with the `sharded`
strategy, check every addressable shard bit-exactly. Run as `python mpi_user_script.py FILE`; the
file holds `expected(name, shape)` for every tensor of `Net` (the test writes it)."""

from __future__ import annotations

import os
import sys
import traceback

from loader.launcher import join

launcher = join()  # before any other jax use: jax.distributed.initialize() through the launcher

import jax  # noqa: E402
import numpy as np  # noqa: E402
from flax import nnx  # noqa: E402

from loader import load_model  # noqa: E402
from loader.placement.leaves import iter_variables  # noqa: E402


class Net(nnx.Module):
    def __init__(self, rngs: nnx.Rngs):
        init = nnx.initializers.lecun_normal()
        self.fc1 = nnx.Linear(
            16, 8, kernel_init=nnx.with_partitioning(init, ("data", None)), rngs=rngs
        )
        self.fc2 = nnx.Linear(
            8, 24, kernel_init=nnx.with_partitioning(init, (None, "data")), rngs=rngs
        )


def expected(name: str, shape: tuple[int, ...]) -> np.ndarray:
    seed = sum(map(ord, name))
    return ((np.arange(int(np.prod(shape)), dtype=np.float32) + seed) / 7).reshape(shape)


def main(path: str) -> int:
    mesh = jax.make_mesh((jax.device_count(),), ("data",))
    with jax.set_mesh(mesh):
        model, report = load_model(lambda: Net(nnx.Rngs(1)), path, strategy="sharded", strict=True)
    checked = 0
    for key, var in iter_variables(model):
        name, value = ".".join(map(str, key)), var.get_value()
        want = expected(name, value.shape)
        for shard in value.addressable_shards:
            got = np.asarray(shard.data)
            assert got.tobytes() == want[shard.index].tobytes(), f"{name} {shard.index} differs"
            checked += 1
    assert (jax.process_index(), jax.process_count()) == (launcher.rank, launcher.size)
    rank, count, devices = jax.process_index(), jax.process_count(), jax.device_count()
    print(f"rank {rank} of {count}, {devices} devices: {checked} shards bit-exact", flush=True)
    return 0


if __name__ == "__main__":
    try:
        code = main(sys.argv[1])
    except Exception:  # noqa: BLE001 - reported, and this rank exits 1 without the barrier
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    if code == 0:  # wait for every rank: the first to leave would take the coordinator with it,
        jax.distributed.shutdown()  # and a rank still finishing would abort ("Socket closed")
    os._exit(code)  # a failed rank skips that barrier: it must not hang the others
