"""Each planned step's job type, chosen once, when its job is made: the way its leaf travels.

`JobTypes.job(step)` gathers what the step's job is made from (`Made`: its stored tensor's bytes,
a speculative buffer already filled or else the byte source's; the strided view of a declared
transform) and chooses, once, the job type, which carries its own behaviour from then on
(`loader.pipeline.jobs.Job`): the engine never asks a job which type it is.

- `HostCopyJob` where the leaf cannot be adopted (a PRNG key, a Python scalar, a transform by a
  callable): the whole tensor into one host buffer, made the value on the main thread;
- `LayerJob`: a layer of a stacked leaf, into its slices of the leaf's buffers (allocated for its
  first layer: `loader.pipeline.stacked`);
- `RingJob` on the staged path (the engine has a ring sender): the leaf as stored, or a
  transposed block of it, chunk by chunk onto its devices (`loader.pipeline.ring_job`);
- `AdoptJob` otherwise (also on the staged path, for a view the device cannot take as one block):
  into buffers its devices adopt.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from loader.budget import ByteBudget
from loader.format import TensorInfo
from loader.pipeline.jobs import AdoptJob, HostCopyJob, Job, is_adoptable, job_view, reader_error
from loader.pipeline.regions import Bytes, MemoryBytes
from loader.pipeline.ring import RingSender
from loader.pipeline.ring_job import RingJob
from loader.pipeline.sizing import Sizing
from loader.pipeline.sources import ByteSource
from loader.pipeline.speculation import Speculated, Speculation
from loader.pipeline.stacked import LayerJob, StackBuffers
from loader.planning.plan import Stacked, Step
from loader.transforms import View

__all__ = ["JobTypes", "Made"]


@dataclass(frozen=True)
class Made:
    """What one step's job is made from: its stored tensor (`info`), where its bytes come from
    (`data`), the file named in errors, its declared transform's `view` (None: as stored) and
    its speculative read, if one was made."""

    step: Step
    info: TensorInfo
    data: Bytes
    file: str
    view: View | None
    spec: Speculated | None
    adoptable: bool  # its devices can take its buffers as its value (`jobs.is_adoptable`)


@dataclass
class JobTypes:
    """The job of each step of one load, its type chosen once (see the module docstring).

    Example:
        >>> jobs = [JobTypes(source, speculation, sizing, budget, sender).job(s) for s in steps]
    """

    source: ByteSource
    speculation: Speculation
    sizing: Sizing
    budget: ByteBudget
    sender: RingSender | None = None
    _stacks: dict[int, StackBuffers] = field(default_factory=dict)  # id(Stacked) -> its buffers

    def job(self, step: Step) -> Job[Any]:
        """The step's job, reusing (or reading from) its speculative buffer if there is one; a
        failed speculative read is raised as the tensor's error."""
        made = self._made(step)
        return self._type_of(made)(made)

    def _made(self, step: Step) -> Made:
        info = self.source.info(step.file_key)
        file = str(self.source.file_of(info.name))
        if step.file_key in self.speculation.errors:
            raise reader_error(
                f"{file}: tensor {info.name!r}", self.speculation.errors[step.file_key]
            )
        spec = self.speculation.take(step.file_key)
        data: Bytes
        if spec is not None and spec.filled:
            data = MemoryBytes(spec.buffer)
        else:
            data = self.source.tensor_bytes(info.name)
        view = job_view(step, info)
        return Made(step, info, data, file, view, spec, is_adoptable(step, view))

    def _type_of(self, made: Made) -> Callable[[Made], Job[Any]]:
        """The job type, chosen once: a maker of that type's job."""
        if not made.adoptable:
            return self._host_copy
        if made.step.layer is not None:
            return self._layer
        if self.sender is not None and (made.view is None or made.view.permuted_block()):
            return self._ring
        return self._adopt

    def _host_copy(self, m: Made) -> HostCopyJob:
        return HostCopyJob.start(m.step, m.info, m.data, m.file, self.budget, spec=m.spec)

    def _layer(self, m: Made) -> LayerJob:
        assert m.step.layer is not None, f"{m.file}: {m.info.name!r} is no layer"
        stack = self._stack_buffers(m.step.layer.group)
        job = LayerJob.of_layer(
            m.step, m.info, m.data, m.file, self.budget, stack, view=m.view, spec=m.spec
        )
        job.max_part_bytes = self.sizing.max_part_bytes  # one request, where bytes go in order
        return job

    def _ring(self, m: Made) -> RingJob:
        assert self.sender is not None, "JobTypes: a ring job without a ring sender"
        block = m.view.permuted_block() if m.view is not None else None
        return RingJob.start(
            m.step,
            m.info,
            m.data,
            m.file,
            self.sender,
            block=block,
            scratch_bytes=self.sizing.scratch_bytes,
        )

    def _adopt(self, m: Made) -> AdoptJob:
        job = AdoptJob.start(m.step, m.info, m.data, m.file, self.budget, view=m.view, spec=m.spec)
        job.max_part_bytes = self.sizing.max_part_bytes  # one request, where bytes go in order
        return job

    def _stack_buffers(self, group: Stacked) -> StackBuffers:
        """The buffers of a stacked leaf, allocated for its first layer's job."""
        if id(group) not in self._stacks:
            self._stacks[id(group)] = StackBuffers.allocate(group)
        return self._stacks[id(group)]
