"""`load_model`'s options: one declared table (`TABLE`), and the typed groups a strategy takes.

Every option is one `Option` row of `TABLE` (pyperf's `METADATA` habit): its name (the
`load_model` keyword, the group's field, the bench's task field), its group, type, unit, check,
default, flag and the `loadbench` commands that take it (`bench run`, `recommend`, `plan`), help,
results column and the dashboard's label for it. Everything else that names an option is made
from the table: the commands' flags (`bench.commands.common`), the bench's tasks and rows
(`bench.run`, `bench.records`), the option section of bench/SCHEMA.md and the dashboard's
configuration labels (`bench.records.configuration`); tests/unit/test_option_table.py fails where
an option is spelled outside it, or a command lacks a flag its rows give it.

A load's options travel as one frozen `LoadOptions` of five groups, each a frozen dataclass whose
fields are the table's rows of that group:

- `Reading` (`budget`, `threads`, `cache_policy`): how bytes are read into host memory, and the
  bound on what is held there beyond the model;
- `Placement` (`staging`): how leaves reach their devices;
- `Remote` (`concurrency`, `cache_dir`): how a URL is read;
- `Sharing` (`share`, `max_over_read`): how `sharded`'s processes split a checkpoint, and how much
  a process's read plan may read over its share;
- `Checking` (`digest`, `unvalidated`, `idle_timeout`, `timeout`): what a URL's bytes are checked
  against, and how long a remote load waits.

A group checks each value given when it is made (the row's `check`, a one-line
`CheckpointError` naming the option otherwise), so every later reader (the engines, the bench)
meets checked values only; `value(name)` is the value a load runs with (given, else the row's
default). A strategy says which groups it takes in its `OPTIONS`: a group by name (`"checking"`),
or one field of a group (`"reading.budget"`); `loader.strategies` refuses any other option given,
in one line, before anything is imported or read (`option_names`).

Adding an option (a quantized checkpoint's dequantization policy, say): here, a row (its check
beside it), the field of its group and its `OptionKeywords` key (`load_model`'s keyword); the
`OPTIONS` of the strategies that take it (none where they take its group whole); and, where the
row names a results column, that field of `bench.records.schema.PhaseRecord` (SCHEMA.md's table
is made from the row). Its flag, task field and label follow from the row. This module imports
nothing heavy: the strategy registry and the bench's parent read it without jax.
"""

from __future__ import annotations

import enum
import math
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from numbers import Integral
from typing import Any, TypedDict, TypeVar

from loader.errors import CheckpointError, RemoteError
from loader.vocabulary import AUTO, BYTES, CACHE_POLICIES, REGIONS, SHARE_CHOICES

#: Host bytes in flight beyond the model's own when `budget=` is not given (256 MiB:
#: `loader.pipeline.budget`, `bench run --budget`).
DEFAULT_BUDGET_BYTES = 256 << 20
#: Range requests in flight to a URL when `concurrency=` is not given.
DEFAULT_CONCURRENCY = 16
#: Seconds without a byte before a range request fails, when `idle_timeout=` is not given.
DEFAULT_IDLE_TIMEOUT_S = 30.0
#: The most a `sharded` process's read plan may read, over the bytes of its share (the gaps it
#: reads through to save requests: `loader.sharded.read_plan`). 1.5: a process receives at most
#: half its share again, the ratio above which orbax v1's planner warns of heavy over-read.
DEFAULT_MAX_OVER_READ = 1.5
#: What `unvalidated=` takes: "allow" accepts a server with neither ETag nor Last-Modified.
UNVALIDATED_CHOICES = ("refuse", "allow")
#: A digest for each file: one for a one-file checkpoint, or a shard file's name to its digest.
Digests = str | Mapping[str, str]


class Share(enum.Enum):
    """What `share=` takes: how `sharded`'s processes split the checkpoint
    (`loader.sharded.share`)."""

    REGIONS = REGIONS
    BYTES = BYTES
    AUTO = AUTO


# -- the checks: each takes a given value (never None) and returns it checked -------------------
def _whole(name: str, value: Any, what: str, error: type[CheckpointError]) -> int:
    if isinstance(value, bool) or not isinstance(value, Integral) or value < 1:
        raise error(f"{name}={value!r}: give a whole number of {what}, >= 1")
    return int(value)


def _budget(value: Any) -> int:
    return _whole("budget", value, "bytes", CheckpointError)


def _threads(value: Any) -> int:
    return _whole("threads", value, "reader threads", CheckpointError)


def _concurrency(value: Any) -> int:
    return _whole("concurrency", value, "requests", RemoteError)


def _one_of(
    name: str,
    choices: tuple[str, ...],
    say: str = "",
    error: type[CheckpointError] = CheckpointError,
) -> Callable[[Any], str]:
    def check(value: Any) -> str:
        value = value.value if isinstance(value, enum.Enum) else value
        if not isinstance(value, str) or value not in choices:
            raise error(f"{name}={value!r}: give one of {', '.join(map(repr, choices))}{say}")
        return value

    return check


_SHARE_SAYS = (
    " ('regions': each process reads its own index ranges; 'bytes': a contiguous block each, "
    "resharded over the interconnect; 'auto': chosen per load)"
)


def _staging(value: Any) -> bool:
    if not isinstance(value, bool):
        raise CheckpointError(f"staging={value!r}: give True, False or None")
    return value


def _path(value: Any) -> str | os.PathLike[str]:
    if not isinstance(value, str | os.PathLike):
        raise CheckpointError(f"cache_dir={value!r}: give a folder's path")
    return value


def _max_over_read(value: Any) -> float:
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if not number or not 1 <= value < float("inf"):
        raise RemoteError(
            f"max_over_read={value!r}: give a ratio of bytes read to bytes needed, >= 1 "
            "(1: read only the share; 1.5: up to half as much again to save requests)"
        )
    return float(value)


def parse_digest(value: str, *, where: str) -> str:
    """The 64 hex digits of `sha256:<hex>` (lower-cased), or a one-line `RemoteError`.

    Example:
        >>> parse_digest("sha256:" + "AB" * 32, where="digest")[:4]
        'abab'
    """
    text = value.strip().lower() if isinstance(value, str) else ""
    found = _SHA256.match(text)
    if found is None:
        raise RemoteError(
            f"{where}: digest={value!r} is not a sha256 digest; give 'sha256:' and its 64 hex "
            "digits (`sha256sum model.safetensors` prints them)"
        )
    return found[1]


_SHA256 = re.compile(r"^sha256:([0-9a-f]{64})$")


def _digest(value: Any) -> Digests:
    if isinstance(value, Mapping):
        for name, one in value.items():
            parse_digest(one, where=f"digest[{name!r}]")
    else:
        parse_digest(value, where="digest")
    return value  # type: ignore[no-any-return]


def _seconds(name: str) -> Callable[[Any], float]:
    def check(value: Any) -> float:
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if not number or not math.isfinite(value) or value <= 0:
            raise RemoteError(f"{name}={value!r}: give a number of seconds > 0 (or None: no bound)")
        return float(value)

    return check


# -- the table ------------------------------------------------------------------------------------
#: How a command reads an option's flag (`bench.commands.common.add_load_options`).
SIZE, COUNT, COUNTS, CHOICE, SWITCH = "size", "count", "counts", "choice", "switch"
#: The `loadbench` commands that take an option's flag (`Option.commands`): `bench run` loads with
#: it, `recommend` answers from the runs made with it, `plan` shows it in the plan.
BENCH_RUN, RECOMMEND, PLAN = "bench run", "recommend", "plan"


@dataclass(frozen=True)
class Option:
    """One load option, declared once.

    Attributes:
        name: the `load_model` keyword, its group's field and the bench task's field.
        group: the `GROUPS` key of the group it belongs to.
        type: its Python type, as the docs say it (`"int"`, `"str"`).
        unit: what its number counts (`"bytes"`, `"s"`), or "" where it is no number.
        check: the given value (never None) -> the value checked (a one-line `CheckpointError`).
        default: what a load runs with where it is not given (None: decided by the load, see
            `help`).
        help: one line on what it does (the flag's help and SCHEMA.md's).
        flag: its flag in the `loadbench` commands that take one, or None; `cli` says how the
            flag is read (`SIZE`: `256MiB`, `COUNT`: a whole number, `COUNTS`: `1,4,16`, one
            configuration each, `CHOICE`, `SWITCH`: given means True).
        commands: the commands that take `flag` (`BENCH_RUN`, `RECOMMEND`, `PLAN`): `bench run`
            where the bench can load with it, `recommend` where its runs can be told apart by
            `column`, `plan` where a dry run of the load says it (`loader.plan`'s `options`).
        column: the results column (bench/SCHEMA.md) that records it, or None.
        label: its name in the dashboard's configuration text, or None.
        choices: the values it takes, where it is one of a few.

    Example:
        >>> OPTIONS_BY_NAME["threads"].check(4)
        4
    """

    name: str
    group: str
    type: str
    unit: str
    check: Callable[[Any], Any]
    default: Any
    help: str
    flag: str | None = None
    cli: str = ""
    commands: tuple[str, ...] = ()
    column: str | None = None
    label: str | None = None
    choices: tuple[str, ...] = ()


TABLE: tuple[Option, ...] = (
    Option(
        name="budget",
        group="reading",
        type="int",
        unit="bytes",
        check=_budget,
        default=DEFAULT_BUDGET_BYTES,
        help="host bytes in flight beyond the model's own (pipelined, sharded, download; "
        "default 256MiB)",
        flag="--budget",
        cli=SIZE,
        commands=(BENCH_RUN, RECOMMEND, PLAN),
        column="budget_bytes",
        label="budget",
    ),
    Option(
        name="threads",
        group="reading",
        type="int",
        unit="threads",
        check=_threads,
        default=None,
        help="pipelined's reader threads (default: from the usable CPUs and the page cache)",
        flag="--threads",
        cli=COUNT,
        commands=(BENCH_RUN, RECOMMEND),
        column="threads",
        label="threads",
    ),
    Option(
        name="cache_policy",
        group="reading",
        type="str",
        unit="",
        check=_one_of("cache_policy", CACHE_POLICIES),
        default=AUTO,
        help="pipelined's page cache: auto (default: drop the file's pages behind the readers "
        "only where file and model do not fit in memory together), keep, or dontneed",
        flag="--cache-policy",
        cli=CHOICE,
        commands=(BENCH_RUN, RECOMMEND),
        column="cache_policy",
        label="cache policy",
        choices=CACHE_POLICIES,
    ),
    Option(
        name="staging",
        group="placement",
        type="bool",
        unit="",
        check=_staging,
        default=None,
        help="pipelined: read through a bounded ring of host staging buffers onto the devices "
        "(default: where the backend does not adopt host buffers, a GPU or a TPU)",
        flag="--staging",
        cli=SWITCH,
        commands=(BENCH_RUN,),
    ),
    Option(
        name="concurrency",
        group="remote",
        type="int",
        unit="requests",
        check=_concurrency,
        default=DEFAULT_CONCURRENCY,
        help="a URL's range requests in flight (default 16); the bench runs one configuration "
        "per value",
        flag="--remote-concurrency",
        cli=COUNTS,
        commands=(BENCH_RUN,),
        column="concurrency",
    ),
    Option(
        name="cache_dir",
        group="remote",
        type="path",
        unit="",
        check=_path,
        default=None,
        help="download a URL's files there once, then load them locally (default: write no file)",
    ),
    Option(
        name="share",
        group="sharing",
        type="str",
        unit="",
        check=_one_of("share", SHARE_CHOICES, _SHARE_SAYS),
        default=AUTO,
        help="sharded: how its processes split the checkpoint: regions (each its devices' index "
        "ranges), bytes (a leading-axis block each, resharded over the interconnect), or "
        "auto (default: bytes over a URL where regions would send too many requests)",
        flag="--share",
        cli=CHOICE,
        commands=(BENCH_RUN, RECOMMEND),
        column="share",
        choices=SHARE_CHOICES,
    ),
    Option(
        name="max_over_read",
        group="sharing",
        type="float",
        unit="ratio",
        check=_max_over_read,
        default=DEFAULT_MAX_OVER_READ,
        help="sharded over a URL: the most its read plan reads over its share's bytes "
        "(default 1.5)",
    ),
    Option(
        name="digest",
        group="checking",
        type="str | dict",
        unit="",
        check=_digest,
        default=None,
        help="a URL's file as sha256:<hex> (several files: each file's name to its digest)",
    ),
    Option(
        name="unvalidated",
        group="checking",
        type="str",
        unit="",
        check=_one_of("unvalidated", UNVALIDATED_CHOICES, error=RemoteError),
        default="refuse",
        help="allow: load from a server that sends neither ETag nor Last-Modified, no digest known",
        choices=UNVALIDATED_CHOICES,
    ),
    Option(
        name="idle_timeout",
        group="checking",
        type="float",
        unit="s",
        check=_seconds("idle_timeout"),
        default=DEFAULT_IDLE_TIMEOUT_S,
        help="seconds without a byte before a range request fails (default 30)",
    ),
    Option(
        name="timeout",
        group="checking",
        type="float",
        unit="s",
        check=_seconds("timeout"),
        default=None,
        help="seconds a remote load may take in all (default: no bound)",
    ),
)
#: Each row by its name.
OPTIONS_BY_NAME: dict[str, Option] = {option.name: option for option in TABLE}


# -- the groups -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Group:
    """What every option group does: check each value given (not None) once, as it is made, by
    its `TABLE` row, and say the options given and the values a load runs with."""

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if value is not None:
                object.__setattr__(self, f.name, OPTIONS_BY_NAME[f.name].check(value))

    def given(self) -> dict[str, Any]:
        """The fields given a value (None: not given), by their `load_model` keyword.

        Example:
            >>> Reading(budget=1 << 20).given()
            {'budget': 1048576}
        """
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        return {name: value for name, value in values.items() if value is not None}

    def value(self, name: str) -> Any:
        """The value a load runs with: the one given, else its row's default.

        Example:
            >>> Reading(threads=2).value("cache_policy")
            'auto'
        """
        given = getattr(self, name)
        return OPTIONS_BY_NAME[name].default if given is None else given


@dataclass(frozen=True)
class Reading(_Group):
    """How bytes are read into host memory: `budget` (host bytes held beyond the model's own,
    `pipelined` and `sharded`), `threads` and `cache_policy` (`pipelined`'s readers)."""

    budget: int | None = None
    threads: int | None = None
    cache_policy: str | None = None


@dataclass(frozen=True)
class Placement(_Group):
    """How leaves reach their devices: `staging` (`pipelined`'s ring of host staging buffers)."""

    staging: bool | None = None


@dataclass(frozen=True)
class Remote(_Group):
    """How a URL is read: `concurrency` (range requests in flight) and `cache_dir` (download the
    files there first)."""

    concurrency: int | None = None
    cache_dir: str | os.PathLike[str] | None = None


@dataclass(frozen=True)
class Sharing(_Group):
    """How `sharded`'s processes split the checkpoint (`share`), and the most a process's read
    plan reads over its share of a URL (`max_over_read`; `loader.sharded.read_plan`)."""

    share: Share | str | None = None
    max_over_read: float | None = None


@dataclass(frozen=True)
class Checking(_Group):
    """What a URL's bytes are checked against (`digest`, `unvalidated`) and how long a remote
    load waits (`idle_timeout`, `timeout`)."""

    digest: Digests | None = None
    unvalidated: str | None = None
    idle_timeout: float | None = None
    timeout: float | None = None


#: Each group by the name a strategy's `OPTIONS` and a row's `group` give it.
GROUPS: dict[str, type[_Group]] = {
    "reading": Reading,
    "placement": Placement,
    "remote": Remote,
    "sharing": Sharing,
    "checking": Checking,
}


def _field_names(group: type[_Group]) -> tuple[str, ...]:
    return tuple(f.name for f in fields(group))


def option_names(declared: tuple[str, ...]) -> tuple[str, ...]:
    """The `load_model` keywords a strategy's `OPTIONS` names: each group's fields, or one field
    (`"group.field"`), in order; ValueError naming what no group has.

    Example:
        >>> option_names(("remote.concurrency", "checking"))
        ('concurrency', 'digest', 'unvalidated', 'idle_timeout', 'timeout')
    """
    names: list[str] = []
    for entry in declared:
        group, _, one = entry.partition(".")
        if group not in GROUPS or (one and one not in _field_names(GROUPS[group])):
            raise ValueError(entry)
        names += [one] if one else _field_names(GROUPS[group])
    return tuple(names)


@dataclass(frozen=True)
class LoadOptions:
    """A load's options beyond what every strategy takes, one group per role (see the module
    docstring); a field given as None is not given.

    Example:
        >>> LoadOptions.of(budget=1 << 20, digest=None).given()
        {'budget': 1048576}
    """

    reading: Reading = Reading()
    placement: Placement = Placement()
    remote: Remote = Remote()
    sharing: Sharing = Sharing()
    checking: Checking = Checking()

    @classmethod
    def of(cls, **keywords: Any) -> LoadOptions:
        """The groups of `load_model`'s keywords, each into the group whose field it is (each
        value checked there).

        Raises:
            TypeError: a keyword no group has (the registry refuses those first, by name).
            CheckpointError: a value its row's check refuses.
        """
        unknown = sorted(set(keywords) - set(OPTIONS_BY_NAME))
        if unknown:
            raise TypeError(f"no option group takes {', '.join(unknown)}")
        return cls(
            reading=_group_of(Reading, keywords),
            placement=_group_of(Placement, keywords),
            remote=_group_of(Remote, keywords),
            sharing=_group_of(Sharing, keywords),
            checking=_group_of(Checking, keywords),
        )

    def given(self) -> dict[str, Any]:
        """Every option given (not None), by its `load_model` keyword."""
        return {k: v for g in GROUPS for k, v in getattr(self, g).given().items()}

    def only(self, names: tuple[str, ...]) -> LoadOptions:
        """These options with only those of `names` given (a strategy's `options`).

        Example:
            >>> LoadOptions.of(budget=1 << 20, share="bytes").only(("share",)).given()
            {'share': 'bytes'}
        """
        return LoadOptions.of(**{k: v for k, v in self.given().items() if k in names})

    def with_values(self, **keywords: Any) -> LoadOptions:
        """These options with `keywords` given too (in place of any given before).

        Example:
            >>> LoadOptions.of(budget=1 << 20).with_values(threads=2).given()
            {'budget': 1048576, 'threads': 2}
        """
        return LoadOptions.of(**{**self.given(), **keywords})


G = TypeVar("G", bound=_Group)


def _group_of(group: type[G], keywords: Mapping[str, Any]) -> G:
    """`group` made of those of `keywords` that are its fields."""
    return group(**{name: keywords[name] for name in _field_names(group) if name in keywords})


class OptionKeywords(TypedDict, total=False):
    """`load_model`'s keywords for the options (its shim for `options=`): each row of `TABLE`
    by its name, typed as its group's field (tests/unit/test_options.py holds them equal)."""

    budget: int | None
    threads: int | None
    cache_policy: str | None
    staging: bool | None
    concurrency: int | None
    cache_dir: str | os.PathLike[str] | None
    share: Share | str | None
    max_over_read: float | None
    digest: Digests | None
    unvalidated: str | None
    idle_timeout: float | None
    timeout: float | None


#: No option given (what a strategy that declares none is passed).
NO_OPTIONS = LoadOptions()
