"""`RemoteSource`: a checkpoint behind a URL, with the same face as a local `CheckpointSource`.

Opening it reads only headers: per shard file, one range request for the first `HEAD_BYTES`
(which holds the header of most checkpoints) and a second one for the rest of a longer header.
Both answers must carry the same ETag; that ETag (and, on the Hub, the commit in every URL) is
then required of every later range (`loader.remote.ranges`). The header is validated with the
object's size (`loader.format.parse_header`: offsets in bounds and tiling the data), so every
tensor's range is known good before any tensor byte is asked for.

Planning reads it through `loader.planning.plan.Source`; `hostcast` reads whole tensors (`read`,
each tensor's chunks fetched `concurrency` at a time); `pipelined` reads parts of tensors on its
own threads (`tensor_bytes`, one `RemoteBytes` per tensor). Nothing is written to disk.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses

import numpy as np

from loader.errors import RemoteChangedError, RemoteError
from loader.format import parse_header
from loader.format.header import header_length
from loader.format.source import ShardHeaders
from loader.remote.options import check_concurrency
from loader.remote.ranges import (
    CHUNK_BYTES,
    RangeReader,
    RemoteBytes,
    RemoteObject,
    RemoteStats,
    one_line,
)
from loader.remote.stores import Store, open_store, pick_in_folder, shard_paths
from loader.remote.urls import INDEX_SUFFIX, parse_url

HEAD_BYTES = 64 << 10  # the first request: the length prefix and (usually) the whole header


class RemoteSource(ShardHeaders[str]):
    """A remote checkpoint's validated headers, and reads of its tensors by range requests.

    Args:
        url: `https://...`, `s3://...` or `hf://...` (`loader.remote.urls`).
        concurrency: range requests in flight (default `DEFAULT_CONCURRENCY`).
        chunk_bytes: the most one request fetches (a larger tensor takes several).

    Example:
        >>> with RemoteSource("s3://bucket/model.safetensors") as src:
        ...     arr = src.read("layers.0.kernel")
    """

    def __init__(
        self, url: str, concurrency: int | None = None, *, chunk_bytes: int = CHUNK_BYTES
    ) -> None:
        super().__init__()
        self.url = parse_url(url)
        self.path = str(self.url)
        self.concurrency = check_concurrency(concurrency)
        self._store: Store = open_store(self.url)
        self.reader = RangeReader(
            self._store.store,
            url=self.path,
            concurrency=self.concurrency,
            chunk_bytes=chunk_bytes,
            secret=self._store.secret,
        )
        self.objects: dict[str, RemoteObject] = {}
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        for path in self._files():
            self._read_header(path)
        self.files = [obj.url for obj in self.objects.values()]  # the shard files' URLs
        self._header_bytes = self.reader.stats().bytes_received

    # -- which files ---------------------------------------------------------------------------
    def _files(self) -> list[str]:
        url = self.url
        if url.kind == "file":
            return [url.path]
        if url.kind == "index":
            return shard_paths(url.path, self._text(url.path), str(url))
        names = self._store.names
        if names is None and url.scheme == "s3":
            names = self._list(url.path)
        if names is None:  # HTTP: no listing; the folder's index, else its model.safetensors
            index = f"{url.path}/model{INDEX_SUFFIX}".lstrip("/")
            try:
                return shard_paths(index, self._text(index), url.child(index))
            except RemoteError:
                return [f"{url.path}/model.safetensors".lstrip("/")]
        chosen = pick_in_folder(list(names), url.path)
        if not chosen:
            raise RemoteError(f"{url}: no *.safetensors file and no {INDEX_SUFFIX} there")
        if chosen[0].endswith(INDEX_SUFFIX):
            return shard_paths(chosen[0], self._text(chosen[0]), url.child(chosen[0]))
        return chosen

    def _list(self, prefix: str) -> tuple[str, ...]:
        import obstore

        try:
            found = [
                m["path"]
                for batch in obstore.list(self._store.store, prefix or None)
                for m in batch
            ]
        except Exception as e:  # noqa: BLE001 - a missing bucket, refused credentials...
            raise RemoteError(f"{self.url}: cannot list ({one_line(e)}); check the URL") from None
        return tuple(found)

    def _text(self, path: str) -> str:
        """A small whole file (an index), checked like any range."""
        import obstore

        try:
            head = obstore.head(self._store.store, path)
        except Exception as e:  # noqa: BLE001
            raise RemoteError(
                f"{self.url.child(path)}: cannot read ({one_line(e, self._store.secret)}); "
                "check the URL"
            ) from None
        obj = RemoteObject(self.url.child(path), path, int(head["size"]), head.get("e_tag"))
        data = self.reader.get(obj, 0, obj.size, what="index") if obj.size else b""
        return bytes(data).decode("utf-8", errors="replace")

    # -- headers -------------------------------------------------------------------------------
    def _read_header(self, path: str) -> None:
        import obstore

        url = self.url.child(path)
        if self._store.commit is not None:
            self._check_hub_file(path)
        try:
            self.reader.count_request(HEAD_BYTES)
            first = obstore.get(self._store.store, path, options={"range": (0, HEAD_BYTES)})
            prefix = bytes(first.bytes())
        except Exception as e:  # noqa: BLE001 - refused here with the URL and what to do
            raise self._open_error(url, e) from None
        meta = first.meta
        self.reader.count_received(len(prefix))
        obj = RemoteObject(url, path, int(meta["size"]), meta.get("e_tag"))
        n = header_length(prefix, source=url, file_size=obj.size)
        raw = prefix[8 : 8 + n]
        if 8 + n > len(prefix):  # a longer header: the rest in a second request
            raw += bytes(self.reader.get(obj, len(prefix), 8 + n, what="header"))
        header = parse_header(raw, source=url, data_size=obj.size - 8 - n, header_len=n)
        self.add_header(path, header, shown=url)
        self.objects[path] = obj

    def _check_hub_file(self, path: str) -> None:
        """The Hub's own answer for one file (gated, missing, or served from another commit)."""
        import huggingface_hub

        from loader.remote.stores import hub_errors

        file_url = huggingface_hub.hf_hub_url(
            self.url.root, path, revision=self._store.commit, endpoint=self._store.endpoint
        )
        with hub_errors(self.url, self._store.secret):
            meta = huggingface_hub.get_hf_file_metadata(file_url, token=self._store.secret or False)
        if meta.commit_hash and meta.commit_hash != self._store.commit:
            raise RemoteChangedError(
                f"{self.url.child(path)}: served from commit {meta.commit_hash}, not the "
                f"{self._store.commit} the load pinned; load again"
            )

    def _open_error(self, url: str, exc: Exception) -> RemoteError:
        from obstore.exceptions import PermissionDeniedError, UnauthenticatedError

        text = one_line(exc, self._store.secret)
        if isinstance(exc, FileNotFoundError) or "404" in text:
            if "NoSuchBucket" in str(exc):
                return RemoteError(f"{url}: no such bucket {self.url.root!r}; check the bucket")
            return RemoteError(f"{url}: not found; check the URL (and the key or file name)")
        if isinstance(exc, PermissionDeniedError | UnauthenticatedError):
            return RemoteError(f"{url}: access refused ({text}); check the credentials")
        return RemoteError(
            f"{url}: cannot read the header ({text}); check that the server is up and the URL"
        )

    # -- the Source protocol (loader.planning.plan.Source; the rest is ShardHeaders') -----------
    def file_of(self, key: str) -> str:
        return self.objects[self._where[key]].url

    # -- reads ---------------------------------------------------------------------------------
    def tensor_bytes(self, key: str) -> RemoteBytes:
        """The tensor's bytes as a `loader.pipeline.regions.Bytes` (read by range requests)."""
        obj = self.objects[self._where[key]]
        return RemoteBytes(self.reader, obj, self.file_offset(key), f"tensor {key!r}")

    def read_into(self, key: str, out: np.ndarray) -> np.ndarray:
        """Fill `out` (a C-contiguous buffer of the tensor's size), chunks fetched concurrently."""
        info = self.info(key)
        raw = out.reshape(-1).view(np.uint8)
        if raw.nbytes != info.nbytes:
            raise RemoteError(f"{self.file_of(key)}: buffer of {raw.nbytes} bytes for {key!r}")
        src = self.tensor_bytes(key)
        step = self.reader.chunk_bytes
        spans = [(a, min(raw.nbytes, a + step)) for a in range(0, raw.nbytes, step)]
        if len(spans) <= 1 or self.concurrency == 1:
            src.read(0, raw)
        else:
            if self._pool is None:
                self._pool = concurrent.futures.ThreadPoolExecutor(
                    self.concurrency, thread_name_prefix="loader-remote"
                )
            list(self._pool.map(lambda s: src.read(s[0], raw[s[0] : s[1]]), spans))
        return raw.view(info.np_dtype).reshape(info.shape)

    def read(self, key: str) -> np.ndarray:
        """One tensor in a fresh host buffer."""
        info = self.info(key)
        return self.read_into(key, np.empty(info.shape, info.np_dtype))

    def stats(self) -> RemoteStats:
        """Requests and bytes so far; `header_bytes`: what opening (the headers) received;
        `tensor_bytes`: the checkpoint's."""
        return dataclasses.replace(
            self.reader.stats(), header_bytes=self._header_bytes, tensor_bytes=self.total_bytes
        )

    def remote_stats(self) -> RemoteStats:
        """`stats()`, as every source answers it (`loader.planning.plan.Source`)."""
        return self.stats()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def __enter__(self) -> RemoteSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["HEAD_BYTES", "RemoteSource"]
