"""The probe record: what `loadbench probe` measured of a host, versioned (bench/SCHEMA.md).

`ProbeRecord` is written as one JSON object stamped `"probe_version": 1`. `read_probe(path)`
(and `parse_probe(text, source)`, for a file's contents already read, e.g. an upload) refuses a
newer version naming it, and a file with a missing or mistyped field naming the field;
`write_probe` writes it whole or not at all (a temporary file renamed into place). Never imports
jax.
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.errors import BenchError

PROBE_VERSION = 1


class ProbeFileError(BenchError):
    """A probe file cannot be read: absent, not JSON, another version, a bad field."""


@dataclass(frozen=True)
class ProbeRecord:
    """One host, probed. Bandwidths in bytes/s; per-thread-count figures keyed by the count."""

    probe_id: str
    machine: str
    started_utc: str
    duration_s: float
    host: dict[str, Any]  # the machine facts a run record carries (bench/machine/facts.py)
    # the contract: the best warm copy and cold read, and the thread counts that reached them
    warm_copy_bytes_per_s: float
    warm_copy_threads: int
    cold_read_bytes_per_s: float | None
    cold_read_threads: int | None
    warm_copy: dict[str, float]
    cold_read: dict[str, float]
    cold_read_method: str | None  # "O_DIRECT" | "fadvise" | None (no disk figure)
    disk_path: str | None
    disk_device: str | None  # MAJ:MIN of the disk holding disk_path, None if on no block device
    probe_file_bytes: int
    first_touch_bytes_per_s: float
    memcpy_bytes_per_s: float
    single_core_ops_per_s: float  # Python loop steps/s on one thread (bench.machine.bandwidth)
    # the host and the limits in force on the probing process, read from the kernel
    cpu_count: int
    affinity_cpus: int
    effective_cpus: int
    cpu_quota_cpus: float | None
    ram_bytes: int
    memory_max_bytes: int | None
    io_read_bytes_per_s: dict[str, int]
    # the accelerator jax sees ("none" on a CPU-only host)
    accelerator: str
    device_kind: str
    device_count: int
    device_memory_bytes: int | None
    h2d_pageable_bytes_per_s: float | None
    h2d_pinned_bytes_per_s: float | None
    # the limits asked for (--cpus, --host-ram, --disk-read-speed), as applied and read back
    cpus: int | None = None
    cpu_limit: str | None = None
    cpu_limit_enforced: bool | None = None
    host_ram_bytes: int | None = None
    memory_limit: str | None = None
    memory_limit_enforced: bool | None = None
    disk_read_limit_bytes_per_s: int | None = None
    disk_read_limit: str | None = None
    disk_read_limit_enforced: bool | None = None
    # size in bytes (a string key) -> first-touch bytes/s of one mapping that large; absent in
    # probes made before it was measured (read as the probe file's figure alone)
    first_touch: dict[str, float] = field(default_factory=dict)
    cold_read_pass_bytes: int | None = None  # the bytes one cold pass read (a slow disk: a prefix)
    # CPU-seconds (user + system, every thread) per byte of a warm copy at its best thread count;
    # absent in probes made before it was measured
    warm_copy_cpu_s_per_byte: float | None = None
    # how the copy passes faulted fresh pages in: "populate" (MADV_POPULATE_WRITE) | "touch" (one
    # byte written per page, where the kernel refuses populating); None: older probes
    prefault: str | None = None
    # the page cache read into reused, already-touched buffers (8 MiB per thread), by thread
    # count, and the best of it: a staged load's read limit (no fresh memory); None: older probes
    warm_read_reused: dict[str, float] = field(default_factory=dict)
    warm_read_reused_bytes_per_s: float | None = None
    warm_read_reused_threads: int | None = None
    # host -> device (bench/machine/accelerator.py), where jax sees an accelerator: bytes/s by
    # puts in flight ("1", "4", or "list": the pieces as one list) -> piece bytes (a string key),
    # the best of them with its piece size and in-flight mode, and the pinned_host route: numpy
    # -> pinned_host (`h2d_pinned_fill_bytes_per_s`), how pinned_host -> device was done
    # (`h2d_pinned_route`), or why it could not be (`h2d_pinned_reason`)
    h2d: dict[str, dict[str, float]] = field(default_factory=dict)
    h2d_best_bytes_per_s: float | None = None
    h2d_best_piece_bytes: int | None = None
    h2d_best_in_flight: str | None = None
    h2d_pinned_fill_bytes_per_s: float | None = None
    h2d_pinned_route: str | None = None
    h2d_pinned_reason: str | None = None
    # the compiler's first use in the probe's process, where jax sees an accelerator: seconds to
    # compile one tiny program and the host bytes the process grew by (a load that compiles
    # device programs pays it once, in its host peak); absent in older probes
    first_compile_s: float | None = None
    first_compile_host_bytes: int | None = None
    notes: list[str] = field(default_factory=list)
    probe_version: int = PROBE_VERSION

    def to_json(self) -> str:
        """The record as one JSON object."""
        return json.dumps(dataclasses.asdict(self), indent=1, sort_keys=True)

    def bandwidth(self, situation: str) -> float | None:
        """The best bytes/s for "warm" (copy from the page cache) or "cold" (the disk)."""
        return self.warm_copy_bytes_per_s if situation == "warm" else self.cold_read_bytes_per_s


_TYPES = {
    "int": (int,),
    "float": (int, float),
    "str": (str,),
    "bool": (bool,),
    "dict": (dict,),
    "list": (list,),
}


def _check(name: str, hint: str, value: object, source: str) -> None:
    if value is None and "None" in hint:
        return
    base = hint.split("[")[0].split(" |")[0]
    types = _TYPES.get(base, (object,))
    if not isinstance(value, types) or (base in ("int", "float") and isinstance(value, bool)):
        raise ProbeFileError(f"{source}: field {name!r} is {value!r}; expected {hint}")


def from_dict(data: dict, source: str) -> ProbeRecord:
    """A `ProbeRecord` from its JSON object, version and fields checked."""
    version = data.get("probe_version")
    if not isinstance(version, int) or version > PROBE_VERSION:
        raise ProbeFileError(
            f"{source} is a probe file of probe_version {version!r}; this loadbench reads "
            f"probe_version {PROBE_VERSION} and older: upgrade loadbench, or probe again with it"
        )
    kwargs = {}
    for f in dataclasses.fields(ProbeRecord):
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        if f.name not in data:
            if required:
                raise ProbeFileError(f"{source}: no field {f.name!r} (is it a probe file?)")
            continue
        _check(f.name, str(f.type), data[f.name], source)
        kwargs[f.name] = data[f.name]
    return ProbeRecord(**kwargs)


def parse_probe(text: str | bytes, source: str) -> ProbeRecord:
    """The probe record in `text` (a probe file's contents; `source` names it in errors, e.g. an
    uploaded file's name); a one-line `ProbeFileError` if it is not one this loadbench reads."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ProbeFileError(f"{source} is not a probe file (not JSON: {exc})") from None
    except UnicodeDecodeError as exc:
        raise ProbeFileError(f"{source} is not a probe file (not UTF-8 text: {exc})") from None
    if not isinstance(data, dict):
        raise ProbeFileError(f"{source} is not a probe file (not one JSON object)")
    return from_dict(data, source)


def read_probe(path: str | os.PathLike) -> ProbeRecord:
    """The probe record at `path`; a one-line `ProbeFileError` if it cannot be read."""
    try:
        text = Path(path).read_bytes()
    except OSError as exc:
        raise ProbeFileError(f"cannot read the probe file {path}: {exc.strerror or exc}") from None
    return parse_probe(text, str(path))


def write_probe(record: ProbeRecord, path: str | os.PathLike) -> None:
    """Write `record` at `path` whole (a temporary file beside it, renamed), or leave nothing."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(record.to_json() + "\n", encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise BenchError(f"cannot write the probe file {path}: {exc.strerror or exc}") from None
