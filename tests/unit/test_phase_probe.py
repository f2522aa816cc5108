"""The phase probe against allocations of known size: the kernel high-water mark and the sampler."""

from __future__ import annotations

import time

import numpy as np
import pytest

from bench.child.phase_probe import MemoryProbe, hwm_reset_works, read_status

MiB = 1 << 20
SIZE = 256 * MiB


def _touch(nbytes: int) -> np.ndarray:
    buf = np.empty(nbytes, dtype=np.uint8)
    buf[::4096] = 1  # fault every page in
    return buf


def _measure(probe: MemoryProbe):
    with probe.measure():
        with probe.phase("read"):
            buf = _touch(SIZE)
            time.sleep(0.05)  # let the sampler see it (the sampled fallback needs a sample)
            del buf
        with probe.phase("cast"):
            time.sleep(0.05)
    return probe.result()


def test_read_status_counts_anon_and_file():
    now = read_status()
    assert now["rss"] > 0 and now["hwm"] >= now["rss"]
    assert now["anon"] + now["file"] == pytest.approx(now["rss"], rel=0.05)


@pytest.mark.skipif(not hwm_reset_works(), reason="the kernel refuses to reset VmHWM here")
def test_hwm_peak_of_known_allocation_belongs_to_its_phase():
    res = _measure(MemoryProbe(use_hwm=True))
    assert res.peak_source == "hwm"
    read, cast = res.phases
    assert (read.name, read.order, cast.name, cast.order) == ("read", 0, "cast", 1)
    assert read.peak_rss_bytes - res.baseline_rss_bytes == pytest.approx(SIZE, rel=0.03)
    assert cast.peak_rss_bytes - res.baseline_rss_bytes < 0.03 * SIZE  # freed before `cast`
    assert res.total.peak_rss_bytes == read.peak_rss_bytes
    assert res.total.wall_s >= read.wall_s + cast.wall_s
    assert read.end_rss_bytes - res.baseline_rss_bytes < 0.03 * SIZE


def test_sampled_fallback_sees_a_held_allocation():
    res = _measure(MemoryProbe(use_hwm=False))
    assert res.peak_source == "sampled"
    read, cast = res.phases
    assert read.peak_rss_bytes - res.baseline_rss_bytes == pytest.approx(SIZE, rel=0.03)
    assert cast.peak_rss_bytes - res.baseline_rss_bytes < 0.03 * SIZE


def test_peak_between_phases_counts_in_total_only():
    probe = MemoryProbe()
    with probe.measure():
        with probe.phase("build"):
            pass
        buf = _touch(64 * MiB)  # in no phase
        del buf
        with probe.phase("read"):
            pass
    res = probe.result()
    assert res.total.peak_rss_bytes - res.baseline_rss_bytes >= 60 * MiB
    assert all(p.peak_rss_bytes - res.baseline_rss_bytes < 8 * MiB for p in res.phases)


def test_timeline_is_tagged_bounded_and_substeps_add_up():
    probe = MemoryProbe(interval_s=0.001, max_samples=50)
    with probe.measure():
        with probe.phase("stream"):
            for _ in range(3):
                probe.add_time("read", 0.5)
            probe.add_time("cast", 0.25)
            time.sleep(0.3)
    res = probe.result()
    assert res.phases[0].substeps_s == {"read": 1.5, "cast": 0.25}
    assert 10 <= len(res.samples) <= 50
    assert {s.phase for s in res.samples} <= {"stream", ""}
    assert any(s.phase == "stream" for s in res.samples)
    ts = [s.t_s for s in res.samples]
    assert ts == sorted(ts)
    assert all(s.rss_anon_bytes > 0 for s in res.samples)


def test_a_repeated_phase_is_merged():
    probe = MemoryProbe()
    with probe.measure():
        for _ in range(2):
            with probe.phase("read"):
                time.sleep(0.02)
    (read,) = probe.result().phases
    assert read.wall_s >= 0.04


def test_peak_source_env_forces_the_sampler(monkeypatch):
    from bench.child.phase_probe import PEAK_SOURCE_ENV, MemoryProbe

    monkeypatch.setenv(PEAK_SOURCE_ENV, "sampled")
    assert MemoryProbe().peak_source == "sampled"
    monkeypatch.delenv(PEAK_SOURCE_ENV)
    assert MemoryProbe(use_hwm=True).peak_source == "hwm"


def test_device_memory_is_recorded_per_phase_from_the_provider():
    from bench.child.phase_probe import MemoryProbe

    state = {"in_use": 100, "peak": 100}

    def fake():  # a GPU allocator: in use now, and its (never reset) peak
        return state["in_use"], state["peak"]

    probe = MemoryProbe(use_hwm=False, device_memory=fake)
    with probe.measure():
        with probe.phase("read"):
            state.update(in_use=600, peak=900)
        with probe.phase("transfer"):
            state.update(in_use=400, peak=900)
    res = probe.result()
    read, transfer = res.phases
    assert (read.device_bytes_in_use, read.device_peak_bytes_in_use) == (600, 900)
    assert (transfer.device_bytes_in_use, transfer.device_peak_bytes_in_use) == (400, 900)
    assert res.total.device_peak_bytes_in_use == 900


def test_device_memory_is_none_on_the_cpu_backend():
    import jax  # noqa: F401 - the provider reads jax only once it is imported

    from bench.child.device_memory import jax_device_memory
    from bench.child.phase_probe import MemoryProbe

    assert jax_device_memory() is None  # the CPU backend's memory_stats() is None
    probe = MemoryProbe(use_hwm=False)
    with probe.measure(), probe.phase("read"):
        pass
    assert probe.result().phases[0].device_bytes_in_use is None


def test_phases_record_their_real_start_and_end_times_overlaps_included():
    import threading
    import time

    probe = MemoryProbe(use_hwm=False)
    with probe.measure():
        with probe.phase("stream"):
            time.sleep(0.05)
            builder = threading.Thread(target=lambda: _timed(probe, "build", 0.1))
            builder.start()  # the build runs while the stream goes on, as pipelined's does
            time.sleep(0.2)
            builder.join()
    res = probe.result()
    stream, build = res.phases
    assert stream.start_s < build.start_s < build.end_s < stream.end_s  # build inside stream
    assert build.start_s == pytest.approx(stream.start_s + 0.05, abs=0.03)
    assert build.end_s - build.start_s == pytest.approx(build.wall_s, abs=1e-6)
    assert stream.end_s <= res.total.wall_s and "build" in stream.overlaps


def _timed(probe: MemoryProbe, name: str, seconds: float) -> None:
    import time

    with probe.phase(name):
        time.sleep(seconds)


def test_a_phase_that_starves_the_sampler_still_has_its_edges_on_the_timeline():
    """One long call that holds the GIL (eager's whole-file read) leaves the sampler thread no
    turn; the phase's entry and exit are points of the timeline anyway."""
    import sys
    import time

    probe = MemoryProbe(interval_s=0.01)
    old = sys.getswitchinterval()
    with probe.measure():
        sys.setswitchinterval(10.0)  # no thread switch inside the busy loop below
        try:
            with probe.phase("read"):
                end = time.perf_counter() + 0.3
                while time.perf_counter() < end:
                    pass
        finally:
            sys.setswitchinterval(old)
    res = probe.result()
    (read,) = res.phases
    at = [s.t_s for s in res.samples if s.phase == "read"]
    # within 10 ms of 300: a starved sampler's own points would be far from both edges (a loaded
    # 2-core machine put the exit point 1.4 ms after the phase's recorded end)
    assert at and min(at) == pytest.approx(read.start_s, abs=1e-2)
    assert max(at) == pytest.approx(read.end_s, abs=1e-2)
    assert [s.t_s for s in res.samples] == sorted(s.t_s for s in res.samples)
