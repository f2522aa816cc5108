"""The Target host page over a link: which concurrency each measured link wants, and a typed-in
link's prediction, in `recommend --link`'s words (`bench.analysis.remote`)."""

from __future__ import annotations

import subprocess
import sys

from tests.records import total_row
from tests.unit.test_remote_answer import CURVE_1G, CURVE_10G, _remote, _write


def _folder(tmp_path):
    rows = [
        _remote(link, c, w)
        for link, curve in (("1Gbit", CURVE_1G), ("10Gbit", CURVE_10G))
        for c, walls in curve.items()
        for w in walls
    ]
    return _write(tmp_path, rows)


def test_the_page_says_which_concurrency_each_link_wants_and_predicts_a_link(app, tmp_path):
    at = app("views/target_host.py", folder=_folder(tmp_path))
    assert not at.exception, [e.value for e in at.exception]
    said = " ".join(m.value for m in at.markdown)
    assert "Over http at 1Gbit (gpt2), pipelined wants concurrency 16" in said
    assert "the default (16) is the fastest" in said
    assert "Over http at 10Gbit (gpt2), pipelined wants concurrency 64" in said
    assert "the default (16) is 2nd of 4" in said
    assert "Extrapolated from 2 runs over http at 1Gbit (gpt2)" in said
    at.text_input(key="target_link").set_value("8Gbit").run()
    said = " ".join(m.value for m in at.markdown)
    assert "Extrapolated from 2 runs over http at 10Gbit (gpt2)" in said
    at.text_input(key="target_link").set_value("fast").run()
    assert any("--link 'fast'" in e.value for e in at.error)


def test_a_folder_without_remote_runs_shows_no_link_section(app, tmp_path):
    at = app("views/target_host.py", folder=_write(tmp_path, [total_row(wall_s=0.3)]))
    assert not at.exception
    assert at.title[0].value == "Target host"  # the page ran, with a local load
    assert not any(s.value == "Over a link" for s in at.subheader)


def test_the_link_answer_imports_no_jax():
    code = "import sys, bench.analysis.remote; print('jax' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
