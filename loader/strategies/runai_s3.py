"""Peer: runai-model-streamer reading the same `s3://` object with its own S3 client (C++, its
thread pool), tensors handed to jax through DLPack; the peer a remote `pipelined` load is measured
beside.

The plan comes from the headers (`loader.remote`, two range requests a file); the tensor bytes are
runai's to fetch (`runai-model-streamer-s3`): `AWS_ENDPOINT_URL` and the usual credentials, path-
style addressing for a custom endpoint (`RUNAI_STREAMER_S3_USE_VIRTUAL_ADDRESSING=0`, as moto and
most S3-compatible servers need). Needs torch, runai-model-streamer and runai-model-streamer-s3.

One process, like `runai` (its `WHY_NOT_MULTIPROCESS`: the distributed mode needs NCCL).

`concurrency=` is runai's S3 clients in flight (`RUNAI_STREAMER_OBJ_CONCURRENCY`, set for the
load); without it, that variable's value or runai's own default (`RUNAI_S3_CONCURRENCY`). The
report's `remote.concurrency` is that number: runai's, not the two header requests'.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from loader.options import Remote
from loader.remote import FileSource
from loader.remote.source import RemoteSource
from loader.report import LoadReport
from loader.sequence import LoadRequest, Recipe
from loader.strategies._peer import PeerStream
from loader.vocabulary import PEER, URL

KIND = PEER
CHECKPOINT = URL
REMOTE = True
REQUIRES = ("torch", "runai_model_streamer", "runai_model_streamer_s3")
INSTALL_HINT = "make peers"
OPTIONS = ("remote.concurrency",)  # runai's S3 clients in flight
WHY_NOT_MULTIPROCESS = (
    "runai's distributed mode needs NCCL on CUDA or ROCm devices (each rank streams some "
    "tensors, then torch.distributed broadcasts them); loadbench runs runai as one process"
)
RUNAI_S3_CONCURRENCY = 8  # runai-model-streamer 0.17's default (its log: "s3 concurrency 8")
_CONCURRENCY_VAR = "RUNAI_STREAMER_OBJ_CONCURRENCY"


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


@contextmanager
def _runai_concurrency(concurrency: int) -> Iterator[None]:
    """`RUNAI_STREAMER_OBJ_CONCURRENCY` set for the block (runai reads it per streamer)."""
    saved = os.environ.get(_CONCURRENCY_VAR)
    os.environ[_CONCURRENCY_VAR] = str(concurrency)
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(_CONCURRENCY_VAR, None)
        else:
            os.environ[_CONCURRENCY_VAR] = saved


def load(request: LoadRequest) -> tuple[Any, LoadReport]:
    """Plan from the headers (two range requests), then runai streams the tensors over S3.

    Example:
        >>> model, report = loader.load_model(
        ...     builder, "s3://bucket/model.safetensors", strategy="runai-s3", concurrency=8)
    """
    given = request.options.remote
    if given.concurrency is None:
        given = Remote(int(os.environ.get(_CONCURRENCY_VAR) or RUNAI_S3_CONCURRENCY))
    concurrency: int = given.value("concurrency")

    def remote(url: str) -> FileSource:
        return RemoteSource(url, given)  # the report's concurrency: runai's

    recipe = Recipe[FileSource](
        lambda: PeerStream(_open, "runai-model-streamer (S3)"), open_remote=remote
    )
    with _runai_concurrency(concurrency):
        return recipe.run(request)
