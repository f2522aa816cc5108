"""Results schema v2: the records a bench run writes, one JSON object per line (bench/SCHEMA.md).

Three record types, each a frozen dataclass with units in its field names:
`RunRecord` (once per run: machine facts), `PhaseRecord` (one per (child result, phase), long
format; a failed child has one `total` row with its status) and `SampleRecord` (the RSS timeline).
Every line also carries `"schema_version"` and `"record"`. Phase names, statuses and strategy
kinds are `loader.vocabulary`'s. v2 added `PhaseRecord.kind`; `upgrade` reads v1 lines. Fields
added since (each with a default, so an older file reads with it unknown) are marked where they
are declared. Never import jax here.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any, ClassVar

from bench.vocabulary import CACHE_STATES, WARM
from loader.options import TABLE, LoadOptions
from loader.vocabulary import REFERENCE, STRATEGY

SCHEMA_VERSION = 2
READABLE_VERSIONS = (1, 2)  # v1 lines are upgraded on reading (`upgrade`)
#: v1 predates strategy kinds; its one reference strategy was `floor`, and it had no peers.
V1_REFERENCE_STRATEGY = "floor"
CACHES = CACHE_STATES  # was the checkpoint in the page cache when the child started


@dataclass(frozen=True)
class RunRecord:
    """One bench run: who ran it, where, with which versions and allocator settings, what it was
    asked to run under which limits, and how it ended.

    A run writes this record twice: at its start with `status` "running", and at its end with
    its final status. The reader keeps the last; a "running" one whose writer is gone reads as
    "interrupted" (a killed run).
    """

    RECORD: ClassVar[str] = "run"
    run_id: str
    machine: str
    started_utc: str
    cpu_model: str
    cpu_count: int
    ram_bytes: int
    kernel: str
    python: str
    jax_version: str | None
    flax_version: str | None
    safetensors_version: str | None
    numpy_version: str | None
    loadbench_version: str | None
    allocator_env: dict[str, str] = field(default_factory=dict)
    command: list[str] = field(default_factory=list)
    # -- how the run ended and what it was asked to be (absent from older files: defaults) --
    status: str = "complete"  # complete | interrupted | failed (bench.vocabulary.RUN_STATUSES)
    finished_utc: str | None = None  # when the end record was written
    cache: str | None = None  # as asked: warm | cold | both
    host_ram_bytes: int | None = None  # `--host-ram`: every child ran under this memory limit
    cpu_limit: float | None = None  # CPUs the children could use (`--cpus`, or the run's own
    # affinity or quota), where fewer than cpu_count (older files: null under `--cpus`)
    disk_read_bytes_per_s: int | None = None  # `--disk-read-speed`: cold reads capped at this
    check: bool = False  # made by `recommend --check` (written under <results>/checks/)
    strategies: list[str] = field(default_factory=list)  # the strategies asked for (resolved)
    repeats: int | None = None  # the repeats asked for (the minimum of each configuration)
    max_repeats: int | None = None  # `--max-repeats`: the cap of adaptive repeats (None: older)
    repeat_budget_s: float | None = None  # `--repeat-budget`: wall seconds per configuration
    # -- what code ran (added to v2 with a default: None in older files) --
    git_commit: str | None = None  # loadbench's `git describe --always --dirty`, if a checkout
    # -- the rest of what the children ran under (added to v2 with defaults: None in older files) --
    budget_bytes: int | None = None  # `--budget`: a load option's column (`loader.options.TABLE`)
    devices: int | None = None  # `--devices`: devices each child loaded onto


@dataclass(frozen=True)
class PhaseRecord:
    """One phase of one child result (`phase == "total"` spans the whole load).

    `process_index` is -1 for the summed row of a multi-process run; `peak_rss_bytes` and
    `wall_s` are whole-run values repeated on each of the result's rows.
    """

    RECORD: ClassVar[str] = "phase"
    run_id: str
    result_id: str
    shapes: str
    strategy: str
    kind: str  # loader.vocabulary.KINDS: strategy | reference | peer
    dtype: str
    devices: int
    processes: int
    process_index: int
    repeat: int
    status: str
    error: str | None
    checkpoint_bytes: int
    largest_tensor_bytes: int
    tensors: int
    baseline_rss_bytes: int | None
    peak_rss_bytes: int | None
    wall_s: float | None
    phase: str
    phase_order: int
    phase_wall_s: float | None
    phase_peak_rss_bytes: int | None
    phase_end_rss_bytes: int | None
    phase_anon_rss_bytes: int | None
    phase_file_rss_bytes: int | None
    peak_source: str | None
    substeps_s: dict[str, float] = field(default_factory=dict)
    memray_html: str | None = None
    memray_top: str | None = None
    model_dtype: str | None = None  # the dtype the model was built in (None: the checkpoint's)
    budget_bytes: int | None = None  # `bench run --budget`: the strategy's bound on bytes in flight
    inflight_peak_bytes: int | None = None  # the strategy's own high-water mark of those bytes
    phase_overlaps: list[str] = field(default_factory=list)  # phases that ran at the same time
    phase_start_s: float | None = None  # phase first entered, s from the baseline (None: older)
    phase_end_s: float | None = None  # phase last left, s from the baseline
    # -- the situation the load ran in (absent from older files: read as defaults) --
    cache: str = WARM  # CACHES: "cold" when the checkpoint was evicted from the page cache first
    resident_fraction: float | None = None  # of the checkpoint's pages, just before the child ran
    pagecache_growth_bytes: int | None = None  # the checkpoint's bytes the load left cached
    threads: int | None = None  # `--threads`: reader threads asked of the strategy (None: its own)
    cache_policy: str | None = None  # `--cache-policy` asked of the strategy (None: its default)
    share: str | None = None  # `--share` asked of `sharded` (None: its default, "auto")
    host_ram_bytes: int | None = None  # `--host-ram`: the memory limit the child ran under
    memory_limit: str | None = None  # how: cgroup-v2 | cgroup-v1 | systemd-run | watchdog
    memory_limit_enforced: bool | None = None  # the limit read back from the cgroup as asked
    cgroup_peak_bytes: int | None = None  # the cgroup's own peak (page cache included)
    disk_read_bytes_per_s: int | None = None  # `--disk-read-speed`: reads from disk capped at this
    # -- a remote load (`bench run --source http|s3|hf [--link BANDWIDTH]`) --
    source: str = "file"  # SOURCES: file (local disk), http, s3, hf
    link: str | None = None  # the shaped link ("1Gbit"); "unshaped" over loopback; None: local
    concurrency: int | None = None  # range requests in flight (the load's own default if not asked)
    requests: int | None = None  # range requests sent (headers included)
    bytes_requested: int | None = None
    bytes_received: int | None = None
    header_bytes: int | None = None  # of bytes_received, what the header requests got
    share_bytes: int | None = None  # a `sharded` process's share: its distinct index ranges
    # a `sharded` load's read plan (loader/sharded/read_plan.py; None without one): the requests
    # it planned, the bytes they read (gaps read through included), the bytes of the share among
    # them, and planned_bytes / needed_bytes (at most the load's max_over_read)
    planned_requests: int | None = None
    planned_bytes: int | None = None
    needed_bytes: int | None = None
    over_read: float | None = None
    # a `sharded` load's share (loader/sharded/share.py; None for other strategies): "regions" or
    # "bytes" (as asked, or as `auto` chose), and the bytes of the process's index ranges it did
    # not read but received from the other processes over the interconnect (0 by regions)
    share_mode: str | None = None
    exchanged_bytes: int | None = None
    disk_read_limit: str | None = None  # how: cgroup-v2 | cgroup-v1 | none (could not be set)
    disk_read_limit_enforced: bool | None = None  # the cap read back from the cgroup as asked
    cpus: int | None = None  # `--cpus`: the CPU limit the child ran under
    cpu_limit: str | None = None  # how: cgroup-v2 (cpu.max) | cgroup-v1 (CFS quota) | cpuset | none
    cpu_limit_enforced: bool | None = None  # the limit read back from the cgroup as asked
    # -- the machine's ceiling (bench/run/ceiling.py): the probe's best bandwidth for the situation
    ceiling_s: float | None = None  # checkpoint_bytes / that bandwidth
    ceiling_ratio: float | None = None  # wall_s / ceiling_s
    ceiling_probe_id: str | None = None  # the probe record it came from
    ceiling_bytes: int | None = None  # over a shaped link: the bytes ceiling_s is of (what the
    # run needs across the link: its processes' shares plus headers; None: checkpoint_bytes)
    # -- the machine's speed at this child's moment (bench/run/reference.py): a bare copy pass
    # right before and right after the child, the checkpoint's bytes at their mean speed; over a
    # shaped link, the link's ceiling. Verdicts judge wall_s / reference_s, not wall_s alone.
    reference_s: float | None = None
    reference_drift: float | None = None  # the pass after / the pass before - 1
    paired_ratio: float | None = None  # wall_s / reference_s
    reference_cpu_s: float | None = None  # the passes' CPU seconds per byte x the checkpoint
    cpu_ratio: float | None = None  # cpu_s / reference_cpu_s: the load's CPU work over a copy's
    others_cpu_fraction: float | None = None  # of every CPU's time while the child ran, the
    # share other processes were busy (a machine shared with another job)
    reference_passes: dict[str, float] = field(default_factory=dict)  # the raw passes: seconds
    # and CPU seconds with one thread and with all, before and after (bench/run/reference.py)
    received_bytes_per_s: float | None = None  # a remote load: bytes_received / wall_s (summed
    # row: every process's bytes over the slowest wall, the aggregate throughput)
    cpu_s: float | None = None  # the process's CPU time over the whole load (every thread)
    phase_cpu_s: float | None = None  # ... while this phase was open
    # the C ceiling's CPU time for the checkpoint's bytes: the probe's warm copy (threads reading
    # the page cache into fresh memory) at its CPU-seconds per byte (None: an older probe)
    ceiling_cpu_s: float | None = None
    # the highest anonymous and file-backed RSS read in the phase (the sampler's and the phase
    # edges' readings: the kernel keeps no mark of either); not at one instant, nor summing to
    # the peak (None: older files)
    phase_peak_anon_rss_bytes: int | None = None
    phase_peak_file_rss_bytes: int | None = None
    phase_device_bytes_in_use: int | None = None  # jax memory_stats at the phase end; None on CPU
    phase_device_peak_bytes: int | None = None  # the device allocator's peak up to the phase end
    # -- the model loaded, and its forward compiled (`--model`, `--compile`) --
    model: str = "spec"  # spec (mirrors the file) | port (real architecture) | transposed
    load_s: float | None = None  # `--compile`: wall time until the load returned
    ready_s: float | None = None  # `--compile`: wall time until loaded and forward compiled
    compile_cache: str | None = None  # `--compile-cache`: "hit" | "miss" (None: no cache)
    compile_start_rss_bytes: int | None = None  # `--compile`: RSS as the compile began
    # -- per device (str(device) keys; empty where the backend reports nothing) --
    phase_device_bytes_in_use_by_device: dict[str, int] = field(default_factory=dict)
    phase_device_peak_bytes_by_device: dict[str, int] = field(default_factory=dict)
    device_peak_bytes: int | None = None  # whole run: the highest device's allocator peak
    device_received_bytes: dict[str, int] = field(default_factory=dict)  # via jax.device_put
    device_expected_bytes: dict[str, int] = field(default_factory=dict)  # its shards of the model
    device_resent_bytes: dict[str, int] = field(default_factory=dict)  # of those, sent twice
    device_overreceived: list[str] = field(default_factory=list)  # received > expected: a copy
    staging_memory: str | None = (
        None  # pipelined staged: "mapped" | "pageable" (older: "pinned_host")
    )
    device_programs: int | None = None  # pipelined staged: device programs the load compiled
    oom_kind: str | None = None  # status "oom": "device" (a device ran out), else the host's
    # -- the C allocator (bench/machine/allocator.py) --
    small_tensor_bytes: int | None = None  # bytes of the tensors under glibc's 32 MiB threshold
    heap_retained_bytes: int | None = None  # free bytes the load left in glibc's heaps
    # -- the jax backend the child loaded on (bench.vocabulary: cpu | gpu | tpu; None: older files
    # or a child that failed before it started jax) --
    backend: str | None = None
    # -- how the reference passes faulted fresh pages in (bench/run/reference.py): "populate"
    # (MADV_POPULATE_WRITE) | "touch" (one byte per page, where the kernel refuses populating) --
    reference_prefault: str | None = None
    # -- what the reference passes read into (bench/run/reference.py): "fresh" (fresh private
    # memory, as a load into host RAM does) | "reused" (reused, already-touched buffers: rows
    # loaded onto an accelerator, whose bytes go from the page cache to the device) --
    reference_pass: str | None = None
    # -- the device ceiling (bench/run/ceiling.py), where the probe saw an accelerator and the row
    # loaded onto one: the larger of the read limit and the host -> device transfer limit for the
    # checkpoint's bytes, and wall_s over it --
    device_ceiling_s: float | None = None
    device_read_s: float | None = None  # the checkpoint at the probe's read speed (reused buffers)
    device_transfer_s: float | None = None  # ... at its best host -> device rate of any piece size
    device_ceiling_ratio: float | None = None  # wall_s / device_ceiling_s
    # the host bytes the probe's process grew by compiling its first program (bench/machine/
    # accelerator.py): a row whose load compiled device programs holds as much in its host peak
    first_compile_host_bytes: int | None = None
    # -- device memory against its limit and the model (bench/run/rows.py; None on CPU) --
    device_bytes_limit: int | None = None  # the device's memory (bytes_limit; the smallest device)
    device_headroom_bytes: int | None = None  # bytes_limit - the run's peak (the tightest device)
    device_model_bytes: int | None = None  # the model's bytes on a device (the largest share)
    device_over_model_bytes: int | None = (
        None  # the peak above the model's share (the worst device)
    )
    device_over_budget: bool | None = None  # that excess beyond the budget (+ 1% of the model)
    # -- what a load moved, and a quantized checkpoint's dequantized size (None: unknown) --
    device_bytes_moved: int | None = None  # bytes placed on the devices (device_received summed)
    dequantized_bytes: int | None = None  # the model dequantized to bfloat16 (shapes.quantized;
    # None where the file holds no quantized layout)


@dataclass(frozen=True)
class SampleRecord:
    """One point of a child's RSS timeline; `t_s` counts from its baseline."""

    RECORD: ClassVar[str] = "sample"
    run_id: str
    result_id: str
    process_index: int
    t_s: float
    phase: str
    rss_anon_bytes: int
    rss_file_bytes: int


RECORD_TYPES: dict[str, type] = {c.RECORD: c for c in (RunRecord, PhaseRecord, SampleRecord)}


def field_names(record_type: type) -> list[str]:
    """The stored fields of a record type, in schema order (without schema_version/record)."""
    return [f.name for f in dataclasses.fields(record_type)]


def option_columns(options: LoadOptions, record_type: type) -> dict[str, Any]:
    """The columns of `record_type` that record load options (`loader.options.TABLE`'s `column`),
    each the option's value as given (None: not given).

    Example:
        >>> option_columns(LoadOptions.of(budget=1 << 20), RunRecord)
        {'budget_bytes': 1048576}
    """
    given, names = options.given(), set(field_names(record_type))
    return {o.column: given.get(o.name) for o in TABLE if o.column in names}


#: The lines around SCHEMA.md's load-option section (`option_section`; a test holds them equal).
OPTION_SECTION_START = "<!-- load options: made by bench.records.schema.option_section -->"
OPTION_SECTION_END = "<!-- end of load options -->"


def option_section() -> str:
    """SCHEMA.md's section on the load options' columns, made from `loader.options.TABLE`:
    one table row per option a results column records (tests/unit/test_option_table.py checks
    that SCHEMA.md holds it as made here).

    Example:
        >>> print(option_section().splitlines()[2])
        | column | option | `bench run` flag | type | unit | what (null: not asked) |
    """
    lines = [
        OPTION_SECTION_START,
        "",
        "| column | option | `bench run` flag | type | unit | what (null: not asked) |",
        "|---|---|---|---|---|---|",
    ]
    for o in (o for o in TABLE if o.column):
        choices = f" ({' / '.join(o.choices)})" if o.choices else ""
        lines.append(
            f"| {o.column} | `{o.name}=` | `{o.flag or '-'}` | {o.type}{choices} | "
            f"{o.unit or '-'} | {o.help} |"
        )
    return "\n".join([*lines, "", OPTION_SECTION_END])


def to_dict(record: RunRecord | PhaseRecord | SampleRecord) -> dict[str, Any]:
    """The JSON object of one record: `schema_version`, `record`, then the fields."""
    return {"schema_version": SCHEMA_VERSION, "record": record.RECORD, **dataclasses.asdict(record)}


def to_json_line(record: RunRecord | PhaseRecord | SampleRecord) -> str:
    """One line of a results file (no newline), strict JSON (NaN refused)."""
    return json.dumps(to_dict(record), allow_nan=False, separators=(",", ":"))


def upgrade(obj: dict[str, Any]) -> dict[str, Any]:
    """A record of a readable older version as the current version's fields (v1: adds `kind`)."""
    if obj.get("schema_version") == 1 and obj.get("record") == PhaseRecord.RECORD:
        is_reference = obj.get("strategy") == V1_REFERENCE_STRATEGY
        obj = {**obj, "kind": REFERENCE if is_reference else STRATEGY}
    return {**obj, "schema_version": SCHEMA_VERSION}
