"""`load_model`'s options, typed by role: the groups a strategy declares that it takes.

`loader.load_model` keeps its keywords (they are contracts); inside, they travel as one frozen
`LoadOptions` of five groups, each a frozen dataclass whose fields are those keywords:

- `Reading` (`budget`, `threads`, `cache_policy`): how bytes are read into host memory, and the
  bound on what is held there beyond the model;
- `Placement` (`staging`): how leaves reach their devices;
- `Remote` (`concurrency`, `cache_dir`): how a URL is read;
- `Sharing` (`share`, `max_over_read`): how `sharded`'s processes split a checkpoint, and how much
  a process's read plan may read over its share;
- `Checking` (`digest`, `unvalidated`, `idle_timeout`, `timeout`): what a URL's bytes are checked
  against, and how long a remote load waits.

A strategy says which it takes in its `OPTIONS`: a group by name (`"checking"`), or one field of a
group (`"reading.budget"`); `loader.strategies` refuses any other option given, in one line, before
anything is imported or read (`option_names`). A value is checked once, by the engine's own
options made from these groups (`loader.strategies._engine_options`: `pipeline_options`,
`remote_options`; `loader.sharded.share.check_share`, `check_budget`). This module sits below the
engines and the report (`Share`, the type of `LoadReport.share`'s choices, is here) and imports
nothing heavy: the strategy registry reads it while it lists strategies.
"""

from __future__ import annotations

import enum
import os
from dataclasses import dataclass, fields
from numbers import Integral
from typing import TYPE_CHECKING, Any, TypeVar

from loader.errors import CheckpointError
from loader.vocabulary import AUTO, BYTES, REGIONS

if TYPE_CHECKING:
    from loader.remote.options import Digests


class Share(enum.Enum):
    """What `share=` takes: how `sharded`'s processes split the checkpoint
    (`loader.sharded.share`)."""

    REGIONS = REGIONS
    BYTES = BYTES
    AUTO = AUTO


@dataclass(frozen=True)
class _Group:
    """What every option group can say of itself: the options given (not None), by name."""

    def given(self) -> dict[str, Any]:
        """The fields given a value (None: not given), by their `load_model` keyword.

        Example:
            >>> Reading(budget=1 << 20).given()
            {'budget': 1048576}
        """
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        return {name: value for name, value in values.items() if value is not None}


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
    load waits (`idle_timeout`, `timeout`); `loader.remote.options.RemoteOptions` checks them."""

    digest: Digests | None = None
    unvalidated: str | None = None
    idle_timeout: float | None = None
    timeout: float | None = None


#: Each group by the name a strategy's `OPTIONS` gives it.
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
        """The groups of `load_model`'s keywords, each into the group whose field it is.

        Raises:
            TypeError: a keyword no group has (the registry refuses those first, by name).
        """
        left = dict(keywords)
        options = cls(
            reading=_taken(Reading, left),
            placement=_taken(Placement, left),
            remote=_taken(Remote, left),
            sharing=_taken(Sharing, left),
            checking=_taken(Checking, left),
        )
        if left:
            raise TypeError(f"no option group takes {', '.join(sorted(left))}")
        return options

    def given(self) -> dict[str, Any]:
        """Every option given (not None), by its `load_model` keyword."""
        return {k: v for g in GROUPS for k, v in getattr(self, g).given().items()}


G = TypeVar("G", bound=_Group)


def _taken(group: type[G], left: dict[str, Any]) -> G:
    """`group` made of the keywords in `left` that are its fields, taken out of `left`."""
    return group(**{name: left.pop(name) for name in _field_names(group) if name in left})


#: No option given (what a strategy that declares none is passed).
NO_OPTIONS = LoadOptions()


def check_budget(budget: int | None, default: int) -> int:
    """`budget=` as a whole, positive number of bytes (None: `default`), or a one-line error.

    Example:
        >>> check_budget(None, 256 << 20)
        268435456
    """
    if budget is None:
        return default
    if isinstance(budget, bool) or not isinstance(budget, Integral):
        raise CheckpointError(f"budget={budget!r}: give a whole number of bytes")
    if budget <= 0:
        raise CheckpointError(f"budget={budget!r}: give a positive number of bytes")
    return int(budget)
