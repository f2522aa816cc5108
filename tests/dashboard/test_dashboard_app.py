"""The dashboard's pages, headless through Streamlit's AppTest, over the fixture results folder."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import APP, PAGES

from bench.cli import main
from dashboard.target_words import page_words
from shapes.sizes import MISSING
from tests.commands import loadbench

GIB = 1 << 30


def _no_exception(at) -> None:
    assert not at.exception, [e.value for e in at.exception]


def _charts(at) -> list:
    return list(at.get("vega_lite_chart"))


def _spec_text(chart) -> str:
    """A chart's Vega-Lite spec as readable text (titles with their non-ASCII characters)."""
    return json.dumps(json.loads(chart.proto.spec), ensure_ascii=False)


def _chart_strategies(at) -> set[str]:
    """The strategies the Overview's charts draw (read from each chart's spec and data)."""
    found: set[str] = set()
    for chart in _charts(at):
        text = chart.proto.spec + "".join(str(d.data.data) for d in chart.proto.datasets)
        text = text.replace("floor_ratio", "")  # a column's name, not the floor strategy
        found |= {s for s in ("floor", "eager", "stream", "orbax") if s in text}
    return found


def _table_strategies(at) -> list[str]:
    """The Overview table's strategies, in its order (the recommended one marked)."""
    return list(at.table[0].value.index)


def test_overview_is_the_landing_page_and_draws_each_shape_set(app, fixture_results):
    from bench.records.results import read_results, summarize
    from dashboard import answer

    at = app()
    _no_exception(at)
    assert at.title[0].value == "Overview"
    shapes = at.selectbox(key="overview_shapes")
    assert (shapes.value, shapes.options) == ("gpt2", ["gpt2", "tiny-gpt2"])  # largest first
    assert len(_charts(at)) == 1
    # eager is faster than pipelined and stream, three repeats each a 3% step apart: their 95%
    # intervals overlap, but Welch's interval of each ratio leaves out 1 (the one rule for
    # "different?", `bench.analysis.difference`), so eager, the fastest, is the answer
    # (`bench.analysis.judge.decide`); then those that fit, by their median wall
    assert _table_strategies(at) == ["★ eager", "pipelined", "stream", "floor"]
    shapes.set_value("tiny-gpt2").run()
    _no_exception(at)
    assert len(_charts(at)) == 1 and _table_strategies(at)[0] == "★ pipelined"
    # eager is the fastest, pipelined the lightest: both on the Pareto front; stream (slower and
    # heavier than pipelined) and the reference floor never
    phases = read_results(fixture_results.root).phases
    beta = phases[phases["run_id"] == fixture_results.run_ids["beta"]]
    summary = answer.shape_set_rows(summarize(beta), "gpt2")
    summary = summary[summary["devices"] == 8]
    front = dict(zip(summary["strategy"], summary["pareto"], strict=True))
    assert front == {"floor": False, "eager": True, "stream": False, "pipelined": True}
    assert dict(zip(summary["strategy"], summary["kind"], strict=True))["floor"] == "reference"


def test_overview_headline_names_the_strategy_that_fits(app, fixture_results):
    at = app()
    at.selectbox(key="overview_run").set_value(fixture_results.run_ids["alpha"]).run()
    gpt2 = next(s.value for s in at.success if "`gpt2`" in s.value)
    # 24 GiB (alpha's RAM): eager, the fastest, fits and is called apart from the next (their
    # 95% intervals overlap; the interval of their ratio leaves out 1), so it is the answer, in
    # bytes, with the least RAM that fits, named by the fastest strategy there (pipelined, the
    # lightest)
    assert re.search(r"use eager on 24\.0 GiB, 8 devices: [\d.]+ [MG]iB peak", gpt2), gpt2
    # the judge's one sentence (`bench.analysis.decision_words`), as the summary and recommend
    # print it
    assert re.search(r"; 1\.\d\dx faster than pipelined", gpt2), gpt2
    assert re.search(r"Least RAM that fits: [\d.]+ MiB \(pipelined\)", gpt2), gpt2
    at.number_input(key="overview_ram_gib").set_value(1.5).run()
    gpt2 = next(s.value for s in at.success if "`gpt2`" in s.value)
    assert re.search(r"use pipelined on 1\.50 GiB, 8 devices: ", gpt2), gpt2
    assert re.search(r"eager needs [\d.]+ GiB and does not fit", gpt2), gpt2  # 1.5 GiB: too small
    at.switch_page("views/target_host.py").run()
    assert at.number_input(key="target_ram_gib").value == 1.5  # kept across pages
    at.switch_page("views/overview.py").run()
    assert at.number_input(key="overview_ram_gib").value == 1.5  # and on coming back
    at.number_input(key="overview_ram_gib").set_value(0.25).run()
    assert any("no strategy fits" in e.value for e in at.error)


@pytest.mark.parametrize("page", PAGES)
def test_every_page_renders_without_exception(app, page):
    at = app(page)
    _no_exception(at)
    if not page.endswith("compare.py"):  # there, beta's 10% heavier peaks are an error to show
        assert not at.error, [e.value for e in at.error]
    if page.endswith("memray.py"):
        assert "numpy/_core/numeric.py:frombuffer" in at.code[0].value
    else:
        assert _charts(at), f"{page} drew no chart"


def test_strategy_filter_changes_the_overview(app):
    at = app()
    assert _chart_strategies(at) >= {"floor", "eager", "stream"}
    at.multiselect(key="overview_strategies").set_value(["stream"]).run()
    _no_exception(at)
    assert _table_strategies(at) == ["★ stream"]
    assert _chart_strategies(at) == {"stream"}


def test_failed_runs_stay_visible_whatever_the_filter(app, fixture_results):
    at = app()
    at.selectbox(key="overview_run").set_value(fixture_results.run_ids["alpha"]).run()
    at.multiselect(key="overview_strategies").set_value(["eager"]).run()
    _no_exception(at)
    statuses = [df.value for df in at.dataframe if "error" in df.value.columns]
    crashed = [t for t in statuses if "crashed" in set(t["status"])]
    assert crashed, "the crashed orbax run is not shown"
    assert "SIGKILL" in crashed[0].loc[crashed[0]["status"] == "crashed", "error"].iloc[0]
    assert any("**crashed**: 1" in m.value for m in at.markdown)


def test_peak_unit_switch_changes_the_axis(app):
    at = app()
    assert "peak RSS (GiB, log scale)" in _spec_text(_charts(at)[0])  # gpt2: eager ~1.7 GiB
    at.selectbox(key="overview_shapes").set_value("tiny-gpt2").run()
    assert "peak RSS (MiB, log scale)" in _spec_text(_charts(at)[0])  # tiny-gpt2: ~300 MiB
    at.radio(key="overview_unit").set_value("x checkpoint").run()
    assert "peak over baseline (x checkpoint, log scale)" in _spec_text(_charts(at)[0])
    at.toggle(key="overview_log").set_value(False).run()
    spec = _spec_text(_charts(at)[0])
    assert "peak over baseline (x checkpoint)" in spec and '"type": "log"' not in spec


def _verdicts(at) -> dict[str, str]:
    table = next(df.value for df in at.dataframe if "verdict" in df.value.columns)
    return dict(zip(table["strategy"], table["verdict"], strict=True))


def test_host_ram_changes_the_verdicts(app):
    at = app("views/target_host.py")
    at.selectbox(key="target_shapes").set_value("gpt2").run()
    at.number_input(key="target_ram_gib").set_value(64.0).run()
    _no_exception(at)
    roomy = _verdicts(at)
    assert set(roomy.values()) == {"fits"}
    assert any(s.value.startswith("use ") for s in at.success)  # the judge's decision
    said = " ".join(m.value for m in [*at.success, *at.markdown])  # the runs' backend
    assert "CPU backend: the weights live in host RAM." in said
    at.number_input(key="target_ram_gib").set_value(0.5).run()
    _no_exception(at)
    tight = _verdicts(at)
    assert "does not fit" in tight.values() and tight != roomy
    assert any("no strategy fits" in e.value for e in at.error)


def test_custom_sizes_scale_the_prediction(app):
    at = app("views/target_host.py")
    at.radio(key="target_source").set_value("custom sizes").run()
    at.number_input(key="target_ram_gib").set_value(16.0).run()
    at.number_input(key="target_ckpt_gib").set_value(1.0).run()
    small = _verdicts(at)
    at.number_input(key="target_ckpt_gib").set_value(40.0).run()
    _no_exception(at)
    assert set(small.values()) != {"does not fit"}
    assert set(_verdicts(at).values()) == {"does not fit"}


@pytest.mark.timeout(300)
def test_preset_spec_feeds_the_prediction(app):
    at = app("views/target_host.py")
    at.radio(key="target_source").set_value("a preset or fetched spec").run()
    _no_exception(at)
    assert not at.error, [e.value for e in at.error]
    assert at.selectbox(key="target_spec").value == "sa3"
    assert _verdicts(at)
    sharding = [df.value for df in at.dataframe if "sharded_axis" in df.value.columns]
    assert sharding and len(sharding[0]) > 0
    assert (sharding[0]["sharded_axis"] != "replicated").any()  # the rule splits sa3's big tensors


def test_timeline_overlays_several_results(app):
    at = app("views/timeline.py")
    widget = at.multiselect(key="timeline_results")
    wanted = [
        o for o in widget.options if o.split(" · ")[1:3] == ["gpt2", "r1"] and "2 dev" not in o
    ]
    assert len(wanted) == 4  # floor, eager, stream, pipelined (on 8 devices)
    widget.set_value(wanted).run()
    _no_exception(at)
    chart = _charts(at)[0]
    drawn = b"".join(d.data.data for d in chart.proto.datasets)  # Arrow IPC bytes
    assert all(label.encode() in drawn for label in wanted)
    # the split is for one result only: its toggle stays, disabled, and says why
    assert [t.key for t in at.toggle] == ["timeline_absolute", "timeline_stack"]
    assert at.toggle(key="timeline_stack").disabled
    assert any("needs a single result" in c.value for c in at.caption)


def test_phases_strategy_filter(app):
    at = app("views/phases.py")
    at.selectbox(key="phases_shapes").set_value("gpt2").run()
    at.multiselect(key="phases_strategies").set_value(["eager"]).run()
    _no_exception(at)
    numbers = next(df.value for df in at.dataframe if "adds_bytes" in df.value.columns)
    assert set(numbers["strategy"]) == {"eager"}
    assert set(numbers["phase"]) == {"build", "read", "cast", "transfer", "assemble"}
    assert (numbers["adds_bytes"] >= 0).all()


def test_compare_shows_both_machines_and_ratios(app, fixture_results):
    at = app("views/compare.py")
    _no_exception(at)
    labels = at.selectbox(key="compare_new").options
    assert any("gpt2, tiny-gpt2" in o and "2026-01-12" in o for o in labels)  # shapes and date
    assert at.selectbox(key="compare_base").value == fixture_results.run_ids["alpha"]
    facts = at.table[0].value
    assert list(facts.loc["machine"]) == ["alpha", "beta"]
    gpt2 = at.dataframe[0].value
    assert set(gpt2["strategy"]) == {"floor", "eager", "stream", "pipelined"}  # orbax: alpha only
    eager = gpt2[gpt2["strategy"] == "eager"].iloc[0]
    wall = eager["time, new / base"]
    assert wall.startswith("1.43x faster (95% CI 1."), wall  # beta is 0.7x the time
    assert eager["verdict"] == "regressed"  # beta's peaks are 1.1x: beyond 5% and the spread
    assert any("Failed" in e.value and "`eager` on `gpt2`" in e.value for e in at.error)
    # orbax ran on alpha (base) only: listed, as the gate fails on it
    assert any("Missing in new: strategies orbax" in e.value for e in at.error)
    gate = next(c.value for c in at.caption if c.value.startswith("In a terminal or CI"))
    argv = shlex.split(gate.split("`")[1])
    assert argv[:2] == ["loadbench", "compare"] and argv[-2:] == ["--max-regression", "5%"]
    assert main(argv[1:]) == 1  # the same gate, run as printed: it fails on eager there too


def test_empty_folder_says_which_command_makes_results(app, tmp_path):
    at = app(folder=tmp_path / "nothing-here")
    _no_exception(at)
    assert "make bench SHAPES=gpt2" in at.code[0].value


@pytest.mark.filterwarnings("ignore:.*truncated last line:UserWarning")
def test_unreadable_file_is_named_and_the_rest_still_shown(app, fixture_results, tmp_path):
    import shutil

    folder = tmp_path / "results"
    shutil.copytree(fixture_results.root, folder)
    (folder / "alpha" / "20260101T000000Z-badbad.jsonl").write_text(
        '{"schema_version": 99, "record": "run"}\n'
    )
    with open(folder / "beta" / f"{fixture_results.run_ids['beta']}.jsonl", "a") as fh:
        fh.write('{"schema_version": 1, "record": "sample", "run_')  # a run killed mid-line
    at = app(folder=folder)
    _no_exception(at)
    warnings = " ".join(w.value for w in at.warning)
    assert "20260101T000000Z-badbad.jsonl" in warnings and "schema_version" in warnings
    assert "truncated" in warnings
    assert len(_charts(at)) == 1  # the rest is still shown


def test_the_dashboard_never_imports_jax(fixture_results):
    code = f"""
import os, sys, traceback
class Tripwire:  # remember who imports jax first, to name the culprit in the failure
    def find_spec(self, name, path=None, target=None):
        if name == "jax" and "JAX_BY" not in os.environ:
            os.environ["JAX_BY"] = " <- ".join(
                f"{{f.filename.rsplit('/main/', 1)[-1]}}:{{f.lineno}}"
                for f in reversed(traceback.extract_stack()[:-1])
                if "/main/" in f.filename and "site-packages" not in f.filename)
        return None
sys.meta_path.insert(0, Tripwire())
os.environ["LOADBENCH_RESULTS"] = {str(fixture_results.root)!r}
from streamlit.testing.v1 import AppTest
at = AppTest.from_file({str(APP)!r}, default_timeout=120).run()
assert not at.exception, at.exception
for page in {PAGES!r}:
    at.switch_page(page).run()
    assert not at.exception, (page, at.exception)
at.switch_page("views/target_host.py").run()
at.radio(key="target_source").set_value("a preset or fetched spec").run()
assert not at.exception
print("JAX_IMPORTED by " + os.environ["JAX_BY"] if "jax" in sys.modules else "JAX_FREE")
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().splitlines()[-1] == "JAX_FREE"


def test_app_file_is_the_entry_point():
    assert Path(APP).is_file() and (Path(APP).parent / "views" / "overview.py").is_file()


@pytest.mark.timeout(300)
def test_target_host_and_recommend_agree_word_for_word(app, fixture_results):
    cmd = loadbench(
        "recommend",
        "--shapes",
        "gpt2",
        "--host-ram",
        "0.75GiB",
        "--devices",
        "8",
        "--results",
        str(fixture_results.root),
        "--allow-partial",  # answer from part of a run where there is one, as the page does
    )
    text = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    as_json = subprocess.run(
        [*cmd, "--json"], capture_output=True, text=True, timeout=120, check=False
    )
    assert text.returncode == as_json.returncode == 1, text.stderr  # 0.75 GiB: nothing fits
    out = json.loads(as_json.stdout)
    assert out["inputs"] == {
        "shapes": "gpt2",
        "host_ram_bytes": 3 * GIB // 4,
        "devices": 8,
        "results": str(fixture_results.root),
        "cache": "warm",
    }
    assert {"peak_bytes_per_checkpoint_byte", "wall_constant_s", "runs", "shapes"} <= set(
        out["strategies"][0]["model"]
    )
    assert out["minimum_ram_bytes"] > 3 * GIB // 4 and any(
        n.startswith("Minimum RAM that fits: ") for n in out["notes"]
    )
    at = app("views/target_host.py")
    at.radio(key="target_source").set_value("a preset or fetched spec").run()
    at.selectbox(key="target_spec").set_value("gpt2").run()
    at.number_input(key="target_ram_gib").set_value(0.75).run()
    at.number_input(key="target_devices").set_value(8).run()
    _no_exception(at)
    shown = _texts_in_page_order(at.main)
    said = [page_words(n) for n in out["notes"]]  # the page names its widgets for the flags
    for note, on_page in zip(out["notes"], said, strict=True):  # the same sentences, in order
        assert note in text.stdout and on_page in shown, on_page
    assert [n for n in shown if n in said] == said
    order = [s["strategy"] for s in out["strategies"]]
    assert list(_table_with(at, "verdict")["strategy"]) == order  # the table in the CLI's order
    partial = [  # what each says of runs that hold part of what they were asked (none here:
        # the interrupted run's strategies were measured by another run)
        line.split(": ", 2)[-1]
        for line in text.stderr.splitlines()
        if "answering from part of a run" in line
    ]
    warned = [w.value for w in at.warning if w.value.startswith("Answering from part of a run")]
    assert [w.removeprefix("Answering from part of a run: ").rstrip(".") for w in warned] == partial


def _texts_in_page_order(node) -> list[str]:
    """The text of every alert and Markdown element, top to bottom."""
    if getattr(node, "type", None) in ("success", "error", "warning", "markdown"):
        return [node.value]
    children = getattr(node, "children", None) or {}
    return [t for key in sorted(children) for t in _texts_in_page_order(children[key])]


def _table_with(at, column: str):
    return next(df.value for df in at.dataframe if column in df.value.columns)


def test_a_failed_runs_missing_figures_read_as_a_dash_not_none(app, fixture_results):
    import pyarrow as pa

    at = app()
    at.selectbox(key="overview_run").set_value(fixture_results.run_ids["alpha"]).run()
    table = next(d for d in at.dataframe if "error" in d.value.columns)
    shown = pa.ipc.open_stream(table.proto.arrow_data.styler.display_values).read_all().to_pandas()
    crashed = table.value.index[table.value["status"] == "crashed"][0]
    columns = list(table.value.columns)
    for name in ("peak_ratio", "wall_s"):
        assert shown.iloc[crashed, columns.index(name)] == MISSING  # the CLI's mark
    ok = table.value.index[table.value["status"] == "ok"][0]
    assert shown.iloc[ok, columns.index("wall_s")].endswith(" s")


def test_overlapping_phases_are_never_subtracted_and_sit_at_their_times(fixture_results):
    from bench.records.results import read_results
    from dashboard import frames

    results = read_results(fixture_results.root)
    beta = results.phases[results.phases["run_id"] == fixture_results.run_ids["beta"]]
    gpt2 = beta[(beta["shapes"] == "gpt2") & (beta["strategy"] == "pipelined")]
    med = frames.phase_medians(gpt2).set_index("phase")
    # laid end to end, build would begin at stream's end RSS and "add" a negative amount
    assert (med["peak_over_baseline_bytes"] > 0).all() and (med["adds_bytes"] >= 0).all()
    rid = gpt2["result_id"].iloc[0]
    bands = frames.phase_bands(gpt2, [rid], {rid: "p"}).set_index("phase")
    assert bands.loc["stream", "start_s"] < bands.loc["build", "start_s"]
    assert bands.loc["build", "end_s"] < bands.loc["stream", "end_s"]  # inside it, not after
    assert bands.loc["build", "lane"] != bands.loc["stream", "lane"]


def test_the_default_run_is_the_newest_complete_unconstrained_one(fixture_results):
    from bench.records.results import read_results
    from dashboard import frames

    results = read_results(fixture_results.root)
    ids = fixture_results.run_ids
    facts = frames.run_facts(results.runs, results.phases)
    assert list(facts["run_id"][:2]) == [ids["delta"], ids["gamma"]]  # the newest two
    assert facts.loc[ids["gamma"], "status"] == "interrupted"
    assert "recommend --check" in facts.loc[ids["delta"], "label"]
    assert "memory limit 1.00 GiB" in facts.loc[ids["delta"], "label"]
    assert frames.default_run(results.runs, results.phases) == ids["beta"]
    assert frames.default_runs(results.runs, results.phases) == {
        "gpt2": ids["beta"],
        "tiny-gpt2": ids["beta"],
    }
