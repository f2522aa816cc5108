"""`loadbench probe` at small sizes: the copy is real, the record is versioned and whole, bad
disks and bad flags are refused in one line, and `--cpus` is a CPU cgroup read back."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from bench.cli import main
from bench.errors import BenchError
from bench.limits import cpu as cpulimit
from bench.limits.cpu import CpuLimit
from bench.machine import bandwidth, child
from bench.machine.limits import KernelLimits
from bench.machine.record import PROBE_VERSION, read_probe

SMALL = ["--quick", "--size", "8MiB"]
CONTRACT = ("warm_copy_bytes_per_s", "cold_read_bytes_per_s", "warm_copy_threads")


def _probe(tmp_path: Path, *extra: str) -> Path:
    out = tmp_path / "probe.json"
    assert main(["probe", *SMALL, "--disk", str(tmp_path), "--out", str(out), *extra]) == 0
    return out


def test_a_pass_copies_the_files_bytes_into_fresh_memory(tmp_path):
    path = tmp_path / "data.bin"
    bandwidth.CHUNK, chunk = 1 << 20, bandwidth.CHUNK  # several chunks per thread
    try:
        bandwidth.write_probe_file(path, (5 << 20) + 4096)
        dest = np.full(path.stat().st_size, 7, np.uint8)  # poisoned: a no-op copy leaves 7s
        fd = os.open(path, os.O_RDONLY)
        try:
            bandwidth._copy_into(fd, dest, threads=3)
        finally:
            os.close(fd)
    finally:
        bandwidth.CHUNK = chunk
    assert dest.tobytes() == path.read_bytes()


def test_a_slow_disk_is_read_cold_in_a_prefix_of_whole_chunks(tmp_path):
    path = tmp_path / "data.bin"
    bandwidth.CHUNK, chunk = 1 << 20, bandwidth.CHUNK
    try:
        bandwidth.write_probe_file(path, 8 << 20)
        assert bandwidth.cold_bytes(path, False, pass_s=1e-9) == 4 << 20  # 4 chunks at least
        assert bandwidth.cold_bytes(path, False, pass_s=1e3) == 8 << 20  # the file at most
        rates, _, nbytes = bandwidth.cold_read(path, [1], repeats=1, pass_s=1e-9)
    finally:
        bandwidth.CHUNK = chunk
    assert nbytes == 4 << 20 and rates[1] > 0


def test_thread_counts_and_the_cpus_a_quota_leaves():
    assert child.thread_counts(1) == ([1, 2], [1, 2, 4])
    assert child.thread_counts(2) == ([1, 2, 4], [1, 2, 4])
    assert child.thread_counts(4) == ([1, 2, 4, 8], [1, 2, 4, 8])
    # a TPU v5e host: the cores and twice them, not all 26 counts (224 s of probe there)
    assert child.thread_counts(13) == ([1, 2, 4, 8, 13, 16, 26], [1, 2, 4, 8, 16])
    assert KernelLimits(8, 1.5, None, {}).effective_cpus == 2
    assert KernelLimits(2, None, None, {}).effective_cpus == 2


def test_first_touch_sizes_stay_within_half_the_room_left():
    assert child.touch_sizes(1 << 30, 64 << 30) == [1 << 30, 8 << 30]
    assert child.touch_sizes(2 << 30, 64 << 30) == [2 << 30, child.LARGE_TOUCH_MAX]
    assert child.touch_sizes(1 << 30, 10 << 30) == [1 << 30, 5 << 30]
    assert child.touch_sizes(1 << 30, 3 << 30) == [1 << 30]  # no room for twice the file


def test_the_probe_writes_a_versioned_record_with_the_contract_keys(tmp_path):
    record = read_probe(_probe(tmp_path))
    data = json.loads((tmp_path / "probe.json").read_text())
    assert data["probe_version"] == PROBE_VERSION and all(k in data for k in CONTRACT)
    assert record.warm_copy[str(record.warm_copy_threads)] == record.warm_copy_bytes_per_s
    assert record.warm_copy_bytes_per_s == max(record.warm_copy.values())
    assert [int(n) for n in record.warm_copy] == child.thread_counts(record.effective_cpus)[0]
    if record.cold_read_method is not None:  # tmp_path on a disk: a cold figure
        assert record.cold_read_bytes_per_s == max(record.cold_read.values())
    assert record.host["cpu_count"] == os.cpu_count() and record.accelerator == "none"
    assert record.probe_file_bytes == 8 << 20
    # first touch at the probe file's size and at 8x it (the tests' machine has the room)
    assert sorted(record.first_touch, key=int) == [str(8 << 20), str(64 << 20)]
    assert record.first_touch[str(8 << 20)] == record.first_touch_bytes_per_s > 0
    assert not list(tmp_path.glob(".loadbench-probe-*"))  # the probe file is gone


def test_a_newer_probe_file_is_refused_naming_its_version(tmp_path):
    out = _probe(tmp_path, "--no-disk")
    data = json.loads(out.read_text())
    assert data["cold_read_bytes_per_s"] is None and data["disk_path"] is None
    data["probe_version"] = PROBE_VERSION + 1
    out.write_text(json.dumps(data))
    with pytest.raises(BenchError, match=f"probe_version {PROBE_VERSION + 1}"):
        read_probe(out)
    data["probe_version"] = PROBE_VERSION
    data["warm_copy_threads"] = "two"
    out.write_text(json.dumps(data))
    with pytest.raises(BenchError, match="'warm_copy_threads'"):
        read_probe(out)


@pytest.mark.parametrize("disk", ["/sys/kernel", "full"])
def test_an_unwritable_or_full_disk_fails_cleanly_leaving_no_file(tmp_path, capsys, disk):
    out = tmp_path / "probe.json"
    size = ["--size", "1000TiB"] if disk == "full" else []
    disk = str(tmp_path) if disk == "full" else disk
    assert main(["probe", *SMALL, *size, "--disk", disk, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("loadbench: error: cannot probe the disk at") and "\n" not in err
    assert not out.exists() and not list(Path(disk).glob(".loadbench-probe-*"))


def test_cpus_above_the_cpu_count_is_refused_in_one_line(capsys):
    assert main(["probe", "--quick", "--cpus", str(len(os.sched_getaffinity(0)) + 1)]) == 2
    err = capsys.readouterr().err.strip()
    assert "--cpus" in err and "\n" not in err


def test_a_cpu_cgroup_limits_the_child_to_one_cpu_and_is_removed():
    limit = CpuLimit(1).open()
    if limit.mechanism == cpulimit.NONE:
        pytest.skip(f"no cpu cgroup can be made here: {limit.note}")
    path = limit.path
    code = "from bench.machine import limits; print(limits.read().effective_cpus)"
    try:
        proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
        limit.attach(proc.pid)
        out, _ = proc.communicate(timeout=60)
        outcome = limit.outcome()
    finally:
        limit.close()
    assert outcome.enforced and outcome.cpus == 1, outcome
    assert out.strip() == "1"
    assert path is not None and not path.exists()


def test_the_probe_runs_inside_its_limits_and_reads_them_back(tmp_path):
    cap = 50_000_000
    record = read_probe(_probe(tmp_path, "--cpus", "1", "--disk-read-speed", "50MB/s"))
    if record.cpu_limit == cpulimit.NONE or record.disk_read_limit in (None, "none"):
        pytest.skip(f"no cpu or io cgroup here, or no block device: {record.notes}")
    assert record.cpu_limit_enforced and record.disk_read_limit_enforced
    assert record.effective_cpus == 1 and len(record.warm_copy) == 2  # 1..2x its one CPU
    assert cap in record.io_read_bytes_per_s.values()  # the cap, as the kernel reports it
    assert record.cold_read_bytes_per_s is not None
    # at the cap (a small file reads partly in the throttle's first slice), far below the disk
    assert 0.5 * cap < record.cold_read_bytes_per_s < 3 * cap


def test_a_probe_child_past_its_time_is_killed_and_named_in_one_line(tmp_path, capsys, monkeypatch):
    """A probe that outlives its time (a busy host) ends the command with one line, not a
    traceback, and leaves no record behind."""
    from bench.machine import run

    monkeypatch.setattr(run, "TIMEOUT_S", 0.01)
    out = tmp_path / "probe.json"
    assert main(["probe", *SMALL, "--disk", str(tmp_path), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "did not finish within 0 s (killed)" in err[0]
    assert not out.exists() and not list(tmp_path.glob(".loadbench-probe-*"))


def test_first_touch_times_the_probe_file_repeatedly_and_larger_sizes_once(monkeypatch):
    timed: list[tuple[int, int]] = []
    monkeypatch.setattr(bandwidth, "first_touch", lambda n, r: timed.append((n, r)) or 1.0)
    assert bandwidth.first_touch_by_size([1 << 20, 8 << 20], repeats=3) == {
        1 << 20: 1.0,
        8 << 20: 1.0,
    }
    assert timed == [(1 << 20, 3), (8 << 20, 1)]


def test_a_probe_kept_in_a_results_folder_is_the_one_bench_run_holds_rows_against(
    tmp_path, monkeypatch
):
    from bench.run import ceiling
    from bench.run.config import RunConfig

    monkeypatch.setenv("LOADBENCH_CACHE", str(tmp_path / "cache"))
    results = tmp_path / "results"
    size = ["--quick", "--size", "32MiB"]  # the smallest probe `bench run` takes (MIN_PROBE_BYTES)
    assert main(["probe", *size, "--results", str(results), "--out", str(tmp_path / "p.json")]) == 0
    kept = read_probe(tmp_path / "p.json")

    def no_second_probe(options):
        raise AssertionError("bench run probed again")

    monkeypatch.setattr(ceiling, "probe_host", no_second_probe)
    reused = ceiling.Ceiling(RunConfig(shapes=["gpt2"], out=results)).probe(ceiling.MIN_PROBE_BYTES)
    assert reused is not None and reused.probe_id == kept.probe_id
    # --results keeps a disk's figures: without a disk it is refused before anything is measured
    assert main(["probe", *SMALL, "--no-disk", "--results", str(results)]) == 2
