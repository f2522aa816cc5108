"""Peer: fastsafetensors (IBM's loader used by vLLM), its tensors handed to jax through DLPack.

`fastsafe_open(files, framework="pt", device="cpu", nogds=True)` copies the files into one host
buffer with its own threads (no GPUDirect here), then `get_tensor(name)` gives tensors that share
ownership of that buffer; each becomes a jax array through DLPack and is cast and placed like ours
(`loader.strategies._peer`). Needs torch and fastsafetensors: `make peers` (or `pip install
'loadbench[peers]'`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from loader.sequence import Recipe
from loader.strategies._peer import PeerStream
from loader.vocabulary import PEER

KIND = PEER
REQUIRES = ("torch", "fastsafetensors")
INSTALL_HINT = "make peers"


def _open(
    files: list[str], wanted: set[str]
) -> tuple[Iterator[tuple[str, Any]], Callable[[], None]]:
    from fastsafetensors import fastsafe_open

    handle = fastsafe_open([str(f) for f in files], framework="pt", device="cpu", nogds=True)
    names = [n for n in handle.keys() if n in wanted]  # noqa: SIM118 - not a mapping
    tensors = ((n, handle.get_tensor(n)) for n in names)
    return tensors, lambda: handle.__exit__(None, None, None)


RECIPE = Recipe(lambda: PeerStream(_open, "fastsafetensors"))


load = RECIPE.load  # the Strategy: `run_load(RECIPE, target, path, probe, ...)`
