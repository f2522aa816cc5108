"""`bench run`'s summary: a block per configuration, the model dtype, bytes in flight vs budget."""

from __future__ import annotations

import pytest

from bench.analysis.summary import json_decisions, json_summary, tables
from bench.records.results import read_results
from bench.records.schema import to_json_line
from tests.records import run_record, total_row

MIB = 1 << 20
CKPT = 500 * MIB


def _row(strategy: str, wall: float, model_dtype: str | None, inflight: int | None, **kw):
    return total_row(
        run_id="r1",
        strategy=strategy,
        checkpoint_bytes=CKPT,
        largest_tensor_bytes=CKPT // 4,
        baseline_rss_bytes=300 * MIB,
        peak_rss_bytes=300 * MIB + CKPT // (2 if model_dtype else 1),
        wall_s=wall,
        model_dtype=model_dtype,
        inflight_peak_bytes=inflight,
        **kw,
    )


@pytest.fixture
def results(tmp_path):
    rows = []
    for wall in (1.0, 1.2, 1.1):  # same dtype: pipelined reports its high-water mark
        rows += [_row("pipelined", wall, None, 200 * MIB), _row("zerocopy", wall + 0.5, None, None)]
    for wall in (3.0, 3.2, 3.1):  # a bf16 model, with --budget 64 MiB
        rows.append(_row("pipelined", wall, "bfloat16", 60 * MIB, budget_bytes=64 * MIB))
    path = tmp_path / "run.jsonl"
    path.write_text("".join(to_json_line(r) + "\n" for r in rows))
    return read_results(path)


def test_table_has_a_block_per_model_dtype_and_shows_the_budget(results):
    text = tables(results)
    same, cast = text.split("\n\n")
    assert "dtype F32, devices 1" in same.splitlines()[0]
    assert "F32 file → bfloat16 model" in cast.splitlines()[0]
    assert "in flight / budget" in same
    assert "0.195 GiB / its default" in same and "1.10 (1.00-1.20)" in same  # medians per block
    assert "0.0586 GiB / 0.0625 GiB" in cast and "3.10 (3.00-3.20)" in cast
    zerocopy = next(line for line in same.splitlines() if line.lstrip("* ").startswith("zerocopy"))
    assert " - " in zerocopy  # no in-flight figure for a strategy that does not report one


def test_json_carries_both_dtypes_and_the_budget(results):
    rows = {(r["strategy"], r["model_dtype"]): r for r in json_summary(results)}
    assert set(rows) == {("pipelined", None), ("zerocopy", None), ("pipelined", "bfloat16")}
    cast = rows[("pipelined", "bfloat16")]
    assert cast["file_dtype"] == "F32" and cast["wall_s"] == pytest.approx(3.1)
    assert cast["budget_bytes"] == 64 * MIB and cast["inflight_peak_bytes"] == 60 * MIB
    assert rows[("pipelined", None)]["wall_s"] == pytest.approx(1.1)
    assert rows[("zerocopy", None)]["inflight_peak_bytes"] is None


def test_cold_repeats_that_differ_several_fold_are_noted_with_their_figures(tmp_path):
    def cold(walls):
        return [_row("floor", w, None, None, cache="cold", resident_fraction=0.0) for w in walls]

    path = tmp_path / "run.jsonl"
    path.write_text("".join(to_json_line(r) + "\n" for r in cold((15.0, 15.8, 43.4))))
    text = tables(read_results(path))
    assert "cold repeats differed up to 2.9x (floor 15.00-43.40 s, 0% resident before each)" in text
    path.write_text("".join(to_json_line(r) + "\n" for r in cold((15.0, 15.8, 16.4))))
    assert "cold repeats differed" not in tables(read_results(path))


def test_a_read_cap_is_in_the_title_and_one_not_enforced_says_so(tmp_path):
    def cold(enforced):
        return [
            _row(
                "floor",
                w,
                None,
                None,
                cache="cold",
                disk_read_bytes_per_s=250_000_000,
                disk_read_limit="cgroup-v1",
                disk_read_limit_enforced=enforced,
            )
            for w in (9.3, 9.4, 9.35)
        ]

    path = tmp_path / "run.jsonl"
    path.write_text("".join(to_json_line(r) + "\n" for r in cold(True)))
    title = tables(read_results(path)).splitlines()[0]
    assert title.endswith("cache cold, disk reads capped at 0.233 GiB/s")  # 250 MB/s
    path.write_text("".join(to_json_line(r) + "\n" for r in cold(False)))
    assert "NOT enforced" in tables(read_results(path)).splitlines()[0]


def _lead_rows():
    """A 16 GiB host: hostcast fastest that fits, pipelined (the default) next, eager slow, `huge`
    fast but too big; the floor line; a skipped peer and a crashed strategy."""
    GIB = 1 << 30

    def row(strategy, wall, peak, **kw):
        return total_row(run_id="r1", strategy=strategy, wall_s=wall, peak_rss_bytes=peak, **kw)

    rows = []
    for d in (0.0, 0.02, 0.04):
        rows += [
            row("eager", 9.0 + d, 4 * GIB),
            row("pipelined", 2.0 + d, 1 * GIB),
            row("hostcast", 1.0 + d, 2 * GIB),
            row("huge", 0.5 + d, 15 * GIB),
            row("floor", 0.3 + d, 1 * GIB, kind="reference"),
        ]
    rows.append(
        row(
            "fastsafetensors",
            None,
            None,
            kind="peer",
            status="skipped",
            error="needs the fastsafetensors package; install: pip install fastsafetensors",
        )
    )
    rows.append(row("broken", None, None, status="crashed", error="boom\ntrace"))
    return rows


def test_the_summary_leads_with_the_answer_for_this_host(tmp_path):
    path = tmp_path / "run.jsonl"
    lines = [to_json_line(run_record(run_id="r1", ram_bytes=16 << 30))]
    path.write_text("".join(x + "\n" for x in [*lines, *map(to_json_line, _lead_rows())]))
    text = tables(read_results(path)).rstrip("\n")
    lines = text.splitlines()
    assert lines[1].startswith("CPU backend: the weights live in host RAM")
    table = lines[2 : lines.index(next(x for x in lines if x.startswith("legend:")))]
    names = [x.lstrip("* ").split()[0] for x in table[2:]]
    assert names == ["hostcast", "pipelined", "eager", "huge", "floor", "broken", "fastsafetensors"]
    assert table[2].startswith("* hostcast") and "pipelined (default)" in table[3]
    assert "skipped: needs the fastsafetensors package" in table[-1]
    assert "crashed: boom" in table[-2]
    header = table[0]
    assert "device peak" not in header and "x ceiling" not in header  # empty on every row
    assert "in flight" not in header and "GiB/s" in header
    assert "GB/s" not in text and "MiB" not in text  # one unit family
    legend = next(x for x in lines if x.startswith("legend:"))
    assert "x ckpt: (peak - baseline) / checkpoint" in legend and "x floor: wall /" in legend
    assert lines[-1] == (
        "use hostcast on 16.0 GiB, 1 device: 2.00 GiB peak, 1.02 s; 1.98x faster than pipelined"
    )
    details = _details(path)
    assert details.startswith(
        "use hostcast (2.00 GiB peak) on 16.0 GiB, 1 device (ranked by median wall time"
    )
    assert "hostcast (1.02 s, 95% CI 0.97-1.07 s) is faster than pipelined" in details


def test_a_tie_on_measured_time_goes_to_the_lighter_in_the_summary(tmp_path):
    GIB = 1 << 30
    rows = [
        total_row(run_id="r1", strategy=name, wall_s=w + d, peak_rss_bytes=peak)
        for name, d, peak in (("hostcast", 0.0, 2 * GIB), ("pipelined", 0.05, GIB))
        for w in (1.0, 1.1, 1.2)
    ]
    path = tmp_path / "run.jsonl"
    lines = [to_json_line(run_record(run_id="r1", ram_bytes=16 << 30)), *map(to_json_line, rows)]
    path.write_text("".join(x + "\n" for x in lines))
    text = tables(read_results(path)).rstrip("\n")
    assert text.splitlines()[-1] == (
        "use pipelined on 16.0 GiB, 1 device: 1.00 GiB peak, 1.15 s; ties on time with hostcast, "
        "and is lighter"
    )
    details = _details(path)
    assert "ties on time with hostcast (1.10 s, 95% CI" in details
    assert "pipelined is the lightest (1.00 GiB against 2.00 GiB), by the 95% interval" in details


def test_a_faster_peer_is_picked_and_named_with_its_cost_then_our_best(tmp_path):
    """The dashboard's headline and this summary read one rule (issue 54): peers are candidates;
    a peer that fits and is faster is the pick, named with what it costs, then the best of
    loadbench's own."""
    GIB = 1 << 30
    rows = [
        total_row(run_id="r1", strategy=name, wall_s=w, peak_rss_bytes=peak, kind=kind)
        for name, base, peak, kind in (
            ("runai", 0.5, GIB, "peer"),
            ("pipelined", 1.0, GIB, "strategy"),
        )
        for w in (base, base + 0.01, base + 0.02)
    ]
    path = tmp_path / "run.jsonl"
    lines = [to_json_line(run_record(run_id="r1", ram_bytes=16 << 30)), *map(to_json_line, rows)]
    path.write_text("".join(x + "\n" for x in lines))
    text = tables(read_results(path)).rstrip("\n")
    last = text.splitlines()[-1]
    assert last == (
        "runai (a peer) is the pick on 16.0 GiB, 1 device: 1.00 GiB peak, 0.51 s; 1.98x faster "
        "than pipelined; of loadbench's own, use pipelined: 1.00 GiB peak, 1.01 s"
    )
    details = _details(path)
    assert "; of loadbench's own strategies, use pipelined (" in details
    assert details.endswith(
        "pipelined (1.01 s, 95% CI 0.99-1.04 s) is the only one of them measured"
    )


def _last_line_of_run(tmp_path, strategies, ram_bytes):
    """The summary's verdict line for a run of `strategies` ((name, wall, peak) each, three
    repeats) on a host of `ram_bytes`."""
    rows = [
        total_row(run_id="r1", strategy=name, wall_s=w, peak_rss_bytes=peak)
        for name, base, peak in strategies
        for w in (base, base + 0.01, base + 0.02)
    ]
    path = tmp_path / "run.jsonl"
    lines = [to_json_line(run_record(run_id="r1", ram_bytes=ram_bytes)), *map(to_json_line, rows)]
    path.write_text("".join(x + "\n" for x in lines))
    return tables(read_results(path)).rstrip("\n").splitlines()[-1]


def _details(path) -> str:
    """The details behind the first block's sentence (`bench run --json`'s)."""
    return json_decisions(read_results(path))[0]["details"]


def test_a_strategy_run_alone_is_not_said_to_be_the_only_one_that_fits(tmp_path):
    """One strategy in the results (a port's run has only the default): nothing else was
    weighed, so the verdict says it is the only one measured, not that others failed to
    fit (seen on the TPU host's device check, 2026-12-06)."""
    last = _last_line_of_run(tmp_path, [("pipelined", 1.0, 1 << 30)], 16 << 30)
    assert last.endswith("1.00 GiB peak, 1.01 s; the only one measured")
    assert "that fits" not in last


def test_the_only_strategy_that_fits_is_said_so_where_another_does_not(tmp_path):
    GIB = 1 << 30
    last = _last_line_of_run(
        tmp_path, [("pipelined", 1.0, GIB), ("builder", 0.5, 15 * GIB)], 16 << 30
    )
    assert last.endswith(
        "pipelined on 16.0 GiB, 1 device: 1.00 GiB peak, 1.01 s; the only one that fits"
    )


def test_a_run_of_the_floor_line_alone_names_no_strategy(tmp_path):
    rows = [
        total_row(run_id="r1", strategy="floor", wall_s=w, peak_rss_bytes=1 << 30, kind="reference")
        for w in (0.3, 0.31, 0.32)
    ]
    path = tmp_path / "run.jsonl"
    lines = [to_json_line(run_record(run_id="r1", ram_bytes=16 << 30)), *map(to_json_line, rows)]
    path.write_text("".join(x + "\n" for x in lines))
    text = tables(read_results(path)).rstrip("\n")
    assert "floor" in text
    assert text.splitlines()[-1].startswith("no strategy loaded a model ok here")


def _remote(concurrency: int, wall: float, link: str = "1Gbit", source: str = "http"):
    return total_row(
        run_id="r1",
        checkpoint_bytes=CKPT,
        wall_s=wall,
        source=source,
        link=link,
        concurrency=concurrency,
        ceiling_s=CKPT / (1e9 / 8),
        ceiling_ratio=wall / (CKPT / (1e9 / 8)),
    )


def test_remote_configurations_are_never_merged(tmp_path):
    # each concurrency, link and source is its own configuration: one median of a concurrency's
    # repeats, never a median over the curve
    rows = [_remote(c, w) for c, w in ((1, 9.0), (1, 9.2), (16, 4.4), (16, 4.6), (64, 5.0))]
    rows += [_remote(16, 1.0, link="10Gbit"), _remote(16, 4.8, source="s3")]
    path = tmp_path / "run.jsonl"
    path.write_text("".join(to_json_line(r) + "\n" for r in [*rows, run_record(run_id="r1")]))
    results = read_results(path)
    summary = {(r["source"], r["link"], r["concurrency"]): r for r in json_summary(results)}
    assert set(summary) == {
        ("http", "1Gbit", 1),
        ("http", "1Gbit", 16),
        ("http", "1Gbit", 64),
        ("http", "10Gbit", 16),
        ("s3", "1Gbit", 16),
    }
    assert summary[("http", "1Gbit", 1)]["wall_s"] == pytest.approx(9.1)
    assert summary[("http", "1Gbit", 16)]["wall_s"] == pytest.approx(4.5)
    assert summary[("http", "1Gbit", 16)]["repeats"] == 2
    blocks = tables(results).strip().split("\n\n")
    assert len(blocks) == 5
    titles = [b.splitlines()[0] for b in blocks]
    assert any(t.endswith("over http, link 1Gbit, concurrency 16") for t in titles)
    assert any("over s3, link 1Gbit, concurrency 16" in t for t in titles)
    legend = next(line for line in blocks[0].splitlines() if line.startswith("legend:"))
    assert "x ceiling: wall / the bytes needed over the link's bandwidth: " in legend
    assert "through the one link (1Gbit: 4.19 s)" in legend
    assert "machine's best read" not in legend


def test_a_tiny_ceiling_is_printed_in_significant_digits(tmp_path):
    row = total_row(run_id="r1", ceiling_s=0.00347, ceiling_ratio=100.0)
    path = tmp_path / "run.jsonl"
    path.write_text(to_json_line(row) + "\n" + to_json_line(run_record(run_id="r1")) + "\n")
    assert "machine's best read (0.00347 s)" in tables(read_results(path))


def test_a_local_row_keeps_the_machines_ceiling_in_its_legend(tmp_path):
    row = total_row(run_id="r1", ceiling_s=0.5, ceiling_ratio=2.0)
    path = tmp_path / "run.jsonl"
    path.write_text(to_json_line(row) + "\n" + to_json_line(run_record(run_id="r1")) + "\n")
    text = tables(read_results(path))
    assert "x ceiling: wall / this machine's best read (0.50 s)" in text
    assert "over " not in text.splitlines()[0]
    assert json_summary(read_results(path))[0]["source"] == "file"


def test_peaks_within_one_percent_are_a_tie_that_goes_to_the_fixed_order(tmp_path):
    """Two strategies that hold the model and nothing else differ by allocator noise: a few KiB
    lighter must not pick the slower of two times too close to call; both are the lightest,
    and the fixed order (loadbench's default first) names one, whichever median came ahead."""
    GIB = 1 << 30
    rows = [
        total_row(run_id="r1", strategy=name, wall_s=w + d, peak_rss_bytes=peak)
        for name, d, peak in (("zerocopy", 0.3, 2 * GIB), ("pipelined", 0.0, 2 * GIB + 4096))
        for w in (2.0, 2.4, 3.0)
    ]
    path = tmp_path / "run.jsonl"
    lines = [to_json_line(run_record(run_id="r1", ram_bytes=16 << 30)), *map(to_json_line, rows)]
    path.write_text("".join(x + "\n" for x in lines))
    last = tables(read_results(path)).rstrip("\n").splitlines()[-1]
    assert last == (
        "use pipelined on 16.0 GiB, 1 device: 2.00 GiB peak, 2.40 s; ties with zerocopy on time "
        "and peak; loadbench's default wins ties"
    )
    assert "as light: pipelined 2.00 GiB, zerocopy 2.00 GiB, so the fixed order" in (_details(path))


def test_a_tiny_checkpoints_sizes_never_print_as_zero():
    """The summary says sizes with the one GiB formatter (`shapes.sizes.format_gib`)."""
    from bench.analysis import summary
    from shapes.sizes import format_gib as gib

    assert not hasattr(summary, "gib")  # no second formatter of its own
    assert gib(1.5 * (1 << 30)) == "1.50 GiB"
    assert gib(443_520) == "0.000413 GiB"  # tiny-gpt2's checkpoint, three significant digits
    assert gib(35_000) == "0.0000326 GiB"  # never in exponent form
    assert gib(0) == "0 GiB" and gib(None) == "-"
