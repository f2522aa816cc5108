"""Range requests with integrity checks: the one place a remote checkpoint's bytes are fetched.

Every request goes through `RangeReader.fetch`, which:
- checks the range against the object's size (known from the header requests) before sending it;
- asks with `If-Match: <ETag>` and checks the answer's ETag, so a file replaced during the load
  is refused (`RemoteChangedError`), never mixed;
- checks the answer's range and length (a short or longer body is a failed attempt);
- retries a failed attempt (a 5xx, a reset or refused connection, a timeout, a short body) at most
  `RETRIES` times with a doubling pause, then raises one `RemoteError` naming the URL, the tensor
  and the byte range. A missing object or a refused credential is not retried.
- counts requests and bytes (`RemoteStats`) for the load report and the bench rows.

The client is `obstore` (Rust's `object_store`): one client for HTTP, S3 and the Hub's resolve
URLs, whose requests release the GIL, so reader threads overlap. Its own retries are off
(`max_retries=0`): the bound here is the only one.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from loader.errors import RemoteChangedError, RemoteError

if TYPE_CHECKING:
    from obstore import GetOptions

RETRIES = 3  # a failed range is retried this many times (then one error)
BACKOFF_S = 0.05  # first pause between attempts; doubles each time
CHUNK_BYTES = 8 << 20  # one request fetches at most this much (a large tensor: several)
DEFAULT_CONCURRENCY = 16  # range requests in flight (see loader.remote's docstring)
REQUEST_TIMEOUT = "120s"  # a request that has not finished by then failed (then retried)
CONNECT_TIMEOUT = "5s"


@dataclass(frozen=True)
class RemoteObject:
    """One remote file: its display URL (no token), path in its store, size and ETag."""

    url: str
    path: str
    size: int
    etag: str | None


@dataclass(frozen=True)
class RemoteStats:
    """What a remote load sent and got (recorded in `LoadReport.remote` and bench rows)."""

    url: str
    concurrency: int
    chunk_bytes: int
    requests: int
    bytes_requested: int
    bytes_received: int
    retries: int
    #: of `bytes_received`, what the header requests got (each file's first `HEAD_BYTES` may
    #: hold tensor bytes too): the rest is what the tensor reads got
    header_bytes: int = 0
    #: the checkpoint's tensor bytes (every shard file's data): a load that requests each byte
    #: once gets at most this beyond `header_bytes`
    tensor_bytes: int = 0
    #: a `sharded` load's read plan (`loader.sharded.read_plan`; None and 0 for a load without
    #: one): the bound on bytes read over bytes needed it ran under, the requests it planned, the
    #: bytes they read (gaps read through included) and the bytes of the share among them
    max_over_read: float | None = None
    planned_requests: int = 0
    planned_bytes: int = 0
    needed_bytes: int = 0

    @property
    def over_read(self) -> float | None:
        """The plan's bytes read over bytes needed (1.0: the share only); None without a plan."""
        if self.max_over_read is None:
            return None
        return self.planned_bytes / self.needed_bytes if self.needed_bytes else 1.0

    @property
    def refetched_bytes(self) -> int:
        """Bytes received beyond the headers and the checkpoint's tensors, each once: bytes
        requested again (0 for a load that requests each byte at most once)."""
        return max(0, self.bytes_received - self.header_bytes - self.tensor_bytes)

    def __str__(self) -> str:
        """One line a user reads: what was asked and got against the checkpoint's tensors."""
        again = f", {self.refetched_bytes} of them again" if self.refetched_bytes else ""
        plan = (
            ""
            if self.over_read is None
            else f"; planned {self.planned_requests} requests reading {self.planned_bytes} bytes "
            f"for {self.needed_bytes} needed ({self.over_read:.2f}x, at most "
            f"{self.max_over_read}x)"
        )
        return (
            f"{self.url}: {self.requests} requests ({self.concurrency} in flight), "
            f"{self.bytes_requested} bytes requested, {self.bytes_received} received "
            f"({self.header_bytes} by the header requests{again}) for {self.tensor_bytes} "
            f"bytes of tensors{plan}"
        )


@dataclass
class _Counts:
    requests: int = 0
    bytes_requested: int = 0
    bytes_received: int = 0
    retries: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


class ShortResponseError(Exception):
    """An answer whose range or length is not the one asked for (retried)."""


def one_line(exc: BaseException, secret: str | None = None) -> str:
    """An exception's first line, without `secret` (a token) anywhere in it."""
    text = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    text = text.split(": Error performing", 1)[0] if len(text) > 300 else text
    return text.replace(secret, "***") if secret else text


class RangeReader:
    """Fetches checked byte ranges of the objects of one store (thread-safe).

    Example:
        >>> reader = RangeReader(store, url="s3://bucket/model.safetensors")
        >>> reader.fetch(obj, 0, out, what="header")  # fills the uint8 array `out`
    """

    def __init__(
        self,
        store: Any,
        *,
        url: str,
        concurrency: int = DEFAULT_CONCURRENCY,
        chunk_bytes: int = CHUNK_BYTES,
        secret: str | None = None,
    ) -> None:
        self.store = store
        self.url = url
        self.concurrency = concurrency
        self.chunk_bytes = chunk_bytes
        self._secret = secret
        self._counts = _Counts()

    def stats(self) -> RemoteStats:
        c = self._counts
        with c.lock:
            return RemoteStats(
                self.url,
                self.concurrency,
                self.chunk_bytes,
                c.requests,
                c.bytes_requested,
                c.bytes_received,
                c.retries,
            )

    def get(self, obj: RemoteObject, start: int, end: int, *, what: str) -> Any:
        """The bytes `[start, end)` of `obj` (a buffer), checked and retried (module docstring)."""
        if not 0 <= start < end <= obj.size:
            raise RemoteError(
                f"{obj.url}: {what}: bytes {start}-{end - 1} lie outside the "
                f"{obj.size}-byte file; the header and the file disagree (re-upload the file)"
            )
        options: GetOptions = {"range": (start, end)}
        if obj.etag:
            options["if_match"] = obj.etag
        where = f"{obj.url}: {what}, bytes {start}-{end - 1}"
        problem = ""
        for attempt in range(RETRIES + 1):
            if attempt:
                with self._counts.lock:
                    self._counts.retries += 1
                time.sleep(BACKOFF_S * 2 ** (attempt - 1))
            try:
                return self._attempt(obj, start, end, options, where)
            except RemoteError:
                raise
            except Exception as e:  # noqa: BLE001 - a 5xx, reset, timeout, short body: retried
                problem = one_line(e, self._secret)
        raise RemoteError(
            f"{where}: failed after {RETRIES + 1} attempts (last: {problem}); "
            "check that the server is up and serves byte ranges, then load again"
        )

    def _attempt(
        self, obj: RemoteObject, start: int, end: int, options: GetOptions, where: str
    ) -> Any:
        """One request: its bytes, `RemoteError` where a retry cannot help, else what failed."""
        import obstore
        from obstore.exceptions import (
            NotFoundError,
            PermissionDeniedError,
            PreconditionError,
            UnauthenticatedError,
        )

        self._count(requests=1, requested=end - start)
        try:
            result = obstore.get(self.store, obj.path, options=options)
            self._check_etag(obj, result.meta.get("e_tag"), where)
            data = result.bytes()
        except PreconditionError:
            raise self._changed(where) from None
        except (NotFoundError, FileNotFoundError) as e:
            raise RemoteError(
                f"{where}: not found ({one_line(e, self._secret)}); check the URL"
            ) from None
        except (PermissionDeniedError, UnauthenticatedError) as e:
            raise RemoteError(
                f"{where}: access refused ({one_line(e, self._secret)}); check the credentials"
            ) from None
        self._count(received=len(data))
        if result.range != (start, end) or len(data) != end - start:
            raise ShortResponseError(
                f"asked for {end - start} bytes, got {len(data)} "
                f"(range {result.range[0]}-{result.range[1] - 1})"
            )
        return data

    def fetch(self, obj: RemoteObject, start: int, out: np.ndarray, *, what: str) -> None:
        """Fill the uint8 array `out` with `obj`'s bytes from `start`, one request per chunk."""
        flat = out.reshape(-1)
        for a in range(0, flat.nbytes, self.chunk_bytes):
            b = min(flat.nbytes, a + self.chunk_bytes)
            data = self.get(obj, start + a, start + b, what=what)
            flat[a:b] = np.frombuffer(data, np.uint8)
            del data

    def fetch_views(
        self, obj: RemoteObject, start: int, views: list[np.ndarray], *, what: str
    ) -> None:
        """Fill the uint8 arrays `views` with `obj`'s consecutive bytes from `start` (small
        neighbouring tensors coalesced: one request per chunk of their joint range)."""
        total = sum(v.nbytes for v in views)
        ends = np.cumsum([0, *[v.nbytes for v in views]])
        for a in range(0, total, self.chunk_bytes):
            b = min(total, a + self.chunk_bytes)
            data = np.frombuffer(self.get(obj, start + a, start + b, what=what), np.uint8)
            for i, view in enumerate(views):
                lo, hi = max(a, int(ends[i])), min(b, int(ends[i + 1]))
                if lo < hi:
                    view.reshape(-1)[lo - ends[i] : hi - ends[i]] = data[lo - a : hi - a]
            del data

    def count_request(self, nbytes: int) -> None:
        """Count a request made outside `get` (the first header request)."""
        self._count(requests=1, requested=nbytes)

    def count_received(self, nbytes: int) -> None:
        self._count(received=nbytes)

    def _count(self, *, requests: int = 0, requested: int = 0, received: int = 0) -> None:
        c = self._counts
        with c.lock:
            c.requests += requests
            c.bytes_requested += requested
            c.bytes_received += received

    def _check_etag(self, obj: RemoteObject, etag: str | None, where: str) -> None:
        if obj.etag and etag and etag != obj.etag:
            raise self._changed(where)

    @staticmethod
    def _changed(where: str) -> RemoteChangedError:
        return RemoteChangedError(
            f"{where}: the file changed during the load (its ETag differs from the header's); "
            "nothing was loaded: load again once the upload is complete"
        )


class RemoteBytes:
    """A tensor's bytes in a remote file (`loader.pipeline.regions.Bytes`), fetched in chunks."""

    shares_rows = True  # a row read again is a request over the link again: read it once

    def __init__(self, reader: RangeReader, obj: RemoteObject, start: int, where: str) -> None:
        self.reader, self.obj, self.start, self.where = reader, obj, start, where

    def read(self, offset: int, out: np.ndarray) -> None:
        self.reader.fetch(
            self.obj, self.start + offset, out.reshape(-1).view(np.uint8), what=self.where
        )
