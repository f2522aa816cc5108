"""`RemoteSource`: a checkpoint behind a URL, with the same face as a local `CheckpointSource`.

Opening it reads only headers: per shard file, one range request for the first `HEAD_BYTES`
(which holds the header of most checkpoints; retried like any range) and, for a longer header,
the rest in bounded requests into one buffer. The first answer's validators (a generation where
the store pins one, else a strong ETag, else Last-Modified; on the Hub also the commit in every
URL) are then required of every later range
(`loader.remote.ranges`); a file with neither is refused unless a digest is known or the load
says `unvalidated="allow"`. A digest (given, or the Hub's LFS sha256) is checked over the bytes
the load receives (`loader.remote.digest`) before the model is returned (`finish_reads`). The
header is validated with the object's size (`loader.format.parse_header`: offsets in bounds and
tiling the data), so every tensor's range is known good before any tensor byte is asked for.

Planning reads it through `loader.planning.plan.Source`; `hostcast` reads whole tensors (`read`,
each tensor's chunks fetched `concurrency` at a time); `pipelined` reads parts of tensors on its
own threads (`tensor_bytes`, one `RemoteBytes` per tensor). Nothing is written to disk.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import posixpath

import numpy as np

from loader.errors import RemoteChangedError, RemoteError
from loader.format import parse_header
from loader.format.header import check_header_start, header_length
from loader.format.source import ShardHeaders
from loader.options import NO_OPTIONS, Checking, Remote, parse_digest
from loader.remote.digest import FileDigest
from loader.remote.ranges import (
    CHUNK_BYTES,
    RangeReader,
    RemoteBytes,
    RemoteObject,
    RemoteStats,
    TimeLimits,
)
from loader.remote.registry import open_store, parse_url
from loader.remote.store import INDEX_SUFFIX, Store, pick_in_folder, shard_paths

HEAD_BYTES = 64 << 10  # the first request: the length prefix and (usually) the whole header


class RemoteSource(ShardHeaders[str]):
    """A remote checkpoint's validated headers, and reads of its tensors by range requests.

    Args:
        url: a URL of a registered store (`loader.remote.registry`: `https://`, `s3://`, ...).
        remote: how the URL is read (`loader.options.Remote`: `concurrency`, its requests in
            flight).
        checking: what its bytes are checked against and how long it waits
            (`loader.options.Checking`: digest, unvalidated, time limits).
        chunk_bytes: the most one request fetches (a larger tensor takes several).

    Example:
        >>> with RemoteSource("s3://bucket/model.safetensors") as src:
        ...     arr = src.read("layers.0.kernel")
    """

    def __init__(
        self,
        url: str,
        remote: Remote = NO_OPTIONS.remote,
        checking: Checking = NO_OPTIONS.checking,
        *,
        chunk_bytes: int = CHUNK_BYTES,
    ) -> None:
        super().__init__()
        self.checking = checking
        self.url = parse_url(url)
        self.path = str(self.url)
        self.concurrency: int = remote.value("concurrency")
        limits = TimeLimits(idle_s=checking.value("idle_timeout"), deadline_s=checking.timeout)
        self._store: Store = open_store(self.url, limits)
        self.reader = RangeReader(
            self._store.transport,
            url=self.path,
            concurrency=self.concurrency,
            chunk_bytes=chunk_bytes,
            secret=self._store.secret,
            limits=limits,
        )
        self.objects: dict[str, RemoteObject] = {}
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._digests: dict[str, str] = {}  # an index file is read before digests are known
        paths = self._files()
        self._digests = self._given_digests(paths)
        for path in paths:
            self._read_header(path)
        self.files = [obj.url for obj in self.objects.values()]  # the shard files' URLs
        self._header_bytes = self.reader.stats().bytes_received
        self._digest_note = ""

    # -- which files ---------------------------------------------------------------------------
    def _files(self) -> list[str]:
        url = self.url
        if url.kind == "file":
            return [url.path]
        if url.kind == "index":
            return shard_paths(url.path, self._text(url.path), str(url))
        lister = self._store.list_names
        if lister is None:  # no listing (HTTP): the folder's index, else its model.safetensors
            index = f"{url.path}/model{INDEX_SUFFIX}".lstrip("/")
            try:
                return shard_paths(index, self._text(index), url.child(index))
            except RemoteError:
                return [f"{url.path}/model.safetensors".lstrip("/")]
        chosen = pick_in_folder(list(lister(url.path)), url.path)
        if not chosen:
            raise RemoteError(f"{url}: no *.safetensors file and no {INDEX_SUFFIX} there")
        if chosen[0].endswith(INDEX_SUFFIX):
            return shard_paths(chosen[0], self._text(chosen[0]), url.child(chosen[0]))
        return chosen

    def _text(self, path: str) -> str:
        """A small whole file (an index), checked like any range."""
        obj, data = self._open_object(path, what="index")
        if obj.size > len(data):
            rest = np.empty(obj.size - len(data), np.uint8)
            self.reader.fetch(obj, len(data), rest, what="index")
            data = np.concatenate([data, rest])
        return data.tobytes().decode("utf-8", errors="replace")

    def _given_digests(self, paths: list[str]) -> dict[str, str]:
        """The `digest=` option as {file path: sha256 hex}; a name it gives that is no file of
        the checkpoint, or one digest for several files, is refused."""
        given = self.checking.digest
        if given is None:
            return {}
        if isinstance(given, str):
            if len(paths) != 1:
                raise RemoteError(
                    f"{self.url}: digest= names one file but the checkpoint has {len(paths)}; "
                    "give a mapping of each file's name to its 'sha256:...'"
                )
            return {paths[0]: parse_digest(given, where=f"{self.url}: digest")}
        by_name = {posixpath.basename(p): p for p in paths}
        unknown = sorted(set(given) - set(by_name))
        if unknown:
            raise RemoteError(
                f"{self.url}: digest= names {', '.join(unknown)}, not a file of the checkpoint "
                f"({', '.join(sorted(by_name))}); check the names"
            )
        return {
            by_name[name]: parse_digest(value, where=f"{self.url}: digest[{name!r}]")
            for name, value in given.items()
        }

    # -- headers -------------------------------------------------------------------------------
    def _open_object(self, path: str, *, what: str) -> tuple[RemoteObject, np.ndarray]:
        """A file's first `HEAD_BYTES` (its first request, retried like any) and the object
        they describe: size, validators, expected sha256."""
        url = self.url.child(path)
        sha256 = self._digests.get(path)
        if self._store.check_file is not None:
            sha256 = sha256 or self._store.check_file(path)
        try:
            prefix, answer = self.reader.first(path, url, HEAD_BYTES, what=what)
        except RemoteError as e:
            failure = self._open_error(url, e)
        else:
            obj = RemoteObject(
                url, path, answer.size, answer.etag, answer.last_modified, sha256, answer.version
            )
            self._refuse_unvalidated(obj)
            return obj, prefix
        raise failure

    def _refuse_unvalidated(self, obj: RemoteObject) -> None:
        allowed = self.checking.value("unvalidated") == "allow"
        if obj.validator == "none" and obj.sha256 is None and not allowed:
            raise RemoteError(
                f"{obj.url}: the server sends neither ETag nor Last-Modified, so a file "
                "replaced during the load would go unseen; give digest='sha256:...' "
                "(sha256sum prints it) or unvalidated='allow' to accept the risk"
            )

    def _read_header(self, path: str) -> None:
        obj, prefix = self._open_object(path, what="header")
        url = obj.url
        n = header_length(prefix.tobytes(), source=url, file_size=obj.size)
        check_header_start(prefix[8:].tobytes(), n, source=url)
        if obj.sha256 is not None:  # the header's own bytes: tensor bytes come with their reads
            self.reader.digests[path] = FileDigest(obj.sha256, obj.size)
            self.reader.digests[path].feed(0, prefix[: 8 + n])
        raw = np.empty(n, np.uint8)  # the header, filled in bounded requests, parsed in place
        have = min(n, len(prefix) - 8)
        raw[:have] = prefix[8 : 8 + have]
        if have < n:  # a longer header: the rest in chunk-sized requests
            self.reader.fetch(obj, 8 + have, raw[have:], what="header")
        header = parse_header(raw.data, source=url, data_size=obj.size - 8 - n, header_len=n)
        self.add_header(path, header, shown=url)
        self.objects[path] = obj

    def _open_error(self, url: str, exc: RemoteError) -> RemoteError:
        """The first request's failure, said as a failure to open the checkpoint."""
        text = str(exc)
        if isinstance(exc, RemoteChangedError):
            return exc
        if "not found" in text:
            if "NoSuchBucket" in exc.details:
                return RemoteError(f"{url}: no such bucket {self.url.root!r}; check the bucket")
            return RemoteError(f"{url}: not found; check the URL (and the key or file name)")
        if "access refused" in text:
            return RemoteError(f"{url}: access refused; check the credentials", details=exc.details)
        return RemoteError(
            f"{url}: cannot read the header: {text.partition(': ')[2]}", details=exc.details
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
        `tensor_bytes`: the checkpoint's; what the bytes were checked against."""
        validators = sorted({obj.validator for obj in self.objects.values()})
        validator = "+".join(validators)
        if validator == "none":
            validator = "none (a digest)" if self._digests_known() else "none (unvalidated='allow')"
        return dataclasses.replace(
            self.reader.stats(),
            header_bytes=self._header_bytes,
            tensor_bytes=self.total_bytes,
            validator=validator,
            digest=self._digest_note or ("pending" if self.reader.digests else "not known"),
            digest_refetched_bytes=sum(d.refetched for d in self.reader.digests.values()),
            digest_held_peak_bytes=sum(d.held_peak for d in self.reader.digests.values()),
        )

    def _digests_known(self) -> bool:
        return all(obj.sha256 for obj in self.objects.values())

    def remote_stats(self) -> RemoteStats:
        """`stats()`, as every source answers it (`loader.planning.plan.Source`)."""
        return self.stats()

    def finish_reads(self, *, whole: bool = True) -> None:
        """After every read of the load: check each known digest (`loader.remote.digest`),
        fetching the bytes no read received. `whole=False` (a process that read its own part of
        each file): a file whose validator held on every range is left unchecked, and said so,
        rather than fetched whole; one without a validator is fetched and checked.

        Raises:
            RemoteError: a file's bytes do not match its sha256 (the model is not returned).
        """
        if not self.reader.digests:
            return
        if not whole:
            skipped = [
                path for path in self.reader.digests if self.objects[path].validator != "none"
            ]
            for path in skipped:
                if not self.reader.digests[path].complete:
                    del self.reader.digests[path]
            if skipped and not self.reader.digests:
                self._digest_note = (
                    "not checked: this process read part of each file, whose validator held "
                    "on every range"
                )
                return
        self.reader.finish_digests(self.objects)
        self._digest_note = "checked"

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def __enter__(self) -> RemoteSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["HEAD_BYTES", "RemoteSource"]
