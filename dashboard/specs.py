"""Shape specs for the Target host page: names, summary stats and the sharding rule, jax-free.

The facts come from `shapes.load_spec`, `bench.analysis.recommend.spec_summary` and
`loader.sharded.rule.shard_axis` (the one implementation of each). When importing those would
pull jax into the dashboard's process, they are computed in a short-lived child interpreter
instead (`python -m dashboard.specs ...`), which prints JSON.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from dashboard.optional import REPO_ROOT, why_unavailable

TOP_TENSORS = 12


def _names() -> list[str]:
    import shapes

    return sorted(set(shapes.preset_names()) | set(shapes.fetched_names()))


def _facts(name: str, devices: int) -> dict:
    import shapes
    from bench.analysis.recommend import spec_summary
    from loader.sharded.rule import shard_axis

    spec = shapes.load_spec(name)
    rows = []
    for t in sorted(spec.tensors, key=lambda t: t.nbytes, reverse=True)[:TOP_TENSORS]:
        axis = shard_axis(t.shape, devices)
        rows.append(
            {
                "tensor": t.name,
                "dtype": t.dtype,
                "shape": " × ".join(map(str, t.shape)) or "scalar",
                "bytes": t.nbytes,
                "sharded_axis": "replicated" if axis is None else str(axis),
                "bytes_per_device": t.nbytes // devices if axis is not None else t.nbytes,
            }
        )
    return {
        "summary": spec_summary(name).to_dict(),
        "source": spec.source,
        "tensors": rows,
    }


def _in_child(*args: str) -> Any:
    proc = subprocess.run(
        [sys.executable, "-m", "dashboard.specs", *args],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=REPO_ROOT,
    )
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"reading shape spec {' '.join(args)} failed: {tail}")
    return json.loads(proc.stdout)


def spec_names() -> list[str]:
    """Names of the shipped presets and of specs saved by `loadbench shapes fetch`."""
    if why_unavailable("shapes") is None:
        return _names()
    return list(_in_child("names"))


def spec_facts(name: str, devices: int) -> dict:
    """Summary (checkpoint_bytes, largest_tensor_bytes, tensors) and largest tensors' sharding.

    Args:
        name: a preset or fetched spec name (one from `spec_names`).
        devices: the device count the sharding rule splits over.

    Returns:
        `{"summary", "source", "tensors"}`.
    """
    if why_unavailable("shapes") is None and why_unavailable("loader.sharded.rule") is None:
        return _facts(name, devices)
    return dict(_in_child("facts", name, str(devices)))


def main(argv: list[str] | None = None) -> int:
    """The child's entry point: `names` or `facts NAME DEVICES`, printing JSON."""
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["names"]:
        print(json.dumps(_names()))
    elif args[:1] == ["facts"] and len(args) == 3:
        print(json.dumps(_facts(args[1], int(args[2]))))
    else:
        print("usage: python -m dashboard.specs names | facts NAME DEVICES", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
