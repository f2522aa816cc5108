"""The two records that cross the parent/child process boundary, typed and versioned.

The runner writes a `ChildTask` for each child (`python -m bench.child.worker --task T --out R`);
the child writes one `ChildResult` back: its status, its backend, what the probe measured
(`Measurement`, with one `PhaseMeasure` per phase and the RSS timeline) and what verification
found. Both are frozen dataclasses, stored as JSON stamped with `CHILD_RESULT_VERSION`, and read
back with `from_json`, which checks the version, every field's presence and every value's type,
and raises `ChildResultError` naming the file and the field otherwise. The runner turns that
error into a "crashed" row; it never stops a run. Jax-free: both sides import this module.

Example:
    >>> text = to_json(ChildResult(status="crashed", error="boom"))
    >>> from_json(ChildResult, text, source="r.json").status
    'crashed'
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from dataclasses import dataclass, field
from typing import Any, TypeVar

from bench.errors import ChildResultError
from bench.vocabulary import CRASHED, ERROR, OK, OOM, WRONG

#: Bump when a field of these records changes; a child of another version gives a clear row.
CHILD_RESULT_VERSION = 9  # 2: overlaps, budget; 3: device memory, user checkpoints; 4: compile;
# 5: the highest anonymous and file-backed RSS of each phase; 6: `sharded`'s share mode; 7: anon /
# file None where the host cannot tell, each device's memory limit and its share of the model;
# 8: the child's own steps (`ChildResult.steps_s`) in place of its verification time alone;
# 9: a task's load options as one `options` object (`loader.options.TABLE`'s names)
VERSION_KEY = "child_result_version"
CHILD_STATUSES = (OK, WRONG, CRASHED, OOM, ERROR)  # what a child says (oom: a device's)


@dataclass(frozen=True)
class ChildTask:
    """One measured load, as the runner asks a worker for it."""

    strategy: str
    shapes: str
    checkpoint: str  # what the strategy loads (a converted copy, or the synthetic checkpoint)
    source_checkpoint: str  # the synthetic checkpoint to verify against (its digests.json)
    dtype: str | None = None
    seed: int = 0
    memray_bin: str | None = None  # capture path; `{process_index}` is filled in by the child
    digests: str | None = (
        None  # a user's checkpoint: its cached digests (`bench.run.user_checkpoint`)
    )
    checkpoint_folder: str | None = None  # a user's checkpoint: the folder its files are in
    model_dtype: str | None = None  # build the model in this dtype (None: as `dtype`)
    model: str = "spec"  # bench.vocabulary.MODELS, or a user's MODULE:NAME: what is loaded into
    key_map: str | None = None  # a user's model's key map, MODULE:NAME (`bench.user_model`)
    compile: bool = False  # lower and compile the port's forward (phase `compile`)
    compile_cache: str | None = None  # JAX's persistent compilation cache folder
    # the load options given, by `loader.options.TABLE` name (only those the strategy takes:
    # `bench.run.matrix`), each checked by its row when the child makes its `LoadOptions`
    options: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class PhaseMeasure:
    """Wall time and RSS of one phase (or of the whole load: name `total`)."""

    name: str
    order: int
    wall_s: float
    peak_rss_bytes: int
    end_rss_bytes: int
    anon_rss_bytes: int | None  # None: the host cannot tell (no RssAnon / RssFile in its status)
    file_rss_bytes: int | None
    substeps_s: dict[str, float] = field(default_factory=dict)
    device_bytes_in_use: int | None = None  # jax memory_stats at the phase end; None on CPU
    device_peak_bytes_in_use: int | None = None
    device_bytes_in_use_by_device: dict[str, int] = field(default_factory=dict)
    device_peak_bytes_by_device: dict[str, int] = field(default_factory=dict)
    overlaps: tuple[
        str, ...
    ] = ()  # phases that ran at the same time (walls and peaks not disjoint)
    cpu_s: float | None = None  # the process's CPU time (all threads, user + system) in it
    start_s: float | None = None  # first entered, seconds from the baseline (None: `total`, older)
    end_s: float | None = None  # last left, seconds from the baseline
    peak_anon_rss_bytes: int | None = 0  # the highest anonymous RSS read in the phase (sampled;
    # None where the host cannot tell anonymous from file-backed)
    peak_file_rss_bytes: int | None = 0  # the highest file-backed RSS read in the phase (sampled)


@dataclass(frozen=True)
class Sample:
    """One point of the RSS timeline; `t_s` counts from the baseline."""

    t_s: float
    phase: str
    rss_anon_bytes: int
    rss_file_bytes: int


@dataclass(frozen=True)
class Measurement:
    """What the probe measured of one load: the baseline, `total`, each phase, the timeline."""

    baseline_rss_bytes: int
    peak_source: str  # "hwm" | "sampled"
    total: PhaseMeasure
    phases: tuple[PhaseMeasure, ...]
    samples: tuple[Sample, ...] = ()
    inflight_peak_bytes: int | None = None  # the strategy's own high-water mark (LoadReport)
    load_s: float | None = None  # with a compile: until the load returned
    ready_s: float | None = None  # with a compile: until loaded and compiled
    compile_cache: str | None = None  # "hit" | "miss" with a persistent cache
    compile_start_rss_bytes: int | None = None  # RSS as the compile began
    staging_memory: str | None = None  # a staged load's host staging memory (LoadReport)
    device_programs: int | None = None  # programs a staged load compiled (LoadReport)
    device_received_bytes: dict[str, int] = field(default_factory=dict)  # bench.child.traffic
    device_expected_bytes: dict[str, int] = field(default_factory=dict)
    device_resent_bytes: dict[str, int] = field(default_factory=dict)  # LoadReport's, by design
    budget_bytes: int | None = None  # the budget in effect (the strategy's default if none given)
    heap_retained_bytes: int | None = None  # free bytes left in glibc's heaps (host.allocator)
    remote: dict[str, int] | None = None  # a remote load's requests and bytes (LoadReport.remote)
    share_mode: str | None = None  # a `sharded` load: "regions" | "bytes" (LoadReport.share)
    exchanged_bytes: int | None = None  # ... and the bytes it received from other processes
    # per device (str(device)): its memory limit (memory_stats' bytes_limit) and the bytes of its
    # shards of the loaded model; empty where the backend reports no device memory (CPU)
    device_bytes_limit_by_device: dict[str, int] = field(default_factory=dict)
    device_model_bytes_by_device: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Backend:
    """The jax processes and devices the child ran on."""

    process_index: int = 0
    processes: int = 1
    devices: int = 1
    local_devices: int = 1
    platform: str = "cpu"  # jax.default_backend(): cpu | gpu | tpu (bench.vocabulary)


@dataclass(frozen=True)
class MemrayFiles:
    """The reports of a memray capture, or why they could not be written."""

    html: str | None = None
    top: str | None = None
    error: str | None = None


@dataclass(frozen=True)
class ChildResult:
    """How one child ended. `measurement` is None when it failed before or during the load."""

    status: str  # one of CHILD_STATUSES
    error: str | None = None
    backend: Backend | None = None
    measurement: Measurement | None = None
    tensors_verified: int = 0
    # seconds of the child's steps, in order (`bench.child.worker._StepClock`): where a child's
    # time went beyond the load itself (on a TPU host, opening the chip outlasts the load)
    steps_s: dict[str, float] = field(default_factory=dict)
    memray: MemrayFiles | None = None
    oom_kind: str | None = None  # status "oom" said by the child itself: "device"

    def __post_init__(self) -> None:
        if self.status not in CHILD_STATUSES:
            raise ChildResultError(
                f"status {self.status!r} is not one of {', '.join(CHILD_STATUSES)}"
            )


Record = TypeVar("Record", ChildTask, ChildResult)


def to_json(record: ChildTask | ChildResult) -> str:
    """The record as one JSON object, stamped with `CHILD_RESULT_VERSION`."""
    return json.dumps({VERSION_KEY: CHILD_RESULT_VERSION, **dataclasses.asdict(record)})


def from_json(record_type: type[Record], text: str, *, source: str) -> Record:
    """Read a record written by `to_json`, checking its version, fields and value types.

    Args:
        record_type: `ChildTask` or `ChildResult`.
        text: the JSON text.
        source: the file it came from, for the error message.

    Raises:
        ChildResultError: not JSON, another version, a missing or unknown field, a wrong type.
    """
    try:
        obj = json.loads(text)
    except ValueError as exc:
        raise ChildResultError(f"{source}: not JSON ({exc})") from None
    version = obj.pop(VERSION_KEY, None) if isinstance(obj, dict) else None
    if version != CHILD_RESULT_VERSION:
        raise ChildResultError(
            f"{source}: {record_type.__name__} version {version!r}, this bench reads version "
            f"{CHILD_RESULT_VERSION}; the child ran other loadbench code than the runner "
            "(check PYTHONPATH and the installed loadbench)"
        )
    return _decode(record_type, obj, f"{source}: {record_type.__name__}")


def _decode(tp: Any, value: Any, where: str) -> Any:
    """`value` (parsed JSON) as type `tp`: a dataclass, `X | None`, tuple, dict, a scalar, or
    `Any` (as it is: a load option, which its `loader.options` row checks where it is used)."""
    if tp is Any:
        return value
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return _decode_dataclass(tp, value, where)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        (inner,) = [a for a in args if a is not type(None)]
        return _decode(inner, value, where)
    if origin is tuple and isinstance(value, list):
        return tuple(_decode(args[0], v, f"{where}[{i}]") for i, v in enumerate(value))
    if origin is dict and isinstance(value, dict):
        return {str(k): _decode(args[1], v, f"{where}[{k!r}]") for k, v in value.items()}
    if tp is float and isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if tp in (int, str, bool) and type(value) is tp:
        return value
    raise ChildResultError(f"{where}: expected {_name(tp)}, found {type(value).__name__}")


def _decode_dataclass(tp: type, value: Any, where: str) -> Any:
    if not isinstance(value, dict):
        raise ChildResultError(f"{where}: expected an object, found {type(value).__name__}")
    fields = {f.name: f for f in dataclasses.fields(tp)}
    unknown = sorted(set(value) - set(fields))
    required = [
        n
        for n, f in fields.items()
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    ]
    missing = [n for n in required if n not in value]
    if unknown or missing:
        parts = [f"missing field(s) {missing}"] * bool(missing) + [
            f"unknown field(s) {unknown}"
        ] * bool(unknown)
        raise ChildResultError(f"{where}: {' and '.join(parts)}; expected {sorted(fields)}")
    hints = typing.get_type_hints(tp)
    kwargs = {k: _decode(hints[k], v, f"{where}.{k}") for k, v in value.items()}
    try:
        return tp(**kwargs)
    except ChildResultError as exc:  # a value the record itself refuses (a status)
        raise ChildResultError(f"{where}: {exc}") from None


def _name(tp: Any) -> str:
    return getattr(tp, "__name__", None) or str(tp)
