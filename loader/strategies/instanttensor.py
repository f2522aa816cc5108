"""Peer: InstantTensor (the fast loader vLLM and SGLang use onto CUDA GPUs), its tensors handed to
jax through DLPack on the device.

`safe_open(files, framework="pt", device=<cuda>, tensor_filter=planned)` pipelines reads (io_uring
or AIO; buffered here, so a warm page cache serves it as it serves ours), host staging and
transfers into its own GPU ring buffer; every tensor it yields is a CUDA tensor it owns
(`copy=True`), handed to jax with DLPack (no host copy) and cast there when the model's dtype
differs, then placed like ours (`loader.strategies._peer`). It loads onto CUDA devices only: on a
host without one it is listed as unavailable with that reason. Needs torch and instanttensor:
`make peers` (or `pip install 'loadbench[peers]'`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from loader.sequence import Recipe
from loader.strategies._peer import PeerStream
from loader.vocabulary import PEER

KIND = PEER
REQUIRES = ("torch", "instanttensor")
INSTALL_HINT = "make peers"
PLATFORMS = ("cuda",)


def _open(
    files: list[str], wanted: set[str]
) -> tuple[Iterator[tuple[str, Any]], Callable[[], None]]:
    import torch
    from instanttensor import BackendPolicy, safe_open

    handle = safe_open(
        [str(f) for f in files],
        framework="pt",
        device=torch.cuda.current_device(),
        backend=BackendPolicy.BUFFERED,  # the page cache serves a warm load, as it serves ours
        tensor_filter=sorted(wanted),
        tensor_name_match_mode="exact",
    )
    handle.__enter__()
    return handle.tensors(), lambda: handle.__exit__(None, None, None)


RECIPE = Recipe(lambda: PeerStream(_open, "instanttensor", on_device=True))


load = RECIPE.load  # the Strategy: `run_load(RECIPE, target, path, probe, ...)`
