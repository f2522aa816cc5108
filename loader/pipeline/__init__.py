"""The pipelined load engine: reads overlap the model build, run on several threads, cast in chunks.

`Pipeline` is an executor with three hooks — `start(source, probe)` before the build, `fill(plan,
source, probe)` after the plan check, `close()` always — that the `pipelined` strategy runs, with
its options in one `PipelineOptions` (checked once). The host bytes alive beyond the final model's
own stay within a budget (`DEFAULT_BUDGET_BYTES`, 256 MiB, unless `budget=` says otherwise).

Modules, in the order a load meets them:
- `options`: `PipelineOptions`, the reader-thread count, the stats record, the reader error;
- `budget`: the bound on host bytes in flight (`ByteBudget`) and how it is split (scratch, ring);
- `speculation`: whole tensors read while the model is built;
- `cache_fit`: which tensors `cache_policy=` drops from the page cache once read;
- `jobs`: the `Job` protocol and the ways a leaf travels: `AdoptJob` (into buffers its devices
  adopt), `HostCopyJob` (whole into a host buffer, then made its value); `stacked`: `LayerJob`
  (a layer of a stacked leaf, into its slices of the leaf's buffers);
- `ring_job`: `RingJob` (chunks through the staging ring onto its devices, for a backend that
  does not adopt host buffers, or `staging=True`), `ring`: the staging ring itself;
- `order`: file order, files in turn; runs of small adjacent tensors read at once into one arena;
- `regions` (a tensor's index region into a buffer, in chunks), `views` (a declared key_map
  transform's strided view into a buffer, in chunks), `cast` (bit-exact chunk casts that release
  the GIL): how the bytes are read;
- `engine`: `Pipeline`, the threads, start / fill / close.
The aligned, prefaulted buffers the reads go into are `loader.format.buffers`'s.
"""

from loader.pipeline.budget import DEFAULT_BUDGET_BYTES, ByteBudget
from loader.pipeline.engine import Pipeline, PipelineStats
from loader.pipeline.options import PipelineOptions

__all__ = ["DEFAULT_BUDGET_BYTES", "ByteBudget", "Pipeline", "PipelineOptions", "PipelineStats"]
