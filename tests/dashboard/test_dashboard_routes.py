"""Every page keeps a local load and loads over s3 at concurrency 1 and 64 apart (`fixture_remote`):
never one median, one point, one series or one comparison; a remote strategy is named with its
route (`pipelined · s3 · 1Gbit · c64`) and shown against its link's ceiling."""

from __future__ import annotations

import json
import statistics

import pytest
from conftest import APP
from fixture_remote import CEILING_S, RemoteFixture, write_remote

from bench.cli import main

C1, C64 = "s3 · 1Gbit · c1", "s3 · 1Gbit · c64"


@pytest.fixture(scope="module")
def remote(tmp_path_factory: pytest.TempPathFactory) -> RemoteFixture:
    return write_remote(tmp_path_factory.mktemp("remote"))


@pytest.fixture
def page(remote, monkeypatch):
    """`page(script=None, **query)`: a run AppTest over the remote fixture, opened on `script`
    with `query` in its URL."""
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("LOADBENCH_RESULTS", str(remote.root))

    def make(script: str | None = None, **query: str):
        at = AppTest.from_file(str(APP), default_timeout=120)
        at.query_params.update(query)
        at.run()
        if script:
            at.switch_page(script).run()
        assert not at.exception, [e.value for e in at.exception]
        return at

    return make


def _median(remote: RemoteFixture, strategy: str, concurrency: int | None) -> float:
    return statistics.median(remote.walls[(strategy, concurrency)])


def _drawn(at) -> str:
    """Every chart's spec and data, as text (Arrow bytes keep their strings readable)."""
    charts = list(at.get("vega_lite_chart"))
    return "".join(
        json.dumps(json.loads(c.proto.spec), ensure_ascii=False)
        + b"".join(d.data.data for d in c.proto.datasets).decode("utf-8", "replace")
        for c in charts
    )


def test_the_results_keep_routes_apart(remote):
    from bench.analysis import compare, history
    from bench.records.results import read_results, summarize

    results = read_results(remote.root)
    summary = summarize(results.phases).set_index(["strategy", "route"])
    assert summary.loc[("pipelined", C1), "wall_s"] == pytest.approx(
        _median(remote, "pipelined", 1)
    )
    assert summary.loc[("pipelined", C64), "wall_s"] == pytest.approx(
        _median(remote, "pipelined", 64)
    )
    assert summary.loc[("pipelined", "local"), "wall_s"] == pytest.approx(
        _median(remote, "pipelined", None)
    )
    assert summary.loc[("pipelined", C64), "concurrency"] == 64
    assert (
        summary.loc[("pipelined", C64), "bytes_received"]
        > summary.loc[("pipelined", C64), "checkpoint_bytes"]
    )
    points = history.points(results)
    assert len(points[points["strategy"] == "pipelined"]) == 3  # local, c1, c64: three series
    phases = results.phases
    both = compare.compare(
        phases[phases["run_id"] == remote.run_ids["local"]],
        phases[phases["run_id"] == remote.run_ids["remote"]],
        0.05,
    )
    assert set(both["verdict"]) == {"missing", "only in new"}  # never local against remote


def test_the_overview_answers_one_route_at_a_time(page, remote):
    at = page()
    route = at.selectbox(key="overview_route")
    assert route.options == [C1, C64] and route.value == C1  # the newest run: remote
    assert at.query_params["route"] == [C1] or at.query_params["route"] == C1
    table = at.table[0].value
    wall = table.loc[table.index.str.endswith("pipelined"), "wall (median)"].iloc[0]
    assert wall == f"{_median(remote, 'pipelined', 1):.2f} s"
    assert "bytes received" in table.columns and "x ceiling" in table.columns
    assert any(f"over {C1}" in s.value for s in at.success)
    drawn = _drawn(at)
    assert f"ceiling {CEILING_S:.2f} s (the bytes over the 1Gbit link)" in drawn
    route.set_value(C64).run()
    table = at.table[0].value
    wall = table.loc[table.index.str.endswith("pipelined"), "wall (median)"].iloc[0]
    assert wall == f"{_median(remote, 'pipelined', 64):.2f} s"
    ratio = table.loc[table.index.str.endswith("pipelined"), "x ceiling"].iloc[0]
    assert ratio == f"{_median(remote, 'pipelined', 64) / CEILING_S:.2f}x"


def test_a_link_opens_the_route_it_was_copied_from(page):
    at = page(route=C64)
    assert at.selectbox(key="overview_route").value == C64
    assert any(f"over {C64}" in s.value for s in at.success)


def test_phases_are_one_route_named_with_it_and_against_the_link(page, remote):
    at = page("views/phases.py")
    at.selectbox(key="phases_run").set_value(remote.run_ids["remote"]).run()
    route = at.selectbox(key="phases_route")
    assert route.options == [C1, C64]
    route.set_value(C64).run()
    assert not at.exception
    numbers = next(df.value for df in at.dataframe if "adds_bytes" in df.value.columns)
    assert set(numbers["strategy"]) == {f"pipelined · {C64}", f"hostcast · {C64}"}
    link = next(df.value for df in at.dataframe if "wall ÷ ceiling" in df.value.columns)
    pipelined = link[link["strategy"] == f"pipelined · {C64}"].iloc[0]
    assert pipelined["wall ÷ ceiling"] == f"{_median(remote, 'pipelined', 64) / CEILING_S:.2f}x"
    assert pipelined["link ceiling"] == f"{CEILING_S:.2f} s"
    assert pipelined["bytes received"] != "-"
    assert f"pipelined · {C1}" not in _drawn(at)


def test_the_timeline_names_each_result_with_its_route(page, remote):
    at = page("views/timeline.py")
    at.selectbox(key="timeline_run").set_value(remote.run_ids["remote"]).run()
    options = at.multiselect(key="timeline_results").options
    assert f"pipelined · {C64} · gpt2 · r1 · ok" in options
    assert f"pipelined · {C1} · gpt2 · r1 · ok" in options
    widget = at.multiselect(key="timeline_results")
    (opened,) = [widget.options[i] for i in widget.indices]
    assert opened.startswith(f"pipelined · {C1} · gpt2 · r2")  # the first route's median repeat


def test_compare_never_holds_a_local_load_against_a_remote_one(page, remote):
    at = page("views/compare.py")
    assert at.selectbox(key="compare_new").value == remote.run_ids["remote"]
    at.selectbox(key="compare_base").set_value(remote.run_ids["local"]).run()
    assert not any("regressed" in e.value or "Failed" in e.value for e in at.error)
    assert any(f"pipelined · {C64}" in i.value for i in at.info)  # only in new, by its route


def test_history_draws_a_series_per_route(page):
    at = page("views/history.py")
    assert at.multiselect(key="history_routes").value == ["local", C1, C64]
    drawn = _drawn(at)
    for series in (
        "here · pipelined · local",
        f"here · pipelined · {C1}",
        f"here · pipelined · {C64}",
    ):
        assert series in drawn


def test_a_memray_capture_is_named_with_its_route(page):
    at = page("views/memray.py")
    labels = at.selectbox(key="memray_capture").options
    assert any(o.startswith(f"pipelined · {C64} · gpt2 · r1") for o in labels), labels


def test_the_report_has_a_section_per_route(remote, tmp_path):
    out = tmp_path / "report.html"
    assert (
        main(["report", str(remote.root), "--run", remote.run_ids["remote"], "--out", str(out)])
        == 0
    )
    text = out.read_text(encoding="utf-8")
    assert f"over {C1})" in text and f"over {C64})" in text
    assert f"{_median(remote, 'pipelined', 1):.2f} s" in text
    assert f"{_median(remote, 'pipelined', 64):.2f} s" in text
    pooled = statistics.median(remote.walls[("pipelined", 1)] + remote.walls[("pipelined", 64)])
    assert f"{pooled:.2f} s" not in text
    assert f"pipelined · {C64}" in text  # the phase charts and the timeline's panels


def test_one_strategy_over_two_routes_gets_two_shades_of_its_colour():
    from dashboard import style

    scale = style.strategy_scale([f"pipelined · {C1}", f"pipelined · {C64}", "eager"]).to_dict()
    colours = dict(zip(scale["domain"], scale["range"], strict=True))
    assert colours[f"pipelined · {C1}"] == style.strategy_color("pipelined")
    assert colours[f"pipelined · {C64}"] not in (colours[f"pipelined · {C1}"], colours["eager"])


def test_compare_holds_each_concurrency_against_its_own(page, remote, tmp_path, monkeypatch):
    """Two remote runs (the second 20% slower): a row per route, each with its link figures."""
    import shutil

    folder = tmp_path / "two-remote"
    shutil.copytree(remote.root, folder)
    first = folder / "here" / f"{remote.run_ids['remote']}.jsonl"
    later = "20260122T080000Z-5e3e3f"
    lines = []
    for line in first.read_text().splitlines():
        obj = json.loads(line)
        obj["run_id"] = later
        if obj["record"] == "run":
            obj["started_utc"] = "2026-01-22T08:00:00Z"
        elif obj["record"] == "phase":
            obj["result_id"] += "b"
            for key in ("wall_s", "phase_wall_s", "ceiling_ratio"):
                if isinstance(obj.get(key), float):
                    obj[key] *= 1.2
        lines.append(json.dumps(obj))
    (folder / "here" / f"{later}.jsonl").write_text("\n".join(lines) + "\n")
    monkeypatch.setenv("LOADBENCH_RESULTS", str(folder))
    at = page("views/compare.py")
    at.selectbox(key="compare_base").set_value(remote.run_ids["remote"]).run()
    table = at.dataframe[0].value.set_index("strategy")
    assert {f"pipelined · {C1}", f"pipelined · {C64}", f"hostcast · {C1}"} <= set(table.index)
    c64 = table.loc[f"pipelined · {C64}"]
    assert c64["time, new / base"].startswith("1.20x")
    base_ratio = _median(remote, "pipelined", 64) / CEILING_S
    assert c64["wall ÷ ceiling (base → new)"] == f"{base_ratio:.2f}x -> {base_ratio * 1.2:.2f}x"
