"""Starting a task's children: their command lines, environments, task files and conversions.

Each child gets the device count of its process through `XLA_FLAGS`; the processes of a
multi-process strategy also get `LOADBENCH_COORDINATOR` (a free local port),
`LOADBENCH_NUM_PROCESSES` and `LOADBENCH_PROCESS_ID` (under a cluster launcher,
`bench.run.ranks` starts one worker per rank instead, from `write_child_task` and `child_env`).
`task_argvs` writes the worker's `ChildTask`; `prepare_task` converts the checkpoint once per
(strategy, processes, devices) for strategies whose `CHECKPOINT` is not a plain file
(`bench.child.prepare convert`), cached beside the synthetic checkpoint with a `prepared.json`
marker, and returns a `PreparedTask` either way.
"""

from __future__ import annotations

import json
import os
import re
import socket
import sys
import uuid
from dataclasses import dataclass, replace
from pathlib import Path

from bench.records.wire import ChildTask, to_json
from bench.run.children import run_group
from bench.run.config import RunConfig
from bench.run.matrix import Task
from bench.vocabulary import CRASHED, OK, RANKED_ENV
from loader.vocabulary import FILE, URL

Group = tuple[list[list[str]], list[dict[str, str]], list[Path]]


def child_env(devices_per_process: int) -> dict[str, str]:
    """This process's environment for a child of `devices_per_process` CPU devices, without the
    variables of a multi-process run (the caller adds those it means)."""
    env = dict(os.environ)
    flags = re.sub(r"--xla_force_host_platform_device_count=\S+", "", env.get("XLA_FLAGS", ""))
    env["XLA_FLAGS"] = (
        f"{flags.strip()} --xla_force_host_platform_device_count={devices_per_process}".strip()
    )
    env.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    env["PYTHONUNBUFFERED"] = "1"
    for key in ("LOADBENCH_COORDINATOR", "LOADBENCH_NUM_PROCESSES", "LOADBENCH_PROCESS_ID"):
        env.pop(key, None)
    env.pop(RANKED_ENV, None)
    return env


def _env(task: Task, index: int, coordinator: str | None) -> dict[str, str]:
    env = child_env(task.devices // task.processes)
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


def _group(task: Task, argv_tail: list[str], work: Path, tag: str) -> Group:
    """argvs, envs, outs of the task's process group running `python -m <argv_tail>`."""
    work.mkdir(parents=True, exist_ok=True)
    coordinator = f"127.0.0.1:{_free_port()}" if task.processes > 1 else None
    outs = [work / f"{tag}-p{i}.json" for i in range(task.processes)]
    argvs = [[sys.executable, "-m", *argv_tail, "--out", str(o)] for o in outs]
    envs = [_env(task, i, coordinator) for i in range(task.processes)]
    return argvs, envs, outs


def task_argvs(task: Task, work: Path) -> Group:
    """Write the task's `ChildTask` and return the worker group's (argvs, envs, outs)."""
    tag = uuid.uuid4().hex[:12]
    task_file = write_child_task(task, work, tag)
    return _group(task, ["bench.child.worker", "--task", str(task_file)], work, tag)


def write_child_task(task: Task, work: Path, tag: str) -> Path:
    """Write the task's `ChildTask` (what every worker of the task reads) as `<tag>.task.json`."""
    memray_bin = None if task.memray_bin is None else str(task.memray_bin)
    if task.memray_bin is not None and task.processes > 1:  # rows link to process 0's capture
        memray_bin = str(task.memray_bin.with_suffix("")) + "-p{process_index}.bin"
    child_task = ChildTask(
        strategy=task.entry.name,
        shapes=task.checkpoint.shapes,
        checkpoint=task.url or task.load_path,
        source_checkpoint=task.checkpoint.path,
        dtype=task.checkpoint.dtype,
        seed=task.checkpoint.seed,
        memray_bin=memray_bin,
        digests=task.checkpoint.digests,
        checkpoint_folder=str(task.checkpoint.files_folder) if task.checkpoint.digests else None,
        model_dtype=task.model_dtype,
        model=task.model,
        key_map=task.key_map,
        compile=task.compile,
        compile_cache=task.compile_cache,
        options=task.options.given(),
    )
    work.mkdir(parents=True, exist_ok=True)
    task_file = work / f"{tag}.task.json"
    task_file.write_text(to_json(child_task), encoding="utf-8")
    return task_file


@dataclass(frozen=True)
class PreparedTask:
    """A task ready to run (`task.path`: what its strategy loads), or why it cannot run: `status`
    (`crashed`) and `error` when converting its checkpoint failed."""

    task: Task
    status: str = OK
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.status == OK


def _convert_argv(task: Task, folder: Path) -> list[str]:
    """`python -m` arguments that convert the task's checkpoint into `folder`."""
    ck = task.checkpoint
    tail = ["bench.child.prepare", "convert", "--strategy", task.entry.name, "--shapes", ck.shapes]
    tail += ["--src", ck.path, "--dst", str(folder), "--seed", str(ck.seed)]
    return tail + (["--dtype", ck.dtype] if ck.dtype else [])


def prepare_task(task: Task, config: RunConfig) -> PreparedTask:
    """The task with the path its strategy loads (its checkpoint converted once, cached), or the
    `crashed` status and why, if conversion failed."""
    if task.entry.checkpoint in (FILE, URL):  # as they are (a URL: served by bench.link)
        return PreparedTask(task)
    name = f"{task.entry.name}-p{task.processes}-d{task.devices}"
    folder = task.checkpoint.folder / "prepared" / name
    marker = folder / "prepared.json"
    if not marker.is_file():
        argvs, envs, outs = _group(task, _convert_argv(task, folder), folder.parent / ".work", name)
        outcomes = run_group(
            argvs, envs, outs, timeout_s=config.timeout_s, memory_bytes=config.memory_budget()
        )
        bad = next((o for o in outcomes if o.status != OK), None)
        if bad is not None or not marker.is_file():
            marker.unlink(missing_ok=True)
            why = bad.error if bad else "no prepared.json written"
            error = f"preparing the {task.entry.checkpoint} checkpoint failed: {why}"
            return PreparedTask(task, CRASHED, error)
    path = json.loads(marker.read_text(encoding="utf-8"))["checkpoint"]
    return PreparedTask(replace(task, path=path))
