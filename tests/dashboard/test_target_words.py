"""The Target host page speaks of its own widgets, not of `loadbench recommend`'s flags; with one
device it does not offer the strategies that split tensors across devices; and the commands it
prints for a terminal run as printed."""

from __future__ import annotations

import re
import shlex

import pytest
from test_dashboard_link import _folder

from bench.cli import main

FLAG = re.compile(r"--[a-z][a-z-]*")
TERMINAL = ("The same figures in a terminal", "The same in a terminal")


def _page(app, folder):
    """The page over `folder`, run (the `app` fixture), with no exception."""
    at = app("views/target_host.py", folder=folder)
    assert not at.exception, [e.value for e in at.exception]
    return at


def _said(at) -> list[str]:
    """Everything the page writes for a reader: its sentences, boxes, captions (but the ones
    that give a terminal's command) and table cells."""
    texts = [
        e.value
        for kind in ("markdown", "success", "error", "warning", "info", "caption")
        for e in at.get(kind)
        if not str(e.value).startswith(TERMINAL)
    ]
    for frame in at.dataframe:
        texts += [str(v) for v in frame.value.to_numpy().ravel()]
    return texts


def _flags(texts: list[str]) -> list[str]:
    """The flags a text names outside backticks (a command to type names its own)."""
    return [f"{f} in {t!r}" for t in texts for f in FLAG.findall("".join(t.split("`")[0::2]))]


def test_the_page_names_its_widgets_where_recommend_names_flags(app, sa3_results):
    at = _page(app, sa3_results)
    said = " ".join(_said(at))
    assert 'pick "cold" under "Load on the target from"' in said  # was "add --cache cold"
    assert _flags(_said(at)) == []
    at.number_input(key="target_ram_gib").set_value(1.0).run()  # nothing fits
    assert 'turn on "The target has an accelerator"' in " ".join(_said(at))
    assert _flags(_said(at)) == []
    at.toggle(key="target_accelerator").set_value(True).run()  # no device RAM given
    said = _said(at)
    assert any('Give "Device RAM (GiB)"' in s for s in said), said
    assert _flags(said) == []


def test_with_one_device_the_splitting_strategies_are_not_listed(app, sa3_results):
    at = _page(app, sa3_results)
    listed = set(at.dataframe[0].value["strategy"])
    assert {"sharded", "sharded-dir"} <= listed  # measured on 16 and 8 devices
    at.number_input(key="target_devices").set_value(1).run()
    listed = set(at.dataframe[0].value["strategy"])
    assert not {"sharded", "sharded-dir"} & listed and "pipelined" in listed
    said = " ".join(_said(at))
    assert "Not listed: sharded, sharded-dir" in said
    assert "no run on 1 device(s)" not in said


def _command(at, start: str) -> list[str]:
    """The command of the caption that starts with `start`, split as a shell would."""
    caption = next(c.value for c in at.caption if c.value.startswith(start))
    argv = shlex.split(caption.split("`")[1])
    assert argv[0] == "loadbench"
    return argv[1:]


@pytest.mark.parametrize("shapes", ["gpt2", None])
def test_the_link_command_runs_as_printed(app, tmp_path, capsys, shapes):
    at = _page(app, _folder(tmp_path))
    if shapes is None:  # custom sizes: no name to give, the results' own shape set
        at.radio(key="target_source").set_value("custom sizes").run()
    argv = _command(at, "The same in a terminal")
    assert "--results" in argv and ("--shapes" in argv) == (shapes is not None)
    capsys.readouterr()
    assert main(argv) == 0
    out = capsys.readouterr().out
    basis = next(m.value for m in at.markdown if m.value.startswith("Extrapolated from"))
    assert basis.split(":")[0] in out  # from the same links and runs


def test_the_recommend_command_runs_as_printed(app, sa3_results, capsys):
    at = _page(app, sa3_results)
    at.toggle(key="target_accelerator").set_value(True).run()
    at.number_input(key="target_device_ram_gib").set_value(24.0).run()
    argv = _command(at, "The same figures in a terminal")
    assert argv[argv.index("--device-ram") + 1] == "24GiB"
    capsys.readouterr()
    assert main(argv) in (0, 1), capsys.readouterr().err  # 1: nothing fits, said on stdout
    said = (at.success or at.error)[0].value  # the judge's sentence, as the CLI prints it
    out = capsys.readouterr().out.splitlines()
    verdict = next(line for line in out if line.startswith(("use ", "no strategy")))
    assert verdict.split(":")[0] == said.split(":")[0]  # the same strategy, on the same host


def test_the_link_figures_carry_their_units(app, tmp_path):
    """The concurrency curves and the link's prediction: seconds, multiples and sizes with
    their units, never a bare `0.1693` or `46.6351`."""
    at = _page(app, _folder(tmp_path))
    for frame in at.dataframe:
        table = frame.value
        for column in [c for c in table.columns if table[c].dtype.kind == "f"]:
            raise AssertionError(f"a bare number column: {column} {list(table[column])[:3]}")
    curves = next(df.value for df in at.dataframe if "concurrency" in df.value.columns)
    assert curves["wall (median)"].str.endswith(" s").all()
    assert curves["x ceiling"].str.endswith("x").all()
    predicted = next(df.value for df in at.dataframe if "host peak" in df.value.columns)
    assert predicted["predicted wall"].str.contains(r" s\b").all()
    assert predicted["host peak"].str.endswith("iB").all()
