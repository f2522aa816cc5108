"""`loader.host`: the CPUs, the memory and the page cache this process may count on, read once for
the loader and the bench alike (a fake cgroup hierarchy under tmp_path; a real file for mincore)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from bench.limits import pagecache
from bench.machine import facts
from bench.machine import limits as kernel_limits
from loader import host
from loader.pipeline.sources import local


def test_the_cgroup_quota_caps_the_usable_cpus(tmp_path):
    """This process's cgroup and its parents (v2 `cpu.max`, v1 CFS quota): the tightest wins."""
    self_cgroup = tmp_path / "self"
    self_cgroup.write_text("0::/a/b\n")
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "cpu.max").write_text("max 100000\n")
    assert host.cpu_quota(tmp_path, self_cgroup) is None
    (tmp_path / "a" / "b" / "cpu.max").write_text("150000 100000\n")
    assert host.cpu_quota(tmp_path, self_cgroup) == 1.5
    (tmp_path / "a" / "cpu.max").write_text("50000 100000\n")  # a parent's tighter quota
    assert host.usable_cpus(tmp_path, self_cgroup) == 0.5
    v1 = tmp_path / "cpu,cpuacct" / "job"
    v1.mkdir(parents=True)
    (v1 / "cpu.cfs_quota_us").write_text("100000\n")
    (v1 / "cpu.cfs_period_us").write_text("100000\n")
    self_cgroup.write_text("4:cpu,cpuacct:/job\n")
    assert host.cpu_quota(tmp_path, self_cgroup) == 1.0
    assert host.cpu_quota(tmp_path, tmp_path / "absent") is None


def test_the_memory_available_is_the_tightest_of_the_host_and_its_memory_cgroups(tmp_path):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal: 100 kB\nMemAvailable:   8000 kB\n")
    root = tmp_path / "cgroup"
    v1 = root / "memory" / "job"
    v1.mkdir(parents=True)
    (v1 / "memory.limit_in_bytes").write_text(f"{6000 * 1024}\n")
    (v1 / "memory.usage_in_bytes").write_text(f"{2000 * 1024}\n")
    (v1 / "memory.stat").write_text(f"cache 5\ntotal_cache {1000 * 1024}\n")
    self_cgroup = tmp_path / "self"
    self_cgroup.write_text("4:memory:/job\n0::/\n")
    # the cgroup allows its limit less its usage, plus its page cache: 5000 KiB < 8000 KiB
    assert host.available_bytes(meminfo, root, self_cgroup) == 5000 * 1024
    (v1 / "memory.limit_in_bytes").write_text(f"{host.NO_LIMIT}\n")  # no limit: the host's
    assert host.available_bytes(meminfo, root, self_cgroup) == 8000 * 1024
    v2 = root / "slice"
    v2.mkdir()
    (v2 / "memory.max").write_text(f"{3000 * 1024}\n")
    (v2 / "memory.current").write_text(f"{3000 * 1024}\n")
    (v2 / "memory.stat").write_text(f"anon 1\nfile {500 * 1024}\n")
    self_cgroup.write_text("0::/slice\n")
    assert host.available_bytes(meminfo, root, self_cgroup) == 500 * 1024
    (v2 / "memory.max").write_text("max\n")
    assert host.available_bytes(meminfo, root, self_cgroup) == 8000 * 1024
    assert host.available_bytes(tmp_path / "none", root, tmp_path / "none") is None


def test_the_memory_limit_is_the_tightest_over_the_cgroups_and_their_parents(tmp_path):
    self_cgroup = tmp_path / "self"
    self_cgroup.write_text("0::/a/b\n")
    (tmp_path / "a" / "b").mkdir(parents=True)
    assert host.memory_limit(tmp_path, self_cgroup) is None
    (tmp_path / "a" / "b" / "memory.max").write_text("max\n")
    (tmp_path / "a" / "memory.max").write_text(f"{3 << 30}\n")  # a parent's limit counts
    assert host.memory_limit(tmp_path, self_cgroup) == 3 << 30
    v1 = tmp_path / "memory" / "job"
    v1.mkdir(parents=True)
    (v1 / "memory.limit_in_bytes").write_text(f"{host.NO_LIMIT}\n")  # v1's "no limit"
    self_cgroup.write_text("5:memory:/job\n")
    assert host.memory_limit(tmp_path, self_cgroup) is None
    (v1 / "memory.limit_in_bytes").write_text(f"{1 << 30}\n")
    assert host.memory_limit(tmp_path, self_cgroup) == 1 << 30


def test_a_hybrid_host_reads_its_v2_limits_under_unified(tmp_path):
    """Hybrid mode: v1 hierarchies in the root, the v2 one mounted at `unified/`."""
    self_cgroup = tmp_path / "self"
    self_cgroup.write_text("4:memory:/\n0::/job\n")
    (tmp_path / "memory").mkdir()
    (tmp_path / "unified" / "job").mkdir(parents=True)
    (tmp_path / "unified" / "job" / "cpu.max").write_text("25000 100000\n")
    assert host.cpu_quota(tmp_path, self_cgroup) == 0.25
    (tmp_path / "cgroup.controllers").write_text("cpu memory\n")  # unified mode: the root is v2
    assert host.cpu_quota(tmp_path, self_cgroup) is None


def test_the_usable_cpus_are_the_affinity_mask_without_a_quota(tmp_path):
    cpus = host.affinity_cpus()
    assert cpus == sorted(os.sched_getaffinity(0))
    assert host.usable_cpus(tmp_path, tmp_path / "absent") == float(len(cpus))


@pytest.fixture
def data_file(tmp_path):
    path = tmp_path / "data.bin"
    path.write_bytes(os.urandom((4 << 20) + 100))  # not a whole number of pages
    return path


def test_resident_pages_sees_a_file_read_and_one_evicted(data_file):
    fd = os.open(data_file, os.O_RDONLY)
    try:
        os.pread(fd, data_file.stat().st_size, 0)
        cached, pages = host.resident_pages(fd)
        assert pages == -(-data_file.stat().st_size // os.sysconf("SC_PAGE_SIZE"))
        assert cached == pages
        assert host.resident_pages(fd, 4096, 8192) == (2, 2)  # a part of the file
        assert host.cached_fraction([fd]) == 1.0
        os.fsync(fd)  # DONTNEED leaves dirty pages: the file was just written
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        left, _ = host.resident_pages(fd)
        if left > pages // 2:
            pytest.skip("this filesystem keeps the file cached when evicted")
        assert host.cached_fraction([fd]) < 0.5
    finally:
        os.close(fd)


def test_an_empty_file_has_no_pages_and_no_fraction(tmp_path):
    (tmp_path / "empty").write_bytes(b"")
    fd = os.open(tmp_path / "empty", os.O_RDONLY)
    try:
        assert host.resident_pages(fd) == (0, 0) and host.cached_fraction([fd]) is None
    finally:
        os.close(fd)


def test_the_loader_and_the_bench_read_the_host_alike(monkeypatch):
    """One reading of the host: the engine's reader count, the probe's limits, the run record's
    CPU limit and the bench's residency all change with `loader.host`."""
    monkeypatch.setattr(host, "cpu_quota", lambda *a: 0.5)
    monkeypatch.setattr(host, "memory_limit", lambda *a: 123 << 20)
    assert host.usable_cpus() == 0.5 and local.usable_cpus() == 0.5
    limits = kernel_limits.read()
    assert (limits.cpu_quota_cpus, limits.memory_max_bytes, limits.effective_cpus) == (
        0.5,
        123 << 20,
        1,
    )
    assert facts.cpu_limit() == 0.5
    monkeypatch.setattr(pagecache, "resident_pages", lambda fd: (3, 4))
    assert pagecache.resident_fraction([__file__]) == 0.75


def test_the_c_library_is_opened_without_a_subprocess():
    """Importing the modules that call the C library runs no `ldconfig`
    (`ctypes.util.find_library` does: tens of milliseconds of a load's start in a sandbox), and
    every function they need is found."""
    code = (
        "import sys\n"
        "spawned = []\n"
        "sys.addaudithook(lambda ev, args: ev == 'subprocess.Popen' and spawned.append(args))\n"
        "import loader.host, loader.format.buffers, bench.machine.allocator\n"
        "from bench.child import phase_probe\n"
        "assert spawned == [], spawned\n"
        "assert loader.host._LIBC is not None and loader.format.buffers._MADVISE is not None\n"
        "phase_probe.trim_heap()\n"
        "assert spawned == [], spawned\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
