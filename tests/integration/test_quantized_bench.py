"""A quantized shape set through `bench run --model spec`: the model holds the file's FP8 weights
and F32 scales as they are stored, every strategy asked for is a row (ok, or the reason it could
not load the layout), and the rows carry the bytes moved to the device and the dequantized size.
Through `--model port`: the bfloat16 Llama port, dequantized on load (on the device by
`pipelined`, on the host by `pread`), verified against the layout's numpy dequantization, with
the `dequantize` phase recorded."""

from __future__ import annotations

import pytest

import shapes
from bench.records.results import read_results
from bench.run.config import RunConfig
from bench.run.runner import run_bench
from bench.vocabulary import OK
from loader.vocabulary import DEQUANTIZE, STRATEGY, TOTAL
from shapes.quantized import dequantized_bytes

#: ours (streaming), the naive baseline (safetensors.numpy cannot read FP8), the reference line,
#: a jax peer, and a torch peer (a row saying why it did not run where torch is not installed)
STRATEGIES = ["pipelined", "eager", "floor", "mmap-put", "fastsafetensors"]


def test_every_strategy_is_a_row_with_bytes_moved_and_the_dequantized_size(
    tmp_path, monkeypatch, tmp_path_factory
):
    monkeypatch.setenv("LOADBENCH_CACHE", str(tmp_path_factory.getbasetemp() / "lbcache"))
    spec = shapes.load_spec("tiny-llama-fp8")
    config = RunConfig(
        shapes=["tiny-llama-fp8"],
        strategies=STRATEGIES,
        repeats=1,
        out=tmp_path / "results",
        progress=False,
        argv=["test"],
    )
    run_bench(config)
    phases = read_results(tmp_path / "results").phases
    totals = phases[phases["phase"] == TOTAL].set_index("strategy")
    assert sorted(set(totals.index)) == sorted(STRATEGIES)
    for name, row in totals.iterrows():
        assert row["status"] == OK or str(row["error"]).strip(), f"{name}: no reason given"
        assert row["dequantized_bytes"] == dequantized_bytes(spec)
    pipelined = totals.loc["pipelined"]
    assert pipelined["status"] == OK, pipelined["error"]
    assert pipelined["device_bytes_moved"] == spec.total_bytes  # the FP8 bytes, as stored
    eager = totals.loc["eager"]
    if eager["status"] != OK:  # safetensors' numpy backend has no float8 with this numpy
        first = str(eager["error"]).splitlines()[0]
        assert "F8_E4M3" in first and "safetensors.numpy" in first
    measured = totals[(totals["status"] == OK) & (totals["kind"] == STRATEGY)]
    assert (measured["device_bytes_moved"] > 0).all()


@pytest.mark.parametrize(
    "name, strategies",
    [  # sharded: two processes, each placing its own shards of each dequantized leaf
        ("tiny-llama-fp8", ["pipelined", "pread", "sharded"]),
        ("tiny-llama-int4", ["pipelined", "pread"]),
    ],
)
def test_the_port_loads_dequantized_verified_with_its_dequantize_phase(
    name, strategies, tmp_path, monkeypatch, tmp_path_factory
):
    monkeypatch.setenv("LOADBENCH_CACHE", str(tmp_path_factory.getbasetemp() / "lbcache"))
    spec = shapes.load_spec(name)
    config = RunConfig(
        shapes=[name],
        strategies=strategies,
        repeats=1,
        model="port",
        out=tmp_path / "results",
        progress=False,
        argv=["test"],
    )
    run_bench(config)
    phases = read_results(tmp_path / "results").phases
    totals = phases[phases["phase"] == TOTAL].set_index("strategy")
    assert sorted(set(totals.index)) == sorted(strategies)
    for strategy, row in totals.iterrows():  # ok: every leaf matched its numpy dequantization
        assert row["status"] == OK, f"{strategy}: {row['error']}"
        assert row["model"] == "port"
        assert row["dequantized_bytes"] == dequantized_bytes(spec)
        assert row["device_bytes_moved"] > 0
    assert totals.loc["pipelined", "device_bytes_moved"] == spec.total_bytes  # as stored
    dequantize = phases[phases["phase"] == DEQUANTIZE]
    assert set(dequantize["strategy"]) == set(strategies)
    assert (dequantize["phase_wall_s"] > 0).all()
