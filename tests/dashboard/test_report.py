"""`loadbench report`: one self-contained HTML file (the newest run's charts and tables, no CDN)."""

from __future__ import annotations

import re

from bench.cli import main


def test_report_is_one_offline_file(fixture_results, tmp_path, capsys):
    out = tmp_path / "report.html"
    assert main(["report", str(fixture_results.root), "--out", str(out)]) == 0
    assert str(out) in capsys.readouterr().out
    text = out.read_text(encoding="utf-8")
    assert not re.search(r"<script[^>]+src=|<link[^>]+href=", text), (
        "the report loads something from outside"
    )
    assert "function" in text and "vegaEmbed(" in text  # the bundle is inlined, then called
    # the newest run's (beta) answer for gpt2, as the Overview says: in GiB, with the minimum
    assert re.search(r"use eager on 64\.0 GiB, 8 devices: [\d.]+ GiB peak", text)
    assert re.search(r"Least RAM that fits: [\d.]+ MiB \(pipelined\)", text)
    assert "CPU backend: the weights live in host RAM." in text  # the backend its runs were on
    assert "★ eager" in text and "picked: the fastest that fits" in text
    assert "Results results;" not in text and "Results folder " in text
    assert "<th>peak_ratio</th>" not in text and "<th>x checkpoint</th>" in text
    assert "crashed" not in text or "SIGKILL" in text
    assert text.count('vegaEmbed("#chart') >= 8  # per shape set: cost, 3 phase charts, timeline
    assert not list(tmp_path.glob("*.part"))


def test_report_of_an_empty_folder_says_what_to_run(tmp_path, capsys):
    assert main(["report", str(tmp_path / "none"), "--out", str(tmp_path / "r.html")]) == 2
    assert "loadbench bench run --shapes gpt2 --out" in capsys.readouterr().err
    assert not (tmp_path / "r.html").exists()


def test_a_pause_in_sampling_is_a_gap_not_a_line():
    import pandas as pd

    from dashboard.timeline import with_segments

    t = [0.00, 0.01, 0.02, 0.03, 0.50, 0.51, 0.52]  # nothing measured between 0.03 and 0.50
    samples = pd.DataFrame({"result_id": "r", "t_s": t, "rss_anon_bytes": 1, "rss_file_bytes": 1})
    segments = with_segments(samples)["segment"].tolist()
    assert segments[:4] == [segments[0]] * 4 and segments[4:] == [segments[4]] * 3
    assert segments[0] != segments[4]
    assert with_segments(samples.iloc[:4])["segment"].nunique() == 1  # regular sampling: one line


def _models_results(tmp_path):
    """One run of pipelined on gpt2 loaded two ways (spec and port), the port also compiled, held
    against a 0.2 s ceiling."""
    from bench.records.writer import ResultsWriter
    from tests.records import run_record, total_row

    folder = tmp_path / "results"
    with ResultsWriter(folder / "here" / "r.jsonl") as w:
        w.write(run_record())
        for repeat in range(2):
            held = {"cache": "warm", "ceiling_s": 0.2, "ceiling_probe_id": "p1", "repeat": repeat}
            w.write(total_row(model="spec", wall_s=0.25, **held))
            w.write(total_row(model="port", wall_s=0.5, ready_s=0.75, **held))
    return folder


def test_the_report_shows_each_model_apart_and_the_time_to_ready(tmp_path):
    from bench.records.results import read_results, summarize

    folder = _models_results(tmp_path)
    summary = summarize(read_results(folder).phases)
    by_model = summary.set_index("model")["wall_s"].to_dict()
    assert by_model == {"spec": 0.25, "port": 0.5}  # two rows, never one median of both
    out = tmp_path / "report.html"
    assert main(["report", str(folder), "--out", str(out)]) == 0
    text = out.read_text(encoding="utf-8")
    assert "model spec)" in text and "model port)" in text
    assert "<th>ready (compiled)</th>" in text and "0.75 s" in text
    assert "Ready (loaded and its forward compiled) in 0.75 s." in text
    assert text.count("ceiling 0.20 s (warm copy, probe p1)") == 2  # each section's chart


def _sections(text: str) -> dict[str, str]:
    """The report's `<h2>` sections: heading -> the HTML under it, up to the next one."""
    parts = re.split(r"<h2>(.*?)</h2>", text)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts) - 1, 2)}


def test_the_report_holds_the_target_host_compare_and_history_views(fixture_results, tmp_path):
    """Beside the Overview, Phases and Timeline: `recommend`'s answer per shape set on the host
    RAM asked for, the newest run against the one before it in `compare`'s words, and every
    run's history; no cell reads "None" or "nan"."""
    out = tmp_path / "report.html"
    argv = ["report", str(fixture_results.root), "--host-ram", "1GiB", "--out", str(out)]
    assert main(argv) == 0
    text = out.read_text(encoding="utf-8")
    sections = _sections(text)
    target = sections["Target host: gpt2 on 1.00 GiB of RAM, 8 device(s)"]
    assert "use " in target or "no strategy fits 1.00 GiB" in target
    assert "<th>predicted peak</th>" in target and "<th>headroom</th>" in target
    assert "loadbench recommend --shapes gpt2 --host-ram 1GiB --devices 8" in target
    assert re.search(r"(use \S+ on|no strategy fits) 1\.00 GiB", text)  # the same host
    beta, alpha = fixture_results.run_ids["beta"], fixture_results.run_ids["alpha"]
    compared = sections[f"Compare: {beta} (new) against {alpha} (base)"]
    assert "Failed: eager on gpt2 (regressed)" in compared  # beta's peaks are 1.1x alpha's
    assert "Missing in new: strategies orbax" in compared
    assert "<td>regressed</td>" in compared and "Machine facts" in compared
    history = sections["History: every run in the folder, by start time"]
    assert "History: where a metric stepped" in history
    assert history.count('vegaEmbed("#chart') == 2  # one chart per shape set
    cells = re.findall(r"<td>(.*?)</td>", text)
    assert not [c for c in cells if c.strip() in ("None", "nan", "NaN")]
