"""Micro-benchmark: abstract build time against parameter count, plain `nnx.eval_shape` vs fast
path.

Builds an `sa3`-shaped stack (nested modules, an `nnx.List` of transformer layers of 34 parameter
tensors each, embedding, final norm and head: 20 layers give 685 tensors and ~567M parameters)
for several layer counts, in the current process, once with plain `nnx.eval_shape` and once with
`loader.abstract.abstract_build`. Plain `nnx.eval_shape` grows with the square of the tensor
count; the fast path grows linearly. This is a phase figure for the bench, not a timed test.

Run: `.venv/bin/python -m bench.child.abstract_build [LAYERS ...]`
"""

from __future__ import annotations

import gc
import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from flax import nnx

from loader.abstract import abstract_build

# sa3's DiT: embed 1024, ff 4096; the vocabulary is sized so 20 layers hold ~567M parameters.
WIDTH, FF, VOCAB, EXPERTS = 1024, 4096, 105_000, 3


@dataclass(frozen=True)
class BuildTiming:
    """The abstract build of one layer count: its size and both paths' times (`bench abstract
    --json` prints these fields)."""

    layers: int
    params: int  # parameter elements
    tensors: int  # parameter tensors
    eval_shape_s: float  # plain `nnx.eval_shape`
    fast_s: float  # `loader.abstract.abstract_build`


class Attention(nnx.Module):
    """q, k, v, o projections with bias and q/k norms: 12 tensors."""

    def __init__(self, d: int, rngs: nnx.Rngs) -> None:
        self.q = nnx.Linear(d, d, rngs=rngs)
        self.k = nnx.Linear(d, d, rngs=rngs)
        self.v = nnx.Linear(d, d, rngs=rngs)
        self.o = nnx.Linear(d, d, rngs=rngs)
        self.q_norm = nnx.LayerNorm(d, rngs=rngs)
        self.k_norm = nnx.LayerNorm(d, rngs=rngs)


class Mlp(nnx.Module):
    """Gated feed-forward with bias: 6 tensors."""

    def __init__(self, d: int, ff: int, rngs: nnx.Rngs) -> None:
        self.gate = nnx.Linear(d, ff, rngs=rngs)
        self.up = nnx.Linear(d, ff, rngs=rngs)
        self.down = nnx.Linear(ff, d, rngs=rngs)


class Layer(nnx.Module):
    """A transformer layer: attention, MLP, a router with small experts, four norms: 34 tensors."""

    def __init__(self, d: int, ff: int, rngs: nnx.Rngs) -> None:
        self.attn = Attention(d, rngs)
        self.mlp = Mlp(d, ff, rngs)
        self.router = nnx.Linear(d, 8, rngs=rngs)
        self.experts = nnx.List([nnx.Linear(d, d // 4, rngs=rngs) for _ in range(EXPERTS)])
        self.norms = nnx.List([nnx.LayerNorm(d, rngs=rngs) for _ in range(4)])


class Sa3Like(nnx.Module):
    """Embedding, `layers` transformer layers, final norm and head: 34 * layers + 5 tensors."""

    def __init__(
        self, layers: int, d: int = WIDTH, ff: int = FF, vocab: int = VOCAB, *, rngs: nnx.Rngs
    ) -> None:
        self.embed = nnx.Embed(vocab, d, rngs=rngs)
        self.layers = nnx.List([Layer(d, ff, rngs) for _ in range(layers)])
        self.final_norm = nnx.LayerNorm(d, rngs=rngs)
        self.head = nnx.Linear(d, vocab, rngs=rngs)


def sa3_like_builder(layers: int, **dims: int) -> Callable[[], Sa3Like]:
    """A zero-argument builder of an `Sa3Like` stack (what a user hands to `load_model`).

    Args:
        layers: number of transformer layers (20 is sa3's depth).
        **dims: optional `d`, `ff`, `vocab` overrides (tests use tiny ones).

    Returns:
        A callable that constructs the model with `nnx.Rngs(0)`.
    """
    return lambda: Sa3Like(layers, **dims, rngs=nnx.Rngs(0))


def _timed(build: Callable[[Callable[[], Sa3Like]], Sa3Like], layers: int) -> tuple[float, Sa3Like]:
    builder = sa3_like_builder(layers)  # a fresh callable: no trace cache can be reused
    gc.collect()
    start = time.perf_counter()
    model = build(builder)
    return time.perf_counter() - start, model


def measure(layers_list: Sequence[int] = (5, 10, 20, 40)) -> list[BuildTiming]:
    """Time the abstract build of `Sa3Like` stacks with plain `nnx.eval_shape` and the fast path.

    Args:
        layers_list: the layer counts to build.

    Returns:
        One `BuildTiming` per layer count.
    """
    for build in (nnx.eval_shape, abstract_build):  # warm up jax and the fast path's probe
        _timed(build, 1)
    rows = []
    for layers in layers_list:
        fast_s, model = _timed(abstract_build, layers)
        plain_s, _ = _timed(nnx.eval_shape, layers)
        shapes = [v.shape for v in nnx.state(model, nnx.Param).flat_state().leaves]
        params = sum(math.prod(s) for s in shapes)
        rows.append(BuildTiming(layers, params, len(shapes), plain_s, fast_s))
    return rows


def format_table(rows: list[BuildTiming]) -> str:
    """The rows as a text table, with each time's growth relative to the first row."""
    lines = [
        f"{'layers':>6} {'tensors':>7} {'params':>12} {'eval_shape_s':>12} {'fast_s':>8} "
        f"{'speedup':>8} {'growth(plain/fast)':>19}"
    ]
    for r in rows:
        first = rows[0]
        growth = f"{r.eval_shape_s / first.eval_shape_s:.1f}x/{r.fast_s / first.fast_s:.1f}x"
        lines.append(
            f"{r.layers:>6} {r.tensors:>7} {r.params:>12,} {r.eval_shape_s:>12.3f} "
            f"{r.fast_s:>8.3f} {r.eval_shape_s / r.fast_s:>7.1f}x {growth:>19}"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    layer_counts = tuple(int(a) for a in sys.argv[1:]) or (5, 10, 20, 40)
    print(format_table(measure(layer_counts)))
