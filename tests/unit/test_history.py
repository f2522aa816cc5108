"""`loadbench history`: series across runs, labelled by commit and versions, and their steps."""

from __future__ import annotations

import json
import re

import pytest

from bench.analysis.history import (
    FLOOR,
    PEAK,
    TIME,
    WALL,
    all_steps,
    boundaries,
    points,
    steps,
)
from bench.cli import main
from bench.records.results import read_results
from bench.records.writer import ResultsWriter
from loader.vocabulary import REFERENCE
from tests.records import run_record, total_row

MiB = 1 << 20
BASE = 300 * MiB
NOISE = (0.0, 0.01, -0.01)  # each run's three repeats stray by a percent


def _run(  # noqa: PLR0913 - each keyword is one thing a test varies
    folder,
    run_id,
    started,
    peaks,
    machine="here",
    commit="abc1234",
    jax="0.7.0",
    walls=None,
    speed=None,
    budget=None,
):
    """One run file: a run record and three repeats per strategy of `peaks` (strategy -> peak
    over baseline), walls near 1 s (or `walls`, the strategies' repeats), and the floor line.
    With `speed` (the machine's slowness, 1 = as usual) each repeat carries a reference timed
    beside it (0.4 s at speed 1) and its walls are that much slower too; `budget` is the
    strategies' `--budget`."""
    rows = []
    for strategy, over in {**peaks, "floor": 500 * MiB}.items():
        for i, d in enumerate(NOISE):
            wall = (
                walls[i]
                if walls and strategy != "floor"
                else (0.5 if strategy == "floor" else 1.0) * (1 + d)
            )
            paired = {}
            if speed is not None:
                reference = 0.4 * speed * (1 - d)
                wall *= speed
                paired = {"reference_s": reference, "paired_ratio": wall / reference}
            rows.append(
                total_row(
                    run_id=run_id,
                    strategy=strategy,
                    kind=REFERENCE if strategy == "floor" else "strategy",
                    repeat=i,
                    baseline_rss_bytes=BASE,
                    peak_rss_bytes=int(BASE + over * (1 + d / 10)),
                    wall_s=wall,
                    budget_bytes=budget if strategy != "floor" else None,
                    **paired,
                )
            )
    record = run_record(
        run_id=run_id, machine=machine, started_utc=started, git_commit=commit, jax_version=jax
    )
    with ResultsWriter(folder / machine / f"{run_id}.jsonl") as w:
        w.write_many([record, *rows])


def _three_runs(folder):
    """pipelined's peak steps down at r3 (a smaller --budget); hostcast's never moves."""
    _run(folder, "r1", "2026-01-01T00:00:00Z", {"pipelined": 600 * MiB, "hostcast": 550 * MiB})
    _run(folder, "r2", "2026-01-02T00:00:00Z", {"pipelined": 600 * MiB, "hostcast": 550 * MiB})
    _run(
        folder,
        "r3",
        "2026-01-03T00:00:00Z",
        {"pipelined": 400 * MiB, "hostcast": 550 * MiB},
        commit="def5678",
        jax="0.7.1",
    )


def test_a_step_is_marked_at_the_right_run_and_no_other(tmp_path):
    _three_runs(tmp_path)
    found = steps(read_results(tmp_path))
    assert [(s.strategy, s.metric, s.run_id) for s in found] == [("pipelined", PEAK, "r3")]
    (step,) = found
    assert step.before == pytest.approx(600 * MiB, rel=0.01)
    assert step.after == pytest.approx(400 * MiB, rel=0.01)
    assert step.change == pytest.approx(-1 / 3, rel=0.02)


def test_points_are_ordered_by_start_and_labelled_with_commit_and_versions(tmp_path):
    _three_runs(tmp_path)
    pts = points(read_results(tmp_path))
    pipelined = pts[pts["strategy"] == "pipelined"]
    assert list(pipelined["run_id"]) == ["r1", "r2", "r3"]
    assert list(pipelined["git_commit"]) == ["abc1234", "abc1234", "def5678"]
    assert list(pipelined["jax_version"]) == ["0.7.0", "0.7.0", "0.7.1"]
    assert pipelined[FLOOR].iloc[0] == pytest.approx(2.0, rel=0.01)  # wall over the floor line
    assert pipelined[WALL].iloc[0] == pytest.approx(1.0, rel=0.01)
    assert set(pts["strategy"]) == {"pipelined", "hostcast"}  # the floor line is no series


def test_runs_from_different_machines_are_separate_series(tmp_path):
    _run(tmp_path, "r1", "2026-01-01T00:00:00Z", {"pipelined": 600 * MiB}, machine="small")
    _run(tmp_path, "r2", "2026-01-02T00:00:00Z", {"pipelined": 600 * MiB}, machine="small")
    _run(tmp_path, "r3", "2026-01-03T00:00:00Z", {"pipelined": 900 * MiB}, machine="big")
    assert steps(read_results(tmp_path)) == []


def test_a_move_within_the_repeats_spread_is_no_step(tmp_path):
    """2% is below the peak's least step; interleaved repeats are never separated."""
    _run(tmp_path, "r1", "2026-01-01T00:00:00Z", {"pipelined": 600 * MiB})
    _run(tmp_path, "r2", "2026-01-02T00:00:00Z", {"pipelined": 612 * MiB})
    _run(tmp_path, "r3", "2026-01-03T00:00:00Z", {"pipelined": 600 * MiB})
    assert steps(read_results(tmp_path)) == []


def test_the_cli_prints_steps_as_the_contract_says(tmp_path, capsys):
    _three_runs(tmp_path)
    assert main(["history", str(tmp_path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    (step,) = out["steps"]
    assert {k: step[k] for k in ("shapes", "strategy", "metric", "run_id")} == {
        "shapes": "gpt2",
        "strategy": "pipelined",
        "metric": PEAK,
        "run_id": "r3",
    }
    assert step["before"] > step["after"]
    assert main(["history", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    assert "here · gpt2 · pipelined" in text and "def5678" in text
    said = "step: here gpt2 pipelined: peak - base 0.586 GiB -> 0.391 GiB: 1.50x lighter (95% CI"
    assert said in text and "at run r3" in text


def test_a_missing_results_folder_is_named(tmp_path, capsys):
    assert main(["history", str(tmp_path / "nowhere")]) == 2
    assert f"results folder {tmp_path / 'nowhere'} does not exist" in capsys.readouterr().err


def test_a_time_that_slowed_with_one_repeat_inside_the_other_side_is_no_step(tmp_path):
    """As measured on a shared 2-core box: the third run's repeats 6.3, 6.8 and 4.2 s against
    2.7-5.2 s before (Mann-Whitney p = 0.048, but the 95% interval of the ratio, 0.89-2.5x,
    does not lie beyond the 10% least step)."""
    peaks = {"hostcast": 550 * MiB}
    _run(tmp_path, "r1", "2026-01-01T00:00:00Z", peaks, walls=(3.44, 4.09, 3.56))
    _run(tmp_path, "r2", "2026-01-02T00:00:00Z", peaks, walls=(3.93, 2.69, 5.15))
    _run(tmp_path, "r3", "2026-01-03T00:00:00Z", peaks, walls=(6.29, 6.84, 4.19))
    assert steps(read_results(tmp_path)) == []
    apart = tmp_path / "apart"  # the same, with every slow repeat beyond the earlier ones
    _run(apart, "r1", "2026-01-01T00:00:00Z", peaks, walls=(3.44, 4.09, 3.56))
    _run(apart, "r2", "2026-01-02T00:00:00Z", peaks, walls=(3.93, 2.69, 5.15))
    _run(apart, "r3", "2026-01-03T00:00:00Z", peaks, walls=(6.29, 6.84, 5.6))
    found = {(s.metric, s.run_id) for s in steps(read_results(apart))}
    assert found == {(TIME, "r3")}  # over the floor line, which held still


def test_the_report_lists_the_steps(tmp_path):
    pytest.importorskip("vl_convert")
    from dashboard.report import build

    _three_runs(tmp_path)
    page = build(read_results(tmp_path), str(tmp_path), run_id="r3")
    assert "History: where a metric stepped" in page
    assert "<td>pipelined</td>" in page and "<td>-33%</td>" in page


def test_a_time_that_moved_no_more_than_its_repeats_stray_is_no_step(tmp_path):
    """As measured here while other jobs shared the CPUs: hostcast's first run 4.0-8.6 s, the next
    1.6-3.6 s; apart, but its runs' own repeats stray more (61% typical) than the move (-32%)."""
    peaks = {"hostcast": 550 * MiB}
    _run(tmp_path, "r1", "2026-01-01T00:00:00Z", peaks, walls=(4.53, 8.6, 3.99))
    _run(tmp_path, "r2", "2026-01-02T00:00:00Z", peaks, walls=(3.61, 3.29, 1.6))
    _run(tmp_path, "r3", "2026-01-03T00:00:00Z", peaks, walls=(2.87, 3.29, 2.86))
    assert [s for s in steps(read_results(tmp_path)) if s.metric == TIME] == []


def test_a_machine_that_slowed_down_is_no_step_on_paired_times(tmp_path):
    """Run 3 ran beside a CPU-heavy process: every wall 1.6x, and so the reference timed beside
    each repeat. The paired time holds still: no step. Judged on the walls (the pairing taken
    away) it would be a step of every strategy."""
    peaks = {"pipelined": 600 * MiB, "pread": 700 * MiB}
    _run(tmp_path, "r1", "2026-01-01T00:00:00Z", peaks, speed=1.0)
    _run(tmp_path, "r2", "2026-01-02T00:00:00Z", peaks, speed=1.0)
    _run(tmp_path, "r3", "2026-01-03T00:00:00Z", peaks, speed=1.6)
    results = read_results(tmp_path)
    assert steps(results) == []
    pts = points(results)
    assert (pts[WALL][pts["run_id"] == "r3"] > 1.5).all()  # the seconds moved; they are shown
    unpaired = results.phases.assign(paired_ratio=results.phases["wall_s"])
    moved = steps(type(results)(results.runs, unpaired, results.samples))
    assert {(s.strategy, s.run_id) for s in moved} == {("pipelined", "r3"), ("pread", "r3")}


def test_a_planted_slowdown_is_a_step_beside_a_slower_machine(tmp_path):
    """pipelined 1.3x slower from run 3, which also ran on a machine 1.6x slower: a time step of
    pipelined alone, at run 3."""
    _run(tmp_path, "r1", "2026-01-01T00:00:00Z", {"pipelined": 600 * MiB}, speed=1.0)
    _run(tmp_path, "r2", "2026-01-02T00:00:00Z", {"pipelined": 600 * MiB}, speed=1.0)
    _run(
        tmp_path,
        "r3",
        "2026-01-03T00:00:00Z",
        {"pipelined": 600 * MiB},
        walls=(1.3, 1.313, 1.287),
        speed=1.6,
    )
    (step,) = steps(read_results(tmp_path))
    assert (step.strategy, step.metric, step.run_id) == ("pipelined", TIME, "r3")
    assert step.change == pytest.approx(0.3, abs=0.03) and step.low > 1.1


def _runs_at(folder, levels):
    """One run per level: pipelined's three repeats at that multiple of its usual time (a percent
    apart), each beside a reference timed at the machine's usual speed."""
    for day, level in enumerate(levels, start=1):
        walls = tuple(level * (1 + d) for d in NOISE)
        started = f"2026-01-{day:02d}T00:00:00Z"
        _run(folder, f"r{day}", started, {"pipelined": 600 * MiB}, walls=walls, speed=1.0)


def test_a_time_that_drifts_from_run_to_run_is_no_step(tmp_path):
    """Each run 5% slower than the one before (the machine drifting; every run's repeats agree to
    a percent): 28% from the first run to the last, but no cut stands out from the moves between
    neighbouring runs, so no step. Judged on the repeats alone it is one."""
    _runs_at(tmp_path, [1.0, 1.05, 1.1, 1.16, 1.22, 1.28])
    assert steps(read_results(tmp_path)) == []


def test_a_step_stands_beyond_the_runs_own_scatter(tmp_path):
    """Five runs within 3% of each other, then 1.3x: a time step at the sixth run."""
    _runs_at(tmp_path, [1.0, 1.02, 0.99, 1.01, 1.0, 1.3])
    (step,) = steps(read_results(tmp_path))
    assert (step.strategy, step.metric, step.run_id) == ("pipelined", TIME, "r6")
    assert step.change == pytest.approx(0.3, abs=0.03) and step.low > 1.1


def test_a_change_of_configuration_is_a_boundary_not_a_step(tmp_path):
    """Run 3 had a smaller --budget: its lower peak is the budget's doing, said as a boundary
    with what changed; no step is looked for across it."""
    _run(tmp_path, "r1", "2026-01-01T00:00:00Z", {"pipelined": 600 * MiB}, budget=256 * MiB)
    _run(tmp_path, "r2", "2026-01-02T00:00:00Z", {"pipelined": 600 * MiB}, budget=256 * MiB)
    _run(tmp_path, "r3", "2026-01-03T00:00:00Z", {"pipelined": 400 * MiB}, budget=32 * MiB)
    results = read_results(tmp_path)
    assert steps(results) == []
    (boundary,) = boundaries(results)
    assert boundary.run_id == "r3" and boundary.change == "budget 256 MiB -> 32.0 MiB"
    pts = points(results)
    assert list(pts["label"]) == [
        "2026-01-01 00:00 · abc1234",
        "2026-01-02 00:00 · abc1234",
        "2026-01-03 00:00 · abc1234",
    ]
    assert main(["history", str(tmp_path)]) == 0


def test_history_of_a_folder_without_ok_runs_is_an_error(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert main(["history", str(tmp_path / "empty")]) == 2
    assert "no ok run to follow" in capsys.readouterr().err


def _timed_run(folder, run_id, started, others, figures):
    """A run of a one-thread strategy (pread), a two-thread one (stream) and the floor line,
    three repeats each, every one with a reference beside it: `figures(strategy, d)` gives a
    repeat's (wall, reference, CPU ratio) at noise `d`; others took `others` of the CPUs."""
    rows = []
    for strategy in ("pread", "stream", "floor"):
        for i, d in enumerate(NOISE):
            wall, reference, cpu = figures(strategy, d)
            rows.append(
                total_row(
                    run_id=run_id,
                    strategy=strategy,
                    kind=REFERENCE if strategy == "floor" else "strategy",
                    repeat=i,
                    baseline_rss_bytes=BASE,
                    peak_rss_bytes=BASE + 600 * MiB,
                    wall_s=wall,
                    reference_s=reference,
                    paired_ratio=wall / reference,
                    cpu_s=cpu,
                    reference_cpu_s=1.0,
                    cpu_ratio=cpu,
                    others_cpu_fraction=others,
                )
            )
    with ResultsWriter(folder / "here" / f"{run_id}.jsonl") as w:
        w.write_many([run_record(run_id=run_id, started_utc=started), *rows])


def _neighboured(folder, run_id, started, busy, cpu_work=None, slower=None, jitter=1.0):
    """pread, stream and the floor line; `busy`: a CPU-heavy neighbour took 47% of the CPUs,
    slowing stream's wall 1.34x, pread's not at all, and the all-thread reference 1.5x. CPU
    seconds stay (or follow `cpu_work`); `slower` plants a slowdown of a strategy's wall;
    `jitter`: the whole run's speed."""
    cpu_work, slower = cpu_work or {}, slower or {}
    slowed = {"stream": 1.34} if busy else {}

    def figures(strategy, d):
        wall = (1 + d) * slowed.get(strategy, 1.0) * slower.get(strategy, 1.0) * jitter
        reference = 0.5 * (1 - d) * (1.5 if busy else 1.0)
        return wall, reference, 1.2 * (1 + d / 2) * cpu_work.get(strategy, 1.0)

    _timed_run(folder, run_id, started, 0.47 if busy else 0.03, figures)


def _reruns(folder):
    """Issue 54's reruns of one commit: three quiet (a percent or two apart from run to run),
    then two beside a CPU hog, where pread's paired wall falls 1.5x, stream's 0.9x, and pread's
    CPU ratio 30% (as sharded-dir's did on a real machine while the code stood still)."""
    for i, jitter in enumerate((1.0, 1.02, 0.99), start=1):
        _neighboured(folder, f"r{i}", f"2026-01-0{i}T00:00:00Z", False, jitter=jitter)
    for i in (4, 5):
        _neighboured(folder, f"r{i}", f"2026-01-0{i}T00:00:00Z", True, {"pread": 0.7})


def test_identical_reruns_quiet_and_beside_a_cpu_hog_make_no_step(tmp_path):
    """Runs shared with a CPU-heavy neighbour are judged among themselves, quiet runs among
    themselves: no step, on the pairing or on CPU time (both moved here, the code did not)."""
    _reruns(tmp_path)
    results = read_results(tmp_path)
    assert steps(results) == []
    flat = results.phases.assign(cpu_ratio=float("nan"))  # the pairing alone: still nothing
    assert steps(type(results)(results.runs, flat, results.samples)) == []


def test_a_planted_slowdown_among_reruns_is_found_and_only_it(tmp_path):
    """A copy of the third quiet run, after the two beside the hog, with stream's walls 1.4x:
    a time step of stream alone, at that run, said as a relative speed with its interval."""
    _reruns(tmp_path)
    _neighboured(tmp_path, "r6", "2026-01-06T00:00:00Z", False, slower={"stream": 1.4}, jitter=0.99)
    (step,) = steps(read_results(tmp_path))
    assert (step.strategy, step.metric, step.run_id, step.basis) == ("stream", TIME, "r6", "paired")
    assert step.change == pytest.approx(0.4, abs=0.04) and step.low > 1.1
    assert re.fullmatch(r"1\.[34]\dx slower \(95% CI 1\.\d\d-1\.\d\d\)", step.words)


def test_reruns_all_beside_other_jobs_make_no_step_and_a_move_among_them_is_unstable(tmp_path):
    """Issue 54's runA-C: one commit three times, every run beside another job, shared
    differently (30%, 35%, 60% of the CPUs): stream's CPU ratio fell 30% in the third while its
    wall rose. No step. A fourth run, shared as the first two, with pread 1.4x slower: among
    runs beside other processes a time step is `unstable`, not a verdict, whether its CPU ratio
    moved with it or not (issue 71: a neighbour moved identical code's CPU ratio 1.23x; the
    rule `compare` keeps)."""
    for i, (others, work) in enumerate(((0.30, 1.0), (0.35, 1.0), (0.60, 0.7)), start=1):
        _shared(tmp_path, f"r{i}", i, others, work)
    assert steps(read_results(tmp_path)) == []
    for cpu in (None, 1.0):  # CPU ratio 1.4x too; unmoved
        _shared(tmp_path, "r4", 4, 0.30, 1.0, planted=1.4, planted_cpu=cpu)
        results = read_results(tmp_path)
        assert steps(results) == []
        (unstable,) = all_steps(results)
        assert unstable.unstable and (unstable.strategy, unstable.run_id) == ("pread", "r4")
        assert unstable.change == pytest.approx(0.4, abs=0.04)
        assert "x slower (95% CI" in unstable.words
        assert re.search(
            r"beside other processes \(3\d% of the CPUs\): not a verdict$", unstable.words
        )


def _shared(folder, run_id, day, others, stream_work, planted=1.0, planted_cpu=None):
    """A run of pread and stream beside another job taking `others` of the CPUs: stream's CPU
    ratio times `stream_work` (its wall up 5% where that falls), pread's wall times `planted`
    and its CPU ratio times `planted_cpu` (`planted` where not given: slower code)."""
    cpu_work = planted if planted_cpu is None else planted_cpu

    def figures(strategy, d):
        slower = (1.05 if stream_work < 1 else 1.0) if strategy == "stream" else 1.0
        wall = (planted if strategy == "pread" else 1.0) * (1 + d) * slower
        cpu = 1.2 * (1 + d / 2) * (stream_work if strategy == "stream" else cpu_work)
        return wall, 0.5 * (1 - d), cpu

    _timed_run(folder, run_id, f"2026-01-0{day}T00:00:00Z", others, figures)


def test_a_cpus_1_run_is_labelled_with_its_limit_and_is_a_boundary(tmp_path):
    """Issue 54: a `--cpus 1` run read as unconstrained. Its label says the limit, and the
    change of limit is a boundary, never a step."""
    for i, cpus in enumerate((None, None, 1), start=1):
        rows = [
            total_row(run_id=f"r{i}", strategy="pipelined", repeat=k, wall_s=w, cpus=cpus)
            for k, w in enumerate((1.0, 1.01, 0.99) if cpus is None else (2.0, 2.02, 1.98))
        ]
        record = run_record(run_id=f"r{i}", started_utc=f"2026-01-0{i}T00:00:00Z", cpu_limit=cpus)
        with ResultsWriter(tmp_path / "here" / f"r{i}.jsonl") as w:
            w.write_many([record, *rows])
    results = read_results(tmp_path)
    assert steps(results) == []
    (boundary,) = boundaries(results)
    assert boundary.run_id == "r3" and "CPU limit - -> 1" in boundary.change
    assert list(points(results)["label"])[-1] == "2026-01-03 00:00 · 1 CPU"


# -- issue 71: figures from the rows, unstable said, configuration per run, the smallest step ----


def test_a_steps_figures_are_the_rows_either_side(tmp_path, capsys):
    """History said "1.79x -> 2.44x" where 2.44x was in no row: a step's before and after are
    the values of the last run before it and the first run after, as their rows show them."""
    _reruns(tmp_path)
    _neighboured(tmp_path, "r6", "2026-01-06T00:00:00Z", False, slower={"stream": 1.4}, jitter=0.99)
    results = read_results(tmp_path)
    (step,) = steps(results)
    rows = points(results)
    rows = rows[rows["strategy"] == "stream"].set_index("run_id")[TIME]
    assert (step.before, step.after) == pytest.approx((rows["r3"], rows["r6"]), rel=1e-12)
    assert main(["history", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    assert f"x ceiling (95% CI) {rows['r3']:.2f}x -> {rows['r6']:.2f}x: 1." in text


def test_four_reruns_two_beside_a_hog_and_a_planted_copy_of_a_quiet_one(tmp_path, capsys):
    """Issue 71's target: two quiet reruns, two beside a CPU hog, then a copy of a quiet run
    with stream 1.4x slower in wall and CPU time: found by history, and only it."""
    for i, (busy, jitter) in enumerate(((False, 1.0), (False, 1.02), (True, 1), (True, 1))):
        _neighboured(tmp_path, f"r{i + 1}", f"2026-01-0{i + 1}T00:00:00Z", busy, jitter=jitter)
    assert steps(read_results(tmp_path)) == []
    planted = {"stream": 1.4}
    _neighboured(tmp_path, "r5", "2026-01-05T00:00:00Z", False, planted, planted, jitter=1.02)
    (step,) = steps(read_results(tmp_path))
    assert (step.strategy, step.metric, step.run_id) == ("stream", TIME, "r5")


def test_unstable_moves_and_the_smallest_step_are_said_in_text_and_json(tmp_path, capsys):
    """Runs all beside other jobs, pread's wall alone 1.4x in the last (its CPU ratio unmoved):
    no step, "unstable (not a verdict)" in the text and `unstable` in the JSON; "no steps" says
    the smallest step the runs could have shown."""
    for i, others in enumerate((0.30, 0.35, 0.32), start=1):
        _shared(tmp_path, f"r{i}", i, others, 1.0)
    _shared(tmp_path, "r4", 4, 0.30, 1.0, planted=1.4, planted_cpu=1.0)
    assert main(["history", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    assert "unstable (not a verdict): x ceiling (95% CI)" in text
    assert "unstable: here gpt2 pread: " in text and "rerun on a quieter machine" in text
    (no_steps,) = [line for line in text.splitlines() if line.startswith("no steps")]
    assert re.search(
        r"the smallest step these runs could have shown: x ceiling \(95% CI\) 1\.\d\dx", no_steps
    )
    assert "smallest step its runs could show: x ceiling (95% CI) 1." in text
    assert main(["history", str(tmp_path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["steps"] == [] and [s["strategy"] for s in out["unstable"]] == ["pread"]
    smallest = {(r["strategy"], r["metric"]): r["factor"] for r in out["smallest_steps"]}
    assert smallest[("pread", TIME)] > 1.1 and smallest[("stream", PEAK)] >= 1.05


def test_a_series_header_shows_each_runs_configuration_where_they_differ(tmp_path, capsys):
    """A series header named one run's configuration ("CPU limit 1") over runs of which most
    ran unconstrained: each row says its own where they differ."""
    for i, cpus in enumerate((None, None, 1), start=1):
        rows = [
            total_row(run_id=f"r{i}", strategy="pipelined", repeat=k, wall_s=w, cpus=cpus)
            for k, w in enumerate((1.0, 1.01, 0.99))
        ]
        record = run_record(run_id=f"r{i}", started_utc=f"2026-01-0{i}T00:00:00Z", cpu_limit=cpus)
        with ResultsWriter(tmp_path / "here" / f"r{i}.jsonl") as w:
            w.write_many([record, *rows])
    assert main(["history", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    (header,) = [line for line in lines if line.startswith("  configuration: ")]
    assert "differs by run" in header and "CPU limit 1" not in header
    table = [line for line in lines if line.startswith("  2026-01-0")]
    assert table[0].endswith(" -") and table[1].endswith(" -"), table
    assert "CPU limit 1" in table[2], table
