"""The `compile` phase: lower and compile a port's forward for its declared input, from the
abstract model (shapes only: it needs no byte of the checkpoint).

`pipelined` overlaps it with its reads: the loader hands over its abstract model as soon as it is
built (`load_model(..., on_built=)`), `Compile.start_from` compiles from those shapes on a thread
while the readers run, and `finish` joins it; so the forward is not built a second time, beside
the loader's own build, on the same GIL. Other strategies compile after the load, from a build of
their own (`finish` runs it then). Either way it is the probe's `compile` phase (its own wall time
and RSS peak). With a cache folder, JAX's persistent compilation cache is used (a folder per
strategy in it, `strategy_cache`; every entry kept, however small or quick), and the result says
`hit` when the compile wrote no new entry there, else `miss`: a strategy's first start and its
later starts, two conditions the summary keeps apart. A compile that fails is kept as its
exception's first line (the load's figures stand; the row's status is `error`).
Worker side: imports jax and flax.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

from bench.vocabulary import HIT, MISS
from loader.phases import Probe
from loader.vocabulary import COMPILE

OVERLAPPING = ("pipelined",)  # strategies whose reads the compile runs beside


def strategy_cache(folder: str, strategy: str) -> str:
    """The strategy's own cache in `--compile-cache` `folder`: each strategy has a first start of
    its own (a cold cache) and later starts (warm), so neither condition depends on which strategy
    happened to run first.

    Example:
        >>> strategy_cache("/tmp/xla", "pipelined")
        '/tmp/xla/pipelined'
    """
    return str(Path(folder) / strategy)


def use_cache(folder: str) -> None:
    """JAX's persistent compilation cache in `folder`, for every compile of this process."""
    import jax

    Path(folder).mkdir(parents=True, exist_ok=True)
    jax.config.update("jax_compilation_cache_dir", str(folder))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


def shapes_of(model: Any) -> tuple[Any, Any]:
    """(graphdef, state) of `model` with every leaf a `jax.ShapeDtypeStruct` (its sharding kept):
    a snapshot that later assignments to the model's leaves do not touch."""
    import jax
    from flax import nnx

    def as_struct(x: Any) -> jax.ShapeDtypeStruct:
        return jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=getattr(x, "sharding", None))

    graphdef, state = nnx.split(model)
    return graphdef, jax.tree.map(as_struct, state)


def compile_forward(graphdef: Any, state: Any, example_input: Any) -> Any:
    """The compiled forward `nnx.merge(graphdef, state)(x)` for `example_input`."""
    import jax
    from flax import nnx

    def forward(state: Any, x: Any) -> Any:
        return nnx.merge(graphdef, state)(x)

    return jax.jit(forward).lower(state, example_input).compile()


def lower_and_compile(builder: Any, example_input: Any) -> Any:
    """The compiled forward `model(x)` of the abstract `builder()` for `example_input`."""
    from loader.target.abstract import abstract_build  # nnx.eval_shape, linear in the leaves

    return compile_forward(*shapes_of(abstract_build(builder)), example_input)


def _entries(folder: str | None) -> set[str]:
    return set(os.listdir(folder)) if folder and os.path.isdir(folder) else set()


class Compile:
    """One compile of a port's forward, in the probe's `compile` phase."""

    def __init__(self, port: Any, probe: Probe, cache: str | None) -> None:
        self.port, self.probe, self.cache = port, probe, cache
        self.error: str | None = None
        self.cache_result: str | None = None
        self.start_rss_bytes: int | None = None  # RSS as the compile began: its own peak is above
        self._thread: threading.Thread | None = None
        self._entered = threading.Event()

    def _run(self, shapes: tuple[Any, Any] | None = None) -> None:
        from bench.child.phase_probe import read_status

        before = _entries(self.cache)
        self.start_rss_bytes = read_status()["rss"]
        with self.probe.phase(COMPILE):
            self._entered.set()
            try:
                if shapes is None:
                    lower_and_compile(self.port.builder, self.port.example_input)
                else:
                    compile_forward(*shapes, self.port.example_input)
            except Exception as exc:  # noqa: BLE001 - the row says it; the run goes on
                lines = str(exc).strip().splitlines() or [""]
                self.error = f"compile failed: {type(exc).__name__}: {lines[0][:300]}"
        if self.cache and self.error is None:
            self.cache_result = MISS if _entries(self.cache) - before else HIT

    def start_from(self, model: Any) -> None:
        """Compile from the loader's just-built `model` on a thread, beside the reads (the
        loader's `on_built`); returns once the phase is open."""
        shapes = shapes_of(model)  # now, on the loader's thread: the model is not changed yet
        self._thread = threading.Thread(
            target=self._run, args=(shapes,), name="loadbench-compile", daemon=True
        )
        self._thread.start()
        self._entered.wait()

    def finish(self) -> None:
        """Wait for the thread, or compile now if none was started."""
        if self._thread is None:
            self._run()
        else:
            self._thread.join()
