"""Peer: runai-model-streamer (vLLM's streaming loader), its tensors handed to jax through DLPack.

`SafetensorsStreamer.stream_files(files, device="cpu", tensor_names=planned)` reads with its own
C++ thread pool into CPU buffers; every tensor it yields is owned (`owned=True`, its default), then
becomes a jax array through DLPack and is cast and placed like ours (`loader.strategies._peer`).
Needs torch and runai-model-streamer: `make peers` (or `pip install 'loadbench[peers]'`).

One process: runai's distributed mode (vLLM's `distributed` option: each rank streams a share of
the tensors into GPU memory, then they are broadcast over torch.distributed) needs NCCL on CUDA or
ROCm devices, which a CPU host has not; a bench run with `--processes` gives each count above 1 a
skipped row saying so (`WHY_NOT_MULTIPROCESS`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from loader.sequence import Recipe
from loader.strategies._peer import PeerStream
from loader.vocabulary import PEER

KIND = PEER
REQUIRES = ("torch", "runai_model_streamer")
INSTALL_HINT = "make peers"
WHY_NOT_MULTIPROCESS = (
    "runai's distributed mode needs NCCL on CUDA or ROCm devices (each rank streams some "
    "tensors, then torch.distributed broadcasts them); loadbench runs runai as one process"
)


def _open(
    files: list[str], wanted: set[str]
) -> tuple[Iterator[tuple[str, Any]], Callable[[], None]]:
    from runai_model_streamer import SafetensorsStreamer

    streamer = SafetensorsStreamer()
    streamer.__enter__()
    try:
        streamer.stream_files([str(f) for f in files], device="cpu", tensor_names=wanted or None)
    except BaseException:
        streamer.__exit__(None, None, None)
        raise
    return streamer.get_tensors(), lambda: streamer.__exit__(None, None, None)


RECIPE = Recipe(lambda: PeerStream(_open, "runai-model-streamer"))


load = RECIPE.load  # the Strategy: `run_load(RECIPE, target, path, probe, ...)`
