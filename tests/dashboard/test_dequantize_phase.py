"""A load with a `dequantize` phase (a quantized checkpoint made the model's float leaves): the
dashboard's phase charts draw it in its own colour, in load order between transfer and assemble."""

from __future__ import annotations

import json

import fixture_results
import pandas as pd

from bench.records.results import read_results
from bench.records.schema import SCHEMA_VERSION
from dashboard import charts, frames, style
from loader.vocabulary import DEQUANTIZE, PHASE_ORDER, TRANSFER

# a staged load of a quantized file: its bytes sent as stored, then dequantized on the device
PLAN = [
    ("build", 0.02, 0.02, 0.05, 0.0),
    ("read", 0.5, 0.5, 0.40, 0.9),
    ("transfer", 0.1, 0.5, 0.20, 0.5),
    ("dequantize", 0.05, 0.5, 0.15, 0.5),
    ("assemble", 0.0, 0.5, 0.05, 0.5),
]


MOVED = 540_000_000


def _phases(monkeypatch, tmp_path) -> pd.DataFrame:
    """The rows of one run of a strategy with that plan, as the dashboard reads them back."""
    monkeypatch.setitem(fixture_results.PLANS, "quantized", PLAN)
    rows, _ = fixture_results._result_rows("beta", "gpt2", "quantized", 1, None)
    for row in rows:  # the file's bytes sent as stored; the bf16 model twice their size
        row.update(device_bytes_moved=MOVED, dequantized_bytes=2 * MOVED)
    records = [fixture_results._run_record("beta"), *rows]
    lines = [json.dumps(fixture_results._stamp(r, SCHEMA_VERSION)) for r in records]
    (tmp_path / "beta.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return read_results(tmp_path).phases


def test_the_dequantize_phase_is_a_word_of_the_vocabulary_with_a_colour_of_its_own():
    order = list(PHASE_ORDER)
    assert order.index(DEQUANTIZE) == order.index(TRANSFER) + 1
    others = {p: c for p, c in style.PHASE_COLORS.items() if p != DEQUANTIZE}
    assert style.PHASE_COLORS[DEQUANTIZE] not in others.values()


def test_phase_charts_draw_the_dequantize_phase(monkeypatch, tmp_path):
    med = frames.phase_medians(_phases(monkeypatch, tmp_path))
    assert DEQUANTIZE in set(med["phase"])
    timeline = charts.phase_time_bars(med).to_dict()
    scale = timeline["encoding"]["color"]["scale"]
    assert scale["domain"] == ["build", "read", "transfer", "dequantize", "assemble"]
    assert scale["range"][3] == style.PHASE_COLORS[DEQUANTIZE]
    bars = charts.phase_peak_bars(med).to_dict()
    assert bars["encoding"]["x"]["sort"][3] == DEQUANTIZE


def test_quantized_loads_say_what_moved_and_the_dequantized_size(monkeypatch, tmp_path):
    loads = frames.quantized_loads(_phases(monkeypatch, tmp_path)).set_index("strategy")
    row = loads.loc["quantized"]
    assert (row["device_bytes_moved"], row["dequantized_bytes"]) == (MOVED, 2 * MOVED)
    assert row["dequantize_s"] > 0 and row["wall_s"] > row["dequantize_s"]
    assert frames.quantized_loads(_plain_phases()).empty  # no quantized checkpoint


def _plain_phases() -> pd.DataFrame:
    rows, _ = fixture_results._result_rows("beta", "gpt2", "eager", 1, None)
    return pd.DataFrame([fixture_results._stamp(r, SCHEMA_VERSION) for r in rows])


def test_the_phases_page_shows_the_quantized_table(app, monkeypatch, tmp_path):
    _phases(monkeypatch, tmp_path)
    at = app("views/phases.py", folder=tmp_path)
    assert not at.exception
    tables = [d.value for d in at.dataframe if "device_bytes_moved" in d.value.columns]
    assert tables and tables[0].set_index("strategy").loc["quantized", "dequantized_bytes"] == (
        2 * MOVED
    )
    assert any("A quantized checkpoint" in m.value for m in at.markdown)
