"""The bench matrix: checkpoints prepared once, every run in a fresh child, every outcome a row.

For each shape set: synthesise the checkpoint once (cached under `$LOADBENCH_CACHE/checkpoints/
<shapes>-<dtype>-<seed>/`, default `.cache/loadbench`), convert it once for strategies that need
another format, then run (strategy × repeat) interleaved — A B C A B C — so drift hits every
strategy alike. A crash, a timeout, a wrong result or a child over the memory budget becomes a row
with that status; the run goes on. Rows are appended to `<out>/<machine>/<run-id>.jsonl` as each
child finishes; Parquet is exported at the end (also after Ctrl-C). Never imports jax: everything
that does runs in a child (`bench.child.prepare`, `bench.child.worker`).
"""

from __future__ import annotations

import contextlib
import difflib
import os
import shutil
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

from tqdm import tqdm

from bench import strategies
from bench.errors import BenchError
from bench.limits import pagecache
from bench.limits.cgroups import V1, V2
from bench.limits.cpu import CpuLimit
from bench.limits.disk_read import ReadThrottle
from bench.limits.memory import SYSTEMD, WATCHDOG, MemoryLimit
from bench.limits.pagecache import CacheOutcome
from bench.limits.situation import Situation
from bench.link import FILE_SOURCE
from bench.link.serve import serving
from bench.machine.facts import cpu_limit, machine_id, new_run_id, run_record, utc_now
from bench.records.results import export_parquet
from bench.records.schema import PhaseRecord, RunRecord, option_columns
from bench.records.wire import MemrayFiles
from bench.records.writer import ResultsWriter
from bench.run.ceiling import Ceiling
from bench.run.checks import check_dtype, check_processes, check_shapes
from bench.run.children import ChildOutcome, run_group
from bench.run.config import RunConfig, cache_dir
from bench.run.launch import PreparedTask, prepare_task, task_argvs
from bench.run.matrix import Checkpoint, Task, plan, untaken_options
from bench.run.ranks import Leader, ranked_processes
from bench.run.reference import MomentReference
from bench.run.repeats import Tallies
from bench.run.rows import RowContext, failed_row, result_records
from bench.run.task_times import CHILDREN, PAGE_CACHE, PREPARE, PROBE, REFERENCE, TaskTimes
from bench.run.user_checkpoint import open_checkpoint
from bench.vocabulary import COLD, COMPLETE, FAILED, INTERRUPTED, OK, RUNNING, SKIPPED
from loader.launcher import detect
from loader.strategies import StrategyInfo
from loader.vocabulary import TOTAL

#: (shapes, strategy) -> where its memray capture's reports are (flamegraph HTML, top allocators)
Memray = dict[tuple[str, str], tuple[str | None, str | None]]


@dataclass
class RunOutcome:
    """Where a run's results went and whether it was interrupted."""

    run_id: str
    jsonl: Path
    interrupted: bool = False


def _select(config: RunConfig) -> list[StrategyInfo]:
    entries = strategies.catalog()
    if config.strategies is None:
        return list(entries.values())
    unknown = [s for s in config.strategies if s not in entries]
    if unknown:
        close = [difflib.get_close_matches(s, list(entries), n=1) for s in unknown]
        hints = [
            f"{s!r} (did you mean {c[0]!r}?)" if c else repr(s) for s, c in zip(unknown, close)
        ]
        raise BenchError(
            f"unknown strategy {', '.join(hints)}; known strategies: "
            f"{', '.join(entries)} (see `loadbench bench list`)"
        )
    return [entries[s] for s in config.strategies]


def _context(run_id: str, task: Task, memray: Memray, situation: Situation) -> RowContext:
    html, top = memray.get((task.checkpoint.shapes, task.entry.name), (None, None))
    return RowContext(
        run_id=run_id,
        result_id=uuid.uuid4().hex,
        task=task,
        situation=situation,
        memray_html=html,
        memray_top=top,
    )


def _unrun(task: Task) -> Situation:
    """The situation of a task that never ran: its page cache as asked, no limits."""
    return Situation(CacheOutcome(task.cache))


def _open_limits(
    stack: contextlib.ExitStack, task: Task, config: RunConfig
) -> tuple[MemoryLimit | None, ReadThrottle | None, CpuLimit | None]:
    """The memory limit, the read-speed limit and the CPU limit the config asks for (None where
    not asked; a warm child reads no disk, so `--cache both` caps only its cold children)."""
    limit = throttle = None
    if config.host_ram_bytes is not None:
        limit = stack.enter_context(MemoryLimit(config.host_ram_bytes))
    if config.disk_read_bytes_per_s is not None and task.cache == COLD:
        v2_cgroup = limit.path if limit is not None and limit.mechanism == V2 else None
        in_scope = limit is not None and limit.mechanism == SYSTEMD
        files = pagecache.checkpoint_files(task.load_path)
        throttle = stack.enter_context(
            ReadThrottle(
                config.disk_read_bytes_per_s,
                files,
                v2_cgroup=v2_cgroup,
                mechanisms=(V1,) if in_scope else (V2, V1),
            )
        )
    cpu = stack.enter_context(CpuLimit(config.cpus)) if config.cpus is not None else None
    return limit, throttle, cpu


def _run_task(
    task: Task,
    config: RunConfig,
    work: Path,
    leader: Leader | None,
    times: TaskTimes,
) -> tuple[list[ChildOutcome], Situation]:
    """Run the task's child group (under the memory and read limits, if any, and the memory
    budget), or, when `leader` takes it, one worker on each of the launcher's ranks: its
    outcomes and the situation it ran in. `times` gets the page cache's and the children's
    seconds."""
    group_bytes = config.memory_budget()
    files = pagecache.checkpoint_files(task.load_path)
    with times.timing(PAGE_CACHE):
        cache = pagecache.set_cache(files, task.cache)
    with contextlib.ExitStack() as stack, times.timing(CHILDREN):
        limit, throttle, cpu = _open_limits(stack, task, config)
        if limit is not None and limit.mechanism == WATCHDOG:
            group_bytes = min(group_bytes, limit.limit_bytes)
        if leader is not None and leader.takes(task):
            outcomes = leader.run(
                task,
                work,
                timeout_s=config.timeout_s,
                memory_bytes=config.memory_budget_bytes,
                limit=limit,
                throttle=throttle,
                cpu=cpu,
            )
        else:
            outcomes = run_group(
                *task_argvs(task, work),
                timeout_s=config.timeout_s,
                memory_bytes=group_bytes,
                limit=limit,
                throttle=throttle,
                cpu=cpu,
            )
        memory = limit.outcome() if limit is not None else None
        disk_read = throttle.outcome() if throttle is not None else None
        cpus = cpu.outcome() if cpu is not None else None
    with times.timing(PAGE_CACHE):
        situation = Situation(pagecache.with_growth(cache, files), memory, disk_read, cpus)
    if notes := situation.notes():
        outcomes = [replace(o, error="\n".join(filter(None, [o.error, *notes]))) for o in outcomes]
    return outcomes, situation


def _note_memray(task: Task, outcomes: list[ChildOutcome], memray: Memray, folder: Path) -> None:
    """Remember where the capture's reports are (the measured rows link to them), or say why not."""
    first = outcomes[0]
    files = (first.result.memray if first.result else None) or MemrayFiles()
    html, top = (os.path.relpath(p, folder) if p else None for p in (files.html, files.top))
    memray[(task.checkpoint.shapes, task.entry.name)] = (html, top)
    problem = first.error if first.status != OK else files.error
    if problem:
        print(
            f"loadbench: memray capture of {task.entry.name}: {problem.splitlines()[0]}",
            file=sys.stderr,
        )


@dataclass
class _Execution:
    """What the tasks of one run share while they run: where rows go, the memray links so far."""

    config: RunConfig
    writer: ResultsWriter
    run_id: str
    ceiling: Ceiling
    leader: Leader | None = None  # rank 0 of a cluster launcher's job (bench.run.ranks)
    memray: Memray = field(default_factory=dict)
    reference: MomentReference = field(
        default_factory=lambda: MomentReference(cache_dir() / "reference")
    )

    @property
    def folder(self) -> Path:
        return self.writer.path.parent

    def run(self, task: Task, times: TaskTimes) -> tuple[float | None, float | None, bool, dict]:
        """Prepare and run one task; write its rows (a memray capture writes none). Returns its
        headline row's paired ratio and reference drift (None where unknown), whether it was ok,
        and its first child's own steps (`ChildResult.steps_s`); `times` gets the runner's."""
        with times.timing(PREPARE):
            prepared: PreparedTask = prepare_task(task, self.config)
        if not prepared.ok:
            ctx = _context(self.run_id, task, self.memray, _unrun(task))
            self.writer.write(failed_row(ctx, prepared.status, prepared.error))
            return None, None, False, {}
        work = self.folder / self.run_id / "work"
        remote = task.url is not None  # its ceiling is the link's (bench.run.rows), not the disk's
        nbytes = task.checkpoint.checkpoint_bytes
        if not remote:
            with times.timing(PROBE):
                self.ceiling.probe(nbytes)  # before the child: quiet machine
        if task.memray_bin is not None:  # a capture: no row, so no reference either
            outcomes, _ = _run_task(prepared.task, self.config, work, self.leader, times)
            _note_memray(task, outcomes, self.memray, self.folder)
            return None, None, True, _child_steps(outcomes)
        with times.timing(REFERENCE):
            before = self.reference.before(
                nbytes, task.cache, not remote and self.ceiling.onto_device
            )
        outcomes, situation = _run_task(prepared.task, self.config, work, self.leader, times)
        with times.timing(REFERENCE):
            reading = self.reference.after(before, nbytes, task.cache)
        resident = situation.cache.resident_fraction
        limit = (
            {}
            if remote
            else self.ceiling.fields(task.checkpoint.checkpoint_bytes, task.cache, resident)
        )
        moment = reading.fields(nbytes) if reading is not None else {}
        ctx = replace(_context(self.run_id, task, self.memray, situation), **limit, **moment)
        records = result_records(ctx, outcomes)
        self.writer.write_many(records)
        return (*_headline(records), _child_steps(outcomes))


def _child_steps(outcomes: list[ChildOutcome]) -> dict[str, float]:
    """The first child's own steps (rank 0's, where several ran), or {} where it wrote none."""
    results = [o.result for o in outcomes if o.result is not None]
    return dict(results[0].steps_s) if results else {}


def configuration(task: Task) -> tuple:
    """What one configuration's repeats share: every field of its task but the repeat."""
    return (
        task.checkpoint.shapes,
        task.entry.name,
        task.model,
        task.processes,
        task.devices,
        task.cache,
        task.source,
        task.link,
        task.options,
    )


def _headline(records: list) -> tuple[float | None, float | None, bool]:
    """(paired ratio, reference drift, ok) of a result's headline `total` row: the summed row of
    a multi-process result, else its one process's."""
    totals = [r for r in records if isinstance(r, PhaseRecord) and r.phase == TOTAL]
    head = min(totals, key=lambda r: r.process_index) if totals else None
    if head is None:
        return None, None, False
    return head.paired_ratio, head.reference_drift, head.status == OK


def _execute(  # noqa: PLR0913  what one run's tasks share
    tasks: list[Task],
    config: RunConfig,
    writer: ResultsWriter,
    run_id: str,
    ceiling: Ceiling,
    leader: Leader | None,
) -> None:
    """Run `tasks` (the memray captures and the minimum's interleaved rounds), then further
    interleaved rounds of the configurations whose time is not yet settled
    (`bench.run.repeats`)."""
    execution = _Execution(config, writer, run_id, ceiling, leader)
    tallies: Tallies[tuple] = Tallies(config.repeat_policy())
    firsts: dict[tuple, Task] = {}
    for task in tasks:
        if task.memray_bin is None:
            firsts.setdefault(configuration(task), task)
    progress = _Progress(config.progress, len(tasks))
    with progress:
        for task in tasks:
            _tallied(execution, task, tallies, progress)
        while more := tallies.wanting(list(firsts)):
            progress.add(len(more))
            for key in more:
                task = replace(firsts[key], repeat=tallies.of(key).runs)
                _tallied(execution, task, tallies, progress)


class _Progress:
    """How far a run has got, on stderr: a bar on a terminal; where stderr is a file or a pipe (a
    CI log, `nohup`), one line per child run as it ends, since a bar there prints nothing until
    the run is over. Repeats are counted from 1, as every other line the CLI prints."""

    def __init__(self, wanted: bool, total: int) -> None:
        self.lines = wanted and not sys.stderr.isatty()
        shown = wanted and not self.lines
        self.bar = tqdm(total=total, file=sys.stderr, disable=not shown, unit="run")
        self.done, self.total = 0, total

    def __enter__(self) -> _Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.bar.close()

    def add(self, more: int) -> None:
        """More child runs to come (repeats added to configurations not yet settled)."""
        self.total += more
        self.bar.total = self.total

    def starting(self, task: Task) -> None:
        self.bar.set_postfix_str(_named(task))

    def ended(self, task: Task, ok: bool, seconds: float, split: str = "") -> None:
        """One task done; `split` says where its seconds went (`TaskTimes.text`)."""
        self.done += 1
        self.bar.update()
        if self.lines:
            how = "ok" if ok else "not ok (its row says why)"
            print(
                f"loadbench: [{self.done}/{self.total}] {_named(task)}: {how}, {seconds:.1f} s"
                + (f": {split}" if split else ""),
                file=sys.stderr,
                flush=True,
            )


def _named(task: Task) -> str:
    """`gpt2 pipelined repeat 2` (repeats counted from 1; a memray capture said as one)."""
    what = "memray capture" if task.memray_bin is not None else f"repeat {task.repeat + 1}"
    return f"{task.checkpoint.shapes} {task.entry.name} {what}"


def _tallied(
    execution: _Execution, task: Task, tallies: Tallies[tuple], progress: _Progress
) -> None:
    """Run one task, and count it in its configuration's tally (a memray capture is no repeat;
    the probe or format it ran first for every configuration is not its own time)."""
    progress.starting(task)
    started, times = time.perf_counter(), TaskTimes()
    ratio, drift, ok, child_steps = execution.run(task, times)
    seconds = time.perf_counter() - started
    if task.memray_bin is None:
        tallies.of(configuration(task)).add(ratio, drift, ok, times.own_s(seconds))
    progress.ended(task, ok, seconds, times.text(child_steps))


def _checkpoints(config: RunConfig) -> Iterator[Checkpoint]:
    """The synthetic checkpoints of the shape sets, then the users' own (prepared lazily)."""
    for name in config.shapes:
        yield Checkpoint.ensure(name, config.dtype, config.seed, cache_dir(), config.timeout_s)
    for path in config.checkpoints:
        yield Checkpoint.from_user(path, cache_dir())


def _asked(config: RunConfig, selected: list[StrategyInfo]) -> dict:
    """The run record's situation: what the run was asked to run, under which limits."""
    return {
        "status": RUNNING,
        "cache": config.cache,
        "host_ram_bytes": config.host_ram_bytes,
        "cpu_limit": _cpu_limit(config),
        "disk_read_bytes_per_s": config.disk_read_bytes_per_s,
        "check": config.check,
        "strategies": [s.name for s in selected],
        "repeats": config.repeats,
        "max_repeats": config.repeat_policy().max_repeats,
        "repeat_budget_s": config.repeat_policy().budget_s,
        **option_columns(config.options, RunRecord),
        "devices": config.devices,
    }


def _cpu_limit(config: RunConfig) -> float | None:
    """The CPUs the children could use where fewer than the machine has: `--cpus` (each child
    group's cgroup), capped by this process's own affinity or quota; None: no limit."""
    own = cpu_limit()
    if config.cpus is None:
        return own
    return float(config.cpus) if own is None else min(float(config.cpus), own)


def _run_matrix(
    config: RunConfig, selected: list[StrategyInfo], writer: ResultsWriter, leader: Leader | None
) -> None:
    run_id = writer.path.stem
    ceiling = Ceiling(config)
    for ck in _checkpoints(config):
        tasks, skipped = plan(ck, selected, config, writer.path.parent / run_id)
        for task, reason in skipped:
            ctx = _context(run_id, task, {}, _unrun(task))
            # a skipped configuration of several processes has no ranks: its one row is the
            # result's own (process_index -1), the row its block of the summary shows
            writer.write(failed_row(ctx, SKIPPED, reason, -1 if task.processes > 1 else 0))
        if config.source == FILE_SOURCE or not tasks:
            _execute(tasks, config, writer, run_id, ceiling, leader)
            continue
        with serving(ck.path, config.source, config.link, ck.shapes) as url:
            urls = [replace(t, url=url) for t in tasks]
            _execute(urls, config, writer, run_id, ceiling, leader)


def _finish(writer: ResultsWriter, record: RunRecord, status: str, header: int) -> bool:
    """Write the end record with `status`; or, when the run wrote no row (it was refused),
    remove its file so a refused run leaves nothing. True when the file is kept."""
    if status == FAILED and writer.path.stat().st_size <= header:
        writer.path.unlink(missing_ok=True)
        return False
    writer.write(replace(record, status=status, finished_utc=utc_now()))
    return True


def _measure(
    config: RunConfig,
    selected: list[StrategyInfo],
    record: RunRecord,
    jsonl: Path,
    leader: Leader | None = None,
):
    """Write the run to `jsonl`, its end record last. Returns (status, whether the file is kept);
    an error other than Ctrl-C is raised after the end record says "failed"."""
    status, kept = FAILED, True
    with ResultsWriter(jsonl) as writer:
        writer.write(record)
        header = jsonl.stat().st_size
        try:
            _run_matrix(config, selected, writer, leader)
            status = COMPLETE
        except KeyboardInterrupt:
            status = INTERRUPTED
            print("loadbench: interrupted; finished rows are saved", file=sys.stderr)
        finally:
            work = jsonl.parent / record.run_id
            shutil.rmtree(work / "work", ignore_errors=True)
            with contextlib.suppress(OSError):  # nothing else there without --memray
                work.rmdir()
            kept = _finish(writer, record, status, header)
    return status, kept


def checked(config: RunConfig) -> tuple[RunConfig, list[StrategyInfo]]:
    """`config` as it will run (under a launcher, its ranks are the processes) and its
    strategies; `BenchError` for what it refuses, before the run writes anything. Every rank of
    a launcher's job runs these checks, so a refusal stops each of them, not rank 0 alone."""
    launcher = detect()
    if launcher is not None:
        config = replace(config, processes=ranked_processes(config.processes, launcher))
    selected = _select(config)
    check_processes(config.processes, selected)
    check_shapes(config.shapes)  # before the run record: a typo leaves no stray results file
    check_dtype(config.dtype)
    check_dtype(config.model_dtype, "--model-dtype")
    for path in config.checkpoints:  # headers only: a text file is refused before any row
        open_checkpoint(path)
    return config, selected


def run_bench(config: RunConfig) -> RunOutcome:
    """Run the matrix of `config`; rows land in `<out>/<machine>/<run-id>.jsonl` as they finish.

    The run record is written first (status "running") and again at the end with the run's
    status: complete, interrupted (Ctrl-C) or failed (an error stopped it). A run refused before
    its first row (a bad `--checkpoint`, say) leaves no file and no new folder behind. Launched
    by mpirun, srun or a TPU pod, this is rank 0's part: a multi-process strategy runs on the
    launcher's ranks (`bench.run.ranks`; the other ranks run `follow`).
    """
    launcher = detect()
    if launcher is not None:
        if launcher.rank != 0:
            raise BenchError(
                f"run_bench on rank {launcher.rank} of {launcher.size} ({launcher.name}): only "
                "rank 0 runs the bench; the other ranks run bench.run.ranks.follow"
            )
    config, selected = checked(config)
    for line in untaken_options(config, selected):  # run without them, never refused
        print(f"loadbench: {line}", file=sys.stderr)
    run_id = new_run_id()
    jsonl = Path(config.out) / machine_id() / f"{run_id}.jsonl"
    made = [d for d in jsonl.parents if not d.exists()]  # deepest first
    record = replace(run_record(run_id, config.argv or sys.argv), **_asked(config, selected))
    kept = False
    try:
        with Leader(launcher, config.out) if launcher else contextlib.nullcontext() as leader:
            status, kept = _measure(config, selected, record, jsonl, leader)
    finally:
        if kept:
            export_parquet(jsonl)
        else:
            for folder in made:  # a refused run leaves no folder it made
                with contextlib.suppress(OSError):
                    folder.rmdir()
    return RunOutcome(run_id, jsonl, interrupted=status == INTERRUPTED)
