"""Peer: a JAX model zoo's own loader, tunix's `load_and_create_model` (google-tunix), into one of
tunix's own NNX model classes; the target says which.

tunix builds the model with `nnx.eval_shape`, maps every file whole, takes `np.frombuffer` views
(its key mapping's transposes and reshapes as views), `jax.device_put`s each leaf and
`nnx.merge`s the state (phase `stream`: it is one call). The target must be a `ZooTarget`: a
builder of a tunix model that also carries its class, config and tunix's key mapping (what
`bench run --model zoo` builds); tunix reads every `*.safetensors` in the checkpoint's folder.
Planning and the report are the core's, from the headers and the key map built from tunix's own
mapping, before tunix reads anything; the arrays tunix placed are then put into the planned
leaves as they are (`assemble`). tunix's import turns a flax flag off for the whole process
(`SHARD_FLAG`); here it is off only while tunix's code runs (`tunix_flax`). Needs google-tunix:
`make zoo`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from loader.errors import CheckpointError
from loader.format.source import CheckpointSource
from loader.phases import ASSEMBLE, STREAM, Probe
from loader.placement.materialize import assign
from loader.planning.plan import LoadPlan
from loader.report import LoadReport
from loader.sequence import LoadRequest, Recipe
from loader.vocabulary import PEER

KIND = PEER
REQUIRES = ("tunix",)
INSTALL_HINT = "make zoo"
MODELS = ("zoo",)  # `bench run --model zoo`: tunix's own model classes only


#: tunix turns this flax flag off, process-wide, when its models are imported: they annotate their
#: parameters with shardings that flax would otherwise insist on placing at creation
SHARD_FLAG = "flax_always_shard_variable"


@contextlib.contextmanager
def tunix_flax() -> Iterator[None]:
    """flax configured as tunix's models need it (`SHARD_FLAG` off) inside the block, and as it
    was after it: importing or building tunix's models never changes how other models shard."""
    import flax

    before = getattr(flax.config, SHARD_FLAG, None)
    if before is None:  # a flax without the flag: nothing to set
        yield
        return
    flax.config.update(SHARD_FLAG, False)
    try:
        yield
    finally:
        flax.config.update(SHARD_FLAG, before)


@runtime_checkable
class ZooTarget(Protocol):
    """A builder of a tunix model that says how tunix itself would load it."""

    model_class: type
    config: Any
    key_mapping: Callable[[Any], Mapping[str, Any]]  # tunix's: config -> {regex: (key, rule)}

    def __call__(self) -> Any: ...


@dataclass
class TunixLoad:
    """An `Executor` (see `loader.sequence`): tunix's loader over the checkpoint's folder
    (`stream`), then its arrays into the planned leaves (`assemble`)."""

    zoo: ZooTarget

    def start(self, source: CheckpointSource, probe: Probe) -> None:
        return None

    def fill(self, plan: LoadPlan, source: CheckpointSource, probe: Probe) -> None:
        from loader.placement.leaves import iter_variables

        with tunix_flax():
            from tunix.models import safetensors_loader

        folder = Path(source.files[0]).parent
        with probe.phase(STREAM), tunix_flax():
            loaded = safetensors_loader.load_and_create_model(
                file_dir=str(folder),
                model_class=self.zoo.model_class,
                config=self.zoo.config,
                key_mapping=self.zoo.key_mapping,
                mode="optimized",
            )
        with probe.phase(ASSEMBLE):
            arrays = {".".join(map(str, p)): v.get_value() for p, v in iter_variables(loaded)}
            del loaded
            for step in plan.steps:
                value = arrays.pop(step.leaf.key, None)
                if value is None:
                    raise CheckpointError(
                        f"{source.path}: tunix loaded no array for {step.leaf.key!r}"
                    )
                assign(step.leaf, value)
                plan.report.loaded.append(step.leaf.key)

    def close(self) -> None:
        return None


def load(request: LoadRequest) -> tuple[Any, LoadReport]:
    """`run_load` with tunix's loader as the executor; the target must be a `ZooTarget`."""
    target = request.target
    if not isinstance(target, ZooTarget):
        raise CheckpointError(
            f"strategy 'tunix' loads tunix's own model classes: the target must carry "
            f"model_class, config and key_mapping (a ZooTarget, what `bench run --model zoo` "
            f"builds), got {type(target).__name__}"
        )
    return Recipe(lambda: TunixLoad(target)).load(request)
