"""The memory cgroup of `--host-ram`: enforced here, an over-limit child killed, no cgroup left."""

from __future__ import annotations

import subprocess
import sys

import pytest

from bench.limits import cgroups
from bench.limits import memory as memlimit
from bench.limits.memory import MemoryLimit

HOG = "b = bytearray({n}); b[::4096] = b'x' * len(b[::4096]); print('survived')"


def _cgroup_or_skip(limit_bytes: int) -> MemoryLimit:
    limit = MemoryLimit(limit_bytes, mechanisms=(memlimit.V2, memlimit.V1)).open()
    if limit.mechanism == memlimit.WATCHDOG:
        pytest.skip(f"no memory cgroup can be made here: {limit.note}")
    return limit


def _run(limit: MemoryLimit, nbytes: int) -> subprocess.CompletedProcess:
    proc = subprocess.Popen(
        limit.wrap([sys.executable, "-c", HOG.format(n=nbytes)]), stdout=subprocess.PIPE, text=True
    )
    limit.attach(proc.pid)
    out, _ = proc.communicate(timeout=60)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out)


def test_a_child_over_the_limit_is_killed_and_the_cgroup_removed():
    limit = _cgroup_or_skip(96 << 20)
    path = limit.path
    try:
        done = _run(limit, 400 << 20)
        outcome = limit.outcome()
    finally:
        limit.close()
    assert done.returncode == -9 and "survived" not in done.stdout
    assert outcome.enforced and outcome.limit_bytes == 96 << 20
    assert outcome.oom_kills and outcome.oom_kills >= 1
    assert not path.exists()


def test_a_child_under_the_limit_completes():
    limit = _cgroup_or_skip(256 << 20)
    try:
        done = _run(limit, 96 << 20)
        outcome = limit.outcome()
    finally:
        limit.close()
    assert done.returncode == 0 and "survived" in done.stdout
    assert outcome.oom_kills == 0 and outcome.cgroup_peak_bytes > 48 << 20


def test_no_mechanism_falls_back_to_the_watchdog_and_says_so():
    with MemoryLimit(1 << 30, mechanisms=()) as limit:
        assert limit.wrap(["x"]) == ["x"]
        limit.attach(12345)  # moves nothing
        outcome = limit.outcome()
    assert outcome.mechanism == "watchdog" and not outcome.enforced
    assert "watchdog" in outcome.note


def test_a_stale_cgroup_of_a_dead_bench_is_swept():
    limit = _cgroup_or_skip(64 << 20)
    parent = limit.path.parent
    stale = parent / f"{cgroups.PREFIX}999999999-deadbeef"  # no such PID
    try:
        stale.mkdir()
        limit.close()
        _cgroup_or_skip(64 << 20).close()
        assert not stale.exists()
    finally:
        if stale.exists():
            stale.rmdir()
