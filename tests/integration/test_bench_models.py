"""`bench run --model port|transposed` and `--compile`: real children on tiny-gpt2, rows that say
what model was loaded, a compile phase beside pipelined's reads, the persistent cache's hit/miss.
"""

from __future__ import annotations

import pytest

from bench.cli import main
from bench.records.results import read_results
from bench.run.config import RunConfig
from bench.run.runner import run_bench
from bench.vocabulary import OK
from loader.vocabulary import COMPILE, TOTAL


@pytest.fixture
def bench_env(monkeypatch, tmp_path_factory):
    monkeypatch.setenv("LOADBENCH_CACHE", str(tmp_path_factory.getbasetemp() / "lbcache"))


def _run(tmp_path, **kw):
    config = RunConfig(
        shapes=["tiny-gpt2"],
        strategies=["pipelined", "hostcast"],
        repeats=1,
        out=tmp_path / "results",
        progress=False,
        argv=["test"],
        **kw,
    )
    return read_results(run_bench(config).jsonl).phases


def test_port_with_compile_records_the_phase_ready_s_and_the_cache(bench_env, tmp_path):
    cache = str(tmp_path / "xla-cache")
    rows = _run(tmp_path, model="port", compile=True, compile_cache=cache)
    assert set(rows["status"]) == {OK} and set(rows["model"]) == {"port"}
    totals = rows[rows["phase"] == TOTAL].set_index("strategy")
    assert (totals["ready_s"] >= totals["load_s"]).all()
    assert (totals["compile_start_rss_bytes"] > 0).all()
    # each strategy's first start compiles into its own cache (a cold start each), ...
    assert set(totals["compile_cache"]) == {"miss"}
    assert {p.name for p in (tmp_path / "xla-cache").iterdir()} == {"pipelined", "hostcast"}
    compiled = rows[rows["phase"] == COMPILE].set_index("strategy")
    assert (compiled["phase_wall_s"] > 0).all()
    assert "stream" in compiled.loc["pipelined", "phase_overlaps"]  # beside the reads
    assert "stream" not in compiled.loc["hostcast", "phase_overlaps"]  # after the load
    again = _run(tmp_path, model="port", compile=True, compile_cache=cache)
    assert set(again[again["phase"] == TOTAL]["compile_cache"]) == {"hit"}  # ... later ones warm


def test_transposed_loads_and_verifies_through_loader_transpose(bench_env, tmp_path):
    rows = _run(tmp_path, model="transposed")
    totals = rows[rows["phase"] == TOTAL]
    assert set(totals["status"]) == {OK} and set(totals["model"]) == {"transposed"}


@pytest.mark.parametrize(
    "argv, message",
    [
        (
            ["--shapes", "sa3,gpt2", "--model", "port"],
            "sa3 have no real architecture; those that have one: gpt2, llama3-8b, "
            "llama3-8b-fp8, llama3-8b-int4, tiny-gpt2, tiny-llama-fp8, tiny-llama-int4, "
            "tinyllama-1.1b, vit-base",
        ),
        (
            ["--shapes", "gpt2", "--model", "port-scanned"],
            "--model port-scanned: shape set(s) gpt2 have no scanned-layer architecture; those "
            "that have one: llama3-8b, tinyllama-1.1b",
        ),
        (["--shapes", "gpt2", "--compile"], "--compile compiles a real forward: add --model port"),
        (["--shapes", "gpt2", "--model", "spec,bogus"], "expected one or more of spec, port"),
        (["--shapes", "gpt2", "--model", "port", "--compile-cache", "x"], "add --compile"),
    ],
)
def test_bad_model_options_are_refused_in_one_line(argv, message, capsys):
    assert main(["bench", "run", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_several_models_run_interleaved_in_one_run(bench_env, tmp_path):
    """`--model spec,port`: each strategy with each model in one run, told apart by the rows."""
    rows = _run(tmp_path, model="spec,port")
    totals = rows[rows["phase"] == TOTAL]
    assert totals["run_id"].nunique() == 1 and set(totals["status"]) == {OK}
    assert sorted(zip(totals["strategy"], totals["model"])) == [
        ("hostcast", "port"),
        ("hostcast", "spec"),
        ("pipelined", "port"),
        ("pipelined", "spec"),
    ]
