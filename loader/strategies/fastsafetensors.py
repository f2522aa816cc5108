"""Peer: fastsafetensors (IBM's loader used by vLLM), its tensors handed to jax through DLPack.

`fastsafe_open(files, framework="pt", device="cpu", nogds=True)` copies the files into one host
buffer with its own threads (no GPUDirect here), then `get_tensor(name)` gives tensors that share
ownership of that buffer; each becomes a jax array through DLPack and is cast and placed like ours
(`loader.strategies._peer`). Needs torch and fastsafetensors: `make peers` (or `pip install
'loadbench[peers]'`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from loader.keys import KeyMap
from loader.phases import NULL_PROBE, Probe
from loader.report import LoadReport
from loader.sequence import Recipe, run_load
from loader.strategies._peer import PeerStream
from loader.vocabulary import PEER

KIND = PEER
REQUIRES = ("torch", "fastsafetensors")
INSTALL_HINT = "make peers"


def _open(files: list[Path], wanted: set[str]) -> tuple[Iterator[tuple[str, Any]], Callable]:
    from fastsafetensors import fastsafe_open

    handle = fastsafe_open([str(f) for f in files], framework="pt", device="cpu", nogds=True)
    names = [n for n in handle.keys() if n in wanted]  # noqa: SIM118 - not a mapping
    tensors = ((n, handle.get_tensor(n)) for n in names)
    return tensors, lambda: handle.__exit__(None, None, None)


RECIPE = Recipe(lambda: PeerStream(_open, "fastsafetensors"))


def load(
    target: Any,
    path: str | os.PathLike,
    probe: Probe = NULL_PROBE,
    *,
    strict: bool = False,
    key_map: KeyMap | None = None,
    **options: Any,
) -> tuple[Any, LoadReport]:
    """Load through fastsafetensors into an abstractly built model (see the module docstring)."""
    return run_load(RECIPE, target, path, probe, strict=strict, key_map=key_map)
