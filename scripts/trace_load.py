"""One load in this process, with the time of each step of the staged path counted: where the
seconds of a load onto an accelerator go (docs/results.md, "The staged path on a TPU v5e host").

    python scripts/trace_load.py SHAPES CHECKPOINT MODEL

MODEL: as `scripts/one_load.py` takes it (`spec`, `bf16`, `port`, `mmap-put`; its `load_target`,
the strategy's modules imported before the clock). Prints one JSON line: the wall and CPU
seconds of the load, each loader thread's CPU seconds, and per counted function its calls, seconds
summed over every thread, and when its first call started and its last ended (seconds from the
load's start). No RSS sampler runs beside it (one costs the sampled process time in gVisor:
`scripts/one_load.py` takes the peaks). The functions are wrapped by name, so a renamed one is
reported as missing rather than silently not counted; a function another module imports by name
is wrapped in the module that calls it (`engine.warm_programs`, `engine.send_batch`), else its
calls go uncounted.
"""

from __future__ import annotations

import functools
import json
import sys
import threading
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jax
from one_load import load_target  # this folder: the same targets, built the same way

import loader
import loader.sequence
from loader.pipeline import device_shards, engine, file_pages, programs, ring, ring_job
from loader.pipeline.sources.local import LocalFiles
from loader.strategies import mmap_put

#: (owner, attribute) of each function counted.
COUNTED: tuple[tuple[Any, str], ...] = (
    (loader.sequence, "_build"),
    (loader.sequence, "plan_load"),
    (engine.Pipeline, "start"),
    (engine.Pipeline, "fill"),
    (engine.Pipeline, "_finish"),
    (engine.Pipeline, "close"),
    (jax, "device_put"),
    (jax, "make_array_from_single_device_arrays"),
    (engine, "send_batch"),
    (ring_job.RingJob, "map_chunk"),
    (ring_job.RingJob, "arrived"),
    (ring_job.RingJob, "fold_arrived"),
    (ring_job.RingJob, "through_ring"),
    (ring.RingSender, "send"),
    (ring.RingSender, "send_many"),
    (ring.MappedFlight, "admit"),
    (ring.MappedFlight, "launched_many"),
    (file_pages.FilePages, "view"),
    (device_shards, "fold"),
    (device_shards, "run_update"),  # a fold's program calls: updates, and allocations below
    (device_shards, "allocate"),
    (programs.DevicePrograms, "put_offsets"),  # the updates' offsets, put when programs are asked
    (engine, "warm_programs"),  # where the engine calls it (imported there by name)
    (LocalFiles, "begin"),
    (mmap_put, "to_device"),
)


@dataclass
class Count:
    calls: int = 0
    seconds: float = 0.0
    first: float | None = None
    last: float = 0.0


class Counter:
    """Calls and seconds per wrapped function, from every thread, relative to `start`."""

    def __init__(self) -> None:
        self.start = time.perf_counter()
        self.counts: dict[str, Count] = {}
        self.lock = threading.Lock()

    def wrap(self, owner: Any, name: str) -> None:
        fn: Callable[..., Any] = getattr(owner, name)  # AttributeError: a renamed function
        label = f"{getattr(owner, '__name__', owner)}.{name}"

        @functools.wraps(fn)
        def counted(*args: Any, **kwargs: Any) -> Any:
            began = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                ended = time.perf_counter()
                with self.lock:
                    count = self.counts.setdefault(label, Count())
                    count.calls += 1
                    count.seconds += ended - began
                    if count.first is None:
                        count.first = began - self.start
                    count.last = ended - self.start

        setattr(owner, name, counted)

    def table(self) -> dict[str, list[float]]:
        """label -> [calls, seconds, first start, last end], the most seconds first."""
        rows = sorted(self.counts.items(), key=lambda item: -item[1].seconds)
        return {
            label: [c.calls, round(c.seconds, 4), round(c.first or 0.0, 3), round(c.last, 3)]
            for label, c in rows
        }


def thread_cpu_seconds(counter: dict[str, float]) -> None:
    """Count each reader thread's CPU seconds (`Pipeline._serve`) into `counter`."""
    serve = engine.Pipeline._serve

    def counted(self: engine.Pipeline, scratch: Any) -> None:
        began = time.thread_time()
        try:
            serve(self, scratch)
        finally:
            counter[threading.current_thread().name] = time.thread_time() - began

    engine.Pipeline._serve = counted  # type: ignore[method-assign]


def main(argv: list[str]) -> None:
    warnings.simplefilter("ignore")
    name, checkpoint, model = argv[0], argv[1], argv[2]
    jax.devices()  # the backend starts before the clock does
    build, kw, strategy = load_target(name, model)
    counter, threads = Counter(), dict[str, float]()
    for owner, attribute in COUNTED:
        counter.wrap(owner, attribute)
    thread_cpu_seconds(threads)
    cpu0 = time.process_time()
    counter.start = time.perf_counter()
    loaded, report = loader.load_model(build, checkpoint, strategy=strategy, **kw)
    jax.block_until_ready(jax.tree.leaves(loaded))
    wall = time.perf_counter() - counter.start
    print(
        json.dumps(
            {
                "shapes": name,
                "model": model,
                "wall_s": round(wall, 3),
                "cpu_s": round(time.process_time() - cpu0, 3),
                "device_programs": report.device_programs,
                "staging": report.staging_memory,
                "thread_cpu_s": {k: round(v, 3) for k, v in threads.items()},
                "calls": counter.table(),
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main(sys.argv[1:])
