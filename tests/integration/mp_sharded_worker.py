"""One process of the 2-process sharded test (run by tests/integration/test_multiprocess.py).

`python mp_sharded_worker.py WORKDIR` under `tests.multiprocess.launch`: saves a small model sharded
over the 8 global devices with `loader.save_sharded`, loads it back several ways, and checks every
addressable shard bit-exactly against values every process can compute, plus which shard files it
opened and how many bytes it read. Writes `WORKDIR/p<i>.json`; any failed check exits non-zero.
"""

from __future__ import annotations

import builtins
import contextlib
import json
import os
import sys
import traceback
import warnings
from pathlib import Path

from tests.multiprocess import finish, initialize

ME, COUNT = initialize()

import jax  # noqa: E402
import numpy as np  # noqa: E402
from flax import nnx  # noqa: E402
from jax.experimental import multihost_utils  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec  # noqa: E402

import loader  # noqa: E402
from loader.format.atomic import atomic_write_bytes, atomic_write_text  # noqa: E402
from loader.placement.leaves import iter_variables  # noqa: E402
from loader.sharded.directory import convert_to_sharded, load_sharded, save_sharded  # noqa: E402
from loader.sharded.rule import AXIS  # noqa: E402

STEP = 11


class Net(nnx.Module):
    def __init__(self, rngs: nnx.Rngs, *, sharded: bool = True):
        def init(spec):
            base = nnx.initializers.lecun_normal()
            return nnx.with_partitioning(base, spec) if sharded else base

        self.fc1 = nnx.Linear(16, 8, kernel_init=init(("data", None)), rngs=rngs)
        self.fc2 = nnx.Linear(8, 24, kernel_init=init((None, "data")), rngs=rngs)
        self.fc3 = nnx.Linear(24, 5, kernel_init=init(("data", None)), rngs=rngs)
        self.step = nnx.Variable(3)


def key(path) -> str:
    return ".".join(map(str, path))


def expected_value(name: str, shape: tuple[int, ...]) -> np.ndarray:
    seed = sum(map(ord, name))
    return ((np.arange(int(np.prod(shape)), dtype=np.float32) + seed) / 7).reshape(shape)


def filled(mesh: Mesh, constant: float | None = None) -> Net:
    """The model with every float leaf set (globally) to its expected value, or to `constant`."""
    with jax.set_mesh(mesh):
        model = nnx.eval_shape(lambda: Net(nnx.Rngs(0)))
    for path, var in iter_variables(model):
        v = var.get_value()
        if key(path) == "step":
            var.set_value(STEP)
            continue
        host = (
            expected_value(key(path), v.shape)
            if constant is None
            else np.full(v.shape, constant, np.float32)
        )
        sharding = NamedSharding(mesh, v.sharding.spec)
        var.set_value(jax.make_array_from_callback(v.shape, sharding, lambda idx, h=host: h[idx]))
    return model


def verify(model) -> int:
    """Each addressable shard of each leaf equals the expected values; bytes of distinct ranges."""
    nbytes = 0
    for path, var in iter_variables(model):
        value = var.get_value()
        if key(path) == "step":
            assert value == STEP and type(value) is int, f"step is {value!r}"
            nbytes += 8
            continue
        assert not value.is_fully_addressable, f"{key(path)}: not a global array"
        want = expected_value(key(path), value.shape)
        seen = set()
        for shard in value.addressable_shards:
            got = np.asarray(shard.data)
            assert got.tobytes() == want[shard.index].tobytes(), (
                f"{key(path)} {shard.index} differs"
            )
            spans = tuple(s.indices(d)[:2] for s, d in zip(shard.index, value.shape))
            if spans not in seen:
                seen.add(spans)
                nbytes += got.nbytes
    return nbytes


@contextlib.contextmanager
def io_log(root: Path):
    """Record the files under `root` this process opens and the bytes it reads from them."""
    log = {"opened": set(), "bytes": 0}
    fds: set[int] = set()
    real_open, real_preadv, real_builtin_open = os.open, os.preadv, builtins.open

    def note(path) -> bool:
        inside = str(os.path.abspath(path)).startswith(str(root))
        if inside:
            log["opened"].add(Path(path).name)
        return inside

    def os_open(path, flags, *args, **kwargs):
        fd = real_open(path, flags, *args, **kwargs)
        if note(path):
            fds.add(fd)
        return fd

    def preadv(fd, buffers, offset, *args):
        n = real_preadv(fd, buffers, offset, *args)
        if fd in fds:
            log["bytes"] += n
        return n

    def builtin_open(file, *args, **kwargs):
        if isinstance(file, (str, os.PathLike)):
            note(file)
        return real_builtin_open(file, *args, **kwargs)

    os.open, os.preadv, builtins.open = os_open, preadv, builtin_open
    try:
        yield log
    finally:
        os.open, os.preadv, builtins.open = real_open, real_preadv, real_builtin_open


def main(work: Path) -> dict:
    mesh = jax.make_mesh((8,), ("data",))
    folder = work / "ckpt"
    save_sharded(filled(mesh), folder)
    result: dict = {"files": sorted(p.name for p in folder.iterdir())}
    manifest = json.loads((folder / "manifest.json").read_text())
    result["slices"] = {k: [s["file"] for s in t["slices"]] for k, t in manifest["tensors"].items()}

    with io_log(folder) as log, jax.set_mesh(mesh):  # the model's own sharding, abstract target
        model, report = load_sharded(lambda: Net(nnx.Rngs(1)), folder, strict=True)
    assert report.ok, report.problems()
    result["own"] = {
        "opened": sorted(log["opened"]),
        "bytes": log["bytes"],
        "needed": verify(model),
    }

    target = filled(mesh, constant=7.0)  # a poisoned instance: a no-op load would leave 7.0
    with jax.set_mesh(mesh):
        load_sharded(target, folder, strict=True)
    verify(target)

    with io_log(folder) as log, warnings.catch_warnings():  # plain builder: the rule decides
        warnings.simplefilter("ignore", loader.LoadWarning)
        model, report = load_sharded(lambda: Net(nnx.Rngs(1), sharded=False), folder)
    kernel = model.fc3.kernel.get_value()
    assert kernel.sharding.spec == PartitionSpec(AXIS, None), kernel.sharding
    result["rule"] = {
        "opened": sorted(log["opened"]),
        "bytes": log["bytes"],
        "needed": verify(model),
    }
    result["rule_changes"] = sorted(c.path for c in report.sharding_changes)

    result["refused"] = refusal(folder)
    result["single_file"] = single_file(work, mesh)
    return result


def other_mesh():
    """A mesh of the other processes' devices only: nothing in it is addressable here."""
    others = [d for d in jax.devices() if d.process_index != ME]
    return jax.set_mesh(Mesh(np.array(others), ("data",)))


def refusal(folder: Path) -> str:
    """A model sharded over the other process's devices only cannot be loaded here."""
    with other_mesh(), warnings.catch_warnings():
        warnings.simplefilter("ignore", loader.LoadWarning)  # the re-sharding, before the refusal
        try:
            load_sharded(lambda: Net(nnx.Rngs(1)), folder)
        except loader.CheckpointError as e:
            return str(e)
    raise AssertionError("a sharding this process cannot address was not refused")


def single_file(work: Path, mesh: Mesh) -> dict:
    """One `.safetensors` file: the `sharded` strategy, and `convert_to_sharded` then load."""
    from safetensors.numpy import save

    path = work / "single.safetensors"
    if ME == 0:
        model = nnx.eval_shape(lambda: Net(nnx.Rngs(0), sharded=False))
        tensors = {
            key(p): expected_value(key(p), v.get_value().shape)
            for p, v in iter_variables(model)
            if key(p) != "step"
        }
        tensors["step"] = np.asarray(STEP, np.int64)
        meta = {"loadbench.python_scalars": json.dumps({"step": "int"})}
        atomic_write_bytes(path, save(tensors, metadata=meta))
    multihost_utils.sync_global_devices("single-file-written")
    out = {}
    from loader import strategies

    with jax.set_mesh(mesh):
        model, report = strategies.get("sharded").load(lambda: Net(nnx.Rngs(1)), path)
    verify(model)
    out["sharded_strategy"] = "ok"
    try:
        with other_mesh(), warnings.catch_warnings():
            warnings.simplefilter("ignore", loader.LoadWarning)
            strategies.get("sharded").load(lambda: Net(nnx.Rngs(1)), path)
        out["sharded_refusal"] = None
    except Exception as e:  # reported to the parent, which checks it is a clear CheckpointError
        out["sharded_refusal"] = f"{type(e).__name__}: {e}"
    convert_to_sharded(path, work / "converted")
    with io_log(work / "converted") as log:
        model, report = load_sharded(
            lambda: Net(nnx.Rngs(1), sharded=False), work / "converted", strict=True
        )
    assert report.ok, report.problems()
    out["converted"] = {
        "opened": sorted(log["opened"]),
        "bytes": log["bytes"],
        "needed": verify(model),
    }
    return out


if __name__ == "__main__":
    try:
        work = Path(sys.argv[1]).resolve()
        res = main(work)
        atomic_write_text(work / f"p{ME}.json", json.dumps(res, indent=1))
        print(f"process {ME}: ok")
    except BaseException:
        traceback.print_exc()
        finish(False)
    finish(True)
