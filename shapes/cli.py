"""`loadbench shapes ...`: list, show, inspect, synth and fetch tensor-shape specs.

`bench.cli` calls `register(subparsers)` and dispatches to `args.func(args) -> int`. Every command
catches the loader's/shapes' own errors and prints a one-line message (exit status 2, as every
`loadbench` command does on an error; no traceback).
`python -m shapes.cli shapes show sa3 --json` runs the same commands stand-alone.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable

from loader.errors import CheckpointError
from shapes.catalog import fetched_names, load_spec, preset_names, user_presets_dir
from shapes.quantized import dequantized_bytes
from shapes.sizes import format_bytes, format_rate
from shapes.spec import ShapeSpec

EXIT_ERROR = 2  # the exit status of every `loadbench` command that fails on its input


def summary(spec: ShapeSpec) -> dict:
    """The numbers `shapes show --json` prints for a spec."""
    largest = spec.largest
    return {
        "name": spec.name,
        "source": spec.source,
        "revision": spec.revision,
        "tensors": len(spec.tensors),
        "params": spec.total_params,
        "bytes": spec.total_bytes,
        "bytes_by_dtype": spec.bytes_by_dtype,
        "largest_name": largest.name if largest else None,
        "largest_numel": largest.numel if largest else 0,
        "median_numel": spec.median_numel,
        "files": spec.file_count,
        "dequantized_bytes": dequantized_bytes(spec),  # None: no quantized layout
    }


def _print_summary(spec: ShapeSpec, as_json: bool) -> None:
    s = summary(spec)
    if as_json:
        print(json.dumps(s))
        return
    origin = spec.source if spec.source != spec.label else ""
    if spec.revision:
        origin = f"{origin} @ {spec.revision}".strip()
    print(f"{spec.label}  ({origin})" if origin else spec.label)
    rows = [("tensors", f"{s['tensors']:,}"), ("params", f"{s['params']:,}")]
    rows += [(f"bytes {dt}", f"{n:,}") for dt, n in sorted(s["bytes_by_dtype"].items())]
    rows += [
        ("total bytes", f"{s['bytes']:,} ({format_bytes(s['bytes'])})"),
        ("largest", f"{s['largest_name']} ({s['largest_numel']:,} elements)"),
        ("median numel", f"{s['median_numel']:,}"),
        ("files", f"{s['files']}"),
    ]
    if s["dequantized_bytes"] is not None:
        n = s["dequantized_bytes"]
        rows.append(("dequantized", f"{n:,} ({format_bytes(n)} in bfloat16)"))
    for key, value in rows:
        print(f"  {key:<14}{value}")


def _cmd_list(args: argparse.Namespace) -> int:
    for name in preset_names():
        print(f"{name:<20}preset")
    for name in fetched_names():
        print(f"{name:<20}fetched ({user_presets_dir()})")
    return 0


def _cmd_show(args: argparse.Namespace) -> int:
    _print_summary(load_spec(args.spec), args.json)
    return 0


def _cmd_inspect(args: argparse.Namespace) -> int:
    from pathlib import Path

    from loader.format.atomic import atomic_write_text
    from shapes.local import spec_from_local

    spec = spec_from_local(Path(args.path))
    if args.out:
        atomic_write_text(args.out, spec.to_json())
        print(f"wrote {args.out}", file=sys.stderr)
    _print_summary(spec, args.json)
    return 0


def _cmd_synth(args: argparse.Namespace) -> int:
    from shapes.synth import is_synthesized, synthesize

    spec = load_spec(args.spec)
    if is_synthesized(spec, args.out, dtype=args.dtype, seed=args.seed):
        path = synthesize(spec, args.out, dtype=args.dtype, seed=args.seed)
        print(f"{path}  (up to date: same spec, dtype and seed; nothing written)")
        return 0
    start = time.perf_counter()
    path = synthesize(spec, args.out, dtype=args.dtype, seed=args.seed)
    wall = time.perf_counter() - start
    size, speed = format_bytes(spec.total_bytes), format_rate(spec.total_bytes / max(wall, 1e-9))
    print(f"{path}  ({len(spec.tensors)} tensors, {size} in {wall:.1f} s, {speed})")
    return 0


def _cmd_fetch(args: argparse.Namespace) -> int:
    from shapes.hub import fetch_and_save

    path, spec = fetch_and_save(
        args.repo, revision=args.revision, name=args.name, out=args.out, include=args.include
    )
    print(f"saved {len(spec.tensors)} tensors from {spec.source} @ {spec.revision} to {path}")
    if args.out is None:
        print(f"use it by name: loadbench shapes show {spec.name}")
    return 0


def _guarded(command: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        try:
            return command(args)
        except CheckpointError as e:
            print(f"loadbench shapes {args.shapes_command}: error: {e}", file=sys.stderr)
            return EXIT_ERROR

    return run


def _command(
    sub: argparse._SubParsersAction, name: str, summary: str, description: str, example: str
) -> argparse.ArgumentParser:
    """A `shapes` subcommand with its one-line help, a description and one example."""
    return sub.add_parser(
        name,
        help=summary,
        description=description,
        epilog=f"example: {example}",
    )


def register(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the `shapes` command (with its subcommands) to a parent parser's subparsers."""
    shapes = subparsers.add_parser(
        "shapes", help="tensor-shape specs: presets, Hub headers, synthesis"
    )
    sub = shapes.add_subparsers(dest="shapes_command", required=True, metavar="COMMAND")
    p = _command(
        sub,
        "list",
        "list preset and fetched spec names",
        "List the shape sets this loadbench knows: its presets and the specs fetched here.",
        "loadbench shapes list",
    )
    p.set_defaults(func=_guarded(_cmd_list))
    p = _command(
        sub,
        "show",
        "summarise a spec: counts, bytes, largest and median tensor",
        "Summarise a shape set: tensor and parameter counts, bytes by dtype, the largest and the "
        "median tensor.",
        "loadbench shapes show sa3-medium",
    )
    p.add_argument("spec", metavar="NAME|PATH", help="a preset, fetched name or spec JSON path")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=_guarded(_cmd_show))
    p = _command(
        sub,
        "inspect",
        "read a spec from a local .safetensors file or shard folder",
        "Read the tensor shapes of your own checkpoint from its headers alone (no weights read).",
        "loadbench shapes inspect model.safetensors --out my-model.json",
    )
    p.add_argument("path", metavar="PATH", help="a .safetensors file, a shard folder or index")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--out", metavar="FILE", help="also save the spec as JSON")
    p.set_defaults(func=_guarded(_cmd_inspect))
    p = _command(
        sub,
        "synth",
        "write a synthetic checkpoint with a spec's exact shapes",
        "Write a checkpoint of seeded random values with a shape set's exact names, shapes and "
        "dtypes (what `bench run` loads).",
        "loadbench shapes synth gpt2 --out /tmp/gpt2-synth",
    )
    p.add_argument("spec", metavar="NAME|PATH", help="a preset, fetched name or spec JSON path")
    p.add_argument("--out", required=True, metavar="DIR", help="the folder to write it in")
    p.add_argument("--dtype", help="store float tensors in this dtype (F32, BF16, F16, ...)")
    p.add_argument("--seed", type=int, default=0, help="the random values' seed (default 0)")
    p.set_defaults(func=_guarded(_cmd_synth))
    p = _command(
        sub,
        "fetch",
        "read tensor shapes from a Hugging Face Hub repo's headers",
        "Read a Hub repo's tensor shapes from its safetensors headers (no weights downloaded) and "
        "save them as a shape set.",
        "loadbench shapes fetch openai-community/gpt2",
    )
    p.add_argument("repo", metavar="REPO", help="a Hugging Face repo id, e.g. org/name")
    p.add_argument("--revision", help="branch, tag or commit (default: main)")
    p.add_argument("--name", help="save under this name (default: org--repo)")
    p.add_argument(
        "--out", metavar="FILE", help="write the spec here instead of the presets folder"
    )
    p.add_argument(
        "--include",
        metavar="GLOB",
        help="only these weight files (e.g. 'transformer/*.safetensors')",
    )
    p.set_defaults(func=_guarded(_cmd_fetch))
    return shapes


def main(argv: list[str] | None = None) -> int:
    """Stand-alone entry point: `python -m shapes.cli shapes show sa3`."""
    parser = argparse.ArgumentParser(prog="loadbench")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
