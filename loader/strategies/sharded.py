"""One file or URL; each addressable device reads only its own index range, then assembled.

Each tensor is placed with the model's sharding, or, where the model declares none, with the rule of
`loader.sharded.rule` (largest axis divisible by the device count, the rest replicated), exactly as
`sharded-dir` places it (`loader.sharded.load.apply_rule`), and read by the same slice reader
(`loader.sharded.slices.SliceReader`) over the file seen as a layout of whole-tensor slices;
identical slices (replicated tensors) are read once per process. A local file is read with
`os.preadv`; a URL (`https://`, `s3://`, `hf://`) by checked, retried range requests of this
process's own ranges only, planned into few large requests that read at most `max_over_read` times
the share (`loader.sharded.read_plan`), `concurrency` in flight (`loader.sharded.remote`), and the
report gives the bytes received and the plan (`LoadReport.remote`) beside this process's share
(`LoadReport.share_bytes`).
Runs in one process or as several cooperating `jax.distributed` processes. `share="bytes"` has
each process read a contiguous leading-axis block of each tensor instead and reach the model's
sharding with JAX's resharding over the interconnect; `share="auto"` (the default) chooses per
load (`loader.sharded.share`); `LoadReport.share` says what was chosen, why, and the bytes
exchanged between processes.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from loader.phases import Probe
from loader.remote import RemoteOptions, is_url
from loader.report import LoadReport
from loader.sequence import LoadArgs, run_load
from loader.sharded.load import file_recipe
from loader.sharded.share import check_share

MULTIPROCESS = True
REMOTE = True
#: `loader.load_model`'s options this strategy takes: a URL's `concurrency` (range requests in
#: flight; `loader.remote.DEFAULT_CONCURRENCY` by default), `max_over_read` (the most its read
#: plan reads over the process's share; `loader.remote.options.DEFAULT_MAX_OVER_READ` by
#: default), what its bytes are checked against and how long it waits
#: (`loader.remote.INTEGRITY_OPTIONS`), and, for a local file too, `share` (how the processes
#: split the checkpoint: "regions", "bytes" or "auto", the default; `loader.sharded.share`).
OPTIONS = (
    "concurrency",
    "max_over_read",
    "digest",
    "unvalidated",
    "idle_timeout",
    "timeout",
    "share",
)


def load(
    target: Any,
    path: str | os.PathLike[str],
    probe: Probe,
    args: LoadArgs,
    options: Mapping[str, Any],
) -> tuple[Any, LoadReport]:
    """Fill `target` from this process's index ranges of the checkpoint at `path` (or URL).

    `options`: `RemoteOptions`', for a URL only (refused in one line for a local path), and
    `share` (`loader.sharded.share.check_share`), each checked before anything is read.
    """
    share = check_share(options.get("share"))
    remote = RemoteOptions.of(options)
    if not is_url(path):
        remote.refuse_local(path)
    return run_load(file_recipe(remote, share), target, path, probe, args)
