"""Whether this process is one rank of a cluster launcher's job, and joining that job's JAX run.

Open MPI's `mpirun`, SLURM's `srun` and a TPU pod start the same program once per rank and tell
each rank who it is through environment variables; `jax.distributed.initialize()` called with no
arguments reads them itself (`jax/_src/clusters/`: `ompi_cluster.py` needs
`OMPI_MCA_orte_hnp_uri`, `slurm_cluster.py` `SLURM_JOB_ID`, `SLURM_STEP_NODELIST`, `SLURM_NTASKS`,
`SLURM_PROCID`, `SLURM_LOCALID`; the TPU clusters the VM's metadata or `TPU_WORKER_HOSTNAMES`).
`detect()` reads the same variables without importing jax, so the bench runner (which never
imports jax) can tell it was launched as one of several ranks and use those ranks instead of
spawning its own processes; `join()` is what a loading process (the bench's worker, or a user's
script before `load_model`) calls to join the run through jax's own detection, with no address
assumed. Open MPI 5 (PMIx) sets no `OMPI_MCA_orte_hnp_uri`, which jax 0.10 needs to find the
coordinator: there `join()` takes the address from `LOADBENCH_LAUNCH_COORDINATOR` (rank 0's
host:port) and the rank and size from `OMPI_COMM_WORLD_RANK`/`_SIZE`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

OMPI, SLURM, TPU = "ompi", "slurm", "tpu"
COORDINATOR_ENV = "LOADBENCH_LAUNCH_COORDINATOR"  # rank 0's host:port, where jax finds none
LAUNCH_ID_ENV = "LOADBENCH_LAUNCH_ID"  # overrides the launcher's job id (what the ranks share)


class LauncherError(RuntimeError):
    """No launcher to join, or one whose environment jax cannot join as it stands."""


@dataclass(frozen=True)
class Launcher:
    """This process's place in a launcher's job: which launcher, its rank, the number of ranks,
    and the job's id (the same on every rank of one launch, different for the next one)."""

    name: str
    rank: int
    size: int
    job: str
    detected_by_jax: bool = True  # False: jax cannot find the coordinator (Open MPI 5)


def _int(env: Mapping[str, str], key: str) -> int | None:
    try:
        return int(env[key])
    except (KeyError, ValueError):
        return None


def _ompi(env: Mapping[str, str]) -> Launcher | None:
    size, rank = _int(env, "OMPI_COMM_WORLD_SIZE"), _int(env, "OMPI_COMM_WORLD_RANK")
    if size is None or rank is None:
        return None
    uri = env.get("OMPI_MCA_orte_hnp_uri")  # Open MPI 4: "<jobid>.0;tcp://host:port"
    job = uri.split(".", 1)[0] if uri else env.get("PMIX_NAMESPACE", "ompi")  # 5: the namespace
    return Launcher(OMPI, rank, size, job, detected_by_jax=uri is not None)


def _slurm(env: Mapping[str, str]) -> Launcher | None:
    # srun sets the step's task count; a batch script run once inside an allocation has
    # SLURM_NTASKS too but is one process, so the step's count decides.
    size = _int(env, "SLURM_STEP_NUM_TASKS") or _int(env, "SLURM_NTASKS")
    rank = _int(env, "SLURM_PROCID")
    if size is None or rank is None or "SLURM_STEP_NODELIST" not in env:
        return None
    job = f"{env.get('SLURM_JOB_ID', 'slurm')}.{env.get('SLURM_STEP_ID', '0')}"
    return Launcher(SLURM, rank, size, job)


def _tpu(env: Mapping[str, str]) -> Launcher | None:
    hosts = [h for h in env.get("TPU_WORKER_HOSTNAMES", "").split(",") if h]
    rank = _int(env, "TPU_WORKER_ID")
    if not hosts or rank is None:
        return None
    return Launcher(TPU, rank, len(hosts), f"tpu-{hosts[0]}")


def detect(env: Mapping[str, str] | None = None) -> Launcher | None:
    """The launcher that started this process as one of two or more ranks, or None (started by
    hand, or a launcher's job of a single rank: nothing to join).

    Example:
        >>> detect({"OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_RANK": "1",
        ...         "OMPI_MCA_orte_hnp_uri": "85655552.0;tcp://10.0.0.1:40457"})
        Launcher(name='ompi', rank=1, size=4, job='85655552', detected_by_jax=True)
        >>> detect({}) is None
        True
    """
    env = os.environ if env is None else env
    for reader in (_ompi, _slurm, _tpu):
        found = reader(env)
        if found is not None:
            if found.size < 2:
                return None
            job = env.get(LAUNCH_ID_ENV) or found.job
            return Launcher(found.name, found.rank, found.size, job, found.detected_by_jax)
    return None


def join(launcher: Launcher | None = None) -> Launcher:
    """Join the launcher's JAX run: `jax.distributed.initialize()`, before any other jax use.

    jax finds the coordinator, the rank and the process count itself; CPU processes exchange
    arrays over gloo. Raises `LauncherError` when no launcher started this process, or when jax
    cannot find the coordinator (Open MPI 5) and `LOADBENCH_LAUNCH_COORDINATOR` is not set.

    Example (a script started by `mpirun -n 4 python load.py`):
        >>> from loader.launcher import join
        >>> launcher = join()  # before any other jax use
        >>> model, report = load_model(build, "/shared/model.safetensors", strategy="sharded")
    """
    found = launcher or detect()
    if found is None:
        raise LauncherError(
            "loader.launcher.join: no cluster launcher started this process (no "
            "OMPI_COMM_WORLD_SIZE, SLURM_STEP_NUM_TASKS or TPU_WORKER_HOSTNAMES of 2 or more); "
            "start it with mpirun -n N, srun -n N, or on every host of a TPU pod"
        )
    explicit = os.environ.get(COORDINATOR_ENV)
    if not explicit and not found.detected_by_jax:
        raise LauncherError(
            f"loader.launcher.join: rank {found.rank} of {found.size} ({found.name}) has no "
            "OMPI_MCA_orte_hnp_uri (Open MPI 5), which jax needs to find the coordinator; set "
            f"{COORDINATOR_ENV}=<host of rank 0>:<free port> on every rank (mpirun -x)"
        )
    import jax

    # CPU processes exchange over gloo; GPU and TPU processes ignore it
    jax.config.update("jax_cpu_collectives_implementation", "gloo")  # type: ignore[no-untyped-call]
    if explicit:
        jax.distributed.initialize(explicit, num_processes=found.size, process_id=found.rank)
    else:
        jax.distributed.initialize()  # jax reads the launcher's own variables
    return found
