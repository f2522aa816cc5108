"""The History page: runs labelled by date and commit, not a cut run id; a change of
configuration drawn and listed as a boundary, never a step; a planted step ringed and listed;
the runs' table in units, without "None" cells."""

from __future__ import annotations

import json

from tests.unit.test_history import MiB, _run


def _page(app, folder):
    """The page over `folder`, run (the `app` fixture), with no exception."""
    at = app("views/history.py", folder=folder)
    assert not at.exception, [e.value for e in at.exception]
    return at


def _spec(at) -> str:
    chart = next(iter(at.get("vega_lite_chart")))
    return json.dumps(json.loads(chart.proto.spec), ensure_ascii=False) + "".join(
        d.data.data.decode("utf-8", "replace") for d in chart.proto.datasets
    )


def test_a_budget_change_is_a_labelled_boundary_and_runs_read_by_date_and_commit(app, tmp_path):
    _run(tmp_path, "r1", "2026-01-01T00:00:00Z", {"pipelined": 600 * MiB}, budget=256 * MiB)
    _run(tmp_path, "r2", "2026-01-02T00:00:00Z", {"pipelined": 600 * MiB}, budget=256 * MiB)
    _run(tmp_path, "r3", "2026-01-03T00:00:00Z", {"pipelined": 400 * MiB}, budget=32 * MiB)
    at = _page(app, tmp_path)
    drawn = _spec(at)
    assert "2026-01-03 00:00 · abc1234" in drawn  # the axis: date and commit
    assert "budget 256 MiB -> 32.0 MiB" in drawn  # the boundary, drawn where it happened
    changes = next(df.value for df in at.dataframe if "change" in df.value.columns)
    assert list(changes["run_id"]) == ["r3"]
    assert any("No steps" in c.value for c in at.caption)  # the lower peak is no step
    at.radio(key="history_metric").set_value("peak_over_baseline_bytes").run()
    assert not at.exception
    runs = next(df.value for df in at.dataframe if "run id" in df.value.columns)
    assert set(runs["peak over baseline"]) == {"600 MiB", "400 MiB"}
    assert "None" not in runs.to_string() and "nan" not in runs.to_string()


def test_a_planted_slowdown_is_ringed_at_its_run(app, tmp_path):
    for i, walls in enumerate([None, None, (1.3, 1.313, 1.287)], 1):
        day = f"2026-01-0{i}T00:00:00Z"
        _run(tmp_path, f"r{i}", day, {"pipelined": 600 * MiB}, walls=walls, speed=1.0)
    at = _page(app, tmp_path)
    steps = next(df.value for df in at.dataframe if "first run after" in df.value.columns)
    assert list(steps["first run after"]) == ["r3"] and steps["change"].iloc[0] == "+30%"
    assert "step +30%" in _spec(at)  # the ring's tooltip, on the run after the step
