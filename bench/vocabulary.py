"""The bench's words, said once: how a measured child ended, page-cache states, run statuses, the
native dtype, `recommend`'s verdicts, `compare`'s verdicts.

The loader's words (phases, strategy kinds, checkpoint forms) are in `loader.vocabulary`; these
are the bench's own. Imports nothing, so the dashboard can use it.
"""

from __future__ import annotations

from typing import Final

# -- a child's status: how one measured child ended -----------------------------------------------
OK: Final = "ok"
WRONG: Final = "wrong"  # loaded, but a tensor differs from the checkpoint
OOM: Final = "oom"  # killed by a memory limit (a cgroup, or the bench's RSS watchdog)
TIMEOUT: Final = "timeout"
CRASHED: Final = "crashed"  # raised, died on a signal, or wrote no readable result
SKIPPED: Final = "skipped"  # not run (predicted not to fit, or not available here)
ERROR: Final = "error"  # loaded and verified, but its forward failed to compile (`--compile`)
STATUSES: Final = (OK, WRONG, OOM, TIMEOUT, CRASHED, SKIPPED, ERROR)
# Worst first: the summary of several repeats takes the worst status among them.
DEVICE: Final = "device"  # `oom_kind` of an `oom` row: a device ran out of memory (not the host)
STATUS_SEVERITY: Final = {CRASHED: 5, OOM: 4, TIMEOUT: 3, WRONG: 2, ERROR: 2, SKIPPED: 1, OK: 0}

# -- page cache before each child ------------------------------------------------------------------
WARM: Final = "warm"  # the checkpoint's pages are resident (a load reads no disk)
COLD: Final = "cold"  # evicted before each child
BOTH: Final = "both"  # `bench run --cache both`: one warm and one cold child per repeat
CACHE_STATES: Final = (WARM, COLD)  # what a row records
CACHE_CHOICES: Final = (WARM, COLD, BOTH)  # what `bench run --cache` takes

# -- the model a bench run loads the checkpoint into (`bench run --model`) ------------------------
SPEC: Final = "spec"  # mirrors the file: state paths are the file's keys, shapes as stored
PORT: Final = "port"  # the shape set's real architecture, through its key map
PORT_SCANNED: Final = "port-scanned"  # its scanned-layer variant, layers through loader.Stack
PORTS: Final = (PORT, PORT_SCANNED)  # the models that are a real architecture (and compile)
TRANSPOSED: Final = "transposed"  # the spec model, every 2-D tensor transposed (loader.Transpose)
ZOO: Final = "zoo"  # a model zoo's own class (tunix's Llama3), through a key map of its mapping
MODELS: Final = (SPEC, PORT, PORT_SCANNED, TRANSPOSED, ZOO)
HIT: Final = "hit"  # `--compile-cache`: the forward came from the persistent compilation cache
MISS: Final = "miss"
#: The two conditions a compile cache makes, as a table's title names them: never one median.
COMPILE_CACHE_WORDS: Final = {
    MISS: "compile cache cold (first start)",
    HIT: "compile cache warm (later starts)",
}

# -- a bench run as a whole: how it ended (the run record's `status`) ------------------------------
RUNNING: Final = "running"  # written at the start; read as INTERRUPTED once its writer is gone
COMPLETE: Final = "complete"  # every planned child ran (whatever each child's own status)
INTERRUPTED: Final = "interrupted"  # Ctrl-C, or the run was killed (no end record)
FAILED: Final = "failed"  # the bench itself stopped on an error after some rows
RUN_STATUSES: Final = (COMPLETE, INTERRUPTED, FAILED)

# -- the jax backend a child loaded on (a phase row's `backend`, `jax.default_backend()`) ----------
CPU: Final = "cpu"  # the weights live in host RAM: the host's peak is the whole answer
GPU: Final = "gpu"
TPU: Final = "tpu"
#: what each backend means for the host's RAM, in the words every answer prints after its name
BACKEND_MEANINGS: Final = {
    CPU: "the weights live in host RAM",
    GPU: "the weights land in device memory; host RAM holds what is read and staged",
    TPU: "the weights land in device memory; host RAM holds what is read and staged",
}


def backend_note(backend: str | None) -> str:
    """`CPU backend: the weights live in host RAM`: which backend a run loaded on and what that
    means for the host RAM answer; older results that did not record it say so.

    Example:
        >>> backend_note("cpu")
        'CPU backend: the weights live in host RAM'
    """
    if not backend:
        return "Backend not recorded (results from before loadbench recorded it)"
    meaning = BACKEND_MEANINGS.get(backend, "where the weights live depends on that backend")
    return f"{backend.upper()} backend: {meaning}"


# -- a row's dtype where the checkpoint kept each tensor's own (no `--dtype`) ----------------------
NATIVE: Final = "native"

# -- recommend: does a strategy fit the target host? (best first) ----------------------------------
FITS: Final = "fits"
TIGHT: Final = "tight"
DOES_NOT_FIT: Final = "does not fit"
VERDICTS: Final = (FITS, TIGHT, DOES_NOT_FIT)

# -- compare: one strategy, NEW against BASE -------------------------------------------------------
REGRESSED: Final = "regressed"
BROKEN: Final = "broken"  # ok in BASE, no ok repeat in NEW
SAME: Final = "same"
MISSING: Final = "missing"  # in BASE, absent from NEW (a deleted line, a strategy not run)
NEW_ONLY: Final = "only in new"  # in NEW, absent from BASE
NOT_COMPARABLE: Final = "not comparable"  # the two sides ran under different configurations
FAILED_BOTH: Final = "failed on both"  # no ok repeat on either side (a skipped one: "skipped")
# ... and what a difference (`bench.analysis.difference`) is called, for a time and for a peak
FASTER: Final = "faster"
SLOWER: Final = "slower"
LIGHTER: Final = "lighter"
HEAVIER: Final = "heavier"
UNDECIDED: Final = "too few repeats"  # fewer than `compare.MIN_REPEATS` ok repeats on a side
#: A time where other processes held over a quarter of the CPUs on either side: not a
#: verdict (`bench.analysis.compare.contended`); `compare --strict` fails on it.
UNSTABLE: Final = "unstable"
COMPARE_FAILURES: Final = (REGRESSED, BROKEN)  # verdicts that make `compare` exit 1
# ... and MISSING too, unless `compare --allow-missing`; UNSTABLE too under `compare --strict`

# -- the environment the runner gives a worker that is one rank of a launcher's job ---------------
RANKED_ENV: Final = "LOADBENCH_RANKED"  # "1": join the launcher's run (`loader.launcher.join`)
TEST_KILL_ENV: Final = "LOADBENCH_TEST_KILL_RANK"  # tests: this rank's worker dies once joined
