"""The read-speed limit of `--disk-read-speed`: set on the checkpoint's disk, read back, removed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.limits import disk_read as diskthrottle
from bench.limits.disk_read import ReadThrottle, disks_of, whole_disk


def _file_on_a_disk(tmp_path: Path) -> Path:
    """A file on a block device: tmp_path, else this repository's own tree."""
    for candidate in (tmp_path / "ckpt.bin", Path(__file__).resolve().parent / ".throttle-probe"):
        if whole_disk(os.stat(candidate.parent).st_dev) is not None:
            candidate.write_bytes(b"x" * 4096)
            return candidate
    pytest.skip("neither the temp folder nor the repository is on a block device here")


def _throttle_or_skip(speed: int, path: Path) -> ReadThrottle:
    throttle = ReadThrottle(speed, [path]).open()
    if throttle.mechanism == diskthrottle.NONE:
        pytest.skip(f"no io/blkio cgroup can be made here: {throttle.note}")
    return throttle


def test_the_cap_is_set_on_the_files_disk_read_back_and_removed(tmp_path):
    path = _file_on_a_disk(tmp_path)
    disk = whole_disk(os.stat(path).st_dev)
    try:
        throttle = _throttle_or_skip(50_000_000, path)
        cgroup = throttle.path
        proc = subprocess.Popen([sys.executable, "-c", f"open({str(path)!r}, 'rb').read()"])
        throttle.attach(proc.pid)
        assert proc.wait(timeout=60) == 0
        outcome = throttle.outcome()
        throttle.close()
    finally:
        path.unlink()
    assert outcome.enforced and outcome.bytes_per_s == 50_000_000, outcome
    assert outcome.devices == (disk,)
    assert not cgroup.exists()


def test_a_file_on_no_block_device_is_not_throttled_and_says_so(tmp_path):
    shm = Path("/dev/shm")
    if not shm.is_dir() or whole_disk(os.stat(shm).st_dev) is not None:
        pytest.skip("no tmpfs at /dev/shm here")
    path = shm / f"loadbench-test-{os.getpid()}"
    path.write_bytes(b"x")
    try:
        assert disks_of([path]) == ([], [str(path)])
        with ReadThrottle(1_000_000, [path]) as throttle:
            outcome = throttle.outcome()
    finally:
        path.unlink()
    assert outcome.mechanism == "none" and not outcome.enforced
    assert "no block device" in outcome.note and str(path) in outcome.note


def test_no_cgroup_mechanism_runs_at_full_speed_and_says_so(tmp_path):
    path = _file_on_a_disk(tmp_path)
    try:
        with ReadThrottle(1_000_000, [path], mechanisms=()) as throttle:
            throttle.attach(12345)  # moves nothing: there is no cgroup
            outcome = throttle.outcome()
    finally:
        path.unlink()
    assert not outcome.enforced and "ran at full speed" in outcome.note
