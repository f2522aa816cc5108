"""The options several `loadbench` commands share, each defined once: `--json`, `--results`,
`--out`, `--cache`, the strategies' own options (made from `loader.options.TABLE`), and the
comma-separated lists they take."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from bench.errors import BenchError
from bench.records.results import Results, partial_runs, read_folders
from bench.vocabulary import CACHE_CHOICES, CACHE_STATES, WARM
from loader.errors import CheckpointError
from loader.options import (
    BENCH_RUN,
    CHOICE,
    COUNT,
    COUNTS,
    PLAN,
    RECOMMEND,
    SIZE,
    SWITCH,
    TABLE,
    LoadOptions,
    Option,
)

RESULTS_DEFAULT = "results"


def csv(text: str) -> list[str]:
    """`a, b,,c` -> `['a', 'b', 'c']`."""
    return [part.strip() for part in text.split(",") if part.strip()]


def add_json(p: argparse.ArgumentParser, what: str = "one JSON object") -> None:
    """`--json`: print `what` instead of text."""
    p.add_argument("--json", action="store_true", help=f"print {what} instead of text")


def add_results(p: argparse.ArgumentParser, help: str = "measured results folder") -> None:
    """`--results DIR`: a results folder to read."""
    p.add_argument("--results", default=RESULTS_DEFAULT, help=f"{help} (default: results)")


def existing_results(folder: str | Path, given_as: str = "--results") -> Path:
    """`folder` if it exists; else a one-line error naming it as missing, how to fill it, and
    the argument it was given as (`--results`, or a positional `RESULTS`, `BASE`, `NEW`)."""
    path = Path(folder)
    if not path.exists():
        raise BenchError(
            f"results folder {folder} does not exist: run `loadbench bench run --shapes gpt2 "
            f"--out {folder}` first, or give {given_as} a folder of runs"
        )
    return path


def read_stated(folders: list[str], given_as: str = "--results") -> Results:
    """The results of `folders` read as one, each named as missing if it is; every file or line
    skipped is said on stderr in one line each (which, and why)."""
    results = read_folders([existing_results(f, given_as) for f in folders])
    for file, message in results.errors:
        print(f"loadbench: skipped part of {file}: {message}", file=sys.stderr)
    return results


def add_allow_partial(p: argparse.ArgumentParser) -> None:
    """`--allow-partial`: read a results folder that holds part of a run (each loss still said)."""
    p.add_argument(
        "--allow-partial",
        action="store_true",
        help="read the results although a run there lost strategies or lines (each is said)",
    )


def losses(results: Results) -> list[str]:
    """What a folder lacks of its runs, one line each: runs that lost strategies
    (`partial_runs`), and the files or lines that could not be read."""
    lost = partial_runs(results)
    if results.errors:
        lost.append(f"{len(results.errors)} file(s) or line(s) could not be read (said above)")
    return lost


def read_whole(folders: list[str], *, allow_partial: bool, given_as: str = "--results") -> Results:
    """The results of `folders` read as one (`read_stated`), refused where a run there holds part
    of what it was asked (a truncated file, a killed run): an answer from part of a run is an
    answer about what is left, not about what was measured. With `allow_partial`, each loss is
    said on stderr instead, and the results are read as they are.

    Raises:
        BenchError: naming each loss and the two ways on (run again, or `--allow-partial`).
    """
    results = read_stated(folders, given_as)
    lost = losses(results)
    if lost and not allow_partial:
        raise BenchError(
            f"{', '.join(folders)} holds part of a run only: {'; '.join(lost)}. Run the bench "
            "again, or answer from what is there with --allow-partial"
        )
    for line in lost:
        print(f"loadbench: answering from part of a run (--allow-partial): {line}", file=sys.stderr)
    return results


def example(*lines: str) -> dict[str, Any]:
    """A subparser's epilog with its example(s): `add_parser(..., **example("loadbench ..."))`."""
    return {"epilog": f"example{'s' if len(lines) > 1 else ''}: {'; '.join(lines)}"}


def add_out(p: argparse.ArgumentParser) -> None:
    """`--out DIR`: the results folder a run writes."""
    p.add_argument("--out", default=RESULTS_DEFAULT, help="results folder (default: results)")


def add_cache(p: argparse.ArgumentParser, *, both: bool, help: str) -> None:
    """`--cache`: the page cache a load starts from; `both` only where a run can do each."""
    choices = CACHE_CHOICES if both else CACHE_STATES
    p.add_argument("--cache", choices=choices, default=WARM, help=help)


def size_flag(text: str | None, flag: str) -> int | None:
    """`text` in bytes, taken as written; a decimal size's reading is said ("4GB = 3.73 GiB")."""
    from bench.units import as_read, parse_size

    if not text:
        return None
    size = parse_size(text, what=flag)
    if "=" in (said := as_read(text, size)):
        print(f"{flag} {said}", file=sys.stderr)
    return size


def _count(text: str) -> int:
    """A whole number >= 1 (argparse reports anything else in one line)."""
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give a whole number, >= 1")
    return int(text)


def _counts(text: str) -> list[int]:
    """`1,4,16`: whole numbers >= 1, each its own configuration."""
    values = [v for v in csv(text) if v.isdigit() and int(v) >= 1]
    if not values or len(values) != len(csv(text)):
        raise argparse.ArgumentTypeError(f"{text!r}: give whole numbers >= 1, e.g. 1,4,16,64")
    return [int(v) for v in values]


#: How each kind of option flag is read (`loader.options.Option.cli`), as `add_argument` keywords.
_READ: dict[str, dict[str, Any]] = {
    SIZE: {"metavar": "SIZE"},
    COUNT: {"type": _count},
    COUNTS: {"type": _counts, "metavar": "N[,N...]"},
    CHOICE: {},
    SWITCH: {"action": "store_true", "default": None},
}
#: What a load option's flag does in each command that takes it, before the row's help.
_DOES = {
    BENCH_RUN: "",
    RECOMMEND: "fit on the runs made with it: ",
    PLAN: "said with the plan: ",
}
#: An example of each kind of flag's value, for the line that refuses one.
_FORM = {SIZE: "256MiB", COUNT: "4"}


def flagged(command: str = BENCH_RUN) -> list[Option]:
    """The load options `command` takes a flag for (`Option.commands` of `loader.options.TABLE`),
    in the table's order.

    Example:
        >>> [o.name for o in flagged(PLAN)]
        ['budget']
    """
    return [option for option in TABLE if option.flag and command in option.commands]


def add_load_options(p: argparse.ArgumentParser, command: str = BENCH_RUN) -> None:
    """The load options `command` takes, one flag each, made from `loader.options.TABLE` (`bench
    run` passes each only to the strategies that take it: `bench.run.matrix`)."""
    for option in flagged(command):
        choices = {"choices": option.choices} if option.cli == CHOICE else {}
        read: dict[str, Any] = {**_READ[option.cli], **choices}
        help = _DOES[command] + option.help
        p.add_argument(str(option.flag), dest=option.name, help=help, **read)


def _checked(option: Option, value: Any, given: Any) -> Any:
    """`value` checked by its row; else a one-line BenchError naming the flag and its form."""
    try:
        return option.check(value)
    except CheckpointError as exc:
        said = str(exc).removeprefix(f"{option.name}={value!r}: ")
        form = f" (e.g. {option.flag} {_FORM[option.cli]})" if option.cli in _FORM else ""
        raise BenchError(f"{option.flag} {given}: {said}{form}") from None


def load_options(
    args: argparse.Namespace, command: str = BENCH_RUN
) -> tuple[LoadOptions, dict[str, list[Any]]]:
    """The load options `command` was given (`add_load_options`): those of one value, as
    `LoadOptions` (each checked by its row), and those swept (`COUNTS`: one configuration per
    value) by name.

    Raises:
        BenchError: a value its row refuses (naming the flag and the form it takes).
    """
    one: dict[str, Any] = {}
    swept: dict[str, list[Any]] = {}
    for option in flagged(command):
        given = value = getattr(args, option.name, None)
        if option.cli == SIZE:
            value = size_flag(value, str(option.flag))
        if value is not None and option.cli == COUNTS:
            swept[option.name] = [_checked(option, v, given) for v in value]
        elif value is not None:
            one[option.name] = _checked(option, value, given)
    return LoadOptions.of(**one), swept


def asked_options(args: argparse.Namespace, command: str) -> LoadOptions:
    """The load options of a command that answers for one load (`recommend`, `plan`): a swept
    flag (`COUNTS`) is `bench run`'s alone (tests/unit/test_option_table.py holds the table so).
    """
    options, swept = load_options(args, command)
    assert not swept, f"{command}: a swept option ({', '.join(swept)}) is `bench run`'s alone"
    return options


def given_flags(args: argparse.Namespace, command: str) -> dict[str, str]:
    """Each load option `command` was given, by name, as it was typed (`--budget 16MiB`), for the
    lines that name the runs to make.

    Example:
        >>> given_flags(argparse.Namespace(budget="16MiB"), PLAN)
        {'budget': '--budget 16MiB'}
    """
    given = {o: getattr(args, o.name, None) for o in flagged(command)}
    return {
        o.name: str(o.flag) if o.cli == SWITCH else f"{o.flag} {value}"
        for o, value in given.items()
        if value is not None
    }
