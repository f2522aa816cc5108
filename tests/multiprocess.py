"""Run a test script as N cooperating `jax.distributed` processes on 127.0.0.1 (CPU, gloo).

Parent side: `launch(script, args, processes=2, devices=4)` starts N interpreters, each with
`XLA_FLAGS=--xla_force_host_platform_device_count=<devices>` and the environment variables the bench
uses for its workers (`LOADBENCH_COORDINATOR`, `LOADBENCH_NUM_PROCESSES`, `LOADBENCH_PROCESS_ID`),
waits for all of them (killing the group on timeout) and returns their outcomes.

Child side: `initialize()` (before any other jax use) switches CPU collectives to gloo, which is
what `jax.distributed` needs for cross-process collectives on CPU in jax 0.10, and joins the run;
`finish(ok)` exits at once, so a failed process does not hang in the exit-time shutdown barrier.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Outcome:
    process: int
    returncode: int | None  # None: killed on timeout
    output: str


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _env(index: int, processes: int, devices: int, coordinator: str) -> dict[str, str]:
    env = dict(os.environ)
    flags = re.sub(r"--xla_force_host_platform_device_count=\S+", "", env.get("XLA_FLAGS", ""))
    env["XLA_FLAGS"] = f"{flags.strip()} --xla_force_host_platform_device_count={devices}".strip()
    env["JAX_PLATFORMS"] = "cpu"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env["PYTHONUNBUFFERED"] = "1"
    env.update(
        LOADBENCH_COORDINATOR=coordinator,
        LOADBENCH_NUM_PROCESSES=str(processes),
        LOADBENCH_PROCESS_ID=str(index),
    )
    return env


def launch(
    script: str | os.PathLike,
    args: list[str],
    *,
    processes: int = 2,
    devices: int = 4,
    timeout_s: float = 120,
    grace_s: float = 5,
) -> list[Outcome]:
    """Run `python script *args` as `processes` cooperating processes of `devices` CPU devices each.

    When one process fails, the others (which would wait for it at the next collective) are
    killed after `grace_s`; all are killed at `timeout_s`. Killed processes have returncode None.
    """
    coordinator = f"127.0.0.1:{free_port()}"
    with tempfile.TemporaryDirectory(prefix="loadbench-mp-") as tmp:
        logs = [open(Path(tmp) / f"p{i}.log", "w+") for i in range(processes)]  # noqa: SIM115
        procs = [
            subprocess.Popen(
                [sys.executable, str(script), *args],
                env=_env(i, processes, devices, coordinator),
                cwd=ROOT,
                stdout=logs[i],
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            for i in range(processes)
        ]
        killed = _wait(procs, timeout_s, grace_s)
        outcomes = []
        for i, (proc, log) in enumerate(zip(procs, logs)):
            log.seek(0)
            outcomes.append(Outcome(i, None if i in killed else proc.returncode, log.read()))
            log.close()
    return outcomes


def _wait(procs: list[subprocess.Popen], timeout_s: float, grace_s: float) -> set[int]:
    """Wait for every process; kill the rest once one fails (after `grace_s`) or at the deadline."""
    deadline = time.monotonic() + timeout_s
    while any(p.poll() is None for p in procs) and time.monotonic() < deadline:
        if any(p.returncode not in (None, 0) for p in procs):
            deadline = min(deadline, time.monotonic() + grace_s)
        time.sleep(0.1)
    killed = {i for i, p in enumerate(procs) if p.poll() is None}
    for i in killed:
        procs[i].kill()
        procs[i].wait()
    return killed


def finish(ok: bool) -> None:
    """In a child: exit now (0 or 1), skipping `jax.distributed`'s exit-time barrier, which would
    wait forever for a process that failed."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0 if ok else 1)


def initialize() -> tuple[int, int]:
    """In a child: join the run described by the environment; (process index, process count)."""
    import jax

    count = int(os.environ["LOADBENCH_NUM_PROCESSES"])
    index = int(os.environ["LOADBENCH_PROCESS_ID"])
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(
        coordinator_address=os.environ["LOADBENCH_COORDINATOR"],
        num_processes=count,
        process_id=index,
    )
    return index, count


def poisoned(net: type, mesh: Any) -> Any:
    """In a child: an instance of the NNX module `net` (built from `nnx.Rngs(0)`) sharded over
    `mesh` as its own partitioning says, with every float leaf 7.0, so that a no-op load fails."""
    import jax
    import numpy as np
    from flax import nnx

    from loader.placement.leaves import iter_variables

    with jax.set_mesh(mesh):
        model = nnx.eval_shape(lambda: net(nnx.Rngs(0)))
    for _, var in iter_variables(model):
        v = var.get_value()
        host = np.full(v.shape, 7.0, np.float32)
        sharding = jax.sharding.NamedSharding(mesh, v.sharding.spec)
        var.set_value(jax.make_array_from_callback(v.shape, sharding, lambda i, h=host: h[i]))
    return model
