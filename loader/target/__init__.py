"""What a load writes into: a model instance, or a builder that is built abstractly.

With a zero-argument builder no random model ever exists: it is built with `nnx.eval_shape`
semantics (through `loader.target.abstract.abstract_build`, linear in the parameter count) and every
leaf is then filled from the file.
"""

from __future__ import annotations

from typing import Any

from flax import nnx

from loader.errors import CheckpointError
from loader.target.abstract import abstract_build


def resolve_target(target: Any) -> tuple[Any, bool]:
    """(model, is_abstract) for a module instance or a zero-argument builder."""
    if isinstance(target, nnx.Pytree):  # a Module, an Optimizer, any NNX graph object
        return target, False
    if callable(target):
        return abstract_build(target), True
    raise CheckpointError(
        "load target must be an nnx.Module or a zero-argument builder returning one, "
        f"got {type(target).__name__}"
    )


def build_instance(target: Any) -> Any:
    """A real (randomly initialised) instance: the target itself, or the builder called."""
    if isinstance(target, nnx.Pytree):
        return target
    if callable(target):
        return target()
    raise CheckpointError(
        f"load target must be an nnx.Module or a builder, got {type(target).__name__}"
    )
