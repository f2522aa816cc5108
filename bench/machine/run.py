"""Running the probe: its child inside the asked limits, its figures stamped and written whole.

`probe_host(options)` opens the CPU limit (`bench.limits.cpu`), the memory limit
(`bench.limits.memory`) and the read-speed cap (`bench.limits.disk_read`) the options ask for,
starts `bench.machine.child` in them, reads its figures back and returns a `ProbeRecord` stamped
with this host's machine facts (`bench.machine.facts`) and the limits as read back. Nothing is
written when the child fails; the cgroups are removed on success and failure alike. Never
imports jax (the child does, for the accelerator fields).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bench.errors import BenchError
from bench.limits.cpu import CpuLimit, CpuOutcome, check_cpus
from bench.limits.disk_read import ReadThrottle, ThrottleOutcome
from bench.limits.memory import LimitOutcome, MemoryLimit
from bench.machine.child import ProbePlan
from bench.machine.facts import machine_id, new_run_id, run_record
from bench.machine.record import PROBE_VERSION, ProbeRecord, from_dict

TIMEOUT_S = 300.0
PROBE_NAMES = {"disk_read_bytes_per_s": "disk_read_limit_bytes_per_s"}  # row name -> record name
PROBE_FIELDS = {f.name for f in dataclasses.fields(ProbeRecord)}


@dataclass(frozen=True)
class ProbeOptions:
    """What `loadbench probe` was asked: the plan, and the limits to probe inside."""

    plan: ProbePlan
    cpus: int | None = None
    host_ram_bytes: int | None = None
    disk_read_bytes_per_s: int | None = None
    argv: tuple[str, ...] = ()


def _open(stack: contextlib.ExitStack, options: ProbeOptions) -> list:
    """The limits asked for, opened (each removed when `stack` closes)."""
    opened: list = []
    if options.cpus is not None:
        opened.append(stack.enter_context(CpuLimit(options.cpus)))
    if options.host_ram_bytes is not None:
        opened.append(stack.enter_context(MemoryLimit(options.host_ram_bytes)))
    if options.disk_read_bytes_per_s is not None and options.plan.disk is not None:
        throttle = ReadThrottle(options.disk_read_bytes_per_s, [options.plan.disk])
        opened.append(stack.enter_context(throttle))
    return opened


def _run_child(plan: ProbePlan, limits: list, work: Path) -> dict:
    plan_file, out = work / "plan.json", work / "out.json"
    plan_file.write_text(json.dumps(dataclasses.asdict(plan)), encoding="utf-8")
    argv = [sys.executable, "-m", "bench.machine.child", str(plan_file), str(out)]
    wrap = next((x for x in limits if isinstance(x, MemoryLimit)), None)
    proc = subprocess.Popen(wrap.wrap(argv) if wrap else argv, stderr=subprocess.PIPE, text=True)
    for limit in limits:
        limit.attach(proc.pid)
    try:
        _, err = proc.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise BenchError(
            f"the probe child did not finish within {TIMEOUT_S:.0f} s (killed); the host is too "
            "busy or its disk too slow for the probe: rerun when it is idle, or give a smaller "
            "--size"
        ) from None
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    if proc.returncode != 0 or not out.is_file():
        tail = (err or "").strip().splitlines()[-1:] or [f"exit status {proc.returncode}"]
        raise BenchError(f"the probe child failed: {tail[0]}")
    result = json.loads(out.read_text(encoding="utf-8"))
    if "error" in result:
        raise BenchError(
            f"{result['error']}; give --disk a writable folder with room on the disk to probe "
            "(or a smaller --size)"
        )
    return result


def _fields(outcome: CpuOutcome | LimitOutcome | ThrottleOutcome) -> dict:
    """The probe record's fields that say one limit, as read back: a row's fields, by the
    record's names (it names the read cap apart from the disk figures measured under it)."""
    named = {PROBE_NAMES.get(k, k): v for k, v in outcome.row_fields().items()}
    return {k: v for k, v in named.items() if k in PROBE_FIELDS}


def _limit_fields(limits: list) -> tuple[dict, list[str]]:
    """The fields of each limit as read back, and what they had to say."""
    fields: dict = {}
    notes = []
    for limit in limits:
        outcome = limit.outcome()
        fields |= _fields(outcome)
        notes += [outcome.note] if outcome.note else []
    return fields, notes


def probe_host(options: ProbeOptions) -> ProbeRecord:
    """Probe this host inside the limits of `options`; the stamped record (nothing written)."""
    check_cpus(options.cpus)
    if options.plan.disk is not None and not Path(options.plan.disk).is_dir():
        raise BenchError(f"--disk {options.plan.disk}: no such folder (give a folder to probe)")
    probe_id, start = new_run_id(), time.monotonic()
    host = dataclasses.asdict(run_record(probe_id, list(options.argv) or None))
    with contextlib.ExitStack() as stack:
        limits = _open(stack, options)
        work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="loadbench-probe-")))
        measured = _run_child(options.plan, limits, work)
        fields, notes = _limit_fields(limits)
    measured.pop("measure_s", None)
    measured["notes"] = measured.get("notes", []) + notes
    record = {
        **measured,
        **fields,
        "probe_version": PROBE_VERSION,
        "probe_id": probe_id,
        "machine": machine_id(),
        "started_utc": host["started_utc"],
        "duration_s": time.monotonic() - start,
        "host": host,
        "ram_bytes": host["ram_bytes"],
        "disk_path": str(Path(options.plan.disk).resolve()) if options.plan.disk else None,
    }
    return from_dict(record, "the probe child's figures")
