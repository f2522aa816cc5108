"""`LoadPolicy`: what a caller declares expected of a load, so that only the unexpected is reported.

`load_model(..., ignore_unexpected=, ignore_missing=, casts=)` builds one and every strategy's load
sequence plans with it (`loader.planning.match.plan_load`):

- `ignore_unexpected`: glob patterns (`fnmatch`, `*` crosses dots) over file keys: a file key no
  model path asks for and that matches is listed in `LoadReport.ignored`, not reported.
- `ignore_missing`: glob patterns over model paths: a leaf without a tensor that matches is listed
  in `LoadReport.ignored` (and keeps its init, or zeros on an abstract target).
- `casts`: `"report"` (default) or `"allow"` (a float-to-float cast to the model's declared dtype
  is expected; `loader.placement.casts`).

A pattern that matches nothing is itself reported (`LoadReport.unmatched_ignores`): a typo in a
pattern must not pass in silence.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable
from dataclasses import dataclass

from loader.errors import CheckpointError
from loader.vocabulary import CAST_POLICIES, REPORT

Patterns = str | Iterable[str]


def _patterns(given: Patterns, name: str) -> tuple[str, ...]:
    items = (given,) if isinstance(given, str) else tuple(given)
    for item in items:
        if not isinstance(item, str) or not item:
            raise CheckpointError(
                f"{name}: each pattern must be a non-empty string (a glob such as 'pooler.*'), "
                f"got {item!r}"
            )
    return items


@dataclass(frozen=True)
class LoadPolicy:
    """Declared ignores and the cast policy of one load (validated once, here).

    Example:
        >>> policy = LoadPolicy.of(ignore_unexpected=("pooler.*",), casts="allow")
        >>> policy.ignores_unexpected("pooler.dense.weight")
        'pooler.*'
    """

    ignore_unexpected: tuple[str, ...] = ()
    ignore_missing: tuple[str, ...] = ()
    casts: str = REPORT

    @classmethod
    def of(
        cls, *, ignore_unexpected: Patterns = (), ignore_missing: Patterns = (), casts: str = REPORT
    ) -> LoadPolicy:
        """A policy from `load_model`'s keywords; `CheckpointError` naming a bad one."""
        if casts not in CAST_POLICIES:
            raise CheckpointError(
                f"casts={casts!r}: expected one of {', '.join(repr(c) for c in CAST_POLICIES)}"
            )
        return cls(
            _patterns(ignore_unexpected, "ignore_unexpected"),
            _patterns(ignore_missing, "ignore_missing"),
            casts,
        )

    def ignores_unexpected(self, file_key: str) -> str | None:
        """The first `ignore_unexpected` pattern matching `file_key`, or None."""
        return _first_match(self.ignore_unexpected, file_key)

    def ignores_missing(self, path: str) -> str | None:
        """The first `ignore_missing` pattern matching the model path `path`, or None."""
        return _first_match(self.ignore_missing, path)


def _first_match(patterns: tuple[str, ...], name: str) -> str | None:
    return next((p for p in patterns if fnmatch.fnmatchcase(name, p)), None)


DEFAULT_POLICY = LoadPolicy()
