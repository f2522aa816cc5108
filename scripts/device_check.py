"""The device check's tables, one part per call of the device tool, and their summary.

`scripts/device-check.sh` detects the platform, installs what is missing, writes the machine's
facts, then runs this with the platform it found:

    python scripts/device_check.py --platform tpu --part small --out OUT

It synthesizes the part's checkpoints (the larger ones beside the probe), takes the bench's own
probe once (kept in the results folder, so every `bench run` below holds its rows against it
instead of probing again), runs the part's tables as `bench run`s (each interleaved, each run in a
fresh process, under `timeout`), and writes summary.md (`scripts/device_check_report.py`).

The parts, each planned to fit one call (`--seconds`, 540 by default):

- `small`: SMALL (sa3) with the default, `mmap-put`, `zerocopy` and `builder` (the CUDA peers
  too where they run), then the cast table: the plain file into a bfloat16 model, a bfloat16 file
  into a float32 model, a float16 file into a bfloat16 model (`--dtype` stores the file so);
- `large`: LARGE (llama3-8b) with the default and `mmap-put`, its port, and SMALL's slow
  strategies (`hostcast`, `orbax-safetensors`): sa3's table is whole in two calls;
- `budgets`: the budget sweep (`BUDGETS`) of the default on LARGE, then on SMALL;
- `all`: every table above, in that order (a machine with the time for it, or a CPU host).

Each table is planned against the time left, the later tables of the part kept one run each: a
table that does not fit its repeats runs fewer (two are judged on time; one is printed and not
judged), one that fits no run is left out, and summary.md says so. A run's cost starts from an
estimate per platform and kind of row (`COSTS`, overridden by DEVICE_CHECK_COSTS as
`small,large,port` seconds) and is then what the part's runs of that kind really took (the chip's
opening included: `bench run`'s progress lines split each row's seconds).

Environment (defaults): DEVICE_CHECK_SMALL (sa3), DEVICE_CHECK_LARGE (llama3-8b),
DEVICE_CHECK_STRATEGIES (SMALL's table), DEVICE_CHECK_REPEATS (the most repeats of any table),
DEVICE_CHECK_PROBE_SECONDS (240), DEVICE_CHECK_RESULTS (the bench's results folder, kept between
parts: /tmp/device-check-results), LOADBENCH_CACHE (the synthetic checkpoints). Files under OUT:
probe.json, bench.txt (every `bench run`'s output), results.jsonl (their rows), summary.md. The
page cache is warm in every row; where /proc/sys/vm/drop_caches is missing a cold cache cannot be
forced, and summary.md says so.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PARTS = ("small", "large", "budgets", "all")
BUDGETS = ("16MiB", "64MiB", "256MiB", "1GiB", "4GiB")
#: (--dtype of the file or None for its own, the model's dtype): the cast table
CASTS = ((None, "bfloat16"), ("bfloat16", "float32"), ("float16", "bfloat16"))
SMALL_STRATEGIES = "pipelined,mmap-put,zerocopy,builder,runai,fastsafetensors,instanttensor"
SLOW_STRATEGIES = ("hostcast", "orbax-safetensors")
#: seconds a run costs before one was measured, by platform: small, large and port rows
COSTS = {"tpu": (24, 33, 45), "cuda": (15, 30, 40), "cpu": (6, 8, 10)}
SUMMARY_SECONDS = 15
CHILD_TIMEOUT = 300


@dataclass(frozen=True)
class Table:
    """One `bench run`: its shape set, strategies, models, repeats asked and extra arguments;
    `cost` names the kind of row its runs cost as (`small`, `large`, `port`)."""

    label: str
    shapes: str
    strategies: tuple[str, ...]
    repeats: int
    cost: str
    models: tuple[str, ...] = ("spec",)
    args: tuple[str, ...] = ()

    @property
    def runs(self) -> int:
        """Runs a repeat takes: every strategy into every model."""
        return len(self.strategies) * len(self.models)


@dataclass
class Plan:
    """The seconds a run costs by kind, measured as the part goes, and what was said."""

    costs: dict[str, float]
    notes: list[str] = field(default_factory=list)

    def reserve(self, later: list[Table]) -> float:
        """One run of each later table: what this table leaves them."""
        return sum(self.costs[t.cost] * t.runs for t in later)

    def fit(self, table: Table, left_s: float) -> int:
        """The most repeats (<= asked) of `table` that fit in `left_s`; a note where cut."""
        cost = self.costs[table.cost]
        fits = max(0, math.floor(left_s / (cost * table.runs))) if table.runs else 0
        repeats = min(table.repeats, fits)
        if repeats >= table.repeats:
            return repeats
        if repeats == 0:
            self.notes.append(
                f"{table.label}: left out, no run fits ({left_s:.0f}s left, {cost:.0f}s a run, "
                f"{table.runs} runs a repeat)"
            )
        else:
            judged = "" if repeats > 1 else " (one run: not judged on time)"
            self.notes.append(
                f"{table.label}: {repeats} of {table.repeats} repeats fit in {left_s:.0f}s "
                f"({cost:.0f}s a run){judged}"
            )
        return repeats


def tables(part: str, small: str, large: str, strategies: tuple[str, ...]) -> list[Table]:
    """The part's tables, in the order they run (see the module doc)."""
    if part == "all":
        return [t for p in PARTS[:-1] for t in tables(p, small, large, strategies)]
    if part == "small":
        casts = [
            Table(
                f"{small} {file or 'as stored'} into {model}",
                small,
                ("pipelined",),
                2,
                "small",
                args=(*(("--dtype", file) if file else ()), "--model-dtype", model),
            )
            for file, model in CASTS
        ]
        return [Table(small, small, strategies, 3, "small"), *casts]
    if part == "large":
        return [
            Table(large, large, ("pipelined", "mmap-put"), 3, "large"),
            Table(f"{large} port", large, ("pipelined",), 2, "port", models=("port",)),
            Table(f"{small} slow strategies", small, SLOW_STRATEGIES, 2, "small"),
        ]
    if part == "budgets":
        return [
            Table(f"{shapes} budget {b}", shapes, ("pipelined",), n, cost, args=("--budget", b))
            for shapes, n, cost in ((large, 1, "large"), (small, 2, "small"))
            for b in BUDGETS
        ]
    raise ValueError(f"unknown part {part!r}; use one of {', '.join(PARTS)}")


def keep_strategies(platform: str, wanted: tuple[str, ...]) -> tuple[tuple[str, ...], list[str]]:
    """Those of `wanted` that run here, and why each other does not (the registry's PLATFORMS
    and REQUIRES, read without importing jax: runai and fastsafetensors need torch,
    instanttensor a CUDA device)."""
    from loader import strategies

    catalog = strategies.catalog()
    kept, said = [], []
    for name in wanted:
        info = catalog.get(name)
        if info is not None and info.platforms and platform not in info.platforms:
            where = " or ".join(info.platforms)
            said.append(f"{name}: skipped, it loads onto {where} devices only (here: {platform})")
        elif info is not None and info.missing():
            hint = f" ({info.install_hint})" if info.install_hint else ""
            said.append(f"{name}: skipped, needs {', '.join(info.missing())}, not here{hint}")
        else:
            kept.append(name)
    return tuple(kept), said


def restrict(table: Table, platform: str, plan: Plan) -> Table | None:
    """`table` with only the strategies that run here (None: none does); the others said once."""
    kept, said = keep_strategies(platform, table.strategies)
    plan.notes += [s for s in said if s not in plan.notes]
    return replace(table, strategies=kept) if kept else None


def bounded(argv: list[str], seconds: float, **kw: Any) -> int | None:
    """Run `argv` in a process group of its own for at most `seconds`: its exit status, or None
    where it ran out of time (the group, the bench's children included, then stopped: SIGTERM,
    SIGKILL 15 s later)."""
    child = subprocess.Popen(argv, start_new_session=True, **kw)
    try:
        return child.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        for sig, grace in ((signal.SIGTERM, 15), (signal.SIGKILL, None)):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, sig)
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.wait(timeout=grace)
                break
        return None


def _step(started: float, text: str) -> None:
    print(f"== [{time.monotonic() - started:.0f}s] {text}", flush=True)


class Check:
    """One part of the device check on this machine: its folders, clock and plan."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args, self.out = args, Path(args.out)
        self.results = Path(args.results)
        self.started = time.monotonic()
        self.py = [sys.executable]
        costs = os.environ.get("DEVICE_CHECK_COSTS")
        small, big, port = map(float, costs.split(",")) if costs else COSTS[args.platform]
        self.plan = Plan({"small": small, "large": big, "port": port})

    def left(self) -> float:
        return self.args.seconds - (time.monotonic() - self.started) - SUMMARY_SECONDS

    def synth(self, shapes: str) -> subprocess.Popen[str]:
        """The cached checkpoint of `shapes`, synthesized in a child if missing."""
        code = (
            "import sys; from pathlib import Path; from bench.run.matrix import Checkpoint; "
            "ck = Checkpoint.ensure(sys.argv[1], None, 0, Path(sys.argv[2]), 900); "
            "print(ck.path, ck.checkpoint_bytes, 'bytes')"
        )
        cache = os.environ.get("LOADBENCH_CACHE", "/tmp/loadbench-cache")
        return subprocess.Popen([*self.py, "-c", code, shapes, cache], text=True)

    def probe(self, sets: list[str]) -> None:
        """The bench's probe, sized for the largest set, kept in the results folder."""
        from bench.run.ceiling import probe_bytes_for
        from shapes import load_spec

        size = probe_bytes_for(max(load_spec(s).total_bytes for s in sets)) >> 20 << 20
        _step(self.started, f"probe ({size} bytes: the bench's ceilings for {', '.join(sets)})")
        argv = [*self.py, "-m", "bench.cli", "probe", "--size", f"{size}B"]
        argv += ["--results", str(self.results), "--out", str(self.out / "probe.json")]
        if bounded(argv, self.args.probe_seconds) != 0:
            self.plan.notes.append("the probe failed or ran out of time: no ceilings")

    def bench(self, table: Table, repeats: int) -> None:
        """One table's `bench run`, its output to bench.txt and its rows to results.jsonl; the
        seconds a run took here become the estimate of its kind."""
        secs = repeats * self.plan.costs[table.cost] * table.runs + 60
        _step(
            self.started,
            f"bench run {table.label}: {table.shapes} x{repeats}: {','.join(table.strategies)} "
            f"(model {','.join(table.models)}{', ' if table.args else ''}{' '.join(table.args)}; "
            f"at most {secs:.0f}s)",
        )
        argv = [*self.py, "-m", "bench.cli", "bench", "run", "--shapes", table.shapes]
        argv += ["--repeats", str(repeats), "--max-repeats", str(repeats), "--staging"]
        argv += ["--strategies", ",".join(table.strategies), "--model", ",".join(table.models)]
        argv += ["--timeout", str(CHILD_TIMEOUT), "--out", str(self.results), *table.args]
        before = set(self.results.glob("*/*.jsonl"))
        began = time.monotonic()
        with open(self.out / "bench.txt", "a", encoding="utf-8") as log:
            rc = bounded(argv, secs, stdout=log, stderr=subprocess.STDOUT)
        if rc is None:
            self.plan.notes.append(f"{table.label}: stopped at its {secs:.0f}s limit: partial")
        took = (time.monotonic() - began) / (repeats * table.runs)
        self.plan.costs[table.cost] = math.ceil(took)
        print(f"   exit {rc} ({took:.0f}s a run)", flush=True)
        with open(self.out / "results.jsonl", "a", encoding="utf-8") as rows:
            for new in sorted(set(self.results.glob("*/*.jsonl")) - before):
                rows.write(new.read_text(encoding="utf-8"))

    def prepare(self, sets: list[str]) -> bool:
        """The checkpoints (the smallest in the foreground, the others beside the probe), then
        the probe; False where one cannot be synthesized."""
        from shapes import load_spec

        sets = sorted(sets, key=lambda s: load_spec(s).total_bytes)
        _step(self.started, f"synthesize {sets[0]}")
        children = {sets[0]: self.synth(sets[0])}
        if children[sets[0]].wait() == 0:
            for shapes in sets[1:]:
                _step(self.started, f"synthesize {shapes} (in the background, beside the probe)")
                self.plan.notes.append(
                    f"the probe ran while {shapes} was synthesized: it may be low"
                )
                children[shapes] = self.synth(shapes)
            self.probe(sets)
        failed = [s for s, child in children.items() if child.wait() != 0]
        for shapes in failed:
            print(f"device-check: error: cannot synthesize {shapes}")
        return not failed

    def run(self) -> int:
        args = self.args
        self.out.mkdir(parents=True, exist_ok=True)
        wanted = tables(args.part, args.small, args.large, tuple(args.strategies.split(",")))
        if args.repeats is not None:
            wanted = [replace(t, repeats=min(t.repeats, args.repeats)) for t in wanted]
        todo = [t for t in (restrict(t, args.platform, self.plan) for t in wanted) if t]
        if not os.path.exists("/proc/sys/vm/drop_caches"):
            self.plan.notes.append(
                "cold page cache: /proc/sys/vm/drop_caches does not exist on this host, so the "
                "page cache cannot be dropped; every row here is warm (no cold table)"
            )
        if not todo:
            self.plan.notes.append(f"part {args.part}: none of its strategies runs here")
            return self.summary()
        if not self.prepare(list(dict.fromkeys(t.shapes for t in todo))):
            return 2
        for i, table in enumerate(todo):
            repeats = self.plan.fit(table, self.left() - self.plan.reserve(todo[i + 1 :]))
            if repeats:
                self.bench(table, repeats)
        _step(self.started, "summary")
        return self.summary()

    def summary(self) -> int:
        argv = [*self.py, str(ROOT / "scripts" / "device_check_report.py")]
        argv += [str(self.out / "summary.md"), str(self.out / "results.jsonl")]
        if (self.out / "results.jsonl").exists():
            subprocess.run(argv, timeout=120, check=False)
        else:
            (self.out / "summary.md").write_text("no table ran\n", encoding="utf-8")
        if self.plan.notes:
            spent = time.monotonic() - self.started
            head = f"\n## Notes (part {self.args.part}, {self.args.platform}, {spent:.0f}s)"
            with open(self.out / "summary.md", "a", encoding="utf-8") as f:
                f.write("\n".join([head, *(f"- {n}" for n in self.plan.notes), ""]))
            print("\n".join(self.plan.notes))
        _step(self.started, f"done: {self.out}")
        return 0


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    env = os.environ.get
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--platform", required=True, choices=sorted(COSTS))
    p.add_argument("--part", default=env("DEVICE_CHECK_PART", "small"), choices=PARTS)
    p.add_argument("--out", default=env("OUT", str(ROOT / "device-check-out")))
    # the bench's results folder: kept between parts, so a warm machine probes once
    p.add_argument("--results", default=env("DEVICE_CHECK_RESULTS", "/tmp/device-check-results"))
    p.add_argument("--seconds", type=float, default=float(env("DEVICE_CHECK_SECONDS", "540")))
    p.add_argument("--small", default=env("DEVICE_CHECK_SMALL", "sa3"))
    p.add_argument("--large", default=env("DEVICE_CHECK_LARGE", "llama3-8b"))
    p.add_argument("--strategies", default=env("DEVICE_CHECK_STRATEGIES", SMALL_STRATEGIES))
    repeats = env("DEVICE_CHECK_REPEATS")
    p.add_argument("--repeats", type=int, default=int(repeats) if repeats else None)
    probe = float(env("DEVICE_CHECK_PROBE_SECONDS", "240"))
    p.add_argument("--probe-seconds", type=float, default=probe)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    return Check(parse(argv)).run()


if __name__ == "__main__":
    sys.exit(main())
