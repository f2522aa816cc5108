"""The bench and a user's script under a real cluster launcher: Debian's Open MPI, one machine.

`mpirun --allow-run-as-root --oversubscribe -n N loadbench bench run --strategies sharded` on
tiny-gpt2: every rank loads its share (each worker checks every tensor it holds against the
checkpoint, bit-exact, or its row says "wrong"), rank 0 writes one results file with a row per rank
and the summed row, as `--processes N` does; a rank whose worker dies mid-load is a "crashed" row,
and the run still ends, well within its bound. Skipped where `mpirun` is absent (`make mpi-deps`
installs it; CI does).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from tests.commands import LOADBENCH

pytestmark = [
    pytest.mark.multiprocess,
    pytest.mark.skipif(
        shutil.which("mpirun") is None, reason="mpirun is not installed (make mpi-deps)"
    ),
]

ROOT = Path(__file__).resolve().parents[2]
USER_SCRIPT = Path(__file__).with_name("mpi_user_script.py")


def _mpirun(ranks: int, argv: list[str], tmp_path: Path, *extra: str, timeout_s: float = 240):
    """`argv` as `ranks` ranks of one Open MPI job, `extra` exported to each (`KEY` or
    `KEY=VALUE`, as `mpirun -x` takes them); (completed process, wall seconds)."""
    env = dict(os.environ, LOADBENCH_CACHE=str(tmp_path / "cache"), JAX_PLATFORMS="cpu")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-n", str(ranks)]
    for key in ("PYTHONPATH", "LOADBENCH_CACHE", "JAX_PLATFORMS", *extra):
        cmd += ["-x", key]
    started = time.monotonic()
    proc = subprocess.run(
        [*cmd, *argv], env=env, cwd=ROOT, capture_output=True, text=True, timeout=timeout_s
    )
    return proc, time.monotonic() - started


def _bench(ranks: int, tmp_path: Path, *extra: str, timeout: str = "120"):
    argv = [*LOADBENCH, "bench", "run", "--shapes", "tiny-gpt2", "--strategies", "sharded"]
    argv += ["--repeats", "1", "--max-repeats", "1", "--devices", str(ranks), "--json"]
    argv += ["--out", str(tmp_path / "res"), "--timeout", timeout]
    return _mpirun(ranks, argv, tmp_path, *extra)


def _records(res: Path) -> tuple[list[dict], list[dict]]:
    """(run records, total rows) of the one results file under `res`."""
    files = sorted(res.rglob("*.jsonl"))
    assert len(files) == 1, f"expected one merged run, found {files}"
    rows = [json.loads(line) for line in files[0].read_text().splitlines()]
    runs = [r for r in rows if r["record"] == "run"]
    return runs, [r for r in rows if r["record"] == "phase" and r["phase"] == "total"]


@pytest.mark.parametrize("ranks", [2, 4])
def test_sharded_under_mpirun_is_one_merged_run(ranks, tmp_path):
    proc, _ = _bench(ranks, tmp_path)
    assert proc.returncode == 0, proc.stderr[-4000:]
    runs, totals = _records(tmp_path / "res")
    assert runs[-1]["status"] == "complete"
    rows = {r["process_index"]: r for r in totals}
    assert sorted(rows) == [-1, *range(ranks)], rows
    for r in rows.values():
        assert (r["status"], r["error"]) == ("ok", None)  # each rank verified its tensors
        assert r["processes"] == ranks and r["devices"] == ranks  # the launcher's ranks
    assert rows[-1]["peak_rss_bytes"] == sum(rows[i]["peak_rss_bytes"] for i in range(ranks))
    assert not (tmp_path / "res" / ".launch").exists()  # the ranks' exchange is cleaned up


def test_a_rank_that_dies_mid_load_becomes_a_row_not_a_hang(tmp_path):
    proc, wall_s = _bench(2, tmp_path, "LOADBENCH_TEST_KILL_RANK=1", timeout="60")
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert wall_s < 60, f"took {wall_s:.0f} s: the others waited for their own timeout"
    runs, totals = _records(tmp_path / "res")
    assert runs[-1]["status"] == "complete"
    rows = {r["process_index"]: r for r in totals}
    assert sorted(rows) == [-1, 0, 1]
    assert rows[1]["status"] == "crashed" and rows[1]["error"].startswith("exit status 3")
    assert rows[0]["status"] == "crashed"
    assert rows[0]["error"].startswith("killed: rank 1 of the ompi job failed (crashed")


@pytest.fixture
def user_checkpoint(tmp_path) -> Path:
    from safetensors.numpy import save_file

    def expected(name: str, shape: tuple[int, ...]) -> np.ndarray:  # as mpi_user_script's
        seed = sum(map(ord, name))
        return ((np.arange(int(np.prod(shape)), dtype=np.float32) + seed) / 7).reshape(shape)

    shapes = {"fc1.kernel": (16, 8), "fc1.bias": (8,), "fc2.kernel": (8, 24), "fc2.bias": (24,)}
    path = tmp_path / "user.safetensors"
    save_file({k: expected(k, s) for k, s in shapes.items()}, str(path))
    return path


def test_load_model_in_a_users_script_under_mpirun(tmp_path, user_checkpoint, monkeypatch):
    monkeypatch.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=2")
    argv = [sys.executable, str(USER_SCRIPT), str(user_checkpoint)]
    proc, _ = _mpirun(4, argv, tmp_path, "XLA_FLAGS", timeout_s=120)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    for rank in range(4):
        assert f"rank {rank} of 4, 8 devices: 8 shards bit-exact" in proc.stdout
