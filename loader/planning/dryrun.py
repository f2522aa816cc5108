"""`loader.plan`: what a load would do, from the model's shapes and the file's headers alone.

No tensor byte is read and no random model is built (a builder target is built abstractly): per
model path its shape and dtype, the file key it would read, that tensor's shape and dtype, the
key_map transform, and a verdict (`loader.vocabulary.VERDICTS`); then each file key no model path
asks for. It is how a key map is written: run it with an empty key map, read the table, map.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from loader.format.source import CheckpointSource
from loader.planning.keys import KeyMap
from loader.planning.match import plan_load
from loader.planning.plan import PlanEntry
from loader.planning.policy import LoadPolicy, Patterns
from loader.report import LoadReport
from loader.target import resolve_target
from loader.vocabulary import REPORT, VERDICTS

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


@dataclass(frozen=True)
class PlanTable:
    """The dry run of one load: its entries (model order, then unused file keys) and the report
    the load would give (`report.problems()` is what a strict load would raise).

    Example:
        >>> table = loader.plan(builder, "model.safetensors", key_map=key_map)
        >>> print(table)              # an aligned table, one row per model path and file key
        >>> table.to_dict()["counts"]  # {"load": 120, "transform": 26, "unexpected": 1, ...}
    """

    path: str
    entries: tuple[PlanEntry, ...]
    report: LoadReport

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
        }

    def __str__(self) -> str:
        rows = [_COLUMNS, *(_cells(e) for e in self.entries)]
        widths = [max(len(r[i]) for r in rows) for i in range(len(_COLUMNS))]
        lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
        lines.insert(1, "  ".join("-" * w for w in widths))
        counts = ", ".join(f"{n} {v}" for v, n in self.counts().items())
        lines.append(f"{self.path}: {counts}")
        problems = self.report.problems()
        if problems:
            lines.append(f"{len(problems)} problem(s) a strict load would raise:")
            lines += [f"  {p}" for p in problems]
        return "\n".join(lines)


def plan(
    target: Any,
    path: str | os.PathLike[str],
    *,
    key_map: KeyMap | None = None,
    ignore_unexpected: Patterns = (),
    ignore_missing: Patterns = (),
    casts: str = REPORT,
) -> PlanTable:
    """Plan a load of `path` into `target` without reading any tensor's bytes.

    Args:
        target: an `nnx.Module`, or a zero-argument builder (built abstractly, as a load would).
        path: a `.safetensors` file or a folder of shards (only their headers are read).
        key_map / ignore_unexpected / ignore_missing / casts: as for `loader.load_model`.

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
    return PlanTable(str(path), tuple(planned.entries), planned.report)
