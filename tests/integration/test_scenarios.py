"""What users face, end to end: their own checkpoint, a cold page cache, a real memory limit.

Checkpoints here are written by `safetensors` itself, shaped like Hugging Face exports: dotted keys,
`__metadata__ {"format": "pt"}`, an I64 `position_ids` buffer, a tied head (no `lm_head`) or an
untied one, and a sharded folder with its index. Children are real; failing strategies come from
`tests/integration/fakes/` through `LOADBENCH_EXTRA_STRATEGIES`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from safetensors.numpy import save_file

from bench.limits import cgroups
from bench.limits import disk_read as diskthrottle
from bench.limits import memory as memlimit
from bench.records.results import read_results
from bench.run.config import RunConfig
from bench.run.runner import run_bench
from loader.options import LoadOptions
from tests.commands import loadbench
from tests.records import total_row

FAKES = Path(__file__).parent / "fakes"


@pytest.fixture
def bench_env(monkeypatch, tmp_path):
    path = os.pathsep.join([str(FAKES), os.environ.get("PYTHONPATH", "")]).strip(os.pathsep)
    monkeypatch.setenv("PYTHONPATH", path)
    monkeypatch.setenv("LOADBENCH_EXTRA_STRATEGIES", "fake_ok,fake_hang,fake_oom")
    monkeypatch.setenv("LOADBENCH_CACHE", str(tmp_path / "lbcache"))
    monkeypatch.syspath_prepend(str(FAKES))


def _hf_tensors(tied: bool) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    out = {
        "transformer.wte.weight": rng.standard_normal((64, 16), dtype=np.float32),
        "transformer.h.0.attn.c_attn.weight": rng.standard_normal((16, 48)).astype(np.float16),
        "transformer.h.0.ln_1.weight": rng.standard_normal(16, dtype=np.float32),
        "transformer.h.1.attn.c_attn.weight": rng.standard_normal((16, 48)).astype(np.float16),
        "transformer.position_ids": np.arange(32, dtype=np.int64)[None],
    }
    if not tied:
        out["lm_head.weight"] = rng.standard_normal((64, 16), dtype=np.float32)
    return out


def _sharded(folder: Path) -> Path:
    tensors = _hf_tensors(tied=False)
    names = sorted(tensors)
    shards = {
        "model-00001-of-00002.safetensors": names[:3],
        "model-00002-of-00002.safetensors": names[3:],
    }
    for file, keys in shards.items():
        save_file({k: tensors[k] for k in keys}, folder / file, metadata={"format": "pt"})
    weight_map = {k: f for f, keys in shards.items() for k in keys}
    index = folder / "model.safetensors.index.json"
    index.write_text(json.dumps({"metadata": {"total_size": 0}, "weight_map": weight_map}))
    return index


def _listing(folder: Path) -> list[tuple[str, int, int]]:
    return sorted((str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in folder.rglob("*"))


def _totals(outcome):
    res = read_results(outcome.jsonl)
    assert res.errors == []
    return res.phases[res.phases.phase == "total"]


@pytest.mark.parametrize("layout", ["tied", "untied", "sharded-index"])
def test_own_checkpoint_loads_bit_exact_and_nothing_is_written_beside_it(
    bench_env, tmp_path, layout
):
    folder = tmp_path / "user"
    folder.mkdir()
    if layout == "sharded-index":
        path = _sharded(folder)
    else:
        path = folder / "model.safetensors"
        save_file(_hf_tensors(layout == "tied"), path, metadata={"format": "pt"})
    before = _listing(folder)
    config = RunConfig(
        shapes=[],
        checkpoints=[str(path)],
        strategies=["zerocopy"],
        repeats=1,
        cache="cold",
        out=tmp_path / "results",
        progress=False,
    )
    totals = _totals(run_bench(config))
    assert _listing(folder) == before  # nothing written (or touched) beside the user's files
    row = totals.iloc[0]
    assert row.status == "ok", row.error
    assert row.cache == "cold" and row.resident_fraction < 0.5
    assert row.pagecache_growth_bytes > 0  # the load read it back through the page cache
    assert row.shapes == str(path.resolve())
    assert list((tmp_path / "lbcache" / "digests").glob("*.json"))


def test_own_checkpoint_wrong_digest_is_a_wrong_row(bench_env, tmp_path):
    path = tmp_path / "model.safetensors"
    save_file(_hf_tensors(tied=True), path, metadata={"format": "pt"})
    config = RunConfig(
        shapes=[],
        checkpoints=[str(path)],
        strategies=["zerocopy"],
        repeats=1,
        out=tmp_path / "results",
        progress=False,
    )
    assert _totals(run_bench(config)).iloc[0].status == "ok"
    for cached in (tmp_path / "lbcache" / "digests").glob("*.json"):  # corrupt the reference
        record = json.loads(cached.read_text())
        if "file" in record:
            record["tensors"]["transformer.wte.weight"]["blake3"] = "0" * 64
            cached.write_text(json.dumps(record))
    row = _totals(run_bench(config)).iloc[0]
    assert row.status == "wrong" and "transformer.wte.weight" in row.error


def _cgroup_or_skip() -> None:
    limit = memlimit.MemoryLimit(64 << 20, mechanisms=(memlimit.V2, memlimit.V1)).open()
    limit.close()
    if limit.mechanism == memlimit.WATCHDOG:
        pytest.skip(f"no memory cgroup can be made here: {limit.note}")


def test_host_ram_limit_kills_an_oversized_child_as_an_oom_row(bench_env, tmp_path):
    _cgroup_or_skip()
    config = RunConfig(
        shapes=["tiny-gpt2"],
        strategies=["fake-ok", "fake-oom"],
        repeats=1,
        host_ram_bytes=512 << 20,
        timeout_s=120,
        out=tmp_path / "results",
        progress=False,
    )
    totals = _totals(run_bench(config)).set_index("strategy")
    assert totals.loc["fake-ok", "status"] == "ok"
    oom = totals.loc["fake-oom"]
    assert oom.status == "oom" and "memory limit" in oom.error, oom.error
    assert oom.memory_limit in ("cgroup-v1", "cgroup-v2") and oom.memory_limit_enforced
    assert oom.host_ram_bytes == 512 << 20


def _our_cgroups() -> list[Path]:
    parents = [p for p in (memlimit._v2_parent(), memlimit._v1_parent()) if p is not None]
    return [c for p in parents for c in p.glob(f"{cgroups.PREFIX}*")]


def test_ctrl_c_during_a_limited_run_leaves_no_cgroup(bench_env, tmp_path):
    _cgroup_or_skip()
    out = tmp_path / "results"
    before = set(_our_cgroups())
    cmd = loadbench(
        "bench",
        "run",
        "--shapes",
        "tiny-gpt2",
        "--repeats",
        "1",
        "--max-repeats",
        "1",
        "--strategies",
        "fake-hang",
        "--host-ram",
        "1GiB",
        "--out",
        str(out),
    )
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (set(_our_cgroups()) - before):
        time.sleep(0.1)
    assert set(_our_cgroups()) - before, "the run never made its cgroup"
    time.sleep(1.0)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err[-2000:]
    assert set(_our_cgroups()) - before == set()


def test_recommend_check_confirms_both_verdicts_under_a_real_limit(bench_env, tmp_path, capsys):
    """fake-ok is predicted to fit 512 MiB and fake-oom not to: both verdicts must hold as rows."""
    import argparse

    from bench.commands.recommend import run_cli
    from bench.records.writer import ResultsWriter

    _cgroup_or_skip()
    MiB = 1 << 20

    def row(strategy, ckpt, over, i):
        return total_row(
            result_id=f"{strategy}-{ckpt}-{i}",
            shapes=f"s{ckpt}",
            strategy=strategy,
            repeat=i,
            checkpoint_bytes=ckpt,
            largest_tensor_bytes=ckpt // 10,
            tensors=9,
            peak_rss_bytes=100 * MiB + over,
        )

    rows = [row("fake-ok", c, c // 10, i) for c in (100 * MiB, 300 * MiB) for i in range(2)]
    rows += [
        row("fake-oom", c, c + 3000 * MiB, i) for c in (100 * MiB, 300 * MiB) for i in range(2)
    ]
    with ResultsWriter(tmp_path / "res" / "m" / "measured.jsonl") as w:
        w.write_many(rows)
    args = argparse.Namespace(
        shapes="tiny-gpt2",
        host_ram="512MiB",
        devices=None,
        results=str(tmp_path / "res"),
        json=False,
        cache="warm",
        disk_read_speed=None,
        device_ram=None,
        check=True,
    )
    assert run_cli(args) == 0
    out = capsys.readouterr().out
    assert "use fake-ok on 512 MiB" in out  # the judge's decision (issue 54)
    assert "fake-ok         predicted fits          -> ok       held" in out
    assert "fake-oom        predicted does not fit  -> oom      held" in out
    assert "every verdict held" in out


def test_disk_read_speed_runs_cold_children_under_a_read_cap_and_records_it(bench_env, tmp_path):
    """Every cold row says the cap and whether it held; the run's cgroups are gone afterwards."""
    config = RunConfig(
        shapes=["tiny-gpt2"],
        strategies=["fake-ok"],
        repeats=1,
        cache="both",
        disk_read_bytes_per_s=20_000_000,
        timeout_s=120,
        out=tmp_path / "results",
        progress=False,
    )
    before = set(_throttle_cgroups())
    rows = _totals(run_bench(config)).set_index("cache")
    assert pd.isna(rows.loc["warm", "disk_read_bytes_per_s"])  # a warm child reads no disk
    row = rows.loc["cold"]
    assert row.status == "ok" and row.disk_read_bytes_per_s == 20_000_000
    if row.disk_read_limit == diskthrottle.NONE:  # tmpfs, or no io/blkio cgroup on this machine
        assert not row.disk_read_limit_enforced and "full speed" in row.error, row.error
    else:
        assert row.disk_read_limit in ("cgroup-v1", "cgroup-v2") and row.disk_read_limit_enforced
    assert set(_throttle_cgroups()) == before


def _throttle_cgroups() -> list[Path]:
    parents = [cgroups.v2_parent("io"), cgroups.v1_parent("blkio", diskthrottle.V1_KNOB)]
    mine = f"{cgroups.PREFIX}{os.getpid()}-*"  # run_bench runs here; another bench may run beside
    return [c for p in parents if p is not None for c in p.glob(mine)]


@pytest.mark.parametrize("policy", ["keep", "dontneed"])
def test_a_cold_row_records_what_the_load_left_in_the_page_cache(bench_env, tmp_path, policy):
    """`--cache-policy` and `--threads` reach `pipelined`; the row says how much it left cached."""
    path = tmp_path / "user" / "model.safetensors"
    path.parent.mkdir()
    rng = np.random.default_rng(0)
    save_file({f"w{i}": rng.standard_normal((256, 256), dtype=np.float32) for i in range(8)}, path)
    config = RunConfig(
        shapes=[],
        checkpoints=[str(path)],
        strategies=["pipelined"],
        repeats=1,
        cache="cold",
        options=LoadOptions.of(threads=3, cache_policy=policy),
        out=tmp_path / "results",
        progress=False,
    )
    row = _totals(run_bench(config)).iloc[0]
    assert row.status == "ok", row.error
    if row.resident_fraction > 0.1:
        pytest.skip("this filesystem keeps the file cached when evicted")
    assert (row.threads, row.cache_policy) == (3, policy)
    size = path.stat().st_size
    if policy == "keep":
        assert row.pagecache_growth_bytes > 0.8 * size
    else:
        assert row.pagecache_growth_bytes < 0.2 * size
