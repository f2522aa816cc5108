"""The bench's yardsticks on an accelerator host (issue 53, part 3), checked on the CPU: the
ceiling and the reference pass where `MADV_POPULATE_WRITE` is refused, `anon / file` where the
host cannot tell them apart, the device ceiling, and device memory against its limit and the
model."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import types
import uuid

import jax
import numpy as np
import pytest

from bench.analysis.summary import json_summary, tables
from bench.child import phase_probe
from bench.child.phase_probe import MemoryProbe, parse_status
from bench.commands.probe import format_probe
from bench.machine import accelerator, bandwidth, child
from bench.machine.child import ProbePlan
from bench.records.results import read_results
from bench.records.schema import to_json_line
from bench.records.wire import Backend, ChildResult, Measurement, PhaseMeasure
from bench.run import ceiling
from bench.run import reference as reference_module
from bench.run.children import ChildOutcome
from bench.run.config import RunConfig
from bench.run.reference import MomentReference
from bench.run.rows import DEVICE_SLACK, RowContext, device_memory_fields, result_records
from bench.vocabulary import COLD, WARM
from tests.unit.probe_records import GB, hand_probe

GIB, MIB = 1 << 30, 1 << 20


@pytest.fixture
def refused(monkeypatch):
    """A kernel that refuses `MADV_POPULATE_WRITE` (EINVAL), as gVisor does."""
    bandwidth.reset_prefault()
    monkeypatch.setattr(bandwidth, "populate_for_write", lambda array: False)
    yield
    bandwidth.reset_prefault()


def _file(tmp_path, nbytes: int = 8 * MIB):
    path = tmp_path / "probe.bin"
    bandwidth.write_probe_file(path, nbytes)
    return path


# -- the ceiling and the reference where populating is refused ---------------------------------


def test_a_refused_populate_touches_the_pages_and_the_copy_still_lands(tmp_path, refused):
    path = _file(tmp_path)
    assert bandwidth.copy_pass(path, 2) > 0
    assert bandwidth.prefault_method() == bandwidth.TOUCH
    assert "refused" in (bandwidth.prefault_note() or "")
    dest = np.zeros(3 * 4096 + 100, np.uint8)[5:]  # not page-aligned: every page still touched
    bandwidth.touch_pages(dest)


def test_populate_is_said_where_the_kernel_allows_it(tmp_path):
    bandwidth.reset_prefault()
    path = _file(tmp_path)
    bandwidth.copy_pass(path, 1)
    if bandwidth.populate_for_write(np.ones(4096, np.uint8)):  # this kernel populates
        assert bandwidth.prefault_method() == bandwidth.POPULATE
        assert bandwidth.prefault_note() is None


def test_the_probe_measures_by_touching_and_says_so(tmp_path, refused):
    plan = ProbePlan(disk=None, file_bytes=8 * MIB, repeats=1, accelerator_bytes=MIB)
    out = child.measure(plan)
    assert out["prefault"] == "touch"
    assert out["warm_copy_bytes_per_s"] > 0 and out["first_touch_bytes_per_s"] > 0
    assert out["warm_read_reused_bytes_per_s"] > 0 and out["warm_read_reused"]
    assert any("MADV_POPULATE_WRITE" in n for n in out["notes"])


def test_a_probe_that_touched_gives_rows_a_ceiling_and_the_run_says_touch(
    tmp_path, monkeypatch, capsys
):
    record = hand_probe(prefault="touch")
    monkeypatch.setattr(ceiling, "checkpoints_dir", lambda: tmp_path / "checkpoints")
    monkeypatch.setattr(ceiling, "probe_host", lambda options: record)
    config = RunConfig(shapes=["gpt2"], out=tmp_path / "results", reprobe=True)
    fields = ceiling.Ceiling(config).fields(2 * 10**9, WARM)
    assert fields["ceiling_s"] == pytest.approx(0.5)  # 2 GB at the warm copy's 4 GB/s
    assert "prefault: touch" in capsys.readouterr().err


def test_the_reference_pass_touches_where_populate_is_refused(tmp_path, refused, capsys):
    reference = MomentReference(tmp_path / "reference", threads=2)
    before = reference.before(16 * MIB, WARM)
    assert before is not None, reference.failed
    reading = reference.after(before, 16 * MIB, WARM)
    assert reading is not None
    fields = reading.fields(32 * MIB)
    assert fields["reference_s"] > 0 and fields["reference_prefault"] == "touch"
    assert "touched one byte per page" in capsys.readouterr().err


def test_a_load_onto_a_device_is_paired_with_a_read_into_reused_buffers(tmp_path, monkeypatch):
    reused = []
    real = reference_module.reused_read_pass
    monkeypatch.setattr(
        reference_module,
        "reused_read_pass",
        lambda path, threads, **kw: reused.append(threads) or real(path, threads, **kw),
    )
    reference = MomentReference(tmp_path / "reference", threads=2)
    before = reference.before(16 * MIB, WARM, onto_device=True)
    assert before is not None, reference.failed
    reading = reference.after(before, 16 * MIB, WARM)
    assert reading is not None
    fields = reading.fields(32 * MIB)
    assert fields["reference_pass"] == "reused" and fields["reference_prefault"] is None
    assert reused == [1, 2, 1, 2]  # one thread, then every thread, before and after
    # a cold child's passes read the disk into fresh memory, wherever it loads
    cold = reference.before(16 * MIB, COLD, onto_device=True)
    assert cold is not None and cold.kind == "fresh" and len(reused) == 4


def test_the_runner_pairs_device_loads_only_where_the_probe_saw_an_accelerator(
    tmp_path, monkeypatch
):
    checked = ceiling.Ceiling(RunConfig(shapes=["gpt2"], out=tmp_path))
    assert not checked.onto_device  # no probe yet
    checked.record = hand_probe()
    assert not checked.onto_device  # a CPU host's probe
    checked.record = dataclasses.replace(hand_probe(), accelerator="tpu")
    monkeypatch.delenv("JAX_PLATFORMS", raising=False)
    assert checked.onto_device
    monkeypatch.setenv("JAX_PLATFORMS", "cpu")  # the run keeps jax on the CPU
    assert not checked.onto_device


# -- anon / file where the host cannot tell ----------------------------------------------------

GVISOR_STATUS = b"Name:\tpython\nVmHWM:\t  204800 kB\nVmRSS:\t  102400 kB\nThreads:\t4\n"
LINUX_STATUS = GVISOR_STATUS + b"RssAnon:\t   81920 kB\nRssFile:\t   20000 kB\nRssShmem:\t 480 kB\n"


def test_status_without_the_split_reads_as_unknown_not_zero():
    gvisor = parse_status(GVISOR_STATUS)
    assert gvisor == {"rss": 100 * MIB, "hwm": 200 * MIB, "anon": None, "file": None}
    linux = parse_status(LINUX_STATUS)
    assert linux["anon"] == 80 * MIB and linux["file"] == (20000 + 480) * 1024


def test_a_probe_on_such_a_host_records_no_anon_or_file(monkeypatch):
    monkeypatch.setattr(phase_probe, "read_status", lambda: parse_status(GVISOR_STATUS))
    probe = MemoryProbe(use_hwm=False, device_memory=lambda: None)
    with probe.measure(), probe.phase("read"):
        pass
    result = probe.result()
    for phase in (result.total, *result.phases):
        assert phase.peak_anon_rss_bytes is None and phase.peak_file_rss_bytes is None
        assert phase.anon_rss_bytes is None and phase.file_rss_bytes is None
    assert all(s.rss_anon_bytes == 0 for s in result.samples)  # the timeline: no split


# -- rows: the device ceiling and device memory -------------------------------------------------


def _ctx(strategy: str = "pipelined", **fields) -> RowContext:
    from bench import strategies
    from bench.limits.pagecache import CacheOutcome
    from bench.limits.situation import Situation
    from bench.run.matrix import Checkpoint, Task

    checkpoint = Checkpoint("gpt2", None, 0, "/c/model.safetensors", 2 * GIB, GIB, 3)
    task = Task(checkpoint, strategies.catalog()[strategy], repeat=0, processes=1, devices=1)
    ctx = RowContext("run", uuid.uuid4().hex, task, Situation(CacheOutcome("warm")))
    return dataclasses.replace(ctx, **fields)


def _outcome(
    platform: str,
    peak: int | None,
    *,
    anon: int | None = 0,
    budget: int | None = 256 * MIB,
    wall: float = 2.0,
) -> ChildOutcome:
    total = PhaseMeasure("total", 1, wall, 3 * GIB, 2 * GIB, anon, anon)
    total = dataclasses.replace(total, peak_anon_rss_bytes=anon, peak_file_rss_bytes=anon)
    device = {} if peak is None else {"TPU_0": peak}
    total = dataclasses.replace(total, device_peak_bytes_by_device=device)
    m = Measurement(GIB, "hwm", total, (dataclasses.replace(total, name="read", order=0),))
    m = dataclasses.replace(
        m,
        budget_bytes=budget,
        device_bytes_limit_by_device={"TPU_0": 16 * GIB} if device else {},
        device_model_bytes_by_device={"TPU_0": 2 * GIB} if device else {},
    )
    return ChildOutcome(
        "ok", None, ChildResult("ok", backend=Backend(platform=platform), measurement=m)
    )


def _total(ctx: RowContext, outcome: ChildOutcome):
    rows = [r for r in result_records(ctx, [outcome]) if hasattr(r, "phase")]
    return rows[-1]


def test_the_device_ceiling_is_the_slower_of_the_read_and_the_transfer():
    tpu = hand_probe(
        accelerator="tpu",
        h2d_best_bytes_per_s=10 * GB,
        warm_read_reused_bytes_per_s=40 * GB,
    )
    warm = ceiling.device_ceiling_fields(tpu, 20 * 10**9, WARM, None)
    assert warm["device_transfer_s"] == pytest.approx(2.0)  # 20 GB at 10 GB/s
    assert warm["device_read_s"] == pytest.approx(0.5)  # 20 GB at 40 GB/s into reused buffers
    assert warm["device_ceiling_s"] == pytest.approx(2.0)
    cold = ceiling.device_ceiling_fields(tpu, 20 * 10**9, COLD, None)
    assert cold["device_ceiling_s"] == pytest.approx(20.0)  # the disk's 1 GB/s is the limit
    half = ceiling.device_ceiling_fields(tpu, 20 * 10**9, WARM, None, resident=0.5)
    assert half["device_ceiling_s"] == pytest.approx(10.0)  # 10 GB uncached at 1 GB/s
    older = hand_probe(accelerator="tpu", h2d_best_bytes_per_s=1 * GB)  # no reused-buffer read
    assert ceiling.device_ceiling_fields(older, 8 * 10**9, WARM, None)["device_read_s"] == 2.0
    assert ceiling.device_ceiling_fields(hand_probe(), 8 * 10**9, WARM, None) == {}


def test_rows_on_an_accelerator_get_x_device_ceiling_and_cpu_rows_none():
    ctx = _ctx(device_ceiling_s=0.5, device_read_s=0.25, device_transfer_s=0.5)
    on_tpu = _total(ctx, _outcome("tpu", 2 * GIB + 10 * MIB, wall=2.0))
    assert on_tpu.device_ceiling_ratio == pytest.approx(4.0)
    on_cpu = _total(ctx, _outcome("cpu", None, wall=2.0))
    assert on_cpu.device_ceiling_ratio is None and on_cpu.device_ceiling_s is None


def test_headroom_and_the_over_budget_flag():
    fields = device_memory_fields(
        {"TPU_0": 15 * GIB}, {"TPU_0": 16 * GIB}, {"TPU_0": 14 * GIB}, 256 * MIB
    )
    assert fields["device_headroom_bytes"] == GIB
    assert fields["device_bytes_limit"] == 16 * GIB and fields["device_model_bytes"] == 14 * GIB
    assert fields["device_over_model_bytes"] == GIB
    assert fields["device_over_budget"] is True
    bound = 256 * MIB + int(DEVICE_SLACK * 14 * GIB)
    within = device_memory_fields(
        {"TPU_0": 14 * GIB + bound}, {"TPU_0": 16 * GIB}, {"TPU_0": 14 * GIB}, 256 * MIB
    )
    assert within["device_over_budget"] is False
    over = device_memory_fields(
        {"TPU_0": 14 * GIB + bound + 1}, {"TPU_0": 16 * GIB}, {"TPU_0": 14 * GIB}, 256 * MIB
    )
    assert over["device_over_budget"] is True
    no_budget = device_memory_fields({"d": 3 * GIB}, {"d": 16 * GIB}, {"d": 2 * GIB}, None)
    assert no_budget["device_over_budget"] is True  # a strategy without a budget: 0
    two = device_memory_fields(
        {"a": 5 * GIB, "b": 9 * GIB},
        {"a": 16 * GIB, "b": 10 * GIB},
        {"a": 4 * GIB, "b": 4 * GIB},
        0,
    )
    assert two["device_headroom_bytes"] == GIB and two["device_over_model_bytes"] == 5 * GIB
    assert device_memory_fields({}, {}, {}, None) == dict.fromkeys(fields)  # the CPU: unknown


def test_the_summary_shows_na_headroom_the_flag_and_x_device_ceiling(tmp_path):
    ctx = _ctx(device_ceiling_s=0.5, device_read_s=0.25, device_transfer_s=0.5)
    lines = []
    for strategy, peak, budget in (
        ("pipelined", 2 * GIB + 64 * MIB, 256 * MIB),
        ("eager", 4 * GIB, None),
    ):
        outcome = _outcome("tpu", peak, anon=None, budget=budget)
        records = result_records(dataclasses.replace(ctx, task=_ctx(strategy).task), [outcome])
        lines += [to_json_line(r) for r in records if hasattr(r, "phase")]
    path = tmp_path / "run.jsonl"
    path.write_text("\n".join(lines) + "\n")
    text = tables(read_results(path))
    assert "x device ceiling" in text and "4.00x" in text
    assert "n/a" in text and "0.00 / 0.00" not in text
    assert "device free" in text and "12.0 GiB" in text  # 16 GiB - eager's 4 GiB peak
    rows = [line for line in text.splitlines() if line.startswith(("  pipelined", "  eager"))]
    assert [("+over" in r) for r in rows] == [("eager" in r) for r in rows]
    assert "eager: device peak 4.00 GiB is 2.00 GiB above" in text
    by = {r["strategy"]: r for r in json_summary(read_results(path))}
    assert by["eager"]["device_over_budget"] is True
    assert by["pipelined"]["device_over_budget"] is False
    assert by["pipelined"]["device_headroom_bytes"] == 16 * GIB - (2 * GIB + 64 * MIB)
    assert by["pipelined"]["peak_anon_rss_bytes"] is None
    assert by["pipelined"]["device_ceiling_ratio"] == pytest.approx(4.0)


def test_on_the_cpu_backend_no_device_columns_and_anon_file_as_measured(tmp_path):
    ctx = _ctx()
    records = result_records(ctx, [_outcome("cpu", None, anon=GIB)])
    path = tmp_path / "run.jsonl"
    path.write_text("\n".join(to_json_line(r) for r in records if hasattr(r, "phase")) + "\n")
    text = tables(read_results(path))
    lines = text.splitlines()
    header, row = lines[2], lines[4]
    assert "x device ceiling" not in header and "device free" not in header
    assert "1.00 / 1.00 GiB" in row and "n/a" not in row


# -- the probe's host -> device figures ----------------------------------------------------------


def test_piece_rates_cover_every_piece_size_and_mode_on_the_cpu_backend():
    device = jax.devices()[0]
    rates = accelerator.piece_rates(jax, device, 2 * MIB, 1, pieces=(256 << 10, MIB))
    assert set(rates) == {"1", "4", "list"}
    assert all(set(by) == {str(256 << 10), str(MIB)} for by in rates.values())
    assert all(v > 0 for by in rates.values() for v in by.values())
    best, piece, mode = accelerator.best_rate(rates)
    assert best == max(v for by in rates.values() for v in by.values())
    assert rates[mode][str(piece)] == best
    assert accelerator.best_rate({}) == (None, None, None)


def test_a_pinned_route_that_jax_refuses_is_a_reason_not_a_crash():
    class Sharding:
        def __init__(self, device, memory_kind="device"):
            self.memory_kind = memory_kind

    class Array:
        def __init__(self, kind):
            self.kind = kind

        def block_until_ready(self):
            return self

    def device_put(x, where):
        kind = getattr(where, "memory_kind", "device")
        if isinstance(x, Array) and x.kind == "pinned_host" and kind != "pinned_host":
            raise ValueError(
                "Memory kind mismatch: memory kind 'device' and a buffer with memory_kind "
                "'pinned_host'"
            )
        return Array(kind)

    fake = types.SimpleNamespace(
        device_put=device_put, sharding=types.SimpleNamespace(SingleDeviceSharding=Sharding)
    )
    fill, rate, route, reason = accelerator.pinned_route(fake, object(), np.ones(1024, np.uint8), 1)
    assert fill is not None and fill > 0 and rate is None and route is None
    assert reason is not None and "Memory kind mismatch" in reason
    assert reason.count("Memory kind mismatch") == 3  # every way tried, each named


def test_a_reused_read_is_timed_at_its_faster_pass_where_threads_cost_more_than_they_bring():
    """The TPU host's figures: 128 MiB in 13 ms on one thread, 31-37 ms on 13 (thread starts)."""
    pass_bytes = 128 * MIB
    before = reference_module.Pass(0.013, 0.01, 0.037, 0.05, kind="reused")
    after = reference_module.Pass(0.013, 0.01, 0.031, 0.05, kind="reused")
    reused = reference_module.Reading(before, after, pass_bytes, 13, WARM)
    assert reused.seconds_for(pass_bytes) == pytest.approx(0.013)
    fresh = reference_module.Reading(
        dataclasses.replace(before, kind="fresh"),
        dataclasses.replace(after, kind="fresh"),
        pass_bytes,
        13,
        WARM,
    )
    assert fresh.seconds_for(pass_bytes) == pytest.approx(2 / (1 / 0.037 + 1 / 0.031))


# -- the compiler's first use --------------------------------------------------------------------


def test_the_first_compile_in_a_process_is_timed_with_the_host_memory_it_keeps():
    """In a fresh process (nothing compiled before): the first program takes time and grows the
    resident memory; a second one, compiled after it, grows it by less (the first use is paid
    once a process, which is what a row's host peak carries)."""
    code = (
        "import json, jax\n"
        "from bench.machine import accelerator\n"
        "print(json.dumps([accelerator.first_compile(jax), accelerator.first_compile(jax)]))\n"
    )
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    (first_s, first_bytes), (_, second_bytes) = json.loads(done.stdout.splitlines()[-1])
    assert first_s > 0 and first_bytes > 0
    assert second_bytes < first_bytes


def test_the_probe_prints_the_compilers_first_use():
    tpu = hand_probe(
        accelerator="tpu",
        device_count=1,
        device_kind="TPU v5 lite",
        h2d={"1": {str(64 * MIB): 12 * GB}},
        h2d_best_bytes_per_s=12 * GB,
        h2d_best_piece_bytes=64 * MIB,
        h2d_best_in_flight="1",
        first_compile_s=0.53,
        first_compile_host_bytes=207 * MIB,
    )
    text = format_probe(tpu)
    assert "compiler     first program 0.53 s, host +207 MiB (once a process, kept)" in text
    assert "compiler" not in format_probe(hand_probe())  # a CPU-only host: no such line


def test_a_row_that_compiled_device_programs_says_its_host_peak_holds_the_compiler(tmp_path):
    """The probe's first-compile bytes reach the rows of a run onto an accelerator (never a
    CPU row), and the summary names the strategies whose loads compiled device programs."""
    tpu = hand_probe(accelerator="tpu", first_compile_host_bytes=207 * MIB)
    assert ceiling.first_compile_fields(tpu) == {"first_compile_host_bytes": 207 * MIB}
    assert ceiling.first_compile_fields(hand_probe()) == {}  # a CPU-only host
    ctx = _ctx(**ceiling.first_compile_fields(tpu))
    lines = []
    for strategy, programs in (("pipelined", 6), ("eager", None)):
        outcome = _outcome("tpu", 2 * GIB, anon=None)
        assert outcome.result is not None and outcome.result.measurement is not None
        measured = dataclasses.replace(outcome.result.measurement, device_programs=programs)
        outcome = ChildOutcome(
            "ok", None, dataclasses.replace(outcome.result, measurement=measured)
        )
        records = result_records(dataclasses.replace(ctx, task=_ctx(strategy).task), [outcome])
        lines += [to_json_line(r) for r in records if hasattr(r, "phase")]
    path = tmp_path / "run.jsonl"
    path.write_text("\n".join(lines) + "\n")
    text = tables(read_results(path))
    assert (
        "pipelined: compiled 6 device programs; its host peak holds the compiler's first use in "
        "the process, 0.202 GiB on this machine (the probe's first program)" in text
    )
    assert "eager: compiled" not in text
    on_cpu = result_records(ctx, [_outcome("cpu", None, anon=GIB)])
    assert all(getattr(r, "first_compile_host_bytes", None) is None for r in on_cpu)
