"""One measured load in a fresh interpreter: `python -m bench.child.worker --task T.json --out
R.json`.

The task (a `bench.records.wire.ChildTask`, written by the runner) names the strategy, the shape
set, the checkpoint to load, the source checkpoint to verify against (with its `digests.json`; for a
user's own checkpoint the cached `digests` of safetensors' reading and the `checkpoint_folder`),
dtype, seed and an optional memray
capture path. Order: imports, backend initialisation (`jax.distributed.initialize` first for a
multi-process run, from `LOADBENCH_COORDINATOR`, `LOADBENCH_NUM_PROCESSES`,
`LOADBENCH_PROCESS_ID`; under a cluster launcher, `LOADBENCH_RANKED`, through jax's own
detection of the launcher: `loader.launcher.join`), baseline RSS, the strategy under the probe,
which stops once every array of the model is ready (`jax.device_put` returns before its copy is
done: a load that hands back arrays still being copied is not finished), then, outside the
measured phases, verification of every loaded tensor. The `ChildResult` is written atomically;
an exception becomes status "crashed" with its message, a mismatch status "wrong". A child killed
outright writes nothing, and the runner turns that into a row.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from bench.child.capture import tracking
from bench.child.device_memory import jax_device_limits
from bench.child.phase_probe import MemoryProbe
from bench.child.traffic import DeviceTraffic
from bench.child.traffic import expected as traffic_expected
from bench.errors import BenchError
from bench.machine.allocator import heap_free_bytes
from bench.records.wire import (
    Backend,
    ChildResult,
    ChildTask,
    Measurement,
    MemrayFiles,
    from_json,
    to_json,
)
from bench.vocabulary import CRASHED, DEVICE, ERROR, OK, OOM, RANKED_ENV, TEST_KILL_ENV, WRONG
from loader.errors import DeviceOutOfMemoryError
from loader.options import LoadOptions
from loader.strategies import StrategyError, StrategyInfo
from loader.vocabulary import REFERENCE


def init_backend() -> Backend:
    """Import jax, join the distributed run if the runner asked for one, and list the devices."""
    import jax

    if os.environ.get(RANKED_ENV):  # one rank of a cluster launcher's job (bench.run.ranks)
        from loader.launcher import join

        join()
        _test_kill(jax.process_index())
        return Backend(
            process_index=jax.process_index(),
            processes=jax.process_count(),
            devices=jax.device_count(),
            local_devices=jax.local_device_count(),
            platform=jax.default_backend(),
        )
    num = int(os.environ.get("LOADBENCH_NUM_PROCESSES", "1"))
    index = int(os.environ.get("LOADBENCH_PROCESS_ID", "0"))
    if num > 1:
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
        jax.distributed.initialize(
            coordinator_address=os.environ["LOADBENCH_COORDINATOR"],
            num_processes=num,
            process_id=index,
        )
    return Backend(
        process_index=index if num > 1 else 0,
        processes=num,
        devices=jax.device_count(),
        local_devices=jax.local_device_count(),
        platform=jax.default_backend(),
    )


def _test_kill(rank: int) -> None:
    """Tests' hook: the rank named by `LOADBENCH_TEST_KILL_RANK` exits at once (status 3, no
    cleanup) once it has joined the launcher's run, mid-load for the others (they wait for it at
    their collectives). Not a signal: the runner reads a SIGKILLed child as one the kernel's OOM
    killer took, and jax's distributed runtime catches SIGTERM (its preemption notice)."""
    if os.environ.get(TEST_KILL_ENV) == str(rank):
        sys.stderr.write(f"{TEST_KILL_ENV}={rank}: this rank's worker exits now\n")
        sys.stderr.flush()
        os._exit(3)


def _target(task: ChildTask, info: StrategyInfo, spec: Any) -> tuple[Any, Any, Any]:
    """(builder, key_map, port) the strategy loads into; no builder for a reference strategy."""
    from bench.child import models

    # --model-dtype: the checkpoint keeps its dtype, the model is built in another: a real cast.
    # The reference line builds the target too and loads nothing into it, so that every child
    # takes its baseline with the same code imported (flax, the model's modules): otherwise the
    # floor's baseline sits lower by those modules and its peak reads over 1.00x the checkpoint.
    target = models.target(task, spec)
    return (None, None, None) if info.kind == REFERENCE else target


def _load(
    task: ChildTask, info: StrategyInfo, target: tuple[Any, Any, Any], probe: MemoryProbe
) -> tuple[Any, Any, dict[str, Any]]:
    """Load (and, with `--compile`, compile beside or after it): model, report, timing fields.
    The load goes through `StrategyInfo.run`, the entry `loader.load_model` takes, so every
    check a user's load passes runs here too, once."""
    from bench.child.compile import OVERLAPPING, Compile, strategy_cache
    from loader.planning.policy import DEFAULT_POLICY, LoadPolicy
    from loader.sequence import LoadArgs, LoadRequest

    builder, key_map, port = target
    policy = DEFAULT_POLICY
    if port is not None:  # what the architecture declares its files hold beyond the port
        policy = LoadPolicy.of(
            ignore_unexpected=port.ignore_unexpected, ignore_missing=port.ignore_missing
        )
    cache = strategy_cache(task.compile_cache, task.strategy) if task.compile_cache else None
    compiling = Compile(port, probe, cache) if task.compile and port else None
    on_built = compiling.start_from if compiling and info.name in OVERLAPPING else None
    args = LoadArgs(strict=False, key_map=key_map or None, on_built=on_built, policy=policy)
    request = LoadRequest(builder, task.checkpoint, probe, args, load_options(task))
    t0 = time.perf_counter()
    model, report = info.run(request)
    until_ready(model)
    if compiling is None:
        return model, report, {}
    load_s = time.perf_counter() - t0
    compiling.finish()
    timing: dict[str, Any] = {"load_s": load_s, "ready_s": time.perf_counter() - t0}
    timing |= {"compile_cache": compiling.cache_result, "error": compiling.error}
    return model, report, timing | {"compile_start_rss_bytes": compiling.start_rss_bytes}


def until_ready(model: Any) -> None:
    """Wait until every jax array of `model` holds its bytes (transfers still in flight done)."""
    import jax

    if model is not None:
        from loader.placement.leaves import iter_variables

        jax.block_until_ready([var.get_value() for _, var in iter_variables(model)])


def _verify(
    model: Any, info: StrategyInfo, task: ChildTask, spec: Any, key_map: Any = None
) -> tuple[str, str | None, int]:
    """(status, error, tensors checked) of a loaded model: a user's model (`MODULE:NAME`) by
    its load planned again, a port or transposed model leaf by leaf through its key map, else
    against the user's checkpoint's digests or the synthetic values; a reference strategy that
    loads nothing checks nothing."""
    from bench.child import models, verify
    from bench.user_model import is_named

    if model is None and info.kind == REFERENCE:
        return OK, None, 0
    if is_named(task.model):
        checked, error = models.verify_planned(model, task.source_checkpoint, key_map)
        return (OK if error is None else WRONG), error, checked
    if key_map is not None:
        checked, error = models.verify_mapped(model, task.source_checkpoint, key_map)
        return (OK if error is None else WRONG), error, checked
    if task.digests:
        if task.checkpoint_folder is None:
            raise BenchError(f"task of {task.strategy}: digests given without checkpoint_folder")
        checked, error = verify.verify_user_model(model, task.digests, task.checkpoint_folder)
        return (OK if error is None else WRONG), error, checked
    checked, error = verify.verify_model(
        model, task.source_checkpoint, spec, dtype=task.dtype, seed=task.seed
    )
    return (OK if error is None else WRONG), error, checked


def measure(task: ChildTask, started: float | None = None) -> ChildResult:
    """Run the task's strategy under the probe and verify every loaded tensor; `started` is
    `time.perf_counter()` at the child's start (default: now), where `steps_s` counts from."""
    import shapes
    from bench import strategies

    clock = _StepClock(time.perf_counter() if started is None else started)
    backend = init_backend()
    clock.ended("backend")
    if task.compile_cache:
        from bench.child.compile import strategy_cache, use_cache

        use_cache(strategy_cache(task.compile_cache, task.strategy))
    info = strategies.get(task.strategy)
    if info.available():  # its modules imported before the clock, as a program's imports are
        info.strategy()  # (one that is not: the load's own error, as before)
    spec = shapes.load_spec(task.shapes)
    target = _target(task, info, spec)
    clock.ended("target")
    capture = task.memray_bin and task.memray_bin.replace(
        "{process_index}", str(backend.process_index)
    )
    gc.collect()
    probe, traffic, heap_before = MemoryProbe(), DeviceTraffic(), heap_free_bytes()
    with tracking(capture or None), probe.measure(), traffic.watching():
        model, report, timing = _load(task, info, target, probe)
    clock.ended("load")
    retained = _retained(heap_before, heap_free_bytes())
    status, error, checked = _verify(model, info, task, spec, target[1])
    clock.ended("verify")
    compile_error = timing.pop("error", None)
    if status == OK and compile_error:
        status, error = ERROR, compile_error
    result = ChildResult(
        status=status,
        error=error,
        backend=backend,
        measurement=dataclasses.replace(
            _measurement(probe, report, traffic, model, budget_in_effect(info, task)),
            heap_retained_bytes=retained,
            **timing,
        ),
        tensors_verified=checked,
        steps_s=clock.steps_s,
    )
    return _with_memray_report(result, capture) if capture else result


@dataclasses.dataclass
class _StepClock:
    """Seconds of each step since the previous one ended (the first: since `started`). The
    child's steps, in order: `backend` (jax imported, the distributed run joined, the devices
    listed: 7-8 s on a TPU host, which opens the chip), `target` (the strategy's modules
    imported and the model to load into),
    `load` (the measured load: its phases are the rows), `verify` (every tensor checked)."""

    last: float
    steps_s: dict[str, float] = dataclasses.field(default_factory=dict)

    def ended(self, step: str) -> None:
        now = time.perf_counter()
        self.steps_s[step], self.last = now - self.last, now


def _retained(before: int | None, after: int | None) -> int | None:
    """The free bytes the load left in glibc's heaps (`bench.machine.allocator`); None: no glibc."""
    return None if before is None or after is None else max(0, after - before)


def _measurement(
    probe: MemoryProbe,
    report: Any,
    traffic: DeviceTraffic,
    model: Any,
    budget: int | None,
) -> Measurement:
    """The probe's measurements, with what the load reported of itself and what each device
    received against its shards of the model."""
    share = getattr(report, "share", None)  # a `sharded` load (`loader.sharded.share`)
    limits = jax_device_limits()  # None on the CPU backend: no device memory to speak of
    return dataclasses.replace(
        probe.result(),
        inflight_peak_bytes=getattr(report, "inflight_peak_bytes", None),
        budget_bytes=budget,
        staging_memory=getattr(report, "staging_memory", None),
        device_programs=getattr(report, "device_programs", None),
        device_received_bytes=traffic.received,
        device_expected_bytes=traffic_expected(model) if traffic.received else {},
        device_resent_bytes=getattr(report, "device_resent_bytes", None) or {},
        remote=_remote(report),
        share_mode=None if share is None else share.mode.value,
        exchanged_bytes=None if share is None else share.exchanged_bytes,
        device_bytes_limit_by_device=limits or {},
        device_model_bytes_by_device=traffic_expected(model) if limits else {},
    )


def _remote(report: Any) -> dict[str, int] | None:
    """A remote load's requests, bytes and concurrency (`loader.remote.RemoteStats`), a
    `sharded` process's share (`LoadReport.share_bytes`) and its read plan (the requests and
    bytes it planned, and the bytes of the share among them; `loader.sharded.read_plan`)."""
    stats = getattr(report, "remote", None)
    if stats is None:
        return None
    keys: tuple[str, ...] = (
        "concurrency",
        "requests",
        "bytes_requested",
        "bytes_received",
        "header_bytes",
    )
    if getattr(stats, "max_over_read", None) is not None:  # a read plan (`sharded`)
        keys += ("planned_requests", "planned_bytes", "needed_bytes")
    share = getattr(report, "share_bytes", None)
    return {k: int(getattr(stats, k)) for k in keys} | (
        {} if share is None else {"share_bytes": int(share)}
    )


def budget_in_effect(info: StrategyInfo, task: ChildTask) -> int | None:
    """The bound on bytes in flight the strategy loaded under: the one asked, else its default
    (None for a strategy that takes no budget)."""
    reading = load_options(task).reading
    return reading.value("budget") if "budget" in info.options else None


def load_options(task: ChildTask) -> LoadOptions:
    """The task's load options, each checked by its `loader.options.TABLE` row: the runner gave
    the task only those its strategy declares (`bench.run.matrix`); any other is refused by the
    strategy in one line (`StrategyError`), a crashed row, not a crashed run."""
    return LoadOptions.of(**task.options)


def _with_memray_report(result: ChildResult, bin_path: str) -> ChildResult:
    from bench.child import capture

    html, top, error = capture.report(bin_path)
    files = MemrayFiles(str(html) if html else None, str(top) if top else None, error)
    return dataclasses.replace(result, memray=files)


def run(task: ChildTask, started: float | None = None) -> ChildResult:
    """`measure`, with any exception turned into a "crashed" result naming it."""
    try:
        return measure(task, started)
    except DeviceOutOfMemoryError as exc:  # one line: the tensor, the device, its free memory
        return ChildResult(OOM, str(exc), oom_kind=DEVICE)
    except StrategyError as exc:  # one line: a strategy refused (an option it does not take)
        return ChildResult(CRASHED, str(exc))
    except Exception as exc:  # noqa: BLE001 - every failure must become a result row
        tail = "".join(traceback.format_exception(exc)[-8:]).strip()
        return ChildResult(CRASHED, f"{type(exc).__name__}: {exc}\n{tail}"[-4000:])


def main(argv: list[str] | None = None) -> int:
    started = time.perf_counter()
    from loader.format.atomic import atomic_write_text

    parser = argparse.ArgumentParser(prog="python -m bench.child.worker", description=__doc__)
    parser.add_argument("--task", required=True, help="task JSON written by the runner")
    parser.add_argument("--out", required=True, help="where to write the result JSON")
    args = parser.parse_args(argv)
    try:
        task = from_json(ChildTask, Path(args.task).read_text(encoding="utf-8"), source=args.task)
    except Exception as exc:  # noqa: BLE001 - an unreadable task is this child's result too
        result = ChildResult(CRASHED, f"cannot read the task: {exc}")
    else:
        result = run(task, started)
    atomic_write_text(args.out, to_json(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
