"""`scripts/device_check_report.py`: the device check's table carries `x device ceiling` and
checks the default against its 1.3x target (issue 53, part 3), from the bench's own summary."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "device_check_report.py"
GIB = 1 << 30


def _report():
    spec = importlib.util.spec_from_file_location("device_check_report", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["device_check_report"] = module
    spec.loader.exec_module(module)
    return module


def _summary(strategy: str, wall_s: float, device_ceiling_ratio: float | None) -> dict:
    return {
        "shapes": "sa3",
        "model": "spec",
        "strategy": strategy,
        "kind": "peer" if strategy == "mmap-put" else "ours",
        "status": "ok",
        "ok_repeats": 2,
        "repeats": 2,
        "peak_rss_bytes": 14 * GIB,
        "baseline_rss_bytes": 14 * GIB - GIB // 4,
        "checkpoint_bytes": 2 * GIB,
        "device_peak_bytes": 2 * GIB,
        "throughput_bytes_per_s": 2e9,
        "wall_s": wall_s,
        "ceiling_ratio": 0.6,
        "device_ceiling_ratio": device_ceiling_ratio,
        "staging_memory": "mapped",
    }


def test_the_table_shows_the_device_ceiling_and_the_verdict_holds_it_to_1_3x():
    report = _report()
    ours, peer = _summary("pipelined", 1.14, 6.49), _summary("mmap-put", 1.03, 5.87)
    row = report._row(ours)
    assert row.endswith("| 0.60x | 6.49x | mapped |")
    lines = report._verdicts([ours, peer])
    assert "- sa3: pipelined 6.49x its device ceiling (> 1.3x;" in "\n".join(lines)
    near = _summary("pipelined", 0.2, 1.12)
    assert any("1.12x its device ceiling (<= 1.3x" in x for x in report._verdicts([near]))
    # a CPU host's rows have no device ceiling: a dash, and no verdict on it
    cpu = _summary("pipelined", 1.0, None)
    assert report._row(cpu).endswith("| 0.60x | - | mapped |")
    assert not any("device ceiling" in x for x in report._verdicts([cpu]))


def test_x_ceiling_is_the_one_every_surface_prints():
    """The paired ratio where the rows have one (as `bench run`'s table and the dashboard print
    it), else the probe's: on the TPU host this table said 0.16x where `bench run` said 0.75x
    for the same row (2026-12-06)."""
    report = _report()
    paired = {**_summary("pipelined", 1.88, 1.52), "ceiling_ratio": 0.16, "paired_ratio": 0.75}
    assert report._row(paired).endswith("| 0.75x | 1.52x | mapped |")
    probe_only = {**paired, "paired_ratio": None}
    assert report._row(probe_only).endswith("| 0.16x | 1.52x | mapped |")


def test_the_host_verdict_names_the_compilers_share_where_the_load_compiled():
    """llama3-8b on the TPU host: 0.67 GiB over baseline against 0.50, of which 0.20 GiB the
    compiler's first use (2026-12-07): the line says both, and says nothing where nothing was
    compiled or the probe did not measure it."""
    report = _report()
    compiled = {
        **_summary("pipelined", 1.79, 1.43),
        "peak_rss_bytes": 14 * GIB + int(0.67 * GIB),
        "baseline_rss_bytes": 14 * GIB,
        "device_programs": 6,
        "first_compile_host_bytes": int(0.20 * GIB),
    }
    line = next(x for x in report._verdicts([compiled]) if "host peak" in x)
    assert "0.67 GiB > budget + 0.25 GiB (0.50 GiB)" in line
    assert "about 0.20 GiB of it the compiler's first use in the process" in line
    assert "this load compiled 6 device programs" in line
    assert line.endswith("0.47 GiB without it")
    nothing_compiled = {**compiled, "device_programs": 0}
    not_measured = {**compiled, "first_compile_host_bytes": None}
    for quiet in (nothing_compiled, not_measured):
        line = next(x for x in report._verdicts([quiet]) if "host peak" in x)
        assert line.endswith("(0.50 GiB)")
