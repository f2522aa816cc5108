"""`sharded-dir` and `sharded` as 2 cooperating `jax.distributed` processes x 4 CPU devices.

One process group (`mp_sharded_worker.py`) runs every scenario, so jax starts once per process.
Each process checks its addressable shards bit-exactly itself (a failed check fails its exit
status); these tests then check what each process reported: the shard files written, the files it
opened and the bytes it read, and the refusal of a sharding it cannot address.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.multiprocess import launch

pytestmark = pytest.mark.multiprocess

WORKER = Path(__file__).with_name("mp_sharded_worker.py")
SHARDS = ["shard-0-of-2.safetensors", "shard-1-of-2.safetensors"]


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> list[dict]:
    work = tmp_path_factory.mktemp("mp")
    outcomes = launch(WORKER, [str(work)], processes=2, devices=4, timeout_s=90)
    for o in outcomes:
        assert o.returncode == 0, f"process {o.process} exit {o.returncode}:\n{o.output[-6000:]}"
    return [json.loads((work / f"p{i}.json").read_text()) for i in range(2)]


def test_each_process_writes_its_own_shard_and_manifest_comes_last(reports):
    for r in reports:
        assert r["files"] == ["manifest.json", *SHARDS]
    slices = reports[0]["slices"]
    for name in [
        "fc1.bias",
        "fc2.bias",
        "fc3.bias",
        "step",
    ]:  # replicated: written once, by process 0
        assert slices[name] == [SHARDS[0]]
    for name in ["fc1.kernel", "fc2.kernel", "fc3.kernel"]:  # 8 distinct ranges, 4 per process
        assert sorted(slices[name]) == [SHARDS[0]] * 4 + [SHARDS[1]] * 4


@pytest.mark.parametrize("case", ["own", "rule"])
def test_each_process_reads_only_the_ranges_it_needs(reports, case):
    """Bytes read == bytes of this process's distinct index ranges (so never another's slice)."""
    for r in reports:
        assert r[case]["bytes"] == r[case]["needed"] > 0
    assert reports[0][case]["opened"] == [SHARDS[0]]  # everything process 0 needs is in its file
    assert reports[1][case]["opened"] == SHARDS  # process 1: its kernels, and the replicated biases


def test_plain_builder_gets_the_rule_and_reports_the_resharding(reports):
    names = ["fc1.bias", "fc1.kernel", "fc2.bias", "fc2.kernel", "fc3.bias", "fc3.kernel"]
    assert reports[0]["rule_changes"] == names


def test_unaddressable_sharding_is_refused(reports):
    for i, r in enumerate(reports):
        assert f"none of which process {i} can address" in r["refused"]
        assert "Refusing to load a local slice" in r["refused"]


def test_convert_then_load_in_two_processes(reports):
    for r in reports:
        converted = r["single_file"]["converted"]
        assert converted["bytes"] == converted["needed"] > 0


def test_single_file_sharded_strategy_in_two_processes(reports):
    assert all(r["single_file"]["sharded_strategy"] == "ok" for r in reports)


def test_single_file_sharded_strategy_refuses_unaddressable(reports):
    for r in reports:
        assert r["single_file"]["sharded_refusal"].startswith("CheckpointError")
