"""What the remote checks cost: a load over HTTP with and without its sha256 check, interleaved.

For each link (`unshaped` loopback, or a `tc tbf`-shaped one, `bench.link.shaping`), nginx serves
the checkpoint and each repeat runs two fresh processes in alternating order: `pipelined` loading
the URL plain, and the same with `digest="sha256:..."` (`loader.remote.digest`). Each child
times its own `load_model` call (wall and its own CPU-seconds, every thread) and reports its peak
RSS; the table gives the medians, the range, and the median of the paired ratios (digest over
plain within one repeat), which is what the machine's drift between repeats does not move, and
what the check fetched again and held (`RemoteStats.digest_refetched_bytes`, and
`digest_held_peak_bytes` where the loader reports it: n/a on a tree before issue 55's change).

    .venv/bin/python scripts/remote_checks_cost.py CHECKPOINT --shapes sa3 \
        --links unshaped,1Gbit,10Gbit --repeats 3
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

CHILD = """
import json, resource, sys, time
import loader, shapes
url, spec, digest = sys.argv[1], sys.argv[2], sys.argv[3] or None
builder = shapes.model_builder(shapes.load_spec(spec))
cpu0, t0 = time.process_time(), time.perf_counter()
model, report = loader.load_model(builder, url, digest=digest, strict=True)
wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
stats = report.remote
held = getattr(stats, "digest_held_peak_bytes", None)  # absent before issue 55's change
print(json.dumps({"wall": wall, "cpu": cpu, "peak": peak, "digest": stats.digest,
                  "refetched": stats.digest_refetched_bytes, "held": held}))
"""


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(8 << 20):
            h.update(chunk)
    return "sha256:" + h.hexdigest()


def _child(url: str, spec: str, digest: str) -> dict[str, Any]:
    run = subprocess.run(
        [sys.executable, "-c", CHILD, url, spec, digest],
        capture_output=True,
        text=True,
        check=False,
    )
    if run.returncode:
        raise SystemExit(f"child failed: {run.stderr[-2000:]}")
    return json.loads(run.stdout.strip().splitlines()[-1])


def _most_mb(rows: list[dict[str, Any]], key: str) -> str:
    """The largest of the rows' `key` in MB (10^6 bytes), or n/a where the loader lacks it."""
    values = [row[key] for row in rows]
    known = [v for v in values if v is not None]
    return f"{max(known) / 1e6:.1f}" if known and len(known) == len(values) else "n/a"


def main() -> int:
    from bench.link.serve import serving

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint", type=Path)
    parser.add_argument("--shapes", default="sa3")
    parser.add_argument("--links", default="unshaped,1Gbit,10Gbit")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    digest = _sha256(args.checkpoint)
    size = args.checkpoint.stat().st_size
    print(
        "| link | load | wall s, median (range) | CPU-s, median (range) | peak GiB | "
        "digest/plain, paired median (range) | refetched MB, max | held MB, max |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for link in args.links.split(","):
        shaped = None if link == "unshaped" else link
        runs: dict[str, list[dict[str, Any]]] = {"plain": [], "digest": []}
        with serving(str(args.checkpoint), "http", shaped, args.shapes) as url:
            for r in range(args.repeats):
                order = ("plain", "digest") if r % 2 == 0 else ("digest", "plain")
                for kind in order:
                    runs[kind].append(_child(url, args.shapes, digest if kind == "digest" else ""))
        assert all(r["digest"] == "checked" for r in runs["digest"])
        for kind, rows in runs.items():
            walls, cpus = [r["wall"] for r in rows], [r["cpu"] for r in rows]
            peak = max(r["peak"] for r in rows) / 2**30
            if kind == "digest":
                ratios = [d["wall"] / p["wall"] for d, p in zip(rows, runs["plain"])]
                cpu_ratios = [d["cpu"] / p["cpu"] for d, p in zip(rows, runs["plain"])]
                paired = (
                    f"wall {statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f}), "
                    f"CPU {statistics.median(cpu_ratios):.2f}x "
                    f"({min(cpu_ratios):.2f}-{max(cpu_ratios):.2f})"
                )
            else:
                paired = "-"
            print(
                f"| {link} | {kind} | {statistics.median(walls):.2f} ({min(walls):.2f}-"
                f"{max(walls):.2f}) | {statistics.median(cpus):.2f} ({min(cpus):.2f}-"
                f"{max(cpus):.2f}) | {peak:.2f} | {paired} | {_most_mb(rows, 'refetched')} | "
                f"{_most_mb(rows, 'held')} |",
                flush=True,
            )
    print(f"\n{args.checkpoint.name}: {size / 2**30:.2f} GiB; {args.repeats} repeats per load")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
