"""Abstract (shape-only) model construction whose cost grows linearly with the parameter count.

`abstract_build(builder)` returns exactly what `nnx.eval_shape(builder)` returns. It calls
`nnx.eval_shape` itself, so the graph definition, state paths, shapes, dtypes, variable types,
metadata and shardings are produced by flax; only one piece of wasted work is skipped.

Why plain `nnx.eval_shape` is quadratic (jax 0.10.2, flax 0.12.8): every parameter initialiser
draws a key from `nnx.Rngs`, whose `count[...] += 1` reaches `Variable.set_value`, which compares
`getattr(value, 'sharding', None)` of two tracers. `jax.core.Tracer.sharding` is a property that
raises `AttributeError` with a message built by `DynamicJaxprTracer._origin_msg()`, which walks
every equation traced so far (`find_progenitors`). Python then discards that message: when a
property raises `AttributeError`, `Tracer.__getattr__` is called and raises its own, cheap error
("The 'sharding' attribute is not available on traced array ... use `jax.typeof(x)`"), which is
the one every caller sees. So each of the N parameters pays O(N) for a string nobody reads.

The fast path, for the duration of one call and only on the calling thread, makes that property
raise a bare `AttributeError`, so `Tracer.__getattr__` produces the same final exception (same
type, same message, no chained context) without the walk. Other threads keep the original
property's behaviour; the class attribute is restored in `finally` when the last concurrent call
ends. Before first use the fast path checks, on a tiny trace, that the exception a caller sees is
unchanged; if that check or the patch cannot apply (another jax version), it falls back to plain
`nnx.eval_shape` with a one-line `AbstractBuildWarning`.

Either way the build runs with Python's cyclic garbage collector paused (`gc_paused`): tracing a
model allocates hundreds of thousands of small, mostly long-lived objects, and each collection
they trigger scans them and calls jax's own collection hook. sa3's abstract build, fresh
processes on the 2-vCPU development VM: 0.54-0.61 s collected, 0.45-0.47 s paused (docs/results.md).
"""

from __future__ import annotations

import contextlib
import functools
import gc
import threading
import warnings
from collections.abc import Callable, Iterator
from typing import TypeVar

import jax
import jax.numpy as jnp
from flax import nnx

M = TypeVar("M")

_ATTR = "sharding"  # the Tracer property whose discarded message costs O(trace length)

_local = threading.local()  # .depth: nesting of fast-path calls on this thread
_lock = threading.Lock()  # guards _installed / _saved (the class attribute swap)
_installed = 0
_saved: property | None = None


class AbstractBuildWarning(UserWarning):
    """`abstract_build` fell back to plain `nnx.eval_shape` (correct, but quadratic in time)."""


def abstract_build(builder: Callable[[], M]) -> M:
    """Build a model abstractly: `nnx.eval_shape(builder)`, in time linear in the parameter count.

    Args:
        builder: a zero-argument callable that constructs the NNX module (for example
            `lambda: MyModel(config, rngs=nnx.Rngs(0))`). It is called exactly once.

    Returns:
        The same model `nnx.eval_shape(builder)` returns: every leaf a `jax.ShapeDtypeStruct`
        (with `.sharding` where a mesh and partitioning annotations give one).

    Example:
        >>> model = abstract_build(lambda: nnx.Linear(4, 2, rngs=nnx.Rngs(0)))
        >>> model.kernel.shape
        (4, 2)
    """
    reason = _check_equivalence()
    if reason is None:
        try:
            _enter_fast_scope()
        except Exception as exc:  # noqa: BLE001 - any failure to patch means: use the slow path
            reason = f"the tracer patch could not be installed ({type(exc).__name__}: {exc})"
        else:
            try:
                with gc_paused():
                    return nnx.eval_shape(builder)
            finally:
                _exit_fast_scope()
    reason = " ".join(reason.split())[:300]  # one line, however long the cause
    warnings.warn(
        f"abstract_build: falling back to plain nnx.eval_shape (quadratic in the parameter "
        f"count) because {reason}",
        AbstractBuildWarning,
        stacklevel=2,
    )
    with gc_paused():
        return nnx.eval_shape(builder)


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Python's cyclic garbage collector disabled for the block, and enabled again after it only
    if this block disabled it (a caller that had it off keeps it off; a collection the block
    needs, `gc.collect()`, still runs)."""
    paused = gc.isenabled()
    if paused:
        gc.disable()
    try:
        yield
    finally:
        if paused:
            gc.enable()


def _tracer_class() -> type:
    return jax.core.Tracer


def _original_property() -> property | None:
    """The un-patched `Tracer.sharding` property, or None if this jax has no such property."""
    tracer = _tracer_class()
    current = tracer.__dict__.get(_ATTR)
    if isinstance(current, _FastProperty):
        return current.original
    return current if isinstance(current, property) and current.fget is not None else None


class _FastProperty(property):
    """`Tracer.sharding` while patched: on a thread inside `abstract_build`, raise a bare
    `AttributeError` (so `Tracer.__getattr__` builds the message callers see); elsewhere,
    behave exactly like the original property."""

    def __init__(self, original: property) -> None:
        super().__init__(self._get, doc=original.__doc__)
        if original.fget is None:
            raise TypeError("abstract_build: Tracer.sharding is a property without a getter")
        self.original = original
        self._original_get = original.fget

    def _get(self, tracer: object) -> object:
        if getattr(_local, "depth", 0):
            raise AttributeError(_ATTR)
        return self._original_get(tracer)


def _enter_fast_scope() -> None:
    """From now on, on this thread, skip building the discarded `sharding` message."""
    global _installed, _saved
    with _lock:
        if _installed == 0:
            original = _original_property()
            if original is None:
                raise RuntimeError(f"jax.core.Tracer.{_ATTR} is not a property")
            setattr(_tracer_class(), _ATTR, _FastProperty(original))
            _saved = original
        _installed += 1
    _local.depth = getattr(_local, "depth", 0) + 1


def _exit_fast_scope() -> None:
    """Undo one `_enter_fast_scope`; the last one out restores the original property."""
    global _installed, _saved
    _local.depth -= 1
    with _lock:
        _installed -= 1
        if _installed == 0:
            if isinstance(_tracer_class().__dict__.get(_ATTR), _FastProperty):
                setattr(_tracer_class(), _ATTR, _saved)
            _saved = None


@contextlib.contextmanager
def _fast_scope() -> Iterator[None]:
    _enter_fast_scope()
    try:
        yield
    finally:
        _exit_fast_scope()


@functools.cache
def _check_equivalence() -> str | None:
    """Why the fast path cannot apply with the installed jax, or None if it can (cached).

    The check traces a tiny function twice and compares what `tracer.sharding` raises with and
    without the patch: the fast path is used only if a caller could not tell the difference.
    """
    try:
        if _original_property() is None:
            return f"jax.core.Tracer.{_ATTR} is not a property in jax {jax.__version__}"
        plain = _observed_error()
        with _fast_scope():
            fast = _observed_error()
    except Exception as exc:  # noqa: BLE001 - whatever went wrong, the slow path still works
        return f"the tracer patch failed on a probe trace ({type(exc).__name__}: {exc})"
    if fast != plain:
        return f"the probe saw a different error for tracer.{_ATTR}: {fast!r} != {plain!r}"
    return None


def _observed_error() -> tuple[object, ...]:
    """What `tracer.sharding` raises inside a small trace: (type, message, context, cause)."""
    seen: list[tuple[object, ...]] = []

    def probe(x: jax.Array) -> jax.Array:
        y = jnp.sin(x) + 1  # a few equations, so the original message has an origin to walk
        try:
            getattr(y, _ATTR)
        except AttributeError as exc:
            seen.append((type(exc), str(exc), repr(exc.__context__), repr(exc.__cause__)))
        else:
            seen.append(("no error",))
        return y

    jax.eval_shape(probe, jax.ShapeDtypeStruct((2,), jnp.float32))
    return seen[0] if seen else ("not traced",)
