"""The compile phase: a port's forward lowered and compiled from the abstract model; a forward
that fails to compile is kept as its first line (the row's status `error`), with the load's rows."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

import shapes
from bench.child.compile import Compile
from bench.child.phase_probe import MemoryProbe
from bench.limits.situation import CacheOutcome, Situation
from bench.records.wire import ChildResult, Measurement, PhaseMeasure
from bench.run.children import ChildOutcome
from bench.run.matrix import Checkpoint, Task
from bench.run.rows import RowContext, process_rows
from bench.vocabulary import ERROR
from loader import strategies
from loader.vocabulary import BUILD, COMPILE, STREAM
from shapes.architectures.port import port_for


class Broken(nnx.Module):
    def __init__(self) -> None:
        self.w = nnx.Param(jnp.zeros((4, 3)))

    def __call__(self, x):
        return x @ self.w[...] @ self.w[...]  # (1, 4) @ (4, 3) @ (4, 3): shapes do not agree


class _Port:
    builder = Broken
    example_input = jax.ShapeDtypeStruct((1, 4), jnp.float32)


def test_the_port_forward_compiles_in_its_phase():
    probe = MemoryProbe(use_hwm=False)
    compiling = Compile(port_for("tiny-gpt2"), probe, None)
    with probe.measure():
        compiling.finish()  # no start: after the load, from a build of its own
    assert compiling.error is None
    assert [p.name for p in probe.result().phases] == [COMPILE]


def test_pipelined_hands_its_abstract_model_to_the_compile_beside_its_reads(tmp_path, poison):
    """The compile starts from the loader's own build (`on_built`), not a second one, and runs
    while the load goes on; the weights still land (the builder's model is poisoned)."""
    port = port_for("tiny-gpt2")
    checkpoint = shapes.synthesize("tiny-gpt2", tmp_path)
    built: list[int] = []

    def builder():
        built.append(1)
        model = port.builder()
        poison(model)
        return model

    probe = MemoryProbe(use_hwm=False)
    compiling = Compile(port, probe, None)
    with probe.measure():
        model, _ = strategies.get("pipelined").load(
            builder,
            checkpoint,
            probe,
            strict=True,
            key_map=port.key_map,
            on_built=compiling.start_from,
        )
        compiling.finish()
    assert compiling.error is None and len(built) == 1
    phases = {p.name: p for p in probe.result().phases}
    assert {BUILD, COMPILE, STREAM} <= set(phases)
    assert phases[BUILD].end_s <= phases[COMPILE].start_s < phases[STREAM].end_s  # beside the reads
    wte = np.asarray(model.wte.embedding.get_value())
    assert not np.all(wte == 7.0)


def test_a_failing_compile_is_its_first_line():
    probe = MemoryProbe(use_hwm=False)
    compiling = Compile(_Port(), probe, None)
    with probe.measure():
        compiling.finish()
    assert compiling.error.startswith("compile failed: TypeError: dot_general requires")
    assert "\n" not in compiling.error


def test_an_error_row_keeps_the_load_phases():
    phase = PhaseMeasure("stream", 0, 1.0, 10, 10, 10, 0)
    total = PhaseMeasure("total", 1, 1.0, 10, 10, 10, 0)
    measured = Measurement(1, "hwm", total, (phase,), load_s=0.5, ready_s=1.0)
    outcome = ChildOutcome(
        ERROR, "compile failed: boom", ChildResult(ERROR, "boom", measurement=measured)
    )
    checkpoint = Checkpoint("tiny-gpt2", None, 0, "/c/model.safetensors", 1, 1, 1)
    task = Task(checkpoint, strategies.get("pipelined"), 0, 1, 1, model="port", compile=True)
    ctx = RowContext("r", "x", task, Situation(CacheOutcome("warm")))
    rows = process_rows(ctx, 0, outcome)
    assert [r.phase for r in rows] == ["stream", "total"]
    assert {r.status for r in rows} == {ERROR} and rows[0].ready_s == 1.0 and rows[0].load_s == 0.5
    assert {r.model for r in rows} == {"port"}
