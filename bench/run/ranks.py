"""The bench on a cluster launcher's ranks: rank 0 leads, the others follow, rank 0 merges the rows.

Under `mpirun -n N`, `srun -n N` or on every host of a TPU pod (`loader.launcher.detect`), every
rank runs the same `loadbench bench run`. Rank 0 runs the bench as usual and writes the one results
file. For each task of a multi-process strategy it posts a ticket (the task's `ChildTask` file and
where each rank's worker writes its result) in the launch folder, `<out>/.launch/<job>/`, and
starts its own worker; every other rank (`follow`) waits for tickets, starts its worker for each,
and writes how it ended beside the ticket. The workers join one JAX run through jax's own
detection of the launcher (`loader.launcher.join`): no coordinator address is assumed.

Rank 0 waits for the other ranks' outcomes until the task's `--timeout` plus `GRACE_S`, then merges
every rank's outcome into the task's rows exactly as it merges the processes of `--processes N`
(`bench.run.rows.result_records`): a rank that died, hung or wrote nothing becomes a row with
its status, never a hung run. A worker whose peer on another rank failed is killed at once
("crashed"), as in a local group. The launch folder, like the checkpoint, must be on storage every
rank sees: one host, or a shared file system.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import sys
import threading
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.errors import BenchError
from bench.limits.cpu import CpuLimit
from bench.limits.disk_read import ReadThrottle
from bench.limits.memory import MemoryLimit
from bench.run.children import ChildOutcome, read_result, run_group
from bench.run.config import default_budget
from bench.run.launch import child_env, write_child_task
from bench.run.matrix import Task
from bench.vocabulary import OK, RANKED_ENV, TIMEOUT
from loader.format.atomic import atomic_write_text
from loader.launcher import Launcher

GRACE_S = 30.0  # past the task's timeout, how long rank 0 still waits for another rank's outcome
HEARTBEAT_S = 2.0  # how often rank 0 shows it is alive (the followers watch for it)
LEADER_SILENCE_S = 300.0  # a follower gives up once rank 0 has shown no sign of life this long
BYE_WAIT_S = 10.0  # at the end, how long rank 0 waits for the followers to see it end
POLL_S = 0.1
DONE = "done.json"
ALIVE = "leader.alive"


def launch_folder(out: Path, launcher: Launcher) -> Path:
    """Where the ranks of one launch exchange tickets and outcomes: `<out>/.launch/<job>`."""
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in launcher.job)
    return Path(out) / ".launch" / f"{launcher.name}-{safe}"


def ranked_processes(asked: list[int] | None, launcher: Launcher) -> list[int]:
    """`--processes` under a launcher: its rank count (the launcher decides it), or refused."""
    if asked is None or asked == [launcher.size]:
        return [launcher.size]
    raise BenchError(
        f"--processes {','.join(map(str, asked))}: this run was launched as {launcher.size} "
        f"ranks by {launcher.name}, and under a launcher its ranks are the processes; drop "
        f"--processes, or launch {asked[0]} ranks"
    )


@dataclass(frozen=True)
class Ticket:
    """One multi-process task, posted by rank 0 for every rank: the worker's task file, each
    rank's result path, its CPU device count, and its limits."""

    seq: int
    task_file: str
    outs: list[str]
    devices_per_process: int
    timeout_s: float
    memory_bytes: int | None  # `--memory-budget`; None: each rank's own default


def _ticket_path(folder: Path, seq: int) -> Path:
    return folder / f"ticket-{seq}.json"


def _outcome_path(folder: Path, seq: int, rank: int) -> Path:
    return folder / f"outcome-{seq}-p{rank}.json"


def _write_outcome(folder: Path, seq: int, rank: int, outcome: ChildOutcome) -> None:
    text = json.dumps({"status": outcome.status, "error": outcome.error})
    atomic_write_text(_outcome_path(folder, seq, rank), text)


def _read_outcome(path: Path) -> tuple[str, str | None]:
    data = json.loads(path.read_text(encoding="utf-8"))
    return data["status"], data["error"]


def _peer_failure(folder: Path, seq: int, me: int, launcher: Launcher) -> str | None:
    """Why this rank's worker should stop: another rank's worker of the same task failed."""
    for rank in range(launcher.size):
        path = _outcome_path(folder, seq, rank)
        if rank == me or not path.is_file():
            continue
        with contextlib.suppress(OSError, ValueError, KeyError):
            status, error = _read_outcome(path)
            if status != OK:
                first = (error or "").split("\n", 1)[0]
                return f"killed: rank {rank} of the {launcher.name} job failed ({status}: {first})"
    return None


def _run_worker(
    ticket: Ticket, rank: int, folder: Path, launcher: Launcher, **limits: Any
) -> ChildOutcome:
    """Run this rank's worker of `ticket` to its end; its outcome, also written to `folder`."""
    out = Path(ticket.outs[rank])
    argv = [sys.executable, "-m", "bench.child.worker", "--task", ticket.task_file]
    env = child_env(ticket.devices_per_process) | {RANKED_ENV: "1"}
    [outcome] = run_group(
        [[*argv, "--out", str(out)]],
        [env],
        [out],
        timeout_s=ticket.timeout_s,
        memory_bytes=ticket.memory_bytes or default_budget(),
        peer_failed=lambda: _peer_failure(folder, ticket.seq, rank, launcher),
        **limits,
    )
    _write_outcome(folder, ticket.seq, rank, outcome)
    return outcome


class Leader:
    """Rank 0's side: posts each multi-process task for every rank and gathers their outcomes.

    A context manager: entering clears and makes the launch folder and starts a heartbeat;
    leaving tells the followers the run is over and removes the folder.
    """

    def __init__(self, launcher: Launcher, out: Path, grace_s: float = GRACE_S) -> None:
        self.launcher = launcher
        self.folder = launch_folder(out, launcher)
        self.grace_s = grace_s
        self._seq = 0
        self._stop = threading.Event()
        self._beat = threading.Thread(target=self._heartbeat, daemon=True)

    def __enter__(self) -> Leader:
        shutil.rmtree(self.folder, ignore_errors=True)  # a stale launch of the same job id
        self.folder.mkdir(parents=True)
        (self.folder / ALIVE).touch()
        self._beat.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        atomic_write_text(self.folder / DONE, json.dumps({"tasks": self._seq}))
        deadline = time.monotonic() + BYE_WAIT_S
        others = range(1, self.launcher.size)
        while time.monotonic() < deadline and not all(
            (self.folder / f"bye-p{r}").is_file() for r in others
        ):
            time.sleep(POLL_S)
        shutil.rmtree(self.folder, ignore_errors=True)
        with contextlib.suppress(OSError):  # `.launch` itself, once no launch uses it
            self.folder.parent.rmdir()

    def _heartbeat(self) -> None:
        while not self._stop.wait(HEARTBEAT_S):
            with contextlib.suppress(OSError):
                (self.folder / ALIVE).touch()

    def takes(self, task: Task) -> bool:
        """Whether `task` runs on the launcher's ranks (its process count is theirs)."""
        return task.processes == self.launcher.size

    def run(  # noqa: PLR0913  keyword-only: a timeout, a budget and three optional limits
        self,
        task: Task,
        work: Path,
        *,
        timeout_s: float,
        memory_bytes: int | None,
        limit: MemoryLimit | None = None,
        throttle: ReadThrottle | None = None,
        cpu: CpuLimit | None = None,
    ) -> list[ChildOutcome]:
        """Run `task` on every rank; one outcome per rank, in rank order."""
        tag = uuid.uuid4().hex[:12]
        task_file = write_child_task(task, work, tag)
        outs = [str(work / f"{tag}-p{r}.json") for r in range(self.launcher.size)]
        ticket = Ticket(
            self._seq,
            str(task_file),
            outs,
            task.devices // task.processes,
            timeout_s,
            memory_bytes,
        )
        self._seq += 1
        started = time.monotonic()
        atomic_write_text(_ticket_path(self.folder, ticket.seq), json.dumps(asdict(ticket)))
        own = _run_worker(
            ticket, 0, self.folder, self.launcher, limit=limit, throttle=throttle, cpu=cpu
        )
        deadline = started + timeout_s + self.grace_s
        others = [self._gather(ticket, r, deadline) for r in range(1, self.launcher.size)]
        return [own, *others]

    def _gather(self, ticket: Ticket, rank: int, deadline: float) -> ChildOutcome:
        """Rank `rank`'s outcome of `ticket`, or "timeout" once `deadline` passes without it."""
        path = _outcome_path(self.folder, ticket.seq, rank)
        while not path.is_file():
            if time.monotonic() > deadline:
                return ChildOutcome(
                    TIMEOUT,
                    f"rank {rank} of {self.launcher.size} ({self.launcher.name}) wrote no "
                    f"outcome to {path} within the {ticket.timeout_s:g} s timeout plus "
                    f"{self.grace_s:g} s: it died or hung, or cannot see the launch folder "
                    f"{self.folder} (--out must be on storage every rank sees)",
                    None,
                )
            time.sleep(POLL_S)
        status, error = _read_outcome(path)
        result, _ = read_result(Path(ticket.outs[rank]))
        return ChildOutcome(status, error, result)


def follow(launcher: Launcher, out: Path, silence_s: float = LEADER_SILENCE_S) -> int:
    """A rank other than 0: run this rank's worker of every task rank 0 posts, until it says the
    run is over (0), or shows no sign of life for `silence_s` (1, with a line saying so)."""
    folder = launch_folder(out, launcher)
    seq, seen, beat, quiet_since = 0, False, None, time.monotonic()
    while True:
        ticket_path = _ticket_path(folder, seq)
        if ticket_path.is_file():
            ticket = Ticket(**json.loads(ticket_path.read_text(encoding="utf-8")))
            _run_worker(ticket, launcher.rank, folder, launcher)
            seq, quiet_since = seq + 1, time.monotonic()
            continue
        if (folder / DONE).is_file() or (seen and not folder.is_dir()):
            with contextlib.suppress(OSError):
                (folder / f"bye-p{launcher.rank}").touch()
            return 0
        seen = seen or folder.is_dir()
        with contextlib.suppress(OSError):
            now = (folder / ALIVE).stat().st_mtime
            if now != beat:
                beat, quiet_since = now, time.monotonic()
        if time.monotonic() - quiet_since > silence_s:
            print(
                f"loadbench: rank {launcher.rank} of {launcher.size} ({launcher.name}): rank 0 "
                f"showed no sign of life in {folder} for {silence_s:g} s; giving up after "
                f"{seq} tasks (is --out on storage every rank sees?)",
                file=sys.stderr,
            )
            return 1
        time.sleep(POLL_S)
