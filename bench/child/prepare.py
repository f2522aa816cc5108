"""Child-side preparation, run before any measurement in its own process (it may import jax).

`python -m bench.child.prepare synth --shapes S --dir DIR [--dtype DT] [--seed N]` synthesises the
checkpoint of a shape set and writes `DIR/bench.json` (checkpoint path, bytes, largest tensor
bytes, tensor count, bytes under glibc's mmap threshold). `python -m bench.child.prepare convert
--strategy NAME --shapes S --src PATH --dst DIR --out RESULT.json [--dtype DT] [--seed N]` runs the
strategy's `prepare(src, dst, builder)` once (Orbax conversion, a sharded directory; as N
cooperating processes when the runner sets `LOADBENCH_NUM_PROCESSES`) and process 0 writes
`DIR/prepared.json` {"checkpoint": path}; each process writes its `bench.records.wire.ChildResult`
to RESULT.json.
The runner caches both (the JSON files are the markers), so measured processes never pay for them.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from bench.errors import BenchError
from bench.machine.allocator import small_tensor_bytes
from bench.records.wire import Backend, ChildResult, to_json
from bench.vocabulary import OK


def synth(shapes_name: str, out: str, dtype: str | None, seed: int) -> dict:
    import shapes
    from shapes import content

    spec = shapes.load_spec(shapes_name)
    path = Path(shapes.synthesize(spec, out, dtype=dtype, seed=seed))
    files = [path] if path.is_file() else sorted(path.glob("*.safetensors"))
    sizes = content.stored_sizes(spec, dtype)
    return {
        "checkpoint": str(path),
        "checkpoint_bytes": sum(f.stat().st_size for f in files),
        "largest_tensor_bytes": max(sizes, default=0),
        "tensors": len(spec.tensors),
        "small_tensor_bytes": small_tensor_bytes(sizes),
    }


def convert(
    strategy: str, shapes_name: str, src: str, dst: str, dtype: str | None, seed: int
) -> tuple[Backend, Path]:
    """Run the strategy's `prepare` on this process; (its backend, the converted checkpoint)."""
    import shapes
    from bench import strategies
    from bench.child.worker import init_backend

    backend = init_backend()
    info = strategies.get(strategy)
    builder = shapes.model_builder(shapes.load_spec(shapes_name), dtype=dtype, seed=seed)
    prepare = info.prepare()
    if prepare is None:
        raise BenchError(
            f"strategy {strategy!r} has CHECKPOINT {info.checkpoint!r} but no prepare()"
        )
    return backend, Path(prepare(Path(src), Path(dst), builder))


def main(argv: list[str] | None = None) -> int:
    from loader.format.atomic import atomic_write_text

    parser = argparse.ArgumentParser(prog="python -m bench.child.prepare", description=__doc__)
    parser.add_argument("mode", choices=["synth", "convert"])
    parser.add_argument("--shapes", required=True)
    parser.add_argument("--dir", help="synth: output folder")
    parser.add_argument("--strategy", help="convert: the strategy whose prepare() to run")
    parser.add_argument("--src", help="convert: the synthetic checkpoint")
    parser.add_argument("--dst", help="convert: the output folder")
    parser.add_argument("--out", help="convert: where to write this process's status JSON")
    parser.add_argument("--dtype", default=None)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.mode == "synth":
        summary = synth(args.shapes, args.dir, args.dtype, args.seed)
        atomic_write_text(Path(args.dir) / "bench.json", json.dumps(summary))
        print(json.dumps(summary))
        return 0
    backend, path = convert(args.strategy, args.shapes, args.src, args.dst, args.dtype, args.seed)
    if backend.process_index == 0:
        atomic_write_text(Path(args.dst) / "prepared.json", json.dumps({"checkpoint": str(path)}))
    atomic_write_text(args.out, to_json(ChildResult(OK, backend=backend)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
