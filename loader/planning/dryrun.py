"""`loader.plan`: what a load would do, from the model's shapes and the file's headers alone.

No tensor byte is read and no random model is built (a builder target is built abstractly): per
model path its shape and dtype, the file key it would read, that tensor's shape and dtype, the
key_map transform, and a verdict (`loader.vocabulary.VERDICTS`); then each file key no model path
asks for. It is how a key map is written: run it with an empty key map, read the table, map.

A strict load cannot see a square weight left untransposed (its shape is right either way), so the
plan flags one (`PlanTable.suspects`): a square 2-D leaf loaded with no transform while the key
map transposes its siblings of the same role (the same leaf name and shape: 73 `kernel`s of
384x384 transposed, one not). `str()` fits `WIDTH` columns: where one line per row would not, each
row takes two, the file's side under the model's.
"""

from __future__ import annotations

import os
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from loader.format.source import CheckpointSource
from loader.options import NO_OPTIONS, OPTIONS_BY_NAME, LoadOptions
from loader.placement.leaves import LeafKind
from loader.planning.keys import KeyMap
from loader.planning.match import plan_load
from loader.planning.plan import PlanEntry, Step
from loader.planning.policy import LoadPolicy, Patterns
from loader.report import LoadReport
from loader.target import resolve_target
from loader.transforms import Chain, Transpose
from loader.vocabulary import REPORT, VERDICTS

WIDTH = 120  # the table's width in columns, at most (a name longer than a line aside)

_COLUMNS = (
    "model path",
    "shape",
    "dtype",
    "file key",
    "file shape",
    "file dtype",
    "transform",
    "verdict",
    "note",
)


def _shape(shape: tuple[int, ...], present: bool) -> str:
    return "x".join(str(n) for n in shape) if shape else ("()" if present else "")


def _cells(e: PlanEntry) -> tuple[str, ...]:
    return (
        e.path,
        _shape(e.shape, bool(e.dtype)),
        e.dtype,
        e.file_key,
        _shape(e.file_shape, bool(e.file_dtype)),
        e.file_dtype,
        e.transform,
        e.verdict,
        e.note,
    )


def _transposes(transform: object) -> bool:
    """Whether a declared transform swaps a 2-D tensor's axes (a `Transpose`, or one in a chain)."""
    steps = transform.steps if isinstance(transform, Chain) else (transform,)
    return any(
        isinstance(s, Transpose) and [a % 2 for a in s.axes] == [1, 0] and len(s.axes) == 2
        for s in steps
    )


def untransposed(steps: Iterable[Step]) -> dict[str, str]:
    """Model path -> why it is suspect, for each square 2-D leaf loaded with no transform whose
    siblings of the same role (leaf name and shape) the key map transposes."""
    roles: dict[tuple[str, tuple[int, ...]], list[Step]] = defaultdict(list)
    for step in steps:
        shape = tuple(step.leaf.shape)
        if step.leaf.kind is LeafKind.ARRAY and len(shape) == 2 and shape[0] == shape[1]:
            roles[(str(step.leaf.path[-1]), shape)].append(step)
    found = {}
    for (name, shape), members in roles.items():
        flipped = sum(_transposes(s.transform) for s in members)
        for step in (s for s in members if s.transform is None) if flipped else ():
            found[step.leaf.key] = (
                f"not transposed, unlike {flipped} other {name} {shape[0]}x{shape[1]}: "
                "a forgotten transpose loads without error; check its key_map entry"
            )
    return found


@dataclass(frozen=True)
class PlanTable:
    """The dry run of one load: its entries (model order, then unused file keys), the report
    the load would give (`report.problems()` is what a strict load would raise) and the load
    options it was planned with (`loader.options.LoadOptions`: said under the table).

    Example:
        >>> table = loader.plan(builder, "model.safetensors", key_map=key_map)
        >>> print(table)              # an aligned table, one row per model path and file key
        >>> table.to_dict()["counts"]  # {"load": 120, "transform": 26, "unexpected": 1, ...}
    """

    path: str
    entries: tuple[PlanEntry, ...]
    report: LoadReport
    suspects: tuple[str, ...] = ()  # model paths `untransposed` flags (their notes say why)
    options: LoadOptions = NO_OPTIONS

    def counts(self) -> dict[str, int]:
        """Entries per verdict, in `VERDICTS` order (only the verdicts present)."""
        found = Counter(e.verdict for e in self.entries)
        return {v: found[v] for v in VERDICTS if found[v]}

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form: path, counts, entries, problems."""
        return {
            "path": self.path,
            "counts": self.counts(),
            "entries": [asdict(e) for e in self.entries],
            "problems": self.report.problems(),
            "suspects": list(self.suspects),
            "options": self.options.given(),
        }

    def __str__(self) -> str:
        rows = [_COLUMNS, *(_cells(e) for e in self.entries)]
        lines = _aligned(rows)
        if max(map(len, lines)) > WIDTH:  # two lines a row: the model's side, the file's under it
            lines = _aligned(
                [r[:3] + r[6:8] for r in rows], [("  " + r[3],) + r[4:6] + r[8:] for r in rows]
            )
        counts = ", ".join(f"{n} {v}" for v, n in self.counts().items())
        lines.append(f"{self.path}: {counts}")
        if self.options.given():
            lines.append(f"load options: {options_text(self.options)}")
        problems = self.report.problems()
        if problems:
            lines.append(f"{len(problems)} problem(s) a strict load would raise:")
            lines += [f"  {p}" for p in problems]
        if self.suspects:
            lines.append(f"{len(self.suspects)} suspect(s) a strict load cannot see:")
            lines += [f"  {p}" for p in self.suspects]
        return "\n".join(lines)


def options_text(options: LoadOptions) -> str:
    """The options given, each as `name=value` and its unit (`loader.options.TABLE`).

    Example:
        >>> options_text(LoadOptions.of(budget=16 << 20))
        'budget=16777216 bytes'
    """
    given = options.given().items()
    return ", ".join(f"{k}={v} {OPTIONS_BY_NAME[k].unit}".rstrip() for k, v in given)


def _aligned(rows: list[tuple[str, ...]], under: list[tuple[str, ...]] | None = None) -> list[str]:
    """The rows as aligned lines (header, a rule, then each row); with `under`, each row's second
    line (aligned on its own columns) follows it."""
    every = rows + (under or [])
    widths = [max(len(r[i]) for r in every if i < len(r)) for i in range(max(map(len, every)))]

    def line(cells: tuple[str, ...]) -> str:
        return "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()

    out = []
    for i, row in enumerate(rows):
        out.append(line(row))
        if under is not None and any(under[i]):
            out.append(line(under[i]))
        if i == 0:
            out.append("  ".join("-" * w for w in widths[: len(row)]))
    return out


def plan(
    target: Any,
    path: str | os.PathLike[str],
    *,
    key_map: KeyMap | None = None,
    ignore_unexpected: Patterns = (),
    ignore_missing: Patterns = (),
    casts: str = REPORT,
    options: LoadOptions | None = None,
) -> PlanTable:
    """Plan a load of `path` into `target` without reading any tensor's bytes.

    Args:
        target: an `nnx.Module`, or a zero-argument builder (built abstractly, as a load would).
        path: a `.safetensors` file or a folder of shards (only their headers are read).
        key_map / ignore_unexpected / ignore_missing / casts: as for `loader.load_model`.
        options: the load's options (`loader.options.LoadOptions`, as for `loader.load_model`,
            checked when made): said under the table and in `to_dict()["options"]` (the keys'
            plan is the same under any of them).

    Returns:
        `PlanTable`: `str()` is an aligned table; `.report` the `LoadReport` the load would give
        before any read (shapes a numpy-only transform gives are known only after the read).

    Example:
        >>> print(loader.plan(lambda: ViT(config, rngs=nnx.Rngs(0)), "vit/model.safetensors",
        ...     key_map=vit.key_map(config), ignore_unexpected=vit.IGNORE_UNEXPECTED))
    """
    policy = LoadPolicy.of(
        ignore_unexpected=ignore_unexpected, ignore_missing=ignore_missing, casts=casts
    )
    model, abstract = resolve_target(target)
    with CheckpointSource(Path(path)) as source:
        planned = plan_load(model, source, key_map=key_map, policy=policy, abstract=abstract)
    suspects = untransposed(planned.steps)
    entries = tuple(
        replace(e, note="; ".join(n for n in (e.note, suspects[e.path]) if n))
        if e.path in suspects
        else e
        for e in planned.entries
    )
    return PlanTable(
        str(path),
        entries,
        planned.report,
        tuple(f"{p}: {suspects[p]}" for p in suspects),
        NO_OPTIONS if options is None else options,
    )
