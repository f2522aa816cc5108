"""Peer: runai-model-streamer reading the same `s3://` object with its own S3 client (C++, its
thread pool), tensors handed to jax through DLPack; the peer a remote `pipelined` load is measured
beside.

The plan comes from the headers (`loader.remote`, two range requests a file); the tensor bytes are
runai's to fetch (`runai-model-streamer-s3`): `AWS_ENDPOINT_URL` and the usual credentials, path-
style addressing for a custom endpoint (`RUNAI_STREAMER_S3_USE_VIRTUAL_ADDRESSING=0`, as moto and
most S3-compatible servers need). Needs torch, runai-model-streamer and runai-model-streamer-s3.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from loader.remote import FileSource
from loader.remote.source import RemoteSource
from loader.sequence import Recipe
from loader.strategies._peer import PeerStream
from loader.vocabulary import PEER, URL

KIND = PEER
CHECKPOINT = URL
REMOTE = True
REQUIRES = ("torch", "runai_model_streamer", "runai_model_streamer_s3")
INSTALL_HINT = "make peers"


def _open(
    files: list[Path] | list[str], wanted: set[str]
) -> tuple[Iterator[tuple[str, Any]], Callable[[], None]]:
    from runai_model_streamer import SafetensorsStreamer

    if os.environ.get("AWS_ENDPOINT_URL") or os.environ.get("AWS_ENDPOINT_URL_S3"):
        os.environ.setdefault("RUNAI_STREAMER_S3_USE_VIRTUAL_ADDRESSING", "0")
    streamer = SafetensorsStreamer()
    streamer.__enter__()
    try:
        urls = [str(f) for f in files]  # a RemoteSource's files are its objects' URLs
        streamer.stream_files(urls, device="cpu", tensor_names=wanted or None)
    except BaseException:
        streamer.__exit__(None, None, None)
        raise
    return streamer.get_tensors(), lambda: streamer.__exit__(None, None, None)


def _remote(url: str) -> FileSource:
    return RemoteSource(url)


RECIPE = Recipe[FileSource](
    lambda: PeerStream(_open, "runai-model-streamer (S3)"), open_remote=_remote
)


load = RECIPE.load  # the Strategy: `run_load(RECIPE, target, path, probe, ...)`
