"""The pipelined load engine: reads overlap the model build, run on several threads, cast in chunks.

`Pipeline` is an executor with three hooks — `start(source, probe)` before the build, `fill(plan,
source, probe)` after the plan check, `close()` always — that the `pipelined` strategy runs. The
host bytes alive beyond the final model's own stay within a budget (`DEFAULT_BUDGET_BYTES`,
256 MiB, unless `budget=` says otherwise).

Modules: `cast` (bit-exact chunk casts that release the GIL), `regions` (a tensor's index region
into a buffer, in chunks), `views` (a declared key_map transform's strided view into a buffer, in
chunks), `jobs` (per-leaf destinations and parts), `speculation` (reads made while the model is
built), `order` (file order, files in turn; runs of small adjacent tensors read at once into one
arena), `engine` (the threads, start / fill / close); for a backend that does not adopt host buffers
(or `staging=True`): `staging` (the bounded ring of host staging buffers, pinned or pageable),
`staged` (per-device regions in chunks through it), `ring_size` (how the budget is split, and its
minimum); `options` (the budget, `threads=` sized from the usable CPUs and the page cache, the stats
record, the reader error); `cache_fit` (which tensors `cache_policy=` drops from the page cache once
read). The aligned, prefaulted buffers the reads go into are `loader.format.buffers`'s.
"""

from loader.pipeline.engine import Pipeline, PipelineStats
from loader.pipeline.options import DEFAULT_BUDGET_BYTES, ByteBudget

__all__ = ["DEFAULT_BUDGET_BYTES", "ByteBudget", "Pipeline", "PipelineStats"]
