"""One answer drawn the same everywhere (issue 36), without a browser: the table's order and
reasons, the chart's lines and caption, colours that tell strategies and phases apart, timelines
that read true, and the report built as one straight line."""

from __future__ import annotations

import itertools
import json
import re

import pandas as pd
import pytest

from bench.records.results import read_results, summarize
from dashboard import answer, charts, scatter, sections, style
from dashboard.frames import group_traces

GIB = 1 << 30


def _lab(hex_color: str) -> tuple[float, float, float]:
    """sRGB -> CIELAB (D65)."""
    r, g, b = (int(hex_color[i : i + 2], 16) / 255 for i in (1, 3, 5))

    def linear(c: float) -> float:
        return ((c + 0.055) / 1.055) ** 2.4 if c > 0.04045 else c / 12.92

    r, g, b = linear(r), linear(g), linear(b)
    x = (r * 0.4124 + g * 0.3576 + b * 0.1805) / 0.95047
    y = r * 0.2126 + g * 0.7152 + b * 0.0722
    z = (r * 0.0193 + g * 0.1192 + b * 0.9505) / 1.08883

    def f(t: float) -> float:
        return t ** (1 / 3) if t > 0.008856 else 7.787 * t + 16 / 116

    return 116 * f(y) - 16, 500 * (f(x) - f(y)), 200 * (f(y) - f(z))


def _closest(colors: list[str]) -> float:
    """The smallest CIE76 distance between two of `colors`."""
    labs = [_lab(c) for c in colors]
    return min(
        sum((p - q) ** 2 for p, q in zip(a, b, strict=True)) ** 0.5
        for a, b in itertools.combinations(labs, 2)
    )


def test_every_registered_strategy_has_a_colour_of_its_own():
    from bench import strategies

    names = [n for n, e in strategies.catalog().items() if e.kind != "reference"]
    colors = [style.strategy_color(n) for n in names]
    assert len(set(colors)) == len(names) >= 12
    assert _closest(colors) >= 25  # hostcast/sharded and orbax/sharded-dir were ~14 apart


def test_phases_have_colours_that_differ():
    assert _closest(list(style.PHASE_COLORS.values())) >= 15  # build and cast were 7 apart
    assert not set(style.PHASE_COLORS.values()) & set(style.STRATEGY_PALETTE)


def test_the_caption_names_each_line_as_it_is_drawn():
    text = scatter.caption(host=True, ceiling=True, log=True)
    for line in scatter.LINE_STYLES.values():
        assert line.words in text
        dotted = bool(line.dash) and max(line.dash[::2]) <= 2
        dashed = bool(line.dash) and not dotted
        assert ("dotted" in line.words) == dotted, line
        assert ("dashed" in line.words or "dash-dot" in line.words) == dashed, line
    assert "logarithmic" in text and "logarithmic" not in scatter.caption(
        host=True, ceiling=False, log=False
    )


def _sa3_rows(sa3_results) -> pd.DataFrame:
    phases = read_results(sa3_results).phases
    summary = summarize(phases)
    config = answer.configurations(summary).iloc[0]
    return answer.shape_set_rows(summary, "sa3", config)


def test_the_table_leads_with_the_answer(sa3_results):
    rows = _sa3_rows(sa3_results)
    table = answer.cost_table(rows, 16 * GIB)
    order = list(table["strategy"])
    assert order[0] == "★ pipelined"  # the recommended row first and marked
    head = answer.headline(rows, 16 * GIB)
    assert head.recommended == "pipelined"
    peak = re.escape(table["peak RSS"].iloc[0])
    assert re.search(rf"use pipelined on 16\.0 GiB, \d devices?: {peak} peak", head.text)
    fits = table[table[f"fits {style.size(16 * GIB)}?"] == "fits"]
    walls = [float(w.split()[0]) for w in fits["wall (median)"]]
    assert walls == sorted(walls)  # then those that fit, by time
    assert order[-3:] == ["builder", "fastsafetensors", "runai"]  # not run: last, with reasons
    assert table["why here"].iloc[-1] == (
        "skipped: runai-model-streamer is not installed (make peers)"
    )
    assert "None" not in table.to_string()
    # the rows that fit say what the headline's sentence says: tied, or slower by so much
    for strategy, why in zip(table["strategy"], table["why here"], strict=True):
        if strategy.strip("★ ") in head.decision.tied:
            assert "ties on time with pipelined" in why and f"with {strategy}" in head.text
        elif why.startswith("fits"):
            assert "slower than pipelined" in why, why
    tight = answer.cost_table(rows, int(2.5 * GIB))
    assert not tight["strategy"].iloc[0].startswith("★")  # nothing fits: nothing marked
    some = answer.cost_table(rows, 3 * GIB)  # fits first, then tight or over, then the rest
    verdicts = [v for v in some[f"fits {style.size(3 * GIB)}?"] if v != style.UNKNOWN]
    fitting = verdicts.count("fits")
    assert 1 <= fitting < len(verdicts) and set(verdicts[:fitting]) == {"fits"}
    assert answer.margin_bytes(int(2.5 * GIB)) == int(2.25 * GIB)


def test_the_chart_draws_the_headlines_margin_and_its_labels_apart(sa3_results):
    rows = _sa3_rows(sa3_results)
    rows = rows.assign(peak_unit=rows["peak_rss_bytes"] / GIB)
    host = scatter.host_line(rows, int(2.5 * GIB), False, GIB)
    assert (host.y, host.margin_y) == (2.5, pytest.approx(2.25))
    assert host.margin_label == "fits with 10% to spare: peak ≤ 2.25 GiB"
    chart = scatter.overview_scatter(rows, "peak_unit", "peak RSS (GiB)", ".2f", host, log=True)
    spec = json.dumps(chart.to_dict(), ensure_ascii=False)
    assert host.margin_label in spec and '"type": "log"' in spec
    plot = scatter._plot(rows[rows["wall_s"].notna()], "peak_unit", host, None, True)
    points = rows[rows["wall_s"].notna() & (rows["kind"] != "reference")]
    points = points.assign(label=points["strategy"])
    placed, boxes = scatter.place_labels(points, "wall_s", "peak_unit", plot)
    labels = boxes[-len(placed) :]
    assert not any(
        scatter._overlaps(box, labels[:i] + labels[i + 1 :]) for i, box in enumerate(labels)
    )
    dots = scatter.point_boxes(points, "wall_s", "peak_unit", plot)
    assert not any(scatter._overlaps(box, dots) for box in labels)


def _layers(spec: dict) -> list[tuple[dict, list[dict]]]:
    """Each layer of a layered chart's spec with its rows."""
    return [(layer, spec["datasets"][layer["data"]["name"]]) for layer in spec["layer"]]


def _y_ticks(spec: dict) -> list[float]:
    return next(
        layer["encoding"]["y"]["axis"]["values"]
        for layer, _ in _layers(spec)
        if "values" in layer["encoding"].get("y", {}).get("axis", {})
    )


@pytest.mark.parametrize("ratio", [False, True])
def test_the_axes_cover_the_points_and_each_line_keeps_its_label_beside_it(sa3_results, ratio):
    """sa3 at 2.5 GiB (issue 43): nine points between 2.3 and 2.9 GiB and eager at 6.9 are
    ticked where they sit (not from 3.00 up), and the host line, the margin and the floor line
    each have their label just above or below them, in GiB and in x checkpoint alike."""
    rows = _sa3_rows(sa3_results)
    rows = rows.assign(peak_unit=rows["peak_rss_bytes"] / GIB)
    y = "peak_ratio" if ratio else "peak_unit"
    host = scatter.host_line(rows, int(2.5 * GIB), ratio, GIB)
    spec = scatter.overview_scatter(rows, y, "peak", ".2f", host, log=True).to_dict()
    drawn = rows[rows["wall_s"].notna() & (rows["kind"] != "reference")][y]
    ticks = _y_ticks(spec)
    assert min(ticks) <= drawn.min() * 1.1, (ticks, drawn.min())  # the lowest cluster is ticked
    inside = [t for t in ticks if drawn.min() <= t <= drawn.max()]
    assert len(inside) >= 3, ticks
    plot = scatter._plot(rows[rows["wall_s"].notna()], y, host, None, True)
    lines = {  # each line's height and the text its label starts with
        host.y: host.label,
        host.margin_y: host.margin_label,
        float(rows.loc[rows["kind"] == "reference", y].iloc[0]): "floor",
    }
    texts = [(r["text"], r["ly"]) for _, data in _layers(spec) for r in data if "ly" in r]
    for height, text in lines.items():
        (label_y,) = {ly for t, ly in texts if t.startswith(text)}  # rule and text: one row
        gap = abs(plot.py(label_y) - plot.py(height))
        assert gap <= scatter.LABEL_H / 2 + scatter.LINE_GAP + 1, (text, gap)


def test_a_host_far_above_every_peak_is_one_line_at_the_top_saying_so(sa3_results):
    rows = _sa3_rows(sa3_results)
    rows = rows.assign(peak_unit=rows["peak_rss_bytes"] / GIB)
    host = scatter.host_line(rows, 64 * GIB, False, GIB)
    spec = scatter.overview_scatter(rows, "peak_unit", "peak", ".2f", host, log=True).to_dict()
    said = [r["text"] for _, data in _layers(spec) for r in data if "text" in r and "ly" in r]
    assert "host RAM 64.0 GiB and its 10% margin: above the chart: every peak is far below" in said
    assert not [t for t in said if t.startswith("fits with 10% to spare")]
    assert max(_y_ticks(spec)) < 10  # the axis is the points', not the host's 64 GiB


def test_log_ticks_are_nice_numbers_spread_over_the_whole_axis():
    assert scatter.log_ticks(2.17, 7.77) == [2.5, 3.0, 4.0, 5.0, 6.0]
    assert scatter.log_ticks(0.0004, 6.4) == [0.001, 0.01, 0.1, 1.0]  # decades on a wide one
    assert scatter.log_ticks(0.9, 1.2) == [0.9, 0.95, 1.0, 1.05, 1.1, 1.15, 1.2]
    for lo, hi in [(0.92, 3.6), (190, 325), (1.05, 1.1), (13, 18), (0.06, 2.3)]:
        ticks = scatter.log_ticks(lo, hi)
        assert 2 <= len(ticks) <= scatter.MAX_TICKS and lo <= min(ticks) and max(ticks) <= hi
        assert all(float(f"{t:.3g}") == t for t in ticks)  # nice: three digits at most


def test_a_multi_process_load_is_drawn_as_its_process_and_the_sum():
    samples = pd.DataFrame(
        {
            "result_id": "r",
            "process_index": [0, 0, 1, 1],
            "t_s": [0.0, 1.0, 0.5, 1.0],
            "rss_anon_bytes": [150, 250, 120, 220],
            "rss_file_bytes": 0,
        }
    )
    traces = group_traces(samples, {("r", 0): 100.0, ("r", 1): 100.0})
    own = traces[traces["trace"] == "process 0 (its own RSS)"]
    total = traces[traces["trace"] == "all 2 processes (sum)"]
    assert own["rss"].tolist() == [50, 150]
    assert dict(zip(total["t_s"], total["rss"], strict=True)) == {0.0: 50, 0.5: 70, 1.0: 270}
    single = group_traces(samples[samples["process_index"] == 0], {("r", 0): 100.0})
    assert set(single["trace"]) == {"RSS over baseline"}


def test_the_report_is_one_straight_line_with_small_multiples(sa3_results):
    report = sections.report_frames(read_results(sa3_results))
    (sa3,) = report.shape_sets
    assert "CPU backend: the weights live in host RAM" in sa3.costs[0].headline.sentence
    figures = charts.report_figures(sa3, report.ram)
    spec = figures.timeline.to_dict()
    assert spec["facet"]["field"] == "strategy" and spec["columns"] == 3  # one panel each
    assert spec["resolve"]["axis"]["x"] == "independent"  # x labels on every panel
    y = spec["spec"]["layer"][1]["encoding"]["y"]["scale"]
    assert y["domainMin"] == 0 and y["zero"] is True  # from 0
    sharded = sa3.panels[sa3.panels["strategy"] == "sharded"]
    assert set(sharded["trace"]) == {"process 0 (its own RSS)", "all 2 processes (sum)"}
    anon = charts.anon_file_bars(sa3.medians).to_dict()
    assert anon["resolve"]["axis"]["x"] == "independent"


def test_a_strategy_alone_in_the_results_is_picked_as_the_only_one_measured(sa3_results):
    """The table's reason says what the summary's verdict says: one strategy run alone is the
    only one measured, not "the fastest that fits" (nothing else was weighed)."""
    rows = _sa3_rows(sa3_results)
    alone = answer.ranked(rows[rows["strategy"] == "pipelined"], 16 * GIB)
    assert list(alone["reason"]) == ["picked: the only one measured"]
    every = answer.ranked(rows, 16 * GIB)
    assert every["reason"].iloc[0] != "picked: the only one measured"


def test_the_picked_rows_reason_never_calls_one_of_several_as_light_the_lightest(sa3_results):
    """Issue 71: the row said "picked: the lightest of the tied" for the heaviest of three tied
    on time and peak; where several are as light, it names the fixed order that picked."""
    rows = _sa3_rows(sa3_results)
    head = answer.headline(rows, 16 * GIB)
    assert head.decision is not None and not head.decision.lighter_beyond
    assert len(head.decision.lightest) > 1
    (reason,) = answer.cost_table(rows, 16 * GIB)["why here"].iloc[:1]
    assert reason == "picked: tied on time and peak: loadbench's default wins ties"
