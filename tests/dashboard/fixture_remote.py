"""A results folder where one strategy ran from the local disk and over S3 at two concurrencies.

Machine `here`, shape set gpt2, strategies `pipelined` and `hostcast`, 3 repeats each:
- run `local` (older): both strategies from the local disk (`source` file);
- run `remote` (newer): both over s3 on a shaped `1Gbit` link at `--remote-concurrency 1,64`,
  with the link's `ceiling_s` (the checkpoint's bytes over 1 Gbit/s), `ceiling_ratio`, the bytes
  requested and received and the requests; the first c64 repeat of pipelined has a memray capture.

Concurrency 1 is slow (about 2.3x the link's ceiling), 64 near the ceiling, the local disk much
faster than either: a page that pools them draws one point at a median that no configuration
measured. The rows and samples are `fixture_results`' own, retimed and relabelled.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from pathlib import Path

from fixture_results import _result_rows, _run_record, _stamp, _write_memray

from bench.link.shaping import Link
from bench.records.schema import SCHEMA_VERSION

SHAPES = "gpt2"
CKPT = 548_105_171  # fixture_results' gpt2
LINK = "1Gbit"
CEILING_S = Link.parse(LINK).ceiling_s(CKPT)
STRATEGIES = {"pipelined": "pipelined", "hostcast": "stream"}  # name -> fixture_results' plan
SLOWER = {"pipelined": 1.0, "hostcast": 1.1}  # over a link, hostcast takes 10% longer
# run -> (run id, started, [(concurrency, wall over the ceiling)]; None: a local run)
RUNS = {
    "local": ("20260120T080000Z-10ca10", "2026-01-20T08:00:00Z", None),
    "remote": ("20260121T080000Z-5e3e3e", "2026-01-21T08:00:00Z", [(1, 2.3), (64, 1.05)]),
}
HEADER_BYTES = 64 << 10


@dataclass(frozen=True)
class RemoteFixture:
    """What the folder holds: its root, the run ids, the walls (s) by (strategy, concurrency),
    with concurrency None for the local load, and the memray capture's path."""

    root: Path
    run_ids: dict[str, str]
    walls: dict[tuple[str, int | None], list[float]]
    memray_html: str


def _retimed(obj: dict, factor: float) -> dict:
    """A phase row or sample with every time scaled by `factor`."""
    for key in ("phase_wall_s", "wall_s", "phase_start_s", "phase_end_s", "t_s"):
        if isinstance(obj.get(key), int | float):
            obj[key] = obj[key] * factor
    if obj.get("substeps_s"):
        obj["substeps_s"] = {k: v * factor for k, v in obj["substeps_s"].items()}
    return obj


def _result(run_id: str, strategy: str, repeat: int, concurrency: int | None, factor: float):
    """One child run's rows and samples: fixture_results' `plan` load of gpt2, as `strategy`,
    retimed to `factor` x its local time (a remote one: over s3 on the link)."""
    plan = STRATEGIES[strategy]
    rows, samples = _result_rows("beta", SHAPES, plan, repeat, None)
    rid = uuid.uuid5(uuid.NAMESPACE_URL, f"{run_id}/{strategy}/{concurrency}/{repeat}").hex
    for obj in rows + samples:
        _retimed(obj, factor)
        obj.update(run_id=run_id, result_id=rid)
    for row in rows:
        row["strategy"] = strategy
        if concurrency is not None:
            received = CKPT + HEADER_BYTES + 4096 * concurrency  # a little over: retried ranges
            row.update(source="s3", link=LINK, concurrency=concurrency)
            row.update(ceiling_s=CEILING_S, ceiling_probe_id=f"link:{LINK}")
            row.update(bytes_requested=received, bytes_received=received)
            row.update(requests=2 + 40 * concurrency, header_bytes=HEADER_BYTES)
            row["ceiling_ratio"] = row["wall_s"] / CEILING_S
    return rows, samples


def write_remote(root: Path) -> RemoteFixture:
    """Write the folder under `root` (see the module doc)."""
    walls: dict[tuple[str, int | None], list[float]] = {}
    memray = ""
    for run_id, started, curve in RUNS.values():
        run = dict(_run_record("beta"), run_id=run_id, started_utc=started, machine="here")
        run["command"] = ["loadbench", "bench", "run", "--shapes", SHAPES] + (
            ["--source", "s3", "--link", LINK, "--remote-concurrency", "1,64"] if curve else []
        )
        lines, samples = [run], []
        for strategy in STRATEGIES:
            for concurrency, over in curve or [(None, None)]:
                for repeat in range(3):
                    local, _ = _result_rows("beta", SHAPES, STRATEGIES[strategy], repeat, None)
                    local_wall = local[-1]["wall_s"]
                    remote = (over or 1.0) * SLOWER[strategy] * (1 + 0.02 * (repeat - 1))
                    factor = 1.0 if over is None else remote * CEILING_S / local_wall
                    rows, s = _result(run_id, strategy, repeat, concurrency, factor)
                    if (strategy, concurrency, repeat) == ("pipelined", 64, 0):
                        memray = f"here/{run_id}/memray/pipelined-s3-c64-r0.html"
                        _write_memray(root, memray)
                        for row in rows:
                            row["memray_html"] = memray
                            row["memray_top"] = memray.replace(".html", ".top.txt")
                    walls.setdefault((strategy, concurrency), []).append(rows[-1]["wall_s"])
                    lines += rows
                    samples += s
        folder = root / "here"
        folder.mkdir(parents=True, exist_ok=True)
        text = "\n".join(json.dumps(_stamp(o, SCHEMA_VERSION)) for o in lines + samples)
        (folder / f"{run_id}.jsonl").write_text(text + "\n", encoding="utf-8")
    ids = {name: run_id for name, (run_id, _, _) in RUNS.items()}
    return RemoteFixture(root, ids, walls, memray)
