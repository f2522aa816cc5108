"""`loadbench compare`: ratios per strategy with the repeats' spread; exit 1 only past the noise."""

from __future__ import annotations

import json

import pytest

from bench.analysis.compare import compare, parse_threshold
from bench.cli import main
from bench.errors import BenchError
from bench.records.results import read_results
from bench.records.schema import PhaseRecord
from bench.records.writer import ResultsWriter
from tests.records import run_record, total_row

MiB = 1 << 20
BASE_RSS = 300 * MiB
# strategy -> (peak over baseline in MiB, wall s) at the median; repeats jitter around them
COSTS = {"eager": (1800, 4.0), "stream": (600, 9.0), "floor": (520, 0.8)}


def _rows(
    run: str, walls: list[float], peaks: list[float], slower: dict[str, float]
) -> list[PhaseRecord]:
    out = []
    for strategy, (peak, wall) in COSTS.items():
        for i, (jw, jp) in enumerate(zip(walls, peaks, strict=True)):
            w = wall * jw * slower.get(strategy, 1.0)
            out.append(
                total_row(
                    run_id=run,
                    result_id=f"{run}-{strategy}-{i}",
                    strategy=strategy,
                    repeat=i,
                    checkpoint_bytes=548 * MiB,
                    largest_tensor_bytes=150 * MiB,
                    tensors=148,
                    baseline_rss_bytes=BASE_RSS,
                    peak_rss_bytes=int(BASE_RSS + peak * MiB * jp),
                    wall_s=w,
                )
            )
    return out


def _write(path, rows) -> str:
    with ResultsWriter(path) as w:
        w.write_many(rows)
    return str(path)


@pytest.fixture
def base(tmp_path) -> str:
    return _write(
        tmp_path / "base" / "m" / "r1.jsonl",
        _rows("r1", [1.00, 1.04, 0.97], [1.0, 1.01, 0.995], {}),
    )


def test_two_honest_repeats_pass(tmp_path, base, capsys):
    # the same run again: other jitter, medians within 3%, ranges overlapping
    new = _write(
        tmp_path / "new" / "m" / "r2.jsonl", _rows("r2", [1.02, 0.99, 1.05], [1.005, 0.99, 1.0], {})
    )
    assert main(["compare", base, new]) == 0
    out = capsys.readouterr().out
    assert "no regression" in out and "eager" in out


def test_one_strategy_made_20_percent_slower_fails(tmp_path, base, capsys):
    new = _write(
        tmp_path / "new.jsonl", _rows("r2", [1.02, 0.99, 1.05], [1.0, 1.0, 1.0], {"stream": 1.2})
    )
    assert main(["compare", base, new, "--max-regression", "5%", "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    verdicts = {r["strategy"]: (r["verdict"], r["wall_verdict"]) for r in out["rows"]}
    assert verdicts == {
        "eager": ("same", "same"),
        "floor": ("same", "same"),
        "stream": ("regressed", "regressed"),
    }
    stream = next(r for r in out["rows"] if r["strategy"] == "stream")
    assert stream["wall_ratio"] == pytest.approx(1.2 * 1.02 / 1.0, rel=0.01)
    assert (
        stream["wall_ratio_lo"] > 1 and out["regressed"] is True and out["max_regression"] == 0.05
    )


def test_a_change_inside_the_spread_is_not_a_regression(tmp_path):
    """Medians 8% apart, but the repeats overlap (0.8-1.3 vs 0.9-1.3): noise, not a regression."""
    base = read_results(
        _write(tmp_path / "b.jsonl", _rows("b", [0.8, 1.0, 1.3], [1, 1, 1], {}))
    ).phases
    new = read_results(
        _write(tmp_path / "n.jsonl", _rows("n", [0.9, 1.08, 1.3], [1, 1, 1], {}))
    ).phases
    table = compare(base, new, 0.05)
    assert (table["wall_ratio"] > 1.05).all() and (table["verdict"] == "same").all()
    assert (compare(base, new, 0.5)["verdict"] == "same").all()


def test_a_strategy_that_stopped_loading_is_broken(tmp_path, base):
    rows = [
        r if r.strategy != "eager" else PhaseRecord(**{**r.__dict__, "status": "crashed"})
        for r in _rows("r2", [1, 1, 1], [1, 1, 1], {})
    ]
    new = _write(tmp_path / "n.jsonl", rows)
    table = compare(read_results(base).phases, read_results(new).phases, 0.05)
    assert dict(zip(table["strategy"], table["verdict"], strict=True))["eager"] == "broken"


@pytest.mark.parametrize(
    ("text", "value"), [("5%", 0.05), ("1.05x", 0.05), ("12.5 %", 0.125), ("1.3×", 0.3)]
)
def test_threshold_forms(text, value):
    assert parse_threshold(text) == pytest.approx(value)


@pytest.mark.parametrize("bare", ["5", "0.05", "1.05"])
def test_a_bare_threshold_is_refused_naming_both_forms(tmp_path, base, capsys, bare):
    """`5` could be 5% or 5x (it read as 500% once, and the gate passed everything)."""
    with pytest.raises(BenchError, match=r"bare number.*5%.*1\.05x"):
        parse_threshold(bare)
    assert main(["compare", base, base, "--max-regression", bare]) == 2
    err = capsys.readouterr().err
    assert "5%" in err and "1.05x" in err and len(err.strip().splitlines()) == 1


def test_bad_threshold_and_missing_results_exit_2(tmp_path, base, capsys):
    assert main(["compare", base, base, "--max-regression", "five"]) == 2
    assert "--max-regression" in capsys.readouterr().err
    assert main(["compare", base, str(tmp_path / "nothing")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_a_strategy_missing_in_new_fails_and_is_listed(tmp_path, base, capsys):
    rows = [r for r in _rows("r2", [1.02, 0.99, 1.05], [1, 1, 1], {}) if r.strategy != "stream"]
    new = _write(tmp_path / "n.jsonl", rows)
    assert main(["compare", base, new, "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["missing_in_new"]["strategies"] == ["stream"] and out["regressed"] is True
    assert out["missing_in_base"]["combinations"] == []
    assert [r["strategy"] for r in out["failed"]] == ["stream"]
    assert main(["compare", base, new]) == 1
    text = capsys.readouterr().out
    assert "missing in new: strategies stream" in text and "FAILED: stream on gpt2" in text
    assert main(["compare", base, new, "--allow-missing"]) == 0
    assert "missing in new: strategies stream" in capsys.readouterr().out
    # and the other way round: a strategy only NEW has is listed, and passes
    assert main(["compare", new, base, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["missing_in_base"]["strategies"] == ["stream"]


def test_a_line_deleted_by_hand_from_new_fails(tmp_path, base, capsys):
    new = tmp_path / "n.jsonl"
    _write(new, _rows("r2", [1.02, 0.99, 1.05], [1, 1, 1], {}))
    lines = new.read_text().splitlines(keepends=True)
    new.write_text("".join(line for line in lines if '"strategy":"eager"' not in line))
    assert len(new.read_text().splitlines()) < len(lines)  # the edit took
    assert main(["compare", base, str(new)]) == 1
    assert "eager on gpt2 (missing in new)" in capsys.readouterr().out


def test_one_repeat_a_side_never_calls_a_regression(tmp_path, capsys):
    base = _write(tmp_path / "b.jsonl", _rows("b", [1.0], [1.0], {}))
    new = _write(tmp_path / "n.jsonl", _rows("n", [1.0], [1.0], {"stream": 1.5}))
    assert main(["compare", base, new, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    stream = next(r for r in out["rows"] if r["strategy"] == "stream")
    assert stream["wall_ratio"] == pytest.approx(1.5) and stream["verdict"] == "too few repeats"
    assert {r["strategy"] for r in out["too_few_repeats"]} == set(COSTS)
    assert main(["compare", base, new]) == 0
    assert "too few repeats to call a regression" in capsys.readouterr().out


def test_the_times_interval_and_p_are_shown(tmp_path, base, capsys):
    new = _write(tmp_path / "n.jsonl", _rows("r2", [1.02, 0.99, 1.05], [1, 1, 1], {"stream": 1.2}))
    assert main(["compare", base, new, "--json"]) == 1
    rows = {r["strategy"]: r for r in json.loads(capsys.readouterr().out)["rows"]}
    # Welch's t on the logarithms: stream 1.2x slower, far beyond the 3% jitter of the repeats
    assert rows["stream"]["wall_p"] < 0.01 and rows["stream"]["wall_ratio_lo"] > 1.05
    assert rows["eager"]["wall_p"] > 0.05 and rows["stream"]["wall_basis"] == "wall"
    main(["compare", base, new])
    assert "95% CI" in capsys.readouterr().out


def _paired(rows: list[PhaseRecord], machine: float, jitter: list[float]) -> list[PhaseRecord]:
    """`rows` with a reference beside each repeat on a machine `machine` times slower (its walls
    too), the reference jittering as `jitter` says."""
    out = []
    for r in rows:
        reference = 0.5 * machine * jitter[r.repeat]
        wall = r.wall_s * machine * jitter[r.repeat]
        out.append(
            PhaseRecord(
                **{**r.__dict__, "wall_s": wall, "reference_s": reference}
                | {"paired_ratio": wall / reference}
            )
        )
    return out


def test_a_slower_machine_on_one_side_is_no_regression_on_paired_times(tmp_path, capsys):
    """NEW ran on a machine 1.6x slower (another process beside it): every wall is 1.6x, and so
    is the reference timed beside each repeat. Judged on walls it would be a regression of every
    strategy; on the paired ratios it is none."""
    jitter = [1.0, 1.05, 0.96]
    base = _write(
        tmp_path / "b.jsonl", _paired(_rows("b", [1, 1.02, 0.98], [1, 1, 1], {}), 1, jitter)
    )
    new = _write(
        tmp_path / "n.jsonl", _paired(_rows("n", [1.01, 0.99, 1.0], [1, 1, 1], {}), 1.6, jitter)
    )
    assert main(["compare", base, new, "--json"]) == 0
    rows = {r["strategy"]: r for r in json.loads(capsys.readouterr().out)["rows"]}
    assert all(r["wall_basis"] == "paired" and r["wall_verdict"] == "same" for r in rows.values())
    assert rows["stream"]["wall_new"] > 1.5 * rows["stream"]["wall_base"]  # the seconds moved


def test_a_planted_regression_is_found_beside_a_slower_machine(tmp_path, capsys):
    """stream made 1.3x slower on NEW, which also ran on a machine 1.6x slower: found, and only
    stream (a gate on walls would flag every strategy)."""
    jitter = [1.0, 1.05, 0.96]
    base = _write(
        tmp_path / "b.jsonl", _paired(_rows("b", [1, 1.02, 0.98], [1, 1, 1], {}), 1, jitter)
    )
    slow = _rows("n", [1.01, 0.99, 1.0], [1, 1, 1], {"stream": 1.3})
    new = _write(tmp_path / "n.jsonl", _paired(slow, 1.6, jitter))
    assert main(["compare", base, new, "--max-regression", "5%", "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert [r["strategy"] for r in out["failed"]] == ["stream"]
    stream = next(r for r in out["rows"] if r["strategy"] == "stream")
    assert stream["wall_ratio"] == pytest.approx(1.3, rel=0.03) and stream["wall_ratio_lo"] > 1.05


def test_markdown_is_a_table_a_pr_comment_can_take(tmp_path, base, capsys):
    new = _write(tmp_path / "n.jsonl", _rows("r2", [1.02, 0.99, 1.05], [1, 1, 1], {"stream": 1.2}))
    assert main(["compare", base, new, "--format", "markdown"]) == 1
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].startswith("### loadbench compare: **FAILED**")
    table = [line for line in lines if line.startswith("|")]
    assert table[0] == (
        "| shapes | strategy | ok repeats | peak base -> new | peak | wall base -> new | time "
        "| verdict |"
    )
    assert table[1] == "|---|---|---|---|---|---|---|---|" and len(table) == 2 + len(COSTS)
    assert any("stream" in row and "**regressed**" in row for row in table)


def test_json_is_json_when_the_runs_share_nothing_or_the_input_is_bad(tmp_path, base, capsys):
    rows = [PhaseRecord(**{**r.__dict__, "shapes": "sa3"}) for r in _rows("r2", [1], [1], {})]
    new = _write(tmp_path / "n.jsonl", rows)
    assert main(["compare", base, new, "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["missing_in_new"]["shapes"] == ["gpt2"] and out["missing_in_base"]["shapes"] == [
        "sa3"
    ]
    assert main(["compare", base, str(tmp_path / "nothing"), "--json"]) == 2
    assert "does not exist" in json.loads(capsys.readouterr().out)["error"]


def test_the_threshold_range_is_named():
    with pytest.raises(BenchError, match="less than 1000%"):
        parse_threshold("1000%")


def test_a_strategy_skipped_on_both_sides_is_skipped_not_same(tmp_path, capsys):
    def side(run):
        rows = _rows(run, [1.0, 1.02, 0.98], [1.0, 1.0, 1.0], {})
        rows.append(
            total_row(
                run_id=run,
                strategy="fastsafetensors",
                kind="peer",
                status="skipped",
                wall_s=None,
                peak_rss_bytes=None,
                error="needs fastsafetensors",
            )
        )
        rows.append(total_row(run_id=run, strategy="broken", status="crashed", wall_s=None))
        return _write(tmp_path / run / "m" / f"{run}.jsonl", rows)

    base, new = side("r1"), side("r2")
    table = compare(read_results(base).phases, read_results(new).phases, 0.05)
    verdicts = dict(zip(table["strategy"], table["verdict"], strict=True))
    assert verdicts["fastsafetensors"] == "skipped" and verdicts["broken"] == "failed on both"
    assert verdicts["eager"] == "same"
    assert main(["compare", base, new]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if "fastsafetensors" in x)
    assert line.rstrip().endswith("skipped")


def _neighbour(rows, others: float, slowed: dict[str, float], cpu: dict[str, float] | None = None):
    """`rows` with a reference beside each repeat (0.5 s, 1 CPU-s) on a machine where other
    processes took `others` of the CPUs: each strategy's wall slowed by `slowed` (its threads
    decide how much), the all-thread reference by 1.5x; CPU seconds as `cpu` says (1 s)."""
    cpu = cpu or {}
    out = []
    for r in rows:
        reference = 0.5 * (1.5 if others > 0.3 else 1.0)
        wall = r.wall_s * slowed.get(r.strategy, 1.0)
        cpu_s = r.wall_s * cpu.get(r.strategy, 1.0)
        fields = {"wall_s": wall, "reference_s": reference, "paired_ratio": wall / reference}
        fields |= {"cpu_s": cpu_s, "reference_cpu_s": 1.0, "cpu_ratio": cpu_s}
        out.append(PhaseRecord(**{**r.__dict__, **fields, "others_cpu_fraction": others}))
    return out


def test_a_cpu_heavy_neighbour_on_one_side_shows_cpu_time_and_gives_no_verdict(tmp_path, capsys):
    """NEW ran beside `stress-ng --cpu 1` (others took 47% of the CPUs): the two-thread stream
    slowed 1.34x, the one-thread eager and floor not at all, and the all-thread reference 1.5x.
    The ratio shown is the CPU ratio's (no wall reference holds for every strategy), but a
    neighbour moves CPU time too (identical code, 1.23x apart beside a busy loop on a 2-core
    VM), so no time on that side is a verdict: even 1.3x more CPU work in stream is `unstable`,
    exit 0, and fails under --strict."""
    base = _neighbour(_rows("b", [1, 1.02, 0.98], [1, 1, 1], {}), 0.03, {})
    slowed = {"stream": 1.34}
    quiet, busy = tmp_path / "b.jsonl", tmp_path / "n.jsonl"
    _write(quiet, base)
    _write(busy, _neighbour(_rows("n", [1.01, 0.99, 1.0], [1, 1, 1], {}), 0.47, slowed))
    assert main(["compare", str(quiet), str(busy), "--json"]) == 0
    rows = {r["strategy"]: r for r in json.loads(capsys.readouterr().out)["rows"]}
    assert {r["wall_basis"] for r in rows.values()} == {"cpu"}
    assert all(r["wall_difference"].startswith("same") for r in rows.values())
    assert {r["verdict"] for r in rows.values()} == {"unstable"}
    planted = tmp_path / "p.jsonl"
    more = _neighbour(_rows("p", [1.01, 0.99, 1.0], [1, 1, 1], {}), 0.47, slowed, {"stream": 1.3})
    _write(planted, more)
    assert main(["compare", str(quiet), str(planted), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    stream = next(r for r in out["unstable"] if r["strategy"] == "stream")
    assert stream["wall_difference"].startswith("1.30x slower") and out["failed"] == []
    assert stream["others_base"] == pytest.approx(0.03) and stream["others_new"] == 0.47
    assert main(["compare", str(quiet), str(planted), "--strict", "--json"]) == 1
    assert "stream" in [r["strategy"] for r in json.loads(capsys.readouterr().out)["failed"]]


def test_a_faster_time_is_named_faster_with_its_interval_never_same(tmp_path, base, capsys):
    """Issue 54: `0.83x (CI 0.72-0.96)` was printed as "same". An interval that leaves out 1 is
    a difference, said as a relative speed with its interval, and is no regression."""
    new = _write(
        tmp_path / "n.jsonl", _rows("r2", [1.02, 0.99, 1.05], [1, 1, 1], {"stream": 1 / 1.2})
    )
    assert main(["compare", base, new, "--json"]) == 0
    rows = {r["strategy"]: r for r in json.loads(capsys.readouterr().out)["rows"]}
    stream = rows["stream"]
    assert stream["wall_ratio_hi"] < 1 and stream["wall_verdict"] == "faster"
    assert stream["verdict"] == "faster" and rows["eager"]["verdict"] == "same"
    assert stream["wall_difference"].startswith(f"{1 / stream['wall_ratio']:.2f}x faster (95% CI")
    assert main(["compare", base, new]) == 0
    text = capsys.readouterr().out
    assert "x faster (95% CI" in text and "9.00 s -> 7.65 s" in text


def _folder(tmp_path, name, rows, **run) -> str:
    """A results folder with a run record (`run`: its fields) and `rows`."""
    path = tmp_path / name / "m" / f"{rows[0].run_id}.jsonl"
    with ResultsWriter(path) as w:
        w.write_many([run_record(run_id=rows[0].run_id, **run), *rows])
    return str(tmp_path / name)


def test_a_cpus_1_run_against_an_unconstrained_one_is_no_regression(tmp_path, capsys):
    """Issue 54: `compare` failed a `--cpus 1` run against an unconstrained one as a regression
    without a word about the configuration. Now nothing is comparable: refused, with why."""
    base = _folder(tmp_path, "base", _rows("r1", [1.0, 1.04, 0.97], [1, 1, 1], {}))
    one_cpu = [
        PhaseRecord(**{**r.__dict__, "cpus": 1})
        for r in _rows("r2", [1.5, 1.52, 1.49], [1, 1, 1], {})
    ]
    new = _folder(tmp_path, "new", one_cpu, cpu_limit=1.0, git_commit="def5678")
    assert main(["compare", base, new]) == 2
    err = capsys.readouterr().err
    assert "different configurations (CPU limit - -> 1)" in err and "regress" not in err
    assert main(["compare", base, new, "--json"]) == 2
    assert "no combination is comparable" in json.loads(capsys.readouterr().out)["error"]


def test_a_changed_budget_sets_apart_only_the_strategy_it_bounds(tmp_path, capsys):
    """stream ran under another --budget in NEW (and slower): not comparable, named with what
    changed; the others are judged; the gate passes on what is comparable."""
    base_rows = [
        PhaseRecord(**{**r.__dict__, "budget_bytes": 256 * MiB if r.strategy == "stream" else None})
        for r in _rows("r1", [1.0, 1.04, 0.97], [1, 1, 1], {})
    ]
    new_rows = [
        PhaseRecord(**{**r.__dict__, "budget_bytes": 32 * MiB if r.strategy == "stream" else None})
        for r in _rows("r2", [1.02, 0.99, 1.05], [1, 1, 1], {"stream": 1.5})
    ]
    base = _folder(tmp_path, "base", base_rows, git_commit="abc1234")
    new = _folder(tmp_path, "new", new_rows, budget_bytes=32 * MiB, git_commit="def5678")
    assert main(["compare", base, new]) == 0
    out = capsys.readouterr().out
    assert "not comparable: stream on gpt2: the configuration changed (budget 256 MiB -> " in out
    assert "commit abc1234" in out and "commit def5678" in out and "budget 32.0 MiB" in out
    assert main(["compare", base, new, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    rows = {r["strategy"]: r for r in out["rows"]}
    assert rows["stream"]["verdict"] == "not comparable" and rows["eager"]["verdict"] == "same"
    (apart,) = out["not_comparable"]
    assert apart["strategy"] == "stream" and apart["change"].startswith("budget 256 MiB -> ")


def test_a_partial_folder_is_refused_unless_allowed(tmp_path, base, capsys):
    """Issue 54: `compare` (the CI gate) warned about a truncated folder and exited 0. Now it
    refuses it, naming what is lost; with --allow-partial it judges and says what was skipped."""
    rows = _rows("r2", [1.02, 0.99, 1.05], [1, 1, 1], {})
    new = _folder(tmp_path, "new", rows)
    with open(next((tmp_path / "new").rglob("*.jsonl")), "a") as fh:
        fh.write('{"schema_version": 2, "record": "pha')  # a write cut short by a kill
    assert main(["compare", base, new]) == 2
    err = capsys.readouterr().err
    assert "holds part of a run only" in err and "--allow-partial" in err
    assert main(["compare", base, new, "--allow-partial"]) == 0
    captured = capsys.readouterr()
    assert "answering from part of a run (--allow-partial): 1 file(s) or line(s)" in captured.err
    assert "no regression" in captured.out


def test_a_slowdown_between_two_runs_beside_a_neighbour_is_unstable_not_a_failure(tmp_path, capsys):
    """Issue 71: two runs of identical code, both beside a CPU hog (46% and 47% of the CPUs),
    orbax 1.23x slower on NEW in wall and in CPU time alike (its CPU ratio moved too, which
    the old rule took for the code's doing): "unstable", no verdict, exit 0, with the shares
    that made it so in the text, the markdown and the JSON; exit 1 under --strict."""
    both = {"stream": 1.23}
    base = _neighbour(_rows("b", [1, 1.02, 0.98], [1, 1, 1], {}), 0.46, {})
    new = _neighbour(_rows("n", [1.01, 0.99, 1.0], [1, 1, 1], {}), 0.47, both, both)
    a, b = _write(tmp_path / "b.jsonl", base), _write(tmp_path / "n.jsonl", new)
    assert main(["compare", a, b, "--max-regression", "5%", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    rows = {r["strategy"]: r for r in out["rows"]}
    assert rows["stream"]["wall_basis"] == "paired" and rows["stream"]["verdict"] == "unstable"
    assert rows["stream"]["cpu_difference"].startswith("1.23x slower")
    assert out["failed"] == [] and not out["regressed"]
    (stream,) = [r for r in out["unstable"] if r["strategy"] == "stream"]
    assert (
        stream["why"]
        == "other processes took 46% (base), 47% (new) of the CPUs (over 25% on a side)"
    )
    assert main(["compare", a, b, "--max-regression", "5%"]) == 0
    text = capsys.readouterr().out
    assert "unstable: stream on gpt2: time 1.23x slower (95% CI" in text
    assert "47% (new) of the CPUs" in text and "no regression" in text
    assert main(["compare", a, b, "--format", "markdown"]) == 0
    markdown = capsys.readouterr().out
    assert "**unstable**" in markdown and "46% (base), 47% (new)" in markdown
    assert main(["compare", a, b, "--strict", "--json"]) == 1
    assert "stream" in [r["strategy"] for r in json.loads(capsys.readouterr().out)["failed"]]
    # the same move between quiet runs is a regression, as before
    quiet = _neighbour(_rows("q", [1, 1.02, 0.98], [1, 1, 1], {}), 0.02, both, both)
    q = _write(tmp_path / "q.jsonl", quiet)
    calm = _write(
        tmp_path / "c.jsonl", _neighbour(_rows("c", [1, 1.02, 0.98], [1, 1, 1], {}), 0.02, {})
    )
    assert main(["compare", calm, q, "--json"]) == 1
    assert [r["strategy"] for r in json.loads(capsys.readouterr().out)["failed"]] == ["stream"]


def test_identical_runs_pass_and_a_planted_1_4x_slowdown_fails(tmp_path, capsys):
    """A copy of a quiet run passes against it; the copy with stream 1.4x slower in wall and CPU
    time fails (the gate is as strict as ever where neither side was shared)."""
    rows = _neighbour(_rows("b", [1, 1.02, 0.98], [1, 1, 1], {}), 0.02, {})
    a = _write(tmp_path / "a" / "m" / "b.jsonl", rows)
    b = _write(tmp_path / "b" / "m" / "b.jsonl", rows)
    assert main(["compare", a, b, "--max-regression", "5%"]) == 0
    capsys.readouterr()
    planted = _neighbour(
        _rows("p", [1, 1.02, 0.98], [1, 1, 1], {}), 0.02, {"stream": 1.4}, {"stream": 1.4}
    )
    p = _write(tmp_path / "p.jsonl", planted)
    assert main(["compare", a, p, "--max-regression", "5%", "--json"]) == 1
    assert [r["strategy"] for r in json.loads(capsys.readouterr().out)["failed"]] == ["stream"]


def test_the_dashboard_says_why_a_time_is_unstable(tmp_path):
    """The Compare page's boxes carry compare's reason: the share other processes took."""
    from bench.records.results import read_folders
    from dashboard.comparison import compared

    both = {"stream": 1.23}
    base = _neighbour(_rows("b", [1, 1.02, 0.98], [1, 1, 1], {}), 0.46, {})
    new = _neighbour(_rows("n", [1.01, 0.99, 1.0], [1, 1, 1], {}), 0.47, both, both)
    _write(tmp_path / "b.jsonl", base)
    _write(tmp_path / "n.jsonl", new)
    results = read_folders([tmp_path])
    boxes = compared(results, "b", "n", 0.05).said
    (busy,) = [text for box, text in boxes if text.startswith("Times unstable")]
    assert "`stream` on `gpt2`: other processes took 46% (base), 47% (new)" in busy
