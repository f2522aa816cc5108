"""The target host's probe on the dashboard: the Target host page predicts for the host that wrote
an uploaded probe (as `loadbench recommend --probe` does), and the Overview draws the machine's
ceiling. The results are hand-made (tests/unit/test_target.py's terms), so the figures are known.
"""

from __future__ import annotations

import json
import re

import pytest

from bench.cli import main
from bench.machine.record import PROBE_VERSION, ProbeFileError, parse_probe, read_probe
from bench.records.writer import ResultsWriter
from dashboard import scatter
from tests.records import run_record
from tests.unit.probe_records import OVERLAP, P, hand_probe, slow_target, timed_rows

GIB = 1 << 30
HERE = hand_probe(probe_id="20260101T000000Z-here00", machine="here")
# the target: one CPU's quota of two, half the one-thread copy and interpreter speed, 250 MB/s disk
# (first touch as here: 5 GB/s, 0.6 s for the big set's 3 GB)
THERE = slow_target(probe_id="20260202T000000Z-there0", memory_max_bytes=8 * GIB)
SIZES = {"small": (10**9, 100), "big": (3 * 10**9, 150)}  # shapes -> (bytes, tensors)
BIG_WARM_CEILING = 3 * 10**9 / HERE.warm_copy_bytes_per_s  # 0.75 s


@pytest.fixture
def probe_results(tmp_path):
    """One run here: `pipelined` on two shape sets, warm and cold, 2 repeats, with HERE's probe."""
    folder = tmp_path / "results"
    with ResultsWriter(folder / "here" / "r.jsonl") as w:
        w.write(run_record())
        for shapes, (ckpt, tensors) in SIZES.items():
            for cache in ("warm", "cold"):
                for i in range(2):
                    w.write_many(timed_rows(ckpt, tensors, cache, HERE, shapes=shapes, repeat=i))
    (folder / "here" / "probe-8-0.json").write_text(HERE.to_json())
    return folder


def _target_page(app, folder, upload: tuple[str, bytes] | None, cache: str = "warm"):
    at = app("views/target_host.py", folder=folder)
    at.selectbox(key="target_shapes").set_value("big").run()
    if upload is not None:
        at.file_uploader(key="target_probe").set_value((*upload, "application/json")).run()
    if cache != "warm":
        at.radio(key="target_cache").set_value(cache).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _times(at) -> dict[str, str]:
    table = next(df.value for df in at.dataframe if "verdict" in df.value.columns)
    names = table["strategy"].str.removesuffix(" *")  # `recommend` marks the recommended one
    return dict(zip(names, table["predicted time"], strict=True))


def test_without_a_probe_the_page_predicts_from_here(app, probe_results):
    at = _target_page(app, probe_results, None)
    assert _times(at) == {"pipelined": f"{(3 + 0.15 + 0.6) / P:.2f} s"}  # the warm fit, here
    assert not at.info and at.number_input(key="target_ram_gib")


def test_a_probe_predicts_the_time_on_its_host(app, probe_results):
    at = _target_page(app, probe_results, ("target.json", THERE.to_json().encode()))
    # CPU work x2 per byte (one thread's copy 2 vs 1 GB/s) and x2 per tensor (interpreter), plus
    # the first touch of 3 GB there, on min(P, 1 CPU): ((3 s + 0.15 s) x 2 + 0.6 s) / 1
    assert _times(at) == {"pipelined": "6.90 s"}
    said = " ".join(i.value for i in at.info)
    assert f"probe {THERE.probe_id}" in said and f"probe {HERE.probe_id}" in said
    assert "Times extrapolated to target" in said and "P=1.50" in said
    # the RAM is the probe's: its memory.max, 8 GiB, not its 16 GiB of RAM, and no input for it
    assert "target_ram_gib" not in [n.key for n in at.number_input]
    assert any("8.00 GiB RAM" in m.value and "1 CPU" in m.value for m in at.markdown)
    assert any("use pipelined on 8.00 GiB" in s.value and ", 6.90 s" in s.value for s in at.success)
    assert any("--probe target.json --cache warm" in c.value for c in at.caption)


def test_a_cold_load_on_the_target_reads_its_disk(app, probe_results):
    at = _target_page(app, probe_results, ("target.json", THERE.to_json().encode()), "cold")
    # + 3 GB at 250 MB/s = 12 s, half of the 6.9 s of CPU work hidden behind it (O here)
    assert _times(at) == {"pipelined": f"{12 + 6.9 - OVERLAP * 6.9:.2f} s"}
    no_disk = hand_probe(cold_read_bytes_per_s=None, cold_read_threads=None, cold_read={})
    at.file_uploader(key="target_probe").set_value(
        ("nodisk.json", no_disk.to_json().encode(), "application/json")
    ).run()
    assert not at.exception
    assert any("no disk figure" in e.value and "--disk PATH" in e.value for e in at.error)


def _refusal(tmp_path, capsys, folder, text: str) -> str:
    """What `loadbench recommend --probe` says of a probe file holding `text`."""
    path = tmp_path / "refused.json"
    path.write_text(text)
    argv = ["recommend", "--shapes", "gpt2", "--results", str(folder), "--probe", str(path)]
    assert main(argv) == 2
    return capsys.readouterr().err


@pytest.mark.parametrize(
    "text",
    [
        json.dumps({**json.loads(THERE.to_json()), "probe_version": PROBE_VERSION + 1}),
        json.dumps({**json.loads(THERE.to_json()), "ram_bytes": "lots"}),
        "not a probe at all",
    ],
    ids=["newer", "mistyped", "not-json"],
)
def test_a_refused_probe_says_what_the_cli_says(app, probe_results, tmp_path, capsys, text):
    said = _refusal(tmp_path, capsys, probe_results, text)
    name = str(tmp_path / "refused.json")  # the upload named as the CLI's path: the same words
    at = _target_page(app, probe_results, (name, text.encode()))
    (error,) = at.error
    assert error.value in said and name in error.value
    assert not at.dataframe  # refused: no prediction for another host than the probe's


def test_parse_probe_reads_what_read_probe_reads(tmp_path):
    path = tmp_path / "p.json"
    path.write_text(THERE.to_json())
    assert parse_probe(path.read_bytes(), "upload") == read_probe(path) == THERE
    with pytest.raises(ProbeFileError, match=r"upload is not a probe file \(not UTF-8"):
        parse_probe(b"\xff\xfe\xff", "upload")
    with pytest.raises(ProbeFileError, match="upload is not a probe file .not one JSON object"):
        parse_probe("[1, 2]", "upload")


def _frame(**extra):
    import pandas as pd

    base = {"checkpoint_bytes": [3 * 10**9] * 3, "cache": ["warm"] * 3}
    return pd.DataFrame({**base, **extra})


def test_the_ceiling_line_is_the_median_of_the_rows_and_says_its_probe():
    line = scatter.ceiling_line(
        _frame(ceiling_s=[0.7, 0.75, 0.9], ceiling_probe_id=["p1", "p1", None])
    )
    assert line == scatter.CeilingLine(
        0.75, "ceiling 0.75 s (warm copy)", "ceiling 0.75 s (warm copy, probe p1)"
    )  # the probe is named in the tooltip: the label along the rule stays inside the plot
    cold = _frame(ceiling_s=[12.0] * 3, cache=["cold"] * 3, disk_read_bytes_per_s=[None] * 3)
    assert "(cold read, probe unnamed)" in scatter.ceiling_line(cold).about
    capped = cold.assign(disk_read_bytes_per_s=[2.5e8] * 3)
    assert scatter.ceiling_line(capped).label == "ceiling 12.00 s (disk read cap)"
    tiny = scatter.ceiling_line(_frame(ceiling_s=[0.000541] * 3))
    assert tiny.label == "ceiling 0.000541 s (warm copy)"  # never "0.00 s"
    assert scatter.ceiling_line(_frame(ceiling_s=[None] * 3)) is None  # older results
    assert scatter.ceiling_line(_frame()) is None  # no such column at all


def _rules_at(spec: dict) -> list[float]:
    """The x of every rule layer drawn from a one-row dataset with an `x` (the ceiling's)."""
    found = []
    for layer in spec["layer"]:
        mark = layer["mark"]["type"] if isinstance(layer["mark"], dict) else layer["mark"]
        if mark == "rule" and layer["encoding"].get("x", {}).get("field") == "x":
            found += [row["x"] for row in spec["datasets"][layer["data"]["name"]]]
    return found


def test_the_overview_scatter_draws_the_ceiling_rule_at_its_time():
    import pandas as pd

    rows = pd.DataFrame(
        {
            "strategy": ["eager", "pipelined"],
            "kind": ["strategy"] * 2,
            "status": ["ok"] * 2,
            "repeats": [3, 3],
            "wall_s": [1.5, 2.1],
            "peak_ratio": [2.0, 1.1],
            "pareto": [True, True],
        }
    )
    line = scatter.CeilingLine(0.75, "ceiling 0.75 s (warm copy, probe p1)")
    spec = scatter.overview_scatter(rows, "peak_ratio", "peak", ".2f", ceiling=line).to_dict()
    assert _rules_at(spec) == [0.75]
    assert "ceiling 0.75 s (warm copy, probe p1)" in json.dumps(spec)
    plain = scatter.overview_scatter(rows, "peak_ratio", "peak", ".2f").to_dict()
    assert _rules_at(plain) == [] and "ceiling" not in json.dumps(plain)


def _drawn(at) -> list[bytes]:
    """Each chart's spec and data (Arrow IPC bytes, where its labels are) of a page."""
    return [
        c.proto.spec.encode() + b"".join(d.data.data for d in c.proto.datasets)
        for c in at.get("vega_lite_chart")
    ]


def test_the_overview_shows_the_ceiling_of_the_rows(app, probe_results, fixture_results):
    at = app(folder=probe_results)
    assert not at.exception, [e.value for e in at.exception]
    (big,) = _drawn(at)  # the largest shape set first
    label = f"ceiling {BIG_WARM_CEILING:.2f} s (warm copy, probe {HERE.probe_id})"
    assert label.encode() in big
    table = at.table[0].value
    assert table["x ceiling"].tolist() == [f"{3.75 / P / BIG_WARM_CEILING:.2f}x"]
    shapes = at.selectbox(key="overview_shapes")
    shapes.set_value(shapes.options[1]).run()
    (small,) = _drawn(at)
    assert label.encode() not in small
    shapes.set_value(shapes.options[0]).run()
    at.radio(key="overview_cache").set_value("cold").run()
    cold = f"ceiling {3 * 10**9 / HERE.cold_read_bytes_per_s:.2f} s (cold read, probe "
    assert cold.encode() in _drawn(at)[0]
    older = app(folder=fixture_results.root)  # results without a probe: no ceiling drawn
    drawn = _drawn(older)
    assert drawn and not any(re.search(rb"ceiling [\d.]+ m?s \(", chart) for chart in drawn)
