"""Starting worker processes and watching them: timeout, memory watchdog, crash detection.

`run_group` starts one or more cooperating children (a multi-process strategy runs N at once),
each in its own session so it can be killed with everything it started. Every `poll_s` it sums the
group's RSS (psutil, children included) and kills the group before it passes the memory budget
(status "oom") or its time limit ("timeout"); if one member fails, the rest are killed at once.
Whatever happens, each member comes back as a `ChildOutcome`; nothing here raises for a child's
failure. Ctrl-C kills the group and re-raises.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psutil

from bench.errors import ChildResultError
from bench.limits.cpu import CpuLimit
from bench.limits.disk_read import ReadThrottle
from bench.limits.memory import MemoryLimit
from bench.records.wire import ChildResult, from_json
from bench.units import format_bytes
from bench.vocabulary import CRASHED, OOM, TIMEOUT

STDERR_TAIL = 3000


@dataclass
class ChildOutcome:
    """How one child ended: its status, a message, and its `ChildResult` if it wrote one."""

    status: str  # a loader.vocabulary status: ok | wrong | crashed | timeout | oom
    error: str | None
    result: ChildResult | None


@dataclass
class _Child:
    proc: subprocess.Popen
    out: Path
    err: Path
    killed: tuple[str, str] | None = None  # (status, message) when the watchdog killed it
    for_member: int | None = None  # killed because this member of the group failed first


def _group_rss(children: list[_Child]) -> int:
    total = 0
    for child in children:
        if child.proc.poll() is not None:
            continue
        with contextlib.suppress(psutil.Error):
            proc = psutil.Process(child.proc.pid)
            for p in [proc, *proc.children(recursive=True)]:
                with contextlib.suppress(psutil.Error):
                    total += p.memory_info().rss
    return total


def _kill(children: list[_Child], status: str = CRASHED, message: str = "") -> None:
    for child in children:
        if child.proc.poll() is None:
            child.killed = (status, message)
            with contextlib.suppress(OSError):
                os.killpg(child.proc.pid, signal.SIGKILL)
    for child in children:
        child.proc.wait()


def _tail(path: Path) -> str:
    try:
        return path.read_bytes()[-STDERR_TAIL:].decode("utf-8", "replace").strip()
    except OSError:
        return ""


def read_result(path: Path) -> tuple[ChildResult | None, str | None]:
    """The child's result, or None and why: absent, or unreadable (another version, bad fields)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return None, f"no readable result JSON at {path}"
    try:
        return from_json(ChildResult, text, source=str(path)), None
    except ChildResultError as exc:
        return None, f"unreadable result: {exc}"


def _outcome(child: _Child) -> ChildOutcome:
    result, unreadable = read_result(child.out)
    code = child.proc.returncode
    tail = _tail(child.err)
    if child.killed is not None:
        status, message = child.killed
        return ChildOutcome(
            status, f"{message}\n{tail}".strip() if status == CRASHED else message, result
        )
    if code is not None and code < 0:
        name = signal.Signals(-code).name if -code in signal.Signals._value2member_map_ else code
        status = OOM if -code == signal.SIGKILL else CRASHED
        hint = " (the kernel's OOM killer?)" if status == OOM else ""
        return ChildOutcome(status, f"killed by {name}{hint}\n{tail}".strip(), result)
    if code != 0:
        return ChildOutcome(CRASHED, f"exit status {code}\n{tail}".strip(), result)
    if result is None:
        return ChildOutcome(CRASHED, f"{unreadable}\n{tail}".strip(), None)
    return ChildOutcome(result.status, result.error, result)


def _watch(  # noqa: PLR0913  the group, its three limits, and a check of its peers elsewhere
    children: list[_Child],
    timeout_s: float,
    budget: int,
    poll_s: float,
    peer_failed: Callable[[], str | None] | None = None,
) -> None:
    """Wait for the group to end, killing it when it passes its budget or its time limit, or
    when `peer_failed` names a failed member started elsewhere (another rank's process)."""
    start = time.monotonic()
    while True:
        codes = [c.proc.poll() for c in children]
        if all(code is not None for code in codes):
            return
        why = peer_failed() if peer_failed is not None else None
        if why:
            time.sleep(0.5)  # as below: this member may be reporting its own failure
            _kill(children, CRASHED, why)
            return
        failed = [i for i, code in enumerate(codes) if code not in (None, 0)]
        if failed:
            time.sleep(0.5)  # let the others report their own failure first
            _kill(children, CRASHED, f"killed: process {failed[0]} of the group failed")
            for child in children:
                if child.killed is not None:
                    child.for_member = failed[0]
            return
        rss = _group_rss(children)
        if rss > budget:
            msg = f"RSS {format_bytes(rss)} passed the memory budget {format_bytes(budget)}; killed"
            _kill(children, OOM, msg)
            return
        if time.monotonic() - start > timeout_s:
            _kill(children, TIMEOUT, f"still running after the {timeout_s:g} s timeout; killed")
            return
        time.sleep(poll_s)


def _start(argv: list[str], env: dict[str, str], out: Path) -> _Child:
    """Start one child in its own session, its stdout and stderr going to `<out>.stderr`."""
    err = out.with_suffix(".stderr")
    with open(err, "wb") as fh:
        proc = subprocess.Popen(
            argv, env=env, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True
        )
    return _Child(proc, out, err)


def run_group(  # noqa: PLR0913  keyword-only: a timeout, a budget and three optional limits
    argvs: list[list[str]],
    envs: list[dict[str, str]],
    outs: list[Path],
    *,
    timeout_s: float,
    memory_bytes: int,
    poll_s: float = 0.02,
    limit: MemoryLimit | None = None,
    throttle: ReadThrottle | None = None,
    cpu: CpuLimit | None = None,
    peer_failed: Callable[[], str | None] | None = None,
) -> list[ChildOutcome]:
    """Run cooperating children to the end; one outcome per child, in order.

    Args:
        argvs: each child's command line.
        envs: each child's full environment.
        outs: where each child writes its `ChildResult` JSON (its stderr goes beside, `.stderr`).
        timeout_s: wall-clock limit for the whole group.
        memory_bytes: the group's summed RSS limit.
        limit: an open `bench.limits.memory.MemoryLimit`: each child is started inside it (its PID,
            and only it, goes in at once); one killed by it becomes "oom". throttle: an open
            `bench.limits.disk_read.ReadThrottle`, joined the same way, as is cpu: an open
            `bench.limits.cpu.CpuLimit`. peer_failed: polled with the group; a message from it
            (a member of the same load on another rank failed) kills the group, "crashed".
    """
    children: list[_Child] = []
    try:
        for argv, env, out in zip(argvs, envs, outs, strict=True):
            children.append(_start(limit.wrap(argv) if limit else argv, env, out))
            for cgroup in (limit, throttle, cpu):
                if cgroup is not None:
                    cgroup.attach(children[-1].proc.pid)
        _watch(children, timeout_s, memory_bytes, poll_s, peer_failed)
    except BaseException:
        _kill(children, CRASHED, "interrupted")
        raise
    outcomes = [_outcome(c) for c in children]
    outcomes = _limit_kills(children, outcomes, limit) if limit is not None else outcomes
    return _blame_memory(children, outcomes)


def _blame_memory(children: list[_Child], outcomes: list[ChildOutcome]) -> list[ChildOutcome]:
    """Members killed because another was killed for memory are "oom" too, not "crashed": the
    group did not fit (the kernel's OOM killer picks one process, the bench stops the rest)."""
    out = []
    for child, outcome in zip(children, outcomes, strict=True):
        first = child.for_member
        if first is not None and outcome.status == CRASHED and outcomes[first].status == OOM:
            cause = (outcomes[first].error or "").split("\n", 1)[0]
            msg = f"killed: process {first} of the group was killed for memory ({cause})"
            outcome = ChildOutcome(OOM, msg, outcome.result)
        out.append(outcome)
    return out


def _limit_kills(children: list[_Child], outcomes: list[ChildOutcome], limit: MemoryLimit):
    """A child SIGKILLed while its cgroup counted an OOM kill was killed by the limit: "oom"."""
    kills = limit.oom_kills()
    if not kills:
        return outcomes
    out = []
    for child, outcome in zip(children, outcomes, strict=True):
        if child.proc.returncode == -signal.SIGKILL and child.killed is None:
            tail = (outcome.error or "").split("\n", 1)[1:]
            msg = (
                f"killed by the {limit.mechanism} memory limit of "
                f"{format_bytes(limit.limit_bytes)} (oom_kill={kills})"
            )
            outcome = ChildOutcome(OOM, "\n".join([msg, *tail]), outcome.result)
        out.append(outcome)
    return out
