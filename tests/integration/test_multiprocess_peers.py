"""`orbax-safetensors` and `mmap-put` as 2 cooperating `jax.distributed` processes x 4 CPU devices:
each process fills its own shards of a model sharded over all 8, bit-exactly (the worker checks
every addressable shard against the file and fails its exit status otherwise), and
`orbax-safetensors` places a model that declares no sharding with `sharded`'s rule. Then the bench
runs `orbax-safetensors` beside `sharded` as 2 processes: per-rank and summed rows, each verified,
each process holding the same share of the model; runai's 2-process row is skipped, saying why."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

from tests.multiprocess import launch

pytestmark = pytest.mark.multiprocess

WORKER = Path(__file__).with_name("mp_peers_worker.py")


def test_each_process_loads_its_shards_with_the_jax_peers(tmp_path):
    rng = np.random.default_rng(3)
    tensors = {
        "fc1.kernel": rng.standard_normal((16, 24)).astype(np.float32),
        "fc1.bias": rng.standard_normal(24).astype(np.float32),
        "fc2.kernel": rng.standard_normal((24, 8)).astype(np.float32),
        "fc2.bias": rng.standard_normal(8).astype(np.float32),
    }
    checkpoint = tmp_path / "net.safetensors"
    save_file(tensors, str(checkpoint))
    outcomes = launch(WORKER, [str(checkpoint), str(tmp_path)], processes=2, devices=4)
    for o in outcomes:
        assert o.returncode == 0, f"process {o.process} exit {o.returncode}:\n{o.output[-6000:]}"
    total = sum(t.nbytes for t in tensors.values())
    for i in range(2):
        found = json.loads((tmp_path / f"p{i}.json").read_text())
        for name in ("orbax-safetensors", "mmap-put", "orbax-safetensors plain"):
            assert found[name]["loaded"] == sorted(tensors), name
            assert found[name]["shards"] == 4 * len(tensors), name  # 4 local devices each
        # a plain model gets the rule, every tensor split 8 ways: this process holds half the
        # file (replicated, each of its 4 devices would hold all of it)
        assert found["orbax-safetensors plain"]["held_bytes"] == total // 2


def test_the_bench_runs_orbax_safetensors_as_processes_beside_sharded(tmp_path, monkeypatch):
    """`bench run --processes 2`: each strategy's ranks verified every tensor (status ok; a wrong
    value is `wrong`), and each process's devices received exactly what `sharded`'s did: its part
    of the sharded tensors, not a replica of the checkpoint."""
    from bench.cli import main

    monkeypatch.setenv("LOADBENCH_CACHE", str(tmp_path / "cache"))
    argv = ["bench", "run", "--shapes", "tiny-gpt2", "--processes", "2", "--repeats", "1"]
    argv += ["--strategies", "orbax-safetensors,sharded,runai", "--max-repeats", "1"]
    assert main([*argv, "--out", str(tmp_path / "res"), "--timeout", "120"]) == 0
    (jsonl,) = (tmp_path / "res").glob("*/*.jsonl")
    rows = [json.loads(line) for line in jsonl.read_text().splitlines()[1:]]
    totals = [r for r in rows if r.get("phase") == "total"]
    ranks = {(r["strategy"], r["process_index"]): r for r in totals if r["processes"] == 2}
    for name in ("orbax-safetensors", "sharded"):
        assert {i for n, i in ranks if n == name} == {-1, 0, 1}, name
        assert all(ranks[name, i]["status"] == "ok" for i in (-1, 0, 1)), name
    for i in (0, 1):
        orbax, ours = ranks["orbax-safetensors", i], ranks["sharded", i]
        assert orbax["device_received_bytes"] == ours["device_received_bytes"]
        assert sum(orbax["device_received_bytes"].values()) < orbax["checkpoint_bytes"]
        assert orbax["peak_rss_bytes"] > 0 and not orbax["device_overreceived"]
    runai = ranks["runai", -1]  # a skipped configuration has one row: the result's own
    assert runai["status"] == "skipped" and "NCCL" in runai["error"]
