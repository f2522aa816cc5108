"""Verdicts that say what they are (issue 53, part 4; issue 54), on every surface that words the
decision: `bench.analysis.decision_words`, the bench summary's `use X` line and `recommend` (text
and `--json`).

- One run each: "one run: not judged on time", never "ties"; the pick is by what can be judged
  (the lighter beyond the noise), and the sentence says time was not judged.
- Peers are candidates everywhere (issue 54): a peer that wins is named first, with its host RAM
  peak (and device peak where measured), then the best of loadbench's own.
- Several repeats each: the tie rule (the one rule for "different?", Welch's interval of the
  ratio: `bench.analysis.difference`), word for word.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from bench.analysis.advice import Advice, AdviceInputs, advise, sentences, to_json
from bench.analysis.decision_words import ONE_RUN, details, sentence, why
from bench.analysis.fit import FitModel
from bench.analysis.judge import PAIRED, Candidate, Decision, TargetHost, decide
from bench.analysis.recommend import StrategyPrediction, TargetCheckpoint, rank
from bench.analysis.summary import json_decisions, tables
from bench.intervals import instability, interval, spread_text
from bench.records.results import read_results
from bench.records.schema import to_json_line
from bench.vocabulary import FITS
from loader.vocabulary import PEER, STRATEGY
from tests.records import run_record, total_row
from tests.unit.test_judge import _model as tie_model

MiB, GiB = 1 << 20, 1 << 30


def _measured(name: str, walls: list[float], peak: float = GiB) -> Candidate:
    iv = interval([w / 2 for w in walls])
    return Candidate(name, walls[len(walls) // 2], iv, peak)


def choose(candidates: list[Candidate]) -> Decision:
    return decide(candidates, TargetHost(64 * GiB, 1), PAIRED)


# -- the rule's sentence --------------------------------------------------------------------------


def test_one_run_each_is_not_judged_on_time_and_never_ties():
    """The TPU host's llama3-8b rows, one run each: pipelined 6.56 s at 0.03x, builder 25.43 s
    at 0.07x. Today's sentence said they "tie on time"; one run has no interval."""
    pipelined = _measured("pipelined", [6.56], peak=0.5 * GiB)
    builder = _measured("builder", [25.43], peak=1.0 * GiB)
    chosen = choose([pipelined, builder])
    said = why(chosen)
    assert ONE_RUN == "one run: not judged on time" and ONE_RUN in said
    assert "ties" not in said and "intervals overlap" not in said
    assert chosen.tied == () and chosen.unjudged == ("builder",)
    assert chosen.pick == "pipelined" and not chosen.judged_on_time
    assert "pipelined is the lightest (512 MiB against 1.00 GiB)" in said
    assert said.endswith("so it is named on memory")
    out = chosen.to_json()
    assert out["judged_on_time"] is False and out["tied"] == []
    assert out["not_judged_on_time"] == ["builder"]


def test_one_run_with_no_lighter_peak_says_the_time_was_not_judged():
    a = _measured("a", [2.0], peak=GiB)
    b = _measured("b", [3.0], peak=GiB + 4096)  # as light: allocator noise
    said = why(choose([b, a]))
    assert said.startswith("a (2.00 s, 1 run) against b (3.00 s, 1 run): " + ONE_RUN)
    assert "as light: a 1.00 GiB, b 1.00 GiB, so the fastest of them is named, a" in said
    assert said.endswith("(time was not judged)")
    assert "ties" not in said


def test_several_runs_keep_todays_tie_rule():
    fast = _measured("hostcast", [2.30, 2.34, 2.38], peak=349 * MiB)
    light = _measured("pipelined", [2.32, 2.40, 2.48], peak=316 * MiB)
    far = _measured("eager", [6.0, 6.1, 6.2])
    chosen = choose([fast, light, far])
    said = why(chosen)
    assert chosen.judged_on_time and chosen.unjudged == ()
    assert chosen.tied == ("hostcast",)
    assert said.startswith("pipelined (2.40 s; 1.20x ceiling, 95% CI")
    assert "ties on time with hostcast (2.34 s; " in said
    assert (
        ": the 95% interval of their ratio holds 1 (hostcast 0.98x, 95% CI 0.91-1.05); pipelined "
        "is the lightest (316 MiB against 349 MiB)"
    ) in said
    assert ONE_RUN not in said and "on memory" not in said
    apart = choose([_measured("a", [1.0, 1.01, 1.02]), _measured("b", [3.0, 3.01, 3.02])])
    assert apart.judged_on_time and "is faster than b (" in why(apart)
    assert why(apart).endswith(
        "is faster than b (3.01 s; 1.50x ceiling, 95% CI 1.49-1.52x): "
        "2.98x faster (95% CI 2.92-3.05)"
    )


# -- the bench summary's `use X` line ------------------------------------------------------------

CKPT = 2 * GiB


def _rows(repeats: int, peer_wall: float) -> list:
    """sa3 on the TPU host, scaled: builder fast and light, pipelined slower, the peer mmap-put
    holding the whole file (1.01x) on a 45 GiB host."""

    def row(strategy: str, wall: float, over: float, kind: str, i: int):
        return total_row(
            run_id="r1",
            strategy=strategy,
            kind=kind,
            repeat=i,
            checkpoint_bytes=CKPT,
            largest_tensor_bytes=CKPT // 8,
            baseline_rss_bytes=300 * MiB,
            peak_rss_bytes=int(300 * MiB + over * CKPT),
            wall_s=wall + 0.01 * i,
            device_peak_bytes=int(1.06 * GiB * 2),
        )

    out = []
    for i in range(repeats):
        out += [
            row("pipelined", 5.67, 0.20, STRATEGY, i),
            row("builder", 2.60, 0.04, STRATEGY, i),
            row("mmap-put", peer_wall, 1.01, PEER, i),
        ]
    return out


def _use_line(tmp_path: Path, repeats: int, peer_wall: float) -> tuple[str, str]:
    """The summary's last line (the sentence), and the details behind it (`--json`'s)."""
    path = tmp_path / "run.jsonl"
    records = [run_record(run_id="r1", ram_bytes=45 * GiB), *_rows(repeats, peer_wall)]
    path.write_text("".join(to_json_line(r) + "\n" for r in records))
    results = read_results(path)
    (decision,) = json_decisions(results)
    line = tables(results).rstrip("\n").splitlines()[-1]  # the decision, last
    assert line == decision["sentence"]
    return line, decision["details"]


def test_the_summary_weighs_peers_and_with_one_run_names_the_lightest(tmp_path):
    """One run each: the peer mmap-put is a candidate like ours (issue 54); nothing is judged on
    time, so the lightest beyond the noise, builder, is named on memory."""
    line, details = _use_line(tmp_path, repeats=1, peer_wall=1.04)
    assert line == (
        "use builder on 45.0 GiB, 1 device: 382 MiB peak, 2.12 GiB on the device, 2.60 s; "
        "mmap-put and pipelined: one run, not judged on time"
    )
    assert (
        "builder (2.60 s, 1 run) against mmap-put (1.04 s, 1 run), pipelined (5.67 s, 1 run)"
        in details
    )
    assert ONE_RUN in details and "ties" not in line + details
    assert details.endswith(
        "builder is the lightest (382 MiB against 2.31 GiB, 710 MiB), by the 95% interval of "
        "their peaks' ratio, so it is named on memory"
    )


def test_the_summary_names_a_winning_peer_with_its_costs_then_loadbenchs_best(tmp_path):
    line, details = _use_line(tmp_path, repeats=3, peer_wall=9.0)  # a peer slower than ours
    assert line == (
        "use builder on 45.0 GiB, 1 device: 382 MiB peak, 2.12 GiB on the device, 2.61 s; "
        "2.18x faster than pipelined"
    )
    assert "builder (2.61 s, 95% CI" in details and "is faster than pipelined" in details
    assert "a peer" not in line and "left out" not in line and ONE_RUN not in details
    faster, details = _use_line(tmp_path, repeats=3, peer_wall=1.04)
    assert faster.startswith(
        "mmap-put (a peer) is the pick on 45.0 GiB, 1 device: 2.31 GiB peak, 2.12 GiB on the "
        "device, 1.05 s; 2.49x faster than builder"
    )
    assert faster.endswith(
        "; of loadbench's own, use builder: 382 MiB peak, 2.12 GiB on the device, 2.61 s"
    )
    assert "mmap-put (1.05 s, 95% CI 1." in details
    own = details.index(
        "; of loadbench's own strategies, use builder (382 MiB peak, 2.12 GiB device peak)"
    )
    assert "builder (2.61 s, 95% CI" in details[own:]


# -- `recommend`: text and --json ----------------------------------------------------------------


def _model(half: float, repeats: int) -> FitModel:
    """A fitted model whose time interval is +-`half` around 1 (`test_ties`' helper)."""
    return tie_model(1 - half, 1 + half, repeats)


def _pred(name: str, wall: float, peak: int, repeats: int = 3) -> StrategyPrediction:
    return StrategyPrediction(name, peak, wall, _model(0.02, repeats), FITS, 45 * GiB - peak)


def _advice(preds: list[StrategyPrediction], peers: list[str]) -> Advice:
    inputs = AdviceInputs(
        shapes="t", host_ram_bytes=45 * GiB, devices=None, results="f", cache="warm"
    )
    rec = rank(preds, [])
    return Advice(inputs, TargetCheckpoint(GiB, GiB // 10, 10), rec, None, None, [], peers)


def test_recommend_with_one_run_says_so_in_text_and_json():
    adv = _advice(
        [
            _pred("pipelined", 6.56, int(0.5 * GiB), repeats=1),
            _pred("builder", 25.43, int(1.1 * GiB), repeats=1),
        ],
        [],
    )
    said = sentences(adv)
    (told,) = [s for s in said if "builder: one run, not judged on time" in s]
    assert not [s for s in said if "ties" in s]
    out = to_json(adv)
    details = out["decision"]["details"]
    assert "pipelined (6.56 s, 1 run) against builder (25.43 s, 1 run): " + ONE_RUN in details
    assert out["recommended"] == "pipelined" and out["judged_on_time"] is False
    assert out["not_judged_on_time"] == ["builder"] and out["ties"] == []
    assert out["decision"]["judged_on_time"] is False
    assert out["decision"]["sentence"] + "." == told
    several = to_json(_advice([_pred("a", 10.0, GiB), _pred("b", 10.1, GiB)], []))
    assert several["judged_on_time"] is True and several["ties"] == ["b"]


def test_recommend_names_a_faster_peer_with_its_cost_then_loadbenchs_best():
    adv = _advice(
        [
            _pred("mmap-put", 1.04, int(2.6 * GiB)),
            _pred("builder", 2.60, int(0.4 * GiB)),
            _pred("pipelined", 5.67, int(0.7 * GiB)),
        ],
        ["mmap-put"],
    )
    said = sentences(adv)
    (peer,) = [s for s in said if "a peer" in s]
    assert peer == said[0]  # peers are candidates (issue 54)
    assert peer == (
        "mmap-put (a peer) is the pick on 45.0 GiB: 2.60 GiB peak, 1.04 s; 2.50x faster than "
        "builder; of loadbench's own, use builder: 410 MiB peak, 2.60 s."
    )
    out = to_json(adv)
    assert (
        "mmap-put (1.04 s, 95% CI 1.02-1.06 s) is faster than builder (2.60 s, 95% CI 2.55-2.65 s):"
        " 2.50x faster (95% CI 2.45-2.55); of loadbench's own "
        "strategies, use builder (410 MiB peak): builder (2.60 s, "
    ) in out["decision"]["details"]
    assert out["recommended"] == "mmap-put" and out["peers"] == ["mmap-put"]
    assert out["fastest_peer"]["strategy"] == "mmap-put"
    assert out["fastest_peer"]["peak_bytes"] == int(2.6 * GiB)
    assert out["best_own"] == "builder" and out["decision"]["own"]["pick"] == "builder"
    mixed = _advice(
        [_pred("mmap-put", 1.04, int(2.6 * GiB)), _pred("builder", 2.60, GiB, repeats=1)],
        ["mmap-put"],
    )
    first = sentences(mixed)[0]  # one run of builder: not judged on time; named on memory
    assert first.startswith("use builder on 45.0 GiB: 1.00 GiB peak, 2.60 s")
    assert "mmap-put: one run, not judged on time" in first
    assert "a peer" not in first
    slower = _advice([_pred("mmap-put", 9.0, GiB), _pred("builder", 2.6, GiB)], ["mmap-put"])
    assert to_json(slower)["fastest_peer"] is None
    assert not [s for s in sentences(slower) if "a peer" in s]


def test_advise_takes_the_peers_from_the_rows_kind(tmp_path):
    rows = []
    for shapes, ckpt in (("mid", 500 * MiB), ("big", 1000 * MiB)):
        for i in range(2):
            for name, kind, per_byte, over in (
                ("mmap-put", PEER, 2e9, 1.0),
                ("builder", STRATEGY, 1e9, 0.1),
            ):
                rows.append(
                    total_row(
                        result_id=f"{name}-{shapes}-{i}",
                        shapes=shapes,
                        strategy=name,
                        kind=kind,
                        repeat=i,
                        checkpoint_bytes=ckpt,
                        largest_tensor_bytes=ckpt // 10,
                        tensors=10,
                        baseline_rss_bytes=300 * MiB,
                        peak_rss_bytes=int(300 * MiB + over * ckpt),
                        wall_s=ckpt / per_byte + 0.01 * i,
                    )
                )
    path = tmp_path / "run.jsonl"
    path.write_text("".join(to_json_line(r) + "\n" for r in rows))
    target = TargetCheckpoint(2 * GiB, 200 * MiB, 100)
    adv = advise(read_results(path), target, 45 * GiB, None, shapes="t", folder=str(tmp_path))
    assert adv.peers == ["mmap-put"] and adv.rec.recommended == "mmap-put"
    out = to_json(adv)
    assert out["fastest_peer"]["strategy"] == "mmap-put" and out["best_own"] == "builder"
    assert any("of loadbench's own, use builder" in s for s in out["notes"])


def test_a_spread_just_past_five_percent_never_reads_as_five_percent():
    """`unstable: 95% CI ±5% (wanted ±5%)` said nothing: below 10% the spread has one decimal."""
    ratios = [1.793, 1.859, 1.928, 2.0, 2.074, 2.151, 2.231, 1.887, 2.12, 2.0]  # ±5.1%
    half = interval(ratios).half_width
    assert 0.05 < half < 0.055
    why = instability(ratios)
    assert why is not None
    assert f"95% CI ±{half:.1%} after 10 repeats (wanted ±5%)" in str(why), why
    assert spread_text(0.134) == "±13%"


def test_a_pick_called_apart_on_unstable_times_claims_no_speed_ratio():
    """Issue 71: the 2-device sentence said "1.84x faster than sharded (2 processes); times
    unstable: no time verdict": a speed claim and no verdict in one breath. Where the pick's or
    the runner-up's time is unstable it says only that the pick came ahead as measured (the
    ratio stays in the details); where both are stable and only a candidate not weighed against
    the pick is unstable, the ratio stands and nothing says "no time verdict"."""
    wide = "unstable: 95% CI ±11% after 6 repeats (wanted ±5%)"
    dir_ = replace(_measured("sharded-dir", [0.43, 0.47, 0.56], 0.9 * GiB), unstable=wide)
    sharded = replace(_measured("sharded", [0.80, 0.88, 1.11], 0.9 * GiB), unstable=wide)
    chosen = choose([dir_, sharded])
    assert (chosen.pick, chosen.runner_up) == ("sharded-dir", "sharded")
    said = sentence(chosen)
    assert said.endswith("; ahead of sharded as measured; times unstable: no time verdict")
    assert "faster" not in said and len(said.split("; ")[0]) <= 120 and len(said) <= 300
    assert "is faster than sharded" in details(chosen)
    steady = _measured("sharded-dir", [0.46, 0.47, 0.48], 0.9 * GiB)
    far = replace(_measured("eager", [2.0, 3.0, 4.0], 0.9 * GiB), unstable=wide)
    said = sentence(choose([steady, _measured("sharded", [0.87, 0.88, 0.89], 0.9 * GiB), far]))
    assert said.endswith("x faster than sharded") and "no time verdict" not in said
