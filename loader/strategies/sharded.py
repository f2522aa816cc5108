"""One file or URL; each addressable device reads only its own index range, then assembled.

Each tensor is placed with the model's sharding, or, where the model declares none, with the rule of
`loader.sharded.rule` (largest axis divisible by the device count, the rest replicated), exactly as
`sharded-dir` places it (`loader.sharded.rule.apply_rule`), and read by the same slice reader
(`loader.sharded.slices.SliceReader`) over the file seen as a layout of whole-tensor slices;
identical slices (replicated tensors) are read once per process. A local file is read with
`os.preadv`; a URL (`loader.remote`'s stores) by checked, retried range requests of this
process's own ranges only, planned into few large requests that read at most `max_over_read` times
the share (`loader.sharded.read_plan`), `concurrency` in flight (`loader.sharded.remote`), and the
report gives the bytes received and the plan (`LoadReport.remote`) beside this process's share
(`LoadReport.share_bytes`). The ranges are read ahead of the tensor being placed within
`budget` bytes, counted as `pipelined` counts its bytes in flight
(`loader.sharded.slices.ReadAhead`; the high-water mark is `LoadReport.inflight_peak_bytes`).
Runs in one process or as several cooperating `jax.distributed` processes. `share="bytes"` has
each process read a contiguous leading-axis block of each tensor instead and reach the model's
sharding with JAX's resharding over the interconnect; `share="auto"` (the default) chooses per
load (`loader.sharded.share`); `LoadReport.share` says what was chosen, why, and the bytes
exchanged between processes.
"""

from __future__ import annotations

from typing import Any

from loader.report import LoadReport
from loader.sequence import LoadRequest
from loader.sharded.load import file_recipe

MULTIPROCESS = True
REMOTE = True
#: The option groups this strategy takes (`loader.options`): `budget` (host bytes read ahead of
#: the tensor being placed; 256 MiB by default, as `pipelined`'s), a URL's `concurrency` (range
#: requests in flight; `loader.remote.DEFAULT_CONCURRENCY` by default), `sharing` (`share`: how
#: the processes split the checkpoint, "regions", "bytes" or "auto", the default,
#: `loader.sharded.share`; `max_over_read`: the most a URL's read plan reads over the process's
#: share), and `checking` (what a URL's bytes are checked against and how long it waits).
OPTIONS = ("reading.budget", "remote.concurrency", "sharing", "checking")


def load(request: LoadRequest) -> tuple[Any, LoadReport]:
    """Fill the target from this process's index ranges of the checkpoint (a path or a URL).

    `request.options`: the groups it declares, as they are (`loader.sharded.load.file_recipe`;
    each value checked when the groups were made).
    """
    return file_recipe(request.options).run(request)
