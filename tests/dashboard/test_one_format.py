"""One way of writing a figure on every surface (issue 54's smaller slips): a multiple is `1.01x`
(the letter x, as the CLI and the judge's sentence write it, never `1.01×` beside `2.56x`); a
column of sizes is in one unit (never `858 MiB` above `1.35 GiB`); a repeat is counted from 1 (as
`bench run` prints `repeat 1`); and `x ceiling` is one quantity, the one the sentence ranks by
(`bench.records.results.x_ceiling`), named in the table's legend.

Over the recorded `ties` folder (`tests.records.write_decision_folders`): pipelined 858 MiB,
zerocopy 857 MiB, mmap-put 1.35 GiB and eager 1.88 GiB, three repeats each, paired ratios and no
probe behind them."""

from __future__ import annotations

import html
import re

import pandas as pd
import pytest

from bench.analysis.summary import json_decisions, tables
from bench.cli import main
from bench.records.results import MEANINGS, X_CEILING, read_results, summarize
from dashboard import answer, sections, style
from dashboard.report import build
from shapes.sizes import MISSING
from tests.records import HOST_RAM, write_decision_folders


@pytest.fixture(scope="module")
def ties(tmp_path_factory):
    return write_decision_folders(tmp_path_factory.mktemp("decisions"))["ties"]


@pytest.fixture(scope="module")
def report(ties) -> str:
    return build(read_results(ties), str(ties), ram=HOST_RAM)


def _cost_table(folder) -> pd.DataFrame:
    """The Overview's and the report's cost table of the folder's 1-device gpt2 rows."""
    summary = summarize(read_results(folder).phases)
    return answer.cost_table(
        answer.shape_set_rows(summary[summary["devices"] == 1], "gpt2"), HOST_RAM
    )


def _unit(cell: str) -> str:
    return cell.rsplit(" ", 1)[-1]


def test_a_multiple_is_written_with_the_letter_x_everywhere(report):
    """The report holds the judge's figures (`1.86x`, its `x ceiling`) in its tables: one sign."""
    assert "<td>1.86x</td>" in report
    assert "×" not in re.sub(r"<script.*?</script>", "", report, flags=re.S)
    assert re.search(r"<td>\d+\.\d\dx</td>", report)  # the table's `x checkpoint` cells


def test_a_column_of_sizes_is_in_one_unit(ties, capsys):
    table = _cost_table(ties)
    for column in ("peak RSS", "needs RAM", "peak over baseline"):
        units = {_unit(c) for c in table[column] if c != style.UNKNOWN}
        assert units == {"GiB"}, (column, table[column].tolist())
    assert (
        main(["recommend", "--results", str(ties), "--shapes", "gpt2", "--host-ram", "16GiB"]) == 0
    )
    lines = capsys.readouterr().out.splitlines()
    header = next(i for i, line in enumerate(lines) if "predicted peak" in line)
    body = lines[header + 1 : header + 5]
    assert all(re.search(r"\s\d\.\d+ GiB\s+\d+\.\d GiB\s", line) for line in body), body


def test_repeats_are_counted_from_one(ties):
    phases = read_results(ties).phases
    shown = sections._every_run(phases)
    assert sorted(set(shown["repeat"])) == [1, 2, 3]
    assert sorted(set(phases["repeat"].dropna().astype(int))) == [0, 1, 2]  # stored from 0


def test_x_ceiling_is_the_one_the_sentence_ranks_by(ties, report):
    results = read_results(ties)
    table = _cost_table(ties).set_index("strategy")
    (decision,) = [d for d in json_decisions(results) if d["devices"] == 1]
    for candidate in decision["candidates"]:
        name = candidate["strategy"]
        row = table.loc[answer.RECOMMENDED_MARK + name if name == decision["pick"] else name]
        assert row[X_CEILING] == f"{candidate['estimate']:.2f}x", (name, row[X_CEILING])
        if name in (decision["pick"], *decision["tied"]):  # those the details name
            assert f"{candidate['estimate']:.2f}x ceiling" in decision["details"]
    assert MEANINGS[X_CEILING] in answer.LEGEND and html.escape(answer.LEGEND) in report


def test_sizes_in_one_unit_roll_at_1024():
    from dashboard.style import sizes

    column = pd.Series([1023 << 20, 1 << 30, None])
    assert sizes(column).tolist() == ["0.999 GiB", "1.00 GiB", "-"]
    assert sizes(pd.Series([1000 << 20, 5 << 20])).tolist() == ["1000 MiB", "5.00 MiB"]


def test_an_unknown_figure_reads_as_the_cli_writes_it(ties, report, capsys):
    """A missing figure is one mark on every surface: the CLI's `-` (`shapes.sizes.MISSING`),
    never the dashboard's and report's own en dash."""
    assert style.UNKNOWN == MISSING == "-"
    assert "–" not in re.sub(r"<script.*?</script>", "", report, flags=re.S)  # (vega's own JS)
    cli = tables(read_results(ties))
    assert f" {MISSING} " in cli and "–" not in cli  # the folder has cells with no figure
