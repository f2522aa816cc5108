"""One `bench run`'s settings and the host-derived defaults they fall back on (never imports jax).

`RunConfig` is what `loadbench bench run` asks for; `default_budget()` (75% of the host's RAM,
less what the runner holds) is the memory budget when none is given, and `cache_dir()` is where
synthetic and converted checkpoints are kept between runs (`$LOADBENCH_CACHE`, default
`.cache/loadbench`). The matrix, the child launcher and the runner all read these from here.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from bench.run.repeats import DEFAULT_REPEAT_BUDGET_S, RepeatPolicy
from bench.vocabulary import WARM
from loader.options import NO_OPTIONS, LoadOptions

DEFAULT_TIMEOUT_S = 900.0
BUDGET_FRACTION = 0.75
DEFAULT_PROCESSES = 2  # of a multi-process strategy, when `--processes` is not given
CACHE_ENV = "LOADBENCH_CACHE"


def default_budget() -> int:
    """A safe fraction of the host's RAM, less what this parent process holds."""
    parent = psutil.Process().memory_info().rss
    return int(psutil.virtual_memory().total * BUDGET_FRACTION) - parent


def cache_dir() -> Path:
    """Where checkpoints are synthesised and converted once: `$LOADBENCH_CACHE`, else
    `.cache/loadbench`."""
    return Path(os.environ.get(CACHE_ENV) or ".cache/loadbench")


def checkpoints_dir() -> Path:
    """The folder of `cache_dir()` that holds the checkpoints: the disk the machine probe reads
    cold unless told another (`bench run`'s ceilings, `loadbench probe`)."""
    return cache_dir() / "checkpoints"


@dataclass
class RunConfig:
    """One `bench run`: what to run and under which limits."""

    shapes: list[str]
    strategies: list[str] | None = None  # None: every registered strategy predicted to fit
    repeats: int = 3  # `--repeats`: the minimum every configuration runs
    dtype: str | None = None
    devices: int = 1
    processes: list[int] | None = None  # `--processes 2,4`: one configuration each of a
    # multi-process strategy (None: DEFAULT_PROCESSES)
    memray: bool = False
    out: Path = Path("results")
    timeout_s: float = DEFAULT_TIMEOUT_S
    memory_budget_bytes: int | None = None
    model_dtype: str | None = None  # build the model in this dtype (the checkpoint keeps its own)
    # the load options asked (their flags: `loader.options.TABLE`), each passed only to the
    # strategies that take it (`bench.run.matrix`): those of one value, and those swept (one
    # configuration per value, by option name: `--remote-concurrency 1,4,16`)
    options: LoadOptions = NO_OPTIONS
    swept: dict[str, list[Any]] = field(default_factory=dict)
    seed: int = 0
    progress: bool = True
    argv: list[str] = field(default_factory=list)
    cache: str = WARM  # CACHE_CHOICES: "cold" evicts the checkpoint before each child, "both" alike
    host_ram_bytes: int | None = None  # run each child group inside a memory cgroup of this size
    disk_read_bytes_per_s: int | None = (
        None  # cap reads from the checkpoint's disk (a blkio cgroup)
    )
    cpus: int | None = None  # run each child group inside a cgroup of this many CPUs
    reprobe: bool = False  # `--probe`: probe the machine again, not the cached probe
    checkpoints: list[str] = field(default_factory=list)  # users' own checkpoints (--checkpoint)
    check: bool = False  # made by `recommend --check` (its run record says so)
    model: str = "spec"  # `--model`: one of bench.vocabulary.MODELS, or several: "spec,port"
    key_map: str | None = None  # `--key-map MODULE:NAME`: a `--model MODULE:NAME`'s key map
    compile: bool = False  # `--compile`: add the `compile` phase (a port's forward)
    compile_cache: str | None = None  # `--compile-cache DIR`: JAX's persistent cache
    source: str = "file"  # `--source`: file, http, s3 or hf (bench.link serves the checkpoint)
    link: str | None = None  # `--link BANDWIDTH`: the shaped link (None: unshaped loopback)
    max_repeats: int | None = None  # `--max-repeats`: repeats stop there even if a time is not
    # settled (None: at `repeats`, no repeat added; `bench run` gives its own default)
    repeat_budget_s: float | None = None  # `--repeat-budget`: wall seconds per configuration

    def repeat_policy(self) -> RepeatPolicy:
        """How many repeats each configuration gets (`bench.run.repeats`)."""
        return RepeatPolicy(
            self.repeats,
            self.repeats if self.max_repeats is None else self.max_repeats,
            DEFAULT_REPEAT_BUDGET_S if self.repeat_budget_s is None else self.repeat_budget_s,
        )

    def models(self) -> list[str]:
        """The models each strategy is run with (`--model a,b`: interleaved, in one run)."""
        return [m.strip() for m in self.model.split(",") if m.strip()]

    def memory_budget(self) -> int:
        """The memory budget of each child group: the one asked for, else `default_budget()`."""
        return self.memory_budget_bytes or default_budget()
