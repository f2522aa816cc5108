"""`orbax-safetensors` and `mmap-put` as 2 cooperating `jax.distributed` processes x 4 CPU devices:
each process fills its own shards of a model sharded over all 8, bit-exactly (the worker checks
every addressable shard against the file and fails its exit status otherwise)."""

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
    for i in range(2):
        found = json.loads((tmp_path / f"p{i}.json").read_text())
        for name in ("orbax-safetensors", "mmap-put"):
            assert found[name]["loaded"] == sorted(tensors), name
            assert found[name]["shards"] == 4 * len(tensors), name  # 4 local devices each
