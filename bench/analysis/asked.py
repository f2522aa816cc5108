"""The runs made with the load options a question asks (`loadbench recommend --budget 16MiB`).

A load option (`loader.options.TABLE`) changes what a strategy that takes it measures (a smaller
budget: a lower peak, perhaps a longer load), so an answer for a load with it comes from the runs
made with it. Each asked option is told apart by its results column: a row of a strategy that
takes the option (its `OPTIONS`, `loader.strategies`) is kept where it ran with the value asked
(its column, or the row's default where the run did not ask: a null column); a row of a strategy
that does not take it (a peer, the floor line, `mmap`) is kept as measured, since the option does
not change its load. An option that no run of a strategy taking it was made with is said
(`Unmeasured`: the strategies there that take it, and the values their runs ran with), so that
the command can name the runs to make instead of answering from runs that did not use it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import pandas as pd

from bench.records.results import Results
from loader.options import OPTIONS_BY_NAME, LoadOptions, Option
from loader.strategies import catalog


@dataclass(frozen=True)
class Unmeasured:
    """An option asked that no run of a strategy taking it was made with.

    Attributes:
        option: its `loader.options.TABLE` row.
        value: the value asked (checked by the row).
        takers: the strategies in the results that take it (none: no run there could have).
        measured: the values their runs ran with, sorted (None: left to the load, where the row
            has no default).

    Example:
        >>> _, missing = made_with(results, LoadOptions.of(budget=16 << 20))
        >>> missing[0].measured
        (268435456,)
    """

    option: Option
    value: Any
    takers: tuple[str, ...]
    measured: tuple[Any, ...]


def takers(name: str) -> frozenset[str]:
    """The registered strategies that take the option `name` (their `OPTIONS`).

    Example:
        >>> sorted(takers("share"))
        ['sharded']
    """
    return frozenset(info.name for info in catalog().values() if name in info.options)


def _ran_with(rows: pd.DataFrame, option: Option) -> pd.Series:
    """The value each row's load ran with: its column, else (not asked) the row's default."""
    assert option.column, f"{option.name}: no results column tells its runs apart"
    column = rows[option.column] if option.column in rows else pd.Series(None, index=rows.index)
    return column.astype(object).where(column.notna(), option.default)


def made_with(results: Results, options: LoadOptions) -> tuple[Results, list[Unmeasured]]:
    """`results` with only the phases a load with `options` speaks for (see the module
    docstring), and each option asked that no run of a strategy taking it was made with.

    Example:
        >>> narrowed, missing = made_with(results, LoadOptions.of(budget=16 << 20))
        >>> set(narrowed.phases["budget_bytes"].dropna())
        {16777216}
    """
    phases = results.phases
    keep = pd.Series(True, index=phases.index)
    unmeasured = []
    for name, value in options.given().items():
        option = OPTIONS_BY_NAME[name]
        taking = phases["strategy"].isin(takers(name))
        ran_with = _ran_with(phases, option)
        matched = taking & (ran_with == value)
        keep &= ~taking | matched
        if not matched.any():
            found = sorted(set(ran_with[taking]), key=lambda v: (v is None, 0 if v is None else v))
            strategies = tuple(sorted(set(phases.loc[taking, "strategy"])))
            unmeasured.append(Unmeasured(option, value, strategies, tuple(found)))
    return replace(results, phases=phases[keep]), unmeasured
