"""What a bench run will do: the checkpoint of each shape set and the interleaved task list.

Checkpoints are synthesised once per (shapes, dtype, seed) by a `bench.child.prepare synth` child
and cached with a `bench.json` summary. The task list runs every memray capture first (one per
strategy, so measured rows can link to it), then the repeats interleaved: A B C A B C, so drift
hits every strategy alike. In the default matrix a strategy predicted not to fit the memory budget
(its peak predicted by `bench.analysis.recommend` from earlier results here, else
`DEFAULT_PEAK_RATIO` x the checkpoint) is skipped, as is, in a remote run, a strategy that reads
local files only, and, for each `--processes` count above 1, a one-process strategy whose library
has a multi-process mode the bench cannot run (`WHY_NOT_MULTIPROCESS`): each a row saying why.
How each task's children are started is `bench.run.launch`.

Each task carries only the load options asked (their flags: `loader.options.TABLE`) that its
strategy declares (`OPTIONS`): a strategy that takes none runs, and is recorded, without them
(`untaken_options` says so once, before the run), never with an option it ignores.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import dataclass, replace
from pathlib import Path

from bench.analysis.recommend import TargetCheckpoint, recommend
from bench.errors import BenchError, NoResultsError
from bench.link import FILE_SOURCE, UNSHAPED
from bench.machine.allocator import small_tensor_bytes
from bench.records.results import read_results
from bench.run.config import DEFAULT_PROCESSES, RunConfig
from bench.units import format_bytes
from bench.user_model import is_named
from bench.vocabulary import BOTH, CACHE_STATES, NATIVE, PORTS, WARM
from loader.options import COUNTS, NO_OPTIONS, OPTIONS_BY_NAME, TABLE, LoadOptions
from loader.strategies import StrategyInfo
from loader.vocabulary import PEER, URL
from shapes import is_synthesized, load_spec
from shapes.content import stored_dtypes, stored_sizes
from shapes.quantized import dequantized_bytes

DEFAULT_PEAK_RATIO = 3.5  # the naive path measures ~3.2x; unknown strategies are assumed as bad
BASELINE_GUESS_BYTES = 1 << 30


@dataclass(frozen=True)
class Checkpoint:
    """A synthetic checkpoint ready to load, and the size facts every row repeats."""

    shapes: str
    dtype: str | None
    seed: int
    path: str
    checkpoint_bytes: int
    largest_tensor_bytes: int
    tensors: int
    digests: str | None = None  # a user's checkpoint: the cached digests to verify against
    work_root: str | None = None  # a user's checkpoint: where converted copies go (never beside it)
    small_tensor_bytes: int | None = None  # under glibc's mmap threshold (bench.machine.allocator)
    # the model's bytes once every quantized weight is dequantized to bfloat16 (None: the file
    # holds no quantized layout; shapes.quantized.dequantized_bytes)
    dequantized_bytes: int | None = None

    @property
    def folder(self) -> Path:
        """Where converted copies of this checkpoint are kept."""
        if self.work_root is not None:
            return Path(self.work_root)
        path = Path(self.path)
        return path.parent if path.is_file() else path

    @property
    def files_folder(self) -> Path:
        """The folder the checkpoint's own files are in."""
        path = Path(self.path)
        return path.parent if path.is_file() else path

    @classmethod
    def from_user(cls, path: str, cache: Path) -> Checkpoint:
        """A user's checkpoint (`--checkpoint`): headers read, digests computed once and cached."""
        from bench.run.user_checkpoint import digests, open_checkpoint

        user = open_checkpoint(path)
        return cls(
            user.label,
            None,
            0,
            str(user.load_path),
            user.checkpoint_bytes,
            user.largest_tensor_bytes,
            user.tensors,
            str(digests(user, cache)),
            str(cache / "checkpoints" / f"user-{user.key}"),
            user.small_tensor_bytes,
        )

    @classmethod
    def ensure(cls, shapes: str, dtype: str | None, seed: int, cache: Path, timeout_s: float):
        """The cached checkpoint of a shape set, synthesised in a child if missing."""
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", shapes)
        folder = cache / "checkpoints" / f"{safe}-{dtype or NATIVE}-{seed}"
        marker = folder / "bench.json"
        if not (marker.is_file() and is_synthesized(shapes, folder, dtype=dtype, seed=seed)):
            argv = [sys.executable, "-m", "bench.child.prepare", "synth", "--shapes", shapes]
            argv += ["--dir", str(folder), "--seed", str(seed)] + (
                ["--dtype", dtype] if dtype else []
            )
            proc = subprocess.run(
                argv, capture_output=True, text=True, timeout=timeout_s, check=False
            )
            if proc.returncode != 0 or not marker.is_file():
                tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["(no output)"]
                raise BenchError(f"cannot synthesise shape set {shapes!r} into {folder}: {tail[0]}")
        s = json.loads(marker.read_text(encoding="utf-8"))
        small = s.get("small_tensor_bytes")  # absent from markers older than the field
        spec = load_spec(shapes)
        if small is None:
            small = small_tensor_bytes(stored_sizes(spec, dtype))
        return cls(
            shapes,
            dtype,
            seed,
            s["checkpoint"],
            s["checkpoint_bytes"],
            s["largest_tensor_bytes"],
            s["tensors"],
            small_tensor_bytes=small,
            dequantized_bytes=dequantized_bytes(spec, stored_dtypes(spec, dtype)),
        )


@dataclass(frozen=True)
class Task:
    """One child run (or group of cooperating children) of one strategy."""

    checkpoint: Checkpoint
    entry: StrategyInfo
    repeat: int
    processes: int
    devices: int  # in total, across processes
    memray_bin: Path | None = None
    path: str | None = None  # what the strategy loads (the converted copy, or the checkpoint)
    model_dtype: str | None = None  # the model's dtype, if not the checkpoint's
    options: LoadOptions = NO_OPTIONS  # the load options asked that the strategy takes
    cache: str = WARM  # "cold": the files are evicted from the page cache before it runs
    model: str = "spec"  # bench.vocabulary.MODELS, or a user's MODULE:NAME (`bench.user_model`)
    key_map: str | None = None  # a user's model's `--key-map MODULE:NAME`
    compile: bool = False  # also lower and compile the port's forward
    compile_cache: str | None = None  # JAX's persistent compilation cache folder
    source: str = "file"  # where the strategy reads from: file, http, s3, hf (`--source`)
    link: str | None = None  # the shaped link's text, "unshaped" over loopback, None: a file
    url: str | None = None  # what the child loads instead of `load_path` (`bench.link.serve`)

    @property
    def load_path(self) -> str:
        return self.path or self.checkpoint.path


def _layouts(entry: StrategyInfo, config: RunConfig) -> list[tuple[int, int]]:
    """(processes, total devices) of each configuration of a strategy under `config`: one per
    `--processes` count for a multi-process strategy (each process gets `--devices` / count
    devices, at least one), else one process with every device. Without `--processes`, a
    multi-process strategy runs as `DEFAULT_PROCESSES`, a multi-process peer (`orbax-safetensors`)
    as one, in the table of the other peers and the default."""
    if not entry.multiprocess:
        counts = [1]
    else:
        counts = config.processes or [1 if entry.kind == PEER else DEFAULT_PROCESSES]
    return [(procs, _devices(procs, config)) for procs in counts]


def _devices(procs: int, config: RunConfig) -> int:
    """The devices of a `procs`-process configuration, in total: `--devices` / `procs` each, at
    least one."""
    return max(1, config.devices // procs) * procs


def _predicted_peaks(out: Path, ck: Checkpoint, memory: int) -> dict[str, int]:
    """Each strategy's predicted peak on `ck` from earlier results in `out`
    (`bench.analysis.recommend`)."""
    target = TargetCheckpoint(
        ck.checkpoint_bytes, ck.largest_tensor_bytes, ck.tensors, ck.small_tensor_bytes
    )
    try:
        rec = recommend(read_results(out), target, memory)
    except NoResultsError:
        return {}
    return {s.strategy: s.predicted_peak_bytes for s in rec.strategies}


def _skip_reason(task: Task, known: dict[str, int], config: RunConfig, memory: int) -> str | None:
    """Why `task`'s strategy is not run here (not installed, predicted over the memory budget
    `memory`), or None."""
    entry = task.entry
    unavailable = entry.unavailable_reason()
    if unavailable is not None:
        return f"unavailable here: {unavailable}"
    if entry.models and task.model not in entry.models:
        return f"loads only --model {' or '.join(entry.models)}, not {task.model}"
    guess = (
        BASELINE_GUESS_BYTES * task.processes
        + DEFAULT_PEAK_RATIO * task.checkpoint.checkpoint_bytes
    )
    predicted = known.get(entry.name, guess)
    if config.strategies is None and predicted > memory:
        return (
            f"predicted peak {format_bytes(predicted)} exceeds the memory budget "
            f"{format_bytes(memory)}"
        )
    return None


def _interleaved(run: list[Task], config: RunConfig, run_folder: Path) -> list[Task]:
    """The memray captures first (one per strategy, if asked), then the repeats: A B C A B C."""
    tasks = []
    if config.memray:
        folder = run_folder / "memray"
        first = {t.entry.name: t for t in reversed(run)}  # one per strategy (its first model)
        tasks += [
            replace(t, memray_bin=folder / f"{t.entry.name}-{t.checkpoint.shapes}-r0.bin")
            for t in run
            if first[t.entry.name] is t
        ]
    caches = CACHE_STATES if config.cache == BOTH else (config.cache,)
    tasks += [
        replace(t, repeat=r, cache=c) for r in range(config.repeats) for t in run for c in caches
    ]
    return tasks


def untaken_options(config: RunConfig, entries: list[StrategyInfo]) -> list[str]:
    """One line per option asked for that some of `entries` do not take (they run without it).

    Example:
        >>> config = RunConfig(["gpt2"], options=LoadOptions.of(budget=1 << 20))
        >>> untaken_options(config, [pipelined, hostcast])
        ['--budget: taken by pipelined only; hostcast runs without it']
    """
    lines = []
    for option in [*config.options.given(), *config.swept]:
        without = [e.name for e in entries if option not in e.options]
        if without:
            takers = [e.name for e in entries if option in e.options]
            taken = f"taken by {', '.join(takers)} only" if takers else "taken by none of them"
            verb = "runs" if len(without) == 1 else "run"
            flag = OPTIONS_BY_NAME[option].flag
            lines.append(f"{flag}: {taken}; {', '.join(without)} {verb} without it")
    return lines


def plan(
    ck: Checkpoint, entries: list[StrategyInfo], config: RunConfig, run_folder: Path
) -> tuple[list[Task], list[tuple[Task, str]]]:
    """The interleaved tasks of one shape set, and (task, reason) for each skipped strategy."""
    memory = config.memory_budget()
    known = _predicted_peaks(Path(config.out), ck, memory) if config.strategies is None else {}
    run: list[Task] = []
    skipped: list[tuple[Task, str]] = []
    configurations = (
        (e, m, lay) for e in entries for m in config.models() for lay in _layouts(e, config)
    )
    for entry, model, (procs, devices) in configurations:
        task = _task(ck, entry, model, procs, devices, config)
        reason = _skip_reason(task, known, config, memory)
        if reason is None and config.source != FILE_SOURCE:
            reason = entry.why_not_url(f"--source {config.source}")  # as `load_model` refuses
        elif reason is None and config.source == FILE_SOURCE and entry.checkpoint == URL:
            reason = "loads a URL only: run with --source http, s3 or hf"
        # a remote run's skipped rows are its configurations' too: one per concurrency, so each
        # block of the summary lists what it skipped and why
        per = _per_swept(task, config)
        if reason is None:
            run += per
        else:
            skipped += [(t, reason) for t in per]
    return _interleaved(run, config, run_folder), skipped + _one_process_only(ck, entries, config)


def _task(
    ck: Checkpoint, entry: StrategyInfo, model: str, procs: int, devices: int, config: RunConfig
) -> Task:
    """The first repeat of one configuration, with only the options `entry` takes."""
    return Task(
        ck,
        entry,
        repeat=0,
        processes=procs,
        devices=devices,
        model_dtype=config.model_dtype,
        options=config.options.only(entry.options),  # the others it runs without
        model=model,
        key_map=config.key_map if is_named(model) else None,
        compile=config.compile and model in PORTS,
        compile_cache=config.compile_cache,
    )


def _one_process_only(
    ck: Checkpoint, entries: list[StrategyInfo], config: RunConfig
) -> list[tuple[Task, str]]:
    """A skipped row for each `--processes` count above 1 of a one-process strategy whose library
    has a multi-process mode the bench cannot run (`WHY_NOT_MULTIPROCESS`), saying why: the
    strategy still runs as one process, and the multi-process table shows what is missing."""
    counts = [n for n in config.processes or [] if n > 1]
    skipped = []
    local = config.source == FILE_SOURCE
    runs_here = [e for e in entries if (e.checkpoint != URL if local else e.remote)]
    for entry in (e for e in runs_here if e.why_not_multiprocess and not e.multiprocess):
        for model, procs in ((m, n) for m in config.models() for n in counts):
            task = _task(ck, entry, model, procs, _devices(procs, config), config)
            skipped += [(t, entry.why_not_multiprocess) for t in _per_swept(task, config)]
    return skipped


def _per_swept(task: Task, config: RunConfig) -> list[Task]:
    """`task` once per value of each swept option (`COUNTS` in `loader.options.TABLE`:
    `--remote-concurrency 1,4,16`), each its own configuration. A URL's option (group `remote`)
    is swept in a remote run only, and without values there the loader's default is given to
    every strategy (a peer too: runai's S3 streamer would otherwise run its own 8 clients), so the
    strategies of a configuration are compared at the same value, in one block."""
    remote = config.source != FILE_SOURCE
    tasks = [task]
    for option in (o for o in TABLE if o.cli == COUNTS and (remote or o.group != "remote")):
        default = [option.default] if option.group == "remote" else []
        values = config.swept.get(option.name) or default
        tasks = [
            replace(t, options=t.options.with_values(**{option.name: v}))
            for t in tasks
            for v in values
        ] or tasks
    if not remote:
        return tasks
    return [replace(t, source=config.source, link=config.link or UNSHAPED) for t in tasks]
