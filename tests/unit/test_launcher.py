"""`loader.launcher`: which launcher started this process, read from the variables jax reads too."""

from __future__ import annotations

import pytest

from loader.launcher import OMPI, SLURM, TPU, Launcher, LauncherError, detect, join

OMPI4 = {
    "OMPI_COMM_WORLD_SIZE": "4",
    "OMPI_COMM_WORLD_RANK": "2",
    "OMPI_MCA_orte_hnp_uri": "85655552.0;tcp://192.0.2.2:40457;tcp6://[fd00::2]:59835",
}
SRUN = {
    "SLURM_JOB_ID": "1234",
    "SLURM_STEP_ID": "0",
    "SLURM_STEP_NODELIST": "node[001-002]",
    "SLURM_NTASKS": "8",
    "SLURM_STEP_NUM_TASKS": "8",
    "SLURM_PROCID": "5",
    "SLURM_LOCALID": "1",
}


def test_open_mpi_4_is_detected_with_its_job_id():
    assert detect(OMPI4) == Launcher(OMPI, rank=2, size=4, job="85655552")


def test_open_mpi_5_is_detected_but_needs_a_coordinator_for_jax(monkeypatch):
    env = {k: v for k, v in OMPI4.items() if k != "OMPI_MCA_orte_hnp_uri"}
    found = detect(env | {"PMIX_NAMESPACE": "prterun-host-1@1"})
    assert found == Launcher(OMPI, 2, 4, "prterun-host-1@1", detected_by_jax=False)
    monkeypatch.delenv("LOADBENCH_LAUNCH_COORDINATOR", raising=False)
    with pytest.raises(LauncherError, match="LOADBENCH_LAUNCH_COORDINATOR=<host of rank 0>"):
        join(found)


def test_srun_is_detected_by_its_step():
    assert detect(SRUN) == Launcher(SLURM, rank=5, size=8, job="1234.0")


def test_a_batch_script_inside_an_allocation_is_no_launch():
    """sbatch --ntasks 8 runs its script once: SLURM_NTASKS says 8, the step says 1."""
    assert detect(SRUN | {"SLURM_STEP_NUM_TASKS": "1", "SLURM_PROCID": "0"}) is None


def test_a_tpu_pod_is_detected_from_its_worker_variables():
    env = {"TPU_WORKER_HOSTNAMES": "t1k-w-0,t1k-w-1,t1k-w-2,t1k-w-3", "TPU_WORKER_ID": "3"}
    assert detect(env) == Launcher(TPU, rank=3, size=4, job="tpu-t1k-w-0")


@pytest.mark.parametrize(
    "env",
    [{}, {"OMPI_COMM_WORLD_SIZE": "1", "OMPI_COMM_WORLD_RANK": "0"}, {"SLURM_JOB_ID": "7"}],
    ids=["by-hand", "one-rank", "slurm-without-a-step"],
)
def test_no_launch_of_two_or_more_ranks_is_none(env):
    assert detect(env) is None


def test_the_launch_id_can_be_set():
    assert detect(OMPI4 | {"LOADBENCH_LAUNCH_ID": "mine"}).job == "mine"


def test_join_without_a_launcher_says_how_to_start_one(monkeypatch):
    for key in [*OMPI4, *SRUN, "TPU_WORKER_HOSTNAMES"]:
        monkeypatch.delenv(key, raising=False)
    with pytest.raises(LauncherError, match="start it with mpirun -n N, srun -n N"):
        join()
