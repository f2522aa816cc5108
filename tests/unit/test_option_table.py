"""One declared table of load options (`loader.options.TABLE`, issue 72): the flags of `bench run`,
`recommend` and `plan` (each the rows that name it), the bench child's task, the results'
columns, SCHEMA.md's option section and the dashboard's labels are made from it, and nothing else
spells an option's flag or column."""

from __future__ import annotations

import argparse
import dataclasses
import io
import tokenize
from pathlib import Path

import pytest

from bench.cli import build_parser
from bench.records.configuration import ROW_CONFIGURATION
from bench.records.schema import PhaseRecord, RunRecord, option_columns, option_section
from bench.records.wire import ChildTask, from_json, to_json
from loader.options import (
    BENCH_RUN,
    COUNTS,
    OPTIONS_BY_NAME,
    PLAN,
    RECOMMEND,
    TABLE,
    LoadOptions,
)

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("loader", "bench", "dashboard", "shapes")
#: The folders that hold no flat copy of an option (issue 72's target).
NO_COPIES = ("bench/run", "bench/records", "bench/child", "bench/commands")
#: Where a record column's name may be spelled there: the schema declares the columns (a
#: published contract, held to the table below), and these record what a load reported of
#: itself, not what was asked: the requests in flight a remote load ran with
#: (`LoadReport.remote`, a route's part), the budget in effect (`Measurement.budget_bytes`), the
#: share mode `sharded` chose (`LoadReport.share`); and homonyms: the machine probe's reader
#: threads, a link's concurrency curve.
COLUMN_SPELLED = {
    "bench/records/schema.py": {o.column for o in TABLE if o.column},
    "bench/run/rows.py": {"concurrency", "budget_bytes"},
    "bench/child/worker.py": {"concurrency", "budget_bytes", "share"},
    "bench/records/results.py": {"concurrency"},
    "bench/run/reference.py": {"threads"},
    "bench/commands/recommend.py": {"concurrency"},
}
FLAGS = {str(o.flag) for o in TABLE if o.flag}
COLUMNS = {str(o.column) for o in TABLE if o.column}


def _modules(folders: tuple[str, ...]) -> list[Path]:
    return sorted(p for folder in folders for p in (ROOT / folder).rglob("*.py"))


def _spelled(path: Path) -> list[tuple[int, str]]:
    """(line, text) of each string literal, keyword argument and attribute in `path`'s code."""
    tokens = list(tokenize.generate_tokens(io.StringIO(path.read_text()).readline))
    found = []
    for i, token in enumerate(tokens):
        if token.type == tokenize.STRING and not token.string.startswith(('"""', "f")):
            found.append((token.start[0], token.string.strip("'\"")))
        elif token.type == tokenize.NAME and 0 < i < len(tokens) - 1:
            before, after = tokens[i - 1].string, tokens[i + 1].string
            if before == "." or (after == "=" and before in ("(", ",")):
                found.append((token.start[0], token.string))
    return found


COMMANDS = (BENCH_RUN, RECOMMEND, PLAN)


def _command(name: str) -> argparse.ArgumentParser:
    """The parser of `loadbench <name>` (`bench run`: its `run` under `bench`)."""
    parser = build_parser()
    for word in name.split():
        parser = parser._subparsers._group_actions[0].choices[word]  # type: ignore[union-attr]
    return parser


def test_each_row_with_a_flag_names_its_commands_and_each_command_is_told_how():
    for option in TABLE:
        assert bool(option.flag) == bool(option.commands), option.name
        assert set(option.commands) <= set(COMMANDS), option.name
        if option.cli == COUNTS:  # one configuration per value: a sweep only a run makes
            assert option.commands == (BENCH_RUN,), option.name
        if RECOMMEND in option.commands:  # runs made with it, told apart by its column
            assert BENCH_RUN in option.commands and option.column, option.name


@pytest.mark.parametrize("command", COMMANDS)
def test_each_command_takes_exactly_the_flags_its_rows_name_as_the_table_makes_them(command):
    """A flag a row gives `command` is there, made from the row (its name, help and choices);
    one of a row that does not name `command` is not (a flag spelled by hand in a command is
    also caught below, by its spelling)."""
    actions = {s: a for a in _command(command)._actions for s in a.option_strings}
    every = {str(o.flag) for o in TABLE if o.flag}
    assert {f for f in every if f in actions} == {
        str(o.flag) for o in TABLE if command in o.commands
    }
    for option in (o for o in TABLE if command in o.commands):
        action = actions[str(option.flag)]
        assert action.dest == option.name and action.help.endswith(option.help)
        assert tuple(action.choices or ()) == option.choices


@pytest.mark.parametrize("command", COMMANDS)
def test_a_bad_value_is_one_line_naming_the_flag_and_the_form(command, capsys):
    from bench.cli import main

    size = next(o for o in TABLE if command in o.commands and o.cli == "size")
    argv = [*command.split(), str(size.flag), "0"]
    assert main([*argv, *_REQUIRED[command]]) == 2
    err = capsys.readouterr().err
    assert f"{size.flag} '0'" in err and f"e.g. {size.flag} 4GiB" in err
    assert len(err.splitlines()) == 1


#: What each command needs besides the flag to reach reading it.
_REQUIRED = {
    BENCH_RUN: ["--shapes", "tiny-gpt2"],
    RECOMMEND: ["--shapes", "tiny-gpt2", "--host-ram", "4GiB"],
    PLAN: ["m.safetensors", "--model", "m:build"],
}


def test_no_product_module_but_the_table_spells_an_option_flag():
    spelled = [
        f"{path.relative_to(ROOT)}:{line}: {text}"
        for path in _modules(PRODUCT)
        if path != ROOT / "loader/options.py"
        for line, text in _spelled(path)
        if text in FLAGS
    ]
    assert not spelled, "build the flag from loader.options.TABLE instead"


def test_no_flat_copy_of_an_option_in_the_bench_run_records_child_or_commands():
    spelled = []
    for path in _modules(NO_COPIES):
        allowed = COLUMN_SPELLED.get(str(path.relative_to(ROOT)), set())
        for line, text in _spelled(path):
            if (text in COLUMNS and text not in allowed) or text in {"load_budget_bytes"}:
                spelled.append(f"{path.relative_to(ROOT)}:{line}: {text}")
    assert not spelled, "carry a LoadOptions and derive columns with option_columns"


def test_the_childs_task_carries_the_options_as_the_table_names_them():
    names = {f.name for f in dataclasses.fields(ChildTask)}
    assert not names & (set(OPTIONS_BY_NAME) | COLUMNS)
    asked = LoadOptions.of(budget=1 << 20, threads=2, cache_policy="keep", staging=True)
    asked = asked.with_values(share="bytes", concurrency=4)
    task = ChildTask("pipelined", "gpt2", "ck", "ck", options=asked.given())
    back = from_json(ChildTask, to_json(task), source="t.json")
    assert LoadOptions.of(**back.options) == asked


def test_each_column_is_a_record_field_and_filled_from_the_options():
    assert COLUMNS <= {f.name for f in dataclasses.fields(PhaseRecord)}
    asked = LoadOptions.of(budget=1 << 20, threads=2)
    columns = option_columns(asked, PhaseRecord)
    assert columns["budget_bytes"] == 1 << 20 and columns["threads"] == 2
    assert columns["cache_policy"] is None
    assert option_columns(asked, RunRecord) == {"budget_bytes": 1 << 20}


def test_the_dashboards_labels_are_the_tables():
    for option in (o for o in TABLE if o.label):
        assert ROW_CONFIGURATION[str(option.column)] == option.label


def test_schema_md_holds_the_option_section_as_the_table_makes_it():
    text = (ROOT / "bench/SCHEMA.md").read_text(encoding="utf-8")
    assert option_section() in text, (
        "bench/SCHEMA.md's load-option section differs from loader.options.TABLE: paste "
        "`python -c 'from bench.records.schema import option_section; print(option_section())'`"
    )


@pytest.mark.parametrize("option", [o for o in TABLE if o.flag], ids=lambda o: o.name)
def test_each_flag_reaches_the_task_of_a_strategy_that_takes_it(option, tmp_path):
    """`bench run --flag value` -> the run's options -> each task whose strategy takes it."""
    from bench.commands.bench import run_config
    from bench.run.matrix import Checkpoint, plan

    value = {"size": "1MiB", "count": "3", "counts": "2,5", "switch": None}.get(
        option.cli, option.choices[0] if option.choices else None
    )
    argv = ["bench", "run", "--shapes", "tiny-gpt2", "--out", str(tmp_path), str(option.flag)]
    argv += [] if value is None else [value]
    if option.group == "remote":
        argv += ["--source", "http"]
    args = build_parser().parse_args(argv)
    args.argv = argv
    config = run_config(args)
    taker = "sharded" if option.group == "sharing" else "pipelined"
    entries = [s for s in __import__("loader").strategies.catalog().values() if s.name == taker]
    ck = Checkpoint("tiny-gpt2", None, 0, str(tmp_path / "m.safetensors"), 1, 1, 1)
    config.memory_budget_bytes = 1 << 40
    tasks, _ = plan(ck, entries, config, tmp_path)
    given = {t.options.given().get(option.name) for t in tasks}
    assert None not in given and given


def test_a_value_the_rows_check_refuses_names_the_flag_and_the_form():
    """What a flag's reader lets through (`--threads` read by a caller's Namespace) meets the
    row's check, said with the flag, not the keyword."""
    from bench.commands.common import load_options
    from bench.errors import BenchError

    with pytest.raises(BenchError) as raised:
        load_options(argparse.Namespace(threads=0), RECOMMEND)
    assert str(raised.value) == (
        "--threads 0: give a whole number of reader threads, >= 1 (e.g. --threads 4)"
    )
