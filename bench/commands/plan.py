"""`loadbench plan`: what a load of CHECKPOINT into a model would do, without reading a tensor.

The model is a factory (`--model MODULE:FACTORY`, a zero-argument callable returning an NNX
module, built abstractly: no weights are allocated) or a shape set's port (`--port PRESET`, with
its key map and declared ignores). The table (`loader.plan`) lists every model path with its
shape and dtype, the file key, the file's shape and dtype, the transform and a verdict, then the
file keys no model path asks for; `--json` prints the same as one object. This is how a key map
is written: plan with none, read the names, map them, plan again. The load options a plan takes
(`--budget`: the rows of `loader.options.TABLE` that name `plan`, their flags made by
`bench.commands.common.add_load_options`) are checked as a load checks them and said with the
plan (`options` in `--json`).

It exits 1 when a strict load would raise (the table ends with those problems), so a script or CI
can gate on it; 0 otherwise. `MODULE` is imported as `python -m` would (`bench.user_model`): the
working directory comes first on the import path, so `--model mpnet:build` finds `./mpnet.py`.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from bench.commands.common import add_json, add_load_options, asked_options, given_flags
from bench.user_model import builder, resolve
from loader.options import PLAN
from loader.vocabulary import (
    CAST_POLICIES,
    CAST_VERDICT,
    DTYPE_MISMATCH,
    IGNORED,
    LOAD,
    MISSING,
    REPORT,
    SHAPE_MISMATCH,
    TRANSFORM,
    UNEXPECTED,
)


def _target(args: argparse.Namespace) -> tuple[Any, Any, tuple[str, ...], tuple[str, ...]]:
    """(builder, key map, ignore_unexpected, ignore_missing) from the options."""
    unexpected, missing = tuple(args.ignore_unexpected), tuple(args.ignore_missing)
    if args.port:
        from shapes.architectures.port import port_for

        port = port_for(args.port)
        unexpected += port.ignore_unexpected
        missing += port.ignore_missing
        key_map = port.key_map if args.key_map is None else resolve(args.key_map, "--key-map")
        return port.builder, key_map, unexpected, missing
    key_map = None if args.key_map is None else resolve(args.key_map, "--key-map")
    return builder(args.model), key_map, unexpected, missing


def cmd_plan(args: argparse.Namespace) -> int:
    import loader

    options = asked_options(args, PLAN)  # a bad value is said before the model is imported
    builder, key_map, unexpected, missing = _target(args)
    table = loader.plan(
        builder,
        args.checkpoint,
        key_map=key_map,
        ignore_unexpected=unexpected,
        ignore_missing=missing,
        casts=args.casts,
        options=options,
    )
    if args.json:
        print(json.dumps(table.to_dict(), indent=2))
    else:
        print(plan_text(table, every_line=args.all, typed=given_flags(args, PLAN)))
    return 1 if table.report.problems() else 0


#: Verdicts of a model path that found its file key (whatever became of it then).
FOUND = (LOAD, TRANSFORM, CAST_VERDICT, SHAPE_MISMATCH, DTYPE_MISMATCH)
SHOWN = 5  # names of each side said in the "nothing matches" line


def nothing_matches(table: Any) -> str | None:
    """Where no model path found a file key while the file has keys: one line saying so, with
    the first names of each side (a wrong checkpoint, or a key map still to write); else None."""
    if any(e.verdict in FOUND for e in table.entries):
        return None
    paths = [e.path for e in table.entries if e.verdict == MISSING]
    keys = [e.file_key for e in table.entries if e.verdict in (UNEXPECTED, IGNORED) and e.file_key]
    if not paths or not keys:
        return None

    def first(names: list[str]) -> str:
        return ", ".join(names[:SHOWN]) + (", ..." if len(names) > SHOWN else "")

    return (
        f"nothing matches: none of the model's {len(paths)} paths names one of the file's "
        f"{len(keys)} keys: wrong checkpoint, or a key map to write (--key-map)? model paths: "
        f"{first(paths)}; file keys: {first(keys)}"
    )


def plan_text(table: Any, *, every_line: bool, typed: dict[str, str] | None = None) -> str:
    """The plan's table (`loader.plan`), its counts first, then the load options it was planned
    with as they were typed (`typed`: `--budget 16MiB`). Where nothing matches, the counts and
    that line only, unless `every_line`: a table of a thousand missing and unexpected names
    hides the one thing to say."""
    counts = ", ".join(f"{n} {v}" for v, n in table.counts().items())
    head = f"{table.path}: {counts}"
    if typed:
        head += f"\nplanned with {' '.join(typed.values())}"
    lost = nothing_matches(table)
    if lost is None:
        return f"{head}\n\n{table}"
    if every_line:
        return f"{head}\n{lost}\n\n{table}\n{lost}"
    return f"{head}\n{lost}\n(every model path and file key: --all)"


def register(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add `loadbench plan`."""
    p = sub.add_parser(
        "plan",
        help="dry-run a load: every model path, its file key, transform and verdict (no read)",
        description="List what loading CHECKPOINT into the model would do, from the model's "
        "shapes and the file's headers only: per model path its shape and dtype, the file key, "
        "the file's shape and dtype, the key_map transform and a verdict (load, transform, "
        "cast, missing, ignored, shape mismatch), then the unexpected file keys.",
        epilog="example: loadbench plan --model mypkg.models:build model.safetensors "
        "--key-map mypkg.models:KEY_MAP --ignore-unexpected 'pooler.*'",
    )
    p.add_argument("checkpoint", help="a .safetensors file or a folder of shards")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument(
        "--model",
        metavar="MODULE:FACTORY",
        help="a zero-argument callable returning the NNX module (built abstractly)",
    )
    which.add_argument(
        "--port",
        metavar="PRESET",
        help="a shape set's real architecture (gpt2, llama3-8b, vit-base, ...), with its key "
        "map and declared ignores",
    )
    p.add_argument(
        "--key-map",
        metavar="MODULE:NAME",
        help="a key map: a dict model path -> file key (or (file key, transform)), or a callable",
    )
    p.add_argument(
        "--ignore-unexpected",
        action="append",
        default=[],
        metavar="PATTERN",
        help="a glob over file keys the model does not need (repeatable)",
    )
    p.add_argument(
        "--ignore-missing",
        action="append",
        default=[],
        metavar="PATTERN",
        help="a glob over model paths the file may lack (repeatable)",
    )
    p.add_argument(
        "--casts",
        choices=CAST_POLICIES,
        default=REPORT,
        help="report (default): a float cast is a mismatch; allow: expected",
    )
    p.add_argument(
        "--all",
        action="store_true",
        help="print every model path and file key even where none matches (a wrong checkpoint)",
    )
    add_load_options(p, PLAN)
    add_json(p, "the plan as one JSON object")
    p.set_defaults(func=cmd_plan)
    return p
