"""Adding a strategy is adding one file: the registry, `bench list`, tests and the dashboard see it.

A throwaway strategy module is written into a temporary package, put on PYTHONPATH and named in
`LOADBENCH_EXTRA_STRATEGIES` (the bench's way to add a strategy without editing loadbench). Its
description carries a random token, so nothing here can pass on a hard-coded answer.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from bench.cli import main
from bench.records.writer import ResultsWriter
from loader.vocabulary import REFERENCE, STRATEGY
from tests.records import run_record, total_row

ROOT = Path(__file__).resolve().parents[2]
APP = ROOT / "dashboard" / "app.py"
GiB = 1 << 30

STRATEGY_SOURCE = '''"""{description}"""

from loader.strategies.eager import load as _eager


def load(request):
    return _eager(request)
'''


@pytest.fixture
def throwaway(tmp_path, monkeypatch) -> tuple[str, str]:
    """(registered name, description) of a strategy file in a temp package, in this process's
    path and environment and in that of every subprocess."""
    token = uuid.uuid4().hex[:8]
    package = tmp_path / f"lbtmp_{token}"
    package.mkdir()
    (package / "__init__.py").write_text("")
    description = f"Throwaway strategy {token}: the eager load under another name."
    (package / "quick_load.py").write_text(STRATEGY_SOURCE.format(description=description))
    path = os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]).strip(os.pathsep)
    monkeypatch.setenv("PYTHONPATH", path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("LOADBENCH_EXTRA_STRATEGIES", f"{package.name}.quick_load")
    return "quick-load", description


def test_the_registry_lists_it(throwaway):
    from bench import strategies

    name, description = throwaway
    info = strategies.catalog()[name]
    assert (info.description, info.kind) == (description, STRATEGY)
    assert strategies.get(name).module.endswith(".quick_load")


def test_bench_list_prints_it(throwaway, capsys):
    name, description = throwaway
    assert main(["bench", "list"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith(name))
    assert description in line
    assert main(["bench", "list", "--json"]) == 0
    listed = {e["name"]: e for e in json.loads(capsys.readouterr().out)}
    assert listed[name]["description"] == description


def test_the_parametrised_strategy_tests_collect_it(throwaway):
    name, _ = throwaway
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "--collect-only",
        "-q",
        "-p",
        "no:cacheprovider",
        str(ROOT / "tests" / "unit" / "test_strategies.py"),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    ids = [line for line in proc.stdout.splitlines() if f"[{name}]" in line or f"[{name}-" in line]
    assert any("test_strategy_loads_bit_exactly" in i for i in ids), proc.stdout[-2000:]
    assert any("test_mismatched_checkpoint_is_reported" in i for i in ids)


def _results_with(folder: Path, name: str) -> None:
    """A results file with ok rows of the throwaway strategy, `eager` and a reference line."""
    run = run_record(
        run_id="20260101T000000Z-abcdef",
        machine="host",
        cpu_model="cpu",
        ram_bytes=24 * GiB,
        kernel="6.1",
        python="3.11",
    )
    rows = [
        (name, STRATEGY, 2.2, 1.5),
        ("eager", STRATEGY, 3.2, 1.0),
        ("bytes", REFERENCE, 1.0, 0.4),
    ]
    with ResultsWriter(folder / "host" / f"{run.run_id}.jsonl") as writer:
        writer.write(run)
        for strategy, kind, ratio, wall in rows:
            writer.write(
                total_row(
                    run_id=run.run_id,
                    result_id=strategy,
                    strategy=strategy,
                    kind=kind,
                    checkpoint_bytes=GiB,
                    largest_tensor_bytes=GiB // 8,
                    tensors=148,
                    baseline_rss_bytes=GiB,
                    peak_rss_bytes=int(GiB * (1 + ratio)),
                    wall_s=wall,
                )
            )


def test_the_dashboard_legend_shows_it(throwaway, tmp_path, monkeypatch):
    from streamlit.testing.v1 import AppTest

    name, description = throwaway
    _results_with(tmp_path / "results", name)
    monkeypatch.setenv("LOADBENCH_RESULTS", str(tmp_path / "results"))
    at = AppTest.from_file(str(APP), default_timeout=120).run()
    assert not at.exception, [e.value for e in at.exception]
    (chart,) = list(at.get("vega_lite_chart"))
    spec = json.loads(chart.proto.spec)
    points = next(layer for layer in spec["layer"] if "color" in layer.get("encoding", {}))
    legend = points["encoding"]["color"]["scale"]["domain"]
    assert legend == ["eager", name]  # points only: the reference is a labelled line, not a point
    assert description in "".join(str(d.data.data) for d in chart.proto.datasets)  # the tooltip
    table = at.table[0].value  # the Overview's static cost table, indexed by strategy
    rows = {str(i).lstrip("★ ").strip(): row for i, row in table.iterrows()}
    assert name in rows  # the new strategy has its row, ranked with the others
    assert "reference line" in str(rows["bytes"].iloc[-1])  # the REFERENCE kind says what it is
    rule = [layer for layer in spec["layer"] if layer.get("mark", {}).get("type") == "rule"]
    assert rule, "no reference rule drawn for the row of kind reference"
    assert "bytes (reads the bytes only)" in "".join(str(d.data.data) for d in chart.proto.datasets)
