"""The pipelined load engine: reads overlap the model build, run on several threads, cast in chunks.

`Pipeline` is an executor with three hooks — `start(source, probe)` before the build, `fill(plan,
source, probe)` after the plan check, `close()` always — that the `pipelined` strategy runs, with
the option groups it takes (`loader.options`: `Reading`, `Placement`, checked when made). The
host bytes alive beyond the final model's own stay within a budget (`DEFAULT_BUDGET_BYTES`,
256 MiB, unless `budget=` says otherwise).

Modules, in the order a load meets them:
- `sources`: the byte source the load reads through (`ByteSource`: `local`, `remote`, `memory`),
  which owns its reader threads, requests, page cache and statistics;
- `sizing`: the load's sizes, worked out once before any thread starts (`Sizing`: threads,
  scratch, requests, the staging ring, the budget's reserve); the bound on host bytes in flight,
  counted as they come, is `loader.budget.ByteBudget` (outside this package: `sharded` counts
  with it too);
- `speculation`: whole tensors read while the model is built;
- `cache_fit`: which tensors `cache_policy=` drops from the page cache once read;
- `job_types`: each step's job type, chosen once when its job is made (`JobTypes`);
- `jobs`: the `Job` protocol and the ways a leaf travels: `AdoptJob` (into buffers its devices
  adopt), `HostCopyJob` (whole into a host buffer, then made its value); `stacked`: `LayerJob`
  (a layer of a stacked leaf, into its slices of the leaf's buffers);
- `ring_job`: `RingJob` (chunks through the staging ring onto its devices, for a backend that
  does not adopt host buffers, or `staging=True`); `ring_chunks`: how a device's region is cut
  into slot-sized chunks; `ring`: the staging ring itself and `RingSender`, the transfers;
  `device_shards`: a device's shard assembled on the device, and a device out of memory named;
- `order`: file order, files in turn (strictly by offset, a request at a time, where the source
  takes its bytes in file order: a digest-checked URL); runs of small adjacent tensors read at
  once into one arena;
  `fused`: the leaves cut from one stored tensor, its rows read once for all of them;
- `regions` (a tensor's index region into a buffer, in chunks), `views` (a declared key_map
  transform's strided view into a buffer, in chunks), `cast` (bit-exact chunk casts that release
  the GIL): how the bytes are read;
- `engine`: `Pipeline`, the threads, start / fill / close; `stats`: what it did.
The aligned, prefaulted buffers the reads go into are `loader.format.buffers`'s.
"""

from loader.budget import DEFAULT_BUDGET_BYTES, ByteBudget
from loader.pipeline.engine import Pipeline
from loader.pipeline.sizing import Sizing
from loader.pipeline.stats import PipelineStats

__all__ = [
    "DEFAULT_BUDGET_BYTES",
    "ByteBudget",
    "Pipeline",
    "PipelineStats",
    "Sizing",
]
