"""Remote checkpoints: URLs of the registered stores read by range requests, no local copy.

- `registry`: the stores, registered once (`https://`, `s3://`, `hf://`, `gs://`: one module
  each in `stores/`, what each can do in `store.StoreKind`); `parse_url`, `is_url`,
  `open_store`, and the schemes every message names;
- `urls`: the URL forms (contracts);
- `store`: a parsed URL (`RemoteURL`), a store kind, an open store (`Store`: its transport, its
  listing, its token, its own file check);
- `ranges`: checked, retried range requests (`RangeReader`: validators, digests, retries, time
  limits, the minimum rate) and a tensor's bytes (`RemoteBytes`): the one range reader both
  engines read through (`loader.pipeline.sources.remote`, `loader.sharded.remote`);
- `source`: `RemoteSource`, a checkpoint behind a URL with the face of a local `CheckpointSource`;
- `transport`: one range request over `http.client` (HTTP, the Hub, S3 on URLs `obstore`
  presigns, a GCS emulator's JSON API) or `obstore`'s own client (GCS; a bucket it cannot sign
  for), each body read into
  its destination as it arrives, its failure classified (`TransportKind`, retry or not, the
  server's `Retry-After`);
- `digest`: a file's sha256 over the bytes a load receives, checked before the model is returned;
- a URL's options are `loader.options`' groups `Remote` (how it is read) and `Checking` (what
  its bytes are checked against, how long a load waits), each value checked when they are made;
- `cache`: `cache_dir=`: the files downloaded once (same client, checked ranges), then read
  locally; the only way a remote load writes a file.

Concurrency (`concurrency=`, requests in flight) defaults to `DEFAULT_CONCURRENCY` = 16 with
`CHUNK_BYTES` = 8 MiB a request: 16 x 8 MiB = 128 MiB in flight, inside the default 256 MiB
budget; enough requests to keep a link busy while each waits one round trip (a 10 Gbit/s link
with 1 ms of latency holds 1.25 MB in flight, one chunk), and few enough that two cores copying
answers out of the client's buffers are not the limit. `pipelined` uses one reader thread per
request in flight, each fetching its parts chunk by chunk into the destination buffers.
Only a strategy whose module says `REMOTE = True` takes a URL (`pipelined`, `hostcast`,
`sharded`: each process its own index ranges, `loader.sharded.remote`).

Nothing here imports jax; `obstore` and `huggingface_hub` are imported on first use. Nothing
but the registry names a scheme or imports a store (`tests/unit/test_remote_registry.py`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias, TypeVar

from loader.errors import CheckpointError
from loader.options import DEFAULT_CONCURRENCY, NO_OPTIONS, Checking, LoadOptions, Remote
from loader.remote.ranges import CHUNK_BYTES, RemoteStats
from loader.remote.urls import RemoteURL, is_url, parse_url

if TYPE_CHECKING:
    from loader.format.source import CheckpointSource
    from loader.remote.source import RemoteSource

#: A source of file bytes: a local file or folder, or a remote URL's (`RemoteSource`).
FileSource: TypeAlias = "CheckpointSource | RemoteSource"
#: What a strategy opens a URL's files as (`remote_opener`: `remote` and, after a download,
#: `local`).
R = TypeVar("R")
L = TypeVar("L")

__all__ = [
    "CHUNK_BYTES",
    "DEFAULT_CONCURRENCY",
    "FileSource",
    "RemoteStats",
    "RemoteURL",
    "is_url",
    "open_checkpoint",
    "parse_url",
    "refuse_local",
    "remote_opener",
]


def open_checkpoint(
    path: str | os.PathLike[str],
    remote: Remote = NO_OPTIONS.remote,
    checking: Checking = NO_OPTIONS.checking,
) -> FileSource:
    """The source of a checkpoint: a local file or folder, or a remote URL.

    Args:
        path: a local `.safetensors` file or folder, or a URL (`loader.remote.urls`).
        remote: how a URL is read (`loader.options.Remote`: `concurrency`, `cache_dir`).
        checking: what a URL's bytes are checked against (`loader.options.Checking`).

    Raises:
        CheckpointError: an option of either group given with a local path (it would do
            nothing), or the checkpoint cannot be opened (`RemoteError` for a URL).

    Example:
        >>> with open_checkpoint("s3://bucket/model.safetensors", Remote(concurrency=32)) as src:
        ...     print(src.keys())
    """
    from loader.format.source import CheckpointSource
    from loader.remote.source import RemoteSource

    if not is_url(path):
        refuse_local(LoadOptions(remote=remote, checking=checking), path)
        return CheckpointSource(path)
    opener: Callable[[str], FileSource] = remote_opener(
        remote, checking, RemoteSource, CheckpointSource
    )
    return opener(str(path))


def refuse_local(options: LoadOptions, path: str | os.PathLike[str]) -> None:
    """Refuse, in one line, an option that only a URL uses (`remote`, `checking`,
    `max_over_read`) given for a local `path`, where it would do nothing.

    Example:
        >>> refuse_local(LoadOptions.of(concurrency=8), "model.safetensors")
        Traceback (most recent call last):
        CheckpointError: concurrency= applies to a remote checkpoint (https://, ...) only; ...
    """
    from loader.remote.registry import schemes_text

    url_only = {**options.remote.given(), **options.checking.given()}
    if options.sharing.max_over_read is not None:
        url_only["max_over_read"] = options.sharing.max_over_read
    for name in url_only:
        raise CheckpointError(
            f"{name}= applies to a remote checkpoint ({schemes_text()}) only; "
            f"{os.fspath(path)} is local: drop it"
        )


def remote_opener(
    remote: Remote,
    checking: Checking,
    open_url: Callable[[str, Remote, Checking], R],
    local: Callable[[Path], L],
) -> Callable[[str], R | L]:
    """What a strategy that takes URLs passes `Recipe.open_remote`: a URL opened as
    `open_url(url, remote, checking)`; with `remote.cache_dir`, its files downloaded there first
    (through a `RemoteSource`, `loader.remote.cache`, checked as a streaming load checks) and
    the copy opened as `local(folder)`.

    Example:
        >>> opener = remote_opener(Remote(8), Checking(), RemoteSource, CheckpointSource)
    """

    def open_remote(url: str) -> R | L:
        if remote.cache_dir is None:
            return open_url(url, remote, checking)
        from loader.remote.cache import cached_copy
        from loader.remote.source import RemoteSource

        with RemoteSource(url, remote, checking) as source:
            return local(cached_copy(source, remote.cache_dir))

    return open_remote
