"""What a bench run will do: checkpoints, conversions, the interleaved task list, child commands.

Checkpoints are synthesised once per (shapes, dtype, seed) by a `bench.child.prepare synth` child and
cached with a `bench.json` summary; strategies whose `CHECKPOINT` is not "file" get their converted
copy once per (strategy, processes, devices) from `bench.child.prepare convert`. The task list runs every
memray capture first (one per strategy, so measured rows can link to it), then the repeats
interleaved: A B C A B C. In the default matrix a strategy predicted not to fit the memory budget
(its peak predicted by `bench.recommend` from earlier results here, else `DEFAULT_PEAK_RATIO` x
the checkpoint) is skipped.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import uuid
from dataclasses import dataclass, replace
from pathlib import Path

from bench.child_result import ChildTask, to_json
from bench.children import run_group
from bench.errors import BenchError
from bench.units import format_bytes
from shapes import is_synthesized

DEFAULT_PEAK_RATIO = 3.5  # the naive path measures ~3.2x; unknown strategies are assumed as bad
BASELINE_GUESS_BYTES = 1 << 30
DEFAULT_PROCESSES = 2


@dataclass(frozen=True)
class Checkpoint:
    """A synthetic checkpoint ready to load, and the size facts every row repeats."""

    shapes: str
    dtype: str | None
    seed: int
    path: str
    checkpoint_bytes: int
    largest_tensor_bytes: int
    tensors: int

    @property
    def folder(self) -> Path:
        path = Path(self.path)
        return path.parent if path.is_file() else path

    @classmethod
    def ensure(cls, shapes: str, dtype: str | None, seed: int, cache: Path, timeout_s: float):
        """The cached checkpoint of a shape set, synthesised in a child if missing."""
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", shapes)
        folder = cache / "checkpoints" / f"{safe}-{dtype or 'native'}-{seed}"
        marker = folder / "bench.json"
        if not (marker.is_file() and is_synthesized(shapes, folder, dtype=dtype, seed=seed)):
            argv = [sys.executable, "-m", "bench.child.prepare", "synth", "--shapes", shapes]
            argv += ["--dir", str(folder), "--seed", str(seed)] + (
                ["--dtype", dtype] if dtype else []
            )
            proc = subprocess.run(
                argv, capture_output=True, text=True, timeout=timeout_s, check=False
            )
            if proc.returncode != 0 or not marker.is_file():
                tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["(no output)"]
                raise BenchError(f"cannot synthesise shape set {shapes!r} into {folder}: {tail[0]}")
        s = json.loads(marker.read_text(encoding="utf-8"))
        return cls(shapes, dtype, seed, s["checkpoint"], s["checkpoint_bytes"],
                   s["largest_tensor_bytes"], s["tensors"])  # fmt: skip


@dataclass(frozen=True)
class Task:
    """One child run (or group of cooperating children) of one strategy."""

    checkpoint: Checkpoint
    entry: object  # loader.strategies.StrategyEntry
    repeat: int
    processes: int
    devices: int  # in total, across processes
    memray_bin: Path | None = None
    path: str | None = None  # what the strategy loads (the converted copy, or the checkpoint)
    model_dtype: str | None = None  # the model's dtype, if not the checkpoint's
    budget_bytes: int | None = None  # bound on host bytes in flight, for strategies that take one


def _layout(entry, config) -> tuple[int, int]:
    """(processes, total devices) of a strategy under `config`."""
    procs = (config.processes or DEFAULT_PROCESSES) if entry.multiprocess else 1
    return procs, max(1, config.devices // procs) * procs


def _predicted_peaks(out: Path, ck: Checkpoint, budget: int) -> dict[str, int]:
    """Each strategy's predicted peak on `ck` from earlier results in `out` (`bench.recommend`)."""
    from bench.errors import NoResultsError
    from bench.recommend import recommend
    from bench.results import read_results

    target = {
        "checkpoint_bytes": ck.checkpoint_bytes,
        "largest_tensor_bytes": ck.largest_tensor_bytes,
        "tensors": ck.tensors,
    }
    try:
        rec = recommend(read_results(out), target, budget)
    except NoResultsError:
        return {}
    return {s["strategy"]: s["predicted_peak_bytes"] for s in rec.strategies}


def plan(ck: Checkpoint, entries: list, config, run_folder: Path) -> tuple[list[Task], list]:
    """The interleaved tasks of one shape set, and (task, reason) for each skipped strategy."""
    budget = config.memory_budget_bytes or _default_budget()
    known = _predicted_peaks(Path(config.out), ck, budget) if config.strategies is None else {}
    run, skipped = [], []
    for entry in entries:
        procs, devices = _layout(entry, config)
        task = Task(ck, entry, 0, procs, devices, model_dtype=config.model_dtype,
                    budget_bytes=config.load_budget_bytes)  # fmt: skip
        predicted = known.get(
            entry.name, BASELINE_GUESS_BYTES * procs + DEFAULT_PEAK_RATIO * ck.checkpoint_bytes
        )
        if config.strategies is None and predicted > budget:
            reason = f"predicted peak {format_bytes(predicted)} exceeds the memory budget {format_bytes(budget)}"
            skipped.append((task, reason))
        else:
            run.append(task)
    tasks = []
    if config.memray:
        folder = run_folder / "memray"
        tasks += [replace(t, memray_bin=folder / f"{t.entry.name}-{ck.shapes}-r0.bin") for t in run]
    tasks += [replace(t, repeat=r) for r in range(config.repeats) for t in run]
    return tasks, skipped


def _default_budget() -> int:
    from bench.runner import default_budget

    return default_budget()


def _env(task: Task, index: int, coordinator: str | None) -> dict[str, str]:
    env = dict(os.environ)
    flags = re.sub(r"--xla_force_host_platform_device_count=\S+", "", env.get("XLA_FLAGS", ""))
    per_process = task.devices // task.processes
    env["XLA_FLAGS"] = (
        f"{flags.strip()} --xla_force_host_platform_device_count={per_process}".strip()
    )
    env.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    env["PYTHONUNBUFFERED"] = "1"
    for key in ("LOADBENCH_COORDINATOR", "LOADBENCH_NUM_PROCESSES", "LOADBENCH_PROCESS_ID"):
        env.pop(key, None)
    if task.processes > 1:
        env.update(
            LOADBENCH_COORDINATOR=coordinator or "",
            LOADBENCH_NUM_PROCESSES=str(task.processes),
            LOADBENCH_PROCESS_ID=str(index),
        )
    return env


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _group(task: Task, argv_tail: list[str], work: Path, tag: str):
    """argvs, envs, outs of the task's process group running `python -m <argv_tail>`."""
    work.mkdir(parents=True, exist_ok=True)
    coordinator = f"127.0.0.1:{_free_port()}" if task.processes > 1 else None
    outs = [work / f"{tag}-p{i}.json" for i in range(task.processes)]
    argvs = [[sys.executable, "-m", *argv_tail, "--out", str(o)] for o in outs]
    envs = [_env(task, i, coordinator) for i in range(task.processes)]
    return argvs, envs, outs


def task_argvs(task: Task, work: Path):
    """Write the task's `ChildTask` and return the worker group's (argvs, envs, outs)."""
    tag = uuid.uuid4().hex[:12]
    memray_bin = None if task.memray_bin is None else str(task.memray_bin)
    if memray_bin and task.processes > 1:  # each process its own capture; rows link to process 0's
        memray_bin = str(task.memray_bin.with_suffix("")) + "-p{process_index}.bin"
    child_task = ChildTask(
        strategy=task.entry.name,
        shapes=task.checkpoint.shapes,
        checkpoint=task.path or task.checkpoint.path,
        source_checkpoint=task.checkpoint.path,
        dtype=task.checkpoint.dtype,
        seed=task.checkpoint.seed,
        memray_bin=memray_bin,
        model_dtype=task.model_dtype,
        budget_bytes=task.budget_bytes,
    )
    task_file = work / f"{tag}.task.json"
    argvs, envs, outs = _group(task, ["bench.child.worker", "--task", str(task_file)], work, tag)
    task_file.write_text(to_json(child_task), encoding="utf-8")
    return argvs, envs, outs


def prepare_task(task: Task, cache: Path, config) -> Task | tuple[str, str]:
    """The task with the path its strategy loads; (status, error) if conversion failed."""
    if task.entry.checkpoint == "file":
        return task
    folder = (
        task.checkpoint.folder / "prepared" / f"{task.entry.name}-p{task.processes}-d{task.devices}"
    )
    marker = folder / "prepared.json"
    if not marker.is_file():
        tail = ["bench.child.prepare", "convert", "--strategy", task.entry.name, "--shapes", task.checkpoint.shapes,
                "--src", task.checkpoint.path, "--dst", str(folder), "--seed", str(task.checkpoint.seed)]  # fmt: skip
        if task.checkpoint.dtype:
            tail += ["--dtype", task.checkpoint.dtype]
        argvs, envs, outs = _group(task, tail, folder.parent / ".work", folder.name)
        budget = config.memory_budget_bytes or _default_budget()
        outcomes = run_group(argvs, envs, outs, timeout_s=config.timeout_s, budget_bytes=budget)
        bad = next((o for o in outcomes if o.status != "ok"), None)
        if bad is not None or not marker.is_file():
            marker.unlink(missing_ok=True)
            why = bad.error if bad else "no prepared.json written"
            return "crashed", f"preparing the {task.entry.checkpoint} checkpoint failed: {why}"
    return replace(task, path=json.loads(marker.read_text(encoding="utf-8"))["checkpoint"])
