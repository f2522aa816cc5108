"""One measured load in a fresh interpreter: `python -m bench.child.worker --task T.json --out R.json`.

The task (written by the runner) names the strategy, the shape set, the checkpoint to load, the
source checkpoint to verify against (with its `digests.json`), dtype, seed and an optional memray
capture path. Order: imports, backend initialisation (`jax.distributed.initialize` first for a
multi-process run, from `LOADBENCH_COORDINATOR`, `LOADBENCH_NUM_PROCESSES`,
`LOADBENCH_PROCESS_ID`), baseline RSS, the strategy under the probe, then, outside the measured
phases, verification of every loaded tensor. The result JSON is written atomically; an exception
becomes status "crashed" with its message, a mismatch status "wrong". A child killed outright
writes nothing, and the runner turns that into a row.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import importlib
import inspect
import json
import os
import sys
import time
import traceback
from typing import Any

from bench.child.capture import tracking
from bench.child.probe import MemoryProbe


def init_backend() -> dict[str, Any]:
    """Import jax, join the distributed run if the runner asked for one, and list the devices."""
    import jax

    num = int(os.environ.get("LOADBENCH_NUM_PROCESSES", "1"))
    index = int(os.environ.get("LOADBENCH_PROCESS_ID", "0"))
    if num > 1:
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
        jax.distributed.initialize(
            coordinator_address=os.environ["LOADBENCH_COORDINATOR"],
            num_processes=num,
            process_id=index,
        )
    return {
        "process_index": index if num > 1 else 0,
        "processes": num,
        "devices": jax.device_count(),
        "local_devices": jax.local_device_count(),
    }


def _phase_dict(stats) -> dict[str, Any]:
    return dataclasses.asdict(stats)


def measure(task: dict[str, Any]) -> dict[str, Any]:
    """Run the task's strategy under the probe and verify its result; the result dict."""
    import shapes
    from bench import strategies
    from bench.child import verify

    backend = init_backend()
    info = strategies.get(task["strategy"])
    spec = shapes.load_spec(task["shapes"])
    builder = None  # a reference strategy (the `floor` line) builds no model
    if info.kind != "reference":
        model_dtype = task.get("model_dtype") or task.get("dtype")  # --model-dtype: a real cast
        builder = shapes.model_builder(spec, dtype=model_dtype, seed=task.get("seed", 0))
    capture = task.get("memray_bin")
    if capture:
        capture = task["memray_bin"] = capture.replace(
            "{process_index}", str(backend["process_index"])
        )
    gc.collect()
    probe = MemoryProbe()
    with tracking(capture), probe.measure():
        model, report = info.load(
            builder, task["checkpoint"], probe, strict=False, **load_options(info, task)
        )
    res = probe.result()
    started = time.perf_counter()
    status, error, checked = "ok", None, 0
    if model is not None or info.kind != "reference":
        checked, error = verify.verify_model(
            model,
            task["source_checkpoint"],
            spec,
            dtype=task.get("dtype"),
            seed=task.get("seed", 0),
        )
        status = "ok" if error is None else "wrong"
    return {
        **backend,
        "status": status,
        "error": error,
        "baseline_rss_bytes": res.baseline_rss_bytes,
        "peak_rss_bytes": res.total.peak_rss_bytes,
        "wall_s": res.total.wall_s,
        "peak_source": res.peak_source,
        "total": _phase_dict(res.total),
        "phases": [_phase_dict(p) for p in res.phases],
        "samples": [[s.t_s, s.phase, s.rss_anon_bytes, s.rss_file_bytes] for s in res.samples],
        "inflight_peak_bytes": getattr(report, "inflight_peak_bytes", None),
        "tensors_verified": checked,
        "verify_s": time.perf_counter() - started,
    }


def load_options(info, task: dict[str, Any]) -> dict[str, Any]:
    """`budget=` for a strategy whose `load` takes one (`bench run --budget`), else nothing."""
    if task.get("budget_bytes") is None:
        return {}
    module = (
        info.module if not isinstance(info.module, str) else importlib.import_module(info.module)
    )
    params = inspect.signature(module.load).parameters
    takes = "budget" in params or any(p.kind is p.VAR_KEYWORD for p in params.values())
    return {"budget": int(task["budget_bytes"])} if takes else {}


def _memray_report(task: dict[str, Any], result: dict[str, Any]) -> None:
    from bench.child import capture

    html, top, error = capture.report(task["memray_bin"])
    result["memray_html"] = str(html) if html else None
    result["memray_top"] = str(top) if top else None
    if error:
        result["memray_error"] = error


def run(task: dict[str, Any]) -> dict[str, Any]:
    """`measure`, with any exception turned into a "crashed" result naming it."""
    try:
        result = measure(task)
        if task.get("memray_bin"):
            _memray_report(task, result)
    except Exception as exc:  # noqa: BLE001 - every failure must become a result row
        tail = "".join(traceback.format_exception(exc)[-8:]).strip()
        result = {"status": "crashed", "error": f"{type(exc).__name__}: {exc}\n{tail}"[-4000:]}
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.child.worker", description=__doc__)
    parser.add_argument("--task", required=True, help="task JSON written by the runner")
    parser.add_argument("--out", required=True, help="where to write the result JSON")
    args = parser.parse_args(argv)
    with open(args.task, encoding="utf-8") as fh:
        task = json.load(fh)
    result = run(task)
    from loader.format.atomic import atomic_write_text

    atomic_write_text(args.out, json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
