"""`loadbench dashboard` (dashboard.cli) and the results-folder confinement of dashboard.paths."""

from __future__ import annotations

import argparse
import os
import re
from pathlib import Path

import pytest

from dashboard import cli, paths


def test_register_adds_a_dashboard_subcommand_that_starts_streamlit_on_localhost(
    monkeypatch, tmp_path
):
    parser = argparse.ArgumentParser(prog="loadbench")
    cli.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["dashboard", "--results", str(tmp_path), "--port", "8600"])
    seen = {}

    def fake_serve(cmd, env):
        seen.update(cmd=cmd, env=env)
        return 0

    monkeypatch.setattr(cli, "_serve", fake_serve)
    assert args.func(args) == 0
    cmd = seen["cmd"]
    assert cmd[1:4] == ["-m", "streamlit", "run"] and cmd[4].endswith(
        os.path.join("dashboard", "app.py")
    )
    assert cmd[cmd.index("--server.address") + 1] == "127.0.0.1"
    assert cmd[cmd.index("--server.port") + 1] == "8600"
    assert cmd[cmd.index("--server.headless") + 1] == "true"
    assert seen["env"]["LOADBENCH_RESULTS"] == str(tmp_path.resolve())


def test_defaults_and_a_bad_port(monkeypatch, capsys):
    monkeypatch.setattr(cli, "_serve", lambda cmd, env: pytest.fail("must not start"))
    assert cli.main(["--port", "70000"]) == 2
    assert "--port 70000" in capsys.readouterr().err
    parser = argparse.ArgumentParser()
    cli.register(parser.add_subparsers())
    args = parser.parse_args(["dashboard"])
    assert (args.results, args.port) == ("results", cli.DEFAULT_PORT)


def test_paths_stay_inside_the_results_folder(tmp_path):
    root = tmp_path / "results"
    (root / "m" / "run" / "memray").mkdir(parents=True)
    html = root / "m" / "run" / "memray" / "a.html"
    html.write_text("<html></html>")
    secret = tmp_path / "secret.txt"
    secret.write_text("no")
    (root / "m" / "link.html").symlink_to(secret)
    assert paths.inside(root, "m/run/memray/a.html") == html.resolve()
    assert paths.inside(root, "run/memray/a.html", machine="m") == html.resolve()
    assert paths.inside(root, str(html)) == html.resolve()  # absolute, but inside
    moved = "/elsewhere/results/m/run/memray/a.html"  # written on another host, then copied here
    assert paths.inside(root, moved, machine="m") == html.resolve()
    for bad in ["../secret.txt", str(secret), "m/link.html", "m/../../secret.txt", "", None, "m"]:
        assert paths.inside(root, bad, machine="m") is None, bad
    assert paths.read_text(root, "../secret.txt") is None


def test_a_taken_port_is_refused_before_any_url_is_printed(tmp_path, monkeypatch, capsys):
    import socket

    monkeypatch.setattr(cli, "_serve", lambda cmd, env: pytest.fail("must not start"))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert cli.main(["--results", str(tmp_path), "--port", str(port)]) == 2
    out, err = capsys.readouterr()
    assert "http://" not in out and f"127.0.0.1:{port} is already in use" in err


def test_every_phase_has_its_colour_keyed_by_the_vocabulary():
    from dashboard import style
    from loader.vocabulary import PHASE_ORDER

    assert set(style.PHASE_COLORS) == set(PHASE_ORDER)
    assert len(set(style.PHASE_COLORS.values())) == len(PHASE_ORDER)


def test_the_page_list_is_the_views_folder():
    from dashboard.views import PAGES

    views = sorted(p.name for p in (Path(cli.__file__).parent / "views").glob("*.py"))
    assert sorted(p.file for p in PAGES) == [v for v in views if v != "__init__.py"]
    parser = argparse.ArgumentParser()
    cli.register(parser.add_subparsers())
    help_text = parser._subparsers._group_actions[0].choices["dashboard"].description
    assert all(p.title in help_text for p in PAGES)


def _arguments(command: str) -> set[str]:
    """The options and positional names `loadbench COMMAND` really takes (`--run`, `RESULTS`)."""
    from bench.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    actions = sub.choices[command]._actions
    return {s for a in actions for s in a.option_strings} | {
        str(a.metavar or a.dest).upper() for a in actions if not a.option_strings
    }


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["report", "{missing}", "--out", "{tmp}/r.html"], "RESULTS"),
        (["report", "{empty}", "--out", "{tmp}/r.html"], None),
        (["report", "{fixture}", "--run", "nope", "--out", "{tmp}/r.html"], "--run"),
        (["history", "{missing}"], "RESULTS"),
        (["compare", "{missing}", "{fixture}"], "BASE"),
        (["compare", "{fixture}", "{missing}"], "NEW"),
    ],
)
def test_every_error_names_an_argument_its_command_takes(
    argv, named, fixture_results, tmp_path, capsys
):
    """`report`, `history` and `compare` take their folders as positional arguments: an error
    never tells the user to "point --results" (an option they do not have)."""
    from bench.cli import main

    (tmp_path / "empty").mkdir()
    where = {"missing": tmp_path / "nope", "empty": tmp_path / "empty", "tmp": tmp_path}
    argv = [a.format(fixture=fixture_results.root, **where) for a in argv]
    assert main(argv) == 2
    said = capsys.readouterr().err
    assert said.startswith("loadbench: error: ") and len(said.strip().splitlines()) == 1, said
    mine = said.split("`")[0::2]  # what is said of this command, not of a command it suggests
    flags = {f for part in mine for f in re.findall(r"--[a-z][a-z-]*", part)}
    assert flags <= _arguments(argv[0]), said
    if named:
        assert named in said, said
